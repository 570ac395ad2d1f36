"""``--use-precision-aware-optimizer`` with ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` / ``--main-params-dtype``
(``Workload.precision_aware_optimizer``, ``memory.adam_state_bytes_per_param``): Transformer Engine's FusedAdam holds
Adam's moments in those dtypes and, without FP8 or with delayed scaling, the master weights as 16-bit remainders."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from megasolve.cost.estimate import estimate
from megasolve.cost.memory import adam_state_bytes_per_param
from megasolve.models import Layout, MegasolveError, Workload, load_preset
from megasolve.solver.api import estimate as checked_estimate
from megasolve.solver.solve import solve
from megasolve.topology import Cluster

AWARE = dict(precision_aware_optimizer=True)


@pytest.mark.parametrize("fields, expected", [
    ({}, 12),                                                                   # fp32 master, m, v
    (AWARE, 2 + 4 + 4),                                                         # master as bf16 + 16-bit remainder
    (dict(AWARE, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"), 2 + 2 + 2),    # the DeepSeek perf recipes' setting
    (dict(AWARE, exp_avg_dtype="fp8", exp_avg_sq_dtype="fp16"), 2 + 1 + 2),
    (dict(AWARE, main_params_dtype="fp16"), 2 + 4 + 4),
    (dict(AWARE, precision="fp8", fp8_recipe="delayed"), 2 + 4 + 4),           # TE's kernel casts delayed FP8
    (dict(AWARE, precision="fp8", fp8_recipe="mxfp8"), 4 + 4 + 4),             # Megatron-Core's fp32 main params
    (dict(AWARE, precision="fp8", fp8_recipe="mxfp8", main_params_dtype="fp16"), 2 + 4 + 4),
])
def test_state_bytes_per_parameter(fields, expected):
    assert adam_state_bytes_per_param(Workload(**fields)) == expected


def test_only_the_optimizer_state_moves():
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=16, gpu="h100")
    layout = Layout(tp=1, pp=1, dp=16, ep=16, etp=1, mbs=1)
    base = estimate(spec, cluster, Workload(), layout).memory[0]
    low = estimate(spec, cluster, Workload(**AWARE, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"), layout).memory[0]
    assert low.optimizer_bytes == pytest.approx(base.optimizer_bytes / 2, rel=1e-9)
    assert (low.weights_bytes, low.grads_bytes, low.activations_bytes) == \
        (base.weights_bytes, base.grads_bytes, base.activations_bytes)


def test_the_solver_finds_what_only_the_smaller_state_fits():
    """Pinned to one layout that needs 85.7 GB of an H100's 85.5 with fp32 state and 62.8 GB with bf16 moments: the
    solver's tables must say so as ``estimate`` does."""
    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    fixed = dict(tp=1, pp=1, cp=1, ep=8, etp=1, mbs=1, recompute="full", fsdp=False, optimizer_offload_fraction=0.0,
                 cpu_offload_layers=0, distributed_optimizer=True)
    assert not solve(spec, cluster, Workload(), top_k=1, fixed=fixed, explain=False).layouts
    low = Workload(**AWARE, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")
    plans = solve(spec, cluster, low, top_k=1, fixed=fixed, explain=False).layouts
    assert plans and plans[0].workload.precision_aware_optimizer
    again = estimate(spec, cluster, plans[0].workload, plans[0].layout)
    assert max(s.total_bytes for s in again.memory) == pytest.approx(max(s.total_bytes for s in plans[0].estimate.memory))


def test_megatrons_rules():
    with pytest.raises(MegasolveError, match="--exp-avg-dtype"):
        Workload(exp_avg_dtype="bf16")  # a dtype of the precision-aware optimizer only
    with pytest.raises(MegasolveError, match="only supported with adam"):
        Workload(**AWARE, optimizer="muon")
    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    with pytest.raises(MegasolveError, match="only supported with distributed optimizer"):
        checked_estimate(spec, cluster, Workload(**AWARE), Layout(tp=1, dp=8, distributed_optimizer=False))
    fsdp = dataclasses.replace(Layout(tp=1, dp=8), fsdp=True)
    with pytest.raises(MegasolveError, match="not model the precision-aware optimizer under Megatron-FSDP"):
        checked_estimate(spec, cluster, Workload(**AWARE), fsdp)


def test_exports():
    args = [sys.executable, "-c", "from megasolve.cli.main import main; main()", "estimate", "-m", "llama-3.1-8b",
            "-n", "8", "-g", "h100", "--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16",
            "--exp-avg-sq-dtype", "bf16", "--format"]
    megatron = subprocess.run(args + ["megatron"], capture_output=True, text=True, check=True).stdout
    assert "--use-precision-aware-optimizer" in megatron and "--exp-avg-dtype bf16" in megatron
    assert "--main-params-dtype" not in megatron  # fp32, Megatron-LM's default
    bridge = subprocess.run(args + ["bridge"], capture_output=True, text=True, check=True).stdout
    assert "optimizer.use_precision_aware_optimizer=true" in bridge and "optimizer.exp_avg_sq_dtype=bf16" in bridge
    nemo = subprocess.run(args + ["nemo"], capture_output=True, text=True, check=True).stdout
    assert "optim.config.use_precision_aware_optimizer=True" in nemo
    assert "# not expressible in nemo: exp_avg_dtype=bf16" in nemo
