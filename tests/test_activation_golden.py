"""Activation bytes of cost/memory.py against real Megatron-Core layers traced on the CPU.

The goldens (``tests/data/megatron_activation_golden.json``, written by
``benchmarks/megatron_activation_golden.py``; megatron-core and torch versions inside) hold, per case,
the bytes one layer keeps for backward (``layer_bytes``), the rest of a one-layer GPTModel
(``extras_bytes``: final norm, logits and loss, MTP), the persistent buffers, the peak of the
backward pass above its start, and that of each attention and MLP/MoE block's own backward
(``module_backward``; weight gradients go to ``main_grad`` as in Megatron's DDP). This test needs neither
torch nor Megatron-Core: it reads the JSON.

megasolve's formulas describe the GPU training path (Transformer Engine spec, fused RoPE, fused SwiGLU,
flash attention unless ``attention="unfused"``, CUDA dropout). The trace runs the local spec on a CPU,
which differs in a few places that are each stated in ``local_spec_delta_bytes`` below, with the
Megatron-Core source that makes the difference; everything else must match to the byte:

* norms: ``WrappedTorchNorm`` (torch RMSNorm, decomposed on the CPU) keeps an fp32 copy of its input,
  the fp32 normalised tensor and the fp32 rstd (``8h + 4`` bytes per token) instead of the bf16 input;
  its bf16 output is kept where a GEMM consumes it. TE's fused norm+linear keeps input and output
  (``4h``). LayerNorm (``native_layer_norm``) keeps the bf16 input and output plus fp32 mean and rstd
  (``+8`` bytes per token over TE's count, which leaves the two statistics out);
* RoPE without fusion (``apply_rope_fusion=False``; ``rope_utils.py::_apply_rotary_pos_emb_bshd``) keeps
  bf16 cos and sin for Q and for K per layer, ``4 x 2*s*d_rot`` bytes (the fused kernel keeps only the
  shared frequencies); MLA builds its rotary table per layer (fp32 ``[s, r]``);
* the MLP activation runs without ``bias_activation_fusion``: not a difference any more but a setting the
  formula takes (``Workload.activation_fusion=False``, ``memory.unfused_activation_bytes``: SwiGLU keeps the
  SiLU output and the copy ``x_linear + glu_linear_offset``, +4F per token; routed experts also the
  probability-scaled product's input, +6 F_m per routed token), so the trace checks those bytes too; the
  ``*-fused-swiglu`` / ``*-fp8-input-store`` cases run the fused kernel (Megatron-Core's own autograd function,
  the same on the CPU), the latter keeping its input in FP8 (``Workload.activation_func_fp8_input_store``);
* CPU dropout keeps its mask in the input dtype (bf16, 2 B), CUDA in bool (1 B);
* unfused attention: the CPU has no fused softmax kernel, so the torch softmax keeps its fp32 output and
  the context ``bmm`` a bf16 copy (6 B per score, 7 with dropout); on a GPU Transformer Engine's fused kernel
  keeps one bf16 output (2 B, 5 with dropout; ``memory.fused_softmax_kernel``);
* the allgather dispatcher keeps no ``[T, E]`` fp32 probabilities for the permutation (the alltoall
  dispatcher does, 4E B per token) and no per-expert token counts (64 B);
* not a CPU difference but a setting: the formula assumes a load-balancing loss (its ``[T, E]`` fp32
  scores, 4E B per token); the cases without one (coefficient 0) keep 4E B less.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from megasolve.cost.memory import (UNFUSED_BACKWARD_BYTES_PER_SCORE, ActivationShape, allgather_buffer_bytes,
                                   allgather_rows, first_stage_extra_bytes,
                                   fused_softmax_kernel,
                                   last_stage_extra_bytes, layer_activation_bytes, moe_dispatch_transient_bytes,
                                   mtp_activation_bytes)
from megasolve.models.layout import Workload
from megasolve.models.spec import MLASpec, MoESpec, ModelSpec

GOLDEN = json.loads((Path(__file__).parent / "data" / "megatron_activation_golden.json").read_text())
CASES = {c["name"]: c for c in GOLDEN["cases"]}


def spec_of(c: dict) -> ModelSpec:
    moe = MoESpec(num_experts=c["num_moe_experts"], top_k=c["moe_router_topk"],
                  expert_ffn_hidden_size=c["moe_ffn_hidden_size"],
                  shared_expert_ffn_hidden_size=c["moe_shared_expert_intermediate_size"] or 0,
                  layer_pattern=(1,)) if c["num_moe_experts"] else None
    mla = MLASpec(q_lora_rank=c["q_lora_rank"], kv_lora_rank=c["kv_lora_rank"], qk_head_dim=c["qk_head_dim"],
                  qk_pos_emb_head_dim=c["qk_pos_emb_head_dim"],
                  v_head_dim=c["v_head_dim"]) if c["multi_latent_attention"] else None
    return ModelSpec(name=c.get("name", "traced"), num_layers=1, hidden_size=c["hidden_size"],
                     ffn_hidden_size=c["ffn_hidden_size"], num_attention_heads=c["num_attention_heads"],
                     num_query_groups=c["num_query_groups"], kv_channels=c["kv_channels"],
                     vocab_size=c["vocab_size"], swiglu=c["swiglu"], normalization=c["normalization"],
                     qk_layernorm=c["qk_layernorm"], moe=moe, mla=mla, mtp_num_layers=c["mtp_num_layers"] or 0,
                     max_position_embeddings=c["seq_length"], make_vocab_size_divisible_by=1)


def inputs(case: dict):
    c = case["config"]
    # the traced local DotProductAttention is the unfused path; one dropout probability for both kinds
    assert c["hidden_dropout"] == c["attention_dropout"]
    # the CPU trace builds its MLPs without bias_activation_fusion (the unfused activation path) unless the case
    # asks for the fused SwiGLU kernel, and its FP8 input store
    workload = Workload(seq_length=c["seq_length"], global_batch_size=c["micro_batch_size"], attention="unfused",
                        hidden_dropout=c["hidden_dropout"], moe_dispatcher=c["moe_token_dispatcher_type"],
                        cross_entropy="native" if c["cross_entropy_loss_fusion"] else "unfused",
                        activation_fusion=c.get("bias_activation_fusion", False),
                        activation_func_fp8_input_store=c.get("activation_func_fp8_input_store", False))
    # expert TP: the case's, else Megatron's default, the attention TP (parallel_state.initialize_model_parallel)
    shape = ActivationShape(tp=c["tp"], cp=1, mbs=c["micro_batch_size"], sequence_parallel=c["sequence_parallel"],
                            etp=c.get("etp") or c["tp"], ep=c.get("ep", 1))
    return c, spec_of(c), workload, shape


def recompute_of(c: dict) -> tuple[str, tuple[str, ...]]:
    return c["recompute_granularity"] or "none", tuple(c["recompute_modules"] or ("core_attn",))


def fused_softmax_on_gpu(c: dict) -> bool:
    """Whether the traced case's shape runs Transformer Engine's fused softmax kernel on a GPU."""
    _, spec, workload, shape = inputs({"config": c})
    return fused_softmax_kernel(spec, workload, shape)


def local_norm_delta(c: dict) -> int:
    """Per token, one pre-GEMM norm: torch norm on the CPU minus TE's fused norm (see module docstring)."""
    h = c["hidden_size"]
    return 6 * h + 4 if c["normalization"] == "RMSNorm" else 8


def local_spec_delta_bytes(c: dict) -> float:
    """Bytes one local-spec layer keeps beyond what megasolve's (TE, GPU) formula counts."""
    s, b, tp = c["seq_length"], c["micro_batch_size"], c["tp"]
    T, h = s * b, c["hidden_size"]
    if c["recompute_granularity"] == "full":
        return 0.0  # only the layer input is kept: the same bytes on both paths
    sigma = tp if c["sequence_parallel"] else 1
    delta = 2 * local_norm_delta(c) * T / sigma  # input norm and pre-MLP norm, on the rank's tokens
    if c["multi_latent_attention"]:
        r = c["qk_pos_emb_head_dim"]
        delta += 4 * 2 * s * r + 4 * s * r  # cos/sin for Q and K, the layer's own fp32 rotary table
    else:
        delta += 4 * 2 * s * c["kv_channels"]
    if c["qk_layernorm"] and not c["multi_latent_attention"]:
        rows = T * (c["num_attention_heads"] + c["num_query_groups"]) / tp
        delta += rows * 6 * c["kv_channels"]  # fp32 input + fp32 normalised (8d + 4) vs bf16 input (2d + 4)
    if c["hidden_dropout"]:
        delta += 2 * T * h / sigma + T * c["num_attention_heads"] / tp * s  # bf16 instead of bool masks
    if c["num_moe_experts"]:
        if c["moe_token_dispatcher_type"] == "allgather":
            delta -= 4 * T * c["num_moe_experts"]
        elif (c.get("etp") or tp) == 1:  # (expert TP: the case's, else Megatron's default, the attention TP)
            delta += 8 * c["num_moe_experts"]  # int64 tokens per expert of the permutation
            if c.get("ep", 1) > 1:  # and the counts every EP rank sends to the local experts ([1, ep, E/ep]) + a sum
                delta += 8 * c["num_moe_experts"] + 8
        else:  # token counts gathered over the expert-TP group (int64 [etp*E]) and three small sums
            delta += 8 * c["num_moe_experts"] * (c.get("etp") or tp) + 40
        if not c["moe_aux_loss_coeff"]:  # the formula assumes a load-balancing loss ([T, E] fp32 scores)
            delta -= 4 * T / sigma * c["num_moe_experts"]
        else:  # and leaves out its small tensors: tokens per expert (int64) and two fp32 loss values
            delta += 8 * c["num_moe_experts"] + 8
            if c.get("moe_router_load_balancing_type") == "seq_aux_loss":  # per-sequence counts, 8 B per expert
                delta += 8 * c["num_moe_experts"]
        if c.get("moe_z_loss_coeff"):  # z-loss (router.py::apply_z_loss, moe_utils.py::z_loss_func): the fp32
            # [T, E] router logits and their [T] logsumexp kept by torch.logsumexp, and the loss value
            delta += (4 * c["num_moe_experts"] + 4) * T / sigma + 8
    if fused_softmax_on_gpu(c) and not (c["recompute_granularity"] == "selective"
                                        and "core_attn" in recompute_of(c)[1]):
        # the CPU runs the torch softmax (fp32 output kept, bf16 copy for the context bmm): 6 (+1 with dropout)
        # B per score where TE's fused kernel keeps its bf16 output only: 2 (+3)
        scores = b * c["num_attention_heads"] / tp * s * s
        delta += (4 - 2 * (1 if c["attention_dropout"] else 0)) * scores
    if c["recompute_granularity"] == "selective":
        delta += 4  # the checkpoint keeps one int32 scalar (lift_fresh: the tensor-parallel flag it is given)
    return delta


def gathered_ep(c: dict) -> bool:
    """The allgather dispatcher over several EP ranks (its gathered tokens size the routing state)."""
    return c.get("ep", 1) > 1 and c["moe_token_dispatcher_type"] == "allgather"


def routing_state_bound(c: dict) -> float:
    """Bytes of routing state the formula does not follow with the allgather dispatcher over EP ranks: ``[G, E/ep]``
    bool map and fp32 probabilities and their transposed copies (6 B per gathered token and local expert), the
    routed rows' int64 indices and fp32 probabilities (12 B per routed row)."""
    tokens = c["seq_length"] * c["micro_batch_size"] / (c["tp"] if c["sequence_parallel"] else 1)
    gathered = tokens * c["tp"] * c["ep"]
    return 6 * gathered * c["num_moe_experts"] / c["ep"] + 12 * tokens * c["moe_router_topk"] * c["tp"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_bytes_equal_the_formula_plus_the_stated_local_spec_differences(name):
    case = CASES[name]
    c, spec, workload, shape = inputs(case)
    recompute, modules = recompute_of(c)
    formula = layer_activation_bytes(spec, workload, shape, moe=spec.is_moe, recompute=recompute,
                                     recompute_modules=modules)
    if gathered_ep(c):
        assert abs(formula + local_spec_delta_bytes(c) - case["layer_bytes"]) <= routing_state_bound(c)
        assert routing_state_bound(c) < 0.01 * case["layer_bytes"]
    else:
        assert formula + local_spec_delta_bytes(c) == pytest.approx(case["layer_bytes"], abs=0.5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_extras_equal_final_norm_logits_loss_and_mtp(name):
    """One-layer model minus its layer: final norm, fp32 logits kept by the loss, MTP depth."""
    case = CASES[name]
    c, spec, workload, shape = inputs(case)
    s, b, tp = c["seq_length"], c["micro_batch_size"], c["tp"]
    T, h, V = s * b, c["hidden_size"], c["vocab_size"]
    heads = 1 + (c["mtp_num_layers"] or 0)
    # last_stage_extra_bytes is a peak: the bf16 logits (2 B) live only while the loss runs
    expected = last_stage_extra_bytes(spec, workload, shape) - 2 * T * V / tp
    expected += local_norm_delta(c) * T / (tp if c["sequence_parallel"] else 1)  # the final norm
    if not c["multi_latent_attention"]:
        expected += 4 * s * c["kv_channels"]  # the model's fp32 rotary table (MLA layers build their own)
    if c["hidden_dropout"]:
        expected += 2 * T * h  # embedding dropout mask (CPU bf16; first_stage_extra_bytes counts the bool)
    if tp > 1:  # VocabParallelEmbedding keeps the shifted ids and the mask (first_stage_extra_bytes)
        expected += first_stage_extra_bytes(spec, workload, shape) - first_stage_extra_bytes(
            spec, workload, dataclasses.replace(shape, tp=1))
    if c["mtp_num_layers"]:
        layer = CASES[name]["layer_bytes"]  # the MTP depth's transformer layer, traced above
        formula_layer = layer_activation_bytes(spec, workload, shape, moe=spec.is_moe, recompute="none")
        expected += mtp_activation_bytes(spec, workload, shape, "none") - formula_layer + layer
        expected += (18 * h + 12) * T  # enorm, hnorm (8h + 4 each), final norm (10h + 4) vs 12h
        expected += (8 + 8 + 4) * T + 12  # rolled ids and labels (int64), loss-mask share (fp32), scalars
    assert expected == pytest.approx(case["extras_bytes"], abs=0.5)


# Cases whose backward peak is not the logits gradient, with what it is instead (bytes above the start of
# backward): the fused loss keeps 12 B/token more while its gradient is made (fused_cross_entropy.py);
# with TP 2 (half the vocabulary per rank) the unfused attention backward of one layer is larger: the bf16
# gradient of the probabilities and the fp32 gradient of the softmax input, <= 6 B per score.
# Full recompute: the layer re-materialised in backward is larger than the logits gradient.
BACKWARD_PEAK_ELSEWHERE = {"dense-gqa-fused-ce", "dense-gqa-tp2"}
RECOMPUTE_CASES = {"dense-gqa-full-recompute"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_backward_peak_is_the_bf16_logits_gradient(name):
    """The largest transient of backward on a one-layer model: the bf16 gradient of the logits, made
    while the fp32 softmax is still alive (+4 B: the loss's fp32 gradient scalar); this is the ``+2`` of
    ``last_stage_extra_bytes``. Weight gradients go to ``main_grad`` as in Megatron's DDP (issue 14's
    traced "MoE backward gap", 3.70 MB on the ``gap-*`` cases, was the weight gradients of every expert
    the trace then kept as ``.grad``)."""
    case = CASES[name]
    c = case["config"]
    T = c["seq_length"] * c["micro_batch_size"]
    logits_grad = 2 * T * c["vocab_size"] / c["tp"] + 4
    if name in RECOMPUTE_CASES:  # at most the whole layer comes back, next to the logits gradient
        assert logits_grad < case["backward_peak_bytes"][0] <= logits_grad + CASES["dense-gqa"]["layer_bytes"]
    elif gathered_ep(c):  # the MoE layer's combine gradient of every gathered token (moe_dispatch_transient_bytes)
        _, spec, workload, shape = inputs(case)
        assert logits_grad < case["backward_peak_bytes"][0] <= moe_dispatch_transient_bytes(spec, workload, shape)
    elif name in BACKWARD_PEAK_ELSEWHERE:
        assert case["backward_peak_bytes"][0] > logits_grad
        scores = c["micro_batch_size"] * c["num_attention_heads"] / c["tp"] * c["seq_length"] ** 2
        assert case["backward_peak_bytes"][0] <= max(logits_grad + 12 * T, 6 * scores)
    else:
        assert case["backward_peak_bytes"][0] == logits_grad


MOE_CASES = sorted(n for n, case in CASES.items() if case["config"]["num_moe_experts"])


@pytest.mark.parametrize("name", MOE_CASES)
def test_moe_layer_backward_peak_equals_the_dispatch_transient(name):
    """The peak of one MoE layer's backward above the live bytes when it began (``module_backward``;
    traced with weight gradients going to ``main_grad``) against ``moe_dispatch_transient_bytes``, the largest
    step of the layer's gradient chain with Transformer Engine's grouped MLP (all routed rows at once):

    * a rank with one local expert runs all its rows at once on the CPU too (``SequentialMLP`` of one
      expert): the trace equals the formula -- the allgather combine's fp32 gradient of every gathered token
      and its bf16 cast (EP 8, EP 4 x TP 2), or the unfused probability-weighted activation's three fp32
      ``[T_r, F_m]`` gradients (alltoall at EP 8, ``UNFUSED_WEIGHTED_BACKWARD_BYTES``);
    * several local experts: ``SequentialMLP`` runs one expert's share at a time, so the trace lies between
      the routed-row gradients it always holds and the formula; for the alltoall dispatcher with experts no
      wider than the model the dispatch step itself is exact (two bf16 ``[T_r, h]`` gradients; with ETP 2 the
      fp32 combine gradient and its bf16 cast): the formula of the fused activation, which has no fp32
      step, equals the trace;
    * the fused weighted SwiGLU on the CPU (``*-fp8-input-store``): Megatron-Core's jit-fused backward runs op by op
      there, so one expert's fp32 intermediates (``[T_e, F_m]``) sit above the routed-row gradients that a GPU's
      fused kernel would hold alone: the trace lies above the formula by less than the unfused form's
      ``12*T_r*F_m``."""
    case = CASES[name]
    c, spec, workload, shape = inputs(case)
    traced = case["module_backward"]["decoder.layers.0.mlp"]["peak_bytes"]
    formula = moe_dispatch_transient_bytes(spec, workload, shape)
    fused = moe_dispatch_transient_bytes(spec, dataclasses.replace(workload, activation_fusion=True), shape)
    rows = c["seq_length"] * c["micro_batch_size"] / shape.sigma * c["moe_router_topk"] * shape.etp
    alltoall = c["moe_token_dispatcher_type"] == "alltoall"
    routed_grads = (4 if shape.etp == 1 else 6) * rows * c["hidden_size"] if alltoall else 2 * rows * c["hidden_size"]
    if c["num_moe_experts"] == c.get("ep", 1):  # one local expert
        assert traced == formula
        if gathered_ep(c):  # the fp32 combine gradient of every gathered token and its bf16 cast, (4 + 2) B each
            gathered = c["seq_length"] * c["micro_batch_size"] / shape.sigma * shape.etp * shape.ep
            assert formula == 6 * gathered * c["hidden_size"]
        else:
            assert formula == 12 * rows * c["moe_ffn_hidden_size"] / shape.etp > fused
    elif gathered_ep(c):
        assert traced == formula == 6 * rows / c["moe_router_topk"] * c["ep"] * c["hidden_size"]
    elif c.get("bias_activation_fusion"):  # the fused weighted SwiGLU, its backward op by op on the CPU
        assert formula == fused == routed_grads < traced < routed_grads + 12 * rows * c["moe_ffn_hidden_size"]
    elif alltoall and c["moe_ffn_hidden_size"] <= c["hidden_size"] and c.get("ep", 1) == 1:
        assert traced == fused == routed_grads <= formula
    else:
        assert routed_grads <= traced <= formula


@pytest.mark.parametrize("name", sorted(n for n, case in CASES.items() if not case["config"]["recompute_granularity"]))
def test_unfused_attention_backward_peak_is_the_per_score_constant(name):
    """The peak of one attention block's backward above the live bytes when it began: two fp32 score-sized
    gradients less the bf16 probabilities freed (``UNFUSED_BACKWARD_BYTES_PER_SCORE``), less the freed
    attention output ``2*T*n*dv/t`` (GQA, MLA: exact). MHA with RoPE frees the whole QKV output V was a view
    of (``-6*T*n*d/t``); with dropout the CPU frees a bf16 mask where CUDA frees a bool one (1 B less)."""
    case = CASES[name]
    c = case["config"]
    T, t = c["seq_length"] * c["micro_batch_size"], c["tp"]
    n, d = c["num_attention_heads"], c["v_head_dim"] if c["multi_latent_attention"] else c["kv_channels"]
    scores = c["micro_batch_size"] * n / t * c["seq_length"] ** 2
    traced = case["module_backward"]["decoder.layers.0.self_attention"]["peak_bytes"]
    if c["attention_dropout"]:
        assert traced == (UNFUSED_BACKWARD_BYTES_PER_SCORE["dropout"] - 1) * scores - 4 * T * n * d / t
    elif c["num_query_groups"] == n and not c["multi_latent_attention"]:
        assert traced == UNFUSED_BACKWARD_BYTES_PER_SCORE["no_dropout"] * scores - 6 * T * n * d / t
    else:
        assert traced == UNFUSED_BACKWARD_BYTES_PER_SCORE["no_dropout"] * scores - 2 * T * n * d / t


def test_unfused_core_attention_keeps_a_persistent_score_sized_buffer():
    """Megatron's global memory buffer (``parallel_state.get_global_memory_buffer()``, the ``baddbmm``
    input of ``DotProductAttention``): one bf16 ``[b*n/t, s, s]`` buffer per rank, reused by every layer. The
    allgather dispatcher over EP ranks gathers the hidden states into the same bf16 buffer, which grows to the
    larger of the two (``allgather_buffer_bytes`` is the excess; the CPU runs the torch softmax, whose scores
    input is this buffer)."""
    for case in GOLDEN["cases"]:
        c, spec, workload, shape = inputs(case)
        expected = 2 * c["micro_batch_size"] * c["num_attention_heads"] // c["tp"] * c["seq_length"] ** 2
        if gathered_ep(c):  # (the CPU's torch softmax takes its scores input from the buffer, as on a GPU without
            # Transformer Engine's fused kernel: allgather_buffer_bytes counts the excess over it)
            gathered = 2 * allgather_rows(spec, workload, shape) * c["hidden_size"]
            assert allgather_buffer_bytes(spec, workload, shape) == gathered  # a GPU's fused softmax: no scores buffer
            expected = max(expected, gathered)
        assert case["persistent"]["global_memory_buffer_total"] == expected, case["name"]


def test_golden_records_the_versions_it_was_traced_with():
    assert set(GOLDEN["versions"]) >= {"megatron-core", "torch"}
    assert len(CASES) >= 10
