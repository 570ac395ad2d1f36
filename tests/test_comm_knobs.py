"""Communication knobs searched by ``solve`` (solver/knobs.py): chosen inside each layout's cost, the
same in CP-SAT, the oracle and ``estimate``; refused where Megatron refuses them; pinned by ``--fix``."""

from __future__ import annotations

import dataclasses

import pytest
from ortools.sat.python import cp_model

from megasolve.cost.step import step_time
from megasolve.models import Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.solver.cpsat import build_model, new_solver, pipeline_rows
from megasolve.solver.knobs import COMM_KNOBS, NAMED_KNOBS, resolve_knobs, row_permit
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.solve import solve
from megasolve.solver.space import AXES, SearchSpace, build_space, point_layout
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

# (model, GPUs, GPU, seq, gbs, fixed): dense, MoE with shared experts, MLA + MoE + MTP, MoE without
# shared experts; pins keep the oracle quick
GRID = [
    ("llama-3.1-8b", 8, "h100", 4096, 64, {}),
    ("qwen3-30b-a3b", 8, "h100", 4096, 64, {"mbs": 1}),
    ("deepseek-v2-lite", 32, "h100", 4096, 256, {"mbs": 1, "cp": 1}),
    ("deepseek-v3-proxy", 64, "h100", 4096, 512, {"mbs": 1, "cp": 1, "tp": 1}),
    ("mixtral-8x7b", 16, "h100", 4096, 128, {"mbs": 1}),
]


def instance(model, gpus, gpu, seq, gbs):
    return load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu), Workload(seq_length=seq,
                                                                                   global_batch_size=gbs)


@pytest.mark.parametrize("model,gpus,gpu,seq,gbs,fixed", GRID, ids=[f"{g[0]}-{g[1]}" for g in GRID])
def test_cpsat_equals_oracle_with_the_knobs_searched(model, gpus, gpu, seq, gbs, fixed):
    spec, cluster, workload = instance(model, gpus, gpu, seq, gbs)
    fast = solve(spec, cluster, workload, top_k=5, fixed=fixed, time_limit_s=120, knobs=COMM_KNOBS)
    oracle = solve(spec, cluster, workload, top_k=5, fixed=fixed, engine="exhaustive", knobs=COMM_KNOBS)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert [r.workload for r in fast.layouts] == [r.workload for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    assert fast.equivalents == oracle.equivalents
    for report, same in zip(fast.layouts, fast.equivalents):  # a spelling differing only in the dispatcher is not listed
        assert report.layout not in same and len(set(same)) == len(same)
    plain = solve(spec, cluster, workload, top_k=1, fixed=fixed, time_limit_s=120)
    assert fast.objective_us[0] <= plain.objective_us[0]  # searching never loses
    for report, step_us in zip(fast.layouts, fast.objective_us):
        # the knobs each layout carries are legal for it (Megatron's rules, read with that workload)...
        ctx = RuleContext(spec=spec, cluster=cluster, workload=report.workload)
        assert violations(ctx, report.layout) == []
        # ... and estimate with them gives the solver's step (floats vs whole microseconds per term)
        m = report.workload.num_microbatches(report.layout)
        assert report.estimate.time.step_s * 1e6 == pytest.approx(step_us, rel=2e-4, abs=50 + 2 * m * spec.num_layers)
        assert report.workload.tp_comm_overlap == (report.layout.tp > 1 and report.layout.sequence_parallel)


def test_deepseek_v3_chooses_moe_overlaps_per_layout():
    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    result = solve(spec, cluster, workload, top_k=10, fixed={"mbs": 1, "cp": 1}, knobs=COMM_KNOBS)
    chosen = {(r.workload.moe_ep_overlap, r.workload.moe_shared_expert_overlap) for r in result.layouts}
    assert chosen - {(False, False)}  # some overlap is chosen
    for r in result.layouts:
        assert not (r.workload.moe_ep_overlap and r.workload.moe_shared_expert_overlap)  # TC L3039-3041
        if r.workload.moe_ep_overlap:  # TC L3007-3032
            assert r.layout.ep > 1 and (r.layout.pp == 1 or r.layout.vpp > 1) and r.layout.recompute != "full"
            assert "moe" not in (r.layout.recompute_modules or ())


def test_row_permit_follows_megatron():
    both = (True, True)
    assert row_permit(both, 1, 1, ("none", None)) == (True, True)
    assert row_permit(both, 4, 1, ("none", None)) == (False, True)  # pp > 1 needs virtual stages (TC L3007)
    assert row_permit(both, 4, 2, ("none", None)) == (True, True)
    assert row_permit(both, 1, 1, ("full", None)) == (False, True)  # TC L3021-3023
    assert row_permit(both, 1, 1, ("full", 2)) == (False, True)  # TC L3024-3029
    assert row_permit(both, 1, 1, ("selective", ("moe",))) == (False, True)  # TC L3030-3032
    assert row_permit(both, 1, 1, ("selective", ("shared_experts",))) == (True, False)  # TC L1991-1998


def test_allgather_dispatcher_and_dense_models_search_no_moe_overlap():
    spec, cluster, _ = instance("qwen3-30b-a3b", 8, "h100", 4096, 64)
    workload = Workload(seq_length=4096, global_batch_size=64, moe_dispatcher="allgather")
    # the dispatcher pinned to allgather: neither MoE overlap is searched (TC L3016-3019, L1820-1826)
    pinned = solve(spec, cluster, workload, top_k=3, fixed={"mbs": 1, "moe_dispatcher": "allgather"}, knobs=COMM_KNOBS)
    assert pinned.layouts and all(r.workload.moe_dispatcher == "allgather" for r in pinned.layouts)
    assert all(not r.workload.moe_ep_overlap and not r.workload.moe_shared_expert_overlap for r in pinned.layouts)


def test_fix_pins_the_dispatcher():
    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    result = solve(spec, cluster, workload, top_k=3, fixed={"mbs": 1, "cp": 1, "tp": 1, "moe_dispatcher": "alltoall"},
                   knobs=COMM_KNOBS)
    assert result.search["domains"]["disp"] == 1 and "moe_dispatcher" not in result.search["searched_knobs"]
    assert all(r.workload.moe_dispatcher == "alltoall" for r in result.layouts)
    with pytest.raises(MegasolveError, match="must be one of alltoall, flex, allgather"):
        solve(spec, cluster, workload, fixed={"moe_dispatcher": "nccl"}, knobs=COMM_KNOBS)


def test_dispatcher_is_an_axis_because_deepep_buffers_cost_memory():
    """flex holds DeepEP's buffers, alltoall / allgather none (memory.comm_buffer_bytes): the ``disp`` axis
    keeps both, and where a layout only fits without the buffers the search finds it with NCCL."""
    from megasolve.solver.knobs import NCCL, dispatchers

    assert dispatchers(Workload()) == ("flex", NCCL)
    assert dispatchers(Workload(moe_dispatcher="alltoall")) == (NCCL, "flex")
    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    base, searched, _ = resolve_knobs(workload, {}, COMM_KNOBS)
    tables = CostTables(spec, cluster, base, knobs=searched)
    point = {"ep": 16, "etp": 1}
    assert tables.value("other_comm", dict(point, disp="flex")) > tables.value("other_comm", dict(point, disp=NCCL)) == 0


def test_tp_overlap_userbuffers_follow_the_chosen_setting():
    """TE's userbuffers (memory.userbuffer_bytes) exist only where the layout launches with the TP overlap:
    the tables' ``other_ub`` term follows the searched knob, and the peak each engine sees equals
    ``estimate``'s with the layout's chosen workload (TP 2 with SP: on; TP 2 without SP, TP 1: off)."""
    from megasolve.cost.memory import ActivationShape, stage_memory, userbuffer_bytes
    from megasolve.solver.tables import quantise_bytes

    spec, cluster, workload = instance("llama-3.1-8b", 8, "h100", 4096, 64)
    base, searched, _ = resolve_knobs(workload, {}, COMM_KNOBS)
    tables = CostTables(spec, cluster, base, knobs=searched)
    space = build_space(spec, cluster, base, fixed={"mbs": 1, "cp": 1, "pp": 1})
    from megasolve.solver.exhaustive import legal_points

    seen = set()
    for point in legal_points(space):
        key = (point["tp"], point["sp"])
        if key in seen or point["rc"][0] != "none":
            continue
        seen.add(key)
        wl = tables.chosen_workload(point)
        layout = point_layout(point)
        shape = ActivationShape(tp=layout.tp, cp=1, mbs=1, sequence_parallel=layout.sequence_parallel)
        ub = userbuffer_bytes(spec, wl, shape)
        # 12 BF16 buffers of seq x h (4096 x 4096) with the overlap on, nothing otherwise
        assert ub == (12 * 4096 * 4096 * 2 if layout.tp > 1 and layout.sequence_parallel else 0)
        assert tables.value("other_ub", point) == quantise_bytes(ub)
        peak = max(s.total_bytes for s in stage_memory(spec, cluster, wl, layout)) / 2**20
        assert peak <= tables.evaluate(point).peak_mib <= peak * 1.002 + 64
    assert {(2, True), (2, False), (1, False)} <= seen


@pytest.mark.parametrize("knob", [k for k in COMM_KNOBS if k not in NAMED_KNOBS])
def test_fix_pins_a_knob(knob):
    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    fixed = {"mbs": 1, "cp": 1, "tp": 1, knob: False}
    result = solve(spec, cluster, workload, top_k=3, fixed=fixed, knobs=COMM_KNOBS)
    assert result.status == "optimal"
    assert all(getattr(r.workload, knob) is False for r in result.layouts)
    assert knob not in result.search["searched_knobs"]


def test_fix_pins_tp_overlap_on_and_refuses_layouts_without_sp():
    spec, cluster, workload = instance("llama-3.1-8b", 8, "h100", 4096, 64)
    result = solve(spec, cluster, workload, top_k=5, fixed={"tp_comm_overlap": True}, knobs=COMM_KNOBS)
    for r in result.layouts:  # ARG L1441-1442: --tp-comm-overlap needs SP, so every layout has it (or tp 1)
        assert r.workload.tp_comm_overlap and (r.layout.tp == 1 or r.layout.sequence_parallel)


def test_fix_knob_value_must_be_boolean():
    with pytest.raises(MegasolveError, match="must be true or false"):
        resolve_knobs(Workload(), {"moe_ep_overlap": 3}, COMM_KNOBS)


def test_knob_terms_agree_across_engines_on_pinned_layouts():
    """The differential check of test_combine.py with the knobs searched: estimate (with the layout's
    chosen workload), the oracle's integer cost and CP-SAT with every axis pinned give one number."""
    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    base, searched, _ = resolve_knobs(workload, {}, COMM_KNOBS)
    space = build_space(spec, cluster, base, fixed={"mbs": 1, "cp": 1})
    tables = CostTables(spec, cluster, base, knobs=searched)
    rows = pipeline_rows(space, tables)
    seen = set()
    from megasolve.solver.exhaustive import legal_points

    checked = 0
    for i, point in enumerate(legal_points(space)):
        if i % 97:
            continue
        wl = tables.chosen_workload(point)
        seen.add((wl.tp_comm_overlap, wl.moe_ep_overlap, wl.moe_shared_expert_overlap))
        cost = tables.evaluate(point)
        layout = point_layout(point)
        m = wl.num_microbatches(layout)
        assert cost.step_us == pytest.approx(step_time(spec, cluster, wl, layout).step_s * 1e6, rel=2e-4,
                                             abs=50 + 2 * m * spec.num_layers)
        if cost.fits and checked < 6:
            checked += 1
            pinned = SearchSpace(ctx=space.ctx, domains={a: (point[a],) for a in AXES})
            built = build_model(pinned, tables, rows=[r for r in rows if (r.pp, r.vpp, r.split, r.rc)
                                                      == (point["pp"], point["vpp"], point["split"], point["rc"])])
            solver = new_solver(30)
            assert solver.Solve(built.model) == cp_model.OPTIMAL
            assert solver.Value(built.step) == cost.step_us
    assert checked >= 3
    assert len({s[1:] for s in seen}) >= 2  # the sample meets more than one MoE setting


def test_memory_terms_follow_the_dispatcher_chosen_for_the_point():
    """Inside ``disp`` NCCL the time terms choose alltoall or allgather per point; the memory terms follow that
    choice (the allgather dispatcher's combine gradient of every gathered token and its global buffer,
    ``memory.allgather_rows``), so the tables' peak is ``estimate``'s with the chosen workload, up to the tables'
    rounding up to whole MiB per term."""
    from megasolve.cost.memory import stage_memory
    from megasolve.solver.exhaustive import legal_points

    spec, cluster, workload = instance("qwen3-30b-a3b", 8, "h100", 4096, 64)
    base, searched, _ = resolve_knobs(workload, {}, COMM_KNOBS)
    space = build_space(spec, cluster, base, fixed={"mbs": 1}, knobs=searched)
    tables = CostTables(spec, cluster, base, knobs=searched)
    seen = set()
    for i, point in enumerate(legal_points(space)):
        if i % 29:
            continue
        wl = tables.chosen_workload(point)
        seen.add(wl.moe_dispatcher)
        predicted = max(s.total_bytes for s in stage_memory(spec, cluster, wl, point_layout(point))) / 2 ** 20
        assert 0 <= tables.evaluate(point).peak_mib - predicted <= 128, (point, wl.moe_dispatcher)
    assert seen == {"alltoall", "allgather", "flex"}


# ---------------------------------------------------------------------------- CLI
SOLVE = ["solve", "-m", "deepseek-v3-proxy", "-n", "64", "-g", "h100", "--top-k", "2", "--fix", "mbs=1",
         "--fix", "cp=1"]
EXPORT_FLAGS = {  # format -> (the TP overlap, the EP overlap) as each launcher spells them
    "megatron": ("--tp-comm-overlap", "--overlap-moe-expert-parallel-comm"),
    "bridge": ("model.tp_comm_overlap=", "model.overlap_moe_expert_parallel_comm="),
    "bridge-main": ("model.transformer.tp_comm_overlap=", "model.transformer.overlap_moe_expert_parallel_comm="),
    "nemo": ("model.config.tp_comm_overlap=", "model.config.overlap_moe_expert_parallel_comm="),
    "verl": ("override_transformer_config.tp_comm_overlap=", "override_transformer_config.overlap_moe_expert_parallel_comm="),
}


def _cli(args):
    import json

    from click.testing import CliRunner

    from megasolve.cli.main import cli

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.stdout, (json.loads(result.stdout) if "json" in args else None)


def test_solve_json_carries_the_chosen_knobs_and_the_exports_launch_them():
    _, data = _cli(SOLVE + ["-o", "json"])
    assert sorted(data["search"]["searched_knobs"]) == sorted(COMM_KNOBS)
    comm = data["layouts"][0]["comm"]
    assert set(comm) == {"tag", "tp_comm_overlap", "overlap_p2p_comm", "moe_dispatcher", "moe_ep_overlap",
                         "moe_shared_expert_overlap", "cp_comm_type"}
    assert comm["moe_ep_overlap"] and "epov" in comm["tag"]  # DeepSeek-V3 proxy @ 64 H100: the EP overlap wins
    for fmt, (tp_flag, ep_flag) in EXPORT_FLAGS.items():
        text, _ = _cli(SOLVE + ["-o", fmt])
        ep_lines = [line for line in text.splitlines() if ep_flag in line and not line.startswith("#")]
        assert ep_lines and all(fmt == "megatron" or line.rstrip(" \\").endswith(("true", "True"))
                                for line in ep_lines), fmt
        tp_on = comm["tp_comm_overlap"]
        tp_lines = [line for line in text.splitlines() if tp_flag in line and not line.startswith("#")]
        assert bool(tp_lines) == (tp_on or fmt != "megatron"), fmt


@pytest.mark.parametrize("args,knob", [(["--moe-ep-overlap"], "moe_ep_overlap"),
                                       (["--fix", "moe_ep_overlap=false"], "moe_ep_overlap"),
                                       (["--moe-shared-expert-overlap"], "moe_shared_expert_overlap"),
                                       (["--fix", "moe_shared_expert_overlap=true"], "moe_shared_expert_overlap"),
                                       (["--tp-comm-overlap"], "tp_comm_overlap"),
                                       (["--fix", "tp_comm_overlap=false"], "tp_comm_overlap")])
def test_an_explicit_flag_or_fix_pins_the_knob(args, knob):
    _, data = _cli(SOLVE + args + ["-o", "json"])
    assert knob not in data["search"]["searched_knobs"]
    want = "false" not in args[-1]
    for entry in data["layouts"]:
        if knob == "tp_comm_overlap":
            assert data["workload"]["tp_comm_overlap"] is want
        else:
            assert entry["comm"][knob] is want


def test_explicit_knob_flag_megatron_refuses_is_one_line_error(capsys):
    from megasolve.cli.main import main

    # EP overlap with the allgather dispatcher (TC L3016-3019); a knob pin that is not a boolean
    for args, text in ((["--moe-ep-overlap", "--moe-dispatcher", "allgather"], "alltoall/flex dispatcher"),
                       (["--fix", "moe_ep_overlap=maybe"], "must be true or false")):
        with pytest.raises(SystemExit) as exc:
            main(SOLVE + args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and text in err and "Traceback" not in err


def test_a_pinned_ep_overlap_costs_its_unpaired_units_in_every_engine():
    """With ``--moe-ep-overlap`` pinned (not searched) the combined 1F1B's unpaired chunk-units
    (``step.unpaired_ep_s``) are in the solver's per-step stage terms as in ``estimate``."""
    from megasolve.solver.exhaustive import legal_points

    spec, cluster, workload = instance("deepseek-v3-proxy", 64, "h100", 4096, 512)
    pinned = dataclasses.replace(workload, moe_ep_overlap=True)
    base, searched, _ = resolve_knobs(pinned, {"moe_ep_overlap": True}, COMM_KNOBS)
    assert "moe_ep_overlap" not in searched and base.moe_ep_overlap
    space = build_space(spec, cluster, base, fixed={"mbs": 1, "cp": 1}, knobs=searched)
    tables = CostTables(spec, cluster, base, knobs=searched)
    checked = 0
    for i, point in enumerate(legal_points(space)):
        if i % 53:
            continue
        wl = tables.chosen_workload(point)
        layout = point_layout(point)
        estimate = step_time(spec, cluster, wl, layout)
        if wl.moe_ep_overlap and point["ep"] > 1:
            checked += any(s.unpaired_s > 0 for s in estimate.stages)
        m = wl.num_microbatches(layout)
        assert tables.evaluate(point).step_us == pytest.approx(estimate.step_s * 1e6, rel=2e-4,
                                                               abs=50 + 2 * m * spec.num_layers)
    assert checked >= 3


def test_a_parameter_gather_without_overlap_is_exposed_after_the_step_in_estimate_and_solver_alike():
    """``--no-overlap-param-gather`` (``Workload.param_gather_overlap`` False): the distributed optimizer's parameter
    all-gather leaves the DP tail's window and runs beside the optimizer step; the solver's tables price it as
    ``estimate`` does, and the exports launch with --overlap-grad-reduce alone."""
    import dataclasses

    from _solve_check import solve_equals_estimate

    from megasolve.cli.launch import megatron_flags
    from megasolve.cost.step import step_time
    from megasolve.models import Layout, Workload, load_preset
    from megasolve.topology import Cluster

    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=16, gpu="h100")
    layout = Layout(tp=2, pp=1, dp=8, mbs=1, sequence_parallel=True)
    base = Workload(seq_length=4096, global_batch_size=64)
    off = dataclasses.replace(base, param_gather_overlap=False)
    hidden, exposed = step_time(spec, cluster, base, layout), step_time(spec, cluster, off, layout)
    assert exposed.step_s > hidden.step_s
    assert exposed.breakdown_s["dp_comm"] > hidden.breakdown_s["dp_comm"]
    assert exposed.breakdown_s["optimizer"] == hidden.breakdown_s["optimizer"]
    solve_equals_estimate(spec, cluster, off)
    flags = megatron_flags(spec, cluster, off, layout)
    assert "--overlap-grad-reduce" in flags and "--overlap-param-gather" not in flags
    assert "--overlap-param-gather" in megatron_flags(spec, cluster, base, layout)
