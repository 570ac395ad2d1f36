"""Which decoder layers each pipeline stage holds, by kind: the one owner of per-stage layer sums.

``estimate`` (``cost/step.py``, ``cost/memory.py``) and the solver's tables (``solver/tables.py``)
both cost a stage as "count of each layer kind x that kind's per-layer cost": the counts come from
here and nowhere else, so the two cannot disagree on which layers a stage holds.

A layer's *kind* is everything its per-layer cost depends on beyond the layout: its MLP (dense or
MoE, ``ModelSpec.is_moe_layer``) and its attention span (sliding window ``--window-size`` on the
layers ``--window-attn-skip-freq`` leaves windowed, or a Llama-4 attention chunk). Which layers sit
on which stage is Megatron's assignment (``models.params.stage_layer_ids``: ``TB::
get_num_layers_to_build`` / ``get_transformer_layer_offset``, or a ``--pipeline-model-parallel-layout``
string), so a stage costs exactly the windowed and full-attention layers it holds: with Gemma-3's 5:1
local/global pattern (every 6th layer global) on 62 layers split 14/16/16/16, the stages hold 2, 3,
2 and 3 global layers.

Hybrid models are kinds too (``LayerKind.mixer`` / ``LayerKind.mlp``): a ``MambaModel`` layer is one
block with its own pre-norm (``--hybrid-override-pattern``: ``M`` Mamba-2 mixer, ``*`` attention, ``-``
MLP, ``E`` MoE; Megatron-Core ``models/hybrid/hybrid_block.py``), and a Qwen3-Next layer is a GPT layer
whose mixer is a gated DeltaNet (``--linear-attention-freq``). Every engine picks them up through
``stage_layers``; their per-kind costs are ``cost/hybrid.py``'s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from megasolve.models.layout import Layout, Workload
from megasolve.models.params import stage_layer_ids
from megasolve.models.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class LayerKind:
    """What one decoder layer's per-layer cost depends on beyond the layout.

    ``window`` / ``chunk``: the layer's sliding window / attention chunk in tokens (None: full causal
    attention); ``mixer``: ``attention``, ``mamba`` (Mamba-2), ``gdn`` (gated DeltaNet) or ``none`` (a
    hybrid MLP / MoE layer); ``mlp``: whether the layer has an MLP block (dense, or MoE with ``moe``);
    ``layer``: one decoder layer of this kind (its index, for ``ModelSpec.attended_pairs``; not part of
    the identity).

    >>> LayerKind(moe=False, window=1024).name, LayerKind(moe=True).name
    ('dense_w1024', 'moe')
    >>> LayerKind(mixer="mamba", mlp=False).name, LayerKind(mixer="none", moe=True).name
    ('h_mamba', 'h_moe')
    """

    moe: bool = False
    window: int | None = None
    chunk: int | None = None
    mixer: str = "attention"
    mlp: bool = True
    # DSA IndexShare (``DSASpec.topk_freq`` > 1): the layer reuses an earlier layer's top-k and has no indexer
    reuses_topk: bool = False
    # kept in bf16 in an FP8 / FP4 run (``Workload.in_bf16``: --first-last-layers-bf16): its time and saved
    # activations are costed at bf16 (``Workload.layer_precision``); its static memory as the quantized layers'
    # (the quantized weight copy it does not hold is counted: the safe side)
    bf16: bool = False
    # GEMM modules a precision recipe (``Workload.module_precision``) runs in another format than the run's:
    # ``(module, format)``, module as ``gemm_modules`` names it (``Workload.for_kind`` hands them to the costs)
    overrides: tuple[tuple[str, str], ...] = ()
    layer: int = field(default=0, compare=False, hash=False)

    @property
    def is_gpt(self) -> bool:
        """An attention + MLP transformer layer (the kinds the GPT terms cost)."""
        return self.mixer == "attention" and self.mlp

    @property
    def has_attention(self) -> bool:
        return self.mixer == "attention"

    @property
    def name(self) -> str:
        """Term-name suffix: ``dense`` / ``moe`` for full attention (the names before windows existed);
        hybrid one-block layers ``h_mamba`` / ``h_attn`` / ``h_mlp`` / ``h_moe``, DeltaNet layers
        ``gdn_dense`` / ``gdn_moe``."""
        if not self.mlp:
            out = "h_" + ("attn" if self.mixer == "attention" else self.mixer)
        elif self.mixer == "none":
            out = "h_moe" if self.moe else "h_mlp"
        elif self.mixer == "gdn":
            out = "gdn_moe" if self.moe else "gdn_dense"
        else:
            out = "moe" if self.moe else "dense"
        if self.window is not None:
            out += f"_w{self.window}"
        if self.chunk is not None:
            out += f"_c{self.chunk}"
        if self.reuses_topk:
            out += "_idxshare"
        if self.bf16:
            out += "_bf16"
        return out + self._overrides_suffix

    @property
    def memory_name(self) -> str:
        """Term-name suffix of the layer's saved activations: a sliding window or chunk changes none of
        the tensors a layer keeps (flash / fused attention skips score blocks; unfused attention applies
        it as a mask over the same scores: ``memory.attention_activation_terms``), so only the MLP kind;
        a hybrid or DeltaNet kind is its own name."""
        if not self.is_gpt:
            return self.name
        return ("moe" if self.moe else "dense") + ("_bf16" if self.bf16 else "") + self._overrides_suffix

    @property
    def _overrides_suffix(self) -> str:
        """``_q[linear_qkv=bf16,...]`` for a kind with module overrides, else empty."""
        if not self.overrides:
            return ""
        return "_q[" + ",".join(f"{m.rsplit('.', 1)[-1]}={f}" for m, f in self.overrides) + "]"

    def attention_fraction(self, spec: ModelSpec, seq_length: int) -> float:
        """Attended (query, key) pairs relative to full causal attention (1.0 without window or chunk).

        >>> from megasolve.models.presets import load_preset
        >>> spec = load_preset("mistral-7b-v0.1")  # every layer: a 4,096-token window
        >>> round(layer_kind(spec, 0).attention_fraction(spec, 32768), 3)
        0.234
        """
        if self.window is None and self.chunk is None and spec.dsa is None:
            return 1.0
        return spec.attended_pairs(self.layer, seq_length) / (seq_length * (seq_length + 1) / 2)


def layer_kind(spec: ModelSpec, layer: int, workload: Workload | None = None) -> LayerKind:
    """The kind of decoder layer ``layer`` (0-based); with ``workload``, whether it is kept in bf16
    (``Workload.in_bf16``).

    >>> from megasolve.models.presets import load_preset
    >>> [layer_kind(load_preset("nemotron-h-8b"), i).name for i in range(5)]
    ['h_mamba', 'h_mlp', 'h_mamba', 'h_mlp', 'h_mamba']
    >>> layer_kind(load_preset("llama-3.1-8b"), 31, Workload(precision="fp8", fp8_recipe="tensorwise",
    ...                                                     num_layers_at_end_in_bf16=1)).name
    'dense_bf16'
    """
    kind = _layer_kind(spec, layer)
    if workload is not None and workload.in_bf16(layer, spec.num_layers):
        return replace(kind, bf16=True)
    if workload is not None and workload.module_precision:
        return replace(kind, overrides=module_overrides(spec, kind, workload, f"decoder.layers.{layer}."))
    return kind


def gemm_modules(spec: ModelSpec, kind: LayerKind) -> tuple[str, ...]:
    """The Transformer Engine linear modules of a decoder layer of ``kind``, by their path inside the layer
    (``GPTModel`` / ``HybridModel`` ``named_modules()``): attention ``self_attention.linear_qkv`` /
    ``linear_proj`` (MLA: ``linear_q_proj`` or ``linear_q_down_proj`` + ``linear_q_up_proj``,
    ``linear_kv_down_proj``, ``linear_kv_up_proj``, ``linear_proj``; ``multi_latent_attention.py``), a Mamba
    mixer's ``mixer.in_proj`` / ``mixer.out_proj`` (``mamba_layer.py`` L89, ``mamba_mixer.py`` L281, L437), a
    DeltaNet's ``self_attention.in_proj`` / ``out_proj`` (``gated_delta_net/common.py`` L211, L274), the MLP's
    ``mlp.linear_fc1`` / ``linear_fc2``, an MoE layer's ``mlp.experts.linear_fc1`` / ``linear_fc2`` (TE grouped),
    ``mlp.shared_experts.linear_fc1`` / ``linear_fc2`` and latent ``mlp.fc1_latent_proj`` / ``fc2_latent_proj``
    (``moe_layer.py`` L279-303). The router is not a TE linear (it stays unquantized).

    >>> from megasolve.models.presets import load_preset
    >>> gemm_modules(load_preset("llama-3.1-8b"), LayerKind())
    ('self_attention.linear_qkv', 'self_attention.linear_proj', 'mlp.linear_fc1', 'mlp.linear_fc2')
    """
    out: list[str] = []
    if kind.mixer == "attention":
        if spec.mla is None:
            out += ["self_attention.linear_qkv", "self_attention.linear_proj"]
        else:
            out += ["self_attention.linear_q_proj"] if spec.mla.q_lora_rank is None else [
                "self_attention.linear_q_down_proj", "self_attention.linear_q_up_proj"]
            out += ["self_attention.linear_kv_down_proj", "self_attention.linear_kv_up_proj",
                    "self_attention.linear_proj"]
    elif kind.mixer == "mamba":
        out += ["mixer.in_proj", "mixer.out_proj"]
    elif kind.mixer == "gdn":
        out += ["self_attention.in_proj", "self_attention.out_proj"]
    if kind.mlp and kind.moe:
        out += ["mlp.experts.linear_fc1", "mlp.experts.linear_fc2"]
        if spec.moe.shared_expert_ffn_hidden_size:
            out += ["mlp.shared_experts.linear_fc1", "mlp.shared_experts.linear_fc2"]
        if spec.latent_projection_params:
            out += ["mlp.fc1_latent_proj", "mlp.fc2_latent_proj"]
    elif kind.mlp:
        out += ["mlp.linear_fc1", "mlp.linear_fc2"]
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def module_overrides(spec: ModelSpec, kind: LayerKind, workload: Workload, prefix: str) -> tuple[tuple[str, str], ...]:
    """The modules of ``kind`` that the precision recipe runs in another format than the run's, with their
    format, their paths under ``prefix`` (``decoder.layers.N.``, ``mtp.layers.N.mtp_model_layer.``).
    A pattern naming a layer number is matched against the global layer number; Megatron matches the module
    path of the local model chunk, whose layers are numbered from 0 on each pipeline stage."""
    if not workload.quantized:
        return ()
    default = workload.quant_recipe
    out = []
    for module in gemm_modules(spec, kind):
        fmt = workload.module_format(prefix + module)
        if fmt != default:
            out.append((module, fmt))
    return tuple(out)


def _layer_kind(spec: ModelSpec, layer: int) -> LayerKind:
    if spec.is_hybrid:
        kind = spec.layer_kind(layer)  # mamba_hybrid_layer_allocation.py symbols
        if kind == "mamba":
            return LayerKind(mixer="mamba", mlp=False, layer=layer)
        if kind == "attention":
            return LayerKind(mlp=False, window=spec.layer_window(layer), chunk=spec.layer_chunk(layer), layer=layer)
        return LayerKind(mixer="none", moe=kind == "moe", layer=layer)
    if spec.linear_attention_pattern is not None and spec.linear_attention_pattern[layer]:
        return LayerKind(mixer="gdn", moe=spec.is_moe_layer(layer), layer=layer)
    return LayerKind(moe=spec.is_moe_layer(layer), window=spec.layer_window(layer), chunk=spec.layer_chunk(layer),
                     reuses_topk=spec.dsa is not None and not spec.layer_has_indexer(layer), layer=layer)


def has_block_kinds(spec: ModelSpec) -> bool:
    """Whether any decoder layer is not an attention + MLP transformer layer (hybrid or DeltaNet)."""
    return spec.is_hybrid or (spec.linear_attention_pattern is not None and any(spec.linear_attention_pattern))


def model_layer_kinds(spec: ModelSpec, workload: Workload | None = None) -> tuple[LayerKind, ...]:
    """The distinct kinds among the model's decoder layers (and its MTP layers, which take the last
    decoder layer's kind), in order of first appearance.

    >>> from megasolve.models.presets import load_preset
    >>> [k.name for k in model_layer_kinds(load_preset("gemma-3-27b"))]
    ['dense_w1024', 'dense']
    """
    seen: dict[LayerKind, None] = {}
    for i in range(spec.num_layers):
        seen.setdefault(layer_kind(spec, i, workload))
    return tuple(seen)


def mtp_layer_kind(spec: ModelSpec, workload: Workload | None = None) -> LayerKind:
    """Each MTP depth holds one transformer layer of the last decoder layer's kind (``params.stage_params``); with
    DSA it runs its own indexer (MTP layers are numbered from 1, ``params.mtp_layer_params``; costed as depth 1's).
    With ``workload``: under FP8 it takes the global FP8 context, under FP4 none -- its GEMMs run in bf16
    (``multi_token_prediction.py`` L1385-1394 @d98e8a6: "currently ignoring FP4 in MTP layers")."""
    kind = _layer_kind(spec, spec.num_layers - 1)
    kind = replace(kind, reuses_topk=False) if kind.reuses_topk else kind
    if workload is not None and workload.precision == "fp4":
        return replace(kind, bf16=True)
    if workload is not None and workload.module_precision and workload.quantized:  # under a precision recipe
        return replace(kind, overrides=module_overrides(spec, kind, workload, "mtp.layers.0.mtp_model_layer."))
    return kind


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLayers:
    """The decoder layers of one pipeline stage (all its virtual chunks): how many of each kind keep
    their activations (``base``) and how many are stored as inputs only under full recompute
    (``recomputed``, ``recomputed_layers``), in kind order of ``model_layer_kinds``."""

    stage: int
    layer_ids: tuple[int, ...]
    base: tuple[tuple[LayerKind, int], ...]
    recomputed: tuple[tuple[LayerKind, int], ...]
    # per virtual chunk, in the schedule's chunk order: ``(kind, recomputed, count)`` as ``counts()`` (the
    # chunks' activations peak unevenly when their sizes differ: ``memory.chunk_inflight``)
    chunks: tuple[tuple[tuple[LayerKind, bool, int], ...], ...] = ()

    def counts(self) -> tuple[tuple[LayerKind, bool, int], ...]:
        """``(kind, recomputed, count)`` for every non-empty group: what a stage sum runs over."""
        return tuple((k, False, n) for k, n in self.base) + tuple((k, True, n) for k, n in self.recomputed)

    def chunk_sizes(self) -> tuple[int, ...]:
        """Decoder layers of each virtual chunk."""
        return tuple(sum(n for _, _, n in chunk) for chunk in self.chunks)

    def count(self, *, moe: bool | None = None, recomputed: bool | None = None) -> int:
        """Layers of the stage, optionally only MoE / dense ones and only recomputed / stored ones."""
        return sum(n for k, rc, n in self.counts()
                   if (moe is None or k.moe == moe) and (recomputed is None or rc == recomputed))

    @property
    def kinds(self) -> tuple[LayerKind, ...]:
        return tuple(dict.fromkeys(k for k, _, _ in self.counts()))


def recomputed_layers(layout: Layout, chunks: list[list[int]]) -> set[int]:
    """Layers stored as inputs only: all with full recompute, or the first ``recompute_num_layers``
    of each virtual chunk with the block method (TC L1901-1925)."""
    if layout.recompute != "full":
        return set()
    if layout.recompute_num_layers is None:
        return {i for chunk in chunks for i in chunk}
    return {i for chunk in chunks for i in chunk[:layout.recompute_num_layers]}


def stage_layers(spec: ModelSpec, layout: Layout, workload: Workload | None = None) -> list[StageLayers]:
    """Per pipeline stage, its decoder layers by kind (Megatron's layer -> stage assignment,
    ``stage_layer_ids``; recompute per virtual chunk, ``recomputed_layers``; with ``workload``, the layers
    it keeps in bf16 are kinds of their own).

    >>> from megasolve.models.presets import load_preset
    >>> stages = stage_layers(load_preset("gemma-3-27b"), Layout(pp=4, first_stage_layers=14, last_stage_layers=16))
    >>> [(s.count(), [(k.name, n) for k, n in s.base]) for s in stages]  # doctest: +NORMALIZE_WHITESPACE
    [(14, [('dense_w1024', 12), ('dense', 2)]), (16, [('dense_w1024', 13), ('dense', 3)]),
     (16, [('dense_w1024', 14), ('dense', 2)]), (16, [('dense_w1024', 13), ('dense', 3)])]
    """
    order = {k: j for j, k in enumerate(model_layer_kinds(spec, workload))}
    out = []
    for stage, chunks in enumerate(stage_layer_ids(spec, layout)):
        stored = recomputed_layers(layout, chunks)
        ids = tuple(i for chunk in chunks for i in chunk)
        base: dict[LayerKind, int] = {}
        rc: dict[LayerKind, int] = {}
        per_chunk = []
        for chunk in chunks:
            here: dict[tuple[LayerKind, bool], int] = {}
            for i in chunk:
                kind = layer_kind(spec, i, workload)
                target = rc if i in stored else base
                target[kind] = target.get(kind, 0) + 1
                here[(kind, i in stored)] = here.get((kind, i in stored), 0) + 1
            per_chunk.append(tuple((k, r, n) for (k, r), n in sorted(here.items(), key=lambda kv: (kv[0][1],
                                                                                                  order[kv[0][0]]))))
        out.append(StageLayers(stage=stage, layer_ids=ids,
                               base=tuple(sorted(base.items(), key=lambda kv: order[kv[0]])),
                               recomputed=tuple(sorted(rc.items(), key=lambda kv: order[kv[0]])),
                               chunks=tuple(per_chunk)))
    return out
