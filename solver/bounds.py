"""Memory-aware lower bounds on the canonical step time per *configuration*.

A configuration fixes the axes that set every cost term's value -- ``CONFIG_AXES`` = tp, cp, pp,
dp, mbs, sp, ep, etp, dop, fsdp, oo (dp follows from tp*cp*pp, so the micro-batch count ``m`` is fixed too).
What remains open is the pipeline row ``(vpp, split, rc)``. The bound of a configuration is the
minimum, over the *row groups* ``(vpp, rc)`` of its pp (the splits of a group are relaxed, never
enumerated per configuration), of a lower bound on ``pipeline + optimizer + overhead`` -- taken
only over the groups whose memory can possibly fit and whose rules can hold.

Why it is valid (all term values are non-negative integers, ``tables.py``):

* pipeline = ``m * tau_max + ceil((sum(tau) - tau_max) / v) >= ((m*v - 1) * tau_s + sum(tau)) / v``
  for every stage ``s`` (the left side grows with ``tau_max >= tau_s``, since ``m >= 1/v``), and
  ``>= ((m*v - 1 + pp) * sum(tau)) / (v * pp)`` (``tau_max >= sum(tau) / pp``);
* DP tail = ``max`` over stages of ``combine.dp_exposed`` ``>=`` any one stage's, and each stage's is
  ``>= G + P - k*C`` (``max(0, x) >= x`` in both windows, then the contention's mix): added to the same stage's
  pipeline bound, one more form with a negative coefficient on ``C`` (its compute). Without it the bounds of
  large-DP layouts sat far below their steps (DeepSeek-V3 on 16,384 H100: the best layout 0.583 s, 35 % of it
  DP, its configuration bounded at 0.470 s; with it 0.563 s), and the search enumerated thousands of keys;
* optimizer = ``max`` over stages ``>=`` any one stage's;
* memory: a row fits only if every stage's (scaled) memory form (``combine.scaled_stage_memory``,
  the reserve included) is ``<= v * capacity``.

Each of these is a linear form ``sum(c_t * value_t)`` with coefficients that depend on the row (non-negative
but for the DP tail's compute). Over the rows of a group, the coefficient-wise minimum of the forms of stage ``s`` is
a form whose value is ``<=`` that of every row in the group (for ``x >= 0``,
``min_r (c_r . x) >= (min_r c_r) . x``) -- so a bound, or a necessary memory condition, that holds
for every row of the group holds for the group's minimum form.

The forms are ``cost/combine.py``'s: ``pipeline_relaxations`` (next to the ``pipeline`` it relaxes), the
DP exposure's linear bound (or 0), optimizer and overhead as in ``combine.step``, and the memory of
``CostTables.memory_form`` (``combine.scaled_stage_memory``). ``tests/test_bounds.py``
checks every bound against ``evaluate`` on every fitting layout of several spaces.

Uses: ``solve._solve_cpsat`` restricts CP-SAT models to the (configuration, vpp, rc) keys whose
bound is below its enumeration threshold (an allowed-assignment table ``(keys, bound)`` with
``step >= bound``, ``cpsat.build_model(configs=...)``); ``explain.feasible_point`` answers "nothing
fits" without a model when no configuration is left, and otherwise tries configurations in bound
order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from megasolve.cost import combine
from megasolve.cost.combine import LinearForm
from megasolve.solver.space import SearchSpace, _fields_of, rc_sel
from megasolve.solver.tables import CostTables, PipelineRow

CONFIG_AXES = ("tp", "cp", "pp", "dp", "mbs", "sp", "ep", "etp", "dop", "fsdp", "oo", "disp")
GROUP_AXES = CONFIG_AXES + ("vpp", "rc")  # a configuration and one row group of its pp
Form = dict[str, int]


def _merge(*parts: tuple[int, Any]) -> Form:
    out: Form = {}
    for k, form in parts:
        pairs = ((c, t) for t, c in form.items()) if isinstance(form, dict) else form
        for c, t in pairs:
            out[t] = out.get(t, 0) + k * c
    return out


def _coefwise_min(forms: list[Form]) -> Form:
    """Coefficient-wise minimum (a term missing from a form has coefficient 0 there; coefficients may
    be negative: ``min_r (c_r . x) >= (min_r c_r) . x`` for any signs when ``x >= 0``)."""
    names = set().union(*forms)
    low = {t: min(form.get(t, 0) for form in forms) for t in sorted(names)}
    return {t: c for t, c in low.items() if c}


def stage_slots(tables: CostTables, row: PipelineRow) -> list[int]:
    """Index of the slot of ``row`` that holds each stage (``Slot.stages``, from ``layers.stage_layers``)."""
    out = [0] * row.pp
    for j, slot in enumerate(row.slots):
        for stage in slot.stages:
            out[stage] = j
    return out


@dataclass(frozen=True, slots=True)
class GroupForms:
    """Minimum forms of one row group ``(pp, vpp, rc)`` for one micro-batch count ``m``."""

    vpp: int
    rc: tuple
    time: tuple[tuple[Form, int], ...]  # (numerator form, denominator): pipeline >= ceil(form / den)
    opt: tuple[Form, ...]  # optimizer >= form
    memory: tuple[Form, ...]  # fits => form <= vpp * capacity


def group_forms(tables: CostTables, rows: list[PipelineRow], m: int,
                slots_of: dict[PipelineRow, list[int]] | None = None, fsdp: bool = False) -> GroupForms:
    """The minimum forms over ``rows`` (same pp, vpp and rc; different splits) for ``m`` micro-batches.
    ``fsdp``: Megatron-FSDP is searched, so each stage also gets the pipeline relaxation over its
    ``combine.stage_time_relaxation`` (the exposed FSDP traffic counted in the stage time)."""
    pp, v = rows[0].pp, rows[0].vpp
    slots = [slots_of[row] if slots_of else stage_slots(tables, row) for row in rows]
    compiled = [tables.compiled(row.pp, row.vpp, row.split, row.rc)[1] for row in rows]
    totals = [sum((slot.multiplicity * LinearForm.of(t_form) for slot, t_form, *_ in parts), LinearForm())
              for parts in compiled]
    # stages that hold the same slot in every row have the same forms: one per distinct signature
    signatures = sorted({tuple(row_slots[stage] for row_slots in slots) for stage in range(pp)})
    time_forms, opt_forms, memory_forms, fsdp_forms, tail_forms = [], [], [], [], []
    fsdp_den = v
    # the DP tail (combine.dp_exposed with contention) as a linear lower bound: tail = E + c (G + P - E) / S with
    # E >= G + P - overlap * C / S, so tail >= G + P - k * C, k = (S - c) * overlap / S^2 rounded up to parts per
    # TAIL_PARTS (S = OVERLAP_SCALE, c the contention; G / P the stage's gradient and parameter traffic, C its compute)
    scale = combine.OVERLAP_SCALE
    k_parts = -(-(scale - tables.dp_contention) * tables.overlap_pct * TAIL_PARTS // scale ** 2)
    for signature in signatures:
        times, opts, mems, fsdps, tails = [], [], [], [], []
        for row, parts, total, j in zip(rows, compiled, totals, signature):
            slot, t_form, c_form, g_form, p_form, o_form, _, _, f_form = parts[j]
            (stage_bound, den), _ = combine.pipeline_relaxations(m, v, pp, LinearForm.of(t_form), total)
            times.append(stage_bound)
            # pipeline + tail >= (TAIL_PARTS * stage bound + den * TAIL_PARTS * tail bound) / (den * TAIL_PARTS)
            tail = {t: c * TAIL_PARTS for t, c in stage_bound.items()}
            for c, t in (*g_form, *p_form):
                tail[t] = tail.get(t, 0) + c * TAIL_PARTS * den
            for c, t in c_form:
                tail[t] = tail.get(t, 0) - c * k_parts * den
            tails.append(tail)
            if fsdp:
                tau, tau_den = combine.stage_time_relaxation(LinearForm.of(t_form), LinearForm.of(f_form),
                                                             LinearForm.of(c_form), tables.fsdp_overlap)
                (with_fsdp, den), _ = combine.pipeline_relaxations(m, v, pp, tau, tau_den * total)
                fsdps.append(with_fsdp)
                fsdp_den = den * tau_den
            opts.append(_merge((1, o_form)))
            for state in tables.live_units(row, slot, m):  # each peak state's memory is a lower bound
                mems.append({t: c for c, t in tables.memory_form(row.pp, v, row.split, row.rc, j, state)})
        time_forms.append(_coefwise_min(times))
        tail_forms.append(_coefwise_min(tails))
        if fsdp:
            fsdp_forms.append(_coefwise_min(fsdps))
        opt_forms.append(_coefwise_min(opts))
        memory_forms.append(_coefwise_min(mems))
    time = {_key(f): (f, v) for f in time_forms}
    time.update({_key(f): (f, fsdp_den) for f in fsdp_forms})
    time.update({_key(f): (f, v * TAIL_PARTS) for f in tail_forms if f})
    averages = [combine.pipeline_relaxations(m, v, pp, None, total)[0] for total in totals]
    average = _coefwise_min([f for f, _ in averages])
    time[_key(average)] = (average, averages[0][1])
    opt = {_key(f): f for f in opt_forms}
    memory = {_key(f): f for f in memory_forms}
    return GroupForms(vpp=v, rc=rows[0].rc, time=tuple(time.values()), opt=tuple(opt.values()),
                      memory=tuple(memory.values()))


# the DP tail's fraction k in parts per 100 in the bounds' forms (rounded up: at most 1 % of a micro-batch's compute
# given away; a coarse unit keeps the scaled coefficients far inside int64 for numpy)
TAIL_PARTS = 100


def _key(form: Form) -> tuple:
    return tuple(sorted(form.items()))


class ConfigBounds:
    """The configurations of a space that can fit, each with its lower bound (``configs``), and per
    configuration the bounds of the row groups ``(vpp, rc)`` that can fit (``groups``)."""

    def __init__(self, space: SearchSpace, tables: CostTables, rows: list[PipelineRow]) -> None:
        self.space, self.tables = space, tables
        config_set = set(CONFIG_AXES)
        self._config_rules = [(axes, set(space.allowed(rule, axes))) for rule, axes in space.rules()
                              if set(axes) <= config_set]
        # rules that also read vpp / rc: checked per (configuration, group) on the axes they read, cached
        self._group_rules = [(rule, axes) for rule, axes in space.rules()
                             if set(axes) <= config_set | {"vpp", "rc"} and not set(axes) <= config_set]
        self._rule_memo: dict[tuple, bool] = {}
        self._groups_of: dict[int, dict[tuple, list[PipelineRow]]] = {}
        for row in rows:
            self._groups_of.setdefault(row.pp, {}).setdefault((row.vpp, row.rc), []).append(row)
        self._slots_of = {row: stage_slots(tables, row) for row in rows}
        self._forms: dict[tuple, GroupForms] = {}
        self._by_key: dict[tuple, dict[tuple, int]] = {}

    def configs(self, deadline: float | None = None, excess: bool = False, clamp: bool = True) -> dict[tuple, int]:
        """Per configuration (values of ``CONFIG_AXES``) that obeys the rules on its own axes and has
        at least one row group that can fit: a lower bound on the canonical step (us) of every legal,
        fitting layout with that configuration (the lowest of ``groups(key)``, computed for all
        configurations at once). A configuration that is absent has no such layout. Raises
        ``TimeoutError`` past ``deadline``.

        ``excess=True``: instead, per ``GROUP_AXES`` key (configuration, vpp, rc) that obeys those
        rules, a lower bound on the memory overflow (MiB) of its layouts, ``max(0, ceil((form -
        vpp*capacity) / vpp))`` over the group's minimum memory forms -- the quantity
        ``cpsat.build_model(memory="excess")`` minimises (for ``explain``'s closest layouts); with
        ``clamp=False`` not clamped at 0 (a negative value: the group's memory slack, MiB, at best)."""
        import numpy as np

        tables, domains = self.tables, self.space.domains
        n = tables.cluster.num_gpus
        _check(deadline)
        # every combination of the open axes (dp follows), as positions in the domains
        open_axes = [a for a in CONFIG_AXES if a != "dp"]
        shape = [len(domains[a]) for a in open_axes]
        grid = np.indices(shape).reshape(len(shape), -1)
        value = {a: np.array([int(v) if not isinstance(v, str) else j for j, v in enumerate(domains[a])],
                             dtype=np.int64)[grid[i]] for i, a in enumerate(open_axes)}
        # models/ranks.py's data_parallel_size / expert_data_parallel_size, vectorised over configurations
        dense = value["tp"] * value["cp"] * value["pp"]
        keep = (n % dense == 0) & (n % (value["etp"] * value["ep"] * value["pp"]) == 0)
        keep &= np.isin(value["pp"], list(self._groups_of))
        dp = np.where(keep, n // np.where(keep, dense, 1), 0)
        dp_position = {v: i for i, v in enumerate(domains["dp"])}
        keep &= np.isin(dp, list(dp_position))
        positions = {a: grid[i] for i, a in enumerate(open_axes)}
        positions["dp"] = np.array([dp_position.get(int(d), 0) for d in dp.tolist()], dtype=np.int64)
        position = {a: {v: i for i, v in enumerate(domains[a])} for a in CONFIG_AXES}
        for axes, ok in self._config_rules:  # rules on configuration axes alone: allowed tuples
            def code_of(columns):
                code = np.zeros_like(columns[0])
                for a, col in zip(axes, columns):
                    code = code * len(domains[a]) + col
                return code
            allowed = code_of([np.array([position[a][t[i]] for t in ok] or [-1], dtype=np.int64)
                               for i, a in enumerate(axes)]) if ok else np.array([-1], dtype=np.int64)
            keep &= np.isin(code_of([positions[a] for a in axes]), allowed)
        rows_kept = np.flatnonzero(keep)
        if len(rows_kept) == 0:
            return {}
        index = np.stack([positions[a][rows_kept] for a in CONFIG_AXES], axis=1)
        keys = [tuple(domains[a][i] for a, i in zip(CONFIG_AXES, row)) for row in index.tolist()]
        column = {a: i for i, a in enumerate(CONFIG_AXES)}
        gbs = tables.workload.global_batch_size
        mbs = np.array(domains["mbs"], dtype=np.int64)[index[:, column["mbs"]]]
        dp = np.array(domains["dp"], dtype=np.int64)[index[:, column["dp"]]]
        micro = gbs // (mbs * dp)
        pps = np.array(domains["pp"], dtype=np.int64)[index[:, column["pp"]]]

        def projected(axes: tuple[str, ...], extra: dict[str, Any], fn) -> np.ndarray:
            """``fn(point)`` for every configuration, evaluated once per distinct projection on ``axes``."""
            own = [a for a in axes if a in column]
            code = np.zeros(len(keys), dtype=np.int64)
            for a in own:
                code = code * len(domains[a]) + index[:, column[a]]
            unique, first, inverse = np.unique(code, return_index=True, return_inverse=True)
            out = np.empty(len(unique), dtype=np.int64)
            for u, row in enumerate(first):
                out[u] = fn(dict({a: keys[row][column[a]] for a in own}, **extra))
            return out[inverse.reshape(-1)]

        term_values: dict[tuple[str, bool], np.ndarray] = {}

        def form_values(forms: tuple[Form, ...], sel: bool, rows: np.ndarray) -> np.ndarray:
            """``forms`` evaluated on ``rows``: one row per form (coefficients x term values, one product)."""
            names = sorted(set().union(*forms))
            for t in names:
                if (t, sel) not in term_values:
                    _check(deadline)
                    term_values[(t, sel)] = projected(tables.terms[t].axes, {"sel": sel},
                                                      lambda point, t=t: tables.value(t, point))
            if not names:
                return np.zeros((len(forms), len(rows)), dtype=np.int64)
            values = np.stack([term_values[(t, sel)][rows] for t in names])
            coefficients = np.array([[form.get(t, 0) for t in names] for form in forms], dtype=np.int64)
            return coefficients @ values

        capacity = tables.capacity_units  # the forms' unit; the reserve is their "other" term
        unbounded = np.iinfo(np.int64).max
        best = np.full(len(keys), unbounded, dtype=np.int64)
        overflow: dict[tuple, int] = {}
        # a group rule's verdict per configuration depends on the group's vpp / rc only if it reads them
        verdicts: dict[tuple, np.ndarray] = {}
        for pp, groups in self._groups_of.items():
            of_pp = pps == pp
            for (vpp, rc), members in groups.items():
                ok = of_pp.copy()
                for i, (rule, axes) in enumerate(self._group_rules):
                    key = (i, vpp if "vpp" in axes else None, rc if "rc" in axes else None)
                    if key not in verdicts:
                        verdicts[key] = projected(tuple(a for a in axes if a in column), {"vpp": vpp, "rc": rc},
                                                  lambda point, rule=rule: rule.check(self.space.ctx,
                                                                                      _fields_of(point))) != 0
                    ok &= verdicts[key]
                sel = rc_sel(rc)
                for m in np.unique(micro[ok]).tolist():
                    rows = np.flatnonzero(ok & (micro == m))
                    forms = self._group_forms(pp, vpp, rc, m, members)
                    memory = form_values(forms.memory, sel, rows) if forms.memory else None
                    if excess:
                        low = np.zeros(len(rows), dtype=np.int64) if clamp else \
                            np.full(len(rows), -unbounded, dtype=np.int64)
                        if memory is not None:
                            low = np.maximum(low, np.max(-(-(memory - vpp * capacity) // vpp), axis=0))
                        for row, value in zip(rows.tolist(), low.tolist()):
                            overflow[keys[row] + (vpp, rc)] = value
                        continue
                    bound = np.full(len(rows), tables.overhead_us, dtype=np.int64)
                    dens = np.array([den for _, den in forms.time], dtype=np.int64)[:, None]
                    bound += np.max(-(-form_values(tuple(f for f, _ in forms.time), sel, rows) // dens), axis=0)
                    if forms.opt:
                        bound += np.max(form_values(forms.opt, sel, rows), axis=0)
                    fits = np.ones(len(rows), dtype=bool) if memory is None else \
                        np.all(memory <= vpp * capacity, axis=0)
                    best[rows[fits]] = np.minimum(best[rows[fits]], bound[fits])
        if excess:
            return overflow
        return {key: int(b) for key, b in zip(keys, best.tolist()) if b != unbounded}

    def _group_forms(self, pp: int, vpp: int, rc: tuple, m: int, members: list[PipelineRow]) -> GroupForms:
        forms = self._forms.get((pp, vpp, rc, m))
        if forms is None:
            forms = self._forms[(pp, vpp, rc, m)] = group_forms(self.tables, members, m, self._slots_of,
                                                                fsdp=True in self.space.domains["fsdp"])
        return forms

    def _row_forms(self, row: PipelineRow, m: int) -> GroupForms:
        """The forms of one row (a group of one split): its own stages' time, optimizer and memory."""
        forms = self._forms.get((row, m))
        if forms is None:
            forms = self._forms[(row, m)] = group_forms(self.tables, [row], m, self._slots_of,
                                                        fsdp=True in self.space.domains["fsdp"])
        return forms

    def _value_bound(self, forms: GroupForms, value) -> int:
        """``pipeline + optimizer + overhead`` >= this, from ``forms`` and the term ``value`` function."""
        bound = max(-(-value(f) // den) for f, den in forms.time) + self.tables.overhead_us
        if forms.opt:
            bound += max(value(f) for f in forms.opt)
        return bound

    def groups(self, key: tuple) -> dict[tuple, int]:
        """``(vpp, rc) -> bound`` for the row groups of configuration ``key`` that can fit and obey the
        rules (each bound >= the configuration's)."""
        if key not in self._by_key:
            self._by_key[key] = self._bounds(dict(zip(CONFIG_AXES, key)), lowest_only=False)
        return self._by_key[key]

    def _group_ok(self, point: dict) -> bool:
        for i, (rule, axes) in enumerate(self._group_rules):
            key = (i,) + tuple(point[a] for a in axes)
            ok = self._rule_memo.get(key)
            if ok is None:
                ok = self._rule_memo[key] = rule.check(self.space.ctx, _fields_of({a: point[a] for a in axes}))
            if not ok:
                return False
        return True

    def _bounds(self, config: dict, lowest_only: bool) -> dict[tuple, int]:
        """Bounds of the groups of ``config`` that can fit; with ``lowest_only``, groups whose time
        bound is not below the lowest so far are skipped (their memory is not checked)."""
        tables = self.tables
        pp = config["pp"]
        m = tables.workload.global_batch_size // (config["mbs"] * config["dp"])
        capacity = tables.capacity_units  # the forms' unit; the reserve is their "other" term
        out: dict[tuple, int] = {}
        best = None
        cached: dict[bool, dict[str, int]] = {}
        for (vpp, rc), members in self._groups_of.get(pp, {}).items():
            point = dict(config, vpp=vpp, rc=rc, sel=rc_sel(rc))
            if self._group_rules and not self._group_ok(point):
                continue
            forms = self._group_forms(pp, vpp, rc, m, members)
            cache = cached.setdefault(point["sel"], {})

            def value(form: Form) -> int:
                total = 0
                for t, c in form.items():
                    v = cache.get(t)
                    if v is None:
                        v = cache[t] = tables.value(t, point)
                    total += c * v
                return total

            bound = self._value_bound(forms, value)
            if lowest_only and best is not None and bound >= best:
                continue
            if any(value(f) > vpp * capacity for f in forms.memory):
                continue
            if not lowest_only:  # the group's bound: the lowest over the splits that can fit on their own
                fitting = [self._value_bound(row_forms, value) for row in members
                           for row_forms in [self._row_forms(row, m)]
                           if all(value(f) <= vpp * capacity for f in row_forms.memory)]
                if not fitting:
                    continue
                bound = max(bound, min(fitting))
            out[(vpp, rc)] = bound
            best = bound if best is None else min(best, bound)
        return out


def _check(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeoutError("the time limit ran out while the configuration bounds were computed")


def config_bounds(space: SearchSpace, tables: CostTables, rows: list[PipelineRow],
                  deadline: float | None = None) -> dict[tuple, int]:
    """``ConfigBounds(space, tables, rows).configs(deadline)``."""
    return ConfigBounds(space, tables, rows).configs(deadline)
