"""CP-SAT vs the exhaustive oracle: wall time, model size and answers, as the search space grows.

Both engines search the same space with the same integer cost tables (``solver/tables.py``), so
their top-k must be identical; the benchmark checks that on every instance where the oracle
finishes. Run (one core, as the solver runs by default)::

    python benchmarks/solver_benchmark.py            # the full ladder, 8 -> 16,384 GPUs
    python benchmarks/solver_benchmark.py --quick    # the small instances only
    python benchmarks/solver_benchmark.py --oracle-limit 600
    python benchmarks/solver_benchmark.py --no-knobs  # without the communication knobs (solver/knobs.py)
    python benchmarks/solver_benchmark.py --probe     # CP-SAT with and without the probe (solver/solve.py _probe)

Columns: instance, search-space size (Cartesian product of the axis domains), rule-legal layouts
(counted by the oracle), CP-SAT variables / constraints, CP-SAT wall time (and the part of it that
imports OR-Tools), oracle wall time, their ratio with and without that import ("excl."), and
whether the top-k agree (the k distinct plans, their step times and every spelling of each). Where the oracle exceeds ``--oracle-limit`` seconds, its time
is reported as ">limit" and no ratio is claimed.

What the CP-SAT time holds: ``solve()`` in a fresh process, so the first import of OR-Tools
(about 0.35 s, pandas included) on top of the configuration bounds (``solver/bounds.py``: every
configuration's memory-aware lower bound), the enumeration rounds (CP-SAT models restricted to the
configurations whose bound is below a growing threshold) and the reports of the k layouts (as for
the oracle). Since the search is several small models (one per round and (pp, vpp)), vars / cons are those
of the largest model built, not of one model over the whole space as before. The machine's load shows in
both wall timings; "cpu s" is the CP-SAT process's CPU time (imports included), which the load
inflates far less. Run it on an idle machine for numbers to quote.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import queue
import sys
import time

from megasolve.models import Workload, load_preset
from megasolve.solver.knobs import COMM_KNOBS
from megasolve.solver.solve import solve
from megasolve.topology import Cluster

LADDER = [
    # (label, model, gpus, gpu, seq, gbs, top_k)
    ("llama-3.1-8b", "llama-3.1-8b", 8, "h100", 4096, 64, 10),
    ("qwen3-30b-a3b", "qwen3-30b-a3b", 16, "h100", 4096, 256, 10),
    ("moonlight", "moonlight-16b-a3b", 64, "a100-80g", 4096, 1024, 10),
    ("llama-3.1-70b", "llama-3.1-70b", 256, "h100", 8192, 512, 10),
    ("qwen3-235b-a22b", "qwen3-235b-a22b", 512, "h100", 4096, 2048, 10),
    ("deepseek-v3", "deepseek-v3", 1024, "h100", 4096, 8192, 10),
    ("llama-3.1-405b", "llama-3.1-405b", 4096, "h100", 8192, 2048, 10),
    ("deepseek-v3", "deepseek-v3", 16384, "h100", 4096, 16384, 10),
]
QUICK = 3
# large MoE spaces, where rounds of 1,000+ keys can come before any layout is found (the probe's trigger); top-5 as
# the CLI asks
PROBE_CASES = [("deepseek-v3", "deepseek-v3", 16384, "h100", 4096, 1024, 5),
               ("kimi-k2", "kimi-k2", 4096, "h100", 4096, 1024, 5),
               ("deepseek-v3", "deepseek-v3", 2048, "h100", 4096, 1024, 5),
               ("qwen3-235b-a22b", "qwen3-235b-a22b", 256, "h100", 4096, 1024, 5)]


def probe_study() -> int:
    """CP-SAT in-process with the probe and without it (``PROBE_MIN_KEYS`` out of reach), back to back: seconds,
    CP-SAT solves, and whether the top-k agree (exit 1 if not)."""
    import importlib

    solve_module = importlib.import_module("megasolve.solver.solve")
    on = solve_module.PROBE_MIN_KEYS
    print(f"{'instance':<24}{'without s':>10}{'solves':>7}{'with s':>8}{'solves':>7}  agree")
    failures = 0
    for label, model, gpus, gpu, seq, gbs, top_k in PROBE_CASES:
        results = []
        for keys in (10**12, on):
            solve_module.PROBE_MIN_KEYS = keys
            t0 = time.perf_counter()
            result = solve(load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu),
                           Workload(seq_length=seq, global_batch_size=gbs), top_k=top_k, knobs=COMM_KNOBS)
            results.append((time.perf_counter() - t0, result))
        solve_module.PROBE_MIN_KEYS = on
        (t_off, off), (t_on, with_probe) = results
        agree = [r.layout for r in off.layouts] == [r.layout for r in with_probe.layouts] \
            and off.objective_us == with_probe.objective_us
        failures += not agree
        print(f"{label + '@' + str(gpus):<24}{t_off:>10.2f}{off.search['solves']:>7}{t_on:>8.2f}"
              f"{with_probe.search['solves']:>7}  {'yes' if agree else 'NO'}")
    return 1 if failures else 0


def _run(engine: str, model: str, gpus: int, gpu: str, seq: int, gbs: int, top_k: int, limit: float, out,
         knobs: tuple[str, ...] = COMM_KNOBS) -> None:
    start = time.perf_counter()
    import_s = 0.0
    if engine == "cpsat":  # timed apart: OR-Tools' import (it loads pandas) is paid once per process
        from ortools.sat.python import cp_model  # noqa: F401

        import_s = time.perf_counter() - start
    result = solve(load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu),
                   Workload(seq_length=seq, global_batch_size=gbs), top_k=top_k, engine=engine,
                   time_limit_s=limit, explain=False, knobs=knobs)
    out.put({"wall_s": time.perf_counter() - start, "import_s": import_s, "status": result.status,
             "cpu_s": time.process_time(),
             "search": result.search,
             "layouts": [(r.layout, r.workload) for r in result.layouts], "objective": result.objective_us,
             "equivalents": result.equivalents})


def run(engine: str, case: tuple, limit: float, knobs: tuple[str, ...] = COMM_KNOBS) -> dict | None:
    """One engine on one instance in a child process, killed at ``limit`` seconds (the oracle has no
    time limit of its own)."""
    _, model, gpus, gpu, seq, gbs, top_k = case
    out: mp.Queue = mp.Queue()
    proc = mp.Process(target=_run, args=(engine, model, gpus, gpu, seq, gbs, top_k, limit, out, knobs))
    proc.start()
    try:
        result = out.get(timeout=limit + 30)
    except queue.Empty:
        result = None
    proc.join(timeout=5)
    if proc.is_alive():
        proc.kill()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the first instances")
    parser.add_argument("--oracle-limit", type=float, default=300.0, help="seconds before the oracle is stopped")
    parser.add_argument("--cpsat-limit", type=float, default=300.0, help="CP-SAT --time-limit")
    parser.add_argument("--no-knobs", action="store_true",
                        help="do not search the communication knobs (the workload's settings, as before them)")
    parser.add_argument("--probe", action="store_true", help="CP-SAT with and without the probe, in-process")
    args = parser.parse_args()
    if args.probe:
        return probe_study()
    knobs = () if args.no_knobs else COMM_KNOBS
    cases = LADDER[:QUICK] if args.quick else LADDER
    header = f"{'instance':<22}{'space':>14}{'legal':>10}{'vars':>7}{'cons':>8}{'cpsat s':>9}{'import':>8}" \
             f"{'cpu s':>7}{'oracle s':>10}{'ratio':>8}{'excl.':>7}  agree  cpsat status"
    print(header)
    print("-" * len(header))
    failures = 0
    for case in cases:
        label = f"{case[0]}@{case[2]}"
        fast = run("cpsat", case, args.cpsat_limit, knobs)
        slow = run("exhaustive", case, args.oracle_limit, knobs)
        if fast is None:
            print(f"{label:<22} cpsat did not return")
            failures += 1
            continue
        s = fast["search"]
        legal = str(slow["search"].get("legal_layouts", "?")) if slow else "?"
        oracle = f"{slow['wall_s']:.1f}" if slow else f">{args.oracle_limit:.0f}"
        ratio = f"{slow['wall_s'] / fast['wall_s']:.1f}x" if slow else "-"
        warm = fast["wall_s"] - fast["import_s"]
        ratio_warm = f"{slow['wall_s'] / warm:.1f}x" if slow else "-"
        if slow:
            agree = fast["layouts"] == slow["layouts"] and fast["objective"] == slow["objective"] \
                and fast["equivalents"] == slow["equivalents"]
            failures += not agree
            agree_text = "yes" if agree else "NO"
        else:
            agree_text = "n/a"
        print(f"{label:<22}{s['space_size']:>14,}{legal:>10}{s.get('variables', 0):>7}{s.get('constraints', 0):>8}"
              f"{fast['wall_s']:>9.1f}{fast['import_s']:>8.2f}{fast['cpu_s']:>7.1f}{oracle:>10}{ratio:>8}{ratio_warm:>7}  {agree_text:<5}"
              f"  {fast['status']}"
              f"{'' if s['proven_optimal'] else ' (time limit)'}")
        sys.stdout.flush()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
