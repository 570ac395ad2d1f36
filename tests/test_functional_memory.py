"""Peak allocated memory of Megatron-LM's H100 functional tests (``benchmarks/megatron_functional_memory.py``,
data ``tests/data/megatron_functional_memory.json``): every case is read by the launch-script reader, and
the fit split's last-rank prediction meets issue 14's targets. The holdout is only read here, never scored."""

from __future__ import annotations

import dataclasses
import json

import pytest
from _benchmarks import load

FM = load("megatron_functional_memory")
CASES = json.loads(FM.DATA.read_text())["cases"]
FIT = {c["name"]: c for c in CASES if c["split"] == "fit"}


def test_the_holdout_is_the_frozen_hash_split():
    assert len(CASES) >= 90
    assert all(c["split"] == FM.split_of(c["name"]) for c in CASES)
    assert 0.25 <= sum(c["split"] == "holdout" for c in CASES) / len(CASES) <= 0.4


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_every_case_is_read_from_its_flags(case):
    run = FM.read_case(case)
    args = case["model_args"]
    assert run.layout.tp == int(args.get("--tensor-model-parallel-size", 1))
    assert run.layout.pp == int(args.get("--pipeline-model-parallel-size", 1))
    assert run.spec.num_layers == int(args["--num-layers"])
    assert run.measured.rank == case["num_gpus"] - 1  # the last rank logs the memory


def test_fit_split_median_error_within_5_percent_and_most_within_10():
    rows = [FM.score(c) for c in FIT.values()]
    summary = FM.summary(rows)
    assert summary["skipped"] == 0
    assert summary["median_abs"] <= 0.05
    assert summary["within_10pct"] >= 0.8 * summary["n"]
    assert summary["under_10pct"] == 0, [r for r in rows if r["error"] < -0.10]  # issue 14: never 10 % under


def test_gelu_experts_run_the_unfused_activation_path():
    """A GeLU MoE (TEGroupedMLP has no fused GeLU kernel; the tests pass --no-bias-gelu-fusion) keeps the
    activation output for the probability multiply: read from the flags, and 12 layers x 8,192 routed rows
    x 1,024 x 2 B more on the EP8 last rank."""
    run = FM.read_case(FIT["moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer"])
    assert run.workload.activation_fusion is False
    assert any("routed experts' GeLU unfused" in n for n in run.notes)
    fused = FM.predict(dataclasses.replace(run, workload=dataclasses.replace(run.workload, activation_fusion=True)))
    extra = FM.predict(run).memory[-1].activations_bytes - fused.memory[-1].activations_bytes
    assert extra == 12 * (4 * 1024 * 8 * 2 // 8) * 1024 * 2
    swiglu = FM.read_case(FIT["moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed"])
    assert swiglu.workload.activation_fusion is True  # SwiGLU experts: the fused weighted kernel


@pytest.mark.parametrize("name, tolerance", [
    ("moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed", 0.04),  # MLA + MoE + MTP, unfused, VPP 4
    # + layout string, modules: the last stage's chunks hold 2, 2, 2 and 1 layers (+ MTP and loss); Megatron's schedule
    # reaches 3, 2, 2, 0 micro-batches of them in flight (14 layers; memory.chunk_inflight), where the even share
    # counted 7 chunk-units of 7/4 layers (12.25): +7.4 % over since, what the per-layer terms of this recompute mix
    # (layernorm, mla_up_proj, moe_act) keep beyond Megatron's, not found
    ("moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental", 0.08),
    ("gpt/gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion", 0.05),  # the compiled fused loss's fp32 transient
    ("gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute", 0.06),  # deferred wgrad buffers
    # GeLU experts: +1.0 point (+4.0 % -> +5.0 %) since the unfused weighted activation's fp32 backward step (traced,
    # memory.UNFUSED_WEIGHTED_BACKWARD_BYTES), added to the last stage's loss peak as every transient is (over)
    ("moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_multi_dist_optimizer_instances", 0.06),
    ("gpt/gpt3_mcore_reruns_resume_check_grads", 0.06),  # one GPU (its MODEL_ENV_VARS), 4B model unsharded
    # fine-grained activation offloading of seven modules (+ selective recompute, a layout string): 2 layers' resident
    ("moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_fine_grained_offloading", 0.06),
    ("moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_no_mtp_no_a2a_ovlp_fine_grained_offloading", 0.06),
])
def test_the_realistic_cases_are_within_a_few_percent(name, tolerance):
    row = FM.score(FIT[name])
    assert abs(row["error"]) <= tolerance, row


def test_unmodelled_features_are_named():
    notes = " ".join(FM.score(FIT["moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_resume_torch_dist_attn_cudagraph"])["notes"])
    assert "per-layer CUDA graphs (--cuda-graph-impl transformer_engine) are not modelled" in notes
    notes = " ".join(FM.score(FIT["gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute"])["notes"])
    assert "the time it saves" in notes and "is not modelled" in notes


def test_deferred_wgrad_and_optimizer_instances_are_read():
    run = FM.read_case(FIT["gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute"])
    assert run.workload.defer_embedding_wgrad and run.workload.wgrad_deferral_limit == 2
    run = FM.read_case(FIT["moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_multi_dist_"
                           "optimizer_instances"])
    assert run.workload.dist_optimizer_instances == 2
    run = FM.read_case(FIT["moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_fine_grained_offloading"])
    assert run.workload.offload_modules == ("expert_fc1", "moe_act", "attn_norm", "mlp_norm", "qkv_linear", "core_attn",
                                            "attn_proj")


def test_checkpoint_consistency_cases_use_their_base_runs_gpus():
    # run_ci_test.sh runs each MODEL_ARGS* key with MODEL_ENV_VARS.<key>.GPUS_PER_NODE; the base run has 1
    assert FIT["gpt/gpt3_mcore_reruns_resume_check_grads"]["num_gpus"] == 1


def test_launch_defaults_are_megatrons():
    holdout = {c["name"]: c for c in CASES if c["split"] == "holdout"}  # read, not scored
    run = FM.read_case(holdout["gpt/gpt3_7b_tp4_pp1_memory_speed"])
    assert run.layout.sequence_parallel is False and run.workload.hidden_dropout == 0.1
    run = FM.read_case(FIT["moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental"])
    assert run.layout.recompute_modules == ("moe_act", "layernorm", "mla_up_proj", "mlp")


# ---------------------------------------------------------------------------- the same tests run on GB200
GB200 = json.loads(FM.PLATFORMS["gb200"][2].read_text())
GB200_FIT = {c["name"]: c for c in GB200["cases"] if c["split"] == "fit"}
# fit-split cases more than 10 % under, each with why (any other one fails the test below)
GB200_KNOWN_UNDER = {
    # ModelOpt knowledge distillation: a teacher loaded beside the student, named as not modelled (the run's note)
    "gpt/gpt3_mcore_te_tp2_pp1_modelopt_distill_resume",
    # Megatron-FSDP, MLA, unfused attention, 5 MoE layers at micro-batch 32: 25 % under, not explained (its 2-layer,
    # micro-batch-4 sibling deepseek_proxy_fsdp_ep2_fsdp2_1node is 3 % under; no H100 golden of either)
    "moe/deepseek_proxy_fsdp_ep2_fsdp2",
}


def test_gb200_goldens_are_the_frozen_split_of_the_same_names():
    """The GB200 data keeps each case name's split (the H100 holdout's names are GB200 holdout too)."""
    assert GB200["gpu"] == "gb200" and len(GB200["cases"]) >= 120
    assert all(c["split"] == FM.split_of(c["name"]) for c in GB200["cases"])
    assert all(c["num_gpus"] in (4, 8) for c in GB200["cases"])  # trays of 4: one or two of them


def test_gb200_fit_split_within_5_percent_and_no_unexplained_miss():
    rows = [FM.score(c, "gb200") for c in GB200_FIT.values()]
    summary = FM.summary(rows)
    assert summary["skipped"] == 0
    assert summary["median_abs"] <= 0.05
    assert summary["within_10pct"] >= 0.9 * summary["n"]
    assert {r["name"] for r in rows if r["error"] < -0.10} == GB200_KNOWN_UNDER
    distill = next(r for r in rows if "modelopt_distill" in r["name"])
    assert any("knowledge distillation" in n for n in distill["notes"])


def test_gb200_and_h100_peaks_of_one_case_agree_as_predicted():
    """Blackwell's PyTorch cuBLAS workspace is Hopper's 32 MiB (pytorch/pytorch#175344), and --deterministic-mode
    sets 32 MiB anyway: cases run on both measure within 7 % of each other, and megasolve's GB200 / H100 ratio follows
    the measured one (median 0.6 % apart; with 8.125 MiB on Blackwell, 3.2 %, up to 16 %). Four goldens that leave the
    size to PyTorch measure 48 MiB less on GB200 than on H100 -- an older PyTorch, it seems -- and stay up to 7 %
    apart."""
    import statistics

    h100 = {c["name"]: c for c in CASES if c["split"] == "fit"}
    pairs = [(h100[n], c) for n, c in GB200_FIT.items() if n in h100 and h100[n]["num_gpus"] == c["num_gpus"]]
    assert len(pairs) >= 40
    apart = []
    for h, g in pairs:
        measured = g["peak_allocated_bytes"] / h["peak_allocated_bytes"]
        predicted = FM.score(g, "gb200")["predicted_gb"] / FM.score(h)["predicted_gb"]
        assert abs(measured - 1) <= 0.07, h["name"]
        apart.append(abs(predicted / measured - 1))
    assert statistics.median(apart) <= 0.01 and max(apart) <= 0.07
