#!/usr/bin/env python3
"""Megatron-MoE-ModelZoo's measured tables beyond the EP-locality study: Qwen3-235B-A22B at long context with CP on
256 H100 and on GB200 / GB300, and the figures its best-practice scripts state (Qwen3-235B with CUDA graphs,
Mixtral-8x22B in BF16 and blockwise FP8, H100). Is each costed as measured, and is each table ordered as measured?

    python benchmarks/modelzoo_tables.py

Data: ``benchmarks/modelzoo_tables.yaml`` (its header: source, the settings every command ran with, how the
TFLOP/s column compares). Each row is costed exactly as launched (``estimate``, nothing searched, nothing fitted
on these rows). Scores: predicted / measured TFLOP/s per GPU per row, and the pairs of rows inside one table
ordered as measured.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from megasolve.cost.compute import model_flops_per_sequence
from megasolve.models.layout import Layout, Workload
from megasolve.models.presets import load_preset
from megasolve.solver.api import estimate
from megasolve.topology.cluster import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ordering import ordered_pairs  # noqa: E402

DATA = Path(__file__).resolve().with_suffix(".yaml")
MODEL = "qwen3-235b-a22b"
# the FP8 commands' precision settings (sbatch_benchmarking.sh: PR=mxfp8, PR=fp8 -- blockwise)
MXFP8 = dict(precision="fp8", fp8_recipe="mxfp8", fp8_param_gather=True, precision_aware_optimizer=True,
             exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16", moe_router_padding_for_fp8=True)
PRECISIONS = {"bf16": dict(precision="bf16"), "mxfp8": MXFP8, "fp8-blockwise": {**MXFP8, "fp8_recipe": "blockwise"}}


@dataclass(frozen=True)
class Row:
    table: str
    name: str
    measured_tflops: float
    predicted_tflops: float
    step_s: float
    fits: bool

    @property
    def ratio(self) -> float:
        return self.predicted_tflops / self.measured_tflops


def layout_and_workload(row: dict[str, Any], num_gpus: int) -> tuple[Layout, Workload]:
    modules = row["recompute"]
    recompute = "selective" if isinstance(modules, list) else modules
    tp, pp, cp = row["tp"], row["pp"], row["cp"]
    layout = Layout(tp=tp, pp=pp, vpp=row["vpp"], cp=cp, ep=row["ep"], etp=1, mbs=row["mbs"],
                    dp=num_gpus // (tp * pp * cp), sequence_parallel=tp > 1, recompute=recompute,
                    recompute_modules=tuple(modules) if isinstance(modules, list) else None,
                    account_for_embedding=pp > 1 and row.get("account_for_split", True),
                    account_for_loss=pp > 1 and row.get("account_for_split", True))
    workload = Workload(seq_length=row["seq_length"], global_batch_size=row["global_batch_size"],
                        tp_comm_overlap=row["precision"] == "bf16" and tp > 1,
                        cross_entropy=row.get("cross_entropy", "te-bf16grad"),  # (2025's TE)
                        moe_dispatcher=row["dispatcher"], moe_ep_overlap=row.get("ep_overlap", False),
                        cuda_graph_impl="transformer_engine" if row.get("cuda_graph") else "none",
                        offload_modules=tuple(row.get("offload_modules", ())), **PRECISIONS[row["precision"]])
    return layout, workload


def evaluate() -> list[Row]:
    rows = []
    for table, data in yaml.safe_load(DATA.read_text())["tables"].items():
        for raw in data["rows"]:
            row = {**data.get("common", {}), **raw}
            spec = load_preset(row.get("model", MODEL))
            num_gpus = row.get("num_gpus", data.get("num_gpus"))
            cluster = Cluster.from_flags(num_gpus=num_gpus, gpu=data["gpu"], nvlink_domain=row.get("nvlink_domain"))
            layout, workload = layout_and_workload(row, num_gpus)
            report = estimate(spec, cluster, workload, layout)
            time = report.estimate.time
            rows.append(Row(table, row["name"], float(row["tflops"]), time.model_tflops_per_gpu, time.step_s,
                            report.estimate.fits))
    return rows


def counter_ratios() -> dict[str, float]:
    """megasolve's model FLOPs over Megatron-LM's logged ones, per EP-locality row (256 H100, seq 4096, GBS 2048)."""
    flops = model_flops_per_sequence(load_preset(MODEL), 4096) * 2048
    return {c["name"]: flops / (256 * c["step_s"]) / 1e12 / c["tflops"]
            for c in yaml.safe_load(DATA.read_text())["counter_check"]}


def pairs(rows: list[Row]) -> tuple[list[tuple[Row, Row]], list[tuple[Row, Row]]]:
    """(ordered as measured, not) over the pairs of rows of one table with different measured TFLOP/s."""
    return ordered_pairs(rows, lambda r: r.measured_tflops, lambda r: r.predicted_tflops, group=lambda r: r.table)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args(argv)
    ratios = counter_ratios()
    print("FLOP counter vs Megatron-LM's logged TFLOP/s (EP-locality rows): "
          + ", ".join(f"{r:.3f}" for r in ratios.values()))
    rows = evaluate()
    print(f"{'table':18s} {'layout':34s} {'measured TF':>11s} {'predicted TF':>12s} {'ratio':>6s} {'fits':>5s}")
    for row in rows:
        print(f"{row.table:18s} {row.name:34s} {row.measured_tflops:11.0f} {row.predicted_tflops:12.1f} "
              f"{row.ratio:6.3f} {'yes' if row.fits else 'NO':>5s}")
    right, wrong = pairs(rows)
    for a, b in wrong:
        print(f"  wrong: {a.name} ({a.measured_tflops:g}) vs {b.name} ({b.measured_tflops:g})")
    print(f"pairs ordered as measured: {len(right)}/{len(right) + len(wrong)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
