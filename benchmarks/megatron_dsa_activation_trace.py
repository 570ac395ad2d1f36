#!/usr/bin/env python3
"""What one DeepSeek Sparse Attention (DSA) attention block of Megatron-Core keeps for backward, traced on the CPU,
set against megasolve's formula (``cost/memory.py``: ``attention_activation_terms``, MLA branch, and
``dsa_attention_terms``).

What it builds
--------------
One ``TransformerLayer`` from Megatron-Core's own DSA layer spec,
``models/gpt/experimental_attention_variant_module_specs.py``
``get_transformer_layer_with_experimental_attention_variant_spec(config, backend)`` (the spec
``get_transformer_block_with_experimental_attention_variant_spec`` slices): a standalone input norm,
``AbsorbedMLASelfAttention`` (``experimental_attention_variant/absorbed_mla.py``) whose core attention is
``DSAttention`` holding a ``DSAIndexer`` (``dsa.py``), and a dense MLP (traced too, listed apart). Small widths
(hidden 512, 8 heads, q_lora 128, kv_lora 64, qk head 32, rope head 16, v head 32, indexer 4 heads x 32, top-k 16,
sequence 64, batch 1), tp = cp = 1, no SP, bf16, RMSNorm, q/kv norms on, no bias, dropout 0,
``dsa_indexer_rotate_activation=False`` (no ``fast_hadamard_transform``), ``apply_rope_fusion=False``,
``dsa_kernel_backend="none"``. Cases: indexer loss off (``dsa_indexer_loss_coeff=0``: the indexer runs under
``no_grad``), on with the sparse loss (0.01, ``dsa_indexer_use_sparse_loss``) and on with the dense loss.

How it measures
---------------
A ``TorchDispatchMode`` follows the storage of every tensor an ATen op returns during the forward pass
(``StorageWeakRef``, as ``megatron_activation_golden.py`` does) and notes the op, shape, dtype, the module that was
running (global module hooks) and the innermost Megatron-Core frame (file:line function). The layer input is made
inside the trace and dropped by the caller, and the layer output is left out (the next layer's input), so what
is alive when the forward returns is what the layer keeps for backward; a ``saved_tensors_hooks`` pair marks the
storages autograd packed (``S``; a storage alive but not packed is held as a ``ctx`` attribute or by a module).
Storages still alive after backward are caches (the RoPE table), not activations. Each storage is sorted into one of
megasolve's term names or a named extra (``classify``), and each term is compared with the formula at the same
sizes.

CPU stand-ins and what differs on a GPU
---------------------------------------
* Backend: Megatron-Core's ``LocalSpecProvider`` (torch norms, ``ColumnParallelLinear`` / ``RowParallelLinear``)
  plus ``linear()``, which the DSA spec asks for and the local backend lacks: a replicated linear standing in for
  ``TELinear(parallel_mode='duplicated')`` (``F.linear``: saves its input, as TE does for wgrad); it also replaces
  the ``TELinear`` name ``absorbed_mla.py`` compares its down projections against. Norms are torch's
  (``WrappedTorchNorm``): torch's RMSNorm upcasts and keeps an fp32 copy of its input, the fp32 normalized tensor
  and the fp32 rstd where Transformer Engine's keeps the bf16 input and the fp32 rstd: the ``cpu-norm`` rows.
* ``dsa_kernel_backend="none"`` runs DSA's PyTorch path: ``fused_qk_topk_naive`` (indexer),
  ``_unfused_absorbed_dsa_fn`` (dense ``[b, n, s, s]`` scores, masked softmax) and, with the indexer loss,
  ``FusedDSAIndexerLoss`` (its naive forward / backward). The fused backends (``tilelang``, ``cudnn``: CUDA only)
  keep other tensors; the ``naive`` rows are those the fused kernels replace (see the report printed at the end).
* CUDA names: the shims of ``megatron_activation_golden.py`` (``install_cpu_shims``: ``device="cuda"`` -> CPU,
  inert streams, the RNG tracker's ``fork`` a no-op), the triton stand-in of ``megatron_param_golden.py``, a fake
  process group of one rank.

How to run (CPU only, seconds), in a virtual environment with torch, pyyaml and megatron-core (or a Megatron-LM
checkout on ``PYTHONPATH`` ahead of site-packages; DSA's ``AbsorbedMLASelfAttention`` needs core >= 0.19)::

    PYTHONPATH=MEGATRON_LM_CHECKOUT VENV/bin/python benchmarks/megatron_dsa_activation_trace.py
    VENV/bin/python benchmarks/megatron_dsa_activation_trace.py --only loss-off --json /dev/stdout

megasolve itself is imported from this checkout (no installation needed: the script maps the ``megasolve``
package onto the repository root, as ``pyproject.toml``'s ``package-dir`` does).

Traced with Megatron-LM main @d98e8a6 (core 0.20.0 pre-release) and torch 2.13.0+cpu.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import types
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

SIZES = dict(hidden=512, ffn=1024, heads=8, q_lora=128, kv_lora=64, qk=32, rope=16, v=32, idx_heads=4, idx_dim=32,
             topk=16, seq=64, batch=1)
CASES = {  # name -> (dsa_indexer_loss_coeff, dsa_indexer_use_sparse_loss)
    "loss-off": (0.0, False),
    "loss-on-sparse": (0.01, True),
    "loss-on-dense": (0.01, False),
}


def import_megasolve():
    """``megasolve`` from this checkout: the package maps onto the repository root (``pyproject.toml``)."""
    try:
        import megasolve.cost.memory  # noqa: F401  (installed)
    except ImportError:
        pkg = types.ModuleType("megasolve")
        pkg.__path__ = [str(REPO)]
        sys.modules["megasolve"] = pkg
    from megasolve.cost import memory
    from megasolve.models.layout import Workload
    from megasolve.models.spec import DSASpec, MLASpec, ModelSpec
    return memory, Workload, ModelSpec, MLASpec, DSASpec


def formula_terms(sz: dict, coeff: float, sparse: bool) -> dict:
    """megasolve's attention terms at the traced sizes (``attention_activation_terms``, MLA + DSA branch)."""
    memory, Workload, ModelSpec, MLASpec, DSASpec = import_megasolve()
    spec = ModelSpec(name="dsa-trace", num_layers=1, hidden_size=sz["hidden"], ffn_hidden_size=sz["ffn"],
                     num_attention_heads=sz["heads"], num_query_groups=sz["heads"], vocab_size=1024,
                     qk_layernorm=True,
                     mla=MLASpec(q_lora_rank=sz["q_lora"], kv_lora_rank=sz["kv_lora"], qk_head_dim=sz["qk"],
                                 qk_pos_emb_head_dim=sz["rope"], v_head_dim=sz["v"]),
                     dsa=DSASpec(n_heads=sz["idx_heads"], head_dim=sz["idx_dim"], topk=sz["topk"], loss_coeff=coeff,
                                 sparse_loss=sparse))
    shape = memory.ActivationShape(tp=1, cp=1, mbs=sz["batch"], sequence_parallel=False)
    return memory.attention_activation_terms(spec, Workload(seq_length=sz["seq"]), shape)


# ---------------------------------------------------------------------------- CPU stand-ins
def install_backend(torch):
    """A local backend with ``linear()`` (the TELinear 'duplicated' stand-in), see the docstring."""
    from megatron.core.models import backends
    from megatron.core.transformer.experimental_attention_variant import absorbed_mla

    class DuplicatedLinear(torch.nn.Module):
        """Stand-in for ``TELinear(parallel_mode='duplicated')``: the full weight on every TP rank; returns
        ``(output, None)`` like Megatron's linears."""

        def __init__(self, input_size, output_size, *, config, bias=False, parallel_mode=None,
                     skip_weight_param_allocation=False, init_method=None, **kwargs):
            super().__init__()
            assert parallel_mode == "duplicated", f"TELinear stand-in asked for parallel_mode={parallel_mode!r}"
            assert not bias and not skip_weight_param_allocation
            self.weight = torch.nn.Parameter(torch.empty(output_size, input_size, dtype=config.params_dtype))
            torch.nn.init.normal_(self.weight, std=0.02)

        def forward(self, x):
            return torch.nn.functional.linear(x, self.weight), None

    class LocalWithLinear(backends.LocalSpecProvider):
        def linear(self):
            return DuplicatedLinear

    absorbed_mla.TELinear = DuplicatedLinear  # `linear_*_down_proj in [TELinear]` -> parallel_mode='duplicated'
    return LocalWithLinear()


def make_config(torch, sz: dict, coeff: float, sparse: bool):
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    return MLATransformerConfig(
        num_layers=1, hidden_size=sz["hidden"], ffn_hidden_size=sz["ffn"], num_attention_heads=sz["heads"],
        num_query_groups=sz["heads"], kv_channels=sz["qk"], normalization="RMSNorm", qk_layernorm=True,
        gated_linear_unit=True, activation_func=torch.nn.functional.silu, add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, use_cpu_initialization=True, perform_initialization=True,
        bias_dropout_fusion=False, masked_softmax_fusion=False, apply_rope_fusion=False, persist_layer_norm=False,
        bias_activation_fusion=False, gradient_accumulation_fusion=False, transformer_impl="local",
        multi_latent_attention=True, q_lora_rank=sz["q_lora"], kv_lora_rank=sz["kv_lora"], qk_head_dim=sz["qk"],
        qk_pos_emb_head_dim=sz["rope"], v_head_dim=sz["v"], rope_type="rope",
        experimental_attention_variant="dsa", dsa_indexer_n_heads=sz["idx_heads"],
        dsa_indexer_head_dim=sz["idx_dim"], dsa_indexer_topk=sz["topk"], dsa_indexer_loss_coeff=coeff,
        dsa_indexer_use_sparse_loss=sparse, dsa_indexer_rotate_activation=False, dsa_kernel_backend="none")


# ---------------------------------------------------------------------------- tracing
def make_tracker(torch):
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    def where() -> tuple[str, int, str]:
        f = sys._getframe(2)
        while f is not None:
            fn = f.f_code.co_filename.replace(os.sep, "/")
            if "/megatron/core/" in fn:
                return fn.split("/megatron/core/")[1], f.f_lineno, f.f_code.co_name
            f = f.f_back
        return "?", 0, "?"

    class Tracker(TorchDispatchMode):
        def __init__(self, pre: set, stack: list):
            super().__init__()
            self.pre, self.stack, self.refs, self.info = pre, stack, {}, {}

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                    s = t.untyped_storage()
                    key = s._cdata
                    if key in self.refs and self.refs[key][0].expired():  # address reused
                        del self.refs[key]
                    if key not in self.pre and key not in self.refs:
                        self.refs[key] = (StorageWeakRef(s), s.nbytes())
                        self.info[key] = dict(op=str(func).replace("aten.", "").split(".")[0], shape=list(t.shape),
                                              dtype=str(t.dtype).replace("torch.", ""),
                                              module=self.stack[-1] if self.stack else "", src=where())
            return out

        def alive(self) -> dict:
            return {k: dict(self.info[k], bytes=n) for k, (ref, n) in self.refs.items() if not ref.expired()}

    return Tracker


def classify(item: dict, sz: dict) -> tuple[str, str, str]:
    """(term, what, path) of one saved storage. ``term``: a megasolve term name, or ``extra:<name>`` for what no
    term covers, or ``mlp`` / ``persistent``. ``path``: ``shared`` (absorbed MLA and the indexer projections: the
    same on the fused path), ``naive`` (the PyTorch DSA path: the fused kernels keep other tensors), ``cpu-norm``
    (torch's norm where TE's keeps less)."""
    mod, (file, _line, fn), op, dt, shape = item["module"], item["src"], item["op"], item["dtype"], item["shape"]
    if item.get("persistent"):
        return "persistent", "cache (alive after backward)", "shared"
    if item.get("layer_input"):
        return "attn_norm_input", "layer input (bf16)", "shared"
    if mod == "mlp" or mod.startswith(("mlp.", "pre_mlp_layernorm")):
        return "mlp", "MLP half", "shared"
    if mod == "input_layernorm":
        if dt == "bfloat16":
            return "attn_norm_output", "input norm output, kept by the q/kv down projections (and indexer)", "shared"
        return "attn_norm_input", "torch RMSNorm: fp32 input copy / fp32 normalized / fp32 rstd", "cpu-norm"
    if mod in ("self_attention.q_layernorm", "self_attention.kv_layernorm"):
        which = mod.split(".")[1][:-len("_layernorm")]
        if dt == "bfloat16":
            return "mla_latents", f"{which} norm output (bf16)", "shared"
        return "mla_latents", f"{which} norm: torch RMSNorm fp32 input copy / normalized / rstd", "cpu-norm"
    if mod in ("self_attention.linear_q_down_proj", "self_attention.linear_kv_down_proj"):
        return "mla_latents", mod.split(".")[1] + " output", "shared"
    if mod == "self_attention.linear_q_up_proj":
        return "mla_up", "q = linear_q_up_proj output [T, n*(qk+r)] (q_no_pe view kept by the absorption einsum)", \
            "shared"
    if fn == "qkv_up_proj_and_rope_apply" and op == "cat":
        if shape[-2] == 1:
            return "mla_up", "latent key [T, 1, kv_lora+r]", "shared"
        return "mla_up", ("absorbed query [T, n, kv_lora+r] (naive path: kept only by FusedDSAIndexerLoss; the fused "
                          "kernels always keep it)"), "shared"
    if file.endswith("rope_utils.py"):
        if mod.startswith("self_attention.core_attention"):
            return "dsa_indexer", "indexer RoPE cos/sin (bf16)", "shared"
        return "extra:rope_cos_sin", "MLA RoPE cos/sin (bf16) kept by the rotary multiply", "shared"
    if mod.startswith("self_attention.core_attention.indexer") or fn in ("_apply_rope", "forward_before_topk"):
        if op == "native_layer_norm":
            return "dsa_indexer", "indexer k_norm mean/rstd", "shared"
        if op == "mm":
            return "dsa_indexer", "indexer k_norm input (linear_wk output)", "shared"
        if op == "cat":
            return "dsa_indexer", "indexer q" if shape[-2] > 1 else "indexer k", "shared"
        if op == "mul":
            return "dsa_indexer", "indexer weights", "shared"
        return "dsa_indexer", "indexer other", "shared"
    if fn == "fused_qk_topk_naive":
        return "dsa_topk", "top-k indices (int64, saved by FusedDSAIndexerLoss)", "naive"
    if fn == "_unfused_absorbed_dsa_fn":
        if op == "clone":
            return "core_output", "latent output [T, n, kv_lora] (kept by the V-absorption einsum)", "shared"
        if dt == "float32":
            return "extra:naive_fp32_qk", "fp32 copies of query / key for the dense score matmul", "naive"
        return "extra:naive_scores", "bf16 probabilities [b, n, s, s] (kept by the context matmul)", "naive"
    if fn == "masked_softmax":
        return "extra:naive_scores", "masked softmax state [b, n, s, s] (fp32, bool) and row stats", "naive"
    if fn == "_run_sparse_attention" and op == "clone":
        return "core_output", "O = V-up output [T, n, v] (kept by linear_proj)", "shared"
    if fn == "forward" and file.endswith("dsa.py") and op == "clone" and len(shape) == 3:
        return "extra:up_v_weight_copy", "contiguous copy of the V-up weight [n, v, kv_lora] (DSAttention.forward)", \
            "shared"
    if file.endswith(("dsa_indexer_loss.py",)) or fn == "save_loss_to_tracker" or shape == []:
        return "extra:indexer_loss_scalars", "indexer loss scalars", "naive"
    if file.endswith("dsa_masking.py"):
        return "extra:mask", "DSA mask bounds", "naive"
    return "extra:unclassified", f"{mod} {fn}", "?"


def trace_case(torch, Tracker, backend, sz: dict, coeff: float, sparse: bool) -> list[dict]:
    from megatron.core.models.gpt import experimental_attention_variant_module_specs as eav
    from megatron.core.transformer.spec_utils import build_module

    torch.manual_seed(0)
    config = make_config(torch, sz, coeff, sparse)
    spec = eav.get_transformer_layer_with_experimental_attention_variant_spec(config, backend=backend)[0]
    layer = build_module(spec, config=config, layer_number=1).bfloat16()  # as Float16Module casts the model
    layer.train()
    names = {id(m): n for n, m in layer.named_modules()}
    stack: list[str] = []

    def enter(module, args):  # global module hooks: the module running when a storage is made
        stack.append(names.get(id(module), type(module).__name__))

    def leave(module, args, output):
        stack.pop()

    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(enter),
             torch.nn.modules.module.register_module_forward_hook(leave)]
    pre = {p.untyped_storage()._cdata for p in layer.parameters()} | {b.untyped_storage()._cdata
                                                                      for b in layer.buffers()}
    s, b, h = sz["seq"], sz["batch"], sz["hidden"]
    x0 = torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True)
    pre.add(x0.untyped_storage()._cdata)
    packed: set = set()

    def pack(t):
        packed.add(t.untyped_storage()._cdata)
        return t

    tracker = Tracker(pre, stack)
    try:
        with tracker, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            x = x0 * 1  # the layer input, made here so the trace sees whether anything keeps it
            x_key = x.untyped_storage()._cdata
            out, _ = layer(x, attention_mask=None)
            del x
            out_key = out.untyped_storage()._cdata
            alive = tracker.alive()
            loss = out.float().sum()
            del out
            loss.backward()
            after = tracker.alive()
    finally:
        for hk in hooks:
            hk.remove()
    items = []
    for key, item in alive.items():
        if key == out_key:
            continue  # the next layer's input
        item = dict(item, saved=key in packed, persistent=key in after, layer_input=key == x_key)
        item["term"], item["what"], item["path"] = classify(item, sz)
        items.append(item)
    return sorted(items, key=lambda it: (it["term"], -it["bytes"]))


# ---------------------------------------------------------------------------- report
TERMS = ("attn_norm_input", "attn_norm_output", "mla_latents", "mla_up", "core_output", "softmax_stats", "dsa_topk",
         "dsa_indexer")


def report(name: str, items: list[dict], formula: dict, out=sys.stdout) -> dict:
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"\n=== {name}: storages alive after forward (S = packed by autograd) ===")
    p(f"{'term':22s} {'path':8s} S {'bytes':>8s}  {'op':18s} {'shape':18s} {'dtype':9s} where / what")
    for it in items:
        file, line, fn = it["src"]
        p(f"{it['term']:22s} {it['path']:8s} {'S' if it['saved'] else '-'} {it['bytes']:8d}  {it['op']:18s} "
          f"{str(it['shape']):18s} {it['dtype']:9s} {file}:{line} {fn}: {it['what']}")
    measured: dict[str, dict[str, int]] = {}
    for it in items:
        measured.setdefault(it["term"], {}).setdefault(it["path"], 0)
        measured[it["term"]][it["path"]] += it["bytes"]
    p(f"\n--- {name}: per term, bytes (measured split by path: shared = also on the fused path) ---")
    p(f"{'term':28s} {'formula':>9s} {'measured':>9s} {'shared':>9s} {'naive':>9s} {'cpu-norm':>9s}")
    rows = {}
    for term in list(TERMS) + sorted(t for t in measured if t not in TERMS):
        m = measured.get(term, {})
        f = formula.get(term)
        total = sum(m.values())
        rows[term] = dict(formula=f, measured=total, **m)
        fs = "-" if f is None else f"{f:9.0f}"
        p(f"{term:28s} {fs:>9s} {total:9d} {m.get('shared', 0):9d} {m.get('naive', 0):9d} {m.get('cpu-norm', 0):9d}")
    attn = [t for t in rows if t not in ("mlp", "persistent")]
    p(f"{'attention block total':28s} {sum(v for k, v in formula.items()):9.0f} "
      f"{sum(rows[t]['measured'] for t in attn):9d} {sum(rows[t].get('shared', 0) for t in attn):9d} "
      f"{sum(rows[t].get('naive', 0) for t in attn):9d} {sum(rows[t].get('cpu-norm', 0) for t in attn):9d}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="substring of the case names (" + ", ".join(CASES) + ")")
    ap.add_argument("--seq", type=int, default=SIZES["seq"])
    ap.add_argument("--batch", type=int, default=SIZES["batch"])
    ap.add_argument("--json", default=None, help="also write the storages and per-term table as JSON here")
    args = ap.parse_args(argv)
    sz = dict(SIZES, seq=args.seq, batch=args.batch)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import megatron_param_golden as param_golden  # the triton stand-in

    param_golden.install_triton_stub_if_missing()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import megatron_activation_golden as golden  # the CPU shims

    golden.install_cpu_shims(torch)
    import megatron.core
    from megatron.core import parallel_state as ps
    from megatron.core import tensor_parallel

    backend = install_backend(torch)
    Tracker = make_tracker(torch)
    print(f"megatron-core {megatron.core.__version__} ({os.path.dirname(megatron.core.__file__)}), "
          f"torch {torch.__version__}; sizes {sz}")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    results = {}
    try:
        ps.initialize_model_parallel(tensor_model_parallel_size=1, create_gloo_process_groups=False)
        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()
        for name, (coeff, sparse) in CASES.items():
            if args.only and args.only not in name:
                continue
            items = trace_case(torch, Tracker, backend, sz, coeff, sparse)
            formula = formula_terms(sz, coeff, sparse)
            rows = report(name, items, formula)
            results[name] = dict(loss_coeff=coeff, sparse_loss=sparse, terms=rows,
                                 storages=[{k: v for k, v in it.items() if k != "layer_input"} for it in items])
    finally:
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    if args.json:
        text = json.dumps(dict(generator="benchmarks/megatron_dsa_activation_trace.py", sizes=sz,
                               megatron_core=megatron.core.__version__, torch=torch.__version__, cases=results),
                          indent=1)
        if args.json == "/dev/stdout":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
