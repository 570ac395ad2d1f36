"""The cost model of ``cost/`` as integer term tables over small groups of axes, and the per-stage
linear forms over those terms.

Every term is a pure function of a few axes (e.g. a dense layer's time of ``(tp, cp, mbs, sp,
selective)``), evaluated by the functions in ``cost/`` and quantised once (``quantise_s``: whole
microseconds; ``quantise_bytes``: MiB rounded *up*, so a layout never looks smaller than it is).
The pipeline structure -- which layers sit on which stage, recomputed or not, in-flight
micro-batches -- comes from ``PipelineRow``s over ``(pp, vpp, split, rc)``; per stage slot,
``compiled`` gives the linear forms (time, compute, DP traffic, optimizer, memory) and
``memory_form`` the scaled stage memory. How the slots' values combine into a step and a memory
check is ``cost/combine.py``'s alone: ``evaluate`` runs it in integer arithmetic (the oracle),
``cpsat.py`` encodes it, ``bounds.py`` relaxes it, and ``estimate`` runs it in floats.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable

from megasolve.cost import combine
from megasolve.cost.calibration import calibration
from megasolve.cost.layers import LayerKind, has_block_kinds, model_layer_kinds, mtp_layer_kind, stage_layers
from megasolve.cost.memory import (ActivationShape, adam_state_bytes_per_param, band_parts, chunk_inflight,
                                   chunk_weights, comm_buffer_bytes, deferred_wgrad_bytes, first_stage_extra_bytes,
                                   fixed_allocation_bytes, fp8_weight_bytes_per_param, fsdp_static_bytes,
                                   last_stage_peak_extra_bytes, layer_activation_bytes, moe_stage_bytes,
                                   mtp_activation_bytes, offload_resident_bytes, offloaded_optimizer, other_bytes,
                                   selective_transient_bytes, static_bytes, userbuffer_bytes)
from megasolve.cost.step import (DpComm, combined_warmup_units, dp_contention_parts, dp_group_comm, dp_overlap_fraction,
                                 muon_ns_flops, optimizer_shard_s, param_gather_after_step, pp_unit_comm_s,
                                 unpaired_ep_s)
from megasolve.cost.memory import DEFAULT_RECOMPUTE_MODULES, block_modules
from megasolve.cost.recompute import uses_core_attn
from megasolve.cost.step import (layer_ep_comm_s, layer_time_without_ep, output_head_time, resolve_cp_comm_type,
                                  selective_modules_time)
from megasolve.models import ranks
from megasolve.models.layout import CP_COMM_FASTEST, MOE_DISPATCHERS, Layout, Workload
from megasolve.models.params import (RankParams, attention_params, dense_mlp_params, dsa_indexer_params,
                                     embedding_params, layer_params, moe_mlp_params, mtp_params, output_params)
from megasolve.models.spec import ModelSpec
from megasolve.cost.offload import activation_offload_exposed_s
from megasolve.solver import knobs as knobs_
from megasolve.solver.space import MAX_VPP, Point, rc_fields, rc_sel
from megasolve.topology.cluster import Cluster

MIB = 2**20
BF16_PIECES = ("embedding", "output1", "outputN")  # no FP8 weight copy (memory.bf16_weights)


def quantise_s(seconds: float) -> int:
    """Seconds -> whole microseconds (round half up). The only time quantisation in the solver."""
    return int(math.floor(seconds * 1e6 + 0.5))


def quantise_bytes(num_bytes: float) -> int:
    """Bytes -> MiB, rounded up (never understate memory)."""
    return int(math.ceil(num_bytes / MIB - 1e-9))


@dataclass(frozen=True, slots=True)
class Term:
    name: str
    axes: tuple[str, ...]
    fn: Callable[..., int]


def _activation_terms(layers: Iterable[tuple[LayerKind, bool, int]],
                      counts: dict[str, int] | None = None) -> list[tuple[int, str]]:
    """``(count, term)`` of one micro-batch's saved activations of ``layers`` (``(kind, recomputed, count)``):
    ``ma_<kind>`` per stored layer, ``ma_input`` per recomputed one; ``counts`` starts the sums."""
    counts = dict(counts or {})
    for kind, recomputed, n in layers:
        term = "ma_input" if recomputed else f"ma_{kind.memory_name}"
        counts[term] = counts.get(term, 0) + n
    return [(c, t) for t, c in counts.items() if c]


@dataclass(frozen=True, slots=True, kw_only=True)
class Slot:
    """Pipeline stages of one row that share a composition (same time, same static memory): the layers
    of each kind they hold (``layers.StageLayers``: ``base`` keep their activations, ``recomputed``
    are stored as inputs only)."""

    base: tuple[tuple[LayerKind, int], ...]
    recomputed: tuple[tuple[LayerKind, int], ...]
    first: bool
    last: bool
    mtp: bool
    stages: tuple[int, ...]  # the stages with this composition, lowest first
    dense_off: int = 0  # of the dense layers keeping activations: those offloaded to host memory
    moe_off: int = 0
    # per virtual chunk ``(kind, recomputed, count)`` (``layers.StageLayers.chunks``): what is in flight at the
    # stage's activation peak (``memory.chunk_inflight``)
    chunks: tuple[tuple[tuple[LayerKind, bool, int], ...], ...] = ()

    @property
    def stage(self) -> int:
        """Lowest stage index with this composition (most micro-batches in flight)."""
        return self.stages[0]

    @property
    def multiplicity(self) -> int:
        return len(self.stages)

    def layers(self) -> tuple[tuple[LayerKind, bool, int], ...]:
        """``(kind, recomputed, count)``: what the slot's per-layer sums run over."""
        return tuple((k, False, n) for k, n in self.base) + tuple((k, True, n) for k, n in self.recomputed)

    def _count(self, moe: bool, recomputed: bool) -> int:
        return sum(n for k, rc, n in self.layers() if k.moe == moe and rc == recomputed)

    @property
    def dense_base(self) -> int:  # dense layers storing full activations
        return self._count(False, False)

    @property
    def moe_base(self) -> int:
        return self._count(True, False)

    @property
    def dense_rc(self) -> int:  # dense layers with full recompute (input only)
        return self._count(False, True)

    @property
    def moe_rc(self) -> int:
        return self._count(True, True)

    @property
    def dense(self) -> int:
        return self.dense_base + self.dense_rc

    @property
    def moe(self) -> int:
        return self.moe_base + self.moe_rc


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineRow:
    pp: int
    vpp: int
    split: tuple  # space.SPLIT_FIELDS: (first, last, account_for_embedding, account_for_loss, pipeline_layout)
    rc: tuple[str, int | None]
    slots: tuple[Slot, ...]


class CostTables:
    """Integer term tables for one (model, cluster, workload), filled lazily and cached."""

    def __init__(self, spec: ModelSpec, cluster: Cluster, workload: Workload, *, headroom_bytes: float = 0.0,
                 band: bool = False, knobs: frozenset[str] = frozenset()) -> None:
        """``headroom_bytes``: memory every stage must leave free (``solve``'s ``--min-headroom``);
        ``band``: every stage must fit with its uncertainty band (``cost/memory.py`` ``band_parts``;
        ``solve``'s default); ``knobs``: the communication knobs chosen per layout (``knobs.py``; off in
        ``workload``)."""
        self.spec, self.cluster, self.workload = spec, cluster, workload
        self.knobs = knobs_.applicable(knobs, workload)
        # the time terms' workload: the TP overlap on wherever Megatron allows it (knobs.py)
        # and the CP communication resolved per shape to the fastest type allowed (cost/step.py)
        self.time_workload = replace(workload, tp_comm_overlap=True) if "tp_comm_overlap" in self.knobs else workload
        if "cp_comm_type" in self.knobs:
            self.time_workload = replace(self.time_workload, cp_comm_type=CP_COMM_FASTEST)
        self.moe_available = knobs_.moe_available(spec, workload, self.knobs)
        # the workload with each dispatcher the ``disp`` axis can take (space.py)
        self.with_dispatcher = {d: replace(workload, moe_dispatcher=d, moe_ep_overlap=False,
                                           moe_shared_expert_overlap=False, moe_pad_expert_input_to_capacity=False,
                                           moe_router_padding_for_fp8=False)
                                for d in MOE_DISPATCHERS}  # (for the buffers only: the other knobs cleared)
        self.with_dispatcher[knobs_.NCCL] = self.with_dispatcher["alltoall"]  # no buffers either way
        self.permits = tuple(sorted({(e and self.moe_available[0], s and self.moe_available[1])
                                     for e in (False, True) for s in (False, True)}, reverse=True))
        self.headroom_bytes = headroom_bytes
        self.band = band
        cal = calibration()
        self.overlap_pct = int(round(dp_overlap_fraction(workload) * combine.OVERLAP_SCALE))
        self.fsdp_overlap = combine.FsdpOverlap(
            int(round(cal["time"]["fsdp_overlap_fraction"] * combine.OVERLAP_SCALE)),
            int(round(cal["time"]["fsdp_overlap_contention"] * combine.OVERLAP_SCALE)))
        self.dp_contention = dp_contention_parts()
        self.overhead_us = quantise_s(cal["time"]["step_overhead_s"])
        self.other_mib = quantise_bytes(other_bytes(cluster))
        self.capacity_mib = int(max(0.0, cluster.gpu.usable_memory_bytes - headroom_bytes) // MIB)
        # the memory forms' unit: MiB / combine.BAND_SCALE (the band's fractions are integral in it)
        self.capacity_units = combine.BAND_SCALE * self.capacity_mib
        self.mtp_moe = spec.mtp_num_layers > 0 and spec.is_moe_layer(spec.num_layers - 1)
        # hybrid / DeltaNet layers (cost/layers.py kinds that are not attention + MLP): per-kind pieces
        self.block_kinds = tuple(k for k in model_layer_kinds(spec) if not k.is_gpt) if has_block_kinds(spec) else ()
        # the kinds of the layers a quantized run keeps in bf16 (--first-last-layers-bf16), whose saved activations
        # differ (bf16 GEMM inputs): their ``ma_`` terms
        # (and the kinds a precision recipe overrides modules of, whose GEMM inputs are kept in their formats)
        self.bf16_kinds = tuple(k for k in model_layer_kinds(spec, workload) if k.bf16 or k.overrides)
        self.terms: dict[str, Term] = {t.name: t for t in self._define_terms()}
        self._cache: dict[str, dict[tuple, int]] = {name: {} for name in self.terms}

    # ------------------------------------------------------------------ terms
    def value(self, name: str, point: Point) -> int:
        term = self.terms[name]
        key = tuple(point[a] if a in point else _derived(a, point) for a in term.axes)
        cache = self._cache[name]
        if key not in cache:
            cache[key] = term.fn(*key)
        return cache[key]

    def table(self, name: str, domains: dict[str, tuple]) -> dict[tuple, int]:
        """All values of a term over the product of its axes' domains."""
        import itertools

        term = self.terms[name]
        axes_domains = [domains[a] if a in domains else _derived_domain(a, domains) for a in term.axes]
        out = {}
        for key in itertools.product(*axes_domains):
            if not _plausible(dict(zip(term.axes, key)), self.cluster.num_gpus):
                continue  # such combinations break the world-size rules anyway
            out[key] = self.value(name, dict(zip(term.axes, key)))
        return out

    def _define_terms(self) -> list[Term]:
        spec, cluster, wl = self.spec, self.cluster, self.workload
        twl = self.time_workload
        n = cluster.num_gpus
        precision = wl.precision

        instances = wl.dist_optimizer_instances  # distributed-optimizer instances: each shards over its part

        def dense_shards(tp, cp, dp) -> int:
            return ranks.dense_dp_group(tp, cp, dp).size // instances

        def expert_shards(ep, etp, pp) -> int:
            return ranks.expert_dp_group(n, etp, ep, pp).size // instances

        def shape(tp, cp, mbs, sp, etp=None, ep=1):
            return ActivationShape(tp=tp, cp=cp, mbs=mbs, sequence_parallel=sp, etp=etp if etp is not None else tp,
                                   ep=ep)

        def base(sel: tuple) -> str:
            return "selective" if sel else "none"

        layer_times: dict[tuple, Any] = {}

        def moe_knobs(wl_: Workload) -> tuple:
            """What distinguishes the workloads the time terms use (all are ``twl`` with these changed)."""
            return wl_.moe_dispatcher, wl_.moe_ep_overlap, wl_.moe_shared_expert_overlap

        def layer_time(spec_, cluster_, wl_, sh, *, ep, moe, recompute, recompute_modules=None, kind=None):
            """``step.layer_time`` memoised per table set: the total ("t_") and compute ("c_") terms and
            the offload term read the same layer."""
            key = (moe_knobs(wl_), sh, ep, moe, recompute, recompute_modules, kind)
            if key not in layer_times:
                if recompute == "selective":  # step.layer_time's own sum, with the base layer memoised
                    modules = block_modules(kind, tuple(recompute_modules or DEFAULT_RECOMPUTE_MODULES))
                    base = base_time(wl_, sh, ep, moe, "selective" if uses_core_attn(modules) else "none", kind)
                    if modules:
                        # only the moe module's recompute repeats EP traffic (step.selective_extra_comm_s)
                        sel_key = (moe_knobs(wl_) if moe and "moe" in modules else None, sh, ep, moe, modules)
                        if sel_key not in selective_times:
                            selective_times[sel_key] = selective_modules_time(spec_, cluster_, wl_, sh, ep=ep,
                                                                              moe=moe, modules=modules)
                        layer_times[key] = base + selective_times[sel_key]
                    else:
                        layer_times[key] = base
                else:
                    layer_times[key] = base_time(wl_, sh, ep, moe, recompute, kind)
            return layer_times[key]

        base_times: dict[tuple, Any] = {}
        selective_times: dict[tuple, Any] = {}
        ep_times: dict[tuple, float] = {}

        def base_time(wl_, sh, ep, moe, recompute, kind=None):
            """``step.base_layer_time``'s sum: the part the MoE knobs leave alone once per shape, the EP
            traffic per setting of the knobs."""
            key = (sh, ep, moe, recompute, kind)
            if key not in base_times:
                base_times[key] = layer_time_without_ep(spec, cluster, twl, sh, ep=ep, moe=moe, recompute=recompute,
                                                        kind=kind)
            out = base_times[key]
            if not moe or (kind is not None and not kind.mlp):  # as step.base_layer_time: no experts, no EP
                return out
            ep_key = (moe_knobs(wl_), sh, ep, recompute, out.compute)
            if ep_key not in ep_times:
                ep_times[ep_key] = layer_ep_comm_s(spec, cluster, wl_, sh, ep=ep, recompute=recompute,
                                                   compute_s=out.compute)
            return replace(out, ep_comm=ep_times[ep_key])

        moe_kinds = tuple(k for k in model_layer_kinds(spec, wl) if k.moe)

        @functools.cache
        def variant(name: str, setting: tuple[bool, bool]) -> Workload:
            """``twl`` with dispatcher ``name`` and the searched MoE overlaps at ``setting`` (built once)."""
            w = twl if name == twl.moe_dispatcher else replace(twl, moe_dispatcher=name)
            return knobs_.apply_moe(w, self.knobs, setting) if self.knobs else w

        @functools.cache
        def moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep) -> Workload:
            """The dispatcher and MoE overlap setting of one per-layer configuration with ``disp`` (a
            dispatcher, or ``knobs.NCCL``: alltoall or allgather) under ``permit`` (knobs.py): the
            fastest allowed for the model's MoE layers at no recompute, Megatron's default on ties. The
            allgather dispatcher allows neither overlap (TC L3016-3019, L1820-1826)."""
            candidates = []
            for name in knobs_.nccl_members(wl) if disp == knobs_.NCCL else (disp,):
                allowed = permit if name != "allgather" else (False, False)
                candidates += [variant(name, setting) for setting in knobs_.settings(allowed, ep)]
            if len(candidates) == 1:
                return candidates[0]
            sh = shape(tp, cp, mbs, sp, etp)
            return min(candidates, key=lambda w: sum(quantise_s(layer_time(
                spec, cluster, w, sh, ep=ep, moe=True, recompute="none", kind=kind).total) for kind in moe_kinds))

        self.moe_workload = moe_workload
        mtp_kind = mtp_layer_kind(spec, wl) if spec.mtp_num_layers else None

        @functools.cache
        def head_time(sh):
            return output_head_time(spec, cluster, twl, sh)

        def logits(w: Workload, sh: ActivationShape, ep: int):
            """``step.logits_time``'s sum: the output head (no knob changes it) + the MTP layers, memoised."""
            out = head_time(sh)
            if mtp_kind is not None:
                out = out + spec.mtp_num_layers * layer_time(spec, cluster, w, sh, ep=ep, moe=mtp_kind.moe,
                                                             recompute="none", kind=mtp_kind)
            return out

        def mods(sel: tuple) -> tuple[str, ...] | None:
            """``sel``: the selective modules (``space.rc_sel``), () without selective recompute."""
            return tuple(sel) or None

        @functools.cache
        def dense_layer(tp) -> RankParams:
            return attention_params(spec, tp) + dense_mlp_params(spec, tp)

        @functools.cache
        def moe_layer_dense(tp) -> RankParams:
            mlp = moe_mlp_params(spec, tp, spec.moe.num_experts, 1)  # experts excluded below
            return attention_params(spec, tp) + RankParams(mlp.tp_sharded, mlp.replicated, 0)

        @functools.cache
        def expert_layer(ep, etp) -> RankParams:
            return RankParams(expert=moe_mlp_params(spec, 1, ep, etp).expert)

        @functools.cache
        def mtp_core(tp) -> RankParams:
            """MTP block without its embedding copy and without routed experts."""
            block = mtp_params(spec, tp, 1, spec.moe.num_experts if self.mtp_moe else 1, 1)
            return RankParams(block.tp_sharded, block.replicated, 0)

        def output(tp, pp_many) -> RankParams:
            return output_params(spec, tp, 2 if pp_many else 1)

        pieces: dict[str, tuple[tuple[str, ...], Callable[..., RankParams]]] = {
            "dense_layer": (("tp",), dense_layer),
            "embedding": (("tp",), lambda tp: embedding_params(spec, tp)),
            "output1": (("tp",), lambda tp: output(tp, False)),
            "outputN": (("tp",), lambda tp: output(tp, True)),
        }
        if spec.is_moe:
            pieces["moe_layer"] = (("tp",), moe_layer_dense)
        def dsa_indexer(tp) -> RankParams:  # one DSA indexer, replicated over TP (params.attention_params)
            return RankParams(replicated=dsa_indexer_params(spec))

        if spec.dsa is not None:  # on the layers that run one (param_form counts them per slot)
            pieces["dsa_indexer"] = (("tp",), dsa_indexer)

        def block_layer(kind: LayerKind) -> Callable[[int], RankParams]:
            """A hybrid / DeltaNet layer's parameters without its routed experts (``params.layer_params``,
            the count ``estimate`` sums; experts are ``ms_expert``'s)."""
            @functools.cache
            def of(tp: int) -> RankParams:
                whole = layer_params(spec, kind.layer, tp, spec.moe.num_experts if kind.moe else 1, 1)
                return RankParams(whole.tp_sharded, whole.replicated, 0)
            return of

        for kind in self.block_kinds:
            pieces[self.piece(kind)] = (("tp",), block_layer(kind))
        if spec.mtp_num_layers:
            pieces["mtp_core"] = (("tp",), mtp_core)
        mtp_layer = moe_layer_dense if self.mtp_moe else dense_layer
        # the part of each piece that lives in Megatron-FSDP unit modules (transformer layers, gathered
        # per micro-batch; params.py StageParams.layers); the rest is gathered once and kept
        units: dict[str, Callable[[int], RankParams]] = {
            "dense_layer": dense_layer, "moe_layer": moe_layer_dense,
            "dsa_indexer": dsa_indexer,
            "mtp_core": lambda tp: mtp_layer(tp) * spec.mtp_num_layers,
        }

        def unit_of(piece: str, tp: int) -> RankParams:
            return units[piece](tp) if piece in units else RankParams()

        fp8_bytes = fp8_weight_bytes_per_param(self.cluster.gpu.name, wl.quant_recipe)

        def fsdp_static(whole: RankParams, unit: RankParams, dense_shards: int, expert_shards: int) -> int:
            return quantise_bytes(fsdp_static_bytes(whole, unit, RankParams(), dense_shards=dense_shards,
                                                    expert_shards=expert_shards, precision=precision,
                                                    fp8_param_gather=wl.fp8_param_gather,
                                                    grad_bytes=wl.fsdp_grad_bytes, fp8_bytes=fp8_bytes).total)

        terms: list[Term] = []

        def add(name: str, axes: tuple[str, ...], fn: Callable[..., int]) -> None:
            terms.append(Term(name, axes, fn))

        # ---- memory outside the caching allocator (MiB): a constant of the cluster
        add("other", (), lambda: self.other_mib)
        # TE's userbuffers with the TP overlap (memory.userbuffer_bytes), every rank: the time terms' workload has
        # the overlap on wherever the searched knob turns it on (``chosen_workload``), else as the workload sets it
        add("other_ub", ("tp", "cp", "mbs", "sp"), lambda tp, cp, mbs, sp: quantise_bytes(userbuffer_bytes(
            spec, self.time_workload, shape(tp, cp, mbs, sp))))
        if spec.is_moe:  # DeepEP's buffers on stages with MoE layers (flex dispatcher), outside the allocator too
            add("other_comm", ("ep", "etp", "disp"), lambda ep, etp, disp: quantise_bytes(
                comm_buffer_bytes(spec, self.with_dispatcher[disp], ep, etp)))

        # ---- memory: static bytes per parameter piece (MiB) -------------------------------
        adam_bytes = adam_state_bytes_per_param(wl)
        for piece, (axes, params_of) in pieces.items():
            add(f"ms_{piece}", ("tp", "cp", "dp", "dop", "fsdp", "oo"),
                lambda tp, cp, dp, dop, fsdp, oo, f=params_of, piece=piece: fsdp_static(
                    f(tp), unit_of(piece, tp), dense_shards(tp, cp, dp), 1) if fsdp else quantise_bytes(
                    offloaded_optimizer(static_bytes(
                        f(tp), dense_shards=dense_shards(tp, cp, dp), expert_shards=1, distributed_optimizer=dop,
                        precision=precision, fp8_param_gather=wl.fp8_param_gather, grad_bytes=wl.grad_bytes,
                        bf16_only=f(tp).tp_sharded if piece in BF16_PIECES else 0, fp8_bytes=fp8_bytes,
                        optimizer=wl.optimizer, adam_bytes=adam_bytes), oo).total))
        if spec.is_moe:
            add("ms_expert", ("ep", "etp", "pp", "dop", "fsdp", "oo"),
                lambda ep, etp, pp, dop, fsdp, oo: fsdp_static(
                    expert_layer(ep, etp), expert_layer(ep, etp), 1, expert_shards(ep, etp, pp))
                if fsdp else quantise_bytes(offloaded_optimizer(static_bytes(
                    expert_layer(ep, etp), dense_shards=1, expert_shards=expert_shards(ep, etp, pp),
                    distributed_optimizer=dop, precision=precision, fp8_param_gather=wl.fp8_param_gather,
                    grad_bytes=wl.grad_bytes, fp8_bytes=fp8_bytes, optimizer=wl.optimizer, adam_bytes=adam_bytes),
                    oo).total))
        # Megatron-FSDP's two un-sharded units (memory.fsdp_static_bytes: 2 x the largest layer in
        # weights and grads), per kind of layer a stage can hold
        def unit_bytes(layer: RankParams) -> int:
            return quantise_bytes(fsdp_static_bytes(RankParams(), RankParams(), layer, dense_shards=1, expert_shards=1,
                                                    precision=precision, fp8_param_gather=wl.fp8_param_gather,
                                                    grad_bytes=wl.fsdp_grad_bytes, fp8_bytes=fp8_bytes).total)

        add("ms_unit_dense", ("tp", "fsdp"), lambda tp, fsdp: unit_bytes(dense_layer(tp)) if fsdp else 0)
        if spec.is_moe:
            def moe_unit(tp, ep, etp) -> RankParams:
                return moe_layer_dense(tp) + expert_layer(ep, etp)

            add("ms_unit_moe", ("tp", "ep", "etp", "fsdp"),
                lambda tp, ep, etp, fsdp: unit_bytes(moe_unit(tp, ep, etp)) if fsdp else 0)
            add("ms_unit_max", ("tp", "ep", "etp", "fsdp"),
                lambda tp, ep, etp, fsdp: unit_bytes(max(dense_layer(tp), moe_unit(tp, ep, etp),
                                                         key=lambda p: p.total)) if fsdp else 0)
        # ---- memory: activations per micro-batch (MiB) ------------------------------------
        @functools.cache
        def dispatch_bytes(dispatcher: str, sh: ActivationShape) -> float:
            return moe_stage_bytes(spec, wl if dispatcher == wl.moe_dispatcher else replace(wl, moe_dispatcher=dispatcher),
                                   sh)

        add("ma_dense", ("tp", "cp", "mbs", "sp", "sel"),
            lambda tp, cp, mbs, sp, sel: quantise_bytes(layer_activation_bytes(
                spec, wl, shape(tp, cp, mbs, sp), moe=False, recompute=base(sel),
                **_modules_kw(sel))))
        add("ma_input", ("tp", "cp", "mbs", "sp"),
            lambda tp, cp, mbs, sp: quantise_bytes(layer_activation_bytes(
                spec, wl, shape(tp, cp, mbs, sp), moe=False, recompute="full")))
        add("ma_first", ("tp", "cp", "mbs", "sp"),
            lambda tp, cp, mbs, sp: quantise_bytes(first_stage_extra_bytes(spec, wl, shape(tp, cp, mbs, sp))))
        # the workspaces follow the TP overlap as the userbuffers do (``other_ub``)
        add("ma_fixed", ("tp", "cp", "mbs", "sp"),
            lambda tp, cp, mbs, sp: quantise_bytes(fixed_allocation_bytes(spec, self.cluster, self.time_workload,
                                                                          shape(tp, cp, mbs, sp))))
        add("ma_last", ("tp", "cp", "mbs", "sp"),
            lambda tp, cp, mbs, sp: quantise_bytes(last_stage_peak_extra_bytes(spec, wl, shape(tp, cp, mbs, sp))))
        if wl.defer_embedding_wgrad:  # depends on the micro-batch count m = gbs / (mbs * dp)
            add("ma_defer", ("tp", "cp", "mbs", "sp", "dp"),
                lambda tp, cp, mbs, sp, dp: quantise_bytes(deferred_wgrad_bytes(
                    spec, wl, shape(tp, cp, mbs, sp), wl.global_batch_size // (mbs * dp))))
        add("ma_sel_dense", ("tp", "cp", "mbs", "sp", "sel"),
            lambda tp, cp, mbs, sp, sel: quantise_bytes(selective_transient_bytes(
                spec, wl, shape(tp, cp, mbs, sp), moe=False, **_modules_kw(sel))) if sel else 0)
        if wl.offload_modules:  # fine-grained activation offloading: the layers' offloaded tensors left on the GPU
            add("ma_fgo", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(offload_resident_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), recompute=base(sel), **_modules_kw(sel))))
        if spec.is_moe:
            add("ma_sel_moe", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(selective_transient_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), moe=True, **_modules_kw(sel))) if sel else 0)
            add("ma_sel_max", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: max(
                    self.value("ma_sel_moe", dict(tp=tp, cp=cp, mbs=mbs, sp=sp, etp=etp, sel=sel)),
                    self.value("ma_sel_dense", dict(tp=tp, cp=cp, mbs=mbs, sp=sp, sel=sel))))
            add("ma_moe", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(layer_activation_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), moe=True, recompute=base(sel), **_modules_kw(sel))))
            add("ma_max", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: max(self.value("ma_moe", dict(tp=tp, cp=cp, mbs=mbs, sp=sp,
                                                                                 etp=etp, sel=sel)),
                                                      self.value("ma_dense", dict(tp=tp, cp=cp, mbs=mbs, sp=sp,
                                                                                  sel=sel))))
            # one MoE layer's backward transient, and what the allgather dispatcher keeps in Megatron's global
            # buffer (both once per stage with MoE layers; the allgather terms grow with EP: memory.allgather_rows),
            # with the dispatcher the time terms chose for the point (``disp`` NCCL: alltoall or allgather, per
            # MoE overlap permit as ``moe_workload``), so the memory is that of the layout ``estimate`` costs
            for permit in self.permits:
                add("ma_dispatch" + knobs_.permit_tag(permit, self.moe_available),
                    ("tp", "cp", "mbs", "sp", "etp", "ep", "disp"),
                    lambda tp, cp, mbs, sp, etp, ep, disp, permit=permit: quantise_bytes(dispatch_bytes(
                        moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep).moe_dispatcher,
                        shape(tp, cp, mbs, sp, etp, ep))))
        for kind in self.block_kinds + self.bf16_kinds:  # a layer kept in bf16: its own saved tensors
            add(f"ma_{kind.memory_name}", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel, kind=kind: quantise_bytes(layer_activation_bytes(
                    spec, wl.for_kind(kind.bf16, kind.overrides), shape(tp, cp, mbs, sp, etp), moe=kind.moe,
                    recompute=base(sel), kind=None if kind.is_gpt else kind, **_modules_kw(sel))))
        if self.block_kinds:
            # one re-materialised layer (full recompute) / one layer's selectively recomputed tensors:
            # the model's largest kind, as memory.stage_memory takes it for these models
            every = model_layer_kinds(spec)
            add("ma_xmax", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(max(layer_activation_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), moe=k.moe, recompute=base(sel), kind=k,
                    **_modules_kw(sel)) for k in every)))
            add("ma_sel_xmax", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(max(selective_transient_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), moe=k.moe, kind=k, **_modules_kw(sel))
                    for k in every)) if sel else 0)
        if spec.mtp_num_layers:
            add("ma_mtp", ("tp", "cp", "mbs", "sp", "etp", "sel"),
                lambda tp, cp, mbs, sp, etp, sel: quantise_bytes(mtp_activation_bytes(
                    spec, wl, shape(tp, cp, mbs, sp, etp), base(sel), **_modules_kw(sel))))
        # ---- time per micro-batch (us): total and compute part -----------------------------
        # (the compute part does not depend on the overlaps; the totals of MoE layers and of an MoE MTP
        # head have one term per MoE overlap permit, ``time_form`` picks the row's: knobs.py)
        for part in ("t", "c"):
            pick = (lambda lt: lt.total) if part == "t" else (lambda lt: lt.compute)
            if part == "c":  # no knob changes the compute: one term per kind, on the base workload
                add("c_logits", ("tp", "cp", "mbs", "sp", "etp", "ep"),
                    lambda tp, cp, mbs, sp, etp, ep: quantise_s(logits(twl, shape(tp, cp, mbs, sp, etp), ep).compute))
            for permit in self.permits if part == "t" else ():
                suffix = knobs_.permit_tag(permit, self.moe_available)
                if suffix and not self.mtp_moe:
                    continue
                add(f"{part}_logits{suffix}", ("tp", "cp", "mbs", "sp", "etp", "ep", "disp"),
                    lambda tp, cp, mbs, sp, etp, ep, disp, pick=pick, permit=permit: quantise_s(pick(logits(
                        moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep) if spec.is_moe else twl,
                        shape(tp, cp, mbs, sp, etp), ep))))
            # one term per layer kind (layers.model_layer_kinds: MLP kind x attention span), with and
            # without full recompute
            for kind in model_layer_kinds(spec, wl):  # layers kept in bf16 are kinds of their own
                if kind.moe and part == "c":
                    add(self.layer_term(part, kind, False), ("tp", "cp", "mbs", "sp", "etp", "ep", "sel"),
                        lambda tp, cp, mbs, sp, etp, ep, sel, kind=kind: quantise_s(layer_time(
                            spec, cluster, twl, shape(tp, cp, mbs, sp, etp), ep=ep, moe=True, recompute=base(sel),
                            recompute_modules=mods(sel), kind=kind).compute))
                    add(self.layer_term(part, kind, True), ("tp", "cp", "mbs", "sp", "etp", "ep"),
                        lambda tp, cp, mbs, sp, etp, ep, kind=kind: quantise_s(layer_time(
                            spec, cluster, twl, shape(tp, cp, mbs, sp, etp), ep=ep, moe=True, recompute="full",
                            kind=kind).compute))
                elif kind.moe:
                    for permit in self.permits:
                        suffix = knobs_.permit_tag(permit, self.moe_available)
                        add(self.layer_term(part, kind, False) + suffix,
                            ("tp", "cp", "mbs", "sp", "etp", "ep", "sel", "disp"),
                            lambda tp, cp, mbs, sp, etp, ep, sel, disp, pick=pick, kind=kind, permit=permit: quantise_s(
                                pick(layer_time(spec, cluster, moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep),
                                                shape(tp, cp, mbs, sp, etp), ep=ep, moe=True, recompute=base(sel),
                                                recompute_modules=mods(sel), kind=kind))))
                        add(self.layer_term(part, kind, True) + suffix, ("tp", "cp", "mbs", "sp", "etp", "ep", "disp"),
                            lambda tp, cp, mbs, sp, etp, ep, disp, pick=pick, kind=kind, permit=permit: quantise_s(
                                pick(layer_time(spec, cluster, moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep),
                                                shape(tp, cp, mbs, sp, etp), ep=ep, moe=True, recompute="full",
                                                kind=kind))))
                else:
                    add(self.layer_term(part, kind, False), ("tp", "cp", "mbs", "sp", "sel"),
                        lambda tp, cp, mbs, sp, sel, pick=pick, kind=kind: quantise_s(pick(layer_time(
                            spec, cluster, twl, shape(tp, cp, mbs, sp), ep=1, moe=False, recompute=base(sel),
                            recompute_modules=mods(sel), kind=kind))))
                    add(self.layer_term(part, kind, True), ("tp", "cp", "mbs", "sp"),
                        lambda tp, cp, mbs, sp, pick=pick, kind=kind: quantise_s(pick(layer_time(
                            spec, cluster, twl, shape(tp, cp, mbs, sp), ep=1, moe=False, recompute="full",
                            kind=kind))))
        # the combined 1F1B's unpaired chunk-units (step.unpaired_ep_s), per MoE layer, divided by the row's vpp
        # (``unpaired_form``: the slot's warm-up chunk-units x its MoE layers of the kind, once per step)
        if spec.is_moe and (self.moe_available[0] or wl.moe_ep_overlap):  # searched, or pinned on
            @functools.cache
            def unpaired(permit, disp, tp, cp, mbs, sp, etp, ep, sel, kind) -> float:
                """``step.unpaired_ep_s`` of the point's chosen workload, from the memoised layer times."""
                return unpaired_ep_s(spec, cluster, moe_workload(permit, disp, tp, cp, mbs, sp, etp, ep),
                                     shape(tp, cp, mbs, sp, etp), ep=ep, recompute=base(sel),
                                     recompute_modules=mods(sel), kind=kind, timer=layer_time)

            for permit in self.permits:
                if not (permit[0] or wl.moe_ep_overlap):
                    continue
                suffix = knobs_.permit_tag(permit, self.moe_available)
                for kind in model_layer_kinds(spec, wl):
                    if not kind.moe:
                        continue
                    for v in range(1, MAX_VPP + 1):
                        add(self.unpaired_term(kind, suffix, v), ("tp", "cp", "mbs", "sp", "etp", "ep", "sel", "disp"),
                            lambda tp, cp, mbs, sp, etp, ep, sel, disp, kind=kind, permit=permit, v=v: quantise_s(
                                unpaired(permit, disp, tp, cp, mbs, sp, etp, ep, sel, kind) / v))
        # activation offloading: one offloaded layer's exposed copies per micro-batch (offload.py)
        def offload_s(moe: bool, sh: ActivationShape, ep: int) -> int:
            compute = layer_time(spec, cluster, twl, sh, ep=ep, moe=moe, recompute="none").compute
            return quantise_s(activation_offload_exposed_s(
                layer_activation_bytes(spec, wl, sh, moe=moe, recompute="none"), compute,
                cluster.gpu.host_link_bytes_per_s, cluster.gpu.hbm_bytes_per_s))

        add("t_off_dense", ("tp", "cp", "mbs", "sp"),
            lambda tp, cp, mbs, sp: offload_s(False, shape(tp, cp, mbs, sp), 1))
        if spec.is_moe:
            add("t_off_moe", ("tp", "cp", "mbs", "sp", "etp", "ep"),
                lambda tp, cp, mbs, sp, etp, ep: offload_s(True, shape(tp, cp, mbs, sp, etp), ep))
        add("t_p2p", ("tp", "cp", "mbs", "sp", "pp"),
            lambda tp, cp, mbs, sp, pp: quantise_s(pp_unit_comm_s(spec, cluster, wl, tp=tp, cp=cp, mbs=mbs,
                                                                  sequence_parallel=sp, pp=pp)))
        if wl.overlap_p2p_comm:  # interleaved schedules with overlapped p2p: one table per vpp (step.py)
            for v in range(2, MAX_VPP + 1):
                add(f"t_p2p_v{v}", ("tp", "cp", "mbs", "sp", "pp"),
                    lambda tp, cp, mbs, sp, pp, v=v: quantise_s(pp_unit_comm_s(
                        spec, cluster, wl, tp=tp, cp=cp, mbs=mbs, sequence_parallel=sp, pp=pp, vpp=v)))
        # ---- data-parallel traffic and optimizer per parameter piece (us) -----------------
        # bandwidth terms per piece (linear in parameters); each group's latency is a term of its own
        def dense_dp(tp, cp, dp, dop, params):
            group = ranks.dense_dp_group(tp, cp, dp)
            return dp_group_comm(cluster, params=params, group=group.size, stride=group.stride,
                                 distributed_optimizer=dop, param_bytes=wl.param_bytes, grad_bytes=wl.grad_bytes,
                                 instances=instances)

        def expert_dp(ep, etp, pp, dop, params):
            group = ranks.expert_dp_group(n, etp, ep, pp)
            return dp_group_comm(cluster, params=params, group=group.size, stride=group.stride,
                                 distributed_optimizer=dop, param_bytes=wl.param_bytes, grad_bytes=wl.grad_bytes,
                                 instances=instances)

        def fsdp_traffic(group: ranks.Group, gathered: int, reduced: int) -> DpComm:
            """Megatron-FSDP per micro-batch (step.fsdp_microbatch_comm_s): parameters gathered twice,
            gradients reduce-scattered once; bandwidth in ``param_bw_s``, one unit's latency in
            ``param_latency_s``."""
            ag = dp_group_comm(cluster, params=gathered, group=group.size, stride=group.stride,
                               distributed_optimizer=True, param_bytes=wl.param_bytes)
            rs = dp_group_comm(cluster, params=reduced, group=group.size, stride=group.stride,
                               distributed_optimizer=True, grad_bytes=wl.fsdp_grad_comm_bytes)
            return DpComm(param_bw_s=2 * ag.param_bw_s + rs.grad_bw_s,
                          param_latency_s=2 * ag.param_latency_s + rs.grad_latency_s)

        # Megatron-FSDP (fsdp): no gradient tail (reduce-scattered per micro-batch), the non-unit
        # parameters all-gathered once per step (step.stage_times), the traffic per micro-batch in f_*
        for piece, (axes, params_of) in pieces.items():
            add(f"dg_{piece}", ("tp", "cp", "dp", "dop", "fsdp"),
                lambda tp, cp, dp, dop, fsdp, f=params_of: 0 if fsdp else quantise_s(
                    dense_dp(tp, cp, dp, dop, f(tp).total).grad_bw_s))
            add(f"dq_{piece}", ("tp", "cp", "dp", "dop", "fsdp"),
                lambda tp, cp, dp, dop, fsdp, f=params_of, piece=piece: quantise_s(dense_dp(
                    tp, cp, dp, dop, f(tp).total - (unit_of(piece, tp).total if fsdp else 0)).param_bw_s))
            add(f"f_{piece}", ("tp", "cp", "dp", "fsdp"),
                lambda tp, cp, dp, fsdp, f=params_of, piece=piece: quantise_s(fsdp_traffic(
                    ranks.dense_dp_group(tp, cp, dp), unit_of(piece, tp).total, f(tp).total).param_bw_s) if fsdp else 0)
            add(f"o_{piece}", ("tp", "cp", "dp", "dop", "oo"),
                lambda tp, cp, dp, dop, oo, f=params_of, piece=piece: quantise_s(optimizer_shard_s(
                    cluster, f(tp).total, dense_shards(tp, cp, dp) if dop else 1, oo, wl,
                    muon_ns_flops(spec, wl, 0 if piece in BF16_PIECES else f(tp).tp_sharded, 0, tp=tp, etp=1)[0],
                    spec.hidden_size)))
        add("dg_lat", ("tp", "cp", "dp", "dop", "fsdp"),
            lambda tp, cp, dp, dop, fsdp: 0 if fsdp else quantise_s(dense_dp(tp, cp, dp, dop, 1).grad_latency_s))
        add("dq_lat", ("tp", "cp", "dp", "dop"),
            lambda tp, cp, dp, dop: quantise_s(dense_dp(tp, cp, dp, dop, 1).param_latency_s))
        # a stage of transformer layers only: with Megatron-FSDP nothing is gathered once per step
        add("dq_lat_layers", ("tp", "cp", "dp", "dop", "fsdp"),
            lambda tp, cp, dp, dop, fsdp: 0 if fsdp else quantise_s(dense_dp(tp, cp, dp, dop, 1).param_latency_s))
        add("f_lat", ("tp", "cp", "dp", "fsdp"),
            lambda tp, cp, dp, fsdp: quantise_s(fsdp_traffic(
                ranks.dense_dp_group(tp, cp, dp), 1, 1).param_latency_s) if fsdp else 0)
        if spec.is_moe:
            add("dg_expert", ("ep", "etp", "pp", "dop", "fsdp"),
                lambda ep, etp, pp, dop, fsdp: 0 if fsdp else quantise_s(
                    expert_dp(ep, etp, pp, dop, expert_layer(ep, etp).total).grad_bw_s))
            add("dq_expert", ("ep", "etp", "pp", "dop", "fsdp"),
                lambda ep, etp, pp, dop, fsdp: 0 if fsdp else quantise_s(
                    expert_dp(ep, etp, pp, dop, expert_layer(ep, etp).total).param_bw_s))
            add("f_expert", ("ep", "etp", "pp", "fsdp"),
                lambda ep, etp, pp, fsdp: quantise_s(fsdp_traffic(
                    ranks.expert_dp_group(n, etp, ep, pp), expert_layer(ep, etp).total,
                    expert_layer(ep, etp).total).param_bw_s) if fsdp else 0)
            add("fx_lat", ("ep", "etp", "pp", "fsdp"),
                lambda ep, etp, pp, fsdp: quantise_s(fsdp_traffic(
                    ranks.expert_dp_group(n, etp, ep, pp), 1, 1).param_latency_s) if fsdp else 0)
            add("o_expert", ("ep", "etp", "pp", "dop", "oo"),
                lambda ep, etp, pp, dop, oo: quantise_s(optimizer_shard_s(
                    cluster, expert_layer(ep, etp).total, expert_shards(ep, etp, pp) if dop else 1, oo, wl,
                    muon_ns_flops(spec, wl, 0, expert_layer(ep, etp).expert, tp=1, etp=etp)[1], spec.hidden_size)))
            add("dgx_lat", ("ep", "etp", "pp", "dop", "fsdp"),
                lambda ep, etp, pp, dop, fsdp: 0 if fsdp else quantise_s(expert_dp(ep, etp, pp, dop, 1).grad_latency_s))
            add("dqx_lat", ("ep", "etp", "pp", "dop", "fsdp"),
                lambda ep, etp, pp, dop, fsdp: 0 if fsdp else quantise_s(
                    expert_dp(ep, etp, pp, dop, 1).param_latency_s))
        return terms

    # ------------------------------------------------------------------ pipeline rows
    @functools.cache
    def row(self, pp: int, vpp: int, split: tuple, rc: tuple) -> PipelineRow:
        """The stages of one pipeline shape grouped by composition (``layers.stage_layers``: the same
        per-stage layer lists ``estimate`` sums over)."""
        spec = self.spec
        layout = Layout(pp=pp, vpp=vpp, first_stage_layers=split[0], last_stage_layers=split[1],
                        account_for_embedding=split[2], account_for_loss=split[3], pipeline_layout=split[4],
                        **rc_fields(rc))
        groups: dict[tuple, list[int]] = {}
        for layers in stage_layers(spec, layout, self.workload):
            stage = layers.stage
            last = stage == pp - 1
            off = [i for i in layers.layer_ids if i < layout.cpu_offload_layers]  # memory.offloaded_activation_bytes
            dense_off = sum(1 for i in off if not spec.is_moe_layer(i))
            key = (layers.base, layers.recomputed, stage == 0, last, last and spec.mtp_num_layers > 0,
                   dense_off, len(off) - dense_off, layers.chunks)
            groups.setdefault(key, []).append(stage)
        slots = tuple(Slot(base=k[0], recomputed=k[1], first=k[2], last=k[3], mtp=k[4], stages=tuple(stages),
                           dense_off=k[5], moe_off=k[6], chunks=k[7])
                      for k, stages in sorted(groups.items(), key=lambda kv: min(kv[1])))
        return PipelineRow(pp=pp, vpp=vpp, split=split, rc=rc, slots=slots)

    def model_time_form(self) -> list[tuple[int, str]]:
        """Every decoder layer of the model at its no-recompute time, plus the logits: ``[(count, term)]``
        (a lower bound on ``sum(tau)`` over the stages, whatever the split)."""
        (whole,) = stage_layers(self.spec, Layout(), self.workload)
        return [(n, self.layer_term("t", kind, False)) for kind, _, n in whole.counts()] + [(1, "t_logits")]

    # ------------------------------------------------------------------ linear forms
    def time_form(self, row: PipelineRow, slot: Slot, part: str) -> list[tuple[int, str]]:
        """``tau`` (part "t") or its compute share (part "c") of one slot: [(coefficient, term)], one
        term per layer kind the slot holds (``layer_term``)."""
        suffix = self.moe_suffix(row) if part == "t" else ""
        form = [(n, self.layer_term(part, kind, recomputed) + (suffix if kind.moe else ""))
                for kind, recomputed, n in slot.layers()]
        if slot.last:
            form.append((1, f"{part}_logits{suffix if self.mtp_moe else ''}"))
        if part == "t":  # activation offloading: each offloaded layer's exposed copies
            form += [(slot.dense_off, "t_off_dense"), (slot.moe_off, "t_off_moe")]
        if part == "t" and row.pp > 1:
            overlapped = row.vpp > 1 and self.workload.overlap_p2p_comm
            form.append((row.vpp, f"t_p2p_v{row.vpp}" if overlapped else "t_p2p"))
        return [(c, t) for c, t in form if c]

    @staticmethod
    def unpaired_term(kind: LayerKind, suffix: str, vpp: int) -> str:
        """The combined 1F1B's unpaired term of one MoE layer of ``kind`` over ``vpp`` (``u_moe_w128_a_v4``)."""
        return f"u_{kind.name}{suffix}_v{vpp}"

    def unpaired_form(self, row: PipelineRow, slot: Slot) -> list[tuple[int, str]]:
        """Once per step on the slot (its lowest stage: the most warm-up): the combined 1F1B's unpaired chunk-units
        (``step.combined_warmup_units``) x its MoE layers of each kind, where the row permits the EP overlap or
        the workload pins it on (the terms are 0 where the point's chosen setting leaves it off)."""
        permit = self.moe_permit(row.pp, row.vpp, row.rc)
        if not (self.spec.is_moe and (permit[0] or self.workload.moe_ep_overlap)):
            return []
        units = combined_warmup_units(row.pp, row.vpp, slot.stage, self.workload.microbatch_group_size)
        suffix = self.moe_suffix(row)
        return [(units * n, self.unpaired_term(kind, suffix, row.vpp))
                for kind, recomputed, n in slot.layers() if kind.moe and not recomputed and n]

    def param_form(self, row: PipelineRow, slot: Slot, prefix: str) -> tuple[list[tuple[int, str]],
                                                                             list[tuple[int, str]]]:
        """Per-parameter-piece terms of one slot with ``prefix`` (ms_, dg_, dq_, o_): (dense, expert)."""
        if self.block_kinds:  # per piece (``piece``): hybrid / DeltaNet kinds have their own
            counts: dict[str, int] = {"dense_layer": 0, "moe_layer": 0} if self.spec.is_moe else {"dense_layer": 0}
            for kind, _, n in slot.layers():
                counts[self.piece(kind)] = counts.get(self.piece(kind), 0) + n
            dense = [(n, f"{prefix}{piece}") for piece, n in counts.items()]
        else:
            dense = [(slot.dense, f"{prefix}dense_layer")]
            if self.spec.is_moe:
                dense.append((slot.moe, f"{prefix}moe_layer"))
            if self.spec.dsa is not None:  # the slot's layers that run a DSA indexer (hybrid pieces hold theirs)
                dense.append((sum(n for kind, _, n in slot.layers() if not kind.reuses_topk), f"{prefix}dsa_indexer"))
        if slot.first:
            dense.append((1, f"{prefix}embedding"))
        if slot.last:
            dense.append((1, f"{prefix}output{'N' if row.pp > 1 else '1'}"))
        if slot.mtp:
            dense.append((1, f"{prefix}mtp_core"))
            if row.pp > 1:
                dense.append((1, f"{prefix}embedding"))  # the MTP stage's embedding copy
        expert: list[tuple[int, str]] = []
        experts = slot.moe + (self.spec.mtp_num_layers if slot.mtp and self.mtp_moe else 0)
        if self.spec.is_moe and experts:
            expert.append((experts, f"{prefix}expert"))
        return [(c, t) for c, t in dense if c], expert

    def dp_forms(self, row: PipelineRow, slot: Slot) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """(grad, param) data-parallel time forms of one slot, latencies included."""
        out = []
        param_lat = "dq_lat" if slot.first or slot.last else "dq_lat_layers"
        for prefix, lat, lat_x in (("dg_", "dg_lat", "dgx_lat"), ("dq_", param_lat, "dqx_lat")):
            dense, expert = self.param_form(row, slot, prefix)
            form = dense + [(1, lat)] + expert
            if expert:
                form.append((1, lat_x))
            out.append(form)
        return out[0], out[1]

    def step_forms(self, row: PipelineRow, slot: Slot) -> tuple[list[tuple[int, str]], list[tuple[int, str]],
                                                                list[tuple[int, str]]]:
        """(grad, param, once-a-step) forms of one slot, as every engine prices them (``combine.step``'s ``grad``,
        ``param`` and ``optimizer``): the once-a-step work is the optimizer step, the combined 1F1B's unpaired
        chunk-units and, with ``--overlap-grad-reduce`` alone (``step.param_gather_after_step``), the parameter
        all-gather, which then leaves the DP tail's window."""
        grad, param = self.dp_forms(row, slot)
        o_dense, o_expert = self.param_form(row, slot, "o_")
        once = o_dense + o_expert + self.unpaired_form(row, slot)
        if param_gather_after_step(self.workload):
            once, param = once + param, []
        return grad, param, once

    def fsdp_form(self, row: PipelineRow, slot: Slot) -> list[tuple[int, str]]:
        """Megatron-FSDP traffic of one slot per micro-batch (zero without it): every piece's gathers
        and reduce-scatters, one latency per unit (decoder layer) and group (step.fsdp_microbatch_comm_s)."""
        dense, expert = self.param_form(row, slot, "f_")
        units = max(1, slot.dense + slot.moe)
        form = dense + expert + [(units, "f_lat")]
        if expert:
            form.append((units, "fx_lat"))
        return form

    def activation_form(self, slot: Slot) -> list[tuple[int, str]]:
        """Saved activations of one micro-batch on the slot: per layer kind (``LayerKind.memory_name``),
        inputs only for recomputed layers; offloaded layers' activations are in host memory."""
        return _activation_terms(slot.layers(), {"ma_dense": -slot.dense_off, "ma_moe": -slot.moe_off})

    def chunk_forms(self, slot: Slot) -> tuple[list[tuple[int, str]], ...]:
        """``activation_form`` of each virtual chunk of the slot (one chunk: the slot's own, offloading
        included: it needs PP 1)."""
        if len(slot.chunks) <= 1:
            return (self.activation_form(slot),)
        return tuple(_activation_terms(chunk) for chunk in slot.chunks)

    def moe_permit(self, pp: int, vpp: int, rc: tuple) -> tuple[bool, bool]:
        """The MoE overlaps Megatron allows on a row (``knobs.row_permit``)."""
        return knobs_.row_permit(self.moe_available, pp, vpp, rc)

    def moe_suffix(self, row: PipelineRow) -> str:
        """The suffix of the row's MoE time terms (``knobs.permit_tag``)."""
        return knobs_.permit_tag(self.moe_permit(row.pp, row.vpp, row.rc), self.moe_available)

    def chosen_workload(self, point: Point) -> Workload:
        """The workload a point was costed with: the searched knobs set as chosen (knobs.py)."""
        wl = self.workload
        if "tp_comm_overlap" in self.knobs:
            wl = replace(wl, tp_comm_overlap=point["tp"] > 1 and point["sp"])
        if "cp_comm_type" in self.knobs and point["cp"] > 1:
            wl = replace(wl, cp_comm_type=resolve_cp_comm_type(self.spec, self.cluster, self.time_workload, ActivationShape(
                tp=point["tp"], cp=point["cp"], mbs=point["mbs"], sequence_parallel=point["sp"])))
        if self.spec.is_moe:
            permit = self.moe_permit(point["pp"], point["vpp"], point["rc"])
            chosen = self.moe_workload(permit, point["disp"], point["tp"], point["cp"], point["mbs"], point["sp"],
                                       point["etp"], point["ep"])
            wl = knobs_.apply_moe(replace(wl, moe_dispatcher=chosen.moe_dispatcher), self.knobs,
                                  (chosen.moe_ep_overlap, chosen.moe_shared_expert_overlap))
        return wl

    @staticmethod
    def piece(kind: LayerKind) -> str:
        """The parameter piece of one layer of ``kind``: ``dense_layer`` / ``moe_layer`` for transformer
        layers, ``layer_<kind>`` for hybrid / DeltaNet ones."""
        if kind.is_gpt:
            return "moe_layer" if kind.moe else "dense_layer"
        return f"layer_{replace(kind, bf16=False, overrides=()).name}"  # (bf16 layers, recipes: the same parameters)

    @staticmethod
    def layer_term(part: str, kind: LayerKind, recomputed: bool) -> str:
        """The time term of one layer of ``kind``: ``t_dense``, ``t_moe_w128_full``, ..."""
        return f"{part}_{kind.name}{'_full' if recomputed else ''}"

    def fixed_memory_parts(self, row: PipelineRow, slot: Slot,
                           with_loss: bool = True) -> tuple[list[tuple[int, str]], ...]:
        """Memory that does not scale with micro-batches in flight, by band class (``combine.band``):
        (static bytes, activation transients and the last stage's loss path -- with ``with_loss``, the
        state of ``memory.chunk_inflight`` whose loss chunk is in flight --, exact: fixed allocations and
        the reserve)."""
        dense, expert = self.param_form(row, slot, "ms_")
        static = dense + expert + _one_layer("ms_unit_", slot.dense or (slot.mtp and not self.mtp_moe),
                                             slot.moe or (slot.mtp and self.mtp_moe))
        activation: list[tuple[int, str]] = []
        # backward re-materialises one layer at a time: a whole recomputed layer (full recompute), else
        # one layer's selectively recomputed part; the larger of the kinds the stage holds
        if self.block_kinds:  # hybrid / DeltaNet models: the model's largest kind (memory.stage_memory)
            if slot.dense_rc or slot.moe_rc:
                activation.append((1, "ma_xmax"))
            elif row.rc[0] == "selective":
                activation.append((1, "ma_sel_xmax"))
        elif slot.dense_rc or slot.moe_rc:
            activation += _one_layer("ma_", slot.dense_rc, slot.moe_rc)
        elif slot.dense_off or slot.moe_off:  # one offloaded layer in transit (memory.offloaded_activation_bytes)
            activation += _one_layer("ma_", slot.dense_off, slot.moe_off)
        elif row.rc[0] == "selective":
            activation += _one_layer("ma_sel_", slot.dense_base, slot.moe_base)
        if self.workload.offload_modules:  # memory.offload_resident_bytes
            activation.append((1, "ma_fgo"))
        if slot.moe:
            activation.append((1, "ma_dispatch" + self.moe_suffix(row)))
        if slot.last:
            if with_loss:
                activation.append((1, "ma_last"))
                if slot.mtp:
                    activation.append((1, "ma_mtp"))
            if self.workload.defer_embedding_wgrad:
                activation.append((1, "ma_defer"))
        # workspaces and persistent buffers inside the allocator (every stage), memory outside it
        exact = [(1, "ma_fixed"), (1, "other"), (1, "other_ub")]
        if slot.moe or (slot.mtp and self.mtp_moe):
            exact.append((1, "other_comm"))
        return static, activation, exact

    def fixed_memory_form(self, row: PipelineRow, slot: Slot) -> list[tuple[int, str]]:
        """Memory that does not scale with micro-batches in flight: static, transients, last-stage extras."""
        return [pair for part in self.fixed_memory_parts(row, slot) for pair in part]

    @functools.cache
    def memory_form(self, pp: int, vpp: int, split: tuple, rc: tuple, index: int,
                    state: tuple[tuple[int, ...], bool], band: bool | None = None) -> tuple:
        """``combine.banded_stage_memory`` of slot ``index`` of a row in ``state`` (``live_units``: ``live[c]``
        micro-batches of chunk ``c`` in flight, and whether the loss chunk's are), as ``((coefficient, term),
        ...)`` in MiB / ``combine.BAND_SCALE``: the slot fits iff its value is ``<= vpp * capacity_units``
        in every state. ``band`` (None: the tables' own setting): with the stage's uncertainty band
        (``cost/memory.py`` ``band_parts``: its MoE layers widen it), else without."""
        row = self.row(pp, vpp, split, rc)
        slot = row.slots[index]
        live, with_loss = state
        static, activation, exact = (combine.LinearForm.of(part)
                                     for part in self.fixed_memory_parts(row, slot, with_loss))
        first = combine.LinearForm.of([(1, "ma_first")]) if slot.first else 0
        parts = band_parts(self.workload, slot.moe > 0, self.spec) if (self.band if band is None else band) \
            else combine.NO_BAND
        inflight = sum(((vpp * n) * combine.LinearForm.of(form) for n, form in zip(live, self.chunk_forms(slot))),
                       combine.LinearForm())
        form = combine.banded_stage_memory(static, activation, exact, inflight, first, sum(live), vpp, parts)
        return tuple(form.pairs())

    def live_units(self, row: PipelineRow, slot: Slot, m: int) -> tuple[tuple[tuple[int, ...], bool], ...]:
        """The slot's peak states: micro-batches of each virtual chunk in flight, with or without the loss
        chunk's (``memory.chunk_inflight``, as ``stage_memory`` costs them)."""
        return chunk_inflight(row.pp, row.vpp, m, slot.stage, self.workload.microbatch_group_size,
                              self.chunk_weights(row.rc, slot.chunks), slot.last)

    @functools.cache
    def chunk_weights(self, rc: tuple, chunks: tuple) -> tuple[int, ...] | None:
        """``memory.chunk_weights`` of a slot's chunks under the row's recompute (as ``stage_memory`` weighs them)."""
        if not chunks:
            return None
        fields = rc_fields(rc)
        return chunk_weights(self.spec, self.workload, chunks, fields["recompute"], fields["recompute_modules"])

    # ------------------------------------------------------------------ canonical evaluation
    @functools.cache
    def compiled(self, pp: int, vpp: int, split: tuple, rc: tuple) -> tuple:
        """Per slot of a row: (slot, tau, compute, grad, param, optimizer, fixed memory, activation,
        Megatron-FSDP traffic) forms."""
        row = self.row(pp, vpp, split, rc)
        out = []
        for slot in row.slots:
            grad, param, once = self.step_forms(row, slot)
            out.append((slot, tuple(self.time_form(row, slot, "t")), tuple(self.time_form(row, slot, "c")),
                        tuple(grad), tuple(param), tuple(once),
                        tuple(self.fixed_memory_form(row, slot)), tuple(self.activation_form(slot)),
                        tuple(self.fsdp_form(row, slot))))
        return row, tuple(out)

    def evaluate(self, point: Point) -> "Canonical":
        """The integer cost of a point (``combine`` in integer arithmetic): step (us), per-slot memory
        check, peak memory (MiB)."""
        wl = self.workload
        m = wl.global_batch_size // (point["mbs"] * point["dp"])
        row, slots = self.compiled(point["pp"], point["vpp"], point["split"], point["rc"])
        values = dict(point)
        values["sel"] = rc_sel(point["rc"])
        memo: dict[str, int] = {}

        def form_value(form) -> int:
            total = 0
            for c, t in form:
                if t not in memo:
                    memo[t] = self.value(t, values)
                total += c * memo[t]
            return total

        v = row.vpp
        costs, peak, excess = [], 0.0, None
        for index, (slot, t_form, c_form, g_form, p_form, o_form, _, _, f_form) in enumerate(slots):
            costs.append(combine.StageCost(tau=form_value(t_form), compute=form_value(c_form),
                                           grad=form_value(g_form), param=form_value(p_form),
                                           optimizer=form_value(o_form), fsdp=form_value(f_form),
                                           multiplicity=slot.multiplicity))
            for state in self.live_units(row, slot, m):
                checked = form_value(self.memory_form(row.pp, v, row.split, row.rc, index, state))
                over = ceil_div(checked - v * self.capacity_units, v)
                excess = over if excess is None else max(excess, over)
                unbanded = checked if not self.band else form_value(
                    self.memory_form(row.pp, v, row.split, row.rc, index, state, False))
                peak = max(peak, unbanded / (v * combine.BAND_SCALE))
        step, pipeline = combine.step(combine.INTEGER, costs, m, v, self.overlap_pct, self.overhead_us,
                                      fsdp_overlap=self.fsdp_overlap, dp_contention=self.dp_contention)
        slowest = max(costs, key=lambda c: c.tau)
        return Canonical(step_us=step, fits=excess <= 0, peak_mib=peak, excess=excess,
                         parts=(pipeline, slowest.tau, slowest.compute, max(c.optimizer for c in costs)))


@dataclass(frozen=True, slots=True)
class Canonical:
    step_us: int
    fits: bool
    peak_mib: float  # the highest stage's predicted memory (without its band)
    parts: tuple[int, ...] = ()  # pipeline, slowest stage's tau and compute, optimizer (us): plan identity
    excess: int = 0  # the worst stage's overflow (band included with ``band``), MiB / combine.BAND_SCALE


ceil_div = combine.INTEGER.ceil_div


def _one_layer(prefix: str, dense: int, moe: int) -> list[tuple[int, str]]:
    """The term for one layer of the kinds present: ``{prefix}max`` of both, else the one kind's."""
    if dense and moe:
        return [(1, f"{prefix}max")]
    if dense:
        return [(1, f"{prefix}dense")]
    return [(1, f"{prefix}moe")] if moe else []


def _plausible(partial: Point, num_gpus: int) -> bool:
    """Cheap necessary conditions on a few axes: the groups they form fit in the world."""
    return ranks.fits_world(num_gpus, **{a: partial[a] for a in ("tp", "cp", "dp", "pp", "ep", "etp") if a in partial})


def _derived(axis: str, point: Point) -> Any:
    if axis == "sel":
        return rc_sel(point["rc"])
    raise KeyError(axis)


def _derived_domain(axis: str, domains: dict[str, tuple]) -> tuple:
    if axis == "sel":
        return sel_domain(domains["rc"])
    raise KeyError(axis)


def sel_domain(rcs) -> tuple:
    """The values of the derived axis ``sel`` (selective modules, () for none) over ``rc`` values, in a
    fixed order."""
    return tuple(sorted({rc_sel(rc) for rc in rcs}))


def _modules_kw(sel: tuple) -> dict:
    """``recompute_modules=`` for the memory functions (their default, core_attn, without selective)."""
    return {"recompute_modules": tuple(sel)} if sel else {}
