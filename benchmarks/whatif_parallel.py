#!/usr/bin/env python3
"""Does a what-if sweep use the cores? The same 10-point sweep with ``jobs=1`` and ``jobs=N``.

    python benchmarks/whatif_parallel.py                  # N = the CPUs this process may use
    python benchmarks/whatif_parallel.py --jobs 2 --model llama-3.1-8b --gpu h100,a100-80g \\
        --gpus 8,16,32,64,128 [--min-gpus]

Prints the wall time of the serial and the parallel sweep, their ratio (the speed-up), the slowest
single point (its solve time in the serial run: a parallel sweep cannot finish before it), the sum
of the serial solve times, and the ideal parallel time ``max(slowest, sum / N)``. ``--min-gpus``
adds the solver's smallest-cluster search of every series to both sweeps (a sequential chain of
feasibility solves per series, so it lengthens the critical path).
"""

from __future__ import annotations

import argparse
import time

from megasolve.models.presets import resolve_model
from megasolve.cli.parsing import parse_gpu_counts, parse_name_list
from megasolve.solver.whatif import default_jobs, whatif


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--gpu", default="h100,a100-80g")
    parser.add_argument("--gpus", default="8,16,32,64,128")
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--min-gpus", action="store_true")
    args = parser.parse_args()

    spec = resolve_model(args.model).spec
    sweep = dict(gpus=parse_gpu_counts(args.gpus), gpu=parse_name_list("--gpu", args.gpu),
                 time_limit_s=args.time_limit, min_gpus=args.min_gpus)
    runs = {}
    for jobs in (1, args.jobs):
        start = time.perf_counter()
        runs[jobs] = whatif(spec, jobs=jobs, **sweep)
        runs[jobs] = (runs[jobs], time.perf_counter() - start)
    serial, serial_s = runs[1]
    parallel, parallel_s = runs[args.jobs]
    assert [p.best.layout if p.best else None for p in serial.points] == \
        [p.best.layout if p.best else None for p in parallel.points], "serial and parallel sweeps disagree"

    slowest = max(serial.points, key=lambda p: p.solve_s)
    total = sum(p.solve_s for p in serial.points)
    print(f"model {spec.name}, {len(serial.points)} points: gpu {args.gpu} x gpus {args.gpus}"
          + (", with the min-GPU search" if args.min_gpus else ""))
    print(f"{'point':<22} {'status':<10} {'solve s (serial)':>16} {'solve s (parallel)':>18}")
    for a, b in zip(serial.points, parallel.points):
        name = f"{a.scenario.num_gpus} x {a.scenario.gpu}"
        print(f"{name:<22} {a.status:<10} {a.solve_s:>16.2f} {b.solve_s:>18.2f}")
    print(f"serial   (jobs=1): {serial_s:7.2f} s wall, {total:.2f} s of point solves")
    print(f"parallel (jobs={args.jobs}): {parallel_s:7.2f} s wall")
    print(f"speed-up: {serial_s / parallel_s:.2f}x on {args.jobs} processes")
    print(f"slowest single point: {slowest.solve_s:.2f} s ({slowest.scenario.num_gpus} x {slowest.scenario.gpu}); "
          f"ideal parallel wall max(slowest, sum/{args.jobs}) = {max(slowest.solve_s, total / args.jobs):.2f} s; "
          f"parallel / slowest = {parallel_s / slowest.solve_s:.2f}")


if __name__ == "__main__":
    main()
