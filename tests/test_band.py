"""The solver's default memory check: every stage's predicted peak plus its uncertainty band
(``cost/memory.py`` ``band_parts``) within usable memory, the same linear form in every engine
(``cost/combine.py`` ``banded_stage_memory``)."""

from __future__ import annotations

import random

import pytest

from megasolve.cost import combine
from megasolve.cost.estimate import estimate
from megasolve.cost.memory import band_parts, memory_uncertainty_bytes, stage_memory
from megasolve.models import Workload, load_preset
from megasolve.solver.bounds import CONFIG_AXES, ConfigBounds
from megasolve.solver.cpsat import pipeline_rows
from megasolve.solver.exhaustive import legal_points
from megasolve.solver.solve import Headroom, solve
from megasolve.solver.space import build_space, point_layout
from megasolve.solver.tables import MIB, CostTables
from megasolve.topology import Cluster

CASES = [  # dense flash; MoE (band widened on its stages); unfused attention; a pipeline with VPP
    ("llama-3.1-8b", 16, "h100", Workload(seq_length=4096, global_batch_size=256)),
    ("mixtral-8x7b", 32, "h100", Workload(seq_length=4096, global_batch_size=256)),
    ("llama-3.1-8b", 8, "h100", Workload(seq_length=2048, global_batch_size=64, attention="unfused")),
    ("qwen3-30b-a3b", 16, "h100", Workload(seq_length=4096, global_batch_size=256)),
]


def test_band_parts_are_the_stated_fractions():
    assert band_parts(Workload(), False) == combine.Band(static=1, activation=10)  # 0.5 %, 5 %
    assert band_parts(Workload(), True) == combine.Band(static=1, activation=20)  # MoE stage: 10 %
    assert band_parts(Workload(attention="unfused"), True) == combine.Band(static=1, activation=30)
    assert combine.BAND_SCALE == 200


@pytest.mark.parametrize("model,gpus,gpu,workload", CASES, ids=[f"{c[0]}-{c[1]}-{c[3].attention}" for c in CASES])
def test_tables_band_equals_the_estimates_band_per_stage(model, gpus, gpu, workload):
    """For sampled layouts, the oracle's banded worst stage equals max over stages of estimate's
    ``total + memory_uncertainty_bytes`` within the quantisation (every term rounded up to a MiB, then
    weighted by at most 1 + 15 %), and the band never lowers the check."""
    spec, cluster = load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu)
    space = build_space(spec, cluster, workload)
    banded, plain = CostTables(spec, cluster, workload, band=True), CostTables(spec, cluster, workload)
    points = list(legal_points(space))
    assert points
    for point in random.Random(1).sample(points, min(40, len(points))):
        layout = point_layout(point)
        stages = stage_memory(spec, cluster, workload, layout)
        need = max(s.total_bytes + memory_uncertainty_bytes(s, workload) for s in stages) / MIB
        capacity = banded.capacity_units / combine.BAND_SCALE
        cost, cost0 = banded.evaluate(point), plain.evaluate(point)
        got = capacity + cost.excess / combine.BAND_SCALE  # the worst stage's banded need, MiB
        slack = 1.15 * 2 * (spec.num_layers + 20) * layout.pp  # MiB rounding per term
        assert need - 1 <= got <= need + slack, (point, need, got)
        assert cost.peak_mib == cost0.peak_mib  # the band changes the check, not the prediction
        assert cost.excess >= cost0.excess
        if cost.fits:
            assert cost0.fits and estimate(spec, cluster, workload, layout).band_headroom_bytes >= -MIB


@pytest.mark.parametrize("model,gpus,gpu,workload", CASES[1:3], ids=["mixtral-32", "llama-unfused-8"])
def test_bounds_with_the_band_never_exceed_the_oracle(model, gpus, gpu, workload):
    spec, cluster = load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu)
    space = build_space(spec, cluster, workload)
    tables = CostTables(spec, cluster, workload, band=True)
    configs = ConfigBounds(space, tables, pipeline_rows(space, tables)).configs()
    fitting = 0
    for point in legal_points(space):
        cost = tables.evaluate(point)
        if cost.fits:
            fitting += 1
            key = tuple(point[a] for a in CONFIG_AXES)
            assert key in configs and configs[key] <= cost.step_us
    assert fitting


def test_cpsat_equals_the_oracle_with_the_band():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=16, gpu="h100")
    workload = Workload(seq_length=4096, global_batch_size=256)
    fast = solve(spec, cluster, workload, top_k=8, engine="cpsat", time_limit_s=120, explain=False)
    oracle = solve(spec, cluster, workload, top_k=8, engine="exhaustive", explain=False)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    for report in fast.layouts:
        assert report.estimate.band_headroom_bytes >= -MIB and not fast.tight(report)


def test_band_excludes_layouts_that_fit_only_without_it():
    """Llama-3.1-70B on 64 H100 (seq 4096, gbs 256) at tp4 pp8, distributed optimizer (Megatron-FSDP pinned
    off): without any margin #1 is tp4 pp8 vpp5 dp2 mbs2, whose peak stage leaves less than its band; with
    the band #1 is another, slower plan that leaves it; an explicit --min-headroom adds to the band."""
    spec, cluster = load_preset("llama-3.1-70b"), Cluster.from_flags(num_gpus=64, gpu="h100")
    workload = Workload(seq_length=4096, global_batch_size=256)
    # the layouts of the effect table: without host offloading (which gives this case a plan far from
    # any band, tests/test_memory_knobs.py); tp4 pp8, where the fastest plan is tight (the free #1, tp4 pp4,
    # is far from its band)
    pins = {"cpu_offload_layers": 0, "optimizer_offload_fraction": 0.0, "fsdp": False, "tp": 4, "pp": 8}
    without = solve(spec, cluster, workload, top_k=1, band=False, explain=False, fixed=pins)
    banded = solve(spec, cluster, workload, top_k=1, explain=False, fixed=pins)
    assert without.status == banded.status == "optimal"
    assert without.layouts[0].estimate.fits and without.layouts[0].estimate.band_headroom_bytes < 0
    assert banded.layouts[0].estimate.band_headroom_bytes >= -MIB
    assert banded.objective_us[0] > without.objective_us[0]
    margin = solve(spec, cluster, workload, top_k=1, min_headroom=Headroom(gb=8), explain=False, fixed=pins)
    assert margin.layouts[0].estimate.band_headroom_bytes >= 8e9 - MIB
    assert margin.objective_us[0] >= banded.objective_us[0]

    # pinned to the plain #1, nothing fits with the band: the layouts that fit without it come back tight
    plain = without.layouts[0].layout
    pins = {"tp": plain.tp, "pp": plain.pp, "vpp": plain.vpp, "cp": plain.cp, "dp": plain.dp, "mbs": plain.mbs,
            "recompute": plain.recompute, "fsdp": plain.fsdp, "cpu_offload_layers": 0, "optimizer_offload_fraction": 0.0}
    pinned = solve(spec, cluster, workload, top_k=1, fixed=pins, explain=False)
    assert pinned.status == "optimal" and pinned.search["tight"] and pinned.layouts[0].layout == plain
    assert pinned.as_dict()["layouts"][0]["tight"] and pinned.tight(pinned.layouts[0])
