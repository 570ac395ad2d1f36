"""What-if sweeps, plots, reports and the Python API: monotone throughput, the solver-found minimum
cluster, the per-point JSON contract, golden table and report, valid image files.

Golden files live in tests/golden/; regenerate with ``MEGASOLVE_UPDATE_GOLDEN=1 pytest tests/test_whatif.py``
(then read the diff). Small presets, small clusters and ``jobs=2`` keep this file well under a minute
on two cores.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from click.testing import CliRunner

from megasolve.cli.main import cli
from megasolve.models import MegasolveError, Workload, load_preset
from megasolve.cli.parsing import parse_gpu_counts, parse_int_list
from megasolve.solver.whatif import ClusterKind, batch_split_reason, find_min_gpus, whatif
from megasolve.topology import Cluster

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("MEGASOLVE_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` (trailing spaces dropped) with ``tests/golden/name``."""
    text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with MEGASOLVE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.fixture(scope="module")
def dense_sweep():
    """llama-3.1-8b on 1 to 32 H100s (1 GPU does not fit), 1e12 tokens at 2.0 per GPU-hour."""
    return whatif(load_preset("llama-3.1-8b"), gpus=[1, 8, 16, 32], gpu="h100", tokens=1e12, gpu_hour_price=2.0,
                  jobs=2)


@pytest.fixture(scope="module")
def moe_sweep():
    return whatif(load_preset("qwen3-30b-a3b"), gpus=[8, 16], gpu="h100", global_batch_size=256, jobs=2,
                  min_gpus=False)


# ---------------------------------------------------------------------------- inputs
def test_gpu_counts_accept_lists_and_doubling_ranges():
    assert parse_gpu_counts("8..1024") == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert parse_gpu_counts("24..100") == [24, 48, 96]
    assert parse_gpu_counts("128,32, 64,32") == [32, 64, 128]
    assert parse_int_list("--seq-len", "32768,4096") == [32768, 4096]


@pytest.mark.parametrize("text", ["", "8,,16", "0", "-8", "64..8", "abc", "8..x"])
def test_bad_gpu_counts_name_the_flag(text):
    with pytest.raises(MegasolveError, match="--gpus"):
        parse_gpu_counts(text)


def test_python_api_exports_the_three_commands():
    from megasolve.solver import estimate, solve
    from megasolve.solver import whatif as whatif_api

    assert callable(solve) and callable(estimate) and whatif_api is whatif
    code = "import sys, megasolve.solver; print('ortools' in sys.modules, 'click' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------------------- sweep behaviour
@pytest.mark.parametrize("sweep", ["dense_sweep", "moe_sweep"])
def test_more_gpus_never_lower_the_best_total_throughput(sweep, request):
    result = request.getfixturevalue(sweep)
    fitting = [p for p in result.points if p.best is not None]
    assert len(fitting) >= 2
    for smaller, larger in zip(fitting, fitting[1:]):
        assert larger.scenario.num_gpus > smaller.scenario.num_gpus
        assert larger.tokens_per_s >= smaller.tokens_per_s


def test_points_come_back_in_sweep_order_with_the_infeasible_one_explained(dense_sweep):
    assert [p.scenario.num_gpus for p in dense_sweep.points] == [1, 8, 16, 32]
    first = dense_sweep.points[0]
    assert first.status == "infeasible" and first.best is None
    (minimum,) = dense_sweep.min_gpus
    assert first.reason == f"memory: no layout fits on 1 x h100; the smallest fitting cluster is {minimum.num_gpus} GPUs"
    assert all(p.status == "optimal" and p.runner_up is not None for p in dense_sweep.points[1:])


def test_scaling_time_and_cost_follow_from_throughput(dense_sweep):
    base = dense_sweep.points[1]
    assert dense_sweep.scaling_efficiency(base) == 1.0
    for p in dense_sweep.points[1:]:
        seconds = 1e12 / p.tokens_per_s
        assert dense_sweep.days_to_train(p) == pytest.approx(seconds / 86400)
        assert dense_sweep.gpu_hours(p) == pytest.approx(seconds * p.scenario.num_gpus / 3600)
        assert dense_sweep.cost(p) == pytest.approx(2.0 * dense_sweep.gpu_hours(p))
        per_gpu = p.best.estimate.time.tokens_per_s_per_gpu / base.best.estimate.time.tokens_per_s_per_gpu
        assert dense_sweep.scaling_efficiency(p) == pytest.approx(per_gpu)


def test_min_gpus_is_where_solve_starts_finding_layouts():
    """Bisection over whole 2-GPU nodes (1, 2, 4, 8 by doubling, then 6): the minimum fits and one
    node fewer does not, checked with full solves."""
    from megasolve.solver.solve import solve

    spec, workload = load_preset("qwen2.5-14b"), Workload(seq_length=4096, global_batch_size=1024)
    kind = ClusterKind(gpu="a100-40g", gpus_per_node=2, nvlink_domain=2)
    found = find_min_gpus(spec, kind, workload)
    assert found.exact and found.num_gpus is not None and found.num_gpus % 2 == 0
    assert found.largest_not_fitting == found.num_gpus - 2
    assert solve(spec, kind.at(found.num_gpus), workload, top_k=1, explain=False).layouts
    assert solve(spec, kind.at(found.num_gpus - 2), workload, top_k=1, explain=False).status == "infeasible"


def test_min_gpus_below_one_node(dense_sweep):
    """The sweep's minimum is where solve (same default headroom) returns a layout that leaves the
    margin; half of it returns none, or only layouts marked tight."""
    from megasolve.solver.solve import solve

    (found,) = dense_sweep.min_gpus
    spec, workload = load_preset("llama-3.1-8b"), dense_sweep.points[0].workload
    assert found.exact and found.num_gpus < 8 and found.largest_not_fitting == found.num_gpus // 2
    kind = ClusterKind(gpu="h100")
    at_min = solve(spec, kind.at(found.num_gpus), workload, top_k=1, explain=False)
    assert at_min.layouts and not at_min.search["tight"]
    below = solve(spec, kind.at(found.largest_not_fitting), workload, top_k=1, explain=False)
    assert not below.layouts or below.search["tight"]


def test_min_gpus_uses_the_headroom_and_require_rules_of_solve():
    """One code path (``SearchRules``): the smallest cluster honours --min-headroom and --require as
    solve does. Llama-3.1-8B, 4,096 x 256 on H100: 2 GPUs fit with no margin, 4 with 10 %; a team rule
    tp*pp >= 16 needs 16 GPUs (dp >= 1)."""
    from megasolve.solver.feasibility import SearchRules
    from megasolve.solver.solve import DEFAULT_MIN_HEADROOM, Headroom, solve

    spec, workload = load_preset("llama-3.1-8b"), Workload(seq_length=4096, global_batch_size=256)
    kind = ClusterKind(gpu="h100")
    bare = find_min_gpus(spec, kind, workload)
    margin = find_min_gpus(spec, kind, workload, rules=SearchRules(min_headroom=DEFAULT_MIN_HEADROOM))
    assert (bare.num_gpus, margin.num_gpus) == (2, 4)
    tight = solve(spec, kind.at(2), workload, top_k=1, explain=False)
    assert tight.layouts and tight.search["tight"]  # 2 GPUs: only inside the margin
    ruled = find_min_gpus(spec, kind, workload, rules=SearchRules(requires=("tp*pp >= 16",)))
    assert ruled.exact and ruled.num_gpus == 16
    # whatif: every point and the minimum-size search under the same rules
    sweep = whatif(spec, gpus=[8, 16], gpu="h100", global_batch_size=256, jobs=1, requires=("tp*pp >= 16",),
                   min_headroom=Headroom(gb=0))
    (found,) = sweep.min_gpus
    assert found.num_gpus == 16
    assert sweep.points[0].best is None and "16 GPUs" in sweep.points[0].reason
    best = sweep.points[1].best.layout
    assert best.tp * best.pp >= 16
    with pytest.raises(MegasolveError, match="--require"):
        whatif(spec, gpus=[8], gpu="h100", jobs=1, requires=("tp ** 2 > 1",))


def test_explain_repairs_use_the_require_rules():
    """With a --require rule, "use at least N GPUs" names the smallest cluster where solve with that
    rule (and its default headroom) fits, not the smallest without them."""
    from megasolve.solver.feasibility import SearchRules
    from megasolve.solver.solve import DEFAULT_MIN_HEADROOM, solve

    spec, workload = load_preset("qwen2.5-14b"), Workload(seq_length=4096, global_batch_size=1024)
    kind = ClusterKind(gpu="a100-40g", gpus_per_node=2, nvlink_domain=2)
    rule = ("tp == 1",)  # no tensor parallelism
    plain = find_min_gpus(spec, kind, workload, rules=SearchRules(min_headroom=DEFAULT_MIN_HEADROOM))
    ruled = find_min_gpus(spec, kind, workload, rules=SearchRules(requires=rule, min_headroom=DEFAULT_MIN_HEADROOM))
    bare = find_min_gpus(spec, kind, workload, rules=SearchRules(requires=rule))
    assert plain.num_gpus <= bare.num_gpus < ruled.num_gpus  # 10, 10, 12
    result = solve(spec, kind.at(bare.largest_not_fitting), workload, top_k=1, requires=rule, time_limit_s=120)
    assert result.status == "infeasible"
    assert any(f"use at least {ruled.num_gpus} x a100-40g" in r for r in result.repairs), result.repairs
