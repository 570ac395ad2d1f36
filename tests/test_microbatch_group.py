"""``--microbatch-group-size-per-virtual-pipeline-stage G`` (Megatron's interleaved schedule runs G consecutive
micro-batches per model chunk): the activations in flight by hand from Megatron's warm-up count, the schedule's
conditions on the micro-batch count, the engines agreeing, the reader and the exports; and a launch script's
renamed flags (``--no-overlap-p2p-communication``) read as Megatron's parser stores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megasolve.cli.launch import plan_settings
from megasolve.cli.launch_formats import megatron_flag_list, render
from megasolve.cost.memory import inflight_microbatches, stage_memory
from megasolve.cost.step import step_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.solver.cpsat import pipeline_rows
from megasolve.solver.logs import FLAG_DESTS, parse_log
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.runs import read_runs
from megasolve.solver.space import build_space
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

from test_combine import assert_engines_agree, random_points

SPEC = load_preset("llama-3.1-8b")
CLUSTER = Cluster.from_flags(num_gpus=8, gpu="h100")
ARGUMENTS = Path(__file__).parent / "data" / "megatron_lm_arguments.json"


def test_warmup_counts_g_micro_batches_per_extra_chunk():
    """schedules.py L960-965: warm-up ``2(p - r - 1) + (v - 1)G`` chunks, then one more in flight."""
    # Megatron-LM's functional test gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap: pp 4, 12 layers at 1 per virtual
    # stage (v 3), G 5, gbs 40 over dp 2 at mbs 4 = 5 micro-batches; its memory is logged by the last rank
    assert inflight_microbatches(4, 3, 5, 3, group=5) * 3 == pytest.approx(0 + 2 * 5 + 1)
    assert inflight_microbatches(4, 3, 5, 3) * 3 == pytest.approx(0 + 2 * 4 + 1)  # default G = p
    assert inflight_microbatches(4, 3, 5, 0, group=5) * 3 == pytest.approx(15)  # 2*3 + 2*5 + 1, capped at m*v
    assert inflight_microbatches(4, 3, 20, 0, group=5) * 3 == pytest.approx(2 * 3 + 2 * 5 + 1)
    assert inflight_microbatches(4, 1, 64, 0, group=8) == 4  # 1F1B has no groups


def test_a_larger_group_adds_activations_and_no_time():
    layout = Layout(tp=1, pp=4, vpp=2, dp=2, mbs=1)
    base = Workload(seq_length=4096, global_batch_size=40)
    grouped = Workload(seq_length=4096, global_batch_size=40, microbatch_group_size=5)
    before, after = stage_memory(SPEC, CLUSTER, base, layout), stage_memory(SPEC, CLUSTER, grouped, layout)
    for a, b in zip(before, after):
        live_a = inflight_microbatches(4, 2, 20, a.stage) * 2
        live_b = inflight_microbatches(4, 2, 20, b.stage, group=5) * 2
        assert live_b - live_a == 1  # (v - 1)(G - p) = 1 more chunk on every stage
        assert b.activations_bytes > a.activations_bytes
        assert (b.weights_bytes, b.grads_bytes, b.optimizer_bytes) == (a.weights_bytes, a.grads_bytes, a.optimizer_bytes)
    assert step_time(SPEC, CLUSTER, grouped, layout).step_s == step_time(SPEC, CLUSTER, base, layout).step_s


@pytest.mark.parametrize("gbs, group, problem", [
    (40, None, None),        # m 20 = 5 x p
    (36, None, "a multiple of it"),  # m 18
    (36, 6, None),           # 18 = 3 groups of 6
    (44, 8, None),           # m 22: 2 groups of 8 and a last group of 6 >= p
    (36, 8, "last group"),   # m 18: 2 groups of 8 and a last group of 2 < p
    (40, 3, "must lie in"),  # G < p
    (40, 24, "must lie in"),  # G > m
])
def test_the_schedule_conditions_on_the_group(gbs, group, problem):
    """schedules.py L1160-1180: ``p <= G <= m`` (ValueError) and ``m % G`` zero or at least ``p``."""
    ctx = RuleContext(spec=SPEC, cluster=CLUSTER,
                      workload=Workload(seq_length=4096, global_batch_size=gbs, microbatch_group_size=group))
    found = [v for v in violations(ctx, Layout(tp=1, pp=4, vpp=2, dp=2, mbs=1)) if v.rule == "vpp_microbatches"]
    if problem is None:
        assert not found
    else:
        assert found and problem in found[0].message
    # 1F1B ignores the group, as Megatron's non-interleaved schedule does
    assert not [v for v in violations(ctx, Layout(tp=1, pp=4, dp=2, mbs=1)) if v.rule == "vpp_microbatches"]
    with pytest.raises(MegasolveError, match="positive integer"):
        Workload(microbatch_group_size=0)


def test_estimate_oracle_and_cpsat_agree():
    workload = Workload(seq_length=4096, global_batch_size=48, microbatch_group_size=6)
    space = build_space(SPEC, CLUSTER, workload)
    tables = CostTables(SPEC, CLUSTER, workload)
    rows = pipeline_rows(space, tables)
    points = [p for p in random_points(space, 40, seed=3) if p["vpp"] > 1][:4]
    assert points and all(space.legal(p) for p in points)
    for point in points:
        assert_engines_agree(SPEC, CLUSTER, workload, space, tables, rows, point)


def test_exports_and_reader_round_trip(tmp_path):
    workload = Workload(seq_length=4096, global_batch_size=40, microbatch_group_size=5, overlap_p2p_comm=False)
    layout = Layout(tp=1, pp=4, vpp=2, dp=2, mbs=1)
    settings = plan_settings(SPEC, CLUSTER, workload, layout)
    flags = megatron_flag_list(settings)
    assert "--microbatch-group-size-per-virtual-pipeline-stage 5" in flags
    assert "--no-overlap-p2p-communication" in flags
    assert "model.microbatch_group_size_per_vp_stage=5" in render("bridge", settings, CLUSTER, layout)
    assert "model.transformer.microbatch_group_size_per_vp_stage=5" in render("bridge-main", settings, CLUSTER, layout)
    for fmt in ("nemo", "verl"):
        assert "# not expressible in " + fmt + ": microbatch_group_size_per_vp_stage=5" in render(fmt, settings, CLUSTER, layout)
    plain = megatron_flag_list(plan_settings(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=40), layout))
    assert not any("group-size" in f for f in plain)
    script = tmp_path / "run.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py " + " ".join(flags) + "\n", encoding="utf-8")
    run = read_runs(script, gpu="h100", step_time_s=1.0)[0]
    assert run.workload.microbatch_group_size == 5 and run.workload.overlap_p2p_comm is False
    assert (run.layout.pp, run.layout.vpp) == (4, 2)


def test_argument_dump_and_printed_config_give_the_group():
    dump = ("------------------------ arguments ------------------------\n"
            "  microbatch_group_size_per_vp_stage .............. 6\n"
            "  overlap_p2p_comm ................................ False\n"
            "-------------------- end of arguments ---------------------\n")
    facts = parse_log(dump)
    assert facts.args["microbatch_group_size_per_vp_stage"] == 6 and facts.args["overlap_p2p_comm"] is False
    config = "model:\n  pipeline_model_parallel_size: 4\n  microbatch_group_size_per_vp_stage: 6\n"
    assert parse_log(config).args.get("microbatch_group_size_per_vp_stage") == 6


def test_renamed_flags_are_megatrons_own():
    """Every launch-script flag the reader renames is one of Megatron-LM's options with that ``dest`` (and, for a
    bare flag, the value its store action keeps), per the parser recorded at the pinned commit."""
    recorded = {o[2:].replace("-", "_"): a for a in json.loads(ARGUMENTS.read_text(encoding="utf-8"))["arguments"]
                for o in a["options"] if o.startswith("--")}
    for flag, (dest, const) in FLAG_DESTS.items():
        assert recorded[flag]["dest"] == dest, flag
        if const is not None:
            assert recorded[flag]["action"] == ("_StoreFalseAction" if const is False else "_StoreTrueAction"), flag
