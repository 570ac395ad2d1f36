"""The memory-side knobs ``solve`` searches (issue 11 section 2): selective recompute modules, activation
offloading of N layers, optimizer CPU offload. Their Megatron rules, their cost terms (memory and
time), CP-SAT == oracle with each pinned, ``--fix`` for each, the exports' flags, and the published
Llama-3 70B GB300 Megatron-FSDP + offload run found by ``solve``."""

from __future__ import annotations

import json
import shlex

import pytest
from click.testing import CliRunner

from megasolve.cli.main import cli
from megasolve.cost.memory import ActivationShape, layer_activation_bytes, stage_memory
from megasolve.cost.offload import activation_offload_exposed_s, optimizer_offload_s
from megasolve.cost.recompute_search import module_ladder, module_problem
from megasolve.cost.step import layer_time, step_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import RECOMPUTE_MODULE_NAMES
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.solve import solve
from megasolve.solver.space import build_space
from megasolve.topology import Cluster


def test_module_names_are_megatrons_and_each_drops_something():
    from megasolve.cost.memory import RECOMPUTE_MODULES

    assert set(RECOMPUTE_MODULE_NAMES) == set(RECOMPUTE_MODULES)
    spec = load_preset("deepseek-v3-proxy")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    none = layer_activation_bytes(spec, Workload(), shape, moe=True, recompute="none")
    for module in ("moe_act", "layernorm", "mla_up_proj", "moe", "shared_experts"):
        sel = layer_activation_bytes(spec, Workload(), shape, moe=True, recompute="selective",
                                     recompute_modules=(module,))
        assert sel < none, module


@pytest.mark.parametrize("model,module,workload,needle", [
    ("llama-3.1-8b", "moe_act", Workload(), "needs an MoE model"),
    ("llama-3.1-8b", "mla_up_proj", Workload(), "multi_latent_attention"),
    ("qwen3-30b-a3b", "mlp", Workload(), "dense layers only"),
    ("deepseek-v3-proxy", "moe_act", Workload(precision="fp8", fp8_recipe="delayed"), "Delayed scaling"),
    ("deepseek-v3-proxy", "shared_experts", Workload(moe_shared_expert_overlap=True), "shared-expert-overlap"),
    ("deepseek-v3-proxy", "moe", Workload(moe_ep_overlap=True), "EP A2A overlap"),
])
def test_module_rules_follow_transformer_config(model, module, workload, needle):
    spec = load_preset(model)
    assert needle in module_problem(spec, workload, module)
    ctx = RuleContext(spec=spec, cluster=Cluster.from_flags(num_gpus=8, gpu="h100"), workload=workload)
    found = violations(ctx, Layout(dp=8, recompute="selective", recompute_modules=(module,)))
    assert [v.rule for v in found if v.rule == "recompute_modules_usable"]


def test_layout_checks_the_modules_shape():
    with pytest.raises(MegasolveError, match="only with --recompute selective"):
        Layout(recompute="full", recompute_modules=("mlp",))
    with pytest.raises(MegasolveError, match="each of"):
        Layout(recompute="selective", recompute_modules=("attn",))
    assert Layout(recompute="selective", recompute_modules=("mlp", "core_attn")).recompute_modules == \
        ("core_attn", "mlp")  # Megatron's order: one spelling per set
    with pytest.raises(MegasolveError, match=r"\[0, 1\]"):
        Layout(optimizer_offload_fraction=1.5)


def test_ladder_is_ordered_by_cost_per_byte_and_each_step_saves_more():
    """Each rung of the ladder recomputes more and saves more memory, and costs more time."""
    spec = load_preset("deepseek-v3-proxy")
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    wl = Workload()
    ladder = module_ladder(spec, cluster, wl)
    assert ladder[0] == ("layernorm",) and len(ladder) >= 3
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    saved, times = [], []
    for modules in ladder:
        saved.append(layer_activation_bytes(spec, wl, shape, moe=True, recompute="selective",
                                            recompute_modules=modules))
        times.append(layer_time(spec, cluster, wl, shape, ep=8, moe=True, recompute="selective",
                                recompute_modules=modules).total)
    assert saved == sorted(saved, reverse=True) and times == sorted(times)
    # flash attention: no core_attn (it keeps more than it drops); unfused: core_attn first
    dense = load_preset("llama-3.1-8b")
    assert module_ladder(dense, cluster, Workload()) == (("mlp",),)
    assert module_ladder(dense, cluster, Workload(attention="unfused"))[0] == ("core_attn",)


def test_recompute_flops_of_each_module_are_one_forward():
    """mlp recompute adds one MLP forward: 2*h*F*3 FLOPs per token for SwiGLU (1/3 of the 6x)."""
    from megasolve.cost.recompute import selective_extra_work

    spec = load_preset("llama-3.1-8b")
    shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    w = selective_extra_work(spec, Workload(seq_length=4096), shape, moe=False, modules=("mlp",))
    assert w.gemm_flops == pytest.approx(2 * 4096 * 14336 * 3 * 4096 / 2)


def test_activation_offload_hides_behind_c2c_not_behind_pcie():
    """Per offloaded layer: max(0, b/B - c/3) + max(0, b/B - 2c/3) + 2b/HBM."""
    assert activation_offload_exposed_s(1e9, 0.06, 450e9, 8e12) == pytest.approx(2e9 / 8e12)
    slow = activation_offload_exposed_s(1e9, 0.06, 32e9, 8e12)
    assert slow == pytest.approx((1 / 32 - 0.02) + (1 / 32 - 0.04 if 1 / 32 > 0.04 else 0) + 2e9 / 8e12)


def test_optimizer_offload_moves_memory_to_host_and_costs_cpu_time():
    spec = load_preset("llama-3.1-8b")
    cluster = Cluster.from_flags(num_gpus=8, gpu="h100")
    wl = Workload()
    base = Layout(dp=8)
    half = Layout(dp=8, optimizer_offload_fraction=0.5)
    m0, m1 = stage_memory(spec, cluster, wl, base)[0], stage_memory(spec, cluster, wl, half)[0]
    assert m1.optimizer_bytes == pytest.approx(m0.optimizer_bytes / 2)
    assert m1.weights_bytes == m0.weights_bytes and m1.grads_bytes == m0.grads_bytes
    t0, t1 = step_time(spec, cluster, wl, base), step_time(spec, cluster, wl, half)
    # CPU Adam on half of the 1.0e9-parameter shard: 32 B/param at 77 GB/s = 0.21 s (the copies, 6 B/param
    # over 64 GB/s, overlap it)
    host = optimizer_offload_s(cluster.gpu, 8.03e9 / 8, 0.5, grad_bytes=4, param_bytes=2)
    assert host == pytest.approx(32 * 8.03e9 / 16 / 77e9, rel=0.01)
    assert t1.step_s - t0.step_s == pytest.approx(host, rel=0.05)


@pytest.mark.parametrize("fixed,check", [
    ({"recompute_modules": ("moe_act", "layernorm")},
     lambda l: l.recompute == "selective" and l.recompute_modules == ("moe_act", "layernorm")),
    ({"cpu_offload_layers": 24}, lambda l: l.cpu_offload_layers == 24 and l.pp == 1 and l.recompute == "none"),
    ({"optimizer_offload_fraction": 0.5}, lambda l: l.optimizer_offload_fraction == 0.5),
])
def test_each_knob_pinned_cpsat_equals_the_oracle(fixed, check):
    spec = load_preset("qwen3-30b-a3b")
    cluster = Cluster.from_flags(num_gpus=8, gpu="h100")
    workload = Workload(seq_length=4096, global_batch_size=64)
    fixed = dict(fixed, mbs=1)
    fast = solve(spec, cluster, workload, top_k=5, fixed=fixed, engine="cpsat", explain=False)
    oracle = solve(spec, cluster, workload, top_k=5, fixed=fixed, engine="exhaustive", explain=False)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    assert fast.layouts and all(check(r.layout) for r in fast.layouts)


def test_space_carries_the_knobs_and_fix_pins_them():
    spec = load_preset("deepseek-v3-proxy")
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    space = build_space(spec, cluster, Workload())
    kinds = {rc[0] for rc in space.domains["rc"]}
    assert {"none", "selective", "full", "offload"} <= kinds
    assert space.domains["oo"] == (0.0, 1.0)
    pinned = build_space(spec, cluster, Workload(), fixed={"recompute_modules": "mla_up_proj+moe_act"})
    assert pinned.domains["rc"] == (("selective", ("moe_act", "mla_up_proj")),)
    with pytest.raises(MegasolveError, match="recompute_modules"):
        build_space(spec, cluster, Workload(), fixed={"recompute_modules": "attn"})


LAUNCH_FORMATS = ("megatron", "bridge", "bridge-main", "nemo", "verl")


@pytest.mark.parametrize("fix,megatron,override", [
    ("recompute_modules=moe_act+layernorm", "--recompute-modules moe_act layernorm", "recompute_modules="),
    ("cpu_offload_layers=24", "--cpu-offloading-num-layers 24", "cpu_offloading_num_layers=24"),
    ("optimizer_offload_fraction=0.5", "--optimizer-offload-fraction 0.5", "optimizer_offload_fraction=0.5"),
])
def test_solve_fix_and_every_export_carry_the_knob(fix, megatron, override):
    base = ["solve", "-m", "qwen3-30b-a3b", "-n", "8", "-g", "h100", "--seq-len", "4096", "--gbs", "64",
            "--fix", "mbs=1", "--fix", fix]
    runner = CliRunner()
    out = runner.invoke(cli, base + ["--format", "json"])
    assert out.exit_code == 0, out.output
    layouts = [p["layout"] for p in json.loads(out.output)["layouts"]]
    key, value = fix.split("=")
    for layout in layouts:
        if key == "recompute_modules":
            assert layout["recompute_modules"] == value.split("+")
        else:
            assert str(layout[key]) == value
    texts = {}
    for fmt in LAUNCH_FORMATS:
        res = runner.invoke(cli, base + ["--format", fmt])
        assert res.exit_code == 0, res.output
        texts[fmt] = res.output
    assert megatron in texts["megatron"]
    if key == "optimizer_offload_fraction":
        assert "--optimizer-cpu-offload" in texts["megatron"] and "--use-precision-aware-optimizer" in texts["megatron"]
        assert "optimizer.optimizer_cpu_offload=true" in texts["bridge"]
        assert "optim.config.optimizer_cpu_offload=True" in texts["nemo"]
        assert "++actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=true" in texts["verl"]
    for fmt in ("bridge", "bridge-main", "nemo", "verl"):
        assert override in texts[fmt], fmt
    command = "\n".join(line for line in texts["megatron"].splitlines() if not line.startswith("#"))
    shlex.split(command.replace("\\\n", " "))  # the command parses (comment lines dropped)


def test_published_gb300_fsdp_offload_run_is_found_and_fits():
    """Megatron-Bridge's Llama-3 70B on 64 GB300 (Megatron-FSDP, first 20 layers' activations offloaded,
    benchmarks/published.py): solve's #1 with the published axes pinned is Megatron-FSDP with activation
    offloading (not full recompute) and fits; pinning the published 20 layers returns the published
    layout, predicted to fit."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_published import RUNS

    run = next(r for r in RUNS if r.id.endswith("llama-3-70b:gb300x64:6"))
    assert run.layout.fsdp and run.layout.cpu_offload_layers == 20
    pins = {"tp": 1, "pp": 1, "cp": 1, "mbs": 2, "fsdp": True}
    best = solve(run.spec, run.cluster, run.workload, top_k=3, fixed=pins, explain=False).layouts[0]
    assert best.layout.fsdp and best.layout.cpu_offload_layers > 0 and best.layout.recompute == "none"
    assert best.estimate.peak_bytes <= run.cluster.gpu.usable_memory_bytes
    free = solve(run.spec, run.cluster, run.workload, top_k=3, explain=False).layouts[0]
    assert free.layout.cpu_offload_layers > 0 and free.layout.recompute == "none"
    exact = solve(run.spec, run.cluster, run.workload, top_k=1, explain=False,
                  fixed=dict(pins, cpu_offload_layers=20)).layouts[0]
    assert exact.layout == run.layout
    assert exact.estimate.peak_bytes <= run.cluster.gpu.usable_memory_bytes
