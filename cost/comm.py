"""Collective communication time on the link tier a group actually spans. Pure functions, seconds.

One primitive, ``collective_time_s(kind, message_bytes, group_size, link)``, with the ring volume
factors of ``reference/megatron.md`` section 5 (per rank, bytes on the wire for a tensor of full
size M over N ranks): all-reduce ``2(N-1)/N*M``, all-gather / reduce-scatter ``(N-1)/N*M``,
send/recv ``M``; all-to-all (``all_to_all_time_s``) by the bytes each link carries. ``link`` comes from ``Cluster.group_link`` (never from ``group_size <= 8``).
"""

from __future__ import annotations

import math

from megasolve.cost.calibration import calibration
from megasolve.topology.cluster import Cluster, GroupLink

VOLUME_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}


def collective_time_s(kind: str, message_bytes: float, group_size: int, link: GroupLink) -> float:
    """Time of one ring / send-recv collective of ``kind`` over ``group_size`` ranks.

    ``message_bytes`` is the full tensor for all-reduce / all-gather / reduce-scatter, the tensor for
    send/recv. The bus bandwidth is the group's bottleneck times the bus efficiency of its tier
    (``collectives.bus_efficiency``), plus one hop latency per ring step. All-to-all has its own
    function (``all_to_all_time_s``): its intra- and inter-domain parts run on different links.

    >>> from megasolve.topology.cluster import Cluster
    >>> c = Cluster.from_flags(num_gpus=16, gpu="h100")
    >>> t = collective_time_s("all_reduce", 1e9, 8, c.group_link(1, 8))
    >>> round(t * 1e3, 3)  # 2*7/8 * 1 GB / (450 GB/s * 0.8) = 4.861 ms, + latency 0.035 ms
    4.896
    """
    if group_size <= 1 or message_bytes <= 0:
        return 0.0
    if kind == "all_to_all":
        raise ValueError("all-to-all is priced by all_to_all_time_s (intra- and inter-domain parts)")
    cal = calibration()["time"]["collectives"]
    tier = link.tier if link.tier in cal["bus_efficiency"] else "network"
    volume = VOLUME_FACTOR[kind](group_size) * message_bytes
    return volume / (link.bus_bytes_per_s * cal["bus_efficiency"][tier]) + collective_latency_s(kind, group_size, link)


def all_to_all_time_s(*, nvlink_bytes: float, network_bytes: float, group_size: int, cluster: Cluster,
                      dispatcher: str) -> float:
    """One expert-parallel all-to-all whose rank sends ``nvlink_bytes`` to peers inside its NVLink
    domain and ``network_bytes`` through its NIC (send and receive are symmetric for balanced routing,
    and both links are full duplex, so the slower part sets the time).

    Bandwidths per link, from their sources (``calibration.yaml`` ``time.all_to_all``):

    * NVLink part: ``nvlink_efficiency`` of the per-direction NVLink bandwidth (DeepEP README, normal
      kernels: 153 of ~160 GB/s on H800, 726 of 900 GB/s on SM100 EP8; NCCL all-to-all similar);
    * network part, ``flex`` (DeepEP / HybridEP: RDMA with NVLink forwarding): ``rdma_efficiency`` of
      the NIC (DeepEP README @567632d: 43 / 58 / 51 GB/s per H800 GPU for EP 16 / 32 / 64 over a 50 GB/s
      CX7); ``alltoall`` (NCCL): ``nccl_network_efficiency`` of the NIC (one message per peer, PXN);
    * a latency per doubling of the group (``collectives.latency_s`` of the tier crossed). (In isolation a call
      also costs a fixed ~110 us that a training step partly hides: ``calibration.yaml`` all_to_all.)
    """
    if group_size <= 1 or nvlink_bytes + network_bytes <= 0:
        return 0.0
    a2a = calibration()["time"]["all_to_all"]
    latency = calibration()["time"]["collectives"]["latency_s"]
    seconds = nvlink_bytes / (cluster.nvlink_bytes_per_s * a2a["nvlink_efficiency"]) if nvlink_bytes else 0.0
    if network_bytes:
        efficiency = a2a["rdma_efficiency"] if dispatcher == "flex" else a2a["nccl_network_efficiency"]
        seconds = max(seconds, network_bytes / (cluster.network_bytes_per_s * efficiency))
    tier = "network" if network_bytes else ("nvlink" if cluster.nvlink_domain > 1 else "pcie")
    return seconds + latency[tier] * math.log2(group_size)


def collective_latency_s(kind: str, group_size: int, link: GroupLink) -> float:
    """The latency part of a ring / send-recv collective: one hop latency per ring step."""
    if group_size <= 1:
        return 0.0
    cal = calibration()["time"]["collectives"]
    tier = link.tier if link.tier in cal["latency_s"] else "network"
    steps = group_size - 1 if kind != "send_recv" else 1
    return cal["latency_s"][tier] * steps
