"""The cluster: GPU count, nodes, NVLink domains, NICs; and which link a rank group crosses.

Megatron numbers ranks ``tp-cp-ep-dp-pp`` (leftmost fastest, ``PS::initialize_model_parallel``
L601-617, reference section 5.1): the dense grid is ``tp-cp-dp-pp`` and the expert grid
``etp-ep-edp-pp``, so every parallel group is a set of ranks ``base + i * stride`` for
``i < size``. With ranks numbered node-contiguously, a group stays on NVLink iff all its members
share a domain. When it does not, NCCL runs one ring channel per NIC, so a group with ``k``
members in each domain moves data across the fabric at ``k x`` the per-GPU NIC bandwidth (capped
by NVLink): that is the group's bottleneck bus bandwidth.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from megasolve.models.errors import ConfigError, MegasolveError
from megasolve.topology.gpus import GpuSpec, get_gpu, gpu_from_entry

MAX_GPUS = 1_000_000



def rack_segment(num_gpus: int, gpus_per_node: int, domain: int) -> int:
    """The GPUs of each NVLink domain a job spread over several racks holds: equal segments of whole nodes, the
    largest that divides the job, as Slurm's topology/block plugin places it with ``--segment`` (NVIDIA's technical
    blog on Slurm block scheduling for GB200 NVL72 recommends segments of 16 nodes, 64 GPUs, for jobs of 128 GPUs and
    more; a rack holds 18 trays of 4). 256 GPUs over NVL72 racks are four domains of 64, not three of 72 and one of 40.

    A node count with no divisor of at least half a rack (19 nodes) fills whole racks in order instead (72 + 4).

    >>> rack_segment(256, 4, 72), rack_segment(144, 4, 72), rack_segment(96, 4, 72), rack_segment(80, 4, 72)
    (64, 72, 48, 40)
    >>> rack_segment(76, 4, 72)
    72
    """
    nodes, per_rack = num_gpus // gpus_per_node, domain // gpus_per_node
    segment = max(k for k in range(1, per_rack + 1) if nodes % k == 0)
    return gpus_per_node * (segment if 2 * segment >= per_rack else per_rack)


def check_cluster_flags(*, gpus_per_node: int | None = None, nvlink_domain: int | None = None,
                        nic_gbit_per_gpu: float | None = None) -> None:
    """The one check of the cluster flags (``estimate``, ``solve`` and ``whatif`` all come here
    through ``Cluster.from_flags``; ``whatif`` also before its sweep): positive whole node and
    domain sizes, a finite positive NIC bandwidth (``inf`` would model an infinitely fast NIC)."""
    for value, flag in ((gpus_per_node, "--gpus-per-node"), (nvlink_domain, "--nvlink-domain")):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise MegasolveError(field=flag, value=value, rule="must be a positive integer",
                                 fix="pass a whole number >= 1, or leave it out for the GPU's default")
    if nic_gbit_per_gpu is not None and not 0 < nic_gbit_per_gpu < math.inf:
        raise MegasolveError(field="--nic-gbps", value=nic_gbit_per_gpu, rule="must be a finite number > 0",
                             fix="e.g. --nic-gbps 400")

@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """A homogeneous GPU cluster.

    >>> c = Cluster.from_flags(num_gpus=64, gpu="a100-80g")
    >>> c.num_nodes, c.nvlink_domain, c.nic_bytes_per_s / 1e9
    (8, 8, 25.0)
    """

    gpu: GpuSpec
    num_gpus: int
    gpus_per_node: int
    nvlink_domain: int  # GPUs per NVLink domain (8 for HGX, 72 for NVL72, 1 for PCIe-only)
    nvlink_bytes_per_s: float  # per GPU per direction inside a domain (PCIe if no NVLink)
    nic_bytes_per_s: float  # per GPU, scale-out
    fabric_oversubscription: float = 1.0  # 2.0 = 2:1 tapered fabric
    name: str = ""

    def __post_init__(self) -> None:
        for field, flag in (("num_gpus", "--gpus"), ("gpus_per_node", "--gpus-per-node"),
                            ("nvlink_domain", "--nvlink-domain")):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise MegasolveError(field=flag, value=value,
                                     rule="must be a positive integer", fix="pass a whole number >= 1")
        if self.num_gpus > MAX_GPUS:
            raise MegasolveError(field="--gpus", value=self.num_gpus, rule=f"more than {MAX_GPUS:,} GPUs",
                                 fix="plan for a smaller cluster")
        if self.num_gpus > self.gpus_per_node and self.num_gpus % self.gpus_per_node:
            raise MegasolveError(field="--gpus", value=self.num_gpus,
                                 rule=f"not a whole number of {self.gpus_per_node}-GPU nodes",
                                 fix=f"use a multiple of {self.gpus_per_node} or set --gpus-per-node")
        big, small = max(self.nvlink_domain, self.gpus_per_node), min(self.nvlink_domain, self.gpus_per_node)
        if big % small:
            raise MegasolveError(field="--nvlink-domain", value=self.nvlink_domain,
                                 rule=f"must be a multiple or divisor of gpus per node ({self.gpus_per_node})",
                                 fix="e.g. 8 for HGX nodes, 72 for NVL72 racks")
        for field in ("nvlink_bytes_per_s", "nic_bytes_per_s"):
            if not getattr(self, field) > 0:
                raise MegasolveError(field=field, value=getattr(self, field), rule="must be > 0",
                                     fix="give a positive bandwidth")
        if not self.fabric_oversubscription >= 1.0:
            raise MegasolveError(field="fabric_oversubscription", value=self.fabric_oversubscription,
                                 rule="must be >= 1 (1 = non-blocking)", fix="use 1.0, 2.0 for 2:1, ...")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_flags(cls, *, num_gpus: int, gpu: str | GpuSpec, gpus_per_node: int | None = None,
                   nvlink_domain: int | None = None, nic_gbit_per_gpu: float | None = None,
                   fabric_oversubscription: float = 1.0) -> Cluster:
        spec = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
        check_cluster_flags(gpus_per_node=gpus_per_node, nvlink_domain=nvlink_domain,
                            nic_gbit_per_gpu=nic_gbit_per_gpu)
        per_node = gpus_per_node or spec.gpus_per_node
        if num_gpus is not None and isinstance(num_gpus, int) and 0 < num_gpus < per_node and gpus_per_node is None:
            per_node = num_gpus  # a partial node: 4 GPUs of an 8-GPU box
        domain = nvlink_domain or (spec.nvlink_domain if spec.nvlink_domain >= per_node or spec.nvlink_domain == 1
                                   else per_node)
        if spec.nvlink_domain > 1 and nvlink_domain is None and domain > num_gpus > 0:
            domain = max(per_node, num_gpus - num_gpus % per_node) if num_gpus >= per_node else num_gpus
        elif nvlink_domain is None and per_node < domain < num_gpus and num_gpus % per_node == 0:
            domain = rack_segment(num_gpus, per_node, domain)
        link = spec.nvlink_bytes_per_s if spec.nvlink_bytes_per_s and domain > 1 else spec.pcie_bytes_per_s
        nic = nic_gbit_per_gpu * 1e9 / 8 if nic_gbit_per_gpu else spec.nic_bytes_per_s
        return cls(gpu=spec, num_gpus=num_gpus, gpus_per_node=per_node, nvlink_domain=domain,
                   nvlink_bytes_per_s=link, nic_bytes_per_s=nic,
                   fabric_oversubscription=fabric_oversubscription, name=f"{num_gpus}x{spec.name}")

    @classmethod
    def from_yaml(cls, path: str | Path, num_gpus: int | None = None) -> Cluster:
        """Read a cluster file. Keys: ``gpu`` (catalog name or a mapping in ``gpus.yaml`` units),
        ``num_gpus`` or ``nodes``, ``gpus_per_node``, ``nvlink_domain``, ``nic_gbit_per_gpu``,
        ``nvlink_gbps`` (per direction), ``fabric_oversubscription``, ``name``."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(field="--cluster", value=str(path), rule=f"cannot be read ({exc.__class__.__name__})",
                              fix="pass a readable YAML file") from None
        except yaml.YAMLError:
            raise ConfigError(field="--cluster", value=str(path), rule="is not valid YAML",
                              fix="check the file's syntax") from None
        except RecursionError:  # thousands of nested [ or {: no cluster file is that deep
            raise ConfigError(field="--cluster", value=str(path), rule="is nested too deeply to be a cluster file",
                              fix="see the README for the cluster file format") from None
        return cls.from_mapping(data, num_gpus=num_gpus, where=str(path))

    @classmethod
    def from_mapping(cls, data: Any, num_gpus: int | None = None, where: str = "cluster") -> Cluster:
        if not isinstance(data, dict):
            raise ConfigError(field="--cluster", value=where, rule="must hold a mapping",
                              fix="see the README for the cluster file format")
        known = {"gpu", "num_gpus", "nodes", "gpus_per_node", "nvlink_domain", "nic_gbit_per_gpu",
                 "nvlink_gbps", "fabric_oversubscription", "name"}
        unknown = sorted(set(map(str, data)) - known)
        if unknown:
            raise ConfigError(field=f"cluster.{unknown[0]}", value=data[unknown[0]] if unknown[0] in data else "?",
                              rule="unknown key", fix=f"use only {', '.join(sorted(known))}")
        if "gpu" not in data:
            raise ConfigError(field="cluster.gpu", value="missing", rule="a cluster file must name its GPU",
                              fix="add gpu: h100 (or a mapping with mem_gb, bf16_tflops, ...)")
        gpu_entry = data["gpu"]
        gpu = gpu_from_entry(str(gpu_entry.get("name", "custom")), gpu_entry) if isinstance(gpu_entry, dict) \
            else get_gpu(str(gpu_entry))

        def integer(key: str) -> int | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(field=f"cluster.{key}", value=repr(value), rule="must be a positive integer",
                                  fix=f"fix {key}")
            return value

        def number(key: str) -> float | None:
            value = data.get(key)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
                raise ConfigError(field=f"cluster.{key}", value=repr(value), rule="must be a positive number",
                                  fix=f"fix {key}")
            return float(value)

        per_node = integer("gpus_per_node") or gpu.gpus_per_node
        total = num_gpus or integer("num_gpus")
        nodes = integer("nodes")
        if total is None:
            if nodes is None:
                raise ConfigError(field="cluster.num_gpus", value="missing", rule="give num_gpus or nodes",
                                  fix="add num_gpus: 64 (or nodes: 8)")
            total = nodes * per_node
        elif nodes is not None and nodes * per_node != total and num_gpus is None:
            raise ConfigError(field="cluster.nodes", value=nodes,
                              rule=f"nodes x gpus_per_node ({nodes * per_node}) != num_gpus ({total})",
                              fix="give one of them")
        cluster = cls.from_flags(num_gpus=total, gpu=gpu, gpus_per_node=per_node,
                                 nvlink_domain=integer("nvlink_domain"), nic_gbit_per_gpu=number("nic_gbit_per_gpu"),
                                 fabric_oversubscription=number("fabric_oversubscription") or 1.0)
        link = number("nvlink_gbps")
        name = data.get("name")
        return Cluster(gpu=cluster.gpu, num_gpus=cluster.num_gpus, gpus_per_node=cluster.gpus_per_node,
                       nvlink_domain=cluster.nvlink_domain,
                       nvlink_bytes_per_s=link * 1e9 if link else cluster.nvlink_bytes_per_s,
                       nic_bytes_per_s=cluster.nic_bytes_per_s,
                       fabric_oversubscription=cluster.fabric_oversubscription,
                       name=str(name) if name else cluster.name)

    def with_num_gpus(self, num_gpus: int) -> Cluster:
        """The same kind of cluster at another size (what-if sweeps, repairs): same GPU, node size,
        NVLink domain (capped at the cluster size), NIC bandwidth and fabric."""
        per_node = self.gpus_per_node if num_gpus >= self.gpus_per_node else None
        domain = min(self.nvlink_domain, num_gpus)
        if per_node is not None and domain % per_node and per_node % domain:
            domain = None  # let from_flags choose a valid domain for this size
        return Cluster.from_flags(num_gpus=num_gpus, gpu=self.gpu, gpus_per_node=per_node, nvlink_domain=domain,
                                  nic_gbit_per_gpu=self.nic_bytes_per_s * 8 / 1e9,
                                  fabric_oversubscription=self.fabric_oversubscription)

    # ------------------------------------------------------------------ derived
    @property
    def num_nodes(self) -> int:
        return max(1, self.num_gpus // self.gpus_per_node)

    @property
    def network_bytes_per_s(self) -> float:
        """Per-GPU scale-out bandwidth after fabric oversubscription."""
        return self.nic_bytes_per_s / self.fabric_oversubscription

    def levels(self) -> list[tuple[int, float, str]]:
        """Nested link levels ``(unit size, per-GPU bandwidth to leave a unit of the level below, tier)``.

        HGX/NVL72: ``[(domain, nvlink, "nvlink"), (world, nic, "network")]``; PCIe-only nodes add a
        ``"pcie"`` level between a 1-GPU domain and the node.
        """
        levels = [(self.nvlink_domain, self.nvlink_bytes_per_s, "nvlink")]
        if self.nvlink_domain < self.gpus_per_node:
            levels.append((self.gpus_per_node, self.gpu.pcie_bytes_per_s, "pcie"))
        levels.append((max(self.num_gpus, levels[-1][0]), self.network_bytes_per_s, "network"))
        return levels

    def group_link(self, stride: int, size: int) -> GroupLink:
        """The link tier and bottleneck bus bandwidth of the groups ``{base + i*stride : i < size}``."""
        return _group_link(self, stride, size)

    def graph(self):  # -> networkx.Graph
        """The cluster as a networkx graph: GPUs, one switch per NVLink domain (per node for PCIe-only),
        and the scale-out fabric; edge attribute ``bytes_per_s`` is the per-GPU link bandwidth."""
        import networkx as nx

        graph = nx.Graph()
        graph.add_node("fabric", kind="fabric")
        local_unit = self.nvlink_domain if self.nvlink_domain > 1 else self.gpus_per_node
        local_bw = self.nvlink_bytes_per_s if self.nvlink_domain > 1 else self.gpu.pcie_bytes_per_s
        for rank in range(self.num_gpus):
            switch = f"switch{rank // local_unit}"
            if switch not in graph:
                graph.add_node(switch, kind="nvswitch" if self.nvlink_domain > 1 else "pcie")
            graph.add_node(rank, kind="gpu", node=rank // self.gpus_per_node)
            graph.add_edge(rank, switch, bytes_per_s=local_bw)
            graph.add_edge(rank, "fabric", bytes_per_s=self.network_bytes_per_s)
        return graph


@dataclass(frozen=True, slots=True)
class GroupLink:
    tier: str  # "local" (size 1), "nvlink", "pcie" or "network": the widest level the worst group spans
    bus_bytes_per_s: float  # bottleneck bus bandwidth of a ring collective over the group
    members_per_unit: int  # fewest group members inside one unit of the widest level crossed


@functools.lru_cache(maxsize=65536)
def _group_link(cluster: Cluster, stride: int, size: int) -> GroupLink:
    """Tier = the narrowest level whose units each hold whole groups; bus bandwidth = the slowest
    crossing: ``k_l`` members of a level-``l`` unit leave it over ``k_l`` links of level ``l+1``."""
    if size <= 1:
        return GroupLink("local", math.inf, 1)
    if stride <= 0 or stride * size > cluster.num_gpus:
        raise MegasolveError(field="group", value=f"stride {stride} x size {size}",
                             rule=f"exceeds the cluster ({cluster.num_gpus} GPUs)", fix="use a smaller layout")
    levels = cluster.levels()
    bandwidth, fewest = math.inf, size
    for index, (unit, link_bw, tier) in enumerate(levels):
        members = _min_members_per_unit(cluster.num_gpus, stride, size, unit)
        if members == size:  # every group lives inside one unit of this level
            if index == 0:
                return GroupLink(tier, link_bw, size)
            return GroupLink(tier, bandwidth, fewest)
        if members > 1:
            bandwidth = min(bandwidth, link_bw)  # hops between members inside the unit
        bandwidth = min(bandwidth, members * levels[index + 1][1])  # traffic leaving the unit
        fewest = members
    raise AssertionError("the last level holds the whole cluster")


def _min_members_per_unit(num_gpus: int, stride: int, size: int, unit: int) -> int:
    """Fewest members that any group ``{b + i*stride}`` has inside one of the units it touches.

    Groups tile the rank space in blocks of ``stride*size``; the pattern of (group, unit) overlaps
    repeats every ``lcm(stride*size, unit)`` ranks, so only one period is scanned.

    >>> _min_members_per_unit(64, 1, 8, 8), _min_members_per_unit(64, 8, 8, 8), _min_members_per_unit(64, 4, 4, 8)
    (8, 1, 2)
    """
    if unit <= 1:
        return 1
    block = stride * size
    if unit % block == 0:
        return size
    if stride >= unit and stride % unit == 0:
        return 1
    period = min(math.lcm(block, unit), num_gpus)
    fewest = size
    for start in range(0, period, block):
        for offset in range(stride):
            counts: dict[int, int] = {}
            for i in range(size):
                rank = start + offset + i * stride
                counts[rank // unit] = counts.get(rank // unit, 0) + 1
            fewest = min(fewest, min(counts.values()))
    return fewest
