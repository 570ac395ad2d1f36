"""What-if sweeps: the best layout, its speed and its cost over cluster sizes, GPU types, sequence
lengths and global batch sizes (the Cartesian product of the given lists).

Every point is one ``solve(..., top_k=2)`` (best layout and runner-up). Points that do not fit come
back as ``status == "infeasible"`` with a reason, never as an exception. For every series (GPU type,
sequence length, global batch) the smallest cluster that fits is found by the solver itself: CP-SAT
feasibility solves (``feasibility.fits_on``) on 1, 2, 4, ... GPUs up to one node, then doubling whole
nodes, then bisection over whole nodes between the last size that does not fit and the first that
does -- the user's list of sizes plays no part in it.

Points and minimum-size searches run in parallel processes; results come back in the order of the
sweep whatever the order of completion. Nothing here prints: progress is a callback.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from megasolve.cost.calibration import Profile, load_profile, speed_basis, use_profile
from megasolve.cost.calibration import active as active_profile
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Workload, default_global_batch, precision_fields
from megasolve.models.ranks import data_parallel_size
from megasolve.models.spec import ModelSpec
from megasolve.solver.api import LayoutReport
from megasolve.solver.feasibility import ClusterKind, MinGpus, SearchRules, find_min_gpus
from megasolve.solver.knobs import COMM_KNOBS
from megasolve.solver.solve import DEFAULT_MIN_HEADROOM, comm_dict, solve
from megasolve.topology.cluster import Cluster

SECONDS_PER_DAY = 86400.0

Progress = Callable[[int, int], None]  # (tasks done, tasks in all)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One point of the sweep."""

    gpu: str
    num_gpus: int
    seq_length: int
    global_batch_size: int

    @property
    def series(self) -> tuple[str, int, int]:
        """Points of one series differ only in cluster size (one line of a plot)."""
        return (self.gpu, self.seq_length, self.global_batch_size)


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True, slots=True, kw_only=True)
class PointResult:
    """The outcome at one point: the best layout and the runner-up, or why nothing fits."""

    scenario: Scenario
    cluster: Cluster
    workload: Workload
    status: str  # optimal | feasible (time limit: best found, not proven) | infeasible | unknown (time limit,
    #              nothing found)
    layouts: tuple[LayoutReport, ...] = ()
    reason: str | None = None
    solve_s: float = 0.0

    @property
    def best(self) -> LayoutReport | None:
        return self.layouts[0] if self.layouts else None

    @property
    def runner_up(self) -> LayoutReport | None:
        return self.layouts[1] if len(self.layouts) > 1 else None

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second of the whole cluster with the best layout."""
        if self.best is None:
            return None
        return self.workload.global_batch_size * self.workload.seq_length / self.best.estimate.time.step_s


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIfResult:
    model: str
    points: tuple[PointResult, ...]
    min_gpus: tuple[MinGpus, ...] = ()
    tokens: float | None = None
    gpu_hour_price: float | None = None
    wall_s: float = 0.0
    jobs: int = 1
    speed_basis: tuple[tuple[str, dict[str, Any]], ...] = ()  # per GPU: calibration.speed_basis, as a dict

    def baseline(self, point: PointResult) -> PointResult | None:
        """The smallest point of ``point``'s series that found a layout."""
        fitting = [p for p in self.points if p.scenario.series == point.scenario.series and p.best is not None]
        return min(fitting, key=lambda p: p.scenario.num_gpus, default=None)

    def scaling_efficiency(self, point: PointResult) -> float | None:
        """Tokens/s per GPU at ``point`` over tokens/s per GPU at the smallest fitting point of the
        same series (1.0 = perfect weak scaling of throughput, 0.5 = half of each added GPU wasted)."""
        base = self.baseline(point)
        if point.best is None or base is None:
            return None
        return point.best.estimate.time.tokens_per_s_per_gpu / base.best.estimate.time.tokens_per_s_per_gpu

    def train_seconds(self, point: PointResult) -> float | None:
        if self.tokens is None or point.tokens_per_s is None:
            return None
        return self.tokens / point.tokens_per_s

    def days_to_train(self, point: PointResult) -> float | None:
        seconds = self.train_seconds(point)
        return None if seconds is None else seconds / SECONDS_PER_DAY

    def gpu_hours(self, point: PointResult) -> float | None:
        seconds = self.train_seconds(point)
        return None if seconds is None else seconds * point.scenario.num_gpus / 3600.0

    def cost(self, point: PointResult) -> float | None:
        hours = self.gpu_hours(point)
        return None if hours is None or self.gpu_hour_price is None else hours * self.gpu_hour_price

    def min_gpus_for(self, point: PointResult) -> MinGpus | None:
        return next((m for m in self.min_gpus
                     if (m.gpu, m.seq_length, m.global_batch_size) == point.scenario.series), None)

    def point_dict(self, point: PointResult) -> dict[str, Any]:
        """One point in the JSON contract: ``layout``/``memory``/``time`` in ``estimate``'s shapes."""
        best, second = point.best, point.runner_up
        data = best.as_dict() if best is not None else None
        out: dict[str, Any] = {
            "cluster": {"gpu": point.cluster.gpu.name, "num_gpus": point.cluster.num_gpus,
                        "gpus_per_node": point.cluster.gpus_per_node, "nvlink_domain": point.cluster.nvlink_domain},
            "workload": {"seq_length": point.workload.seq_length,
                         "global_batch_size": point.workload.global_batch_size,
                         "precision": point.workload.precision, "attention": point.workload.attention},
            "status": point.status,
            "reason": point.reason,
            "layout": data["layout"] if data else None,
            "memory": data["memory"] if data else None,
            "time": data["time"] if data else None,
            "tokens_per_s": _round(point.tokens_per_s, 1),
            "runner_up": None,
            "scaling_efficiency": _round(self.scaling_efficiency(point), 4),
            "days_to_train": _round(self.days_to_train(point), 3),
            "gpu_hours": _round(self.gpu_hours(point), 1),
            "cost": _round(self.cost(point), 2),
            "solve_s": round(point.solve_s, 3),
            "comm": comm_dict(best) if best is not None else None,
        }
        if second is not None:
            runner = second.as_dict()
            out["runner_up"] = {"layout": runner["layout"], "memory": runner["memory"], "time": runner["time"],
                                "comm": comm_dict(second),
                                "slower_by": round(second.estimate.time.step_s / best.estimate.time.step_s - 1, 4)}
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tokens": self.tokens,
            "gpu_hour_price": self.gpu_hour_price,
            "points": [self.point_dict(p) for p in self.points],
            "min_gpus": {f"{m.gpu}/seq{m.seq_length}/gbs{m.global_batch_size}": m.as_dict() for m in self.min_gpus},
            "search": {"points": len(self.points), "jobs": self.jobs, "wall_s": round(self.wall_s, 3)},
            "speed_basis": dict(self.speed_basis),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# ---------------------------------------------------------------------------- the work of one process
def solve_point(spec: ModelSpec, kind: ClusterKind, scenario: Scenario, workload: Workload,
                time_limit_s: float | None, rules: SearchRules = SearchRules()) -> PointResult:
    """Best layout and runner-up at one point under ``rules`` (no infeasibility explanation: the sweep
    gives the reason from the batch arithmetic and the minimum-size search)."""
    start = time.perf_counter()
    cluster = kind.at(scenario.num_gpus)
    reason = batch_split_reason(spec, cluster, workload)
    if reason is not None:
        return PointResult(scenario=scenario, cluster=cluster, workload=workload, status="infeasible", reason=reason,
                           solve_s=time.perf_counter() - start)
    try:
        result = solve(spec, cluster, workload, top_k=2, time_limit_s=time_limit_s, explain=False,
                       fixed=rules.fixed, allow_cross_domain_tp=rules.allow_cross_domain_tp,
                       min_headroom=rules.min_headroom, requires=rules.requires, knobs=tuple(sorted(rules.knobs)))
    except MegasolveError as exc:  # no value of some axis is legal at this point
        return PointResult(scenario=scenario, cluster=cluster, workload=workload, status="infeasible",
                           reason=str(exc), solve_s=time.perf_counter() - start)
    return PointResult(scenario=scenario, cluster=cluster, workload=workload, status=result.status,
                       layouts=tuple(result.layouts), reason="; ".join(result.reasons) or None,
                       solve_s=time.perf_counter() - start)


def batch_split_reason(spec: ModelSpec, cluster: Cluster, workload: Workload) -> str | None:
    """Why the global batch cannot be split over any data-parallel size of ``cluster`` (or None).

    ``dp = gpus / (tp * cp * pp)`` must divide the global batch (num_microbatches_calculator.py
    L357-395); with tp, cp and pp bounded by the search space, large clusters force a large dp.
    """
    from megasolve.solver.space import build_space

    try:
        space = build_space(spec, cluster, workload)
    except MegasolveError as exc:
        return str(exc)
    d = space.domains
    n = cluster.num_gpus
    sizes = {data_parallel_size(n, tp, cp, pp) for tp in d["tp"] for cp in d["cp"] for pp in d["pp"]}
    possible = sorted(dp for dp in sizes if dp is not None and dp in d["dp"])
    gbs = workload.global_batch_size
    if not possible or any(gbs % dp == 0 for dp in possible):
        return None
    smallest = possible[0]
    return (f"--gbs={gbs}: not divisible by any data-parallel size possible on {n} x {cluster.gpu.name} "
            f"(dp >= {smallest} with tp <= {max(d['tp'])}, cp <= {max(d['cp'])}, pp <= {max(d['pp'])}); "
            f"fix: a global batch that is a multiple of {smallest}, or fewer GPUs")


def _run_task(task: tuple) -> Any:
    kind_of_task, args, profile = task
    with use_profile(profile):  # worker processes do not inherit the caller's active profile
        if kind_of_task == "point":
            return solve_point(*args)
        spec, kind, workload, time_limit_s, rules = args
        return find_min_gpus(spec, kind, workload, time_limit_s=time_limit_s, rules=rules)


# ---------------------------------------------------------------------------- the sweep
def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def whatif(spec: ModelSpec, *, gpus: Sequence[int], gpu: str | ClusterKind | Sequence[str | ClusterKind] = "h100",
           seq_length: int | Sequence[int] = 4096, global_batch_size: int | Sequence[int] | None = None,
           precision: str = "bf16", attention: str = "flash", tokens: float | None = None,
           gpu_hour_price: float | None = None, time_limit_s: float | None = 60.0, jobs: int | None = None,
           min_gpus: bool = True, progress: Progress | None = None,
           recipe: dict[str, object] | None = None, profile: Profile | str | None = None,
           min_headroom: Any = DEFAULT_MIN_HEADROOM, requires: Sequence[str] = (),
           knobs: Sequence[str] = ()) -> WhatIfResult:
    """Sweep the Cartesian product of ``gpus`` x ``gpu`` x ``seq_length`` x ``global_batch_size``.

    ``global_batch_size=None``: ``default_global_batch(seq)`` per sequence length. ``tokens``: train
    on this many tokens (days, GPU-hours; cost with ``gpu_hour_price`` per GPU-hour). ``jobs``:
    parallel processes (default: the CPUs this process may use). ``min_gpus``: also search the
    smallest fitting cluster of every series. ``recipe``: further ``Workload`` fields held fixed
    (``grad_reduce_in_bf16``, ``cross_entropy``, ``fp8_recipe``). ``profile``: the calibration
    ``Profile`` (or profile file) every point is costed with; None: the active one (shipped by default).
    ``min_headroom`` (``solve.Headroom``) and ``requires`` (``--require`` rules): as in ``solve``, for
    every point and for the smallest-cluster search alike (one ``SearchRules``). ``knobs``: the
    communication knobs chosen per layout (``knobs.COMM_KNOBS``), as ``solve`` takes them, so that a point
    of the sweep is ``solve`` at that size.
    """
    spec.require_plannable()
    start = time.perf_counter()
    kinds = [k if isinstance(k, ClusterKind) else ClusterKind(gpu=k)
             for k in ([gpu] if isinstance(gpu, (str, ClusterKind)) else list(gpu))]
    seqs = [seq_length] if isinstance(seq_length, int) else list(seq_length)
    batches = None if global_batch_size is None else (
        [global_batch_size] if isinstance(global_batch_size, int) else list(global_batch_size))
    sizes = sorted(set(gpus))
    if not sizes or not kinds or not seqs or (batches is not None and not batches):
        raise MegasolveError(field="whatif", value="empty", rule="every swept list needs at least one value",
                             fix="give --gpus, --gpu and --seq-len values")
    if tokens is not None and not 0 < tokens < math.inf:
        raise MegasolveError(field="--tokens", value=tokens, rule="must be a finite number > 0",
                             fix="e.g. --tokens 1e12")
    if gpu_hour_price is not None and not 0 <= gpu_hour_price < math.inf:
        raise MegasolveError(field="--gpu-hour-price", value=gpu_hour_price, rule="must be a finite number >= 0",
                             fix="e.g. --gpu-hour-price 2.5")
    names = [k.name for k in kinds]  # resolves every GPU name now: unknown names fail before any work
    if len(set(names)) != len(names):
        raise MegasolveError(field="--gpu", value=",".join(names), rule="names the same GPU twice",
                             fix="list each GPU type once")

    chosen = load_profile(profile) or active_profile()
    from megasolve.solver.require import compile_requirements

    compile_requirements(tuple(requires))  # a malformed rule is bad input now, not "nothing fits" per point
    unknown = set(knobs) - set(COMM_KNOBS)
    if unknown:
        raise ValueError(f"unknown communication knobs {sorted(unknown)}")
    rules = SearchRules(min_headroom=min_headroom, requires=tuple(requires), knobs=frozenset(knobs))
    series: list[tuple[ClusterKind, Workload]] = []
    points: list[tuple[ClusterKind, Scenario, Workload]] = []
    for kind, seq in itertools.product(kinds, seqs):
        for gbs in (batches if batches is not None else [default_global_batch(seq)]):
            workload = Workload(seq_length=seq, global_batch_size=gbs, attention=attention, tokens=tokens,
                                **precision_fields(precision), **(recipe or {}))
            series.append((kind, workload))
            for n in sizes:
                kind.at(n)  # a size that is not a whole number of nodes is bad input, not an outcome
                points.append((kind, Scenario(gpu=kind.name, num_gpus=n, seq_length=seq, global_batch_size=gbs),
                               workload))

    _refuse_if_no_series_can_run(spec, series, sizes)
    tasks: list[tuple] = []
    if min_gpus:  # the long sequential searches first, then the largest clusters (slowest solves)
        tasks += [("min", (spec, kind, workload, time_limit_s, rules), chosen) for kind, workload in series]
    order = sorted(range(len(points)), key=lambda i: -points[i][1].num_gpus)
    tasks += [("point", (spec, points[i][0], points[i][1], points[i][2], time_limit_s, rules), chosen)
              for i in order]
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise MegasolveError(field="--jobs", value=jobs, rule="must be >= 1", fix="e.g. --jobs 4")
    results = _run(tasks, jobs, progress)

    found_min = tuple(r for r in results if isinstance(r, MinGpus))
    by_scenario = {r.scenario: r for r in results if isinstance(r, PointResult)}
    ordered = []
    for _, scenario, _ in points:
        result = by_scenario[scenario]
        if result.best is None and result.reason is None:
            result = replace(result, reason=_infeasible_reason(result, found_min))
        ordered.append(result)
    with use_profile(chosen):
        basis = tuple((k.name, speed_basis(k.gpu_spec, series[0][1].precision, spec.is_moe).as_dict()) for k in kinds)
    return WhatIfResult(model=spec.name, points=tuple(ordered), min_gpus=found_min, tokens=tokens,
                        gpu_hour_price=gpu_hour_price, wall_s=time.perf_counter() - start, jobs=jobs,
                        speed_basis=basis)


def _refuse_if_no_series_can_run(spec: ModelSpec, series: Sequence[tuple[ClusterKind, Workload]],
                                 sizes: Sequence[int]) -> None:
    """Bad input, not an outcome: when a rule on no layout axis (SwiGLU-only knobs, FP8 on a GPU without it, a
    sequence past learned position embeddings, ...) refuses every GPU type, sequence and batch of the sweep, its
    error is raised (exit 2). Where it refuses only some series (FP8 on a100-80g beside h100), those points say so."""
    from megasolve.solver.rules import RuleContext
    from megasolve.solver.space import refusal

    first: MegasolveError | None = None
    for kind, workload in series:
        try:
            refused = refusal(RuleContext(spec=spec, cluster=kind.at(sizes[0]), workload=workload))
        except MegasolveError:  # a size this kind cannot build: its points say so
            return
        if refused is None:
            return
        first = first or refused
    if first is not None:
        raise first


def _infeasible_reason(point: PointResult, found: Sequence[MinGpus]) -> str:
    n, name = point.scenario.num_gpus, point.scenario.gpu
    minimum = next((m for m in found if (m.gpu, m.seq_length, m.global_batch_size) == point.scenario.series), None)
    if minimum is not None and minimum.num_gpus is None:
        return f"memory: {minimum.note}"
    if minimum is not None and minimum.num_gpus > n:
        return (f"memory: no layout fits on {n} x {name}; the smallest fitting cluster is "
                f"{minimum.num_gpus} GPUs")
    return (f"no layout obeys Megatron's rules and fits in memory on {n} x {name}; "
            f"`megasolve solve` at this size names the binding rules")


def _run(tasks: list[tuple], jobs: int, progress: Progress | None) -> list[Any]:
    """Run ``tasks`` (serially when ``jobs == 1``), results in task order."""
    total = len(tasks)
    results: list[Any] = [None] * total
    if jobs == 1 or total == 1:
        for i, task in enumerate(tasks):
            results[i] = _run_task(task)
            if progress:
                progress(i + 1, total)
        return results
    pool = ProcessPoolExecutor(max_workers=min(jobs, total))
    try:
        futures = {pool.submit(_run_task, task): i for i, task in enumerate(tasks)}
        for done, future in enumerate(as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress:
                progress(done, total)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


__all__ = ["ClusterKind", "MinGpus", "PointResult", "Scenario", "WhatIfResult", "batch_split_reason",
           "default_global_batch", "find_min_gpus", "solve_point", "whatif"]
