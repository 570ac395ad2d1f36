"""Step time: per-layer compute and exposed communication, per-stage micro-batch time, the pipeline
schedule, the data-parallel tail and the optimizer. Pure functions, seconds per rank.

Sources: ``reference/megatron.md`` section 5 (what is communicated, per layer / micro-batch / step),
section 6.1 (pipeline: ``T_pp = m*max_r(tau_r) + (sum_r(tau_r) - max_r(tau_r))/v``, which is
``(m - 1)*max + sum`` for 1F1B and Narayanan's ``(p - 1)/(v*m)`` bubble for equal interleaved
stages), section 5.5 (DP reduce-scatter overlaps only the last micro-batch's backward).
Efficiency factors: ``cost/calibration.yaml`` (``time``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from megasolve.cost import combine
from megasolve.cost.calibration import calibration
from megasolve.cost.comm import all_to_all_time_s, collective_latency_s, collective_time_s
from megasolve.cost.compute import (LayerWork, layer_weights_per_rank, layer_work, logits_work,
                                    model_flops_per_sequence, muon_ns_flops_per_param, overridden_weights,
                                    weight_stream_bytes, work_time_s)
from megasolve.cost.layers import LayerKind, layer_kind, mtp_layer_kind, stage_layers
from megasolve.cost import hybrid
from megasolve.cost.memory import (DEFAULT_RECOMPUTE_MODULES, ActivationShape, adam_state_bytes_per_param,
                                   bf16_weights, block_modules, layer_activation_bytes, offloaded_layer_bytes)
from megasolve.cost.moe_routing import routed_rows
from megasolve.cost.offload import activation_offload_exposed_s, optimizer_offload_s
from megasolve.cost.recompute import selective_extra_work, uses_core_attn
from megasolve.models.layout import CP_COMM_FASTEST, CP_COMM_TYPES, Layout, Workload
from megasolve.models.params import RankParams, stage_params
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster
from megasolve.topology.gpus import GpuSpec

BF16 = 2
FP32 = 4
TERMS = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "offload")


@dataclass(frozen=True, slots=True)
class LayerTime:
    """One layer, one micro-batch, forward + backward, on one rank (exposed communication only)."""

    compute: float = 0.0
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    pp_comm: float = 0.0
    dp_comm: float = 0.0  # Megatron-FSDP's per-micro-batch gathers / reduce-scatters (0 otherwise)
    offload: float = 0.0  # activation copies to / from host memory not hidden by compute

    def __add__(self, other: LayerTime) -> LayerTime:
        return LayerTime(*(getattr(self, k) + getattr(other, k) for k in TERMS))

    def __mul__(self, k: float) -> LayerTime:
        return LayerTime(*(getattr(self, t) * k for t in TERMS))

    __rmul__ = __mul__

    @property
    def total(self) -> float:
        return sum(getattr(self, t) for t in TERMS)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommShape:
    """Everything about a layer's parallel shape that communication depends on."""

    shape: ActivationShape
    ep: int = 1


def _dense_gemm_width(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Smallest per-rank GEMM dimension of a layer: ``h``, ``F/t``, attention width ``n*d/t`` and the
    token count ``T`` of the micro-batch."""
    heads_width = spec.num_attention_heads * (spec.kv_channels if spec.mla is None else spec.mla.v_head_dim) / shape.tp
    return min(spec.hidden_size, spec.ffn_hidden_size / shape.tp, heads_width, shape.tokens(workload))


def _expert_gemm_width(spec: ModelSpec, workload: Workload, shape: ActivationShape, ep: int) -> float:
    """Smallest per-rank dimension of a routed expert's GEMMs: ``h``, ``F_m/etp`` and the tokens each
    local expert receives, ``(T/sigma) * k * ep * etp / E`` for balanced routing (the M dimension of the
    grouped GEMM: few tokens per expert under-fill the tiles)."""
    m = spec.moe
    per_expert = shape.tokens(workload) / shape.sigma * m.top_k * ep * shape.etp / m.num_experts
    return min(spec.expert_hidden_size, m.expert_ffn_hidden_size / shape.etp, per_expert)


def _none_of(pool: float, held: float, k: int) -> float:
    """``C(pool - held, k) / C(pool, k)``: the chance that ``k`` experts drawn without replacement from
    ``pool`` miss the ``held`` ones."""
    miss = 1.0
    for i in range(k):
        miss *= max(pool - held - i, 0.0) / (pool - i) if pool - i > 0 else 0.0
    return miss


def remote_domains_per_token(num_experts: int, top_k: int, num_domains: int, groups: int = 1,
                             group_topk: int = 1) -> float:
    """Expected number of *other* NVLink domains (or GPUs) a token's ``top_k`` experts live in, experts
    spread evenly and contiguously over ``num_domains`` (Megatron's local experts of EP rank ``r`` are
    ``r*E/ep ..``) and chosen uniformly: ``(D-1) * (1 - C(E - E/D, k)/C(E, k))``. A deduplicating
    dispatcher (DeepEP / HybridEP, Megatron ``--moe-token-dispatcher-type flex``; reference section 5.6)
    sends one copy per remote domain instead of one per expert.

    Group-limited routing (``groups`` contiguous expert groups, ``group_topk`` of them per token:
    ``moe/moe_utils.py::group_limited_topk``; DeepSeek-V3's node-limited routing, 8 groups, 4 per token)
    confines a token's experts to its chosen groups, each chosen uniformly (balanced routing): a domain
    holding ``g = G/D`` groups is touched with ``sum_j P(j of its groups chosen) (1 - C(q E/G - j E/G, k)
    / C(q E/G, k))``; a group spanning ``D/G`` domains makes each of them ``q/G (1 - C(q E/G - E/D, k)
    / C(q E/G, k))``. Other splits are priced as ungrouped.

    >>> round(remote_domains_per_token(256, 8, 4), 3)  # DeepSeek-V3, EP over 4 domains
    2.711
    >>> round(remote_domains_per_token(256, 8, 8), 2), round(remote_domains_per_token(256, 8, 8, 8, 4), 2)
    (4.63, 3.18)
    """
    if num_domains <= 1:
        return 0.0
    E, D, G, q = num_experts, num_domains, groups, group_topk
    if G > 1 and q < G and E % G == 0 and q * E // G >= top_k:
        pool = q * E / G
        if G % D == 0:
            g = G // D
            touched = sum(math.comb(g, j) * math.comb(G - g, q - j) / math.comb(G, q)
                          * (1.0 - _none_of(pool, j * E / G, top_k)) for j in range(1, min(g, q) + 1))
            return (D - 1) * touched
        if D % G == 0:
            return (D - 1) * q / G * (1.0 - _none_of(pool, E / D, top_k))
    return (D - 1) * (1.0 - _none_of(E, E / D, top_k))


def tp_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *, moe: bool,
              recompute: str, kind: LayerKind | None = None) -> float:
    """Exposed TP collectives of one layer (section 5.2). ``M_h = 2*(s/c)*b*h``.

    With SP: dense layer ``6 AG + 4 RS`` (fwd 2+2, bwd 4+2); without: ``4 AR``. In FP8 / NVFP4 the linear
    layers' all-gathers move quantized bytes (``Workload.tp_gather_bytes``), the reduce-scatters bf16. An MoE
    layer does this for attention (half) and for shared experts (half), not for routed experts. Full recompute repeats
    the forward collectives. MLA gathers its latents instead of ``h``. A hybrid layer (``kind``) has the
    blocks it holds: a Mamba-2 / DeltaNet mixer is a column-parallel ``in_proj`` of ``h`` and a
    row-parallel ``out_proj`` back to ``h`` (``mamba_mixer.py`` L281-294, L435-451), one half like attention's.

    Exposure without ``--tp-comm-overlap`` (Megatron's default): every collective on the critical
    path except, per column-parallel linear, the backward's input re-gather (issued async before the
    dgrad GEMM) and its dgrad reduce-scatter / all-reduce (async before the wgrad GEMM):
    ``LinearWithGradAccumulationAndAsyncCommunication.backward``, ``tensor_parallel/layers.py``
    L666-710 @d98e8a6 (TE's linear does the same). With ``Workload.tp_comm_overlap`` (TE userbuffers
    split each collective into ``tp`` chunks pipelined with the GEMM; needs sequence parallelism, ARG
    L1441-1442): ``tp_overlap_exposed_fraction`` of all of them stays exposed (the first / last chunk
    of each pipelined ring and the SMs the copies take).
    """
    t = shape.tp
    if t == 1:
        return 0.0
    link = cluster.group_link(1, t)
    tokens = shape.tokens(workload)
    m_h = BF16 * tokens * spec.hidden_size
    attn_in = m_h if spec.mla is None else BF16 * tokens * (
        (spec.mla.q_lora_rank or spec.hidden_size) + spec.mla.kv_lora_rank + spec.mla.qk_pos_emb_head_dim)
    # (gathered input, reduced output, the column- and row-parallel modules) per sub-block
    first = "self_attention.linear_qkv" if spec.mla is None else (
        "self_attention.linear_q_proj" if spec.mla.q_lora_rank is None else "self_attention.linear_q_down_proj")
    halves = [(attn_in, m_h, first, "self_attention.linear_proj")]
    has_attn, has_mlp = kind is None or kind.has_attention, kind is None or kind.mlp
    if not has_attn:  # a Mamba / DeltaNet mixer: column-parallel in_proj of h, row-parallel out_proj to h
        mixer = "mixer." if kind.mixer == "mamba" else "self_attention."
        halves = [(m_h, m_h, mixer + "in_proj", mixer + "out_proj")] if kind.mixer != "none" else []
    if has_mlp and (not moe or spec.moe.shared_expert_ffn_hidden_size):
        mlp = "mlp.shared_experts." if moe else "mlp."
        halves.append((m_h, m_h, mlp + "linear_fc1", mlp + "linear_fc2"))
    seconds = hidden = 0.0
    refwd = 1 if recompute == "full" else 0
    for gathered, reduced, column, row in halves:
        # quantized gathers (Workload.tp_gather_bytes), in the format of the module that reads them
        q_in = workload.module(column).tp_gather_bytes[0] / BF16
        q_grad = workload.module(row).tp_gather_bytes[1] / BF16
        if shape.sequence_parallel:
            ag_in = collective_time_s("all_gather", q_in * gathered, t, link)
            ag_grad = collective_time_s("all_gather", q_grad * reduced, t, link)
            rs = collective_time_s("reduce_scatter", reduced, t, link)
            seconds += (1 + refwd) * ag_in + ag_grad + (1 + refwd) * rs
            hidden += ag_in + collective_time_s("reduce_scatter", gathered, t, link)
        else:
            seconds += (1 + refwd) * collective_time_s("all_reduce", reduced, t, link)
            hidden += collective_time_s("all_reduce", reduced, t, link)
    if has_attn and spec.mla is None and spec.num_query_groups < t:
        qkv = BF16 * tokens * (spec.num_attention_heads + 2 * spec.num_query_groups) * spec.kv_channels
        seconds += (1 + refwd) * collective_time_s("all_gather", qkv, t, link)
    if has_attn and spec.dsa is not None and not (kind is not None and kind.reuses_topk):
        # the DSA indexer gathers its (detached) inputs under SP -- no backward collective -- and, with the indexer
        # loss, all-reduces the KL target summed over this rank's heads: fp32 per scored (query, key) pair, the
        # selected ones with the sparse loss (dsa.py L1272-1279, L507-510 @d98e8a6)
        dsa, q_in = spec.dsa, spec.indexer_query_input
        if shape.sequence_parallel:
            seconds += (1 + refwd) * collective_time_s("all_gather", BF16 * tokens * (spec.hidden_size + q_in), t, link)
        if dsa.trains_indexer:
            keys = min(dsa.topk, workload.seq_length) if dsa.sparse_loss else workload.seq_length
            seconds += (1 + refwd) * collective_time_s("all_reduce", FP32 * tokens * keys, t, link)
    if workload.tp_comm_overlap and shape.sequence_parallel:
        return (seconds + hidden) * calibration()["time"]["tp_overlap_exposed_fraction"]
    return seconds


def default_cp_comm_type(spec: ModelSpec) -> str:
    """The ``--cp-comm-type`` ``estimate`` assumes when none is given: Megatron's default ``p2p`` (ARG
    L3221), unless Transformer Engine refuses it for the model (``attn_forward_func_with_cp``,
    ``attention/dot_product_attention/context_parallel.py`` @d0067d0 L5054-5066): attention sinks (a
    non-vanilla ``softmax_type``) run only with ``a2a``; sliding windows only with ``a2a`` or
    ``all_gather`` (``all_gather``, as NVIDIA's Llama 3 long-context recipe runs windows; NeMo's Mistral
    config picks ``a2a``, which the head count may rule out); DSA sparse attention only with ``all_gather``
    (TC L3162-3177 @d98e8a6).

    >>> from megasolve.models.presets import load_preset
    >>> [default_cp_comm_type(load_preset(m)) for m in ("gemma-3-27b", "llama-3.1-8b", "gpt-oss-20b")]
    ['all_gather', 'p2p', 'a2a']
    """
    if spec.softmax_type != "vanilla":
        return "a2a"
    return "all_gather" if spec.window_size is not None or spec.dsa is not None else "p2p"


def cp_a2a_size(spec: ModelSpec, cluster: Cluster, tp: int, cp: int) -> int | None:
    """The all-to-all level of ``a2a+p2p`` (``--hierarchical-context-parallel-sizes A P``, A * P == cp,
    ARG L580-585): the largest ``A`` (1 < A < cp) that divides the heads and KV heads per TP rank (TE's
    a2a rule below) and keeps the all-to-all inside one NVLink domain -- the level groups consecutive CP
    ranks (``parallel_state.create_hierarchical_groups`` level 0), whose stride in the rank space is
    ``tp``. None: no such split (Megatron-Bridge's guide: a2a inside the node, p2p across nodes).

    >>> from megasolve.models.presets import load_preset
    >>> cp_a2a_size(load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=32, gpu="h100"), 1, 16)
    8
    """
    heads, kv_heads = _cp_heads_per_rank(spec, tp)
    for a in range(cp - 1, 1, -1):
        if cp % a == 0 and heads % a == 0 and kv_heads % a == 0 \
                and cluster.group_link(tp, a).tier in ("nvlink", "local"):
            return a
    return None


def _cp_heads_per_rank(spec: ModelSpec, tp: int) -> tuple[int, int]:
    """Query heads and K / V heads of one TP rank as TE's attention sees them (MLA: one K per head;
    fewer query groups than TP ranks: each rank holds one replicated group)."""
    heads = spec.num_attention_heads // tp
    kv = heads if spec.mla is not None else max(spec.num_query_groups // tp, 1)
    return heads, kv


def cp_comm_problem(spec: ModelSpec, cluster: Cluster, comm_type: str, tp: int, cp: int) -> str | None:
    """Why Megatron / Transformer Engine refuse ``--cp-comm-type comm_type`` for this model at ``tp`` x
    ``cp`` (None: they run it). TE ``context_parallel.py`` @d0067d0: sliding windows only with a2a /
    all_gather (L5054-5060); a non-vanilla softmax (sinks) only with a2a (L5065-5067); a2a needs the
    query and K / V heads per rank divisible by its group size (``AttnFuncWithCPAndQKVOA2A`` L4246-4249);
    a2a+p2p a hierarchical split (``cp_a2a_size``; TE turns a level of size 1 into plain a2a / p2p,
    L5027-5032)."""
    if cp == 1:
        return None
    if spec.dsa is not None and comm_type != "all_gather":  # DSAttention gathers K itself (TC L3162-3177 @d98e8a6)
        return f"DSA sparse attention runs under CP only with all_gather, not {comm_type}"
    windowed = spec.window_size is not None
    if windowed and comm_type in ("p2p", "a2a+p2p"):
        return f"sliding-window attention runs under CP only with a2a or all_gather, not {comm_type}"
    if spec.softmax_type != "vanilla" and comm_type != "a2a":
        return f"softmax_type {spec.softmax_type} (attention sinks) runs under CP only with a2a, not {comm_type}"
    heads, kv_heads = _cp_heads_per_rank(spec, tp)
    if comm_type == "a2a" and (heads % cp or kv_heads % cp):
        return (f"cp_comm_type a2a needs the heads per TP rank ({heads} query, {kv_heads} key/value) "
                f"divisible by cp ({cp})")
    if comm_type == "a2a+p2p" and cp_a2a_size(spec, cluster, tp, cp) is None:
        return (f"cp_comm_type a2a+p2p needs an all-to-all level 1 < A < cp ({cp}) inside the NVLink domain "
                f"dividing the heads per TP rank ({heads} query, {kv_heads} key/value)")
    return None


def resolve_cp_comm_type(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape) -> str:
    """The ``--cp-comm-type`` a layer of ``shape`` runs: the workload's; its default (None:
    ``default_cp_comm_type``); or, with ``CP_COMM_FASTEST`` (``solve`` searching it, ``solver/knobs.py``),
    the allowed type with the least exposed CP time (+ the KV ring's extra HBM traffic,
    ``cp_ring_extra_bytes``) over the model's attention layers at no recompute (the default on ties, then
    ``CP_COMM_TYPES`` order). One type for every layer, as the exports write it. The type changes only
    time: memory is the same (each type saves the local Q, K, V and
    output; the transient gathered K / V of all_gather and the all-to-all buffers are not modelled)."""
    if workload.cp_comm_type != CP_COMM_FASTEST:
        return workload.cp_comm_type or default_cp_comm_type(spec)
    return _fastest_cp_comm_type(spec, cluster, workload, shape)


def layout_cp_comm_type(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> str | None:
    """The ``--cp-comm-type`` ``layout`` runs (``resolve_cp_comm_type`` on its attention shape), None
    without CP: what the JSON reports and the exports write."""
    if layout.cp == 1:
        return None
    return resolve_cp_comm_type(spec, cluster, workload, ActivationShape(
        tp=layout.tp, cp=layout.cp, mbs=layout.mbs, sequence_parallel=layout.sequence_parallel))


@functools.lru_cache(maxsize=4096)
def _fastest_cp_comm_type(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape) -> str:
    default = default_cp_comm_type(spec)
    if shape.cp == 1:
        return default
    allowed = [t for t in dict.fromkeys((default,) + CP_COMM_TYPES)
               if cp_comm_problem(spec, cluster, t, shape.tp, shape.cp) is None]
    if len(allowed) <= 1:
        return allowed[0] if allowed else default
    kinds = _attention_kind_counts(spec)

    def exposed(comm_type: str) -> float:
        ring = _ring_of(comm_type, spec, cluster, shape)
        extra = cp_ring_extra_bytes(spec, workload, shape, ring) / cluster.gpu.hbm_bytes_per_s
        return sum(n * (cp_type_comm_s(comm_type, spec, cluster, workload, shape, _attention_s(
            spec, cluster, workload, shape, kind), forwards=1) + extra) for kind, n in kinds)

    return min(allowed, key=exposed)


@functools.lru_cache(maxsize=256)
def _attention_kind_counts(spec: ModelSpec) -> tuple[tuple[LayerKind, int], ...]:
    """The model's attention layers by kind (windows differ in attention compute, so in overlap)."""
    counts: dict[LayerKind, int] = {}
    for i in range(spec.num_layers):
        kind = layer_kind(spec, i)
        if kind.has_attention:
            counts[kind] = counts.get(kind, 0) + 1
    return tuple(counts.items())


def _attention_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape,
                 kind: LayerKind | None) -> float:
    """Core-attention compute of one layer, forward + backward, no recompute (what the p2p ring hides behind)."""
    flops = layer_work(spec, workload, shape, moe=False, recompute="none", kind=kind).attention_flops
    return work_time_s(LayerWork(0, 0, flops, 0), cluster.gpu, workload.precision, 1, 1)


def _cp_kv_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """K and V of one attention layer on one CP rank (bf16): ``2*2*T*g_r*d`` (GQA), MLA's per-head
    ``2*T*(n/t)*(qk + r + dv)``. DSA (absorbed MLA) gathers one latent key per token, ``kv_lora + r`` wide
    (no V: the value is the latent), and its indexer's key, ``d_i`` (``DSAttention.forward`` and
    ``DSAIndexer.forward_before_topk`` under CP, dsa.py @d98e8a6): ``2*T*(kv_lora + r + d_i)`` in all."""
    tokens, t = shape.tokens(workload), shape.tp
    if spec.mla is None:
        return 2 * BF16 * tokens * max(spec.num_query_groups / t, 1) * spec.kv_channels
    mla = spec.mla
    if spec.dsa is not None:
        return BF16 * tokens * (mla.kv_lora_rank + mla.qk_pos_emb_head_dim + spec.dsa.head_dim)
    return BF16 * tokens * (spec.num_attention_heads / t) * (mla.qk_head_dim + mla.qk_pos_emb_head_dim
                                                             + mla.v_head_dim)


def _cp_qkv_o_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> tuple[float, float]:
    """One rank's (Q + K + V, O) of one attention layer, bf16: what ``a2a`` exchanges (fwd: Q, K, V
    then O; bwd: dO then dQ, dK, dV of the same sizes)."""
    tokens = shape.tokens(workload)
    q, o = _cp_q_o_width(spec, shape.tp)
    return BF16 * tokens * q + _cp_kv_bytes(spec, workload, shape), BF16 * tokens * o


def _cp_q_o_width(spec: ModelSpec, tp: int) -> tuple[int, int]:
    """Elements per token of one TP rank's query and attention output (MLA: the query's nope + rope
    dims, the output's value dim)."""
    heads, _ = _cp_heads_per_rank(spec, tp)
    if spec.mla is None:
        return heads * spec.kv_channels, heads * spec.kv_channels
    return heads * (spec.mla.qk_head_dim + spec.mla.qk_pos_emb_head_dim), heads * spec.mla.v_head_dim


def cp_ring_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, ring: int, *,
                        forwards: int = 1) -> float:
    """HBM traffic Transformer Engine's KV ring adds to one attention layer beyond its attention kernels,
    ``forwards`` forward passes + the backward, on the ring's last rank (the most: it corrects every
    step's whole output). TE ``context_parallel.py`` @d0067d0, ``AttnFuncWithCPAndKVP2P``, causal, sbhd, bf16;
    ``O``, ``dQ``, ``KV``: a rank's output, query-gradient and K + V elements, ``L = T * n/t`` its fp32
    softmax LSE (a ring of ``a2a+p2p`` sees ``A`` times the tokens and ``1/A`` of the heads: the same counts):

    * forward ``4 KV + 4 O + 16 L + (c-1)(6 O + 20 L)`` bytes: K and V joined into the first send buffer
      (L1690), the LSE cloned (L1938) and corrected per step (L1945), and after the last step the output
      rebuilt from every step's partial output, bf16 (L1985 once, L1993 per further step);
    * backward ``(6c-2) dQ + (3c+6) KV``: K and V copied into the buffer that carries dK, dV back (L2401),
      each step's fresh dQ copied or added into the running one (L2665-2693) and its dK, dV into the send
      buffer (L2757-2802).

    For Llama-3.1-405B at seq 8192, TP 8, CP 2, mbs 1: 187 MB per layer and micro-batch, about 0.5 % of its
    compute on an H100. Not counted: ``all_gather`` (two steps of its own) and ``a2a`` (one attention).

    >>> from megasolve.models.presets import load_preset
    >>> shape = ActivationShape(tp=8, cp=2, mbs=1, sequence_parallel=True)
    >>> round(cp_ring_extra_bytes(load_preset("llama-3.1-405b"), Workload(seq_length=8192), shape, 2) / 1e6, 1)
    186.9
    """
    if ring <= 1:
        return 0.0
    tokens = shape.tokens(workload)
    heads, _ = _cp_heads_per_rank(spec, shape.tp)
    q, o = _cp_q_o_width(spec, shape.tp)
    kv = _cp_kv_bytes(spec, workload, shape) / BF16  # K + V elements
    lse, c = tokens * heads, ring
    forward = 4 * kv + 4 * o * tokens + 16 * lse + (c - 1) * (6 * o * tokens + 20 * lse)
    backward = (6 * c - 2) * q * tokens + (3 * c + 6) * kv
    return forwards * forward + backward


def cp_ring_size(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape) -> int:
    """Ranks in the KV ring of the ``--cp-comm-type`` a layer runs: ``cp`` for ``p2p``, ``cp / A`` for
    ``a2a+p2p``, 1 (no ring) for ``a2a`` and ``all_gather``."""
    if shape.cp == 1:
        return 1
    return _ring_of(resolve_cp_comm_type(spec, cluster, workload, shape), spec, cluster, shape)


def _ring_of(comm_type: str, spec: ModelSpec, cluster: Cluster, shape: ActivationShape) -> int:
    if comm_type == "p2p":
        return shape.cp
    if comm_type == "a2a+p2p":
        return shape.cp // (cp_a2a_size(spec, cluster, shape.tp, shape.cp) or 1)
    return 1


def cp_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, attention_s: float,
              recompute: str) -> float:
    """Exposed CP traffic of one attention layer, forward + backward (+ the forward again under full
    recompute), for the type it runs (``resolve_cp_comm_type``; ``cp_type_comm_s``)."""
    if shape.cp == 1:
        return 0.0
    comm_type = resolve_cp_comm_type(spec, cluster, workload, shape)
    return cp_type_comm_s(comm_type, spec, cluster, workload, shape, attention_s,
                          forwards=2 if recompute == "full" else 1)


def cp_type_comm_s(comm_type: str, spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape,
                   attention_s: float, *, forwards: int = 1, backward: bool = True) -> float:
    """Exposed CP time of one attention layer with ``--cp-comm-type comm_type``: ``forwards`` forward
    passes (2 under full recompute) and, with ``backward``, the backward (reference section 5.3;
    Transformer Engine ``context_parallel.py`` @d0067d0):

    * ``p2p`` (``AttnFuncWithCPAndKVP2P``): the KV ring, ``(c-1)`` KV chunks per forward and ``2(c-1)``
      backward, overlapped with ``cp_overlap_fraction`` of ``attention_s`` (the attention compute the
      passes run beside: the layer's, or one forward's for a selectively recomputed core attention);
    * ``all_gather`` (``cp_allgather_comm_s``): K and V gathered per forward and again in the backward, dK
      and dV reduce-scattered, none of it overlapped;
    * ``a2a`` (``AttnFuncWithCPAndQKVOA2A``, Ulysses): per forward an all-to-all of Q, K, V (sequence to
      heads) and one of O back; the backward the same of dO and dQ, dK, dV. Each keeps ``1/c`` of its
      bytes on the rank and is priced on the links it crosses (``all_to_all_time_s``, NCCL); exposed
      (attention needs the whole sequence before it starts);
    * ``a2a+p2p``: the a2a over the all-to-all level ``A`` (``cp_a2a_size``, inside the NVLink domain),
      then the p2p ring over the ``c/A`` level (stride ``tp*A``) on chunks of the same size as p2p's
      (``A`` times the tokens, ``1/A`` of the heads), overlapped as p2p.

    >>> from megasolve.models.presets import load_preset
    >>> spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    >>> shape, w = ActivationShape(tp=1, cp=8, mbs=1, sequence_parallel=False), Workload(seq_length=131072)
    >>> qkv, o = _cp_qkv_o_bytes(spec, w, shape)  # 16,384 tokens x (32 + 2*8) heads x 128 x 2 B; x 32 x 128 x 2 B
    >>> qkv, o
    (201326592.0, 134217728.0)
    >>> one = lambda x: all_to_all_time_s(nvlink_bytes=x * 7 / 8, network_bytes=0.0, group_size=8,
    ...                                    cluster=cluster, dispatcher="alltoall")
    >>> cp_type_comm_s("a2a", spec, cluster, w, shape, 0.0) == 2 * (one(qkv) + one(o))
    True
    """
    c = shape.cp
    if c == 1:
        return 0.0
    passes = forwards + (1 if backward else 0)
    if comm_type == "all_gather":
        return cp_allgather_comm_s(spec, cluster, workload, shape, forwards=forwards, backward=backward)
    seconds = 0.0
    ring, ring_stride = c, shape.tp
    overlap = calibration()["time"]["cp_overlap_fraction"] * attention_s
    if comm_type in ("a2a", "a2a+p2p"):
        a = c if comm_type == "a2a" else (cp_a2a_size(spec, cluster, shape.tp, c) or 1)
        qkv, o = _cp_qkv_o_bytes(spec, workload, shape)
        seconds += passes * sum(_cp_all_to_all_s(cluster, x * (a - 1) / a, shape.tp, a) for x in (qkv, o))
        ring, ring_stride = c // a, shape.tp * a
    if ring > 1:
        kv = _cp_kv_bytes(spec, workload, shape)
        sends = (forwards + (2 if backward else 0)) * (ring - 1)
        comm = sends * collective_time_s("send_recv", kv, 2, cluster.group_link(ring_stride, ring))
        seconds += max(0.0, comm - overlap)
    return seconds


def _cp_all_to_all_s(cluster: Cluster, sent: float, stride: int, size: int) -> float:
    """One NCCL all-to-all over a CP group of ``size`` ranks at ``stride``, each sending ``sent`` bytes to
    the others: the part to peers in its NVLink domain on NVLink, the rest through the NIC."""
    if size <= 1 or sent <= 0:
        return 0.0
    link = cluster.group_link(stride, size)
    local = size if link.tier in ("nvlink", "local") else max(1, min(link.members_per_unit, size))
    network = sent * (size - local) / (size - 1)
    return all_to_all_time_s(nvlink_bytes=sent - network, network_bytes=network, group_size=size, cluster=cluster,
                             dispatcher="alltoall")


def cp_allgather_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape,
                        recompute: str = "none", *, forwards: int | None = None, backward: bool = True) -> float:
    """CP with ``--cp-comm-type all_gather`` (Transformer Engine ``AttnFuncWithCPAndKVAllGather``,
    ``attention/dot_product_attention/context_parallel.py``; Llama 3 paper section 3.3.2): forward
    all-gathers K and V over the CP group (``gather_along_first_dim``, one collective each) before any
    attention runs; backward all-gathers them again (only the local K, V are saved) and, after the
    attention backward, reduce-scatters dK and dV (``reduce_scatter_along_first_dim``). None of it
    overlaps attention compute ("KV all-gather between CP ranks is exposed", the class docstring), so
    all of it is exposed: ``3 + 1`` (full recompute: the forward again) collectives per K and per V of
    the gathered ``c x`` local size, on the CP group's link (stride ``tp``).

    >>> from megasolve.models.presets import load_preset
    >>> from megasolve.topology.cluster import Cluster
    >>> spec, cluster = load_preset("gemma-3-27b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    >>> shape = ActivationShape(tp=1, cp=4, mbs=1, sequence_parallel=False)
    >>> w = Workload(seq_length=32768)
    >>> k = 2 * 8192 * 16 * 128  # one rank's K: bf16 x 8,192 tokens x 16 groups x 128
    >>> link = cluster.group_link(1, 4)
    >>> ag, rs = (collective_time_s(kind, 4 * k, 4, link) for kind in ("all_gather", "reduce_scatter"))
    >>> cp_allgather_comm_s(spec, cluster, w, shape, "none") == 2 * (2 * ag + rs)
    True
    """
    c = shape.cp
    if c == 1:
        return 0.0
    if forwards is None:
        forwards = 2 if recompute == "full" else 1
    per_tensor = _cp_kv_bytes(spec, workload, shape) / 2 * c  # K (or V) gathered over the CP group
    link = cluster.group_link(shape.tp, c)
    gathers = forwards + (1 if backward else 0)
    one = gathers * collective_time_s("all_gather", per_tensor, c, link) \
        + (collective_time_s("reduce_scatter", per_tensor, c, link) if backward else 0.0)
    return 2 * one  # K and V


def ep_traffic_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, ep: int,
                 recompute: str) -> float:
    """Expert-parallel traffic of one MoE layer, one micro-batch, forward + backward, before any overlap
    (section 5.6). Each rank routes ``R = (T/sigma)*k`` token copies of ``2h + 4`` bytes (bf16 hidden
    state + fp32 probability); 4 all-to-alls (dispatch and combine, forward and backward; +2 with full
    recompute), each priced on the links its bytes use (``comm.all_to_all_time_s``):

    * ``alltoall`` (NCCL, one copy per chosen expert, uniform over the ``ep`` ranks): ``(L-1)/ep`` of
      the copies stay on NVLink (``L`` = EP ranks per NVLink domain), ``(ep-L)/ep`` cross the NIC;
    * ``flex`` (DeepEP / HybridEP): one copy per distinct remote NVLink domain over RDMA
      (``remote_domains_per_token``), then one NVLink copy per distinct target GPU (forwarding,
      ``token_dispatcher.py::MoEFlexTokenDispatcher``, DeepEP ``is_token_in_rank``);
    * ``allgather``: the tokens of the whole ``ep x etp`` group all-gathered and the outputs
      reduce-scattered (``MoEAllGatherTokenDispatcher``), ring collectives on the group's link;

    plus, with ``etp > 1`` (alltoall / flex), the expert-TP all-gather / reduce-scatter of the received
    tokens."""
    if not spec.is_moe:
        return 0.0
    m = spec.moe
    local_tokens = shape.tokens(workload) / shape.sigma
    # rows the all-to-all moves: token dropping / padding to capacity / router padding (cost/moe_routing.py)
    routed = local_tokens * m.top_k * routed_rows(spec, workload, local_tokens).dispatch
    d = spec.expert_hidden_size  # the latent width with --moe-latent-size: the dispatcher moves latent tokens
    per_copy = BF16 * d + 4
    a2a_count = 4 + (2 if recompute == "full" else 0)
    seconds = 0.0
    if workload.moe_dispatcher == "allgather":
        group = ep * shape.etp
        if group > 1:
            link = cluster.group_link(1, group)
            gathered = BF16 * local_tokens * group * d
            seconds += (a2a_count // 2) * (collective_time_s("all_gather", gathered, group, link)
                                           + collective_time_s("reduce_scatter", gathered, group, link))
        return seconds
    if ep > 1:
        link = cluster.group_link(shape.etp, ep)
        local = ep if link.tier in ("nvlink", "local") else max(1, min(link.members_per_unit, ep))
        if workload.moe_dispatcher == "flex":
            groups = (m.router_num_groups, m.router_group_topk)
            gpu_copies = remote_domains_per_token(m.num_experts, m.top_k, ep, *groups)  # distinct other GPUs
            domain_copies = remote_domains_per_token(m.num_experts, m.top_k, ep // local, *groups) \
                if local < ep else 0.0
            nvlink_bytes = local_tokens * gpu_copies * per_copy
            network_bytes = local_tokens * domain_copies * per_copy
        else:
            nvlink_bytes = routed * per_copy * (local - 1) / ep
            network_bytes = routed * per_copy * (ep - local) / ep
        seconds += a2a_count * all_to_all_time_s(nvlink_bytes=nvlink_bytes, network_bytes=network_bytes,
                                                 group_size=ep, cluster=cluster, dispatcher=workload.moe_dispatcher)
    if shape.etp > 1:
        link = cluster.group_link(1, shape.etp)
        gathered = BF16 * routed * shape.etp * d
        seconds += (a2a_count // 2) * (collective_time_s("all_gather", gathered, shape.etp, link)
                                       + collective_time_s("reduce_scatter", gathered, shape.etp, link))
    return seconds


def ep_overlap_exposed_s(traffic: float, compute_s: float, expert_s: float, kind: str = "default") -> float:
    """Exposed EP traffic of one MoE layer under ``--overlap-moe-expert-parallel-comm``: Megatron's
    combined 1F1B runs the forward of one micro-batch beside the backward of another, layer by layer, in
    three slots (``models/common/model_chunk_schedule_plan.py::TransformerLayerSchedulePlan.run``
    L236-303 @d98e8a6, its docstring's stream diagram):

    * comm ``combine_bwd`` beside compute ``pre_dispatch_fwd`` (attention, pre-MLP norm, router, shared
      experts: ``fine_grained_callables.py`` L67-148);
    * comm ``dispatch_fwd`` then ``dispatch_bwd`` beside compute ``mlp_bwd``, ``mlp_bwd_dw``, ``mlp_fwd``
      (the routed experts);
    * comm ``combine_fwd`` beside compute ``pre_dispatch_bwd``.

    Each slot lasts the longer of its two streams, so an all-to-all is exposed only by what its slot's
    compute does not cover: with ``a = traffic / 4`` per all-to-all, ``A`` the layer's non-expert compute
    and ``M`` its routed experts' (``expert_s``; forward a third of each, backward two thirds), exposed
    ``= max(0, a - A/3) + max(0, 2a - M) + max(0, a - 2A/3)``. What the compute covers still costs the
    SMs and HBM bandwidth the all-to-all kernels take from it: ``ep_overlap_contention`` of the hidden
    traffic (``calibration.yaml``), by ``kind``: ``deepep_rdma`` for DeepEP across NVLink domains (its RDMA
    kernels hold their SMs longer per byte), else ``default``. The warm-up and
    cool-down chunk-units, which have no partner, expose all their traffic: ``unpaired_ep_s``, once per step.

    >>> ep_overlap_exposed_s(0.0, 1.0, 0.5)
    0.0
    >>> round(ep_overlap_exposed_s(4.0, 0.0, 0.0), 6)  # nothing to hide behind: all exposed
    4.0
    """
    if traffic <= 0.0:
        return 0.0
    a = traffic / 4
    other = max(0.0, compute_s - expert_s)
    exposed = max(0.0, a - other / 3) + max(0.0, 2 * a - expert_s) + max(0.0, a - 2 * other / 3)
    return exposed + ep_overlap_contention(kind) * (traffic - exposed)


def ep_overlap_contention(kind: str) -> float:
    """``time.ep_overlap_contention`` of ``kind`` (``default`` / ``deepep_rdma``); one number applies to both (a
    profile written before the two were told apart)."""
    value = calibration()["time"]["ep_overlap_contention"]
    return value if isinstance(value, (int, float)) else value.get(kind, value["default"])


def ep_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, ep: int,
              recompute: str, *, compute_s: float = 0.0, shared_expert_s: float = 0.0,
              expert_s: float = 0.0) -> float:
    """Exposed expert-parallel traffic of one MoE layer (``ep_traffic_s``) after Megatron's overlaps:

    * ``--overlap-moe-expert-parallel-comm`` (``Workload.moe_ep_overlap``): the 1F1B A2A overlap hides
      each all-to-all behind the other micro-batch's compute in its slot (``ep_overlap_exposed_s``, from
      the layer's compute ``compute_s`` and its routed experts' ``expert_s``);
    * ``--moe-shared-expert-overlap``: the shared experts (``shared_expert_s``) run on a side stream
      during dispatch and combine (``shared_experts.py``), hiding that much;
    * neither (Megatron's default): fully exposed."""
    traffic = ep_traffic_s(spec, cluster, workload, shape, ep, recompute)
    if traffic <= 0.0:
        return 0.0
    if workload.moe_ep_overlap and ep > 1 and recompute != "full":
        # DeepEP's RDMA kernels across NVLink domains (flex) hold their SMs longest; NCCL's all-to-all moves the
        # network bytes through its proxy thread
        rdma = workload.moe_dispatcher == "flex" and cluster.group_link(shape.etp, ep).tier not in ("nvlink", "local")
        return ep_overlap_exposed_s(traffic, compute_s, expert_s, "deepep_rdma" if rdma else "default")
    if workload.moe_shared_expert_overlap:
        return max(0.0, traffic - shared_expert_s)
    return traffic


def combined_warmup_units(pp: int, vpp: int, stage: int, group: int | None = None) -> int:
    """Chunk-units a stage runs forward before its first combined 1F1B step, and backward after its last, under
    ``--overlap-moe-expert-parallel-comm``: the interleaved schedule's warm-up plus the one extra forward the
    overlap schedules (``schedules.py`` L963-970 @d98e8a6: ``2(p - r - 1) + (v - 1)G + 1``, ``G`` the
    micro-batch group, default ``p``); 1 without pipelining (the first forward and the last backward run
    alone). Megatron caps it at ``m*v``; the cap is not applied here (the solver's terms do not know ``m``):
    with ``m*v`` under it (``m = p``) the unpaired share is over-counted.

    >>> combined_warmup_units(8, 4, 0), combined_warmup_units(8, 4, 7), combined_warmup_units(1, 1, 0)
    (39, 25, 1)
    """
    if pp == 1:
        return 1
    return 2 * (pp - stage - 1) + (vpp - 1) * (group or pp) + 1


def unpaired_ep_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *, ep: int,
                  recompute: str, recompute_modules: tuple[str, ...] | None = None,
                  kind: LayerKind | None = None, timer: Callable[..., LayerTime] | None = None) -> float:
    """What one MoE layer's forward + backward of an unpaired chunk-unit adds under the combined 1F1B
    (``--overlap-moe-expert-parallel-comm``, ``ep_overlap_exposed_s``): the warm-up forwards and cool-down
    backwards (``combined_warmup_units`` of each) run without a partner, so their EP traffic is all exposed,
    not what the pairing leaves (``ep_comm_s`` without the overlap minus with it). 0 without the overlap.
    ``timer``: ``layer_time`` or a memoised stand-in with its signature (the solver's tables)."""
    if not workload.moe_ep_overlap or not spec.is_moe:
        return 0.0
    timer = timer or layer_time
    kw = dict(ep=ep, moe=True, recompute=recompute, recompute_modules=recompute_modules, kind=kind)
    return (timer(spec, cluster, replace(workload, moe_ep_overlap=False), shape, **kw).ep_comm
            - timer(spec, cluster, workload, shape, **kw).ep_comm)


def layer_time(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *, ep: int,
               moe: bool, recompute: str, recompute_modules: tuple[str, ...] | None = None,
               kind: LayerKind | None = None) -> LayerTime:
    """Per micro-batch, forward + backward, one rank: compute and exposed TP / CP / EP traffic.
    Selective recompute of ``recompute_modules`` (default core_attn) is the layer with core-attention
    recompute or none (``base_layer_time``) plus what the other modules add
    (``selective_modules_time``): their work is linear in the time model, so the sum is exact.
    ``kind`` (``cost/layers.py``): the layer's attention span (None: full causal attention); a kind kept in
    bf16 (``LayerKind.bf16``) runs at bf16 (``Workload.layer_precision``), a kind with a precision recipe's
    overrides (``LayerKind.overrides``) runs those modules in their format (``compute.layer_work``, ``tp_comm_s``)."""
    if kind is not None:  # in bf16, or with a precision recipe's module overrides
        workload = workload.for_kind(kind.bf16, kind.overrides)
    if recompute != "selective":
        out = base_layer_time(spec, cluster, workload, shape, ep=ep, moe=moe, recompute=recompute, kind=kind)
    else:
        modules = block_modules(kind, tuple(recompute_modules or DEFAULT_RECOMPUTE_MODULES))
        out = base_layer_time(spec, cluster, workload, shape, ep=ep, moe=moe,
                              recompute="selective" if uses_core_attn(modules) else "none", kind=kind)
        if modules:  # else a hybrid layer without any of the modules (e.g. a Mamba layer): nothing recomputed
            out = out + selective_modules_time(spec, cluster, workload, shape, ep=ep, moe=moe, modules=modules)
    if workload.offload_modules:  # fine-grained activation offloading: the copies to the host and back
        offloaded = offloaded_layer_bytes(spec, workload, shape, moe=moe, recompute=recompute,
                                          recompute_modules=tuple(recompute_modules or DEFAULT_RECOMPUTE_MODULES),
                                          kind=None if kind is None or kind.is_gpt else kind)
        if offloaded:
            out = out + LayerTime(offload=activation_offload_exposed_s(
                offloaded, out.compute, cluster.gpu.host_link_bytes_per_s, cluster.gpu.hbm_bytes_per_s))
    return out


def selective_modules_time(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *,
                           ep: int, moe: bool, modules: tuple[str, ...]) -> LayerTime:
    """What recomputing ``modules`` beyond core attention adds to one layer: one more forward of each
    module's work (``recompute.selective_extra_work``) at the layer's GEMM efficiencies, and its
    collectives once more (``selective_extra_comm_s``)."""
    extra = selective_extra_work(spec, workload, shape, moe=moe, modules=modules)
    expert_width = _expert_gemm_width(spec, workload, shape, ep) if moe else 1.0
    compute = work_time_s(extra, cluster.gpu, workload.precision, _dense_gemm_width(spec, workload, shape),
                          expert_width)
    attention = layer_work(spec, workload, shape, moe=moe, recompute="none").attention_flops
    attention_s = work_time_s(LayerWork(0, 0, attention, 0), cluster.gpu, workload.precision, 1, 1)
    comm = selective_extra_comm_s(spec, cluster, workload, shape, ep=ep, moe=moe, modules=modules,
                                  attention_s=attention_s)
    return LayerTime(compute=compute) + comm


def base_layer_time(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *, ep: int,
                    moe: bool, recompute: str, kind: LayerKind | None = None) -> LayerTime:
    """``layer_time`` with ``recompute`` none, full, or selective of core attention only: compute, TP and
    CP traffic (``layer_time_without_ep``) plus, for an MoE layer, the exposed EP traffic
    (``layer_ep_comm_s``; the only part the MoE dispatcher and overlaps change)."""
    out = layer_time_without_ep(spec, cluster, workload, shape, ep=ep, moe=moe, recompute=recompute, kind=kind)
    if moe and (kind is None or kind.mlp):  # a hybrid Mamba / attention block of an MoE model has no experts
        out = replace(out, ep_comm=layer_ep_comm_s(spec, cluster, workload, shape, ep=ep, recompute=recompute,
                                                   compute_s=out.compute))
    return out


def layer_ep_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *, ep: int,
                    recompute: str, compute_s: float) -> float:
    """Exposed EP traffic of one MoE layer whose compute takes ``compute_s`` (``ep_comm_s`` with the
    shared experts it can hide behind)."""
    return ep_comm_s(spec, cluster, workload, shape, ep, recompute, compute_s=compute_s,
                     shared_expert_s=_shared_expert_s(spec, cluster, workload, shape, recompute),
                     expert_s=_routed_expert_s(spec, cluster, workload, shape, ep, recompute))


def layer_overhead_s(workload: Workload, *, moe: bool, local_experts: int = 0) -> float:
    """Per layer and micro-batch, forward + backward: kernel launches and host syncs
    (``per_layer_overhead_s``) and, in an MoE layer, the router / permute / token-count D2H sync
    (``per_moe_layer_overhead_s``) plus ``per_local_expert_overhead_s`` for each of the rank's
    ``local_experts``. The last is host time the GPU waits for: the token-count sync (the all-to-all's
    split sizes: ``token_dispatcher.py`` ``preprocess`` ``.to("cpu")``; DeepEP's received-token count)
    drains the GPU's queue, and what comes next is launched one expert at a time -- TE's
    ``GroupedLinear`` runs each local expert's GEMM as its own cuBLAS call on up to 4 streams
    (``multi_stream_cublas_gemm``, ``cublaslt_gemm.cu`` L969-1020, the default path of
    ``nvte_multi_tensor_gemm`` L1058-1076 unless ``NVTE_USE_CUTLASS_GROUPED_GEMM``), with a quantise per
    expert input under FP8 (``tex.split_quantize``), forward, dgrad and wgrad of fc1 and fc2.
    Under ``--cuda-graph-impl full_iteration`` one graph replays the whole forward-backward path (TC
    L1084-1086): no launches remain, and of the MoE overhead only the share
    ``cuda_graph_moe_overhead_share`` (the router and permute kernels themselves; the recipes that
    capture it pad the experts to a static capacity, so no token count crosses to the host).

    >>> from megasolve.cost.calibration import calibration
    >>> cal = calibration()["time"]
    >>> layer_overhead_s(Workload(), moe=True) == cal["per_layer_overhead_s"] + cal["per_moe_layer_overhead_s"]
    True
    >>> eager = layer_overhead_s(Workload(), moe=True, local_experts=16) - layer_overhead_s(Workload(), moe=True)
    >>> round(eager / cal["per_local_expert_overhead_s"], 6)
    16.0
    >>> graphed = layer_overhead_s(Workload(cuda_graph_impl="full_iteration"), moe=True)
    >>> graphed == cal["cuda_graph_moe_overhead_share"] * cal["per_moe_layer_overhead_s"]
    True
    """
    cal = calibration()["time"]
    moe_s = cal["per_moe_layer_overhead_s"] + local_experts * cal["per_local_expert_overhead_s"] if moe else 0.0
    if workload.cuda_graph_impl == "full_iteration":
        return cal["cuda_graph_moe_overhead_share"] * moe_s
    return cal["per_layer_overhead_s"] + moe_s


# HBM bytes per element of the rank's routed expert output for the fc2 bias of biased experts (expert_bias_s):
# fwd the add reads bf16 and writes fp32 (6), the concatenation copies fp32 (8), the cast back reads fp32 and
# writes bf16 (6); bwd the cast's gradient (6), the add's gradient cast to bf16 (6), the gradients of the bias
# and of the probabilities each read the fp32 gradient (8)
EXPERT_BIAS_BYTES = {"forward": 20, "backward": 20}


def expert_bias_s(spec: ModelSpec, gpu: GpuSpec, workload: Workload, shape: ActivationShape, local_experts: int,
                  recompute: str) -> float:
    """The fc2 bias of biased experts (``--add-bias-linear`` on an MoE model, e.g. GPT-OSS), per MoE layer and
    micro-batch, forward + backward. Megatron-Core adds it outside the grouped GEMM
    (``TEGroupedMLP._apply_bias``, ``moe/experts.py``, since a329dd6da5 "Enable bias in expert mlp [gpt-oss
    5/5]"): the output is split by the host token counts and ``t + b * p`` runs once per local expert with
    the fp32 routing probabilities, the fp32 pieces are concatenated and cast back to bf16. Two costs:

    * host: each local expert's kernels and autograd nodes, launched one expert at a time after the
      token-count sync (``biased_expert_overhead_s`` per local expert, ``calibration.yaml``), charged to eager
      runs only. The published runs show it without CUDA graphs (GPT-OSS 120B at EP8, 16 local experts, on
      H100 / B200: 8-22 % too fast without the term; at EP64, 2 local experts, within 2 %) and not under
      per-layer graphs (the same EP8 layout on B300 with attention, router and preprocess graphed: within 2 %
      without it, 8 % too slow with it). Why the graphs hide it is inferred, not derived: with those parts
      replayed as one launch each, the host keeps ahead of the GPU through the loop. A full-iteration graph
      replays without host launches. Megatron-Core replaced the loop by one packed kernel later
      (``experts.py`` L349-355 @d98e8a6, for device-side token counts): a release that takes that path pays
      the traffic below only;
    * HBM: ``EXPERT_BIAS_BYTES`` per element of the rank's routed expert output (full recompute runs the
      forward part twice).

    The fc1 bias is added inside TE's grouped GEMM (``skip_bias_add=False``): no term.
    """
    rows = shape.tokens(workload) / shape.sigma * spec.moe.top_k  # balanced routing: rows in = rows out
    forwards = 2 if recompute == "full" else 1
    width = spec.expert_hidden_size  # the experts' output width (the latent width with --moe-latent-size)
    traffic = rows * width * (forwards * EXPERT_BIAS_BYTES["forward"] + EXPERT_BIAS_BYTES["backward"])
    host = 0.0 if workload.cuda_graph_impl != "none" else \
        forwards * local_experts * calibration()["time"]["biased_expert_overhead_s"]
    return host + traffic / gpu.hbm_bytes_per_s


def layer_time_without_ep(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *,
                          ep: int, moe: bool, recompute: str, kind: LayerKind | None = None) -> LayerTime:
    """``base_layer_time`` without the EP traffic: compute, exposed TP and CP traffic."""
    gpu, precision = cluster.gpu, workload.precision
    work = layer_work(spec, workload, shape, moe=moe, recompute=recompute, kind=kind)
    if moe:
        compute = work_time_s(work, gpu, precision, _dense_gemm_width(spec, workload, shape),
                              _expert_gemm_width(spec, workload, shape, ep))
    else:
        compute = work_time_s(work, gpu, precision, _dense_gemm_width(spec, workload, shape), 1.0)
    weights = layer_weights_per_rank(spec, shape, moe=moe, ep=ep, kind=kind)
    for other, moved in overridden_weights(spec, workload, shape, kind, moe=moe, ep=ep):  # a recipe's modules
        weights -= moved
        compute += weight_stream_bytes(moved, other, recompute, workload.grad_bytes) / gpu.hbm_bytes_per_s
    compute += weight_stream_bytes(weights, precision, recompute, workload.grad_bytes) / gpu.hbm_bytes_per_s
    refwd = 4 / 3 if recompute == "full" else 1.0
    has_experts = moe and (kind is None or kind.mlp)
    local_experts = spec.moe.num_experts // ep if has_experts else 0
    compute += refwd * layer_overhead_s(workload, moe=has_experts, local_experts=local_experts)
    if has_experts and spec.add_bias_linear:
        compute += expert_bias_s(spec, gpu, workload, shape, local_experts, recompute)
    attention_s = work_time_s(LayerWork(0, 0, work.attention_flops, 0), gpu, precision, 1, 1)
    if kind is not None and not kind.has_attention:
        cp_s = mixer_cp_comm_s(spec, cluster, workload, shape, kind, recompute)
    else:
        cp_s = cp_comm_s(spec, cluster, workload, shape, attention_s, recompute)
        # the KV ring's output / gradient corrections; recompute runs the attention forward again
        compute += cp_ring_extra_bytes(spec, workload, shape, cp_ring_size(spec, cluster, workload, shape),
                                       forwards=1 if recompute == "none" else 2) / gpu.hbm_bytes_per_s
    return LayerTime(
        compute=compute,
        tp_comm=tp_comm_s(spec, cluster, workload, shape, moe=moe, recompute=recompute, kind=kind),
        cp_comm=cp_s)


def mixer_cp_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, kind: LayerKind,
                    recompute: str) -> float:
    """CP traffic of a Mamba-2 / DeltaNet mixer (0 for a hybrid MLP / MoE layer, which has none): the
    all-to-alls from sequence to head sharding before the conv and back after the scan
    (``mamba_context_parallel.py`` ``pre_conv_ssm`` / ``post_conv_ssm``; gdn.py / ``common.py``), forward
    and backward (+ the forward again under full recompute), on the CP group's link; exposed (the scan
    needs them before it starts, the next block needs the output). Per-rank bytes: ``hybrid.mamba_cp_bytes``
    / ``hybrid.gdn_cp_bytes``; each all-to-all keeps ``1/c`` of its bytes local."""
    c = shape.cp
    if c == 1 or kind.mixer not in ("mamba", "gdn"):
        return 0.0
    tokens = shape.tokens(workload)
    pre, post = (hybrid.mamba_cp_bytes if kind.mixer == "mamba" else hybrid.gdn_cp_bytes)(spec, tokens, shape.tp, c)
    network = cluster.group_link(shape.tp, c).tier == "network"  # the CP group leaves its NVLink domain

    def a2a(sent: float) -> float:  # NCCL all-to-all (``all_to_all_sp2hp`` / ``hp2sp``)
        return all_to_all_time_s(nvlink_bytes=0.0 if network else sent, network_bytes=sent if network else 0.0,
                                 group_size=c, cluster=cluster, dispatcher="alltoall")

    passes = 3 if recompute == "full" else 2
    return passes * (a2a(pre * (c - 1) / c) + a2a(post * (c - 1) / c))


def selective_extra_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, *,
                           ep: int, moe: bool, modules: tuple[str, ...], attention_s: float) -> LayerTime:
    """Collectives inside a selectively recomputed module, run once more by its recompute forward:

    * ``mlp`` (dense layers) and ``shared_experts`` (MoE layers): the sub-block's forward TP collectives
      (with SP the input all-gather and the output reduce-scatter, else one all-reduce; ``tp_comm_s``);
    * ``moe``: the forward dispatch and combine all-to-alls (and expert-TP gathers): half of the layer's
      four (``ep_traffic_s``), exposed;
    * ``core_attn`` with CP: one more forward of the layer's CP communication (``cp_type_comm_s``; p2p:
      ``(c-1)`` sends overlapped with the recomputed attention forward, 1/3 of ``attention_s``)."""
    tp = cp = ep_s = 0.0
    t = shape.tp
    tokens = shape.tokens(workload)
    m_h = BF16 * tokens * spec.hidden_size
    sub_blocks = 0
    if "mlp" in modules and not moe:
        sub_blocks += 1
    if "shared_experts" in modules and "moe" not in modules and moe and spec.moe.shared_expert_ffn_hidden_size:
        sub_blocks += 1
    if "moe" in modules and moe and spec.moe.shared_expert_ffn_hidden_size:
        sub_blocks += 1
    if t > 1 and sub_blocks:
        link = cluster.group_link(1, t)
        if shape.sequence_parallel:  # the recomputed forward's input gather, quantized as in tp_comm_s
            q_in = workload.tp_gather_bytes[0] / BF16
            one = collective_time_s("all_gather", q_in * m_h, t, link) \
                + collective_time_s("reduce_scatter", m_h, t, link)
        else:
            one = collective_time_s("all_reduce", m_h, t, link)
        tp = sub_blocks * one
        if workload.tp_comm_overlap and shape.sequence_parallel:
            tp *= calibration()["time"]["tp_overlap_exposed_fraction"]
    if "moe" in modules and moe:
        ep_s = ep_traffic_s(spec, cluster, workload, shape, ep, "none") / 2
    if "core_attn" in modules and shape.cp > 1:  # the recomputed attention forward's CP traffic
        cp = cp_type_comm_s(resolve_cp_comm_type(spec, cluster, workload, shape), spec, cluster, workload, shape,
                            attention_s / 3, forwards=1, backward=False)
    return LayerTime(tp_comm=tp, cp_comm=cp, ep_comm=ep_s)


def _routed_expert_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape, ep: int,
                     recompute: str) -> float:
    """Grouped-GEMM time of one MoE layer's routed experts (fwd + bwd, ``layer_work``'s expert FLOPs at the
    expert GEMM efficiency): the compute of the combined 1F1B's middle slot (``ep_overlap_exposed_s``)."""
    work = layer_work(spec, workload, shape, moe=True, recompute=recompute)
    return work_time_s(LayerWork(0, work.expert_flops, 0, 0), cluster.gpu, workload.precision, 1.0,
                       _expert_gemm_width(spec, workload, shape, ep))


def _shared_expert_s(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape,
                     recompute: str) -> float:
    """GEMM time of one MoE layer's shared experts (fwd + bwd, ``6*h*F_s*e_ffn`` FLOPs per token over TP):
    what ``--moe-shared-expert-overlap`` can hide the dispatch behind."""
    shared = spec.moe.shared_expert_ffn_hidden_size if spec.is_moe else 0
    if not shared:
        return 0.0
    e_ffn = 3 if spec.swiglu else 2
    flops = 6.0 * spec.hidden_size * shared * e_ffn * shape.tokens(workload) / shape.tp
    flops *= 4 / 3 if recompute == "full" else 1.0
    width = min(spec.hidden_size, shared / shape.tp, shape.tokens(workload))
    return work_time_s(LayerWork(flops, 0, 0, 0), cluster.gpu, workload.precision, width, 1.0)


def logits_time(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape,
                ep: int = 1) -> LayerTime:
    """Output layer, loss and MTP heads on the last stage (``output_head_time``) + the MTP layers
    themselves, with the layout's expert parallelism."""
    out = output_head_time(spec, cluster, workload, shape)
    if spec.mtp_num_layers:
        kind = mtp_layer_kind(spec, workload)
        out = out + spec.mtp_num_layers * layer_time(spec, cluster, workload, shape, ep=ep, moe=kind.moe,
                                                     recompute="none", kind=kind)
    return out


def output_head_time(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape) -> LayerTime:
    """Output layer, loss and MTP heads (without the MTP layers) on the last stage."""
    gpu = cluster.gpu
    work = logits_work(spec, workload, shape)
    # the output layer is a plain bf16 ColumnParallelLinear even in FP8 training (gpt_model.py L272-276:
    # FP8 autocast covers the transformer layers only) unless the MXFP8 output projection is on
    head = "fp8" if workload.fp8_output_proj else "bf16"
    seconds = work_time_s(work, gpu, head, min(spec.hidden_size, spec.padded_vocab_size(shape.tp)
                                               / shape.tp, shape.tokens(workload)), 1)
    heads = 1 + spec.mtp_num_layers  # output GEMM weights (+ MTP eh_proj) streamed like a layer's
    weights = (heads * spec.hidden_size * spec.padded_vocab_size(shape.tp)
               + spec.mtp_num_layers * 2 * spec.hidden_size * spec.hidden_size) / shape.tp
    seconds += weight_stream_bytes(weights, head, "none", workload.grad_bytes) / gpu.hbm_bytes_per_s
    return LayerTime(compute=seconds)


def pp_unit_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, *, tp: int, cp: int, mbs: int,
                   sequence_parallel: bool, pp: int, vpp: int = 1) -> float:
    """Pipeline p2p charged to one stage per micro-batch and virtual chunk (section 5.4): ``c`` = one
    send/recv of ``2*(s/c)*b*h/sigma`` bytes on the PP group's link (stride ``world / pp``).

    Megatron's schedules (``megatron/core/pipeline_parallel/schedules.py``):

    * 1F1B (``vpp == 1``; ``overlap_p2p_comm`` forced off, ARG L1010-1013) and interleaved without
      overlap: ``send_forward_recv_backward`` / ``send_backward_recv_forward`` block, so every micro-batch
      pays ``2c`` per chunk in the steady state and each warm-up / cool-down hop ``2c``:
      ``T = (m + (p-1)/v) * (C + 2cv)`` for equal stages (the pipeline formula of ``step_time``);
    * interleaved with ``overlap_p2p_comm`` (the default): the steady-state sends / receives are
      posted asynchronously and waited on only before the next chunk needs them, so they hide behind
      a chunk's compute; only the first micro-batch's walk through all ``p*v`` virtual stages (forward
      in warm-up, backward in cool-down: ``2(p*v - 1)`` hops) stays on the critical path:
      ``T = (m + (p-1)/v) * C + 2c(p*v - 1)``. Charged per chunk as ``x = 2c(p*v - 1)/(m*v + p - 1)``,
      the value for which the pipeline formula ``m*tau + (p-1)*tau/v`` with ``tau = C + v*x`` gives
      exactly that ``T``. Both cases are checked against an event simulation of
      ``schedules.py::get_schedule_table`` / ``get_pp_rank_microbatches`` in ``tests/test_comm.py``.

    ``m`` = ``gbs / (mbs * dp)`` with ``dp = world / (tp*cp*pp)``.
    """
    if pp == 1:
        return 0.0
    shape = ActivationShape(tp=tp, cp=cp, mbs=mbs, sequence_parallel=sequence_parallel)
    message = BF16 * shape.tokens(workload) * spec.hidden_size / shape.sigma
    link = cluster.group_link(cluster.num_gpus // pp, pp)
    hop = 2 * collective_time_s("send_recv", message, 2, link)
    if vpp > 1 and workload.overlap_p2p_comm:
        dp = max(1, cluster.num_gpus // (tp * cp * pp))
        m = max(1, workload.global_batch_size // (mbs * dp))
        return hop * (pp * vpp - 1) / (m * vpp + pp - 1)
    return hop


def pp_comm_s(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> float:
    """Pipeline p2p charged to one stage for one micro-batch: once per virtual chunk (``x vpp``)."""
    return layout.vpp * pp_unit_comm_s(spec, cluster, workload, tp=layout.tp, cp=layout.cp, mbs=layout.mbs,
                                       sequence_parallel=layout.sequence_parallel, pp=layout.pp, vpp=layout.vpp)


def dp_contention_parts() -> int:
    """``dp_overlap_contention`` in parts per ``combine.OVERLAP_SCALE``, as every engine uses it (the integer
    engines need an integer; the float estimate takes the same rounded value so the engines agree)."""
    return int(round(calibration()["time"]["dp_overlap_contention"] * combine.OVERLAP_SCALE))


def param_gather_after_step(workload: Workload) -> bool:
    """Whether the distributed optimizer's parameter all-gather runs exposed after the optimizer step, before the next
    forward, instead of in the DP tail's window: ``--overlap-grad-reduce`` without ``--overlap-param-gather``
    (``Workload.param_gather_overlap`` False; ``distrib_optimizer.py`` L3175-3195 @d98e8a6). Without the grad-reduce
    overlap both are exposed already (``dp_overlap_fraction`` 0). It is priced as once-a-step work beside the optimizer
    step (``combine.step``'s per-stage ``optimizer`` term), in every engine alike."""
    return workload.dp_comm_overlap and not workload.param_gather_overlap


def dp_overlap_fraction(workload: Workload) -> float:
    """Share of the last micro-batch's compute that hides the DP tail: the calibrated value with
    ``--overlap-grad-reduce --overlap-param-gather`` (``Workload.dp_comm_overlap``), else 0 (the
    reduce-scatter and all-gather run after the backward, exposed)."""
    return calibration()["time"]["dp_overlap_fraction"] if workload.dp_comm_overlap else 0.0


@dataclass(frozen=True, slots=True)
class DpComm:
    """One parameter group's data-parallel traffic per step, bandwidth and latency apart (the solver
    tabulates the bandwidth part per parameter piece and adds the latency once)."""

    grad_bw_s: float = 0.0
    grad_latency_s: float = 0.0
    param_bw_s: float = 0.0
    param_latency_s: float = 0.0


def dp_group_comm(cluster: Cluster, *, params: int, group: int, stride: int, distributed_optimizer: bool,
                  param_bytes: int = 2, grad_bytes: int = 4, instances: int = 1) -> DpComm:
    """Gradient reduce-scatter + parameter all-gather (distributed optimizer) or gradient all-reduce of
    ``params`` parameters over the group ``{base + i*stride : i < group}`` (section 5.5): fp32 grads
    (4 B; 2 B with --grad-reduce-in-bf16), ``param_bytes`` per gathered parameter (2 B bf16, 1 B with
    FP8 primary weights). With ``instances`` distributed-optimizer instances (distributed optimizer only)
    the reduce-scatter and the all-gather run inside each instance, ``group / instances`` consecutive
    ranks, and the reduced shard is all-reduced across the instances, ranks ``stride * group / instances``
    apart (``param_and_grad_buffer.py`` L675-760; PS L982-1000)."""
    if group <= 1 or params <= 0:
        return DpComm()
    inner = group // instances if distributed_optimizer else group
    link = cluster.group_link(stride, inner)
    grad_kind = "reduce_scatter" if distributed_optimizer else "all_reduce"
    grad_latency = collective_latency_s(grad_kind, inner, link) if inner > 1 else 0.0
    grad_bw = (collective_time_s(grad_kind, grad_bytes * params, inner, link) - grad_latency) if inner > 1 else 0.0
    if not distributed_optimizer:
        return DpComm(grad_bw, grad_latency)
    if inner < group:  # the shard's all-reduce across the instances
        outer = cluster.group_link(stride * inner, group // inner)
        across_latency = collective_latency_s("all_reduce", group // inner, outer)
        grad_latency += across_latency
        grad_bw += collective_time_s("all_reduce", grad_bytes * params / inner, group // inner, outer) - across_latency
    if inner <= 1:
        return DpComm(grad_bw, grad_latency)
    param_latency = collective_latency_s("all_gather", inner, link)
    param_bw = collective_time_s("all_gather", param_bytes * params, inner, link) - param_latency
    return DpComm(grad_bw, grad_latency, param_bw, param_latency)


def dp_comm_s(cluster: Cluster, layout: Layout, dense_params: int, expert_params: int,
              param_bytes: int = 2, grad_bytes: int = 4, instances: int = 1) -> tuple[float, float]:
    """Gradient and parameter traffic of one rank per step (section 5.5): dense parameters over DP x CP
    (stride ``tp``), experts over expert-DP (stride ``etp * ep``), each with ``instances`` distributed-
    optimizer instances (``dp_group_comm``). Returns (grad, param) seconds."""
    dense = dp_group_comm(cluster, params=dense_params, group=layout.dp * layout.cp, stride=layout.tp,
                          distributed_optimizer=layout.distributed_optimizer, param_bytes=param_bytes,
                          grad_bytes=grad_bytes, instances=instances)
    expert = dp_group_comm(cluster, params=expert_params, group=layout.expert_dp, stride=layout.etp * layout.ep,
                           distributed_optimizer=layout.distributed_optimizer, param_bytes=param_bytes,
                           grad_bytes=grad_bytes, instances=instances)
    return (dense.grad_bw_s + dense.grad_latency_s + expert.grad_bw_s + expert.grad_latency_s,
            dense.param_bw_s + dense.param_latency_s + expert.param_bw_s + expert.param_latency_s)


def fsdp_microbatch_comm_s(cluster: Cluster, layout: Layout, params: RankParams, layers: RankParams, *,
                           num_units: int, param_bytes: int = 2, grad_bytes: int = 4) -> float:
    """Megatron-FSDP (``optim_grads_params``) traffic of one rank per micro-batch: the layers'
    parameters all-gathered before forward and again before backward, every gradient reduce-scattered
    after backward ("RS & AG communication groups on all microbatches", ``mcore_fsdp_adapter.py``
    L166-169), dense over DP x CP (stride ``tp``), experts over expert-DP; one collective of each kind
    per FSDP unit (``num_units`` latencies); gradients at ``grad_bytes`` (``Workload.fsdp_grad_comm_bytes``).
    Non-unit parameters are gathered once per step (the DP tail, ``dp_comm_s``)."""
    seconds = 0.0
    for group, stride, gathered, reduced in (
            (layout.dp * layout.cp, layout.tp, layers.dense, params.dense),
            (layout.expert_dp, layout.etp * layout.ep, layers.expert, params.expert)):
        if group <= 1 or reduced <= 0:
            continue
        ag = dp_group_comm(cluster, params=gathered, group=group, stride=stride, distributed_optimizer=True,
                           param_bytes=param_bytes)
        rs = dp_group_comm(cluster, params=reduced, group=group, stride=stride, distributed_optimizer=True,
                           grad_bytes=grad_bytes)
        seconds += 2 * (ag.param_bw_s + num_units * ag.param_latency_s) + rs.grad_bw_s + num_units * rs.grad_latency_s
    return seconds


def optimizer_shard_s(cluster: Cluster, params: int, shards: int, offload_fraction: float = 0.0,
                      workload: Workload | None = None, ns_flops: float = 0.0, ns_width: float = 4096.0) -> float:
    """Adam step on ``params`` parameters sharded ``shards`` ways (memory bound) plus zeroing / norm of
    their full fp32 grads; linear in ``params``. With optimizer CPU offload, ``offload_fraction`` of
    the shard is stepped on the host instead (``offload.optimizer_offload_s``: CPU Adam and the
    grad / param copies; the GPU part shrinks by that fraction). Muon adds its Newton-Schulz GEMMs,
    ``ns_flops`` before the shard division (``muon_ns_flops``), at the bf16 GEMM efficiency of width ``ns_width``
    (``--muon-fp32-matmul-prec medium`` lets the fp32 matmuls run on bf16 tensor cores). The precision-aware
    optimizer reads and writes its smaller state once each: ``2 x (12 - memory.adam_state_bytes_per_param)`` bytes
    fewer per parameter than the fp32 Adam of ``optimizer_bytes_per_param`` (32 -> 28 with fp32 moments, 20 with
    bf16 moments beside the 16-bit master remainder).

    >>> from megasolve.topology.cluster import Cluster
    >>> c = Cluster.from_flags(num_gpus=8, gpu="h100")
    >>> plain = optimizer_shard_s(c, 10**9, 8, workload=Workload())
    >>> aware = optimizer_shard_s(c, 10**9, 8, workload=Workload(precision_aware_optimizer=True, exp_avg_dtype="bf16",
    ...                                                         exp_avg_sq_dtype="bf16"))
    >>> round(plain * 1e3, 2), round(aware * 1e3, 2)  # (32 B / 8 + 8 B) and (20 B / 8 + 8 B) per parameter at 3.35 TB/s
    (3.58, 3.13)
    """
    cal = calibration()["time"]
    state = adam_state_bytes_per_param(workload) if workload is not None and workload.optimizer == "adam" else 12.0
    traffic = ((cal["optimizer_bytes_per_param"] - 2 * (12.0 - state)) * params / shards * (1.0 - offload_fraction)
               + cal["grad_buffer_bytes_per_param"] * params)
    if ns_flops:
        ns_s = work_time_s(LayerWork(ns_flops / shards, 0, 0, 0), cluster.gpu, "bf16", ns_width, 1.0)
    else:
        ns_s = 0.0
    host = 0.0
    if offload_fraction:
        wl = workload or Workload()
        host = optimizer_offload_s(cluster.gpu, params / shards, offload_fraction, grad_bytes=wl.grad_bytes,
                                   param_bytes=wl.param_bytes)
    return traffic / cluster.gpu.hbm_bytes_per_s + host + ns_s


def muon_ns_flops(spec: ModelSpec, workload: Workload, muon_dense: float, muon_expert: float, *, tp: int,
                  etp: int) -> tuple[float, float]:
    """Newton-Schulz FLOPs of one rank's Muon step before the distributed optimizer's division, dense and
    expert (0 with Adam): ``muon_dense`` / ``muon_expert`` Muon-managed parameters on the rank (TP / ETP shards)
    at the model's FLOPs per parameter (``compute.muon_ns_flops_per_param``), times ``tp`` / ``etp``: with
    Megatron-LM's default ``--muon-tp-mode duplicated`` every TP rank all-gathers the momentum and orthogonalises
    the whole matrix (``emerging_optimizers.py`` L197-233 @d98e8a6). That fp32 all-gather over the TP group is
    not costed (NVLink, once a step, divided like the step by the distributed optimizer)."""
    if workload.optimizer != "muon":
        return 0.0, 0.0
    dense, expert = _muon_ratios(spec)
    return dense * muon_dense * tp, expert * muon_expert * etp


@functools.lru_cache(maxsize=64)
def _muon_ratios(spec: ModelSpec) -> tuple[float, float]:
    return muon_ns_flops_per_param(spec)


def optimizer_s(cluster: Cluster, layout: Layout, dense_params: int, expert_params: int,
                workload: Workload | None = None, ns_flops: tuple[float, float] = (0.0, 0.0),
                ns_width: float = 4096.0) -> float:
    """Optimizer step of one rank: dense shards over DP x CP, experts over expert-DP (distributed
    optimizer), or the full parameters without it; ``layout.optimizer_offload_fraction`` on the host;
    ``ns_flops``: Muon's Newton-Schulz work, dense and expert (``muon_ns_flops``)."""
    n = workload.dist_optimizer_instances if workload is not None else 1
    dense_shards = layout.dp * layout.cp // n if layout.distributed_optimizer else 1
    expert_shards = layout.expert_dp // n if layout.distributed_optimizer else 1
    f = layout.optimizer_offload_fraction
    return (optimizer_shard_s(cluster, dense_params, dense_shards, f, workload, ns_flops[0], ns_width)
            + optimizer_shard_s(cluster, expert_params, expert_shards, f, workload, ns_flops[1], ns_width))


def offload_exposed_s(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout,
                      chunks: list[list[int]], layer_compute_s: dict[bool, float]) -> float:
    """Activation offloading per micro-batch: each of the first ``cpu_offload_layers`` layers copies its
    saved activations (``memory.offloaded_activation_bytes``) to host memory and back over the GPU's
    host link, hidden behind the next layer's forward / backward (``offload.activation_offload_exposed_s``;
    ``layer_compute_s``: one layer's compute by kind, moe or not)."""
    shape = ActivationShape(tp=layout.tp, cp=layout.cp, mbs=layout.mbs, sequence_parallel=layout.sequence_parallel,
                            etp=layout.etp)
    total = 0.0
    for i in (i for chunk in chunks for i in chunk if i < layout.cpu_offload_layers):
        moe = spec.is_moe_layer(i)
        total += activation_offload_exposed_s(layer_activation_bytes(spec, workload, shape, moe=moe, recompute="none"),
                                              layer_compute_s[moe], cluster.gpu.host_link_bytes_per_s,
                                              cluster.gpu.hbm_bytes_per_s)
    return total


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTime:
    stage: int
    per_microbatch: LayerTime  # tau_r and its parts
    dp_grad_s: float  # gradient traffic of the step (before overlap)
    dp_param_s: float  # parameter all-gather traffic in the DP tail's window (before overlap; not param_after_step_s)
    dp_exposed_s: float  # combine.dp_exposed of the two
    optimizer_s: float
    unpaired_s: float = 0.0  # the combined 1F1B's unpaired chunk-units' exposed EP traffic, once per step
    param_after_step_s: float = 0.0  # the parameter all-gather run exposed after the step (param_gather_after_step)

    @property
    def tau_s(self) -> float:
        return self.per_microbatch.total


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    step_s: float
    breakdown_s: dict[str, float]
    stages: list[StageTime] = field(default_factory=list)
    tokens_per_s_per_gpu: float = 0.0
    model_tflops_per_gpu: float = 0.0
    mfu: float = 0.0
    bubble_fraction: float = 0.0


def stage_times(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[StageTime]:
    shape = ActivationShape(tp=layout.tp, cp=layout.cp, mbs=layout.mbs, sequence_parallel=layout.sequence_parallel,
                            etp=layout.etp)
    base_kind = "selective" if layout.recompute == "selective" else "none"
    cache: dict[tuple[LayerKind, str], LayerTime] = {}

    def one(kind: LayerKind, recompute: str) -> LayerTime:
        if (kind, recompute) not in cache:
            cache[(kind, recompute)] = layer_time(spec, cluster, workload, shape, ep=layout.ep, moe=kind.moe,
                                                  recompute=recompute, recompute_modules=layout.recompute_modules,
                                                  kind=kind)
        return cache[(kind, recompute)]

    p2p = pp_comm_s(spec, cluster, workload, layout)
    overlap = dp_overlap_fraction(workload)
    out = []
    for params, layers in zip(stage_params(spec, layout), stage_layers(spec, layout, workload)):
        tau = LayerTime(pp_comm=p2p)
        unpaired = 0.0  # per chunk-unit of the stage's MoE layers (unpaired_ep_s); the MTP head's is not counted
        for kind, recomputed, count in layers.counts():  # the stage sum (layers.py, as the solver's tables)
            tau = tau + count * one(kind, "full" if recomputed else base_kind)
            if kind.moe and not recomputed and workload.moe_ep_overlap:
                unpaired += count * unpaired_ep_s(spec, cluster, workload, shape, ep=layout.ep, recompute=base_kind,
                                                  recompute_modules=layout.recompute_modules, kind=kind)
        unpaired *= combined_warmup_units(layout.pp, layout.vpp, params.stage,
                                          workload.microbatch_group_size) / layout.vpp
        if params.has_output:
            tau = tau + logits_time(spec, cluster, workload, shape, ep=layout.ep)
        if layout.cpu_offload_layers:
            tau = tau + LayerTime(offload=offload_exposed_s(
                spec, cluster, workload, layout, [list(layers.layer_ids)],
                {kind.moe: one(kind, "none").compute for kind in layers.kinds}))
        if layout.fsdp:
            # per micro-batch, hidden behind that micro-batch's compute by prefetching (separate streams)
            traffic = fsdp_microbatch_comm_s(cluster, layout, params.params, params.layers,
                                             num_units=max(1, params.num_layers), param_bytes=workload.param_bytes,
                                             grad_bytes=workload.fsdp_grad_comm_bytes)
            cal = calibration()["time"]
            tau = tau + LayerTime(dp_comm=combine.fsdp_exposed(combine.FLOAT, traffic, tau.compute, combine.FsdpOverlap(
                cal["fsdp_overlap_fraction"] * combine.OVERLAP_SCALE,
                cal["fsdp_overlap_contention"] * combine.OVERLAP_SCALE)))
            non_unit = params.params.total - params.layers.total  # gathered once per step
            grad_s, param_s = 0.0, dp_comm_s(cluster, layout, non_unit, 0, workload.param_bytes)[1]
        else:
            grad_s, param_s = dp_comm_s(cluster, layout, params.params.dense, params.params.expert,
                                        workload.param_bytes, workload.grad_bytes, workload.dist_optimizer_instances)
        after = param_s if param_gather_after_step(workload) else 0.0
        out.append(StageTime(stage=params.stage, per_microbatch=tau, dp_grad_s=grad_s, dp_param_s=param_s - after,
                             unpaired_s=unpaired, param_after_step_s=after,
                             dp_exposed_s=combine.dp_exposed(combine.FLOAT, grad_s, param_s - after, tau.compute,
                                                             overlap * combine.OVERLAP_SCALE,
                                                             dp_contention_parts()),
                             optimizer_s=optimizer_s(
                                 cluster, layout, params.params.dense, params.params.expert, workload,
                                 muon_ns_flops(spec, workload,
                                               params.params.tp_sharded - bf16_weights(spec, layout, params),
                                               params.params.expert, tp=layout.tp, etp=layout.etp),
                                 spec.hidden_size)))
    return out


def step_time(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> StepTime:
    """Predicted time of one training step and the throughput it implies."""
    stages = stage_times(spec, cluster, workload, layout)
    m = workload.num_microbatches(layout)
    v = layout.vpp
    slowest = max(stages, key=lambda s: (s.tau_s, -s.stage))
    tau_max = slowest.tau_s
    overhead = calibration()["time"]["step_overhead_s"]
    # the combined 1F1B's unpaired chunk-units are once per step on each stage, as its optimizer step is: both in
    # the stage's per-step cost (the solver's ``o_`` forms hold both)
    costs = [combine.StageCost(tau=s.tau_s, compute=s.per_microbatch.compute, grad=s.dp_grad_s, param=s.dp_param_s,
                               optimizer=s.optimizer_s + s.unpaired_s + s.param_after_step_s) for s in stages]
    step, pipeline = combine.step(combine.FLOAT, costs, m, v,
                                  dp_overlap_fraction(workload) * combine.OVERLAP_SCALE, overhead,
                                  dp_contention=dp_contention_parts())
    dp_tail = max(s.dp_exposed_s for s in stages)
    last = max(stages, key=lambda s: (s.optimizer_s + s.unpaired_s + s.param_after_step_s, -s.stage))  # (its max)
    breakdown = {term: m * getattr(slowest.per_microbatch, term) for term in TERMS}
    breakdown["bubble"] = pipeline - m * tau_max
    breakdown["dp_comm"] += dp_tail + last.param_after_step_s
    breakdown["ep_comm"] += last.unpaired_s
    breakdown["optimizer"] = last.optimizer_s + overhead
    tokens = workload.global_batch_size * workload.seq_length
    flops = model_flops_per_sequence(spec, workload.seq_length) * workload.global_batch_size
    n = layout.world_size
    return StepTime(step_s=step, breakdown_s=breakdown, stages=stages, tokens_per_s_per_gpu=tokens / step / n,
                    model_tflops_per_gpu=flops / step / n / 1e12,
                    mfu=flops / step / n / cluster.gpu.peak_flops(workload.precision),
                    bubble_fraction=breakdown["bubble"] / step)
