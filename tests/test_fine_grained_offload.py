"""Fine-grained activation offloading (``Workload.offload_modules``; Megatron ``--fine-grained-activation-offloading
--offload-modules``): which saved tensors leave the GPU, what stays, the PCIe time, Megatron's rules, the
solver engines agreeing, the reader and the exports. Measured: Megatron-LM's two functional tests that use it
(tests/test_functional_memory.py)."""

from __future__ import annotations

import dataclasses

import pytest

from megasolve.cli.launch import megatron_flags
from megasolve.cost.memory import (MIN_OFFLOADED_BYTES, OFFLOAD_RESIDENT_LAYERS, ActivationShape,
                                   layer_activation_bytes, offload_resident_bytes, offloaded_layer_bytes, stage_memory)
from megasolve.cost.step import layer_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.solver.rules import RuleContext, violations
from megasolve.solver.runs import run_from_log
from megasolve.solver.solve import solve
from megasolve.topology import Cluster

SHAPE = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
MODULES = ("core_attn", "attn_proj", "expert_fc1", "moe_act")
OFF = Workload(seq_length=4096, offload_modules=MODULES)


def test_offloaded_bytes_leave_the_layer_and_two_layers_stay_resident():
    spec = load_preset("qwen3-30b-a3b")
    on, off = (layer_activation_bytes(spec, w, SHAPE, moe=True, recompute="none") for w in (Workload(seq_length=4096),
                                                                                          OFF))
    moved = offloaded_layer_bytes(spec, OFF, SHAPE, moe=True, recompute="none")
    assert moved > 0 and on - off == pytest.approx(moved)
    # Q, K, V (32 + 2*4 heads of 128), the LSE stays (fp32 [T, 32]: under the 1M-element minimum), O, the
    # experts' FC1 input (top-8 rows of 2*2048 + 4 B) and their FC1 output (2 * 2 * 768 B per row)
    T = 4096
    expected = 2 * T * 128 * (32 + 8) + 2 * T * 32 * 128 + 8 * T * (2 * 2048 + 4) + 8 * T * 2 * 2 * 768
    assert moved == pytest.approx(expected)
    assert 4 * T * 32 < MIN_OFFLOADED_BYTES
    assert offload_resident_bytes(spec, OFF, SHAPE, recompute="none") == OFFLOAD_RESIDENT_LAYERS * moved


def test_stage_memory_drops_the_in_flight_copies_and_the_time_pays_the_host_link():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    layout = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1)
    base, off = (stage_memory(spec, cluster, w, layout)[0].activations_bytes for w in (Workload(seq_length=4096), OFF))
    assert off < base
    t_base = layer_time(spec, cluster, Workload(seq_length=4096), SHAPE, ep=8, moe=True, recompute="none")
    t_off = layer_time(spec, cluster, OFF, SHAPE, ep=8, moe=True, recompute="none")
    assert t_base.offload == 0 and t_off.offload > 0 and t_off.compute == t_base.compute


def test_megatrons_rules():
    with pytest.raises(MegasolveError, match="attn_proj cannot be offloaded without core_attn"):
        Workload(offload_modules=("attn_proj",))
    with pytest.raises(MegasolveError, match="fused_group_mlp"):
        Workload(offload_modules=("fused_group_mlp",))
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    ctx = RuleContext(spec=spec, cluster=cluster, workload=OFF)
    names = {v.rule for v in violations(ctx, Layout(tp=1, pp=1, dp=8, ep=8, etp=1, cpu_offload_layers=4))}
    assert "fine_grained_offload_without_cpu_offload" in names
    moe_rc = Layout(tp=1, pp=1, dp=8, ep=8, etp=1, recompute="selective", recompute_modules=("moe",))
    assert "fine_grained_offload_not_inside_moe_recompute" in {v.rule for v in violations(ctx, moe_rc)}


def test_cpsat_equals_the_oracle_with_offloading():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    workload = dataclasses.replace(OFF, global_batch_size=64)
    fast = solve(spec, cluster, workload, top_k=5, fixed={"mbs": 1}, engine="cpsat", explain=False)
    oracle = solve(spec, cluster, workload, top_k=5, fixed={"mbs": 1}, engine="exhaustive", explain=False)
    assert fast.status == oracle.status == "optimal"
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    assert all(r.layout.cpu_offload_layers == 0 for r in fast.layouts)


LAUNCH = """torchrun pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 \\
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --vocab-size 32000 --bf16 --swiglu \\
  --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 --fine-grained-activation-offloading \\
  --offload-modules {modules} {extra}
{memory}
"""
MEMORY = ("[Rank 7] (after 10 iterations) memory (MB) | allocated: 900.0 | max allocated: 1000.0 | reserved: 1200.0 | "
          "max reserved: 1200.0")


def test_the_reader_takes_the_modules_and_names_what_it_does_not_model():
    run = run_from_log(LAUNCH.format(modules="core_attn attn_proj expert_fc1", extra="", memory=MEMORY),
                       defaults={"gpu": "h100", "num_gpus": 8})
    assert run.workload.offload_modules == ("core_attn", "attn_proj", "expert_fc1")
    run = run_from_log(LAUNCH.format(modules="fused_group_mlp", extra="--activation-offload-fraction 0.5", memory=MEMORY),
                       defaults={"gpu": "h100", "num_gpus": 8})
    assert run.workload.offload_modules == ()
    assert any("fused_group_mlp is not modelled" in n for n in run.notes)
    assert any("--activation-offload-fraction 0.5" in n for n in run.notes)


def test_the_export_launches_it():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    flags = megatron_flags(spec, cluster, OFF, Layout(tp=1, pp=1, dp=8, ep=8, etp=1, mbs=1))
    assert "--fine-grained-activation-offloading" in flags
    assert "--offload-modules core_attn attn_proj expert_fc1 moe_act" in flags
