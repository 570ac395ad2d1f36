"""The command line: exit codes, one-line errors, the JSON contract, fast start."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from megasolve.cli.main import cli, main


def run(args: list[str]) -> tuple[int, str, str]:
    """Run through ``main`` (the console entry point) and capture exit code, stdout, stderr."""
    proc = subprocess.run([sys.executable, "-c", "from megasolve.cli.main import main; main()", *args],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def loaded_by(args: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``megasolve ARGS`` (exit code 0)."""
    code = ("import sys; from megasolve.cli.main import cli; from click.testing import CliRunner; "
            f"r = CliRunner().invoke(cli, {args!r}); assert r.exit_code == 0, r.output; "
            f"print(sorted(m for m in {modules!r} if m in sys.modules))")
    return ast.literal_eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout)


def test_help_does_not_import_heavy_or_optional_modules():
    # the web stack (starlette, uvicorn, anyio) is imported only by `megasolve serve`
    assert loaded_by(["--help"], ("transformers", "ortools", "torch", "matplotlib", "starlette", "uvicorn",
                                  "anyio")) == []


def test_a_preset_estimate_does_not_load_the_log_readers():
    """The readers compile ~300 patterns (~140 ms): they load with ``check`` / ``calibrate``, not with a plan."""
    assert loaded_by(["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100"],
                     ("megasolve.solver.logs", "megasolve.solver.runs")) == []


def test_estimate_json_contract():
    result = CliRunner().invoke(cli, ["estimate", "--model", "llama-3.1-70b", "--gpus", "64", "--gpu", "h100",
                                      "--tp", "4", "--pp", "4", "--cp", "2", "--seq-len", "8192", "--gbs", "512",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= {"model", "cluster", "layout", "feasible", "violations", "memory", "time"}
    assert data["layout"] == {"tp": 4, "pp": 4, "vpp": 1, "cp": 2, "ep": 1, "etp": 4, "dp": 2, "mbs": 1, "gbs": 512,
                              "num_microbatches": 256, "sequence_parallel": True, "recompute": "none",
                              "recompute_num_layers": None, "recompute_modules": None,
                              "distributed_optimizer": True, "fsdp": False, "optimizer_offload_fraction": 0.0,
                              "cpu_offload_layers": 0, "account_for_embedding": False, "account_for_loss": False,
                              "first_stage_layers": None, "last_stage_layers": None, "pipeline_layout": None}
    stage0 = data["memory"]["stages"][0]
    assert stage0["params"] == 4_541_710_336 and stage0["layers"] == 20
    assert set(stage0) == {"stage", "layers", "params", "weights_gb", "grads_gb", "optimizer_gb", "activations_gb",
                           "other_gb", "total_gb", "fixed_gb", "uncertainty_gb"}
    parts = sum(stage0[k] for k in ("weights_gb", "grads_gb", "optimizer_gb", "activations_gb", "fixed_gb", "other_gb"))
    assert parts == pytest.approx(stage0["total_gb"], abs=0.006)  # each part rounded to 1 MB
    assert 0 < stage0["uncertainty_gb"] < 0.2 * stage0["total_gb"]
    assert data["memory"]["peak_uncertainty_gb"] > 0
    assert set(data["time"]["breakdown_s"]) >= {"compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm",
                                                "bubble"}


@pytest.mark.parametrize("args,needle", [
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--tp", "3"], "--gpus=8: world size (8)"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--pp", "8", "--vpp", "3"], "--vpp=3"),  # layers per stage (4) over vpp 3
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h10"], "did you mean h100"),
    (["estimate", "-m", "lama-3.1-8b", "-n", "8", "-g", "h100"], "did you mean llama-3.1-8b"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "0", "-g", "h100"], "--gpus=0"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--mbs", "-1"], "--mbs=-1"),
    (["estimate", "-m", "mixtral-8x7b", "-n", "8", "-g", "h100", "--ep", "3"], "--ep=3"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--cp", "8", "--seq-len", "100"], "--cp=8"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "a100", "--precision", "fp8"], "FP8"),
    (["estimate", "-m", "llama-3.1-8b", "-g", "h100"], "--gpus=missing"),
    (["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--top-k", "3", "--rank", "9", "-o", "megatron"],
     "--rank=9: beyond --top-k 3"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--fsdp", "--no-distributed-optimizer"],
     "Megatron-FSDP requires the distributed optimizer"),
    # FP8 primary weights need the distributed optimizer (or an FSDP): ARG L1095-1097
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--precision", "fp8-params",
      "--no-distributed-optimizer"], "--precision=fp8-params: --fp8-param-gather only supported with distributed"),
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--pp", "2", "--cpu-offload-layers", "4"],
     "no support for Pipeline parallelism with CPU offloading"),
    # Transformer Engine's recipe support by compute capability
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--precision", "fp8", "--fp8-recipe", "mxfp8"],
     "--fp8-recipe=mxfp8: h100 (compute capability 9.0) cannot run MXFP8"),
    (["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "l40s", "--precision", "fp8", "--fp8-recipe", "blockwise"],
     "--fp8-recipe=blockwise: l40s (compute capability 8.9) cannot run block-scaled FP8"),
    # an MoE knob on a dense model is an error, not silently ignored; Megatron's flag names are accepted
    (["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--moe-token-dispatcher-type", "flex"],
     "--moe-dispatcher=flex: llama-3.1-8b has no MoE layers"),
    (["whatif", "-m", "llama-3.1-8b", "--gpus", "8", "-g", "h100", "--overlap-moe-expert-parallel-comm"],
     "--moe-ep-overlap=True: llama-3.1-8b has no MoE layers"),
    (["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--moe-expert-capacity-factor", "1.0"],
     "--moe-expert-capacity-factor=1.0: llama-3.1-8b has no MoE layers"),
    # a pin that a rule forbids: the rule, not "no value of tp is allowed"
    (["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--fix", "tp=3"],
     "--fix=tp=3: num_attention_heads (32) must be a multiple of tensor_model_parallel_size (3)"),
    # a broken rule names its flag and value (it had said "layout=see message")
    (["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--precision", "fp4"], "--precision=fp4: h100 cannot"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    code, out, err = run(args)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_every_rule_names_its_flag():
    """A broken rule's error names the flag it concerns (``rules._RULE_FIELDS``), never a bare "layout"."""
    from megasolve.solver import rules

    names = {r.name for r in rules.RULES + rules.FIXED_FIELD_RULES}
    assert names - set(rules._RULE_FIELDS) == set()
    flags = set(_flags("estimate")) | {"--gpus", "--sequence-parallel"}
    assert set(rules._RULE_FIELDS.values()) <= flags, set(rules._RULE_FIELDS.values()) - flags


def _flags(command: str) -> list[str]:
    cmd = cli.commands[command]
    return [opt for param in cmd.params for opt in getattr(param, "opts", []) if opt.startswith("--")]


def test_does_not_fit_exits_1():
    code, out, err = run(["estimate", "-m", "llama-3.1-70b", "-n", "8", "-g", "a100-40g", "--tp", "8",
                          "--format", "json"])
    assert code == 1
    data = json.loads(out)
    assert data["feasible"] is False and data["violations"][-1]["rule"] == "memory_fits"


def test_models_and_gpus_json():
    models = json.loads(CliRunner().invoke(cli, ["models", "--format", "json"]).output)
    names = {m["name"] for m in models["models"]}
    assert {"deepseek-v3", "llama-3.1-405b", "qwen3-235b-a22b", "gpt3-175b"} <= names
    assert {"alias": "deepseek-v3-lite", "resolves_to": "moonlight-16b-a3b"} in models["aliases"]
    gpus = json.loads(CliRunner().invoke(cli, ["gpus", "--format", "yaml"]).output.replace("'", '"')
                      if False else CliRunner().invoke(cli, ["gpus", "--format", "json"]).output)
    assert any(g["name"] == "gb200" and g["nvlink_domain"] == 72 for g in gpus["gpus"])


def test_alias_note_goes_to_stderr():
    code, out, err = run(["estimate", "-m", "deepseek-v3-lite", "-n", "8", "-g", "h100", "--ep", "8", "-o", "json"])
    assert code in (0, 1)
    assert json.loads(out)["model"] == "moonlight-16b-a3b"
    assert "not an official model" in err


def test_megatron_launch_flags_for_uneven_vpp():
    result = CliRunner().invoke(cli, ["estimate", "-m", "deepseek-v3", "-n", "1024", "-g", "h100", "--tp", "2",
                                      "--pp", "16", "--vpp", "1", "--ep", "64", "--etp", "1",
                                      "--first-stage-layers", "1", "-o", "megatron"])
    assert "--decoder-first-pipeline-num-layers 1" in result.output
    assert "--expert-tensor-parallel-size 1" in result.output and "--sequence-parallel" in result.output
    vpp = CliRunner().invoke(cli, ["estimate", "-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4",
                                   "--pp", "4", "--vpp", "5", "-o", "megatron"])
    assert "--num-layers-per-virtual-pipeline-stage 4" in vpp.output
    assert "--virtual-pipeline-model-parallel-size" not in vpp.output


def test_entry_point_handles_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--tp", "x"])
    assert exc.value.code == 2


def test_fsdp_and_offloading_launch_settings():
    args = ["estimate", "-m", "llama-3.1-70b", "-n", "64", "-g", "gb300", "--mbs", "2", "--gbs", "256",
            "--seq-len", "8192", "--precision", "fp8", "--fsdp", "--cpu-offload-layers", "20"]
    flags = CliRunner().invoke(cli, args + ["-o", "megatron"]).output
    for flag in ("--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params",
                 "--use-distributed-optimizer", "--ckpt-format fsdp_dtensor", "--cpu-offloading-num-layers 20"):
        assert flag in flags
    bridge = CliRunner().invoke(cli, args + ["-o", "bridge"]).output
    assert "ddp.use_megatron_fsdp=true" in bridge and "model.cpu_offloading_num_layers=20" in bridge
    # Megatron-FSDP's main grads are bf16 ('auto'); --grad-reduce-in-bf16 makes releases before 2026-07 agree
    assert "--grad-reduce-in-bf16" in flags and "--megatron-fsdp-main-grads-dtype" not in flags
    fp32 = CliRunner().invoke(cli, args + ["--megatron-fsdp-main-grads-dtype", "fp32", "-o", "megatron"]).output
    assert "--megatron-fsdp-main-grads-dtype fp32" in fp32 and "--grad-reduce-in-bf16" not in fp32
    data = json.loads(CliRunner().invoke(cli, args + ["-o", "json"]).output)
    assert data["workload"]["grad_reduce_in_bf16"] is False and data["workload"]["fsdp_main_grads_dtype"] == "auto"
    wide = json.loads(CliRunner().invoke(cli, args + ["--megatron-fsdp-main-grads-dtype", "fp32", "-o", "json"]).output)
    assert wide["memory"]["peak_gb"] > data["memory"]["peak_gb"]  # 4-byte grads held, sharded and two layers whole
    assert data["layout"]["fsdp"] is True and data["layout"]["cpu_offload_layers"] == 20
    assert data["feasible"] is True  # the Bridge perf recipe's layout (279 of 288 GB)


def test_recipe_workload_flags_reach_json_and_launch_settings():
    args = ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "b200", "--precision", "fp8", "--fp8-recipe",
            "mxfp8", "--cross-entropy", "te", "--grad-reduce-in-bf16"]
    data = json.loads(CliRunner().invoke(cli, args + ["-o", "json"]).output)
    assert {k: data["workload"][k] for k in ("fp8_recipe", "cross_entropy", "grad_reduce_in_bf16")} == {
        "fp8_recipe": "mxfp8", "cross_entropy": "te", "grad_reduce_in_bf16": True}
    flags = CliRunner().invoke(cli, args + ["-o", "megatron"]).output
    # te is rejected by current Megatron-LM (arguments.py L1697-1702): the launch uses native and says so
    for flag in ("--fp8-recipe mxfp8", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl native",
                 "--grad-reduce-in-bf16"):
        assert flag in flags
    bridge = CliRunner().invoke(cli, args + ["-o", "bridge"]).output
    # Bridge builds Megatron-Core's config itself, which takes te (its performance scripts set it)
    assert "model.cross_entropy_fusion_impl=te" in bridge and "mixed_precision.grad_reduce_in_fp32=false" in bridge
    verl = CliRunner().invoke(cli, args + ["-o", "verl"]).output
    assert "++actor_rollout_ref.actor.megatron.override_ddp_config.grad_reduce_in_fp32=false" in verl
    plain = json.loads(CliRunner().invoke(cli, ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "b200",
                                                "-o", "json"]).output)
    te_peak = data["memory"]["peak_gb"]
    assert plain["workload"]["fp8_recipe"] is None and plain["memory"]["peak_gb"] > te_peak


def test_mtp_layers_replace_the_models():
    """``--mtp-layers`` sets what Megatron's --mtp-num-layers trains: 0 drops a preset's released MTP layer (a
    framework that trains without it), N > 0 adds layers of the last decoder layer's kind; a note says so."""
    base = ["estimate", "-m", "qwen3-next-80b-a3b", "-n", "32", "-g", "h100", "--tp", "1", "--pp", "4", "--ep", "8",
            "--format", "json"]
    runner = CliRunner()
    with_mtp, without = (runner.invoke(cli, base + extra) for extra in ([], ["--mtp-layers", "0"]))
    assert with_mtp.exit_code in (0, 1) and without.exit_code in (0, 1), (with_mtp.output, without.output)
    kept, dropped = json.loads(with_mtp.stdout), json.loads(without.stdout)
    assert dropped["time"]["step_s"] < kept["time"]["step_s"]
    assert dropped["memory"]["stages"][-1]["total_gb"] < kept["memory"]["stages"][-1]["total_gb"]  # the MTP stage
    assert "--mtp-layers 0: 1 MTP layer(s) of qwen3-next-80b-a3b replaced" in without.stderr
    added = runner.invoke(cli, ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--pp", "2",
                                "--mtp-layers", "1", "--format", "megatron"])
    assert added.exit_code == 0 and "--mtp-num-layers 1" in added.stdout, added.output
    bad = runner.invoke(cli, ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--mtp-layers", "-1"])
    assert bad.exit_code == 2


def test_default_sequence_length_stays_inside_learned_position_embeddings():
    """GPT-3 / GPT-2 learn 2048 / 1024 positions: without --seq-len the plan takes that length and says so (stderr);
    a --seq-len the user gives is kept and refused by Megatron's rule (exit 2)."""
    code, out, err = run(["estimate", "-m", "gpt2-medium", "-n", "8", "-g", "h100", "-o", "json"])
    assert code == 0, err
    assert json.loads(out)["workload"]["seq_length"] == 1024
    assert "learned position embeddings cover 1024 tokens" in err
    code, _, err = run(["estimate", "-m", "gpt2-medium", "-n", "8", "-g", "h100", "--seq-len", "4096"])
    assert code == 2 and "max_position_embeddings (1024)" in err
    result = CliRunner().invoke(cli, ["whatif", "-m", "gpt2-medium", "-g", "h100", "-n", "8", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert {p["workload"]["seq_length"] for p in json.loads(result.stdout)["points"]} == {1024}
    # rejected input: the one error line only, no note about the default
    code, _, err = run(["estimate", "-m", "gpt2-medium", "-g", "h100"])
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --gpus"), err
    # a RoPE model keeps the default
    code, out, _ = run(["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "-o", "json"])
    assert json.loads(out)["workload"]["seq_length"] == 4096


def test_solve_says_what_the_fused_loss_would_save_number_one(capsys):
    """Llama-3.1-8B on 8 H100 (a 128,256-entry vocabulary on the last stage): #1 under Megatron's default unfused
    loss (52 B of HBM traffic a logit) would be faster with --cross-entropy-loss-fusion (28 B); a plan already
    costed with a fused loss gets no such line."""
    main(["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--top-k", "1"])
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "fused loss" in x)
    faster, slower = (float(v) for v in re.search(r"take (\d+\.\d+) s a step instead of (\d+\.\d+)", line).groups())
    assert 0.95 < faster / slower < 0.99
    main(["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--top-k", "1", "--cross-entropy", "native"])
    assert "fused loss" not in capsys.readouterr().err
