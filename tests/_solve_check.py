"""One check several tests share: solve's plans cost exactly what ``estimate`` says of the same layout."""

from __future__ import annotations

import pytest

from megasolve.cost.estimate import estimate
from megasolve.solver.solve import solve


def solve_equals_estimate(spec, cluster, workload, top_k: int = 2):
    """Solve (one minute at most) and assert each plan's step time and peak memory equal ``estimate``'s
    (relative 1e-6); returns the result."""
    result = solve(spec, cluster, workload, top_k=top_k, time_limit_s=60, explain=False)
    assert result.layouts
    for plan in result.layouts:
        again = estimate(spec, cluster, plan.workload, plan.layout)
        assert again.time.step_s == pytest.approx(plan.estimate.time.step_s, rel=1e-6)
        assert max(s.total_bytes for s in again.memory) == pytest.approx(
            max(s.total_bytes for s in plan.estimate.memory), rel=1e-6)
    return result
