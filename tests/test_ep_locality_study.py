"""A measured expert-parallel locality study (Megatron-MoE-ModelZoo: Qwen3-235B-A22B on 256 H100;
``benchmarks/ep_locality_study.py``): each layout costed as launched, ordered as measured.

Known gap, kept visible: the Megatron-FSDP row (EP 8, expert-DP 32 across nodes, ran on another code version with
flags the repository does not hold) is predicted 1.46x its measurement, which mis-orders its two pairs with rows of
different measured time; every other pair must stay right and every other row within 25 %."""

from __future__ import annotations

import pytest
from _benchmarks import load

STUDY = load("ep_locality_study")
ROWS = STUDY.evaluate()
FSDP = "ep8-deepep-fsdp"


def test_the_data_holds_the_five_layouts():
    assert [r.name for r in ROWS] == ["ep32-deepep", "ep32-deepep-a2a-overlap", FSDP, "ep8-a2a-pp32", "ep8-tp4-deepep"]


def test_every_pair_without_the_fsdp_row_is_ordered_as_measured():
    right, wrong = STUDY.pairs(ROWS)
    assert len(right) + len(wrong) == 9  # the two 17.6 s rows are not a pair
    assert all(FSDP in (a.name, b.name) for a, b in wrong), [(a.name, b.name) for a, b in wrong]
    # EP 32 across four nodes with DeepEP beats both intra-node EP 8 layouts without FSDP, as measured
    by_name = {r.name: r for r in ROWS}
    assert by_name["ep32-deepep"].predicted_s < min(by_name["ep8-a2a-pp32"].predicted_s,
                                                    by_name["ep8-tp4-deepep"].predicted_s)


@pytest.mark.parametrize("row", [r for r in ROWS if r.name != FSDP], ids=lambda r: r.name)
def test_step_time_within_a_quarter_of_the_measurement(row):
    assert 0.75 <= row.predicted_s / row.measured_s <= 1.25
