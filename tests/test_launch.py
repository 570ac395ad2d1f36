"""Launch exports: every ``--format megatron`` flag is one Megatron-LM defines, and parsing the printed
command back gives the planned model and layout; the override formats use each parser's value syntax.

``tests/data/megatron_lm_arguments.json`` records every option of Megatron-LM's real parser
(``add_megatron_arguments`` @ d98e8a64: option strings, dest, action, type, nargs, choices, default;
``benchmarks/launch_parsers.py record-megatron-args`` writes it). The parser rebuilt from it accepts
exactly those options with the same actions, so a misspelt flag, a store_false/store_true mix-up or a
missing value fails here without Megatron-LM installed. The real ``parse_args`` + ``validate_args`` run
in ``benchmarks/launch_parsers.py`` and in the test at the end when ``MEGATRON_LM_PATH`` names a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from megasolve.cli.launch import plan_settings
from megasolve.cli.main import cli
from megasolve.models.layout import Layout, Workload
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.presets import load_preset
from megasolve.topology.cluster import Cluster

ARGUMENTS = json.loads((Path(__file__).parent / "data" / "megatron_lm_arguments.json").read_text())

# The shapes the issue lists (dense, VPP, uneven, CP, MoE with EP/ETP, MLA+MTP, FSDP, FP8, recompute N), plus
# account-for, the overlap knobs and an attention variant (sliding windows + sinks under CP)
CASES = {
    "dense": ["-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--tp", "2"],
    "vpp": ["-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4", "--pp", "4", "--vpp", "5"],
    "uneven": ["-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "8", "--pp", "4",
               "--first-stage-layers", "19", "--last-stage-layers", "19"],
    "account-for": ["-m", "llama-3.1-8b", "-n", "16", "-g", "h100", "--tp", "1", "--pp", "2",
                    "--account-for-embedding", "--account-for-loss"],
    "cp": ["-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4", "--pp", "4", "--cp", "2",
           "--seq-len", "8192", "--gbs", "512"],
    "moe": ["-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--tp", "2", "--ep", "8", "--etp", "1",
            "--moe-dispatcher", "alltoall", "--recompute", "selective"],
    "mla-mtp": ["-m", "deepseek-v3", "-n", "1024", "-g", "h100", "--tp", "2", "--pp", "16", "--ep", "64",
                "--etp", "1", "--first-stage-layers", "4", "--last-stage-layers", "1"],
    "fsdp": ["-m", "llama-3.1-70b", "-n", "64", "-g", "gb300", "--mbs", "2", "--gbs", "256", "--seq-len", "8192",
             "--precision", "fp8", "--fsdp", "--cpu-offload-layers", "20"],
    "fsdp-tp": ["-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "2", "--fsdp"],
    "fp8": ["-m", "llama-3.1-8b", "-n", "8", "-g", "b200", "--precision", "fp8-params", "--fp8-recipe", "mxfp8",
            "--fp8-output-proj", "--cross-entropy", "te", "--grad-reduce-in-bf16"],
    "overlaps": ["-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--tp", "2", "--pp", "4", "--vpp", "2", "--ep", "4",
                 "--etp", "1", "--tp-comm-overlap", "--moe-ep-overlap", "--no-overlap-p2p-communication"],
    "layout-string": ["-m", "deepseek-v3", "-n", "256", "-g", "gb200", "--nvlink-domain", "64", "--pp", "4", "--ep", "64",
                      "--etp", "1", "--pipeline-layout", "Et*4|(t*4|)*14t*1mL"],
    "cp-hierarchical": ["-m", "llama-3.1-8b", "-n", "32", "-g", "h100", "--cp", "16", "--seq-len", "131072", "--gbs", "16",
                        "--cp-comm-type", "a2a+p2p"],
    "windows-sinks": ["-m", "gpt-oss-20b", "-n", "16", "-g", "h100", "--tp", "2", "--cp", "2", "--ep", "4", "--etp", "1"],
    "recompute-n": ["-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "8", "--pp", "2",
                    "--recompute", "full", "--recompute-num-layers", "3"],
    # fine-grained activation offloading and the unfused MLP activation (memory-side recipe knobs)
    "offload-unfused": ["-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--ep", "8", "--etp", "1",
                        "--offload-modules", "core_attn,attn_proj,expert_fc1,moe_act", "--no-activation-fusion"],
    # a full-iteration CUDA graph, as Megatron-Bridge 26.06 runs Qwen3-30B-A3B on 8 GB200
    "cuda-graph": ["-m", "qwen3-30b-a3b", "-n", "8", "-g", "gb200", "--ep", "8", "--mbs", "4", "--gbs", "512",
                   "--precision", "fp8", "--fp8-recipe", "mxfp8", "--cuda-graph-impl", "full_iteration"],
}


def megatron_parser() -> argparse.ArgumentParser:
    """Megatron-LM's argument parser rebuilt from the recorded definitions (custom ``type`` functions
    such as ``moe_freq_type`` keep the string, which ``spec_from_megatron_args`` then reads)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    # ARG ``moe_freq_type``: an int, or a list expression kept as the string here
    types = {"int": int, "float": float, "moe_freq_type": lambda x: int(x) if x.isdigit() else x}
    for arg in ARGUMENTS["arguments"]:
        action = arg["action"]
        if action == "_StoreTrueAction":
            parser.add_argument(*arg["options"], dest=arg["dest"], action="store_true")
        elif action == "_StoreFalseAction":
            parser.add_argument(*arg["options"], dest=arg["dest"], action="store_false")
        elif action == "BooleanOptionalAction":
            positive = [o for o in arg["options"] if not o.startswith("--no-")]
            parser.add_argument(*positive, dest=arg["dest"], action=argparse.BooleanOptionalAction)
        else:
            kwargs = {"dest": arg["dest"], "type": types.get(arg.get("type"), str), "default": arg.get("default")}
            if "nargs" in arg:
                kwargs["nargs"] = arg["nargs"]
            if arg.get("choices") and arg.get("type") in ("int", "str", "float"):
                kwargs["choices"] = arg["choices"]
            parser.add_argument(*arg["options"], **kwargs)
    return parser


def launch(case: str, fmt: str) -> str:
    result = CliRunner().invoke(cli, ["estimate", *CASES[case], "-o", fmt])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def command_parts(text: str) -> tuple[dict[str, str], list[str]]:
    """The environment assignments before ``torchrun`` and the arguments after ``pretrain_gpt.py``."""
    command = " ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#"))
    words = shlex.split(command)
    start = words.index("torchrun")
    env = dict(w.split("=", 1) for w in words[:start])
    return env, words[words.index("pretrain_gpt.py") + 1:]


def test_recorded_arguments_are_the_real_parsers():
    assert ARGUMENTS["commit"].startswith("d98e8a64") and len(ARGUMENTS["arguments"]) == 838


@pytest.mark.parametrize("case", sorted(CASES))
def test_megatron_command_parses_back_to_the_plan(case):
    """Every printed flag is a Megatron-LM option (argparse rejects anything else) and the parsed values
    rebuild the planned model (through the Megatron-argument reader) and layout."""
    result = CliRunner().invoke(cli, ["estimate", *CASES[case], "-o", "json"])
    data = json.loads(result.stdout)
    env, argv = command_parts(launch(case, "megatron"))
    args = megatron_parser().parse_args(argv)
    assert args.mock_data and args.tokenizer_type == "NullTokenizer"

    from megasolve.models.presets import resolve_model

    spec = resolve_model(CASES[case][1]).spec
    from megasolve.models.megatron_args import READ_KEYS

    parsed = spec_from_megatron_args({k: v for k, v in vars(args).items() if v is not None and k in READ_KEYS},
                                     name=spec.name)
    assert replace(parsed, max_position_embeddings=spec.max_position_embeddings) == spec
    assert args.max_position_embeddings == spec.max_position_embeddings

    layout = data["layout"]
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size, args.context_parallel_size) == \
        (layout["tp"], layout["pp"], layout["cp"])
    if spec.is_moe:
        assert (args.expert_model_parallel_size, args.expert_tensor_parallel_size) == (layout["ep"], layout["etp"])
    assert args.sequence_parallel == layout["sequence_parallel"]
    if layout["cp"] > 1:  # the CP communication the estimate priced (nargs '+', one type for every layer)
        assert args.cp_comm_type == [data["workload"]["cp_comm_type"]]
        if args.cp_comm_type == ["a2a+p2p"]:  # ARG L580-585: required, product == cp
            assert len(args.hierarchical_context_parallel_sizes) == 2
            assert args.hierarchical_context_parallel_sizes[0] * args.hierarchical_context_parallel_sizes[1] == layout["cp"]
    assert (args.micro_batch_size, args.global_batch_size, args.seq_length) == \
        (layout["mbs"], layout["gbs"], data["workload"]["seq_length"])
    assert (args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers) == \
        (layout["first_stage_layers"], layout["last_stage_layers"])
    assert (args.account_for_embedding_in_pipeline_split, args.account_for_loss_in_pipeline_split) == \
        (layout["account_for_embedding"], layout["account_for_loss"])
    if layout["vpp"] > 1:
        stages = [s["layers"] for s in data["memory"]["stages"]]
        per_virtual = args.num_layers_per_virtual_pipeline_stage
        if args.pipeline_model_parallel_layout is not None:  # the string sets vpp (ARG L927-935: no flag beside it)
            from megasolve.models.pipeline_layout import expand

            assert len(expand(args.pipeline_model_parallel_layout)) == layout["vpp"] * layout["pp"]
            assert args.num_layers_per_virtual_pipeline_stage is None and args.num_virtual_stages_per_pipeline_rank is None
        else:
            assert (per_virtual is not None and per_virtual * layout["vpp"] == stages[0]) \
                or args.num_virtual_stages_per_pipeline_rank == layout["vpp"]
    else:
        assert args.num_layers_per_virtual_pipeline_stage is None and args.num_virtual_stages_per_pipeline_rank is None
    assert args.pipeline_model_parallel_layout == layout["pipeline_layout"]  # the string as planned (or none)
    assert args.use_distributed_optimizer == layout["distributed_optimizer"]
    assert args.use_megatron_fsdp == layout["fsdp"]
    if layout["fsdp"]:
        assert args.data_parallel_sharding_strategy == "optim_grads_params" and args.ckpt_format == "fsdp_dtensor"
        assert args.gradient_accumulation_fusion is False
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] != "1"  # ARG L1166
    elif (layout["tp"] > 1 or layout["cp"] > 1) and data["cluster"]["gpu"] not in ("b200", "gb200", "gb300"):
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"  # ARG L1452-1479
    recompute = layout["recompute"]
    assert args.recompute_granularity == (None if recompute == "none" else recompute)
    if recompute == "full":
        assert args.recompute_method == ("uniform" if layout["recompute_num_layers"] is None else "block")
        assert args.recompute_num_layers == (layout["recompute_num_layers"] or 1)
    assert args.cpu_offloading_num_layers == layout["cpu_offload_layers"]
    workload = data["workload"]
    assert args.bf16 is True
    assert args.fp8 == ("hybrid" if workload["precision"] == "fp8" else None)
    if workload["precision"] == "fp8":
        assert args.fp8_recipe == workload["fp8_recipe"]
    if layout["fsdp"]:  # bf16 main grads ('auto'), launched so on releases that still follow grad_reduce_in_fp32
        assert args.grad_reduce_in_bf16 == (workload["fsdp_main_grads_dtype"] != "fp32")
        assert args.megatron_fsdp_main_grads_dtype == workload["fsdp_main_grads_dtype"]
    else:
        assert args.grad_reduce_in_bf16 == workload["grad_reduce_in_bf16"]
    assert args.cross_entropy_loss_fusion == (workload["cross_entropy"] != "unfused")
    assert args.cross_entropy_fusion_impl != "te"  # ARG L1697-1702 rejects it
    if spec.is_moe:
        assert args.moe_token_dispatcher_type == workload["moe_dispatcher"] and args.moe_grouped_gemm
    # the TP overlap the step time assumes (the workload's knob once it has one), only with SP (ARG L1441)
    tp_sp = layout["tp"] > 1 and layout["sequence_parallel"]
    assert args.tp_comm_overlap == (workload.get("tp_comm_overlap", True) and tp_sp)


def test_te_loss_is_launched_native_and_said_so():
    text = launch("fp8", "megatron")
    argv = " ".join(command_parts(text)[1])
    assert "--cross-entropy-fusion-impl native" in argv and "--cross-entropy-fusion-impl te" not in argv
    assert "# note: the plan was costed with the TE fused loss" in text
    assert "--fp8-param-gather" in text and "--fp8-output-proj" in text and "--fp8-recipe mxfp8" in text
    # MXFP8 primary weights gathered through the gradient buffer, as the estimate costed them
    assert "--reuse-grad-buf-for-mxfp8-param-ag" in text


def test_solve_prints_one_layout_by_rank(capsys):
    args = ["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--top-k", "3", "-o", "megatron"]
    first = CliRunner().invoke(cli, args).output
    second = CliRunner().invoke(cli, args + ["--rank", "2"]).output
    assert first.count("pretrain_gpt.py") == 1 and second.count("pretrain_gpt.py") == 1
    assert first.startswith("# rank 1 of 3:") and second.startswith("# rank 2 of 3:")
    from megasolve.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(args + ["--rank", "4"])
    assert exc.value.code == 2 and "--rank=4: beyond --top-k 3" in capsys.readouterr().err


def overrides(text: str) -> dict[str, str]:
    """``key=value`` lines of an override format (comments dropped, shell quoting removed)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, value = shlex.split(line.rstrip("\\"))[0].split("=", 1)
        out[key] = value
    return out


@pytest.mark.parametrize("fmt,prefix", [("bridge", "model."), ("bridge-main", "model.transformer.")])
def test_bridge_resets_recipe_defaults_that_contradict_the_plan(fmt, prefix):
    keys = overrides(launch("mla-mtp", fmt))
    assert keys[prefix + "num_layers_in_first_pipeline_stage"] == "4"
    for name in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        assert keys[prefix + name] == "false"
    assert keys[prefix + "pipeline_model_parallel_layout"] == "null"
    assert keys[prefix + "moe_token_dispatcher_type"] == "flex"
    assert keys["model.seq_length"] == keys["dataset.seq_length"] == "4096"
    assert keys[prefix + "moe_layer_freq"] == "[" + ",".join(["0"] * 3 + ["1"] * 58) + "]"
    fp8 = overrides(launch("fp8", fmt))
    assert fp8["mixed_precision.fp8"] == "hybrid" and fp8["mixed_precision.fp8_recipe"] == "mxfp8"
    assert fp8["mixed_precision.grad_reduce_in_fp32"] == "false" and "ddp.grad_reduce_in_fp32" not in fp8
    assert fp8["mixed_precision.fp8_param_gather"] == "true"
    assert fp8["mixed_precision.reuse_grad_buf_for_mxfp8_param_ag"] == "true"


def test_bridge_main_keeps_gpt_level_fields_on_the_model():
    keys = overrides(launch("dense", "bridge-main"))
    assert keys["model.vocab_size"] == "128256" and keys["model.transformer.tensor_model_parallel_size"] == "2"
    assert not any(k.startswith("model.tensor_model_parallel_size") for k in keys)


def test_nemo_values_are_python_literals():
    text = launch("moe", "nemo")
    keys = overrides(text)
    assert keys["model.config.recompute_modules"] == '["core_attn"]'
    assert keys["trainer.strategy.num_layers_in_first_pipeline_stage"] == "None"
    assert keys["trainer.strategy.account_for_embedding_in_pipeline_split"] == "False"
    assert keys["optim.config.use_distributed_optimizer"] == "True"
    no_dist = CliRunner().invoke(cli, ["estimate", *CASES["dense"], "--no-distributed-optimizer", "-o", "nemo"])
    assert overrides(no_dist.output)["optim.config.use_distributed_optimizer"] == "False"
    fsdp = overrides(launch("fsdp", "nemo"))
    assert fsdp["trainer.strategy.fsdp"] == "megatron" and fsdp["trainer.strategy.ddp.use_megatron_fsdp"] == "True"


def test_verl_sets_every_role_and_the_micro_batch():
    text = launch("uneven", "verl")
    keys = overrides(text)
    for role in ("actor_rollout_ref.actor.megatron", "actor_rollout_ref.ref.megatron", "critic.megatron"):
        assert keys[f"{role}.tensor_model_parallel_size"] == "8"
        assert keys[f"++{role}.override_transformer_config.num_layers_in_first_pipeline_stage"] == "19"
        assert keys[f"++{role}.override_transformer_config.account_for_loss_in_pipeline_split"] == "false"
    assert keys["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "1"
    assert "# not expressible in verl: the architecture" in text
    assert "# not expressible in verl: seq_length" in text
    fp8 = launch("fp8", "verl")
    assert "# not expressible in verl: fp8_param_gather" in fp8
    assert overrides(fp8)["++actor_rollout_ref.actor.megatron.override_transformer_config.fp8"] == "hybrid"


@pytest.mark.parametrize("fmt", ["bridge", "bridge-main", "nemo", "verl"])
def test_every_setting_reaches_every_format_or_is_declared(fmt):
    """No setting disappears silently: each is written, derived by the target, or printed as not
    expressible (``cli/launch_formats.py`` tables)."""
    from megasolve.cli.launch_formats import DERIVED, NotExpressible, _target

    spec = load_preset("deepseek-v3")
    settings = plan_settings(spec, Cluster.from_flags(num_gpus=1024, gpu="h100"),
                             Workload(precision="fp8", cross_entropy="native"),
                             Layout(tp=2, pp=16, dp=32, ep=64, etp=1, sequence_parallel=True, fsdp=True,
                                    recompute="full", recompute_num_layers=1))
    for setting in settings:
        target = _target(fmt, setting)
        targets = target if isinstance(target, tuple) else (target,)
        for t in targets:
            assert isinstance(t, (str, NotExpressible)) or (t is None and (
                setting.name in DERIVED or setting.name == "bf16")), (fmt, setting)


def test_p2p_overlap_off_is_not_launched_where_megatron_refuses_it():
    """ARG L1005-1008: interleaving without the p2p overlap needs PP > 2 (the real parser rejected PP 2)."""
    args = ["estimate", "-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--tp", "2", "--pp", "2", "--vpp", "2",
            "--ep", "4", "--etp", "1", "--no-overlap-p2p-communication", "-o", "megatron"]
    text = CliRunner().invoke(cli, args).stdout
    assert "--no-overlap-p2p-communication" not in " ".join(command_parts(text)[1])
    assert "# note: Megatron-LM needs the p2p overlap for the interleaved schedule at PP <= 2" in text
    pp = args.index("--pp") + 1
    four = CliRunner().invoke(cli, [*args[:pp], "4", *args[pp + 1:]]).stdout
    assert "--no-overlap-p2p-communication" in " ".join(command_parts(four)[1])


def test_fsdp_env_overrides_the_example_scripts():
    text = launch("fsdp-tp", "megatron")
    env, _ = command_parts(text)
    assert env == {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    assert "# note: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1" in text
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=32" in launch("fsdp-tp", "bridge")


# The real downstream parsers (benchmarks/launch_parsers.py), run when their sources are named: a
# Megatron-LM checkout (megatron-core from PyPI ships no megatron/training), Megatron-Bridge sources of the
# release and of main, a verl checkout; NeMo-Run and Hydra from PyPI (pip install -e '.[launch-check]').
MEGATRON_LM = os.environ.get("MEGATRON_LM_PATH")
PARSER_RUNS = {
    "megatron": (["megatron", MEGATRON_LM], [MEGATRON_LM]),
    "bridge": (["bridge", MEGATRON_LM, os.environ.get("MEGATRON_BRIDGE_SRC")],
               [MEGATRON_LM, os.environ.get("MEGATRON_BRIDGE_SRC")]),
    "bridge-main": (["bridge-main", MEGATRON_LM, os.environ.get("MEGATRON_BRIDGE_MAIN_SRC")],
                    [MEGATRON_LM, os.environ.get("MEGATRON_BRIDGE_MAIN_SRC")]),
    "verl": (["verl", os.environ.get("VERL_PATH")], [os.environ.get("VERL_PATH")]),
    "nemo-run": (["nemo-run"], [MEGATRON_LM, "nemo_run"]),
    "hydra": (["hydra"], ["hydra"]),
}


def _missing(needs: list[str | None]) -> str | None:
    import importlib.util

    for need in needs:
        if need is None:
            return ("set MEGATRON_LM_PATH (a Megatron-LM checkout; torch needed), MEGATRON_BRIDGE_SRC / "
                    "MEGATRON_BRIDGE_MAIN_SRC (Megatron-Bridge src/ of v0.6.x and main), VERL_PATH (a verl checkout)")
        if "/" not in need and importlib.util.find_spec(need) is None:
            return f"{need} is not installed (pip install -e '.[launch-check]')"
    return None


@pytest.mark.parametrize("target", sorted(PARSER_RUNS))
def test_real_parser_accepts_every_case(target):
    """Every case of ``CASES`` through the real parser, with every derived value equal to the JSON."""
    import subprocess
    import sys

    argv, needs = PARSER_RUNS[target]
    reason = _missing(needs)
    if reason:
        pytest.skip(f"real {target} parser not available: {reason}")
    script = Path(__file__).parent.parent / "benchmarks" / "launch_parsers.py"
    env = {**os.environ, "PYTHONPATH": MEGATRON_LM} if target == "nemo-run" else None
    proc = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=1200,
                          env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


@pytest.mark.parametrize("fsdp, recipe, expected", [(False, "mxfp8", True), (True, "mxfp8", False),
                                                     (False, "tensorwise", False)])
def test_mxfp8_primary_weights_reuse_the_grad_buffer_as_costed(fsdp, recipe, expected):
    """MXFP8 primary weights are gathered through the gradient buffer (Workload.param_bytes, bf16): the exports say
    so with the distributed optimizer; Megatron-LM turns the flag off itself under Megatron-FSDP (ARG L1137)."""
    workload = Workload(precision="fp8", fp8_recipe=recipe, fp8_param_gather=True)
    layout = Layout(tp=1, pp=1, dp=8, distributed_optimizer=True, fsdp=fsdp)
    names = {s.name: s.value for s in plan_settings(load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8,
                                                    gpu="b200"), workload, layout)}
    assert names.get("reuse_grad_buf_for_mxfp8_param_ag", False) is expected
