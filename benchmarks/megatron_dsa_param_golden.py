#!/usr/bin/env python3
"""Golden per-rank parameter counts of Megatron-Core ``GPTModel`` with DeepSeek Sparse Attention (DSA).

Companion of ``megatron_param_golden.py`` (same fake process group, same meta-device CPU shims,
same output format, ``model_class: GPTModel-dsa``). It builds ``megatron.core.models.gpt.GPTModel``
the way Megatron-LM's ``gpt_builders.py`` does with ``--experimental-attention-variant dsa``: the
decoder block spec comes from ``models/gpt/experimental_attention_variant_module_specs.py``
``get_transformer_block_with_experimental_attention_variant_spec(config, vp_stage)``, which puts the
DSA attention of ``get_dsa_module_spec_for_backend`` on every layer (MLA whose core attention is
``DSAttention`` holding a ``DSAIndexer``, ``transformer/experimental_attention_variant/dsa.py``) and
the MLP of ``moe_layer_freq`` (MoE with a shared expert, or a dense MLP). The MTP layer takes the
last decoder layer's spec from ``get_transformer_layer_with_experimental_attention_variant_spec``
(``gpt_builders.py`` since core 0.19), so it carries a DSA indexer too. Each distinct
(pp, tp, ep, etp) rank of a layout is built on the meta device and its
``sum(p.numel() for p in chunk.parameters())`` recorded; the cases are merged into
``tests/data/megatron_param_golden.json``. ``breakdown.dsa_indexer`` is the subset of
``decoder_layers`` + ``mtp`` held by the ``DSAIndexer`` modules.

Model: DeepSeek-V3.2's widths (hidden 7168, 128 heads, q_lora 1536, kv_lora 512, qk head 128, rope
head 64, v head 128, indexer 64 heads of 128, top-k 2048, dense ffn 18432, expert and shared-expert
ffn 2048, vocab 129,280, untied) cut to 4 layers (layer 1 dense, 2-4 MoE) and 8 experts, with and
without one MTP layer; a variant without q/kv norms; and, where the library has it (core >= 0.19),
IndexShare (``dsa_indexer_topk_freq`` 2: layers 2 and 4 reuse the top-k of layers 1 and 3 and build
no indexer, ``DSAttention.__init__``).

What one DSA attention layer holds (all of it checked against the build, ``--show-attention``):
MLA's ``linear_q_down_proj`` (h x q_lora) and ``linear_kv_down_proj`` (h x (kv_lora + rope)),
replicated (``TELinear`` with ``parallel_mode='duplicated'``); the q/kv norms (q_lora, kv_lora;
replicated); ``linear_q_up_proj``, ``linear_kv_up_proj`` (column-parallel) and ``linear_proj``
(row-parallel), split over TP; and the indexer, all replicated over TP: ``linear_wq_b``
(q_lora x n_i*d_i), ``linear_wk`` (h x d_i), ``linear_weights_proj`` (h x n_i) and ``k_norm``, a
LayerNorm whatever the model's normalization (weight and bias of d_i).

Versions. megatron-core 0.16 ships the DSA modules and ``get_dsa_module_spec_for_backend`` but its
``get_experimental_attention_variant_module_spec`` only knows ``gated_delta_net`` (``ValueError`` for
``dsa``), and its DSA spec lacks the ``fuse_input_layernorm`` metainfo the block spec reads: Megatron-LM
0.16 cannot build a DSA model. On such a version the script backports the two lines core 0.18 added
(``install_dsa_dispatch_backport``: dispatch ``dsa`` to the library's own
``get_dsa_module_spec_for_backend``, ``fuse_input_layernorm=False``); the modules themselves are the
library's. Their ``gpt_builders.py`` (0.16-0.18) would give the MTP layer the plain TE MLA layer spec
(no indexer); the script builds it the core >= 0.19 way on every version. Core >= 0.19 builds DSA
as ``AbsorbedMLASelfAttention`` with separate q/kv norms (not fused into the up projections,
``mla_qk_norm_config.py``); the parameter shapes are those of 0.16's ``MLASelfAttention`` with fused
norms, so the counts agree.

CPU stand-ins (none changes a parameter count):

* The block spec asserts ``transformer_impl == "transformer_engine"`` and asks ``TESpecProvider``
  for its modules; Transformer Engine cannot be imported without CUDA, so the lookups
  (``_get_backend_spec_provider``, ``gpt_layer_specs.TESpecProvider`` for the MTP block,
  ``mla_qk_norm_config.get_backend`` where it exists) point at a local backend that places
  parameters as TE does: ``linear()`` is a replicated linear standing in for
  ``TELinear(parallel_mode='duplicated')`` (the only mode DSA and MLA ask of it; it also replaces the
  ``TELinear`` name MLA compares its down projections against), ``TENorm`` is a norm with a weight
  (+ a bias when the config it is given says LayerNorm, as for the indexer's ``k_norm``) that accepts
  sequence parallelism, the fused norm + column-parallel linear (the dense MLP ``linear_fc1``; 0.16's
  q/kv up projections) is a replicated norm weight plus a ``ColumnParallelLinear``, routed experts are
  ``SequentialMLP`` (same shapes as ``TEGroupedMLP``). The spec functions are Megatron-Core's.
* ``sequence_parallel`` is on whenever tp > 1 (core >= 0.19's ``AbsorbedMLASelfAttention`` requires
  it; it changes no count). ``fast_hadamard_transform`` (the indexer's rotation, forward only) is
  optional and not needed.
* The shims of ``megatron_param_golden.py`` (``torch.cuda.current_device`` -> meta for the RoPE
  buffers of MLA and of the indexer; inert CUDA streams; a stand-in for the one triton module newer
  cores import), and ``Tensor.cuda()`` of a meta tensor returns it: core 0.16 calls it on the word
  embedding the last stage builds for MTP before the first/last-stage all-reduce
  (``language_module.py`` ``setup_embeddings_and_output_layer``; later cores skip that under
  ``init_model_with_meta_device``). Megatron-LM main's ``MultiTokenPredictionLayer`` asks
  ``is_inference_column_parallel_linear(eh_proj)``, an ``isinstance`` against TE-derived classes
  that are not classes without TE (``TypeError``); it answers False there.

How to run (CPU only, well under a minute), in a virtual environment with torch and megatron-core
installed (or a Megatron-LM checkout on ``PYTHONPATH``)::

    VENV/bin/python benchmarks/megatron_dsa_param_golden.py          # merges into the JSON
    VENV/bin/python benchmarks/megatron_dsa_param_golden.py --out /dev/stdout --only tp1
    VENV/bin/python benchmarks/megatron_dsa_param_golden.py --out /dev/stdout --only "tp1-pp1$|tp2-pp1$" \\
        --show-attention                                               # one DSA layer's tensors

Versions used: megatron-core 0.16.1 (pip wheel, with the backport) for every case it can build, and
Megatron-LM main @d98e8a6 (core 0.20.0 pre-release, source on ``PYTHONPATH``, ``--megatron-commit``)
for the IndexShare cases; torch 2.13.0+cpu, Python 3.11. Both give the same counts for every case
0.16.1 can build; each case records the ``megatron_core_version`` that built it.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import logging
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_param_golden as gpt  # noqa: E402  (helpers: shims, padding, counting, world size)

MODEL_CLASS = "GPTModel-dsa"

DEEPSEEK_V32 = dict(
    hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, num_query_groups=128, kv_channels=128,
    vocab_size=129280, max_position_embeddings=163840, qk_layernorm=True, num_moe_experts=8, moe_router_topk=8,
    moe_ffn_hidden_size=2048, moe_shared_expert_intermediate_size=2048, multi_latent_attention=True,
    q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128,
    experimental_attention_variant="dsa", dsa_indexer_n_heads=64, dsa_indexer_head_dim=128,
    dsa_indexer_topk=2048, dsa_indexer_topk_freq=1, dsa_indexer_skip_topk_offset=0,
)
INDEX_SHARE = dict(dsa_indexer_topk_freq=2, dsa_indexer_skip_topk_offset=1)  # layers 1, 3 (and MTP 1) compute


def _case(name, base, layout, **over):
    model = {k: v for k, v in gpt.MODEL_DEFAULTS.items()
             if k not in ("window_size", "window_attn_skip_freq", "softmax_type")}
    model.update(base)
    model.update(over)
    lay = dict(tp=1, pp=1, vpp=1, ep=1, etp=1, first_stage_layers=None, last_stage_layers=None)
    lay.update(layout)
    return dict(name=name, model=model, layout=lay)


L4 = dict(num_layers=4, moe_layer_freq=[0, 1, 1, 1])
CASES = [
    _case("deepseek-v3.2-dsa-L4-E8-tp1-pp1", DEEPSEEK_V32, dict(), **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-pp1", DEEPSEEK_V32, dict(tp=2), **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp4-pp2", DEEPSEEK_V32, dict(tp=4, pp=2), **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-ep4-etp1", DEEPSEEK_V32, dict(tp=2, ep=4, etp=1), **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-pp2-vpp2", DEEPSEEK_V32, dict(tp=2, pp=2, vpp=2), **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-ep4-etp1-mtp1", DEEPSEEK_V32, dict(tp=2, ep=4, etp=1), mtp_num_layers=1, **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp4-pp2-mtp1", DEEPSEEK_V32, dict(tp=4, pp=2), mtp_num_layers=1, **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-noqknorm", DEEPSEEK_V32, dict(tp=2), qk_layernorm=False, **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-indexshare-f2-mtp1", DEEPSEEK_V32, dict(tp=2), mtp_num_layers=1,
          **INDEX_SHARE, **L4),
    _case("deepseek-v3.2-dsa-L4-E8-tp2-pp2-indexshare-f2-mtp1", DEEPSEEK_V32, dict(tp=2, pp=2), mtp_num_layers=1,
          **INDEX_SHARE, **L4),
]

SHOW_ATTENTION = False  # --show-attention: print layer 1's attention tensors of each case's first rank


class CaseUnsupported(Exception):
    """The installed Megatron-Core lacks a configuration field the case needs."""


def install_dsa_dispatch_backport() -> bool:
    """Core 0.16/0.17: route ``dsa`` to the library's ``get_dsa_module_spec_for_backend`` (as core 0.18 does).
    Returns whether the backport was needed."""
    from megatron.core.models.gpt import experimental_attention_variant_module_specs as eav

    if '"dsa"' in inspect.getsource(eav.get_experimental_attention_variant_module_spec):
        return False
    original = eav.get_experimental_attention_variant_module_spec

    def get_experimental_attention_variant_module_spec(config, backend=None):
        if config.experimental_attention_variant != "dsa":
            return original(config=config, backend=backend)
        if backend is None:
            backend = eav._get_backend_spec_provider(config=config)
        spec = eav.get_dsa_module_spec_for_backend(config=config, backend=backend)
        spec.metainfo.setdefault("fuse_input_layernorm", False)  # MLA: a separate input norm
        return spec

    eav.get_experimental_attention_variant_module_spec = get_experimental_attention_variant_module_spec
    return True


def install_te_shaped_backend(torch) -> None:
    """Point every backend lookup of the DSA block, MLA and MTP specs at a local backend that places
    parameters as TE does (see the docstring)."""
    import importlib

    from megatron.core.models import backends
    from megatron.core.models.gpt import experimental_attention_variant_module_specs as eav
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    class DuplicatedLinear(torch.nn.Module):
        """Stand-in for TELinear(parallel_mode='duplicated'): the full (out x in) weight (+ bias) on every
        TP rank."""

        def __init__(self, input_size, output_size, *, config, bias=False, parallel_mode=None,
                     skip_weight_param_allocation=False, **kwargs):
            super().__init__()
            assert parallel_mode == "duplicated", f"TELinear stand-in asked for parallel_mode={parallel_mode!r}"
            assert not skip_weight_param_allocation
            self.weight = torch.nn.Parameter(torch.empty(output_size, input_size, dtype=config.params_dtype))
            self.bias = torch.nn.Parameter(torch.empty(output_size, dtype=config.params_dtype)) if bias else None

    class Norm(torch.nn.Module):
        """Stand-in for TENorm: weight (+ bias when the given config says LayerNorm) of the normalised size;
        sequence parallelism allowed."""

        def __init__(self, config, hidden_size, eps=1e-5, **kwargs):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(hidden_size, dtype=config.params_dtype))
            self.bias = (torch.nn.Parameter(torch.empty(hidden_size, dtype=config.params_dtype))
                         if config.normalization == "LayerNorm" else None)

    class LayerNormColumnParallelLinear(ColumnParallelLinear):
        """Stand-in for TELayerNormColumnParallelLinear: a replicated norm over the input features
        (weight, + bias for LayerNorm) followed by a ColumnParallelLinear."""

        def __init__(self, input_size, output_size, *, config, **kwargs):
            super().__init__(input_size, output_size, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(torch.empty(input_size, dtype=config.params_dtype))
            self.layer_norm_bias = (torch.nn.Parameter(torch.empty(input_size, dtype=config.params_dtype))
                                    if config.normalization == "LayerNorm" else None)

    class TEShapedLocalSpecProvider(backends.LocalSpecProvider):
        def linear(self):
            return DuplicatedLinear

        def fuse_layernorm_and_linear(self) -> bool:
            return True

        def column_parallel_layer_norm_linear(self):
            return LayerNormColumnParallelLinear

        def layer_norm(self, rms_norm: bool = False, for_qk: bool = False, **kwargs):
            return Norm

    eav._get_backend_spec_provider = lambda config: TEShapedLocalSpecProvider()
    gpt_layer_specs.TESpecProvider = TEShapedLocalSpecProvider  # the MTP block spec (use_transformer_engine)
    for name in ("megatron.core.transformer.multi_latent_attention",
                 "megatron.core.transformer.experimental_attention_variant.absorbed_mla"):
        with contextlib.suppress(ImportError):  # absorbed_mla: core >= 0.19
            importlib.import_module(name).TELinear = DuplicatedLinear  # `linear_*_down_proj in [TELinear]`
    from megatron.core.transformer import multi_token_prediction as mtp_mod
    if hasattr(mtp_mod, "is_inference_column_parallel_linear"):  # newest cores, see the docstring
        _is_inference_linear = mtp_mod.is_inference_column_parallel_linear

        def is_inference_column_parallel_linear(module) -> bool:
            try:
                return _is_inference_linear(module)
            except TypeError:  # no TE: the inference linears are not classes, nothing is one
                return False

        mtp_mod.is_inference_column_parallel_linear = is_inference_column_parallel_linear
    with contextlib.suppress(ImportError):  # core >= 0.19: the q/kv-norm resolver asks the backend too
        from megatron.core.transformer import mla_qk_norm_config
        mla_qk_norm_config.get_backend = lambda transformer_impl: TEShapedLocalSpecProvider()


def make_config(model, layout, torch):
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    kw = gpt.variant_config_kwargs(model, layout, torch, sequence_parallel=layout["tp"] > 1)
    kw.update(mtp_num_layers=model["mtp_num_layers"],
              multi_latent_attention=True, q_lora_rank=model["q_lora_rank"], kv_lora_rank=model["kv_lora_rank"],
              qk_head_dim=model["qk_head_dim"], qk_pos_emb_head_dim=model["qk_pos_emb_head_dim"],
              v_head_dim=model["v_head_dim"], rope_type="rope",
              dsa_indexer_n_heads=model["dsa_indexer_n_heads"], dsa_indexer_head_dim=model["dsa_indexer_head_dim"],
              dsa_indexer_topk=model["dsa_indexer_topk"])
    fields = {f.name for f in dataclasses.fields(MLATransformerConfig)}
    for key, default in (("dsa_indexer_topk_freq", 1), ("dsa_indexer_skip_topk_offset", 0)):
        if model[key] != default:
            if key not in fields:
                raise CaseUnsupported(f"{key} (IndexShare) is not a TransformerConfig field in this megatron-core")
            kw[key] = model[key]
    return MLATransformerConfig(**kw)


def all_layer_specs(config):
    """Every decoder layer's spec, unsliced: ``gpt_builders.py`` takes the MTP layer's spec from the last one."""
    from megatron.core.models.gpt import experimental_attention_variant_module_specs as eav

    if hasattr(eav, "get_transformer_layer_with_experimental_attention_variant_spec"):  # core >= 0.19
        return eav.get_transformer_layer_with_experimental_attention_variant_spec(config=config)
    # older cores: the block spec of one stage holding every layer (same construction, no slicing)
    saved = eav.get_transformer_layer_offset, eav.get_num_layers_to_build, config.pipeline_model_parallel_layout
    eav.get_transformer_layer_offset = lambda *a, **k: 0
    eav.get_num_layers_to_build = lambda *a, **k: config.num_layers
    config.pipeline_model_parallel_layout = None
    try:
        return eav.get_transformer_block_with_experimental_attention_variant_spec(config=config).layer_specs
    finally:
        eav.get_transformer_layer_offset, eav.get_num_layers_to_build, layout = saved
        config.pipeline_model_parallel_layout = layout


def show_attention(case, coords, chunk) -> None:
    layers = list(chunk.decoder.layers)
    if not layers:
        return
    attn = layers[0].self_attention
    print(f"--- {case['name']} rank {coords['rank']} (tp_rank {coords['tp_rank']}): "
          f"decoder layer {layers[0].layer_number} {type(attn).__name__} / "
          f"{type(attn.core_attention).__name__}, {sum(p.numel() for p in attn.parameters()):,} params",
          file=sys.stderr)
    for name, p in attn.named_parameters():
        print(f"    {name:55s} {str(tuple(p.shape)):16s} {p.numel():>12,}", file=sys.stderr)


def build_rank(case, rank, world, torch, dist, ps, FakeStore, seen):
    """Build rank ``rank``'s model chunks (None if an equivalent rank was already built)."""
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import (
        get_transformer_block_with_experimental_attention_variant_spec,
    )
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec
    from megatron.core.transformer.experimental_attention_variant.dsa import DSAIndexer

    model, layout = case["model"], case["layout"]
    with gpt.parallel_rank(rank, world, layout, dist, ps, FakeStore, seen) as coords:
        if coords is None:  # a pure data-parallel replica of a rank already built
            return None
        config = make_config(model, layout, torch)

        def mtp(vp):
            return get_gpt_mtp_block_spec(config, all_layer_specs(config)[-1], use_transformer_engine=True,
                                          vp_stage=vp) if model["mtp_num_layers"] else None

        def inspect(vp, chunk):
            if SHOW_ATTENTION and len(seen) == 1 and vp in (None, 0):
                show_attention(case, coords, chunk)

        chunks = gpt.variant_chunks(
            torch, ps, config, model, layout,
            lambda vp: get_transformer_block_with_experimental_attention_variant_spec(config=config, vp_stage=vp),
            DSAIndexer, "dsa_indexer", mtp_spec=mtp, inspect=inspect)  # the DSA indexers (decoder and MTP)
        coords["chunks"] = chunks
        coords["params"] = sum(c["counts"]["total"] for c in chunks)
        return coords


def main(argv=None) -> int:
    global SHOW_ATTENTION
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, os.pardir, "tests", "data",
                                                                    "megatron_param_golden.json")))
    ap.add_argument("--only", default=None, help="regex on case names")
    ap.add_argument("--show-attention", action="store_true",
                    help="print the parameter tensors of the first DSA attention layer of each case's first rank")
    ap.add_argument("--megatron-commit", default=None,
                    help="recorded with each case as megatron_core_commit (for a Megatron-LM source checkout, whose "
                         "version string alone does not name the code)")
    args = ap.parse_args(argv)
    SHOW_ATTENTION = args.show_attention
    cases = [c for c in CASES if args.only is None or re.search(args.only, c["name"])]
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    gpt.install_triton_stub_if_missing()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    gpt.install_cpu_shims(torch)
    _tensor_cuda = torch.Tensor.cuda  # core 0.16 moves the MTP stage's embedding copy to CUDA (see the docstring)
    torch.Tensor.cuda = lambda self, *a, **k: self if self.is_meta else _tensor_cuda(self, *a, **k)
    import megatron.core
    from megatron.core import parallel_state as ps

    backported = install_dsa_dispatch_backport()
    install_te_shaped_backend(torch)
    gpt.build_rank = build_rank  # gpt.run_case loops over the ranks and summarises the stages with this builder
    print(f"megatron-core {megatron.core.__version__}"
          + (" (dsa spec dispatch backported)" if backported else ""), file=sys.stderr)

    results, skipped = [], []
    for case in cases:
        t = time.time()
        try:
            res = gpt.run_case(case, torch, dist, ps, FakeStore)
        except CaseUnsupported as exc:
            skipped.append(case["name"])
            print(f"SKIPPED {case['name']}: {exc}", file=sys.stderr, flush=True)
            if dist.is_initialized():
                dist.destroy_process_group()
            continue
        res = dict(name=res.pop("name"), model_class=MODEL_CLASS, **res,
                   megatron_core_version=megatron.core.__version__)
        if args.megatron_commit:
            res["megatron_core_commit"] = args.megatron_commit
        results.append(res)
        print(f"[{time.time() - t:5.2f}s] {case['name']}: "
              + ", ".join(f"pp{s['pp_rank']}={s['params']:,}" for s in res["stages"])
              + ("" if res["consistent_across_tp_ep_ranks"] else "  (INCONSISTENT)"), file=sys.stderr, flush=True)
    if args.out in ("-", "/dev/stdout"):
        sys.stdout.write(json.dumps(results, indent=1) + "\n")
        return 0
    if not os.path.exists(args.out):  # a fresh file of this generator's cases alone
        with open(args.out, "w") as f:
            f.write(json.dumps(dict(generator="benchmarks/megatron_dsa_param_golden.py", cases=[]), indent=1) + "\n")
    gpt.merge_cases(args.out, results, MODEL_CLASS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
