#!/usr/bin/env python3
"""Golden activation bytes from real Megatron-Core layers, traced on the CPU.

What it does
------------
For every case in ``CASES`` (a small model + a layout) this script builds Megatron-Core's
``GPTModel`` with the local (torch-native) layer spec on the CPU, runs one forward pass with a loss
and one backward pass on real bf16 tensors, and records, from a ``TorchDispatchMode`` that sees every
ATen op and follows each result's storage with a ``StorageWeakRef`` (the mechanism of
``torch.distributed._tools.mem_tracker``):

* ``retained_bytes``: bytes of the storages created during the forward pass that are still alive when
  it returns (what autograd keeps for backward: saved tensors, also those kept as ``ctx`` attributes),
  minus the loss itself, minus the persistent buffers below;
* ``persistent``: storages that outlive a step by design (Megatron's global memory buffer,
  ``parallel_state.get_global_memory_buffer()``), with their bytes;
* ``forward_peak_bytes`` / ``backward_peak_bytes``: the largest live total during each pass above
  what was live when the pass began (transients: all-gathered tensors, permutation buffers, fp32
  temporaries, gradients in flight);
* ``saved``: the alive storages themselves (creating op, shape, dtype, bytes), to explain each term;
* ``module_backward``: for each attention and MLP/MoE module of the one-layer model, the peak of its
  backward above the live total when its backward began (the gradient of its output complete), and
  what makes that peak: the storages its backward made that are alive then (op, shape, dtype as first
  seen: a view's op and shape name the storage it was first seen through, bytes) and the bytes of its
  saved tensors already freed.

Weight gradients are dropped as soon as autograd accumulates them, as Megatron's DDP wrapper does after
adding them to the preallocated ``main_grad`` buffer (static memory, counted with the gradients), so the
backward peaks hold only what a training step holds transiently; the linear layers' weight gradients go
straight into ``main_grad`` as with the GPU's gradient-accumulation fusion
(``install_gradient_accumulation_fusion``); those of the embedding, norms and router exist once in their
dtype before they are dropped, as on the GPU.

Per-layer bytes come from the difference of two models that differ by one layer of the same kind
(``num_layers = L`` and ``L + 1``), so embedding, final norm, logits, loss and MTP cancel; the rest
of the model ("extras") is the ``L``-layer total minus ``L`` layers.  The results are written to
``tests/data/megatron_activation_golden.json``; ``tests/test_activation_golden.py`` compares
megasolve's formulas (``cost/memory.py``) with them without torch or Megatron-Core installed.

What a CPU trace can and cannot show
------------------------------------
Transformer Engine, flash attention and the fused softmax / cross-entropy kernels need CUDA, so the
layers are the local spec: torch-native norms (``WrappedTorchNorm``), ``ColumnParallelLinear`` /
``RowParallelLinear`` and the unfused ``DotProductAttention``.  The test states, term by term, how
the TE spec differs (fused norm + linear, flash attention) and checks the formula for the local spec
exactly; the TE terms are therefore derived from source, not measured.  Parallel groups are a fake
process group (one process plays rank 0; collectives produce tensors of the right shapes); SP runs with
the torch norm built as if SP were off (``install_sequence_parallel_torch_norm``).  The alltoall
and allgather dispatchers are traced over EP ranks too (cases ``moe-*-ep*``): the fake all-gather fills every
rank's slot from this rank's tensors, the token counts and routing map rolled so each rank receives as many rows
as it sends, and the fake all-to-all hands those rows back (``install_replicating_all_gather``: balanced routing,
real sizes, values not); the flex dispatcher needs DeepEP / HybridEP (CUDA) and is not traced.

On a GPU (``--device cuda``, needs Transformer Engine): the same cases are built with the TE spec
(fused norm + linear, fused RoPE / SwiGLU / softmax, ``--attention flash|unfused`` selects TE's
backend), traced the same way, and ``torch.cuda.max_memory_allocated`` is recorded around forward and
backward; the output goes to ``tests/data/megatron_activation_golden_gpu.json``. This mode was written
without a GPU at hand and has not been run yet.

How to run (CPU only, ~1 minute on 2 cores)::

    pip install torch megatron-core          # the benchmark extra: pip install -e .[trace]
    python benchmarks/megatron_activation_golden.py            # writes the JSON
    python benchmarks/megatron_activation_golden.py --only moe --out /dev/stdout
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "data" / "megatron_activation_golden.json"
DEFAULT_OUT_GPU = REPO / "tests" / "data" / "megatron_activation_golden_gpu.json"
# Set by main(): "cpu" (local spec, shims) or "cuda" (Transformer Engine spec, no shims); TE attention backend.
RUN = {"device": "cpu", "attention": "unfused"}

BASE = dict(hidden_size=256, ffn_hidden_size=512, num_attention_heads=8, num_query_groups=4, kv_channels=32,
            vocab_size=1024, seq_length=128, micro_batch_size=2, swiglu=True, normalization="RMSNorm",
            qk_layernorm=False, hidden_dropout=0.0, attention_dropout=0.0, tp=1, ep=1, etp=None,
            num_moe_experts=None, moe_router_topk=2, moe_ffn_hidden_size=None,
            moe_shared_expert_intermediate_size=None, moe_token_dispatcher_type="alltoall",
            multi_latent_attention=False, q_lora_rank=None, kv_lora_rank=None, qk_head_dim=None,
            qk_pos_emb_head_dim=None, v_head_dim=None, mtp_num_layers=None, cross_entropy_loss_fusion=False,
            recompute_granularity=None, recompute_modules=None, moe_aux_loss_coeff=0.0, sequence_parallel=False,
            moe_router_load_balancing_type="aux_loss", moe_z_loss_coeff=None)


# keys a case may set that the earlier cases' stored configs do not hold (absent: these defaults)
OPTIONAL = dict(bias_activation_fusion=False, activation_func_fp8_input_store=False)


def _case(name: str, **overrides) -> dict:
    case = dict(BASE)
    unknown = set(overrides) - set(BASE) - set(OPTIONAL)
    if unknown:
        raise KeyError(f"case {name}: unknown keys {sorted(unknown)}")
    case.update(overrides)
    return dict(name=name, config=case)


MOE = dict(num_moe_experts=8, moe_router_topk=2, moe_ffn_hidden_size=128)
MLA = dict(multi_latent_attention=True, q_lora_rank=96, kv_lora_rank=64, qk_head_dim=32, qk_pos_emb_head_dim=16,
           v_head_dim=32, num_query_groups=8)

CASES = [
    _case("dense-gqa"),
    _case("dense-gqa-seq256", seq_length=256),
    _case("dense-gqa-mbs1", micro_batch_size=1),
    _case("dense-gqa-tp2", tp=2),
    _case("dense-gqa-tp2-sp", tp=2, sequence_parallel=True),
    _case("moe-alltoall-tp2-sp", **MOE, tp=2, sequence_parallel=True),
    _case("dense-mha-gelu-layernorm", swiglu=False, normalization="LayerNorm", num_query_groups=8,
          ffn_hidden_size=1024),
    _case("dense-gqa-dropout", hidden_dropout=0.1, attention_dropout=0.1),
    _case("dense-gqa-qknorm", qk_layernorm=True),
    _case("dense-gqa-fused-ce", cross_entropy_loss_fusion=True),
    _case("moe-alltoall", **MOE),
    _case("moe-allgather", **MOE, moe_token_dispatcher_type="allgather"),
    _case("moe-alltoall-top4-shared", **dict(MOE, moe_router_topk=4), moe_shared_expert_intermediate_size=256),
    _case("mla-dense", **MLA),
    _case("mla-moe-mtp1", **MLA, **MOE, mtp_num_layers=1),
    _case("moe-alltoall-auxloss", **MOE, moe_aux_loss_coeff=0.01),
    _case("dense-gqa-full-recompute", recompute_granularity="full"),
    _case("dense-gqa-selective-core-attn", recompute_granularity="selective", recompute_modules=["core_attn"]),
    # issue 14, the MoE + MLA + MTP gap: the router's loss state and a small model of that kind as a whole
    _case("moe-alltoall-zloss", **MOE, moe_z_loss_coeff=0.001),
    _case("moe-alltoall-seqauxloss", **MOE, moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=0.01),
    _case("gap-mla-moe32-mtp1", **MLA, **dict(MOE, num_moe_experts=32, moe_router_topk=4),
          moe_shared_expert_intermediate_size=128, mtp_num_layers=1, moe_aux_loss_coeff=0.01),
    _case("gap-mla-moe32-mtp1-allgather", **MLA, **dict(MOE, num_moe_experts=32, moe_router_topk=4),
          moe_shared_expert_intermediate_size=128, mtp_num_layers=1, moe_aux_loss_coeff=0.01,
          moe_token_dispatcher_type="allgather"),
    # the backward transient of one MoE layer (moe_dispatch_transient_bytes), pinned over its axes: expert
    # width F_m > h, three of four experts, more tokens, another hidden size (TP/ETP 2 needs SP with MoE:
    # moe-alltoall-tp2-sp)
    _case("moe-alltoall-ffn1024", **dict(MOE, moe_ffn_hidden_size=1024)),
    _case("moe-allgather-ffn1024-top4", **dict(MOE, moe_ffn_hidden_size=1024, moe_router_topk=4),
          moe_token_dispatcher_type="allgather"),
    _case("moe-alltoall-e4-top3-seq256", **dict(MOE, num_moe_experts=4, moe_router_topk=3), seq_length=256),
    _case("moe-alltoall-h384-e16", **dict(MOE, num_moe_experts=16), hidden_size=384),
    # the dispatchers across EP ranks (``install_replicating_all_gather``): allgather gathers every rank's tokens,
    # picks the local experts' rows from all of them and reduce-scatters the combine; alltoall exchanges the rows
    # (at EP 8 one local expert: SequentialMLP runs all its rows at once, as TE's grouped MLP does)
    _case("moe-allgather-ep8", **MOE, moe_token_dispatcher_type="allgather", ep=8),
    _case("moe-alltoall-ep4", **MOE, ep=4),
    _case("moe-alltoall-ep8", **MOE, ep=8),
    _case("moe-allgather-ep4-tp2-sp", **MOE, moe_token_dispatcher_type="allgather", ep=4, tp=2,
          sequence_parallel=True),
    # the layout Megatron-Bridge's MoE recipes run: attention TP 2 with SP, experts not TP-split (etp None above is
    # Megatron's default, expert TP = TP)
    _case("moe-alltoall-ep4-tp2-sp-etp1", **MOE, ep=4, tp=2, etp=1, sequence_parallel=True),
    # the fused SwiGLU kernel (Megatron-LM's default --bias-swiglu-fusion) and --activation-func-fp8-input-store, which
    # makes it keep its input (the fc1 output) in FP8 for backward (fusions/fused_bias_swiglu.py): dense, and the
    # routed experts' weighted kernel beside a shared expert's
    _case("dense-gqa-fused-swiglu", bias_activation_fusion=True),
    _case("dense-gqa-swiglu-fp8-input-store", bias_activation_fusion=True, activation_func_fp8_input_store=True),
    _case("moe-shared-swiglu-fp8-input-store", **MOE, moe_shared_expert_intermediate_size=256,
          bias_activation_fusion=True, activation_func_fp8_input_store=True),
]


# ---------------------------------------------------------------------------- CPU shims
def install_cpu_shims(torch) -> None:
    """Let modules that name ``cuda`` run on the CPU: factory calls with ``device="cuda"`` go to the
    CPU, ``torch.cuda.current_device()`` is the CPU, streams and events are inert (MoE dispatchers
    create them), and the model-parallel RNG tracker's ``fork`` is a no-op (no CUDA RNG)."""
    from torch.overrides import TorchFunctionMode

    class CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "cuda" in str(kwargs.get("device", "")):
                kwargs["device"] = "cpu"
            return func(*args, **kwargs)

    class _Inert:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):  # wait_stream, record_event, synchronize, ...: inert
            return lambda *a, **k: _Inert()

    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.Stream = _Inert
    torch.cuda.Event = _Inert
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.current_stream = lambda *a, **k: _Inert()
    torch.cuda.device_count = lambda: 1
    # activation checkpointing saves and restores the CUDA RNG state (tensor_parallel/random.py)
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    from megatron.core.tensor_parallel import random as tp_random

    tp_random._set_cuda_rng_state = lambda *a, **k: None
    tp_random._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    # the recomputation in backward runs outside the function mode: build the causal mask on the CPU
    from megatron.core.fusions import fused_softmax
    from megatron.core.transformer import utils as transformer_utils

    def causal_mask(sq: int):  # transformer/utils.py::get_default_causal_mask, device "cuda" -> CPU
        return torch.triu(torch.ones(sq, sq), diagonal=1).bool()

    transformer_utils.get_default_causal_mask = causal_mask
    fused_softmax.get_default_causal_mask = causal_mask
    CudaToCpu().__enter__()


def install_gradient_accumulation_fusion(torch) -> None:
    """The GPU's fused weight-gradient GEMM (Apex ``fused_weight_gradient_mlp_cuda``, Megatron-LM's default
    ``--gradient-accumulation-fusion``; ``tensor_parallel/layers.py`` L561-573) accumulates ``wgrad`` into
    the fp32 ``main_grad`` without a bf16 weight gradient. The same on the CPU: the product is added to
    ``main_grad`` with the tracker out of the way, so no weight-gradient transient is seen."""
    import types

    from torch.utils._python_dispatch import _disable_current_modes
    from megatron.core.tensor_parallel import layers

    def wgrad_gemm_accum(total_input, grad_output, main_grad):
        with _disable_current_modes():
            x = total_input.reshape(-1, total_input.shape[-1])
            g = grad_output.reshape(-1, grad_output.shape[-1])
            main_grad.add_(g.t().float() @ x.float())

    layers.fused_weight_gradient_mlp_cuda = types.SimpleNamespace(wgrad_gemm_accum_fp32=wgrad_gemm_accum,
                                                                  wgrad_gemm_accum_fp16=wgrad_gemm_accum)
    layers._grad_accum_fusion_available = True


def install_replicating_all_gather(torch) -> None:
    """The fake process group's collectives leave their outputs as allocated (uninitialised), so a dispatcher
    over EP ranks would route garbage. Fill rank ``r``'s all-gather slot with this rank's input instead, and for
    the ``[T, E]`` routing map and probabilities and the ``[E]`` token counts roll the experts by ``r`` ranks'
    worth (``E / ep``): the local experts then receive, over the ``ep`` slots, the tokens this rank routed to
    every expert once, ``T * k`` rows exactly as with a balanced router; the alltoall dispatcher's exchange then
    receives as many rows as it sends and gets this rank's back (sizes as on a GPU, values not)."""
    from megatron.core.tensor_parallel import mappings

    fake = mappings.dist_all_gather_func

    def replicate(output, input_, group=None, async_op=False):
        work = fake(output, input_, group=group, async_op=async_op)
        slots = output.view(-1, *input_.shape)
        experts = RUN.get("experts")
        per_rank = experts // slots.shape[0] if experts else 0
        for r in range(slots.shape[0]):
            routed = per_rank and input_.shape[-1] == experts and input_.dim() in (1, 2)
            slots[r].copy_(torch.roll(input_, r * per_rank, dims=-1) if routed else input_)
        return work

    mappings.dist_all_gather_func = replicate
    fake_a2a = torch.distributed.all_to_all_single

    def exchange(output, input_, *args, **kwargs):
        """The alltoall dispatcher's token exchange: with the counts gathered as above every rank receives as many
        rows as it sends, so the fake exchange hands this rank's rows back (sizes real, values not)."""
        def listed(sizes):  # (the dispatcher hands over CPU tensors; the fake group's binding takes lists)
            return sizes.tolist() if hasattr(sizes, "tolist") else sizes

        args = tuple(listed(a) for a in args)
        kwargs = {k: listed(v) for k, v in kwargs.items()}
        work = fake_a2a(output, input_, *args, **kwargs)
        if output.numel() == input_.numel():
            output.copy_(input_.view_as(output))
        return work

    torch.distributed.all_to_all_single = exchange


def install_mla_core_attention() -> None:
    """The local ``DotProductAttention`` (0.16) does not take MLA's ``k_channels`` / ``v_channels``
    (``multi_latent_attention.py`` L155-166 passes them); accept them and size the context by the value
    head dim.  Its forward (unfused: baddbmm, softmax, bmm) is unchanged and handles qk != v widths."""
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    original = DotProductAttention.__init__

    def __init__(self, *args, k_channels=None, v_channels=None, **kwargs):
        original(self, *args, **kwargs)
        if v_channels is not None:
            self.hidden_size_per_partition = v_channels * self.num_attention_heads_per_partition

    DotProductAttention.__init__ = __init__
    from megatron.core.transformer import multi_latent_attention as mla

    if not isinstance(mla.TELinear, type):  # 0.16 without TE: placeholders, not classes (L54-65)
        mla.HAVE_TE = False


def install_sequence_parallel_torch_norm() -> None:
    """The torch norm of the local spec refuses sequence parallelism (``torch_norm.py`` L32) only because
    its weight gradient is not all-reduced over TP; a norm of local tokens keeps the same tensors either
    way. Build it with ``sequence_parallel`` off so SP layouts can be traced (the fake process group does
    not run the gradient all-reduce anyway)."""
    import dataclasses

    from megatron.core.transformer import torch_norm

    original = torch_norm.WrappedTorchNorm.__new__

    def __new__(cls, config, *args, **kwargs):
        if config.sequence_parallel:
            config = dataclasses.replace(config, sequence_parallel=False)
        return original(cls, config, *args, **kwargs)

    torch_norm.WrappedTorchNorm.__new__ = __new__


# ---------------------------------------------------------------------------- tracking
def make_tracker(torch):
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Tracker(TorchDispatchMode):
        """Every storage an op returns, followed until it dies; peak of the live total."""

        def __init__(self, preexisting):
            super().__init__()
            self.pre = set(preexisting)
            self.refs = {}
            self.info = {}
            self.peak = 0
            self.windows = {}  # module name -> its backward: live bytes at its start, peak above, snapshot
            self.open = []

        def snapshot(self, base: dict) -> list:
            """The storages made since ``base`` that are alive now, and the bytes of ``base`` freed since
            (a storage is its weak reference: a key can be a reused address)."""
            made = [(k, n) for k, (ref, n) in self.refs.items() if base.get(k, (None,))[0] is not ref]
            freed = sum(n for k, (ref, n) in base.items() if ref.expired() or self.refs.get(k, (None,))[0] is not ref)
            return [made, freed]

        def open_window(self, name: str) -> None:
            """A module's backward begins (the gradient of its output is complete)."""
            live = self.live_bytes()
            base = dict(self.refs)
            self.windows[name] = dict(start=live, peak=0, base=base, at_peak=[[], 0])
            self.open.append(name)

        def close_window(self, name: str) -> None:
            """A module's backward ends (the gradient of its input is complete)."""
            if name in self.open:
                self.open.remove(name)

        def live_bytes(self) -> int:
            for key in [k for k, (ref, _) in self.refs.items() if ref.expired()]:
                del self.refs[key]
            return sum(n for _, n in self.refs.values())

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == RUN["device"]:
                    storage = t.untyped_storage()
                    key = storage._cdata
                    if key in self.refs and self.refs[key][0].expired():  # address of a dead storage reused
                        del self.refs[key]
                    if key not in self.pre and key not in self.refs:
                        self.refs[key] = (StorageWeakRef(storage), storage.nbytes())
                        self.info[key] = (str(func).replace("aten.", ""), list(t.shape), str(t.dtype)[6:])
            live = self.live_bytes()
            self.peak = max(self.peak, live)
            for name in self.open:
                w = self.windows[name]
                if live - w["start"] > w["peak"]:
                    w["peak"] = live - w["start"]
                    w["at_peak"] = self.snapshot(w["base"])
            return out

    return Tracker


def watch_backward(torch, tracker, name: str, module) -> None:
    """Open a window on ``tracker`` when the gradient of ``module``'s output is complete and close it when
    the gradient of its input is (tensor hooks, registered in forward; module backward hooks would wrap
    the tensors and see only positional inputs)."""
    from torch.utils._pytree import tree_leaves

    def first_tensor(x):
        return next((t for t in tree_leaves(x) if isinstance(t, torch.Tensor) and t.requires_grad), None)

    def pre_hook(mod, args, kwargs):
        x = first_tensor((args, kwargs.get("hidden_states")))
        if x is not None:
            x.register_hook(lambda g: tracker.close_window(name))

    def post_hook(mod, args, kwargs, out):
        y = first_tensor(out)
        if y is not None:
            y.register_hook(lambda g: tracker.open_window(name))

    module.register_forward_pre_hook(pre_hook, with_kwargs=True)
    module.register_forward_hook(post_hook, with_kwargs=True)


# ---------------------------------------------------------------------------- model
def make_config(torch, c: dict, num_layers: int):
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    kw = dict(num_layers=num_layers, hidden_size=c["hidden_size"], ffn_hidden_size=c["ffn_hidden_size"],
              num_attention_heads=c["num_attention_heads"], num_query_groups=c["num_query_groups"],
              kv_channels=c["kv_channels"], normalization=c["normalization"], qk_layernorm=c["qk_layernorm"],
              gated_linear_unit=c["swiglu"],
              activation_func=torch.nn.functional.silu if c["swiglu"] else torch.nn.functional.gelu,
              add_bias_linear=False, hidden_dropout=c["hidden_dropout"], attention_dropout=c["attention_dropout"],
              tensor_model_parallel_size=c["tp"], sequence_parallel=c["sequence_parallel"],
              expert_model_parallel_size=c["ep"], expert_tensor_parallel_size=c.get("etp"),
              bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
              use_cpu_initialization=True, perform_initialization=True,
              bias_dropout_fusion=False, masked_softmax_fusion=False,
              apply_rope_fusion=False, persist_layer_norm=False,
              bias_activation_fusion=c.get("bias_activation_fusion", OPTIONAL["bias_activation_fusion"]),
              activation_func_fp8_input_store=c.get("activation_func_fp8_input_store",
                                                    OPTIONAL["activation_func_fp8_input_store"]),
              gradient_accumulation_fusion=RUN["device"] == "cpu",  # install_gradient_accumulation_fusion
              cross_entropy_loss_fusion=c["cross_entropy_loss_fusion"],
              cross_entropy_fusion_impl="native")
    if RUN["device"] == "cuda":  # the GPU training path: Megatron-LM's default fusions, TE attention backend
        from megatron.core.transformer.enums import AttnBackend

        kw.update(use_cpu_initialization=False, bias_dropout_fusion=True, masked_softmax_fusion=True,
                  apply_rope_fusion=True, bias_activation_fusion=c["swiglu"],
                  attention_backend=AttnBackend[RUN["attention"]])
    if c["recompute_granularity"] == "full":
        kw.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    elif c["recompute_granularity"] == "selective":
        kw.update(recompute_granularity="selective", recompute_modules=list(c["recompute_modules"]))
    if c["num_moe_experts"]:
        kw.update(num_moe_experts=c["num_moe_experts"], moe_router_topk=c["moe_router_topk"],
                  moe_ffn_hidden_size=c["moe_ffn_hidden_size"],
                  moe_shared_expert_intermediate_size=c["moe_shared_expert_intermediate_size"],
                  moe_token_dispatcher_type=c["moe_token_dispatcher_type"], moe_grouped_gemm=False,
                  moe_router_load_balancing_type=c["moe_router_load_balancing_type"],
                  moe_aux_loss_coeff=c["moe_aux_loss_coeff"], moe_z_loss_coeff=c["moe_z_loss_coeff"],
                  moe_permute_fusion=False, moe_router_dtype="fp32")
    if c["mtp_num_layers"]:
        kw.update(mtp_num_layers=c["mtp_num_layers"], mtp_loss_scaling_factor=0.1)
    if c["multi_latent_attention"]:
        kw.update(multi_latent_attention=True, q_lora_rank=c["q_lora_rank"], kv_lora_rank=c["kv_lora_rank"],
                  qk_head_dim=c["qk_head_dim"], qk_pos_emb_head_dim=c["qk_pos_emb_head_dim"],
                  v_head_dim=c["v_head_dim"], rope_type="rope", apply_rope_fusion=False)
        return MLATransformerConfig(**kw)
    return TransformerConfig(**kw)


def build_model(torch, c: dict, num_layers: int):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt import gpt_layer_specs as specs

    config = make_config(torch, c, num_layers)
    te = RUN["device"] == "cuda"
    if c["num_moe_experts"]:
        layer_spec = specs.get_gpt_decoder_block_spec(config, use_transformer_engine=te,
                                                      normalization=c["normalization"])
    elif te:
        layer_spec = specs.get_gpt_layer_with_transformer_engine_spec(
            qk_layernorm=c["qk_layernorm"], multi_latent_attention=c["multi_latent_attention"])
    else:
        layer_spec = specs.get_gpt_layer_local_spec(qk_layernorm=c["qk_layernorm"],
                                                    multi_latent_attention=c["multi_latent_attention"],
                                                    normalization=c["normalization"])
    mtp_spec = None
    if c["mtp_num_layers"]:
        last = specs.get_gpt_decoder_layer_specs(config, use_transformer_engine=te,
                                                 normalization=c["normalization"])[-1]
        mtp_spec = specs.get_gpt_mtp_block_spec(config, last, use_transformer_engine=te)
    with torch.device(RUN["device"]):
            return GPTModel(config=config, transformer_layer_spec=layer_spec, vocab_size=c["vocab_size"],
                        max_sequence_length=c["seq_length"], pre_process=True, post_process=True,
                        parallel_output=True, share_embeddings_and_output_weights=False,
                        position_embedding_type="rope", mtp_block_spec=mtp_spec)




def trace(torch, Tracker, c: dict, num_layers: int) -> dict:
    from megatron.core.transformer.moe import moe_utils

    get_tracker = getattr(moe_utils, "get_moe_layer_wise_logging_tracker", None)
    if get_tracker is not None:  # the aux-loss tracker is sized by the first model's layer count
        get_tracker().clear()
    model = build_model(torch, c, num_layers)
    model.train()
    # Megatron's DDP wrapper adds each weight gradient to the preallocated fp32 main_grad buffer (counted as
    # static memory) and drops it: ``distributed_data_parallel.py::_make_backward_post_hook`` L420-441
    # (``param.main_grad.add_(param.grad.data); param.grad = None``). Without this hook the trace's
    # backward peak would count every weight gradient made so far as a transient.
    for param in model.parameters():
        param.register_post_accumulate_grad_hook(lambda p: setattr(p, "grad", None))
        param.main_grad = torch.zeros_like(param, dtype=torch.float32)  # DDP's grad buffer (static memory)
    watched = [(n, m) for n, m in model.named_modules() if n.endswith((".self_attention", ".mlp"))]
    s, b = c["seq_length"], c["micro_batch_size"]
    gen = torch.Generator().manual_seed(0)
    device = RUN["device"]
    tokens = torch.randint(0, c["vocab_size"], (b, s), generator=gen).to(device)
    labels = torch.randint(0, c["vocab_size"], (b, s), generator=gen).to(device)
    position_ids = torch.arange(s, device=device).unsqueeze(0).expand(b, s)
    pre = {p.untyped_storage()._cdata for p in model.parameters()}
    pre |= {p.main_grad.untyped_storage()._cdata for p in model.parameters()}
    pre |= {t.untyped_storage()._cdata for t in model.buffers()}
    pre |= {t.untyped_storage()._cdata for t in (tokens, labels, position_ids)}
    from megatron.core import parallel_state as ps
    buffer = ps.get_global_memory_buffer().buffer
    persistent_before = sum(t.untyped_storage().nbytes() for t in buffer.values())
    pre |= {t.untyped_storage()._cdata for t in buffer.values()}
    tracker = Tracker(pre)
    for name, module in watched:
        watch_backward(torch, tracker, name, module)
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        allocated_start = torch.cuda.memory_allocated()
    with tracker:
        start = tracker.live_bytes()
        loss = model(tokens, position_ids, attention_mask=None, labels=labels)
        loss = loss.float().sum()  # [b, s] per-token losses -> scalar (tiny)
        after_forward = tracker.live_bytes()
        forward_peak = tracker.peak - start
        alive = {k: tracker.info[k] + (n,) for k, (_, n) in tracker.refs.items()}
        tracker.peak = 0
        if cuda:
            torch.cuda.synchronize()
            cuda_stats = dict(forward_retained=torch.cuda.memory_allocated() - allocated_start,
                              forward_peak=torch.cuda.max_memory_allocated() - allocated_start)
            torch.cuda.reset_peak_memory_stats()
            allocated_backward = torch.cuda.memory_allocated()
        loss.backward()
        backward_peak = tracker.peak - after_forward
        if cuda:
            torch.cuda.synchronize()
            cuda_stats["backward_peak"] = torch.cuda.max_memory_allocated() - allocated_backward
    persistent = {}
    retained = after_forward - start - loss.untyped_storage().nbytes()
    saved = []
    for key, (op, shape, dtype, n) in alive.items():
        if key == loss.untyped_storage()._cdata:
            continue
        kind = None
        if key in {t.untyped_storage()._cdata for t in buffer.values()}:
            kind = "global_memory_buffer"  # parallel_state.get_global_memory_buffer(), utils.py GlobalMemoryBuffer
        if kind:
            persistent[kind] = persistent.get(kind, 0) + n
            retained -= n
        else:
            saved.append([op, shape, dtype, n])
    persistent["global_memory_buffer_total"] = sum(t.untyped_storage().nbytes() for t in buffer.values())
    persistent["global_memory_buffer_growth"] = persistent["global_memory_buffer_total"] - persistent_before
    modules = {}
    for name, w in tracker.windows.items():
        made_w, freed_w = w["at_peak"]
        modules[name] = dict(peak_bytes=w["peak"], freed_bytes=freed_w,
                             made=sorted(([*tracker.info[k], n] for k, n in made_w), key=lambda x: -x[3]))
    out = dict(retained_bytes=retained, persistent=persistent, forward_peak_bytes=forward_peak,
               backward_peak_bytes=backward_peak, saved=saved,
               module_backward=modules)
    if cuda:
        out["cuda_memory_stats"] = cuda_stats  # torch.cuda.memory_allocated / max_memory_allocated deltas
    return out


def run_case(torch, dist, ps, FakeStore, Tracker, case: dict) -> dict:
    c = case["config"]
    from megatron.core import tensor_parallel

    RUN["experts"] = c["num_moe_experts"] if c["ep"] > 1 else None  # install_replicating_all_gather

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=c["tp"] * c["ep"])
    try:
        ps.initialize_model_parallel(tensor_model_parallel_size=c["tp"], expert_model_parallel_size=c["ep"],
                                     expert_tensor_parallel_size=c.get("etp"), create_gloo_process_groups=False)
        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
        torch.manual_seed(0)
        lo = trace(torch, Tracker, c, 1)
        torch.manual_seed(0)
        hi = trace(torch, Tracker, c, 2)
    finally:
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    per_layer = hi["retained_bytes"] - lo["retained_bytes"]
    # the saved tensors of the second layer: those of the 2-layer model not matched in the 1-layer one
    remaining = [tuple(x[:3]) for x in lo["saved"]]
    layer_saved = []
    for item in hi["saved"]:
        key = tuple(item[:3])
        if key in remaining:
            remaining.remove(key)
        else:
            layer_saved.append(item)
    return dict(name=case["name"], config=c, layer_bytes=per_layer,
                extras_bytes=lo["retained_bytes"] - per_layer, persistent=hi["persistent"],
                forward_peak_bytes=[lo["forward_peak_bytes"], hi["forward_peak_bytes"]],
                backward_peak_bytes=[lo["backward_peak_bytes"], hi["backward_peak_bytes"]],
                layer_saved=sorted(layer_saved, key=lambda x: -x[3]),
                module_backward=lo["module_backward"],
                **({"cuda_memory_stats": [lo["cuda_memory_stats"], hi["cuda_memory_stats"]]}
                   if "cuda_memory_stats" in lo else {}),
                model_saved_1_layer=sorted(lo["saved"], key=lambda x: -x[3]))


def compact_lists(text: str) -> str:
    """One line per saved tensor ``[op, [shape], dtype, bytes]``: collapse the innermost JSON arrays,
    then the arrays that hold only those, so the golden file reads as a table."""
    import re

    inner = re.compile(r"\[\s*([^\[\]{}]*?)\s*\]", re.S)
    text = inner.sub(lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)
    entry = re.compile(r"\[\s*(\"[^\"]*\",\s*\[[^\[\]]*\],\s*\"[^\"]*\",\s*\d+)\s*\]", re.S)
    return entry.sub(lambda m: "[" + re.sub(r"\s*\n\s*", " ", m.group(1)) + "]", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--out", default=None, help="default: tests/data/megatron_activation_golden[_gpu].json")
    parser.add_argument("--only", default=None, help="substring of the case names to run")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: Transformer Engine spec on a GPU (not run yet, see the module docstring)")
    parser.add_argument("--attention", choices=("flash", "unfused"), default="flash",
                        help="TE attention backend with --device cuda (the CPU path is always unfused)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    RUN["device"] = args.device
    RUN["attention"] = args.attention if args.device == "cuda" else "unfused"
    out_path = args.out or str(DEFAULT_OUT_GPU if args.device == "cuda" else DEFAULT_OUT)
    if args.device == "cpu":
        install_cpu_shims(torch)
    import megatron.core
    from megatron.core import parallel_state as ps

    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):  # 0.16 names it only when TE imports (moe_utils.py L1192)
        moe_utils.te_general_gemm = None
    if args.device == "cpu":
        install_mla_core_attention()
        install_gradient_accumulation_fusion(torch)
        install_sequence_parallel_torch_norm()
        install_replicating_all_gather(torch)
    Tracker = make_tracker(torch)
    results = []
    for case in CASES:
        if args.only and args.only not in case["name"]:
            continue
        res = run_case(torch, dist, ps, FakeStore, Tracker, case)
        tokens = case["config"]["seq_length"] * case["config"]["micro_batch_size"]
        print(f"{case['name']:28s} layer {res['layer_bytes']:>9d} B ({res['layer_bytes'] / tokens:8.1f} B/token)"
              f"  extras {res['extras_bytes']:>9d}  persistent {res['persistent']}", file=sys.stderr)
        results.append(res)
    versions = {"megatron-core": megatron.core.__version__, "torch": torch.__version__,
                "python": platform.python_version()}
    if args.device == "cuda":
        import transformer_engine

        versions["transformer-engine"] = transformer_engine.__version__
        versions["gpu"] = torch.cuda.get_device_name()
    spec = ("local (torch-native), CPU" if args.device == "cpu"
            else f"transformer_engine, CUDA, attention backend {RUN['attention']}")
    doc = dict(generator="benchmarks/megatron_activation_golden.py", spec=spec,
               versions=versions,
               units="bytes, one micro-batch of seq_length x micro_batch_size tokens, rank 0",
               cases=results)
    text = compact_lists(json.dumps(doc, indent=1))
    if out_path == "/dev/stdout":
        print(text)
    else:
        Path(out_path).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
