#!/usr/bin/env python3
"""The Megatron-Bridge performance-summary rows that ``../shared/data/calibration_runs.yaml`` does not hold,
as records of the same schema (``benchmarks/bridge_extra_runs.yaml``).

    python benchmarks/bridge_tables.py --extract MEGATRON_BRIDGE_CHECKOUT   # rebuild the data file
    python benchmarks/bridge_tables.py                                        # summarise it

The shared calibration file transcribes part of the pretraining tables of Megatron-Bridge's
``docs/performance-summary-archive.md`` and ``docs/performance-summary.md``; the rest (the 25.09 and most
25.11 rows, some of every later release, and the current release 26.08) are read here from the same two
files, each row cited by file, section and line. A row whose cells hold two values (``30624 (29521)``:
the archive's "different quantization granularities", FP8 current scaling and, in parentheses, MXFP8 on
B200 / GB200 / GB300 or 128x128 blockwise on H100) gives one record per value. Not taken: SFT / LoRA tables
(not pretraining), NVFP4 and blockwise-FP8 rows (not a ``Workload`` precision) and models without a
megasolve preset (DeepSeek-V4 Flash, Nemotron 3.5 Lightning, Nemotron 3 Ultra). Each record's ``model``
block is copied from a record of the same model in the shared file (its architecture and its source).

``benchmarks/published.py`` reads both files; the split rule is the shared file's (by series, so a row
joins the split of its series). The first scoring of these rows, before any change made with them, is in
the README ("Speed").
"""

from __future__ import annotations

import argparse
import copy
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
OUT = HERE / "bridge_extra_runs.yaml"
SHARED = HERE.parent / ".." / "shared" / "data" / "calibration_runs.yaml"
DOCS = ("docs/performance-summary-archive.md", "docs/performance-summary.md")
# table model names -> the shared file's model names
MODELS = {"LLAMA3_8B": "Llama 3 8B", "LLAMA3_70B": "Llama 3 70B", "LLAMA3.1_405B": "Llama 3.1 405B",
          "DeepSeekV3": "DeepSeek-V3 671B", "GPT OSS 120B": "GPT-OSS 120B", "Qwen3_30B_a3B": "Qwen3-30B-A3B",
          "Qwen3_235B_a22B": "Qwen3-235B-A22B", "Kimi_K2": "Kimi K2 (1T-A32B)",
          "Nemotron_3_Nano": "Nemotron 3 Nano (30B-A3B hybrid Mamba-Transformer MoE)",
          "Nemotron_3_Super": "Nemotron 3 Super (~120B hybrid Mamba-Transformer MoE)"}
SYSTEMS = {"DGX-GB300": "GB300", "DGX-GB200": "GB200", "DGX-B200": "B200", "DGX-B300": "B300",
           "DGX-H100": "H100-SXM-80GB"}
# the precision of a cell pair "FP8-CS (FP8-MX)" / a 25.09 row (no precision column; its footnote: the
# parenthesised values use 32x32 blocks on GB200 / B200 -- MXFP8 -- and 128x128 / 1x128 on H100)
PRECISIONS = {"FP8-CS": "FP8", "FP8-MX": "MXFP8"}
SKIPPED_PRECISIONS = ("NVFP4", "FP8-BLOCKWISE")


def table_rows(text: str) -> list[dict[str, Any]]:
    """Every table row of a performance-summary page with its release, task, system, model and line."""
    rows: list[dict[str, Any]] = []
    release = task = system = model = None
    header: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if m := re.match(r"^## ([\d.]+) NeMo Container", line):
            release, task, system, model, header = m.group(1), None, None, None, None
        elif line.startswith("### "):
            task, header = line[4:].strip(), None
        elif m := re.match(r"^#### System: (\S+)", line):
            system, model, header = m.group(1), None, None
        elif m := re.match(r"^#### Model: (.+)$", line):
            model, system, header = m.group(1).strip(), None, None
        elif line.startswith("|") and release:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not set(line.replace("|", "").strip()) <= set("-: "):
                row = dict(zip(header, cells))
                row.update(_line=number, _release=release, _task=task or "", _raw=line.strip(),
                           _system=row.get("System") or system, _model=row.get("Model") or model)
                rows.append(row)
    return rows


def _pair(cell: str | None) -> tuple[str, str]:
    """``"4 (8)"`` -> ``("4", "8")``; ``"4"`` -> ``("4", "4")``."""
    m = re.match(r"^\s*([^()]*?)\s*(?:\(([^)]*)\))?\s*$", cell or "")
    if m is None:
        return cell or "", cell or ""
    return m.group(1).strip(), (m.group(2) or m.group(1)).strip()


def _number(text: str | None) -> int | float | None:
    text = re.sub(r"\[\^[^\]]*\]", "", text or "").strip()  # footnote marks
    if text in ("", "n/a", "-"):
        return None
    return float(text) if "." in text else int(text)


def records(rows: list[dict[str, Any]], shared: list[dict[str, Any]], doc: str, commit: str) -> list[dict[str, Any]]:
    """Records of the pretraining rows the shared file does not hold (matched on release and the row's text)."""
    seen = {((r.get("software_version") or "").removeprefix("NeMo container ").strip(), (r.get("raw_row") or "").strip())
            for r in shared if r.get("source_group") == "megatron_bridge_perf_summary"}
    templates: dict[str, dict[str, Any]] = {}
    for r in shared:
        templates.setdefault(r["model"]["name"], r["model"])
    out = []
    for row in rows:
        if "Pre-Training" not in row["_task"] or (row["_release"], row["_raw"]) in seen:
            continue
        variant = re.search(r"\((w/o MTP|w/ MTP|tokendrop|dropless)\)", row["_model"])
        base = re.sub(r"\s*\((w/o MTP|w/ MTP|tokendrop|dropless)\)", "", row["_model"]).strip()
        if base not in MODELS:
            continue
        name = MODELS[base]
        paired = any("(" in str(v) for k, v in row.items() if not k.startswith("_") and k != "Model")
        precision_cell = row.get("Precision") or ("FP8-CS (FP8-MX)" if paired else "FP8-CS")
        for second in ((False, True) if paired else (False,)):
            def cell(column: str, second: bool = second) -> int | float | None:
                value = row.get(column)
                return None if value is None else _number(_pair(value)[int(second)])
            precision = _pair(precision_cell)[int(second)]
            if row.get("Precision") is None and second and row["_system"] == "DGX-H100":
                precision = "FP8-BLOCKWISE"
            precision = PRECISIONS.get(precision, precision)
            if precision in SKIPPED_PRECISIONS:
                continue
            model = copy.deepcopy(templates[name])
            model["seq_length"] = cell("Sequence Length")
            if variant and variant.group(1) == "w/o MTP":
                model["mtp_layers"] = None
            gpu, num_gpus = SYSTEMS[row["_system"]], cell("#-GPUs")
            tag = re.sub(r"[^a-z0-9.]+", "-", base.lower()).strip("-")
            dense = model["type"] == "dense"
            out.append({
                "id": f"megatron_bridge_perf_summary:{tag}:{gpu.split('-')[0].lower()}x{num_gpus}:{row['_release']}"
                      f":L{row['_line']}{':mx' if second and 'MX' in precision else ''}",
                "source_group": "megatron_bridge_perf_summary",
                "source": f"NVIDIA-NeMo/Megatron-Bridge {doc} @{commit[:10]}, section '{row['_release']} NeMo "
                          f"Container' / pretrain, line {row['_line']}" + (" (the value in parentheses)" if second else ""),
                "exact": True,
                "task": "pretrain",
                "framework": f"Megatron-Bridge / Megatron-Core (NeMo container {row['_release']})",
                "software_version": f"NeMo container {row['_release']}",
                "model": model,
                "hardware": {"gpu": gpu, "system": row["_system"], "num_gpus": num_gpus},
                "parallel": {"tp": cell("TP"), "pp": cell("PP"), "vpp": cell("VP"), "cp": cell("CP"), "ep": cell("EP"),
                             "etp": None, "dp": None, "fsdp": cell("FSDP") or None, "sp": None, "mbs": cell("MBS"),
                             "gbs": cell("GBS"), "grad_accum": cell("GA"), "recompute": None,
                             "distributed_optimizer": None, "precision": precision,
                             "moe_token_routing": None if dense else (
                                 "token dropping (the table's tokendrop)" if variant and variant.group(1) == "tokendrop"
                                 else "dropless, forced-balanced (per page footnote)")},
                "measured": {"tokens_per_sec_per_gpu": cell("Tokens / sec / GPU"),
                             "tflops_per_gpu": cell("Model TFLOP / sec / GPU"), "mfu_pct": None, "hfu_pct": None,
                             "step_time_s": None, "peak_mem_gb": None},
                "comparison_group": f"mb|NeMo container {row['_release']}|{name}|{row['_system']}|pretrain",
                "series_group": f"mb-series|{name}|{row['_system']}|{precision}|pretrain",
                "raw_row": row["_raw"],
            })
    return out


def extract(checkout: Path) -> list[dict[str, Any]]:
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    shared = yaml.safe_load(SHARED.read_text(encoding="utf-8"))
    out = []
    for doc in DOCS:
        text = subprocess.run(["git", "-C", str(checkout), "show", f"HEAD:{doc}"], capture_output=True, text=True,
                              check=True).stdout
        out += records(table_rows(text), shared, doc, commit)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extract", metavar="MEGATRON_BRIDGE_CHECKOUT", type=Path,
                        help="rebuild benchmarks/bridge_extra_runs.yaml from a Megatron-Bridge git checkout")
    args = parser.parse_args(argv)
    if args.extract:
        rows = extract(args.extract)
        header = ("# Megatron-Bridge performance-summary pretraining rows missing from ../shared/data/calibration_runs.yaml,\n"
                  "# in its schema; written by benchmarks/bridge_tables.py --extract (do not edit by hand).\n")
        OUT.write_text(header + yaml.safe_dump(rows, sort_keys=False, width=120, allow_unicode=True), encoding="utf-8")
    rows = yaml.safe_load(OUT.read_text(encoding="utf-8"))
    print(f"{len(rows)} records in {OUT.name}")
    for (release, kind), n in sorted(Counter((r["software_version"], r["model"]["type"]) for r in rows).items()):
        print(f"  {release:24s} {kind:18s} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
