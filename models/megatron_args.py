"""Read a YAML/JSON mapping of Megatron-LM argument names into a ``ModelSpec``.

Megatron users think in launch flags, so a file like::

    num_layers: 32
    hidden_size: 4096
    ffn_hidden_size: 14336
    num_attention_heads: 32
    group_query_attention: true
    num_query_groups: 8
    swiglu: true
    normalization: RMSNorm
    disable_bias_linear: true
    untie_embeddings_and_output_weights: true
    position_embedding_type: rope
    vocab_size: 128256

describes Llama-3.1-8B. Keys may use dashes or underscores (``--num-layers`` style). Missing
optional keys take **Megatron-LM's own defaults** (ARG ``_add_network_size_args``): LayerNorm, biases
on, tied embeddings, learned absolute position embeddings, ``F = 4h`` (or the SwiGLU rule) --
exactly what the same flags would launch.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from megasolve.models.errors import ConfigError
from megasolve.models.spec import (DSA_SPEED_NOTE, DSASpec, GatedDeltaNetSpec, MambaSpec, MLASpec, MoESpec,
                                   ModelSpec, softmax_type_notes)

REQUIRED = ("num_layers", "hidden_size", "num_attention_heads")
# Every key the reader understands: the ones it reads, and Megatron-LM arguments that change neither
# parameters, FLOPs nor memory (numerics, initialisation, RoPE frequencies, tokenizer, dropout rates).
# Anything else is an error naming the closest known keys: a silently dropped ``window_size:`` typo
# would plan a different model (ARG ``_add_network_size_args`` and friends for the names).
DSA_KEYS = ("dsa_indexer_n_heads", "dsa_indexer_head_dim", "dsa_indexer_topk", "dsa_indexer_topk_freq",
            "dsa_indexer_skip_topk_offset", "dsa_indexer_loss_coeff", "dsa_indexer_use_sparse_loss",
            "dsa_kernel_backend")  # TC L317-342
READ_KEYS = frozenset({
    "name", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "group_query_attention",
    "num_query_groups", "kv_channels", "vocab_size", "padded_vocab_size", "max_position_embeddings", "seq_length",
    "swiglu", "normalization", "add_bias_linear", "disable_bias_linear", "add_qkv_bias", "qk_layernorm",
    "share_embeddings_and_output_weights", "untie_embeddings_and_output_weights", "position_embedding_type",
    "num_moe_experts", "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
    "moe_shared_expert_gate", "moe_layer_freq", "moe_router_num_groups", "moe_router_group_topk", "moe_latent_size",
    "multi_latent_attention", "q_lora_rank", "kv_lora_rank",
    "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers", "mtp_use_repeated_layer",
    "make_vocab_size_divisible_by",
    "window_size", "window_attn_skip_freq", "no_rope_freq", "rotary_percent", "softmax_type", "qk_l2_norm",
    "hybrid_override_pattern", "hybrid_layer_pattern", "mamba_state_dim", "mamba_head_dim", "mamba_num_groups",
    "mamba_num_heads",
    "is_hybrid_model", "squared_relu", "experimental_attention_variant", "linear_attention_freq",
    "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_conv_kernel_dim", "attention_output_gate", *DSA_KEYS,
})
NO_EFFECT_KEYS = frozenset({
    "rotary_base", "rope_scaling_factor", "use_rope_scaling", "rotary_scaling_factor", "rotary_interleaved",
    "rope_type", "mscale", "mscale_all_dim", "original_max_position_embeddings", "beta_fast", "beta_slow",
    "dsa_indexer_rope_interleaved", "dsa_indexer_rotate_activation", "dsa_indexer_scoring_relu",
    "dsa_indexer_k_norm_epsilon", "dsa_indexer_k_norm_fp32",
    "norm_epsilon", "layernorm_epsilon", "apply_layernorm_1p", "layernorm_zero_centered_gamma", "init_method_std",
    "attention_dropout", "hidden_dropout", "tokenizer_type", "tokenizer_model", "moe_router_score_function",
    "moe_router_enable_expert_bias", "moe_router_bias_update_rate", "moe_router_topk_scaling_factor",
    "moe_router_pre_softmax", "moe_router_load_balancing_type",
    "moe_aux_loss_coeff", "moe_z_loss_coeff", "moe_router_dtype", "moe_token_dispatcher_type", "moe_grouped_gemm",
    "moe_permute_fusion", "mtp_loss_scaling_factor", "attention_softmax_in_fp32", "masked_softmax_fusion",
    "bias_swiglu_fusion", "bias_gelu_fusion", "bias_dropout_fusion", "apply_rope_fusion", "activation_func_clamp_value",
    "glu_linear_offset", "quick_geglu", "activation_func", "softmax_scale", "attention_backend", "fp16", "bf16",
    "params_dtype", "qk_clip", "use_mcore_models", "transformer_impl", "kv_channels_v",
})
# Megatron arguments of architectures megasolve cannot plan yet: key -> what is missing.
UNPLANNABLE_KEYS = {
    "hybrid_attention_ratio": "layer ratios are not read: give the layers as hybrid_override_pattern",
    "hybrid_mlp_ratio": "layer ratios are not read: give the layers as hybrid_override_pattern",
}
# Far beyond any trained model (the deepest have ~200 layers), small enough that per-layer lists and
# the pipeline-split search stay cheap: 10**12 layers hung building the MoE layer pattern.
MAX_LAYERS = 10_000


def check_num_layers(value: int, field: str = "num_layers") -> int:
    """Reject absurd depths before anything allocates per-layer data.

    >>> check_num_layers(61)
    61
    """
    if value > MAX_LAYERS:
        raise ConfigError(field=field, value=value, rule=f"more than {MAX_LAYERS:,} layers",
                          fix="check the file: the deepest trained models have about 200 layers")
    return value


def _router_groups(args: dict[str, Any], experts: int) -> dict[str, int]:
    """``--moe-router-num-groups`` / ``--moe-router-group-topk`` (group-limited routing; TC: both None by default,
    no limit), as MoESpec fields."""
    groups = _typed(args, "moe_router_num_groups", int) or 1
    group_topk = _typed(args, "moe_router_group_topk", int) or groups
    if groups <= 1:
        return {}
    if experts % groups or not 1 <= group_topk <= groups:
        raise ConfigError(field="moe_router_num_groups", value=f"{groups} (group topk {group_topk})",
                          rule=f"must divide the {experts} experts, with 1 <= group topk <= groups (TC)",
                          fix="set --moe-router-num-groups to a divisor of --num-experts")
    return {"router_num_groups": groups, "router_group_topk": group_topk}


def parse_layer_freq(value: Any, num_layers: int) -> tuple[int, ...]:
    """``--moe-layer-freq``: an int N (layer i is MoE iff ``i % N == 0``), a list, or a string such as
    ``"([0]*3+[1]*58)"``, evaluated safely (lists of 0/1, ``*`` by an int, ``+``; nothing else).

    >>> parse_layer_freq("([0]*1+[1]*3)", 4)
    (0, 1, 1, 1)
    >>> parse_layer_freq(2, 4)
    (1, 0, 1, 0)
    """
    if isinstance(value, bool):
        raise ConfigError(field="moe_layer_freq", value=value, rule="must be an int or a list",
                          fix='e.g. 1 or "([0]*3+[1]*58)"')
    if isinstance(value, int):
        if value <= 0:
            raise ConfigError(field="moe_layer_freq", value=value, rule="must be >= 1", fix="use 1")
        return tuple(int(i % value == 0) for i in range(num_layers))
    if isinstance(value, str):
        try:
            value = _eval_list_expr(ast.parse(value.strip(), mode="eval").body)
        except (SyntaxError, ValueError, TypeError, RecursionError) as exc:
            raise ConfigError(field="moe_layer_freq", value=value,
                              rule=f"not a list expression ({exc})",
                              fix='write e.g. "([0]*3+[1]*58)"') from None
    if not isinstance(value, list) or any(v not in (0, 1) or isinstance(v, bool) for v in value):
        raise ConfigError(field="moe_layer_freq", value=value, rule="must be a list of 0/1",
                          fix='write e.g. "([0]*3+[1]*58)"')
    return tuple(value)


def _eval_list_expr(node: ast.AST) -> list[int]:
    if isinstance(node, ast.List):
        out = []
        for element in node.elts:
            if not isinstance(element, ast.Constant) or not isinstance(element.value, int):
                raise ValueError("list elements must be integers")
            out.append(element.value)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _eval_list_expr(node.left) + _eval_list_expr(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = node.left, node.right
        if isinstance(right, ast.List) or isinstance(right, ast.BinOp):
            left, right = right, left
        if not isinstance(right, ast.Constant) or not isinstance(right.value, int) or not 0 <= right.value <= 1_000_000:
            raise ValueError("a list can only be repeated by a small non-negative integer")
        return _eval_list_expr(left) * right.value
    raise ValueError(f"unsupported expression {ast.dump(node)[:40]}")


def check_known_keys(args: dict[str, Any]) -> None:
    """An unknown key is an error with the closest known names (``difflib``), never dropped.

    >>> check_known_keys({"num_layers": 2, "windw_size": [4096, 0]})
    Traceback (most recent call last):
    ...
    megasolve.models.errors.ConfigError: windw_size=[4096, 0]: not a Megatron argument megasolve reads; fix: did you mean window_size, hidden_size? (keys that change no parameter, FLOP or byte are listed in megatron_args.NO_EFFECT_KEYS)
    """
    import difflib

    for key in args:
        if key in UNPLANNABLE_KEYS:
            raise ConfigError(field=key, value=args[key], rule=f"not plannable yet: {UNPLANNABLE_KEYS[key]}",
                              fix="no megasolve input can describe this model yet")
        if key in READ_KEYS or key in NO_EFFECT_KEYS:
            continue
        close = difflib.get_close_matches(key, sorted(READ_KEYS | NO_EFFECT_KEYS), n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else "remove it or use a Megatron-LM argument name"
        raise ConfigError(field=key, value=args[key], rule="not a Megatron argument megasolve reads",
                          fix=f"{hint} (keys that change no parameter, FLOP or byte are listed in "
                              "megatron_args.NO_EFFECT_KEYS)")


def _window(args: dict[str, Any], num_layers: int) -> tuple[int | None, tuple[int, ...] | None]:
    """``--window-size L,R`` (ARG L2384, ``tuple_type``: a "L,R" string or a list) and
    ``--window-attn-skip-freq`` (int N: every N-th layer full attention; or a 0/1 list, 1 = windowed;
    ``transformer/utils.py::is_layer_window_attention`` L531-548)."""
    raw = args.get("window_size")
    if raw is None:
        if args.get("window_attn_skip_freq") is not None:
            raise ConfigError(field="window_attn_skip_freq", value=args["window_attn_skip_freq"],
                              rule="has no effect without window_size", fix="add window_size: [W, 0] or drop it")
        return None, None
    parts = raw.split(",") if isinstance(raw, str) else raw
    try:
        left, right = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise ConfigError(field="window_size", value=raw, rule="must be two integers (left, right)",
                          fix='e.g. window_size: [4096, 0] or "4096,0"') from None
    if right != 0 or left <= 0:
        raise ConfigError(field="window_size", value=raw, rule="causal sliding windows are (W, 0) with W > 0",
                          fix="use [W, 0]; -1 (infinite) means no window: drop the key")
    freq = args.get("window_attn_skip_freq")
    if freq is None:
        return left, None
    if isinstance(freq, int) and not isinstance(freq, bool):
        if freq <= 0:
            raise ConfigError(field="window_attn_skip_freq", value=freq, rule="must be >= 1", fix="e.g. 2")
        return left, tuple(int((i + 1) % freq != 0) for i in range(num_layers))  # layer_number is 1-based
    try:
        pattern = parse_layer_freq(freq if not isinstance(freq, int) else [freq], num_layers)
    except ConfigError as exc:
        raise ConfigError(field="window_attn_skip_freq", value=freq, rule=exc.rule, fix=exc.fix) from None
    return left, pattern


def _no_rope(args: dict[str, Any], num_layers: int) -> tuple[int, ...] | None:
    """``--no-rope-freq`` (TC L291-296, L3138-3153): int N -> every N-th layer skips RoPE; or a 0/1 list."""
    freq = args.get("no_rope_freq")
    if freq is None:
        return None
    if isinstance(freq, int) and not isinstance(freq, bool):
        if freq <= 0 or num_layers % freq:
            raise ConfigError(field="no_rope_freq", value=freq, rule=f"must divide num_layers ({num_layers}) "
                              "(TC L3141-3145)", fix="use a divisor of num_layers or a 0/1 list")
        return tuple(int((i + 1) % freq == 0) for i in range(num_layers))
    try:
        return parse_layer_freq(freq, num_layers)
    except ConfigError as exc:
        raise ConfigError(field="no_rope_freq", value=freq, rule=exc.rule, fix=exc.fix) from None


def _dsa(args: dict[str, Any], mla: MLASpec | None) -> DSASpec | None:
    """``--experimental-attention-variant dsa`` with the ``--dsa-indexer-*`` sizes (TC L317-338 @d98e8a6: no
    defaults for the head count, head dim and top-k; frequency 1, offset 0, no indexer loss).

    >>> _dsa({"experimental_attention_variant": "dsa", "dsa_indexer_n_heads": 64, "dsa_indexer_head_dim": 128,
    ...       "dsa_indexer_topk": 2048}, MLASpec(q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128,
    ...                                          qk_pos_emb_head_dim=64, v_head_dim=128)).topk
    2048
    """
    if args.get("experimental_attention_variant") != "dsa":
        defaults = {"dsa_indexer_topk_freq": 1, "dsa_indexer_skip_topk_offset": 0, "dsa_indexer_loss_coeff": 0,
                    "dsa_kernel_backend": "none"}
        stray = [k for k in DSA_KEYS if args.get(k) not in (None, False, defaults.get(k))]
        if stray:
            raise ConfigError(field=stray[0], value=args[stray[0]], rule="has no effect without "
                              "experimental_attention_variant: dsa", fix="add experimental_attention_variant: dsa "
                              "or drop it")
        return None
    missing = [k for k in DSA_KEYS[:3] if args.get(k) is None]
    if missing:
        raise ConfigError(field=missing[0], value="missing", rule="required with experimental_attention_variant dsa "
                          "(TC L317-324: no default)", fix=f"set {missing[0]} (e.g. 64 / 128 / 2048 for DeepSeek-V3.2)")
    return DSASpec(n_heads=_typed(args, "dsa_indexer_n_heads", int), head_dim=_typed(args, "dsa_indexer_head_dim", int),
                   topk=_typed(args, "dsa_indexer_topk", int),
                   topk_freq=_typed(args, "dsa_indexer_topk_freq", int, 1),
                   skip_topk_offset=_typed(args, "dsa_indexer_skip_topk_offset", int, 0),
                   loss_coeff=float(args.get("dsa_indexer_loss_coeff") or 0.0),
                   sparse_loss=_typed(args, "dsa_indexer_use_sparse_loss", bool, False))


def _dsa_backend_notes(args: dict[str, Any], dsa: DSASpec | None) -> tuple[str, ...]:
    """What megasolve assumes of ``--dsa-kernel-backend`` (TC L340: none | tilelang | cudnn; default none)."""
    if dsa is None:
        return ()
    if args.get("dsa_kernel_backend") in ("tilelang", "cudnn"):
        return (DSA_SPEED_NOTE,)
    return (DSA_SPEED_NOTE, "dsa_kernel_backend none (Megatron-Core's default) runs DSA's PyTorch path, whose s x s x heads fp32 "
            "index and attention scores are not modelled: memory assumes a fused backend (tilelang or cudnn, "
            "which the exports set)",)


def _linear_attention(args: dict[str, Any], num_layers: int) -> tuple[tuple[int, ...] | None,
                                                                     GatedDeltaNetSpec | None]:
    """``--experimental-attention-variant gated_delta_net`` with ``--linear-attention-freq`` (TC L250-294):
    an int N -> every N-th layer (1-based) softmax attention, the others gated DeltaNet; or a 0/1 list (1 =
    DeltaNet) or its list expression (``experimental_attention_variant_module_specs.py``
    ``get_linear_attention_pattern``). The ``linear_*`` sizes default to TC's (kernel 4, key / value head
    dim 128, 16 key and 32 value heads, L282-294).

    >>> _linear_attention({"experimental_attention_variant": "gated_delta_net", "linear_attention_freq": 4}, 8)[0]
    (1, 1, 1, 0, 1, 1, 1, 0)
    """
    variant = args.get("experimental_attention_variant")
    freq = args.get("linear_attention_freq")
    if variant is None:
        if freq is not None:
            raise ConfigError(field="linear_attention_freq", value=freq,
                              rule="has no effect without experimental_attention_variant",
                              fix="add experimental_attention_variant: gated_delta_net or drop it")
        return None, None
    if variant == "dsa":  # DeepSeek Sparse Attention: an attention variant, read by ``_dsa``
        if freq is not None:
            raise ConfigError(field="linear_attention_freq", value=freq, rule="has no effect with the dsa variant",
                              fix="drop linear_attention_freq")
        return None, None
    if variant not in ("gated_delta_net", "gdn"):
        raise ConfigError(field="experimental_attention_variant", value=variant,
                          rule="not plannable yet: only gated_delta_net (gdn) and dsa have cost models",
                          fix="no megasolve input can describe this model yet")
    if freq is None:
        raise ConfigError(field="linear_attention_freq", value="missing",
                          rule="required with gated_delta_net (TC L948-951)", fix="e.g. linear_attention_freq: 4")
    if isinstance(freq, int) and not isinstance(freq, bool):
        if freq <= 0:
            raise ConfigError(field="linear_attention_freq", value=freq, rule="must be >= 1", fix="e.g. 4")
        pattern = tuple(int((i + 1) % freq != 0) for i in range(num_layers))
    else:
        try:
            pattern = parse_layer_freq(freq, num_layers)
        except ConfigError as exc:
            raise ConfigError(field="linear_attention_freq", value=freq, rule=exc.rule, fix=exc.fix) from None
        if len(pattern) != num_layers:
            raise ConfigError(field="linear_attention_freq", value=f"list of {len(pattern)}",
                              rule=f"must hold one 0/1 entry per layer ({num_layers})",
                              fix="give one entry per decoder layer (1 = gated DeltaNet)")
    gdn = GatedDeltaNetSpec(num_key_heads=_typed(args, "linear_num_key_heads", int, 16),
                            key_head_dim=_typed(args, "linear_key_head_dim", int, 128),
                            num_value_heads=_typed(args, "linear_num_value_heads", int, 32),
                            value_head_dim=_typed(args, "linear_value_head_dim", int, 128),
                            conv_kernel=_typed(args, "linear_conv_kernel_dim", int, 4))
    for name in ("num_key_heads", "key_head_dim", "num_value_heads", "value_head_dim", "conv_kernel"):
        if getattr(gdn, name) <= 0:
            raise ConfigError(field=f"linear_{name}", value=getattr(gdn, name), rule="must be a positive integer",
                              fix="use the model's real size")
    if gdn.num_value_heads % gdn.num_key_heads:
        raise ConfigError(field="linear_num_value_heads", value=gdn.num_value_heads,
                          rule=f"must be a multiple of linear_num_key_heads ({gdn.num_key_heads}) (TC L969-972)",
                          fix="use a multiple of the key heads")
    return pattern, gdn


def _typed(args: dict[str, Any], name: str, kind: type, default: Any = None, required: bool = False) -> Any:
    value = args.get(name)
    if value is None:
        if required:
            raise ConfigError(field=name, value="missing", rule="required in a Megatron model file",
                              fix=f"add {name}: <value>")
        return default
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(field=name, value=repr(value), rule="must be true or false", fix="use a YAML boolean")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(field=name, value=repr(value), rule="must be an integer", fix="use a whole number")
        return value
    if not isinstance(value, kind):
        raise ConfigError(field=name, value=repr(value), rule=f"must be a {kind.__name__}", fix="fix its type")
    return value


def spec_from_megatron_args(raw: dict[str, Any], name: str = "megatron-model", source: str = "") -> ModelSpec:
    """Build a ``ModelSpec`` from Megatron argument names.

    >>> spec_from_megatron_args({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
    ...                          "vocab_size": 1000}).ffn_hidden_size
    256
    """
    if not isinstance(raw, dict):
        raise ConfigError(field="model file", value=type(raw).__name__,
                          rule="must be a mapping of Megatron argument names", fix="write key: value lines")
    args = {str(k).lstrip("-").replace("-", "_"): v for k, v in raw.items()}
    check_known_keys(args)
    for key in REQUIRED:
        _typed(args, key, int, required=True)
    h = args["hidden_size"]
    n = args["num_attention_heads"]
    swiglu = _typed(args, "swiglu", bool, False)
    ffn_default = int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h  # ARG L1320-1328
    ffn = _typed(args, "ffn_hidden_size", int, ffn_default)
    vocab = _typed(args, "vocab_size", int) or _typed(args, "padded_vocab_size", int)
    if vocab is None:
        raise ConfigError(field="vocab_size", value="missing", rule="required in a Megatron model file",
                          fix="add vocab_size: <tokenizer size>")
    gqa = _typed(args, "group_query_attention", bool, "num_query_groups" in args)
    groups = _typed(args, "num_query_groups", int, n) if gqa else n
    bias = _typed(args, "add_bias_linear", bool, not _typed(args, "disable_bias_linear", bool, False))
    if "share_embeddings_and_output_weights" in args:
        untie = not _typed(args, "share_embeddings_and_output_weights", bool)
    else:
        untie = _typed(args, "untie_embeddings_and_output_weights", bool, False)
    num_layers = check_num_layers(args["num_layers"])
    experts = _typed(args, "num_moe_experts", int) or _typed(args, "num_experts", int)
    moe = None
    if experts:
        moe = MoESpec(
            num_experts=experts, top_k=_typed(args, "moe_router_topk", int, 2),
            expert_ffn_hidden_size=_typed(args, "moe_ffn_hidden_size", int, ffn),
            shared_expert_ffn_hidden_size=_typed(args, "moe_shared_expert_intermediate_size", int, 0),
            shared_expert_gate=_typed(args, "moe_shared_expert_gate", bool, False),
            layer_pattern=parse_layer_freq(args.get("moe_layer_freq", 1), num_layers),
            latent_size=_typed(args, "moe_latent_size", int),
            **_router_groups(args, experts))
    mla = None
    if _typed(args, "multi_latent_attention", bool, False):
        mla = MLASpec(q_lora_rank=_typed(args, "q_lora_rank", int, 512) if "q_lora_rank" not in args
                      else _typed(args, "q_lora_rank", int),
                      kv_lora_rank=_typed(args, "kv_lora_rank", int, 512),
                      qk_head_dim=_typed(args, "qk_head_dim", int, 128),
                      qk_pos_emb_head_dim=_typed(args, "qk_pos_emb_head_dim", int, 64),
                      v_head_dim=_typed(args, "v_head_dim", int, 128))
    dsa = _dsa(args, mla)
    window, window_pattern = _window(args, num_layers)
    # --hybrid-layer-pattern is the current name of --hybrid-override-pattern (ARG L743-755 @d98e8a6)
    pattern = _typed(args, "hybrid_override_pattern", str) or _typed(args, "hybrid_layer_pattern", str)
    mamba = None
    if pattern is not None:  # TC L1256-1270 defaults: state 128, head dim 64, 8 groups, heads = 2h / head dim
        head_dim = _typed(args, "mamba_head_dim", int, 64)
        mamba = MambaSpec(num_heads=_typed(args, "mamba_num_heads", int, 2 * h // head_dim), head_dim=head_dim,
                          state_dim=_typed(args, "mamba_state_dim", int, 128),
                          num_groups=_typed(args, "mamba_num_groups", int, 8))
        if moe is not None:
            moe = dataclasses.replace(moe, layer_pattern=tuple(int(c == "E") for c in pattern))
    linear_pattern, gdn = _linear_attention(args, num_layers)
    rotary = args.get("rotary_percent", 1.0)
    if isinstance(rotary, bool) or not isinstance(rotary, (int, float)):
        raise ConfigError(field="rotary_percent", value=repr(rotary), rule="must be a number in (0, 1]",
                          fix="e.g. 0.5")
    softmax_type = _typed(args, "softmax_type", str, "vanilla")
    return ModelSpec(
        hybrid_pattern=pattern, mamba=mamba, linear_attention_pattern=linear_pattern, gated_delta_net=gdn,
        attention_output_gate=_typed(args, "attention_output_gate", bool, False),
        window_size=window, window_pattern=window_pattern, no_rope_pattern=_no_rope(args, num_layers),
        rotary_percent=float(rotary), softmax_type=softmax_type,
        notes=softmax_type_notes(softmax_type) + _dsa_backend_notes(args, dsa),
        qk_l2_norm=_typed(args, "qk_l2_norm", bool, False),
        name=_typed(args, "name", str, name), num_layers=num_layers, hidden_size=h, ffn_hidden_size=ffn,
        num_attention_heads=n, num_query_groups=groups, kv_channels=_typed(args, "kv_channels", int),
        vocab_size=vocab,
        max_position_embeddings=_typed(args, "max_position_embeddings", int,
                                       _typed(args, "seq_length", int, 4096)),
        untie_embeddings_and_output_weights=untie, swiglu=swiglu,
        activation="squared_relu" if _typed(args, "squared_relu", bool, False) and not swiglu else "",
        normalization=_typed(args, "normalization", str, "LayerNorm"),
        add_bias_linear=bias, add_qkv_bias=_typed(args, "add_qkv_bias", bool, False),
        qk_layernorm=_typed(args, "qk_layernorm", bool, False),
        position_embedding_type=_typed(args, "position_embedding_type", str,
                                       "none" if pattern is not None else "learned_absolute"),  # MambaModel L76
        moe=moe, mla=mla, dsa=dsa, mtp_num_layers=_typed(args, "mtp_num_layers", int, 0) or 0,
        mtp_use_repeated_layer=_typed(args, "mtp_use_repeated_layer", bool, False),
        make_vocab_size_divisible_by=_typed(args, "make_vocab_size_divisible_by", int, 128),
        source=source)
