"""Per-GPU memory of every pipeline stage, as Megatron-Core allocates it. Pure functions, bytes.

Sources (``reference/megatron.md``): static bytes per parameter section 2; activations per layer
section 3.3 (dense, TE spec, flash attention), 3.4 (MoE, alltoall dispatcher), 3.5 (MLA);
recompute 3.3; micro-batches in flight 3.6; embedding and logits 3.7; memory outside the caching
allocator 3.8 (a calibrated reserve, ``cost/calibration.yaml``).

Notation: ``T = s*b/c`` tokens per CP rank, ``sigma = t`` with sequence parallelism else 1,
``delta = 1`` when hidden dropout is on (its masks are kept), bf16 activations (2 bytes).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Iterable, Iterator

from megasolve.cost import combine
from megasolve.cost.calibration import calibration, chip_family
from megasolve.cost.moe_routing import routed_rows
from megasolve.cost import hybrid
from megasolve.cost.layers import LayerKind, has_block_kinds, model_layer_kinds, mtp_layer_kind, stage_layers
from megasolve.models.layout import ELEMENT_BYTES, NVFP4_BYTES, Layout, Workload
from megasolve.models.params import RankParams, StageParams, embedding_params, output_params, stage_params
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


# Catalog names of the sm >= 10.0 (Blackwell) GPUs: b200, gb200, b300, gb300. The GPU catalog has no
# compute-capability field; this prefix rule is checked against it in tests/test_memory.py.
BLACKWELL_NAME_PREFIXES = ("b", "gb")


def fp8_weight_bytes_per_param(gpu_name: str, recipe: str) -> float:
    """Bytes per GEMM weight parameter of the FP8 weight Transformer Engine keeps in training (the cached
    copy next to the bf16 weight, or the FP8 primary weight with ``--fp8-param-gather``).

    Per-tensor scaling (``delayed``, ``tensorwise``): a ``Float8Tensor`` with columnwise usage; Hopper has
    no non-TN FP8 GEMM and materialises a transpose next to the data (TE ``tensor/float8_tensor.py``
    L423-427, ``utils.py::is_non_tn_fp8_gemm_supported``: sm >= 10.0 does not) -> 2 B on Hopper
    (``calibration: fp8_weight_cache_bytes_per_param``), 1 B on Blackwell. ``mxfp8``: an ``MXFP8Tensor``
    keeps rowwise and columnwise data, each with an E8M0 scale per 32 values (TE
    ``tensor/mxfp8_tensor.py``): ``2 * (1 + 1/32)``. ``blockwise``: rowwise and columnwise data with an
    fp32 scale per 128 x 128 block (TE ``tensor/float8_blockwise_tensor.py``; weights use 2D blocks): 2 B.

    >>> fp8_weight_bytes_per_param("h100", "delayed"), fp8_weight_bytes_per_param("gb200", "tensorwise")
    (2, 1.0)
    >>> fp8_weight_bytes_per_param("b300", "mxfp8"), fp8_weight_bytes_per_param("gb300", "nvfp4")
    (2.0625, 1.125)

    ``nvfp4`` (``--precision fp4``): an ``NVFP4Tensor`` keeps rowwise and columnwise (transposed) data, each
    a 4-bit value plus an E4M3 scale per 16 (weights quantised in 16 x 16 blocks; Blackwell's FP4 GEMM takes
    both operands K-major, so both layouts are stored): ``2 * NVFP4_BYTES``.
    """
    if recipe == "nvfp4":
        return 2 * NVFP4_BYTES
    if recipe == "mxfp8":
        return 2 * (1 + 1 / 32)
    if recipe == "blockwise":
        return 2.0
    if gpu_name.startswith(BLACKWELL_NAME_PREFIXES):
        return 1.0
    return calibration()["memory"]["fp8_weight_cache_bytes_per_param"]


def static_bytes(params: RankParams, *, dense_shards: int, expert_shards: int, distributed_optimizer: bool,
                 precision: str = "bf16", fp8_param_gather: bool = False, grad_bytes: int = FP32,
                 bf16_only: int = 0, fp8_bytes: float | None = None, optimizer: str = "adam",
                 adam_bytes: float = 12.0) -> StaticBytes:
    """Weights, fp32 main grads and Adam state of one rank (section 2).

    bf16 params (2 B) + fp32 main grads (4 B, full size even with the distributed optimizer) + fp32
    master copy and Adam m, v (12 B) sharded over ``dense_shards = DP*CP`` for dense parameters and
    ``expert_shards = EDP`` for experts with the distributed optimizer (``6 + 12/d``), else 18 B.
    FP8 training keeps bf16 parameters and adds the cached FP8 copy of every GEMM weight
    (``calibration: fp8_weight_cache_bytes_per_param`` = 2 on Hopper): Megatron-Core passes
    ``is_first_microbatch`` to TE linears (``extensions/transformer_engine.py`` L1338-1345, unless
    ``--disable-parameter-transpose-cache``), so TE keeps the quantized weight in
    ``self._fp8_workspaces["weight"]`` across micro-batches and steps (TE ``module/linear.py``
    L1958-1971); in training it is quantized with columnwise usage (L467-475), which on GPUs without
    non-TN FP8 GEMMs (Hopper, sm < 10.0: TE ``utils.py::is_non_tn_fp8_gemm_supported``) adds a
    materialised ``_transpose`` next to ``_data`` (``tensor/float8_tensor.py`` L423-427): 1 + 1 B.
    Blackwell keeps one FP8 buffer (1 B); this function does not know the GPU, so it uses the
    calibrated Hopper value unless ``fp8_bytes`` (``fp8_weight_bytes_per_param`` of the GPU and recipe)
    is given: ``stage_memory`` gives it (1 B per-tensor on Blackwell, ``2 + 2/32`` with MXFP8). ``bf16_only``: sharded
    weights that stay bf16 in FP8 training (word embedding, output layer: ``gpt_model.py`` L272-276
    builds a plain ``ColumnParallelLinear``), no FP8 copy.
    ``grad_bytes = 2`` with ``--grad-reduce-in-bf16`` (the main-grad buffer takes the reduction dtype,
    ``param_and_grad_buffer.py`` L921-924). ``adam_bytes``: Adam's state per parameter, 12 or the precision-aware
    optimizer's (``adam_state_bytes_per_param``).

    >>> s = static_bytes(RankParams(tp_sharded=1_000_000), dense_shards=4, expert_shards=1,
    ...                  distributed_optimizer=True)
    >>> s.weights, s.grads, s.optimizer  # 2 + 4 + 12/4 bytes per parameter
    (2000000, 4000000, 3000000.0)
    """
    weights = BF16 * params.total
    fp8 = calibration()["memory"]["fp8_weight_cache_bytes_per_param"] if fp8_bytes is None else fp8_bytes
    if precision in ("fp8", "fp4") and fp8_param_gather:
        # FP8 primary weights (--fp8-param-gather): GEMM weights are FP8 tensors (on Hopper 1 B + its
        # transpose 1 B) instead of bf16 + a cached FP8 copy; the rest stays bf16
        weights = BF16 * (params.replicated + bf16_only) + fp8 * (params.tp_sharded + params.expert - bf16_only)
    elif precision in ("fp8", "fp4"):
        weights += fp8 * (params.tp_sharded + params.expert - bf16_only)
    grads = grad_bytes * params.total
    # Adam: fp32 main weight, m, v (12 B). Muon (``optimizer == "muon"``): fp32 main weight and one momentum (8 B)
    # for the 2-D weights it manages -- the TP-sharded and expert GEMM weights but the word embedding and output
    # layer (``bf16_only``; emerging_optimizers.py L140-147) --, Adam for the rest; the layer-wise distributed
    # optimizer shards whole tensors per DP rank, costed as an even share
    muon_dense = params.tp_sharded - bf16_only if optimizer == "muon" else 0
    muon_expert = params.expert if optimizer == "muon" else 0
    dense_state = adam_bytes * (params.dense - muon_dense) + 8 * muon_dense
    expert_state = adam_bytes * (params.expert - muon_expert) + 8 * muon_expert
    if distributed_optimizer:
        optimizer_bytes = dense_state / dense_shards + expert_state / expert_shards
    else:
        optimizer_bytes = dense_state + expert_state
    return StaticBytes(weights, grads, optimizer_bytes)


def adam_state_bytes_per_param(workload: Workload) -> float:
    """Adam's optimizer state per parameter: an fp32 master weight, m and v, 12 B; with the precision-aware optimizer
    (``Workload.precision_aware_optimizer``) Transformer Engine's FusedAdam keeps m and v in ``--exp-avg-dtype`` /
    ``--exp-avg-sq-dtype`` (``core/optimizer/__init__.py`` L564-570 @d98e8a6) and, whenever
    ``use_precision_aware_optimizer_no_fp8_or_ds_fp8`` holds (OptimizerConfig L407-413: fp16 main parameters, or
    ``fp8_recipe`` delayed -- Megatron-LM passes ``args.fp8_recipe``, ``delayed`` by default, in bf16 runs too,
    ``training.py`` L2731), the master weight as well (L576-588): fp16, or fp32 stored as the 16-bit remainder beside
    the bf16 parameter (``store_param_remainders``, on by default, TE >= 2.1: OptimizerConfig L192-195), 2 B either
    way. FP8 with another recipe keeps Megatron-Core's fp32 main parameters (4 B; ``distrib_optimizer.py`` L422).
    The GPU share of an offloaded optimizer (``--optimizer-offload-fraction``) is costed with the same bytes.

    >>> adam_state_bytes_per_param(Workload())
    12.0
    >>> adam_state_bytes_per_param(Workload(precision_aware_optimizer=True, exp_avg_dtype="bf16",
    ...                                     exp_avg_sq_dtype="bf16"))
    6.0
    >>> adam_state_bytes_per_param(Workload(precision="fp8", fp8_recipe="mxfp8", precision_aware_optimizer=True))
    12.0
    """
    from megasolve.models.layout import ADAM_STATE_DTYPES

    if not workload.precision_aware_optimizer:
        return 12.0
    te_master = workload.main_params_dtype != "fp32" or workload.precision != "fp8" or workload.fp8_recipe == "delayed"
    return float((2 if te_master else 4) + ADAM_STATE_DTYPES[workload.exp_avg_dtype]
                 + ADAM_STATE_DTYPES[workload.exp_avg_sq_dtype])


def offloaded_optimizer(static: StaticBytes, fraction: float) -> StaticBytes:
    """Optimizer CPU offload (``--optimizer-offload-fraction``, ``cost/offload.py``): that fraction of the
    optimizer shard (fp32 master weights, Adam m and v) lives in host memory.

    >>> offloaded_optimizer(StaticBytes(2.0, 4.0, 12.0), 0.5).optimizer
    6.0
    """
    if not fraction:
        return static
    return StaticBytes(static.weights, static.grads, static.optimizer * (1.0 - fraction))


def fsdp_static_bytes(params: RankParams, layers: RankParams, largest_layer: RankParams, *, dense_shards: int,
                      expert_shards: int, precision: str = "bf16", fp8_param_gather: bool = False,
                      grad_bytes: int = FP32, fp8_bytes: float | None = None) -> StaticBytes:
    """Weights, grads and Adam state of one rank under Megatron-FSDP with ``optim_grads_params``
    (ZeRO-3), dense parameters sharded over ``dense_shards = DP*CP``, experts over ``expert_shards =
    EDP`` (Megatron-LM ``docs/user-guide/features/megatron_fsdp.md``, "Mixing FSDP & Model
    Parallelism": FSDP shards over the DP (and CP) ranks of each mesh, last).

    * Sharded, every parameter: compute weight (2 B, 1 B with FP8 primary weights), main grad
      (``grad_bytes``: ``Workload.fsdp_grad_bytes``, bf16 2 B under Megatron-LM's ``auto``, 4 B with
      ``--megatron-fsdp-main-grads-dtype fp32``), fp32 main weight + Adam m, v (12 B;
      ``--megatron-fsdp-main-params-dtype`` default fp32, arguments.py L3687): ``(2 + g + 12) / d``.
    * Un-sharded, transient: parameters are all-gathered per FSDP unit (one transformer layer) before
      forward and backward and gradients reduce-scattered per unit after backward; prefetching needs
      "at least two FSDP units worth of un-sharded weight memory" and two of un-sharded gradient memory
      (same document, "FSDP Unit Modules"; ``--fsdp-double-buffer`` allocates exactly two): ``2 x``
      the largest layer in weights (+ its FP8 copy when training in FP8 without FP8 primary weights:
      Bridge sets ``keep_fp8_transpose_cache = False`` so TE's copy lives only while the unit is
      gathered) and ``2 x`` in main grads.
    * Non-unit parameters (embedding, output layer, final norm, MTP projections) are gathered on first
      use and "remain persistently un-sharded" (same document, "FSDP Module Hooks"): full bf16 weights.

    >>> s = fsdp_static_bytes(RankParams(tp_sharded=8_000_000), RankParams(tp_sharded=8_000_000),
    ...                       RankParams(tp_sharded=1_000_000), dense_shards=8, expert_shards=1)
    >>> s.weights, s.grads, s.optimizer  # (2 + 4 + 12)/8 per parameter + 2 layers x (2 + 4) bytes
    (6000000.0, 12000000.0, 12000000.0)
    """
    gathered = ELEMENT_BYTES[precision] if fp8_param_gather else BF16
    fp8 = calibration()["memory"]["fp8_weight_cache_bytes_per_param"] if fp8_bytes is None else fp8_bytes
    fp8_copy = fp8 if precision in ("fp8", "fp4") and not fp8_param_gather else 0

    def sharded(p: RankParams) -> float:
        return p.dense / dense_shards + p.expert / expert_shards

    non_unit = params.total - layers.total
    weights = gathered * sharded(layers) + BF16 * non_unit + 2 * (gathered + fp8_copy) * largest_layer.total
    grads = grad_bytes * (sharded(params) + 2 * largest_layer.total)
    return StaticBytes(weights, grads, 12 * sharded(params))


# ---------------------------------------------------------------------------- activations per layer
def fused_norm_output_bytes(workload: Workload, shape: ActivationShape) -> float:
    """Bytes per element of a ``LayerNormLinear``'s saved norm output (the fused QKV / fc1 input): the GEMM
    input's (``gemm_input_bytes``), but under NVFP4 with sequence parallelism TE keeps both the rowwise and the
    columnwise copy of the local shard (it drops the rowwise one only for MXFP8 / block-scaled FP8 or when nothing
    is gathered: TE ``module/layernorm_linear.py`` L468-487 @d0067d0d), ``2 * NVFP4_BYTES``."""
    if workload.precision == "fp4" and shape.sequence_parallel and shape.tp > 1:
        return 2 * NVFP4_BYTES
    return gemm_input_bytes(workload)


def gemm_input_bytes(workload: Workload) -> float:
    """Bytes per element of a saved GEMM input: Transformer Engine keeps the quantized copy of the LN
    output / attention output / activation output that the wgrad GEMM reads -- FP8 (1 B), or NVFP4's
    columnwise copy (``NVFP4_BYTES``) -- and bf16 (2 B) otherwise."""
    return ELEMENT_BYTES[workload.precision]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationShape:
    """The axes that size one layer's activations on one rank."""

    tp: int
    cp: int
    mbs: int
    sequence_parallel: bool
    etp: int = 1
    ep: int = 1  # sizes only what the allgather dispatcher gathers (``allgather_rows``)

    def tokens(self, workload: Workload) -> float:
        """``T``: tokens of one micro-batch on one CP rank."""
        return workload.seq_length * self.mbs / self.cp

    @property
    def sigma(self) -> int:
        return self.tp if self.sequence_parallel else 1


# Selective recompute (``--recompute-granularity selective --recompute-modules ...``, TC L560-580 and
# L1940-1970; default ``["core_attn"]``): each module, as data, with the saved tensors (term names of
# ``attention_activation_terms`` / ``mlp_activation_terms``) it stops keeping. Sources:
# * core_attn: ``attention.py`` L394 checkpoints core attention; Q, K, V stay (checkpoint inputs) and O
#   stays (linear_proj input); the s x s scores/softmax/dropout and the expanded GQA K, V (unfused) and
#   the flash LSE go.
# * layernorm: ``transformer_layer.py`` L470-530 recomputes only a *standalone* norm
#   (``not isinstance(input_layernorm, IdentityOp)``): with the TE spec the dense layers' norms are
#   fused into ``TELayerNormColumnParallelLinear`` (IdentityOp, nothing to drop); the MoE pre-MLP norm
#   and the MLA input norm (``gpt_layer_specs.py`` MLA spec) are standalone -> their outputs go.
# * mlp: ``transformer_layer.py`` L539 (dense layers only) checkpoints the whole MLP from its input.
# * moe_act: ``moe/experts.py`` L271 output-discarding checkpoint of the expert activation (fc2 input; the
#   checkpoint runs the activation without grad, so the unfused path's own saved tensors go too).
# * shared_experts: ``moe/shared_experts.py`` L158 checkpoints the shared MLP (its input, the
#   pre-MLP LN output, is kept anyway).
# * moe: ``moe/moe_layer.py`` L249 checkpoints the whole MoE layer from its input (the LN output).
# * mla_up_proj: ``multi_latent_attention.py`` L173 discards the up-projection + RoPE outputs
#   (Q, K, V of every head); the compressed latents stay (reference section 3.5).
# * DSA: ``AbsorbedMLASelfAttention`` checkpoints its core attention, ``DSAttention`` with the indexer, the same way
#   (absorbed_mla.py L847-849): the top-k indices and the indexer's saved tensors go with core_attn; its
#   mla_up_proj recompute discards the absorbed query and key (L671-676, L904-907).
RECOMPUTE_MODULES: dict[str, frozenset[str]] = {
    "core_attn": frozenset({"attn_scores", "softmax_stats", "kv_expanded", "dsa_topk", "dsa_indexer"}),
    "layernorm": frozenset({"attn_norm_output", "mlp_norm_output"}),
    "mlp": frozenset({"mlp_fused_norm_output", "fc1_output", "act_output", "act_unfused"}),
    "moe_act": frozenset({"expert_act_output", "expert_act_unfused"}),
    "shared_experts": frozenset({"shared_fc1_output", "shared_act_output", "shared_act_unfused"}),
    "moe": frozenset({"router", "expert_input", "expert_fc1_output", "expert_act_output", "expert_act_unfused",
                      "shared_fc1_output", "shared_act_output", "shared_act_unfused", "latent_up_input"}),
    "mla_up_proj": frozenset({"mla_up"}),
}
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)


# Fine-grained activation offloading (``Workload.offload_modules``; TC L1320-1345): each module offloads the
# tensors saved for backward inside its scope (``fine_grained_activation_offload.py`` on_save_for_backward),
# as the saved-tensor names of ``attention_activation_terms`` / ``mlp_activation_terms``. Sources (@d98e8a6):
# * attn_norm: a *standalone* input norm's input (MLA; the TE spec fuses GQA's norm into linear_qkv, an IdentityOp
#   the offload skips, transformer_layer.py L1547-1566);
# * qkv_linear: what ``get_query_key_value_tensors`` keeps (attention.py L1386, multi_latent_attention.py L343):
#   GQA the fused norm-linear's input and output and the q/k norms, MLA the down projections' input and the latents;
# * core_attn: Q, K, V, the softmax statistics / scores and the expanded GQA K, V (attention.py L1552);
# * attn_proj: O, linear_proj's input (L1626; core attention keeps the same storage, so only with both);
# * mlp_norm: the MoE layers' standalone pre-MLP norm input (dense layers fuse it, L1553-1592);
# * expert_fc1 / moe_act: the experts' FC1 input / the activation's input (moe/experts.py L928, L941).
# Tensors under ``--min-offloaded-tensor-size`` (default 1M elements) stay: a term under 2 MiB is kept.
MIN_OFFLOADED_BYTES = 2 * 2 ** 20
# The last group of each module name stays on the GPU (its backward comes first: ``should_bulk_offload``
# L1206-1227) and the next layer's groups are reloaded ahead of its backward (``bulk_reload`` /
# ``pre_reload_last_layer`` L1198-1204, L1271-1286): two layers' offloaded tensors at the backward's start.
OFFLOAD_RESIDENT_LAYERS = 2


def offloaded_terms(spec: ModelSpec, workload: Workload, moe: bool) -> frozenset[str]:
    """Saved-tensor names that ``workload.offload_modules`` moves to host memory in a layer (``moe``: an MoE
    layer; comment above for the sources).

    >>> from megasolve.models.presets import load_preset
    >>> w = Workload(offload_modules=("core_attn", "attn_proj", "expert_fc1"))
    >>> sorted(offloaded_terms(load_preset("mixtral-8x7b"), w, moe=True))
    ['attn_gate', 'attn_scores', 'core_output', 'expert_input', 'kv_expanded', 'mla_up', 'qkv', 'softmax_stats']
    """
    modules = set(workload.offload_modules)
    out: set[str] = set()
    if "attn_norm" in modules and spec.mla is not None:
        out.add("attn_norm_input")
    if "qkv_linear" in modules:
        out |= {"attn_norm_output", "mla_latents"} if spec.mla is not None else {
            "attn_norm_input", "attn_fused_norm_output", "qk_norm_input"}
    if "core_attn" in modules:
        out |= {"qkv", "softmax_stats", "kv_expanded", "attn_scores", "mla_up", "attn_gate"}
    if "attn_proj" in modules:
        out.add("core_output")
    if moe and "mlp_norm" in modules:
        out.add("mlp_norm_input")
    if moe and "expert_fc1" in modules:
        out.add("expert_input")
    if moe and "moe_act" in modules:
        out |= {"expert_fc1_output", "expert_act_unfused"}
    return frozenset(out)


def dropped_terms(recompute_modules: tuple[str, ...]) -> frozenset[str]:
    """Saved-tensor names that selective recompute of ``recompute_modules`` re-materialises.

    >>> sorted(dropped_terms(("core_attn", "moe_act")))  # doctest: +NORMALIZE_WHITESPACE
    ['attn_scores', 'dsa_indexer', 'dsa_topk', 'expert_act_output', 'expert_act_unfused', 'kv_expanded',
     'softmax_stats']
    """
    unknown = set(recompute_modules) - set(RECOMPUTE_MODULES)
    if unknown:
        raise ValueError(f"recompute_modules {sorted(unknown)} not in Megatron's choices "
                         f"{sorted(RECOMPUTE_MODULES)} (TC L1944-1962)")
    return frozenset().union(*(RECOMPUTE_MODULES[m] for m in recompute_modules))


def attention_activation_terms(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> dict[str, float]:
    """Saved tensors of one attention block (section 3.3 GQA / 3.5 MLA), per micro-batch per rank, by name.

    GQA: ``(4 + delta)*T*h/sigma`` (input-LN input, LN output saved by the TE LayerNormLinear, dropout
    mask) ``+ 2*T*d*(n/t + 2*g_r)`` (Q, K, V) ``+ 2*T*n*d/t`` (O) ``+ 4*T*n/t`` (fp32 softmax LSE of
    flash / fused attention); with ``qk_layernorm`` the per-head q/k norms keep their input and rstd,
    ``T*(n/t + g_r)*(2d + 4)`` (traced with torch norms, case ``dense-gqa-qknorm``).
    MLA (section 3.5): standalone input norm, the down-projection outputs ``2*T*(q_lora + kv_lora + r)
    /sigma`` and, with ``qk_layernorm``, the q/kv norm outputs ``2*T*(q_lora + kv_lora)/sigma``; Q and K
    after RoPE ``2*T*(n/t)*(qk + r)`` each, V ``2*T*(n/t)*dv``, O ``2*T*(n/t)*dv``. The kv up-projection
    output ``[T, n/t, qk + dv]`` is not kept: it is split into K-nope and V and both are copied
    (``torch.cat`` with the rope part, ``.contiguous()``), which save nothing (traced:
    ``tests/data/megatron_activation_golden.json``, case ``mla-dense``).
    Unfused attention (Megatron-Core ``DotProductAttention``, ``dot_product_attention.py``; traced, case
    ``dense-gqa``): per score element of the ``(n/t) x T x s`` scores, the fp32 softmax output saved by
    ``softmax`` (4 B: ``attention_softmax_in_fp32`` defaults to True, TC L343; ``FusedScaleMaskSoftmax``
    upcasts before the torch softmax) and the bf16 probabilities saved by the context ``bmm`` (2 B); with
    attention dropout its mask (1 B on CUDA) and the dropped-out probabilities replace the bf16 copy:
    ``(6 + delta)`` B, plus the ``[s/c, s]`` bool causal mask ``masked_fill`` keeps per layer
    (``transformer/utils.py::get_default_causal_mask``). That is the path without a fused softmax kernel
    (the CPU trace; on a GPU, Transformer Engine's torch fallback). Where TE's fused kernel runs
    (``fused_softmax_kernel``: Megatron's default ``--transformer-impl transformer_engine`` with
    ``--attention-backend unfused`` runs TE's ``UnfusedDotProductAttention``), the kernel keeps only its
    bf16 output, which the context ``bmm`` saves too (dropout with p = 0 returns its input): ``2`` B, or
    ``2 + 1 + 2`` with dropout (Korthikanti's ``5as^2b``). Measured: Megatron-LM's functional test
    ``moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed`` (H100, unfused, MLA + MoE + MTP, s = 4096) peaks at
    60.1 GB on its last rank, where 6 B per score predicted 128 GB
    (``benchmarks/megatron_functional_memory.py``). GQA keys and values are expanded to the query
    heads (``repeat_interleave``, L166-173) and saved expanded: ``2*T*d*(n/t)`` each instead of the
    groups; with MHA and RoPE, V is a view of the QKV GEMM output and keeps all of it alive next to the
    rotated Q and K (``+2*T*d*(n/t + g_r)``; the TE flash path copies V instead: Transformer Engine
    ``attention/dot_product_attention/utils.py::get_qkv_layout`` makes q, k, v contiguous when their
    strides differ). No LSE.

    Attention variants (issue 15) change none of these tensors: with flash / fused attention a sliding
    window or chunk only skips score blocks (Q, K, V, O and the LSE stay ``O(T)``), sinks add one logit
    per head (TE ``softmax_offset``, a parameter), and unfused attention applies a window as a mask over
    the same ``T x s`` scores (``dot_product_attention.py`` L93-108). Partial rotary and no-RoPE layers
    only change elementwise work.

    >>> from megasolve.models.presets import load_preset
    >>> terms = attention_activation_terms(load_preset("llama-3.1-70b"), Workload(seq_length=8192),
    ...                                    ActivationShape(tp=4, cp=2, mbs=1, sequence_parallel=True))
    >>> sum(terms.values()) / 4096  # bytes per token: 4*8192/4 + 2*128*(16+4) + 2*64*128/4 + 4*64/4
    17472.0
    >>> unfused = attention_activation_terms(load_preset("llama-3.1-8b"),
    ...                                      Workload(seq_length=4096, attention="unfused"),
    ...                                      ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False))
    >>> unfused["attn_scores"] / 4096, unfused["kv_expanded"] / 4096  # 2*32*4096 + 4096 mask; 2*2*128*(32 - 8)
    (266240.0, 12288.0)
    """
    T, t, sigma = shape.tokens(workload), shape.tp, shape.sigma
    h, n = spec.hidden_size, spec.num_attention_heads
    delta = 1 if workload.hidden_dropout > 0 else 0
    a = gemm_input_bytes(workload.module("self_attention.linear_proj"))  # core_output: linear_proj's input
    terms = {"attn_norm_input": BF16 * T * h / sigma, "attn_dropout_mask": delta * T * h / sigma}
    unfused = workload.attention == "unfused"
    if spec.mla is None:
        d, g = spec.kv_channels, spec.num_query_groups
        g_local = max(g / t, 1)
        terms["attn_fused_norm_output"] = fused_norm_output_bytes(
            workload.module("self_attention.linear_qkv"), shape) * T * h / sigma
        terms["qkv"] = BF16 * T * d * (n / t + 2 * g_local)
        terms["core_output"] = a * T * n * d / t
        if spec.attention_output_gate:  # the sigmoid gate's input, kept by the gating multiply (not traced)
            terms["attn_gate"] = BF16 * T * n * d / t
        if spec.qk_layernorm:  # q/k norms (TENorm) save their bf16 input and fp32 rstd per head row
            terms["qk_norm_input"] = T * (n / t + g_local) * (BF16 * d + FP32)
        if unfused and n / t > g_local:  # K and V repeated to the query heads inside core attention
            terms["kv_expanded"] = 2 * BF16 * T * d * (n / t - g_local)
        elif unfused and spec.position_embedding_type == "rope":
            # MHA: V stays a view of the QKV GEMM output, so its Q and K thirds stay alive next to the
            # rotated Q and K (traced, case dense-mha-gelu-layernorm)
            terms["kv_expanded"] = BF16 * T * d * (n / t + g_local)
    else:
        mla = spec.mla
        qk, r, dv = mla.qk_head_dim, mla.qk_pos_emb_head_dim, mla.v_head_dim
        latents = (mla.q_lora_rank or 0) + mla.kv_lora_rank
        terms["attn_norm_output"] = gemm_input_bytes(workload.module(
            "self_attention.linear_q_proj" if mla.q_lora_rank is None else "self_attention.linear_q_down_proj")) \
            * T * h / sigma
        norms = BF16 * T * latents / sigma if spec.qk_layernorm else 0.0
        terms["mla_latents"] = BF16 * T * (latents + r) / sigma + norms
        if spec.dsa is not None:
            # the absorbed path concatenates the kv norm's output with the RoPE key (torch.cat saves nothing): only
            # the q norm's output is kept (traced, benchmarks/megatron_dsa_activation_trace.py)
            if spec.qk_layernorm:  # (the q / kv norms are standalone TENorms here: each keeps its fp32 rstd)
                terms["mla_latents"] += (2 * FP32 - BF16 * mla.kv_lora_rank) * T / sigma
            terms.update(dsa_attention_terms(spec, workload, shape))
            return terms
        terms["mla_up"] = BF16 * T * (n / t) * (2 * (qk + r) + dv)
        terms["core_output"] = a * T * (n / t) * dv
    if unfused:
        s_q = workload.seq_length / shape.cp
        per_score = (2 + 3 * delta) if fused_softmax_kernel(spec, workload, shape) else (6 + delta)
        terms["attn_scores"] = per_score * (n / t) * T * workload.seq_length + s_q * workload.seq_length
    else:
        terms["softmax_stats"] = FP32 * T * n / t
    return terms


def dsa_attention_terms(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> dict[str, float]:
    """Saved tensors of a DSA attention block beyond MLA's norms and latents, per micro-batch per rank.
    From Megatron-Core @d98e8a6; the absorbed-MLA part and the indexer traced on the CPU
    (``benchmarks/megatron_dsa_activation_trace.py``, one layer, PyTorch kernels), the fused kernels' part read from
    ``dsa_cudnn_kernels.py`` (they need a GPU):

    * absorbed MLA (``absorbed_mla.py`` ``qkv_up_proj_and_rope_apply`` L540-665): the query up-projection's whole
      output ``2*T*(n/t)*(qk + r)`` (the absorption einsum saves its non-RoPE part, a view of it), the RoPE tables
      unfused RoPE keeps (DSA refuses RoPE fusion: four bf16 ``[T, r]`` copies for q and k, ``8*T*r``); the
      absorbed query ``[T, n/t, kv_lora + r]`` and the
      latent key ``[c*T, 1, kv_lora + r]`` that the sparse attention keeps, gathered over SP and CP (dsa.py
      L1780-1860: ``gather_from_sequence_parallel_region`` then the zigzag reorder) (``mla_up``: re-materialised by
      ``mla_up_proj`` recompute, L671-676, as MLA's); the latent output ``2*T*(n/t)*kv_lora`` kept by the
      V-absorption einsum and the output ``a*T*(n/t)*dv`` kept by ``linear_proj`` (``core_output``), and the
      contiguous copy of the V up-projection weight that einsum keeps, ``2*(n/t)*dv*kv_lora`` per layer whatever
      the tokens (dsa.py L1665; 16 MiB a layer for DeepSeek-V3.2 at TP 1); the fp32 LSE per head
      (``softmax_stats``; cuDNN's kernels keep it, TileLang's recompute it);
    * the top-k indices the sparse attention keeps, ``[b, s/c, topk]`` int32 for the fused kernels (the backend
      the launch exports, ``cli/launch.py``), ``min(topk, s)`` per query (``dsa_topk``);
    * with the indexer loss (``DSASpec.loss_coeff`` > 0; without it the indexer runs under ``no_grad``): the
      indexer's q ``[T, n_i, d_i]``, weights and k (gathered over CP like the key: ``[c*T, d_i]``;
      ``FusedDSAIndexerLoss`` saves them, L944), its k norm's input and statistics (``2*T*d_i + 4*T``), its RoPE
      tables (``8*T*r``) and, with SP at TP > 1, the inputs it all-gathers (``h + q_lora`` per token: without SP they
      are the attention's own saved inputs, traced), all full-width on every TP rank
      (``dsa_indexer``). Charged on every DSA layer: a layer that reuses top-k (IndexShare) holds none of it, so
      GLM-5.2's estimate is high by that much on those layers.

    >>> from megasolve.models.presets import load_preset
    >>> terms = dsa_attention_terms(load_preset("deepseek-v3.2"), Workload(seq_length=4096),
    ...                             ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False))
    >>> terms["dsa_topk"] / 4096, terms["dsa_indexer"]  # 4 B x 2048 per query; no indexer loss
    (8192.0, 0.0)
    """
    T, t, c = shape.tokens(workload), shape.tp, shape.cp
    n, mla, dsa = spec.num_attention_heads, spec.mla, spec.dsa
    a = gemm_input_bytes(workload.module("self_attention.linear_proj"))
    r = mla.qk_pos_emb_head_dim
    latent = mla.kv_lora_rank + r
    rope_tables = 4 * BF16 * T * r  # one RoPE application's cos / sin copies
    terms = {
        "mla_up": BF16 * T * (n / t) * (mla.qk_head_dim + r + latent) + BF16 * c * T * latent + rope_tables,
        "core_output": BF16 * T * (n / t) * mla.kv_lora_rank + a * T * (n / t) * mla.v_head_dim
        + BF16 * (n / t) * mla.v_head_dim * mla.kv_lora_rank,
        "softmax_stats": FP32 * T * n / t,
        "dsa_topk": 4 * T * min(dsa.topk, workload.seq_length),
        "dsa_indexer": 0.0,
    }
    if dsa.trains_indexer:
        gathered = spec.hidden_size + spec.indexer_query_input if shape.sequence_parallel and t > 1 else 0
        terms["dsa_indexer"] = BF16 * T * (dsa.n_heads * dsa.head_dim + dsa.n_heads + dsa.head_dim + gathered) \
            + FP32 * T + BF16 * c * T * dsa.head_dim + rope_tables
    return terms


def fused_softmax_kernel(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> bool:
    """Whether unfused attention runs Transformer Engine's fused scale-mask-softmax kernel
    (``attention/dot_product_attention/softmax.py::FusedScaleMaskSoftmax.is_kernel_available`` L296-329 @d0067d0):
    bf16 scores, ``16 < s < 16384``, ``s % 8 == 0``, causal only with ``sq == sk`` (no CP), ``sq % 4 == 0``,
    ``b * n/t % 4 == 0`` and ``sq`` a multiple of the kernel's batches per block (``get_batch_per_block``
    L386-393: 128 threads over warps of ``min(pow2(s), 32)`` lanes, 2 rows per warp up to ``s = 128``).
    Sinks append a logit column (``softmax_offset``: ``s + 1`` keys), so they take the torch path.

    >>> from megasolve.models.presets import load_preset
    >>> spec, shape = load_preset("llama-3.1-8b"), ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> [fused_softmax_kernel(spec, Workload(seq_length=s), shape) for s in (4096, 16384)]
    [True, False]
    """
    s = workload.seq_length
    if spec.softmax_type != "vanilla" or shape.cp > 1 or not 16 < s < 16384 or s % 8:
        return False
    if (shape.mbs * spec.num_attention_heads // shape.tp) % 4:
        return False
    pow2 = 1 << (s - 1).bit_length()
    batches_per_block = 128 // min(pow2, 32) * (2 if pow2 <= 128 else 1)
    return s % 4 == 0 and s % batches_per_block == 0


def attention_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape,
                               selective: bool = False) -> float:
    """Sum of ``attention_activation_terms``; ``selective`` drops what core_attn recompute drops."""
    drop = RECOMPUTE_MODULES["core_attn"] if selective else frozenset()
    return sum(v for k, v in attention_activation_terms(spec, workload, shape).items() if k not in drop)


def mlp_activation_terms(spec: ModelSpec, workload: Workload, shape: ActivationShape, moe: bool) -> dict[str, float]:
    """Saved tensors of the MLP half of a layer (section 3.3 dense, 3.4 MoE), per micro-batch per rank.

    Dense: ``(4 + delta)*T*h/sigma`` (pre-MLP LN input, fused LN output, dropout mask)
    ``+ 2*T*(f_glu + 1)*F/t`` (fc1 output, activation output; every fc1 output, dense, routed and shared, at
    ``fc1_output_bytes``: 1 B with ``--activation-func-fp8-input-store``).
    MoE: pre-MLP LN ``(4 + delta)*T*h/sigma`` (standalone norm: its output feeds the router GEMM,
    which saves it), router and permutation state ``(14*E + 20*k)*T/sigma`` (traced, cases ``moe-*``:
    the fp32 probabilities scattered to ``[T, E]`` and their transposed copy for the permutation,
    4 + 4 B per expert; the bool routing map and its transposed copy, 1 + 1 B per expert; the top-k
    indices and the sorted token indices of the permutation, int64, 8 + 8 B per choice; the fp32
    top-k softmax, 4 B per choice; ``router.py::topk_softmax_with_capacity``,
    ``moe_utils.py::permute``; the fp32 ``[T, E]`` softmax scores of the load-balancing loss, 4 B per
    expert, ``router.py::_apply_aux_loss``, case ``moe-alltoall-auxloss``: the recipes use an auxiliary or
    sequence-auxiliary loss), local experts
    ``T_e*(2h + 4 + 2*(f_glu + 1)*F_m/etp)`` with ``T_e = (T/sigma)*k*etp`` routed tokens (balanced
    routing), shared experts ``2*T*(f_glu + 1)*F_s/t``. Without the fused activation kernel
    (``Workload.activation_fusion``) each MLP keeps ``unfused_activation_bytes`` more per element of its
    width. With latent experts (``--moe-latent-size d``) the routed tokens are ``d`` wide (``2d + 4`` B each)
    and ``fc2_latent_proj`` keeps its input, the combined latent tokens, ``2*T*d/sigma`` (``moe_layer.py``
    L583-592; ``fc1_latent_proj``'s input is the saved norm output, its output goes to the permutation, which
    keeps only indices).

    >>> from megasolve.models.presets import load_preset
    >>> terms = mlp_activation_terms(load_preset("llama-3.1-70b"), Workload(seq_length=8192),
    ...                              ActivationShape(tp=4, cp=2, mbs=1, sequence_parallel=True), moe=False)
    >>> sum(terms.values()) / 4096  # bytes per token: 4*8192/4 + 2*3*28672/4
    51200.0
    """
    T, t, sigma = shape.tokens(workload), shape.tp, shape.sigma
    h = spec.hidden_size
    delta = 1 if workload.hidden_dropout > 0 else 0
    glu = spec.gated_factor
    terms = {"mlp_norm_input": BF16 * T * h / sigma, "mlp_dropout_mask": delta * T * h / sigma}
    if not moe:  # (each GEMM input in its module's format: ``Workload.module``)
        F = spec.ffn_hidden_size / t
        fc1 = workload.module("mlp.linear_fc1")
        terms["mlp_fused_norm_output"] = fused_norm_output_bytes(fc1, shape) * T * h / sigma
        terms["fc1_output"] = fc1_output_bytes(spec, workload) * glu * T * F
        terms["act_output"] = gemm_input_bytes(workload.module("mlp.linear_fc2")) * T * F
        terms["act_unfused"] = unfused_activation_bytes(spec, workload, weighted=False) * T * F
        return terms
    m = spec.moe
    # capacity dropping / padding and the FP8 alignment padding (cost/moe_routing.py)
    routed_tokens = (T / sigma) * m.top_k * shape.etp * routed_rows(spec, workload, T / sigma).gemm
    F_m, F_s = m.expert_ffn_hidden_size / shape.etp, m.shared_expert_ffn_hidden_size / t
    a = gemm_input_bytes(workload.module("mlp.shared_experts.linear_fc1" if F_s else "mlp.fc1_latent_proj"
                                         if m.latent_size else "mlp.experts.linear_fc1"))
    terms["mlp_norm_output"] = a * T * h / sigma
    terms["router"] = (14 * m.num_experts + 20 * m.top_k) * T / sigma
    d = spec.expert_hidden_size
    terms["expert_input"] = routed_tokens * (gemm_input_bytes(workload.module("mlp.experts.linear_fc1")) * d + FP32)
    if m.latent_size:  # fc2_latent_proj keeps its input (the combined latent tokens) for its wgrad
        terms["latent_up_input"] = gemm_input_bytes(workload.module("mlp.fc2_latent_proj")) * T * d / sigma
    fc1 = fc1_output_bytes(spec, workload)
    terms["expert_fc1_output"] = fc1 * glu * routed_tokens * F_m
    terms["expert_act_output"] = gemm_input_bytes(workload.module("mlp.experts.linear_fc2")) * routed_tokens * F_m
    terms["expert_act_unfused"] = unfused_activation_bytes(spec, workload, weighted=True) * routed_tokens * F_m
    terms["shared_fc1_output"] = fc1 * glu * T * F_s
    terms["shared_act_output"] = gemm_input_bytes(workload.module("mlp.shared_experts.linear_fc2")) * T * F_s
    terms["shared_act_unfused"] = unfused_activation_bytes(spec, workload, weighted=False) * T * F_s
    return terms


def fc1_output_bytes(spec: ModelSpec, workload: Workload) -> int:
    """Bytes per element of the saved fc1 output, the activation's input: 1 (FP8) when the fused SwiGLU kernel stores
    it so (``Workload.activation_func_fp8_input_store``: only a gated MLP, only with ``activation_fusion``), else 2.
    Traced: cases ``dense-gqa-swiglu-fp8-input-store`` (``2F`` B per token less than ``dense-gqa-fused-swiglu``) and
    ``moe-shared-swiglu-fp8-input-store`` (routed and shared experts).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-8b")
    >>> fc1_output_bytes(spec, Workload()), fc1_output_bytes(spec, Workload(activation_func_fp8_input_store=True))
    (2, 1)
    """
    if workload.activation_func_fp8_input_store and workload.activation_fusion and spec.swiglu:
        return 1
    return BF16


def unfused_activation_bytes(spec: ModelSpec, workload: Workload, *, weighted: bool) -> int:
    """Bytes per element of the MLP width (``F`` per rank) that the unfused activation path keeps beyond the
    fused kernel's input and output (``Workload.activation_fusion`` False; 0 when fused):

    * gated (``mlp.py`` L319-333, ``experts.py`` L997-1008): the SiLU output and ``x_linear +
      glu_linear_offset`` (a copy even at offset 0), both bf16 and kept by their product: 4;
    * routed experts (``weighted``) also multiply by the routing probabilities (L1010-1012): the product keeps
      its bf16 input, the gated product or the plain activation's output: +2 (its bf16 cast is FC2's input,
      ``expert_act_output``);
    * a dense / shared plain (GeLU, squared ReLU) MLP keeps what the fused kernel keeps: 0.

    Traced on Megatron-Core layers (``benchmarks/megatron_activation_golden.py``, local spec without
    ``bias_activation_fusion``): dense SwiGLU +4 F, routed SwiGLU experts +6 F_m, shared SwiGLU +4 F_s per token.

    >>> from megasolve.models.presets import load_preset
    >>> spec, w = load_preset("mixtral-8x7b"), Workload(activation_fusion=False)
    >>> unfused_activation_bytes(spec, w, weighted=True), unfused_activation_bytes(spec, w, weighted=False)
    (6, 4)
    """
    if workload.activation_fusion:
        return 0
    return (4 if spec.swiglu else 0) + (BF16 if weighted else 0)


def mlp_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, moe: bool) -> float:
    """Sum of ``mlp_activation_terms`` (no recompute)."""
    return sum(mlp_activation_terms(spec, workload, shape, moe).values())


def block_modules(kind: LayerKind | None, modules: tuple[str, ...]) -> tuple[str, ...]:
    """The ``--recompute-modules`` that exist in a layer of ``kind`` (all of them in a transformer layer):
    attention modules (core_attn, mla_up_proj) need an attention mixer, MLP / MoE modules an MLP block,
    layernorm either (a Mamba or DeltaNet mixer's norm is fused into its ``in_proj``)."""
    if kind is None or kind.is_gpt:
        return modules
    attention, mlp = kind.mixer == "attention", kind.mlp
    keep = {"core_attn": attention, "mla_up_proj": attention, "layernorm": attention or mlp, "mlp": mlp,
            "moe": mlp, "moe_act": mlp, "shared_experts": mlp}
    return tuple(m for m in modules if keep.get(m, False))


def block_activation_terms(spec: ModelSpec, workload: Workload, shape: ActivationShape,
                           kind: LayerKind) -> dict[str, float]:
    """Saved tensors of one hybrid / DeltaNet layer (``layers.LayerKind``): its mixer's (attention as in a
    transformer layer, Mamba-2 / gated DeltaNet from ``cost/hybrid.py``) and its MLP block's, if any."""
    T, t, sigma = shape.tokens(workload), shape.tp, shape.sigma
    terms: dict[str, float] = {}
    mixer = "mixer." if kind.mixer == "mamba" else "self_attention."
    a = gemm_input_bytes(workload.module(mixer + "out_proj"))  # each GEMM input in its module's format
    norm = fused_norm_output_bytes(workload.module(mixer + "in_proj"), shape)
    if kind.mixer == "attention":
        terms |= attention_activation_terms(spec, workload, shape)
    elif kind.mixer == "mamba":
        terms |= hybrid.mamba_activation_terms(spec, workload, T, t, sigma, a, shape.cp, norm)
    elif kind.mixer == "gdn":
        terms |= hybrid.gdn_activation_terms(spec, workload, T, t, sigma, a, norm)
    if kind.mlp:
        terms |= mlp_activation_terms(spec, workload, shape, kind.moe)
    return terms


def layer_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
                           recompute: str, recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES,
                           kind: LayerKind | None = None) -> float:
    """Bytes one layer keeps for backward, per micro-batch per rank.

    ``recompute``: ``"none"``; ``"selective"`` (the saved tensors of ``recompute_modules`` go,
    ``RECOMPUTE_MODULES``; with the default core_attn and flash attention only the LSE goes, as TC
    L1983-1989 warns); ``"full"`` (only the layer input ``2*T*h/sigma`` is kept, section 3.3,
    ``megatron/core/transformer/transformer_block.py::_checkpointed_forward``).

    >>> from megasolve.models.presets import load_preset
    >>> spec, w = load_preset("llama-3.1-8b"), Workload(seq_length=4096)
    >>> shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    >>> layer_activation_bytes(spec, w, shape, moe=False, recompute="full") / 4096  # 2*4096/2
    4096.0
    """
    return _layer_bytes(spec, workload, shape, moe=moe, recompute=recompute, recompute_modules=recompute_modules,
                        kind=kind)[0]


def offloaded_layer_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
                          recompute: str, recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES,
                          kind: LayerKind | None = None) -> float:
    """Bytes of one layer that fine-grained activation offloading (``Workload.offload_modules``) keeps in host
    memory, per micro-batch per rank: the layer's offloaded terms (``offloaded_terms``) that recompute has not
    already dropped, each of at least ``MIN_OFFLOADED_BYTES`` (0 without offloading or with full recompute)."""
    return _layer_bytes(spec, workload, shape, moe=moe, recompute=recompute, recompute_modules=recompute_modules,
                        kind=kind)[1]


def _layer_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool, recompute: str,
                 recompute_modules: tuple[str, ...], kind: LayerKind | None) -> tuple[float, float]:
    """(bytes kept on the GPU, bytes offloaded to the host) of one layer: ``layer_activation_bytes``."""
    if recompute == "full":
        return BF16 * shape.tokens(workload) * spec.hidden_size / shape.sigma, 0.0
    if kind is not None and not kind.is_gpt:
        terms = block_activation_terms(spec, workload, shape, kind)
        recompute_modules = block_modules(kind, recompute_modules)
    else:
        terms = attention_activation_terms(spec, workload, shape) | mlp_activation_terms(spec, workload, shape, moe)
    drop = dropped_terms(recompute_modules) if recompute == "selective" else frozenset()
    moe_layer = moe if kind is None else (kind.moe and kind.mlp)
    offload = offloaded_terms(spec, workload, moe_layer) if workload.offload_modules else frozenset()
    offloaded = sum(v for k, v in terms.items() if k in offload and k not in drop and v >= MIN_OFFLOADED_BYTES)
    kept = sum(v for k, v in terms.items() if k not in drop) - offloaded
    if recompute == "selective" and "core_attn" in recompute_modules:
        kept += core_attention_checkpoint_inputs_bytes(spec, workload, shape)
    return kept, offloaded


def offload_resident_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, recompute: str,
                           recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES) -> float:
    """Offloaded tensors on the GPU at the peak with fine-grained activation offloading:
    ``OFFLOAD_RESIDENT_LAYERS`` layers' worth of the model's largest layer kind (every stage: a stage holds
    its kinds' largest, bounded by the model's)."""
    if not workload.offload_modules or recompute == "full":
        return 0.0
    kinds = model_layer_kinds(spec)
    return OFFLOAD_RESIDENT_LAYERS * max(
        offloaded_layer_bytes(spec, workload, shape, moe=k.moe, recompute=recompute,
                              recompute_modules=recompute_modules, kind=None if k.is_gpt else k) for k in kinds)


def core_attention_checkpoint_inputs_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """What checkpointing core attention keeps beyond the layer's own saved tensors: the checkpoint saves
    its inputs (``attention.py::_checkpointed_attention_forward``, ``CheckpointFunction.forward``
    ``save_for_backward(*args)``), and V is a view of the QKV GEMM output (GQA/MHA with RoPE: Q and K are
    rotated copies, ``get_query_key_value_tensors`` splits V out) or of the kv up-projection output (MLA),
    so that whole output stays alive: ``+2*T*d*(n/t + g_r)`` (GQA; V itself is counted in ``qkv``) or
    ``+2*T*(n/t)*qk`` (MLA). Traced: case ``dense-gqa-selective-core-attn`` (+768 B/token over the
    dropped-terms count). With flash attention this makes core_attn recompute cost memory, as Megatron
    warns (TC L1983-1989)."""
    T, t = shape.tokens(workload), shape.tp
    n = spec.num_attention_heads
    if spec.mla is not None:
        return BF16 * T * (n / t) * spec.mla.qk_head_dim
    if spec.position_embedding_type != "rope":
        return 0.0
    g_local = max(spec.num_query_groups / t, 1)
    return BF16 * T * spec.kv_channels * (n / t + g_local)


def selective_transient_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
                              recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES,
                              kind: LayerKind | None = None) -> float:
    """Tensors selective recompute re-materialises for one layer during its backward (only one layer
    at a time, ``megatron/core/tensor_parallel/random.py::CheckpointFunction.backward``): the
    difference between the layer's bytes without and with selective recompute.

    >>> from megasolve.models.presets import load_preset
    >>> spec, w = load_preset("llama-3.1-8b"), Workload(seq_length=4096, attention="unfused")
    >>> shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> selective_transient_bytes(spec, w, shape, moe=False) / 4096  # 2*32*4096 + 4096 + 2*2*128*24 - 2*128*40
    268288.0
    """
    return max(0.0, layer_activation_bytes(spec, workload, shape, moe=moe, recompute="none", kind=kind)
               - layer_activation_bytes(spec, workload, shape, moe=moe, recompute="selective",
                                        recompute_modules=recompute_modules, kind=kind))


# Biased experts' fc2 bias loop, forward: the expert output (bf16), the per-expert fp32 sums and their fp32
# concatenation alive at once, bytes per routed row and output value (moe_dispatch_transient_bytes)
EXPERT_BIAS_TRANSIENT_BYTES = BF16 + FP32 + FP32
# The unfused probability-weighted activation's backward (moe_dispatch_transient_bytes), bytes per routed row and
# element of F_m: the fp32 gradient of the bf16 cast, its product with the probabilities (the activation's
# gradient before its bf16 cast) and its product with the activation (the probabilities' gradient before the
# row sum) alive at once
UNFUSED_WEIGHTED_BACKWARD_BYTES = 3 * FP32


def allgather_rows(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Tokens the allgather dispatcher gathers on each rank of one MoE layer: every token of the expert-TP x EP
    group, ``(T/sigma) * etp * ep`` (``token_dispatcher.py::MoEAllGatherTokenDispatcher.token_dispatch``
    L283-303: ``[S*B/TP, H] -> [S*B*EP, H]`` over ``tp_ep_group``); 0 for another dispatcher or a group of
    one rank (nothing is gathered)."""
    if not spec.is_moe or workload.moe_dispatcher != "allgather" or shape.etp * shape.ep == 1:
        return 0.0
    return shape.tokens(workload) / shape.sigma * shape.etp * shape.ep


def allgather_buffer_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """What the allgather dispatcher adds to Megatron's global memory buffer on a stage with MoE layers: it
    gathers the hidden states into the buffer's bf16 ``"mpu"`` tensor (``use_global_buffer=True``, L299-301;
    ``mappings.py::_gather_along_first_dim``), ``2 * allgather_rows * h`` B, kept for the run and shared with
    the unfused attention's score input (``fixed_allocation_bytes``), so only the excess over that counts
    (``utils.py::GlobalMemoryBuffer.get_tensor`` grows one tensor per name and dtype). Traced (cases
    ``moe-allgather-ep8``, ``moe-allgather-ep4-tp2-sp``: ``persistent.global_memory_buffer_total``)."""
    gathered = BF16 * allgather_rows(spec, workload, shape) * spec.hidden_size
    if not gathered:
        return 0.0
    attention = 0.0
    if workload.attention == "unfused" and not fused_softmax_kernel(spec, workload, shape):
        attention = BF16 * shape.mbs * spec.num_attention_heads / shape.tp * workload.seq_length / shape.cp \
            * workload.seq_length
    return max(0.0, gathered - attention)


def moe_dispatch_transient_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Peak of one MoE layer's backward above what the layer keeps, bytes (the layer's saved tensors are
    freed as its backward goes; the gradients of its routed rows are made). Its backward is a chain of
    ``[T_r, *]`` gradients, ``T_r = (T/sigma)*k*etp`` dispatched rows (token dropping / padding
    included, ``cost/moe_routing.py``), each step holding the gradient it reads and the one it writes;
    the peak is the largest step:

    * dispatch, ``2 * 2*T_r*h`` (alltoall; flex taken as the same, not traced): the gradient of the
      experts' output, gathered back to the routed rows by the backward of ``moe_utils.py::unpermute``
      (L461-470, ``index_add_`` / ``scatter_add_``), next to the copy the alltoall dispatcher's chunk
      sort makes of it (``token_dispatcher.py`` ``combine_preprocess``, ``sort_chunks_by_idxs``, L755-771;
      the same on the input side). The allgather dispatcher sorts nothing: its one ``[T_r, h]`` gradient
      is in the FC2 step below. With expert TP (``etp > 1``) both combine with a reduce-scatter in the
      probabilities' dtype (fp32 router, ``--moe-router-dtype fp32`` as the recipes set; L776-783):
      the fp32 gradient all-gathered to ``[T_r, h]`` and its bf16 cast, ``(4 + 2)*T_r*h``. The allgather
      dispatcher combines every gathered token the same way (``token_combine`` L333-341: the unpermuted
      ``[G, h]`` cast to the probabilities' dtype and reduce-scattered), so its backward all-gathers the fp32
      gradient of all ``G = allgather_rows`` tokens and casts it, ``(4 + 2)*G*h`` whenever the group has
      more than one rank (traced: cases ``moe-allgather-ep8``, ``moe-allgather-ep4-tp2-sp``).
    * experts, Transformer Engine's grouped MLP (``experts.py::TEGroupedMLP``: one grouped GEMM per weight
      over all local experts' rows, fused weighted SwiGLU): FC2's backward holds the output gradient and
      writes the activation gradient, ``2*T_r*(h + F_m)``; the SwiGLU backward reads that and writes the
      FC1-output gradient after FC2 has freed the activation it kept, ``2*T_r*(1 + f_glu)*F_m - a*T_r*F_m``
      (``F_m`` per expert-TP rank, ``a`` = ``gemm_input_bytes``). These exceed the dispatch step only
      for experts wider than the model (``F_m > h``, Mixtral); derived, not traced: the CPU trace runs
      ``SequentialMLP``, one expert's rows at a time, whose expert step is that of one expert's share
      (cases ``moe-*-ffn1024``, ``tests/test_activation_golden.py``).

    * the unfused probability-weighted activation (``unfused_activation_bytes``: no fused weighted kernel, e.g.
      GeLU experts, or ``Workload.activation_fusion`` off; ``experts.py::TEGroupedMLP`` ``bias_act_func``
      L733-735 multiplies the bf16 activation by the fp32 probabilities and casts back): its backward holds the
      fp32 gradient of the cast, its product with the probabilities and its product with the activation (the
      probabilities' gradient before the row sum), ``12*T_r*F_m`` (``UNFUSED_WEIGHTED_BACKWARD_BYTES``; traced
      exactly on a rank with one local expert, case ``moe-alltoall-ep8``: ``SequentialMLP`` of one expert runs
      all rows at once, as the grouped MLP does).
    * biased experts (``--add-bias-linear``, GPT-OSS): the fc2 bias is added outside the grouped GEMM,
      per local expert in fp32 (``TEGroupedMLP._apply_bias``, ``cost/step.py`` ``expert_bias_s``). Its
      forward holds the expert output (bf16), the fp32 sums and their fp32 concatenation at once,
      ``(2 + 4 + 4)*T_r*h`` (``EXPERT_BIAS_TRANSIENT_BYTES``); its backward less (the fp32 gradient of the
      cast next to the bf16 one, ``6*T_r*h``). Derived, not traced (the grouped MLP needs a GPU).

    Traced to the byte (CPU, local spec, alltoall dispatcher, ``F_m <= h``; TP/ETP 2 with SP): cases
    ``moe-alltoall*``, ``mla-moe-mtp1``, ``gap-mla-moe32-mtp1``, ``module_backward`` of the MoE layer. With
    the allgather dispatcher the trace holds one ``[T_r, h]`` gradient and one expert's share, less than
    the FC2 step of all rows at once (``moe-allgather*``, ``gap-mla-moe32-mtp1-allgather``).

    >>> from megasolve.models.presets import load_preset
    >>> shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> spec = load_preset("deepseek-v3")  # h = 7168, F_m = 2048, top-8: the dispatch step
    >>> moe_dispatch_transient_bytes(spec, Workload(seq_length=4096), shape) / 2**20  # 2 * 2 B * 32768 rows * 7168
    896.0
    >>> spec = load_preset("mixtral-8x7b")  # h = 4096, F_m = 14336, top-2: the SwiGLU step, 2*8192*(3*14336) - 2*8192*14336
    >>> moe_dispatch_transient_bytes(spec, Workload(seq_length=4096), shape) / 2**20
    448.0
    """
    if not spec.is_moe:
        return 0.0
    m = spec.moe
    router_tokens = shape.tokens(workload) / shape.sigma
    rows = router_tokens * m.top_k * shape.etp * routed_rows(spec, workload, router_tokens).dispatch
    h, F = spec.expert_hidden_size, m.expert_ffn_hidden_size / shape.etp
    if workload.moe_dispatcher == "allgather":
        dispatch = (FP32 + BF16) * allgather_rows(spec, workload, shape) * h
    elif shape.etp > 1:
        dispatch = (FP32 + BF16) * rows * h
    else:
        dispatch = 2 * BF16 * rows * h
    fc2 = BF16 * rows * (h + F)
    swiglu = BF16 * rows * (1 + spec.gated_factor) * F \
        - gemm_input_bytes(workload.module("mlp.experts.linear_fc2")) * rows * F
    bias = EXPERT_BIAS_TRANSIENT_BYTES * rows * h if spec.add_bias_linear else 0.0
    unfused = unfused_activation_bytes(spec, workload, weighted=True)
    weighted = UNFUSED_WEIGHTED_BACKWARD_BYTES * rows * F if unfused else 0.0
    return max(dispatch, fc2, swiglu, bias, weighted)


def moe_stage_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Once on a stage with MoE layers: one MoE layer's backward transient (``moe_dispatch_transient_bytes``) and
    what the allgather dispatcher keeps in Megatron's global buffer (``allgather_buffer_bytes``)."""
    return moe_dispatch_transient_bytes(spec, workload, shape) + allgather_buffer_bytes(spec, workload, shape)


def first_stage_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Per in-flight micro-batch on the first stage: int64 token ids (and position ids) and the
    embedding dropout mask when dropout is on (section 3.7); with TP > 1 the vocab-parallel embedding
    keeps the shifted ids (int64) and the out-of-range mask (bool) for its backward (``layers.py::
    VocabParallelEmbedding.forward``; traced, case ``dense-gqa-tp2``: 9 B/token)."""
    T = shape.tokens(workload)
    delta = 1 if workload.hidden_dropout > 0 else 0
    vocab_parallel = 9 * T if shape.tp > 1 else 0
    return 2 * 8 * T + delta * T * spec.hidden_size / shape.sigma + vocab_parallel


def last_stage_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """One micro-batch's loss path on the last stage (section 3.7), bytes.

    Final-LN input/output ``4*T*h/sigma``; per head (main + each MTP depth) the fp32 logits
    ``[T, V/t]`` that the vocab-parallel cross entropy makes with ``.float()`` and keeps as
    ``exp_logits`` for backward (``tensor_parallel/cross_entropy.py`` ``calculate_logits_max`` L25,
    in-place ``exp``, ``save_for_backward``): ``4*T*V/t``. The MTP heads compute their loss in the
    forward pass one depth after another (``multi_token_prediction.py::process_mtp_loss`` L1012-1027),
    so all ``1 + D`` fp32 copies are alive at once, while only one bf16 logits tensor ``2*T*V/t``
    exists at a time (output GEMM result before ``.float()``; in backward the bf16 grad of the logits).
    The fused ``native`` loss keeps the same fp32 ``exp_logits`` (``fusions/fused_cross_entropy.py``
    L89-119). Transformer Engine's loss (``--cross-entropy-fusion-impl te``) computes in fp32 inside the
    kernel and saves the gradient it writes in the forward pass (TE ``pytorch/cross_entropy.py``
    ``CrossEntropyFunction``): in fp32 since TE 2.18 (TE#3193; ``te``), ``4*T*V/t`` per head, the bf16 logits freed;
    over the bf16 logits before it (``te-bf16grad``), ``2*T*V/t`` per head.

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-8b")  # V = 128256 -> 128512 at t = 4
    >>> b = last_stage_extra_bytes(spec, Workload(seq_length=4096), ActivationShape(tp=4, cp=1, mbs=1,
    ...                            sequence_parallel=True))
    >>> b == 4 * 4096 * 4096 / 4 + (4 + 2) * 4096 * 128512 / 4 + 9 * 4096
    True
    """
    T, t = shape.tokens(workload), shape.tp
    V = spec.padded_vocab_size(t)
    heads = 1 + spec.mtp_num_layers
    logits = heads * BF16 if workload.cross_entropy == "te-bf16grad" else heads * FP32 if \
        workload.cross_entropy == "te" else heads * FP32 + BF16
    targets = 9 * T * heads  # int64 masked targets + bool target mask per head (cross_entropy.py L187; traced)
    return 4 * T * spec.hidden_size / shape.sigma + logits * T * V / t + targets


def fused_loss_transient_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """The fused ``native`` cross entropy's second fp32 logits buffer, alive while the loss runs (forward or
    backward of the last micro-batch on the last stage), bytes. Its helpers are ``jit_fuser`` functions
    (``fusions/fused_cross_entropy.py``), and ``jit_fuser`` is ``torch.compile`` on torch >= 2.2
    (``core/jit.py``): compiled, the in-place ``-=`` / ``exp(out=)`` of ``calculate_predicted_logits`` and the
    in-place gradient of ``calculate_gradients`` are functionalised, so a fresh fp32 ``[T, V/t]`` output
    exists beside the mutated fp32 input, ``4*T*V/t`` more than the eager path ``last_stage_extra_bytes``
    counts (one head at a time). Measured, not traced (the CPU trace runs the loss eagerly): Megatron-LM's
    functional test ``gpt/gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion`` (H100) peaks 0.46 GB above
    its unfused sibling's prediction; this term is 0.41 GB there
    (``benchmarks/megatron_functional_memory.py``). TE's loss since TE 2.18 (``te``): its forward writes the fp32
    gradient while the bf16 logits are alive, ``2*T*V/t`` above what it keeps (derived from the source, not
    measured). TE's earlier loss and the unfused one: 0.

    >>> from megasolve.models.presets import load_preset
    >>> shape = ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True)
    >>> fused_loss_transient_bytes(load_preset("llama-3.1-8b"), Workload(seq_length=4096, cross_entropy="native"),
    ...                            shape) == 4 * 4096 * 128512 / 4
    True
    """
    if workload.cross_entropy not in ("native", "te"):
        return 0.0
    per_logit = FP32 if workload.cross_entropy == "native" else BF16
    return per_logit * shape.tokens(workload) * spec.padded_vocab_size(shape.tp) / shape.tp


def deferred_wgrad_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, num_microbatches: int) -> float:
    """What ``--defer-embedding-wgrad-compute`` keeps on the last stage at its loss peak, bytes: each call of
    the output layer appends its input to ``embedding_activation_buffer`` in forward and its logits gradient
    to ``grad_output_buffer`` in backward instead of running the weight-gradient GEMM, while the buffers hold
    fewer than ``--wgrad-deferral-limit`` entries (0: no limit); the pipeline flush drains them
    (``tensor_parallel/layers.py`` L661-664, L1227-1232; ``schedules.py::finish_embedding_wgrad_compute``;
    ``utils.py::drain_embedding_wgrad_compute``). The heads of every MTP depth call the same output layer
    (``gpt_model.py`` L750-767), so a micro-batch makes ``1 + D`` calls. At the last micro-batch's loss the
    earlier micro-batches' entries are alive: ``n = min(limit, (m - 1)(1 + D))`` pairs of a bf16 gradient
    ``[T, V/t]`` and the layer's bf16 input ``[T/sigma, h]`` (the sequence-parallel shard; the GEMM gathers
    it again in the drain). Measured: Megatron-LM's functional test
    ``gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute`` (H100, limit 2, m = 4)
    peaks 0.51 GB above the prediction without this term; the term is 0.42 GB there
    (``benchmarks/megatron_functional_memory.py``).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-8b")  # V = 128256 -> 128512 at t = 4
    >>> shape = ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True)
    >>> w = Workload(seq_length=4096, defer_embedding_wgrad=True, wgrad_deferral_limit=2)
    >>> deferred_wgrad_bytes(spec, w, shape, 8) == 2 * 2 * 4096 * (128512 / 4 + 4096 / 4)
    True
    """
    if not workload.defer_embedding_wgrad:
        return 0.0
    calls = max(0, num_microbatches - 1) * (1 + spec.mtp_num_layers)
    n = min(workload.wgrad_deferral_limit, calls) if workload.wgrad_deferral_limit else calls
    T, t = shape.tokens(workload), shape.tp
    return n * BF16 * T * (spec.padded_vocab_size(t) / t + spec.hidden_size / shape.sigma)


def last_stage_peak_extra_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """What the last stage holds for its loss at the peak: ``last_stage_extra_bytes`` plus the fused loss's
    transient (``fused_loss_transient_bytes``). ``stage_memory`` and the solver's ``ma_last`` table use it."""
    return last_stage_extra_bytes(spec, workload, shape) + fused_loss_transient_bytes(spec, workload, shape)


def mtp_activation_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape, recompute: str,
                         recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES) -> float:
    """MTP depths (section 1.7): one transformer layer of the last layer's kind each, plus, per depth,
    the inputs of ``enorm`` (the embedding of the shifted tokens) and ``hnorm`` (``2h`` each; the norm
    outputs are concatenated, and only the concatenation, the ``eh_proj`` input ``4h``, is kept) and the
    depth's final norm input and output (``4h``): ``12*T*h/sigma`` per depth
    (``multi_token_prediction.py::MultiTokenPredictionLayer.forward``; traced with torch norms, case
    ``mla-moe-mtp1``). Its fp32 logits are in ``last_stage_extra_bytes``. Under FP4 the MTP layer runs in bf16
    (``layers.mtp_layer_kind``) and keeps bf16 GEMM inputs."""
    if not spec.mtp_num_layers:
        return 0.0
    mtp_kind = mtp_layer_kind(spec, workload)
    mtp_workload = workload.for_kind(mtp_kind.bf16, mtp_kind.overrides)
    layer = layer_activation_bytes(spec, mtp_workload, shape, moe=spec.is_moe_layer(spec.num_layers - 1),
                                   recompute=recompute, recompute_modules=recompute_modules)
    T = shape.tokens(workload)
    return spec.mtp_num_layers * (layer + 12 * T * spec.hidden_size / shape.sigma)


# ---------------------------------------------------------------------------- fixed allocations
MIB = 2**20
# cuBLAS workspaces inside PyTorch's caching allocator, bytes.
# * PyTorch allocates one per (cuBLAS handle, stream) from the caching allocator, and a handle belongs to a
#   thread (``aten/src/ATen/cuda/CublasHandlePool.cpp``: the thread-local ``PoolWindow`` of
#   ``getCurrentCUDABlasHandle``, then ``setWorkspaceForHandle``). Autograd runs CUDA backward ops on its own
#   device thread, so a rank whose torch GEMMs run forward and backward holds two: the main thread's and
#   autograd's (the output layer, Megatron's ``ColumnParallelLinear`` with ``torch.matmul``; MoE routers;
#   unfused attention's ``baddbmm`` / ``bmm``; every GEMM of the local spec). Dense Transformer Engine stages
#   before the last run no torch GEMM and hold none: counted on every stage (a margin of two workspaces
#   there). Size (``parseChosenWorkspaceSize``): ``:4096:8`` = 32 MiB on compute capability 9.x-12.x (Hopper since
#   pytorch/pytorch#89027 / #91564; Blackwell since #175344, merged 2026-02-19; sm 11.0 since #189312),
#   ``:4096:2:16:8`` = 8.125 MiB on older CUDA GPUs (Volta, Ampere, Ada) and on Blackwell with an older PyTorch.
#   Megatron-LM's GB200 CI shows both: of the eight cases that leave the size to PyTorch, four measure the H100 peak
#   and four 48 MiB less (``benchmarks/megatron_functional_memory.py --platform gb200``); the current PyTorch's 32 MiB
#   is taken (the other way would under-predict). ``CUBLAS_WORKSPACE_CONFIG`` overrides the default, and Megatron-LM's
#   ``--deterministic-mode`` sets ``:4096:8`` = 32 MiB on every GPU (``training/determinism.py`` L27-31 @d98e8a6;
#   ``Workload.deterministic_mode``), which the GB200 cases run with measure: the H100 peak. ROCm 128 MiB on gfx94x
#   (MI300X) plus its separate hipBLASLt pool of 76 MiB per handle and stream (``parseCUDABlasLtWorkspaceSize``;
#   CUDA's cuBLASLt pool defaults to 1 MiB: not counted).
# * Transformer Engine keeps one of its own for all threads (``cpp_extensions/gemm.py``
#   ``get_cublas_workspace``, ``lru_cache`` per device; ``get_cublas_workspace_size_bytes``: 32 MiB + 1 KiB on
#   sm >= 9.0, else 4 MiB); for grouped GEMMs (MoE experts) one per compute stream (``num_streams = 4``,
#   ``common/include/transformer_engine/multi_streams.h``); with userbuffers (``--tp-comm-overlap``) one more of
#   ``_NUM_MAX_UB_STREAMS = 3`` times the size (``get_cublas_workspace(device, ub=True, ...)``).
TORCH_CUBLAS_WORKSPACE_BYTES = {"sm90+": 32 * MIB, "cdna3": (128 + 76) * MIB, "other": 8.125 * MIB}
DETERMINISTIC_CUBLAS_WORKSPACE_BYTES = 32 * MIB  # CUBLAS_WORKSPACE_CONFIG=:4096:8
ROCM_HIPBLASLT_POOL_BYTES = 76 * MIB  # beside it on ROCm, whatever the cuBLAS configuration
TORCH_CUBLAS_THREADS = 2  # the main thread (forward) and autograd's device thread (backward)
TE_CUBLAS_WORKSPACE_BYTES = {"sm90+": 32 * MIB + 1024, "older": 4 * MIB}
TE_GROUPED_GEMM_STREAMS = 4
TE_USERBUFFER_GEMM_STREAMS = 3
# Backward of one unfused core attention, per score element, above what the layer keeps (traced: the
# attention block's ``module_backward`` in tests/data/megatron_activation_golden.json): at its peak the fp32
# gradient of the softmax output and the fp32 gradient of its input (``_softmax_backward_data``) are
# alive, 4 + 4 B, after the context ``bmm``'s backward freed the bf16 probabilities it kept, -2 B (with
# attention dropout, the dropped-out probabilities and the dropout mask, -2 - 1 B on CUDA). The attention
# output the projection kept is freed too (``-2*T*n*dv/t``, 1 % of the term at s = 4096 with dv = 128):
# left in as a margin. (Was 5 B, read off whole-model peaks that held the weight gradients.)
UNFUSED_BACKWARD_BYTES_PER_SCORE = {"no_dropout": 4 + 4 - 2, "dropout": 4 + 4 - 2 - 1}
# The same with Transformer Engine's fused softmax kernel (``fused_softmax_kernel``), per score element:
# forward, the empty bf16 output buffer of the scores ``baddbmm`` beside its bf16 result (TE
# ``backends.py::UnfusedDotProductAttention`` L552-631: ``torch.empty`` then ``torch.baddbmm``, not in place);
# backward, the bf16 gradient of the probabilities and the fused softmax backward's fresh bf16 input gradient
# (``csrc/extensions/softmax.cpp``: "Allocate a fresh output buffer"): 2 + 2 B either way, no persistent buffer.
FUSED_SOFTMAX_TRANSIENT_BYTES_PER_SCORE = 2 + 2


def torch_workspace_arch(gpu) -> str:
    """The key of ``TORCH_CUBLAS_WORKSPACE_BYTES`` for a catalog GPU: ``sm90+`` (a CUDA part of compute capability
    9.x to 12.x: Hopper and Blackwell), ``cdna3`` (MI300X / MI325X, gfx942; MI355X, gfx950, whose default PyTorch sizes
    the same as gfx94x), else ``other``.

    >>> from megasolve.topology.cluster import Cluster
    >>> [torch_workspace_arch(Cluster.from_flags(num_gpus=8, gpu=g).gpu) for g in ("h800", "b200", "mi300x", "a100")]
    ['sm90+', 'sm90+', 'cdna3', 'other']
    """
    if gpu.name.startswith("mi3"):
        return "cdna3"
    return "sm90+" if gpu.compute_capability is not None and 9 <= gpu.compute_capability < 13 else "other"


def torch_workspace_bytes(gpu, workload: Workload) -> float:
    """One PyTorch cuBLAS workspace (``TORCH_CUBLAS_WORKSPACE_BYTES``), or 32 MiB (plus ROCm's hipBLASLt pool) under
    ``--deterministic-mode``'s ``CUBLAS_WORKSPACE_CONFIG=:4096:8``."""
    arch = torch_workspace_arch(gpu)
    if workload.deterministic_mode:
        return DETERMINISTIC_CUBLAS_WORKSPACE_BYTES + (ROCM_HIPBLASLT_POOL_BYTES if arch == "cdna3" else 0)
    return TORCH_CUBLAS_WORKSPACE_BYTES[arch]


def te_workspace_arch(gpu) -> str:
    """The key of ``TE_CUBLAS_WORKSPACE_BYTES``: ``sm90+`` for Hopper, Blackwell and MI300X (which reports
    compute capability 9.4 to PyTorch), ``older`` for Ampere, Ada (L40S, sm 8.9) and Volta.

    >>> from megasolve.topology.cluster import Cluster
    >>> [te_workspace_arch(Cluster.from_flags(num_gpus=8, gpu=g).gpu) for g in ("gb300", "l40s", "a100")]
    ['sm90+', 'older', 'older']
    """
    sm90_plus = chip_family(gpu) in ("hopper", "blackwell", "blackwell-ultra") or gpu.name.startswith("mi3")
    return "sm90+" if sm90_plus else "older"


def fixed_allocation_bytes(spec: ModelSpec, cluster: Cluster, workload: Workload, shape: ActivationShape) -> float:
    """Buffers inside the caching allocator that every stage holds once, whatever the number of
    micro-batches in flight: cuBLAS workspaces (PyTorch's, one per thread that runs torch GEMMs, and
    Transformer Engine's; its grouped-GEMM stream workspaces with MoE and its userbuffer workspace with
    ``--tp-comm-overlap``); with unfused attention and Transformer Engine's fused softmax kernel, the
    score-sized transients of one core attention (``FUSED_SOFTMAX_TRANSIENT_BYTES_PER_SCORE``); without the
    kernel, the bf16 ``[b*n/t, s/c, s]`` input of the scores ``baddbmm`` (Megatron's global memory buffer,
    ``parallel_state.get_global_memory_buffer()``, ``dot_product_attention.py`` L188-191, traced:
    ``persistent.global_memory_buffer_total``; TE allocates as much per call) and the backward of one
    unfused core attention (``UNFUSED_BACKWARD_BYTES_PER_SCORE``). Workspace sizes follow the GPU's
    architecture (``torch_workspace_arch``, ``te_workspace_arch``).

    >>> from megasolve.models.presets import load_preset
    >>> shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> round(fixed_allocation_bytes(load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100"),
    ...                              Workload(seq_length=4096), shape) / MIB, 3)  # PyTorch 2 x 32 + TE 32 MiB
    96.001
    >>> round(fixed_allocation_bytes(load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="b200"),
    ...                              Workload(seq_length=4096), shape) / MIB, 3)  # PyTorch 2 x 32 + TE 32 MiB
    96.001
    """
    te = TE_CUBLAS_WORKSPACE_BYTES[te_workspace_arch(cluster.gpu)]
    total = TORCH_CUBLAS_THREADS * torch_workspace_bytes(cluster.gpu, workload) + te
    if spec.is_moe:
        total += TE_GROUPED_GEMM_STREAMS * te
    if uses_userbuffers(workload, shape):
        total += TE_USERBUFFER_GEMM_STREAMS * te
    if workload.attention == "unfused":
        scores = shape.mbs * spec.num_attention_heads / shape.tp * workload.seq_length / shape.cp \
            * workload.seq_length
        if fused_softmax_kernel(spec, workload, shape):
            total += FUSED_SOFTMAX_TRANSIENT_BYTES_PER_SCORE * scores
        else:
            backward = UNFUSED_BACKWARD_BYTES_PER_SCORE["dropout" if workload.hidden_dropout > 0 else "no_dropout"]
            total += (BF16 + backward) * scores
    return total


# ---------------------------------------------------------------------------- DeepEP buffers
# The flex dispatcher with DeepEP (Megatron-Core ``transformer/moe/fused_a2a.py::get_buffer`` L33-66) allocates
# one ``deep_ep.Buffer`` per process for the expert group (``tp_ep_group``: EP x expert-TP ranks), sized
# by the larger of DeepEP's dispatch and combine configs for that group size: ``num_nvl_bytes`` (NVLink
# buffer, ``cudaMalloc`` + IPC) and ``num_rdma_bytes`` (NVSHMEM symmetric heap, only when the group
# spans more than ``NUM_MAX_NVL_PEERS = 8`` ranks). Both live outside PyTorch's caching allocator for the
# whole run: counted with the memory outside it (``StageMemory.other_bytes``) on stages with MoE layers.
# Sizes: DeepEP ``csrc/config.hpp`` ``Config::get_nvl_buffer_size_hint`` / ``get_rdma_buffer_size_hint``
# (deepseek-ai/DeepEP @030cdf0a), configs ``deep_ep/buffer.py`` ``get_dispatch_config`` /
# ``get_combine_config`` (@04b06f7a), ``num_sms`` = Megatron's ``moe_deepep_num_sms`` (TC L722, 20;
# ``token_dispatcher.py`` L1153), hidden bytes ``h * max(element size, 2)`` (``fused_a2a.py::get_hidden_bytes``
# L21-30: bf16 tokens, 2h).
DEEPEP_NUM_SMS = 20
DEEPEP_NUM_MAX_NVL_PEERS = 8
DEEPEP_MAX_TOPK = 128  # kNumMaxTopK
DEEPEP_MAX_SCALES = 128  # kNumMaxScales
DEEPEP_SOURCE_META_BYTES = 8  # internode::SourceMeta: two ints
# group size -> (NVL recv chunk tokens, RDMA recv chunk tokens); the dispatch and combine configs of
# buffer.py share these for every size (they differ in the send chunks, which do not size the buffers)
DEEPEP_RECV_CHUNKS = {2: (256, 128), 4: (256, 128), 8: (256, 128), 16: (288, 128), 24: (288, 128),
                      32: (288, 128), 64: (288, 128), 128: (560, 128), 144: (720, 128), 160: (720, 128)}


def deepep_buffer_bytes(spec: ModelSpec, group_size: int) -> float:
    """``num_nvl_bytes + num_rdma_bytes`` of the DeepEP buffer for an expert group of ``group_size``
    ranks (0 for a group of one: nothing to dispatch to). A size DeepEP has no config for is sized with
    the next larger one (DeepEP itself asserts on it).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("deepseek-v3")  # h = 7168
    >>> round(deepep_buffer_bytes(spec, 8) / 2**20, 1)  # NVL only: 10 channels x 8 ranks x 256 tokens x 16,392 B
    320.2
    >>> round(deepep_buffer_bytes(spec, 64) / 2**20, 1)  # + RDMA over 8 nodes
    681.7
    """
    if group_size <= 1:
        return 0.0
    size = min((k for k in DEEPEP_RECV_CHUNKS if k >= group_size), default=max(DEEPEP_RECV_CHUNKS))
    nvl_recv, rdma_recv = DEEPEP_RECV_CHUNKS[size]
    hidden_bytes = spec.hidden_size * BF16
    channels = DEEPEP_NUM_SMS // 2
    rdma_ranks = max(group_size // DEEPEP_NUM_MAX_NVL_PEERS, 1)
    nvl_ranks = min(group_size, DEEPEP_NUM_MAX_NVL_PEERS)
    per_token = hidden_bytes + DEEPEP_SOURCE_META_BYTES + DEEPEP_MAX_TOPK * (8 + 4) + DEEPEP_MAX_SCALES * 4
    nvl = channels * nvl_ranks * (2 * rdma_ranks + 3) * 4 + channels * nvl_ranks * nvl_recv * per_token
    nvl = math.ceil(nvl / 128) * 128
    rdma = 0
    if group_size > DEEPEP_NUM_MAX_NVL_PEERS:  # each chunk x 2 (send and receive halves), + an int4 per token
        rdma = channels * rdma_ranks * (DEEPEP_NUM_MAX_NVL_PEERS * 2 + 2) * 2 * 4 \
            + channels * rdma_ranks * rdma_recv * 2 * (per_token + 16) + 2**20  # "add a large number to be safe"
        rdma = math.ceil(rdma / 128) * 128
    return float(nvl + rdma)


def comm_buffer_bytes(spec: ModelSpec, workload: Workload, ep: int, etp: int) -> float:
    """Communication buffers outside the caching allocator on a stage with MoE layers: DeepEP's with
    the flex dispatcher (``deepep_buffer_bytes`` of the ``ep x etp`` group), else none."""
    if not spec.is_moe or workload.moe_dispatcher != "flex":
        return 0.0
    return deepep_buffer_bytes(spec, ep * etp)


# ---------------------------------------------------------------------------- TE userbuffers
# ``--tp-comm-overlap`` (Megatron-LM ``training/initialize.py::_initialize_tp_communicators`` L194-245
# @d98e8a6) calls Transformer Engine's ``initialize_ub`` with the shape ``[seq * mbs / cp, hidden]`` and one
# quantization mode (FP8 when ``args.fp8``, else none). TE (``pytorch/module/base.py::initialize_ub``
# L335-369 @d0067d0d) creates one communicator per GEMM of a transformer layer: ``ring_exchange`` for
# qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; ``pipeline`` for proj_fprop, fc2_fprop; ``bulk`` for
# qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad; ``external`` for proj_wgrad, fc2_wgrad -- 12 in all, shared by
# every layer. Each allocates one buffer of that shape (``common/comm_gemm_overlap/comm_gemm_overlap.cpp``
# ``CommOverlapBase::initialize`` L419-425, ``CommOverlapP2PBase::initialize`` L813-824: a reduce-scatter
# ring would hold ``2 tp - 1`` chunks, but no default ring reduce-scatters) in one byte per element for the
# all-gather GEMMs under FP8 (``fp8_buf``: the eight of ``layers_all_gather_overlap``, L336-345, L472-476),
# else in BF16. ``register_user_buffer_collective`` allocates them with ``cuMemCreate`` (multicast) or
# ``cudaMalloc`` (``userbuffers-host.cpp`` L514-560, L660): outside PyTorch's caching allocator, for the
# whole run, on every rank. Rounding to the multicast granularity (at most a few MiB per buffer) is not counted.
USERBUFFER_ALL_GATHER_GEMMS = ("qkv_fprop", "qkv_dgrad", "proj_dgrad", "proj_wgrad", "fc1_fprop", "fc1_dgrad",
                               "fc2_dgrad", "fc2_wgrad")
USERBUFFER_REDUCE_SCATTER_GEMMS = ("proj_fprop", "fc2_fprop", "qkv_wgrad", "fc1_wgrad")


def uses_userbuffers(workload: Workload, shape: ActivationShape) -> bool:
    """Whether a rank runs Transformer Engine's userbuffers: ``--tp-comm-overlap`` with TP > 1 and sequence
    parallelism (Megatron launches TP overlap only with SP; a layout without either does not initialise it)."""
    return workload.tp_comm_overlap and shape.tp > 1 and shape.sequence_parallel


def userbuffer_bytes(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """Transformer Engine's userbuffers with ``--tp-comm-overlap`` (outside the caching allocator, every
    rank); 0 without it, with TP 1 or without sequence parallelism (Megatron launches TP overlap only with
    SP, and a layout without either does not initialise it).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-70b")  # h = 8192
    >>> shape = ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True)
    >>> bf16 = Workload(seq_length=8192, tp_comm_overlap=True)
    >>> round(userbuffer_bytes(spec, bf16, shape) / 2**20)  # 12 x 8192^2 x 2 B
    1536
    >>> round(userbuffer_bytes(spec, Workload(seq_length=8192, precision="fp8", tp_comm_overlap=True), shape) / 2**20)
    1024
    """
    if not uses_userbuffers(workload, shape):
        return 0.0
    elements = shape.tokens(workload) * spec.hidden_size
    all_gather = 1 if workload.precision == "fp8" else BF16
    return elements * (len(USERBUFFER_ALL_GATHER_GEMMS) * all_gather + len(USERBUFFER_REDUCE_SCATTER_GEMMS) * BF16)


# ---------------------------------------------------------------------------- uncertainty
# The +/- band of a stage's predicted peak allocated bytes, as fractions of its parts, in parts per
# ``combine.BAND_SCALE`` (200: integers, so that the solver's integer engines carry the band exactly).
# Provenance:
# * static (weights, grads, optimizer): per-rank parameter counts equal Megatron-Core's to the parameter
#   (tests/test_megatron_golden.py); what is left is bucket padding (64-element alignment and a multiple
#   of the DP size per bucket, param_and_grad_buffer.py L1455-1467) and the fp8 cache size: 0.5 %.
# * activations: every per-layer term equals a traced Megatron-Core layer (tests/test_activation_golden.py)
#   for the paths a CPU runs; the TE / flash / fused-kernel paths are derived from source, not measured
#   on a GPU. Measured peaks at hand, activations = measured - static - fixed: the ISEEKYAN/mbridge
#   validation table (Mixtral 4-layer, H100, 4 runs; tests/test_memory.py MBRIDGE_RUNS) gives
#   -11.3 %, -2.6 %, -8.8 %, -2.2 % (the source rounds to 0.05 GiB: +/-1 % of its 4.8 GiB run; before the
#   grouped-MLP expert step of moe_dispatch_transient_bytes, F_m = 5440 > h: -9.2 %, -0.3 %, -4.8 %, +2.0 %),
#   so none under-predicted; and the published layouts that ran (tests/test_published.py) bound the
#   under-prediction from above: the Megatron-Bridge Llama-3 70B GB200 FP8 recipe (Megatron-FSDP, mbs 2,
#   40 offloaded layers, no recompute) is predicted at 189.3 of 197.6 GB, so its 153 GB of dense flash
#   activations cannot be under-predicted by more than 5.3 %. Band: 5 %.
#   Stages with MoE layers add routing imbalance (dropless; the measured and published runs are
#   balanced or force-balanced) and the dispatcher buffers derived from source: +5 %. Unfused attention
#   adds the score path's kernel choice (torch softmax traced; the fused kernels and the backward
#   workspace derived): +5 %. DSA layers (dsa_attention_terms: absorbed MLA, the top-k indices, the indexer): the
#   PyTorch path traced on a CPU, the fused kernels' part from source, no run measured: +5 %. NVFP4 (precision
#   fp4: saved GEMM inputs and weight caches from TE's NVFP4 tensor layout, 0.5 + 1/16 B per element; no NVFP4 run's
#   peak measured): +5 %.
# * fixed allocations: sizes from source, exact.
UNCERTAINTY_STATIC_PARTS = 1  # 0.5 % in parts per combine.BAND_SCALE
UNCERTAINTY_ACTIVATION_PARTS = {"flash": 10, "unfused": 20}  # 5 %, 10 %
UNCERTAINTY_MOE_EXTRA_PARTS = 10  # +5 %
UNCERTAINTY_DSA_EXTRA_PARTS = 10  # +5 %
UNCERTAINTY_FP4_EXTRA_PARTS = 10  # +5 %
UNCERTAINTY_STATIC_FRACTION = UNCERTAINTY_STATIC_PARTS / combine.BAND_SCALE
UNCERTAINTY_ACTIVATION_FRACTION = {k: v / combine.BAND_SCALE for k, v in UNCERTAINTY_ACTIVATION_PARTS.items()}
UNCERTAINTY_MOE_EXTRA_FRACTION = UNCERTAINTY_MOE_EXTRA_PARTS / combine.BAND_SCALE


def band_parts(workload: Workload, moe_stage: bool, spec: ModelSpec | None = None) -> combine.Band:
    """The band's fractions of one stage in parts per ``combine.BAND_SCALE``: static, activations (``spec``: a DSA
    model's band is wider; so is an NVFP4 run's).

    >>> band_parts(Workload(), moe_stage=False), band_parts(Workload(attention="unfused"), moe_stage=True)
    (Band(static=1, activation=10), Band(static=1, activation=30))
    >>> band_parts(Workload(precision="fp4"), moe_stage=False)
    Band(static=1, activation=20)
    """
    activation = UNCERTAINTY_ACTIVATION_PARTS["unfused" if workload.attention == "unfused" else "flash"]
    if moe_stage:
        activation += UNCERTAINTY_MOE_EXTRA_PARTS
    if spec is not None and spec.dsa is not None:
        activation += UNCERTAINTY_DSA_EXTRA_PARTS
    if workload.precision == "fp4":
        activation += UNCERTAINTY_FP4_EXTRA_PARTS
    return combine.Band(static=UNCERTAINTY_STATIC_PARTS, activation=activation)


# ---------------------------------------------------------------------------- pipeline schedule
def inflight_microbatches(pp: int, vpp: int, num_microbatches: int, stage: int, group: int | None = None) -> float:
    """Activation sets live on ``stage``, in units of "all the stage's layers for one micro-batch"
    (section 3.6, SCH ``get_pp_rank_microbatches`` L929-986): the closed form of the chunk-units in flight,
    ``sum(chunk_inflight(...))`` / ``v``, exact where the stage's chunks are alike (``stage_memory`` costs the
    chunks apart, ``chunk_inflight``).

    1F1B: ``min(p - r, m)``. Interleaved: ``min(2(p - r - 1) + (v - 1)G + 1, m*v)`` chunk units of
    ``L_r/v`` layers, i.e. that count divided by ``v``, with ``G`` the micro-batch group size per model chunk
    (``--microbatch-group-size-per-virtual-pipeline-stage``, ``group``; None: Megatron's default ``p``, MPC
    L567-568); for r = 0, G = p and m >= p this is TMU's penalty ``p*(1 + (p - 1)/(p*v))``.

    >>> inflight_microbatches(4, 1, 64, 0), inflight_microbatches(4, 1, 64, 3), inflight_microbatches(4, 1, 2, 0)
    (4, 1, 2)
    >>> inflight_microbatches(4, 2, 64, 0)  # (2*3 + 1*4 + 1) / 2
    5.5
    >>> inflight_microbatches(4, 3, 20, 0, group=5)  # (2*3 + 2*5 + 1) / 3
    5.666666666666667
    """
    if vpp == 1:
        return min(pp - stage, num_microbatches)
    warmup = 2 * (pp - stage - 1) + (vpp - 1) * (group or pp)
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
    fixed_bytes: float = 0.0  # workspaces and persistent buffers inside the allocator (fixed_allocation_bytes)
    moe: bool = False  # the stage holds MoE layers (widens the uncertainty band)

    @property
    def allocated_bytes(self) -> float:
        """Predicted peak of PyTorch's caching allocator (``torch.cuda.max_memory_allocated``)."""
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes
                + self.fixed_bytes)

    @property
    def total_bytes(self) -> float:
        return self.allocated_bytes + self.other_bytes


def memory_uncertainty_bytes(stage: StageMemory, workload: Workload, spec: ModelSpec | None = None) -> float:
    """Half-width of the +/- band around ``stage.allocated_bytes``, bytes (``band_parts``; the one
    definition of how it combines with the stage's parts is ``combine.band``). The solver's default
    headroom: every stage of a returned layout fits with its band (``solver/tables.py`` ``memory_form``).

    >>> s = StageMemory(stage=0, num_layers=1, params=0, weights_bytes=2e9, grads_bytes=4e9, optimizer_bytes=2e9,
    ...                 activations_bytes=10e9, other_bytes=2e9)
    >>> round(memory_uncertainty_bytes(s, Workload()) / 1e9, 3)  # 0.5 % of 8 GB + 5 % of 10 GB
    0.54
    """
    static = stage.weights_bytes + stage.grads_bytes + stage.optimizer_bytes
    return combine.band(band_parts(workload, stage.moe, spec), static, stage.activations_bytes) \
        / combine.BAND_SCALE


def other_bytes(cluster: Cluster) -> float:
    """Memory outside the caching allocator (section 3.8): CUDA context, NCCL communicators and
    buffers, allocator fragmentation. A calibrated reserve (``calibration: other_reserve_gb``)."""
    cal = calibration()["memory"]
    return cal["other_reserve_gb"] * 1e9 + cal["other_reserve_fraction"] * cluster.gpu.usable_memory_bytes


def bf16_weights(spec: ModelSpec, layout: Layout, stage: StageParams) -> int:
    """Sharded weights of a stage that FP8 training leaves in bf16: the word embedding (first stage,
    and the MTP stage's copy with PP > 1) and the output layer."""
    out = embedding_params(spec, layout.tp).tp_sharded if stage.has_embedding else 0
    if stage.has_output:
        out += output_params(spec, layout.tp, layout.pp).tp_sharded
        if stage.has_mtp and layout.pp > 1:
            out += spec.padded_vocab_size(layout.tp) * spec.hidden_size // layout.tp
    return out


@dataclass(frozen=True, slots=True)
class Offloaded:
    saved: float = 0.0  # activation bytes per micro-batch that live in host memory
    in_transit: float = 0.0  # on the GPU while a layer's activations are copied out / back


def _forward_states(pp: int, vpp: int, m: int, stage: int, group: int | None) -> Iterator[tuple[int, ...]]:
    """Micro-batches in flight per chunk of ``stage`` after each forward of the interleaved schedule (SCH
    ``get_schedule_table`` L989-1016, ``get_model_chunk_id`` L1244-1249, warm-up L964-965 @d98e8a6): forwards
    in groups of ``G`` micro-batches per chunk (chunk 0 for micro-batches ``0..G-1``, then chunk 1, ..., then
    the next group; a last group of fewer), backwards in the same order with the chunks reversed;
    ``2(p-r-1) + (v-1)G`` warm-up forwards, then a forward and a backward at a time. The steady state repeats
    every ``vG`` steps: its first two periods are followed."""
    size = group or pp
    g = min(size, m)  # a group of more than m micro-batches is the last group, of m
    full = -(-m // g) - 1  # groups of g before the last group (the one that reaches m: L995)
    last = m - full * g

    def chunk(k: int) -> int:  # the forward's chunk of virtual micro-batch k
        return (k // g) % vpp if k < full * g * vpp else (k - full * g * vpp) // last

    total = m * vpp
    warmup = min(2 * (pp - stage - 1) + (vpp - 1) * size, total)
    live = [0] * vpp
    for k in range(warmup):
        live[chunk(k)] += 1
        yield tuple(live)
    for i in range(min(total - warmup, 2 * vpp * g)):
        live[chunk(warmup + i)] += 1
        yield tuple(live)
        live[vpp - 1 - chunk(i)] -= 1


@functools.lru_cache(maxsize=4096)
def chunk_inflight(pp: int, vpp: int, num_microbatches: int, stage: int, group: int | None = None,
                   weights: tuple[int, ...] | None = None,
                   loss_chunk: bool = False) -> tuple[tuple[tuple[int, ...], bool], ...]:
    """Micro-batches whose activations ``stage`` holds, per model chunk, at its activation peak: the states to
    cost, each ``(in flight per chunk, whether the loss chunk is among them)``.

    1F1B: ``min(p - r, m)`` micro-batches. Interleaved (``_forward_states``): the state after a forward with
    the most in flight, the earliest of equals; ``weights``: each chunk's weight (``chunk_weights``: its bytes
    at a reference shape; or its decoder layers; None: the same in every chunk, where any state with the most
    chunk-units is the peak). Chunks of unequal size
    (``--account-for-embedding-in-pipeline-split``, ``--account-for-loss-in-pipeline-split``, a
    ``--pipeline-model-parallel-layout``) make it differ from the even share: with a loss-only last chunk the
    last stage holds ``(v - 1)G`` micro-batches of all its layers, not ``((v - 1)G + 1)/v`` of them.
    ``loss_chunk`` (the last stage): its last chunk holds the output layer, loss and MTP, alive only while one
    of its micro-batches is in flight: the peak with it and the peak without it are both states to cost.

    >>> chunk_inflight(4, 1, 64, 0), chunk_inflight(4, 2, 64, 3), chunk_inflight(4, 2, 64, 0)
    ((((4,), False),), (((4, 1), False),), (((7, 4), False),))
    >>> chunk_inflight(4, 2, 4, 3, weights=(1, 0), loss_chunk=True)  # one layer, then the loss chunk
    (((4, 1), True),)
    >>> chunk_inflight(2, 4, 4, 1, weights=(2, 2, 2, 1), loss_chunk=True)  # "Et*3|(tt|)*6tmL", last stage
    (((2, 2, 2, 1), True), ((3, 2, 2, 0), False))
    """
    m = num_microbatches
    if vpp == 1 or m < 1:  # (no micro-batch: nothing in flight; the solver's infeasibility explanation asks)
        return (((min(pp - stage, m),) if vpp == 1 else (0,) * vpp, loss_chunk),)
    if weights is None:
        weights = (1,) * vpp
    best: dict[bool, tuple[int, tuple[int, ...]]] = {}
    for live in _forward_states(pp, vpp, m, stage, group):
        key = loss_chunk and live[-1] > 0
        weight = sum(n * w for n, w in zip(live, weights))
        if key not in best or weight > best[key][0]:
            best[key] = (weight, live)
    if True in best and False in best and all(a >= b for a, b in zip(best[True][1], best[False][1])):
        del best[False]  # never more than the state with the loss chunk: not a peak
    return tuple((best[key][1], key) for key in (True, False) if key in best)


def chunk_weights(spec: ModelSpec, workload: Workload, chunks: tuple[tuple[tuple[LayerKind, bool, int], ...], ...],
                  recompute: str, recompute_modules: tuple[str, ...] | None) -> tuple[int, ...]:
    """Each virtual chunk's saved activations for one micro-batch at a reference shape (TP 1, CP 1, micro-batch 1;
    ``chunks`` as ``layers.StageLayers.chunks``): what ``chunk_inflight`` weighs a stage's states by, the same in
    ``stage_memory`` and the solver's tables. A layout's shape scales the kinds' bytes nearly alike, so the state
    chosen is the one with the most bytes, also where chunks hold different kinds (a hybrid model's Mamba,
    attention and MLP layers one per chunk: the layer count misses that peak by up to 5 %, Nemotron-H 8B at
    pp 4 x vpp 13).

    >>> from megasolve.models.presets import load_preset
    >>> from megasolve.cost.layers import stage_layers
    >>> spec = load_preset("nemotron-h-8b")
    >>> chunks = stage_layers(spec, Layout(pp=4, vpp=13))[0].chunks  # one layer each: Mamba, MLP, attention
    >>> [round(w / 2**20) for w in chunk_weights(spec, Workload(seq_length=4096), chunks, "none", None)][8:12]
    [400, 400, 144, 401]
    """
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    mode = "selective" if recompute == "selective" else "none"
    modules = tuple(recompute_modules or DEFAULT_RECOMPUTE_MODULES)
    block = has_block_kinds(spec)
    memo: dict[tuple[LayerKind, bool], float] = {}

    def one(kind: LayerKind, recomputed: bool) -> float:
        if (kind, recomputed) not in memo:  # a recomputed layer keeps its input only
            memo[(kind, recomputed)] = layer_activation_bytes(spec, workload, shape, moe=False, recompute="full") \
                if recomputed else layer_activation_bytes(spec, workload, shape, moe=kind.moe, recompute=mode,
                                                          recompute_modules=modules, kind=kind if block else None)
        return memo[(kind, recomputed)]

    return tuple(round(sum(n * one(kind, recomputed) for kind, recomputed, n in chunk)) for chunk in chunks)


def offloaded_activation_bytes(spec: ModelSpec, offload_layers: int, layer_ids: Iterable[int],
                               layer_bytes: dict[bool, float]) -> Offloaded:
    """Activation offloading (``--cpu-offloading-num-layers N``, activations only; PP = 1 and no
    recompute, TC L1884-1899): the saved activations of the first ``N`` transformer layers go to host
    memory through Transformer Engine's CPU-offload context (``transformer_block.py`` L300-312), one
    layer's worth at a time on the GPU while it is copied out in forward and back in backward."""
    first = [i for i in layer_ids if i < offload_layers]
    if not first:
        return Offloaded()
    per_layer = [layer_bytes[spec.is_moe_layer(i)] for i in first]
    return Offloaded(saved=sum(per_layer), in_transit=max(per_layer))


def stage_memory(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[StageMemory]:
    """Memory of one rank of every pipeline stage. Peak = max over stages of ``total_bytes``.

    Activations = in-flight micro-batches (section 3.6) x the stage's per-layer bytes + transients
    (backward re-materialises one recomputed layer at a time: the whole layer with full recompute,
    the selectively recomputed tensors with selective recompute; plus one MoE layer's backward,
    ``moe_dispatch_transient_bytes``)
    + embedding inputs per in-flight micro-batch on the first stage + logits and MTP on the last;
    ``fixed_bytes``: workspaces and persistent buffers (``fixed_allocation_bytes``), every stage.
    ``layout.recompute_modules`` (Megatron's ``--recompute-modules``) is read when the Layout has it,
    else Megatron's default ``("core_attn",)``.
    """
    shape = ActivationShape(tp=layout.tp, cp=layout.cp, mbs=layout.mbs, sequence_parallel=layout.sequence_parallel,
                            etp=layout.etp, ep=layout.ep)
    m = workload.num_microbatches(layout)
    layer_kind = "selective" if layout.recompute == "selective" else "none"
    modules = tuple(getattr(layout, "recompute_modules", None) or DEFAULT_RECOMPUTE_MODULES)
    if has_block_kinds(spec):
        # hybrid / DeltaNet kinds: keyed by kind; one re-materialised layer is the model's largest kind
        # (the solver's ``ma_xmax`` / ``ma_sel_xmax`` terms, whatever kinds a stage holds)
        every = model_layer_kinds(spec)
        quantized = {k.memory_name: layer_activation_bytes(spec, workload, shape, moe=k.moe, recompute=layer_kind,
                                                           recompute_modules=modules, kind=k) for k in every}
        selective_transient = {k.memory_name: selective_transient_bytes(
            spec, workload, shape, moe=k.moe, recompute_modules=modules, kind=k)
            if layer_kind == "selective" else 0.0 for k in every}
        largest, largest_selective = max(quantized.values()), max(selective_transient.values())
        by_mlp = {moe: max(v for k, v in zip(every, quantized.values()) if k.moe == moe)
                  for moe in {k.moe for k in every}}
    else:
        kinds = (False, True) if spec.is_moe else (False,)
        by_mlp = {moe: layer_activation_bytes(spec, workload, shape, moe=moe, recompute=layer_kind,
                                              recompute_modules=modules) for moe in kinds}
        quantized = {LayerKind(moe=moe).memory_name: by_mlp[moe] for moe in kinds}
        selective_transient = {moe: selective_transient_bytes(spec, workload, shape, moe=moe,
                                                              recompute_modules=modules)
                               if layer_kind == "selective" else 0.0 for moe in kinds}
        largest = largest_selective = None
    # the saved activations of one stored layer, by kind (``LayerKind.memory_name``); a layer kept in bf16
    # (--first-last-layers-bf16) keeps bf16 GEMM inputs. The transients (one re-materialised layer) are the
    # quantized kinds' (``largest``, ``by_mlp``), as the solver's tables take them.
    full_layer = dict(quantized)
    for k in model_layer_kinds(spec, workload):
        if k.bf16 or k.overrides:  # (a precision recipe's modules keep their inputs in their own format)
            full_layer[k.memory_name] = layer_activation_bytes(
                spec, workload.for_kind(k.bf16, k.overrides), shape, moe=k.moe, recompute=layer_kind,
                recompute_modules=modules, kind=None if k.is_gpt else k)
    input_only = layer_activation_bytes(spec, workload, shape, moe=False, recompute="full")
    reserve = other_bytes(cluster) + userbuffer_bytes(spec, workload, shape)
    comm_buffers = comm_buffer_bytes(spec, workload, layout.ep, layout.etp)
    allocator_fixed = fixed_allocation_bytes(spec, cluster, workload, shape)
    # fine-grained offloading's resident layers: the model's largest kind, the same on every stage
    offload_resident = offload_resident_bytes(spec, workload, shape, recompute=layer_kind, recompute_modules=modules)
    fp8_bytes = fp8_weight_bytes_per_param(cluster.gpu.name, workload.quant_recipe)
    out = []
    for params, layers in zip(stage_params(spec, layout), stage_layers(spec, layout, workload)):
        layer_ids = list(layers.layer_ids)
        counts = layers.counts()  # the stage sum (layers.py, as the solver's tables)
        # one micro-batch's saved activations per virtual chunk; offloading (PP 1: one chunk) moves some to the host
        chunk_bytes = [sum(n * (input_only if recomputed else full_layer[kind.memory_name])
                           for kind, recomputed, n in chunk) for chunk in layers.chunks]
        offloaded = offloaded_activation_bytes(spec, layout.cpu_offload_layers, layer_ids, by_mlp)
        chunk_bytes[0] -= offloaded.saved
        transient = 0.0
        if layers.count(recomputed=True):  # backward re-materialises one recomputed layer at a time
            transient = largest if largest is not None else max(
                by_mlp[kind.moe] for kind, recomputed, _ in counts if recomputed)
        elif layer_ids:  # selective: one layer's recomputed tensors (0 without selective recompute)
            transient = largest_selective if largest_selective is not None else max(
                selective_transient[kind.moe] for kind in layers.kinds)
        if layers.count(moe=True):
            transient += moe_stage_bytes(spec, workload, shape)
        stage = params.stage
        # DeepEP's buffer exists on ranks whose stage has MoE layers (its MTP block's included)
        comm_stage = any(spec.is_moe_layer(i) for i in layer_ids) or (
            params.has_mtp and spec.is_moe_layer(spec.num_layers - 1))
        fixed = offloaded.in_transit + transient + offload_resident
        loss = 0.0  # the loss chunk's: logits and loss, the MTP block, alive while a micro-batch of it is in flight
        if params.has_output:
            fixed += deferred_wgrad_bytes(spec, workload, shape, m)  # kept across the step's micro-batches
            loss = last_stage_peak_extra_bytes(spec, workload, shape) + mtp_activation_bytes(spec, workload, shape,
                                                                                             layer_kind, modules)
        first = first_stage_extra_bytes(spec, workload, shape) if params.has_embedding else 0.0
        # the peak states (micro-batches in flight per chunk; with or without the loss chunk's), the largest
        activations = max(combine.scaled_stage_memory(
            fixed + (loss if with_loss else 0.0), layout.vpp * sum(n * b for n, b in zip(in_chunks, chunk_bytes)),
            first, sum(in_chunks), layout.vpp)
            for in_chunks, with_loss in chunk_inflight(
                layout.pp, layout.vpp, m, stage, workload.microbatch_group_size,
                chunk_weights(spec, workload, layers.chunks, layout.recompute, modules), params.has_output)) / layout.vpp
        if layout.fsdp:
            static = fsdp_static_bytes(params.params, params.layers, params.largest_layer,
                                       dense_shards=layout.dp * layout.cp, expert_shards=layout.expert_dp,
                                       precision=workload.precision, fp8_param_gather=workload.fp8_param_gather,
                                       grad_bytes=workload.fsdp_grad_bytes, fp8_bytes=fp8_bytes)
        else:
            n = workload.dist_optimizer_instances  # each instance shards over its part of the DP group
            static = static_bytes(params.params, bf16_only=bf16_weights(spec, layout, params),
                                  dense_shards=layout.dp * layout.cp // n,
                                  expert_shards=layout.expert_dp // n, distributed_optimizer=layout.distributed_optimizer,
                                  precision=workload.precision, fp8_param_gather=workload.fp8_param_gather,
                                  grad_bytes=workload.grad_bytes, fp8_bytes=fp8_bytes, optimizer=workload.optimizer,
                                  adam_bytes=adam_state_bytes_per_param(workload))
            static = offloaded_optimizer(static, layout.optimizer_offload_fraction)
        out.append(StageMemory(stage=stage, num_layers=params.num_layers, params=params.total,
                               weights_bytes=static.weights, grads_bytes=static.grads,
                               optimizer_bytes=static.optimizer, activations_bytes=activations,
                               other_bytes=reserve + (comm_buffers if comm_stage else 0.0),
                               fixed_bytes=allocator_fixed,
                               moe=bool(layers.count(moe=True))))
    return out
