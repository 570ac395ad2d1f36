"""Mamba-2 and gated-DeltaNet mixers: FLOPs, weights, saved activations and context-parallel traffic of
one mixer on one rank. Pure functions (units in names); the layers that hold them are ``cost/layers.py``
kinds (``LayerKind.mixer``), and ``compute.layer_work`` / ``memory.layer_activation_bytes`` /
``step.base_layer_time`` add these terms to the layer's other blocks.

Sources (Megatron-LM @d98e8a6 unless a line says otherwise; ``T`` tokens of the micro-batch on the CP
rank, ``t`` TP, ``c`` CP, ``sigma`` = t with sequence parallelism, else 1):

* Mamba-2 mixer, ``megatron/core/ssm/mamba_mixer.py``: ``in_proj`` (``TELayerNormColumnParallelLinear``,
  the pre-norm fused) of ``2 d_i + 2 G N + nheads`` outputs (z, x, B, C, dt; L281-294), heads and groups
  split over TP (L262-271), ``chunk_size`` 128 (L194), training through mamba_ssm's
  ``mamba_split_conv1d_scan_combined`` (L679-728: depthwise causal conv1d over x, B, C, the SSD chunked
  scan, the z gate), then the gated RMSNorm ``self.norm`` (``RMSNormGated``, L422-431) and ``out_proj``
  (``RowParallelLinear``, L435-451). With CP, ``MambaContextParallel`` (``mamba_context_parallel.py``
  L140-230) all-to-alls z, x, B, C, dt from sequence- to head-sharding before the conv and the output
  y back after the scan.
* Gated DeltaNet, ``megatron/core/ssm/gated_delta_net/gdn.py`` and ``common.py``: one ``in_proj`` of
  ``2K + 2V + 2 n_v`` outputs (q, k, v, z, beta, alpha), a depthwise conv1d over q, k, v, FLA's
  ``chunk_gated_delta_rule`` with chunk 64 (gdn.py L70-73), the gated RMSNorm over one value head under
  an output-discarding checkpoint (gdn.py L267-287: its inputs are kept, its output recomputed), and
  ``out_proj``; CP all-to-alls the projections to head sharding (gdn.py L56-63, ``common.py`` L360-420).

What is *unmeasured* (``docs/memory-audit.md``): no Mamba or DeltaNet layer was traced (mamba_ssm and
FLA need CUDA), so the saved-tensor lists below are read from the kernels' ``save_for_backward`` calls,
and the scan / delta-rule FLOP counts from the algorithms, not from profiles.
"""

from __future__ import annotations

from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec

BF16, FP32 = 2, 4
MAMBA_CHUNK = 128  # mamba_mixer.py L194 (``chunk_size=128``), the SSD block length Q
GDN_CHUNK = 64  # gdn.py L73 (``self.chunk_size = 64``), FLA's chunk length


# ---------------------------------------------------------------------------- Mamba-2
def mamba_projection_width(spec: ModelSpec) -> int:
    """Outputs of ``in_proj``: ``2 d_i + 2 G N + nheads`` (z, x, B, C, dt; mamba_mixer.py L284).

    >>> from megasolve.models.presets import load_preset
    >>> mamba_projection_width(load_preset("nemotron-h-8b"))  # 2*8192 + 2*8*128 + 128
    18560
    """
    m = spec.mamba
    return 2 * m.d_inner + 2 * m.num_groups * m.state_dim + m.num_heads


def mamba_model_flops_per_token(spec: ModelSpec) -> float:
    """Megatron's model FLOPs of one Mamba layer per token, forward + backward (TRN
    ``num_floating_point_operations.mamba_layer_flops`` L885-903, x3 in ``hybrid_flops`` L1006):
    ``3 * (2 h (2 d_i + 2GN + nheads) + 7 d_i N + 2 d_i h)``. Megatron writes ``d_in = 2h`` for the scan
    and projections; here ``d_i = nheads * head_dim`` (the same for Nemotron-H, whose ``d_i = 2h``).

    >>> from megasolve.models.presets import load_preset
    >>> mamba_model_flops_per_token(load_preset("nemotron-h-8b")) / 1e6  # 3*(2*4096*18560 + 7*8192*128 + 2*8192*4096)
    679.477248
    """
    m, h = spec.mamba, spec.hidden_size
    return 3.0 * (2 * h * mamba_projection_width(spec) + 7 * m.d_inner * m.state_dim + 2 * m.d_inner * h)


def mamba_group_repeat(spec: ModelSpec, tp: int, cp: int) -> int:
    """How many times CP repeats each B / C group before its all-to-all: ``cp / (G/t)`` when a TP rank
    holds fewer groups than there are CP ranks, else 1 (``mamba_context_parallel.py`` L119-133,
    ``pre_conv_ssm`` L168-183).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("nemotron-h-8b")  # 8 groups
    >>> mamba_group_repeat(spec, 4, 8), mamba_group_repeat(spec, 1, 8)
    (4, 1)
    """
    groups = spec.mamba.num_groups // tp
    return cp // groups if 0 < groups < cp else 1


def mamba_gemm_flops_per_token(spec: ModelSpec) -> float:
    """``in_proj`` and ``out_proj`` GEMMs, forward + backward (6 x weights): ``6 h (P + d_i)``."""
    return 6.0 * spec.hidden_size * (mamba_projection_width(spec) + spec.mamba.d_inner)


def mamba_scan_flops_per_token(spec: ModelSpec) -> float:
    """The SSD chunked scan (Dao & Gu 2024, "Transformers are SSMs", section 6, the four steps of the
    block decomposition with chunk ``Q``), forward per token: ``C B^T`` inside the chunk ``2 Q N`` per
    group, the diagonal output ``2 Q P`` per head, the chunk states ``2 N P`` and the state-to-output
    ``2 N P`` per head (``P`` = head dim): ``2 G Q N + nheads (2 Q P + 4 N P)``; backward ~2x the
    forward (the kernels re-run the forward chunk states): x3 in all. The depthwise conv1d adds
    ``2 k (d_i + 2GN)``. Unmeasured: no profile of mamba_ssm's Triton kernels backs the 2x backward.

    >>> from megasolve.models.presets import load_preset
    >>> mamba_scan_flops_per_token(load_preset("nemotron-h-8b")) / 1e6  # 3*(2*8*128*128 + 128*(2*128*64 + 4*128*64) + 8*10240)
    19.90656
    """
    m = spec.mamba
    q, p = MAMBA_CHUNK, m.head_dim
    fwd = 2 * m.num_groups * q * m.state_dim + m.num_heads * (2 * q * p + 4 * m.state_dim * p)
    fwd += 2 * m.conv_kernel * (m.d_inner + 2 * m.num_groups * m.state_dim)
    return 3.0 * fwd


def mamba_weights(spec: ModelSpec) -> float:
    """GEMM weights of one Mamba mixer (``in_proj`` + ``out_proj``), before TP."""
    return spec.hidden_size * (mamba_projection_width(spec) + spec.mamba.d_inner)


def mamba_elementwise_bytes_per_token(spec: ModelSpec) -> float:
    """HBM traffic per token of the Mamba mixer's memory-bound kernels, forward + backward, before TP
    (bf16): the conv1d reads and writes ``x, B, C`` (``2 x 2 (d_i + 2GN)``), the scan kernels read
    ``x, B, C, dt, z`` and write ``y`` (``2 (P_in + d_i)``), the gated RMSNorm reads ``y, z`` and writes
    its output (``3 x 2 d_i``); backward moves twice the forward bytes. Unmeasured (no trace)."""
    m = spec.mamba
    xbc = m.d_inner + 2 * m.num_groups * m.state_dim
    fwd = BF16 * (2 * xbc + (mamba_projection_width(spec) + m.d_inner) + 3 * m.d_inner)
    return 3.0 * fwd


def mamba_activation_terms(spec: ModelSpec, workload: Workload, tokens: float, tp: int, sigma: int,
                           gemm_input_bytes: float, cp: int = 1, norm_output_bytes: float | None = None
                           ) -> dict[str, float]:
    """Saved tensors of one Mamba layer (per micro-batch per rank), by name:

    * the fused pre-norm of ``in_proj`` (``TELayerNormColumnParallelLinear``): its input ``2 T h/sigma``
      and its output ``a T h/sigma`` (as an attention block's, ``memory.attention_activation_terms``);
      the dropout mask of the residual ``delta T h/sigma``;
    * ``mamba_split_conv1d_scan_combined`` (mamba_ssm ``ops/triton/ssd_combined.py``
      ``MambaSplitConv1dScanCombinedFn.forward``, ``save_for_backward(zxbcdt, ..., out_x, ...)``): the
      whole ``in_proj`` output ``2 T P/t`` and the scan output before the gate ``2 T d_i/t``; the conv
      output and the chunk states are recomputed in backward;
    * the gated RMSNorm (mamba_ssm ``layernorm_gated.py`` ``LayerNormFn``): its input ``2 T d_i/t`` and
      fp32 ``rstd`` per group ``4 T G/t``;
    * ``out_proj`` (row-parallel): its input ``a T d_i/t``.

    CP all-to-alls keep the per-rank element counts (``T/c`` tokens x ``nheads/t`` heads becomes ``s``
    tokens x ``nheads/(t c)`` heads), except B and C, repeated ``mamba_group_repeat`` times when a TP
    rank holds fewer groups than there are CP ranks. Not traced (mamba_ssm needs CUDA): unmeasured.

    >>> from megasolve.models.presets import load_preset
    >>> terms = mamba_activation_terms(load_preset("nemotron-h-8b"), Workload(seq_length=8192), 1.0, 1, 1, 2)
    >>> sum(terms.values())  # bytes per token: 4*4096 + 2*18560 + 2*8192*3 + 4*8 + 2*8192
    102688.0
    """
    m, h, T = spec.mamba, spec.hidden_size, tokens
    delta = 1 if workload.hidden_dropout > 0 else 0
    return {
        "mamba_norm_input": BF16 * T * h / sigma,
        "mamba_fused_norm_output": (norm_output_bytes or gemm_input_bytes) * T * h / sigma,
        "mamba_dropout_mask": delta * T * h / sigma,
        "mamba_zxbcdt": BF16 * T * (mamba_projection_width(spec)
                                    + 2 * m.num_groups * m.state_dim * (mamba_group_repeat(spec, tp, cp) - 1)) / tp,
        "mamba_scan_output": BF16 * T * m.d_inner / tp,
        "mamba_gated_norm_input": BF16 * T * m.d_inner / tp + FP32 * T * m.num_groups / tp,
        "mamba_out_proj_input": gemm_input_bytes * T * m.d_inner / tp,
    }


def mamba_cp_bytes(spec: ModelSpec, tokens: float, tp: int, cp: int) -> tuple[float, float]:
    """Bytes one rank puts into the CP all-to-alls of one Mamba mixer's forward: (before the conv: z, x,
    B, C, dt, with B and C repeated ``mamba_group_repeat`` times; after the scan: y),
    ``mamba_context_parallel.py`` ``pre_conv_ssm`` / ``post_conv_ssm`` (L140-215)."""
    m = spec.mamba
    repeat = mamba_group_repeat(spec, tp, cp)
    pre = mamba_projection_width(spec) + 2 * m.num_groups * m.state_dim * (repeat - 1)
    return BF16 * tokens * pre / tp, BF16 * tokens * m.d_inner / tp


# ---------------------------------------------------------------------------- gated DeltaNet
def _gdn_dims(spec: ModelSpec) -> tuple[int, int, int]:
    g = spec.gated_delta_net
    return g.num_key_heads * g.key_head_dim, g.num_value_heads * g.value_head_dim, g.num_value_heads


def gdn_value_width(spec: ModelSpec) -> int:
    """``V``: the DeltaNet's value width (``out_proj``'s input)."""
    return _gdn_dims(spec)[1]


def gdn_projection_width(spec: ModelSpec) -> int:
    """Outputs of the DeltaNet ``in_proj``: ``2K + 2V + 2 n_v`` (q, k, v, z, beta, alpha)."""
    k, v, nv = _gdn_dims(spec)
    return 2 * k + 2 * v + 2 * nv


def gdn_model_flops_per_token(spec: ModelSpec) -> float:
    """Megatron's model FLOPs of one gated-DeltaNet layer per token, forward + backward (TRN
    ``gdn_layer_flops`` L938-962, x3): ``3 * 2 (h (2K + 2V + 2 n_v) + k_conv (2K + V) + 4 n_v d_v^2 + V h)``.

    >>> from megasolve.models.presets import load_preset
    >>> gdn_model_flops_per_token(load_preset("qwen3-next-80b-a3b")) / 1e6  # 6*(2048*12352 + 4*8192 + 4*32*128**2 + 4096*2048)
    214.892544
    """
    k, v, nv = _gdn_dims(spec)
    g = spec.gated_delta_net
    return 6.0 * (spec.hidden_size * gdn_projection_width(spec) + g.conv_kernel * (2 * k + v)
                  + 4 * nv * g.value_head_dim ** 2 + v * spec.hidden_size)


def gdn_gemm_flops_per_token(spec: ModelSpec) -> float:
    """``in_proj`` and ``out_proj`` GEMMs, forward + backward: ``6 h (2K + 2V + 2 n_v + V)``."""
    _, v, _ = _gdn_dims(spec)
    return 6.0 * spec.hidden_size * (gdn_projection_width(spec) + v)


def gdn_core_flops_per_token(spec: ModelSpec) -> float:
    """The chunked gated delta rule per token, forward + backward: Megatron's ``4 n_v d_v^2`` state terms
    (TRN L955-957, x2 FMA) plus the intra-chunk ``Q K^T`` / ``K K^T`` / ``A V`` products, ``2 C (2 d_k +
    d_v)`` per value head with chunk ``C = 64`` (FLA ``chunk_gated_delta_rule``), and the conv1d
    ``2 k (2K + V)``; x3 for backward. Unmeasured (no profile of FLA's kernels)."""
    k, v, nv = _gdn_dims(spec)
    g = spec.gated_delta_net
    fwd = 8 * nv * g.value_head_dim ** 2 + nv * 2 * GDN_CHUNK * (2 * g.key_head_dim + g.value_head_dim)
    fwd += 2 * g.conv_kernel * (2 * k + v)
    return 3.0 * fwd


def gdn_weights(spec: ModelSpec) -> float:
    """GEMM weights of one DeltaNet mixer (``in_proj`` + ``out_proj``), before TP."""
    _, v, _ = _gdn_dims(spec)
    return spec.hidden_size * (gdn_projection_width(spec) + v)


def gdn_elementwise_bytes_per_token(spec: ModelSpec) -> float:
    """HBM traffic per token of the DeltaNet mixer's memory-bound kernels, fwd + bwd, before TP (bf16):
    conv1d in/out over q, k, v, the L2 norms of q and k, the gates, the delta-rule kernels' q, k, v, o
    and the gated RMSNorm (read o, z, write): ``~ 2 x (2 (2K+V) + 2 (2K) + (2K + 2V) + 3V)`` forward,
    backward twice that. Unmeasured (no trace)."""
    k, v, nv = _gdn_dims(spec)
    fwd = BF16 * (2 * (2 * k + v) + 2 * 2 * k + (2 * k + 2 * v) + 3 * v + 4 * nv)
    return 3.0 * fwd


def gdn_activation_terms(spec: ModelSpec, workload: Workload, tokens: float, tp: int, sigma: int,
                         gemm_input_bytes: float, norm_output_bytes: float | None = None) -> dict[str, float]:
    """Saved tensors of one gated-DeltaNet mixer (per micro-batch per rank), by name: the fused pre-norm's
    input and output and the residual dropout mask (as attention); the conv1d input ``2 T (2K+V)/t``
    (``causal_conv1d_fn`` saves x); the delta-rule kernel's q, k, v ``2 T (2K+V)/t``, fp32 gate ``g``
    and bf16 ``beta`` per value head ``6 T n_v/t``, and the chunk-local ``A`` ``2 T n_v C/t`` (FLA
    ``ChunkGatedDeltaRuleFunction.forward`` ``save_for_backward(q, q_rstd, k, k_rstd, v, g, beta, A, ...)``,
    with the q/k L2-norm ``rstd`` ``8 T n_k/t``); the gated norm's checkpointed inputs, core output
    and gate z ``2 x 2 T V/t`` (gdn.py L267-287); ``out_proj``'s input ``a T V/t``. Not traced:
    unmeasured."""
    k, v, nv = _gdn_dims(spec)
    g, h, T = spec.gated_delta_net, spec.hidden_size, tokens
    delta = 1 if workload.hidden_dropout > 0 else 0
    return {
        "gdn_norm_input": BF16 * T * h / sigma,
        "gdn_fused_norm_output": (norm_output_bytes or gemm_input_bytes) * T * h / sigma,
        "gdn_dropout_mask": delta * T * h / sigma,
        "gdn_conv_input": BF16 * T * (2 * k + v) / tp,
        "gdn_qkv": BF16 * T * (2 * k + v) / tp + 2 * FP32 * T * g.num_key_heads / tp,
        "gdn_gates": (FP32 + BF16) * T * nv / tp,
        "gdn_chunk_a": BF16 * T * nv * GDN_CHUNK / tp,
        "gdn_norm_inputs": 2 * BF16 * T * v / tp,
        "gdn_out_proj_input": gemm_input_bytes * T * v / tp,
    }


def gdn_cp_bytes(spec: ModelSpec, tokens: float, tp: int, cp: int = 1) -> tuple[float, float]:
    """Bytes one rank sends through the CP all-to-alls of one DeltaNet forward: (the projections q, k, v,
    z, beta, alpha to head sharding; the normed output back), gdn.py L56-63 / ``common.py`` L360-420."""
    _, v, _ = _gdn_dims(spec)
    return BF16 * tokens * gdn_projection_width(spec) / tp, BF16 * tokens * v / tp
