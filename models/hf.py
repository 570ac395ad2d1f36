"""Read a Hugging Face ``config.json`` (as a plain dict) into a ``ModelSpec``.

No ``transformers`` import, no ``trust_remote_code``, no network: the file is JSON and the field
names are normalised with the alias table of ``reference/ecosystem.md`` section 1.2. transformers'
own class defaults are deliberately *not* applied (they silently differ between releases, e.g.
``num_nextn_predict_layers`` defaults to 1 in transformers 5 even for models without MTP).
"""

from __future__ import annotations

from typing import Any

from megasolve.models.errors import ConfigError
from megasolve.models.megatron_args import check_num_layers
from megasolve.models.spec import MLASpec, MoESpec, ModelSpec

# model_type -> family. Families share field names and defaults.
MODEL_TYPES = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama",
    "gemma": "llama", "gemma2": "llama", "gemma3_text": "llama",
    "mixtral": "mixtral", "qwen2_moe": "qwen_moe", "qwen3_moe": "qwen_moe",
    "deepseek_v2": "deepseek", "deepseek_v3": "deepseek", "gpt2": "gpt2",
}
# Wrapper configs whose language model sits in ``text_config``.
NESTED_TYPES = ("gemma3", "qwen2_5_vl", "llava", "mistral3")
_QKV_BIAS_TYPES = ("qwen2", "qwen2_moe")
_QK_NORM_TYPES = ("qwen3", "qwen3_moe", "gemma3_text", "deepseek_v2", "deepseek_v3")
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "gpt2")


def _get(cfg: dict[str, Any], name: str, model_type: str, *aliases: str) -> Any:
    for key in (name, *aliases):
        if cfg.get(key) is not None:
            return cfg[key]
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


def _flatten(cfg: dict[str, Any]) -> dict[str, Any]:
    """Lift ``text_config`` of multimodal wrappers (Gemma 3, VL models) to the top level."""
    text = cfg.get("text_config")
    if cfg.get("model_type") in NESTED_TYPES or (isinstance(text, dict) and "num_hidden_layers" not in cfg):
        if not isinstance(text, dict):
            raise ConfigError(field="text_config", value="missing",
                              rule=f"model_type '{cfg.get('model_type')}' keeps its language model there",
                              fix="pass the full config.json")
        merged = dict(text)
        merged.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        merged.setdefault("model_type", "gemma3_text")
        if merged.get("tie_word_embeddings") is None:
            merged.pop("tie_word_embeddings")
        return merged
    return cfg


def _moe(cfg: dict[str, Any], family: str, model_type: str, num_layers: int) -> MoESpec | None:
    if family == "mixtral":
        experts = _int(cfg, "num_local_experts", model_type)
        ffn = _int(cfg, "intermediate_size", model_type)
        pattern = [1] * num_layers
        shared, gate = 0, False
    elif family == "qwen_moe":
        experts = _opt_int(cfg, "num_experts", model_type, 0)
        if not experts:
            return None
        ffn = _int(cfg, "moe_intermediate_size", model_type)
        step = _opt_int(cfg, "decoder_sparse_step", model_type, 1) or 1
        dense_only = cfg.get("mlp_only_layers") or []
        if not isinstance(dense_only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in dense_only):
            raise ConfigError(field="mlp_only_layers", value=repr(dense_only)[:80], rule="must be a list of layer numbers",
                              fix="e.g. \"mlp_only_layers\": [0, 1], or [] for none")
        dense_only = set(dense_only)
        pattern = [int(i not in dense_only and (i + 1) % step == 0) for i in range(num_layers)]
        shared = _opt_int(cfg, "shared_expert_intermediate_size", model_type, 0) or 0
        gate = model_type == "qwen2_moe" and shared > 0
    elif family == "deepseek":
        experts = _opt_int(cfg, "n_routed_experts", model_type, 0)
        if not experts:
            return None
        ffn = _int(cfg, "moe_intermediate_size", model_type)
        first_dense = _opt_int(cfg, "first_k_dense_replace", model_type, 0) or 0
        freq = _opt_int(cfg, "moe_layer_freq", model_type, 1) or 1
        pattern = [int(i >= first_dense and i % freq == 0) for i in range(num_layers)]
        shared = (_opt_int(cfg, "n_shared_experts", model_type, 0) or 0) * ffn
        gate = False
    else:
        return None
    return MoESpec(num_experts=experts, top_k=_int(cfg, "num_experts_per_tok", model_type),
                   expert_ffn_hidden_size=ffn, shared_expert_ffn_hidden_size=shared,
                   shared_expert_gate=gate, layer_pattern=tuple(pattern))


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
    cfg = _flatten(cfg)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or model_type not in MODEL_TYPES:
        raise ConfigError(field="model_type", value=model_type,
                          rule=f"not a supported architecture ({', '.join(sorted(MODEL_TYPES))})",
                          fix="describe the model with Megatron argument names in a YAML file instead")
    family = MODEL_TYPES[model_type]
    if family == "gpt2":
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

    hidden = _int(cfg, "hidden_size", model_type)
    layers = check_num_layers(_int(cfg, "num_hidden_layers", model_type), "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads", model_type)
    kv_heads = _opt_int(cfg, "num_key_value_heads", model_type, heads) or heads
    moe = _moe(cfg, family, model_type, layers)
    if family == "mixtral" or (family == "qwen_moe" and moe is not None and all(moe.layer_pattern)):
        ffn = _opt_int(cfg, "intermediate_size", model_type, None) or moe.expert_ffn_hidden_size
    else:
        ffn = _int(cfg, "intermediate_size", model_type)
    mla = None
    if family == "deepseek":
        mla = MLASpec(q_lora_rank=_opt_int(cfg, "q_lora_rank", model_type, None),
                      kv_lora_rank=_int(cfg, "kv_lora_rank", model_type),
                      qk_head_dim=_int(cfg, "qk_nope_head_dim", model_type),
                      qk_pos_emb_head_dim=_int(cfg, "qk_rope_head_dim", model_type),
                      v_head_dim=_int(cfg, "v_head_dim", model_type))
    head_dim = None if mla is not None else _opt_int(cfg, "head_dim", model_type, None)
    tied = cfg.get("tie_word_embeddings")
    if tied is None:
        tied = model_type in _TIED_BY_DEFAULT
    attention_bias = bool(cfg.get("attention_bias", False))
    return ModelSpec(
        name=name, num_layers=layers, hidden_size=hidden, ffn_hidden_size=ffn,
        num_attention_heads=heads, num_query_groups=kv_heads if mla is None else heads,
        kv_channels=head_dim, vocab_size=_int(cfg, "vocab_size", model_type),
        max_position_embeddings=_opt_int(cfg, "max_position_embeddings", model_type, 4096) or 4096,
        untie_embeddings_and_output_weights=not tied, swiglu=True, normalization="RMSNorm",
        add_bias_linear=bool(cfg.get("mlp_bias", False)) and attention_bias,
        add_qkv_bias=model_type in _QKV_BIAS_TYPES or attention_bias,
        qk_layernorm=model_type in _QK_NORM_TYPES, position_embedding_type="rope",
        moe=moe, mla=mla, mtp_num_layers=_opt_int(cfg, "num_nextn_predict_layers", model_type, 0) or 0,
        source=source)
