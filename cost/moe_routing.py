"""How many token rows an MoE layer moves and computes per rank: token dropping with an expert
capacity, padding to capacity, and the FP8 / FP4 alignment padding. Pure functions.

Megatron-Core 0.16.1 sources (``megatron/core/transformer/``):

* capacity (``moe/moe_utils.py::get_capacity`` L193-211): ``ceil(num_tokens * k / E * capacity_factor)``
  per expert, ``num_tokens`` the router's input tokens on this rank (``T/sigma``);
* dropping (``moe/moe_utils.py::apply_router_token_dropping`` L803-863, called by ``router.py`` L587-595):
  an expert keeps at most ``capacity`` of its tokens, the lowest-probability (``--moe-token-drop-policy
  probs``) or the last (``position``) ones go; with ``--moe-pad-expert-input-to-capacity`` the routing
  map becomes the capacity mask itself, so every expert receives exactly ``capacity`` rows (padding
  rows carry probability 0) and the dispatcher sends ``capacity * E`` rows (``token_dispatcher.py``
  L486-505: ``num_out_tokens = capacity * num_experts``);
* router padding for quantization (``--moe-router-padding-for-fp8`` / ``-for-quantization``,
  ``token_dispatcher.py`` L617-622, ``moe_utils.py::pad_routing_map`` L573-600): each expert's token
  count on this rank is rounded up to the FP8 / FP4 alignment (``moe_utils.py::get_align_size_for_quantization``
  L1263-1275, ``fp8_utils.py::get_fp8_align_size`` L168-173: 32 for MXFP8, else 16), by routing
  padding tokens, which are dispatched and computed like real ones;
* grouped-GEMM padding (FP8 without router padding, ``moe/experts.py`` L603-606 and L646-653:
  TE ``Fp8Padding``): each local expert's rows are padded to the alignment inside the experts (a padded
  copy of the permuted tokens; the dispatcher moves the unpadded rows).

Balanced routing (every expert receives ``T*k/E`` of this rank's tokens, the assumption of every
routed-token term of ``cost/memory.py`` and ``cost/compute.py``): a capacity factor ``c >= 1`` drops
nothing, ``c < 1`` keeps the fraction ``c``; the alignment padding is ``(align - 1)/2`` rows per expert
count rounded up (counts spread uniformly over the residues).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec


def quantization_align(workload: Workload) -> int:
    """Rows an FP8 grouped GEMM needs per expert (``fp8_utils.py::get_fp8_align_size`` L168-173):
    32 with MXFP8, else 16; 16 also outside FP8 (``get_align_size_for_quantization`` L1275). NVFP4: 128
    (``fp4_utils.py::get_fp4_align_size`` L176-205 @d98e8a6, for the grouped quantize + Hadamard kernels).

    >>> quantization_align(Workload(precision="fp8", fp8_recipe="mxfp8")), quantization_align(Workload())
    (32, 16)
    >>> quantization_align(Workload(precision="fp4"))
    128
    """
    if workload.precision == "fp4":
        return 128
    return 32 if workload.precision == "fp8" and workload.fp8_recipe == "mxfp8" else 16


def expert_capacity(router_tokens: float, spec: ModelSpec, capacity_factor: float) -> int:
    """``get_capacity`` (``moe_utils.py`` L193-211) for ``router_tokens`` tokens of this rank.

    >>> from megasolve.models.presets import load_preset
    >>> expert_capacity(4096, load_preset("mixtral-8x7b"), 1.25)  # ceil(4096 * 2 / 8 * 1.25)
    1280
    """
    m = spec.moe
    return math.ceil(router_tokens * m.top_k / m.num_experts * capacity_factor)


@dataclass(frozen=True, slots=True)
class RoutedRows:
    """Rows per rank relative to the balanced dropless count ``T/sigma * k``: through the dispatcher
    (permutation buffers, all-to-all) and through the local experts' GEMMs (their saved inputs and
    outputs, their FLOPs)."""

    dispatch: float
    gemm: float


def routed_rows(spec: ModelSpec, workload: Workload, router_tokens: float) -> RoutedRows:
    """``RoutedRows`` for ``router_tokens = T/sigma`` router input tokens on this rank.

    The grouped-GEMM padding is counted for ``E`` local experts (every expert on this rank): the memory
    terms have no EP axis, and ``E/ep`` local experts pad less, so this errs on the large side by at
    most ``E*(align - 1)/2`` rows (about 1.5 % of ``T*k`` rows for 64 experts, top-8, 4,096 tokens).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("mixtral-8x7b")
    >>> routed_rows(spec, Workload(), 4096)
    RoutedRows(dispatch=1.0, gemm=1.0)
    >>> routed_rows(spec, Workload(moe_expert_capacity_factor=0.5), 4096)  # half the tokens dropped
    RoutedRows(dispatch=0.5, gemm=0.5)
    >>> r = routed_rows(spec, Workload(moe_expert_capacity_factor=1.25, moe_pad_expert_input_to_capacity=True,
    ...                                moe_dispatcher="alltoall"), 4096)
    >>> r.dispatch == r.gemm == 1280 * 8 / 8192
    True
    >>> r = routed_rows(spec, Workload(precision="fp8", moe_router_padding_for_fp8=True, moe_dispatcher="alltoall"),
    ...                 4096)
    >>> r.dispatch == r.gemm == 1 + 8 * 7.5 / 8192
    True
    """
    m = spec.moe
    balanced = router_tokens * m.top_k
    rows = balanced
    if workload.moe_expert_capacity_factor is not None:
        capacity = expert_capacity(router_tokens, spec, workload.moe_expert_capacity_factor)
        if workload.moe_pad_expert_input_to_capacity:
            rows = capacity * m.num_experts  # every expert receives exactly its capacity
            if workload.quantized:  # Fp8Padding / Fp4Padding still round each expert's rows up
                align = quantization_align(workload)
                gemm_rows = m.num_experts * math.ceil(capacity / align) * align
                return RoutedRows(dispatch=rows / balanced, gemm=gemm_rows / balanced)
        else:
            rows = min(balanced, capacity * m.num_experts)  # balanced: only c < 1 drops
    align_pad = m.num_experts * (quantization_align(workload) - 1) / 2
    quantized = workload.quantized
    dispatch = rows
    if workload.moe_router_padding_for_fp8 and not workload.moe_pad_expert_input_to_capacity:
        dispatch = rows + align_pad  # padding tokens routed like real ones
    gemm = dispatch
    if quantized and not workload.moe_router_padding_for_fp8 and not workload.moe_pad_expert_input_to_capacity:
        gemm = rows + align_pad  # TE Fp8Padding inside the experts
    return RoutedRows(dispatch=dispatch / balanced, gemm=gemm / balanced)
