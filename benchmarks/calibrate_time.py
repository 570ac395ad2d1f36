#!/usr/bin/env python3
"""Fit the ``time:`` factors of ``cost/calibration.yaml`` on published runs and report the error.

    python benchmarks/calibrate_time.py              # evaluate the current factors (no fitting)
    python benchmarks/calibrate_time.py --fit        # fit on the fit split, report, print the factors
    python benchmarks/calibrate_time.py --fit --write   # ... and write them back into calibration.yaml
    python benchmarks/calibrate_time.py --data PATH --verbose
    python benchmarks/calibrate_time.py --holdout    # also score the frozen holdout (once per calibration)
    python benchmarks/calibrate_time.py --cv         # leave-one-series-out refits on the fit split
    python benchmarks/calibrate_time.py --fit --free grouped_gemm_factor,per_moe_layer_overhead_s
                                                     # refit only the named factors (the rest stay)

Prediction: ``megasolve.cost.step.step_time(...).tokens_per_s_per_gpu`` for every run mapped by
``benchmarks/published.py``. Error: ``pred / measured - 1``; reported as the median absolute %
error on the fit split (and, with ``--holdout``, the holdout split), dense and MoE separately, per
GPU family and per GPU, and the ranking accuracy (fraction of correctly ordered pairs) inside every
``comparison_group`` with at least two mapped runs. The holdout is not printed by default so that
tuning a formula cannot consult it.

Fit: minimise ``sum |log(pred / measured)|`` over the fit split (a robust, scale-free loss: a
median-type fit that a few odd release-to-release outliers cannot drag), plus a weak pull
``0.02 * sum log(x / x0)^2`` towards the documented starting values, by a derivative-free pattern
search (Hooke-Jeeves on the logarithm of each factor, stdlib only). ``FREE`` below lists the free
parameters (their number is printed); everything else in ``time:`` stays as documented.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ordering import ordered_pairs  # noqa: E402
from published import PublishedRun, load_log_runs, load_published  # noqa: E402

from megasolve.cost.calibration import calibration  # noqa: E402
from megasolve.cost.step import step_time  # noqa: E402

CALIBRATION_FILE = Path(__file__).resolve().parents[1] / "cost" / "calibration.yaml"

# name -> (paths in calibration()["time"] it sets, lower bound, upper bound). The bounds are the plausible
# ranges written next to each factor in calibration.yaml: a factor that ends on one needs a physical reason.
FREE: dict[str, tuple[tuple[tuple[str, ...], ...], float, float]] = {
    "e_max ampere bf16": ((("gemm_efficiency", "ampere", "bf16"),), 0.6, 0.96),
    "e_max hopper bf16": ((("gemm_efficiency", "hopper", "bf16"), ("gemm_efficiency", "default", "bf16")), 0.6, 0.9),
    "e_max hopper fp8": ((("gemm_efficiency", "hopper", "fp8"), ("gemm_efficiency", "default", "fp8")), 0.45, 0.85),
    "e_max blackwell bf16": ((("gemm_efficiency", "blackwell", "bf16"), ("gemm_efficiency", "blackwell-ultra", "bf16")),
                             0.3, 0.95),
    "e_max blackwell fp8": ((("gemm_efficiency", "blackwell", "fp8"),), 0.3, 0.95),
    "e_max blackwell-ultra fp8": ((("gemm_efficiency", "blackwell-ultra", "fp8"),), 0.3, 0.95),
    "e_max blackwell fp4": ((("gemm_efficiency", "blackwell", "fp4"), ("gemm_efficiency", "default", "fp4")),
                            0.2, 0.95),
    "e_max blackwell-ultra fp4": ((("gemm_efficiency", "blackwell-ultra", "fp4"),), 0.2, 0.95),
    # Blackwell Ultra's flash attention: twice the softmax exponent throughput of Blackwell (SFU EX2 10.7 vs 5
    # TeraExp/s; NVIDIA "Inside NVIDIA Blackwell Ultra": "2x attention-layer acceleration") at the same bf16 peak
    "attention blackwell-ultra": ((("attention_efficiency", "blackwell-ultra"),), 0.3, 0.95),
    "gemm_half_width": ((("gemm_half_width",),), 64, 1024),
    "grouped_gemm_factor": ((("grouped_gemm_factor",),), 0.4, 1.0),
    "per_moe_layer_overhead_s": ((("per_moe_layer_overhead_s",),), 1e-4, 3e-3),
    "per_local_expert_overhead_s": ((("per_local_expert_overhead_s",),), 1e-5, 5e-4),
    "biased_expert_overhead_s": ((("biased_expert_overhead_s",),), 5e-5, 5e-4),
    "cuda_graph_moe_overhead_share": ((("cuda_graph_moe_overhead_share",),), 0.02, 1.0),
    "fp8_cast_bytes_per_token_hidden": ((("fp8_cast_bytes_per_token_hidden",),), 50, 600),
    # floor: MXFP8 writes one E8M0 scale byte per 32 quantised elements on top of per-tensor FP8
    "block_scaling_cast_factor": ((("block_scaling_cast_factor",),), 1 + 1 / 32, 4.0),
    "tp_overlap_exposed_fraction": ((("tp_overlap_exposed_fraction",),), 0.02, 0.6),
}


# ---------------------------------------------------------------------------- parameters
def _get(path: tuple[str, ...]) -> float:
    node = calibration()["time"]
    for key in path:
        node = node[key]
    return float(node)


def _set(path: tuple[str, ...], value: float) -> None:
    node = calibration()["time"]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def current_params() -> dict[str, float]:
    return {name: _get(paths[0]) for name, (paths, _, _) in FREE.items()}


def apply_params(params: dict[str, float]) -> None:
    """Write ``params`` into the cached calibration dict (the cost functions read it on every call)."""
    for name, value in params.items():
        for path in FREE[name][0]:
            _set(path, value)


# ---------------------------------------------------------------------------- evaluation
def predict(run: PublishedRun) -> float:
    return step_time(run.spec, run.cluster, run.workload, run.layout).tokens_per_s_per_gpu


def errors(runs: list[PublishedRun]) -> dict[str, float]:
    """``pred / measured - 1`` per run id."""
    return {r.id: predict(r) / r.measured_tokens_per_s_per_gpu - 1 for r in runs}


def median_abs_pct(values: list[float]) -> float:
    return 100 * statistics.median(abs(v) for v in values) if values else float("nan")


def ranking_accuracy(runs: list[PublishedRun], preds: dict[str, float]) -> tuple[int, int]:
    """(correctly ordered pairs, pairs) inside each comparison group with >= 2 runs; ties skipped."""
    right, wrong = ordered_pairs([r for r in runs if r.comparison_group], lambda r: r.measured_tokens_per_s_per_gpu,
                                 lambda r: preds[r.id], group=lambda r: r.comparison_group)
    return len(right), len(right) + len(wrong)


def ep_span(run: PublishedRun) -> str | None:
    """``intra`` when the EP group (stride ``etp``, size ``ep``) stays inside one NVLink domain,
    ``cross`` when its all-to-all crosses the NIC, None for dense runs and EP 1."""
    if not run.spec.is_moe or run.layout.ep <= 1:
        return None
    link = run.cluster.group_link(run.layout.etp, run.layout.ep)
    return "cross" if link.tier == "network" else "intra"


def signed_median_pct(values: list[float]) -> float:
    return 100 * statistics.median(values) if values else float("nan")


def report(runs: list[PublishedRun], *, verbose: bool = False, holdout: bool = False) -> dict[str, float]:
    """Print the error table; return the headline numbers. The holdout split is scored only with
    ``holdout=True`` (``--holdout``): it is frozen and read once per calibration, not while tuning."""
    if not holdout:
        runs = [r for r in runs if r.split == "fit"]
    errs = errors(runs)
    preds = {r.id: (1 + errs[r.id]) * r.measured_tokens_per_s_per_gpu for r in runs}
    out: dict[str, float] = {}
    print(f"{'split':8s} {'kind':6s} {'GPU':10s} {'n':>4s} {'median |err|':>13s}")
    for split in ("fit", "holdout") if holdout else ("fit",):
        for kind in ("dense", "moe"):
            chosen = [r for r in runs if r.split == split and r.kind == kind]
            out[f"{split} {kind}"] = median_abs_pct([errs[r.id] for r in chosen])
            print(f"{split:8s} {kind:6s} {'all':10s} {len(chosen):4d} {out[f'{split} {kind}']:12.1f}%")
            for family in ("ampere", "hopper", "blackwell"):
                sub = [r for r in chosen if r.gpu_family == family]
                if sub:
                    gpus = sorted({r.gpu for r in sub})
                    detail = ", ".join(f"{g} {median_abs_pct([errs[r.id] for r in sub if r.gpu == g]):.0f}%"
                                       f" (n={sum(r.gpu == g for r in sub)})" for g in gpus)
                    print(f"{'':8s} {'':6s} {family:10s} {len(sub):4d} "
                          f"{median_abs_pct([errs[r.id] for r in sub]):12.1f}%   {detail}")
    for split in ("fit", "holdout") if holdout else ("fit",):
        for span in ("intra", "cross"):  # issue 12: no bias by EP span (signed medians)
            chosen = [errs[r.id] for r in runs if r.split == split and ep_span(r) == span]
            out[f"{split} ep {span}"] = signed_median_pct(chosen)
            print(f"{split:8s} EP {span}-domain: n={len(chosen):3d} signed median {out[f'{split} ep {span}']:+6.1f}%")
    for split in ("fit", "holdout", "all") if holdout else ("fit",):
        chosen = runs if split == "all" else [r for r in runs if r.split == split]
        good, total = ranking_accuracy(chosen, preds)
        out[f"ranking {split}"] = good / total if total else float("nan")
        print(f"ranking {split:8s}: {good}/{total} pairs ordered correctly ({100 * good / max(total, 1):.1f}%)")
    if verbose:
        for r in sorted(runs, key=lambda r: (r.split, r.kind, r.id)):
            print(f"  {r.split:7s} {r.kind:5s} {r.id:62s} measured {r.measured_tokens_per_s_per_gpu:9.1f} "
                  f"predicted {preds[r.id]:9.1f} {100 * errs[r.id]:+6.1f}%")
    return out


# ---------------------------------------------------------------------------- fitting
def loss(runs: list[PublishedRun], params: dict[str, float], start: dict[str, float]) -> float:
    apply_params(params)
    data = sum(abs(math.log(predict(r) / r.measured_tokens_per_s_per_gpu)) for r in runs)
    prior = 0.02 * sum(math.log(params[k] / start[k]) ** 2 for k in params if start[k] > 0)
    return data + prior


def fit(runs: list[PublishedRun], *, step: float = 0.5, tolerance: float = 0.01, max_sweeps: int = 60,
        free: tuple[str, ...] | None = None) -> dict[str, float]:
    """Hooke-Jeeves pattern search on ``log(x)`` within the bounds of ``FREE`` (only the factors named in
    ``free`` move when it is given; the others keep their current values)."""
    start = current_params()
    best = dict(start)
    best_loss = loss(runs, best, start)
    delta = step
    for _sweep in range(max_sweeps):
        improved = False
        for name, (_, low, high) in FREE.items():
            if free is not None and name not in free:
                continue
            for direction in (1, -1):
                trial = dict(best)
                trial[name] = min(max(best[name] * math.exp(direction * delta), low), high)
                if trial[name] == best[name]:
                    continue
                value = loss(runs, trial, start)
                if value < best_loss - 1e-9:
                    best, best_loss, improved = trial, value, True
                    break
        if not improved:
            delta /= 2
            if delta < tolerance:
                break
    apply_params(best)
    return best


def series_of(run: PublishedRun) -> str:
    """The group the fit/holdout split keeps together (``published.split_of``)."""
    return run.series_group or run.comparison_group or run.id


def cross_validate(runs: list[PublishedRun], free: tuple[str, ...] | None = None) -> dict[str, float]:
    """Leave-one-series-out on the fit split: refit without each series, predict it; median |err|
    dense / MoE of those out-of-series predictions (an honest estimate that never reads the holdout)."""
    base = current_params()
    fit_runs = [r for r in runs if r.split == "fit"]
    out_errs: dict[str, float] = {}
    for series in sorted({series_of(r) for r in fit_runs}):
        apply_params(base)
        fit([r for r in fit_runs if series_of(r) != series], step=0.25, max_sweeps=20, free=free)
        for r in fit_runs:
            if series_of(r) == series:
                out_errs[r.id] = predict(r) / r.measured_tokens_per_s_per_gpu - 1
    apply_params(base)
    result = {kind: median_abs_pct([e for r in fit_runs if r.kind == kind for e in [out_errs[r.id]]])
              for kind in ("dense", "moe")}
    print(f"leave-one-series-out ({len({series_of(r) for r in fit_runs})} series): "
          f"dense {result['dense']:.1f}%  moe {result['moe']:.1f}%")
    return result


# ---------------------------------------------------------------------------- write back
def _fmt(value: float) -> str:
    if abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


def write_back(params: dict[str, float], provenance: str) -> None:
    """Replace the fitted values inside the ``time:`` section of calibration.yaml, keeping comments."""
    text = CALIBRATION_FILE.read_text(encoding="utf-8")
    head, sep, time_part = text.partition("\ntime:\n")
    if not sep:
        raise SystemExit("calibration.yaml has no time: section")
    cal = calibration()["time"]
    lines = time_part.split("\n")
    out = []
    skipping = False
    section = None
    for line in lines:
        if skipping:
            if line.startswith("    "):
                continue
            skipping = False
        if line.startswith("  gemm_efficiency:"):
            out.append("  gemm_efficiency:")
            for gpu, values in cal["gemm_efficiency"].items():
                inner = ", ".join(f"{k}: {_fmt(v)}" for k, v in values.items())
                out.append(f"    {gpu}: {{{inner}}}")
            skipping = True
            continue
        match = re.match(r"^(\s+)([a-z_0-9]+): ([^#{]+?)(\s*#.*)?$", line)
        if match and line.startswith("  ") and not line.startswith("    ") and \
                (match.group(2),) in {p for name in params for p in FREE[name][0]}:
            out.append(f"{match.group(1)}{match.group(2)}: {_fmt(cal[match.group(2)])}{match.group(4) or ''}")
            continue
        section_match = re.match(r"^  ([a-z_0-9]+):\s*(#.*)?$", line)
        if section_match:
            section = section_match.group(1)
        nested = re.match(r"^    ([a-z_0-9]+): ([^#{]+?)(\s*#.*)?$", line)
        if nested and section and (section, nested.group(1)) in {p for name in params for p in FREE[name][0]}:
            out.append(f"    {nested.group(1)}: {_fmt(cal[section][nested.group(1)])}{nested.group(3) or ''}")
            continue
        out.append(line)
    body = "\n".join(out)
    # the provenance block: the marker line and its "  #   " continuation lines, replaced as a whole
    marker = "  # Fitted by benchmarks/calibrate_time.py"
    body_lines = [l for l in body.split("\n") if not l.startswith(marker) and not l.startswith("  #   ")]
    block = textwrap.wrap(f"{marker[4:]} ({provenance}).", width=100 - 6)
    block = ["  # " + block[0]] + ["  #   " + line for line in block[1:]]
    start = 1 if body_lines[0] == "" else 0
    body = "\n".join(body_lines[:start] + block + body_lines[start:])
    CALIBRATION_FILE.write_text(head + sep + body, encoding="utf-8")


def speed_basis(runs: list[PublishedRun]) -> dict[str, dict[str, dict[str, list[Any]]]]:
    """What the shipped speed factors rest on, per chip family, precision and kind: ``[runs, median |error| %,
    {model: runs}, highest measured MFU %]`` of the fit split with the committed factors (``calibration.yaml``
    ``basis``, which ``estimate`` / ``solve`` show next to a prediction, models included, so that a user sees whether a
    model like theirs stands behind it, and mark a plan far above the measured MFU; ``tests/test_published.py`` checks
    the file against this). Only the fit split:
    the holdout is not what the factors were fitted on, and reading it here would spend it. ``--basis`` passes the
    published runs and the public logs of ``log_runs.yaml`` (CDNA3's, fitted by ``calibrate_cdna3.py``)."""
    from megasolve.cost.calibration import chip_family
    from megasolve.cost.compute import model_flops_per_sequence

    fit_runs = [r for r in runs if r.split == "fit"]
    errs = errors(fit_runs)

    def mfu_pct(r: PublishedRun) -> float:  # measured, with megasolve's FLOP count (cost/compute.py), of the dense peak
        seq = r.workload.seq_length
        flops = r.measured_tokens_per_s_per_gpu * model_flops_per_sequence(r.spec, seq) / seq
        return 100 * flops / r.cluster.gpu.peak_flops(r.workload.precision)

    groups: dict[tuple[str, str, str], list[PublishedRun]] = {}
    for r in fit_runs:
        groups.setdefault((chip_family(r.cluster.gpu), r.workload.precision, r.kind), []).append(r)
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for (family, precision, kind), found in sorted(groups.items()):
        models = Counter(r.spec.name for r in found)
        out.setdefault(family, {}).setdefault(precision, {})[kind] = [
            len(found), round(median_abs_pct([errs[r.id] for r in found]), 1),
            {name: models[name] for name in sorted(models, key=lambda n: (-models[n], n))},
            round(max(mfu_pct(r) for r in found), 1)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="calibration_runs.yaml (default ../shared/data/...)")
    parser.add_argument("--fit", action="store_true", help="fit the FREE factors on the fit split")
    parser.add_argument("--write", action="store_true", help="write the fitted factors into calibration.yaml")
    parser.add_argument("--free", default=None,
                        help="comma-separated names of FREE to fit (the others stay as calibration.yaml has them)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--holdout", action="store_true",
                        help="also score the frozen holdout split (once per calibration, never while tuning)")
    parser.add_argument("--cv", action="store_true",
                        help="leave-one-series-out refits on the fit split (slow; never reads the holdout)")
    parser.add_argument("--basis", action="store_true",
                        help="print the `basis:` section of calibration.yaml (fit-split runs and median error per "
                             "chip family, precision and kind) and stop")
    args = parser.parse_args(argv)
    if args.basis:
        print(yaml.safe_dump({"basis": speed_basis(load_published(args.data)[0] + load_log_runs())}, sort_keys=False,
                             default_flow_style=None, width=110), end="")
        return 0
    runs, skipped = load_published(args.data)
    print(f"{len(runs)} runs mapped ({sum(r.split == 'fit' for r in runs)} fit, "
          f"{sum(r.split == 'holdout' for r in runs)} holdout); {sum(skipped.values())} records skipped:")
    for reason, count in skipped.most_common():
        print(f"  {count:3d}  {reason}")
    free = tuple(n.strip() for n in args.free.split(",")) if args.free else tuple(FREE)
    unknown = [n for n in free if n not in FREE]
    if unknown:
        parser.error(f"--free: {', '.join(unknown)} not in FREE ({', '.join(FREE)})")
    if args.fit:
        fit_runs = [r for r in runs if r.split == "fit"]
        print(f"fitting {len(free)} free parameters on {len(fit_runs)} runs ...")
        params = fit(fit_runs, free=free)
        for name, value in params.items():
            print(f"  {name:34s} {value:.4g}" + ("" if name in free else "  (fixed)"))
        if args.write:
            write_back({n: params[n] for n in free},
                       f"{len(free)} free parameters, {len(fit_runs)} fit-split runs of "
                       "../shared/data/calibration_runs.yaml; holdout error in the commit message")
    report(runs, verbose=args.verbose, holdout=args.holdout)
    if args.cv:
        cross_validate(runs, free)
    return 0


if __name__ == "__main__":
    sys.exit(main())
