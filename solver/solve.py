"""``solve``: the best layouts for a model on a cluster, or the reasons none fits.

Outcomes are values: a ``SolveResult`` with status ``optimal`` / ``feasible`` (time limit hit, best
found so far, not proven) / ``infeasible`` (with the binding rules or the memory shortfall, the
closest layouts and repairs).
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field
from typing import Any

from megasolve.cost.calibration import Profile, load_profile, use_profile
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout, Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.api import LayoutReport, estimate, layout_dict
from megasolve.solver.exhaustive import Ranked, point_key, solve_exhaustive
from megasolve.solver.feasibility import SearchRules
from megasolve.solver.knobs import resolve_knobs, tag as comm_tag
from megasolve.solver.plans import group_plans
from megasolve.solver.space import AXES, SearchSpace, point_layout
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
    equivalents: list[list[Layout]] = field(default_factory=list)  # per plan: its other spellings
    min_headroom_bytes: float = 0.0
    band: bool = True  # the check every stage passed: predicted + its uncertainty band + the margin <= capacity

    def tight(self, report: LayoutReport) -> bool:
        """The layout leaves less than its band (with ``band``) plus the required headroom on some stage."""
        free = report.estimate.band_headroom_bytes if self.band else report.estimate.headroom_bytes
        return free < self.min_headroom_bytes - TIGHT_TOLERANCE_BYTES

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "layouts": []}
        for rank, report in enumerate(self.layouts, start=1):
            data = report.as_dict()
            same = self.equivalents[rank - 1] if rank <= len(self.equivalents) else []
            out["layouts"].append({"rank": rank, "layout": data["layout"], "comm": comm_dict(report),
                                   "memory": data["memory"],
                                   "time": data["time"], "violations": data["violations"],
                                   "tight": self.tight(report),
                                   "equivalent_layouts": [layout_dict(x, report.workload) for x in same]})
        if self.layouts:
            first = self.layouts[0].as_dict()
            out = {"model": first["model"], "model_params": first["model_params"],
                   "ignored_features": first["ignored_features"], "model_notes": first["model_notes"],
                   "cluster": first["cluster"],
                   "workload": first["workload"], **out}
            if "speed_basis" in first:  # the same for every layout: the GPU, precision and kind decide it
                out["speed_basis"] = first["speed_basis"]
        out["search"] = self.search
        if self.status in ("infeasible", "unknown"):
            out["reasons"] = self.reasons
            out["closest"] = self.closest
            out["repairs"] = self.repairs
        return out


def comm_dict(report: LayoutReport) -> dict[str, Any]:
    """The communication settings a layout was costed and is launched with (``knobs.py``): what Megatron
    runs, so the overlaps it ignores for this layout (TP overlap without SP, p2p overlap without virtual
    stages) read false; ``tag`` is the short label of the tables."""
    wl, layout, moe = report.workload, report.layout, report.spec.is_moe
    return {"tag": comm_tag(wl, layout, report.spec),
            "tp_comm_overlap": wl.tp_comm_overlap and layout.tp > 1 and layout.sequence_parallel,
            "overlap_p2p_comm": wl.overlap_p2p_comm and layout.vpp > 1,
            "moe_dispatcher": wl.moe_dispatcher if moe else None,
            "moe_ep_overlap": wl.moe_ep_overlap if moe else None,
            "moe_shared_expert_overlap": wl.moe_shared_expert_overlap if moe else None,
            "cp_comm_type": report.cp_comm_type}


@dataclass(frozen=True, slots=True, kw_only=True)
class Headroom:
    """Memory every pipeline stage of a returned layout must leave free: ``gb`` (10^9 bytes) or a
    ``fraction`` of the GPU's usable memory (``--min-headroom 8`` / ``8GB`` / ``10%``)."""

    gb: float | None = None
    fraction: float | None = None

    def __post_init__(self) -> None:
        for name, value, top in (("gb", self.gb, math.inf), ("fraction", self.fraction, 1.0)):
            if value is not None and not (0 <= value < top):
                raise MegasolveError(field="--min-headroom", value=value, rule=f"{name} must be in [0, {top})",
                                     fix="e.g. --min-headroom 10% or --min-headroom 8GB")

    def bytes(self, cluster: Cluster) -> float:
        if self.fraction is not None:
            return self.fraction * cluster.gpu.usable_memory_bytes
        return (self.gb or 0.0) * 1e9

    @property
    def label(self) -> str:
        return f"{self.fraction:.0%}" if self.fraction is not None else f"{self.gb or 0:g} GB"


# The default check is per stage: predicted peak + the stage's uncertainty band <= usable memory (the band:
# cost/memory.py ``band_parts``, 0.5 % of static bytes + 5 % of activations, +5 % on stages with MoE
# layers, +5 % with unfused attention; fixed allocations exact). Why not a flat margin: the error lives
# in the activations, so a flat 10 % of capacity over-protects static-heavy stages (a 405B FSDP shard)
# and under-protects activation-heavy ones (long sequences, MoE). ``--min-headroom`` adds a margin on top.
DEFAULT_MIN_HEADROOM = None
# the tables round every term up to whole MiB; an estimate in floats may differ by a few bytes
TIGHT_TOLERANCE_BYTES = 2**20


def solve(spec: ModelSpec, cluster: Cluster, workload: Workload, *, top_k: int = 5,
          fixed: dict[str, Any] | None = None, time_limit_s: float | None = 30.0, engine: str = "cpsat",
          allow_cross_domain_tp: bool = False, workers: int = 1, explain: bool = True,
          min_headroom: Headroom | None = DEFAULT_MIN_HEADROOM, requires: tuple[str, ...] = (),
          profile: Profile | str | None = None, band: bool = True, knobs: tuple[str, ...] = ()) -> SolveResult:
    """Rank the ``top_k`` fastest distinct plans (``plans.py``) that obey Megatron's rules (and the
    ``requires`` constraints, ``require.py``) and fit in memory: every stage's predicted peak plus its
    uncertainty band (``band``; ``cost/memory.py`` ``memory_uncertainty_bytes``) plus ``min_headroom``
    within the GPU's usable memory.

    Layouts inside the band or the margin are excluded, so #1 leaves them; only when nothing fits with
    them but something fits without either are those layouts returned, each marked ``tight`` (an answer
    that may OOM, said so, beats "nothing fits" on a small cluster).

    ``profile``: the calibration ``Profile`` the cost model uses (or a profile file); None: the shipped one.
    ``knobs``: communication knobs (``knobs.COMM_KNOBS``) chosen per layout, each set where Megatron allows
    it and it is fastest (``knobs.py``), unless ``fixed`` pins it (``--fix tp_comm_overlap=true``); each
    returned layout's report carries the workload it was costed with."""
    spec.require_plannable()
    with use_profile(load_profile(profile)):
        return _solve(spec, cluster, workload, top_k=top_k, fixed=fixed, time_limit_s=time_limit_s, engine=engine,
                      allow_cross_domain_tp=allow_cross_domain_tp, workers=workers, explain=explain,
                      min_headroom=min_headroom, requires=requires, band=band, knobs=knobs)


def _solve(spec: ModelSpec, cluster: Cluster, workload: Workload, *, top_k: int, fixed: dict[str, Any] | None,
           time_limit_s: float | None, engine: str, allow_cross_domain_tp: bool, workers: int,
           explain: bool, min_headroom: Headroom | None, requires: tuple[str, ...], band: bool,
           knobs: tuple[str, ...] = ()) -> SolveResult:
    start = time.perf_counter()
    deadline = None if time_limit_s is None else start + time_limit_s
    workload, searched, fixed = resolve_knobs(workload, fixed, knobs)
    rules = SearchRules(fixed=fixed, allow_cross_domain_tp=allow_cross_domain_tp, requires=tuple(requires),
                        min_headroom=min_headroom, knobs=searched)
    space = rules.space(spec, cluster, workload)
    margin = rules.headroom_bytes(cluster)
    search: dict[str, Any] = {"engine": engine, "space_size": space.size, "top_k": top_k,
                              "domains": {a: len(space.domains[a]) for a in AXES},
                              "min_headroom_gb": round(margin / 1e9, 2), "uncertainty_band": band,
                              "searched_knobs": sorted(k for k in searched if spec.is_moe or not k.startswith("moe_"))}
    tables = rules.tables(spec, cluster, workload, band=band)
    ranked, proven = _search(space, tables, engine, top_k, deadline, workers, search)
    tight = False
    if not ranked and proven and (margin > 0 or band):  # nothing leaves band + margin: does anything fit?
        tables = rules.tables(spec, cluster, workload, margin=False)
        ranked, proven = _search(space, tables, engine, top_k, deadline, workers, search)
        tight = bool(ranked)
    search["tight"] = tight
    plans = group_plans(ranked)
    reports = [estimate(spec, cluster, tables.chosen_workload(plan[0].point), point_layout(plan[0].point),
                        allow_cross_domain_tp) for plan in plans]
    equivalents = [_spellings(plan) for plan in plans]
    search["wall_s"] = round(time.perf_counter() - start, 3)
    search["proven_optimal"] = proven
    if ranked:
        return SolveResult(status="optimal" if proven else "feasible", layouts=reports,
                           objective_us=[plan[0].cost.step_us for plan in plans], search=search,
                           equivalents=equivalents, min_headroom_bytes=margin, band=band)
    if not proven:  # the time limit ended the search before any fitting layout was found
        return SolveResult(status="unknown", layouts=[], objective_us=[], search=search,
                           reasons=["the time limit ran out before any fitting layout was found"],
                           repairs=["raise --time-limit"])
    if not explain:
        return SolveResult(status="infeasible", layouts=[], objective_us=[], search=search)
    from megasolve.solver.explain import explain_infeasible

    reasons, closest, repairs = explain_infeasible(spec, cluster, workload, space, tables, rules=rules,
                                                   deadline=deadline)
    search["wall_s"] = round(time.perf_counter() - start, 3)
    return SolveResult(status="infeasible", layouts=[], objective_us=[], search=search, reasons=reasons,
                       closest=closest, repairs=repairs)


def _spellings(plan: list[Ranked]) -> list[Layout]:
    """The plan's other spellings as layouts, once each: those that differ from #1 only in a searched
    dispatcher (``disp``, the same step) are the same layout flags and are not repeated."""
    own, out = point_layout(plan[0].point), []
    for r in plan[1:]:
        layout = point_layout(r.point)
        if layout != own and layout not in out:
            out.append(layout)
    return out


def _search(space: SearchSpace, tables: CostTables, engine: str, top_k: int, deadline: float | None,
            workers: int, search: dict[str, Any]) -> tuple[list[Ranked], bool]:
    """The ``top_k`` plans of one engine (every spelling of each), proven or not; statistics into ``search``."""
    if engine == "exhaustive":
        result = solve_exhaustive(space, tables, top_k)
        search.update(legal_layouts=result.num_legal, fitting_layouts=result.num_fit)
        return result.ranked, True
    if engine == "cpsat":
        ranked, proven, stats = _solve_cpsat(space, tables, top_k, deadline, workers)
        search.update(variables=stats.variables, constraints=stats.constraints, pipeline_rows=stats.rows,
                      stage_slots=stats.slots, solves=stats.solves, build_s=round(stats.build_s, 3),
                      solve_s=round(stats.solve_s, 3))
        return ranked, proven
    raise ValueError(engine)


def _grow(value: int, fraction: float) -> int:
    return int(value * (1 + fraction)) + 1


def _next_threshold(threshold: int, under: list[int], top_k: int, lowest: list[int]) -> int:
    """The next enumeration bound: the bound that at least doubles the configurations in the model
    (``lowest``: their lowest bounds, sorted); once ``c < k`` layouts are known, from ``best`` up to
    ``threshold``, no more than ``best + (threshold - best) * k / c`` (``k / c`` clipped to 1.5..4)
    if that is lower. Always at least 0.5% above the last bound. Only the number of rounds depends
    on this: each round's enumeration is complete up to its bound."""
    chosen = bisect.bisect_right(lowest, threshold)
    target = lowest[min(2 * max(chosen, 1), len(lowest) - 1)] if chosen < len(lowest) else None
    if under:
        best = under[0]
        ratio = min(4.0, max(1.5, top_k / len(under)))
        span = best + int((threshold - best) * ratio) + 1
        target = span if target is None else min(target, span)
    if not under and target is not None:  # nothing found yet: at most 15 % higher (DeepSeek-V3 on 16,384 H100 had
        target = min(target, _grow(threshold, 0.15))  # jumped 0.57 -> 0.78 s past a best of 0.58 s: 2x the keys)
    return max(_grow(threshold, 0.005), target if target is not None else _grow(threshold, 1.0))


def _toward_ceiling(threshold: int, below: int, ceiling: int) -> int:
    """The next round's bound once the probe knows a layout's step (``ceiling``, with its margin): no further than
    it, so one round reaches it, and no further than the usual growth (``threshold``, ``_next_threshold``) either:
    the probe's best can lie far above the top-k when its lowest-bound keys hold few fitting layouts (Kimi K2 on
    4,096 H100, since DeepEP's RDMA contention was costed: the probe found one layout, 3.61 s, against a #1 of
    1.48 s, and the round sent toward it enumerated tens of thousands of keys -- 46,713 and 188 s where first
    measured -- until the 60 s limit stopped the search unproven; capped, 7 rounds and 8 s). Any bound keeps the
    search exact.

    >>> _toward_ceiling(1_284_000, 1_117_000, 3_790_000), _toward_ceiling(1_284_000, 1_117_000, 1_200_000)
    (1284000, 1200000)
    """
    return max(_grow(below, 0.005), min(threshold, ceiling))


def _solve_cpsat(space: SearchSpace, tables: CostTables, top_k: int, deadline: float | None, workers: int):
    """CP-SAT top-k as a best-first branch and bound over configurations (``bounds.CONFIG_AXES``):

    1. every configuration that can fit gets a memory-aware lower bound on its step
       (``bounds.ConfigBounds``; the others have no fitting layout);
    2. for a threshold ``T`` that grows from the lowest bound (``_next_threshold``), CP-SAT
       enumerates every layout with ``T_prev < step <= T`` in a model restricted to the
       (configuration, vpp, rc) keys whose bound is ``<= T`` -- every such layout lies in one of
       them, so after the round every layout with step ``<= T`` is known -- until they number ``k``. The ``k`` best of
       them are the true top-k (all layouts tied with the k-th are among them), ordered like the
       oracle. A last round without a threshold (every fitting layout) ends the search when even a
       threshold 64x the highest bound holds fewer than ``k``."""
    from megasolve.solver.bounds import ConfigBounds
    from megasolve.solver.cpsat import ModelStats, NoLayout, pipeline_rows
    from megasolve.solver.plans import cover_us, group_plans

    stats = ModelStats()
    start = time.perf_counter()
    try:
        rows = pipeline_rows(space, tables, deadline)
        bounds = ConfigBounds(space, tables, rows)
        configs = bounds.configs(deadline)
    except NoLayout:
        return [], True, stats
    except TimeoutError:
        return [], False, ModelStats(proven_optimal=False)
    finally:
        stats.build_s += time.perf_counter() - start
    if not configs:  # no configuration has a row group that can fit: no layout fits
        return [], True, stats
    lowest = sorted(configs.values())
    threshold = lowest[0]
    ceiling: int | None = None  # a threshold that holds a known layout (``_probe``), 0 if none was found
    below = 0  # every layout with step <= below is in `found` already
    found: dict[tuple, Ranked] = {}
    proven = True
    for attempt in range(64):
        last = threshold >= max(configs.values()) * 64 or attempt == 63
        chosen = {key + group: bound for key, low in configs.items() if last or low <= threshold
                  for group, bound in bounds.groups(key).items() if last or bound <= threshold}
        done = _enumerate_configs(space, tables, rows, chosen, None if last else threshold, below, found,
                                  stats, deadline, workers)
        if not done:
            proven = False
            break
        plans = group_plans([r for r in found.values() if last or r.cost.step_us <= threshold])
        if last:
            break
        if len(plans) >= top_k:
            cover = cover_us(plans[top_k - 1][0].cost.step_us)
            if cover <= threshold:
                break
            below, threshold = threshold, cover  # one more round: every spelling of the k-th plan
            continue
        below = threshold
        threshold = _next_threshold(threshold, [plan[0].cost.step_us for plan in plans], top_k, lowest)
        if not plans and ceiling is None and _keys_under(configs, bounds, threshold) >= PROBE_MIN_KEYS:
            # the next round is a large model and no layout is known: find one's step first
            incumbent = _probe(space, tables, rows, bounds, configs, found, stats, deadline)
            ceiling = _grow(incumbent, PROBE_MARGIN) if incumbent else 0
        if not plans and ceiling:
            threshold = _toward_ceiling(threshold, below, ceiling)
    stats.enumerated = len(found)
    stats.proven_optimal = proven
    plans = group_plans(list(found.values()))[:top_k]
    return [r for plan in plans for r in plan], proven, stats


# Where the bounds sit below the steps layouts reach, rounds that grow the threshold from the lowest bound find
# nothing for several rounds and the one that does may overshoot, enumerating thousands of configurations to no use
# (DeepSeek-V3 on 16,384 H100 before the bounds held the DP tail: lowest bound 0.337 s, best layout 0.583 s, the
# eighth round at 0.780 s). When no layout is known yet and the next round's model would hold PROBE_MIN_KEYS
# (configuration, vpp, rc) keys or more, the best step among the PROBE_KEYS lowest-bound keys is found first (by
# minimising) and the threshold goes to PROBE_MARGIN above it, where the next plans of a top-k usually lie, unless
# that is past the usual growth (``_toward_ceiling``: a probe best far above the top-k had sent a round there). Any
# threshold keeps the search exact; with the tail in the bounds the probe saves 0.4 s on that instance and runs
# rarely elsewhere (benchmarks/solver_benchmark.py --probe); its layouts also answer a --time-limit that stops the
# search before any round finds one.
PROBE_MIN_KEYS = 1000
PROBE_KEYS = 512
PROBE_MARGIN = 0.05


def _keys_under(configs: dict[tuple, int], bounds, threshold: int) -> int:
    """How many (configuration, vpp, rc) keys have a bound at most ``threshold``."""
    return sum(1 for key, low in configs.items() if low <= threshold
               for bound in bounds.groups(key).values() if bound <= threshold)


def _probe(space, tables, rows, bounds, configs, found, stats, deadline) -> int | None:
    """The lowest step (us) of a layout in the ``PROBE_KEYS`` keys with the lowest bounds, or None when none
    fits; the best found so far when the time limit is reached. Each layout found goes into ``found`` (a time
    limit that stops the search later still returns it)."""
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import new_solver

    keys: dict[tuple, int] = {}
    for key in sorted(configs, key=lambda k: (configs[k], k)):
        # a key's bound is at least its configuration's: past the PROBE_KEYS-th lowest key bound, none can enter
        if len(keys) >= PROBE_KEYS and configs[key] > sorted(keys.values())[PROBE_KEYS - 1]:
            break
        keys.update({key + group: bound for group, bound in bounds.groups(key).items()})
    chosen = dict(sorted(keys.items(), key=lambda kv: (kv[1], kv[0]))[:PROBE_KEYS])
    best = None
    for part in _pipeline_parts(chosen):
        remaining = None if deadline is None else deadline - time.perf_counter()
        if remaining is not None and remaining <= 0:
            return best
        try:
            restricted = _build(space, tables, rows, part, stats, deadline)
        except TimeoutError:
            return best
        if restricted is None:
            continue
        sub, built = restricted
        if best is not None:
            built.model.Add(built.step < best)
        solver = new_solver(remaining, 1)
        solver.parameters.linearization_level = 0
        t0 = time.perf_counter()
        status = solver.Solve(built.model)
        stats.solve_s += time.perf_counter() - t0
        stats.solves += 1
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            best = solver.Value(built.step)
            _record(space, tables, sub, built, solver, found)
    return best


def _record(space, tables, sub, built, solution, found) -> None:
    """The layout of a CP-SAT ``solution`` (a solver or a solution callback) into ``found``, its canonical cost
    checked against the model's step (both encodings agree exactly)."""
    from megasolve.solver.cpsat import decode

    point = decode(sub, built, solution)
    key = point_key(space, point)
    if key not in found:
        cost = tables.evaluate(point)
        if solution.Value(built.step) != cost.step_us or not cost.fits:
            raise AssertionError(f"CP-SAT step {solution.Value(built.step)} != canonical {cost.step_us}")
        found[key] = Ranked(point, cost, key)


def _enumerate_configs(space, tables, rows, configs, threshold, below, found, stats, deadline, workers) -> bool:
    """Every layout with ``below < step <= threshold`` (None: no upper bound) whose configuration is one
    of ``configs``, into ``found``. False when the time limit stopped the enumeration.

    One model per (pp, vpp) of the keys: each holds only that pipeline's rows and stage slots, and
    CP-SAT's complete enumeration costs far less in several such models than in their union (Llama-3.1-70B
    @ 256 H100, last round, 75 keys: 2.1 s in one model, 0.3 s per pp; README "Performance")."""
    for part in _pipeline_parts(configs):
        if not _enumerate_part(space, tables, rows, part, threshold, below, found, stats, deadline):
            return False
    return True


def _pipeline_parts(keys: dict[tuple, int]) -> list[dict[tuple, int]]:
    """``keys`` split by their (pp, vpp), in that order: one CP-SAT model each."""
    from megasolve.solver.bounds import GROUP_AXES

    pp_at, vpp_at = GROUP_AXES.index("pp"), GROUP_AXES.index("vpp")
    parts: dict[tuple, dict[tuple, int]] = {}
    for key, bound in keys.items():
        parts.setdefault((key[pp_at], key[vpp_at]), {})[key] = bound
    return [part for _, part in sorted(parts.items())]


def _build(space, tables, rows, keys, stats, deadline):
    """``cpsat.build_restricted`` over ``keys``, its time counted in ``stats``; raises ``TimeoutError``."""
    from megasolve.solver.cpsat import build_restricted

    t0 = time.perf_counter()
    try:
        return build_restricted(space, tables, rows, keys, deadline=deadline)
    finally:
        stats.build_s += time.perf_counter() - t0


def _enumerate_part(space, tables, rows, configs, threshold, below, found, stats, deadline) -> bool:
    """``_enumerate_configs`` in one model over ``configs``."""
    from ortools.sat.python import cp_model

    from megasolve.solver.cpsat import new_solver

    try:
        restricted = _build(space, tables, rows, configs, stats, deadline)
    except TimeoutError:
        return False
    if restricted is None:
        return True
    sub, built = restricted
    if built.stats.variables >= stats.variables:  # the statistics of the largest model built
        stats.variables, stats.constraints = built.stats.variables, built.stats.constraints
        stats.rows, stats.slots = built.stats.rows, built.stats.slots
    model = built.model
    model.clear_objective()

    if threshold is not None:
        model.Add(built.step <= threshold)
    if below:
        model.Add(built.step > below)

    class Collect(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            _record(space, tables, sub, built, self, found)

    remaining = None if deadline is None else deadline - time.perf_counter()
    if remaining is not None and remaining <= 0:
        return False
    # enumerating every solution is a sequential search in CP-SAT (as it was before, when assumption
    # literals forced it); `workers` is kept in `_enumerate_configs`'s signature
    solver = new_solver(remaining, 1)
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.linearization_level = 0  # the LP slows this enumeration down 2x here
    t0 = time.perf_counter()
    status = solver.Solve(model, Collect())
    stats.solve_s += time.perf_counter() - t0
    stats.solves += 1
    return status in (cp_model.OPTIMAL, cp_model.INFEASIBLE)
