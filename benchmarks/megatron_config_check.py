"""Construct Megatron-Core's own ``TransformerConfig`` (``MLATransformerConfig`` for MLA) for layouts
that megasolve returned, so that Megatron's ``__post_init__`` validation (the same checks
``pretrain_gpt.py`` runs at start-up) judges them.

Input: a JSON file ``{"cases": [{"model": {Megatron argument names...}, "layout": {...}}]}`` as
written by ``tests/test_megatron_config.py``. Output: one line per case (``ok`` or the exception),
exit code 1 if any case is rejected. Needs ``torch`` and ``megatron-core`` (e.g. torch 2.13 CPU +
megatron-core 0.19.2); it does not need megasolve itself::

    python benchmarks/megatron_config_check.py layouts.json
"""

from __future__ import annotations

import json
import sys
import warnings


def config_for(model: dict, layout: dict):
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    kwargs = dict(
        num_layers=model["num_layers"], hidden_size=model["hidden_size"], ffn_hidden_size=model["ffn_hidden_size"],
        num_attention_heads=model["num_attention_heads"], num_query_groups=model["num_query_groups"],
        kv_channels=model["kv_channels"], gated_linear_unit=model["swiglu"],
        activation_func=F.silu if model["swiglu"] else F.gelu, normalization=model["normalization"],
        add_bias_linear=model["add_bias_linear"], add_qkv_bias=model["add_qkv_bias"],
        qk_layernorm=model["qk_layernorm"], bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        tensor_model_parallel_size=layout["tp"], pipeline_model_parallel_size=layout["pp"],
        virtual_pipeline_model_parallel_size=layout["vpp"] if layout["vpp"] > 1 else None,
        context_parallel_size=layout["cp"], sequence_parallel=layout["sequence_parallel"],
        expert_model_parallel_size=layout["ep"],
        expert_tensor_parallel_size=layout["etp"] if model.get("num_moe_experts") else None,
        num_layers_in_first_pipeline_stage=layout["first_stage_layers"],
        num_layers_in_last_pipeline_stage=layout["last_stage_layers"],
        mtp_num_layers=model.get("mtp_num_layers") or None,
    )
    if model.get("num_moe_experts"):
        kwargs.update(num_moe_experts=model["num_moe_experts"], moe_router_topk=model["moe_router_topk"],
                      moe_ffn_hidden_size=model["moe_ffn_hidden_size"],
                      moe_shared_expert_intermediate_size=model.get("moe_shared_expert_intermediate_size") or None,
                      moe_layer_freq=model["moe_layer_freq"], moe_grouped_gemm=False,
                      moe_token_dispatcher_type="alltoall")
    if layout["recompute"] == "selective":
        kwargs.update(recompute_granularity="selective")
    elif layout["recompute"] == "full":
        kwargs.update(recompute_granularity="full",
                      recompute_method="uniform" if layout["recompute_num_layers"] is None else "block",
                      recompute_num_layers=layout["recompute_num_layers"] or 1)
    if model.get("multi_latent_attention"):
        kwargs.update(q_lora_rank=model["q_lora_rank"], kv_lora_rank=model["kv_lora_rank"],
                      qk_head_dim=model["qk_head_dim"], qk_pos_emb_head_dim=model["qk_pos_emb_head_dim"],
                      v_head_dim=model["v_head_dim"])
        return MLATransformerConfig(**kwargs)
    return TransformerConfig(**kwargs)


def main(path: str) -> int:
    warnings.filterwarnings("ignore")
    cases = json.loads(open(path, encoding="utf-8").read())["cases"]
    failures = 0
    for case in cases:
        try:
            config_for(case["model"], case["layout"])
            print(f"ok   {case['name']}")
        except Exception as exc:  # report Megatron's own message, whatever its type
            failures += 1
            print(f"FAIL {case['name']}: {type(exc).__name__}: {exc}")
    print(f"{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
