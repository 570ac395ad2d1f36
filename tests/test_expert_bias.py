"""Biased experts (``--add-bias-linear`` on an MoE model, GPT-OSS): Megatron-Core adds the fc2 bias outside the
grouped GEMM, one local expert at a time (``cost/step.py`` ``expert_bias_s``). Hand-checked numbers."""

from __future__ import annotations

import dataclasses

import pytest

from megasolve.cost.calibration import calibration
from megasolve.cost.memory import ActivationShape, moe_dispatch_transient_bytes
from megasolve.cost.step import EXPERT_BIAS_BYTES, expert_bias_s, step_time
from megasolve.models.layout import Layout, Workload
from megasolve.models.presets import load_preset
from megasolve.topology.cluster import Cluster

GPT_OSS = load_preset("gpt-oss-120b")
H100 = Cluster.from_flags(num_gpus=64, gpu="h100")
WORKLOAD = Workload(seq_length=4096, global_batch_size=1280)


def test_the_preset_has_biased_experts():
    assert GPT_OSS.add_bias_linear and GPT_OSS.is_moe


def test_one_layer_by_hand():
    """Megatron-Bridge's H100 recipe (tp1 pp4 ep8 mbs1): EP8 holds 16 of 128 experts; one micro-batch routes 4096 tokens x top-4 = 16,384 rows of 2,880 values,
    40 bytes each through HBM (20 forward, 20 backward): 1.887 GB, 0.563 ms at 3.35 TB/s; plus, eager, 16 local
    experts' host time."""
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False, etp=1)
    host = calibration()["time"]["biased_expert_overhead_s"]
    traffic = 4096 * 4 * 2880 * (EXPERT_BIAS_BYTES["forward"] + EXPERT_BIAS_BYTES["backward"])
    assert traffic == pytest.approx(1.887e9, rel=1e-3)
    eager = expert_bias_s(GPT_OSS, H100.gpu, WORKLOAD, shape, 16, "none")
    assert eager == pytest.approx(16 * host + traffic / 3.35e12, rel=1e-3)
    # under CUDA graphs (a full iteration, or per layer as Megatron-Bridge's B300 recipe) the host share is not
    # charged (measured, cost/step.py expert_bias_s), the kernels' traffic stays
    for impl in ("full_iteration", "transformer_engine", "local"):
        graphed = expert_bias_s(GPT_OSS, H100.gpu, dataclasses.replace(WORKLOAD, cuda_graph_impl=impl),
                                shape, 16, "none")
        assert graphed == pytest.approx(traffic / 3.35e12, rel=1e-3)
    # full recompute runs the forward's share twice
    full = expert_bias_s(GPT_OSS, H100.gpu, WORKLOAD, shape, 16, "full")
    assert full == pytest.approx(32 * host + 4096 * 4 * 2880 * 60 / 3.35e12, rel=1e-3)


def test_fewer_local_experts_pay_less_and_unbiased_experts_pay_nothing():
    """The host share grows with the rank's local experts (EP8: 16, EP64: 2); the same model without expert
    biases computes for exactly the term less per layer and micro-batch (its bias weights aside, < 0.1 %)."""
    unbiased = dataclasses.replace(GPT_OSS, add_bias_linear=False)
    cluster = Cluster.from_flags(num_gpus=64, gpu="b200")
    shape = ActivationShape(tp=1, cp=1, mbs=4, sequence_parallel=False, etp=1)
    gaps = {}
    for ep in (8, 64):
        layout = Layout(ep=ep, dp=64, mbs=4)
        gaps[ep] = step_time(GPT_OSS, cluster, WORKLOAD, layout).breakdown_s["compute"] \
            - step_time(unbiased, cluster, WORKLOAD, layout).breakdown_s["compute"]
        term = expert_bias_s(GPT_OSS, cluster.gpu, WORKLOAD, shape, 128 // ep, "none")
        assert gaps[ep] == pytest.approx(GPT_OSS.num_layers * WORKLOAD.num_microbatches(layout) * term, rel=1e-3)
    assert gaps[8] > gaps[64] > 0


def test_the_bias_loop_sets_the_moe_layers_transient_peak():
    """Its forward holds the expert output (bf16), the fp32 sums and their fp32 concatenation at once: 10 bytes
    per routed row and output value, 4096 x 4 rows x 2,880 = 450 MiB at mbs 1, above the unbiased model's
    largest step (FC2's backward, 2 B x rows x (h + F) = 180 MiB)."""
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    workload = Workload(seq_length=4096)
    assert moe_dispatch_transient_bytes(GPT_OSS, workload, shape) == 4096 * 4 * 2880 * 10
    unbiased = dataclasses.replace(GPT_OSS, add_bias_linear=False)
    assert moe_dispatch_transient_bytes(unbiased, workload, shape) == 2 * 4096 * 4 * (2880 + 2880)
