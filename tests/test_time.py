"""Step-time model: formula unit tests (arithmetic in the comments) and Hypothesis properties.

Sources: ``reference/megatron.md`` section 5 (collective volumes), section 6.1 (pipeline), section
6.2 (Megatron's FLOPs formula and its check values), Korthikanti et al. 2022 Table 4 (one layer of
the 22B GPT, A100, TP 8).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megasolve.cost.calibration import calibration
from megasolve.cost.comm import all_to_all_time_s, collective_time_s
from megasolve.cost.compute import model_flops_per_sequence
from megasolve.cost.memory import ActivationShape
from megasolve.cost.step import TERMS, layer_time, remote_domains_per_token, stage_times, step_time
from megasolve.models.layout import Layout, Workload
from megasolve.models.presets import load_preset
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster


# ---------------------------------------------------------------------------- Megatron FLOPs (section 6.2)
def test_llama3_8b_flops_per_token_matches_reference():
    # 32 layers x [6*4096*14336*3 (SwiGLU MLP) + 6*(4096*(4096 + 2*1024) + 4096*4096) (attention)]
    # + 6*4096*128256 (logits) + 8192 * 6*32*128 * 32 (causal core) = 51.5e9 per token
    spec = load_preset("llama-3.1-8b")
    assert model_flops_per_sequence(spec, 8192) / 8192 / 1e9 == pytest.approx(51.5, abs=0.1)


def test_llama3_70b_flops_per_token_matches_reference():
    # 80 x [6*8192*28672*3 + 6*(8192*(8192 + 2*1024) + 8192*8192)] + 6*8192*128256 + 8192*6*64*128*80 = 449e9
    spec = load_preset("llama-3.1-70b")
    assert model_flops_per_sequence(spec, 8192) / 8192 / 1e9 == pytest.approx(449, rel=0.005)


def test_deepseek_v3_flops_per_token_matches_reference():
    # 3 dense + 58 MoE layers (8 routed + 1 shared expert of 2048), MLA, no MTP, s = 4096: ~250e9
    spec = dataclasses.replace(load_preset("deepseek-v3"), mtp_num_layers=0)
    assert model_flops_per_sequence(spec, 4096) / 4096 / 1e9 == pytest.approx(250, rel=0.01)


# ---------------------------------------------------------------------------- collectives (section 5)
def _bus(tier: str) -> tuple[float, float]:
    cal = calibration()["time"]["collectives"]
    return cal["bus_efficiency"][tier], cal["latency_s"][tier]


def test_all_reduce_volume_is_twice_all_gather():
    c = Cluster.from_flags(num_gpus=8, gpu="h100")
    link = c.group_link(1, 8)
    efficiency, latency = _bus("nvlink")
    # all-reduce: 2*(8-1)/8 * 1 GB / (450 GB/s * efficiency) + 7 steps of latency
    ar = collective_time_s("all_reduce", 1e9, 8, link)
    assert ar == pytest.approx(2 * 7 / 8 * 1e9 / (450e9 * efficiency) + 7 * latency)
    # all-gather / reduce-scatter: (8-1)/8 * 1 GB of the same bus
    ag = collective_time_s("all_gather", 1e9, 8, link)
    assert ag == pytest.approx(7 / 8 * 1e9 / (450e9 * efficiency) + 7 * latency)
    assert collective_time_s("reduce_scatter", 1e9, 8, link) == pytest.approx(ag)


def test_send_recv_moves_the_whole_tensor_once():
    c = Cluster.from_flags(num_gpus=16, gpu="h100")
    link = c.group_link(8, 2)  # stride 8 over two 8-GPU nodes: the NIC tier, 50 GB/s per GPU
    efficiency, latency = _bus("network")
    assert link.tier == "network"
    # 100 MB / (50 GB/s * efficiency) + one latency
    assert collective_time_s("send_recv", 1e8, 2, link) == pytest.approx(1e8 / (50e9 * efficiency) + latency)


def test_collective_over_one_rank_or_no_bytes_is_free():
    c = Cluster.from_flags(num_gpus=8, gpu="h100")
    assert collective_time_s("all_reduce", 1e9, 1, c.group_link(1, 1)) == 0.0
    assert all_to_all_time_s(nvlink_bytes=0.0, network_bytes=0.0, group_size=8, cluster=c, dispatcher="flex") == 0.0


def test_deduplicated_dispatch_sends_one_copy_per_remote_domain():
    # E = 256, k = 8, 4 domains of 64 experts: P(a given other domain is missed) =
    # prod_{i<8} (192 - i)/(256 - i) = 0.0964, so 3 * (1 - 0.0964) = 2.711 remote copies per token
    # instead of k * 3/4 = 6 without deduplication.
    assert remote_domains_per_token(256, 8, 4) == pytest.approx(2.711, abs=1e-3)
    assert remote_domains_per_token(256, 8, 1) == 0.0
    # top-1 never needs more than one copy: 3 * (1 - 192/256) = 0.75 = k * 3/4
    assert remote_domains_per_token(256, 1, 4) == pytest.approx(0.75)
    # node-limited routing, one group per domain (DeepSeek-V3 on 8 nodes): a domain is touched when its
    # group is one of the 4 chosen and one of the token's 8 experts (from 4 x 32) lands in it
    miss = math.comb(128 - 32, 8) / math.comb(128, 8)
    assert remote_domains_per_token(256, 8, 8, 8, 4) == pytest.approx(7 * 4 / 8 * (1 - miss))
    # two groups per domain (4 domains): hypergeometric over the domain's chosen groups
    def touched(j):
        return 1 - math.comb(128 - 32 * j, 8) / math.comb(128, 8)
    p = sum(math.comb(2, j) * math.comb(6, 4 - j) / math.comb(8, 4) * touched(j) for j in (1, 2))
    assert remote_domains_per_token(256, 8, 4, 8, 4) == pytest.approx(3 * p)
    # a group spanning two GPUs (8 groups, 16 GPUs): chosen with 4/8, then 1 - C(128 - 16, 8) / C(128, 8)
    assert remote_domains_per_token(256, 8, 16, 8, 4) == pytest.approx(
        15 * 4 / 8 * (1 - math.comb(112, 8) / math.comb(128, 8)))
    assert remote_domains_per_token(256, 8, 4, 1, 1) == remote_domains_per_token(256, 8, 4)  # no groups


# ---------------------------------------------------------------------------- pipeline (section 6.1)
def test_pipeline_bubble_is_p_minus_1_over_v_stages_for_equal_stages():
    # Llama-3.1-8B, 32 layers on pp 4: stages differ only by embedding / logits. The bubble term is
    # (sum(tau) - max(tau)) / v, i.e. (p - 1) * tau / v for equal stages.
    spec = load_preset("llama-3.1-8b")
    cluster = Cluster.from_flags(num_gpus=32, gpu="h100")
    workload = Workload(seq_length=4096, global_batch_size=128)
    for vpp in (1, 2):
        layout = Layout(tp=2, pp=4, vpp=vpp, dp=4)
        st_ = step_time(spec, cluster, workload, layout)
        taus = [s.tau_s for s in st_.stages]
        assert st_.breakdown_s["bubble"] == pytest.approx((sum(taus) - max(taus)) / vpp)


def test_step_time_combines_pipeline_dp_tail_optimizer_and_overhead():
    spec = load_preset("llama-3.1-8b")
    cluster = Cluster.from_flags(num_gpus=16, gpu="h100")
    workload = Workload(seq_length=4096, global_batch_size=64)
    layout = Layout(tp=2, pp=2, dp=4)
    stages = stage_times(spec, cluster, workload, layout)
    m = workload.num_microbatches(layout)  # 64 / (1 * 4) = 16
    taus = [s.tau_s for s in stages]
    expected = (m * max(taus) + sum(taus) - max(taus) + max(s.dp_exposed_s for s in stages)
                + max(s.optimizer_s for s in stages) + calibration()["time"]["step_overhead_s"])
    assert step_time(spec, cluster, workload, layout).step_s == pytest.approx(expected)


# ---------------------------------------------------------------------------- Korthikanti 2022 Table 4
GPT22B = ModelSpec(name="gpt-22b", num_layers=48, hidden_size=6144, ffn_hidden_size=24576, num_attention_heads=64,
                   num_query_groups=64, vocab_size=51200, swiglu=False, normalization="LayerNorm",
                   add_bias_linear=True, add_qkv_bias=True, untie_embeddings_and_output_weights=False,
                   position_embedding_type="learned_absolute", max_position_embeddings=2048)
LAYER_TOLERANCE = 0.15  # Korthikanti et al. 2022 Table 4: one 22B layer, A100, TP 8, mbs 4, s 2048


@pytest.mark.parametrize("sp, recompute, measured_ms", [
    (False, "none", 19.6),  # korthikanti2022:gpt-22b-one-transformer-laye:a100x8:1
    (True, "none", 19.0),  # ...:2
    (False, "full", 27.2),  # ...:3
    (False, "selective", 20.9),  # ...:4
    (True, "selective", 20.3),  # ...:5
])
def test_one_gpt22b_layer_matches_korthikanti_table4(sp, recompute, measured_ms):
    cluster = Cluster.from_flags(num_gpus=8, gpu="a100-80g")
    workload = Workload(seq_length=2048, global_batch_size=4, attention="unfused")
    shape = ActivationShape(tp=8, cp=1, mbs=4, sequence_parallel=sp)
    predicted_ms = layer_time(GPT22B, cluster, workload, shape, ep=1, moe=False, recompute=recompute).total * 1e3
    assert predicted_ms == pytest.approx(measured_ms, rel=LAYER_TOLERANCE)


def test_recompute_orders_layer_time_none_selective_full():
    cluster = Cluster.from_flags(num_gpus=8, gpu="a100-80g")
    workload = Workload(seq_length=2048, global_batch_size=4, attention="unfused")
    shape = ActivationShape(tp=8, cp=1, mbs=4, sequence_parallel=True)
    times = [layer_time(GPT22B, cluster, workload, shape, ep=1, moe=False, recompute=r).total
             for r in ("none", "selective", "full")]
    assert times[0] < times[1] < times[2]
    # Table 4: full recompute costs +39% over the baseline; the extra forward is ~1/3 of fwd+bwd
    assert 1.25 < times[2] / times[0] < 1.5


# ---------------------------------------------------------------------------- Hypothesis properties
MODELS = {"llama-3.1-8b": load_preset("llama-3.1-8b"), "qwen3-30b-a3b": load_preset("qwen3-30b-a3b")}


@st.composite
def cases(draw):
    name = draw(st.sampled_from(sorted(MODELS)))
    spec = MODELS[name]
    gpu = draw(st.sampled_from(["a100-80g", "h100", "gb200"]))
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 4]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (dp * cp * tp) % e == 0])) if spec.is_moe else 1
    mbs = draw(st.sampled_from([1, 2]))
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    precision = draw(st.sampled_from(["bf16", "fp8"])) if gpu != "a100-80g" else "bf16"
    layout = Layout(tp=tp, pp=pp, vpp=vpp, cp=cp, dp=dp, ep=ep, etp=1 if spec.is_moe else tp, mbs=mbs,
                    sequence_parallel=tp > 1, recompute=recompute,
                    distributed_optimizer=draw(st.booleans()))
    m = draw(st.sampled_from([1, 2, 4, 8])) * pp
    workload = Workload(seq_length=draw(st.sampled_from([2048, 4096])), global_batch_size=m * mbs * dp,
                        precision=precision)
    world = layout.world_size
    per_node = 4 if gpu == "gb200" else 8
    num_gpus = max(world, per_node) if world >= per_node else world
    cluster = Cluster.from_flags(num_gpus=num_gpus, gpu=gpu)
    return spec, cluster, workload, layout


FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(cases())
def test_every_time_term_is_non_negative(case):
    spec, cluster, workload, layout = case
    result = step_time(spec, cluster, workload, layout)
    assert result.step_s > 0 and math.isfinite(result.step_s)
    assert all(v >= 0 for v in result.breakdown_s.values())
    for stage in result.stages:
        assert all(getattr(stage.per_microbatch, t) >= 0 for t in TERMS)
        assert stage.dp_exposed_s >= 0 and stage.optimizer_s >= 0


@FAST
@given(cases(), st.sampled_from([2.0, 4.0]))
def test_more_nic_or_nvlink_bandwidth_never_slows_a_layout(case, factor):
    spec, cluster, workload, layout = case
    base = step_time(spec, cluster, workload, layout).step_s
    faster_nic = dataclasses.replace(cluster, nic_bytes_per_s=cluster.nic_bytes_per_s * factor)
    faster_nvlink = dataclasses.replace(cluster, nvlink_bytes_per_s=cluster.nvlink_bytes_per_s * factor)
    assert step_time(spec, faster_nic, workload, layout).step_s <= base * (1 + 1e-12)
    assert step_time(spec, faster_nvlink, workload, layout).step_s <= base * (1 + 1e-12)


@FAST
@given(cases())
def test_bubble_fraction_shrinks_with_more_microbatches(case):
    spec, cluster, workload, layout = case
    more = dataclasses.replace(workload, global_batch_size=workload.global_batch_size * 4)
    few = step_time(spec, cluster, workload, layout)
    many = step_time(spec, cluster, more, layout)
    assert many.bubble_fraction <= few.bubble_fraction + 1e-12


@FAST
@given(cases())
def test_step_time_is_deterministic(case):
    spec, cluster, workload, layout = case
    assert step_time(spec, cluster, workload, layout) == step_time(spec, cluster, workload, layout)


def test_fsdp_traffic_is_per_micro_batch_and_hidden_by_compute():
    """Megatron-FSDP gathers every layer twice and reduce-scatters every gradient per micro-batch; the
    exposed part is what the micro-batch's compute cannot hide (cost/step.py)."""
    from megasolve.cost.step import fsdp_microbatch_comm_s
    from megasolve.models.params import stage_params

    spec = load_preset("llama-3.1-70b")
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    layout = Layout(dp=64, fsdp=True)
    stage = stage_params(spec, layout)[0]
    traffic = fsdp_microbatch_comm_s(cluster, layout, stage.params, stage.layers, num_units=80)
    # >= 2 all-gathers of 2 B + one reduce-scatter of 4 B per parameter, at the NIC or faster: the
    # per-GPU volume (63/64) x 8 B x 70.55B = 555 GB; the hierarchical collective model splits it over
    # 8 NICs and NVLink, so the time must lie between volume/(NVLink bw) and volume/(one NIC bw)
    volume = 63 / 64 * (4 * stage.layers.total + 4 * stage.params.total)
    assert volume / cluster.gpu.nvlink_bytes_per_s < traffic < volume / cluster.gpu.nic_bytes_per_s
    short = step_time(spec, cluster, Workload(seq_length=1024, global_batch_size=64), layout)
    long = step_time(spec, cluster, Workload(seq_length=8192, global_batch_size=64), layout)
    assert short.breakdown_s["dp_comm"] > 0  # 1K tokens per micro-batch cannot hide ~2 s of traffic
    assert long.breakdown_s["dp_comm"] < short.breakdown_s["dp_comm"]


def test_offloading_is_hidden_over_c2c_and_exposed_over_slow_pcie():
    spec = load_preset("llama-3.1-8b")
    workload = Workload(seq_length=8192, global_batch_size=64)
    layout = Layout(dp=8, cpu_offload_layers=31)
    fast = step_time(spec, Cluster.from_flags(num_gpus=8, gpu="gb200"), workload, layout)
    slow = step_time(spec, Cluster.from_flags(num_gpus=8, gpu="l40s"), workload, layout)
    # over NVLink-C2C only the copies' own HBM traffic remains (2 x bytes / HBM bandwidth, offload.py)
    assert 0.0 < fast.breakdown_s["offload"] < 0.03 * fast.step_s  # 8 micro-batches x 31 layers x 2 x ~1.2 GB / 8 TB/s
    assert slow.breakdown_s["offload"] > 10 * fast.breakdown_s["offload"]


# ---------------------------------------------------------------------------- weight traffic per micro-batch
def test_expert_weight_stream_is_amortised_over_the_micro_batch():
    # the wgrad accumulates into fp32 main_grad and the weights are read twice per micro-batch, so the
    # per-token time of an MoE layer with 32 local experts (DeepSeek-V3, EP 8) falls as mbs grows
    spec, cluster = load_preset("deepseek-v3"), Cluster.from_flags(num_gpus=8, gpu="b200")
    workload = Workload(seq_length=4096, global_batch_size=64, precision="fp8")
    per_token = [layer_time(spec, cluster, workload, ActivationShape(tp=1, cp=1, mbs=mbs, sequence_parallel=False),
                            ep=8, moe=True, recompute="none").compute / mbs for mbs in (1, 2, 4)]
    assert per_token[0] > per_token[1] > per_token[2]


def test_output_layer_runs_in_bf16_unless_the_mxfp8_output_projection_is_on():
    """gpt_model.py builds the LM head as a plain bf16 ColumnParallelLinear; FP8 training speeds it up
    only with fp8_output_proj (MXFP8 recipe)."""
    from megasolve.cost.step import logits_time
    from megasolve.models.errors import MegasolveError

    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="b200")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    bf16 = logits_time(spec, cluster, Workload(seq_length=4096), shape).compute
    fp8 = logits_time(spec, cluster, Workload(seq_length=4096, precision="fp8", fp8_recipe="mxfp8"), shape).compute
    head = logits_time(spec, cluster, Workload(seq_length=4096, precision="fp8", fp8_recipe="mxfp8",
                                               fp8_output_proj=True), shape).compute
    assert fp8 == pytest.approx(bf16) and head < 0.75 * bf16
    with pytest.raises(MegasolveError, match="mxfp8"):
        Workload(precision="fp8", fp8_output_proj=True)


def test_flex_dispatcher_sends_one_copy_per_remote_domain():
    """--moe-token-dispatcher-type flex (DeepEP) deduplicates a token's copies per remote NVLink domain;
    plain all-to-all sends one per chosen expert: more bytes once EP leaves the NVLink domain."""
    from megasolve.cost.step import ep_comm_s

    spec, cluster = load_preset("deepseek-v3"), Cluster.from_flags(num_gpus=64, gpu="h100")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    times = {d: ep_comm_s(spec, cluster, Workload(seq_length=4096, moe_dispatcher=d), shape, 32, "none")
             for d in ("flex", "alltoall")}
    assert 0 < times["flex"] < times["alltoall"]
    inside = {d: ep_comm_s(spec, cluster, Workload(seq_length=4096, moe_dispatcher=d), shape, 8, "none")
              for d in ("flex", "alltoall")}
    # within one NVLink domain DeepEP still sends one copy per distinct GPU (is_token_in_rank), NCCL one
    # per expert, both over NVLink: a smaller gap than across nodes
    assert inside["flex"] <= inside["alltoall"]
    assert times["alltoall"] / times["flex"] > inside["alltoall"] / inside["flex"]


# ---------------------------------------------------------------------------- combined 1F1B (EP overlap)
def test_combined_1f1b_warmup_and_cooldown_expose_their_ep_traffic():
    """``--overlap-moe-expert-parallel-comm`` pairs a forward with a backward layer by layer; the warm-up forwards
    and cool-down backwards of each stage (``2(p - r - 1) + (v - 1)p + 1`` chunk-units, ``schedules.py``
    L963-970) have no partner, so their EP traffic is all exposed: once per step, per stage, what one MoE layer's
    pairing hid, times the stage's MoE layers per chunk. Without the overlap there is nothing to add."""
    from megasolve.cost.layers import stage_layers
    from megasolve.cost.step import combined_warmup_units, unpaired_ep_s

    assert [combined_warmup_units(8, 4, r) for r in (0, 3, 7)] == [39, 33, 25]
    assert combined_warmup_units(1, 1, 0) == 1 and combined_warmup_units(4, 2, 0, group=2) == 9
    # Megatron-MoE-ModelZoo's Qwen3-235B EP 32 layout (benchmarks/ep_locality_study.yaml)
    spec, cluster = load_preset("qwen3-235b-a22b"), Cluster.from_flags(num_gpus=256, gpu="h100")
    modules = ("layernorm", "moe_act")
    layout = Layout(tp=2, pp=8, vpp=4, ep=32, etp=1, mbs=1, dp=16, sequence_parallel=True, recompute="selective",
                    recompute_modules=modules, account_for_embedding=True, account_for_loss=True)
    paired = Workload(seq_length=4096, global_batch_size=2048, moe_dispatcher="flex", moe_ep_overlap=True)
    shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True, etp=1)
    extra = unpaired_ep_s(spec, cluster, paired, shape, ep=32, recompute="selective", recompute_modules=modules)
    assert extra > 0
    alone = dataclasses.replace(paired, moe_ep_overlap=False)
    assert unpaired_ep_s(spec, cluster, alone, shape, ep=32, recompute="selective", recompute_modules=modules) == 0
    stages = stage_times(spec, cluster, paired, layout)
    for r in (0, 7):
        moe_layers = sum(n for kind, recomputed, n in list(stage_layers(spec, layout, paired))[r].counts()
                         if kind.moe and not recomputed)
        assert stages[r].unpaired_s == pytest.approx(combined_warmup_units(8, 4, r) * moe_layers / 4 * extra,
                                                     rel=1e-9)
    assert stages[0].unpaired_s > stages[7].unpaired_s > 0
    assert all(s.unpaired_s == 0 for s in stage_times(spec, cluster, alone, layout))
    step = step_time(spec, cluster, paired, layout)
    assert sum(step.breakdown_s.values()) == pytest.approx(step.step_s, rel=1e-9)
