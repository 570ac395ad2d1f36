"""``--cuda-graph-impl``: what a full-iteration CUDA graph removes from the step (``cost/step.py``
``layer_overhead_s``), the flag as read from a log and written by the exports, and its errors."""

from __future__ import annotations

import dataclasses

import pytest

from megasolve.cli.launch import megatron_flags, launch_text
from megasolve.cost.calibration import calibration
from megasolve.cost.step import layer_overhead_s, step_time
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout, Workload
from megasolve.models.presets import load_preset
from megasolve.solver.runs import cuda_graph_impl
from megasolve.topology.cluster import Cluster

SPEC = load_preset("qwen3-30b-a3b")
CLUSTER = Cluster.from_flags(num_gpus=8, gpu="gb200")
LAYOUT = Layout(ep=8, dp=8, mbs=4)
WORKLOAD = Workload(seq_length=4096, global_batch_size=512, precision="fp8", fp8_recipe="mxfp8")


def _graphed(workload: Workload, impl: str = "full_iteration") -> Workload:
    return dataclasses.replace(workload, cuda_graph_impl=impl)


def test_full_iteration_graph_removes_exactly_the_launch_and_host_overhead():
    """Qwen3-30B-A3B on 8 GB200 (Megatron-Bridge 26.06's recipe captures the full iteration): the step
    shrinks by (per-layer launches + the non-kernel share of the MoE overhead) x layers x micro-batches,
    and by nothing else."""
    cal = calibration()["time"]
    eager = step_time(SPEC, CLUSTER, WORKLOAD, LAYOUT)
    graphed = step_time(SPEC, CLUSTER, _graphed(WORKLOAD), LAYOUT)
    microbatches = WORKLOAD.num_microbatches(LAYOUT)
    local = SPEC.moe.num_experts // LAYOUT.ep
    moe_s = cal["per_moe_layer_overhead_s"] + local * cal["per_local_expert_overhead_s"]
    saved = SPEC.num_layers * microbatches * (cal["per_layer_overhead_s"] + (1 - cal["cuda_graph_moe_overhead_share"])
                                              * moe_s)
    assert eager.step_s - graphed.step_s == pytest.approx(saved, rel=1e-6)
    assert graphed.breakdown_s["ep_comm"] == eager.breakdown_s["ep_comm"]


def test_eager_moe_overhead_grows_with_the_local_experts():
    """Each local expert is launched on its own (TE GroupedLinear's multi-stream cuBLAS path): a rank
    holding 16 local experts pays 15 more per-expert host times per MoE layer than one holding 1; a full
    graph keeps its share of it; a dense layer pays none."""
    cal = calibration()["time"]
    assert cal["per_local_expert_overhead_s"] > 0
    one = layer_overhead_s(Workload(), moe=True, local_experts=1)
    sixteen = layer_overhead_s(Workload(), moe=True, local_experts=16)
    assert sixteen - one == pytest.approx(15 * cal["per_local_expert_overhead_s"], rel=1e-9)
    graphed = _graphed(Workload())
    assert layer_overhead_s(graphed, moe=True, local_experts=16) == pytest.approx(
        cal["cuda_graph_moe_overhead_share"] * (cal["per_moe_layer_overhead_s"] + 16 * cal["per_local_expert_overhead_s"]))
    assert layer_overhead_s(Workload(), moe=False, local_experts=16) == cal["per_layer_overhead_s"]


def test_dense_layers_lose_only_their_launches():
    assert layer_overhead_s(_graphed(Workload()), moe=False) == 0.0
    assert layer_overhead_s(Workload(), moe=False) == calibration()["time"]["per_layer_overhead_s"]


@pytest.mark.parametrize("impl", ["local", "transformer_engine"])
def test_per_layer_graphs_are_costed_as_eager(impl):
    """Per-layer graphs (--cuda-graph-modules) are not modelled: the step is the eager one (the reader says so)."""
    assert step_time(SPEC, CLUSTER, _graphed(WORKLOAD, impl), LAYOUT).step_s == \
        step_time(SPEC, CLUSTER, WORKLOAD, LAYOUT).step_s


def test_unknown_implementation_is_refused_with_the_field():
    with pytest.raises(MegasolveError) as err:
        Workload(cuda_graph_impl="full")
    assert err.value.field == "--cuda-graph-impl"


@pytest.mark.parametrize("args, expected", [
    ({}, "none"),
    ({"cuda_graph_impl": "full_iteration"}, "full_iteration"),
    ({"cuda_graph_impl": "transformer_engine", "cuda_graph_modules": "['attn', 'moe_router']"}, "transformer_engine"),
    ({"enable_cuda_graph": True}, "local"),  # deprecated, ARG L619-625
    ({"external_cuda_graph": True}, "transformer_engine"),  # deprecated, ARG L626-632
    ({"cuda_graph_impl": "local", "cuda_graph_scope": "['full_iteration']"}, "full_iteration"),  # migrated scope
    ({"cuda_graph_impl": "none", "cuda_graph_scope": "[<CudaGraphScope.full_iteration: 1>]"}, "full_iteration"),
])
def test_reader_resolves_the_implementation_as_megatron_does(args, expected):
    assert cuda_graph_impl(args) == expected


def test_exports_launch_the_graph_with_the_nan_check_off():
    """Megatron-LM asserts --no-check-for-nan-in-loss-and-grad with a full-iteration graph (ARG L1235-1237),
    Megatron-Bridge the same of rerun_state_machine.check_for_nan_in_loss (training/config.py L1508-1512)."""
    workload = _graphed(WORKLOAD)
    flags = megatron_flags(SPEC, CLUSTER, workload, LAYOUT)
    assert "--cuda-graph-impl full_iteration" in flags and "--no-check-for-nan-in-loss-and-grad" in flags
    bridge = launch_text("bridge", SPEC, CLUSTER, workload, LAYOUT)
    assert "model.cuda_graph_impl=full_iteration" in bridge
    assert "rerun_state_machine.check_for_nan_in_loss=false" in bridge.lower()
    for fmt in ("nemo", "verl"):
        assert "# not expressible in " + fmt + ": cuda_graph_impl=full_iteration" in launch_text(
            fmt, SPEC, CLUSTER, workload, LAYOUT)
    eager = megatron_flags(SPEC, CLUSTER, WORKLOAD, LAYOUT)
    assert not any("cuda-graph" in f or "nan-in-loss" in f for f in eager)


def test_the_flag_says_what_is_not_modelled():
    """``--cuda-graph-impl`` on the command line gets the note a log's setting gets (``cuda_graph_note``)."""
    from click.testing import CliRunner

    from megasolve.cli.main import cli

    args = ["estimate", "-m", "qwen3-30b-a3b", "-n", "8", "-g", "gb200", "--ep", "8", "-o", "json"]
    for impl, text in (("local", "per-layer CUDA graphs (--cuda-graph-impl local) are not modelled"),
                       ("full_iteration", "its memory (static buffers, graph pools) is not counted")):
        result = CliRunner().invoke(cli, args + ["--cuda-graph-impl", impl])
        assert result.exit_code in (0, 1) and text in result.stderr
    assert "CUDA graph" not in CliRunner().invoke(cli, args).stderr
