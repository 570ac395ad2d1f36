"""``--activation-func-fp8-input-store`` (``Workload.activation_func_fp8_input_store``): the fused SwiGLU kernels keep
their input, the fc1 output, in FP8 for backward. The bytes are traced on Megatron-Core layers
(``tests/test_activation_golden.py``, cases ``*-fp8-input-store``); here: the other terms do not move, the rule
Megatron enforces, the readers and the exports (Megatron-LM has no flag for it)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

from click.testing import CliRunner

from megasolve.cli.launch import megatron_flags
from megasolve.cli.main import cli
from megasolve.cost.memory import ActivationShape, mlp_activation_terms
from megasolve.models import Layout, Workload, load_preset
from megasolve.solver.runs import run_from_log
from megasolve.topology import Cluster

SHAPE = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True, etp=1)
STORE = Workload(seq_length=4096, activation_func_fp8_input_store=True)


def test_only_the_fc1_outputs_halve_dense_routed_and_shared():
    spec = load_preset("deepseek-v3")  # routed and shared SwiGLU experts
    for moe in (False, True):
        base = mlp_activation_terms(spec, Workload(seq_length=4096), SHAPE, moe)
        stored = mlp_activation_terms(spec, STORE, SHAPE, moe)
        halved = {"fc1_output"} if not moe else {"expert_fc1_output", "shared_fc1_output"}
        for term, value in base.items():
            assert stored[term] == (value / 2 if term in halved else value), term
        assert all(base[t] > 0 for t in halved)


def test_no_effect_without_the_fused_kernel():
    spec = load_preset("llama-3.1-8b")
    unfused = Workload(seq_length=4096, activation_fusion=False)
    assert mlp_activation_terms(spec, dataclasses.replace(unfused, activation_func_fp8_input_store=True), SHAPE,
                                False) == mlp_activation_terms(spec, unfused, SHAPE, False)


def test_estimate_costs_it_and_a_model_without_swiglu_is_refused():
    runner = CliRunner()
    base = ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--tp", "2", "--format", "json"]
    off = json.loads(runner.invoke(cli, base).output)
    on = json.loads(runner.invoke(cli, base + ["--activation-func-fp8-input-store"]).output)
    assert on["workload"]["activation_func_fp8_input_store"] is True
    assert off["workload"]["activation_func_fp8_input_store"] is False
    # 32 layers x fc1 output 2 x 14336 / 2 (TP) x 4096 tokens, one byte each saved per layer: 1.88 GB at 1F1B depth 1
    saved = (off["memory"]["peak_gb"] - on["memory"]["peak_gb"]) * 1e9
    assert abs(saved - 32 * 2 * 14336 / 2 * 4096) < 0.01e9
    assert on["time"]["step_s"] == off["time"]["step_s"]
    refused = subprocess.run([sys.executable, "-c", "from megasolve.cli.main import main; main()", "estimate", "-m",
                              "gpt3-175b", "-n", "64", "-g", "h100", "--tp", "8", "--pp", "8",
                              "--activation-func-fp8-input-store"], capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--activation-func-fp8-input-store" in refused.stderr and "only for SwiGLU" in refused.stderr


def test_exports_set_it_where_the_target_has_a_key():
    runner = CliRunner()
    args = ["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--tp", "2", "--activation-func-fp8-input-store"]
    megatron = runner.invoke(cli, args + ["--format", "megatron"]).output
    assert "# not expressible in megatron: activation_func_fp8_input_store=True" in megatron
    assert "--activation-func-fp8-input-store" not in megatron.split("pretrain_gpt.py", 1)[1]
    assert "model.activation_func_fp8_input_store=true" in runner.invoke(cli, args + ["--format", "bridge"]).output
    assert "model.config.activation_func_fp8_input_store=True" in runner.invoke(cli, args + ["--format", "nemo"]).output
    cluster = Cluster.from_flags(num_gpus=8, gpu="h100")
    layout = Layout(tp=2, dp=4, sequence_parallel=True)
    assert not any("fp8-input" in f for f in megatron_flags(load_preset("llama-3.1-8b"), cluster, STORE, layout))


BRIDGE_CONFIG = """Megatron-Bridge config:
model:
  num_layers: 4
  hidden_size: 512
  ffn_hidden_size: 1376
  num_attention_heads: 8
  vocab_size: 32000
  seq_length: 1024
  gated_linear_unit: true
  bias_activation_fusion: {fusion}
  activation_func_fp8_input_store: true
  tensor_model_parallel_size: 2
  sequence_parallel: true
train:
  micro_batch_size: 2
  global_batch_size: 16
"""


def test_a_printed_config_is_read_with_it():
    run = run_from_log(BRIDGE_CONFIG.format(fusion="true"), defaults={"gpu": "h100", "num_gpus": 8, "step_time_s": 1.0})
    assert run.workload.activation_func_fp8_input_store is True
    unfused = run_from_log(BRIDGE_CONFIG.format(fusion="false"), defaults={"gpu": "h100", "num_gpus": 8, "step_time_s": 1.0})
    assert unfused.workload.activation_fusion is False
    assert unfused.workload.activation_func_fp8_input_store is False
    assert any("no effect without the fused activation kernel" in note for note in unfused.notes)
