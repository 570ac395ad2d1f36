"""One definition of how cost terms combine (``cost/combine.py``), four engines: estimate (floats),
the oracle (integers), CP-SAT (encoded) and the bounds (relaxed) must agree on random layouts that
cover every searched knob (tp, cp, pp, vpp, dp, mbs, sp, ep, etp, uneven split, none / selective /
full / block recompute, selective recompute modules, activation offloading, optimizer CPU offload,
distributed optimizer on and off, Megatron-FSDP) and per-layer kinds (dense / MoE, full / sliding-window
attention), whose per-stage sums all come from ``layers.stage_layers``."""

from __future__ import annotations

import random

import pytest

from megasolve.cost import combine
from megasolve.cost.step import step_time
from megasolve.models import Workload, load_preset
from megasolve.solver.bounds import CONFIG_AXES, ConfigBounds
from megasolve.solver.cpsat import build_model, new_solver, pipeline_rows
from megasolve.solver.space import AXES, SearchSpace, build_space, point_layout
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

# (model, GPUs, GPU, seq, gbs, attention): dense GQA, MoE, MLA + MoE + MTP, a dense model with
# unfused attention (so selective recompute is searched)
CASES = [
    ("llama-3.1-8b", 16, "h100", 4096, 256, "flash"),
    ("mixtral-8x7b", 32, "h100", 4096, 256, "flash"),
    ("deepseek-v3-proxy", 64, "h100", 4096, 512, "flash"),
    ("qwen2.5-7b", 16, "a100-80g", 4096, 128, "unfused"),
    # sliding-window patterns: Gemma-3 5:1 local/global (dense), gpt-oss alternating (MoE): stages hold
    # different mixes of windowed and full layers (cost/layers.py)
    ("gemma-3-27b", 16, "h100", 8192, 128, "flash"),
    ("gpt-oss-20b", 16, "h100", 8192, 128, "flash"),
]


def assert_step_matches_estimate(spec, cluster, workload, cost, point) -> None:
    """floats vs integers: within the quantisation (1 us per term, m x per-layer terms)"""
    layout = point_layout(point)
    m = workload.num_microbatches(layout)
    step_s = step_time(spec, cluster, workload, layout).step_s
    assert cost.step_us == pytest.approx(step_s * 1e6, rel=2e-4, abs=50 + 2 * m * spec.num_layers)


def solve_pinned(space, tables, rows, point):
    """CP-SAT with every axis pinned to ``point``: (status, solver, built model)."""
    pinned = SearchSpace(ctx=space.ctx, domains={a: (point[a],) for a in AXES})
    built = build_model(pinned, tables, rows=[r for r in rows if (r.pp, r.vpp, r.split, r.rc)
                                              == (point["pp"], point["vpp"], point["split"], point["rc"])])
    solver = new_solver(30)
    return solver.Solve(built.model), solver, built


def assert_engines_agree(spec, cluster, workload, space, tables, rows, point) -> None:
    """One layout: ``estimate`` (floats: step and peak memory), the integer tables and CP-SAT pinned to it
    give one cost (a fitting layout's step exactly, one that does not fit infeasible)."""
    from ortools.sat.python import cp_model

    from megasolve.cost.memory import stage_memory

    cost = tables.evaluate(point)
    assert_step_matches_estimate(spec, cluster, workload, cost, point)
    peak = max(s.total_bytes for s in stage_memory(spec, cluster, workload, point_layout(point))) / 2**20
    assert peak <= cost.peak_mib <= peak * 1.002 + 64  # MiB rounded up per term, never below
    status, solver, built = solve_pinned(space, tables, rows, point)
    if cost.fits:
        assert status == cp_model.OPTIMAL and solver.Value(built.step) == cost.step_us
    else:
        assert status == cp_model.INFEASIBLE

def wide_space(model, gpus, gpu, seq, gbs, attention):
    """The search space with the values it prunes as dominated put back (no distributed optimizer,
    selective recompute), so the differential test covers them too."""
    spec = load_preset(model)
    cluster = Cluster.from_flags(num_gpus=gpus, gpu=gpu)
    workload = Workload(seq_length=seq, global_batch_size=gbs, attention=attention)
    space = build_space(spec, cluster, workload)
    domains = dict(space.domains, dop=(True, False))
    if ("selective", None) not in domains["rc"]:
        domains["rc"] = domains["rc"] + (("selective", None),)
    return spec, cluster, workload, SearchSpace(ctx=space.ctx, domains=domains)


def random_points(space: SearchSpace, count: int, seed: int) -> list[dict]:
    """Rule-legal points drawn axis by axis (dp follows from the others)."""
    rng = random.Random(seed)
    if not all(space.domains[a] for a in AXES):
        return []
    n = space.ctx.cluster.num_gpus
    out, tries = [], 0
    while len(out) < count and tries < 200_000:
        tries += 1
        point = {a: rng.choice(space.domains[a]) for a in AXES if a != "dp"}
        dense = point["tp"] * point["cp"] * point["pp"]
        if n % dense or n // dense not in space.domains["dp"]:
            continue
        point["dp"] = n // dense
        if space.legal(point) and point not in out:
            out.append(point)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_estimate_oracle_cpsat_and_bounds_agree_on_random_layouts(case):
    spec, cluster, workload, space = wide_space(*case)
    tables = CostTables(spec, cluster, workload)
    rows = pipeline_rows(space, tables)
    bounds = ConfigBounds(space, tables, rows)
    points = random_points(space, 14, seed=len(case[0]))
    assert len(points) >= 10
    knobs = {(p["dop"], p["fsdp"], p["rc"][0], p["vpp"] > 1, p["split"][:2] != (None, None), any(p["split"][2:]))
             for p in points}
    assert len(knobs) >= 3  # the sample mixes the knobs
    assert {p["fsdp"] for p in points} == {False, True}  # Megatron-FSDP and the distributed optimizer
    for point in points:
        cost = tables.evaluate(point)
        assert_step_matches_estimate(spec, cluster, workload, cost, point)
        # CP-SAT with every axis pinned to the point: the encoded combination gives the same integer
        status, solver, built = solve_pinned(space, tables, rows, point)
        from ortools.sat.python import cp_model

        if cost.fits:
            assert status == cp_model.OPTIMAL
            assert solver.Value(built.step) == cost.step_us
            # the bounds relax the same combination: never above the exact cost
            group = bounds.groups(tuple(point[a] for a in CONFIG_AXES)).get((point["vpp"], point["rc"]))
            assert group is not None and group <= cost.step_us
        else:
            assert status == cp_model.INFEASIBLE


def test_integer_and_float_arithmetic_differ_only_in_rounding():
    stages = [combine.StageCost(tau=7, compute=5, grad=3, param=2, optimizer=1, multiplicity=3),
              combine.StageCost(tau=9, compute=6, grad=4, param=1, optimizer=2)]
    exact, _ = combine.step(combine.FLOAT, stages, 16, 2, 0.6 * combine.OVERLAP_SCALE, 10)
    rounded, _ = combine.step(combine.INTEGER, stages, 16, 2, int(0.6 * combine.OVERLAP_SCALE), 10)
    # pipeline 16*9 + (3*7 + 9 - 9)/2 = 154.5; dp tail (the window is the whole micro-batch, every chunk):
    # stage 1 w = 0.6*5 = 3, (3 - 2) + (2 - 1) = 2 (stage 2: w = 3.6, 1.6 + 0 = 1.6); optimizer max 2; overhead 10
    assert exact == pytest.approx(154.5 + 2 + 2 + 10)
    assert exact <= rounded <= exact + 3  # one ceil-division per rounding


# The memory-side knobs (issue 11 section 2), each drawn on its own so every case covers it: the space
# cut to that knob's values (offloading needs pp 1 and no recompute, TC L1884-1899)
MEMORY_KNOBS = {
    "offload": {"rc": lambda rc: rc[0] == "offload", "pp": lambda pp: pp == 1, "vpp": lambda v: v == 1},
    "modules": {"rc": lambda rc: rc[0] == "selective" and rc[1] not in (None, ("core_attn",))},
    "optimizer_offload": {"oo": lambda f: f > 0},
}


@pytest.mark.parametrize("knob", sorted(MEMORY_KNOBS))
@pytest.mark.parametrize("case", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_memory_knobs_agree_across_engines(case, knob):
    """Recompute modules, activation offloading and optimizer CPU offload: estimate (floats, time and
    peak memory), the oracle and CP-SAT give the same cost on random layouts that use the knob."""
    spec, cluster, workload, space = wide_space(*case)
    domains = {a: tuple(v for v in space.domains[a] if MEMORY_KNOBS[knob].get(a, lambda _: True)(v)) for a in AXES}
    sub = SearchSpace(ctx=space.ctx, domains=domains)
    tables = CostTables(spec, cluster, workload)
    points = random_points(sub, 5, seed=7)
    assert len(points) >= 3, f"{knob}: too few legal layouts"
    rows = pipeline_rows(sub, tables)
    for point in points:
        assert_engines_agree(spec, cluster, workload, space, tables, rows, point)


# Hybrid models (issue 15): Nemotron-H (Mamba-2 / attention / MLP one-block layers) and Qwen3-Next (gated
# DeltaNet + gated attention, MoE on every layer); their kinds come from the same layers.stage_layers
HYBRID_CASES = [
    ("nemotron-h-8b", 16, "h100", 8192, 128, "flash"),
    ("qwen3-next-80b-a3b", 64, "h100", 4096, 256, "flash"),
]


@pytest.mark.parametrize("case", HYBRID_CASES, ids=[c[0] for c in HYBRID_CASES])
def test_hybrid_models_agree_across_engines(case):
    """estimate (floats: step and peak memory), the oracle and CP-SAT give the same cost on random layouts
    of a hybrid model, across tp / cp / pp / splits / recompute (full, block, selective modules)."""
    spec, cluster, workload, space = wide_space(*case)
    tables = CostTables(spec, cluster, workload)
    rows = pipeline_rows(space, tables)
    points = random_points(space, 12, seed=11)
    assert len(points) >= 8
    assert len({p["rc"][0] for p in points}) >= 2 and len({p["tp"] for p in points}) >= 2
    for point in points:
        assert_engines_agree(spec, cluster, workload, space, tables, rows, point)
