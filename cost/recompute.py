"""Selective recompute modules (``--recompute-granularity selective --recompute-modules ...``): which
modules a model can use, what each one costs in time, and the short list of module sets ``solve``
searches.

Megatron-Core 0.16.1 ``TransformerConfig.__post_init__`` (TC, the selective block after the
``recompute_granularity`` checks, L1940-2010): ``recompute_modules`` defaults to ``["core_attn"]``; the
allowed set is core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts; ``moe_act`` needs
``moe_grouped_gemm``; ``mla_up_proj`` needs ``multi_latent_attention``; ``shared_experts`` cannot run
with ``moe_shared_expert_overlap``; with FP8 the ``delayed`` recipe refuses ``moe_act`` and
``layernorm`` ("Delayed scaling does not support moe_act and layernorm recompute for fp8"); the
1F1B EP all-to-all overlap refuses ``moe`` recompute (TC L3002-3047). What each module stops saving
is ``memory.RECOMPUTE_MODULES``; here is what it costs: one more forward of the module in the
backward pass (``tensor_parallel/random.py::CheckpointFunction`` and
``CheckpointWithoutOutput`` re-run the wrapped forward), i.e. 1/3 of the module's fwd+bwd GEMM
FLOPs, its element-wise passes once more, and the forward collectives inside the module again.
"""

from __future__ import annotations

from dataclasses import replace

from megasolve.cost.compute import (LayerWork, attention_core_flops_per_token_seq, layer_work,
                                    mlp_flops_per_token)
from megasolve.cost.memory import (DEFAULT_RECOMPUTE_MODULES, RECOMPUTE_MODULES, ActivationShape,
                                   attention_activation_terms, mlp_activation_terms)
from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec

# Modules whose recompute is element-wise only (norms, the expert activation): almost free in time
CHEAP_MODULES = ("layernorm", "moe_act")


def idle_module(spec: ModelSpec, module: str) -> str | None:
    """Why ``module`` would checkpoint nothing in this model (Megatron accepts it and does nothing with it), or
    None."""
    if module in ("moe", "moe_act", "shared_experts") and not spec.is_moe:
        return f"{module} recompute needs an MoE model (it checkpoints part of the MoE layer)"
    if module == "shared_experts" and not (spec.is_moe and spec.moe.shared_expert_ffn_hidden_size):
        return "shared_experts recompute needs shared experts (moe_shared_expert_intermediate_size)"
    if module == "mlp" and all(spec.is_moe_layer(i) for i in range(spec.num_layers)):
        return "mlp recompute applies to dense layers only (transformer_layer.py L539) and this model has none"
    return None


def module_problem(spec: ModelSpec, workload: Workload, module: str) -> str | None:
    """Why Megatron refuses ``module`` for this model / workload (TC selective block), or why it would
    save nothing here (megasolve refuses a knob it would silently ignore); None when it is usable."""
    if module not in RECOMPUTE_MODULES:
        return f"{module} is not one of Megatron's modules {sorted(RECOMPUTE_MODULES)} (TC L1944-1962)"
    if idle := idle_module(spec, module):
        return idle
    if module == "shared_experts" and workload.moe_shared_expert_overlap:
        return "shared_experts recompute cannot work with --moe-shared-expert-overlap (TC selective block)"
    if module == "mla_up_proj" and spec.mla is None:
        return "mla_up_proj in recompute_modules is only supported with multi_latent_attention (TC selective block)"
    if module == "mla_up_proj" and spec.dsa is not None and workload.precision != "bf16":
        return "FP8/FP4 is not supported for AbsorbedMLA's mla_up_proj recompute (absorbed_mla.py L671-673 @d98e8a6)"
    if module in CHEAP_MODULES and workload.precision == "fp8" and workload.fp8_recipe == "delayed":
        return "Delayed scaling does not support moe_act and layernorm recompute for fp8 (TC selective block)"
    if module == "moe" and workload.moe_ep_overlap:
        return "EP A2A overlap does not support moe recompute (TC L3002-3047)"
    return None


def modules_problem(spec: ModelSpec, workload: Workload, modules: tuple[str, ...]) -> str | None:
    """The first problem of any module of ``modules`` (``module_problem``), or None."""
    if not modules:
        return "selective recompute needs at least one module"
    for module in modules:
        problem = module_problem(spec, workload, module)
        if problem:
            return problem
    return None


def _effective(modules: tuple[str, ...]) -> tuple[str, ...]:
    """``moe`` checkpoints the whole MoE layer: moe_act and shared_experts inside it run once more only
    once (``moe_layer.py`` L249 wraps the experts and shared experts)."""
    if "moe" in modules:
        return tuple(m for m in modules if m not in ("moe_act", "shared_experts"))
    return modules


def selective_extra_work(spec: ModelSpec, workload: Workload, shape: ActivationShape, *, moe: bool,
                         modules: tuple[str, ...]) -> LayerWork:
    """Work that recomputing ``modules`` adds to one layer (beyond core attention, which
    ``compute.layer_work(recompute="selective")`` already counts): the forward of each checkpointed
    module once more -- 1/3 of its 6x GEMM FLOPs -- and its element-wise work: each re-created tensor
    is written once and its input read once (``2 x`` the dropped bytes, ``memory.RECOMPUTE_MODULES``).

    >>> from megasolve.models.presets import load_preset
    >>> spec = load_preset("llama-3.1-8b")
    >>> shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    >>> w = selective_extra_work(spec, Workload(seq_length=4096), shape, moe=False, modules=("mlp",))
    >>> w.gemm_flops == 2 * 4096 * 4096 * 14336 * 3  # one forward of the SwiGLU MLP: 2*h*F*3 per token
    True
    """
    T, t = shape.tokens(workload), shape.tp
    gemm = expert = elementwise = 0.0
    effective = _effective(tuple(m for m in modules if m != "core_attn"))
    if not effective:
        return LayerWork(0.0, 0.0, 0.0, 0.0)
    terms = attention_activation_terms(spec, workload, shape) | mlp_activation_terms(spec, workload, shape, moe)
    for module in effective:
        dropped = sum(v for k, v in terms.items() if k in RECOMPUTE_MODULES[module])
        if module == "mlp" and not moe:
            gemm += mlp_flops_per_token(spec, False) * T / t / 3
        elif module == "moe" and moe:
            # (a precision recipe's modules are recomputed at the run's precision here: not split)
            base = layer_work(spec, replace(workload, gemm_overrides=()), shape, moe=True, recompute="none")
            attention_gemm = _attention_gemm_flops(spec, shape, T)
            gemm += (base.gemm_flops - attention_gemm) / 3  # router + shared experts
            expert += base.expert_flops / 3
            elementwise += 8 * (T / shape.sigma) * spec.moe.top_k * shape.etp * spec.hidden_size / 3  # permute
        elif module == "shared_experts" and moe:
            e_ffn = 3 if spec.swiglu else 2
            gemm += 2.0 * spec.hidden_size * spec.moe.shared_expert_ffn_hidden_size * e_ffn * T / t
        elif module == "mla_up_proj" and spec.mla is not None:
            mla, n = spec.mla, spec.num_attention_heads
            q_up = (mla.q_lora_rank or 0) * n * (mla.qk_head_dim + mla.qk_pos_emb_head_dim)
            kv_up = mla.kv_lora_rank * n * (mla.qk_head_dim + mla.v_head_dim)
            gemm += 2.0 * (q_up + kv_up) * T / t
        elif module == "moe_act" and moe:  # reads the fc1 output, writes the activation output
            elementwise += terms["expert_fc1_output"]
        elementwise += 2 * dropped
    return LayerWork(gemm, expert, 0.0, elementwise)


def _attention_gemm_flops(spec: ModelSpec, shape: ActivationShape, tokens: float) -> float:
    from megasolve.cost.compute import attention_linear_flops_per_token

    return attention_linear_flops_per_token(spec) * tokens / shape.tp


def core_attention_recompute_flops(spec: ModelSpec, workload: Workload, shape: ActivationShape) -> float:
    """FLOPs of one core-attention forward (what core_attn recompute repeats): 1/3 of the causal core."""
    return attention_core_flops_per_token_seq(spec) * shape.tokens(workload) * workload.seq_length / shape.tp / 3


def uses_core_attn(modules: tuple[str, ...] | None) -> bool:
    return "core_attn" in (modules or DEFAULT_RECOMPUTE_MODULES)

