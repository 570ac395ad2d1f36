"""megasolve's EP all-to-all against the dispatch / combine latencies NVIDIA measured (arXiv:2603.07685 Table 7;
``benchmarks/a2a_table7.py``): bytes and hops within -30 .. +20 % of every cell, and the fixed per-call cost a step
does not pay visible as a residual of about 110 us inside an NVLink domain (``calibration.yaml`` all_to_all)."""

from __future__ import annotations

import statistics

from _benchmarks import load

TABLE = load("a2a_table7")
ROWS = TABLE.rows()


def test_every_cell_is_priced_within_its_band():
    assert len(ROWS) == 16
    bad = [(gpu, d, ep, round(p / m - 1, 3)) for gpu, d, ep, m, p in ROWS if not -0.30 <= p / m - 1 <= 0.20]
    assert not bad, bad


def test_inside_a_domain_the_residual_is_a_fixed_cost_per_call():
    inside = [m - p for gpu, d, ep, m, p in ROWS if gpu == "gb200" or ep == 8]
    assert len(inside) == 10 and all(m > p for gpu, d, ep, m, p in ROWS if gpu == "gb200" or ep == 8)
    assert 80 <= statistics.median(inside) <= 150  # us: launch, token-count exchange, completion
