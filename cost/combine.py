"""How the cost terms combine into a step time and a stage's memory: the one definition.

Every engine evaluates these functions; only the arithmetic differs:

* ``estimate`` (``cost/step.py``, ``cost/memory.py``) in floats (``FLOAT``: true division);
* the oracle (``solver/tables.py``, ``CostTables.evaluate``) in integers (``INTEGER``: every division
  rounds up, so a quantised layout never looks faster or smaller than it is);
* CP-SAT (``solver/cpsat.py``) passes an arithmetic whose values are model expressions and whose
  ``mul`` / ``ceil_div`` / ``maximum`` / ``pos`` add the constraints that define them, with ``m``
  and ``vpp`` as choices over their domains;
* the bounds (``solver/bounds.py``) use ``LinearForm`` values (coefficients over term names) and the
  relaxations written next to the definitions they relax (``pipeline_relaxations``).

What is combined (``reference/megatron.md``):

* pipeline (section 6.1): ``T_pp = m*max_r(tau_r) + (sum_r(tau_r) - max_r(tau_r))/v`` -- ``(m - 1)*max +
  sum`` for 1F1B and Narayanan et al. 2021's ``(p - 1)/(v*m)`` bubble for equal interleaved stages;
* data-parallel tail (section 5.5): the gradient reduce-scatter overlaps the last micro-batch's
  backward of the last chunk, ``w = overlap * compute / v``; two thirds of that window hide
  gradients, one third parameter all-gathers: ``max(0, grad - 2w/3) + max(0, param - w/3)``;
* step: ``pipeline + max_r(dp tail) + max_r(optimizer) + overhead`` (the slowest stage gates the step);
* stage memory (sections 3.6, 3.7), scaled by ``v`` so that it stays integral:
  ``v*fixed + live*act + v*ceil(live/v)*first <= v*capacity`` with ``live`` chunk-units of
  activations in flight (``inflight * v``), ``first`` the first stage's per-micro-batch inputs;
* the stage's uncertainty band (``cost/memory.py`` ``band_parts``), linear in the same parts: a
  fraction of the static bytes plus a fraction of the activations, fixed allocations and the reserve
  exact. The solver's memory check is ``memory + band <= capacity`` (``banded_stage_memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

OVERLAP_SCALE = 10_000  # the DP overlap fraction in parts per 10^4 (the integer engines' resolution)
GRAD_WINDOW, PARAM_WINDOW, WINDOW_PARTS = 2, 1, 3  # shares of the DP overlap window (section 5.5)


class FloatArith:
    """Python floats; divisions are exact (``estimate``)."""

    @staticmethod
    def mul(k: Any, x: Any) -> Any:
        return k * x

    @staticmethod
    def ceil_div(x: Any, d: Any) -> Any:
        return x / d

    @staticmethod
    def pos(x: Any) -> Any:
        return max(0.0, x)

    @staticmethod
    def maximum(xs: Iterable[Any]) -> Any:
        return max(xs)


class IntArith(FloatArith):
    """Python integers; divisions round up (the oracle)."""

    @staticmethod
    def ceil_div(x: int, d: int) -> int:
        return -(-x // d)

    @staticmethod
    def pos(x: int) -> int:
        return max(0, x)


FLOAT = FloatArith()
INTEGER = IntArith()


@dataclass(frozen=True, slots=True, kw_only=True)
class StageCost:
    """One pipeline stage (or a slot of equal stages, ``multiplicity``) per micro-batch and per step:
    ``tau`` forward + backward of one micro-batch, its ``compute`` share (the DP overlap window),
    the DP ``grad`` / ``param`` traffic and the ``optimizer`` time of the step."""

    tau: Any
    compute: Any
    grad: Any
    param: Any
    optimizer: Any
    fsdp: Any = 0  # Megatron-FSDP gathers + reduce-scatters per micro-batch (0 without it)
    multiplicity: int = 1


@dataclass(frozen=True, slots=True)
class FsdpOverlap:
    """How Megatron-FSDP's per-micro-batch traffic meets its compute, both in parts per ``OVERLAP_SCALE``:
    ``overlap``, the share of the compute that can hide traffic (``calibration: fsdp_overlap_fraction``);
    ``contention``, what each hidden second still costs (``fsdp_overlap_contention``: the SMs the NCCL
    kernels take from the concurrent GEMMs)."""

    overlap: Any = 0
    contention: Any = 0


def fsdp_exposed(ar: Any, traffic: Any, compute: Any, fsdp: FsdpOverlap) -> Any:
    """Megatron-FSDP's per-micro-batch cost beyond its compute (prefetch on separate streams,
    ``megatron_fsdp.md``): the exposed part ``E = max(0, traffic - overlap * compute)`` plus
    ``contention`` of the hidden part, ``E + contention * (traffic - E)``, with ``overlap`` and
    ``contention`` in parts per ``OVERLAP_SCALE`` (``FsdpOverlap``).

    >>> fsdp_exposed(FLOAT, 3.0, 2.0, FsdpOverlap(OVERLAP_SCALE))
    1.0
    >>> fsdp_exposed(FLOAT, 3.0, 2.0, FsdpOverlap(OVERLAP_SCALE, OVERLAP_SCALE // 5))  # 1 + 0.2 * 2
    1.4
    """
    exposed = ar.ceil_div(ar.pos(ar.mul(OVERLAP_SCALE, traffic) - fsdp.overlap * compute), OVERLAP_SCALE)
    return with_contention(ar, exposed, traffic, fsdp.contention)


def with_contention(ar: Any, exposed: Any, traffic: Any, contention: Any) -> Any:
    """``exposed`` plus ``contention`` (parts per ``OVERLAP_SCALE``) of the hidden rest of ``traffic``,
    ``E + c (T - E)``: what a hidden second of NCCL traffic still costs the GEMMs it runs beside
    (Megatron-FSDP, DP; ``calibration.yaml`` ``*_overlap_contention``).

    >>> with_contention(FLOAT, 1.0, 3.0, OVERLAP_SCALE // 5)  # 1 + 0.2 * 2
    1.4
    """
    if isinstance(contention, (int, float)) and contention == 0:
        return exposed
    return ar.ceil_div(ar.mul(contention, traffic) + ar.mul(OVERLAP_SCALE - contention, exposed), OVERLAP_SCALE)


def stage_time_relaxation(tau: Any, traffic: Any, compute: Any, fsdp: FsdpOverlap) -> tuple[Any, int]:
    """(numerator, denominator) of a lower bound on ``stage_time`` linear in its inputs (``pos(x) >= x``,
    ceil-division >= division): ``E + c (T - E) >= T - (1 - c) * overlap * compute``, so
    ``(S*tau + S*T - ceil((S - c) * overlap / S) * compute) / S``, ``S = OVERLAP_SCALE``.

    >>> n, d = stage_time_relaxation(5.0, 3.0, 2.0, FsdpOverlap(OVERLAP_SCALE)); n / d  # exact: 5 + max(0, 3 - 2)
    6.0
    """
    hide = -(-(OVERLAP_SCALE - fsdp.contention) * fsdp.overlap // OVERLAP_SCALE)
    return OVERLAP_SCALE * tau + OVERLAP_SCALE * traffic + (-hide) * compute, OVERLAP_SCALE


def stage_time(ar: Any, stage: StageCost, fsdp: FsdpOverlap) -> Any:
    """``tau_r``: the stage's micro-batch time with its exposed Megatron-FSDP traffic."""
    if isinstance(stage.fsdp, (int, float)) and stage.fsdp == 0:
        return stage.tau
    return stage.tau + fsdp_exposed(ar, stage.fsdp, stage.compute, fsdp)


def stage_sum(stages: Sequence[StageCost], taus: Sequence[Any]) -> Any:
    """``sum_r(tau_r)`` over all stages (each slot counted ``multiplicity`` times)."""
    total = 0
    for s, tau in zip(stages, taus):
        total = total + s.multiplicity * tau
    return total


def pipeline(ar: Any, m: Any, tau_max: Any, total: Any, vpp: Any) -> Any:
    """``m*max_r(tau_r) + (sum_r(tau_r) - max_r(tau_r))/v`` (section 6.1).

    >>> pipeline(FLOAT, 8, 2.0, 7.0, 1)  # 1F1B, 4 stages: (m - 1)*max + sum
    21.0
    >>> pipeline(INTEGER, 8, 2, 7, 2)  # interleaved: the fill/drain shrinks by v, rounded up
    19
    """
    return ar.mul(m, tau_max) + ar.ceil_div(total - tau_max, vpp)


def dp_exposed(ar: Any, grad: Any, param: Any, compute: Any, overlap: Any, contention: Any = 0) -> Any:
    """DP traffic cost of one stage (section 5.5): the exposed part ``E = max(0, grad - 2w/3) +
    max(0, param - w/3)`` with ``w = overlap * compute`` (``compute``: one micro-batch on the stage, every
    chunk), plus ``contention`` of the hidden part, ``E + contention * (grad + param - E)`` (the SMs the
    NCCL kernels take from the GEMMs they hide behind, ``calibration: dp_overlap_contention``, as for
    Megatron-FSDP and the EP all-to-all); ``overlap`` and ``contention`` in parts per ``OVERLAP_SCALE``.
    Written with both halves scaled by ``3 * OVERLAP_SCALE`` so the integer engines are exact.

    The window is the whole micro-batch, not one chunk of it, also in the interleaved schedule:
    Megatron launches each model chunk's gradient reduction when that chunk's last micro-batch has run
    its backward (``schedules.py`` L1419-1455, @d98e8a6), so the chunks' reductions start one after
    another through the last backward pass. The parameter gathers work the same way: chunks 0 and 1
    before the step (L1219-1221), then chunk ``k + 1`` when chunk ``k`` runs its first forward
    (L1341-1353).

    >>> dp_exposed(FLOAT, 1.0, 1.0, 3.0, 0.5 * OVERLAP_SCALE)  # w = 1.5: 1 - 1 + 1 - 0.5
    0.5
    >>> dp_exposed(FLOAT, 1.0, 1.0, 3.0, 0.5 * OVERLAP_SCALE, OVERLAP_SCALE // 5)  # 0.5 + 0.2 * 1.5
    0.8
    """
    scale = WINDOW_PARTS * OVERLAP_SCALE
    out = 0
    for traffic, share in ((grad, GRAD_WINDOW), (param, PARAM_WINDOW)):
        out = out + ar.ceil_div(ar.pos(ar.mul(scale, traffic) - share * overlap * compute), scale)
    return with_contention(ar, out, grad + param, contention)


def step(ar: Any, stages: Sequence[StageCost], m: Any, vpp: Any, overlap: Any, overhead: Any,
         total: Any = None, fsdp_overlap: FsdpOverlap = FsdpOverlap(), taus: Sequence[Any] | None = None,
         dp_contention: Any = 0) -> tuple[Any, Any]:
    """(step, pipeline): ``pipeline + max_r(dp tail) + max_r(optimizer) + overhead`` over the
    stage times ``tau_r = stage_time(...)``. ``taus`` and ``total`` (``stage_sum``): when the caller
    has them as values already (CP-SAT: variables and a row-guarded sum).

    >>> s = [StageCost(tau=2.0, compute=2.0, grad=0.0, param=0.0, optimizer=0.1, multiplicity=4)]
    >>> step(FLOAT, s, 8, 1, 0.0, 0.5)  # pipeline 8*2 + (4*2 - 2) = 22, + optimizer 0.1 + overhead 0.5
    (22.6, 22.0)
    """
    if taus is None:
        taus = [stage_time(ar, s, fsdp_overlap) for s in stages]
    tau_max = ar.maximum(list(taus))
    pipe = pipeline(ar, m, tau_max, stage_sum(stages, taus) if total is None else total, vpp)
    tail = ar.maximum([dp_exposed(ar, s.grad, s.param, s.compute, overlap, dp_contention) for s in stages])
    return pipe + tail + ar.maximum([s.optimizer for s in stages]) + overhead, pipe


def pipeline_relaxations(m: int, vpp: int, pp: int, tau_stage: Any, total: Any) -> list[tuple[Any, int]]:
    """Lower bounds ``(numerator, denominator)`` on ``pipeline`` that are linear in the stage times,
    for fixed ``m``, ``vpp``, ``pp`` (``solver/bounds.py``): with ``tau_max >= tau_s`` for any stage
    ``s`` and ``m >= 1/v``, ``pipeline >= ((m*v - 1)*tau_s + sum(tau)) / v``; with ``tau_max >=
    sum(tau)/pp``, ``pipeline >= (m*v - 1 + pp)*sum(tau) / (v*pp)``. ``tau_stage`` is one stage's
    time, or None for the second bound only.

    >>> [n / d for n, d in pipeline_relaxations(8, 1, 4, 2.0, 7.0)]  # the exact value is 21
    [21.0, 19.25]
    """
    out = [] if tau_stage is None else [((m * vpp - 1) * tau_stage + total, vpp)]
    return out + [((m * vpp - 1 + pp) * total, vpp * pp)]


def scaled_stage_memory(fixed: Any, inflight: Any, first: Any, live: int, vpp: int) -> Any:
    """``v`` x one stage's memory (sections 3.6-3.7): ``v*fixed + inflight + v*ceil(live/v)*first``.
    ``inflight``: ``v`` x the activations in flight at the stage's peak, ``v * sum_c n_c * a_c`` over its
    virtual chunks (``n_c`` micro-batches of chunk ``c`` in flight, ``memory.chunk_inflight``; ``a_c`` one
    micro-batch's bytes of the chunk's layers): ``live * a`` when the chunks are alike (``a`` all the
    stage's layers, ``live = sum_c n_c``); ``live``: chunk-units in flight (an integer); ``first``: the
    first stage's per-micro-batch inputs (token ids), held for every micro-batch that has a chunk in
    flight; ``fixed``: everything else (static bytes, transients, the last stage's loss path, the
    reserve). The stage fits iff the result is ``<= v*capacity``.

    >>> scaled_stage_memory(10, 11 * 3, 1, 11, 2)  # v = 2, 5.5 micro-batches in flight: 20 + 33 + 12
    65
    """
    return vpp * fixed + inflight + vpp * math.ceil(live / vpp) * first


BAND_SCALE = 200  # the band's fractions in parts per 200 (0.5 % = 1 part): integral for every engine


@dataclass(frozen=True, slots=True)
class Band:
    """A stage's band in parts per ``BAND_SCALE``: of its static bytes, of its activations."""

    static: int
    activation: int


NO_BAND = Band(static=0, activation=0)


def band(parts: Band, static: Any, activation: Any) -> Any:
    """``BAND_SCALE`` x the band: ``parts.static*static + parts.activation*activation`` (integer
    coefficients: the same expression in floats, integers, model expressions and ``LinearForm``).

    >>> band(Band(1, 10), 8e9, 10e9) / BAND_SCALE  # 0.5 % of 8 GB + 5 % of 10 GB
    540000000.0
    """
    return parts.static * static + parts.activation * activation


def banded_stage_memory(static: Any, fixed_activation: Any, exact: Any, inflight: Any, first: Any, live: int,
                        vpp: int, parts: Band) -> Any:
    """``BAND_SCALE * v`` x (one stage's memory + its band): ``scaled_stage_memory`` of all the parts,
    plus the band of its static bytes (``static``: weights, grads, optimizer; alive once) and of its
    activations (``fixed_activation``: transients and the loss path, once; ``inflight``: ``v`` x those
    of the micro-batches in flight; ``first`` per micro-batch in flight); ``exact``: fixed allocations
    and the reserve. The stage fits with its band iff the result is ``<= BAND_SCALE * v * capacity``;
    with ``NO_BAND`` this is ``BAND_SCALE * scaled_stage_memory``.

    >>> banded_stage_memory(6, 2, 2, 33, 1, 11, 2, NO_BAND) == BAND_SCALE * scaled_stage_memory(10, 33, 1, 11, 2)
    True
    >>> banded_stage_memory(6, 2, 2, 33, 1, 11, 2, Band(1, 10))  # 200*65 + 1*(2*6) + 10*(4 + 33 + 12)
    13502
    """
    whole = scaled_stage_memory(static + fixed_activation + exact, inflight, first, live, vpp)
    return BAND_SCALE * whole + band(parts, vpp * static, scaled_stage_memory(fixed_activation, inflight, first,
                                                                              live, vpp))


class LinearForm(dict):
    """``{term: coefficient}``: a linear form over cost terms, closed under ``+`` and ``int *`` (the
    CP-SAT model's and the bounds' value type for ``scaled_stage_memory`` and the relaxations)."""

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, str]]) -> LinearForm:
        out = cls()
        for c, t in pairs:
            if c:
                out[t] = out.get(t, 0) + c
        return out

    def __add__(self, other: Any) -> LinearForm:
        if isinstance(other, int) and other == 0:
            return self
        out = LinearForm(self)
        for t, c in other.items():
            out[t] = out.get(t, 0) + c
        return LinearForm({t: c for t, c in out.items() if c})

    __radd__ = __add__

    def __mul__(self, k: int) -> LinearForm:
        return LinearForm({t: k * c for t, c in self.items() if k * c})

    def __neg__(self) -> LinearForm:
        return -1 * self

    def __sub__(self, other: Any) -> LinearForm:
        return self + (-1) * other

    __rmul__ = __mul__

    def pairs(self) -> list[tuple[int, str]]:
        return [(c, t) for t, c in self.items()]
