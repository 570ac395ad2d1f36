#!/usr/bin/env python3
"""How well ``calibrate`` transfers inside a published series: fit on two runs, predict the rest.

    python benchmarks/calibrate_runs.py            # every series with >= 3 runs, up to 6 pairs each
    python benchmarks/calibrate_runs.py --pairs 0  # every pair of every series (slower)
    python benchmarks/calibrate_runs.py --verbose  # one line per series and pair
    python benchmarks/calibrate_runs.py --holdout  # also the frozen holdout's series (once per release)

A series is one GPU type and one software release (``hardware.gpu`` + ``software_version`` of
``../shared/data/calibration_runs.yaml``, mapped by ``benchmarks/published.py``): several models
and layouts measured with the same stack. For each series with at least three runs and each chosen
pair of its runs (pairs in a fixed order: all pairs sorted by run id, then every ``n/k``-th, so the
choice is deterministic), ``megasolve.solver.calibrate.calibrate`` fits a profile on the pair's
measured step times (the shipped profile as the prior) and predicts the other runs of the series.
Error: ``|predicted tokens/s/GPU / measured - 1|``. Reported: the median over all held-out
predictions, dense and MoE apart, before (shipped profile) and after (calibrated on the pair), and
apart again for the runs the shipped profile was fitted on (``fit``) and the ones it was not
(``holdout``, ``published.py`` split; read only with ``--holdout``): on the fit runs the shipped factors already absorb each
series' offset, so only the holdout rows say what calibration adds for a release it has not seen.
``--shift-moe 0.77 --shift-dense 0.96`` simulates such a release (every MoE run 23 % slower, dense 4 %
slower than published, the size of the shipped profile's error on the newest Megatron-Bridge release:
MoE 23.6 %, dense 4.4 %): a simulation of a shared offset, not a measurement. ``--shift-moe 0.70
--shift-dense 1.10`` (MoE 30 % slower, dense 10 % faster) checks that the method is not tuned to one shift.
Buckets by what the pair holds: ``pair dense``, ``pair mixed`` (one dense, one MoE run), ``pair MoE``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import PublishedRun, load_published  # noqa: E402

from megasolve.solver.calibrate import calibrate, predict  # noqa: E402
from megasolve.solver.runs import Measured, Run  # noqa: E402


def as_run(p: PublishedRun, shift: dict[str, float] | None = None) -> Run:
    tokens = p.measured_tokens_per_s_per_gpu * (shift or {}).get(p.kind, 1.0)
    step = p.workload.global_batch_size * p.workload.seq_length / (tokens * p.cluster.num_gpus)
    return Run(id=p.id, spec=p.spec, cluster=p.cluster, workload=p.workload, layout=p.layout,
               measured=Measured(step_time_s=step), source=p.id, software=(p.software,))


def error(run: Run, profile) -> float:
    return abs(predict(run, profile).time.step_s / run.measured_step_s - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--pairs", type=int, default=6, help="pairs per series (0: all)")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--shift-moe", type=float, default=1.0,
                        help="simulate a software release: multiply every MoE run's measured throughput by this")
    parser.add_argument("--shift-dense", type=float, default=1.0, help="the same for dense runs")
    parser.add_argument("--holdout", action="store_true",
                        help="also use the series of the frozen holdout split (once per release, never while tuning)")
    args = parser.parse_args(argv)
    published, _ = load_published(args.data)
    series: dict[tuple[str, str], list[Run]] = defaultdict(list)
    kinds: dict[str, str] = {}
    splits: dict[str, str] = {}
    for p in published:
        if p.split == "holdout" and not args.holdout:
            continue
        series[(p.gpu, p.software)].append(as_run(p, {"moe": args.shift_moe, "dense": args.shift_dense}))
        kinds[p.id] = p.kind
        splits[p.id] = p.split
    before: dict[str, list[float]] = defaultdict(list)
    after: dict[str, list[float]] = defaultdict(list)
    fits = 0
    for key, runs in sorted(series.items()):
        if len(runs) < 3:
            continue
        runs = sorted(runs, key=lambda r: r.id)
        pairs = list(combinations(range(len(runs)), 2))
        if args.pairs and len(pairs) > args.pairs:
            stride = len(pairs) / args.pairs
            pairs = [pairs[int(i * stride)] for i in range(args.pairs)]
        for pair in pairs:
            chosen = [runs[i] for i in pair]
            profile = calibrate(chosen, loo=False)
            fits += 1
            free = [k for k, v in profile.fitted.items() if v.get("free") and k != "memory_reserve"]
            errs = []
            for i, run in enumerate(runs):
                if i in pair:
                    continue
                kind = kinds[run.id]
                b, a = error(run, None), error(run, profile)
                n_moe = sum(kinds[c.id] == "moe" for c in chosen)
                has_moe = "pair has MoE" if n_moe else "pair dense"
                pair_kind = ("pair dense", "pair mixed", "pair MoE")[n_moe]
                for bucket in ("all", kind, f"{splits[run.id]} {kind}", f"{kind}, {has_moe}", f"{kind}, {pair_kind}")[:4 if n_moe == 0 else 5]:
                    before[bucket].append(b)
                    after[bucket].append(a)
                errs.append((a, b))
            if args.verbose:
                print(f"{key[0]:9s} {key[1]:28s} fit on {pair} free {free}: held-out median "
                      f"{100 * statistics.median(e[1] for e in errs):.1f}% -> {100 * statistics.median(e[0] for e in errs):.1f}%")
    print(f"{fits} calibrations on pairs of {sum(len(r) >= 3 for r in series.values())} series")
    for bucket in ("all", "dense", "moe", "fit dense", "fit moe", "holdout dense", "holdout moe",
                   "dense, pair dense", "dense, pair has MoE", "dense, pair mixed", "dense, pair MoE", "moe, pair dense",
                   "moe, pair has MoE", "moe, pair mixed", "moe, pair MoE"):
        if before[bucket]:
            print(f"{bucket:19s} n={len(before[bucket]):4d}  median |err| shipped {100 * statistics.median(before[bucket]):5.1f}%"
                  f"  calibrated on 2 runs {100 * statistics.median(after[bucket]):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
