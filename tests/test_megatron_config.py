"""Layouts returned by ``solve`` pass Megatron-Core's own config validation.

Megatron-Core needs torch, which CI does not install; this test runs when the environment variable
``MEGASOLVE_MCORE_PYTHON`` names a Python interpreter that has ``torch`` and ``megatron-core``
(e.g. torch 2.13 CPU + megatron-core 0.19.2) and is skipped otherwise. It writes the solver's
layouts with their models in Megatron argument names, and ``benchmarks/megatron_config_check.py``
constructs ``TransformerConfig`` / ``MLATransformerConfig`` for each under that interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from megasolve.models import Workload, load_preset
from megasolve.models.spec import ModelSpec
from megasolve.solver.solve import solve
from megasolve.topology import Cluster

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = [("llama-3.1-8b", 16, "h100", 8192, 64), ("qwen3-30b-a3b", 16, "h100", 4096, 256),
             ("moonlight-16b-a3b", 64, "a100-80g", 4096, 1024), ("deepseek-v3-proxy", 64, "h100", 4096, 512),
             ("llama-3.1-70b", 128, "h100", 8192, 256)]


def megatron_args(spec: ModelSpec) -> dict:
    args = {"num_layers": spec.num_layers, "hidden_size": spec.hidden_size, "ffn_hidden_size": spec.ffn_hidden_size,
            "num_attention_heads": spec.num_attention_heads, "num_query_groups": spec.num_query_groups,
            "kv_channels": spec.kv_channels, "swiglu": spec.swiglu, "normalization": spec.normalization,
            "add_bias_linear": spec.add_bias_linear, "add_qkv_bias": spec.add_qkv_bias,
            "qk_layernorm": spec.qk_layernorm, "mtp_num_layers": spec.mtp_num_layers}
    if spec.is_moe:
        args.update(num_moe_experts=spec.moe.num_experts, moe_router_topk=spec.moe.top_k,
                    moe_ffn_hidden_size=spec.moe.expert_ffn_hidden_size,
                    moe_shared_expert_intermediate_size=spec.moe.shared_expert_ffn_hidden_size,
                    moe_layer_freq=list(spec.moe.layer_pattern))
    if spec.mla is not None:
        args.update(multi_latent_attention=True, q_lora_rank=spec.mla.q_lora_rank, kv_lora_rank=spec.mla.kv_lora_rank,
                    qk_head_dim=spec.mla.qk_head_dim, qk_pos_emb_head_dim=spec.mla.qk_pos_emb_head_dim,
                    v_head_dim=spec.mla.v_head_dim)
    return args


@pytest.mark.skipif(not os.environ.get("MEGASOLVE_MCORE_PYTHON"),
                    reason="set MEGASOLVE_MCORE_PYTHON to a Python with torch + megatron-core")
def test_solver_layouts_pass_megatron_core_validation(tmp_path):
    cases = []
    for model, gpus, gpu, seq, gbs in INSTANCES:
        spec = load_preset(model)
        result = solve(spec, Cluster.from_flags(num_gpus=gpus, gpu=gpu), Workload(seq_length=seq, global_batch_size=gbs),
                       top_k=5)
        for rank, report in enumerate(result.layouts, start=1):
            cases.append({"name": f"{model}@{gpus}#{rank}", "model": megatron_args(spec),
                          "layout": report.layout_dict()})
    path = tmp_path / "layouts.json"
    path.write_text(json.dumps({"cases": cases}))
    proc = subprocess.run([os.environ["MEGASOLVE_MCORE_PYTHON"], str(ROOT / "benchmarks" / "megatron_config_check.py"),
                           str(path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(cases)} passed, 0 failed" in proc.stdout
