"""``solve``: the best layouts for a model on a cluster, or the reasons none fits.

Outcomes are values: a ``SolveResult`` with status ``optimal`` / ``feasible`` (time limit hit, best
found so far, not proven) / ``infeasible`` (with the binding rules or the memory shortfall, the
closest layouts and repairs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.api import LayoutReport, estimate
from megasolve.solver.exhaustive import Ranked, point_key, solve_exhaustive
from megasolve.solver.space import AXES, SearchSpace, build_space, point_layout
from megasolve.solver.tables import CostTables
from megasolve.topology.cluster import Cluster

ENGINES = ("cpsat", "exhaustive")


@dataclass(frozen=True, slots=True, kw_only=True)
class SolveResult:
    status: str  # optimal | feasible (not proven) | infeasible | unknown (time limit, nothing found)
    layouts: list[LayoutReport]
    objective_us: list[int]
    search: dict[str, Any]
    reasons: list[str] = field(default_factory=list)
    closest: list[dict[str, Any]] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "layouts": []}
        for rank, report in enumerate(self.layouts, start=1):
            data = report.as_dict()
            out["layouts"].append({"rank": rank, "layout": data["layout"], "memory": data["memory"],
                                   "time": data["time"], "violations": data["violations"]})
        if self.layouts:
            first = self.layouts[0].as_dict()
            out = {"model": first["model"], "cluster": first["cluster"], "workload": first["workload"], **out}
        out["search"] = self.search
        if self.status in ("infeasible", "unknown"):
            out["reasons"] = self.reasons
            out["closest"] = self.closest
            out["repairs"] = self.repairs
        return out


def solve(spec: ModelSpec, cluster: Cluster, workload: Workload, *, top_k: int = 5,
          fixed: dict[str, Any] | None = None, time_limit_s: float | None = 30.0, engine: str = "cpsat",
          allow_cross_domain_tp: bool = False, workers: int = 1, explain: bool = True) -> SolveResult:
    """Rank the ``top_k`` fastest layouts that obey Megatron's rules and fit in memory."""
    start = time.perf_counter()
    deadline = None if time_limit_s is None else start + time_limit_s
    space = build_space(spec, cluster, workload, fixed=fixed, allow_cross_domain_tp=allow_cross_domain_tp)
    tables = CostTables(spec, cluster, workload)
    search: dict[str, Any] = {"engine": engine, "space_size": space.size, "top_k": top_k,
                              "domains": {a: len(space.domains[a]) for a in AXES}}
    if engine == "exhaustive":
        result = solve_exhaustive(space, tables, top_k)
        ranked, proven = result.ranked, True
        search.update(legal_layouts=result.num_legal, fitting_layouts=result.num_fit)
    elif engine == "cpsat":
        ranked, proven, stats = _solve_cpsat(space, tables, top_k, deadline, workers)
        search.update(variables=stats.variables, constraints=stats.constraints, pipeline_rows=stats.rows,
                      stage_slots=stats.slots, solves=stats.solves, build_s=round(stats.build_s, 3),
                      solve_s=round(stats.solve_s, 3))
    else:
        raise ValueError(engine)
    reports = [estimate(spec, cluster, workload, point_layout(r.point), allow_cross_domain_tp) for r in ranked]
    search["wall_s"] = round(time.perf_counter() - start, 3)
    search["proven_optimal"] = proven
    if ranked:
        return SolveResult(status="optimal" if proven else "feasible", layouts=reports,
                           objective_us=[r.cost.step_us for r in ranked], search=search)
    if not proven:  # the time limit ended the search before any fitting layout was found
        return SolveResult(status="unknown", layouts=[], objective_us=[], search=search,
                           reasons=["the time limit ran out before any fitting layout was found"],
                           repairs=["raise --time-limit"])
    if not explain:
        return SolveResult(status="infeasible", layouts=[], objective_us=[], search=search)
    from megasolve.solver.explain import explain_infeasible

    reasons, closest, repairs = explain_infeasible(spec, cluster, workload, space, tables, fixed=fixed,
                                                   allow_cross_domain_tp=allow_cross_domain_tp,
                                                   deadline=deadline)
    search["wall_s"] = round(time.perf_counter() - start, 3)
    return SolveResult(status="infeasible", layouts=[], objective_us=[], search=search, reasons=reasons,
                       closest=closest, repairs=repairs)


def _solve_cpsat(space: SearchSpace, tables: CostTables, top_k: int, deadline: float | None, workers: int):
    """CP-SAT top-k: (1) a warm start ranks the layouts of the few per-layer configurations with the
    lowest compute bound (hints, and an upper bound on the k-th step); (2) CP-SAT finds and proves the
    optimum S1; (3) CP-SAT enumerates every layout with step <= S1 * (1 + margin), widening the margin
    until it holds k layouts (or reaches the warm start's k-th step, which always holds k). All layouts
    at or below that bound are enumerated, so the k best of them are the true top-k."""
    from megasolve.solver.cpsat import ModelStats, NoLayout, build_model
    from megasolve.solver.exhaustive import warm_start

    seeds = warm_start(space, tables, want=top_k)
    try:
        built = build_model(space, tables, deadline=deadline)
    except NoLayout:
        return [], True, ModelStats()
    except TimeoutError:  # the model could not even be built in time: the warm start's layouts, unproven
        return seeds, False, ModelStats(proven_optimal=False)
    stats = built.stats
    best = _optimise(space, tables, built, seeds[0] if seeds else None, deadline, workers)
    if best is None:
        return [], stats.proven_optimal, stats
    if not stats.proven_optimal:  # time limit: the best found so far, not proven
        return _merge([best], seeds, top_k), False, stats
    cap = seeds[top_k - 1].cost.step_us if len(seeds) == top_k else None
    bounds = sorted({int(best.cost.step_us * (1 + m)) for m in (0.05, 0.2, 0.8, 3.2, 12.8)})
    if cap is not None:
        bounds = [b for b in bounds if b < cap] + [cap]
    else:
        bounds.append(None)  # finally: every feasible layout (few, or the margins would have held k)
    return _enumerate_below(space, tables, built, bounds, [best] + seeds, top_k, deadline, workers)


def _merge(found: list[Ranked], seeds: list[Ranked], top_k: int) -> list[Ranked]:
    return sorted({r.key: r for r in list(found) + list(seeds)}.values(), key=lambda r: r.order)[:top_k]


def _optimise(space, tables, built, hint, deadline, workers):
    """One CP-SAT optimisation: the single best layout (hinted with a warm-start layout if any)."""
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import decode, new_solver

    stats = built.stats
    if hint is not None:
        for axis in AXES:
            for value, lit in zip(space.domains[axis], built.literals[axis]):
                built.model.AddHint(lit, value == hint.point[axis])
    remaining = None if deadline is None else max(0.01, deadline - time.perf_counter())
    solver = new_solver(remaining, workers)
    t0 = time.perf_counter()
    status = solver.Solve(built.model)
    stats.solve_s += time.perf_counter() - t0
    stats.solves += 1
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        stats.proven_optimal = status == cp_model.INFEASIBLE
        return hint
    stats.proven_optimal = status == cp_model.OPTIMAL
    point = decode(space, built, solver)
    cost = tables.evaluate(point)
    if solver.Value(built.step) != cost.step_us or not cost.fits:  # the two encodings must agree exactly
        raise AssertionError(f"CP-SAT objective {solver.Value(built.step)} != canonical {cost.step_us}")
    return Ranked(point, cost, point_key(space, point))


def _enumerate_below(space, tables, built, bounds, seeds, top_k, deadline, workers):
    """Enumerate every layout with step <= bound, for each bound in turn (each guarded by its own
    literal and switched on as an assumption), until the layouts found under the bound number k."""
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import decode, new_solver

    stats = built.stats
    model = built.model
    model.clear_objective()
    found: dict[tuple, Ranked] = {}

    class Collect(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            point = decode(space, built, self)
            key = point_key(space, point)
            if key not in found:
                cost = tables.evaluate(point)
                if self.Value(built.step) != cost.step_us or not cost.fits:  # both encodings agree exactly
                    raise AssertionError(f"CP-SAT step {self.Value(built.step)} != canonical {cost.step_us}")
                found[key] = Ranked(point, cost, key)

    guards = []
    for bound in bounds:
        guard = model.NewBoolVar(f"step<={bound}")
        if bound is not None:
            model.Add(built.step <= bound).OnlyEnforceIf(guard)
        guards.append(guard)
    proven = True
    for bound, guard in zip(bounds, guards):
        remaining = None if deadline is None else deadline - time.perf_counter()
        if remaining is not None and remaining <= 0:
            proven = False
            break
        model.ClearAssumptions()
        model.AddAssumption(guard)
        solver = new_solver(remaining, workers)
        solver.parameters.enumerate_all_solutions = True
        t0 = time.perf_counter()
        status = solver.Solve(model, Collect())
        stats.solve_s += time.perf_counter() - t0
        stats.solves += 1
        if status not in (cp_model.OPTIMAL, cp_model.INFEASIBLE):  # stopped by the time limit
            proven = False
            break
        under = [r for r in found.values() if bound is None or r.cost.step_us <= bound]
        if len(under) >= top_k:
            break
    stats.enumerated = len(found)
    stats.proven_optimal = proven
    if proven:
        return sorted(found.values(), key=lambda r: r.order)[:top_k], True, stats
    return _merge(list(found.values()), seeds, top_k), False, stats
