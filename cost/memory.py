"""Per-GPU memory of every pipeline stage, as Megatron-Core allocates it. Pure functions, bytes.

Sources (``reference/megatron.md``): static bytes per parameter section 2; activations per layer
section 3.3 (dense, TE spec, flash attention), 3.4 (MoE, alltoall dispatcher), 3.5 (MLA);
recompute 3.3; micro-batches in flight 3.6; embedding and logits 3.7; memory outside the caching
allocator 3.8 (a calibrated reserve, ``cost/calibration.yaml``).

Notation: ``T = s*b/c`` tokens per CP rank, ``sigma = t`` with sequence parallelism else 1,
``delta = 1`` when hidden dropout is on (its masks are kept), bf16 activations (2 bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from megasolve.cost.calibration import calibration
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import RankParams, stage_layer_ids, stage_params
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster

BF16 = 2
FP32 = 4


# ---------------------------------------------------------------------------- static memory
@dataclass(frozen=True, slots=True)
class StaticBytes:
    weights: float
    grads: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer


def static_bytes(params: RankParams, *, dense_shards: int, expert_shards: int, distributed_optimizer: bool,
                 precision: str = "bf16") -> StaticBytes:
    """Weights, fp32 main grads and Adam state of one rank (section 2).

    bf16 params (2 B) + fp32 main grads (4 B, full size even with the distributed optimizer) + fp32
    master copy and Adam m, v (12 B) sharded over ``dense_shards = DP*CP`` for dense parameters and
    ``expert_shards = EDP`` for experts with the distributed optimizer (``6 + 12/d``), else 18 B.
    FP8 training keeps bf16 parameters and adds the cached FP8 weight and its transpose (1 + 1 B)
    for every GEMM weight (``calibration: fp8_weight_cache_bytes_per_param``).

    >>> s = static_bytes(RankParams(tp_sharded=1_000_000), dense_shards=4, expert_shards=1,
    ...                  distributed_optimizer=True)
    >>> s.weights, s.grads, s.optimizer  # 2 + 4 + 12/4 bytes per parameter
    (2000000, 4000000, 3000000.0)
    """
    weights = BF16 * params.total
    if precision == "fp8":
        weights += calibration()["memory"]["fp8_weight_cache_bytes_per_param"] * (params.tp_sharded + params.expert)
    grads = FP32 * params.total
    if distributed_optimizer:
        optimizer = 12 * params.dense / dense_shards + 12 * params.expert / expert_shards
    else:
        optimizer = 12 * params.total
    return StaticBytes(weights, grads, optimizer)


# ---------------------------------------------------------------------------- activations per layer
def gemm_input_bytes(workload: Workload) -> int:
    """Bytes per element of a saved GEMM input: Transformer Engine keeps the FP8-cast copy (1 B) of
    the LN output / attention output / activation output when training in FP8, bf16 (2 B) otherwise."""
    return 1 if workload.precision == "fp8" else BF16


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationShape:
    """The axes that size one layer's activations on one rank."""

    tp: int
    cp: int
    mbs: int
    sequence_parallel: bool
    etp: int = 1

    def tokens(self, workload: Workload) -> float:
        """``T``: tokens of one micro-batch on one CP rank."""
        return workload.seq_length * self.mbs / self.cp

    @property
    def sigma(self) -> int:
        return self.tp if self.sequence_parallel else 1


def attention_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape,
                               selective: bool = False) -> float:
    """Saved tensors of one attention block (section 3.3 GQA / 3.5 MLA), per micro-batch per rank.

    GQA: ``(4 + delta)*T*h/sigma`` (input LN in/out) ``+ 2*T*d*(n/t + 2*g_r)`` (Q, K, V) ``+ 2*T*n*d/t``
    (O) ``+ 4*T*n/t`` (fp32 softmax LSE). Unfused attention adds ``(4 + delta)*n/t*T*s/c`` bytes of
    scores, softmax and dropout (Korthikanti ``5as/h``), unless selective recompute drops them.

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-70b")
    >>> attention_activation_bytes(spec, Workload(seq_length=8192), ActivationShape(tp=4, cp=2, mbs=1,
    ...                            sequence_parallel=True)) / 4096  # bytes per token: 4*8192/4 + 2*128*(16+4) + 2*8192/4 + 64
    18496.0
    """
    T, t, sigma = shape.tokens(workload), shape.tp, shape.sigma
    h, n = spec.hidden_size, spec.num_attention_heads
    delta = 1 if workload.hidden_dropout > 0 else 0
    a = gemm_input_bytes(workload)
    total = (BF16 + a + delta) * T * h / sigma
    if spec.mla is None:
        d, g = spec.kv_channels, spec.num_query_groups
        g_local = max(g / t, 1)
        total += BF16 * T * d * (n / t + 2 * g_local) + a * T * n * d / t + FP32 * T * n / t
    else:
        mla = spec.mla
        qk, r, dv = mla.qk_head_dim, mla.qk_pos_emb_head_dim, mla.v_head_dim
        latents = (mla.q_lora_rank or 0) + mla.kv_lora_rank
        total += 2 * BF16 * T * latents / sigma + BF16 * T * r / sigma
        total += BF16 * T * (n / t) * ((qk + r) + (qk + dv) + (qk + r) + dv) + a * T * (n / t) * dv
        total += FP32 * T * n / t
    if workload.attention == "unfused" and not selective:
        total += (4 + delta) * (n / t) * T * workload.seq_length / shape.cp
    return total


def mlp_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, moe: bool) -> float:
    """Saved tensors of the MLP half of a layer (section 3.3 dense, 3.4 MoE), per micro-batch per rank.

    Dense: ``(4 + delta)*T*h/sigma + 2*T*(f_glu + 1)*F/t``.
    MoE: pre-MLP LN ``(4 + delta)*T*h/sigma``, router state ``9*T*E/sigma``, local experts
    ``T_e*(2h + 2*(f_glu + 1)*F_m/etp + 4)`` with ``T_e = (T/sigma)*k*etp`` routed tokens (balanced
    routing), shared experts ``2*T*(f_glu + 1)*F_s/t``.
    """
    T, t, sigma = shape.tokens(workload), shape.tp, shape.sigma
    h = spec.hidden_size
    delta = 1 if workload.hidden_dropout > 0 else 0
    a = gemm_input_bytes(workload)
    total = (BF16 + a + delta) * T * h / sigma
    glu = spec.gated_factor

    def mlp(tokens: float, width: float) -> float:  # fc1 output (bf16) + activation output (fc2 input)
        return tokens * (BF16 * glu + a) * width

    if not moe:
        return total + mlp(T, spec.ffn_hidden_size / t)
    m = spec.moe
    routed_tokens = (T / sigma) * m.top_k * shape.etp
    total += 9 * T * m.num_experts / sigma
    total += routed_tokens * (a * h + FP32) + mlp(routed_tokens, m.expert_ffn_hidden_size / shape.etp)
    total += mlp(T, m.shared_expert_ffn_hidden_size / t)
    return total


def layer_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
                           recompute: str) -> float:
    """Bytes one layer keeps for backward, per micro-batch per rank.

    ``recompute``: ``"none"``; ``"selective"`` (core attention recomputed: only the unfused s x s
    tensors go, so with flash attention it saves nothing; TC L1983-1989 warns the same);
    ``"full"`` (only the layer input ``2*T*h/sigma`` is kept, section 3.3).
    """
    if recompute == "full":
        return BF16 * shape.tokens(workload) * spec.hidden_size / shape.sigma
    return (attention_activation_bytes(spec, workload, shape, selective=recompute == "selective")
            + mlp_activation_bytes(spec, workload, shape, moe))


def moe_dispatch_transient_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Permute / all-to-all buffers live while one MoE layer runs (section 3.4: 2-3 extra
    ``[T*k, h]`` buffers); ``calibration: moe_dispatch_buffers`` copies of the routed tokens."""
    if not spec.is_moe:
        return 0.0
    routed_tokens = (shape.tokens(workload) / shape.sigma) * spec.moe.top_k * shape.etp
    return calibration()["memory"]["moe_dispatch_buffers"] * BF16 * routed_tokens * spec.hidden_size


def first_stage_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Per in-flight micro-batch on the first stage: int64 token ids (and position ids) and the
    embedding dropout mask when dropout is on (section 3.7)."""
    T = shape.tokens(workload)
    delta = 1 if workload.hidden_dropout > 0 else 0
    return 2 * 8 * T + delta * T * spec.hidden_size / shape.sigma


def last_stage_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """One micro-batch's loss path on the last stage (section 3.7): final-LN input/output
    ``4*T*h/sigma`` and the logits ``[T, V/t]``: bf16 output + fp32 copy reused in place by the
    vocab-parallel cross entropy = ``6*T*V/t`` at the peak, for the main head and each MTP depth."""
    T, t = shape.tokens(workload), shape.tp
    V = spec.padded_vocab_size(t)
    heads = 1 + spec.mtp_num_layers
    return 4 * T * spec.hidden_size / shape.sigma + heads * (BF16 + FP32) * T * V / t


def mtp_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, recompute: str) -> float:
    """MTP depths (section 1.7): one transformer layer of the last layer's kind each, plus the
    enorm/hnorm outputs and the ``eh_proj`` input (``2h`` wide): ``8*T*h/sigma`` per depth."""
    if not spec.mtp_num_layers:
        return 0.0
    layer = layer_activation_bytes(spec, workload, shape, moe=spec.is_moe_layer(spec.num_layers - 1),
                                   recompute=recompute)
    T = shape.tokens(workload)
    return spec.mtp_num_layers * (layer + 8 * T * spec.hidden_size / shape.sigma)


# ---------------------------------------------------------------------------- pipeline schedule
def inflight_microbatches(pp: int, vpp: int, num_microbatches: int, stage: int) -> float:
    """Activation sets live on ``stage``, in units of "all the stage's layers for one micro-batch"
    (section 3.6, SCH ``get_pp_rank_microbatches`` L929-986).

    1F1B: ``min(p - r, m)``. Interleaved: ``min(2(p - r - 1) + (v - 1)p + 1, m*v)`` chunk units of
    ``L_r/v`` layers, i.e. that count divided by ``v``; for r = 0 and m >= p this is TMU's penalty
    ``p*(1 + (p - 1)/(p*v))``.

    >>> inflight_microbatches(4, 1, 64, 0), inflight_microbatches(4, 1, 64, 3), inflight_microbatches(4, 1, 2, 0)
    (4, 1, 2)
    >>> inflight_microbatches(4, 2, 64, 0)  # (2*3 + 1*4 + 1) / 2
    5.5
    """
    if vpp == 1:
        return min(pp - stage, num_microbatches)
    warmup = 2 * (pp - stage - 1) + (vpp - 1) * pp
    return min(warmup + 1, num_microbatches * vpp) / vpp


# ---------------------------------------------------------------------------- whole stages
@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    stage: int
    num_layers: int
    params: int
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    other_bytes: float

    @property
    def allocated_bytes(self) -> float:
        """Predicted peak of PyTorch's caching allocator (``torch.cuda.max_memory_allocated``)."""
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def total_bytes(self) -> float:
        return self.allocated_bytes + self.other_bytes


def other_bytes(cluster: Cluster) -> float:
    """Memory outside the caching allocator (section 3.8): CUDA context, NCCL communicators and
    buffers, allocator fragmentation. A calibrated reserve (``calibration: other_reserve_gb``)."""
    cal = calibration()["memory"]
    return cal["other_reserve_gb"] * 1e9 + cal["other_reserve_fraction"] * cluster.gpu.usable_memory_bytes


def recomputed_layers(layout: Layout, chunks: list[list[int]]) -> set[int]:
    """Layers stored as inputs only: all with full recompute, or the first ``recompute_num_layers``
    of each virtual chunk with the block method (TC L1901-1925)."""
    if layout.recompute != "full":
        return set()
    if layout.recompute_num_layers is None:
        return {i for chunk in chunks for i in chunk}
    return {i for chunk in chunks for i in chunk[:layout.recompute_num_layers]}


def stage_memory(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[StageMemory]:
    """Memory of one rank of every pipeline stage. Peak = max over stages of ``total_bytes``."""
    shape = ActivationShape(tp=layout.tp, cp=layout.cp, mbs=layout.mbs, sequence_parallel=layout.sequence_parallel,
                            etp=layout.etp)
    m = workload.num_microbatches(layout)
    layer_kind = "selective" if layout.recompute == "selective" else "none"
    full_layer = {moe: layer_activation_bytes(spec, workload, shape, moe=moe, recompute=layer_kind)
                  for moe in ((False, True) if spec.is_moe else (False,))}
    input_only = layer_activation_bytes(spec, workload, shape, moe=False, recompute="full")
    reserve = other_bytes(cluster)
    out = []
    for params, chunks in zip(stage_params(spec, layout), stage_layer_ids(spec, layout)):
        stored = recomputed_layers(layout, chunks)
        per_microbatch = sum(input_only if i in stored else full_layer[spec.is_moe_layer(i)]
                             for chunk in chunks for i in chunk)
        transient = 0.0
        if stored:  # backward re-materialises one recomputed layer at a time
            transient = max(full_layer[spec.is_moe_layer(i)] for i in stored)
        if any(spec.is_moe_layer(i) for chunk in chunks for i in chunk):
            transient += moe_dispatch_transient_bytes(spec, workload, shape)
        stage = params.stage
        inflight = inflight_microbatches(layout.pp, layout.vpp, m, stage)
        activations = inflight * per_microbatch + transient
        if params.has_embedding:
            activations += math.ceil(inflight) * first_stage_extra_bytes(spec, workload, shape)
        if params.has_output:
            activations += last_stage_extra_bytes(spec, workload, shape)
            activations += mtp_activation_bytes(spec, workload, shape, layer_kind)
        static = static_bytes(params.params, dense_shards=layout.dp * layout.cp, expert_shards=layout.expert_dp,
                              distributed_optimizer=layout.distributed_optimizer, precision=workload.precision)
        out.append(StageMemory(stage=stage, num_layers=params.num_layers, params=params.total,
                               weights_bytes=static.weights, grads_bytes=static.grads,
                               optimizer_bytes=static.optimizer, activations_bytes=activations,
                               other_bytes=reserve))
    return out
