"""Learn from measured runs: ``check`` one run term by term, ``calibrate(runs) -> Profile``.

**Knobs.** A knob scales a group of factors of the active calibration profile (``cost/calibration.yaml``
or a profile built on it) by ``exp(+k)`` or ``exp(-k)`` per factor; the factors are found by iterating
over the profile's tables, so the knobs keep working when the shipped factor table changes, and a
knob whose factors are absent stays fixed with that reason. ``KNOBS`` lists them with the cost term
each one moves and its prior spread ``sigma`` (a log-scale standard deviation):

* ``compute_bf16`` / ``compute_fp8`` / ``compute_fp4``: the GEMM efficiency of that precision on the runs' GPU (or the
  ``default`` row); free only for a precision the runs train in; sigma 0.1 -- dense models move little
  between releases (the shipped profile's error on the newest Megatron-Bridge release: dense 4.4 %).
* ``moe``: ``grouped_gemm_factor`` (x), ``per_moe_layer_overhead_s``, ``per_local_expert_overhead_s`` and
  ``biased_expert_overhead_s`` (/): the MoE-only work (the per-local-expert host term joined it when it was added
  to the cost model: on the 35 fit-split series of ``benchmarks/calibrate_runs.py`` a simulated release's MoE runs
  went 16.8 % -> 14.2 % from two runs, the published ones 7.2 % -> 7.0 %); sigma 0.5 -- "the same Megatron-Bridge
  MoE layout runs 20-45 % faster or slower from one release to the next" (issue #13; ``calibration_runs.yaml``
  header: 10-55 %) is a log-sd of about 0.3 on the *step*, and the knob moves only the MoE terms, 50-70 % of a MoE
  step, so the factor's own spread is 0.3 / 0.6 = 0.5 (at 0.3 two runs could carry only half a release's shift: on
  the 35 fit-split series a simulated release of 23 % went 22.6 % -> 14.2 % with 0.3, -> 9.8 % with 0.5; 30 %:
  29.6 % -> 19.8 %, -> 12.6 %; the published runs as they are 7.0 % -> 7.4 %).
* ``moe_bf16`` / ``moe_fp8`` / ``moe_fp4``: ``moe_precision_factor`` of that precision (x, 1 in the shipped
  profile), the routed experts' GEMM efficiency of that precision's MoE runs alone; free only when the MoE runs train
  in two or more precisions; sigma 0.5, as ``moe``.
* ``nvlink`` / ``network``: the bus and all-to-all efficiencies of that link (``collectives.bus_efficiency``,
  ``all_to_all``); sigma 0.3 -- a user's fabric is not the benchmark's.
* ``tp_overlap`` / ``ep_overlap`` / ``cp_overlap`` / ``dp_overlap``: the share of that traffic exposed
  (TP, /) or hidden (EP, CP, DP, x); sigma 0.5 -- overlap differs most between releases and launch flags.
A factor above 1 always means faster. A fitted efficiency may end above 1: it then stands for what the
run gained over the shipped model, not for a physical link.

**Fit** (``calibrate``): maximum a posteriori in log space, ``sum_i (log pred_i - log measured_i)^2 /
SIGMA_RUN^2 + sum_j (k_j / sigma_j)^2``, by Gauss-Newton on a finite-difference Jacobian (each ``k`` within +-2.5 sigma), with
``SIGMA_RUN`` the spread of the shipped model's per-run error that no shared factor explains
(dense 0.05, MoE 0.10: 1.48 x the leave-one-series-out median |error| of the fit split, 3.3 % and 5.4 %, rounded up for
MoE as the simulated releases of ``benchmarks/calibrate_runs.py`` favour; README "Learn from your runs"). The shipped
values are the priors. **Free knobs**: never more than the runs with a
timing; ``compute`` first for dense runs, then a knob only if some run spends >= 2 % of its step in its term
(sensitivity ``|d log step / d k|``) and the runs differ in it (the part of its sensitivity vector not
explained by the knobs already free is >= 25 % of it); every other knob stays fixed with the reason.
With a MoE run among the runs the MoE factor is freed first, and a compute factor only for a precision a
dense run trains in (with MoE runs only, none): a release moves MoE work most (consecutive
Megatron-Bridge releases in ``calibration_runs.yaml``: dense step times 4 % rms, MoE ones 16-44 % at
26.04.01 -> 26.06), and a mixed pair used to spend both free factors on compute, never freeing the MoE
factor when the MoE run's precision was not the dense run's. Two runs identify at most two factors:
the communication factors stay fixed (one per two further runs), and two MoE runs free the MoE factor
alone (compute and MoE sensitivities of MoE runs are nearly collinear) -- unless they train in different
precisions: then, after the MoE factor, each precision's MoE runs free a factor of their own on the routed experts of
that precision (``moe_<precision>``, ``time.moe_precision_factor``; the MoE factor's prior; the precision with the
fewest MoE runs first, so that with two runs the shared factor stands for the other), which moves no dense run
(fit split, ``benchmarks/calibrate_runs.py``, 2026-12-06: as published MoE 6.1 -> 6.1 %, pairs of MoE runs 6.3 ->
5.9 %; simulated 23 % / 4 % release MoE 11.0 -> 10.5 %, all 6.8 -> 6.7 %; 30 % / 10 % MoE 13.6 -> 12.7 %, all 10.4 ->
10.3 %; dense unchanged in all three. Freeing one only for precisions other than the most common: 10.1 / 12.4 %, but a
precision-specific truth then leaks into the other precision's predictions through the shared factor, 8 % on
``tests/test_calibrate.py``'s case against 3 %. A compute factor for the minority precision instead moved its
dense runs too: as published all 4.8 -> 5.1 %, 23 % / 4 % all 6.8 -> 7.3 %). Memory does not inform the speed
factors (no speed factor changes memory); it sets the memory reserve only. A leave-one-out check then
decides how far to trust the runs (``_cross_validate``). The range of a fitted value is +-1 posterior
standard deviation.

Measured (``benchmarks/calibrate_runs.py``, 150 fits on pairs of runs of 26 published series, one GPU
type and release each; error on the other runs of the series): see README "Learn from your runs". What
bounded MoE there was the shipped model's per-model MoE error within one series (pooled sd 0.23), most of
it other releases' recipes mapped onto every run; with each release's own recipe
(``benchmarks/bridge_moe_recipes.yaml``) and full-iteration CUDA graphs costed, a simulated release's MoE
runs come to 11.8 % from two runs.
Tried and not kept: the MoE prior stated on step time (sd 0.3 / the runs' sensitivity) trusts two runs
more and did worse (simulated release, MoE with a MoE run in the pair: 13.5 % -> 16.2 %); the EP
all-to-all inside the MoE factor changed little (13.7 %). A two-part prior (2026-12-06: with probability ``p`` the
runs' stack is another release, the knobs at their prior sd, else the shipped one, the knobs at ``c`` times it; the
two fits weighed by their Laplace evidence): on the 207 fit-split calibrations, as published / simulated 23 % / 30 %
releases, all runs 4.8 / 6.8 / 10.4 % with the single prior; p 0.5, c 0.2: 4.3 / 7.4 / 10.6 %; p 0.8, c 0.2 or 0.3:
4.4 / 7.3 / 10.4 %; p 0.9, c 0.1: 4.5 / 7.1 / 10.4 %; p 0.95, c 0.2: 4.6 / 6.9 %. It takes up to half a point off
the runs as they are and gives as much back on a new release's, which is the case calibration is for.

**Memory reserve** (``memory.other_reserve_gb``): memory outside PyTorch's allocator. A log's
``max reserved - max allocated`` is the allocator's cached-but-unused share; add the CUDA context and
NCCL buffers (``CONTEXT_GB`` = 1.0 GB: "CUDA context ~0.5-1 GB, NCCL communicators and buffers",
calibration.yaml) and shrink toward the prior as one more observation. OOM runs bound it from below
(the run did not fit), completed runs from above; with neither, it stays fixed.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from megasolve.cost.calibration import Profile, active, leaves, use_profile
from megasolve.cost.estimate import Estimate, estimate as cost_estimate
from megasolve.cost.step import step_time
from megasolve.models.errors import MegasolveError

if TYPE_CHECKING:  # the log readers load with the first run read, not with every solve (their patterns: ~140 ms)
    from megasolve.solver.runs import Run

GB = 1e9
# per-run spread of the shipped model's error that no shared factor explains (log sd ~ 1.48 x the median absolute
# error leaving one series out of the fit split: 3.3 % dense, 5.4 % MoE; MoE 0.08 rounded to 0.10, the simulated
# releases' best of 0.07 / 0.08 / 0.10 / 0.17; README "Learn from your runs")
SIGMA_RUN = {"dense": 0.05, "moe": 0.10}
MIN_SHARE = 0.02
MIN_NOVELTY = 0.25
CONTEXT_GB = 1.0
# relative uncertainty of each predicted term (log sd) when naming the term most likely behind a gap:
# the knobs' priors for time terms; parameter-derived memory is exact per Megatron (tests/
# test_megatron_golden.py), activations are the modelled part (README "Memory": within 2.3 % on
# the mbridge table, more for recipes it has not seen)
TERM_SIGMA = {"compute": 0.25, "tp_comm": 0.5, "cp_comm": 0.5, "ep_comm": 0.5, "pp_comm": 0.5, "dp_comm": 0.5,
              "bubble": 0.3, "optimizer": 0.5, "offload": 0.5}
MEMORY_SIGMA = {"weights_gb": 0.03, "grads_gb": 0.03, "optimizer_gb": 0.03, "activations_gb": 0.25}
# how far a measurement may move without changing the named culprit: Megatron's step time is the mean of a
# logging interval, and intervals of one run differ by a few % (tests/data/logs iteration lines);
# memory reports of one run differ less
MEASURE_NOISE = 0.05
# beyond this many sd for the most plausible term, the gap is more likely a misread input than a term
IMPLAUSIBLE_Z = 3.0


# ---------------------------------------------------------------------------- knobs
@dataclass(frozen=True, slots=True)
class Knob:
    """A group of calibration factors scaled together. ``select(data, gpu)`` yields (path, sign): the
    factor is multiplied by ``exp(sign * k)``."""

    name: str
    term: str
    sigma: float
    select: Callable[[dict[str, Any], str], list[tuple[str, int]]]


def _under(data: dict[str, Any], path: str, sign: int) -> list[tuple[str, int]]:
    node: Any = data
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return []
        node = node[key]
    if isinstance(node, dict):
        return [(f"{path}.{p}", sign) for p, _ in leaves(node)]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return [(path, sign)]
    return []


def _gemm_paths(precision: str) -> Callable[[dict[str, Any], str], list[tuple[str, int]]]:
    """The GEMM efficiency the cost model uses for ``gpu`` and ``precision``: the row of the GPU's chip
    family (``time.chip_family``), or the ``default`` row (cost/compute.py ``gemm_efficiency``)."""
    def select(data: dict[str, Any], gpu: str) -> list[tuple[str, int]]:
        time_cal = data.get("time", {})
        table = time_cal.get("gemm_efficiency", {})
        row = time_cal.get("chip_family", {}).get(gpu, gpu)
        row = row if row in table and precision in table[row] else "default"
        return _under(data, f"time.gemm_efficiency.{row}.{precision}", 1)
    return select


def _paths(*paths: tuple[str, int]) -> Callable[[dict[str, Any], str], list[tuple[str, int]]]:
    return lambda data, gpu: [leaf for path, sign in paths for leaf in _under(data, path, sign)]


# a factor > 1 always means faster: efficiencies and overlap shares scale up, exposed shares and
# overheads scale down (sign -1)
KNOBS: tuple[Knob, ...] = (
    Knob("compute_bf16", "compute", 0.1, _gemm_paths("bf16")),
    Knob("compute_fp8", "compute", 0.1, _gemm_paths("fp8")),
    Knob("compute_fp4", "compute", 0.1, _gemm_paths("fp4")),
    Knob("moe", "MoE layers", 0.5, _paths(("time.grouped_gemm_factor", 1), ("time.per_moe_layer_overhead_s", -1),
                                           ("time.per_local_expert_overhead_s", -1),
                                           ("time.biased_expert_overhead_s", -1))),
    # the routed experts of one precision: freed only when the MoE runs train in two or more precisions, beside the
    # shared MoE factor, so that no dense run and no run of another precision moves with it
    Knob("moe_bf16", "MoE layers in bf16", 0.5, _paths(("time.moe_precision_factor.bf16", 1))),
    Knob("moe_fp8", "MoE layers in fp8", 0.5, _paths(("time.moe_precision_factor.fp8", 1))),
    Knob("moe_fp4", "MoE layers in fp4", 0.5, _paths(("time.moe_precision_factor.fp4", 1))),
    Knob("nvlink", "tp/ep/pp comm on NVLink", 0.3,
         _paths(("time.collectives.bus_efficiency.nvlink", 1), ("time.all_to_all.nvlink_efficiency", 1))),
    Knob("network", "comm over the NICs", 0.3,
         _paths(("time.collectives.bus_efficiency.network", 1), ("time.all_to_all.rdma_efficiency", 1),
                ("time.all_to_all.nccl_network_efficiency", 1))),
    Knob("tp_overlap", "tp_comm", 0.5, _paths(("time.tp_overlap_exposed_fraction", -1))),
    Knob("ep_overlap", "ep_comm", 0.5, _paths(("time.ep_overlap_contention", -1))),
    Knob("cp_overlap", "cp_comm", 0.5, _paths(("time.cp_overlap_fraction", 1))),
    Knob("dp_overlap", "dp_comm", 0.5, _paths(("time.dp_overlap_fraction", 1))),
)
# compute factors: what the runs' model class (dense / MoE) identifies; the rest are communication factors
PRIMARY = ("compute_bf16", "compute_fp8", "compute_fp4", "moe", "moe_bf16", "moe_fp8", "moe_fp4")


def _overrides(base: Profile, knobs: Sequence[Knob], ks: Sequence[float], gpu: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for knob, k in zip(knobs, ks):  # a factor two knobs share takes both
        for path, sign in knob.select(base.data, gpu):
            out[path] = out.get(path, base.value(path)) * math.exp(sign * k)
    return out


def _profile(base: Profile, knobs: Sequence[Knob], ks: Sequence[float], gpu: str, extra: dict[str, float] | None = None,
             **meta: Any) -> Profile:
    overrides = {**_overrides(base, knobs, ks, gpu), **(extra or {})}
    return base.with_overrides(overrides, name=meta.pop("name", "fit"), **meta)


# ---------------------------------------------------------------------------- predictions
def predict(run: Run, profile: Profile | None = None) -> Estimate:
    with use_profile(profile):
        return cost_estimate(run.spec, run.cluster, run.workload, run.layout)


def _log_step(run: Run, profile: Profile) -> float:
    with use_profile(profile):  # the step time alone: the fits never need the memory
        return math.log(step_time(run.spec, run.cluster, run.workload, run.layout).step_s)


def _stage(run: Run, est: Estimate) -> int:
    stage = run.measured_stage()
    return est.peak_stage if stage is None else stage


# ---------------------------------------------------------------------------- check
def check(run: Run, profile: Profile | None = None) -> dict[str, Any]:
    """Prediction vs measurement for one run: step time, tokens/s/GPU, peak allocated memory on the
    measured rank, each time and memory term, and the term most likely behind each gap. A layout Megatron
    would refuse is a ``MegasolveError`` naming the rule (``api.check_layout``), as ``megasolve check`` says it."""
    from megasolve.solver.api import check_layout

    check_layout(run.spec, run.cluster, run.workload, run.layout, allow_cross_domain_tp=True)
    est = predict(run, profile)
    t = est.time
    stage = _stage(run, est)
    mem = next(s for s in est.memory if s.stage == stage)
    predicted = {"step_time_s": round(t.step_s, 4), "tokens_per_s_per_gpu": round(t.tokens_per_s_per_gpu, 1),
                 "peak_allocated_gb": round(mem.allocated_bytes / GB, 3)}
    m = run.measured
    measured = {"step_time_s": _r(run.measured_step_s, 4), "tokens_per_s_per_gpu": _r(run.measured_tokens_per_s_per_gpu, 1),
                "peak_allocated_gb": _r(m.peak_allocated_gb, 3)}
    out: dict[str, Any] = {
        "run": run.id, "source": run.source, "model": run.spec.name,
        "cluster": {"gpu": run.cluster.gpu.name, "num_gpus": run.cluster.num_gpus},
        "workload": {"seq_length": run.workload.seq_length, "global_batch_size": run.workload.global_batch_size,
                     "precision": run.workload.precision},
        "layout": _layout_dict(run),
        "profile": (profile or active()).name,
        "measured": measured, "predicted": predicted,
        "measured_rank": m.rank, "pipeline_stage": stage,
        "time_terms_s": {k: round(v, 4) for k, v in t.breakdown_s.items()},
        "memory_terms_gb": {"weights_gb": round(mem.weights_bytes / GB, 3), "grads_gb": round(mem.grads_bytes / GB, 3),
                            "optimizer_gb": round(mem.optimizer_bytes / GB, 3),
                            "activations_gb": round(mem.activations_bytes / GB, 3)},
        "error": {}, "likely_cause": {}, "notes": list(run.notes),
    }
    if measured["step_time_s"]:
        gap = measured["step_time_s"] - t.step_s
        out["error"]["step_time"] = round(t.step_s / measured["step_time_s"] - 1, 4)
        out["likely_cause"]["step_time"] = _likely(gap, t.breakdown_s, TERM_SIGMA, "s", measured["step_time_s"])
    if m.peak_allocated_gb is not None:
        gap = m.peak_allocated_gb - mem.allocated_bytes / GB
        out["error"]["peak_allocated"] = round(mem.allocated_bytes / GB / m.peak_allocated_gb - 1, 4)
        out["likely_cause"]["peak_allocated"] = _likely(gap, out["memory_terms_gb"], MEMORY_SIGMA, "GB",
                                                        m.peak_allocated_gb)
    if m.oom:
        total = est.peak_bytes / GB
        verdict = "agrees: predicted not to fit" if not est.fits else \
            f"DISAGREES: predicted to fit ({total:.1f} of {est.capacity_bytes / GB:.1f} GB)"
        out["oom"] = {"measured": True, "predicted_peak_gb": round(total, 3), "verdict": verdict}
    if m.tflops_per_gpu is not None:
        out["reported_tflops_per_gpu"] = m.tflops_per_gpu
    if run.printed_params:  # the shape read vs the parameters Megatron counted on that rank
        rows = []
        for t, p, printed in run.printed_params:
            if p < run.layout.pp:
                ours = next(s.params for s in est.memory if s.stage == p)
                rows.append({"tp_rank": t, "pp_rank": p, "log": printed, "megasolve": ours,
                             "error": round(ours / printed - 1, 5)})
                if abs(ours / printed - 1) > 0.01:
                    out["notes"].append(f"the log counts {printed:,} parameters on rank (tp {t}, pp {p}); the shape "
                                        f"read gives {ours:,}: check the model (--model, --vocab-size, --arg)")
        out["parameters_per_rank"] = rows
    if m.theoretical_memory_gb is not None:
        out["megatron_theoretical_memory_gb"] = round(m.theoretical_memory_gb, 3)
    return out


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _layout_dict(run: Run) -> dict[str, Any]:
    from megasolve.solver.api import layout_dict

    return layout_dict(run.layout, run.workload)


def _ranked(gap: float, terms: dict[str, float], sigma: dict[str, float]) -> list[tuple[float, str, float]]:
    """(z, term, predicted) for every term that alone could close ``gap``, most plausible first:
    ``z = |log(new / predicted)| / sigma(term)`` with ``new = predicted + gap`` (each term's error is
    taken as log-normal, so halving a term is as plausible as doubling it; a term cannot go below 0)."""
    ranked = []
    for name, value in terms.items():
        s = sigma.get(name)
        if not s or value <= 0 or value + gap <= 0:
            continue
        ranked.append((abs(math.log((value + gap) / value)) / s, name, value))
    return sorted(ranked)


def _likely(gap: float, terms: dict[str, float], sigma: dict[str, float], unit: str,
            measured: float | None = None) -> dict[str, Any] | None:
    """The term whose relative error would explain ``gap`` most plausibly (``_ranked``), the runner-up,
    and whether the answer is ``stable``: the same term when the measurement is ``MEASURE_NOISE``
    higher or lower. When no term alone can close the gap (measured shorter than the prediction
    without its largest term), that largest term is named with ``z: None`` and the text says so."""
    candidates = {k: v for k, v in terms.items() if sigma.get(k) and v > 0}
    if not candidates:
        return None
    ranked = _ranked(gap, candidates, sigma)
    if not ranked:
        name, value = max(candidates.items(), key=lambda kv: kv[1])
        return {"term": name, "predicted": round(value, 4), "change_needed": round(gap / value, 4), "z": None,
                "runner_up": None, "stable": True,
                "text": (f"no single term explains it: even without {name} ({value:.3g} {unit}) the prediction "
                         f"exceeds the measurement; check the model, layout and workload read from the run")}
    z, name, value = ranked[0]
    stable = True
    if measured:
        for k in (1 - MEASURE_NOISE, 1 + MEASURE_NOISE):
            other = _ranked(gap + (k - 1) * measured, candidates, sigma)
            stable = stable and bool(other) and other[0][1] == name
    runner = ranked[1][1] if len(ranked) > 1 else None
    return {"term": name, "predicted": round(value, 4), "change_needed": round(gap / value, 4), "z": round(z, 2),
            "runner_up": runner, "stable": stable,
            "text": f"{name} {value:.3g} {unit} would have to be {gap / value:+.0%}"
                    + ("" if stable or runner is None else
                       f" (or {runner}: the answer changes within +-{MEASURE_NOISE:.0%} of the measurement)")
                    + ("" if z <= IMPLAUSIBLE_Z else
                       f"; that is {z:.0f} sd of its uncertainty: check the model, layout and workload read first")}


# ---------------------------------------------------------------------------- calibrate
@dataclass(frozen=True, slots=True)
class _Fit:
    knobs: tuple[Knob, ...]
    ks: tuple[float, ...]
    sd: tuple[float, ...]


def _timed(runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.measured_step_s and not r.measured.oom]


def _sensitivity(runs: Sequence[Run], base: Profile, knob: Knob, gpu: str, h: float = 0.1) -> np.ndarray:
    up = _profile(base, [knob], [h], gpu)
    down = _profile(base, [knob], [-h], gpu)
    return np.array([(_log_step(r, up) - _log_step(r, down)) / (2 * h) for r in runs])


def _ordered(kinds: set[bool]) -> list[Knob]:
    """Knobs in the order they are freed: with a MoE run, the MoE factor first (what moves most between
    releases is MoE work: consecutive Megatron-Bridge releases move dense step times by 4 % rms and
    MoE ones by up to 16-44 %, ``calibration_runs.yaml`` 26.04.01 -> 26.06), then the compute factors."""
    if True in kinds:
        return sorted(KNOBS, key=lambda k: k.name != "moe")
    return list(KNOBS)


def max_free(timed_runs: int, primary: int) -> int:
    """Communication factors ``n`` timed runs support once ``primary`` compute factors are free: one per
    two runs left over, so every such factor keeps a run of residual to be checked against
    (``benchmarks/calibrate_runs.py``: a comm factor fitted on two runs beside compute matched both
    exactly and made the other runs of the series worse, 5.6 % -> 9.2 % median).

    >>> [max_free(n, 1) for n in (1, 2, 3, 4, 5)]
    [0, 0, 1, 1, 2]
    """
    return max(0, (timed_runs - primary) // 2)


def _choose(runs: Sequence[Run], base: Profile, gpu: str
            ) -> tuple[list[Knob], dict[str, str], dict[str, list[float]], dict[str, float]]:
    """The free knobs, for every other knob why it stays fixed, the runs' sensitivities and each
    knob's prior log-sd on its own scale."""
    free: list[Knob] = []
    reasons: dict[str, str] = {}
    sens: dict[str, list[float]] = {}
    sigmas: dict[str, float] = {}
    columns: list[np.ndarray] = []
    kinds = {r.spec.is_moe for r in runs}
    precisions = {r.workload.precision for r in runs}
    dense_precisions = {r.workload.precision for r in runs if not r.spec.is_moe}
    # MoE runs in several precisions: after the shared MoE factor, one per precision on its routed experts, the
    # precisions with the fewest MoE runs first (the shared factor stands for the most common one when runs are few)
    moe_counts = Counter(r.workload.precision for r in runs if r.spec.is_moe)
    ordered = _ordered(kinds)
    by_precision = sorted((k for k in ordered if k.name.startswith("moe_")),
                          key=lambda k: moe_counts.get(k.name.removeprefix("moe_"), 0))
    rest = [k for k in ordered if not k.name.startswith("moe_")]
    at = next((i + 1 for i, k in enumerate(rest) if k.name == "moe"), 0)
    for knob in rest[:at] + by_precision + rest[at:]:
        if not knob.select(base.data, gpu):
            reasons[knob.name] = "its factors are not in this calibration's table"
            continue
        s = _sensitivity(runs, base, knob, gpu)
        sens[knob.name] = [round(float(v), 4) for v in s]
        sigmas[knob.name] = knob.sigma
        if knob.name.startswith("compute_") and knob.name.removeprefix("compute_") not in precisions:
            reasons[knob.name] = f"no run trains in {knob.name.removeprefix('compute_')}"
            continue
        moe_free = any(k.name == "moe" for k in free)
        if knob.name.startswith("compute_") and moe_free and True in kinds and False in kinds \
                and knob.name.removeprefix("compute_") not in dense_precisions:
            reasons[knob.name] = (f"no dense run trains in {knob.name.removeprefix('compute_')}: the MoE factor "
                                  "carries the MoE runs' offset")
            continue
        if knob.name == "moe" and kinds == {False}:
            reasons[knob.name] = "no MoE run"
            continue
        if knob.name.startswith("moe_"):
            precision = knob.name.removeprefix("moe_")
            if precision not in moe_counts:
                reasons[knob.name] = f"no MoE run trains in {precision}"
                continue
            if len(moe_counts) == 1:
                reasons[knob.name] = "the MoE runs train in one precision: the MoE factor carries them"
                continue
        if knob.name.startswith("compute") and kinds == {True} and any(k.name == "moe" for k in free):
            reasons[knob.name] = ("MoE runs only: the MoE factor carries their offset (the shipped model errs "
                                  "most on MoE), so dense predictions keep the shipped compute efficiency")
            continue
        if np.max(np.abs(s)) < MIN_SHARE:
            reasons[knob.name] = f"no run's step time moves by {MIN_SHARE:.0%} or more with it"
            continue
        primary = [k for k in free if k.name in PRIMARY]
        if knob.name in PRIMARY and len(free) >= len(runs):
            reasons[knob.name] = f"{len(runs)} timed run(s) support at most {len(runs)} free factor(s)"
            continue
        if knob.name not in PRIMARY and len(free) - len(primary) >= max_free(len(runs), len(primary)):
            reasons[knob.name] = (f"{len(runs)} timed run(s) with {len(primary)} compute factor(s) free support "
                                  f"{max_free(len(runs), len(primary))} communication factor(s) (two runs each)")
            continue
        if columns:
            a = np.stack(columns, axis=1)
            coef, *_ = np.linalg.lstsq(a, s, rcond=None)
            novelty = float(np.linalg.norm(s - a @ coef) / np.linalg.norm(s))
            if novelty < MIN_NOVELTY:
                reasons[knob.name] = (f"the runs do not differ in {knob.term} apart from what "
                                      f"{', '.join(k.name for k in free)} already explain")
                continue
        free.append(knob)
        columns.append(s)
    return free, reasons, sens, sigmas


def _fit(runs: Sequence[Run], base: Profile, knobs: Sequence[Knob], gpu: str, sigmas: dict[str, float],
         iterations: int = 6, spread: float = 1.0) -> _Fit:
    if not knobs or not runs:
        return _Fit(tuple(knobs), tuple(0.0 for _ in knobs), tuple(sigmas[k.name] for k in knobs))
    target = np.array([math.log(r.measured_step_s) for r in runs])
    weight = np.array([1 / (spread * SIGMA_RUN["moe" if r.spec.is_moe else "dense"]) ** 2 for r in runs])
    prior = np.array([1 / sigmas[k.name] ** 2 for k in knobs])
    ks = np.zeros(len(knobs))
    h = 0.05
    hessian = np.diag(prior)
    for _ in range(iterations):
        prof = _profile(base, knobs, ks, gpu)
        f0 = np.array([_log_step(r, prof) for r in runs])
        jac = np.zeros((len(runs), len(knobs)))
        for j in range(len(knobs)):
            step = ks.copy()
            step[j] += h
            fj = np.array([_log_step(r, _profile(base, knobs, step, gpu)) for r in runs])
            jac[:, j] = (fj - f0) / h
        hessian = jac.T @ (jac * weight[:, None]) + np.diag(prior)
        grad = jac.T @ ((f0 - target) * weight) + prior * ks
        delta = np.linalg.solve(hessian, -grad)
        delta = np.clip(delta, -0.5, 0.5)
        bound = 2.5 * np.array([sigmas[k.name] for k in knobs])
        new = np.clip(ks + delta, -bound, bound)
        delta, ks = new - ks, new
        if np.max(np.abs(delta)) < 1e-3:
            break
    cov = np.linalg.inv(hessian)
    return _Fit(tuple(knobs), tuple(float(k) for k in ks), tuple(float(math.sqrt(cov[j, j])) for j in range(len(knobs))))


SPREADS = (1.0, 2.0, 4.0, math.inf)


def _cross_validate(runs: Sequence[Run], base: Profile, knobs: Sequence[Knob], gpu: str, sigmas: dict[str, float]
                    ) -> tuple[float, dict[str, float]]:
    """How far to trust the runs: the multiple of ``SIGMA_RUN`` (1, 2, 4, or infinity: keep the priors)
    whose leave-one-out fits predict the held-out runs best (sum of |log error|), over the runs that have
    another run of their kind (dense / MoE, precision) to be predicted from. With two such runs whose
    offsets disagree (one predicted too fast, the other too slow) this keeps the shipped values: a shared
    factor would move each away from its measurement. Runs without a sibling cannot be checked; for them
    the priors alone weigh the data."""
    def kind(r: Run) -> tuple[bool, str]:
        return r.spec.is_moe, r.workload.precision

    testable = [i for i, r in enumerate(runs) if sum(kind(o) == kind(r) for o in runs) >= 2]
    if not testable:  # no run has a sibling of its kind: nothing can check the fit, the priors decide
        return 1.0, {}

    def loo(spread: float) -> list[float]:
        errors = []
        for i in testable:
            run = runs[i]
            others = [r for j, r in enumerate(runs) if j != i]
            fit = _fit(others, base, knobs if spread != math.inf else [], gpu, sigmas, spread=spread)
            step = predict(run, _profile(base, fit.knobs, fit.ks, gpu)).time.step_s
            errors.append(abs(math.log(step / run.measured_step_s)))
        return errors
    scores = {spread: loo(spread) for spread in SPREADS}
    best = min(SPREADS, key=lambda s: (sum(scores[s]), -s if s != math.inf else 0))
    return best, {"before": statistics.median(scores[math.inf]), "after": statistics.median(scores[1.0])}


def _reserve(runs: Sequence[Run], base: Profile, free_profile: Profile) -> tuple[float | None, dict[str, Any]]:
    """Fitted ``memory.other_reserve_gb`` (None: stays fixed) and its record."""
    try:
        prior = float(base.value("memory.other_reserve_gb"))
        fraction = float(base.value("memory.other_reserve_fraction"))
    except KeyError:
        return None, {"free": False, "reason": "memory.other_reserve_gb / other_reserve_fraction are not in this "
                                               "calibration's table"}
    gaps = [r.measured.peak_reserved_gb - r.measured.peak_allocated_gb for r in runs
            if r.measured.peak_reserved_gb is not None and r.measured.peak_allocated_gb is not None]
    low, high = 0.0, math.inf
    for r in runs:
        est = predict(r, free_profile)
        usable = r.cluster.gpu.usable_memory_bytes / GB
        allocated = (r.measured.peak_allocated_gb if r.measured.peak_allocated_gb is not None
                     else max(s.allocated_bytes for s in est.memory) / GB)
        room = usable - allocated - fraction * usable  # what other_reserve_gb may take before it stops fitting
        if r.measured.oom:
            low = max(low, room)
        else:
            high = min(high, room)
    if not gaps and not any(r.measured.oom for r in runs):  # runs that fit only bound it from above
        return None, {"free": False, "reason": "no run reports reserved memory or ran out of memory",
                      "value": prior, "prior": prior}
    # the reserve is other_reserve_gb + fraction * usable; the gap and the bounds are on the whole of it
    usable = runs[0].cluster.gpu.usable_memory_bytes / GB
    target = statistics.median(gaps) + CONTEXT_GB - fraction * usable if gaps else prior
    value = (len(gaps) * target + prior) / (len(gaps) + 1)
    value = min(max(value, low), high) if low <= high else value
    value = max(value, 0.0)
    return value, {"free": True, "value": round(value, 3), "prior": prior,
                   "range": [round(max(low, 0.0), 3), round(high, 3) if high < math.inf else None],
                   "from": f"{len(gaps)} reserved-allocated gap(s) + {CONTEXT_GB} GB CUDA context/NCCL; "
                           f"bounds from {sum(r.measured.oom for r in runs)} OOM and "
                           f"{sum(not r.measured.oom for r in runs)} completed run(s)"}


def calibrate(runs: Sequence[Run], *, base: Profile | None = None, name: str = "calibrated",
              loo: bool = True) -> Profile:
    """Fit a ``Profile`` to ``runs`` (priors: ``base``, the shipped profile by default).

    The report holds, per run, the step-time error before (``base``) and after (the fitted profile),
    and the leave-one-out errors: the run predicted by a profile fitted on the other runs.
    """
    if not runs:
        raise MegasolveError(field="RUN", value="none", rule="calibration needs at least one run",
                             fix="pass one or more training logs or a runs file")
    base = base or active()
    for run in runs:
        run.spec.require_plannable()  # a model the cost model cannot time cannot calibrate it either
    gpus = sorted({r.cluster.gpu.name for r in runs})
    if len(gpus) > 1:
        raise MegasolveError(field="RUN", value=", ".join(gpus), rule="a profile is fitted for one GPU type",
                             fix="calibrate each GPU type's runs separately")
    gpu = gpus[0]
    timed = _timed(runs)
    knobs, reasons, sens, sigmas = _choose(timed, base, gpu) if timed else \
        ([], {k.name: "no run has a step time" for k in KNOBS}, {}, {})
    spread, cv = _cross_validate(timed, base, knobs, gpu, sigmas) if len(timed) >= 2 and knobs else (1.0, None)
    if spread == math.inf:
        for knob in knobs:
            reasons[knob.name] = (f"leave-one-out check: fitted on the other runs it predicts each run worse "
                                  f"(median |error| {cv['before']:.1%} shipped, {cv['after']:.1%}"
                                  " fitted): the runs' offsets are their own, not a shared factor")
        knobs = []
    fit = _fit(timed, base, knobs, gpu, sigmas, spread=spread)
    speed = _profile(base, fit.knobs, fit.ks, gpu)
    reserve, reserve_record = _reserve(runs, base, speed)
    extra = {"memory.other_reserve_gb": reserve} if reserve is not None else {}

    fitted: dict[str, Any] = {}
    for knob in KNOBS:
        paths = knob.select(base.data, gpu)
        if knob in fit.knobs:
            j = fit.knobs.index(knob)
            k, sd = fit.ks[j], fit.sd[j]
            fitted[knob.name] = {
                "free": True, "term": knob.term, "factor": round(math.exp(k), 4),
                "range": [round(math.exp(k - sd), 4), round(math.exp(k + sd), 4)], "prior_sigma": round(sigmas[knob.name], 4),
                "values": {p: {"value": _n(base.value(p) * math.exp(s * k)), "prior": _n(base.value(p)),
                               "range": sorted([_n(base.value(p) * math.exp(s * (k - sd))),
                                                _n(base.value(p) * math.exp(s * (k + sd)))])} for p, s in paths}}
        else:  # kept at the prior: the value the cost model reads, and why
            fitted[knob.name] = {"free": False, "term": knob.term, "reason": reasons.get(knob.name, "not selected"),
                                 "values": {p: {"value": _n(base.value(p)), "prior": _n(base.value(p))}
                                            for p, _ in paths}}
        if knob.name in sens:
            fitted[knob.name]["sensitivity"] = sens[knob.name]
    fitted["memory_reserve"] = reserve_record

    software = tuple(sorted({s for r in runs for s in r.software}))
    meta = dict(name=name, gpu=gpu, software=software, runs=tuple(r.id for r in runs), fitted=fitted,
                source=f"megasolve calibrate on {len(runs)} run(s) of {gpu}; priors {base.name}")
    profile = base.with_overrides({**_overrides(base, fit.knobs, fit.ks, gpu), **extra}, **meta)
    report = _report(runs, base, profile, gpu, fit.knobs, sigmas, spread) if loo else {}
    return base.with_overrides({**_overrides(base, fit.knobs, fit.ks, gpu), **extra}, report=report, **meta)


def _n(value: float) -> float:
    return float(f"{value:.4g}")


def _report(runs: Sequence[Run], base: Profile, fitted: Profile, gpu: str, knobs: Sequence[Knob],
            sigmas: dict[str, float], spread: float) -> dict[str, Any]:
    rows = []
    for i, run in enumerate(runs):
        measured = run.measured_step_s
        if not measured or run.measured.oom:
            continue
        before = predict(run, base).time.step_s / measured - 1
        after = predict(run, fitted).time.step_s / measured - 1
        others = _timed([r for j, r in enumerate(runs) if j != i])
        if others:  # the same free factors, fitted without this run (the priors carry the factors it alone set)
            fit = _fit(others, base, knobs, gpu, sigmas, spread=spread)
            loo = predict(run, _profile(base, fit.knobs, fit.ks, gpu)).time.step_s / measured - 1
        else:
            loo = before
        rows.append({"run": run.id, "measured_step_s": round(measured, 4), "error_before": round(before, 4),
                     "error_after": round(after, 4), "loo_error_after": round(loo, 4)})
    summary = {}
    if rows:
        summary = {"median_abs_error_before": round(statistics.median(abs(r["error_before"]) for r in rows), 4),
                   "median_abs_error_after": round(statistics.median(abs(r["error_after"]) for r in rows), 4),
                   "median_abs_loo_error_after": round(statistics.median(abs(r["loo_error_after"]) for r in rows), 4)}
    return {"runs": rows, **summary}
