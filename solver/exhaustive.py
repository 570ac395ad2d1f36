"""Brute-force oracle: every rule-legal layout of the space, costed with the same integer tables
as the CP-SAT model (``tables.CostTables.evaluate``), ranked the same way. For tests, benchmarks
and ``--engine exhaustive``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from megasolve.solver.space import AXES, Point, SearchSpace
from megasolve.solver.tables import Canonical, CostTables


@dataclass(frozen=True, slots=True)
class Ranked:
    point: Point
    cost: Canonical
    key: tuple[int, ...]

    @property
    def order(self) -> tuple:
        """Rank order: step time, then lower peak memory (more headroom), then the fixed axis key."""
        return (self.cost.step_us, self.cost.peak_mib, self.key)


def point_key(space: SearchSpace, point: Point) -> tuple[int, ...]:
    """Deterministic tie-break: the position of each axis value in its domain, axis by axis."""
    return tuple(space.domains[a].index(point[a]) for a in AXES)


def legal_points(space: SearchSpace) -> Iterator[Point]:
    """Depth-first over ``AXES``; each rule is checked as soon as all of its axes are assigned."""
    rules_at: dict[int, list] = {i: [] for i in range(len(AXES))}
    for rule, axes in space.rules():
        last = max(AXES.index(a) for a in axes)
        rules_at[last].append(rule)
    from megasolve.solver.space import _fields_of

    def walk(depth: int, partial: Point) -> Iterator[Point]:
        if depth == len(AXES):
            yield dict(partial)
            return
        axis = AXES[depth]
        for value in space.domains[axis]:
            partial[axis] = value
            fields = _fields_of(partial)
            if all(rule.check(space.ctx, fields) for rule in rules_at[depth]):
                yield from walk(depth + 1, partial)
        partial.pop(axis, None)

    yield from walk(0, {})


@dataclass(frozen=True, slots=True)
class ExhaustiveResult:
    ranked: list[Ranked]  # top-k, best first
    num_legal: int
    num_fit: int
    wall_s: float


def solve_exhaustive(space: SearchSpace, tables: CostTables, top_k: int) -> ExhaustiveResult:
    start = time.perf_counter()
    best: list[Ranked] = []
    num_legal = num_fit = 0
    for point in legal_points(space):
        num_legal += 1
        cost = tables.evaluate(point)
        if not cost.fits:
            continue
        num_fit += 1
        best.append(Ranked(point, cost, point_key(space, point)))
        if len(best) > 4 * top_k + 64:
            best.sort(key=lambda r: r.order)
            del best[top_k:]
    best.sort(key=lambda r: r.order)
    return ExhaustiveResult(best[:top_k], num_legal, num_fit, time.perf_counter() - start)


def config_lower_bounds(space: SearchSpace, tables: CostTables) -> list[tuple[int, Point]]:
    """Per-layer configurations ``(tp, cp, mbs, sp, etp, ep)`` with a valid lower bound on the step:
    ``m * sum(tau) / pp >= gbs*tp*cp/(mbs*N) * (whole-model layer time without recompute)``, sorted."""
    import itertools

    spec, n = tables.spec, tables.cluster.num_gpus
    gbs = tables.workload.global_batch_size
    num_moe = sum(spec.is_moe_layer(i) for i in range(spec.num_layers))
    axes = ("tp", "cp", "mbs", "sp", "etp", "ep")
    out = []
    for values in itertools.product(*(space.domains[a] for a in axes)):
        config = dict(zip(axes, values))
        if n % (config["tp"] * config["cp"]) or n % (config["etp"] * config["ep"]):
            continue
        point = dict(config, sel=False)
        try:
            work = (spec.num_layers - num_moe) * tables.value("t_dense", point) + tables.value("t_logits", point)
            if num_moe:
                work += num_moe * tables.value("t_moe", point)
        except ValueError:
            continue
        out.append(((gbs * config["tp"] * config["cp"] * work) // (config["mbs"] * n), config))
    out.sort(key=lambda item: (item[0], tuple(space.domains[a].index(item[1][a]) for a in axes)))
    return [item for item in out if _static_fits_somewhere(space, tables, item[1])]


def _static_fits_somewhere(space: SearchSpace, tables: CostTables, config: Point) -> bool:
    """Necessary condition: with the deepest pipeline allowed, the average stage's weights, grads and
    (sharded) optimizer state fit the GPU. Prunes e.g. a 671B MoE with ep=1."""
    spec = tables.spec
    num_moe = sum(spec.is_moe_layer(i) for i in range(spec.num_layers))
    cap = tables.capacity_mib - tables.other_mib
    for pp in space.domains["pp"]:
        n = tables.cluster.num_gpus
        if n % (pp * config["tp"] * config["cp"]) or n % (pp * config["etp"] * config["ep"]):
            continue
        dp = n // (pp * config["tp"] * config["cp"])
        if dp not in space.domains["dp"]:
            continue
        for dop in space.domains["dop"]:
            point = dict(config, pp=pp, dp=dp, dop=dop)
            static = (spec.num_layers - num_moe) * tables.value("ms_dense_layer", point)
            if num_moe:
                static += num_moe * (tables.value("ms_moe_layer", point) + tables.value("ms_expert", point))
            if static <= pp * cap:
                return True
    return False


def warm_start(space: SearchSpace, tables: CostTables, want: int, max_evaluations: int = 10_000) -> list[Ranked]:
    """Good layouts to hint CP-SAT with: per-layer configurations in increasing order of their compute
    bound, each completed with every legal pipeline / recompute / optimizer choice and costed, until
    the next bound exceeds the ``want``-th best found or ``max_evaluations`` layouts were costed (a
    heuristic with a deterministic budget: CP-SAT still proves the result)."""
    from megasolve.solver.space import SearchSpace as Space

    found: list[Ranked] = []
    evaluations = 0
    for bound, config in config_lower_bounds(space, tables):
        if len(found) >= want and bound > found[want - 1].cost.step_us:
            break
        if evaluations >= max_evaluations and found:
            break
        sub = Space(ctx=space.ctx, domains={a: ((config[a],) if a in config else space.domains[a]) for a in AXES})
        for point in legal_points(sub):
            evaluations += 1
            cost = tables.evaluate(point)
            if cost.fits:
                found.append(Ranked(point, cost, point_key(space, point)))
        found.sort(key=lambda r: r.order)
        del found[want:]
    return found
