"""The CP communication type (``--cp-comm-type`` p2p / a2a / all_gather / a2a+p2p): Transformer Engine's
rules for each, its cost (``cost/step.py`` ``cp_type_comm_s``), ``solve`` choosing the fastest allowed per
layout (``solver/knobs.py``) the same in CP-SAT, the oracle and ``estimate``, ``--fix`` and the exports."""

from __future__ import annotations

import pytest

from megasolve.cli.launch import launch_text, megatron_flags
from megasolve.cost.comm import all_to_all_time_s, collective_time_s
from megasolve.cost.memory import ActivationShape
from megasolve.cost.step import (_cp_kv_bytes, _cp_qkv_o_bytes, cp_a2a_size, cp_comm_problem, cp_ring_extra_bytes,
                                 cp_ring_size, cp_type_comm_s, resolve_cp_comm_type, step_time)
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import CP_COMM_FASTEST, CP_COMM_TYPES
from megasolve.solver.api import estimate
from megasolve.solver.knobs import COMM_KNOBS
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.solve import solve
from megasolve.topology import Cluster


def h100(n: int) -> Cluster:
    return Cluster.from_flags(num_gpus=n, gpu="h100")


# ---------------------------------------------------------------------------- rules
def test_transformer_engine_rules_per_type():
    llama, gemma, oss = load_preset("llama-3.1-8b"), load_preset("gemma-3-27b"), load_preset("gpt-oss-20b")
    c = h100(32)
    # a plain model runs every type but a2a needs the 8 KV heads (per TP rank) split over CP
    assert [cp_comm_problem(llama, c, t, 1, 8) for t in CP_COMM_TYPES] == [None] * 4
    assert "divisible by cp (16)" in cp_comm_problem(llama, c, "a2a", 1, 16)
    assert "divisible by cp (8)" in cp_comm_problem(llama, c, "a2a", 2, 8)  # 4 KV heads per TP rank
    # sliding windows: a2a or all_gather only (L5054-5060)
    assert "sliding-window" in cp_comm_problem(gemma, c, "p2p", 1, 2)
    assert "sliding-window" in cp_comm_problem(gemma, c, "a2a+p2p", 1, 4)
    assert cp_comm_problem(gemma, c, "all_gather", 1, 2) is None
    # sinks (softmax_type learnable): a2a only (L5065-5067), even with windows
    assert "a2a" in cp_comm_problem(oss, c, "all_gather", 1, 2)
    assert cp_comm_problem(oss, c, "a2a", 1, 8) is None and cp_comm_problem(oss, c, "a2a", 1, 16) is not None
    # no CP: nothing to refuse
    assert cp_comm_problem(oss, c, "p2p", 1, 1) is None


def test_hierarchical_split_keeps_the_a2a_level_inside_the_nvlink_domain():
    llama = load_preset("llama-3.1-8b")  # 32 heads, 8 KV heads
    assert cp_a2a_size(llama, h100(32), 1, 16) == 8  # a2a over the 8 GPUs of a node, p2p across 2 nodes
    assert cp_a2a_size(llama, h100(32), 2, 16) == 4  # 4 KV heads per TP rank; 2 x 4 ranks in one node
    assert cp_a2a_size(llama, h100(32), 1, 2) is None  # no level 1 < A < 2
    assert cp_a2a_size(load_preset("llama-3.1-70b"), h100(64), 8, 8) is None  # every CP hop leaves the node


def test_sinks_model_under_cp_gets_a2a_and_a_rule_refuses_what_a2a_cannot_split():
    oss, c = load_preset("gpt-oss-20b"), h100(16)
    assert resolve_cp_comm_type(oss, c, Workload(), ActivationShape(tp=1, cp=2, mbs=1, sequence_parallel=False)) == "a2a"
    ctx = RuleContext(spec=oss, cluster=c, workload=Workload())
    assert [v.rule for v in violations(ctx, Layout(cp=16))] == ["cp_comm_type_supported"]
    assert violations(ctx, Layout(cp=8, dp=2)) == []
    with pytest.raises(MegasolveError, match="cp_comm_type all_gather|attention sinks"):
        estimate(oss, c, Workload(cp_comm_type="all_gather"), Layout(cp=2, dp=8))


# ---------------------------------------------------------------------------- cost
def test_a2a_plus_p2p_is_the_a2a_level_plus_the_ring_across_it():
    """Hand check: Llama-3.1-8B at 128K on 32 H100, tp1 cp16 = a2a over 8 ranks in a node + the p2p ring
    over 2 nodes on the local-sized KV chunk, overlapped with attention like p2p."""
    spec, c = load_preset("llama-3.1-8b"), h100(32)
    w, shape = Workload(seq_length=131072), ActivationShape(tp=1, cp=16, mbs=1, sequence_parallel=False)
    qkv, o = _cp_qkv_o_bytes(spec, w, shape)
    assert (qkv, o) == (2 * 8192 * (32 + 16) * 128, 2 * 8192 * 32 * 128)
    a2a = sum(all_to_all_time_s(nvlink_bytes=x * 7 / 8, network_bytes=0.0, group_size=8, cluster=c,
                                dispatcher="alltoall") for x in (qkv, o))
    ring = 3 * collective_time_s("send_recv", _cp_kv_bytes(spec, w, shape), 2, c.group_link(8, 2))
    assert cp_type_comm_s("a2a+p2p", spec, c, w, shape, attention_s=0.0) == pytest.approx(2 * a2a + ring)
    # the ring hides behind attention, the all-to-all does not
    assert cp_type_comm_s("a2a+p2p", spec, c, w, shape, attention_s=1.0) == pytest.approx(2 * a2a)
    # full recompute: one more forward of each (a2a 3 passes, ring 4 * (2-1) sends)
    full = cp_type_comm_s("a2a+p2p", spec, c, w, shape, attention_s=0.0, forwards=2)
    assert full == pytest.approx(3 * a2a + 4 / 3 * ring)


def test_a2a_crossing_nodes_prices_the_network_share():
    """An a2a over 16 CP ranks on two 8-GPU nodes sends 8 of its 15 peers' shares through the NIC."""
    spec = load_preset("gemma-3-27b")  # 32 heads, 16 KV heads
    c, w = h100(16), Workload(seq_length=65536)
    shape = ActivationShape(tp=1, cp=16, mbs=1, sequence_parallel=False)
    qkv, o = _cp_qkv_o_bytes(spec, w, shape)
    one = sum(all_to_all_time_s(nvlink_bytes=x * 15 / 16 * 7 / 15, network_bytes=x * 15 / 16 * 8 / 15,
                                group_size=16, cluster=c, dispatcher="alltoall") for x in (qkv, o))
    assert cp_type_comm_s("a2a", spec, c, w, shape, attention_s=5.0) == pytest.approx(2 * one)


def test_estimate_charges_the_pinned_type_on_every_attention_layer():
    spec, c = load_preset("llama-3.1-8b"), h100(8)
    layout = Layout(cp=8)
    times = {t: step_time(spec, c, Workload(seq_length=8192, global_batch_size=8, cp_comm_type=t), layout)
             for t in CP_COMM_TYPES}
    per_layer = {t: cp_type_comm_s(t, spec, c, Workload(seq_length=8192), ActivationShape(
        tp=1, cp=8, mbs=1, sequence_parallel=False), 0.0) for t in ("a2a", "all_gather")}
    for t in ("a2a", "all_gather"):  # not overlapped: the whole term, 32 layers x 8 micro-batches
        assert times[t].breakdown_s["cp_comm"] == pytest.approx(8 * 32 * per_layer[t], rel=1e-9)
    assert times["p2p"].breakdown_s["cp_comm"] < times["a2a"].breakdown_s["cp_comm"]  # the ring hides


# ---------------------------------------------------------------------------- search
CASES = [  # (model, GPUs, seq, gbs, fixed): plain long context across nodes, windows, sinks
    ("llama-3.1-8b", 16, 65536, 16, {"mbs": 1, "pp": 1}),
    ("gemma-3-27b", 16, 32768, 16, {"mbs": 1, "pp": 1}),
    ("gpt-oss-20b", 16, 32768, 16, {"mbs": 1, "pp": 1, "ep": 8}),
]


@pytest.mark.parametrize("model,gpus,seq,gbs,fixed", CASES, ids=[c[0] for c in CASES])
def test_solve_chooses_the_fastest_allowed_type_the_same_in_cpsat_and_the_oracle(model, gpus, seq, gbs, fixed):
    spec, c = load_preset(model), h100(gpus)
    workload = Workload(seq_length=seq, global_batch_size=gbs)
    fast = solve(spec, c, workload, top_k=5, fixed=fixed, time_limit_s=120, knobs=COMM_KNOBS)
    oracle = solve(spec, c, workload, top_k=5, fixed=fixed, engine="exhaustive", knobs=COMM_KNOBS)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert [r.workload for r in fast.layouts] == [r.workload for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    assert any(r.layout.cp > 1 for r in fast.layouts)
    if model == "gemma-3-27b":  # a2a moves Q, K, V and O once; all_gather (the default) c x K and V twice
        assert {r.workload.cp_comm_type for r in fast.layouts if r.layout.cp > 1} == {"a2a"}
    for report, step_us in zip(fast.layouts, fast.objective_us):
        wl = report.workload
        assert wl.cp_comm_type != CP_COMM_FASTEST
        ctx = RuleContext(spec=spec, cluster=c, workload=wl)
        assert violations(ctx, report.layout) == []
        m = wl.num_microbatches(report.layout)
        assert report.estimate.time.step_s * 1e6 == pytest.approx(step_us, rel=2e-4, abs=50 + 2 * m * spec.num_layers)
        if report.layout.cp == 1:
            continue
        # the chosen type is the fastest of the allowed ones for this layout
        allowed = [t for t in CP_COMM_TYPES
                   if cp_comm_problem(spec, c, t, report.layout.tp, report.layout.cp) is None]
        assert wl.cp_comm_type in allowed
        steps = {t: step_time(spec, c, Workload(seq_length=seq, global_batch_size=gbs, cp_comm_type=t,
                                                tp_comm_overlap=wl.tp_comm_overlap, moe_dispatcher=wl.moe_dispatcher,
                                                moe_ep_overlap=wl.moe_ep_overlap,
                                                moe_shared_expert_overlap=wl.moe_shared_expert_overlap),
                                 report.layout).step_s for t in allowed}
        if report.layout.recompute == "none":
            assert steps[wl.cp_comm_type] == pytest.approx(min(steps.values()), rel=1e-6)
        else:  # chosen at no recompute (one type per layout, as the MoE overlaps are chosen): close to the best
            assert steps[wl.cp_comm_type] <= 1.01 * min(steps.values())
        if spec.softmax_type != "vanilla":
            assert wl.cp_comm_type == "a2a"


def test_fix_pins_the_type_and_the_layouts_obey_its_rule():
    spec, c = load_preset("llama-3.1-8b"), h100(16)
    workload = Workload(seq_length=65536, global_batch_size=16)
    result = solve(spec, c, workload, top_k=5, fixed={"mbs": 1, "cp_comm_type": "a2a"}, knobs=COMM_KNOBS)
    assert result.status == "optimal" and "cp_comm_type" not in result.search["searched_knobs"]
    assert any(r.layout.cp > 1 for r in result.layouts)
    for r in result.layouts:
        assert r.workload.cp_comm_type == "a2a"
        assert r.layout.cp == 1 or (8 // min(r.layout.tp, 8)) % r.layout.cp == 0  # 8 KV heads per TP rank split
    with pytest.raises(MegasolveError, match="must be one of p2p, a2a, all_gather, a2a\\+p2p"):
        solve(spec, c, workload, fixed={"cp_comm_type": "ring"}, knobs=COMM_KNOBS)


# ---------------------------------------------------------------------------- exports
def test_exports_carry_the_type_and_the_hierarchical_sizes():
    spec, c = load_preset("llama-3.1-8b"), h100(32)
    workload, layout = Workload(seq_length=131072, global_batch_size=16, cp_comm_type="a2a+p2p"), Layout(cp=16, dp=2)
    flags = megatron_flags(spec, c, workload, layout)
    assert {"--cp-comm-type a2a+p2p", "--hierarchical-context-parallel-sizes 8 2"} <= set(flags)
    bridge = launch_text("bridge", spec, c, workload, layout)
    assert "model.cp_comm_type='\"a2a+p2p\"'" in bridge and "model.hierarchical_context_parallel_sizes=[8,2]" in bridge
    for fmt in ("nemo", "verl"):  # neither creates the hierarchical CP groups
        text = launch_text(fmt, spec, c, workload, layout)
        assert "hierarchical_context_parallel_sizes=(8, 2): " in text and "not expressible" in text
    plain = megatron_flags(spec, c, Workload(seq_length=131072, global_batch_size=16, cp_comm_type="a2a"),
                           Layout(cp=8, dp=4))
    assert "--cp-comm-type a2a" in plain and not any("hierarchical" in f for f in plain)


# ---------------------------------------------------------------------------- the ring's extra kernels
def test_ring_corrections_match_the_kernel_count_at_cp2():
    """Transformer Engine's p2p ring at c = 2, last rank, counted kernel by kernel from ``context_parallel.py``:
    forward 8 E_kv (K, V joined) + 10 E_q + 36 L (LSE clone and correction, output rebuilt), backward 10 E_q +
    24 E_kv (K, V copied, dQ / dK / dV accumulated): 20 E_q + 32 E_kv + 36 L bytes, E_q = T n d, E_kv = T g d,
    L = T n. Llama-3-70B at seq 8192, TP 4, CP 2: 203.7 MB per layer and micro-batch."""
    spec = load_preset("llama-3.1-70b")
    shape = ActivationShape(tp=4, cp=2, mbs=1, sequence_parallel=True)
    tokens, n, g, d = 4096, 64 // 4, 8 // 4, 128
    e_q, e_kv, lse = tokens * n * d, tokens * g * d, tokens * n
    got = cp_ring_extra_bytes(spec, Workload(seq_length=8192), shape, 2)
    assert got == 20 * e_q + 32 * e_kv + 36 * lse
    assert round(got / 1e6, 1) == 203.7
    # recompute runs the forward corrections again; no ring, nothing
    twice = cp_ring_extra_bytes(spec, Workload(seq_length=8192), shape, 2, forwards=2)
    assert twice - got == 8 * e_kv + 10 * e_q + 36 * lse  # the forward part once more
    assert cp_ring_extra_bytes(spec, Workload(seq_length=8192), shape, 1) == 0.0


def test_only_a_ring_pays_the_corrections(monkeypatch):
    """p2p rings over all of CP, a2a+p2p over CP / A, a2a and all_gather not at all; a layer's compute
    carries the ring's bytes at HBM bandwidth (twice the forward part with core attention recomputed)."""
    from megasolve.cost import step

    spec, cluster = load_preset("llama-3.1-8b"), h100(32)
    shape = ActivationShape(tp=1, cp=16, mbs=1, sequence_parallel=False)
    sizes = {t: cp_ring_size(spec, cluster, Workload(seq_length=131072, cp_comm_type=t), shape)
             for t in CP_COMM_TYPES}
    assert sizes == {"p2p": 16, "a2a": 1, "all_gather": 1, "a2a+p2p": 16 // cp_a2a_size(spec, cluster, 1, 16)}
    small, w = ActivationShape(tp=1, cp=2, mbs=1, sequence_parallel=False), Workload(seq_length=8192, cp_comm_type="p2p")
    for recompute, forwards in (("none", 1), ("selective", 2)):
        with_ring = step.layer_time_without_ep(spec, h100(8), w, small, ep=1, moe=False, recompute=recompute).compute
        ring = cp_ring_extra_bytes(spec, w, small, 2, forwards=forwards)
        with monkeypatch.context() as m:
            m.setattr(step, "cp_ring_extra_bytes", lambda *a, **k: 0.0)
            without = step.layer_time_without_ep(spec, h100(8), w, small, ep=1, moe=False, recompute=recompute).compute
        assert with_ring - without == pytest.approx(ring / h100(8).gpu.hbm_bytes_per_s, rel=1e-9)
