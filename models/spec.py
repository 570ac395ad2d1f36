"""Architecture of a transformer as Megatron-Core builds it: numbers only, no parallelism.

Field names follow Megatron-Core's ``TransformerConfig`` so that a reader can map every field to a
launch flag (``hidden_size`` -> ``--hidden-size``). Sources for the meaning of each field:
``reference/megatron.md`` section 1 (notation ``h, n, g, d, F, F_m, F_s, E, k, L, D, V``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from megasolve.models.errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """Routed and shared experts of the MoE layers (reference section 1.5)."""

    num_experts: int  # E
    top_k: int  # k, moe_router_topk
    expert_ffn_hidden_size: int  # F_m, moe_ffn_hidden_size
    shared_expert_ffn_hidden_size: int = 0  # F_s, summed over the shared experts
    shared_expert_gate: bool = False  # --moe-shared-expert-gate (Qwen2-MoE)
    layer_pattern: tuple[int, ...]  # 1 = MoE layer, one entry per decoder layer

    @property
    def num_moe_layers(self) -> int:
        return sum(self.layer_pattern)


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec:
    """Multi-head latent attention dimensions (reference section 1.6)."""

    q_lora_rank: int | None  # None: no query compression (DeepSeek-V2-Lite, Moonlight)
    kv_lora_rank: int
    qk_head_dim: int  # "nope" part of the query/key head
    qk_pos_emb_head_dim: int  # rope part
    v_head_dim: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer, as Megatron-Core's ``GPTModel`` sees it.

    >>> spec = ModelSpec(name="toy", num_layers=2, hidden_size=64, ffn_hidden_size=128,
    ...                  num_attention_heads=4, num_query_groups=2, vocab_size=1000)
    >>> spec.kv_channels, spec.is_moe, spec.num_norm_params_per_hidden
    (16, False, 1)
    """

    name: str
    num_layers: int  # L (decoder layers, MTP excluded)
    hidden_size: int  # h
    ffn_hidden_size: int  # F (dense MLP)
    num_attention_heads: int  # n
    num_query_groups: int  # g (== n for MHA)
    kv_channels: int | None = None  # d; None -> h // n (filled in by __post_init__)
    vocab_size: int  # V before padding
    max_position_embeddings: int = 4096
    untie_embeddings_and_output_weights: bool = True
    swiglu: bool = True  # gated MLP (SwiGLU / GeGLU)
    normalization: str = "RMSNorm"  # or "LayerNorm"
    add_bias_linear: bool = False
    add_qkv_bias: bool = False
    qk_layernorm: bool = False
    position_embedding_type: str = "rope"  # "rope" | "learned_absolute" | "none"
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    mtp_num_layers: int = 0  # D
    make_vocab_size_divisible_by: int = 128
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        positive = {
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "ffn_hidden_size": self.ffn_hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_query_groups": self.num_query_groups,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "make_vocab_size_divisible_by": self.make_vocab_size_divisible_by,
        }
        for name, value in positive.items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(field=name, value=value, rule="must be a positive integer",
                                  fix=f"set {name} to the model's real value")
        if self.kv_channels is not None and (not isinstance(self.kv_channels, int) or self.kv_channels <= 0):
            raise ConfigError(field="kv_channels", value=self.kv_channels,
                              rule="must be a positive integer", fix="set the head dimension")
        if self.kv_channels is None and self.mla is None and self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                field="kv_channels", value=None,
                rule=f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads "
                     f"({self.num_attention_heads}) and no head dimension is given",
                fix="set kv_channels (HF: head_dim)")
        if self.kv_channels is None:  # Megatron's default, ARG L1331-1333
            object.__setattr__(self, "kv_channels", self.hidden_size // self.num_attention_heads)
        if self.num_attention_heads % self.num_query_groups:
            raise ConfigError(
                field="num_query_groups", value=self.num_query_groups,
                rule=f"num_attention_heads ({self.num_attention_heads}) must be a multiple of it",
                fix="set num_query_groups (HF: num_key_value_heads) to a divisor of the head count")
        if self.normalization not in ("RMSNorm", "LayerNorm"):
            raise ConfigError(field="normalization", value=self.normalization,
                              rule="must be RMSNorm or LayerNorm", fix="pick one of them")
        if self.position_embedding_type not in ("rope", "learned_absolute", "none"):
            raise ConfigError(field="position_embedding_type", value=self.position_embedding_type,
                              rule="must be rope, learned_absolute or none", fix="pick one of them")
        if self.mtp_num_layers < 0:
            raise ConfigError(field="mtp_num_layers", value=self.mtp_num_layers,
                              rule="must be >= 0", fix="set 0 for no multi-token prediction")
        if self.moe is not None:
            moe = self.moe
            if len(moe.layer_pattern) != self.num_layers:
                raise ConfigError(
                    field="moe_layer_freq", value=f"list of {len(moe.layer_pattern)}",
                    rule=f"must have one entry per layer ({self.num_layers})",
                    fix="give an int frequency or a list of length num_layers")
            for name, value in (("num_moe_experts", moe.num_experts), ("moe_router_topk", moe.top_k),
                                ("moe_ffn_hidden_size", moe.expert_ffn_hidden_size)):
                if not isinstance(value, int) or value <= 0:
                    raise ConfigError(field=name, value=value, rule="must be a positive integer",
                                      fix=f"set {name}")
            if moe.top_k > moe.num_experts:
                raise ConfigError(field="moe_router_topk", value=moe.top_k,
                                  rule=f"exceeds num_moe_experts ({moe.num_experts})",
                                  fix="top-k must be <= the number of experts")
            if moe.shared_expert_ffn_hidden_size < 0:
                raise ConfigError(field="moe_shared_expert_intermediate_size",
                                  value=moe.shared_expert_ffn_hidden_size, rule="must be >= 0",
                                  fix="set 0 for no shared experts")
        if self.mla is not None:
            for name in ("kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"):
                value = getattr(self.mla, name)
                if not isinstance(value, int) or value <= 0:
                    raise ConfigError(field=name, value=value, rule="must be a positive integer",
                                      fix=f"set {name}")
            if self.mla.q_lora_rank is not None and self.mla.q_lora_rank <= 0:
                raise ConfigError(field="q_lora_rank", value=self.mla.q_lora_rank,
                                  rule="must be a positive integer or null", fix="use null for none")

    # ------------------------------------------------------------------ derived numbers
    @property
    def is_moe(self) -> bool:
        return self.moe is not None and self.moe.num_moe_layers > 0

    @property
    def num_norm_params_per_hidden(self) -> int:
        """``ns``: 1 for RMSNorm (weight), 2 for LayerNorm (weight + bias)."""
        return 1 if self.normalization == "RMSNorm" else 2

    @property
    def gated_factor(self) -> int:
        """``f_glu``: 2 for a gated MLP (fc1 holds gate and up), else 1."""
        return 2 if self.swiglu else 1

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and bool(self.moe.layer_pattern[layer])

    def padded_vocab_size(self, tp: int) -> int:
        """Vocab after Megatron's padding to a multiple of ``make_vocab_size_divisible_by * tp``.

        Reference section 1.1 (``vocab_size_with_padding``).

        >>> ModelSpec(name="x", num_layers=1, hidden_size=8, ffn_hidden_size=8, num_attention_heads=1,
        ...           num_query_groups=1, vocab_size=128256).padded_vocab_size(8)
        129024
        """
        multiple = self.make_vocab_size_divisible_by * tp
        return -(-self.vocab_size // multiple) * multiple
