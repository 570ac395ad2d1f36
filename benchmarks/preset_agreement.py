#!/usr/bin/env python3
"""Every built-in preset through the solver: does each ranked layout's step time from the solver's integer tables
(``solver/tables.py`` ``evaluate``) equal ``estimate``'s for the same layout (``cost/estimate.py``)?

    python benchmarks/preset_agreement.py                 # every preset, on H100 and GB200, top 3 each
    python benchmarks/preset_agreement.py --only qwen3 --gpu h100 --top-k 5

The tests compare the two on a few models (``tests/test_solver.py`` and the knob tests); this runs all of
them, at a cluster sized to the model (8 GPUs under 15B parameters, 64 under 150B, 256 under 800B, else 1,024),
sequence 4096 (or the learned position embeddings' length) and the default global batch. A layout whose two step
times differ by more than ``TOLERANCE`` is printed; the exit code is 1 if any does (or a solve raises, or the
time limit stops a search before it proves its answer: Kimi K2 on 4,096 H100 did from 2026-12-05 to 2026-12-06). The
communication knobs are searched as ``megasolve solve`` searches them (``--no-knobs``: not); the slowest solve is
printed at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

from megasolve.cli.options import default_global_batch, default_seq_length
from megasolve.models.layout import Workload
from megasolve.models.params import model_params
from megasolve.models.presets import load_preset, preset_names
from megasolve.solver.knobs import COMM_KNOBS
from megasolve.solver.solve import solve
from megasolve.topology.cluster import Cluster

TOLERANCE = 1e-3  # relative: the tables round each term to whole microseconds


def cluster_size(params: float) -> int:
    return 8 if params < 15e9 else 64 if params < 150e9 else 256 if params < 800e9 else 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=None, help="substring of the preset names to run")
    parser.add_argument("--gpu", action="append", default=None, help="GPU types (default: h100 and gb200)")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--no-knobs", action="store_true", help="leave the communication knobs unsearched")
    args = parser.parse_args(argv)
    gpus = args.gpu or ["h100", "gb200"]
    compared = differ = failed = unproven = 0
    slowest = (0.0, "")
    knobs = () if args.no_knobs else tuple(COMM_KNOBS)  # as `megasolve solve` searches them
    for name in preset_names():
        if args.only and args.only not in name:
            continue
        spec = load_preset(name)
        seq, _ = default_seq_length(spec, 4096, given=False)
        workload = Workload(seq_length=seq, global_batch_size=default_global_batch(seq))
        n = cluster_size(model_params(spec)["params_total"])
        for gpu in gpus:
            start = time.perf_counter()
            try:
                result = solve(spec, Cluster.from_flags(num_gpus=n, gpu=gpu), workload, top_k=args.top_k,
                               explain=False, knobs=knobs)
            except Exception as exc:  # a preset the solver cannot take is a finding too
                failed += 1
                print(f"{name} on {n} x {gpu}: {type(exc).__name__}: {exc}")
                continue
            seconds = time.perf_counter() - start
            slowest = max(slowest, (seconds, f"{name} on {n} x {gpu}"))
            if result.status not in ("optimal", "infeasible"):  # the time limit stopped the search (Kimi K2 did)
                unproven += 1
                print(f"{name} on {n} x {gpu}: {result.status} after {seconds:.1f} s")
            for rank, (report, tables_us) in enumerate(zip(result.layouts, result.objective_us), start=1):
                estimate_us = report.estimate.time.step_s * 1e6
                compared += 1
                if abs(estimate_us - tables_us) > TOLERANCE * estimate_us:
                    differ += 1
                    print(f"{name} on {n} x {gpu} #{rank}: tables {tables_us} us, estimate {estimate_us:.0f} us "
                          f"({tables_us / estimate_us - 1:+.2%}) {report.layout}")
    print(f"{compared} ranked layouts compared: {differ} differ by more than {TOLERANCE:.1%}, {failed} solves failed, "
          f"{unproven} not proven optimal within the time limit; slowest solve {slowest[0]:.1f} s ({slowest[1]})")
    return 1 if differ or failed or unproven else 0


if __name__ == "__main__":
    sys.exit(main())
