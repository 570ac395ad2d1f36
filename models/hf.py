"""Read a Hugging Face ``config.json`` (as a plain dict) into a ``ModelSpec``.

No ``transformers`` import, no ``trust_remote_code``, no network: the file is JSON and the field
names are normalised with the alias table of ``reference/ecosystem.md`` section 1.2. transformers'
class defaults are applied only where a released config relies on them (``DOCUMENTED_DEFAULTS``),
and then with a note: they silently differ between releases (e.g. ``num_nextn_predict_layers``
defaults to 1 in transformers 5 even for models without MTP).

Nothing is ignored silently: every key is either read, known to change neither parameters, FLOPs
nor memory (``NO_EFFECT``), or reported in ``ModelSpec.ignored_features`` (and so in the JSON and
as a note). The reader is chosen by ``architectures`` before ``model_type`` (Kimi-K2 declares
``DeepseekV3ForCausalLM`` under ``model_type: kimi_k2``).
"""

from __future__ import annotations

from typing import Any

from megasolve.models.errors import ConfigError
from megasolve.models.megatron_args import check_num_layers
from megasolve.models.spec import (DSA_SPEED_NOTE, DSASpec, GatedDeltaNetSpec, MambaSpec, MLASpec, MoESpec,
                                   ModelSpec, softmax_type_notes)
from megasolve.models.vision import vision_params

# model_type -> family. Families share field names and defaults.
MODEL_TYPES = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "phi3": "llama",
    # ChatGLM / GLM-4 (THUDM/glm-4-9b modeling_chatglm.py, remote code): Megatron's own GPT layer (the config keeps
    # Megatron's names, translated by ``_chatglm_as_llama``): fused qkv with bias, RMSNorm, SwiGLU, RoPE on half of
    # each head
    "chatglm": "llama",
    # InternLM2 / 2.5 (internlm/internlm2_5-7b modeling_internlm2.py, remote code): Llama's layer with q, k, v fused
    # into one wqkv (the same weights) and w1 / w3 / w2 for the SwiGLU; ``bias`` false
    "internlm2": "llama",
    "gemma": "llama", "gemma2": "llama", "gemma3_text": "llama", "ernie4_5": "llama",
    "qwen2_5_vl": "llama", "qwen2_5_vl_text": "llama", "qwen2_vl": "llama", "qwen2_vl_text": "llama",
    "mixtral": "mixtral", "minimax_m2": "mixtral", "gpt_oss": "mixtral",
    "qwen2_moe": "qwen_moe", "qwen3_moe": "qwen_moe", "qwen3_next": "qwen_moe",
    # Qwen3.5 (transformers models/qwen3_5*): the Qwen3-Next decoder (gated DeltaNet + gated attention),
    # dense or with every layer MoE, inside a VL wrapper
    "qwen3_5_text": "llama", "qwen3_5_moe_text": "qwen_moe",
    # Qwen3-VL (transformers models/qwen3_vl*): the Qwen3 / Qwen3-MoE decoder (QK-norm, interleaved MRoPE: the
    # same FLOPs) inside a VL wrapper; DeepStack adds the vision features to the first layers' hidden states
    # (an elementwise add, no parameters in the language model)
    "qwen3_vl_text": "llama", "qwen3_vl_moe_text": "qwen_moe",
    "deepseek_v2": "deepseek", "deepseek_v3": "deepseek", "glm4_moe": "deepseek",
    # DeepSeek-V3.2 and GLM-5 / 5.1 / 5.2 (transformers models/glm_moe_dsa): DeepSeek-V3's MLA + MoE layers with
    # DeepSeek Sparse Attention (index_n_heads / index_head_dim / index_topk; GLM-5.2's IndexShare
    # index_topk_freq / index_skip_topk_offset), as Megatron-Bridge maps them (models/glm_moe_dsa/glm5_bridge.py)
    "deepseek_v32": "deepseek", "glm_moe_dsa": "deepseek",
    "llama4_text": "llama4", "ernie4_5_moe": "ernie_moe", "gpt2": "gpt2", "nemotron_h": "nemotron_h",
    # Mistral's layer under other names: Ministral 8B (``ministral``: per-layer sliding windows in layer_types) and the
    # Ministral 3 / Mistral Small language models inside the ``mistral3`` wrapper (``ministral3``; Megatron-Bridge
    # models/ministral3: a GPT provider of the text config's widths)
    "ministral": "llama", "ministral3": "llama",
    # Seed-OSS (transformers models/seed_oss): Llama's layer with q / k / v biases (attention_bias) and an o_proj bias
    # of its own (attention_out_bias)
    "seed_oss": "llama",
    # Xiaomi MiMo-7B (remote code configuration_mimo.py: MiMoConfig(Qwen2Config) + num_nextn_predict_layers;
    # Megatron-Bridge models/mimo/mimo_bridge.py: Qwen2's provider, q / k / v biases, mtp_num_layers): Qwen2's layer
    # with MTP layers
    "mimo": "llama",
    # Apertus (transformers models/apertus; swiss-ai trains it with its Megatron-LM fork): per-head QK-norm and a
    # non-gated MLP (up_proj, xIELU, down_proj)
    "apertus": "llama",
    # EXAONE 4 (models/exaone4; Megatron-Bridge models/exaone): per-head QK-norm, sliding / global layers, RMSNorm
    # after the attention and the MLP instead of before them (the same two norms a layer)
    "exaone4": "llama",
    # Nemotron-3 / Nemotron-4 / Minitron dense (models/nemotron; Megatron-Bridge models/nemotron/nemotron_bridge.py:
    # LayerNorm with zero-centred gamma, squared ReLU, not gated, RoPE on half of each head)
    "nemotron": "llama",
    # OLMoE (models/olmoe; Megatron-Bridge models/olmoe): every layer MoE (intermediate_size is the expert width), no
    # shared expert, QK-norm over all heads
    "olmoe": "qwen_moe",
    # GLM-4.7-Flash (models/glm4_moe_lite; Megatron-Bridge glm/glm47_flash_bridge.py): DeepSeek-V3's MLA + MoE layers
    # (MLAModelProvider, qk_layernorm, one shared expert), the dense layers named by mlp_layer_types
    "glm4_moe_lite": "deepseek",
    # dots.llm1 (models/dots1): DeepSeek-V3's MoE (first_k_dense_replace, shared experts) with GQA attention and
    # per-head QK-norm instead of MLA
    "dots1": "deepseek",
    # Hunyuan 3 (models/hy_v3) and EXAONE MoE (models/exaone_moe), both trained through Megatron-Bridge
    # (models/hy_v3, models/exaone/exaone_moe): GQA with per-head QK-norm, num_experts routed experts and
    # num_shared_experts shared ones of the expert width, the dense layers named by mlp_layer_types
    "hy_v3": "shared_moe", "exaone_moe": "shared_moe",
    # Ling 2.0 / Ring 2.0 (inclusionAI, remote code configuration_bailing_moe_v2.py as Megatron-Bridge ships it in
    # models/bailing): the same MoE (group-limited routing, first_k_dense_replace), a fused query_key_value with its own
    # bias flag (use_qkv_bias), QK-norm (use_qk_norm), partial RoPE, MTP layers (num_nextn_predict_layers)
    "bailing_moe_v2": "shared_moe",
    # Sarvam (Megatron-Bridge models/sarvam, remote-code configs): Sarvam MoE (sarvam-30b) is Ling's layer under other
    # names (vLLM's SarvamMoEForCausalLM is its BailingMoeForCausalLM: fused query_key_value, per-head QK-norm,
    # num_experts routed + num_shared_experts shared of the expert width, the first first_k_dense_replace layers
    # dense); Sarvam MLA (sarvam-105b) is DeepSeek-V3's MLA + MoE layers with those MoE keys (sarvam_mla_bridge.py)
    "sarvam_moe": "shared_moe", "sarvam_mla": "deepseek",
}
# ``architectures[0]`` -> the model_type whose reader fits (checked first: Kimi-K2 ships
# ``model_type: kimi_k2`` with the DeepSeek-V3 architecture, moonshotai/Kimi-K2-Instruct README
# "Model Usage": "change model_type to deepseek_v3" for frameworks that key on it).
ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "Phi3ForCausalLM": "phi3", "MixtralForCausalLM": "mixtral",
    "InternLM2ForCausalLM": "internlm2", "ChatGLMModel": "chatglm", "ChatGLMForConditionalGeneration": "chatglm",
    "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
    "Glm4MoeForCausalLM": "glm4_moe", "DeepseekV32ForCausalLM": "deepseek_v32", "GlmMoeDsaForCausalLM": "glm_moe_dsa",
    "GptOssForCausalLM": "gpt_oss", "MiniMaxM2ForCausalLM": "minimax_m2",
    "Ernie4_5_ForCausalLM": "ernie4_5", "Ernie4_5_MoeForCausalLM": "ernie4_5_moe",
    "Llama4ForCausalLM": "llama4_text", "NemotronHForCausalLM": "nemotron_h", "Qwen3NextForCausalLM": "qwen3_next",
    "Qwen3_5ForCausalLM": "qwen3_5_text", "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "MinistralForCausalLM": "ministral", "Ministral3ForCausalLM": "ministral3", "SeedOssForCausalLM": "seed_oss",
    "ApertusForCausalLM": "apertus", "Exaone4ForCausalLM": "exaone4", "NemotronForCausalLM": "nemotron",
    "OlmoeForCausalLM": "olmoe", "Glm4MoeLiteForCausalLM": "glm4_moe_lite", "Dots1ForCausalLM": "dots1",
    "HYV3ForCausalLM": "hy_v3", "ExaoneMoeForCausalLM": "exaone_moe", "ExaoneMoEForCausalLM": "exaone_moe",
    "BailingMoeV2ForCausalLM": "bailing_moe_v2", "MiMoForCausalLM": "mimo", "SarvamMoEForCausalLM": "sarvam_moe",
    "SarvamMLAForCausalLM": "sarvam_mla",
}
# Wrapper configs whose language model sits in ``text_config`` (the vision tower is not counted).
NESTED_TYPES = {"gemma3": "gemma3_text", "llava": "llama", "mistral3": "mistral", "llama4": "llama4_text",
                "qwen2_5_vl": "qwen2_5_vl_text", "qwen2_vl": "qwen2_vl_text",
                "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text",
                "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text"}
# Architectures megasolve cannot plan yet, with what is missing. Never point these at the Megatron
# YAML input: it describes GPTModel stacks (attention + MLP/MoE layers) only.
UNSUPPORTED = {
    # Megatron-Core @d98e8a6 has no lightning-attention module (megatron/core: no such layer), so no Megatron
    # launch can train these
    "minimax": "lightning (linear) attention layers (attn_type_list 0): Megatron-Core has no lightning-attention "
               "layer to train them with",
    "minimax_m1": "lightning (linear) attention layers (attn_type_list 0): Megatron-Core has no lightning-attention "
                  "layer to train them with",
    # DeepSeek-V4 (Megatron-Bridge models/deepseek/deepseek_v4_bridge.py): hybrid layers of compressed attention at
    # two ratios with sliding windows and a DSA indexer on some: a layer megasolve has no cost model for
    "deepseek_v4": "DeepSeek-V4's hybrid compressed / sliding-window / sparse attention layers: megasolve costs "
                   "DeepSeek Sparse Attention over MLA (deepseek_v32, glm_moe_dsa) but not the compressed layers",
    "falcon_h1": "attention and Mamba-2 side by side in every layer: Megatron-Core's hybrid stack runs one block per "
                 "pattern symbol, in sequence, and megasolve plans only that stack",
    "jamba": "Mamba-1 layers interleaved with attention: Megatron-Core builds Mamba-2 mixers only (ssm/mamba_mixer.py)",
    "mamba": "a pure Mamba-1 model: Megatron-Core builds Mamba-2 mixers only (ssm/mamba_mixer.py)",
    "mamba2": "a pure Mamba-2 model (no attention or MLP layers): megasolve reads Mamba-2 layers from hybrid "
              "configs (nemotron_h's hybrid_override_pattern) only",
}
_QKV_BIAS_TYPES = ("qwen2", "qwen2_moe", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl", "qwen2_vl_text", "mimo")
# the Qwen3-Next decoder: gated DeltaNet layers, gated attention (q_proj doubled for the output gate), QK-norm
QWEN3_NEXT_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
_QK_NORM_TYPES = ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text", *QWEN3_NEXT_TYPES, "gemma3_text",
                  "deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa", "glm4_moe_lite",
                  "apertus", "exaone4", "olmoe", "dots1", "hy_v3", "exaone_moe", "sarvam_mla")
# MLPs that are not gated, by their activation (ModelSpec.activation): one up-projection, the activation, the
# down-projection (Nemotron's squared ReLU, Apertus' xIELU); Nemotron's LayerNorm1P is a LayerNorm (weight and bias)
# with zero-centred gamma
_PLAIN_MLP_ACTIVATION = {"nemotron": "squared_relu", "apertus": "xielu"}
_LAYERNORM_TYPES = ("nemotron",)
# What a type's layer has that Megatron-Core builds otherwise, said whenever its config is read
_TYPE_NOTES = {
    "olmoe": "OLMoE's q_norm / k_norm span all heads (OlmoeAttention; Megatron-Bridge's OLMoESelfAttention builds them "
             "at the full width, n*d + g*d weights a layer): counted as Megatron-Core's per-head norms (2*d); that "
             "full-width norm is not split over TP ranks, so only --tp 1 is planned",
    "apertus": "xIELU activation (Apertus; swiss-ai/Megatron-LM's --xielu, not in upstream Megatron-LM): costed as a "
               "non-gated MLP's activation (its two learned scalars a layer not counted)",
    "exaone4": "EXAONE 4 normalises after the attention and the MLP (post_attention_layernorm, "
               "post_feedforward_layernorm) where Megatron-Core normalises before: the same weights, FLOPs and saved "
               "activations, costed as Megatron-Core's pre-norm layer",
}
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "gpt2", "ernie4_5", "ernie4_5_moe")
# transformers' documented class defaults that released configs rely on (filled with a note).
DOCUMENTED_DEFAULTS = {
    # transformers models/gemma3/configuration_gemma3.py Gemma3TextConfig(vocab_size=262_208); the
    # google/gemma-3-*-it config.json files omit it from text_config
    "gemma3_text": {"vocab_size": 262_208, "sliding_window_pattern": 6},
    # models/llama4/configuration_llama4.py Llama4TextConfig: no_rope_layer_interval=4 derives
    # no_rope_layers when the list is empty; interleave_moe_layer_step=1
    "llama4_text": {"no_rope_layer_interval": 4, "interleave_moe_layer_step": 1},
    # models/qwen3_5*/configuration_qwen3_5*.py Qwen3_5(Moe)TextConfig.__post_init__: layer_types from
    # full_attention_interval (default 4); partial_rotary_factor 0.25 "for BC"
    "qwen3_5_text": {"full_attention_interval": 4, "partial_rotary_factor": 0.25},
    "qwen3_5_moe_text": {"full_attention_interval": 4, "partial_rotary_factor": 0.25},
    # models/nemotron/configuration_nemotron.py NemotronConfig.__post_init__: partial_rotary_factor 0.5 "for BC"
    "nemotron": {"partial_rotary_factor": 0.5},
    # models/glm4_moe_lite/configuration_glm4_moe_lite.py: mlp_layer_types ["dense"] + ["sparse"] * (L - 1); the same
    # for models/hy_v3 (HYV3Config.__post_init__) and models/exaone_moe (first_k_dense_replace = 1)
    "glm4_moe_lite": {"first_k_dense_replace": 1},
    "hy_v3": {"first_k_dense_replace": 1},
    "exaone_moe": {"first_k_dense_replace": 1},
    # BailingMoeV2Config(first_k_dense_replace=1), Megatron-Bridge models/bailing/configuration_bailing_moe_v2.py
    "bailing_moe_v2": {"first_k_dense_replace": 1},
}
# Keys that change neither parameters, FLOPs nor memory: token ids, numerics, initialisation,
# RoPE frequencies and scaling (same FLOPs), inference-only settings, bookkeeping.
NO_EFFECT = frozenset({
    "architectures", "model_type", "auto_map", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "video_token_id", "vision_start_token_id",
    "vision_end_token_id", "vision_token_id", "image_token_index", "boi_token_index", "eoi_token_index",
    "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps", "initializer_range",
    # ChatGLM's numerics and RoPE variants: same FLOPs and bytes (modeling_chatglm.py)
    "layernorm_epsilon", "apply_query_key_layer_scaling", "attention_softmax_in_fp32", "bias_dropout_fusion",
    "original_rope", "rope_ratio",
    "initializer_factor", "rope_theta", "rope_scaling", "rope_local_base_freq", "rope_parameters", "rope_type",
    "use_cache", "cache_implementation", "output_router_logits", "router_aux_loss_coef", "router_z_loss_coef",
    "router_jitter_noise", "attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop", "attn_pdrop",
    "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "hidden_act", "hidden_activation", "activation_function", "pretraining_tp", "use_return_dict",
    "tie_encoder_decoder", "is_encoder_decoder", "final_logit_softcapping", "query_pre_attn_scalar",
    "norm_topk_prob", "routed_scaling_factor", "scoring_func", "topk_method", "n_group", "topk_group",
    "score_function",  # (Sarvam's name for scoring_func: the router's score, the same FLOPs)
    "aux_loss_alpha", "seq_aux", "ep_size", "use_routing_bias", "moe_gate_act", "moe_norm_min", "moe_use_aux_free",
    "swiglu_limit", "initial_context_length", "attn_temperature_tuning", "floor_scale", "attn_scale",
    "for_llm_compressor", "_attn_implementation_autoset", "original_max_position_embeddings",
    "layernorm_full_attention_beta", "layernorm_linear_attention_beta", "layernorm_mlp_beta",
    "layernorm_full_attention_alpha", "layernorm_linear_attention_alpha", "layernorm_mlp_alpha",
    "rope_3d", "freq_allocation", "use_flash_attention", "use_sliding_window", "max_window_layers",
    "mrope_section", "keys_to_ignore_at_inference", "use_bfloat16", "chunk_size_feed_forward",
    "return_dict", "output_hidden_states", "output_attentions", "torchscript", "id2label", "label2id",
    "problem_type", "scale_attn_weights", "reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx",
    "n_ctx", "task_specific_params", "num_labels", "sliding_window_pattern", "_sliding_window_pattern",
    "no_rope_layer_interval",
    # Nemotron-H / Mamba-2 numerics and kernels (same parameters and FLOPs)
    "mamba_hidden_act", "time_step_min", "time_step_max", "time_step_limit", "time_step_floor", "time_step_rank",
    "chunk_size", "residual_in_fp32", "rescale_prenorm_residual", "use_mamba_kernels", "num_logits_to_keep",
    "mamba_dt_min", "mamba_dt_max", "mamba_dt_limit", "mamba_dt_init_floor", "mamba_chunk_size", "mamba_proj_bias",
    "mamba_conv_bias", "mamba_expand", "expand", "use_conv_bias", "use_bias", "mlp_bias",
    # DSA / MLA RoPE layout and GLM-5.2's derived layer lists (the same parameters and FLOPs; the lists are checked
    # against the fields they derive from in ``_dsa``)
    "rope_interleave", "indexer_rope_interleave", "index_share_for_mtp_iteration",
    # Ling 2.0's routing and training numerics (configuration_bailing_moe_v2.py): the expert bias is a buffer, the
    # MTP loss a scale, dropouts off in training recipes' FLOPs and parameters alike
    "moe_router_enable_expert_bias", "mtp_loss_scaling_factor", "embedding_dropout", "output_dropout",
})
# Keys that do change compute or memory but that megasolve does not model, when set: key -> what.
UNMODELLED = {
    "attn_logit_softcapping": "attention logit soft-capping (tanh on every score; Megatron-Core's attention has "
                              "no soft-cap, so the step time excludes it)",
    "vision_config": "the vision tower (vision_config) is neither counted nor planned: parameters, memory and "
                     "time are the language model's",
    "audio_config": "the audio tower (audio_config) is not counted",
    "num_mtp_modules": "MiniMax multi-token-prediction modules are not counted (not an MTP layer Megatron-Core "
                       "builds)",
    "qk_norm_type": "QK norm over all heads of a layer (per_layer): its n*d + g*d weights per layer are counted "
                    "as per-head norms (2*d)",
    "mlp_intermediate_size": "mlp_intermediate_size is unused by the MiniMax-M2 layers (all MoE) and not read",
}

# Keys worth a note that change nothing megasolve plans.
INFORMATIONAL = {
    "quantization_config": "the checkpoint is stored quantised; training is planned in bf16 master weights with "
                           "--precision",
}


class _Config(dict):
    """The config mapping, remembering which keys the reader looked at."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)


def _get(cfg: dict[str, Any], name: str, model_type: str, *aliases: str) -> Any:
    found = [cfg.get(key) for key in (name, *aliases)]  # reads every alias (none is left unreported)
    for key, value in zip((name, *aliases), found):
        if value is not None:
            return value
    raise ConfigError(field=name, value="missing",
                      rule=f"config.json of model_type '{model_type}' must set it",
                      fix=f"add \"{name}\" to config.json")


def _int(cfg: dict[str, Any], name: str, model_type: str, *aliases: str) -> int:
    value = _get(cfg, name, model_type, *aliases)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(field=name, value=repr(value), rule="must be an integer",
                          fix=f"write {name} as a whole number")
    return value


def _opt_int(cfg: dict[str, Any], name: str, model_type: str, default: int | None) -> int | None:
    return _int(cfg, name, model_type) if cfg.get(name) is not None else default


def _int_list(cfg: dict[str, Any], name: str, length: int | None = None) -> list[int] | None:
    value = cfg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
        raise ConfigError(field=name, value=repr(value)[:80], rule="must be a list of integers",
                          fix=f"write {name} as a JSON list of integers")
    if length is not None and value and len(value) != length:
        raise ConfigError(field=name, value=f"list of {len(value)}", rule=f"must have one entry per layer ({length})",
                          fix="give one entry per decoder layer")
    return value


def _flatten(cfg: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Lift ``text_config`` of multimodal wrappers (Gemma 3, Llama 4, VL models) to the top level."""
    text = cfg.get("text_config")
    wrapper = cfg.get("model_type")
    if not isinstance(wrapper, str):
        raise ConfigError(field="model_type", value=repr(wrapper)[:40], rule="must be a string naming the architecture",
                          fix="pass the model's config.json unchanged")
    if wrapper in NESTED_TYPES and not isinstance(text, dict) and "num_hidden_layers" in cfg:
        return cfg  # flat VL config (Qwen2.5-VL as released): the language fields sit at the top level
    if wrapper in NESTED_TYPES or (isinstance(text, dict) and "num_hidden_layers" not in cfg):
        if not isinstance(text, dict):
            raise ConfigError(field="text_config", value="missing",
                              rule=f"model_type '{wrapper}' keeps its language model there",
                              fix="pass the full config.json")
        merged = dict(text)
        for key in ("tie_word_embeddings", "vision_config", "audio_config", "quantization_config"):
            if key not in merged and cfg.get(key) is not None:
                merged[key] = cfg[key]
        merged.setdefault("model_type", NESTED_TYPES.get(wrapper, "gemma3_text"))
        if merged["model_type"] == wrapper:  # a nested text_config naming the wrapper type
            merged["model_type"] = NESTED_TYPES.get(wrapper, wrapper)
        notes.append(f"read the language model from text_config of the '{wrapper}' wrapper")
        return merged
    return cfg


def _resolve_type(cfg: dict[str, Any], notes: list[str]) -> str:
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError(field="model_type", value=repr(model_type)[:40], rule="must be a string naming the "
                          "architecture", fix="pass the model's config.json unchanged")
    architectures = cfg.get("architectures") or []
    arch = architectures[0] if isinstance(architectures, list) and architectures else None
    if isinstance(model_type, str) and model_type in UNSUPPORTED:
        raise ConfigError(field="model_type", value=model_type, rule=f"not plannable yet: {UNSUPPORTED[model_type]}",
                          fix="no megasolve input can describe this model yet (a Megatron YAML describes "
                              "attention + MLP/MoE stacks only); plan a transformer of the same size meanwhile")
    by_arch = ARCHITECTURES.get(arch) if isinstance(arch, str) else None
    if by_arch is not None and by_arch != model_type and MODEL_TYPES.get(by_arch) != MODEL_TYPES.get(model_type):
        notes.append(f"model_type '{model_type}' read as '{by_arch}' (architectures: {arch})")
        return by_arch
    if isinstance(model_type, str) and model_type in MODEL_TYPES:
        return model_type
    if by_arch is not None:
        notes.append(f"model_type '{model_type}' read as '{by_arch}' (architectures: {arch})")
        return by_arch
    raise ConfigError(field="model_type", value=model_type,
                      rule=f"not a supported architecture ({', '.join(sorted(MODEL_TYPES))})",
                      fix="if it is a decoder-only transformer of attention and MLP/MoE layers, describe it with "
                          "Megatron argument names in a YAML file (see README, --model)")


def _moe(cfg: dict[str, Any], family: str, model_type: str, num_layers: int) -> MoESpec | None:
    if family == "mixtral":  # Mixtral, gpt-oss, MiniMax-M2: every layer MoE, no dense MLP
        experts = _int(cfg, "num_local_experts", model_type)
        ffn = _int(cfg, "intermediate_size", model_type)
        pattern = [1] * num_layers
        shared = _opt_int(cfg, "shared_intermediate_size", model_type, 0) or 0
        gate = False
        top_k = _int(cfg, "num_experts_per_tok", model_type, "experts_per_token")
    elif family == "qwen_moe":
        experts = _opt_int(cfg, "num_experts", model_type, 0)
        if not experts:
            return None
        # OLMoE has no dense MLP: its intermediate_size is the expert width (OlmoeSparseMoeBlock)
        ffn = _int(cfg, "intermediate_size" if model_type == "olmoe" else "moe_intermediate_size", model_type)
        step = _opt_int(cfg, "decoder_sparse_step", model_type, 1) or 1
        dense_only = cfg.get("mlp_only_layers") or []
        if not isinstance(dense_only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense_only):
            raise ConfigError(field="mlp_only_layers", value=repr(dense_only)[:80], rule="must be a list of layer numbers",
                              fix="e.g. \"mlp_only_layers\": [0, 1], or [] for none")
        dense_only = set(dense_only)
        pattern = [int(i not in dense_only and (i + 1) % step == 0) for i in range(num_layers)]
        shared = _opt_int(cfg, "shared_expert_intermediate_size", model_type, 0) or 0
        gate = model_type in ("qwen2_moe", *QWEN3_NEXT_TYPES) and shared > 0  # shared_expert_gate: Linear(h, 1)
        top_k = _int(cfg, "num_experts_per_tok", model_type)
    elif family == "deepseek":  # DeepSeek-V2/V3, Kimi-K2, GLM-4.5 (glm4_moe): first-k dense, shared experts
        experts = _opt_int(cfg, "num_experts" if model_type == "sarvam_mla" else "n_routed_experts", model_type, 0)
        if not experts:
            return None
        ffn = _int(cfg, "moe_intermediate_size", model_type)
        default_dense = DOCUMENTED_DEFAULTS.get(model_type, {}).get("first_k_dense_replace", 0)
        first_dense = _opt_int(cfg, "first_k_dense_replace", model_type, default_dense) or 0
        freq = _opt_int(cfg, "moe_layer_freq", model_type, 1) or 1
        pattern = [int(i >= first_dense and i % freq == 0) for i in range(num_layers)]
        if model_type == "sarvam_mla":  # SarvamMLABlock: every freq-th layer from the first MoE one on (no default)
            first_dense = _int(cfg, "first_k_dense_replace", model_type)
            pattern = [int(i >= first_dense and (i - first_dense) % freq == 0) for i in range(num_layers)]
        if model_type == "glm4_moe_lite":  # GLM-4.7-Flash: the dense layers may be named (Glm4MoeLiteDecoderLayer)
            pattern = _mlp_layer_types(cfg, num_layers) or pattern
        shared = (_opt_int(cfg, "n_shared_experts", model_type, 0) or 0) * ffn
        if model_type == "sarvam_mla":  # SarvamMLAMoE: num_shared_experts of moe_shared_expert_intermediate_size,
            width = _opt_int(cfg, "moe_shared_expert_intermediate_size", model_type, None) or ffn  # else the expert's
            shared = (_opt_int(cfg, "num_shared_experts", model_type, 1) or 0) * width
        gate = False
        top_k = _int(cfg, "num_experts_per_tok", model_type)
    elif family == "shared_moe":  # HYV3MoE / ExaoneMoeSparseMoEBlock: routed + num_shared_experts of the same width
        experts = _int(cfg, "num_experts", model_type, "num_local_experts")
        ffn = _int(cfg, "moe_intermediate_size", model_type)
        default_dense = DOCUMENTED_DEFAULTS.get(model_type, {}).get("first_k_dense_replace")
        first_dense = (_int(cfg, "first_k_dense_replace", model_type) if default_dense is None  # (no class default)
                       else _opt_int(cfg, "first_k_dense_replace", model_type, default_dense) or 0)
        pattern = [int(i >= first_dense) for i in range(num_layers)]
        pattern = _mlp_layer_types(cfg, num_layers) or pattern
        shared, gate = (_opt_int(cfg, "num_shared_experts", model_type, 0) or 0) * ffn, False
        top_k = _int(cfg, "num_experts_per_tok", model_type)
    elif family == "llama4":  # Llama4TextMoe: routed experts + one shared expert of the same width
        experts = _int(cfg, "num_local_experts", model_type)
        ffn = _int(cfg, "intermediate_size", model_type)
        moe_layers = _int_list(cfg, "moe_layers")
        step = cfg.get("interleave_moe_layer_step")
        if moe_layers is None:  # Llama4TextConfig: range(step - 1, L, step)
            if step is None:
                step = DOCUMENTED_DEFAULTS["llama4_text"]["interleave_moe_layer_step"]
            moe_layers = list(range(step - 1, num_layers, step))
        chosen = set(moe_layers)
        pattern = [int(i in chosen) for i in range(num_layers)]
        shared, gate = ffn, False
        top_k = _int(cfg, "num_experts_per_tok", model_type)
    elif family == "ernie_moe":  # Ernie4_5_MoeDecoderLayer: interval, start and end index
        experts = _int(cfg, "moe_num_experts", model_type)
        ffn = _int(cfg, "moe_intermediate_size", model_type)
        start = _opt_int(cfg, "moe_layer_start_index", model_type, 0) or 0
        end = cfg.get("moe_layer_end_index")
        end = num_layers - 1 if end is None or end == -1 else end
        interval = _opt_int(cfg, "moe_layer_interval", model_type, 1) or 1
        pattern = [int((i + 1) % interval == 0 and start <= i <= end) for i in range(num_layers)]
        shared = (_opt_int(cfg, "moe_num_shared_experts", model_type, 0) or 0) * ffn
        gate = False
        top_k = _int(cfg, "moe_k", model_type)
    else:
        return None
    groups = _opt_int(cfg, "n_group", model_type, 1) or 1  # DeepSeek-V2/V3, Kimi-K2: group-limited routing
    group_topk = _opt_int(cfg, "topk_group", model_type, groups) or groups
    if groups < 1 or experts % groups or not 1 <= group_topk <= groups:
        groups, group_topk = 1, 1
    return MoESpec(num_experts=experts, top_k=top_k, expert_ffn_hidden_size=ffn, shared_expert_ffn_hidden_size=shared,
                   shared_expert_gate=gate, layer_pattern=tuple(pattern), router_num_groups=groups,
                   router_group_topk=group_topk if groups > 1 else 1)


def _mlp_layer_types(cfg: dict[str, Any], layers: int) -> list[int] | None:
    """``mlp_layer_types`` (one "dense" / "sparse" per layer: GLM-4.7-Flash, Hunyuan 3, EXAONE MoE) as a MoE pattern."""
    kinds = cfg.get("mlp_layer_types")
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise ConfigError(field="mlp_layer_types", value=repr(kinds)[:60],
                          rule=f"must list {layers} entries of dense / sparse", fix="pass the model's config.json unchanged")
    return [int(k == "sparse") for k in kinds]


# Nemotron's hidden_act (NemotronConfig(hidden_act="relu2"); NemotronMLP: up_proj, ACT2FN[hidden_act], down_proj) as
# the non-gated activation Megatron-LM launches: squared ReLU (--squared-relu) or its default GeLU (transformers' GeLU
# variants differ in numerics only)
_NEMOTRON_ACTIVATIONS = {"relu2": "squared_relu", "gelu": "", "gelu_new": "", "gelu_pytorch_tanh": "", "gelu_fast": ""}


def _plain_mlp_activation(cfg: dict[str, Any], model_type: str, notes: list[str]) -> str:
    """``ModelSpec.activation`` of a non-gated MLP type (``_PLAIN_MLP_ACTIVATION``); a Nemotron config's own
    ``hidden_act`` where it names one Megatron-LM launches, else its default with a note."""
    if model_type != "nemotron" or "hidden_act" not in cfg:
        return _PLAIN_MLP_ACTIVATION.get(model_type, "")
    act = cfg["hidden_act"]
    if isinstance(act, str) and act in _NEMOTRON_ACTIVATIONS:
        return _NEMOTRON_ACTIVATIONS[act]
    notes.append(f"hidden_act {act!r}: Megatron-LM launches a non-gated MLP with squared ReLU (--squared-relu) or GeLU "
                 "only; costed as squared ReLU (the same parameters, FLOPs and saved bytes) and launched with it")
    return _PLAIN_MLP_ACTIVATION[model_type]


def _layer_types(cfg: dict[str, Any], layers: int) -> list[str] | None:
    types = cfg.get("layer_types")
    if types is None:
        return None
    if not isinstance(types, list) or len(types) != layers or any(not isinstance(t, str) for t in types):
        raise ConfigError(field="layer_types", value=repr(types)[:80], rule=f"must list one type per layer ({layers})",
                          fix="e.g. [\"sliding_attention\", \"full_attention\", ...]")
    unknown = sorted(set(types) - {"sliding_attention", "full_attention", "chunked_attention"})
    if unknown:
        raise ConfigError(field="layer_types", value=unknown[0],
                          rule="megasolve plans full, sliding-window and chunked attention layers only",
                          fix="linear-attention / Mamba layers are not modelled yet (no input can express them)")
    return types


def _window(cfg: dict[str, Any], model_type: str, layers: int, notes: list[str]) -> tuple[int | None, tuple | None]:
    """Sliding window and its per-layer pattern (1 = windowed), as each transformers model applies it."""
    window = cfg.get("sliding_window")
    if isinstance(window, bool) or (window is not None and not isinstance(window, int)):
        raise ConfigError(field="sliding_window", value=repr(window), rule="must be an integer or null",
                          fix="write the window in tokens")
    types = _layer_types(cfg, layers)
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") + _QKV_BIAS_TYPES and types is None:
        # Qwen2Attention: the window applies only with use_sliding_window, from layer max_window_layers on
        if not cfg.get("use_sliding_window"):
            return None, None
        start = _opt_int(cfg, "max_window_layers", model_type, 0) or 0
        types = ["sliding_attention" if i >= start else "full_attention" for i in range(layers)]
    if not window:
        return None, None
    if types is None:
        if model_type == "gemma2":  # Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2)
            types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
        elif model_type in ("exaone4", "exaone_moe"):  # Exaone4Config: sliding unless (i + 1) % pattern == 0
            period = cfg.get("sliding_window_pattern")
            if isinstance(period, str) and period and set(period) <= {"L", "G"}:  # released as e.g. "LLLG"
                types = ["sliding_attention" if period[i % len(period)] == "L" else "full_attention"
                         for i in range(layers)]
            elif isinstance(period, int) and not isinstance(period, bool) and period > 0:
                types = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(layers)]
            else:
                raise ConfigError(field="sliding_window_pattern", value=repr(period)[:40],
                                  rule=f"{model_type} names its global layers by it when layer_types is not given",
                                  fix='give layer_types, or sliding_window_pattern as a period (4) or "LLLG"')
        elif model_type == "dots1":  # Dots1Config: sliding from layer max_window_layers on
            start = _opt_int(cfg, "max_window_layers", model_type, layers)
            types = ["sliding_attention" if i >= start else "full_attention" for i in range(layers)]
        elif model_type == "gemma3_text":  # Gemma3DecoderLayer: bool((layer_idx + 1) % sliding_window_pattern)
            period = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")  # transformers >= 4.53
            if period is None:
                period = DOCUMENTED_DEFAULTS["gemma3_text"]["sliding_window_pattern"]
                notes.append(f"sliding_window_pattern not set: transformers' default {period} "
                             "(one global layer in six)")
            types = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(layers)]
    if types is None:  # Mistral, Phi-3, gpt-oss without layer_types: every layer windowed
        return window, None
    pattern = tuple(int(t == "sliding_attention") for t in types)
    return (window, pattern) if any(pattern) else (None, None)


def spec_from_hf_config(cfg: dict[str, Any], name: str = "hf-model", source: str = "") -> ModelSpec:
    """Build a ``ModelSpec`` from a config.json dict.

    >>> spec = spec_from_hf_config({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    ...     "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256})
    >>> spec.num_query_groups, spec.kv_channels, spec.untie_embeddings_and_output_weights
    (8, 128, True)
    """
    if not isinstance(cfg, dict):
        raise ConfigError(field="config.json", value=type(cfg).__name__, rule="must be a JSON object",
                          fix="pass a Hugging Face config.json")
    notes: list[str] = []
    raw = _flatten(cfg, notes)
    model_type = _resolve_type(raw, notes)
    if model_type == "chatglm":
        raw = _chatglm_as_llama(raw)
    cfg = _Config(raw)
    for key, value in DOCUMENTED_DEFAULTS.get(model_type, {}).items():
        if key == "vocab_size" and cfg.get(key) is None:
            cfg[key] = value
            notes.append(f"{key} not set: transformers' documented default {value} "
                         f"({model_type} configuration class)")
    family = MODEL_TYPES[model_type]
    if family == "gpt2":
        spec = _gpt2(cfg, model_type, name, source)
    elif family == "nemotron_h":
        spec = _nemotron_h(cfg, model_type, name, source, notes)
    else:
        spec = _decoder(cfg, model_type, family, name, source, notes)
    vision, counted = vision_params(model_type, dict.get(cfg, "vision_config"), spec.hidden_size)
    if vision:
        cfg.read.add("vision_config")
        spec = _with(spec, vision_params=vision)
        notes.append(f"vision tower ({counted}, {vision / 1e9:.2f}B parameters) counted in the total but not "
                     "planned: memory, time and layouts are the language model's")
    ignored = _ignored(cfg)
    notes += [f"{key}: {text}" for key, text in INFORMATIONAL.items() if dict.get(cfg, key)]
    notes += [f"ignored: {item}" for item in ignored]
    return _with(spec, ignored_features=tuple(ignored), notes=tuple(notes))


DSA_TYPES = ("deepseek_v32", "glm_moe_dsa")
# How Megatron-Bridge trains GLM-5 (``GLM5Bridge.provider_bridge``, models/glm_moe_dsa/glm5_bridge.py L138-141): the
# indexer trained with a sparse KL loss of coefficient 0.001. DeepSeek-V3.2's config carries no training setting:
# Megatron-Core's default, no indexer loss (TC ``dsa_indexer_loss_coeff`` None).
DSA_TRAINING = {"glm_moe_dsa": (0.001, True), "deepseek_v32": (0.0, False)}


def _dsa(cfg: _Config, model_type: str, layers: int, mla: MLASpec | None, notes: list[str]) -> DSASpec:
    """The DeepSeek Sparse Attention of a DeepSeek-V3.2 / GLM-5 config (Megatron-Bridge ``glm5_bridge.py``
    L130-141: ``index_head_dim`` / ``index_n_heads`` / ``index_topk`` / ``index_topk_freq`` /
    ``index_skip_topk_offset``). GLM-5.2's ``indexer_types`` ("full" = the layer runs its indexer) must agree with
    the frequency and offset, which are what Megatron-Core reads."""
    if mla is None:
        raise ConfigError(field="kv_lora_rank", value=None, rule=f"{model_type} is DSA over multi-latent attention "
                          "(experimental_attention_variant_module_specs.py L100)", fix="pass the model's config.json")
    loss, sparse = DSA_TRAINING[model_type]
    dsa = DSASpec(n_heads=_int(cfg, "index_n_heads", model_type), head_dim=_int(cfg, "index_head_dim", model_type),
                  topk=_int(cfg, "index_topk", model_type),
                  topk_freq=_opt_int(cfg, "index_topk_freq", model_type, 1) or 1,
                  skip_topk_offset=_opt_int(cfg, "index_skip_topk_offset", model_type, 0) or 0,
                  loss_coeff=loss, sparse_loss=sparse)
    types = cfg.get("indexer_types")
    if types is not None:
        expected = ["full" if dsa.computes_topk(i + 1) else "shared" for i in range(layers)]
        if list(types) != expected:
            raise ConfigError(field="indexer_types", value=repr(types)[:60],
                              rule=f"disagrees with index_topk_freq {dsa.topk_freq} / index_skip_topk_offset "
                                   f"{dsa.skip_topk_offset}, which Megatron-Core reads (is_dsa_skip_topk_layer)",
                              fix="pass the model's config.json unchanged")
    mlp_types = cfg.get("mlp_layer_types")
    first_dense = cfg.get("first_k_dense_replace") or 0
    if mlp_types is not None and list(mlp_types) != ["dense"] * first_dense + ["sparse"] * (layers - first_dense):
        raise ConfigError(field="mlp_layer_types", value=repr(mlp_types)[:60],
                          rule=f"megasolve reads the MoE layers from first_k_dense_replace ({first_dense}), as "
                               "Megatron-Bridge does (glm5_bridge.py moe_layer_freq)", fix="pass the config unchanged")
    for key in ("qk_head_dim", "head_dim"):  # GLM-5: qk_nope + qk_rope (Bridge recovers the RoPE width from it)
        cfg.get(key)
    notes.append(DSA_SPEED_NOTE)
    if loss:
        notes.append(f"DSA indexer trained as Megatron-Bridge trains {model_type} (--dsa-indexer-loss-coeff {loss}"
                     f"{', --dsa-indexer-use-sparse-loss' if sparse else ''})")
    else:
        notes.append("DSA indexer loss not in the config: planned without it (Megatron-Core's default; "
                     "--dsa-indexer-loss-coeff > 0 adds the indexer's backward and the KL target)")
    return dsa


# ChatGLM keys -> the Llama reader's (modeling_chatglm.py ``ChatGLMConfig``); and the values of the ChatGLM keys
# that change the layer, as GLM-4 sets them: anything else is a layer megasolve does not build
_CHATGLM_NAMES = {"num_layers": "num_hidden_layers", "ffn_hidden_size": "intermediate_size", "kv_channels": "head_dim",
                  "padded_vocab_size": "vocab_size", "seq_length": "max_position_embeddings",
                  "add_qkv_bias": "attention_bias"}
_CHATGLM_FIXED = {"rmsnorm": True, "post_layer_norm": True, "apply_residual_connection_post_layernorm": False,
                  "add_bias_linear": False, "fp32_residual_connection": False}


def _chatglm_as_llama(raw: dict[str, Any]) -> dict[str, Any]:
    """A ChatGLM / GLM-4 config (Megatron's argument names) in the Llama reader's keys: ``multi_query_group_num``
    KV heads when ``multi_query_attention``, RoPE on half of each head (``RotaryEmbedding(rotary_dim // 2)`` of
    ``kv_channels``: ``partial_rotary_factor`` 0.5), the output layer untied unless said.

    >>> out = _chatglm_as_llama({"model_type": "chatglm", "num_layers": 40, "hidden_size": 4096,
    ...     "ffn_hidden_size": 13696, "kv_channels": 128, "num_attention_heads": 32, "multi_query_attention": True,
    ...     "multi_query_group_num": 2, "padded_vocab_size": 151552, "add_qkv_bias": True, "rmsnorm": True})
    >>> out["num_hidden_layers"], out["num_key_value_heads"], out["partial_rotary_factor"], out["attention_bias"]
    (40, 2, 0.5, True)
    """
    for key, value in _CHATGLM_FIXED.items():
        if key in raw and bool(raw[key]) != value:
            raise ConfigError(field=key, value=raw[key], rule=f"megasolve builds ChatGLM layers with {key}={value} "
                              "(GLM-4's): this layer is another", fix="describe the model with Megatron argument "
                              "names in a YAML file (see README, --model)")
    out = {k: v for k, v in raw.items() if k not in _CHATGLM_FIXED and k not in ("multi_query_attention",
                                                                               "multi_query_group_num")}
    for old, new in _CHATGLM_NAMES.items():
        if old in out:
            out[new] = out.pop(old)
    heads = raw.get("num_attention_heads")
    out["num_key_value_heads"] = raw.get("multi_query_group_num") if raw.get("multi_query_attention") else heads
    out.setdefault("partial_rotary_factor", 0.5)
    out.setdefault("tie_word_embeddings", False)
    return out


def _with(spec: ModelSpec, **changes: Any) -> ModelSpec:
    from dataclasses import replace

    return replace(spec, **changes)


def _ignored(cfg: _Config) -> list[str]:
    """Keys not read that change compute or memory (``UNMODELLED``) or that megasolve does not know."""
    out = []
    for key in sorted(set(dict.keys(cfg)) - cfg.read - NO_EFFECT - set(INFORMATIONAL)):
        value = dict.__getitem__(cfg, key)
        if value in (None, False, 0, [], {}, ""):
            continue
        if key in UNMODELLED:
            out.append(f"{key}: {UNMODELLED[key]}")
        else:
            out.append(f"{key}={_short(value)}: not a field megasolve reads; if it changes the layers, the plan "
                       "does not include it")
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _gpt2(cfg: _Config, model_type: str, name: str, source: str) -> ModelSpec:
    hidden = _int(cfg, "n_embd", model_type, "hidden_size")
    layers = check_num_layers(_int(cfg, "n_layer", model_type, "num_hidden_layers"), "n_layer")
    heads = _int(cfg, "n_head", model_type, "num_attention_heads")
    ffn = _opt_int(cfg, "n_inner", model_type, None) or 4 * hidden
    return ModelSpec(
        name=name, num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn,
        num_attention_heads=heads, num_query_groups=heads, vocab_size=_int(cfg, "vocab_size", model_type),
        max_position_embeddings=_opt_int(cfg, "n_positions", model_type, 1024) or 1024,
        untie_embeddings_and_output_weights=not cfg.get("tie_word_embeddings", True),
        swiglu=False, normalization="LayerNorm", add_bias_linear=True,
        position_embedding_type="learned_absolute", source=source)


def _nemotron_h(cfg: _Config, model_type: str, name: str, source: str, notes: list[str]) -> ModelSpec:
    """Nemotron-H / Nemotron-3 (``NemotronHForCausalLM``) as Megatron-Core's hybrid ``MambaModel``:
    ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP, E MoE), squared-ReLU MLPs (not gated),
    RMSNorm, attention without position embedding (MambaModel's default ``position_embedding_type='none'``,
    ``models/mamba/mamba_model.py`` L76)."""
    pattern = _get(cfg, "hybrid_override_pattern", model_type)
    if not isinstance(pattern, str):
        raise ConfigError(field="hybrid_override_pattern", value=repr(pattern)[:40], rule="must be a string",
                          fix='e.g. "M-M-M*-"')
    layers = check_num_layers(_int(cfg, "num_hidden_layers", model_type), "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads", model_type)
    mamba = MambaSpec(num_heads=_int(cfg, "mamba_num_heads", model_type),
                      head_dim=_int(cfg, "mamba_head_dim", model_type),
                      state_dim=_int(cfg, "ssm_state_size", model_type),
                      num_groups=_int(cfg, "n_groups", model_type, "mamba_n_groups"),
                      conv_kernel=_opt_int(cfg, "conv_kernel", model_type, None) or _opt_int(
                          cfg, "mamba_d_conv", model_type, 4) or 4)
    expand = cfg.get("expand", cfg.get("mamba_expand"))
    if expand is not None and mamba.d_inner != expand * _int(cfg, "hidden_size", model_type):
        notes.append(f"mamba_num_heads * mamba_head_dim ({mamba.d_inner}) sets d_inner, not expand ({expand}): "
                     "Megatron-Core's rule when mamba_num_heads is given (mamba_mixer.py L229-232)")
    activation = cfg.get("mlp_hidden_act", "relu2")
    moe = None
    if "E" in pattern:
        shared = _opt_int(cfg, "moe_shared_expert_intermediate_size", model_type, 0) or 0
        # moe_latent_size: latent experts (Nemotron 3 Super; Megatron-Bridge nemotron_h_bridge.py L320-321)
        moe = MoESpec(num_experts=_int(cfg, "n_routed_experts", model_type),
                      top_k=_int(cfg, "num_experts_per_tok", model_type),
                      expert_ffn_hidden_size=_int(cfg, "moe_intermediate_size", model_type),
                      shared_expert_ffn_hidden_size=shared, layer_pattern=tuple(int(c == "E") for c in pattern),
                      latent_size=_opt_int(cfg, "moe_latent_size", model_type, None))
    bias = bool(cfg.get("use_bias", False)) or bool(cfg.get("mlp_bias", False))
    if bias or cfg.get("use_conv_bias", True) is False:
        notes.append("use_bias / use_conv_bias differ from Megatron-Core's Mamba mixer (no linear bias, conv bias on): "
                     "counted as Megatron-Core builds it")
    return ModelSpec(
        name=name, num_layers=layers, hidden_size=_int(cfg, "hidden_size", model_type),
        ffn_hidden_size=_int(cfg, "intermediate_size", model_type), num_attention_heads=heads,
        num_query_groups=_opt_int(cfg, "num_key_value_heads", model_type, heads) or heads,
        kv_channels=_opt_int(cfg, "head_dim", model_type, None) or _opt_int(cfg, "attention_head_dim", model_type, None),
        vocab_size=_int(cfg, "vocab_size", model_type),
        max_position_embeddings=_opt_int(cfg, "max_position_embeddings", model_type, 4096) or 4096,
        untie_embeddings_and_output_weights=not cfg.get("tie_word_embeddings", False),
        swiglu=activation in ("silu", "swiglu"), normalization="RMSNorm",
        activation="squared_relu" if activation in ("relu2", "squared_relu") else "",
        add_qkv_bias=bool(cfg.get("attention_bias", False)), position_embedding_type="none",
        moe=moe, hybrid_pattern=pattern, mamba=mamba, source=source)


def _rotary_percent(cfg: _Config, head_dim: int | None, model_type: str = "", notes: list[str] | None = None) -> float:
    """Partial rotary: ``partial_rotary_factor`` (GLM, Phi-4-mini; also inside transformers 5's
    ``rope_parameters``) or MiniMax's ``rotary_dim`` in channels; else a documented class default
    (Qwen3.5: 0.25), said in ``notes``."""
    factor = cfg.get("partial_rotary_factor")
    rope = cfg.get("rope_parameters")
    if factor is None and isinstance(rope, dict):
        factor = rope.get("partial_rotary_factor")
    rotary_dim = cfg.get("rotary_dim")
    if factor is None and rotary_dim and head_dim:
        factor = rotary_dim / head_dim
    default = DOCUMENTED_DEFAULTS.get(model_type, {}).get("partial_rotary_factor")
    if factor is None and default is not None:
        factor = default
        if notes is not None:
            notes.append(f"partial_rotary_factor not set: transformers' documented default {default} "
                         f"({model_type} configuration class)")
    return float(factor) if factor else 1.0


def _decoder(cfg: _Config, model_type: str, family: str, name: str, source: str, notes: list[str]) -> ModelSpec:
    hidden = _int(cfg, "hidden_size", model_type)
    layers = check_num_layers(_int(cfg, "num_hidden_layers", model_type), "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads", model_type)
    kv_heads = _opt_int(cfg, "num_key_value_heads", model_type, None)
    if kv_heads is None:  # every transformers decoder config: num_key_value_heads = num_attention_heads
        kv_heads = heads
        if "kv_lora_rank" not in cfg:
            notes.append(f"num_key_value_heads not set: transformers' default = num_attention_heads ({heads})")
    moe = _moe(cfg, family, model_type, layers)
    if "first_k_dense_replace" in DOCUMENTED_DEFAULTS.get(model_type, {}) \
            and dict.get(cfg, "mlp_layer_types") is None and dict.get(cfg, "first_k_dense_replace") is None:
        notes.append("mlp_layer_types and first_k_dense_replace not set: transformers' default, the first layer "
                     f"dense and the others MoE ({model_type} configuration class)")
    if family == "mixtral" or (family == "qwen_moe" and moe is not None and all(moe.layer_pattern)):
        ffn = _opt_int(cfg, "intermediate_size", model_type, None) or moe.expert_ffn_hidden_size
    elif family == "llama4":
        ffn = _int(cfg, "intermediate_size_mlp", model_type)
    else:
        ffn = _int(cfg, "intermediate_size", model_type)
    mla = None
    if family == "deepseek" and cfg.get("kv_lora_rank") is not None:
        mla = MLASpec(q_lora_rank=_opt_int(cfg, "q_lora_rank", model_type, None),
                      kv_lora_rank=_int(cfg, "kv_lora_rank", model_type),
                      qk_head_dim=_int(cfg, "qk_nope_head_dim", model_type),
                      qk_pos_emb_head_dim=_int(cfg, "qk_rope_head_dim", model_type),
                      v_head_dim=_int(cfg, "v_head_dim", model_type))
    dsa = _dsa(cfg, model_type, layers, mla, notes) if model_type in DSA_TYPES else None
    head_dim = None if mla is not None else _opt_int(cfg, "head_dim", model_type, None)
    tied = cfg.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT
    attention_bias = bool(cfg.get("attention_bias", False))
    use_bias = bool(cfg.get("use_bias", False))  # ERNIE 4.5: every linear layer
    if model_type == "internlm2":  # InternLM2Attention / InternLM2MLP: one ``bias`` for wqkv, wo, w1, w2, w3
        use_bias = bool(cfg.get("bias", False))
    if model_type == "gpt_oss":  # GptOssAttention / GptOssExperts / GptOssTopKRouter: all biased
        bias_linear, qkv_bias = attention_bias, attention_bias
    elif model_type in ("glm4_moe", "minimax_m2"):  # Glm4MoeAttention: q/k/v bias only, o_proj bias=False
        bias_linear, qkv_bias = False, attention_bias
    else:
        bias_linear = (bool(cfg.get("mlp_bias", False)) and attention_bias) or use_bias
        qkv_bias = model_type in _QKV_BIAS_TYPES or attention_bias or use_bias
    if model_type in ("bailing_moe_v2", "sarvam_moe"):  # BailingMoeV2Attention: query_key_value(bias=use_qkv_bias),
        # dense(bias=use_bias)
        qkv_bias, bias_linear = bool(cfg.get("use_qkv_bias", False)), False
        if use_bias:
            notes.append("use_bias: the attention output projection's bias (hidden_size a layer) is not counted: "
                         "Megatron-Core biases it only with every linear layer (Megatron-Bridge's bailing bridge "
                         "sets add_bias_linear off)")
    if model_type == "seed_oss" and cfg.get("attention_out_bias") and not bias_linear:
        notes.append("attention_out_bias: the o_proj bias (hidden_size a layer) is not counted: Megatron-Core biases "
                     "o_proj only with every linear layer (--add-bias-linear)")
    qk_norm = model_type in _QK_NORM_TYPES
    if model_type in _TYPE_NOTES:
        notes.append(_TYPE_NOTES[model_type])
    if model_type in ("glm4_moe", "minimax_m2"):
        qk_norm = bool(cfg.get("use_qk_norm", False))
    if model_type in ("bailing_moe_v2", "sarvam_moe"):  # BailingMoeV2Config(use_qk_norm=True); Sarvam's bridges
        # build the QK-norm always
        qk_norm = bool(cfg.get("use_qk_norm", True))
    if model_type == "minimax_m2" and dict.get(cfg, "qk_norm_type", "per_layer") != "per_layer":
        cfg.read.add("qk_norm_type")  # per-head norms: what is counted
    linear, gdn = None, None
    if model_type in QWEN3_NEXT_TYPES:  # Qwen3NextConfig: every full_attention_interval-th layer softmax attention
        types = cfg.get("layer_types")
        if types is None:
            defaults = DOCUMENTED_DEFAULTS.get(model_type, {})
            if cfg.get("full_attention_interval") is None and "full_attention_interval" in defaults:
                cfg["full_attention_interval"] = defaults["full_attention_interval"]
                notes.append(f"layer_types and full_attention_interval not set: transformers' default interval "
                             f"{defaults['full_attention_interval']} (one softmax-attention layer in "
                             f"{defaults['full_attention_interval']})")
            interval = _int(cfg, "full_attention_interval", model_type)
            types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
        else:
            cfg.get("full_attention_interval")
        if not isinstance(types, list) or len(types) != layers or set(types) - {"linear_attention", "full_attention"}:
            raise ConfigError(field="layer_types", value=repr(types)[:60], rule=f"must list {layers} entries of "
                              "linear_attention / full_attention", fix="pass the model's config.json unchanged")
        cfg.read.add("layer_types")
        linear = tuple(int(t == "linear_attention") for t in types)
        gdn = GatedDeltaNetSpec(num_key_heads=_int(cfg, "linear_num_key_heads", model_type),
                                key_head_dim=_int(cfg, "linear_key_head_dim", model_type),
                                num_value_heads=_int(cfg, "linear_num_value_heads", model_type),
                                value_head_dim=_int(cfg, "linear_value_head_dim", model_type),
                                conv_kernel=_opt_int(cfg, "linear_conv_kernel_dim", model_type, 4) or 4)
        window, window_pattern = None, None
    else:
        window, window_pattern = _window(cfg, model_type, layers, notes)
    chunk, chunk_pattern, no_rope, l2_norm = None, None, None, False
    if family == "llama4":
        chunk = _opt_int(cfg, "attention_chunk_size", model_type, None)
        rope_layers = _int_list(cfg, "no_rope_layers", layers)  # Llama4TextAttention: 1 = uses RoPE
        interval = cfg.get("no_rope_layer_interval")
        if not rope_layers:
            if interval is None:
                interval = DOCUMENTED_DEFAULTS["llama4_text"]["no_rope_layer_interval"]
                notes.append(f"no_rope_layers empty and no_rope_layer_interval not set: transformers' default "
                             f"{interval} (every {interval}th layer without RoPE)")
            rope_layers = [int((i + 1) % interval != 0) for i in range(layers)]
        no_rope = tuple(1 - r for r in rope_layers)
        chunk_pattern = tuple(rope_layers) if chunk else None  # chunked attention on the RoPE layers
        l2_norm = bool(cfg.get("use_qk_norm", False))
        if chunk:
            notes.append(f"chunked attention ({chunk} tokens on {sum(rope_layers)} of {layers} layers) is costed as "
                         "the model computes it; Megatron-Core has no chunked-attention training flag "
                         "(attention.py L952), so a Megatron-Core run attends causally over the whole sequence "
                         "on those layers (more attention FLOPs at long sequences)")
    elif model_type == "minimax_m2":
        attn_types = _int_list(cfg, "attn_type_list", layers)
        if attn_types and not all(attn_types):
            raise ConfigError(field="attn_type_list", value="contains 0",
                              rule=UNSUPPORTED["minimax"], fix="no megasolve input can describe this model yet")
    sinks = model_type == "gpt_oss"  # GptOssAttention.sinks: one learned logit per head
    notes.extend(softmax_type_notes("learnable" if sinks else "vanilla"))
    max_pos = _opt_int(cfg, "max_position_embeddings", model_type, None)
    if max_pos is None:
        max_pos = 4096
        notes.append("max_position_embeddings not set: assumed 4096 (only limits --seq-len)")
    mtp = _opt_int(cfg, "num_nextn_predict_layers", model_type, 0) or 0
    if model_type in QWEN3_NEXT_TYPES:
        # Qwen3-Next / Qwen3.5 name their MTP layers mtp_num_hidden_layers (mtp.* weights, which transformers skips
        # on load); Megatron-Bridge maps it to mtp_num_layers (models/conversion/model_bridge.py CONFIG_MAPPING) and
        # Megatron-LM builds each as the last decoder layer's kind (gpt_builders.py: the block's layer_specs[-1]),
        # here a gated-attention layer
        mtp = mtp or _opt_int(cfg, "mtp_num_hidden_layers", model_type, 0) or 0
    return ModelSpec(
        name=name, num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn,
        num_attention_heads=heads, num_query_groups=kv_heads if mla is None else heads,
        kv_channels=head_dim, vocab_size=_int(cfg, "vocab_size", model_type),
        max_position_embeddings=max_pos,
        untie_embeddings_and_output_weights=not tied, swiglu=model_type not in _PLAIN_MLP_ACTIVATION,
        activation=_plain_mlp_activation(cfg, model_type, notes),
        qk_layernorm_all_heads=model_type == "olmoe",
        normalization="LayerNorm" if model_type in _LAYERNORM_TYPES else "RMSNorm",
        add_bias_linear=bias_linear, add_qkv_bias=qkv_bias,
        qk_layernorm=qk_norm, position_embedding_type="rope",
        moe=moe, mla=mla, dsa=dsa, mtp_num_layers=mtp,
        window_size=window, window_pattern=window_pattern, attention_chunk_size=chunk, chunk_pattern=chunk_pattern,
        no_rope_pattern=no_rope, rotary_percent=_rotary_percent(cfg, head_dim or (hidden // heads), model_type, notes),
        softmax_type="learnable" if sinks else "vanilla", qk_l2_norm=l2_norm,
        linear_attention_pattern=linear, gated_delta_net=gdn, attention_output_gate=model_type in QWEN3_NEXT_TYPES,
        source=source)
