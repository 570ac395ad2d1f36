"""Collective communication time on the link tier a group actually spans. Pure functions, seconds.

One primitive, ``collective_time_s(kind, message_bytes, group_size, link)``, with the ring volume
factors of ``reference/megatron.md`` section 5 (per rank, bytes on the wire for a tensor of full
size M over N ranks): all-reduce ``2(N-1)/N*M``, all-gather / reduce-scatter ``(N-1)/N*M``,
all-to-all ``(N-1)/N*M_local`` (of which only the part leaving the NVLink domain crosses the NIC),
send/recv ``M``. ``link`` comes from ``Cluster.group_link`` (never from ``group_size <= 8``).
"""

from __future__ import annotations

import math

from megasolve.cost.calibration import calibration
from megasolve.topology.cluster import Cluster, GroupLink

VOLUME_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def collective_time_s(kind: str, message_bytes: float, group_size: int, link: GroupLink,
                      cluster: Cluster | None = None, remote_fraction: float | None = None) -> float:
    """Time of one collective of ``kind`` over ``group_size`` ranks.

    ``message_bytes`` is the full tensor for all-reduce / all-gather / reduce-scatter, the local
    send buffer for all-to-all, the tensor for send/recv. The bus bandwidth is the group's bottleneck
    times the calibrated bus efficiency of its tier, plus a latency per step. For an all-to-all that
    leaves the NVLink domain, ``remote_fraction`` is the share of the moved bytes that crosses the
    NIC (default: uniform traffic, ``(N - local)/(N - 1)``; a deduplicating dispatcher sends less).

    >>> from megasolve.topology.cluster import Cluster
    >>> c = Cluster.from_flags(num_gpus=16, gpu="h100")
    >>> t = collective_time_s("all_reduce", 1e9, 8, c.group_link(1, 8))
    >>> round(t * 1e3, 2)  # 2*7/8 * 1 GB / (450 GB/s * bus efficiency) + latency
    4.86
    """
    if group_size <= 1 or message_bytes <= 0:
        return 0.0
    cal = calibration()["time"]["collectives"]
    tier = link.tier if link.tier in cal["bus_efficiency"] else "network"
    efficiency = cal["bus_efficiency"][tier]
    latency = cal["latency_s"][tier]
    volume = VOLUME_FACTOR[kind](group_size) * message_bytes
    if kind == "all_to_all" and cluster is not None and link.tier != "nvlink":
        # part of the data stays inside the NVLink domain; only the rest crosses the NIC
        local = link.members_per_unit
        if remote_fraction is None:
            remote_fraction = (group_size - local) / max(group_size - 1, 1)
        remote_fraction = min(max(remote_fraction, 0.0), 1.0)
        nic = cluster.network_bytes_per_s * cal["bus_efficiency"]["network"] * cal["all_to_all_network_factor"]
        fast = cluster.nvlink_bytes_per_s * cal["bus_efficiency"]["nvlink"]
        return max(volume * remote_fraction / nic, volume * (1 - remote_fraction) / fast) \
            + latency * math.log2(group_size)
    return volume / (link.bus_bytes_per_s * efficiency) + collective_latency_s(kind, group_size, link)


def collective_latency_s(kind: str, group_size: int, link: GroupLink) -> float:
    """The latency part of a ring / send-recv collective: one hop latency per ring step."""
    if group_size <= 1:
        return 0.0
    cal = calibration()["time"]["collectives"]
    tier = link.tier if link.tier in cal["latency_s"] else "network"
    steps = group_size - 1 if kind != "send_recv" else 1
    return cal["latency_s"][tier] * steps
