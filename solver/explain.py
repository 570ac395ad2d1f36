"""Why nothing fits, and what would: binding rules, closest layouts, repairs.

* Rules: every Megatron rule's table constraint is guarded by an assumption literal and memory is
  made soft; if even that is infeasible, CP-SAT's sufficient assumptions name the rules in conflict.
* Memory: otherwise CP-SAT minimises the worst stage's overflow (``excess``, MiB), giving the
  closest layouts and how much memory they lack per GPU -- in small models over the configuration
  groups with the lowest overflow bounds (``bounds.py``), best-first, exactly (``closest_points``).
* Repairs: the smallest cluster of this GPU type that fits (doubling, then bisection over whole
  nodes, each a CP-SAT feasibility solve), catalog GPUs with more memory that fit at this size, and
  the longest sequence (halving) that fits.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.feasibility import ClusterKind, SearchRules, feasible_point, find_min_gpus, fits_on
from megasolve.solver.space import AXES, SearchSpace, point_layout
from megasolve.cost.combine import BAND_SCALE
from megasolve.solver.tables import MIB, CostTables
from megasolve.topology.cluster import MAX_GPUS, Cluster
from megasolve.topology.gpus import all_gpus

MAX_SCALE = 64  # look for a fitting cluster up to 64x the given one


def _minimise_core(built, binding: list[str], deadline: float) -> list[str]:
    """Deletion-based core minimisation: drop each rule whose removal keeps the model infeasible, so
    the reasons name only rules that really conflict (CP-SAT's core is sufficient, not minimal)."""
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import new_solver

    core = list(binding)
    for name in list(core):
        if time.perf_counter() >= deadline or len(core) == 1:
            break
        trial = [n for n in core if n != name]
        built.model.ClearAssumptions()
        for other in trial:
            built.model.AddAssumption(built.rule_assumptions[other])
        solver = new_solver(deadline - time.perf_counter())
        solver.parameters.stop_after_first_solution = True
        if solver.Solve(built.model) == cp_model.INFEASIBLE:
            core = trial
    built.model.ClearAssumptions()
    return core


def rules_with_no_layout(space: SearchSpace) -> list[str]:
    """Rules that no combination of the remaining axis values satisfies on its own."""
    return [f"rule {rule.name} ({rule.source}): {rule.fix}" for rule, axes in space.rules()
            if not space.allowed(rule, axes)]


def explain_infeasible(spec: ModelSpec, cluster: Cluster, workload: Workload, space: SearchSpace,
                       tables: CostTables, *, rules: SearchRules,
                       deadline: float | None) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """Reasons, closest layouts and repairs, within ``deadline`` (None: up to 30 s). The repairs obey
    ``rules`` (the pins, ``--require`` rules and headroom ``solve`` searched with)."""
    fixed = rules.fixed
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import NoLayout, build_model, new_solver

    if deadline is None:
        deadline = time.perf_counter() + 30.0
    reasons: list[str] = []
    closest: list[dict[str, Any]] = []
    pins = [f"pinned axes: {', '.join(f'{k}={v}' for k, v in fixed.items())}"] if fixed else []
    try:
        built = build_model(space, tables, memory="excess", rule_assumptions=True, deadline=deadline)
    except NoLayout as exc:
        reasons = rules_with_no_layout(space) or [f"Megatron's rules leave no layout: {exc}"]
        return reasons + pins, closest, []
    except TimeoutError:
        return ["the time limit ran out before a fitting layout was found or the search was exhausted"], [], \
            ["raise --time-limit"]
    for guard in built.rule_assumptions.values():
        built.model.AddAssumption(guard)
    if time.perf_counter() >= deadline:
        return ["the time limit ran out before a fitting layout was found or the search was exhausted"], [], \
            ["raise --time-limit"]
    built.model.clear_objective()  # first only: do the rules leave any layout, fitting or not?
    solver = new_solver(deadline - time.perf_counter())
    status = solver.Solve(built.model)
    if status == cp_model.UNKNOWN:
        return ["the time limit ran out before a fitting layout was found or the search was exhausted"], [], \
            ["raise --time-limit"]
    if status == cp_model.INFEASIBLE:
        names = {int(i) for i in solver.SufficientAssumptionsForInfeasibility()}
        binding = [name for name, guard in built.rule_assumptions.items() if guard.Index() in names]
        binding = _minimise_core(built, binding, deadline)
        for rule, _ in space.rules():
            if rule.name in binding:
                others = "with the other rules listed" if len(binding) > 1 else "for any remaining layout"
                reasons.append(f"rule {rule.name} ({rule.source}) cannot hold {others}; fix: {rule.fix}")
        if not reasons:
            reasons = rules_with_no_layout(space) or ["Megatron's rules leave no layout for this model, "
                                                      "cluster and --fix pins"]
        return reasons + pins, closest, _repairs(spec, cluster, workload, rules, deadline,
                                                 memory_bound=False)
    try:
        points = closest_points(space, tables, 3, deadline)
    except TimeoutError:
        points = []
    for point in points:
        cost = tables.evaluate(point)
        lack_gb = max(0, cost.excess) / BAND_SCALE * MIB / 1e9  # with the band when the tables have it
        closest.append({"layout": _layout_dict(point, workload), "peak_gb": round(cost.peak_mib * MIB / 1e9, 1),
                        "lacks_gb_per_gpu": round(lack_gb, 1)})
    capacity_gb = tables.capacity_mib * MIB / 1e9
    if closest:
        best = closest[0]
        reasons.append(f"memory: no rule-legal layout fits in the usable {capacity_gb:.1f} GB of one "
                       f"{cluster.gpu.name}; the closest needs {best['peak_gb']:.1f} GB per GPU "
                       f"({best['lacks_gb_per_gpu']:.1f} GB more), even with recompute, PP and EP searched")
    return reasons, closest, _repairs(spec, cluster, workload, rules, deadline,
                                      memory_bound=True)


def closest_points(space: SearchSpace, tables: CostTables, want: int, deadline: float) -> list[dict]:
    """The ``want`` rule-legal layouts with the smallest memory overflow (``cpsat`` ``memory="excess"``),
    exactly: configuration groups in increasing order of their overflow lower bound
    (``bounds.ConfigBounds.configs(excess=True)``), 16, 32, ... at a time, each batch a small CP-SAT
    model that lists its ``want`` best, until no group left out has a bound below the ``want``-th
    overflow found (every layout of such a group overflows at least that much). Raises
    ``TimeoutError`` past ``deadline``."""
    from ortools.sat.python import cp_model

    from megasolve.solver.bounds import GROUP_AXES, ConfigBounds
    from megasolve.solver.cpsat import NoLayout, build_restricted, decode, exclude, new_solver, pipeline_rows

    try:
        rows = pipeline_rows(space, tables, deadline)
    except NoLayout:
        return []
    bounds = ConfigBounds(space, tables, rows).configs(deadline, excess=True)
    order = sorted(bounds, key=lambda key: (bounds[key], [space.domains[a].index(v) for a, v in zip(GROUP_AXES, key)]))
    size = 16
    while True:
        found: list[tuple[int, dict]] = []
        restricted = build_restricted(space, tables, rows, {key: bounds[key] for key in order[:size]},
                                      deadline=deadline, memory="excess")
        if restricted is not None:
            sub, built = restricted
            while len(found) < want:
                if time.perf_counter() >= deadline:
                    raise TimeoutError
                solver = new_solver(deadline - time.perf_counter())
                status = solver.Solve(built.model)
                if status == cp_model.UNKNOWN or (status == cp_model.FEASIBLE):
                    raise TimeoutError  # not proven closest
                if status != cp_model.OPTIMAL:
                    break
                point = decode(sub, built, solver)
                found.append((solver.Value(built.excess), point))
                exclude(sub, built, point)
        cutoff = found[want - 1][0] if len(found) >= want else None
        if size >= len(order) or (cutoff is not None and bounds[order[size]] >= cutoff):
            return [point for _, point in found]
        size = max(2 * size, sum(1 for key in order if cutoff is None or bounds[key] < cutoff))


def _layout_dict(point: dict, workload: Workload) -> dict[str, Any]:
    from megasolve.solver.api import layout_dict

    return layout_dict(point_layout(point), workload)


def _repairs(spec: ModelSpec, cluster: Cluster, workload: Workload, rules: SearchRules, deadline: float,
             memory_bound: bool) -> list[str]:
    repairs: list[str] = []
    fixed = rules.fixed

    def left() -> float:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    # the smallest cluster of this GPU type (the same search as `whatif`)
    n = cluster.num_gpus
    found = find_min_gpus(spec, ClusterKind(template=cluster), workload, time_limit_s=None,
                          max_gpus=min(n * MAX_SCALE, MAX_GPUS), known_not_fitting=n, rules=rules,
                          deadline=deadline)
    if found.num_gpus is not None:
        repairs.append(f"use {'at least ' if found.exact else ''}{found.num_gpus} x {cluster.gpu.name}"
                       + ("" if found.exact else f" (fits; {found.note})"))
    elif not found.exact or time.perf_counter() >= deadline:
        repairs.append(f"the search for the smallest cluster of {cluster.gpu.name} that fits did not settle "
                       f"within the time limit; raise --time-limit")
    elif memory_bound:
        repairs.append(f"no cluster of up to {min(n * MAX_SCALE, MAX_GPUS):,} x {cluster.gpu.name} fits")
    if memory_bound:
        bigger = [g for g in all_gpus() if g.usable_memory_bytes > cluster.gpu.usable_memory_bytes]
        fitting = []
        for gpu in bigger:
            if time.perf_counter() >= deadline:
                break
            try:
                if fits_on(spec, Cluster.from_flags(num_gpus=n, gpu=gpu), workload, rules, left()):
                    fitting.append(gpu.name)
            except (TimeoutError, MegasolveError):
                continue
        if fitting:
            repairs.append(f"or {n} GPU{'s' if n != 1 else ''} with more memory: {', '.join(fitting)}")
        seq = workload.seq_length
        for _ in range(3):
            seq //= 2
            if seq < 512 or time.perf_counter() > deadline:
                break
            shorter = replace(workload, seq_length=seq)  # every recipe field kept
            try:
                if fits_on(spec, cluster, shorter, rules, left()):
                    repairs.append(f"or a sequence length of {seq} on these {n} GPUs")
                    break
            except TimeoutError:
                break
        if fixed:
            repairs.append("or drop some --fix pins")
    return repairs


__all__ = ["explain_infeasible", "feasible_point", "fits_on", "AXES"]
