"""``--defer-embedding-wgrad-compute`` (the last stage keeps the deferred output-layer inputs and logits
gradients) and ``--num-distributed-optimizer-instances`` (the optimizer state shards over a part of the DP
group; gradients reduce-scatter inside it and all-reduce across the parts): the memory and time terms by
hand, the engines agreeing on them, the rules and the exports."""

from __future__ import annotations

import pytest

from megasolve.cli.launch import plan_settings
from megasolve.cli.launch_formats import megatron_flag_list
from megasolve.cost.memory import ActivationShape, deferred_wgrad_bytes, stage_memory
from megasolve.cost.step import dp_group_comm, step_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.solver.cpsat import pipeline_rows
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.space import build_space
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

from test_combine import assert_engines_agree, random_points

SPEC = load_preset("llama-3.1-8b")
CLUSTER = Cluster.from_flags(num_gpus=16, gpu="h100")


def test_deferred_bytes_count_the_calls_before_the_last_micro_batch():
    shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    pair = 2 * 4096 * (SPEC.padded_vocab_size(2) / 2 + SPEC.hidden_size / 2)  # bf16 [T, V/t] + [T/t, h]
    every = Workload(seq_length=4096, defer_embedding_wgrad=True)  # limit 0: every micro-batch
    assert deferred_wgrad_bytes(SPEC, every, shape, 8) == 7 * pair
    limited = Workload(seq_length=4096, defer_embedding_wgrad=True, wgrad_deferral_limit=3)
    assert deferred_wgrad_bytes(SPEC, limited, shape, 8) == 3 * pair
    assert deferred_wgrad_bytes(SPEC, limited, shape, 1) == 0  # nothing deferred before the only one
    assert deferred_wgrad_bytes(SPEC, Workload(seq_length=4096), shape, 8) == 0


def test_deferred_bytes_sit_on_the_last_stage_only():
    layout = Layout(tp=2, pp=4, dp=2, mbs=1, sequence_parallel=True)
    base = Workload(seq_length=4096, global_batch_size=32)
    deferred = Workload(seq_length=4096, global_batch_size=32, defer_embedding_wgrad=True, wgrad_deferral_limit=5)
    before, after = stage_memory(SPEC, CLUSTER, base, layout), stage_memory(SPEC, CLUSTER, deferred, layout)
    shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    extra = deferred_wgrad_bytes(SPEC, deferred, shape, base.num_microbatches(layout))
    assert [a.total_bytes - b.total_bytes for a, b in zip(after, before)][:-1] == [0, 0, 0]
    assert after[-1].total_bytes - before[-1].total_bytes == pytest.approx(extra)
    assert extra == 5 * 2 * 4096 * (SPEC.padded_vocab_size(2) / 2 + SPEC.hidden_size / 2)


def test_instances_multiply_the_optimizer_shard():
    layout = Layout(tp=1, pp=2, dp=8, mbs=1)
    one = stage_memory(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=64), layout)
    four = stage_memory(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=64, dist_optimizer_instances=4),
                        layout)
    for a, b in zip(one, four):
        assert b.optimizer_bytes == pytest.approx(4 * a.optimizer_bytes)  # 12 B / (8 / 4) instead of / 8
        assert b.weights_bytes == a.weights_bytes and b.grads_bytes == a.grads_bytes


def test_instances_reduce_inside_then_all_reduce_the_shard_across():
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")  # 8 nodes; the DP group of tp 1 spans them all
    whole = dp_group_comm(cluster, params=10**9, group=64, stride=1, distributed_optimizer=True)
    split = dp_group_comm(cluster, params=10**9, group=64, stride=1, distributed_optimizer=True, instances=8)
    inside = dp_group_comm(cluster, params=10**9, group=8, stride=1, distributed_optimizer=True)  # one node
    across = dp_group_comm(cluster, params=10**9 // 8, group=8, stride=8, distributed_optimizer=False)
    assert split.param_bw_s == pytest.approx(inside.param_bw_s)  # the all-gather stays in the instance
    assert split.grad_bw_s == pytest.approx(inside.grad_bw_s + across.grad_bw_s, rel=1e-6)
    assert split.grad_latency_s == pytest.approx(inside.grad_latency_s + across.grad_latency_s)
    assert whole.param_bw_s > split.param_bw_s  # the instance's all-gather runs on NVLink only


@pytest.mark.parametrize("fields", [dict(defer_embedding_wgrad=True, wgrad_deferral_limit=3),
                                    dict(defer_embedding_wgrad=True),
                                    dict(dist_optimizer_instances=2)], ids=["limit3", "every", "instances2"])
def test_estimate_oracle_and_cpsat_agree(fields):
    workload = Workload(seq_length=4096, global_batch_size=128, **fields)
    space = build_space(SPEC, CLUSTER, workload)
    tables = CostTables(SPEC, CLUSTER, workload)
    rows = pipeline_rows(space, tables)
    points = random_points(space, 6, seed=7)
    assert len(points) >= 4 and all(space.legal(p) for p in points)
    if fields.get("defer_embedding_wgrad"):
        assert all(p["pp"] > 1 for p in points)  # the rule keeps PP 1 out of the space
    for point in points:
        assert_engines_agree(SPEC, CLUSTER, workload, space, tables, rows, point)


def test_rules_name_megatrons_conditions():
    deferred = Workload(seq_length=4096, global_batch_size=64, defer_embedding_wgrad=True)
    ctx = RuleContext(spec=SPEC, cluster=CLUSTER, workload=deferred)
    names = {v.rule for v in violations(ctx, Layout(tp=2, pp=1, dp=8, mbs=1, sequence_parallel=True))}
    assert "defer_embedding_wgrad_needs_pp" in names
    instances = Workload(seq_length=4096, global_batch_size=64, dist_optimizer_instances=3)
    ctx = RuleContext(spec=SPEC, cluster=CLUSTER, workload=instances)
    names = {v.rule for v in violations(ctx, Layout(tp=2, pp=1, dp=8, mbs=1, sequence_parallel=True))}
    assert "dist_optimizer_instances_divide_dp" in names
    with pytest.raises(MegasolveError, match="greater than or equal to 0"):
        Workload(defer_embedding_wgrad=True, wgrad_deferral_limit=-1)
    with pytest.raises(MegasolveError, match="positive integer"):
        Workload(dist_optimizer_instances=0)


def test_the_megatron_export_launches_what_was_planned():
    workload = Workload(seq_length=4096, global_batch_size=64, defer_embedding_wgrad=True, wgrad_deferral_limit=22,
                        dist_optimizer_instances=2)
    layout = Layout(tp=2, pp=2, dp=4, mbs=1, sequence_parallel=True)
    flags = megatron_flag_list(plan_settings(SPEC, CLUSTER, workload, layout))
    assert "--defer-embedding-wgrad-compute" in flags and "--wgrad-deferral-limit 22" in flags
    assert "--num-distributed-optimizer-instances 2" in flags
    plain = megatron_flag_list(plan_settings(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=64), layout))
    assert not any("deferral" in f or "instances" in f for f in plain)


def test_instances_cost_time_only_through_the_dp_terms():
    layout = Layout(tp=1, pp=2, dp=8, mbs=1)
    one = step_time(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=64), layout)
    two = step_time(SPEC, CLUSTER, Workload(seq_length=4096, global_batch_size=64, dist_optimizer_instances=2), layout)
    for term in ("compute", "tp_comm", "pp_comm", "bubble"):
        assert two.breakdown_s[term] == pytest.approx(one.breakdown_s[term])


def test_offloaded_activations_must_fit_in_host_memory():
    """Activation offloading fills pinned host DRAM: Qwen3-235B on GB200 (240 GB of Grace memory per GPU)
    cannot offload 77 layers at mbs 8 (the free #1 of the famous-setups benchmark before this check)."""
    spec = load_preset("qwen3-235b-a22b")
    cluster = Cluster.from_flags(num_gpus=256, gpu="gb200", nvlink_domain=64)
    workload = Workload(seq_length=4096, global_batch_size=8192)
    ctx = RuleContext(spec=spec, cluster=cluster, workload=workload)
    layout = Layout(tp=1, pp=1, dp=256, ep=4, etp=1, mbs=8, fsdp=True, cpu_offload_layers=77)
    found = [v for v in violations(ctx, layout) if v.rule == "activation_offload_fits_host"]
    assert found and "more than the 240 GB a gb200 host has per GPU" in found[0].message
    few = Layout(tp=1, pp=1, dp=256, ep=4, etp=1, mbs=1, fsdp=True, cpu_offload_layers=11)
    assert not [v for v in violations(ctx, few) if v.rule == "activation_offload_fits_host"]
    assert cluster.gpu.host_memory_bytes == 240e9 and Cluster.from_flags(num_gpus=8, gpu="h100").gpu.host_memory_bytes \
        == 256e9
