"""Hardware: the GPU catalog and the cluster topology (NVLink domains, nodes, scale-out fabric)."""

from megasolve.topology.cluster import Cluster, GroupLink
from megasolve.topology.gpus import GpuSpec, all_gpus, get_gpu, gpu_names

__all__ = ["Cluster", "GpuSpec", "GroupLink", "all_gpus", "get_gpu", "gpu_names"]
