#!/usr/bin/env python3
"""AMD CDNA3 (MI300X, MI325X: one die, one chip family) speed calibration from public training logs.

    python benchmarks/calibrate_cdna3.py            # fit, leave-one-out, and the errors before / after
    python benchmarks/calibrate_cdna3.py --write    # write the fitted values into cost/calibration.yaml

No published benchmark table covers a CDNA3 GPU, so the shipped factors for it were Hopper's (``default``): the four
public logs of ``log_runs.yaml`` (Megatron-LM for ROCm and AMD Primus on MI300X / MI325X) come out 35-49 % too fast.
Four runs support one free factor, not a row of them: ``k``, the ratio of CDNA3's efficiencies to Hopper's, applied
to the GEMM e_max of each precision (``time.gemm_efficiency.cdna3``) and to the flash-attention efficiency
(``time.attention_efficiency.cdna3``, CK's kernels). Its meaning: the share of Hopper's fraction of peak that
hipBLASLt / CK reach on CDNA3 through Megatron-LM / Transformer Engine for ROCm. Fit: least squares on
``log(predicted / measured step)``, golden section over k in [0.2, 1.2]. The other factors stay as shipped.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import PublishedRun, load_log_runs  # noqa: E402

from megasolve.cost.calibration import calibration  # noqa: E402
from megasolve.cost.step import step_time  # noqa: E402

CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "cost" / "calibration.yaml"
CDNA3 = ("mi300x", "mi325x")
BOUNDS = (0.2, 1.2)


def apply(k: float) -> None:
    """Make CDNA3 its own chip family at ``k`` times Hopper's GEMM and the default attention efficiency."""
    cal = calibration()["time"]
    for gpu in CDNA3:
        cal["chip_family"][gpu] = "cdna3"
    cal["gemm_efficiency"]["cdna3"] = {p: k * cal["gemm_efficiency"]["hopper"][p] for p in ("bf16", "fp8")}
    cal["attention_efficiency"]["cdna3"] = k * cal["attention_efficiency"]["default"]


def log_errors(runs: list[PublishedRun]) -> list[float]:
    return [math.log(r.measured_tokens_per_s_per_gpu / step_time(r.spec, r.cluster, r.workload, r.layout)
                     .tokens_per_s_per_gpu) for r in runs]  # log(predicted step / measured step)


def fit(runs: list[PublishedRun]) -> float:
    """The k that minimises the squared log errors of ``runs`` (golden section; the loss is unimodal in k)."""
    def loss(k: float) -> float:
        apply(k)
        return sum(e * e for e in log_errors(runs))
    lo, hi = BOUNDS
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    while hi - lo > 1e-4:
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    return (lo + hi) / 2


def write(k: float) -> None:
    cal = calibration()["time"]
    text = CALIBRATION_FILE.read_text(encoding="utf-8")
    bf16, fp8 = (round(k * cal["gemm_efficiency"]["hopper"][p], 3) for p in ("bf16", "fp8"))
    attention = round(k * cal["attention_efficiency"]["default"], 3)
    text, n1 = re.subn(r"(?m)^    cdna3: \{bf16: [\d.]+, fp8: [\d.]+\}", f"    cdna3: {{bf16: {bf16}, fp8: {fp8}}}", text)
    text, n2 = re.subn(r"cdna3: [\d.]+\}", f"cdna3: {attention}}}", text)
    if n1 != 1 or n2 != 1:
        raise SystemExit("calibration.yaml has no cdna3 rows to update")
    CALIBRATION_FILE.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the fitted values into cost/calibration.yaml")
    args = parser.parse_args(argv)
    runs = load_log_runs()
    shipped = {r.id: e for r, e in zip(runs, log_errors(runs))}
    apply(1.0)  # Hopper's values: what the family had before it was one of its own
    hopper = {r.id: e for r, e in zip(runs, log_errors(runs))}
    k = fit(runs)
    apply(k)
    fitted = {r.id: e for r, e in zip(runs, log_errors(runs))}
    loo = {}
    for i, r in enumerate(runs):
        apply(fit(runs[:i] + runs[i + 1:]))
        loo[r.id] = log_errors([r])[0]
    print(f"k = {k:.3f} (CDNA3 / Hopper efficiency) on {len(runs)} runs; LOO: each run predicted with k fitted on the "
          "other three")
    print(f"{'run':64s} {'shipped':>8s} {'Hopper':>8s} {'fitted':>8s} {'LOO':>8s}   (tokens/s/GPU, predicted/measured-1)")
    pct = lambda e: f"{math.exp(-e) - 1:+8.1%}"  # noqa: E731  (tokens/s error from the step's log error)
    for r in runs:
        print(f"{r.id[9:73]:64s} {pct(shipped[r.id])} {pct(hopper[r.id])} {pct(fitted[r.id])} {pct(loo[r.id])}")
    med = lambda d: sorted(abs(math.exp(-e) - 1) for e in d.values())  # noqa: E731
    for name, d in (("shipped", shipped), ("Hopper", hopper), ("fitted", fitted), ("leave-one-out", loo)):
        v = med(d)
        print(f"median |error| {name:14s} {(v[len(v) // 2 - 1] + v[len(v) // 2]) / 2 if len(v) % 2 == 0 else v[len(v) // 2]:.1%}")
    if args.write:
        write(k)
        print(f"written: cost/calibration.yaml time.gemm_efficiency.cdna3 and attention_efficiency.cdna3 (k = {k:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
