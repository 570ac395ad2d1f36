#!/usr/bin/env python3
"""Golden per-rank parameter counts of Megatron-Core ``GPTModel`` with gated-DeltaNet layers.

Companion of ``megatron_param_golden.py`` (same fake process group, same meta-device CPU shims,
same output format, ``model_class: GPTModel-gated_delta_net``). It builds
``megatron.core.models.gpt.GPTModel`` the way Megatron-LM's ``gpt_builders.py`` does with
``--experimental-attention-variant gated_delta_net``: the decoder block spec comes from
``models/gpt/experimental_attention_variant_module_specs.py``
``get_transformer_block_with_experimental_attention_variant_spec(config, vp_stage)``, which lays out
Qwen3-Next-style layers: a gated DeltaNet mixer (``ssm/gated_delta_net.py``) on every layer except
each ``linear_attention_freq``-th one, which is softmax attention (here with ``attention_output_gate``
and QK-norm), and on every layer the MLP of ``moe_layer_freq`` (here MoE with a gated shared expert, or
a dense MLP). Each distinct (pp, tp, ep, etp) rank of a layout is built on the meta device and its
``sum(p.numel() for p in chunk.parameters())`` recorded; the cases are merged into
``tests/data/megatron_param_golden.json``, where ``tests/test_megatron_golden.py`` checks megasolve's
``stage_params`` against them.

Model: Qwen3-Next-80B-A3B's widths (hidden 2048, 16 heads, 2 query groups, head dim 256, linear
attention 16 key / 32 value heads of 128, conv kernel 4, expert and shared-expert ffn 512, vocab
151,936) cut to 8 layers (gated DeltaNet on layers 1-3 and 5-7, gated attention on 4 and 8) and 8
experts; a dense-MLP variant (Qwen3.5 dense style, ffn 5120) and a diagnostic LayerNorm + QKV-bias
variant (checks that the DeltaNet output norm follows the normalization and that the output gate's
rows carry QKV bias too).

CPU stand-ins (none changes a parameter count):

* ``fla`` (flash-linear-attention) is not installed on a CPU host (Triton GPU kernels).
  ``ssm/gated_delta_net.py`` imports ``fla.modules.l2norm.l2norm`` and
  ``fla.ops.gated_delta_rule.chunk_gated_delta_rule`` (L39-47) and refuses to build without them
  (``HAVE_FLA``, L103-106); both are functions called only in ``forward``, they own no parameters.
  Stand-in modules with those two names (raising if called) are registered before Megatron-Core
  is imported. ``causal_conv1d`` is optional (forward only) and is not faked.
* The block spec asserts ``transformer_impl == "transformer_engine"`` and asks
  ``TESpecProvider`` for its modules (``_get_backend_spec_provider``, L353-369; the softmax-attention
  layers come from ``gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec``, L388-390, i.e.
  ``TESpecProvider()`` again). Transformer Engine cannot be imported without CUDA, so both lookups are pointed at a local
  backend that places parameters as TE does: ``fuse_layernorm_and_linear()`` is True and the fused
  norm + column-parallel linear (``TELayerNormColumnParallelLinear``: the DeltaNet ``in_proj``, the
  attention ``linear_qkv`` and the dense MLP ``linear_fc1``) is a norm weight (+ bias for LayerNorm)
  of the input size, replicated, plus a ``ColumnParallelLinear``; ``TENorm`` (final norm, QK-norms,
  the MoE pre-MLP norm, the DeltaNet ``out_norm``) is torch's norm (one weight, + bias for LayerNorm);
  routed experts are ``SequentialMLP`` (same shapes as ``TEGroupedMLP``); core attention is the local
  ``DotProductAttention`` (no parameters, as ``TEDotProductAttention`` with the vanilla softmax).
  The spec functions themselves are Megatron-Core's, unchanged.
* The shims of ``megatron_param_golden.py`` (``torch.cuda.current_device`` -> meta: the DeltaNet's
  ``conv1d``, ``dt_bias`` and ``A_log`` are created on it, ``gated_delta_net.py`` L166-200).

Result: megasolve's ``stage_params`` equals every rank of every case. The LayerNorm + QKV-bias case
first showed megasolve 2,816 short on tp4 (6 DeltaNet layers x 128: the LayerNorm bias of ``out_norm``,
a ``backend.layer_norm`` of the model's normalization; 2 attention layers x 4096 / 4: the QKV bias over
the output-gate rows, ``attention.py`` L1264-1273); ``models/params.py`` now counts both.

How to run (CPU only, a few seconds), in a virtual environment with torch and megatron-core
installed::

    VENV/bin/python benchmarks/megatron_gdn_param_golden.py          # merges into the JSON
    VENV/bin/python benchmarks/megatron_gdn_param_golden.py --out /dev/stdout --only tp1

Versions used for the committed cases: megatron-core 0.16.1, torch 2.14.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
import types
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_param_golden as gpt  # noqa: E402  (helpers: shims, padding, counting, world size)

MODEL_CLASS = "GPTModel-gated_delta_net"

QWEN3_NEXT_80B_A3B = dict(
    hidden_size=2048, ffn_hidden_size=5120, num_attention_heads=16, num_query_groups=2, kv_channels=256,
    vocab_size=151936, max_position_embeddings=262144, qk_layernorm=True, rotary_percent=0.25,
    num_moe_experts=8, moe_router_topk=2, moe_ffn_hidden_size=512, moe_shared_expert_intermediate_size=512,
    moe_shared_expert_gate=True, experimental_attention_variant="gated_delta_net", linear_attention_freq=4,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
    linear_conv_kernel_dim=4, attention_output_gate=True,
)
DENSE = dict(num_moe_experts=None, moe_ffn_hidden_size=None, moe_shared_expert_intermediate_size=None,
             moe_shared_expert_gate=False)


def _case(name, base, layout, **over):
    model = {k: v for k, v in gpt.MODEL_DEFAULTS.items()
             if k not in ("multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
                          "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers", "window_size",
                          "window_attn_skip_freq", "softmax_type")}
    model.update(base)
    model.update(over)
    if model["num_moe_experts"]:
        model["moe_layer_freq"] = [1] * model["num_layers"]
    else:
        for key in ("num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
                    "moe_shared_expert_intermediate_size", "moe_shared_expert_gate", "moe_layer_freq"):
            model.pop(key, None)
    lay = dict(tp=1, pp=1, vpp=1, ep=1, etp=1, first_stage_layers=None, last_stage_layers=None)
    lay.update(layout)
    return dict(name=name, model=model, layout=lay)


CASES = [
    _case("qwen3-next-80b-a3b-gdn-L8-E8-tp1-pp1", QWEN3_NEXT_80B_A3B, dict(), num_layers=8),
    _case("qwen3-next-80b-a3b-gdn-L8-E8-tp2-pp1", QWEN3_NEXT_80B_A3B, dict(tp=2), num_layers=8),
    _case("qwen3-next-80b-a3b-gdn-L8-E8-tp4-pp2", QWEN3_NEXT_80B_A3B, dict(tp=4, pp=2), num_layers=8),
    _case("qwen3-next-80b-a3b-gdn-L8-E8-tp2-ep4-etp1", QWEN3_NEXT_80B_A3B, dict(tp=2, ep=4, etp=1), num_layers=8),
    _case("qwen3-next-80b-a3b-gdn-L8-E8-tp2-pp2-vpp2-ep2-etp1", QWEN3_NEXT_80B_A3B,
          dict(tp=2, pp=2, vpp=2, ep=2, etp=1), num_layers=8),
    _case("qwen3-next-80b-a3b-gdn-L8-dense-tp2-pp2", QWEN3_NEXT_80B_A3B, dict(tp=2, pp=2), num_layers=8, **DENSE),
    _case("qwen3-next-80b-a3b-gdn-L8-dense-tp4-layernorm-qkvbias", QWEN3_NEXT_80B_A3B, dict(tp=4), num_layers=8,
          normalization="LayerNorm", add_qkv_bias=True, **DENSE),
]


def install_fla_stub() -> None:
    """Stand-ins for the two ``fla`` functions ``ssm/gated_delta_net.py`` imports (see the docstring)."""

    def _kernel(*args, **kwargs):
        raise RuntimeError("fla kernel stand-in: never called while building a model")

    names = ("fla", "fla.modules", "fla.modules.l2norm", "fla.ops", "fla.ops.gated_delta_rule")
    modules = {name: types.ModuleType(name) for name in names}
    sys.modules.update(modules)
    modules["fla.modules.l2norm"].l2norm = _kernel
    modules["fla.ops.gated_delta_rule"].chunk_gated_delta_rule = _kernel


def install_te_shaped_backend(torch) -> None:
    """Point the block spec's backend lookups at a local backend that places parameters as TE does."""
    from megatron.core.models import backends
    from megatron.core.models.gpt import experimental_attention_variant_module_specs as eav
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    class LayerNormColumnParallelLinear(ColumnParallelLinear):
        """Stand-in for TELayerNormColumnParallelLinear: a replicated norm over the input features
        (weight, + bias for LayerNorm) followed by a ColumnParallelLinear."""

        def __init__(self, input_size, output_size, *, config, **kwargs):
            super().__init__(input_size, output_size, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(torch.empty(input_size, dtype=config.params_dtype))
            self.layer_norm_bias = (torch.nn.Parameter(torch.empty(input_size, dtype=config.params_dtype))
                                    if config.normalization == "LayerNorm" else None)

    class TEShapedLocalSpecProvider(backends.LocalSpecProvider):
        def fuse_layernorm_and_linear(self) -> bool:
            return True

        def column_parallel_layer_norm_linear(self):
            return LayerNormColumnParallelLinear

        def layer_norm(self, rms_norm: bool = False, for_qk: bool = False):
            return WrappedTorchNorm  # TENorm: weight (+ bias for LayerNorm) of the normalised size

    eav._get_backend_spec_provider = lambda config: TEShapedLocalSpecProvider()
    gpt_layer_specs.TESpecProvider = TEShapedLocalSpecProvider


def make_config(model, layout, torch):
    from megatron.core.transformer.transformer_config import TransformerConfig

    kw = gpt.variant_config_kwargs(model, layout, torch, sequence_parallel=False)
    kw.update(linear_attention_freq=model["linear_attention_freq"],
              linear_conv_kernel_dim=model["linear_conv_kernel_dim"], linear_key_head_dim=model["linear_key_head_dim"],
              linear_value_head_dim=model["linear_value_head_dim"], linear_num_key_heads=model["linear_num_key_heads"],
              linear_num_value_heads=model["linear_num_value_heads"],
              attention_output_gate=model["attention_output_gate"])
    return TransformerConfig(**kw)


def build_rank(case, rank, world, torch, dist, ps, FakeStore, seen):
    """Build rank ``rank``'s model chunks (None if an equivalent rank was already built)."""
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import (
        get_transformer_block_with_experimental_attention_variant_spec,
    )
    from megatron.core.ssm.gated_delta_net import GatedDeltaNet

    model, layout = case["model"], case["layout"]
    with gpt.parallel_rank(rank, world, layout, dist, ps, FakeStore, seen) as coords:
        if coords is None:  # a pure data-parallel replica of a rank already built
            return None
        config = make_config(model, layout, torch)
        chunks = gpt.variant_chunks(
            torch, ps, config, model, layout,
            lambda vp: get_transformer_block_with_experimental_attention_variant_spec(config=config, vp_stage=vp),
            GatedDeltaNet, "gated_delta_net", rotary_percent=model["rotary_percent"])  # the DeltaNet mixers
        coords["chunks"] = chunks
        coords["params"] = sum(c["counts"]["total"] for c in chunks)
        return coords


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, os.pardir, "tests", "data",
                                                                    "megatron_param_golden.json")))
    ap.add_argument("--only", default=None, help="regex on case names")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.only is None or re.search(args.only, c["name"])]
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    gpt.install_triton_stub_if_missing()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    gpt.install_cpu_shims(torch)
    install_fla_stub()
    import megatron.core
    from megatron.core import parallel_state as ps

    install_te_shaped_backend(torch)
    gpt.build_rank = build_rank  # gpt.run_case loops over the ranks and summarises the stages with this builder

    results = []
    for case in cases:
        t = time.time()
        res = gpt.run_case(case, torch, dist, ps, FakeStore)
        res = dict(name=res.pop("name"), model_class=MODEL_CLASS, **res,
                   megatron_core_version=megatron.core.__version__)
        results.append(res)
        print(f"[{time.time() - t:5.2f}s] {case['name']}: "
              + ", ".join(f"pp{s['pp_rank']}={s['params']:,}" for s in res["stages"])
              + ("" if res["consistent_across_tp_ep_ranks"] else "  (INCONSISTENT)"), file=sys.stderr, flush=True)
    if args.out in ("-", "/dev/stdout"):
        sys.stdout.write(json.dumps(results, indent=1) + "\n")
        return 0
    gpt.merge_cases(args.out, results, MODEL_CLASS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
