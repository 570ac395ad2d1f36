"""Run megasolve's launch exports through the real downstream parsers and compare what they derive with
megasolve's JSON.

    python benchmarks/launch_parsers.py megatron MEGATRON_LM_CHECKOUT   # parse_args + validate_args + TC
    python benchmarks/launch_parsers.py bridge MEGATRON_LM_CHECKOUT BRIDGE_V0_6_SRC      # Bridge's override code
    python benchmarks/launch_parsers.py bridge-main MEGATRON_LM_CHECKOUT BRIDGE_MAIN_SRC
    python benchmarks/launch_parsers.py verl VERL_CHECKOUT                              # Hydra + verl configs
    python benchmarks/launch_parsers.py nemo-run                       # NeMo-Run's value parser (pip nemo-run)
    python benchmarks/launch_parsers.py hydra                          # Hydra's override grammar (pip hydra-core)
    python benchmarks/launch_parsers.py record-megatron-args MEGATRON_LM_CHECKOUT tests/data/megatron_lm_arguments.json

``megatron``: for each case (the shapes of issue 16: dense, VPP, uneven, account-for, CP, MoE with EP/ETP,
MLA+MTP, FSDP, FP8, recompute N) the printed ``torchrun ... pretrain_gpt.py`` command is split into its
environment and arguments, and a fresh Python process with the checkout on ``PYTHONPATH`` runs Megatron-LM's
own ``parse_args()`` and ``validate_args()`` (``megatron/training/arguments.py``) with ``WORLD_SIZE`` = the
planned GPU count, then builds the ``TransformerConfig`` (``core_transformer_config_from_args``, whose
``__post_init__`` checks the model/parallel combination) and asks Megatron-Core's
``get_num_layers_to_build`` (``transformer_block.py`` L76) for the layers of every pipeline rank and
virtual stage. Compared with megasolve's JSON: data-parallel size, micro-batches per step, expert
data-parallel size, decoder layers per pipeline stage. Two things of a GPU node are stood in for on a
CPU machine, both read-only queries: the compute capability (``get_device_arch_version``, 9 for Hopper
and 10 for Blackwell by the planned GPU) that gates the ``CUDA_DEVICE_MAX_CONNECTIONS`` check, and
``torch.cuda.get_device_capability`` for the grouped-GEMM check. Without Transformer Engine installed,
``apply_rope_fusion`` (a TE kernel switch, on by default) is turned off after ``validate_args`` so that
``TransformerConfig`` builds. Python < 3.12 lacks ``typing.override``,
which the checkout imports; it is defined as the identity for the run. Needs torch (CPU is enough).

``nemo-run``: every value of ``--format nemo`` goes through NeMo-Run's ``PythonicParser.parse_value`` and
``TypeParser.parse`` with the annotation of the Megatron-Core config field of the same name (NeMo's
``GPTConfig`` and ``MegatronStrategy`` take the ``TransformerConfig`` / ``ModelParallelConfig`` types);
needs the Megatron-LM checkout too (``MEGATRON_LM_PATH``) for those annotations.

``hydra``: every ``--format bridge|bridge-main|verl`` line goes through Hydra's ``OverridesParser``.

Results of the run recorded in README "Launch settings".
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

BLACKWELL = ("b200", "gb200", "b300", "gb300")

INNER = r"""
import json, os, sys, typing
if not hasattr(typing, "override"):
    typing.override = lambda f: f
job = json.loads(sys.stdin.read())
os.environ.update(job["env"])
os.environ["WORLD_SIZE"], os.environ["RANK"] = str(job["world"]), "0"
import torch
import megatron.training.arguments as arguments
arguments.get_device_arch_version = lambda: job["arch"]
torch.cuda.get_device_capability = lambda *a, **k: (job["arch"], 0)
from megatron.training.arguments import parse_args, validate_args
from megatron.training.argument_utils import core_transformer_config_from_args
from megatron.core.transformer.transformer_block import get_num_layers_to_build
sys.argv = ["pretrain_gpt.py", *job["argv"]]
args = parse_args()
validate_args(args)
if job["no_te"]:  # RoPE fusion is a Transformer Engine kernel, not part of the plan: off when TE is absent
    args.apply_rope_fusion = False
config = core_transformer_config_from_args(args)
vpp = args.virtual_pipeline_model_parallel_size or 1
layout = config.pipeline_model_parallel_layout
if layout is not None:  # its get_num_layers_to_build asks parallel_state for the rank: read its per-rank lists
    from megatron.core.transformer.enums import LayerType
    stages = [sum(layout.layout[p][v].count(LayerType.decoder) for v in range(vpp))
              for p in range(args.pipeline_model_parallel_size)]
else:
    stages = [sum(get_num_layers_to_build(config, vp_stage=(v if vpp > 1 else None), pp_rank=p) for v in range(vpp))
              for p in range(args.pipeline_model_parallel_size)]
edp = args.world_size // (args.expert_tensor_parallel_size * args.expert_model_parallel_size
                          * args.pipeline_model_parallel_size)
print("RESULT " + json.dumps({"dp": args.data_parallel_size,
                              "num_microbatches": args.global_batch_size // (args.micro_batch_size * args.data_parallel_size),
                              "edp": edp, "stage_layers": stages, "padded_vocab": args.padded_vocab_size}))
"""


def megasolve(args: list[str]) -> str:
    from click.testing import CliRunner

    from megasolve.cli.main import cli

    result = CliRunner().invoke(cli, args)
    if result.exit_code not in (0, 1):
        raise SystemExit(f"megasolve {' '.join(args)} failed: {result.output}")
    return result.stdout


def _has_te() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformer_engine") is not None


def check_megatron(checkout: str) -> int:
    from test_launch import CASES, command_parts

    failures = 0
    print(f"{'case':12} {'accepted':9} {'dp':>9} {'micro-b':>11} {'edp':>9} {'stage layers equal':>19}")
    for name, case in CASES.items():
        data = json.loads(megasolve(["estimate", *case, "-o", "json"]))
        env, argv = command_parts(megasolve(["estimate", *case, "-o", "megatron"]))
        layout = data["layout"]
        job = {"env": env, "argv": argv, "world": data["cluster"]["num_gpus"],
               "arch": 10 if data["cluster"]["gpu"].startswith(BLACKWELL) else 9, "no_te": not _has_te()}
        proc = subprocess.run([sys.executable, "-c", INNER], input=json.dumps(job), capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": checkout}, timeout=300)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            failures += 1
            print(f"{name:12} REJECTED  {(proc.stderr.strip().splitlines() or ['?'])[-1][:150]}")
            continue
        got = json.loads(line[0][7:])
        want = {"dp": layout["dp"], "num_microbatches": layout["num_microbatches"],
                "edp": data["cluster"]["num_gpus"] // (layout["etp"] * layout["ep"] * layout["pp"]),
                "stage_layers": [s["layers"] for s in data["memory"]["stages"]]}
        same = {k: got[k] == want[k] for k in want}
        failures += not all(same.values())
        print(f"{name:12} {'yes':9} {got['dp']:>4}/{want['dp']:<4} {got['num_microbatches']:>5}/"
              f"{want['num_microbatches']:<5} {got['edp']:>4}/{want['edp']:<4} "
              f"{str(same['stage_layers']):>19}" + ("" if all(same.values()) else f"  MISMATCH {got} vs {want}"))
    print(f"{len(CASES) - failures} of {len(CASES)} cases accepted with every derived value equal")
    return 1 if failures else 0


def override_lines(fmt: str, case: list[str]) -> list[str]:
    text = megasolve(["estimate", *case, "-o", fmt])
    return [shlex.split(line.rstrip("\\"))[0] for line in text.splitlines() if line.strip() and not line.startswith("#")]


def check_nemo_run() -> int:
    """NeMo-Run's own value parsing against the Megatron-Core field types."""
    import typing

    if not hasattr(typing, "override"):
        typing.override = lambda f: f
    from nemo_run.cli.cli_parser import PythonicParser, TypeParser
    from test_launch import CASES

    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.transformer import MLATransformerConfig

    hints = {**typing.get_type_hints(DistributedDataParallelConfig), **typing.get_type_hints(MLATransformerConfig)}
    extra = {"global_batch_size": int, "micro_batch_size": int, "seq_length": int, "num_nodes": int, "devices": int,
             "vocab_size": int, "make_vocab_size_divisible_by": int, "position_embedding_type": str,
             "share_embeddings_and_output_weights": bool, "grad_reduce_in_fp32": bool, "fp8": typing.Optional[str],
             "fp8_recipe": str, "fp8_param_gather": bool, "use_distributed_optimizer": bool, "fsdp": str,
             "account_for_embedding_in_pipeline_split": bool, "account_for_loss_in_pipeline_split": bool}
    failures = checked = 0
    for name, case in CASES.items():
        for line in override_lines("nemo", case):
            key, raw = line.split("=", 1)
            field = key.rsplit(".", 1)[1]
            annotation = extra.get(field, hints.get(field))
            if annotation is None:
                failures += 1
                print(f"{name}: {key}: no such Megatron-Core field")
                continue
            try:
                value = PythonicParser().parse_value(raw)
                TypeParser().parse(raw if isinstance(value, str) else repr(value), annotation)
                checked += 1
            except Exception as exc:  # noqa: BLE001 - report the parser's own error
                failures += 1
                print(f"{name}: {line}: {type(exc).__name__}: {exc}")
    print(f"NeMo-Run parser: {checked} values accepted, {failures} rejected")
    return 1 if failures else 0


def check_hydra() -> int:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from test_launch import CASES

    parser = OverridesParser.create()
    total = 0
    for fmt in ("bridge", "bridge-main", "verl"):
        for case in CASES.values():
            lines = override_lines(fmt, case)
            parser.parse_overrides(lines)  # raises OverrideParseException on bad syntax
            total += len(lines)
    print(f"Hydra override grammar: {total} lines accepted")
    return 0


BRIDGE_INNER = r"""
import ast, dataclasses, importlib.util, json, sys, types, typing
from typing import Any
if not hasattr(typing, "override"):
    typing.override = lambda f: f
job = json.loads(sys.stdin.read())
src = job["bridge_src"] + "/megatron/bridge/"
# Bridge's own override code, loaded from the checkout file by file (its package __init__ imports every
# model family and their Hugging Face dependencies, which the override code does not use)
for pkg in ("megatron.bridge", "megatron.bridge.utils", "megatron.bridge.training", "megatron.bridge.training.utils"):
    sys.modules.setdefault(pkg, types.ModuleType(pkg))
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
load("megatron.bridge.utils.activation_map", src + "utils/activation_map.py")
overrides = load("megatron.bridge.training.utils.omegaconf_utils", src + "training/utils/omegaconf_utils.py")
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.optimizer import OptimizerConfig
from megatron.core.transformer import MLATransformerConfig
from megatron.training.config import CheckpointConfig, DistributedInitConfig, TrainingConfig

def fields_of(path, cls_name):
    # the annotated fields of a Bridge dataclass, read from its source (name -> default)
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    out = []
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            try:
                default = ast.literal_eval(node.value) if node.value is not None else None
            except ValueError:
                default = None
            out.append((node.target.id, Any, dataclasses.field(default=default)))
    return dataclasses.make_dataclass(cls_name, out)

MixedPrecision = fields_of(src + "training/mixed_precision.py", "MixedPrecisionConfig")
Dataset = dataclasses.make_dataclass("GPTDatasetConfig", [("seq_length", int, dataclasses.field(default=1024))])
mla = job["mla"]
Transformer = MLATransformerConfig if mla else __import__("megatron.core.transformer", fromlist=["TransformerConfig"]).TransformerConfig
base = dict(num_layers=4, hidden_size=64, num_attention_heads=4)
if job["flavour"] == "main":
    from megatron.training.models.gpt import GPTModelConfig
    model = GPTModelConfig(transformer=Transformer(**base))
else:
    # v0.6 GPTModelProvider is a TransformerConfig subclass with these GPT fields (gpt_provider.py L138-198)
    Provider = dataclasses.make_dataclass("GPTModelProvider", [
        ("seq_length", int, dataclasses.field(default=1024)), ("vocab_size", Any, dataclasses.field(default=None)),
        ("make_vocab_size_divisible_by", int, dataclasses.field(default=128)),
        ("share_embeddings_and_output_weights", bool, dataclasses.field(default=True)),
        ("position_embedding_type", str, dataclasses.field(default="learned_absolute"))], bases=(Transformer,))
    model = Provider(**base)
Container = dataclasses.make_dataclass("ConfigContainer", [
    ("model", Any), ("train", Any), ("optimizer", Any), ("ddp", Any), ("dataset", Any), ("checkpoint", Any),
    ("dist", Any), ("mixed_precision", Any)])
cfg = Container(model=model, train=TrainingConfig(), optimizer=OptimizerConfig(), ddp=DistributedDataParallelConfig(),
                dataset=Dataset(), checkpoint=CheckpointConfig(), dist=DistributedInitConfig(),
                mixed_precision=MixedPrecision())
overrides.process_config_with_overrides(cfg, cli_overrides=job["overrides"])
t = cfg.model.transformer if job["flavour"] == "main" else cfg.model
world = job["world"]
dp = world // (t.tensor_model_parallel_size * t.pipeline_model_parallel_size * t.context_parallel_size)
print("RESULT " + json.dumps({
    "tp": t.tensor_model_parallel_size, "pp": t.pipeline_model_parallel_size,
    "vpp": t.virtual_pipeline_model_parallel_size or 1, "cp": t.context_parallel_size,
    "ep": t.expert_model_parallel_size, "etp": t.expert_tensor_parallel_size or t.tensor_model_parallel_size,
    "dp": dp, "num_microbatches": cfg.train.global_batch_size // (cfg.train.micro_batch_size * dp),
    "first": t.num_layers_in_first_pipeline_stage, "last": t.num_layers_in_last_pipeline_stage,
    "recompute": t.recompute_granularity or "none", "num_layers": t.num_layers,
    "grad_fp32": cfg.mixed_precision.grad_reduce_in_fp32, "fp8": cfg.mixed_precision.fp8,
    "seq": [cfg.model.seq_length, cfg.dataset.seq_length]}))
"""


def check_bridge(checkout: str, bridge_src: str, flavour: str) -> int:
    """Megatron-Bridge's own ``process_config_with_overrides`` (``training/utils/omegaconf_utils.py``:
    OmegaConf struct mode + Hydra's override parser + ``apply_overrides`` back onto the dataclasses) on a
    ``ConfigContainer`` of the real Megatron-Core / Megatron-LM config classes (``TransformerConfig`` /
    ``MLATransformerConfig``, ``GPTModelConfig`` on main, ``DistributedDataParallelConfig``,
    ``OptimizerConfig``, ``TrainingConfig``, ``CheckpointConfig``, ``DistributedInitConfig``) and Bridge's
    ``MixedPrecisionConfig`` fields read from its source; the release's ``GPTModelProvider`` is the
    ``TransformerConfig`` plus its GPT fields. Recipes themselves (and their Hugging Face model imports)
    are not loaded."""
    from test_launch import CASES

    fmt = "bridge" if flavour == "release" else "bridge-main"
    failures = 0
    for name, case in CASES.items():
        data = json.loads(megasolve(["estimate", *case, "-o", "json"]))
        lines = override_lines(fmt, case)
        job = {"bridge_src": bridge_src, "flavour": flavour, "overrides": lines, "world": data["cluster"]["num_gpus"],
               "mla": any(".multi_latent_attention=" in line for line in lines)}
        proc = subprocess.run([sys.executable, "-c", BRIDGE_INNER], input=json.dumps(job), capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": checkout}, timeout=300)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            failures += 1
            print(f"{fmt} {name:12} REJECTED  {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}")
            continue
        got = json.loads(line[0][7:])
        lay, wl = data["layout"], data["workload"]
        want = {"tp": lay["tp"], "pp": lay["pp"], "vpp": lay["vpp"], "cp": lay["cp"], "dp": lay["dp"],
                "num_microbatches": lay["num_microbatches"], "first": lay["first_stage_layers"],
                "last": lay["last_stage_layers"], "recompute": lay["recompute"],
                "grad_fp32": not wl["grad_reduce_in_bf16"], "fp8": "hybrid" if wl["precision"] == "fp8" else None,
                "seq": [wl["seq_length"], wl["seq_length"]]}
        if any(".num_moe_experts=" in ln for ln in lines):
            want.update(ep=lay["ep"], etp=lay["etp"])
        bad = {k: (got[k], v) for k, v in want.items() if got[k] != v}
        failures += bool(bad)
        print(f"{fmt} {name:12} accepted  {'every derived value equal' if not bad else f'MISMATCH {bad}'}")
    print(f"{fmt}: {len(CASES) - failures} of {len(CASES)} cases accepted with every derived value equal")
    return 1 if failures else 0


VERL_INNER = r"""
import json, os, sys
job = json.loads(sys.stdin.read())
from hydra import compose, initialize_config_dir
from verl.utils.config import omega_conf_to_dataclass
with initialize_config_dir(config_dir=os.path.join(job["verl"], "verl", "trainer", "config"), version_base=None):
    cfg = compose(config_name="ppo_megatron_trainer", overrides=job["overrides"])
actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)  # McoreActorConfig.__post_init__ checks batches
critic = omega_conf_to_dataclass(cfg.critic)
ref = omega_conf_to_dataclass(cfg.actor_rollout_ref.ref.megatron)
out = {}
for role, engine in (("actor", actor.megatron), ("ref", ref), ("critic", critic.megatron)):
    t = engine.override_transformer_config
    out[role] = {"tp": engine.tensor_model_parallel_size, "pp": engine.pipeline_model_parallel_size,
                 "vpp": engine.virtual_pipeline_model_parallel_size or 1, "cp": engine.context_parallel_size,
                 "ep": engine.expert_model_parallel_size,
                 "etp": engine.expert_tensor_parallel_size or engine.tensor_model_parallel_size,
                 "sp": engine.sequence_parallel, "first": t.get("num_layers_in_first_pipeline_stage"),
                 "last": t.get("num_layers_in_last_pipeline_stage"),
                 "account": [t.get("account_for_embedding_in_pipeline_split"), t.get("account_for_loss_in_pipeline_split")],
                 "recompute": t.get("recompute_granularity") or "none"}
out["mbs"] = [actor.ppo_micro_batch_size_per_gpu, critic.ppo_micro_batch_size_per_gpu]
print("RESULT " + json.dumps(out))
"""


def _write_placeholder_tokenizer(model_dir: str) -> None:
    """A three-token tokenizer so that verl's HFModelConfig loads (the tokenizer does not change the layout)."""
    from tokenizers import Tokenizer, models

    Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2}, unk_token="<unk>")).save(
        str(Path(model_dir, "tokenizer.json")))
    Path(model_dir, "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": "<unk>"}))


def check_verl(verl_checkout: str) -> int:
    """verl's Hydra composition of ``ppo_megatron_trainer.yaml`` with the overrides, then its own config
    classes (``omega_conf_to_dataclass``: ``McoreActorConfig`` and ``McoreCriticConfig`` with their
    micro-batch checks, ``McoreEngineConfig`` for the reference model). Needs verl's import dependencies
    (torch, tensordict, codetiming, transformers < 5) and the checkout on ``PYTHONPATH``."""
    import tempfile

    from test_launch import CASES

    from megasolve.models.presets import _catalog

    failures = 0
    for name, case in CASES.items():
        data = json.loads(megasolve(["estimate", *case, "-o", "json"]))
        # the critic reads the model's HF config.json (critic.model.path): the preset's own config
        model_dir = tempfile.mkdtemp(prefix="megasolve-verl-")
        Path(model_dir, "config.json").write_text(json.dumps(_catalog()["presets"][case[1]]["hf"]))
        _write_placeholder_tokenizer(model_dir)
        lines = override_lines("verl", case) + [f"critic.model.path={model_dir}",
                                                f"actor_rollout_ref.model.path={model_dir}"]
        proc = subprocess.run([sys.executable, "-c", VERL_INNER], input=json.dumps({"verl": verl_checkout,
                              "overrides": lines}), capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": verl_checkout}, timeout=300)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode or not line:
            failures += 1
            print(f"verl {name:12} REJECTED  {(proc.stderr.strip().splitlines() or ['?'])[-1][:300]}")
            continue
        got = json.loads(line[0][7:])
        lay = data["layout"]
        want = {"tp": lay["tp"], "pp": lay["pp"], "vpp": lay["vpp"], "cp": lay["cp"], "ep": lay["ep"],
                "etp": lay["etp"], "sp": lay["sequence_parallel"], "first": lay["first_stage_layers"],
                "last": lay["last_stage_layers"], "account": [lay["account_for_embedding"], lay["account_for_loss"]],
                "recompute": lay["recompute"]}
        bad = {(role, k): (got[role][k], v) for role in ("actor", "ref", "critic") for k, v in want.items()
               if got[role][k] != v}
        if got["mbs"] != [lay["mbs"], lay["mbs"]]:
            bad["mbs"] = (got["mbs"], lay["mbs"])
        failures += bool(bad)
        print(f"verl {name:12} accepted  {'every derived value equal' if not bad else f'MISMATCH {bad}'}")
    print(f"verl: {len(CASES) - failures} of {len(CASES)} cases accepted with every derived value equal")
    return 1 if failures else 0


def record_megatron_args(checkout: str, out: str) -> int:
    """Dump every option of Megatron-LM's parser (``add_megatron_arguments``) to ``out``."""
    code = r"""
import argparse, json, sys, typing
if not hasattr(typing, "override"):
    typing.override = lambda f: f
from megatron.training.arguments import add_megatron_arguments
parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
rows = []
for a in parser._actions:
    if not a.option_strings or a.dest == "help":
        continue
    e = {"options": sorted(a.option_strings), "dest": a.dest, "action": type(a).__name__}
    if a.nargs is not None: e["nargs"] = a.nargs
    if a.choices is not None: e["choices"] = [c if isinstance(c, (int, float, str, bool)) else str(c) for c in a.choices]
    if a.type is not None: e["type"] = getattr(a.type, "__name__", str(a.type))
    if isinstance(a.default, (int, float, str, bool)) or a.default is None: e["default"] = a.default
    rows.append(e)
print(json.dumps(rows))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": checkout}, check=True)
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    body = ",\n".join("  " + json.dumps(r, sort_keys=True) for r in rows)
    Path(out).write_text(
        '{"source": "NVIDIA/Megatron-LM megatron/training/arguments.py add_megatron_arguments (every option of the '
        f'real parser)",\n "commit": "{commit or "unknown"}",\n "recorded_by": "benchmarks/launch_parsers.py '
        f'record-megatron-args",\n "arguments": [\n{body}\n ]}}\n')
    print(f"{len(rows)} options written to {out}")
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "megatron" and len(argv) == 2:
        return check_megatron(argv[1])
    if argv[0] in ("bridge", "bridge-main") and len(argv) == 3:
        return check_bridge(argv[1], argv[2], "release" if argv[0] == "bridge" else "main")
    if argv[0] == "verl" and len(argv) == 2:
        return check_verl(argv[1])
    if argv[0] == "nemo-run":
        return check_nemo_run()
    if argv[0] == "hydra":
        return check_hydra()
    if argv[0] == "record-megatron-args" and len(argv) == 3:
        return record_megatron_args(argv[1], argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
