"""The MLP activation's fused kernel (``Workload.activation_fusion``): what the unfused path keeps (the
formula is checked byte for byte against traced Megatron-Core layers in test_activation_golden.py), which
recompute modules drop it, the elementwise time it adds, how a launch is read, and the flags exported."""

from __future__ import annotations

import dataclasses

import pytest

from megasolve.cli.launch import megatron_flags
from megasolve.cost.compute import layer_work
from megasolve.cost.memory import ActivationShape, layer_activation_bytes, mlp_activation_terms
from megasolve.models import Layout, Workload, load_preset
from megasolve.solver.runs import run_from_log
from megasolve.topology import Cluster

SHAPE = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True, etp=1)
FUSED, UNFUSED = Workload(seq_length=4096), Workload(seq_length=4096, activation_fusion=False)


def _extra(spec, moe: bool) -> dict[str, float]:
    fused, unfused = (mlp_activation_terms(spec, w, SHAPE, moe) for w in (FUSED, UNFUSED))
    return {k: unfused[k] - fused[k] for k in unfused if unfused[k] != fused[k]}


def test_unfused_swiglu_keeps_the_silu_output_and_the_linear_copy_and_experts_the_scaled_input():
    dense = load_preset("llama-3.1-8b")  # F = 14336, tp 2: 7168 per rank, 4096 tokens
    assert _extra(dense, moe=False) == {"act_unfused": 4 * 4096 * 7168}
    moe = load_preset("mixtral-8x7b")  # top-2, F_m = 14336, etp 1: (4096/2)*2 routed rows
    assert _extra(moe, moe=True) == {"expert_act_unfused": 6 * 4096 * 14336}


def test_plain_experts_keep_their_activation_output_for_the_probability_multiply():
    gelu = dataclasses.replace(load_preset("mixtral-8x7b"), swiglu=False)
    assert _extra(gelu, moe=True) == {"expert_act_unfused": 2 * 4096 * 14336}
    assert _extra(load_preset("gpt3-175b"), moe=False) == {}  # a dense GeLU MLP keeps the same either way


@pytest.mark.parametrize("modules, moe", [(("moe_act",), True), (("moe",), True), (("mlp",), False)])
def test_recomputing_the_activation_drops_the_unfused_tensors_too(modules, moe):
    spec = load_preset("mixtral-8x7b" if moe else "llama-3.1-8b")
    kept = [layer_activation_bytes(spec, w, SHAPE, moe=moe, recompute="selective", recompute_modules=modules)
            for w in (FUSED, UNFUSED)]
    assert kept[0] == kept[1]


def test_the_unfused_path_costs_elementwise_time():
    spec = load_preset("mixtral-8x7b")
    fused, unfused = (layer_work(spec, w, SHAPE, moe=True, recompute="none") for w in (FUSED, UNFUSED))
    rows = 4096 * 14336  # (T/sigma) * k * F_m
    assert unfused.elementwise_bytes - fused.elementwise_bytes == pytest.approx((68 - 16) * rows)
    assert unfused.gemm_flops == fused.gemm_flops


LAUNCH = """torchrun pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 \\
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --vocab-size 32000 --bf16 \\
  --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 {extra}
[Rank 7] (after 10 iterations) memory (MB) | allocated: 900.0 | max allocated: 1000.0 | reserved: 1200.0 | \
max reserved: 1200.0
"""


@pytest.mark.parametrize("extra, fused", [
    ("--swiglu", True),
    ("--swiglu --no-bias-swiglu-fusion", False),
    ("--no-bias-gelu-fusion", False),  # GeLU experts: TEGroupedMLP has no fused kernel for them
    ("--squared-relu --no-bias-gelu-fusion", False),
    ("--squared-relu --no-bias-gelu-fusion --use-fused-weighted-squared-relu", True),
])
def test_a_launch_is_read_with_its_activation_kernel(extra, fused):
    run = run_from_log(LAUNCH.format(extra=extra), defaults={"gpu": "h100", "num_gpus": 8})
    assert run.workload.activation_fusion is fused


def test_the_exports_launch_the_kernel_the_memory_was_costed_with():
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    layout = Layout(tp=2, pp=4, dp=8, ep=8, etp=1, mbs=1, sequence_parallel=True)
    spec = load_preset("mixtral-8x7b")
    assert "--no-bias-swiglu-fusion" in megatron_flags(spec, cluster, UNFUSED, layout)
    assert "--no-bias-swiglu-fusion" not in megatron_flags(spec, cluster, FUSED, layout)
    gelu = dataclasses.replace(spec, swiglu=False)
    flags = megatron_flags(gelu, cluster, FUSED, layout)  # fused plain experts: squared ReLU's kernel only
    assert "--no-bias-gelu-fusion" in flags and "--use-fused-weighted-squared-relu" in flags
