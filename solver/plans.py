"""Distinct plans: layouts that cost the same are one plan, shown once with its other spellings.

An uneven pipeline split written as ``--decoder-first/last-pipeline-num-layers`` and the same split
written as a ``--pipeline-model-parallel-layout`` string predict the same step and the same memory: one
plan written two ways. (CP spellings were too, ``tp1 mbs2`` and ``tp1 cp2 mbs4``, until the KV ring's
output and gradient corrections were costed: ``cost/step.py`` ``cp_ring_extra_bytes``.) Two layouts
are one plan when every component of their canonical cost -- step, pipeline time, the slowest stage's
time and compute, optimizer time, peak memory -- is equal within ``PLAN_TOLERANCE`` (plus one quantum,
1 us or 1 MiB). The plan is shown by its first layout in rank order (``exhaustive.Ranked.order``:
faster, then more headroom, then fewer parallel dimensions), followed by the others
(``= ppl:Et*5|(t*5|)*4t*2L``).
"""

from __future__ import annotations

from typing import Any, Protocol


class Ranked(Protocol):
    """A costed layout (``exhaustive.Ranked``): ``cost`` (``tables.Canonical``) and rank ``order``."""

    cost: Any
    order: tuple

PLAN_TOLERANCE = 1e-3  # 0.1 %: the "equal within 0.1 %", well below the speed model's error


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= PLAN_TOLERANCE * max(abs(a), abs(b)) + 1


def same_plan(a: Ranked, b: Ranked) -> bool:
    """Every cost component of ``a`` and ``b`` equal within the tolerance."""
    return (_close(a.cost.step_us, b.cost.step_us) and _close(a.cost.peak_mib, b.cost.peak_mib)
            and len(a.cost.parts) == len(b.cost.parts)
            and all(_close(x, y) for x, y in zip(a.cost.parts, b.cost.parts)))


def group_plans(ranked: list[Ranked]) -> list[list[Ranked]]:
    """``ranked`` (any order) as plans in rank order, each [representative, other spellings...]."""
    plans: list[list[Ranked]] = []
    for r in sorted(ranked, key=lambda r: r.order):
        for plan in plans:
            if same_plan(plan[0], r):
                plan.append(r)
                break
        else:
            plans.append([r])
    return plans


def cover_us(step_us: int) -> int:
    """The highest step a layout of the same plan as one with ``step_us`` can have: an enumeration
    complete up to this bound holds every spelling of that plan."""
    return int((step_us + 1) / (1 - PLAN_TOLERANCE)) + 1
