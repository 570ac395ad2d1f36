"""FLOPs and compute time. Pure functions; FLOPs per micro-batch per rank, seconds.

Model FLOPs follow Megatron's own formula (``reference/megatron.md`` section 6.2, TRN
``num_floating_point_operations`` L802-1388): ``6 x`` GEMM FLOPs per token (forward, wgrad,
dgrad), causal attention halved, logits for the main head and each MTP depth. Per-rank work
(section 6.3): linear layers split over ``t*c`` (weights over TP, tokens over CP), routed experts
over ``t*c`` as well (balanced routing: every rank of the expert grid gets ``(T/sigma)*k*etp``
tokens of width ``F_m/etp``). Recompute adds real work: one more forward (1/3 of the 6x).
"""

from __future__ import annotations

from dataclasses import dataclass

from megasolve.cost import hybrid
from megasolve.cost.calibration import calibration, chip_family
from megasolve.cost.layers import LayerKind, layer_kind, mtp_layer_kind
from megasolve.cost.memory import ActivationShape
from megasolve.cost.moe_routing import routed_rows
from megasolve.models.layout import ELEMENT_BYTES, Workload
from megasolve.models.spec import ModelSpec
from megasolve.topology.gpus import GpuSpec


# ---------------------------------------------------------------------------- model FLOPs (Megatron)
def attention_linear_flops_per_token(spec: ModelSpec) -> float:
    """``lin`` of section 6.2: 6 x the attention projection weights touched by one token.

    >>> from megasolve.models.presets import load_preset
    >>> attention_linear_flops_per_token(load_preset("llama-3.1-8b")) / 6  # 4096*(4096+2048) + 4096*4096
    41943040.0
    """
    h, n = spec.hidden_size, spec.num_attention_heads
    if spec.mla is None:
        d, g = spec.kv_channels, spec.num_query_groups
        gate = h * n * d if spec.attention_output_gate else 0  # the output gate's query-sized projection
        return 6.0 * (h * (n * d + 2 * g * d) + n * d * h + gate)
    mla = spec.mla
    qk, r, dv = mla.qk_head_dim, mla.qk_pos_emb_head_dim, mla.v_head_dim
    q_term = h * n * (qk + r) if mla.q_lora_rank is None else mla.q_lora_rank * (h + n * (qk + r) + 1)
    return 6.0 * (q_term + mla.kv_lora_rank * (h + n * (qk + dv) + 1) + h * r + n * dv * h)


def attention_linear_module_flops_per_token(spec: ModelSpec) -> dict[str, float]:
    """``attention_linear_flops_per_token`` by module (``layers.gemm_modules``' names); they sum to it.

    >>> from megasolve.models.presets import load_preset
    >>> {m: f / 6 for m, f in attention_linear_module_flops_per_token(load_preset("llama-3.1-8b")).items()}
    {'self_attention.linear_qkv': 25165824.0, 'self_attention.linear_proj': 16777216.0}
    """
    h, n = spec.hidden_size, spec.num_attention_heads
    if spec.mla is None:
        d, g = spec.kv_channels, spec.num_query_groups
        gate = h * n * d if spec.attention_output_gate else 0
        return {"self_attention.linear_qkv": 6.0 * (h * (n * d + 2 * g * d) + gate),
                "self_attention.linear_proj": 6.0 * n * d * h}
    mla = spec.mla
    qk, r, dv = mla.qk_head_dim, mla.qk_pos_emb_head_dim, mla.v_head_dim
    out = {"self_attention.linear_q_proj": 6.0 * h * n * (qk + r)} if mla.q_lora_rank is None else {
        "self_attention.linear_q_down_proj": 6.0 * mla.q_lora_rank * h,
        "self_attention.linear_q_up_proj": 6.0 * mla.q_lora_rank * (n * (qk + r) + 1)}
    out["self_attention.linear_kv_down_proj"] = 6.0 * (mla.kv_lora_rank * (h + 1) + h * r)
    out["self_attention.linear_kv_up_proj"] = 6.0 * mla.kv_lora_rank * n * (qk + dv)
    out["self_attention.linear_proj"] = 6.0 * n * dv * h
    return out


def attention_core_flops_per_token_seq(spec: ModelSpec) -> float:
    """``core`` of section 6.2 (causal, QK^T and AV): multiply by tokens x sequence length.

    DSA runs MLA absorbed (``AbsorbedMLASelfAttention``, experimental_attention_variant/absorbed_mla.py @d98e8a6):
    the up-projections are folded into the query and the output, so QK^T spans ``kv_lora + r`` channels and AV
    ``kv_lora`` per head (Megatron-Bridge ``flop_utils.py`` DSA branch, ``absorbed_qk_dim`` / ``absorbed_v_dim``);
    the attended pairs are the indexer's top-k (``ModelSpec.attended_pairs``)."""
    n = spec.num_attention_heads
    if spec.mla is None:
        return 6.0 * n * spec.kv_channels
    mla = spec.mla
    if spec.dsa is not None:
        return 6.0 * n * (2 * mla.kv_lora_rank + mla.qk_pos_emb_head_dim) / 2
    return 6.0 * (n * (mla.qk_head_dim + mla.qk_pos_emb_head_dim) / 2 + n * mla.v_head_dim / 2)


@dataclass(frozen=True, slots=True)
class IndexerFlops:
    """FLOPs per token of one layer's DSA lightning indexer, forward + backward (0 for a layer reusing top-k)."""

    projections: float  # linear_wq_b, linear_wk, linear_weights_proj: GEMMs
    scores: float  # q.k over every causal key and the weighted head sum (+ their backward with the loss)
    teacher: float  # the KL target: the main Q.K^T over the scored keys (forward only, detached)


def dsa_indexer_flops_per_token(spec: ModelSpec, seq_length: int) -> IndexerFlops:
    """Megatron-Bridge ``flop_utils.py`` (DSA branch, after arXiv 2512.02556 equations 1-2): the projections
    run forward (and wgrad only, their inputs detached, with the indexer loss): ``2x`` or ``4x`` their weights;
    the scores ``2 * ctx * n_i * (d_i + 1)`` forward over the dense causal context (top-k needs every score),
    ``+ 4 * ctx'`` with the loss over the selected (sparse loss) or all keys; the KL target
    ``2 * ctx' * n * (kv_lora + r)`` (detached main Q / K). ``ctx``: average causal keys per query.

    >>> from megasolve.models.presets import load_preset
    >>> f = dsa_indexer_flops_per_token(load_preset("deepseek-v3.2"), 4096)  # no indexer loss
    >>> f.projections / 1e6, round(f.scores / 1e6, 2), f.teacher  # 2*(1536*8192 + 7168*128 + 7168*64); 2*2048.5*64*129
    (27.918336, 33.82, 0.0)
    """
    dsa, mla = spec.dsa, spec.mla
    if dsa is None:
        return IndexerFlops(0.0, 0.0, 0.0)
    s = seq_length
    dense_ctx = (s + 1) / 2
    sparse_ctx = dense_ctx if s <= dsa.topk else dsa.topk - dsa.topk * (dsa.topk - 1) / (2 * s)
    size = spec.indexer_query_input * dsa.n_heads * dsa.head_dim + spec.hidden_size * (dsa.head_dim + dsa.n_heads)
    unit = dsa.n_heads * (dsa.head_dim + 1)
    projections = (4 if dsa.trains_indexer else 2) * size
    scores = 2 * dense_ctx * unit
    teacher = 0.0
    if dsa.trains_indexer:
        ctx = sparse_ctx if dsa.sparse_loss else dense_ctx
        scores += 4 * ctx * unit
        teacher = 2 * ctx * spec.num_attention_heads * (mla.kv_lora_rank + mla.qk_pos_emb_head_dim)
    return IndexerFlops(float(projections), float(scores), float(teacher))


def dsa_indexer_layers(spec: ModelSpec) -> int:
    """Decoder and MTP layers that run their own DSA indexer (MTP layers numbered from 1)."""
    if spec.dsa is None:
        return 0
    return (sum(spec.layer_has_indexer(i) for i in range(spec.num_layers))
            + sum(spec.dsa.computes_topk(d) for d in range(1, spec.mtp_num_layers + 1)))


def mlp_flops_per_token(spec: ModelSpec, moe: bool) -> float:
    """6 x MLP weights touched by one token: ``6*h*F*e_ffn`` dense; MoE ``6*h*(F_m*k + F_s)*e_ffn``, with
    latent experts ``6*(d*F_m*k + h*F_s)*e_ffn + 6*2*h*d`` (TRN ``moe_layer_flops`` L845-860)."""
    if moe:
        return sum(moe_mlp_flops_per_token(spec))
    return 6.0 * spec.hidden_size * spec.ffn_hidden_size * (3 if spec.swiglu else 2)


def moe_mlp_flops_per_token(spec: ModelSpec) -> tuple[float, float, float]:
    """An MoE MLP's FLOPs per token, forward + backward: (routed experts, shared experts, latent projections).

    >>> from megasolve.models.presets import load_preset
    >>> [f / 1e6 for f in moe_mlp_flops_per_token(load_preset("nemotron-3-super-120b-a12b"))]  # 6*2*(1024*2688*22, 4096*5376, 4096*1024)
    [726.663168, 264.241152, 50.331648]
    """
    e_ffn = 3 if spec.swiglu else 2
    m = spec.moe
    routed = 6.0 * spec.expert_hidden_size * m.expert_ffn_hidden_size * m.top_k * e_ffn
    shared = 6.0 * spec.hidden_size * m.shared_expert_ffn_hidden_size * e_ffn
    return routed, shared, 6.0 * spec.latent_projection_params


def model_flops_per_sequence(spec: ModelSpec, seq_length: int) -> float:
    """Megatron's model FLOPs for one sequence (fwd + bwd), section 6.2, MTP included.

    Sliding-window and chunked layers count the (query, key) pairs they compute
    (``ModelSpec.attended_pairs``) instead of the full causal ``s^2/2``: Mistral-7B v0.1 at 32K tokens
    does 29 % fewer FLOPs per layer than v0.3. Megatron's own counter (TRN ``num_floating_point_operations``)
    ignores windows, so its logged MFU for such models is higher than the one here.

    >>> from megasolve.models.presets import load_preset
    >>> round(model_flops_per_sequence(load_preset("llama-3.1-8b"), 8192) / 8192 / 1e9, 1)  # reference: 51.5
    51.5
    """
    s, h = seq_length, spec.hidden_size
    if layer_kinds_differ(spec):
        return _block_model_flops_per_sequence(spec, seq_length)
    layers = [spec.is_moe_layer(i) for i in range(spec.num_layers)]
    layers += [spec.is_moe_layer(spec.num_layers - 1)] * spec.mtp_num_layers
    per_token = sum(mlp_flops_per_token(spec, moe) + attention_linear_flops_per_token(spec) for moe in layers)
    per_token += 6.0 * spec.mtp_num_layers * (3 * h + 2 * h * h)
    per_token += 6.0 * h * spec.padded_vocab_size(1) * (spec.mtp_num_layers + 1)
    fractions = [layer_kind(spec, i).attention_fraction(spec, s) for i in range(spec.num_layers)]
    fractions += [mtp_layer_kind(spec).attention_fraction(spec, s)] * spec.mtp_num_layers
    indexer = dsa_indexer_flops_per_token(spec, s)  # DSA: the lightning indexers (zero without)
    per_token += dsa_indexer_layers(spec) * (indexer.projections + indexer.scores + indexer.teacher)
    return s * per_token + s * s * attention_core_flops_per_token_seq(spec) * sum(fractions)


def layer_kinds_differ(spec: ModelSpec) -> bool:
    """A hybrid ``MambaModel`` or a model with gated-DeltaNet layers (``layers.has_block_kinds``)."""
    return spec.is_hybrid or (spec.linear_attention_pattern is not None and any(spec.linear_attention_pattern))


def _block_model_flops_per_sequence(spec: ModelSpec, seq_length: int) -> float:
    """Megatron's model FLOPs of a hybrid / DeltaNet model (TRN ``hybrid_flops`` L964-1006 and the
    linear-attention branch of ``transformer_flops`` L1172-1247): per layer, its blocks' terms -- attention
    (projections + causal core, as ``model_flops_per_sequence``), MLP / MoE, ``hybrid.mamba_model_flops_per_token``,
    ``hybrid.gdn_model_flops_per_token`` -- plus the logits (and MTP heads).

    >>> from megasolve.models.presets import load_preset
    >>> round(model_flops_per_sequence(load_preset("nemotron-h-8b"), 8192) / 8192 / 1e9, 1)
    46.7
    """
    s, h = seq_length, spec.hidden_size
    kinds = [layer_kind(spec, i) for i in range(spec.num_layers)] + [mtp_layer_kind(spec)] * spec.mtp_num_layers
    per_token = 6.0 * spec.mtp_num_layers * (3 * h + 2 * h * h) + 6.0 * h * spec.padded_vocab_size(1) * (
        spec.mtp_num_layers + 1)
    core = 0.0
    for kind in kinds:
        if kind.mlp:
            per_token += mlp_flops_per_token(spec, kind.moe)
        if kind.mixer == "attention":
            per_token += attention_linear_flops_per_token(spec)
            core += kind.attention_fraction(spec, s)
        elif kind.mixer == "mamba":
            per_token += hybrid.mamba_model_flops_per_token(spec)
        elif kind.mixer == "gdn":
            per_token += hybrid.gdn_model_flops_per_token(spec)
    return s * per_token + s * s * attention_core_flops_per_token_seq(spec) * core


# ---------------------------------------------------------------------------- per-rank work of a layer
@dataclass(frozen=True, slots=True)
class LayerWork:
    """Per micro-batch per rank, forward + backward (recompute included)."""

    gemm_flops: float  # dense/attention/shared-expert GEMMs (weights split over TP)
    expert_flops: float  # routed-expert grouped GEMMs
    attention_flops: float  # flash-attention core
    elementwise_bytes: float  # norms, activations, rope, dropout, permutation: HBM traffic
    # GEMMs a precision recipe runs in another precision than the run's (``Workload.module_precision``):
    # ``(precision, dense-curve FLOPs, grouped expert FLOPs)``, not in the two fields above
    gemm_at: tuple[tuple[str, float, float], ...] = ()


def layer_work(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
               recompute: str, kind: LayerKind | None = None) -> LayerWork:
    """Work of one decoder layer on one rank for one micro-batch. ``kind``: the layer's kind
    (``cost/layers.py``), whose sliding window / chunk sets the attended pairs; None: full causal
    attention.

    ``recompute == "full"`` adds one more forward of everything (x 4/3); ``"selective"`` adds the
    core-attention forward (Megatron checkpoints core attention even when fused).

    Attention core: flash attention skips the masked half (causal, reference section 6.2);
    unfused attention (``workload.attention == "unfused"``: Megatron's 2021-2022 ``CoreAttention``,
    Korthikanti et al. 2022 section 4) computes the full ``s x s`` scores as batched GEMMs (2x the
    causal FLOPs; torch's ``baddbmm`` / ``bmm``, ``dot_product_attention.py``, not a Transformer Engine linear, so
    bf16 even in an FP8 / NVFP4 run: ``LayerWork.gemm_at``) and streams the scores through the fused
    scale-mask-softmax and dropout: HBM traffic ``unfused_attention_bytes_per_score`` per score element
    (``(n/t)*T*s`` scores per layer).

    A precision recipe (``Workload.module_precision``, resolved per kind into ``gemm_overrides``) moves its modules'
    GEMM FLOPs into ``LayerWork.gemm_at`` at their precision, and the FP8 / NVFP4 casts scale with the GEMM FLOPs
    still quantized (a bf16 module quantizes nothing).

    Elementwise HBM traffic (memory bound, at HBM bandwidth), counted per kernel Megatron-Core runs
    (bf16 tensors, fwd + bwd; ``calibration.yaml`` has the count): the two norms, the two residual
    adds and RoPE on q and k per token per ``h`` (``elementwise_bytes_per_token_hidden``), and the MLP
    activation per token per ``F`` (``activation_bytes_per_token_ffn``: SwiGLU reads ``2F`` and writes
    ``F`` forward, reads ``3F`` and writes ``2F`` backward; GeLU / squared ReLU ``F + F`` and ``2F + F``).

    Hybrid kinds (``LayerKind.mixer`` / ``LayerKind.mlp``, issue 15): a layer holds only its blocks -- no
    attention terms without an attention mixer, no MLP terms without an MLP; a Mamba-2 / DeltaNet mixer
    adds its projections as GEMMs, its scan / delta rule with the attention kernels' FLOPs (scaled only
    by full recompute) and its conv, gate and norm traffic (``cost/hybrid.py``); a one-block layer has
    one norm and one residual add, half the per-token elementwise bytes.

    FP8 (Transformer Engine): every GEMM input and output gradient is quantised (amax + cast) before
    the GEMM: ``fp8_cast_bytes_per_token_hidden`` extra HBM bytes per token per ``h`` (calibrated),
    ``x block_scaling_cast_factor`` with a block-scaling recipe (MXFP8 / blockwise: a scale per block
    and separate row- and column-wise quantised copies, TE ``MXFP8Quantizer``; calibrated).
    """
    cal = calibration()["time"]
    T = shape.tokens(workload)  # tokens on this CP rank
    t = shape.tp
    s = workload.seq_length
    unfused = workload.attention == "unfused"
    has_attn = kind is None or kind.mixer == "attention"
    has_mlp = kind is None or kind.mlp
    lin = attention_linear_flops_per_token(spec) * T / t if has_attn else 0.0
    # the T queries of this CP rank attend over the whole sequence: 6*n*d*(s^2/c)*b/t (reference 6.3);
    # a sliding-window / chunked layer attends over fewer keys: x its own attended fraction
    # (``LayerKind.attention_fraction``, ``ModelSpec.attended_pairs``), so each pipeline stage costs the
    # windowed and full layers it actually holds (``layers.stage_layers``). With CP, load balancing
    # gives every rank the same share of the band (TE all-gather / a2a CP).
    core_full = attention_core_flops_per_token_seq(spec) * T * s / t
    if not has_attn:
        core_full = 0.0
    core = core_full * (kind.attention_fraction(spec, s) if kind is not None else 1.0)
    if kind is None and spec.dsa is not None:  # no kind: a layer of the model as a whole (sparse pairs)
        core = core_full * spec.attention_fraction(s)
    indexer_gemm = 0.0
    if has_attn and spec.dsa is not None and not (kind is not None and kind.reuses_topk):
        # the DSA indexer: its weights are duplicated over TP and it scores the gathered sequence, so every TP rank
        # does all of it (dsa.py L1159-1205, L1272-1279 @d98e8a6); the KL target uses this rank's heads
        idx = dsa_indexer_flops_per_token(spec, s)
        indexer_gemm = idx.projections * T
        core += idx.scores * T + idx.teacher * T / t
    mlp_total = mlp_flops_per_token(spec, moe) * T / t if has_mlp else 0.0
    if moe and has_mlp:
        m = spec.moe
        routed_pt, shared_pt, latent_pt = moe_mlp_flops_per_token(spec)
        # routed rows: token dropping, padding to capacity, FP8 alignment padding (cost/moe_routing.py)
        rows = routed_rows(spec, workload, T / shape.sigma)
        # latent projections: duplicated weights on the rank's T/sigma tokens (moe_layer.py L279-303)
        gemm = lin + shared_pt * T / t + latent_pt * T / shape.sigma
        expert = routed_pt * T / t * rows.gemm
        gemm += 6.0 * T * spec.hidden_size * m.num_experts / shape.sigma  # router GEMM (not in MFU)
    else:
        gemm, expert = lin + mlp_total, 0.0
    gemm += indexer_gemm
    moved = _overridden_gemm_flops(spec, workload, shape, kind, moe=moe and has_mlp,
                                   expert_rows=rows.gemm if moe and has_mlp else 1.0)
    gemm -= sum(d for _, d, _ in moved)
    expert -= sum(e for _, _, e in moved)
    scores_bytes = 0.0
    # a Mamba-2 / DeltaNet mixer (cost/hybrid.py): its projections at GEMM efficiency, its scan /
    # delta rule with the attention kernels' FLOPs, its conv, gates and norms as HBM traffic
    mixer_scan = mixer_bytes = 0.0
    if kind is not None and kind.mixer == "mamba":
        gemm += hybrid.mamba_gemm_flops_per_token(spec) * T / t
        mixer_scan = hybrid.mamba_scan_flops_per_token(spec) * T / t
        mixer_bytes = hybrid.mamba_elementwise_bytes_per_token(spec) * T / t
    elif kind is not None and kind.mixer == "gdn":
        gemm += hybrid.gdn_gemm_flops_per_token(spec) * T / t
        mixer_scan = hybrid.gdn_core_flops_per_token(spec) * T / t
        mixer_bytes = hybrid.gdn_elementwise_bytes_per_token(spec) * T / t
    bmm = 0.0  # unfused attention's batched GEMMs
    if unfused and has_attn:  # full s x s batched GEMMs (a window is only a mask there) at GEMM efficiency,
        bmm = 2 * core_full  # softmax/dropout memory bound
        scores_bytes = cal["unfused_attention_bytes_per_score"] * spec.num_attention_heads / t * T * s
        core = 0.0
    refwd = 4 / 3
    if recompute == "full":
        gemm, expert, core, bmm = gemm * refwd, expert * refwd, core * refwd, bmm * refwd
        moved = tuple((p, d * refwd, e * refwd) for p, d, e in moved)
    if recompute == "full":
        mixer_scan, mixer_bytes = mixer_scan * refwd, mixer_bytes * refwd
    elif recompute == "selective":
        core = core * refwd
        if unfused and has_attn:  # the recomputed core attention: QK^T, AV and the softmax forward again
            bmm += 2 * attention_core_flops_per_token_seq(spec) * T * s / t / 3
            scores_bytes *= refwd
    passes = (4 if recompute == "full" else 3)  # elementwise passes: fwd + 2 bwd (+ refwd)
    per_token_bytes = cal["elementwise_bytes_per_token_hidden"] * spec.hidden_size
    if kind is not None and not (kind.mlp and kind.mixer != "none"):
        # a one-block hybrid layer: one norm and one residual add, half a transformer layer's (no RoPE
        # outside attention: position_embedding_type none in Nemotron-H)
        per_token_bytes /= 2
    # the MLP activation (SwiGLU / GeLU / squared ReLU) on [T, F/t] per rank (not split by SP);
    # routed experts: (T/sigma)*k tokens of width F_m on every rank of the expert grid (balanced routing)
    # (without the fused kernel, ``Workload.activation_fusion``: each PyTorch op's traffic, the experts' with the
    # routing-probability scaling)
    gate = "gated" if spec.swiglu else "plain"
    if workload.activation_fusion:
        act = routed_act = cal["activation_bytes_per_token_ffn"][gate]
    else:
        unfused = cal["activation_bytes_per_token_ffn_unfused"]
        act, routed_act = unfused[gate], unfused[gate + "_weighted"]
    if not has_mlp:
        ffn_bytes = 0.0
    elif moe:
        m = spec.moe
        ffn_bytes = act * T * m.shared_expert_ffn_hidden_size / t \
            + routed_act * T / shape.sigma * m.top_k * m.expert_ffn_hidden_size
    else:
        ffn_bytes = act * T * spec.ffn_hidden_size / t
    if workload.quantized:  # NVFP4 is block-scaled too (a scale per 16 elements): the block-scaling passes
        # (a precision recipe's bf16 modules quantize nothing: the casts scale with the quantized GEMM share)
        bf16_share = sum(d + e for p, d, e in moved if p == "bf16") / max(gemm + expert + sum(
            d + e for _, d, e in moved), 1e-30)
        per_token_bytes += cal["fp8_cast_bytes_per_token_hidden"] * spec.hidden_size * (1.0 - bf16_share) * (
            cal["block_scaling_cast_factor"] if workload.block_scaled_fp8 or workload.precision == "fp4" else 1.0)
    elementwise = passes / 3 * (per_token_bytes * T / shape.sigma + ffn_bytes) + scores_bytes * (4 / 3 if recompute == "full"
                                                                                   else 1.0)
    if moe and has_mlp:
        elementwise += passes / 3 * 8 * (T / shape.sigma) * spec.moe.top_k * shape.etp * spec.expert_hidden_size \
            * rows.dispatch
    if bmm and workload.quantized:
        # torch's baddbmm / bmm in CoreAttention: outside Transformer Engine's quantized linears, bf16 in every run
        bf16 = next(((d, e) for p, d, e in moved if p == "bf16"), (0.0, 0.0))
        moved = tuple(sorted([m for m in moved if m[0] != "bf16"] + [("bf16", bf16[0] + bmm, bf16[1])]))
    else:
        gemm += bmm
    return LayerWork(gemm, expert, core + mixer_scan, elementwise + mixer_bytes, moved)


def module_weights(spec: ModelSpec, shape: ActivationShape, kind: LayerKind | None, *, moe: bool, ep: int = 1
                   ) -> dict[str, float]:
    """GEMM weights one rank holds of each TE linear module of a layer (``layers.gemm_modules``' names): split over
    TP, the latent projections duplicated, ``E/ep`` local experts of width ``F_m/etp``; fc1 holds ``f_glu`` of an
    MLP's ``f_glu + 1`` parts. (The router is not a TE linear.)

    >>> from megasolve.models.presets import load_preset
    >>> w = module_weights(load_preset("llama-3.1-8b"), ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True),
    ...                    None, moe=False)
    >>> w["mlp.linear_fc1"] == 2 * 4096 * 14336 / 2, w["self_attention.linear_proj"] == 4096 * 4096 / 2
    (True, True)
    """
    t, h = shape.tp, spec.hidden_size
    glu = spec.gated_factor / (spec.gated_factor + 1)
    has_attn = kind is None or kind.mixer == "attention"
    has_mlp = kind is None or kind.mlp
    out: dict[str, float] = {}
    if has_attn:
        out.update({m: f / 6.0 / t for m, f in attention_linear_module_flops_per_token(spec).items()})
    elif kind.mixer in ("mamba", "gdn"):
        prefix = "mixer." if kind.mixer == "mamba" else "self_attention."
        width_in, width_out = ((hybrid.mamba_projection_width(spec), spec.mamba.d_inner) if kind.mixer == "mamba"
                               else (hybrid.gdn_projection_width(spec), hybrid.gdn_value_width(spec)))
        out.update({prefix + "in_proj": h * width_in / t, prefix + "out_proj": h * width_out / t})
    if has_mlp and moe:
        _, shared_pt, latent_pt = moe_mlp_flops_per_token(spec)
        m = spec.moe
        experts = m.num_experts / ep * spec.expert_hidden_size * m.expert_ffn_hidden_size \
            * (spec.gated_factor + 1) / shape.etp
        out.update({"mlp.experts.linear_fc1": experts * glu, "mlp.experts.linear_fc2": experts * (1 - glu),
                    "mlp.shared_experts.linear_fc1": shared_pt / 6.0 / t * glu,
                    "mlp.shared_experts.linear_fc2": shared_pt / 6.0 / t * (1 - glu),
                    "mlp.fc1_latent_proj": latent_pt / 12.0, "mlp.fc2_latent_proj": latent_pt / 12.0})
    elif has_mlp:
        mlp = mlp_flops_per_token(spec, False) / 6.0 / t
        out.update({"mlp.linear_fc1": mlp * glu, "mlp.linear_fc2": mlp * (1 - glu)})
    return out


def _overridden_gemm_flops(spec: ModelSpec, workload: Workload, shape: ActivationShape, kind: LayerKind | None, *,
                           moe: bool, expert_rows: float) -> tuple[tuple[str, float, float], ...]:
    """The GEMM FLOPs of one layer (forward + backward, before recompute) that its precision recipe runs in another
    precision (``Workload.gemm_overrides``, per ``layers.gemm_modules`` module), summed per precision:
    ``(precision, dense-curve FLOPs, grouped expert FLOPs)``. A module's FLOPs are 6 x its weights x the tokens it
    sees (``module_weights``): the rank's ``T`` (``T/sigma`` for the duplicated latent projections), the routed
    experts' ``routed_pt T/t`` rows x the routing padding."""
    if not workload.gemm_overrides:
        return ()
    T = shape.tokens(workload)
    weights = module_weights(spec, shape, kind, moe=moe)
    moved: dict[str, list[float]] = {}
    for module, _ in workload.gemm_overrides:
        if module not in weights:
            continue
        precision = workload.module(module).precision
        if module.startswith("mlp.experts."):
            share = spec.gated_factor / (spec.gated_factor + 1)
            routed = moe_mlp_flops_per_token(spec)[0] * T / shape.tp * expert_rows
            moved.setdefault(precision, [0.0, 0.0])[1] += routed * (share if module.endswith("fc1") else 1 - share)
        else:
            tokens = T / shape.sigma if "latent_proj" in module else T
            moved.setdefault(precision, [0.0, 0.0])[0] += 6.0 * weights[module] * tokens
    return tuple((p, d, e) for p, (d, e) in sorted(moved.items()))


def overridden_weights(spec: ModelSpec, workload: Workload, shape: ActivationShape, kind: LayerKind | None, *,
                       moe: bool, ep: int) -> tuple[tuple[str, float], ...]:
    """The rank's weights of the modules a precision recipe runs in another precision, per precision (their
    streamed bytes per element differ: ``weight_stream_bytes``)."""
    if not workload.gemm_overrides:
        return ()
    weights = module_weights(spec, shape, kind, moe=moe, ep=ep)
    out: dict[str, float] = {}
    for module, _ in workload.gemm_overrides:
        if module in weights:
            precision = workload.module(module).precision
            out[precision] = out.get(precision, 0.0) + weights[module]
    return tuple(sorted(out.items()))


def layer_weights_per_rank(spec: ModelSpec, shape: ActivationShape, *, moe: bool, ep: int,
                           kind: LayerKind | None = None) -> float:
    """GEMM weights of one decoder layer held by one rank (reference section 1.3-1.6, 1.9):
    attention projections and the dense MLP / shared experts split over TP, the router replicated,
    ``E/ep`` local experts of width ``F_m/etp``.

    >>> from megasolve.models.presets import load_preset
    >>> shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> # 2048*(4096 + 1024) + 4096*2048 (attention) + 2048*128 (router) + 16 experts * 3*2048*768
    >>> layer_weights_per_rank(load_preset("qwen3-30b-a3b"), shape, moe=True, ep=8)
    94633984.0
    """
    dense = attention_linear_flops_per_token(spec) / 6.0 / shape.tp
    if kind is not None and not kind.is_gpt:  # a hybrid / DeltaNet layer: its own blocks' weights
        dense = 0.0 if kind.mixer != "attention" else dense
        dense += {"mamba": hybrid.mamba_weights, "gdn": hybrid.gdn_weights}.get(
            kind.mixer, lambda _: 0.0)(spec) / shape.tp
        if not kind.mlp:
            return dense
    if not moe:
        return dense + mlp_flops_per_token(spec, False) / 6.0 / shape.tp
    m = spec.moe
    e_ffn = 3 if spec.swiglu else 2
    shared = spec.hidden_size * m.shared_expert_ffn_hidden_size * e_ffn / shape.tp
    router = spec.hidden_size * m.num_experts + spec.latent_projection_params
    experts = m.num_experts / ep * spec.expert_hidden_size * m.expert_ffn_hidden_size * e_ffn / shape.etp
    return dense + shared + router + experts


def weight_stream_bytes(weights: float, precision: str, recompute: str, grad_bytes: int = 4) -> float:
    """HBM traffic of a layer's GEMM weights per micro-batch, forward + backward: the forward GEMM
    and the dgrad GEMM each read the weight (bf16, or the FP8 / NVFP4 copy Transformer Engine caches
    across micro-batches, ``is_first_microbatch``; 1 byte, ``NVFP4_BYTES`` = 0.5625), and the wgrad GEMM
    accumulates into the fp32 ``main_grad`` in place (read + write, 8 bytes: Megatron
    ``--gradient-accumulation-fusion``,
    ``core/tensor_parallel/layers.py`` / TE ``fuse_wgrad_accumulation``, also in TE ``GroupedLinear``
    for the experts; 4 bytes with ``--grad-reduce-in-bf16``, ``grad_bytes = 2``). Full recompute
    reads the weights once more. Negligible for large dense GEMMs,
    but a grouped expert GEMM with few routed tokens per expert is bound by it (wgrad arithmetic
    intensity ~``n/4`` FLOP per byte for ``n`` tokens per expert).

    >>> weight_stream_bytes(1e6, "bf16", "none"), weight_stream_bytes(1e6, "fp8", "full")
    (12000000.0, 11000000.0)
    """
    weight_bytes = ELEMENT_BYTES[precision]
    reads = 3 if recompute == "full" else 2
    return weights * (reads * weight_bytes + 2 * grad_bytes)


# ---------------------------------------------------------------------------- Muon's Newton-Schulz step
MUON_NS_STEPS = 5  # Megatron-LM --muon-num-ns-steps default (ARG L2648 @d98e8a6)


def _muon_layer_matrices(spec: ModelSpec, layer: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """The full (un-sharded) 2-D weights Muon orthogonalises in one decoder layer, ``(rows, cols, count)``, dense
    and expert: the QKV weight split per query group into its query (and output-gate) rows and one key and one
    value head (``--muon-split-qkv`` default, ``emerging_optimizers.py::_get_qkv_split_shapes`` L150-163), the
    output projection, MLA's projections (Megatron does not split them: "TODO(deyuf): support MLA"), the MLP's
    fc1 (gate and up in one weight) and fc2, the router, the shared experts and each routed expert's fc1 / fc2.
    A Mamba / DeltaNet mixer is costed as its in / out projections (``hybrid.*_weights``) of width ``h``."""
    h, dense, expert = spec.hidden_size, [], []
    kind = spec.layer_kind(layer) if spec.is_hybrid else "gpt"
    gdn = spec.linear_attention_pattern is not None and spec.linear_attention_pattern[layer]
    if kind == "mamba" or gdn:
        weights = hybrid.mamba_weights(spec) if kind == "mamba" else hybrid.gdn_weights(spec)
        dense.append((h, round(weights / h), 1))
    elif kind in ("gpt", "attention"):
        n = spec.num_attention_heads
        if spec.mla is None:
            d, g = spec.kv_channels, spec.num_query_groups
            q_rows = n // g * d * (2 if spec.attention_output_gate else 1)
            dense += [(q_rows, h, g), (d, h, 2 * g), (h, n * d, 1)]
        else:
            mla = spec.mla
            qk = mla.qk_head_dim + mla.qk_pos_emb_head_dim
            dense += [(n * qk, h, 1)] if mla.q_lora_rank is None else [(mla.q_lora_rank, h, 1),
                                                                        (n * qk, mla.q_lora_rank, 1)]
            dense += [(mla.kv_lora_rank + mla.qk_pos_emb_head_dim, h, 1),
                      (n * (mla.qk_head_dim + mla.v_head_dim), mla.kv_lora_rank, 1), (h, n * mla.v_head_dim, 1)]
    has_mlp = kind in ("gpt", "mlp", "moe")
    if has_mlp and spec.is_moe_layer(layer):
        m = spec.moe
        dense.append((m.num_experts, h, 1))
        if m.shared_expert_ffn_hidden_size:
            fs = m.shared_expert_ffn_hidden_size
            dense += [(spec.gated_factor * fs, h, 1), (h, fs, 1)]
        w, fm = spec.expert_hidden_size, m.expert_ffn_hidden_size
        expert += [(spec.gated_factor * fm, w, m.num_experts), (w, fm, m.num_experts)]
    elif has_mlp:
        dense += [(spec.gated_factor * spec.ffn_hidden_size, h, 1), (h, spec.ffn_hidden_size, 1)]
    return dense, expert


def muon_ns_flops_per_param(spec: ModelSpec) -> tuple[float, float]:
    """Newton-Schulz FLOPs per parameter of one Muon step, averaged over the model's dense and expert Muon
    weights (decoder layers; MTP layers are like the last): each step of the quintic iteration on an ``m x n``
    matrix (``m <= n``) is ``A = X X^T`` (``2 m^2 n``), ``B = b A + c A^2`` (``2 m^3``), ``X = a X + B X``
    (``2 m^2 n``), so ``MUON_NS_STEPS (4 m^2 n + 2 m^3)`` per matrix (Jordan et al. 2024, "Muon: An optimizer
    for hidden layers"; emerging_optimizers ``newton_schulz``).

    >>> from megasolve.models.presets import load_preset
    >>> dense, expert = muon_ns_flops_per_param(load_preset("llama-3.1-8b"))
    >>> round(dense), expert  # ~20 x the smaller side: 4,096 for the MLP, 512 for a query group's rows
    (82857, 0.0)
    """
    totals = {"dense": [0.0, 0], "expert": [0.0, 0]}
    for layer in range(spec.num_layers):
        for part, matrices in zip(("dense", "expert"), _muon_layer_matrices(spec, layer)):
            for rows, cols, count in matrices:
                m, n = sorted((rows, cols))
                totals[part][0] += count * MUON_NS_STEPS * (4 * m * m * n + 2 * m ** 3)
                totals[part][1] += count * rows * cols
    return tuple(f / p if p else 0.0 for f, p in totals.values())  # type: ignore[return-value]


def logits_work(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> LayerWork:
    """Output layer + cross entropy on the last stage (and each MTP depth's head): ``6*h*V/t`` per
    token plus the loss's HBM traffic, ``loss_bytes_per_logit[workload.cross_entropy]`` per logit
    (``calibration.yaml``: 52 B for Megatron's unfused fp32 loss, 28 B for its fused ``native`` one,
    22 B for Transformer Engine's since TE 2.18 (an fp32 gradient), 10 B for TE's before it).

    >>> from megasolve.models.presets import load_preset
    >>> from megasolve.models.layout import Workload
    >>> spec, shape = load_preset("llama-3.1-8b"), ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> [logits_work(spec, Workload(seq_length=4096, cross_entropy=k), shape).elementwise_bytes / 4096 / 128256
    ...  for k in ("unfused", "native", "te", "te-bf16grad")]
    [52.0, 28.0, 22.0, 10.0]
    """
    T, t = shape.tokens(workload), shape.tp
    V = spec.padded_vocab_size(t)
    heads = 1 + spec.mtp_num_layers
    gemm = heads * 6.0 * spec.hidden_size * V * T / t
    gemm += spec.mtp_num_layers * 6.0 * (2 * spec.hidden_size * spec.hidden_size) * T / t  # eh_proj
    per_logit = calibration()["time"]["loss_bytes_per_logit"][workload.cross_entropy]
    return LayerWork(gemm, 0.0, 0.0, heads * per_logit * V * T / t)


# ---------------------------------------------------------------------------- compute time
def gemm_efficiency(gpu: GpuSpec, precision: str, width: float) -> float:
    """Fraction of dense peak a GEMM reaches when its per-rank width (the smaller of M, N and K after
    TP/ETP/EP splitting) is ``width``: ``e_max * width / (width + w_half)``.

    The saturating form is the roofline/occupancy behaviour measured for cuBLAS/CUTLASS GEMMs (e.g.
    NVIDIA "GPU Performance Background" / "Matrix Multiplication Background" user guides: small
    dimensions under-fill the SMs and tiles); ``e_max`` per chip family and precision (``chip_family``:
    B200 and GB200 are the same silicon, as are B300 and GB300) and ``w_half`` are fitted on published
    runs by ``benchmarks/calibrate_time.py`` (``calibration.yaml``, ``time``).
    """
    cal = calibration()["time"]
    table = cal["gemm_efficiency"]
    family = table.get(chip_family(gpu), table["default"])
    e_max = family.get(precision, table["default"][precision])
    return e_max * width / (width + cal["gemm_half_width"])


def attention_efficiency(gpu: GpuSpec) -> float:
    """Flash-attention fwd+bwd FLOP/s as a fraction of the bf16 dense peak (per GPU where calibrated:
    Blackwell Ultra doubles the softmax exponent throughput, NVIDIA Blackwell Ultra announcement)."""
    table = calibration()["time"]["attention_efficiency"]
    if isinstance(table, dict):
        return table.get(chip_family(gpu), table["default"])
    return table


def expert_gemm_efficiency(gpu: GpuSpec, precision: str, width: float) -> float:
    """Grouped expert GEMMs (TE ``GroupedLinear`` / cuBLASLt grouped GEMM): the dense curve at the
    expert's per-rank width times ``grouped_gemm_factor``. Few routed tokens per expert do not lower
    the FLOP rate of the tiles themselves (balanced routing fills every 128-row tile); their cost is
    the expert weights streamed per micro-batch (``weight_stream_bytes``), which the step model
    charges at HBM bandwidth."""
    cal = calibration()["time"]
    return gemm_efficiency(gpu, precision, width) * cal["grouped_gemm_factor"] \
        * cal.get("moe_precision_factor", {}).get(precision, 1.0)


def work_time_s(work: LayerWork, gpu: GpuSpec, precision: str, gemm_width: float, expert_width: float) -> float:
    """Seconds for ``work`` on ``gpu``: GEMMs at their efficiency, flash attention at its own, and
    elementwise traffic at HBM bandwidth."""
    peak = gpu.peak_flops(precision)
    seconds = work.gemm_flops / (peak * gemm_efficiency(gpu, precision, gemm_width)) if work.gemm_flops else 0.0
    if work.expert_flops:
        seconds += work.expert_flops / (peak * expert_gemm_efficiency(gpu, precision, expert_width))
    for other, dense, grouped in work.gemm_at:  # a precision recipe's modules, at their precision's rate
        other_peak = gpu.peak_flops(other)
        if dense:
            seconds += dense / (other_peak * gemm_efficiency(gpu, other, gemm_width))
        if grouped:
            seconds += grouped / (other_peak * expert_gemm_efficiency(gpu, other, expert_width))
    if work.attention_flops:
        seconds += work.attention_flops / (gpu.bf16_flops * attention_efficiency(gpu))
    return seconds + work.elementwise_bytes / gpu.hbm_bytes_per_s
