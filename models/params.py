"""Exact parameter counts: per component, per layer, per rank of a pipeline stage.

Every count follows ``reference/megatron.md`` sections 1.1-1.9 (Megatron-Core ``GPTModel`` with
the Transformer Engine layer spec). Notation: ``h`` hidden, ``n`` heads, ``g`` query groups,
``d`` head dim, ``F`` dense ffn, ``F_m`` expert ffn, ``F_s`` shared-expert ffn, ``E`` experts,
``V`` padded vocab, ``ns`` 1 (RMSNorm) or 2 (LayerNorm), ``f_glu`` 2 for a gated MLP.

Each rank's parameters fall in three groups that memory and communication treat differently:
``tp_sharded`` (split over TP, replicated over DP), ``replicated`` (norms, row-parallel biases,
router, MLA down-projections: a full copy on every TP rank, grads all-reduced over TP with SP) and
``expert`` (routed experts: split over EP x ETP, optimizer sharded over expert-DP).
"""

from __future__ import annotations

from dataclasses import dataclass

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout
from megasolve.models.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class RankParams:
    """Parameters one rank holds, split by how they are parallelised."""

    tp_sharded: int = 0
    replicated: int = 0
    expert: int = 0

    def __add__(self, other: RankParams) -> RankParams:
        return RankParams(self.tp_sharded + other.tp_sharded, self.replicated + other.replicated,
                          self.expert + other.expert)

    def __mul__(self, k: int) -> RankParams:
        return RankParams(self.tp_sharded * k, self.replicated * k, self.expert * k)

    __rmul__ = __mul__

    @property
    def dense(self) -> int:
        """Non-expert parameters (optimizer sharded over DP x CP)."""
        return self.tp_sharded + self.replicated

    @property
    def total(self) -> int:
        return self.tp_sharded + self.replicated + self.expert


def _split(total: int, parts: int, what: str, field: str) -> int:
    """``megatron.core.utils.divide``: exact division or a Megatron-style error (rule 11)."""
    if total % parts:
        raise MegasolveError(field=field, value=parts,
                             rule=f"{what} ({total}) is not divisible by {field.lstrip('-')} ({parts})",
                             fix=f"use a {field.lstrip('-')} that divides {total}")
    return total // parts


# ---------------------------------------------------------------------------------- components
def attention_params(spec: ModelSpec, tp: int, *, indexer: bool = False) -> RankParams:
    """One self-attention block (with its input norm) on one TP rank.

    GQA (section 1.3): ``h(nd + 2gd) + nd*h`` sharded, ``[nd + 2gd]`` QKV bias sharded, ``h``
    proj bias and ``ns*h`` input norm replicated, ``2*ns*d`` QK-norm replicated.
    MLA (section 1.6): up-projections and output sharded; ``h*q_lora``, ``h*(kv_lora + r)`` and
    the latent norms replicated (``TELinear(parallel_mode='duplicated')``).
    DSA (``indexer``: a layer that runs its own DSA indexer): ``linear_wq_b`` (``q_lora x n_i*d_i``; ``h`` without
    query compression), ``linear_wk`` (``h x d_i``), ``linear_weights_proj`` (``h x n_i``) and the LayerNorm
    ``k_norm`` (``2*d_i``), all ``parallel_mode="duplicated"``: replicated over TP (``dsa.py`` L1117-1205 @d98e8a6).
    The attention projections are MLA's (``AbsorbedMLASelfAttention`` builds the same weights and uses the
    up-projection absorbed).

    >>> from megasolve.models.presets import load_preset
    >>> attention_params(load_preset("llama-3.1-8b"), tp=1).total  # 4096*(4096+2048) + 4096*4096 + 4096
    41947136
    """
    h, n, ns = spec.hidden_size, spec.num_attention_heads, spec.num_norm_params_per_hidden
    sharded = 0
    replicated = ns * h  # input layernorm (fused into linear_qkv in TE)
    if spec.mla is None:
        d, g = spec.kv_channels, spec.num_query_groups
        qkv_out = n * d + 2 * g * d
        if spec.attention_output_gate:  # a second query-sized projection, the output gate (Qwen3-Next q_proj):
            qkv_out += n * d  # more linear_qkv rows, so also more QKV bias (core 0.16.1 attention.py L1264-1273)
        sharded += h * qkv_out + n * d * h
        if spec.add_bias_linear or spec.add_qkv_bias:
            sharded += qkv_out
        if spec.add_bias_linear:
            replicated += h  # row-parallel linear_proj bias
        if spec.qk_layernorm:
            replicated += 2 * ns * d
        if spec.softmax_type == "learnable":  # attention sinks: one logit per head, split over TP with
            sharded += n  # the heads (TE ``softmax_offset``; ``extensions/transformer_engine.py`` L2361-2369)
    else:
        mla = spec.mla
        qk, r, dv = mla.qk_head_dim, mla.qk_pos_emb_head_dim, mla.v_head_dim
        if mla.q_lora_rank is None:
            sharded += h * n * (qk + r)  # linear_q_proj
            if spec.qk_layernorm:  # core >= 0.19 fuses a norm over h into linear_q_proj (mla_qk_norm_config.py L147-150)
                replicated += ns * h
        else:
            replicated += h * mla.q_lora_rank  # linear_q_down_proj (duplicated)
            sharded += mla.q_lora_rank * n * (qk + r)  # linear_q_up_proj
            if spec.qk_layernorm:
                replicated += ns * mla.q_lora_rank
        replicated += h * (mla.kv_lora_rank + r)  # linear_kv_down_proj (duplicated)
        sharded += mla.kv_lora_rank * n * (qk + dv)  # linear_kv_up_proj
        if spec.qk_layernorm:
            replicated += ns * mla.kv_lora_rank
        sharded += n * dv * h  # linear_proj
        if indexer and spec.dsa is not None:
            dsa = spec.dsa
            replicated += spec.indexer_query_input * dsa.n_heads * dsa.head_dim + h * dsa.head_dim + h * dsa.n_heads + 2 * dsa.head_dim
    return RankParams(tp_sharded=_split(sharded, tp, "attention weights", "--tp"), replicated=replicated)


def dense_mlp_params(spec: ModelSpec, tp: int, ffn_hidden_size: int | None = None) -> RankParams:
    """A dense MLP with its pre-MLP norm (section 1.4): ``(f_glu + 1)*h*F`` sharded.

    >>> from megasolve.models.presets import load_preset
    >>> dense_mlp_params(load_preset("llama-3.1-8b"), tp=2).total  # 3*4096*14336/2 + 4096
    88084480
    """
    h, ns = spec.hidden_size, spec.num_norm_params_per_hidden
    ffn = spec.ffn_hidden_size if ffn_hidden_size is None else ffn_hidden_size
    _split(ffn, tp, "ffn_hidden_size", "--tp")
    sharded = (spec.gated_factor + 1) * h * ffn
    replicated = ns * h
    if spec.add_bias_linear:
        sharded += spec.gated_factor * ffn  # fc1 bias (column-parallel)
        replicated += h  # fc2 bias (row-parallel, replicated)
    return RankParams(tp_sharded=_split(sharded, tp, "MLP weights", "--tp"), replicated=replicated)


def moe_mlp_params(spec: ModelSpec, tp: int, ep: int, etp: int) -> RankParams:
    """The MLP half of an MoE layer (section 1.5): norm, router, shared experts, local experts.

    Routed experts: ``E/ep`` local experts, each ``(f_glu + 1)*d*F_m`` split over ``etp`` (``d`` = ``h``,
    or the latent size with ``--moe-latent-size``, whose two ``h x d`` projections every TP rank holds
    whole: ``parallel_mode="duplicated"``, moe_layer.py L279-303).
    Shared experts: an MLP of width ``F_s`` split over the attention TP group.
    """
    moe = spec.moe
    assert moe is not None
    h, ns = spec.hidden_size, spec.num_norm_params_per_hidden
    d = spec.expert_hidden_size
    replicated = ns * h + moe.num_experts * h + spec.latent_projection_params  # norm, router, latent projections
    if spec.add_bias_linear:
        replicated += moe.num_experts  # router bias
    if moe.shared_expert_gate and moe.shared_expert_ffn_hidden_size:
        replicated += h
    sharded = (spec.gated_factor + 1) * h * moe.shared_expert_ffn_hidden_size
    per_expert = (spec.gated_factor + 1) * d * moe.expert_ffn_hidden_size
    if spec.add_bias_linear:
        if etp != 1:
            raise MegasolveError(field="--etp", value=etp,
                                 rule="Bias in MoE is only supported when ETP==1 (TC L2612-2615)",
                                 fix="use --etp 1 or a model without linear biases")
        per_expert += spec.gated_factor * moe.expert_ffn_hidden_size + d
    local_experts = _split(moe.num_experts, ep, "num_moe_experts", "--ep")
    _split(moe.expert_ffn_hidden_size, etp, "moe_ffn_hidden_size", "--etp")
    expert = _split(local_experts * per_expert, etp, "expert weights", "--etp")
    return RankParams(tp_sharded=_split(sharded, tp, "shared-expert weights", "--tp"),
                      replicated=replicated, expert=expert)


def mamba_params(spec: ModelSpec, tp: int) -> RankParams:
    """A Mamba-2 layer of a hybrid ``MambaModel`` on one TP rank (``ssm/mamba_mixer.py``, TE spec
    ``models/mamba/mamba_layer_specs.py``: the layer norm is fused into ``in_proj``, a
    ``TELayerNormColumnParallelLinear``, replicated). With ``d_i = nheads*headdim``, ``G`` groups,
    state ``N``, conv kernel ``k``, all split over TP (``nheads % tp == 0`` and ``G % tp == 0``,
    L243-255): ``in_proj`` ``h x (2 d_i + 2GN + nheads)`` (z, x, B, C, dt; no bias), depthwise
    ``conv1d`` over ``x, B, C`` with bias ``(d_i + 2GN)(k + 1)``, ``dt_bias``, ``A_log``, ``D`` one
    per head (``D_has_hdim=False``), the gated RMSNorm ``d_i``, ``out_proj`` ``d_i x h`` (no bias).

    >>> from megasolve.models.spec import MambaSpec
    >>> spec = ModelSpec(name="h", num_layers=1, hidden_size=4096, ffn_hidden_size=21504, num_attention_heads=32,
    ...     num_query_groups=8, vocab_size=131072, swiglu=False, hybrid_pattern="M",
    ...     mamba=MambaSpec(num_heads=128, head_dim=64, state_dim=128, num_groups=8))
    >>> mamba_params(spec, 1).total  # 4096*18560 + 10240*5 + 3*128 + 8192 + 8192*4096 + 4096
    109640064
    """
    m = spec.mamba
    h, ns = spec.hidden_size, spec.num_norm_params_per_hidden
    _split(m.num_heads, tp, "mamba_num_heads", "--tp")
    _split(m.num_groups, tp, "mamba_num_groups", "--tp")
    d_i, gn = m.d_inner, m.num_groups * m.state_dim
    sharded = h * (2 * d_i + 2 * gn + m.num_heads)  # in_proj
    sharded += (d_i + 2 * gn) * (m.conv_kernel + 1)  # conv1d weight + bias
    sharded += 3 * m.num_heads + d_i + d_i * h  # dt_bias, A_log, D; gated norm; out_proj
    return RankParams(tp_sharded=_split(sharded, tp, "Mamba weights", "--tp"), replicated=ns * h)


def gated_delta_net_params(spec: ModelSpec, tp: int) -> RankParams:
    """A gated-DeltaNet mixer with its input norm on one TP rank (transformers
    ``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz`` ``h x (2 K + 2 V)`` and ``in_proj_ba`` ``h x 2 n_v``
    (no bias), a depthwise ``conv1d`` over q, k, v without bias ``(2K + V) x kernel``, ``dt_bias`` and
    ``A_log`` one per value head, a gated norm over one value head ``d_v``, ``out_proj`` ``V x h``;
    ``K = n_k d_k``, ``V = n_v d_v``. Heads split over TP; the norm over ``d_v`` is replicated.
    Megatron-Core builds the same shapes (core 0.16.1 ``ssm/gated_delta_net.py``: one ``in_proj`` of
    ``2K + 2V + 2 n_v`` outputs L146-158, ``conv1d`` with ``conv_bias=False`` L160-178, ``dt_bias`` /
    ``A_log`` per local value head L180-200, ``out_norm`` over ``value_head_dim`` L202-207, ``out_proj``
    L209; no bias anywhere: ``bias=False`` is the default the spec never overrides). ``out_norm`` is the
    model's normalization (``experimental_attention_variant_module_specs.py`` L69: ``backend.layer_norm``),
    so ``ns * d_v`` (weight + bias under LayerNorm). Checked per rank against GPTModel built by Megatron-Core
    0.16.1 (``benchmarks/megatron_gdn_param_golden.py``)."""
    g = spec.gated_delta_net
    h, ns = spec.hidden_size, spec.num_norm_params_per_hidden
    _split(g.num_key_heads, tp, "linear_num_key_heads", "--tp")
    _split(g.num_value_heads, tp, "linear_num_value_heads", "--tp")
    k, v = g.num_key_heads * g.key_head_dim, g.num_value_heads * g.value_head_dim
    sharded = h * (2 * k + 2 * v) + h * 2 * g.num_value_heads + (2 * k + v) * g.conv_kernel
    sharded += 2 * g.num_value_heads + v * h
    return RankParams(tp_sharded=_split(sharded, tp, "gated DeltaNet weights", "--tp"),
                      replicated=ns * h + ns * g.value_head_dim)


def layer_params(spec: ModelSpec, layer: int, tp: int, ep: int = 1, etp: int = 1) -> RankParams:
    """Decoder layer ``layer`` (0-based; MoE or dense from the model's layer pattern) on one rank.
    A hybrid ``MambaModel`` layer is one block only (Mamba mixer, attention, MLP or MoE, each with
    its own pre-norm: ``ssm/mamba_block.py`` L114-160)."""
    kind = spec.layer_kind(layer)
    if kind == "mamba":
        return mamba_params(spec, tp)
    if kind == "attention":
        return attention_params(spec, tp, indexer=spec.layer_has_indexer(layer))
    if kind == "mlp":
        return dense_mlp_params(spec, tp)
    mlp = moe_mlp_params(spec, tp, ep, etp) if spec.is_moe_layer(layer) else dense_mlp_params(spec, tp)
    if kind == "moe":
        return mlp
    if spec.linear_attention_pattern is not None and spec.linear_attention_pattern[layer]:
        return gated_delta_net_params(spec, tp) + mlp
    return attention_params(spec, tp, indexer=spec.layer_has_indexer(layer)) + mlp


def embedding_params(spec: ModelSpec, tp: int, vocab_size: int | None = None) -> RankParams:
    """Word embedding ``V/t x h`` (+ learned position embedding ``max_pos x h``, replicated)."""
    vocab = spec.padded_vocab_size(tp) if vocab_size is None else vocab_size
    replicated = spec.max_position_embeddings * spec.hidden_size \
        if spec.position_embedding_type == "learned_absolute" else 0
    return RankParams(tp_sharded=vocab * spec.hidden_size // tp, replicated=replicated)


def output_params(spec: ModelSpec, tp: int, pp: int, vocab_size: int | None = None) -> RankParams:
    """Final norm plus the output layer (section 1.2).

    The output weight exists unless embeddings are tied *and* the model is on one stage (with
    PP > 1 the last stage allocates its own copy of a tied weight).
    """
    vocab = spec.padded_vocab_size(tp) if vocab_size is None else vocab_size
    has_weight = spec.untie_embeddings_and_output_weights or pp > 1
    sharded = vocab * spec.hidden_size // tp if has_weight else 0
    return RankParams(tp_sharded=sharded, replicated=spec.num_norm_params_per_hidden * spec.hidden_size)


def mtp_params(spec: ModelSpec, tp: int, pp: int, ep: int = 1, etp: int = 1) -> RankParams:
    """Multi-token prediction block on the last stage (section 1.7), all built MTP layers.

    Per layer: ``enorm + hnorm + final norm`` (3*ns*h, replicated), ``eh_proj`` (2h x h, sharded) and
    one transformer layer of the last decoder layer's kind; one layer per depth, or a single one with
    ``--mtp-use-repeated-layer`` (``ModelSpec.mtp_built_layers``). With PP > 1 the stage also builds an
    embedding copy (``V/t x h``).
    """
    if spec.mtp_num_layers == 0:
        return RankParams()
    h, ns = spec.hidden_size, spec.num_norm_params_per_hidden
    per_depth = RankParams(tp_sharded=_split(2 * h * h, tp, "eh_proj", "--tp"), replicated=3 * ns * h)
    block = sum((per_depth + mtp_layer_params(spec, depth, tp, ep, etp)
                 for depth in range(1, spec.mtp_built_layers + 1)), RankParams())
    if pp > 1:
        block = block + RankParams(tp_sharded=spec.padded_vocab_size(tp) * h // tp)
    return block


def mtp_layer_params(spec: ModelSpec, depth: int, tp: int, ep: int = 1, etp: int = 1) -> RankParams:
    """The transformer layer of MTP depth ``depth`` (1-based): the last decoder layer's kind, with a DSA indexer
    by the MTP layers' own 1-based numbering (``multi_token_prediction.py`` builds them with
    ``layer_number`` = depth; Megatron-Bridge ``flop_utils.py`` counts their indexers the same way)."""
    whole = layer_params(spec, spec.num_layers - 1, tp, ep, etp)
    if spec.dsa is None or spec.layer_has_indexer(spec.num_layers - 1) == spec.dsa.computes_topk(depth):
        return whole
    sign = 1 if spec.dsa.computes_topk(depth) else -1
    return whole + RankParams(replicated=sign * dsa_indexer_params(spec))


def dsa_indexer_params(spec: ModelSpec) -> int:
    """Weights of one DSA indexer (replicated on every TP rank), 0 without DSA."""
    if spec.dsa is None:
        return 0
    return attention_params(spec, 1, indexer=True).replicated - attention_params(spec, 1).replicated


def dsa_split_problem(spec: ModelSpec, ids: list[list[list[int]]]) -> str | None:
    """Why Megatron-Core refuses this split of a model with DSA IndexShare (``topk_freq > 1``), or None: a layer
    that reuses top-k indices needs the layer that computes them earlier in its own virtual chunk
    (``_validate_dsa_index_share_pipeline_split``, experimental_attention_variant_module_specs.py L395-430 @d98e8a6)."""
    dsa = spec.dsa
    if dsa is None or dsa.topk_freq <= 1:
        return None
    for stage, chunks in enumerate(ids):
        for chunk in chunks:
            if not chunk:
                continue
            first = chunk[0] + 1  # 1-based layer number
            if not dsa.computes_topk(first):
                return (f"DSA index-share pipeline split is invalid: stage {stage} starts at layer {first}, which "
                        f"reuses the top-k indices of layer {dsa.source_layer(first)} on an earlier stage "
                        f"(dsa_indexer_topk_freq={dsa.topk_freq}, dsa_indexer_skip_topk_offset="
                        f"{dsa.skip_topk_offset}; experimental_attention_variant_module_specs.py L395-430)")
    return None


# ---------------------------------------------------------------------------------- pipeline split
def stage_layer_counts(spec: ModelSpec, layout: Layout) -> list[int]:
    """Decoder layers on each pipeline stage (``TB::get_num_layers_to_build`` L76-203, TC L2296-2370).

    >>> from megasolve.models.presets import load_preset
    >>> stage_layer_counts(load_preset("deepseek-v3"), Layout(pp=4, first_stage_layers=16, last_stage_layers=15))
    [16, 15, 15, 15]
    """
    if layout.pipeline_layout is not None:
        return [sum(len(chunk) for chunk in chunks) for chunks in stage_layer_ids(spec, layout)]
    L, p, v = spec.num_layers, layout.pp, layout.vpp
    first, last = layout.first_stage_layers, layout.last_stage_layers
    extra = layout.account_for_embedding + layout.account_for_loss
    if extra:  # the embedding / loss count as a layer of the first / last stage (TB L146-203)
        if (L + extra) % p or ((L + extra) // p) % v:
            raise MegasolveError(
                field="--pp", value=p,
                rule=f"num_layers + {extra} (embedding/loss) = {L + extra} must split evenly over pp ({p}) x "
                     f"vpp ({v}) (transformer_block.py L146-178)",
                fix="pick pp and vpp that divide the layer count plus the accounted embedding/loss")
        per = (L + extra) // p
        counts = [per] * p
        counts[0] -= layout.account_for_embedding
        counts[-1] -= layout.account_for_loss
        if min(counts) < 0 or (p == 1 and per - extra < 0):
            raise MegasolveError(field="--pp", value=p, rule="not enough layers for the embedding/loss stages",
                                 fix="use a smaller pp")
        return counts
    if first is None and last is None:
        if L % p:
            raise MegasolveError(
                field="--pp", value=p,
                rule=f"num_layers ({L}) must be divisible by the pipeline size (ARG L985-998)",
                fix="use a divisor of num_layers or set --first-stage-layers/--last-stage-layers")
        if (L // p) % v:
            raise MegasolveError(
                field="--vpp", value=v,
                rule=f"layers per stage ({L // p}) must be divisible by vpp (ARG L953-977)",
                fix="use a divisor of the layers per stage")
        return [L // p] * p
    if p == 1:
        raise MegasolveError(field="--first-stage-layers/--last-stage-layers", value=first or last,
                             rule="uneven pipeline splits need pp > 1", fix="drop them or raise --pp")
    set_stages = (first is not None) + (last is not None)
    middle_stages = p - set_stages
    middle_layers = L - (first or 0) - (last or 0)
    for name, value in (("--first-stage-layers", first), ("--last-stage-layers", last)):
        if value is not None and value % v:
            raise MegasolveError(field=name, value=value,
                                 rule=f"must be divisible by vpp ({v}) (TC L2330-2345)",
                                 fix="use a multiple of vpp")
    if middle_layers < 0 or bool(middle_layers) != bool(middle_stages):
        raise MegasolveError(
            field="--first-stage-layers/--last-stage-layers", value=f"{first}/{last}",
            rule=f"{middle_layers} layers remain for {middle_stages} middle stages (TC L2346-2360)",
            fix=f"first + last must leave a non-negative multiple of {max(middle_stages, 1)} layers")
    if middle_stages and (middle_layers % middle_stages or (middle_layers // middle_stages) % v):
        raise MegasolveError(
            field="--first-stage-layers/--last-stage-layers", value=f"{first}/{last}",
            rule=f"the {middle_layers} middle layers must split evenly over {middle_stages} stages"
                 f" (and vpp {v})",
            fix="pick first/last so that the remainder divides evenly")
    per_middle = middle_layers // middle_stages if middle_stages else 0
    counts = [per_middle] * p
    if first is not None:
        counts[0] = first
    if last is not None:
        counts[-1] = last
    return counts


def stage_layer_ids(spec: ModelSpec, layout: Layout) -> list[list[list[int]]]:
    """Global decoder-layer indices per stage and virtual chunk: ``ids[stage][chunk]``.

    Virtual chunk ``j`` of every stage comes before chunk ``j + 1`` of any stage (round-robin, TB
    L161-186: 8 layers, p=2, v=2 -> stage 0 [0,1][4,5], stage 1 [2,3][6,7]).

    >>> from megasolve.models.spec import ModelSpec
    >>> toy = ModelSpec(name="t", num_layers=8, hidden_size=8, ffn_hidden_size=8, num_attention_heads=1,
    ...                 num_query_groups=1, vocab_size=8)
    >>> stage_layer_ids(toy, Layout(pp=2, vpp=2))
    [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    """
    if layout.pipeline_layout is not None:
        return pipeline_layout_ids(spec, layout)
    counts = stage_layer_counts(spec, layout)
    v, p = layout.vpp, layout.pp
    # per (stage, chunk): an even share of the stage; with the embedding/loss accounted, the first chunk
    # of the first stage and the last chunk of the last stage hold one layer fewer (TB L191-203)
    shares = [(c + (stage == 0) * layout.account_for_embedding + (stage == p - 1) * layout.account_for_loss) // v
              for stage, c in enumerate(counts)]
    sizes = [[share] * v for share in shares]
    if layout.account_for_embedding:
        sizes[0][0] -= 1
    if layout.account_for_loss:
        sizes[-1][-1] -= 1
    ids: list[list[list[int]]] = [[] for _ in counts]
    next_layer = 0
    for chunk in range(v):
        for stage in range(p):
            size = sizes[stage][chunk]
            ids[stage].append(list(range(next_layer, next_layer + size)))
            next_layer += size
    return ids


def pipeline_layout_ids(spec: ModelSpec, layout: Layout) -> list[list[list[int]]]:
    """``stage_layer_ids`` from a ``--pipeline-model-parallel-layout`` string, validated with Megatron's
    rules (``models/pipeline_layout.py``) and against the layout's vpp (TC L1340-1351: a given
    virtual size must equal the layout's). MTP layers on a rank other than the last (``mtp_standalone``,
    TC L1355) are refused: the cost model places MTP compute and memory on the loss stage."""
    from megasolve.models.pipeline_layout import parse

    parsed = parse(layout.pipeline_layout, pp=layout.pp, num_layers=spec.num_layers,
                   mtp_num_layers=spec.mtp_num_layers)
    if parsed.vpp != layout.vpp:
        raise MegasolveError(field="--vpp", value=layout.vpp,
                             rule=f"conflicts with --pipeline-layout ({len(parsed.stages)} stages / pp {layout.pp} = "
                                  f"vpp {parsed.vpp}; transformer_config.py L1340-1351)",
                             fix=f"drop --vpp or pass --vpp {parsed.vpp}")
    rank = parsed.mtp_rank()
    if rank is not None and rank != layout.pp - 1:
        raise MegasolveError(field="--pipeline-layout", value=layout.pipeline_layout,
                             rule=f"MTP on pipeline rank {rank}, not the last (Megatron's mtp_standalone): megasolve "
                                  f"costs MTP layers and their loss on the last stage only",
                             fix="place the m's in the last rank's last stage (e.g. ...|tmL)")
    return parsed.decoder_ids()


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """What one rank of pipeline stage ``stage`` holds."""

    stage: int
    num_layers: int
    num_moe_layers: int
    has_embedding: bool
    has_output: bool
    has_mtp: bool
    params: RankParams
    # the stage's transformer layers (decoder and MTP), each a Megatron-FSDP unit module
    # (``TransformerLayer`` / ``MoETransformerLayer``, ``mcore_fsdp_adapter.py`` L171), and the largest one
    layers: RankParams = RankParams()
    largest_layer: RankParams = RankParams()

    @property
    def total(self) -> int:
        return self.params.total


def stage_params(spec: ModelSpec, layout: Layout) -> list[StageParams]:
    """Per-rank parameters of every pipeline stage (first holds the embedding, last the output layer,
    final norm and MTP block; reference section 1.9).

    >>> from megasolve.models.presets import load_preset
    >>> [s.total for s in stage_params(load_preset("llama-3.1-70b"), Layout(tp=4, pp=4, cp=2, dp=2))][0]
    4541710336
    """
    tp, pp, ep, etp = layout.tp, layout.pp, layout.ep, layout.etp
    stages = []
    for stage, chunks in enumerate(stage_layer_ids(spec, layout)):
        layer_ids = [i for chunk in chunks for i in chunk]
        first, last = stage == 0, stage == pp - 1
        has_mtp = last and spec.mtp_num_layers > 0
        per_layer = [layer_params(spec, i, tp, ep, etp) for i in layer_ids]
        if has_mtp:  # each built MTP layer holds one transformer layer of the last decoder layer's kind
            per_layer += [mtp_layer_params(spec, d, tp, ep, etp) for d in range(1, spec.mtp_built_layers + 1)]
        layers = sum(per_layer, RankParams())
        params = sum(per_layer[:len(layer_ids)], RankParams())
        if first:
            params = params + embedding_params(spec, tp)
        if last:
            params = params + output_params(spec, tp, pp) + mtp_params(spec, tp, pp, ep, etp)
        stages.append(StageParams(
            stage=stage, num_layers=len(layer_ids),
            num_moe_layers=sum(spec.is_moe_layer(i) for i in layer_ids),
            has_embedding=first, has_output=last, has_mtp=has_mtp, params=params, layers=layers,
            largest_layer=max(per_layer, key=lambda p: p.total, default=RankParams())))
    return stages


def total_params(spec: ModelSpec, include_mtp: bool = False) -> int:
    """Parameters of the whole model, unpadded vocab, as model cards quote them.

    >>> from megasolve.models.presets import load_preset
    >>> total_params(load_preset("llama-3.1-8b"))
    8030261248
    """
    total = RankParams()
    for i in range(spec.num_layers):
        total = total + layer_params(spec, i, tp=1)
    total = total + embedding_params(spec, 1, spec.vocab_size) + output_params(spec, 1, 1, spec.vocab_size)
    if include_mtp and spec.mtp_num_layers:
        total = total + mtp_params(spec, tp=1, pp=1)
    return total.total


def active_params(spec: ModelSpec, include_input_embedding: bool = False) -> int:
    """Parameters touched per token: routed experts counted ``top_k`` times instead of ``E``, and, as
    model cards count it, without the input embedding (a table lookup, no FLOPs; the gpt-oss model
    card, arXiv 2508.10925 Table 1: 5.13B active of 116.83B for gpt-oss-120b). With tied embeddings the
    shared matrix is the output layer and stays. ``include_input_embedding`` restores it.

    >>> from megasolve.models.presets import load_preset
    >>> round(active_params(load_preset("gpt-oss-120b")) / 1e9, 2)
    5.13
    """
    total = total_params(spec)
    if not include_input_embedding and spec.untie_embeddings_and_output_weights:
        total -= spec.vocab_size * spec.hidden_size
    if not spec.is_moe:
        return total
    moe = spec.moe
    per_expert = moe_mlp_params(spec, 1, 1, 1).expert // moe.num_experts
    return total - moe.num_moe_layers * per_expert * (moe.num_experts - moe.top_k)


def model_params(spec: ModelSpec) -> dict[str, int | str]:
    """The model's size as the JSON reports it (``model_params``): ``params_total`` as model cards
    count it (language model, MTP excluded, plus a multimodal config's vision tower),
    ``params_active`` per token without the input embedding (``active_params``),
    ``params_language`` what megasolve plans, ``params_vision`` counted but not planned.

    >>> model_params(__import__("megasolve.models.presets", fromlist=["x"]).load_preset("llama-3.1-8b"))["params_total"]
    8030261248
    """
    language = total_params(spec)
    return {"name": spec.name, "params_total": language + spec.vision_params, "params_active": active_params(spec),
            "params_language": language, "params_vision": spec.vision_params}
