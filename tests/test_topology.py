"""GPU catalog and which link a Megatron rank group spans."""

from __future__ import annotations

import networkx as nx
import pytest

from megasolve.models import MegasolveError
from megasolve.topology import Cluster, get_gpu, gpu_names
from megasolve.topology.gpus import GIB

REQUIRED = ("a100-40g", "a100-80g", "h100", "h800", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "l40s")


def test_catalog_has_every_required_gpu():
    assert set(REQUIRED) <= set(gpu_names())


@pytest.mark.parametrize("alias,name", [("a100-80g", "a100-80g"), ("A100", "a100-80g"), ("h100-sxm", "h100"),
                                        ("gb200-nvl72", "gb200"), ("H200_SXM", "h200")])
def test_aliases(alias, name):
    assert get_gpu(alias).name == name


def test_units_are_si():
    h100 = get_gpu("h100")
    assert h100.bf16_flops == 989e12 and h100.nic_bytes_per_s == 50e9  # 400 Gbit/s = 50 GB/s, not 400
    assert h100.usable_memory_bytes == pytest.approx(79.6 * GIB)


def test_unknown_gpu_suggests():
    with pytest.raises(MegasolveError, match="did you mean h100"):
        get_gpu("h10")


def test_tp8_on_an_hgx_node_is_nvlink_and_dp_across_nodes_is_network():
    c = Cluster.from_flags(num_gpus=64, gpu="h100")
    assert c.group_link(1, 8).tier == "nvlink"
    assert c.group_link(1, 8).bus_bytes_per_s == 450e9
    dp = c.group_link(8, 8)
    assert dp.tier == "network" and dp.bus_bytes_per_s == 50e9
    # a group with 2 members per node crosses with two NICs' worth of bandwidth
    assert c.group_link(4, 4).bus_bytes_per_s == 100e9


def test_nvl72_keeps_tp16_on_nvlink_only_where_it_fits():
    rack = Cluster.from_flags(num_gpus=72, gpu="gb200")
    assert rack.group_link(1, 8).tier == "nvlink" and rack.group_link(8, 9).tier == "nvlink"
    two_racks = Cluster.from_flags(num_gpus=144, gpu="gb200")
    assert two_racks.group_link(1, 16).tier == "network"  # ranks 64..79 straddle racks


def test_pcie_only_gpus():
    c = Cluster.from_flags(num_gpus=16, gpu="l40s")
    assert c.group_link(1, 2).tier == "pcie"
    assert c.group_link(8, 2).tier == "network"


@pytest.mark.parametrize("stride,size", [(1, 8), (8, 4), (2, 8), (4, 4), (1, 16)])
def test_group_bandwidth_agrees_with_the_graph(stride, size):
    """The arithmetic tier equals the slowest link on the graph path between ring neighbours."""
    c = Cluster.from_flags(num_gpus=32, gpu="h100")
    graph = c.graph()
    members = [i * stride for i in range(size)]
    slowest = min(min(graph.edges[u, v]["bytes_per_s"] for u, v in zip(path, path[1:]))
                  for a, b in zip(members, members[1:] + members[:1])
                  for path in [nx.shortest_path(graph, a, b, weight=lambda u, v, d: 1 / d["bytes_per_s"])])
    link = c.group_link(stride, size)
    assert slowest == (450e9 if link.tier == "nvlink" else 50e9)


def test_cluster_yaml(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("gpu: gb200\nnodes: 36\ngpus_per_node: 4\nnvlink_domain: 72\nnic_gbit_per_gpu: 800\n"
                    "fabric_oversubscription: 2.0\n")
    c = Cluster.from_yaml(path)
    assert c.num_gpus == 144 and c.nvlink_domain == 72
    assert c.network_bytes_per_s == 800e9 / 8 / 2


def test_cluster_yaml_with_a_custom_gpu(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("gpu: {name: mygpu, mem_gb: 96, bf16_tflops: 500, nvlink_uni_gbps: 300}\nnum_gpus: 16\n")
    assert Cluster.from_yaml(path).gpu.bf16_flops == 500e12


@pytest.mark.parametrize("text,match", [
    ("gpu: h100\n", "give num_gpus or nodes"),
    ("num_gpus: 8\n", "must name its GPU"),
    ("gpu: h100\nnum_gpus: -8\n", "must be a positive integer"),
    ("gpu: h100\nnum_gpus: 8\nbogus: 1\n", "unknown key"),
    ("gpu: [h100\n", "not valid YAML"),
    ("gpu: h100\nnum_gpus: 12\n", "not a whole number of 8-GPU nodes"),
])
def test_bad_cluster_yaml(tmp_path, text, match):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(MegasolveError, match=match):
        Cluster.from_yaml(path)


def test_resized_cluster_keeps_a_custom_nvlink_domain():
    """what-if and repairs resize clusters; a user's --nvlink-domain 4 must survive."""
    small_domains = Cluster.from_flags(num_gpus=64, gpu="h100", nvlink_domain=4)
    assert small_domains.with_num_gpus(128).nvlink_domain == 4
    assert Cluster.from_flags(num_gpus=144, gpu="gb200").with_num_gpus(288).nvlink_domain == 72


def test_compute_capability_matches_fp8_support_for_every_nvidia_part():
    """Every NVIDIA part names its CUDA compute capability (Transformer Engine's recipe checks read it); FP8
    tensor cores exactly from 8.9 (Ada) up (TE ``_compute_fp8_support``); AMD parts have none."""
    from megasolve.topology.gpus import all_gpus

    for gpu in all_gpus():
        if gpu.name.startswith("mi"):
            assert gpu.compute_capability is None, gpu.name
            continue
        assert gpu.compute_capability is not None, gpu.name
        assert (gpu.fp8_flops is not None) == (gpu.compute_capability >= 8.9), gpu.name
