#!/usr/bin/env python3
"""Peak allocated memory of Megatron-LM's own functional tests (H100, GB200) against megasolve (issue 14).

    python benchmarks/megatron_functional_memory.py                  # score the fit split (H100)
    python benchmarks/megatron_functional_memory.py --verbose        # ... one line per case
    python benchmarks/megatron_functional_memory.py --holdout        # also the frozen holdout (once per release)
    python benchmarks/megatron_functional_memory.py --platform gb200 # the same cases' GB200 goldens (own data file)
    python benchmarks/megatron_functional_memory.py --extract MEGATRON_LM_CHECKOUT   # rebuild the data file

Ground truth: every training test case under ``tests/functional_tests/test_cases/{gpt,moe}/`` of NVIDIA's
Megatron-LM whose ``golden_values_dev_dgx_h100.json`` records ``mem-max-allocated-bytes``: the peak of
``torch.cuda.memory_stats()["allocated_bytes.all.peak"]`` over the run, logged to TensorBoard by the last
rank (``megatron/training/training.py`` L3442-3445; the writer exists only on rank ``world_size - 1``,
``global_vars.py`` L241), on one 8-GPU DGX H100 (``tests/test_utils/recipes/h100/*.yaml``: ``nodes: 1``,
``gpus: 8``; ``gpus: 1`` for the recipes that say so). Each case's ``MODEL_ARGS`` (its
``model_config.yaml``) are the flags of one ``pretrain_gpt.py`` command.

megasolve reads each case as a user's launch script would be read (``solver/runs.py::run_from_log`` on the
command line plus a memory line with the measured peak on the last rank), so the check covers the reader
too, and compares the last pipeline stage's predicted peak allocated bytes (``StageMemory.allocated_bytes``:
weights, gradients, optimizer state, activations, workspaces; not the reserve outside the allocator).

The data file (``tests/data/megatron_functional_memory.json``) holds each case's flags, its world size, the measured peak, its source, and its split: a frozen holdout of
about a third of the cases, chosen by a hash of the case name when the file was first written
(``split_of``), is scored only with ``--holdout``. Cases the reader cannot map (a tokenizer with no known
vocabulary size, a layout that needs more GPUs than the recipe gives) are listed with the reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from megasolve.models.errors import MegasolveError
from megasolve.solver.calibrate import predict
from megasolve.solver.runs import Run, run_from_log

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "megatron_functional_memory.json"
# platform -> (its golden files' suffix, megasolve's GPU, the data file); the GB200 goldens are the same test cases run
# on GB200 trays of 4 GPUs (tests/test_utils/recipes/gb200/*.yaml: nodes x gpus, 2 x 4 or 1 x 4)
PLATFORMS = {"h100": ("dgx_h100", "h100", DATA),
             "gb200": ("dgx_gb200", "gb200", DATA.with_name("megatron_functional_memory_gb200.json"))}
GB = 1e9
GPT2_BPE_VOCAB = 50257  # the_pile shard's bpe/vocab.json is GPT-2's (Radford et al. 2019)
# the training tests of these folders (inference, RL and multi-node release runs excluded)
FOLDERS = ("gpt", "moe")
EXCLUDE = ("inference", "grpo", "_release")
# Megatron-FSDP cases whose memory golden was recorded before Megatron-LM adfe9e11d9 (2026-07-02), when Megatron-FSDP
# kept fp32 main grads unless --grad-reduce-in-bf16 (megasolve costs today's 'auto', bf16): the commit that last
# changed the case's mem-max-allocated-bytes values. Read with --megatron-fsdp-main-grads-dtype fp32.
FSDP_FP32_GOLDENS = {
    "moe/gpt3_mcore_te_tp2_zp_z3_resume_torch_dist_te_8experts2parallel_top2router": "febd25e3fb (2026-03-22)"}


def split_of(name: str) -> str:
    """Frozen holdout: a third of the cases, by the case name's SHA-1 (fixed when the data was first written)."""
    return "holdout" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 3 == 0 else "fit"


# ---------------------------------------------------------------------------- extraction (needs a checkout)
def extract(checkout: Path, platform: str = "h100") -> dict[str, Any]:
    import yaml  # a dependency of megasolve

    suffix, gpu, _ = PLATFORMS[platform]
    root = checkout / "tests" / "functional_tests" / "test_cases"
    one_gpu: set[str] = set()
    world: dict[str, int] = {}  # GB200: the case's recipe's nodes x GPUs a node
    for recipe in sorted((checkout / "tests" / "test_utils" / "recipes" / platform).glob("*.yaml")):
        spec = yaml.safe_load(recipe.read_text())
        names = {t for p in spec.get("products", []) for t in p.get("test_case", [])}
        if spec.get("spec", {}).get("gpus") == 1:
            one_gpu |= names
        for name in names:
            world.setdefault(name, int(spec["spec"].get("nodes", 1)) * int(spec["spec"]["gpus"]))
    cases = []
    for folder in FOLDERS:
        for golden in sorted((root / folder).glob(f"*/golden_values_dev_{suffix}.json")):
            name = f"{folder}/{golden.parent.name}"
            if any(x in name for x in EXCLUDE):
                continue
            values = json.loads(golden.read_text()).get("mem-max-allocated-bytes")
            if not isinstance(values, dict):
                continue
            peaks = [v for v in values.get("values", {}).values() if isinstance(v, (int, float))]
            if not peaks:
                continue
            config = yaml.safe_load((golden.parent / "model_config.yaml").read_text())
            args = dict(config.get("MODEL_ARGS") or {})
            # a checkpoint-consistency case runs each MODEL_ARGS* key with its own GPUS_PER_NODE
            # (run_ci_test.sh L296-306); its golden peak is the base run's, MODEL_ARGS
            env_gpus = ((config.get("MODEL_ENV_VARS") or {}).get("MODEL_ARGS") or {}).get("GPUS_PER_NODE")
            if platform == "h100":
                gpus = int(env_gpus) if env_gpus else 1 if golden.parent.name in one_gpu else 8
            elif golden.parent.name in world:  # a GPU count a node from the case's own environment, as on H100
                gpus = int(env_gpus) * (world[golden.parent.name] // 4) if env_gpus else world[golden.parent.name]
            else:
                continue  # a golden no recipe of the platform runs any more: its world size is unknown
            cases.append({"name": name, "split": split_of(name), "num_gpus": gpus,
                          "peak_allocated_bytes": max(peaks), "iterations": len(peaks),
                          "test_type": config.get("TEST_TYPE"), "model_args": args})
    return {"source": f"NVIDIA/Megatron-LM tests/functional_tests/test_cases/<name>/{{model_config.yaml,"
                      f"golden_values_dev_{suffix}.json}} and tests/test_utils/recipes/{platform}/*.yaml",
            "gpu": gpu, "cases": cases}


# ---------------------------------------------------------------------------- one case as a launch script
def launch_text(case: dict[str, Any]) -> str:
    """The case's ``pretrain_gpt.py`` command and a Megatron memory line with its measured peak on the last rank."""
    flags = []
    for key, value in case["model_args"].items():
        if value is True or value == "true":
            flags.append(key)
        elif value is not False and value != "false":
            flags.append(f"{key} {value}")
    if case["name"] in FSDP_FP32_GOLDENS and "--megatron-fsdp-main-grads-dtype" not in case["model_args"]:
        flags.append("--megatron-fsdp-main-grads-dtype fp32")
    rank = case["num_gpus"] - 1
    peak_mib = case["peak_allocated_bytes"] / 2 ** 20
    return ("torchrun pretrain_gpt.py " + " \\\n  ".join(flags) + "\n"
            f"[Rank {rank}] (after {case['iterations']} iterations) memory (MB) | allocated: {peak_mib:.2f} | "
            f"max allocated: {peak_mib:.2f} | reserved: {peak_mib:.2f} | max reserved: {peak_mib:.2f}\n")


def read_case(case: dict[str, Any], gpu: str = "h100") -> Run:
    vocab_file = str(case["model_args"].get("--vocab-file", ""))
    defaults: dict[str, Any] = {"gpu": gpu, "num_gpus": case["num_gpus"]}
    if vocab_file.endswith("bpe/vocab.json"):
        defaults["vocab_size"] = GPT2_BPE_VOCAB
    return run_from_log(launch_text(case), case["name"], defaults)


def score(case: dict[str, Any], gpu: str = "h100") -> dict[str, Any]:
    """Predicted / measured peak allocated bytes on the last rank, or the reason the case is not read."""
    try:
        run = read_case(case, gpu)
    except MegasolveError as exc:
        return {"name": case["name"], "split": case["split"], "skipped": str(exc)}
    last = predict(run).memory[-1]
    measured = case["peak_allocated_bytes"]
    return {"name": case["name"], "split": case["split"], "measured_gb": measured / GB,
            "predicted_gb": last.allocated_bytes / GB, "error": last.allocated_bytes / measured - 1,
            "notes": list(run.notes)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if "error" in r]
    errors = [r["error"] for r in scored]
    return {"n": len(scored), "skipped": len(rows) - len(scored),
            "median_abs": statistics.median(abs(e) for e in errors) if errors else None,
            "median_signed": statistics.median(errors) if errors else None,
            "worst_under": min(errors) if errors else None,
            "under_10pct": sum(e < -0.10 for e in errors), "within_10pct": sum(abs(e) <= 0.10 for e in errors)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extract", metavar="MEGATRON_LM_CHECKOUT", help="rebuild the data file from a checkout")
    parser.add_argument("--platform", choices=sorted(PLATFORMS), default="h100",
                        help="whose goldens: h100 (8-GPU DGX), gb200 (GB200 trays of 4)")
    parser.add_argument("--holdout", action="store_true", help="also score the frozen holdout (once per release)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    data_file = PLATFORMS[args.platform][2]
    if args.extract:
        data = extract(Path(args.extract), args.platform)
        if data_file.is_file():  # the split is frozen: a case keeps the split it was first given
            frozen = {c["name"]: c["split"] for c in json.loads(data_file.read_text())["cases"]}
            for c in data["cases"]:
                c["split"] = frozen.get(c["name"], c["split"])
        data_file.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{len(data['cases'])} cases written to {data_file}")
        return 0
    data = json.loads(data_file.read_text())
    cases, gpu = data["cases"], data["gpu"]
    splits = ("fit", "holdout") if args.holdout else ("fit",)
    for split in splits:
        rows = [score(c, gpu) for c in cases if c["split"] == split]
        if args.verbose:
            for r in sorted(rows, key=lambda r: r.get("error", -9)):
                if "error" in r:
                    print(f"  {split:7s} {r['name']:92s} measured {r['measured_gb']:7.2f} GB  predicted "
                          f"{r['predicted_gb']:7.2f} GB  {100 * r['error']:+6.1f}%")
                else:
                    print(f"  {split:7s} {r['name']:92s} not read: {r['skipped'][:120]}")
        s = summary(rows)
        print(f"{args.platform} {split}: {s['n']} cases read ({s['skipped']} not), median |error| "
              f"{100 * s['median_abs']:.1f}%, signed {100 * s['median_signed']:+.1f}%, worst under-prediction "
              f"{100 * s['worst_under']:+.1f}%, {s['under_10pct']} under by more than 10%, {s['within_10pct']} within "
              "10%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
