"""Architecture of a transformer as Megatron-Core builds it: numbers only, no parallelism.

Field names follow Megatron-Core's ``TransformerConfig`` so that a reader can map every field to a
launch flag (``hidden_size`` -> ``--hidden-size``). Sources for the meaning of each field:
``reference/megatron.md`` section 1 (notation ``h, n, g, d, F, F_m, F_s, E, k, L, D, V``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    # group-limited routing (--moe-router-num-groups / --moe-router-group-topk, TC; HF n_group / topk_group):
    # the experts in ``router_num_groups`` contiguous groups, each token's top-k taken from its
    # ``router_group_topk`` best groups (DeepSeek-V3: 8 and 4, node-limited routing with one group per node)
    router_num_groups: int = 1
    router_group_topk: int = 1
    # latent experts (--moe-latent-size, TC L952; Nemotron 3 Super / Ultra): the routed experts run in a
    # latent width d_l: fc1_latent_proj (h -> d_l) before the dispatch, fc2_latent_proj (d_l -> h) after the
    # combine, both TELinear parallel_mode="duplicated" (moe/moe_layer.py L265-303); the router and the
    # shared experts keep the full width h (L423-428, L488-490, L583-592)
    latent_size: int | None = None

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


# What a DSA plan's step time rests on (README "DeepSeek Sparse Attention"): said with every DSA model
DSA_SPEED_NOTE = ("DSA step times are not validated: the sparse kernels are costed at the flash-attention efficiency, "
                  "and the measured GLM-5.2 runs found ran 1.3-3x slower than predicted (Megatron-Bridge verification "
                  "runs with --deterministic, and a performance demo whose layout is not stated)")


@dataclass(frozen=True, slots=True, kw_only=True)
class DSASpec:
    """DeepSeek Sparse Attention (``--experimental-attention-variant dsa``; DeepSeek-V3.2, GLM-5): MLA whose
    core attention attends, per query, only to the ``topk`` keys a lightning indexer picks
    (``transformer/experimental_attention_variant/dsa.py`` @d98e8a6: ``DSAIndexer`` L1090-1208, ``DSAttention``
    L1536-1627; TC ``dsa_indexer_*`` L317-357).

    With ``topk_freq > 1`` (IndexShare, GLM-5.2) only every ``topk_freq``-th layer after ``skip_topk_offset``
    runs an indexer; the layers between reuse its top-k indices and build none (``is_dsa_skip_topk_layer``
    L37-47, ``DSAttention.__init__`` L1561-1584). ``loss_coeff`` > 0 trains the indexer against the main
    attention (a KL loss, ``compute_dsa_indexer_loss`` L384-514), over the selected keys only with
    ``sparse_loss``.
    """

    n_heads: int  # dsa_indexer_n_heads (HF index_n_heads)
    head_dim: int  # dsa_indexer_head_dim (HF index_head_dim)
    topk: int  # dsa_indexer_topk (HF index_topk)
    topk_freq: int = 1  # dsa_indexer_topk_freq (HF index_topk_freq)
    skip_topk_offset: int = 0  # dsa_indexer_skip_topk_offset (HF index_skip_topk_offset)
    loss_coeff: float = 0.0  # dsa_indexer_loss_coeff
    sparse_loss: bool = False  # dsa_indexer_use_sparse_loss

    def computes_topk(self, layer_number: int) -> bool:
        """Whether the layer with 1-based ``layer_number`` runs its own indexer (``is_dsa_skip_topk_layer``
        negated; MTP layers count from 1 again, ``multi_token_prediction.py``).

        >>> [n for n in range(1, 15) if DSASpec(n_heads=32, head_dim=128, topk=2048, topk_freq=4,
        ...                                     skip_topk_offset=3).computes_topk(n)]
        [1, 2, 3, 7, 11]
        """
        offset = max(self.skip_topk_offset, 1)
        return max(layer_number - offset, 0) % self.topk_freq == 0

    def source_layer(self, layer_number: int) -> int:
        """The 1-based layer whose top-k indices layer ``layer_number`` uses (itself when it computes them;
        ``source_dsa_compute_layer`` L50-56)."""
        offset = max(self.skip_topk_offset, 1)
        if layer_number <= offset:
            return layer_number
        return layer_number - (layer_number - offset) % self.topk_freq

    @property
    def trains_indexer(self) -> bool:
        return self.loss_coeff > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaSpec:
    """Mamba-2 mixer of a hybrid ``MambaModel`` (``megatron/core/ssm/mamba_mixer.py`` L130-360,
    TC ``mamba_state_dim`` / ``mamba_head_dim`` / ``mamba_num_groups`` / ``mamba_num_heads``)."""

    num_heads: int  # nheads; d_inner = num_heads * head_dim
    head_dim: int
    state_dim: int  # d_state (N)
    num_groups: int  # ngroups (G) of B and C
    conv_kernel: int = 4  # d_conv

    @property
    def d_inner(self) -> int:
        return self.num_heads * self.head_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class GatedDeltaNetSpec:
    """Gated DeltaNet linear attention (Qwen3-Next: transformers ``qwen3_next/modeling_qwen3_next.py``
    ``Qwen3NextGatedDeltaNet``; Megatron-Core ``ssm/gated_delta_net``)."""

    num_key_heads: int
    key_head_dim: int
    num_value_heads: int
    value_head_dim: int
    conv_kernel: int = 4


HYBRID_SYMBOLS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}  # mamba_hybrid_layer_allocation.py L25-32


def softmax_type_notes(softmax_type: str) -> tuple[str, ...]:
    """What a non-vanilla softmax (attention sinks ``learnable``, ``off-by-one``) needs to run as costed, for every
    reader of a model: Transformer Engine runs it fused only in cuDNN 9.13.1 or newer, never in FlashAttention
    (TE ``common/fused_attn/fused_attn.cpp`` @d0067d0: "9.13.1+: vanilla, off-by-one, learnable";
    ``dot_product_attention/utils.py`` disables FlashAttention for ``softmax_type != "vanilla"``)."""
    if softmax_type == "vanilla":
        return ()
    return (f"attention softmax '{softmax_type}' (sinks) runs in Transformer Engine's fused (cuDNN) attention only "
            "with cuDNN 9.13.1 or newer (FlashAttention never); with an older cuDNN TE falls back to unfused "
            "attention, s x s scores per head: memory and time here assume the fused kernel",)


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
    dsa: DSASpec | None = None  # DeepSeek Sparse Attention on every (MLA) attention layer
    mtp_num_layers: int = 0  # D
    # ``--mtp-use-repeated-layer`` (TC ``mtp_use_repeated_layer``): one MTP layer is built and run at every
    # depth (``multi_token_prediction.py`` L1831-1832, L1959-1995; ``gpt_layer_specs.py`` L779-782), so its
    # weights are held once while its FLOPs and activations count per depth (Nemotron 3 Super's recipe).
    mtp_use_repeated_layer: bool = False
    make_vocab_size_divisible_by: int = 128
    # ---- attention variants (TC L247-291; ``reference/megatron.md`` has no section: sources inline)
    # Sliding-window attention, ``--window-size W,0`` (TC ``window_size``): a query attends to itself
    # and the W keys before it. ``window_pattern``: one entry per layer, 1 = windowed, 0 = full
    # attention (``--window-attn-skip-freq`` as a list, TC L251-254, ``transformer/utils.py``
    # ``is_layer_window_attention`` L531-548); None with a window = every layer windowed.
    window_size: int | None = None
    window_pattern: tuple[int, ...] | None = None
    # Chunked attention (Llama 4, transformers ``Llama4TextConfig.attention_chunk_size``): a query
    # attends only within its block of ``attention_chunk_size`` tokens; ``chunk_pattern`` 1 = chunked.
    # Megatron-Core has no training flag for it (``attention.py`` L952 sets ``attention_chunk: 0``).
    attention_chunk_size: int | None = None
    chunk_pattern: tuple[int, ...] | None = None
    # Layers without RoPE (``--no-rope-freq``, TC L291-296, a list: 1 = skip RoPE). No parameters.
    no_rope_pattern: tuple[int, ...] | None = None
    rotary_percent: float = 1.0  # partial rotary (GLM: 0.5), ``--rotary-percent`` (ARG L218)
    # ``--softmax-type learnable``: attention sinks, one learned logit per head (TC L170-173;
    # TE ``DotProductAttention.softmax_offset``, ``extensions/transformer_engine.py`` L2361-2369)
    softmax_type: str = "vanilla"
    qk_l2_norm: bool = False  # Llama 4's weightless QK L2 norm (TC ``qk_l2_norm``)
    # ---- hybrid MambaModel (``--hybrid-override-pattern``): one symbol per layer, M Mamba-2 mixer,
    # * attention, - MLP, E MoE (each its own layer with its own pre-norm); None = GPTModel
    hybrid_pattern: str | None = None
    mamba: MambaSpec | None = None
    # ---- linear attention in a GPT stack (Qwen3-Next): 1 = the layer's mixer is a gated DeltaNet,
    # 0 = softmax attention; ``attention_output_gate``: the softmax layers gate their output with a
    # sigmoid of a second query-sized projection (TC ``attention_output_gate``)
    linear_attention_pattern: tuple[int, ...] | None = None
    gated_delta_net: GatedDeltaNetSpec | None = None
    attention_output_gate: bool = False
    # The MLP activation where it is neither Megatron's SwiGLU (gated) nor its GeLU (not gated): "squared_relu"
    # (Nemotron-4, ``--squared-relu``), "xielu" (Apertus). The same parameters, FLOPs and saved bytes as a
    # non-gated MLP's activation, so it changes no cost; the launch exports write it
    activation: str = field(default="", compare=False)
    # QK-norms over all heads of a layer instead of per head (OLMoE): counted as Megatron-Core's per-head norms (2*d
    # weights a layer against n*d + g*d), but Megatron-Bridge builds them at the full width, so TP must be 1
    # (``solver/rules.py`` qk_norm_all_heads_needs_tp_1)
    qk_layernorm_all_heads: bool = field(default=False, compare=False)
    # Parameters of a multimodal config's vision tower: counted in ``params_total``, not planned
    # (``models/vision.py``)
    vision_params: int = field(default=0, compare=False)
    # ---- what the reader could not model or filled in (shown to the user; never compared)
    ignored_features: tuple[str, ...] = field(default=(), compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)
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
        self._check_attention_variants()
        self._check_hybrid()
        if self.mtp_num_layers < 0:
            raise ConfigError(field="mtp_num_layers", value=self.mtp_num_layers,
                              rule="must be >= 0", fix="set 0 for no multi-token prediction")
        if self.mtp_use_repeated_layer and not self.mtp_num_layers:
            raise ConfigError(field="mtp_use_repeated_layer", value=True,
                              rule="a repeated MTP layer needs mtp_num_layers >= 1",
                              fix="set mtp_num_layers or drop mtp_use_repeated_layer")
        if self.moe is not None:
            moe = self.moe
            if len(moe.layer_pattern) != self.num_layers:
                raise ConfigError(
                    field="moe_layer_freq", value=f"list of {len(moe.layer_pattern)}",
                    rule=f"must have one entry per layer ({self.num_layers})",
                    fix="give an int frequency or a list of length num_layers")
            if moe.latent_size is not None and (not isinstance(moe.latent_size, int) or moe.latent_size <= 0):
                raise ConfigError(field="moe_latent_size", value=moe.latent_size,
                                  rule="MoE latent projection dimension has to be greater than zero (ARG L1980-1982)",
                                  fix="give a positive --moe-latent-size or leave it unset")
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
        if self.dsa is not None:
            self._check_dsa()

    def _check_dsa(self) -> None:
        """Megatron-Core's DSA rules (``get_dsa_module_spec_for_backend``, experimental_attention_variant_module_specs.py
        L97-101: MLA only; TC L1510-1525: no linear bias, a positive top-k frequency, a non-negative offset)."""
        dsa = self.dsa
        for name, value in (("dsa_indexer_n_heads", dsa.n_heads), ("dsa_indexer_head_dim", dsa.head_dim),
                            ("dsa_indexer_topk", dsa.topk), ("dsa_indexer_topk_freq", dsa.topk_freq)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(field=name, value=value, rule="must be a positive integer (TC L317-330, L1517-1520)",
                                  fix=f"set {name} to the model's value")
        if isinstance(dsa.skip_topk_offset, bool) or not isinstance(dsa.skip_topk_offset, int) \
                or dsa.skip_topk_offset < 0:
            raise ConfigError(field="dsa_indexer_skip_topk_offset", value=dsa.skip_topk_offset,
                              rule="must be a non-negative integer (TC L1521-1525)", fix="use 0 without IndexShare")
        if self.mla is None:
            raise ConfigError(field="experimental_attention_variant", value="dsa",
                              rule="Currently only MLA supports sparse attention (experimental_attention_variant_"
                                   "module_specs.py L100)", fix="set the MLA sizes (q_lora_rank, kv_lora_rank, ...)")
        if self.add_bias_linear:
            raise ConfigError(field="add_bias_linear", value=True,
                              rule="DSA uses AbsorbedMLASelfAttention, which requires add_bias_linear=False "
                                   "(TC L1512-1516)", fix="disable linear bias for DSA models")
        if dsa.head_dim < self.mla.qk_pos_emb_head_dim:
            raise ConfigError(field="dsa_indexer_head_dim", value=dsa.head_dim,
                              rule=f"the indexer rotates its first qk_pos_emb_head_dim ({self.mla.qk_pos_emb_head_dim})"
                                   " channels (dsa.py DSAIndexer._apply_rope)", fix="use the model's index_head_dim")
        if dsa.loss_coeff < 0:
            raise ConfigError(field="dsa_indexer_loss_coeff", value=dsa.loss_coeff, rule="must be >= 0",
                              fix="0 (no indexer loss) or the recipe's coefficient")

    def _check_attention_variants(self) -> None:
        for name, size in (("window_size", self.window_size), ("attention_chunk_size", self.attention_chunk_size)):
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
                raise ConfigError(field=name, value=size, rule="must be a positive number of tokens or null",
                                  fix=f"set {name} to the model's real value, or null for full attention")
        for name, pattern in (("window_attn_skip_freq", self.window_pattern), ("chunk_pattern", self.chunk_pattern),
                              ("no_rope_freq", self.no_rope_pattern)):
            if pattern is None:
                continue
            if len(pattern) != self.num_layers or any(v not in (0, 1) for v in pattern):
                raise ConfigError(field=name, value=f"list of {len(pattern)}",
                                  rule=f"must hold one 0/1 entry per layer ({self.num_layers})",
                                  fix="give one entry per decoder layer (1 = windowed / chunked / no RoPE)")
        if not 0 < self.rotary_percent <= 1:
            raise ConfigError(field="rotary_percent", value=self.rotary_percent, rule="must be in (0, 1]",
                              fix="use the fraction of the head dimension that RoPE rotates (1.0 for all)")
        if self.softmax_type not in ("vanilla", "off-by-one", "learnable"):
            raise ConfigError(field="softmax_type", value=self.softmax_type,
                              rule="must be vanilla, off-by-one or learnable (TC L170)", fix="pick one of them")

    def _check_hybrid(self) -> None:
        if self.hybrid_pattern is None:
            return
        bad = sorted(set(self.hybrid_pattern) - set(HYBRID_SYMBOLS))
        if bad or len(self.hybrid_pattern) != self.num_layers:
            raise ConfigError(field="hybrid_override_pattern", value=self.hybrid_pattern[:60],
                              rule=f"must hold one of M * - E per layer ({self.num_layers}) "
                                   "(mamba_hybrid_layer_allocation.py L82-83)",
                              fix="write e.g. \"M-M*-\" with num_layers symbols")
        if "M" in self.hybrid_pattern and self.mamba is None:
            raise ConfigError(field="mamba_num_heads", value="missing", rule="Mamba layers need the mixer's sizes",
                              fix="set mamba_num_heads, mamba_head_dim, mamba_state_dim, mamba_num_groups")
        if self.mamba is not None:
            m = self.mamba
            for name, value in (("mamba_num_heads", m.num_heads), ("mamba_head_dim", m.head_dim),
                                ("mamba_state_dim", m.state_dim), ("mamba_num_groups", m.num_groups),
                                ("conv_kernel", m.conv_kernel)):
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ConfigError(field=name, value=value, rule="must be a positive integer", fix=f"set {name}")
            if m.num_heads % m.num_groups:
                raise ConfigError(field="mamba_num_groups", value=m.num_groups,
                                  rule=f"must divide mamba_num_heads ({m.num_heads}) (mamba_mixer.py L255)",
                                  fix="use a divisor of the head count")

    @property
    def is_hybrid(self) -> bool:
        return self.hybrid_pattern is not None

    def require_plannable(self) -> None:
        """Every model megasolve reads can be planned: hybrid Mamba-2 models and gated-DeltaNet layers
        have their own cost terms (``cost/hybrid.py``, ``cost/layers.py`` kinds). Kept as the one place a
        future unmodelled architecture would be refused (a ``ConfigError`` naming what is missing)."""

    @property
    def indexer_query_input(self) -> int:
        """Width of the DSA indexer's query input: the query latent, or ``h`` without query compression
        (``DSAIndexer.__init__``, dsa.py L1117-1121 @d98e8a6)."""
        return self.mla.q_lora_rank if self.mla.q_lora_rank is not None else self.hidden_size

    def layer_has_indexer(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) builds a DSA indexer (False without DSA)."""
        return self.dsa is not None and self.dsa.computes_topk(layer + 1)

    def layer_kind(self, layer: int) -> str:
        """``"mamba"``, ``"attention"``, ``"mlp"``, ``"moe"`` for a hybrid layer; ``"transformer"``
        (attention + MLP or MoE) for a GPT layer."""
        return HYBRID_SYMBOLS[self.hybrid_pattern[layer]] if self.hybrid_pattern is not None else "transformer"

    # ------------------------------------------------------------------ derived numbers
    def layer_window(self, layer: int) -> int | None:
        """Sliding window (tokens before the query) of decoder layer ``layer`` (0-based), None = full.

        >>> ModelSpec(name="x", num_layers=4, hidden_size=8, ffn_hidden_size=8, num_attention_heads=1,
        ...           num_query_groups=1, vocab_size=8, window_size=128, window_pattern=(1, 0, 1, 0)).layer_window(1)
        """
        if self.window_size is None or (self.window_pattern is not None and not self.window_pattern[layer]):
            return None
        return self.window_size

    def layer_chunk(self, layer: int) -> int | None:
        """Attention chunk of decoder layer ``layer`` (0-based), None = not chunked."""
        if self.attention_chunk_size is None or (self.chunk_pattern is not None and not self.chunk_pattern[layer]):
            return None
        return self.attention_chunk_size

    def attended_pairs(self, layer: int, seq_length: int) -> float:
        """Causal (query, key) pairs one sequence of ``seq_length`` tokens computes in layer ``layer``.

        Full causal attention: ``s(s+1)/2``. A window of ``w`` keys before the query (TE
        ``window_size=(w, 0)``): query ``i`` sees ``min(i, w) + 1`` keys, so ``(w+1)(w+2)/2 + (s-w-1)(w+1)``
        once ``s > w + 1``. Chunks of ``c`` tokens: ``c(c+1)/2`` per full chunk plus the partial last one.
        DSA: query ``i`` attends to ``min(i + 1, topk)`` keys (the indexer's selection).

        >>> spec = ModelSpec(name="x", num_layers=1, hidden_size=8, ffn_hidden_size=8, num_attention_heads=1,
        ...                  num_query_groups=1, vocab_size=8, window_size=2)
        >>> spec.attended_pairs(0, 5)  # keys per query 1, 2, 3, 3, 3
        12.0
        """
        s = seq_length
        pairs = s * (s + 1) / 2
        window, chunk = self.layer_window(layer), self.layer_chunk(layer)
        if window is not None and s > window + 1:
            pairs = min(pairs, (window + 1) * (window + 2) / 2 + (s - window - 1) * (window + 1))
        if chunk is not None and s > chunk:
            full, rest = divmod(s, chunk)
            pairs = min(pairs, full * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2)
        if self.dsa is not None and s > self.dsa.topk:  # DSA: each query attends to min(its causal keys, topk)
            k = self.dsa.topk  # (Megatron-Bridge flop_utils.py DSA branch: topk - topk(topk-1)/(2s) per query)
            pairs = min(pairs, k * (k + 1) / 2 + (s - k) * k)
        return float(pairs)

    def attention_fraction(self, seq_length: int) -> float:
        """Mean over decoder layers of the attended pairs relative to full causal attention (1.0 without
        windows or chunks): scales the ``s^2`` attention core FLOPs.

        >>> from megasolve.models.presets import load_preset
        >>> round(load_preset("mistral-7b-v0.1").attention_fraction(32768), 3)  # 4096-token window at 32K
        0.234
        """
        if self.window_size is None and self.attention_chunk_size is None and self.dsa is None:
            return 1.0
        full = seq_length * (seq_length + 1) / 2
        return sum(self.attended_pairs(i, seq_length) for i in range(self.num_layers)) / (self.num_layers * full)


    @property
    def is_moe(self) -> bool:
        return self.moe is not None and self.moe.num_moe_layers > 0

    @property
    def num_norm_params_per_hidden(self) -> int:
        """``ns``: 1 for RMSNorm (weight), 2 for LayerNorm (weight + bias)."""
        return 1 if self.normalization == "RMSNorm" else 2

    @property
    def mtp_built_layers(self) -> int:
        """MTP layers that hold weights: one with ``mtp_use_repeated_layer``, else one per depth."""
        return min(1, self.mtp_num_layers) if self.mtp_use_repeated_layer else self.mtp_num_layers

    def with_mtp_layers(self, layers: int) -> ModelSpec:
        """This model trained with ``layers`` MTP layers (Megatron's ``--mtp-num-layers``; each the last decoder
        layer's kind), a repeated MTP layer kept only while there is one."""
        return replace(self, mtp_num_layers=layers, mtp_use_repeated_layer=self.mtp_use_repeated_layer and layers > 0)

    @property
    def expert_hidden_size(self) -> int:
        """Width of a routed expert's input and output, and of the tokens the dispatcher moves: the latent
        size with ``--moe-latent-size``, else ``hidden_size``."""
        if self.moe is not None and self.moe.latent_size:
            return self.moe.latent_size
        return self.hidden_size

    @property
    def latent_projection_params(self) -> int:
        """Weights of one MoE layer's two latent projections (``h x d_l`` each; with
        ``--add-bias-linear`` their biases), 0 without latent experts."""
        if self.moe is None or not self.moe.latent_size:
            return 0
        d = self.moe.latent_size
        return 2 * self.hidden_size * d + ((d + self.hidden_size) if self.add_bias_linear else 0)

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
