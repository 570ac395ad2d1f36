"""Pair ordering, the measure every layout study in ``benchmarks/`` reports: of the pairs of rows whose measurements
differ, which ones the prediction orders the same way (issue 12: "a test that every measured layout study in the data
is ordered right")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

Row = TypeVar("Row")


def ordered_pairs(rows: Sequence[Row], measured: Callable[[Row], float], predicted: Callable[[Row], float | None],
                  group: Callable[[Row], Hashable] | None = None) -> tuple[list[tuple[Row, Row]], list[tuple[Row, Row]]]:
    """(ordered as measured, not) over the pairs of rows of one group (all rows: one group) whose measurements
    differ. ``measured`` and ``predicted`` must point the same way (both times, or both rates); a row without a
    prediction (None: it did not fit) orders none of its pairs."""
    groups: dict[Hashable, list[Row]] = {}
    for row in rows:
        groups.setdefault(group(row) if group else None, []).append(row)
    right, wrong = [], []
    for members in groups.values():
        for a, b in itertools.combinations(members, 2):
            gap = measured(a) - measured(b)
            if gap == 0:
                continue
            pa, pb = predicted(a), predicted(b)
            ok = pa is not None and pb is not None and gap * (pa - pb) > 0
            (right if ok else wrong).append((a, b))
    return right, wrong
