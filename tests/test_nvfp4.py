"""NVFP4 training (``--precision fp4``: Megatron-LM ``--fp4-format e2m1``, Transformer Engine's NVFP4BlockScaling)
and the layers a quantized run keeps in bf16 (``--first-last-layers-bf16``)."""

from __future__ import annotations

import dataclasses

import pytest
from _solve_check import solve_equals_estimate

from megasolve.cli.launch import megatron_flags
from megasolve.cost.layers import layer_kind, stage_layers
from megasolve.cost.memory import (ActivationShape, fp8_weight_bytes_per_param, gemm_input_bytes, stage_memory,
                                   static_bytes)
from megasolve.cost.moe_routing import quantization_align
from megasolve.cost.step import layer_time, step_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import NVFP4_BYTES, precision_fields
from megasolve.models.params import RankParams
from megasolve.solver.solve import solve
from megasolve.topology.cluster import Cluster
from megasolve.topology.gpus import all_gpus, get_gpu

FP4 = Workload(seq_length=8192, global_batch_size=256, precision="fp4")


def test_nvfp4_bytes_and_the_cli_spellings():
    """E2M1 (4 bits) plus one E4M3 scale byte per 16 elements; nvfp4 / fp4-params spell the same precision."""
    assert NVFP4_BYTES == 0.5625
    assert precision_fields("nvfp4") == {"precision": "fp4", "fp8_param_gather": False}
    assert precision_fields("fp4-params") == {"precision": "fp4", "fp8_param_gather": True}
    assert Workload(precision="fp4", fp8_param_gather=True).param_bytes == NVFP4_BYTES
    assert Workload(precision="fp8", fp8_param_gather=True).param_bytes == 1 and Workload().param_bytes == 2
    # MXFP8 primary weights are all-gathered in bf16 through the gradient buffer (param_and_grad_buffer.py L1160-1179)
    assert Workload(precision="fp8", fp8_recipe="mxfp8", fp8_param_gather=True).param_bytes == 2


def test_only_blackwell_parts_have_fp4_tensor_cores():
    """The catalog's dense FP4 peaks: 2x FP8 on B200 / GB200, 3x on Blackwell Ultra; none before sm 10.0."""
    for gpu in all_gpus():
        has_fp4 = gpu.fp4_flops is not None
        assert has_fp4 == (gpu.compute_capability is not None and gpu.compute_capability >= 10.0), gpu.name
    assert {g: get_gpu(g).fp4_flops / get_gpu(g).fp8_flops for g in ("b200", "gb200", "b300", "gb300")} == {
        "b200": 2.0, "gb200": 2.0, "b300": 3.0, "gb300": 3.0}
    assert get_gpu("gb300").peak_flops("fp4") == 15e15
    assert get_gpu("h100").peak_flops("fp4") == get_gpu("h100").bf16_flops


def test_fp4_on_hopper_is_refused_with_a_fix(capsys):
    """As FP8 on Ampere: exit 2 with the rule and its fix, no traceback."""
    from megasolve.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--tp", "1", "--precision", "nvfp4"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no FP4 tensor cores" in err and "Blackwell" in err


def test_nvfp4_memory_terms():
    """The cached NVFP4 weight keeps rowwise and columnwise data (2 x 0.5625 B per GEMM weight); the saved GEMM
    inputs are the columnwise NVFP4 copy; with NVFP4 primary weights the bf16 copy goes."""
    assert fp8_weight_bytes_per_param("gb200", "nvfp4") == 2 * NVFP4_BYTES
    assert gemm_input_bytes(FP4) == NVFP4_BYTES
    params = RankParams(tp_sharded=1_000_000)
    cached = static_bytes(params, dense_shards=1, expert_shards=1, distributed_optimizer=False, precision="fp4",
                          fp8_bytes=2 * NVFP4_BYTES)
    primary = static_bytes(params, dense_shards=1, expert_shards=1, distributed_optimizer=False, precision="fp4",
                           fp8_param_gather=True, fp8_bytes=2 * NVFP4_BYTES)
    assert cached.weights == 2_000_000 + 1_125_000 and primary.weights == 1_125_000
    assert quantization_align(FP4) == 128  # fp4_utils.py get_fp4_align_size


def test_nvfp4_is_faster_than_fp8_and_keeps_less_activation_memory():
    spec, cluster = load_preset("llama-3.1-70b"), Cluster.from_flags(num_gpus=64, gpu="gb300")
    layout = Layout(tp=2, pp=4, vpp=5, dp=8, mbs=1, sequence_parallel=True)
    fp8 = dataclasses.replace(FP4, precision="fp8", fp8_recipe="mxfp8")
    assert step_time(spec, cluster, FP4, layout).step_s < step_time(spec, cluster, fp8, layout).step_s
    acts = [max(s.activations_bytes for s in stage_memory(spec, cluster, w, layout)) for w in (FP4, fp8)]
    assert acts[0] < acts[1]


def test_layers_kept_in_bf16_are_their_own_kind_and_cost_bf16_time():
    """--num-layers-at-end-in-bf16 N: the last N decoder layers (global numbers, Megatron's
    is_first_last_bf16_layer) run at bf16; a stage sum holds them as kinds of their own."""
    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="b200")
    workload = dataclasses.replace(FP4, num_layers_at_start_in_bf16=1, num_layers_at_end_in_bf16=2)
    assert [layer_kind(spec, i, workload).bf16 for i in (0, 1, 29, 30, 31)] == [True, False, False, True, True]
    stages = stage_layers(spec, Layout(pp=2), workload)
    assert [[(k.name, n) for k, n in s.base] for s in stages] == [[("dense_bf16", 1), ("dense", 15)],
                                                                  [("dense_bf16", 2), ("dense", 14)]]
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    kind = layer_kind(spec, 31, workload)
    kept = layer_time(spec, cluster, workload, shape, ep=1, moe=False, recompute="none", kind=kind)
    bf16 = layer_time(spec, cluster, Workload(seq_length=8192, global_batch_size=256), shape, ep=1, moe=False,
                      recompute="none", kind=layer_kind(spec, 31))
    assert kept.compute == pytest.approx(bf16.compute)
    layout = Layout(dp=8)
    steps = [step_time(spec, cluster, w, layout).step_s
             for w in (FP4, workload, dataclasses.replace(FP4, precision="bf16"))]
    assert steps[0] < steps[1] < steps[2]


def test_bf16_layers_follow_megatrons_rules():
    with pytest.raises(MegasolveError, match="Delayed scaling"):
        Workload(precision="fp8", num_layers_at_end_in_bf16=1)
    with pytest.raises(MegasolveError, match="only in an FP8 or FP4 run"):
        Workload(num_layers_at_start_in_bf16=1)
    Workload(precision="fp8", fp8_recipe="tensorwise", num_layers_at_start_in_bf16=1, num_layers_at_end_in_bf16=1)
    # FP8: at most a stage's layers at each end (transformer_config.py L1532-1556); 32 layers over pp 8 hold 4
    from megasolve.solver.api import check_layout

    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    workload = Workload(precision="fp8", fp8_recipe="tensorwise", num_layers_at_end_in_bf16=5)
    with pytest.raises(MegasolveError, match="layers per pipeline stage"):
        check_layout(spec, cluster, workload, Layout(pp=8))
    check_layout(spec, cluster, workload, Layout(pp=4, dp=2))


def test_solve_equals_estimate_with_bf16_layers_and_the_launch_sets_nvfp4():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=16, gpu="gb200")
    workload = Workload(seq_length=4096, global_batch_size=256, precision="fp4", num_layers_at_end_in_bf16=4)
    result = solve_equals_estimate(spec, cluster, workload, top_k=3)
    flags = " ".join(megatron_flags(spec, cluster, result.layouts[0].workload, result.layouts[0].layout))
    for flag in ("--fp4-format e2m1", "--fp4-recipe nvfp4", "--first-last-layers-bf16",
                 "--num-layers-at-start-in-bf16 0", "--num-layers-at-end-in-bf16 4"):
        assert flag in flags
    assert "--fp8-format" not in flags and "--fp4-param-gather" not in flags


def test_layers_kept_in_bf16_keep_bf16_gemm_inputs_in_estimate_and_solve():
    """Nemotron 3 Super's NVFP4 recipe keeps its last 14 layers in bf16: they save bf16 GEMM inputs (more
    activation memory than the NVFP4 copies), and the solver's tables cost them as estimate does."""
    spec, cluster = load_preset("nemotron-3-super-120b-a12b"), Cluster.from_flags(num_gpus=64, gpu="gb300")
    workload = Workload(seq_length=8192, global_batch_size=512, precision="fp4", num_layers_at_end_in_bf16=14)
    layout = Layout(tp=1, ep=64, dp=64, mbs=1)
    acts = [max(s.activations_bytes for s in stage_memory(spec, cluster, w, layout))
            for w in (dataclasses.replace(workload, num_layers_at_end_in_bf16=0), workload)]
    assert acts[1] > acts[0]
    solve_equals_estimate(spec, cluster, workload)


def _llama_8b_log_run(gpu: str, **printed):
    """The run read from a Megatron-LM log of Llama-3.1-8B on 8 GPUs: its printed argument dump (with ``printed``
    added) and one iteration line."""
    from megasolve.solver.runs import run_from_log

    args = dict(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
                group_query_attention=True, swiglu=True, vocab_size=128256, tensor_model_parallel_size=1,
                pipeline_model_parallel_size=1, world_size=8, seq_length=4096, global_batch_size=64,
                micro_batch_size=1, bf16=True) | printed
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (40 - len(k))} {v}" for k, v in sorted(args.items())]
    lines += ["-------------------- end of arguments ---------------------",
              " [2026-01-01 00:00:00] iteration       10/     100 | elapsed time per iteration (ms): 4000.0 |"]
    return run_from_log("\n".join(lines), "log", {"gpu": gpu})


def test_a_megatron_log_of_an_nvfp4_run_reads_its_precision_and_bf16_layers():
    """An argument dump prints ``fp4 .... e2m1`` (TC fp4, --fp4-format) and ``fp4_param`` (--fp4-param-gather);
    first_last_layers_bf16 without counts takes Megatron-Core's defaults, one layer at each end."""
    run = _llama_8b_log_run("b200", seq_length=8192, fp4="e2m1", fp4_param=True, first_last_layers_bf16=True)
    assert run.workload.precision == "fp4" and run.workload.fp8_param_gather
    assert run.workload.bf16_layers == (1, 1)


# ---------------------------------------------------------------------------- Muon (--optimizer muon)
def test_muon_newton_schulz_flops_by_hand():
    """One 4,096 x 14,336 fc2 weight: 5 steps of (4 m^2 n + 2 m^3) with m = 4,096, n = 14,336."""
    from megasolve.cost.compute import _muon_layer_matrices, muon_ns_flops_per_param

    spec = load_preset("llama-3.1-8b")
    dense, expert = _muon_layer_matrices(spec, 0)
    assert (4096, 14336, 1) in dense and (2 * 14336, 4096, 1) in dense and expert == []
    assert (512, 4096, 8) in dense and (128, 4096, 16) in dense  # QKV split per query group
    m, n = 4096, 14336
    assert 5 * (4 * m * m * n + 2 * m ** 3) / (m * n) == pytest.approx(93623, rel=1e-4)
    ratio, none = muon_ns_flops_per_param(spec)
    assert 70_000 < ratio < 95_000 and none == 0.0


def test_muon_state_and_step():
    """Muon keeps 8 B (fp32 main weight + momentum) per managed 2-D weight instead of Adam's 12, the embedding and
    output layer stay Adam; its Newton-Schulz step is charged to the optimizer term, divided by the distributed
    optimizer's shards and run on the whole matrix by every TP rank."""
    params = RankParams(tp_sharded=1_000_000, replicated=10_000, expert=2_000_000)
    adam = static_bytes(params, dense_shards=1, expert_shards=1, distributed_optimizer=False)
    muon = static_bytes(params, dense_shards=1, expert_shards=1, distributed_optimizer=False, optimizer="muon",
                        bf16_only=200_000)
    assert adam.optimizer - muon.optimizer == 4 * (800_000 + 2_000_000)
    spec, cluster = load_preset("llama-3.1-70b"), Cluster.from_flags(num_gpus=64, gpu="h100")
    layout = Layout(tp=4, pp=4, dp=4, mbs=1, sequence_parallel=True)
    base = Workload(seq_length=8192, global_batch_size=256)
    with_muon = dataclasses.replace(base, optimizer="muon")
    t_adam, t_muon = (step_time(spec, cluster, w, layout) for w in (base, with_muon))
    assert t_muon.breakdown_s["optimizer"] - t_adam.breakdown_s["optimizer"] > 0.3  # ~1e16 FLOPs / 16 ranks
    mem = [max(s.optimizer_bytes for s in stage_memory(spec, cluster, w, layout)) for w in (base, with_muon)]
    assert mem[1] < 0.75 * mem[0]


def test_muon_reads_exports_and_rules():
    run = _llama_8b_log_run("h100", optimizer="dist_muon")
    assert run.workload.optimizer == "muon" and run.layout.distributed_optimizer
    cluster = Cluster.from_flags(num_gpus=8, gpu="h100")
    flags = " ".join(megatron_flags(run.spec, cluster, run.workload, run.layout))
    assert "--optimizer muon" in flags and "--use-distributed-optimizer" in flags
    with pytest.raises(MegasolveError, match="fsdp"):  # Muon under Megatron-FSDP is refused (not modelled)
        solve(run.spec, cluster, run.workload, top_k=2, time_limit_s=60, explain=False, fixed={"fsdp": True})


def test_nvfp4_layernorm_linear_keeps_both_copies_under_sequence_parallelism():
    """TE's LayerNormLinear drops the rowwise copy of its quantized norm output only for MXFP8 / block-scaled FP8
    or when nothing is gathered: under NVFP4 with SP the fused QKV / fc1 input keeps both (2 x 0.5625 B)."""
    from megasolve.cost.memory import attention_activation_terms, fused_norm_output_bytes, mlp_activation_terms

    spec = load_preset("llama-3.1-8b")
    sp = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    no_sp = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    assert fused_norm_output_bytes(FP4, sp) == 2 * NVFP4_BYTES and fused_norm_output_bytes(FP4, no_sp) == NVFP4_BYTES
    fp8 = dataclasses.replace(FP4, precision="fp8", fp8_recipe="mxfp8")
    assert fused_norm_output_bytes(fp8, sp) == 1
    T = FP4.seq_length
    assert attention_activation_terms(spec, FP4, sp)["attn_fused_norm_output"] == 2 * NVFP4_BYTES * T * 4096 / 2
    assert mlp_activation_terms(spec, FP4, no_sp, False)["mlp_fused_norm_output"] == NVFP4_BYTES * T * 4096


def test_settings_the_cost_does_not_follow_are_named():
    """A log's Muon settings other than Megatron-LM's defaults and a custom FP4 recipe are costed as the defaults,
    said rather than dropped."""
    run = _llama_8b_log_run("b200", optimizer="muon", muon_tp_mode="blockwise", muon_num_ns_steps=5, fp4="e2m1",
                            fp4_recipe="custom")
    assert any("--muon-tp-mode blockwise costed as Megatron-LM's default duplicated" in n for n in run.notes)
    assert not any("--muon-num-ns-steps" in n for n in run.notes)
    assert any("--fp4-recipe custom costed as nvfp4" in n for n in run.notes)


def test_a_bridge_config_dump_reads_muon_and_nvfp4():
    """Megatron-Bridge prints its ConfigContainer as YAML: ``optimizer: muon`` under the ``optimizer:`` section (its
    OptimizerConfig field) and the mixed-precision ``fp4`` keys under ``mixed_precision:``."""
    dump = "\n".join([
        "model:", "  num_layers: 32", "  hidden_size: 4096", "  ffn_hidden_size: 14336", "  num_attention_heads: 32",
        "  num_query_groups: 8", "  kv_channels: 128", "  vocab_size: 128256", "  seq_length: 8192",
        "  tensor_model_parallel_size: 2", "  pipeline_model_parallel_size: 1", "  sequence_parallel: true",
        "mixed_precision:", "  fp4: e2m1", "  fp4_recipe: nvfp4", "  fp4_param_gather: false",
        "optimizer:", "  _target_: megatron.bridge.training.config.OptimizerConfig", "  lr: 0.0003",
        "  optimizer: muon", "  use_distributed_optimizer: true",
        "train:", "  global_batch_size: 64", "  micro_batch_size: 1",
        "Step Time : 4.10s GPU utilization: 500.0MODEL_TFLOP/s/GPU"])
    from megasolve.solver.runs import run_from_log

    run = run_from_log(dump, "dump", {"gpu": "b200", "num_gpus": 8, "model": "llama-3.1-8b"})
    assert run.workload.optimizer == "muon" and run.layout.distributed_optimizer
    assert run.workload.precision == "fp4" and not run.workload.fp8_param_gather
    assert (run.layout.tp, run.layout.dp) == (2, 4)


def test_tp_comm_overlap_only_where_userbuffers_can_gather():
    """TE's userbuffers all-gather bf16, per-tensor FP8 and MXFP8 tensors and raise for NVFP4 and blockwise FP8
    (module/base.py fill_userbuffers_buffer_for_all_gather): refused with the fix, never searched, and a log that
    says it is read without it, with a note."""
    from megasolve.solver.knobs import COMM_KNOBS

    with pytest.raises(MegasolveError, match="userbuffers.*NVFP4"):
        Workload(precision="fp4", tp_comm_overlap=True)
    with pytest.raises(MegasolveError, match="blockwise FP8"):
        Workload(precision="fp8", fp8_recipe="blockwise", tp_comm_overlap=True)
    assert Workload(precision="fp8", fp8_recipe="mxfp8", tp_comm_overlap=True).tp_overlap_supported
    spec, cluster = load_preset("llama-3.1-70b"), Cluster.from_flags(num_gpus=16, gpu="b200")
    for precision, can in (("fp4", False), ("fp8", True)):
        result = solve(spec, cluster, Workload(seq_length=8192, global_batch_size=64, precision=precision,
                                               fp8_recipe="mxfp8"),
                       top_k=5, time_limit_s=120, explain=False, knobs=COMM_KNOBS)
        tp_sp = [r for r in result.layouts if r.layout.tp > 1 and r.layout.sequence_parallel]
        assert tp_sp and all(r.workload.tp_comm_overlap == can for r in tp_sp)
    from megasolve.solver.tables import CostTables  # whatif's feasibility search builds its tables directly
    assert "tp_comm_overlap" not in CostTables(spec, cluster, Workload(precision="fp4"), knobs=COMM_KNOBS).knobs
    run = _llama_8b_log_run("b200", fp4="e2m1", tensor_model_parallel_size=2, sequence_parallel=True,
                            tp_comm_overlap=True)
    assert run.workload.precision == "fp4" and not run.workload.tp_comm_overlap
    assert any("userbuffers cannot gather NVFP4" in n for n in run.notes)
