"""A measured expert-parallel locality study (Megatron-MoE-ModelZoo: Qwen3-235B-A22B on 256 H100;
``benchmarks/ep_locality_study.py``): each layout costed as launched, ordered as measured.

Known gap, kept visible: the Megatron-FSDP row (EP 8, expert-DP 32 across nodes, another code version; costed as
the repository's launch script of that week ran it, TP 1 with fp32 main grads, where the results table says TP 2)
is predicted 1.10x its measurement, 0.3 s slower than EP 32 and 0.2 s slower than the 32-stage pipeline, which
mis-orders its two pairs with them; every other pair must stay right and every row within 25 %."""

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


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_step_time_within_a_quarter_of_the_measurement(row):
    assert 0.75 <= row.predicted_s / row.measured_s <= 1.25


def test_the_tables_tp_2_costs_the_same_traffic_twice_as_often():
    """The table's TP 2 halves DP (128), so each rank runs 4 micro-batches of the same per-micro-batch expert-DP
    traffic instead of 2: 880 GB a GPU a step (two bf16 gathers and an fp32 reduce-scatter of 28.4 B expert
    parameters over 32 nodes, 4 times), the whole measured 17.6 s at a 50 GB/s NIC's line rate."""
    (row, tp), = STUDY.table_variants()
    scored = {r.name: r for r in ROWS}[FSDP]
    assert (row.name, tp) == (FSDP, 2)
    assert row.predicted_s > 1.5 * scored.predicted_s > 1.5 * row.measured_s
