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
