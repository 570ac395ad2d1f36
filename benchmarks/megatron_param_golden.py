#!/usr/bin/env python3
"""Golden per-rank parameter counts from the real Megatron-Core library.

What it does
------------
For every case in ``CASES`` (a model architecture + a parallel layout) this
script builds Megatron-Core's ``GPTModel`` on the ``meta`` device (no memory is
allocated, so real widths are fine) once for every distinct
(pp_rank, tp_rank, ep_rank, etp_rank) coordinate of the layout, exactly the way
Megatron-LM's ``gpt_builders.py`` / ``training.get_model`` build it (one model
chunk per virtual pipeline stage, ``pre_process`` / ``post_process`` from
``parallel_state``), and records the number of parameters each rank holds:
``sum(p.numel() for p in chunk.parameters())`` summed over the rank's chunks
(shared tensors are counted once, as ``Module.parameters()`` does).  The
results are written to ``tests/data/megatron_param_golden.json`` so that
megasolve's own parameter formulas can be tested against them without
Megatron-Core or torch being installed.

One process plays every rank: torch's "fake" process group
(``torch.testing._internal.distributed.fake_pg``) is initialised as rank r of
world W, ``parallel_state.initialize_model_parallel`` builds the real group
layout, the model is built, everything is torn down, next rank.

How to run (CPU only; all 52 cases take ~15 s wall on 2 cores, ~0.5 GB RAM)
----------------------------------------------------------------------------
Use a throw-away virtual environment outside the repository::

    python3.11 -m venv VENV
    VENV/bin/pip install torch==2.13.0            # the CPU build (+cpu wheel)
    VENV/bin/pip install "numpy<2.5" "packaging>=24.2"
    # megatron-core >= 0.17 declares Requires-Python >= 3.12, but the cp311
    # wheel imports and runs fine on 3.11 (checked: every module byte-compiles):
    VENV/bin/pip install --no-deps --ignore-requires-python megatron-core==0.19.2
    VENV/bin/pip install --no-deps triton==3.9.0   # optional (285 MB), see below
    VENV/bin/python benchmarks/megatron_param_golden.py            # writes the JSON
    VENV/bin/python benchmarks/megatron_param_golden.py --only mixtral --out /dev/stdout

(On Python >= 3.12 a plain ``pip install megatron-core==0.19.2`` works, but make
sure pip does not replace the CPU torch by a CUDA one.)  megatron-core 0.19
imports ``triton`` unconditionally in ``transformer/moe/ops/paged_stash.py``;
if triton is not installed the script registers a stand-in for that one module
(its kernels are never called while building a model).  Counts are identical
either way.

Versions used for the committed JSON: megatron-core 0.19.2, torch 2.13.0+cpu,
Python 3.11.  The attention-variant cases (``--only "window|sinks" --merge``: sliding
windows, ``window_attn_skip_freq`` patterns, learnable-softmax sinks) were added with
megatron-core 0.16.1 / torch 2.14 (each such case records its ``megatron_core_version``;
the files they touch, ``dot_product_attention.py`` L93-138 and ``transformer/utils.py``
``is_layer_window_attention``, are unchanged in 0.19).  ``--merge`` replaces or appends
only the selected cases.  ``--only REGEX`` restricts to matching case names, ``--list``
prints the case names.

CPU shims (all in ``install_cpu_shims``)
----------------------------------------
* ``use_cpu_initialization=True, perform_initialization=False`` and building
  under ``with torch.device("meta")``: parallel linears/embeddings then call
  ``torch.empty(...)`` without a device, which lands on ``meta``; no RNG, no
  CUDA, no real allocation.  ``init_model_with_meta_device=True`` skips the
  embedding all-reduce between first and last stage.
* ``torch.cuda.current_device`` -> ``torch.device("meta")`` (MLA's RoPE buffer
  is created with ``device=torch.cuda.current_device()``), ``torch.cuda.Stream``
  / ``torch.cuda.stream`` / ``torch.cuda.Event`` -> inert stand-ins (MoE dispatchers create streams
  while being built; nothing is ever launched).
* ``sequence_parallel=False`` (the torch-norm fallback refuses SP); SP does not
  change any parameter count.

Spec fidelity: local spec vs Transformer Engine spec
----------------------------------------------------
Real training uses the Transformer Engine (TE) spec; TE cannot be imported
without CUDA, so models are built with the local (``transformer_impl="local"``)
spec, patched where it would allocate a different number of parameters than the
TE spec.  Findings (line numbers for megatron-core 0.19.2):

* MLA down projections: the TE spec uses ``backend.linear()`` = ``TELinear``
  (``models/gpt/gpt_layer_specs.py`` L302, L304) which ``MLASelfAttention``
  builds with ``parallel_mode='duplicated'`` (``transformer/multi_latent_attention.py``
  L525-526, L572-573): ``linear_q_down_proj`` (h x q_lora_rank) and
  ``linear_kv_down_proj`` (h x (kv_lora_rank + qk_pos_emb_head_dim)) are
  REPLICATED on every TP rank.  The local spec uses ``ColumnParallelLinear``
  (gpt_layer_specs.py L422, L424), i.e. splits them over TP -> the local spec
  under-counts by (1 - 1/tp) * h * (q_lora + kv_lora + rope) per MLA layer.
  PATCHED: the MLA layer spec is rebuilt with a replicated linear
  (``post_training/modelopt/layers.py::Linear`` with ``parallel_mode='duplicated'``,
  the same class MLA accepts when TE is present) for both down projections.
* MLA q/kv norms with ``qk_layernorm``: TE fuses them into ``linear_q_up_proj`` /
  ``linear_kv_up_proj`` (``TELayerNormColumnParallelLinear``, layer_norm_weight
  of size q_lora_rank / kv_lora_rank, replicated), the local spec builds separate
  norm modules of the same sizes (gpt_layer_specs.py L428-429): same count.
  (The local MLA spec also cannot be built with the local ``DotProductAttention``,
  which rejects MLA's k_channels/v_channels; a parameter-free stand-in is used,
  core attention owns no parameters in either spec.)
* MLA with ``q_lora_rank=None`` and ``qk_layernorm=True`` (DeepSeek-V2-Lite /
  Moonlight, as in Megatron-LM's DeepSeek-V2-Lite example which passes
  ``--qk-layernorm``): since core_v0.19.0 (commit 4464d1c197 "Port Multi-Latent
  Attention to HybridModel") ``transformer/mla_qk_norm_config.py``
  ``QKNormConfigResolver._resolve_mla_qk_layernorm`` (L147-150) turns
  ``linear_q_proj`` into the backend's fused norm+linear, so with TE
  ``linear_q_proj`` is a ``TELayerNormColumnParallelLinear`` that carries an
  extra replicated norm over the hidden size: +h params (+2h for LayerNorm) per
  MLA layer, which 0.16-0.18 do not have.  The local spec cannot build this
  configuration at all (its explicit ``q_layernorm`` trips
  ``_reject_common_spec_conflicts`` -> ``_raise_unused_q_norm``, L172-173 / L250;
  the local backend has no fused norm+linear, ``models/backends.py``
  ``LocalSpecProvider.column_parallel_layer_norm_linear`` returns None).
  PATCHED: the MLA spec is laid out like the TE spec (norms fused into the
  projections) and the resolver is given a local "norm + ColumnParallelLinear"
  module as the backend's fused class, so the counts equal TE's.  This +h is
  derived from reading the source; TE itself was not run (needs CUDA).
* Dense / GQA attention and dense MLP: TE fuses input_layernorm into
  ``linear_qkv`` (gpt_layer_specs.py L324) and pre_mlp_layernorm into ``linear_fc1``
  (L542-543) (``layer_norm_weight`` [+ ``layer_norm_bias``] of size h, replicated); the
  local spec has separate ``WrappedTorchNorm`` modules of the same size: same
  count.  qk_layernorm (q/k norms of size kv_channels): TENorm vs torch norm,
  same count.  MoE layers use a separate pre-MLP norm in both specs.
* Routed experts: TE uses ``TEGroupedMLP`` (per local expert fc1 h x f_glu*F_m/etp,
  fc2 F_m/etp x h), the local spec ``SequentialMLP`` of ``MLP``s with the same
  shapes: same count.  Router, shared experts, embeddings, output layer, MTP
  (enorm/hnorm/eh_proj/final norm) use the same classes/sizes in both.

The JSON ``spec`` field is ``"local+te_param_fidelity_patches"``; ``notes``
repeats the above in short.  ``--no-te-patches`` builds the plain local spec
(diagnostics only): it differs from the committed numbers by exactly
(1 - 1/tp) * h * (q_lora + kv_lora + rope) per MLA layer, and the
q_lora_rank=None + qk_layernorm cases fail to build, as described above.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import math
import os
import re
import sys
import time
import types
import warnings

# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

# Every "model" dict uses Megatron-LM / TransformerConfig argument names.
MODEL_DEFAULTS = dict(
    num_layers=None,
    hidden_size=None,
    ffn_hidden_size=None,
    num_attention_heads=None,
    num_query_groups=None,  # = num_attention_heads for MHA
    kv_channels=None,  # None -> hidden_size // num_attention_heads
    swiglu=True,
    normalization="RMSNorm",
    add_bias_linear=False,
    add_qkv_bias=False,
    qk_layernorm=False,
    untie_embeddings_and_output_weights=True,
    vocab_size=None,  # UNPADDED
    make_vocab_size_divisible_by=128,
    position_embedding_type="rope",
    max_position_embeddings=4096,
    num_moe_experts=None,
    moe_router_topk=2,
    moe_ffn_hidden_size=None,
    moe_shared_expert_intermediate_size=None,
    moe_layer_freq=None,  # list of 0/1, length num_layers (MoE models only)
    multi_latent_attention=False,
    q_lora_rank=None,
    kv_lora_rank=None,
    qk_head_dim=None,
    qk_pos_emb_head_dim=None,
    v_head_dim=None,
    mtp_num_layers=None,
    # attention variants (issue 15): no parameters except softmax_type="learnable" (sinks)
    window_size=None,  # [left, 0]
    window_attn_skip_freq=None,  # int N or a 0/1 list (1 = windowed)
    softmax_type="vanilla",
)

LLAMA31_8B = dict(
    hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
    kv_channels=128, vocab_size=128256, max_position_embeddings=131072,
)
QWEN25_7B = dict(
    hidden_size=3584, ffn_hidden_size=18944, num_attention_heads=28, num_query_groups=4,
    kv_channels=128, vocab_size=152064, max_position_embeddings=131072, add_qkv_bias=True,
)
QWEN25_72B = dict(
    hidden_size=8192, ffn_hidden_size=29568, num_attention_heads=64, num_query_groups=8,
    kv_channels=128, vocab_size=152064, max_position_embeddings=131072, add_qkv_bias=True,
)
QWEN3_8B = dict(
    hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32, num_query_groups=8,
    kv_channels=128, vocab_size=151936, max_position_embeddings=40960, qk_layernorm=True,
)
QWEN3_32B = dict(  # kv_channels*heads (8192) != hidden (5120)
    hidden_size=5120, ffn_hidden_size=25600, num_attention_heads=64, num_query_groups=8,
    kv_channels=128, vocab_size=151936, max_position_embeddings=40960, qk_layernorm=True,
)
GPT3_175B = dict(  # GPT-3 style: LayerNorm, GeLU (not gated), biases, learned pos-emb, tied
    hidden_size=12288, ffn_hidden_size=49152, num_attention_heads=96, num_query_groups=96,
    kv_channels=128, vocab_size=50257, max_position_embeddings=2048, swiglu=False,
    normalization="LayerNorm", add_bias_linear=True, position_embedding_type="learned_absolute",
    untie_embeddings_and_output_weights=False,
)
MIXTRAL_8X7B = dict(
    hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
    kv_channels=128, vocab_size=32000, max_position_embeddings=32768, num_moe_experts=8,
    moe_router_topk=2, moe_ffn_hidden_size=14336,
)
QWEN3_30B_A3B = dict(
    hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
    kv_channels=128, vocab_size=151936, max_position_embeddings=40960, qk_layernorm=True,
    num_moe_experts=128, moe_router_topk=8, moe_ffn_hidden_size=768,
)
MOONLIGHT_16B = dict(  # DeepSeek-V3 architecture at DeepSeek-V2-Lite width, q_lora None
    hidden_size=2048, ffn_hidden_size=11264, num_attention_heads=16, num_query_groups=16,
    kv_channels=128, vocab_size=163840, max_position_embeddings=8192, qk_layernorm=True,
    num_moe_experts=64, moe_router_topk=6, moe_ffn_hidden_size=1408,
    moe_shared_expert_intermediate_size=2816, multi_latent_attention=True, q_lora_rank=None,
    kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
)
DEEPSEEK_V2_LITE = dict(MOONLIGHT_16B, ffn_hidden_size=10944, vocab_size=102400,
                        max_position_embeddings=163840)
GPT_OSS_20B = dict(  # openai/gpt-oss-20b: biased attention and experts, sinks, 128-token window every other layer
    hidden_size=2880, ffn_hidden_size=2880, num_attention_heads=64, num_query_groups=8, kv_channels=64,
    vocab_size=201088, max_position_embeddings=131072, add_bias_linear=True, add_qkv_bias=True,
    num_moe_experts=32, moe_router_topk=4, moe_ffn_hidden_size=2880, window_size=[128, 0],
    window_attn_skip_freq=2, softmax_type="learnable",
)
MISTRAL_7B_V01 = dict(LLAMA31_8B, vocab_size=32000, max_position_embeddings=32768, window_size=[4096, 0])
GEMMA3_27B = dict(  # google/gemma-3-27b text tower: 1024 window on 5 of every 6 layers, tied embeddings
    hidden_size=5376, ffn_hidden_size=21504, num_attention_heads=32, num_query_groups=16, kv_channels=128,
    vocab_size=262208, max_position_embeddings=131072, qk_layernorm=True, untie_embeddings_and_output_weights=False,
    window_size=[1024, 0], window_attn_skip_freq=[1, 1, 1, 1, 1, 0],
)
DEEPSEEK_V3 = dict(
    hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, num_query_groups=128,
    kv_channels=128, vocab_size=129280, max_position_embeddings=163840, qk_layernorm=True,
    num_moe_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
    moe_shared_expert_intermediate_size=2048, multi_latent_attention=True, q_lora_rank=1536,
    kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
)
NEMOTRON4_15B = dict(  # arXiv:2402.16819 Table 1; LayerNorm, squared ReLU (not gated: GeLU's parameters), no bias
    hidden_size=6144, ffn_hidden_size=24576, num_attention_heads=48, num_query_groups=8, kv_channels=128,
    vocab_size=256000, max_position_embeddings=4096, swiglu=False, normalization="LayerNorm",
)
GLM47_FLASH = dict(  # zai-org/GLM-4.7-Flash: MLA (q_lora 768, qk 192 + 64, v 256) + MoE (64 top-4, one shared)
    hidden_size=2048, ffn_hidden_size=10240, num_attention_heads=20, num_query_groups=20,
    vocab_size=154880, max_position_embeddings=202752, qk_layernorm=True, num_moe_experts=64, moe_router_topk=4,
    moe_ffn_hidden_size=1536, moe_shared_expert_intermediate_size=1536, multi_latent_attention=True, q_lora_rank=768,
    kv_lora_rank=512, qk_head_dim=192, qk_pos_emb_head_dim=64, v_head_dim=256,
)
OLMOE_1B_7B = dict(  # allenai/OLMoE-1B-7B-0924 with Megatron-Core's per-head QK-norm (the HF model's spans all heads)
    hidden_size=2048, ffn_hidden_size=1024, num_attention_heads=16, num_query_groups=16, kv_channels=128,
    vocab_size=50304, max_position_embeddings=4096, qk_layernorm=True, num_moe_experts=64, moe_router_topk=8,
    moe_ffn_hidden_size=1024,
)
MIMO_7B = dict(  # XiaomiMiMo/MiMo-7B (slime scripts/models/mimo-7B-rl.sh @624b824): Qwen2's layer (q / k / v biases)
    hidden_size=4096, ffn_hidden_size=11008, num_attention_heads=32, num_query_groups=8, kv_channels=128,
    vocab_size=151680, max_position_embeddings=32768, add_qkv_bias=True,
)

SARVAM_MOE = dict(  # Megatron-Bridge models/sarvam/sarvam_provider.py SarvamMoEModelProvider @067f987 (sarvam-30b)
    hidden_size=4096, ffn_hidden_size=8192, num_attention_heads=64, num_query_groups=4, kv_channels=64,
    vocab_size=262144, max_position_embeddings=131072, qk_layernorm=True, num_moe_experts=128, moe_router_topk=6,
    moe_ffn_hidden_size=1024, moe_shared_expert_intermediate_size=1024,
)
SARVAM_MLA = dict(  # SarvamMLAModelProvider @067f987 (sarvam-105b): MLA without q-LoRA + MoE, one shared expert
    hidden_size=4096, ffn_hidden_size=16384, num_attention_heads=64, num_query_groups=64, vocab_size=262144,
    max_position_embeddings=131072, qk_layernorm=True, num_moe_experts=128, moe_router_topk=8, moe_ffn_hidden_size=2048,
    moe_shared_expert_intermediate_size=2048, multi_latent_attention=True, q_lora_rank=None, kv_lora_rank=512,
    qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
)


def _case(name, base, layout, **model_overrides):
    model = dict(MODEL_DEFAULTS)
    model.update(base)
    model.update(model_overrides)
    lay = dict(tp=1, pp=1, vpp=1, ep=1, etp=1, first_stage_layers=None, last_stage_layers=None)
    lay.update(layout)
    return dict(name=name, model=model, layout=lay)


def _moe(n_dense, n_moe):
    return [0] * n_dense + [1] * n_moe


CASES = [
    # ---- dense GQA, Llama-3.1-8B width -------------------------------------------------
    _case("llama3.1-8b-full32-tp1-pp1", LLAMA31_8B, dict(), num_layers=32),
    _case("llama3.1-8b-L4-tp1-pp1", LLAMA31_8B, dict(), num_layers=4),
    _case("llama3.1-8b-L4-tp2-pp1", LLAMA31_8B, dict(tp=2), num_layers=4),
    _case("llama3.1-8b-L4-tp4-pp1", LLAMA31_8B, dict(tp=4), num_layers=4),
    _case("llama3.1-8b-L4-tp8-pp1", LLAMA31_8B, dict(tp=8), num_layers=4),
    _case("llama3.1-8b-L4-tp2-pp2", LLAMA31_8B, dict(tp=2, pp=2), num_layers=4),
    _case("llama3.1-8b-L8-tp1-pp4", LLAMA31_8B, dict(pp=4), num_layers=8),
    _case("llama3.1-8b-L8-tp8-pp4", LLAMA31_8B, dict(tp=8, pp=4), num_layers=8),
    _case("llama3.1-8b-L8-tp2-pp4-first1-last1", LLAMA31_8B,
          dict(tp=2, pp=4, first_stage_layers=1, last_stage_layers=1), num_layers=8),
    _case("llama3.1-8b-L9-tp1-pp4-first3", LLAMA31_8B,
          dict(pp=4, first_stage_layers=3), num_layers=9),
    _case("llama3.1-8b-L7-tp4-pp3-last1", LLAMA31_8B,
          dict(tp=4, pp=3, last_stage_layers=1), num_layers=7),
    _case("llama3.1-8b-L8-tp2-pp2-vpp2", LLAMA31_8B, dict(tp=2, pp=2, vpp=2), num_layers=8),
    _case("llama3.1-8b-L8-tp1-pp4-vpp2", LLAMA31_8B, dict(pp=4, vpp=2), num_layers=8),
    # GQA with num_query_groups (8) < TP (16): allowed since core_v0.16 (divisor of TP)
    _case("llama3.1-8b-L2-tp16-pp1-g8", LLAMA31_8B, dict(tp=16), num_layers=2),
    # ---- Qwen2.5-7B width: qkv bias, g=4 -------------------------------------------------
    _case("qwen2.5-7b-L2-tp1-pp1", QWEN25_7B, dict(), num_layers=2),
    _case("qwen2.5-7b-L4-tp2-pp2", QWEN25_7B, dict(tp=2, pp=2), num_layers=4),
    _case("qwen2.5-7b-L2-tp4-pp1", QWEN25_7B, dict(tp=4), num_layers=2),
    # qkv bias with num_query_groups (8) < TP (16), Qwen2.5-72B width
    _case("qwen2.5-72b-L2-tp16-pp1-g8", QWEN25_72B, dict(tp=16), num_layers=2),
    # ---- Qwen3 dense: qk_layernorm, explicit kv_channels --------------------------------
    _case("qwen3-8b-L2-tp1-pp1", QWEN3_8B, dict(), num_layers=2),
    _case("qwen3-8b-L4-tp2-pp2", QWEN3_8B, dict(tp=2, pp=2), num_layers=4),
    _case("qwen3-32b-L2-tp4-pp1", QWEN3_32B, dict(tp=4), num_layers=2),
    # ---- GPT-3 style, tied embeddings, learned absolute positions -----------------------
    _case("gpt3-175b-L2-tp1-pp1-tied", GPT3_175B, dict(), num_layers=2),
    _case("gpt3-175b-L4-tp2-pp2-tied", GPT3_175B, dict(tp=2, pp=2), num_layers=4),
    _case("gpt3-175b-L8-tp8-pp4-tied", GPT3_175B, dict(tp=8, pp=4), num_layers=8),
    _case("gpt3-175b-L8-tp4-pp2-vpp2-tied", GPT3_175B, dict(tp=4, pp=2, vpp=2), num_layers=8),
    _case("gpt3-175b-L4-tp2-pp2-untied", GPT3_175B, dict(tp=2, pp=2), num_layers=4,
          untie_embeddings_and_output_weights=True),
    # ---- Mixtral-like MoE (8 experts, top-2, no shared) ---------------------------------
    _case("mixtral-8x7b-L2-tp1-ep1", MIXTRAL_8X7B, dict(), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp1-ep2", MIXTRAL_8X7B, dict(ep=2), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp1-ep4", MIXTRAL_8X7B, dict(ep=4), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp1-ep8", MIXTRAL_8X7B, dict(ep=8), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp2-ep1-etp2", MIXTRAL_8X7B, dict(tp=2, etp=2), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp2-ep4-etp1", MIXTRAL_8X7B, dict(tp=2, ep=4, etp=1), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp2-ep4-etp2", MIXTRAL_8X7B, dict(tp=2, ep=4, etp=2), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp1-ep2-etp2", MIXTRAL_8X7B, dict(tp=1, ep=2, etp=2), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L2-tp2-ep8-etp2", MIXTRAL_8X7B, dict(tp=2, ep=8, etp=2), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("mixtral-8x7b-L4-tp2-pp2-ep4-etp1", MIXTRAL_8X7B, dict(tp=2, pp=2, ep=4, etp=1),
          num_layers=4, moe_layer_freq=_moe(0, 4)),
    _case("mixtral-8x7b-L4-tp1-pp2-ep2-etp1-alt", MIXTRAL_8X7B, dict(pp=2, ep=2), num_layers=4,
          moe_layer_freq=[1, 0, 1, 0]),
    # ---- Qwen3-30B-A3B-like MoE (128 experts, qk-norm) ----------------------------------
    _case("qwen3-30b-a3b-L2-tp1-ep1", QWEN3_30B_A3B, dict(), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("qwen3-30b-a3b-L2-tp2-ep8-etp1", QWEN3_30B_A3B, dict(tp=2, ep=8, etp=1), num_layers=2,
          moe_layer_freq=_moe(0, 2)),
    _case("qwen3-30b-a3b-L4-tp4-pp2-ep8-etp1", QWEN3_30B_A3B, dict(tp=4, pp=2, ep=8, etp=1),
          num_layers=4, moe_layer_freq=_moe(0, 4)),
    # ---- MLA + MoE at DeepSeek-V2-Lite / Moonlight width (q_lora None) ------------------
    _case("moonlight-16b-L4-tp1-ep1", MOONLIGHT_16B, dict(), num_layers=4, moe_layer_freq=_moe(1, 3)),
    _case("moonlight-16b-L4-tp2-ep4-etp1", MOONLIGHT_16B, dict(tp=2, ep=4, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3)),
    _case("moonlight-16b-L4-tp4-ep8-etp1", MOONLIGHT_16B, dict(tp=4, ep=8, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3)),
    _case("moonlight-16b-L4-tp1-ep8", MOONLIGHT_16B, dict(ep=8), num_layers=4,
          moe_layer_freq=_moe(1, 3)),
    _case("moonlight-16b-L4-tp2-pp2-ep4-etp1", MOONLIGHT_16B, dict(tp=2, pp=2, ep=4, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3)),
    _case("moonlight-16b-L4-tp2-ep4-etp1-noqknorm", MOONLIGHT_16B, dict(tp=2, ep=4, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3), qk_layernorm=False),
    _case("deepseek-v2-lite-L4-tp2-ep4-etp1", DEEPSEEK_V2_LITE, dict(tp=2, ep=4, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3)),
    # ---- DeepSeek-V3 width (q_lora 1536), 1 dense + 3 MoE, MTP --------------------------
    _case("deepseek-v3-L4-E256-tp2-ep8-etp1", DEEPSEEK_V3, dict(tp=2, ep=8, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3)),
    _case("deepseek-v3-L4-E256-tp2-ep8-etp1-mtp1", DEEPSEEK_V3, dict(tp=2, ep=8, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3), mtp_num_layers=1),
    _case("deepseek-v3-L4-E256-tp2-pp2-ep8-etp1-mtp1", DEEPSEEK_V3, dict(tp=2, pp=2, ep=8, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3), mtp_num_layers=1),
    _case("deepseek-v3-L4-E64-tp1-pp2-ep8-etp1-mtp1", DEEPSEEK_V3, dict(pp=2, ep=8, etp=1),
          num_layers=4, moe_layer_freq=_moe(1, 3), mtp_num_layers=1, num_moe_experts=64),
    # Megatron-LM's DeepSeek-V3 proxy with its reference layout (TP1 PP4 EP16, first/last 2)
    _case("deepseek-v3-proxy-L14-E64-tp1-pp4-ep16-first2-last2-mtp1", DEEPSEEK_V3,
          dict(pp=4, ep=16, etp=1, first_stage_layers=2, last_stage_layers=2),
          num_layers=14, moe_layer_freq=_moe(3, 11), mtp_num_layers=1, num_moe_experts=64,
          max_position_embeddings=4096),
    # ---- attention variants (issue 15): windows (no parameters) and sinks (one per head) --------
    _case("gpt-oss-20b-L4-tp1-ep1-window-sinks", GPT_OSS_20B, dict(), num_layers=4, moe_layer_freq=_moe(0, 4)),
    _case("gpt-oss-20b-L4-tp2-ep4-etp1-window-sinks", GPT_OSS_20B, dict(tp=2, ep=4, etp=1), num_layers=4,
          moe_layer_freq=_moe(0, 4)),
    _case("gpt-oss-20b-L4-tp4-pp2-ep8-etp1-window-sinks", GPT_OSS_20B, dict(tp=4, pp=2, ep=8, etp=1),
          num_layers=4, moe_layer_freq=_moe(0, 4)),
    _case("mistral-7b-v0.1-L4-tp2-pp2-window", MISTRAL_7B_V01, dict(tp=2, pp=2), num_layers=4),
    _case("gemma3-27b-L6-tp4-window-pattern-tied", GEMMA3_27B, dict(tp=4), num_layers=6,
          window_attn_skip_freq=[1, 1, 1, 1, 1, 0]),
    # ---- presets read through the nemotron / glm4_moe_lite / olmoe HF readers (2026-12-07) --------------------
    _case("nemotron-4-15b-L2-tp2-layernorm-plain-mlp", NEMOTRON4_15B, dict(tp=2), num_layers=2),
    _case("nemotron-4-15b-L4-tp4-pp2-layernorm-plain-mlp", NEMOTRON4_15B, dict(tp=4, pp=2), num_layers=4),
    _case("glm-4.7-flash-L4-tp2-ep4-etp1-mtp1", GLM47_FLASH, dict(tp=2, ep=4, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3), mtp_num_layers=1),
    _case("glm-4.7-flash-L4-tp1-pp2-ep8-etp1-mtp1", GLM47_FLASH, dict(pp=2, ep=8, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3), mtp_num_layers=1),
    _case("olmoe-1b-7b-L2-tp1-ep8", OLMOE_1B_7B, dict(ep=8), num_layers=2, moe_layer_freq=_moe(0, 2)),
    _case("olmoe-1b-7b-L4-tp2-pp2-ep4-etp1", OLMOE_1B_7B, dict(tp=2, pp=2, ep=4, etp=1), num_layers=4,
          moe_layer_freq=_moe(0, 4)),
    # ---- MiMo-7B read through the mimo HF reader (2026-12-07): dense with an MTP layer ----------------------
    _case("mimo-7b-L2-tp2-mtp1-qkv-bias", MIMO_7B, dict(tp=2), num_layers=2, mtp_num_layers=1),
    _case("mimo-7b-L4-tp4-pp2-mtp1-qkv-bias", MIMO_7B, dict(tp=4, pp=2), num_layers=4, mtp_num_layers=1),
    # ---- Sarvam MoE / MLA read through the sarvam_moe / sarvam_mla HF readers (2026-12-07) ----------------------
    _case("sarvam-moe-L3-tp2-ep4-etp1-qk-norm", SARVAM_MOE, dict(tp=2, ep=4, etp=1), num_layers=3,
          moe_layer_freq=_moe(1, 2)),
    _case("sarvam-mla-L4-tp2-pp2-ep8-etp1", SARVAM_MLA, dict(tp=2, pp=2, ep=8, etp=1), num_layers=4,
          moe_layer_freq=_moe(1, 3)),
]


# --------------------------------------------------------------------------------------
# Helpers independent of torch / megatron
# --------------------------------------------------------------------------------------

def merge_cases(path: str, results: list[dict], label: str) -> None:
    """Merge ``results`` into the golden JSON at ``path``: a case of the same name is replaced in place, new
    ones are appended (the companion generators for other model classes write into the same file)."""
    with open(path) as f:
        doc = json.load(f)
    fresh = {r["name"]: r for r in results}
    doc["cases"] = [fresh.pop(c["name"], c) for c in doc["cases"]] + list(fresh.values())
    with open(path, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"{len(results)} {label} cases merged into {path}", file=sys.stderr)


def padded_vocab_size(vocab: int, divisible_by: int, tp: int) -> int:
    """Megatron-LM's vocab_size_with_padding: ceil(V / (div*tp)) * div * tp."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab / multiple) * multiple)


def world_and_dp(layout: dict) -> tuple[int, int]:
    """Smallest world size with world % (tp*pp*cp) == 0 and world % (etp*ep*pp) == 0."""
    tp, pp, ep, etp = layout["tp"], layout["pp"], layout["ep"], layout["etp"]
    cp = 1
    inner = math.lcm(tp * cp, ep * etp)
    world = pp * inner
    return world, world // (tp * pp * cp)


# --------------------------------------------------------------------------------------
# torch / megatron setup
# --------------------------------------------------------------------------------------

def install_triton_stub_if_missing() -> bool:
    """megatron-core 0.19 imports triton at module level in exactly one module on the GPT
    import path, transformer/moe/ops/paged_stash.py (MoE paged-stash kernels, only launched
    during training with --moe-paged-stash).  Without triton, register a stand-in for that
    one module (triton itself is not faked: torch would then believe triton is usable)."""
    import importlib.util

    if importlib.util.find_spec("triton") is not None:
        return False
    name = "megatron.core.transformer.moe.ops.paged_stash"

    def _not_available(*args, **kwargs):
        raise RuntimeError("triton is not installed (stand-in from megatron_param_golden.py)")

    stub = types.ModuleType(name)
    stub.GLOBAL_BLOCK_SIZE = 1024
    stub.paged_stash_copy_kernel = _not_available
    stub.paged_stash_pop_kernel = _not_available
    stub.__all__ = ["GLOBAL_BLOCK_SIZE", "paged_stash_copy_kernel", "paged_stash_pop_kernel"]
    sys.modules[name] = stub
    return True


def install_cpu_shims(torch) -> None:
    """Let Megatron-Core modules that touch CUDA while being *built* run on a CPU-only host.
    Nothing is ever executed on a device; all parameters live on the meta device."""

    class _InertStream:
        def __init__(self, *a, **k):
            pass

        def wait_stream(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def record_event(self, *a, **k):
            return _InertEvent()

    class _InertEvent(_InertStream):
        def record(self, *a, **k):
            pass

        def wait(self, *a, **k):
            pass

    # Modules that allocate buffers with device=torch.cuda.current_device() (e.g. the RoPE
    # inv_freq buffer inside MLASelfAttention) get the meta device instead of cuda:0.
    torch.cuda.current_device = lambda: torch.device("meta")
    torch.cuda.Stream = _InertStream
    torch.cuda.Event = _InertEvent
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a, **k: _InertStream()
    torch.cuda.default_stream = lambda *a, **k: _InertStream()
    torch.cuda.device_count = lambda: 1


def install_spec_patches(te_fidelity: bool = True) -> None:
    """Patch the local layer spec.  Always: a parameter-free MLA core attention (the local
    DotProductAttention cannot be built for MLA).  With te_fidelity (the default, used for
    the committed JSON): make the local spec allocate the same parameters as the TE spec;
    see the module docstring for the source references."""
    import torch
    from megatron.core.models import backends as backends_mod
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.post_training.modelopt.layers import Linear as ModeloptLinear
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear
    try:  # core >= 0.19; older releases (--merge of non-MLA cases with 0.16) have no resolver to patch
        from megatron.core.transformer import mla_qk_norm_config
    except ImportError:
        mla_qk_norm_config = None
    from megatron.core.transformer import multi_latent_attention as mla_mod
    from megatron.core.transformer.identity_op import IdentityOp

    class MLACoreAttentionStandIn(torch.nn.Module):
        """The local DotProductAttention does not accept MLA's k_channels/v_channels
        arguments; core attention owns no parameters in either spec (TEDotProductAttention
        with the default softmax_type='vanilla'), so a parameter-free stand-in is used."""

        def __init__(self, *args, **kwargs):
            super().__init__()

    class DuplicatedLinear(ModeloptLinear):
        """Stand-in for TELinear(parallel_mode='duplicated'): full weight on every TP rank."""

    class LayerNormColumnParallelLinear(ColumnParallelLinear):
        """Stand-in for TELayerNormColumnParallelLinear: a (replicated) norm over the input
        features (weight, + bias for LayerNorm) followed by a ColumnParallelLinear."""

        def __init__(self, input_size, output_size, *, config, **kwargs):
            super().__init__(input_size, output_size, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(
                torch.empty(input_size, dtype=config.params_dtype))
            if config.normalization == "LayerNorm":
                self.layer_norm_bias = torch.nn.Parameter(
                    torch.empty(input_size, dtype=config.params_dtype))
            else:
                self.layer_norm_bias = None

    class LocalBackendWithFusedNormLinear(backends_mod.LocalSpecProvider):
        def column_parallel_layer_norm_linear(self):
            return LayerNormColumnParallelLinear

    if te_fidelity:
        # (1) MLASelfAttention checks `submodules.linear_*_down_proj in [TELinear]` to pick
        #     parallel_mode='duplicated'; TELinear is None without TE -> point it at ours.
        mla_mod.TELinear = DuplicatedLinear

        # (2) The Q/KV-norm resolver asks the backend for its fused norm+linear class.
        if mla_qk_norm_config is None:
            return _patch_local_mla_spec(gpt_layer_specs, MLACoreAttentionStandIn, DuplicatedLinear,
                                         LayerNormColumnParallelLinear, IdentityOp, te_fidelity)
        _orig_get_backend = mla_qk_norm_config.get_backend

        def _get_backend(transformer_impl):
            if transformer_impl == "local":
                return LocalBackendWithFusedNormLinear()
            return _orig_get_backend(transformer_impl)

        mla_qk_norm_config.get_backend = _get_backend

    _patch_local_mla_spec(gpt_layer_specs, MLACoreAttentionStandIn, DuplicatedLinear, LayerNormColumnParallelLinear,
                          IdentityOp, te_fidelity)


def _patch_local_mla_spec(gpt_layer_specs, MLACoreAttentionStandIn, DuplicatedLinear, LayerNormColumnParallelLinear,
                          IdentityOp, te_fidelity) -> None:
    # (3) Re-lay the local MLA layer spec like the TE spec (gpt_layer_specs.py L295-316).
    #     Module-global replacement, so get_gpt_decoder_layer_specs / block / MTP specs use it.
    from megatron.core.tensor_parallel import ColumnParallelLinear  # the up-projections without q/kv norm

    _orig_local_spec = gpt_layer_specs.get_gpt_layer_local_spec

    def get_gpt_layer_local_spec(*args, **kwargs):
        spec = _orig_local_spec(*args, **kwargs)
        # signature: (num_experts, moe_grouped_gemm, qk_layernorm, multi_latent_attention, ...)
        mla = kwargs.get("multi_latent_attention", args[3] if len(args) > 3 else False)
        qk_ln = kwargs.get("qk_layernorm", args[2] if len(args) > 2 else False)
        if not mla:
            return spec
        spec = copy.copy(spec)
        spec.submodules = copy.copy(spec.submodules)
        attn = copy.copy(spec.submodules.self_attention)
        sub = copy.copy(attn.submodules)
        sub.core_attention = MLACoreAttentionStandIn
        if te_fidelity:
            sub.linear_q_down_proj = DuplicatedLinear
            sub.linear_kv_down_proj = DuplicatedLinear
            sub.linear_q_up_proj = (LayerNormColumnParallelLinear if qk_ln
                                    else ColumnParallelLinear)
            sub.linear_kv_up_proj = (LayerNormColumnParallelLinear if qk_ln
                                     else ColumnParallelLinear)
            sub.q_layernorm = IdentityOp
            sub.kv_layernorm = IdentityOp
        attn.submodules = sub
        spec.submodules.self_attention = attn
        return spec

    gpt_layer_specs.get_gpt_layer_local_spec = get_gpt_layer_local_spec


def make_config(model: dict, layout: dict):
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import (
        MLATransformerConfig,
        TransformerConfig,
    )

    kw = dict(
        num_layers=model["num_layers"],
        hidden_size=model["hidden_size"],
        ffn_hidden_size=model["ffn_hidden_size"],
        num_attention_heads=model["num_attention_heads"],
        num_query_groups=model["num_query_groups"],
        kv_channels=model["kv_channels"],
        gated_linear_unit=bool(model["swiglu"]),
        activation_func=F.silu if model["swiglu"] else F.gelu,
        bias_activation_fusion=False,
        normalization=model["normalization"],
        add_bias_linear=model["add_bias_linear"],
        add_qkv_bias=model["add_qkv_bias"],
        qk_layernorm=model["qk_layernorm"],
        tensor_model_parallel_size=layout["tp"],
        pipeline_model_parallel_size=layout["pp"],
        virtual_pipeline_model_parallel_size=(layout["vpp"] if layout["vpp"] > 1 else None),
        expert_model_parallel_size=layout["ep"],
        expert_tensor_parallel_size=layout["etp"],
        context_parallel_size=1,
        sequence_parallel=False,
        num_layers_in_first_pipeline_stage=layout["first_stage_layers"],
        num_layers_in_last_pipeline_stage=layout["last_stage_layers"],
        transformer_impl="local",
        use_cpu_initialization=True,
        perform_initialization=False,
        init_model_with_meta_device=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        bf16=True,
        mtp_num_layers=model["mtp_num_layers"],
    )
    if model.get("window_size"):
        kw.update(window_size=tuple(model["window_size"]), window_attn_skip_freq=model.get("window_attn_skip_freq"))
    if model.get("softmax_type", "vanilla") != "vanilla":
        kw.update(softmax_type=model["softmax_type"])
    if model["num_moe_experts"]:
        kw.update(
            num_moe_experts=model["num_moe_experts"],
            moe_router_topk=model["moe_router_topk"],
            moe_ffn_hidden_size=model["moe_ffn_hidden_size"],
            moe_shared_expert_intermediate_size=model["moe_shared_expert_intermediate_size"],
            moe_layer_freq=list(model["moe_layer_freq"]),
            moe_grouped_gemm=False,
            moe_token_dispatcher_type="alltoall",
        )
    if model["multi_latent_attention"]:
        kw.update(
            multi_latent_attention=True,
            q_lora_rank=model["q_lora_rank"],
            kv_lora_rank=model["kv_lora_rank"],
            qk_head_dim=model["qk_head_dim"],
            qk_pos_emb_head_dim=model["qk_pos_emb_head_dim"],
            v_head_dim=model["v_head_dim"],
            rope_type="rope",
        )
        return MLATransformerConfig(**kw)
    return TransformerConfig(**kw)


def _categorize(name: str) -> str:
    if name.startswith("embedding."):
        return "embedding"
    if name.startswith("output_layer."):
        return "output_layer"
    if name.startswith("decoder.final_layernorm"):
        return "final_layernorm"
    if name.startswith("decoder.layers."):
        return "decoder_layers"
    if name.startswith("mtp."):
        return "mtp"
    return "other"


def count_chunk(chunk) -> dict:
    seen = set()
    out = dict(total=0, embedding=0, output_layer=0, decoder_layers=0, final_layernorm=0,
               mtp=0, other=0, routed_experts=0)
    for name, p in chunk.named_parameters():  # named_parameters() de-duplicates shared tensors
        if id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        out["total"] += n
        out[_categorize(name)] += n
        if ".mlp.experts." in name:
            out["routed_experts"] += n
    layers = [int(layer.layer_number) - 1 for layer in chunk.decoder.layers]
    mtp_layers = len(chunk.mtp.layers) if getattr(chunk, "mtp_process", False) else 0
    return dict(counts=out, layers=layers, mtp_layers=mtp_layers)


@contextlib.contextmanager
def parallel_rank(rank, world, layout, dist, ps, FakeStore, seen):
    """Rank ``rank``'s fake process group and Megatron parallel state (torn down on exit); yields its coordinates,
    or None for a pure data-parallel replica of a rank already in ``seen`` (the companion generators use it too)."""
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        ps.initialize_model_parallel(
            tensor_model_parallel_size=layout["tp"],
            pipeline_model_parallel_size=layout["pp"],
            virtual_pipeline_model_parallel_size=(layout["vpp"] if layout["vpp"] > 1 else None),
            expert_model_parallel_size=layout["ep"],
            expert_tensor_parallel_size=layout["etp"],
            context_parallel_size=1,
            create_gloo_process_groups=False,
        )
        coords = dict(
            rank=rank,
            pp_rank=ps.get_pipeline_model_parallel_rank(),
            tp_rank=ps.get_tensor_model_parallel_rank(),
            ep_rank=ps.get_expert_model_parallel_rank(),
            etp_rank=ps.get_expert_tensor_parallel_rank(),
        )
        key = (coords["pp_rank"], coords["tp_rank"], coords["ep_rank"], coords["etp_rank"])
        if key in seen:
            yield None
        else:
            seen.add(key)
            yield coords
    finally:
        ps.destroy_model_parallel()
        dist.destroy_process_group()


def variant_config_kwargs(model, layout, torch, *, sequence_parallel):
    """The ``TransformerConfig`` fields the companion generators (GPTModel with an experimental attention variant)
    share: the shape, the parallel sizes, the local meta-device build in bf16, and the MoE part when there is one
    (grouped GEMM off: ``SequentialMLP``, the same shapes as ``TEGroupedMLP``)."""
    kw = dict(
        num_layers=model["num_layers"], hidden_size=model["hidden_size"], ffn_hidden_size=model["ffn_hidden_size"],
        num_attention_heads=model["num_attention_heads"], num_query_groups=model["num_query_groups"],
        kv_channels=model["kv_channels"], gated_linear_unit=bool(model["swiglu"]),
        activation_func=torch.nn.functional.silu if model["swiglu"] else torch.nn.functional.gelu,
        bias_activation_fusion=False, normalization=model["normalization"], add_bias_linear=model["add_bias_linear"],
        add_qkv_bias=model["add_qkv_bias"], qk_layernorm=model["qk_layernorm"],
        tensor_model_parallel_size=layout["tp"], pipeline_model_parallel_size=layout["pp"],
        virtual_pipeline_model_parallel_size=(layout["vpp"] if layout["vpp"] > 1 else None),
        expert_model_parallel_size=layout["ep"], expert_tensor_parallel_size=layout["etp"],
        context_parallel_size=1, sequence_parallel=sequence_parallel,
        num_layers_in_first_pipeline_stage=layout["first_stage_layers"],
        num_layers_in_last_pipeline_stage=layout["last_stage_layers"],
        transformer_impl="local", use_cpu_initialization=True, perform_initialization=False,
        init_model_with_meta_device=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, bf16=True,
        experimental_attention_variant=model["experimental_attention_variant"],
    )
    if model.get("num_moe_experts"):
        kw.update(num_moe_experts=model["num_moe_experts"], moe_router_topk=model["moe_router_topk"],
                  moe_ffn_hidden_size=model["moe_ffn_hidden_size"],
                  moe_shared_expert_intermediate_size=model["moe_shared_expert_intermediate_size"],
                  moe_layer_freq=list(model["moe_layer_freq"]), moe_grouped_gemm=False,
                  moe_token_dispatcher_type="alltoall")
        if model.get("moe_shared_expert_gate"):
            kw["moe_shared_expert_gate"] = True
    return kw


def variant_chunks(torch, ps, config, model, layout, block_spec, module_class, count_key, mtp_spec=None,
                   inspect=None, **gpt_kwargs):
    """This rank's ``GPTModel`` chunk of every virtual stage, built on the meta device and counted, for the companion
    generators of GPTModel with an experimental attention variant: ``block_spec(vp)`` is the decoder block spec,
    ``mtp_spec(vp)`` the MTP block spec (or None), ``counts[count_key]`` the parameters of the ``module_class``
    modules, ``inspect(vp, chunk)`` an optional look at each chunk before it is dropped."""
    from megatron.core.models.gpt import GPTModel

    vocab = padded_vocab_size(model["vocab_size"], model["make_vocab_size_divisible_by"], layout["tp"])
    vpp = layout["vpp"] if layout["vpp"] > 1 else None
    chunks = []
    for vp in (range(vpp) if vpp else [None]):
        if mtp_spec is not None:
            gpt_kwargs["mtp_block_spec"] = mtp_spec(vp)
        with torch.device("meta"):
            chunk = GPTModel(
                config=config, transformer_layer_spec=block_spec(vp), vocab_size=vocab,
                max_sequence_length=model["max_position_embeddings"],
                pre_process=ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp),
                post_process=ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp),
                parallel_output=True,
                share_embeddings_and_output_weights=not model["untie_embeddings_and_output_weights"],
                position_embedding_type=model["position_embedding_type"], vp_stage=vp, **gpt_kwargs)
        devs = {p.device.type for p in chunk.parameters()}
        assert devs <= {"meta"}, f"parameters off the meta device: {devs}"
        if inspect is not None:
            inspect(vp, chunk)
        counted = count_chunk(chunk)
        counted["counts"][count_key] = sum(  # a subset of decoder_layers (+ mtp)
            p.numel() for m in chunk.modules() if isinstance(m, module_class) for p in m.parameters())
        chunks.append(counted)
        del chunk
    return chunks


def build_rank(case, rank, world, torch, dist, ps, FakeStore, seen):
    """Build rank `rank`'s model chunks; None if an equivalent rank was already built."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt import gpt_layer_specs

    model, layout = case["model"], case["layout"]
    with parallel_rank(rank, world, layout, dist, ps, FakeStore, seen) as coords:
        if coords is None:
            return None
        config = make_config(model, layout)
        vocab = padded_vocab_size(model["vocab_size"], model["make_vocab_size_divisible_by"],
                                  layout["tp"])
        vpp = layout["vpp"] if layout["vpp"] > 1 else None
        chunks = []
        for vp in (range(vpp) if vpp else [None]):
            pre = ps.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp)
            post = ps.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp)
            # Same spec selection as Megatron-LM gpt_builders.py (local backend).
            if model["num_moe_experts"]:
                layer_spec = gpt_layer_specs.get_gpt_decoder_block_spec(
                    config, use_transformer_engine=False,
                    normalization=model["normalization"], vp_stage=vp)
            else:
                layer_spec = gpt_layer_specs.get_gpt_layer_local_spec(
                    num_experts=None, moe_grouped_gemm=False,
                    qk_layernorm=model["qk_layernorm"],
                    multi_latent_attention=model["multi_latent_attention"],
                    normalization=model["normalization"])
            mtp_spec = None
            if model["mtp_num_layers"]:
                last_layer_spec = gpt_layer_specs.get_gpt_decoder_layer_specs(
                    config, use_transformer_engine=False,
                    normalization=model["normalization"], vp_stage=vp)[-1]
                mtp_spec = gpt_layer_specs.get_gpt_mtp_block_spec(
                    config, last_layer_spec, use_transformer_engine=False, vp_stage=vp)
            with torch.device("meta"):
                chunk = GPTModel(
                    config=config,
                    transformer_layer_spec=layer_spec,
                    vocab_size=vocab,
                    max_sequence_length=model["max_position_embeddings"],
                    pre_process=pre,
                    post_process=post,
                    parallel_output=True,
                    share_embeddings_and_output_weights=not model[
                        "untie_embeddings_and_output_weights"],
                    position_embedding_type=model["position_embedding_type"],
                    mtp_block_spec=mtp_spec,
                    vp_stage=vp,
                )
            devs = {p.device.type for p in chunk.parameters()}
            assert devs <= {"meta"}, f"parameters off the meta device: {devs}"
            chunks.append(count_chunk(chunk))
            del chunk
        coords["chunks"] = chunks
        coords["params"] = sum(c["counts"]["total"] for c in chunks)
        return coords


def run_case(case, torch, dist, ps, FakeStore) -> dict:
    layout = dict(case["layout"])
    world, dp = world_and_dp(layout)
    seen = set()
    records = []
    for r in range(world):
        rec = build_rank(case, r, world, torch, dist, ps, FakeStore, seen)
        if rec is not None:
            records.append(rec)

    stages = []
    consistent = True
    for pp_rank in range(layout["pp"]):
        recs = [r for r in records if r["pp_rank"] == pp_rank]
        ref = recs[0]
        same = all(
            [c["counts"] for c in r["chunks"]] == [c["counts"] for c in ref["chunks"]]
            for r in recs
        )
        consistent &= same
        stage = dict(
            pp_rank=pp_rank,
            params=ref["params"],
            params_by_vpp_chunk=[c["counts"]["total"] for c in ref["chunks"]],
            layers_by_vpp_chunk=[c["layers"] for c in ref["chunks"]],
            mtp_layers=sum(c["mtp_layers"] for c in ref["chunks"]),
            breakdown={k: sum(c["counts"][k] for c in ref["chunks"])
                       for k in ref["chunks"][0]["counts"] if k != "total"},
            ranks_checked=len(recs),
        )
        if stage["breakdown"]["other"] == 0:
            del stage["breakdown"]["other"]
        if not same:
            stage["per_rank"] = [
                dict(rank=r["rank"], tp_rank=r["tp_rank"], ep_rank=r["ep_rank"],
                     etp_rank=r["etp_rank"], params=r["params"],
                     params_by_vpp_chunk=[c["counts"]["total"] for c in r["chunks"]])
                for r in recs
            ]
        stages.append(stage)

    layout_out = dict(layout)
    layout_out.update(cp=1, dp=dp, world_size=world)
    model_out = dict(case["model"])
    if model_out["kv_channels"] is None:
        model_out["kv_channels"] = model_out["hidden_size"] // model_out["num_attention_heads"]
    return dict(
        name=case["name"],
        model=model_out,
        layout=layout_out,
        padded_vocab_size=padded_vocab_size(case["model"]["vocab_size"],
                                            case["model"]["make_vocab_size_divisible_by"],
                                            layout["tp"]),
        stages=stages,
        consistent_across_tp_ep_ranks=consistent,
    )


NOTES = (
    "Per-rank parameter counts (sum of p.numel() over model.parameters() of all of the rank's "
    "model chunks; tied/shared tensors counted once per rank) of megatron.core GPTModel built on "
    "the meta device for every distinct (pp, tp, ep, etp) rank of the layout, one process acting "
    "as each rank through torch's fake process group. Built with the local spec "
    "(transformer_impl='local') patched to allocate what the Transformer Engine spec allocates: "
    "(1) MLA linear_q_down_proj / linear_kv_down_proj are replicated on every TP rank as with "
    "TELinear(parallel_mode='duplicated') (the unpatched local spec uses ColumnParallelLinear and "
    "splits them over TP); (2) MLA q/kv norms are fused into linear_q_up_proj / linear_kv_up_proj "
    "as in the TE spec (same count as separate norms); with q_lora_rank=None and qk_layernorm=True "
    "megatron-core >= 0.19 (mla_qk_norm_config.py) also fuses a norm over the hidden size into "
    "linear_q_proj: +hidden_size (x2 for LayerNorm) replicated params per MLA layer, included here "
    "(derived from reading the 0.19.2 source; TE itself cannot run on a CPU-only host). "
    "Fused vs separate input/pre-MLP/qk norms and TEGroupedMLP vs SequentialMLP experts have "
    "identical counts. vocab padded to ceil(V/(make_vocab_size_divisible_by*tp))*"
    "make_vocab_size_divisible_by*tp. breakdown: embedding (word + learned position embeddings; "
    "also the MTP stage's embedding copy), output_layer, decoder_layers, final_layernorm, mtp "
    "(whole MTP block), routed_experts (subset of decoder_layers+mtp: *.mlp.experts.*). "
    "layers_by_vpp_chunk are 0-based global decoder layer indices. world_size is the smallest "
    "valid one (pp*lcm(tp*cp, ep*etp)); counts do not depend on dp."
)


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, os.pardir, "tests", "data", "megatron_param_golden.json")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.normpath(default_out))
    ap.add_argument("--only", default=None, help="regex on case names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--merge", action="store_true",
                    help="replace / append only the selected cases in the existing --out file (each merged case "
                         "records the megatron-core version that built it)")
    ap.add_argument("--no-te-patches", action="store_true",
                    help="diagnostics only: plain local spec (MLA down-projections split over "
                         "TP; MLA with q_lora_rank=None and qk_layernorm does not build)")
    args = ap.parse_args(argv)

    cases = [c for c in CASES if args.only is None or re.search(args.only, c["name"])]
    if args.list:
        for c in cases:
            print(c["name"], world_and_dp(c["layout"]))
        return 0

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    triton_stubbed = install_triton_stub_if_missing()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    install_cpu_shims(torch)
    import megatron.core
    from megatron.core import parallel_state as ps

    install_spec_patches(te_fidelity=not args.no_te_patches)

    t0 = time.time()
    results, failures = [], []
    for case in cases:
        t = time.time()
        try:
            res = run_case(case, torch, dist, ps, FakeStore)
            results.append(res)
            print(f"[{time.time() - t:6.2f}s] {case['name']}: "
                  + ", ".join(f"pp{s['pp_rank']}={s['params']:,}" for s in res["stages"])
                  + ("" if res["consistent_across_tp_ep_ranks"] else "  (INCONSISTENT)"),
                  flush=True)
        except Exception as exc:  # record and carry on
            import traceback
            traceback.print_exc()
            failures.append(dict(name=case["name"], error=f"{type(exc).__name__}: {exc}"))
            print(f"FAILED {case['name']}: {type(exc).__name__}: {exc}", flush=True)
            if dist.is_initialized():
                with contextlib.suppress(Exception):
                    ps.destroy_model_parallel()
                dist.destroy_process_group()

    doc = dict(
        megatron_core_version=megatron.core.__version__,
        torch_version=torch.__version__,
        python_version=".".join(map(str, sys.version_info[:3])),
        spec="local" if args.no_te_patches else "local+te_param_fidelity_patches",
        generator="benchmarks/megatron_param_golden.py",
        triton_stubbed=triton_stubbed,
        notes=NOTES,
        cases=results,
    )
    if args.merge and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        for res in results:
            res["megatron_core_version"] = megatron.core.__version__
        fresh = {r["name"]: r for r in results}
        kept = [fresh.pop(c["name"], c) for c in old["cases"]]
        old["cases"] = kept + list(fresh.values())
        doc = old
    if failures:
        doc["failed_cases"] = failures
    text = json.dumps(doc, indent=1) + "\n"
    if args.out in ("-", "/dev/stdout"):
        sys.stdout.write(text)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    print(f"{len(results)} cases, {len(failures)} failed, {time.time() - t0:.1f}s -> {args.out}",
          file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
