#!/usr/bin/env python3
"""Golden per-rank parameter counts of Megatron-Core's hybrid ``MambaModel`` (issue 15).

Companion of ``megatron_param_golden.py`` (same fake process group, same meta-device CPU shims,
same output format). It builds ``megatron.core.models.mamba.MambaModel`` for each distinct
(pp, tp) rank of a layout and merges the cases into ``tests/data/megatron_param_golden.json``
(``model_class: MambaModel``), where ``tests/test_megatron_golden.py`` checks megasolve's
``stage_params`` against them.

Spec: the TE spec (``models/mamba/mamba_layer_specs.py`` ``mamba_stack_spec``) cannot be imported
without CUDA, so the stack is laid out with local modules that allocate the same parameters: the
Mamba mixer's ``in_proj`` and the attention ``linear_qkv`` / MLP ``linear_fc1`` are
``TELayerNormColumnParallelLinear`` in the TE spec (a replicated norm of size h fused into the
column-parallel linear): here a norm + ``ColumnParallelLinear`` stand-in with the same weights;
``out_proj`` / ``linear_proj`` / ``linear_fc2`` are ``RowParallelLinear``; core attention owns no
parameters in either spec.

``mamba_ssm`` is not installed on a CPU host (its kernels need CUDA). ``mamba_mixer.py`` imports
three kernels (never called while building) and the gated ``RMSNorm`` from
``mamba_ssm.ops.triton.layernorm_gated``, whose only parameter is ``weight`` of size
``hidden_size`` (mamba_ssm ``layernorm_gated.py`` ``RMSNorm.__init__``: ``weight`` and
``register_parameter("bias", None)``). A stand-in module with exactly that parameter is
registered before Megatron-Core is imported. ``einops`` is required (``pip install einops``).

How to run (CPU only, a few seconds)::

    python3 -m venv --system-site-packages VENV && VENV/bin/pip install einops
    VENV/bin/python benchmarks/megatron_mamba_param_golden.py          # merges into the JSON

Versions used for the committed cases: megatron-core 0.16.1, torch 2.14.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import types
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import megatron_param_golden as gpt  # noqa: E402  (helpers: shims, padding, counting, world size)

NEMOTRON_H_8B = dict(
    hidden_size=4096, ffn_hidden_size=21504, num_attention_heads=32, num_query_groups=8, kv_channels=128,
    vocab_size=131072, max_position_embeddings=8192, swiglu=False, position_embedding_type="none",
    mamba_num_heads=128, mamba_head_dim=64, mamba_state_dim=128, mamba_num_groups=8,
)
PATTERN_8 = "M-M*-M-M"  # Nemotron-H's order of Mamba, MLP and attention layers, 8 layers


def _case(name, base, layout, **over):
    model = {k: v for k, v in gpt.MODEL_DEFAULTS.items()
             if k not in ("num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size",
                          "moe_shared_expert_intermediate_size", "moe_layer_freq", "multi_latent_attention",
                          "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
                          "window_size", "window_attn_skip_freq", "softmax_type")}
    model.update(base)
    model.update(over)
    model["num_layers"] = len(model["hybrid_override_pattern"])
    lay = dict(tp=1, pp=1, vpp=1, ep=1, etp=1, first_stage_layers=None, last_stage_layers=None)
    lay.update(layout)
    return dict(name=name, model=model, layout=lay)


CASES = [
    _case("nemotron-h-8b-hybrid-L8-tp1-pp1", NEMOTRON_H_8B, dict(), hybrid_override_pattern=PATTERN_8),
    _case("nemotron-h-8b-hybrid-L8-tp2-pp1", NEMOTRON_H_8B, dict(tp=2), hybrid_override_pattern=PATTERN_8),
    _case("nemotron-h-8b-hybrid-L8-tp8-pp2", NEMOTRON_H_8B, dict(tp=8, pp=2), hybrid_override_pattern=PATTERN_8),
    _case("nemotron-h-8b-hybrid-L8-tp4-pp1-tied", NEMOTRON_H_8B, dict(tp=4),
          hybrid_override_pattern=PATTERN_8, untie_embeddings_and_output_weights=False),
]


def install_mamba_ssm_stub(torch) -> None:
    """Stand-ins for the ``mamba_ssm`` names ``ssm/mamba_mixer.py`` imports (see the docstring)."""

    class RMSNorm(torch.nn.Module):
        def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True, device=None,
                     dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(hidden_size, device=device, dtype=dtype))
            self.register_parameter("bias", None)

    def _kernel(*args, **kwargs):
        raise RuntimeError("mamba_ssm kernel stand-in: never called while building a model")

    modules = {}
    for name in ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton", "mamba_ssm.ops.triton.layernorm_gated",
                 "mamba_ssm.ops.triton.selective_state_update", "mamba_ssm.ops.triton.ssd_combined"):
        modules[name] = sys.modules[name] = types.ModuleType(name)
    modules["mamba_ssm.ops.triton.layernorm_gated"].RMSNorm = RMSNorm
    modules["mamba_ssm.ops.triton.selective_state_update"].selective_state_update = _kernel
    modules["mamba_ssm.ops.triton.ssd_combined"].mamba_chunk_scan_combined = _kernel
    modules["mamba_ssm.ops.triton.ssd_combined"].mamba_split_conv1d_scan_combined = _kernel


def local_stack_spec(torch):
    from megatron.core.ssm.mamba_block import MambaStack, MambaStackSubmodules
    from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
    from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
    from megatron.core.ssm.mlp_layer import MLPLayer
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.attention import SelfAttention, SelfAttentionSubmodules
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_layer import TransformerLayer, TransformerLayerSubmodules

    class LayerNormColumnParallelLinear(ColumnParallelLinear):
        """Stand-in for TELayerNormColumnParallelLinear: replicated RMSNorm weight of the input size."""

        def __init__(self, input_size, output_size, *, config, **kwargs):
            super().__init__(input_size, output_size, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(torch.empty(input_size, dtype=config.params_dtype))

    class CoreAttentionStandIn(torch.nn.Module):
        """TEDotProductAttention with softmax_type='vanilla' owns no parameters."""

        def __init__(self, *args, **kwargs):
            super().__init__()

    return ModuleSpec(module=MambaStack, submodules=MambaStackSubmodules(
        mamba_layer=ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
            mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(
                in_proj=LayerNormColumnParallelLinear, out_proj=RowParallelLinear)))),
        attention_layer=ModuleSpec(module=TransformerLayer, submodules=TransformerLayerSubmodules(
            self_attention=ModuleSpec(module=SelfAttention, params={"attn_mask_type": AttnMaskType.causal},
                                      submodules=SelfAttentionSubmodules(
                                          linear_qkv=LayerNormColumnParallelLinear,
                                          core_attention=CoreAttentionStandIn, linear_proj=RowParallelLinear)))),
        mlp_layer=ModuleSpec(module=MLPLayer, submodules=TransformerLayerSubmodules(
            mlp=ModuleSpec(module=MLP, submodules=MLPSubmodules(linear_fc1=LayerNormColumnParallelLinear,
                                                                linear_fc2=RowParallelLinear))))))


def make_config(model, layout, torch):
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=model["num_layers"], hidden_size=model["hidden_size"], ffn_hidden_size=model["ffn_hidden_size"],
        num_attention_heads=model["num_attention_heads"], num_query_groups=model["num_query_groups"],
        kv_channels=model["kv_channels"], gated_linear_unit=False,
        activation_func=lambda x: torch.pow(torch.nn.functional.relu(x), 2), bias_activation_fusion=False,
        normalization="RMSNorm", add_bias_linear=False, tensor_model_parallel_size=layout["tp"],
        pipeline_model_parallel_size=layout["pp"], context_parallel_size=1, sequence_parallel=False,
        transformer_impl="local", use_cpu_initialization=True, perform_initialization=False,
        init_model_with_meta_device=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, bf16=True,
        mamba_state_dim=model["mamba_state_dim"], mamba_head_dim=model["mamba_head_dim"],
        mamba_num_groups=model["mamba_num_groups"], mamba_num_heads=model["mamba_num_heads"],
        is_hybrid_model=True)


class _NoRngTracker:
    """The mixer forks the model-parallel CUDA RNG around its initialisation (mamba_mixer.py L293, L316);
    no RNG state exists on a CPU host and initialisation is off (perform_initialization=False)."""

    @staticmethod
    def fork(*args, **kwargs):
        import contextlib

        return contextlib.nullcontext()


def build_rank(case, rank, world, torch, dist, ps, FakeStore, seen):
    from megatron.core.models.mamba import MambaModel
    from megatron.core.ssm import mamba_mixer

    mamba_mixer.get_cuda_rng_tracker = _NoRngTracker
    from megatron.core.ssm import mamba_block
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    mamba_block.TENorm = WrappedTorchNorm  # final norm: TENorm and torch RMSNorm both hold one weight of size h

    model, layout = case["model"], case["layout"]
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        ps.initialize_model_parallel(tensor_model_parallel_size=layout["tp"],
                                     pipeline_model_parallel_size=layout["pp"], create_gloo_process_groups=False)
        coords = dict(rank=rank, pp_rank=ps.get_pipeline_model_parallel_rank(),
                      tp_rank=ps.get_tensor_model_parallel_rank(), ep_rank=0, etp_rank=0)
        key = (coords["pp_rank"], coords["tp_rank"])
        if key in seen:
            return None
        seen.add(key)
        config = make_config(model, layout, torch)
        vocab = gpt.padded_vocab_size(model["vocab_size"], model["make_vocab_size_divisible_by"], layout["tp"])
        with torch.device("meta"):
            chunk = MambaModel(config=config, mamba_stack_spec=local_stack_spec(torch), vocab_size=vocab,
                               max_sequence_length=model["max_position_embeddings"],
                               hybrid_override_pattern=model["hybrid_override_pattern"],
                               pre_process=ps.is_pipeline_first_stage(), post_process=ps.is_pipeline_last_stage(),
                               share_embeddings_and_output_weights=not model["untie_embeddings_and_output_weights"],
                               position_embedding_type=model["position_embedding_type"])
        counts = sum(p.numel() for p in chunk.parameters())
        coords["chunks"] = [dict(counts=dict(total=counts), layers=[], mtp_layers=0)]
        coords["params"] = counts
        return coords
    finally:
        ps.destroy_model_parallel()
        dist.destroy_process_group()


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, os.pardir, "tests", "data",
                                                                    "megatron_param_golden.json")))
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    gpt.install_triton_stub_if_missing()
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    gpt.install_cpu_shims(torch)
    install_mamba_ssm_stub(torch)
    import megatron.core
    from megatron.core import parallel_state as ps

    results = []
    for case in CASES:
        t = time.time()
        world, dp = gpt.world_and_dp(case["layout"])
        seen: set = set()
        records = [r for r in (build_rank(case, r, world, torch, dist, ps, FakeStore, seen) for r in range(world))
                   if r is not None]
        stages = []
        for pp_rank in range(case["layout"]["pp"]):
            recs = [r for r in records if r["pp_rank"] == pp_rank]
            assert len({r["params"] for r in recs}) == 1, "TP ranks differ"
            stages.append(dict(pp_rank=pp_rank, params=recs[0]["params"], ranks_checked=len(recs)))
        layout = dict(case["layout"], cp=1, dp=dp, world_size=world)
        results.append(dict(name=case["name"], model_class="MambaModel", model=case["model"], layout=layout,
                            stages=stages, megatron_core_version=megatron.core.__version__))
        print(f"[{time.time() - t:5.2f}s] {case['name']}: " + ", ".join(f"pp{s['pp_rank']}={s['params']:,}"
                                                                        for s in stages), flush=True)
    gpt.merge_cases(args.out, results, "MambaModel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
