"""The configuration bounds of solver/bounds.py against the oracle: for every rule-legal layout that
fits, its configuration is kept and both its configuration bound and its (vpp, rc) group bound are
at most its canonical step; a configuration that is left out has no fitting layout. And the
best-first CP-SAT search built on them returns the oracle's top-k for k beyond the default."""

from __future__ import annotations

import pytest

from megasolve.models import Workload, load_preset
from megasolve.solver.bounds import CONFIG_AXES, ConfigBounds
from megasolve.solver.cpsat import pipeline_rows
from megasolve.solver.exhaustive import legal_points
from megasolve.solver.solve import solve
from megasolve.solver.space import build_space
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

# dense, MoE, MLA+MoE+MTP (with pins that keep the oracle quick), a long sequence (CP), one unpinned
CASES = [
    ("llama-3.1-8b", 8, "h100", 4096, 64, {}),
    ("qwen3-30b-a3b", 8, "h100", 4096, 64, {"mbs": 1}),
    ("mixtral-8x7b", 16, "h100", 4096, 128, {"mbs": 1}),
    ("deepseek-v3-proxy", 64, "h100", 4096, 512, {"mbs": 1, "cp": 1, "tp": 1}),
    ("llama-3.1-70b", 64, "h100", 16384, 128, {"mbs": 1}),
    ("qwen3-30b-a3b", 16, "h100", 4096, 256, {}),  # unpinned: the benchmark's second instance
    ("llama-3.1-8b", 64, "h100", 4096, 64, {"mbs": 1, "cp": 1}),  # one micro-batch per DP rank: the DP tail binds
]


def instance(model, gpus, gpu, seq, gbs):
    return load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu), Workload(seq_length=seq,
                                                                                   global_batch_size=gbs)


@pytest.mark.parametrize("model,gpus,gpu,seq,gbs,fixed", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bounds_never_exceed_the_canonical_cost(model, gpus, gpu, seq, gbs, fixed):
    spec, cluster, workload = instance(model, gpus, gpu, seq, gbs)
    space = build_space(spec, cluster, workload, fixed=fixed)
    tables = CostTables(spec, cluster, workload)
    bounds = ConfigBounds(space, tables, pipeline_rows(space, tables))
    configs = bounds.configs()
    groups: dict[tuple, dict] = {}
    fitting = 0
    for point in legal_points(space):
        cost = tables.evaluate(point)
        if not cost.fits:
            continue
        fitting += 1
        key = tuple(point[a] for a in CONFIG_AXES)
        assert key in configs, f"a fitting layout's configuration was left out: {point}"
        assert configs[key] <= cost.step_us, (point, configs[key], cost.step_us)
        if key not in groups:
            groups[key] = bounds.groups(key)
        group = (point["vpp"], point["rc"])
        assert group in groups[key], f"a fitting layout's row group was left out: {point}"
        assert configs[key] <= groups[key][group] <= cost.step_us, (point, groups[key][group], cost.step_us)
    assert fitting > 0
    for key, by_group in groups.items():  # the all-at-once bound is at most the per-group ones (which
        assert configs[key] <= min(by_group.values())  # also check each split's own memory and time)


@pytest.mark.parametrize("model,gpus,gpu,seq,gbs,fixed", CASES[:3], ids=[f"{c[0]}-{c[1]}" for c in CASES[:3]])
def test_cpsat_top_25_equals_exhaustive(model, gpus, gpu, seq, gbs, fixed):
    """More layouts than the default top-k: several enumeration rounds, ties at the cut."""
    spec, cluster, workload = instance(model, gpus, gpu, seq, gbs)
    fast = solve(spec, cluster, workload, top_k=25, fixed=fixed, engine="cpsat", time_limit_s=120, explain=False)
    oracle = solve(spec, cluster, workload, top_k=25, fixed=fixed, engine="exhaustive", explain=False)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us


@pytest.mark.parametrize("model,gpus,gpu,seq,gbs", [("llama-3.1-70b", 8, "h100", 4096, 64),
                                                    ("llama-3.1-8b", 2, "h100", 4096, 16),
                                                    ("mixtral-8x7b", 8, "h100", 4096, 64),
                                                    ("qwen3-30b-a3b", 8, "h100", 4096, 64)])
def test_feasible_point_agrees_with_the_oracle(model, gpus, gpu, seq, gbs):
    """explain.feasible_point (bounds first, then restricted models in bound order) finds a layout
    exactly when the oracle finds one that fits, and what it finds is legal and fits."""
    from megasolve.solver.exhaustive import solve_exhaustive
    from megasolve.solver.explain import feasible_point

    spec, cluster, workload = instance(model, gpus, gpu, seq, gbs)
    space = build_space(spec, cluster, workload)
    tables = CostTables(spec, cluster, workload)
    point = feasible_point(space, tables, time_limit_s=60)
    oracle = solve_exhaustive(space, tables, 1)
    assert (point is None) == (oracle.num_fit == 0)
    if point is not None:
        assert space.legal(point) and tables.evaluate(point).fits


# infeasible instances: models too big for the cluster (memory), one also pinned (Mixtral fits with
# the optimizer state on the host, and so does the DeepSeek-V3 proxy: their optimizers stay on the GPU here)
INFEASIBLE = [
    ("llama-3.1-70b", 8, "a100-40g", 4096, 64, {}),
    ("mixtral-8x7b", 8, "a100-40g", 8192, 64, {"mbs": 2, "optimizer_offload_fraction": 0.0}),
    ("deepseek-v3-proxy", 8, "h100", 4096, 64, {"cp": 1, "optimizer_offload_fraction": 0.0}),
]


@pytest.mark.parametrize("model,gpus,gpu,seq,gbs,fixed", INFEASIBLE, ids=[f"{c[0]}-{c[1]}" for c in INFEASIBLE])
def test_overflow_bounds_and_closest_layouts_match_the_oracle(model, gpus, gpu, seq, gbs, fixed):
    """``configs(excess=True)`` never exceeds a layout's overflow (``Canonical.excess``, what
    ``memory="excess"`` minimises), and ``explain.closest_points`` returns the oracle's smallest
    overflows (layouts may differ among ties)."""
    import time

    from megasolve.solver.bounds import GROUP_AXES
    from megasolve.solver.explain import closest_points

    spec, cluster, workload = instance(model, gpus, gpu, seq, gbs)
    space = build_space(spec, cluster, workload, fixed=fixed)
    tables = CostTables(spec, cluster, workload)
    lows = ConfigBounds(space, tables, pipeline_rows(space, tables)).configs(excess=True)
    overflows = []
    for point in legal_points(space):
        cost = tables.evaluate(point)
        assert not cost.fits
        overflow = max(0, cost.excess)
        key = tuple(point[a] for a in GROUP_AXES)
        assert key in lows and lows[key] <= overflow, (point, lows.get(key), overflow)
        overflows.append(overflow)
    assert overflows
    closest = closest_points(space, tables, 3, time.perf_counter() + 60)
    got = [max(0, tables.evaluate(p).excess) for p in closest]
    assert got == sorted(overflows)[:3]


@pytest.mark.parametrize("fixed", [{"account_for_embedding": True}, {"account_for_loss": True}])
def test_pipeline_accounting_is_searched_and_cpsat_equals_the_oracle(fixed):
    """--account-for-embedding/loss-in-pipeline-split as a searched alternative to the uneven split:
    with the pin every plan carries it (32 layers + 1 or 2 over pp 2 on 8 GPUs), CP-SAT == oracle."""
    spec, cluster, workload = instance("llama-3.1-8b", 8, "h100", 4096, 64)
    fast = solve(spec, cluster, workload, top_k=5, fixed=fixed, engine="cpsat", explain=False)
    oracle = solve(spec, cluster, workload, top_k=5, fixed=fixed, engine="exhaustive", explain=False)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    for r in fast.layouts:
        assert all(getattr(r.layout, name) for name in fixed) and r.layout.pp > 1


def test_the_dp_tail_raises_bounds_where_the_dp_traffic_is_exposed():
    """With one micro-batch per DP rank the gradient reduction outlasts its overlap window: the bounds with the
    DP tail's form (``bounds.group_forms``) are higher than with it made void (a huge overlap) on some
    configuration, and never lower (the case above checks them against every layout's exact step)."""
    spec, cluster, workload = instance("llama-3.1-8b", 64, "h100", 4096, 64)
    space = build_space(spec, cluster, workload, fixed={"mbs": 1, "cp": 1})
    tables = CostTables(spec, cluster, workload)
    with_tail = ConfigBounds(space, tables, pipeline_rows(space, tables)).configs()
    tables.overlap_pct *= 10 ** 6  # k * C beyond any traffic: the tail's form never the largest
    without = ConfigBounds(space, tables, pipeline_rows(space, tables)).configs()
    assert with_tail.keys() == without.keys()
    assert all(with_tail[k] >= without[k] for k in with_tail)
    raised = [k for k in with_tail if with_tail[k] > without[k]]
    assert len(raised) >= 20  # 26 of the 108 configurations
    # tp cp pp dp = 4 1 1 16 raised (e.g. 0.481 -> 0.539 s), 1 1 1 64 not (its window hides its gradient traffic);
    # Megatron-FSDP counts its traffic in the stage time instead
    ddp = [k for k in with_tail if not k[CONFIG_AXES.index("fsdp")]]
    assert all(k in raised for k in ddp if k[:4] == (4, 1, 1, 16))
    assert not any(k in raised for k in ddp if k[:4] == (1, 1, 1, 64))
