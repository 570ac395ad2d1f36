"""Brute-force oracle: every rule-legal layout of the space, costed with the same integer tables
as the CP-SAT model (``tables.CostTables.evaluate``), ranked the same way. For tests, benchmarks
and ``--engine exhaustive``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from megasolve.solver.plans import cover_us, group_plans
from megasolve.solver.space import AXES, Point, SearchSpace
from megasolve.solver.tables import Canonical, CostTables


@dataclass(frozen=True, slots=True)
class Ranked:
    point: Point
    cost: Canonical
    key: tuple[int, ...]

    @property
    def order(self) -> tuple:
        """Rank order: step time, then lower peak memory (more headroom), then fewer parallel
        dimensions, then the fixed axis key."""
        return (self.cost.step_us, self.cost.peak_mib, parallel_dimensions(self.point), self.key)


def parallel_dimensions(point: Point) -> int:
    """How many of tp, cp, pp, vpp, ep (and etp, with experts split) are above 1."""
    return sum(point[a] > 1 for a in ("tp", "cp", "pp", "vpp", "ep")) + (point["ep"] > 1 and point["etp"] > 1)


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
    """The ``top_k`` distinct plans (``plans.group_plans``), every spelling of each, best first."""
    start = time.perf_counter()
    best: list[Ranked] = []
    num_legal = num_fit = 0
    limit = 4 * top_k + 64
    for point in legal_points(space):
        num_legal += 1
        cost = tables.evaluate(point)
        if not cost.fits:
            continue
        num_fit += 1
        best.append(Ranked(point, cost, point_key(space, point)))
        if len(best) > limit:  # keep what can still be among the top_k plans or their spellings
            plans = group_plans(best)
            if len(plans) >= top_k:
                cut = cover_us(plans[top_k - 1][0].cost.step_us)
                best = [r for r in best if r.cost.step_us <= cut]
            limit = max(limit, 2 * len(best))
    plans = group_plans(best)[:top_k]
    return ExhaustiveResult([r for plan in plans for r in plan], num_legal, num_fit, time.perf_counter() - start)
