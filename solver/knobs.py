"""Communication knobs ``solve`` searches: which overlaps a layout launches with, chosen inside the
cost of each layout rather than as axes of the space (the dispatcher, whose buffers change memory, is one:
see below; the TP overlap's userbuffers follow its chosen setting).

* ``tp_comm_overlap`` (``--tp-comm-overlap``, TE userbuffers): Megatron allows it only with sequence
  parallelism (ARG L1441-1442), so it is on exactly where ``tp > 1`` and SP is on. It hides all but
  ``tp_overlap_exposed_fraction`` (20.7 %) of the TP traffic, and an SP layer's exposed share without
  it is more than half of the traffic (3/5 in bf16, 0.57-0.63 with quantized all-gathers; ``step.tp_comm_s``),
  so where it is allowed it is never slower:
  the search sets it wherever Megatron allows it. It costs memory outside the allocator (TE's userbuffers,
  ``memory.userbuffer_bytes``: the tables' ``other_ub`` term follows the chosen setting), so a layout that
  fits only without it is not found by the search; ``--fix tp_comm_overlap=false`` pins it off. Not searched
  in NVFP4 or blockwise FP8, whose all-gathers TE's userbuffers cannot do (``Workload.tp_overlap_supported``).
* ``moe_ep_overlap`` (``--overlap-moe-expert-parallel-comm``) and ``moe_shared_expert_overlap``
  (``--moe-shared-expert-overlap``) are exclusive (TC L3039-3041); each hides the EP all-to-all behind
  different work (``step.ep_comm_s``), so the faster one depends on the shapes. Per pipeline row,
  ``row_permit`` says which Megatron allows (TC L3002-3046: pp == 1 or an interleaved schedule, no full
  recompute and no ``moe`` recompute module; TC L1820-1826 and the selective block (TC L1991-1998): no
  ``shared_experts`` recompute module with the shared-expert overlap; both need the alltoall / flex
  dispatcher); per per-layer configuration ``(tp, cp, mbs, sp, etp, ep)``, ``choose_moe`` keeps the
  fastest allowed setting for the model's MoE layers at no recompute, and every MoE time term of that
  configuration is costed with it, so a layout's terms all use one setting and ``estimate`` of the
  layout with that setting (``layout_workload``) gives the same step.
* ``moe_dispatcher`` (``--moe-token-dispatcher-type`` alltoall / flex with DeepEP / allgather): flex
  holds DeepEP's buffers (``memory.comm_buffer_bytes``), the other two hold none, so the space has an
  axis ``disp`` = flex | ``NCCL``, and inside ``NCCL`` the faster of alltoall and allgather is chosen
  with the overlaps (``tables.moe_workload``); the per-stage MoE memory terms follow that choice
  (``ma_dispatch``: allgather keeps its gathered tokens in Megatron's global buffer and gathers an fp32
  gradient of all of them in backward, ``memory.allgather_rows``); with ``ep == etp == 1`` no token leaves the rank and
  only the workload's dispatcher is kept (``space.canonical_rules``).
* ``cp_comm_type`` (``--cp-comm-type`` p2p / a2a / all_gather / a2a+p2p): only the CP time term depends
  on it (``cost/step.py`` ``cp_type_comm_s``; memory is the same), so it is chosen inside the cost: the time
  terms resolve ``CP_COMM_FASTEST`` per per-layer shape ``(tp, cp, mbs, sp)`` to the fastest type Megatron
  and Transformer Engine allow there (``step.resolve_cp_comm_type``, ``step.cp_comm_problem``), and
  ``tables.chosen_workload`` writes that type into the layout's workload; a layout with cp == 1 keeps the
  workload's (None: the model's default).
* ``overlap_p2p_comm`` (Megatron's default on) is not searched: only the interleaved schedule uses it
  (ARG L1010-1013), and there it never loses (``step.pp_unit_comm_s``: ``2c(pv-1)/(mv+p-1) <= 2c`` since
  the interleaved schedule needs ``m >= p``, rule ``vpp_microbatches``, SCH L1160-1180); ``--no-overlap-p2p-communication`` turns it off.

A knob the user sets (``--tp-comm-overlap``, ``--fix moe_ep_overlap=false``, ...) is pinned, not searched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from megasolve.cost.step import default_cp_comm_type
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import CP_COMM_TYPES, MOE_DISPATCHERS, Layout, Workload
from megasolve.models.spec import ModelSpec

COMM_KNOBS = ("moe_dispatcher", "tp_comm_overlap", "moe_ep_overlap", "moe_shared_expert_overlap", "cp_comm_type")
# knobs whose value is a name, not a switch (their searched state is not "off" in the base workload)
NAMED_KNOBS = {"moe_dispatcher": MOE_DISPATCHERS, "cp_comm_type": CP_COMM_TYPES}
# MoE overlap settings (moe_ep_overlap, moe_shared_expert_overlap), Megatron's default first (ties keep it)
MOE_SETTINGS = ((False, False), (False, True), (True, False))


def resolve_knobs(workload: Workload, fixed: dict[str, Any] | None,
                  searched: Iterable[str] | None) -> tuple[Workload, frozenset[str], dict[str, Any]]:
    """``(base workload, searched knobs, fixed without the knob pins)``: ``--fix KNOB=VALUE`` pins a
    knob (set in the workload, not searched); the searched knobs are off in the base workload (the
    rules and the memory read it; the cost tables turn each on where it is chosen)."""
    fixed = dict(fixed or {})
    pins = {k: fixed.pop(k) for k in COMM_KNOBS if k in fixed}
    for name, value in pins.items():
        if name in NAMED_KNOBS:
            if value not in NAMED_KNOBS[name]:
                raise MegasolveError(field="--fix", value=f"{name}={value}",
                                     rule=f"must be one of {', '.join(NAMED_KNOBS[name])}",
                                     fix=f"e.g. --fix {name}={NAMED_KNOBS[name][0]}")
        elif not isinstance(value, bool):
            raise MegasolveError(field="--fix", value=f"{name}={value}", rule="must be true or false",
                                 fix=f"e.g. --fix {name}=true")
    knobs = frozenset(k for k in (searched or ()) if k not in pins)
    unknown = knobs - set(COMM_KNOBS)
    if unknown:
        raise ValueError(f"unknown communication knobs {sorted(unknown)}")
    knobs = applicable(knobs, workload)
    base = replace(workload, **pins, **{k: False for k in knobs if k not in NAMED_KNOBS})
    if "cp_comm_type" in knobs:
        base = replace(base, cp_comm_type=None)  # the rules and the memory read the model's default
    return base, knobs, fixed


def applicable(knobs: Iterable[str], workload: Workload) -> frozenset[str]:
    """The knobs that can be searched for ``workload``: not the TP overlap in NVFP4 or blockwise FP8, whose
    all-gathers TE's userbuffers cannot do (``Workload.tp_overlap_supported``)."""
    return frozenset(k for k in knobs if k != "tp_comm_overlap" or workload.tp_overlap_supported)


NCCL = "nccl"  # the ``disp`` value "alltoall or allgather, the faster" (no DeepEP buffers; per-stage terms follow)


def disp_class(dispatcher: str) -> str:
    """The ``disp`` value a dispatcher belongs to: flex, or ``NCCL`` for alltoall / allgather."""
    return dispatcher if dispatcher == "flex" else NCCL


def dispatchers(workload: Workload) -> tuple[str, ...]:
    """The ``disp`` values ``solve`` searches, the workload's first: ``flex`` (DeepEP, its buffers) and
    ``NCCL``, of which ``nccl_members`` are chosen inside the cost. Not flex with padding to capacity
    (TC L1074-1081)."""
    out = [disp_class(workload.moe_dispatcher), "flex", NCCL]
    if workload.moe_pad_expert_input_to_capacity:
        out = [d for d in out if d != "flex"]
    return tuple(dict.fromkeys(out))


def nccl_members(workload: Workload) -> tuple[str, ...]:
    """The dispatchers behind ``NCCL``: alltoall, and allgather unless the router's FP8 padding (TC
    L1627-1631) or a pinned-on MoE overlap (TC L3016-3019, L1820-1826) rules it out."""
    if workload.moe_router_padding_for_fp8 or workload.moe_ep_overlap or workload.moe_shared_expert_overlap:
        return ("alltoall",)
    return ("alltoall", "allgather")


def moe_available(spec: ModelSpec, workload: Workload, knobs: frozenset[str]) -> tuple[bool, bool]:
    """Which MoE overlaps the search may turn on for this model and workload (before the layout):
    the EP overlap needs the alltoall / flex dispatcher (TC L3016-3019) and at most one MTP layer
    (TC L3042-3046); the shared-expert overlap the same dispatchers (TC L1820-1826) and shared experts."""
    if not spec.is_moe or ("moe_dispatcher" not in knobs and workload.moe_dispatcher not in ("alltoall", "flex")):
        return False, False  # (a searched dispatcher: allgather's layouts get neither, tables.moe_workload)
    # a knob the user pinned on rules the other out (TC L3039-3041)
    ep_ok = "moe_ep_overlap" in knobs and spec.mtp_num_layers <= 1 and not workload.moe_shared_expert_overlap
    se_ok = "moe_shared_expert_overlap" in knobs and bool(spec.moe.shared_expert_ffn_hidden_size) \
        and not workload.moe_ep_overlap and not spec.moe.latent_size  # training refuses it (moe_layer.py L476-486)
    return ep_ok, se_ok


def apply_moe(workload: Workload, knobs: frozenset[str], setting: tuple[bool, bool]) -> Workload:
    """``workload`` with the searched MoE overlaps set to ``setting`` (a pinned one keeps its value)."""
    values = dict(zip(("moe_ep_overlap", "moe_shared_expert_overlap"), setting))
    return replace(workload, **{k: v for k, v in values.items() if k in knobs})


def row_permit(available: tuple[bool, bool], pp: int, vpp: int, rc: tuple) -> tuple[bool, bool]:
    """The MoE overlaps Megatron allows on one pipeline row ``(pp, vpp, rc)``: the EP overlap needs
    pp == 1 or a virtual pipeline (TC L3007-3011), no full recompute, recompute method or layer count
    (TC L3021-3029) and no ``moe`` recompute module (TC L3030-3032); the shared-expert overlap no
    ``shared_experts`` recompute module (TC L1991-1998)."""
    ep_ok, se_ok = available
    modules = tuple(rc[1] or ()) if rc[0] == "selective" else ()
    ep_ok = ep_ok and (pp == 1 or vpp > 1) and rc[0] != "full" and "moe" not in modules
    se_ok = se_ok and "shared_experts" not in modules
    return ep_ok, se_ok


def permit_tag(permit: tuple[bool, bool], available: tuple[bool, bool]) -> str:
    """Suffix of the MoE time terms costed under ``permit``: none for everything available (those
    terms are the lowest, so the solver's lower bounds read them), else which overlaps are allowed."""
    if permit == available:
        return ""
    return "@" + "".join(("e" if permit[0] else "") + ("s" if permit[1] else "")) or "@"


def settings(permit: tuple[bool, bool], ep: int) -> tuple[tuple[bool, bool], ...]:
    """The MoE overlap settings to compare under ``permit`` (the EP overlap only with ``ep > 1``, TC L3013-3015)."""
    return tuple(s for s in MOE_SETTINGS if (not s[0] or (permit[0] and ep > 1)) and (not s[1] or permit[1]))


def tag(workload: Workload, layout: Layout, spec: ModelSpec) -> str:
    """The short label of a layout's communication settings in tables: ``tpov`` (TP overlap),
    ``epov`` / ``seov`` (MoE overlaps), the dispatcher (``a2a``, ``deepep``, ``ag``) on MoE models, the
    CP communication when not p2p (``cpa2a``, ``cpag``, ``cphier`` for a2a+p2p)."""
    parts = []
    if spec.is_moe:
        parts.append({"alltoall": "a2a", "flex": "deepep", "allgather": "ag"}[workload.moe_dispatcher])
    if workload.tp_comm_overlap and layout.tp > 1 and layout.sequence_parallel:
        parts.append("tpov")
    if spec.is_moe and workload.moe_ep_overlap:
        parts.append("epov")
    if spec.is_moe and workload.moe_shared_expert_overlap:
        parts.append("seov")
    cp_type = workload.cp_comm_type or default_cp_comm_type(spec)
    if layout.cp > 1 and cp_type != "p2p":
        parts.append(CP_TAGS[cp_type])
    return "+".join(parts)


# table labels of the CP communication types other than Megatron's default p2p
CP_TAGS = {"a2a": "cpa2a", "all_gather": "cpag", "a2a+p2p": "cphier"}
