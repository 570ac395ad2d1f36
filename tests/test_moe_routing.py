"""MoE token dropping, padding to capacity and the FP8 alignment padding (cost/moe_routing.py): memory,
FLOPs and the all-to-all volume follow the rows Megatron-Core moves, the flags are checked and exported."""

from __future__ import annotations

import dataclasses
import math

import pytest

from megasolve.cli.main import main
from megasolve.cost.compute import layer_work
from megasolve.cost.memory import ActivationShape, mlp_activation_terms, moe_dispatch_transient_bytes
from megasolve.cost.moe_routing import expert_capacity, quantization_align, routed_rows
from megasolve.models import Workload, load_preset
from megasolve.models.errors import MegasolveError

SHAPE = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
EXPERT_TERMS = ("expert_input", "expert_fc1_output", "expert_act_output")


def _terms(spec, **knobs):
    return mlp_activation_terms(spec, Workload(seq_length=4096, **knobs), SHAPE, moe=True)


def test_capacity_is_megatrons_get_capacity():
    spec = load_preset("qwen3-30b-a3b")  # 128 experts, top-8
    # moe_utils.py L208: ceil(num_tokens * k / E * factor), hand-checked
    assert expert_capacity(4096, spec, 1.0) == 256
    assert expert_capacity(4096, spec, 1.1) == 282  # ceil(281.6)
    assert expert_capacity(1000, spec, 1.0) == 63  # ceil(62.5)


def test_dropping_and_padding_scale_the_routed_expert_tensors_only():
    spec = load_preset("mixtral-8x7b")  # 8 experts, top-2: 8192 routed rows of 4096 tokens
    base = _terms(spec)
    dropped = _terms(spec, moe_expert_capacity_factor=0.5)
    padded = _terms(spec, moe_expert_capacity_factor=1.25, moe_pad_expert_input_to_capacity=True,
                    moe_dispatcher="alltoall")
    roomy = _terms(spec, moe_expert_capacity_factor=2.0)  # balanced routing drops nothing, pads nothing
    for name in EXPERT_TERMS:
        assert dropped[name] == pytest.approx(0.5 * base[name])
        assert padded[name] == pytest.approx(1280 * 8 / 8192 * base[name])  # capacity 1280 rows x 8 experts
        assert roomy[name] == base[name]
    for name in set(base) - set(EXPERT_TERMS):  # router state, norms, shared experts: per token
        assert dropped[name] == padded[name] == base[name]


def test_fp8_alignment_padding_inside_the_grouped_gemm_or_in_the_router():
    spec = load_preset("qwen3-30b-a3b")
    routed = 4096 * 8
    assert quantization_align(Workload(precision="fp8")) == 16
    gemm = routed_rows(spec, Workload(precision="fp8"), 4096)  # TE Fp8Padding: only the GEMM rows
    assert gemm.dispatch == 1.0 and gemm.gemm == pytest.approx(1 + 128 * 7.5 / routed)
    router = routed_rows(spec, Workload(precision="fp8", moe_router_padding_for_fp8=True), 4096)
    assert router.dispatch == router.gemm == pytest.approx(1 + 128 * 7.5 / routed)
    mx = routed_rows(spec, Workload(precision="fp8", fp8_recipe="mxfp8", moe_router_padding_for_fp8=True), 4096)
    assert mx.dispatch == pytest.approx(1 + 128 * 15.5 / routed)
    assert routed_rows(spec, Workload(), 4096) == routed_rows(spec, Workload(precision="bf16"), 4096)


def test_padding_to_capacity_costs_flops_and_all_to_all_volume():
    spec = load_preset("mixtral-8x7b")
    plain = Workload(seq_length=4096, moe_dispatcher="alltoall")
    padded = dataclasses.replace(plain, moe_expert_capacity_factor=1.5, moe_pad_expert_input_to_capacity=True)
    w0, w1 = layer_work(spec, plain, SHAPE, moe=True, recompute="none"), layer_work(spec, padded, SHAPE, moe=True,
                                                                                         recompute="none")
    assert w1.expert_flops == pytest.approx(1.5 * w0.expert_flops) and w1.gemm_flops == w0.gemm_flops
    assert moe_dispatch_transient_bytes(spec, padded, SHAPE) == pytest.approx(
        1.5 * moe_dispatch_transient_bytes(spec, plain, SHAPE))


@pytest.mark.parametrize("knobs,field", [
    (dict(moe_pad_expert_input_to_capacity=True, moe_dispatcher="alltoall"), "--moe-pad-expert-input-to-capacity"),
    (dict(moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True, moe_dispatcher="flex"),
     "--moe-pad-expert-input-to-capacity"),
    (dict(moe_router_padding_for_fp8=True), "--moe-router-padding-for-fp8"),
    (dict(precision="fp8", moe_router_padding_for_fp8=True, moe_dispatcher="allgather"), "--moe-router-padding-for-fp8"),
    (dict(moe_expert_capacity_factor=0.0), "--moe-expert-capacity-factor"),
    (dict(moe_token_drop_policy="random"), "--moe-token-drop-policy"),
])
def test_megatron_rules_on_dropping_and_padding(knobs, field):
    with pytest.raises(MegasolveError) as err:
        Workload(**knobs)
    assert err.value.field == field


def test_flags_reach_the_estimate_and_the_megatron_export(capsys):
    args = ["estimate", "-m", "mixtral-8x7b", "-n", "64", "-g", "h100", "--ep", "8", "--pp", "4", "--mbs", "1",
            "--moe-dispatcher", "alltoall", "--moe-expert-capacity-factor", "1.25",
            "--moe-pad-expert-input-to-capacity", "--moe-token-drop-policy", "position", "--format", "json"]
    main(args)
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["workload"]["moe_expert_capacity_factor"] == 1.25
    assert data["workload"]["moe_pad_expert_input_to_capacity"] is True
    assert data["workload"]["moe_token_drop_policy"] == "position"
    main(["solve", "-m", "mixtral-8x7b", "-n", "64", "-g", "h100", "--top-k", "1", "--moe-dispatcher", "alltoall",
          "--moe-expert-capacity-factor", "1.25", "--moe-pad-expert-input-to-capacity", "--format", "megatron"])
    out = capsys.readouterr().out
    assert "--moe-expert-capacity-factor 1.25" in out and "--moe-pad-expert-input-to-capacity" in out
    assert "--moe-token-drop-policy probs" in out


def test_deepep_buffers_sit_outside_the_allocator_on_moe_stages_only():
    """DeepEP's NVL (+ RDMA beyond 8 ranks) buffers, hand-checked from DeepEP's size hints: 10 channels x
    8 NVL ranks x 256 (288) recv tokens x (2h + 8 + 128*12 + 128*4) B, plus for 64 ranks the RDMA half."""
    from megasolve.cost.memory import deepep_buffer_bytes, stage_memory
    from megasolve.models.layout import Layout
    from megasolve.topology import Cluster

    spec = load_preset("deepseek-v3")
    per_token = 2 * 7168 + 8 + 128 * 12 + 128 * 4
    assert deepep_buffer_bytes(spec, 8) == math.ceil((10 * 8 * 5 * 4 + 10 * 8 * 256 * per_token) / 128) * 128
    nvl64 = math.ceil((10 * 8 * 19 * 4 + 10 * 8 * 288 * per_token) / 128) * 128
    rdma64 = math.ceil((10 * 8 * 18 * 2 * 4 + 10 * 8 * 128 * 2 * (per_token + 16) + 2**20) / 128) * 128
    assert deepep_buffer_bytes(spec, 64) == nvl64 + rdma64
    assert deepep_buffer_bytes(spec, 1) == 0
    cluster = Cluster.from_flags(num_gpus=256, gpu="h100")
    layout = Layout(tp=1, pp=16, ep=16, dp=16, mbs=1, first_stage_layers=1)
    flex = stage_memory(spec, cluster, Workload(seq_length=4096, global_batch_size=1024), layout)
    a2a = stage_memory(spec, cluster, Workload(seq_length=4096, global_batch_size=1024, moe_dispatcher="alltoall"),
                       layout)
    for f, a in zip(flex, a2a):
        assert f.allocated_bytes == a.allocated_bytes  # not in torch.cuda.max_memory_allocated
        extra = deepep_buffer_bytes(spec, 16) if f.moe or f.stage == 15 else 0.0
        assert f.other_bytes - a.other_bytes == pytest.approx(extra)


def test_dropping_knobs_on_a_dense_model_are_an_error_not_ignored(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--moe-expert-capacity-factor", "1.0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == ("error: --moe-expert-capacity-factor=1.0: llama-3.1-8b has no MoE "
                                               "layers; fix: drop --moe-expert-capacity-factor or pick an MoE model")
