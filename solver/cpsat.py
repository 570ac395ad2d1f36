"""CP-SAT model of the layout search (read problem -> build model -> solve -> decode).

Variables: one Boolean per axis value (exactly one per axis), an integer index per axis for the
table constraints, one integer per cost term (``AddAllowedAssignments`` over the term's few axes),
one Boolean per pipeline row ``(pp, vpp, split, rc)`` channelled to the axis literals, and one
Boolean per micro-batch count ``m``. Megatron's rules are allowed-assignment tables over their own
axes. Per pipeline row, each stage slot's time, compute, DP traffic and optimizer time are linear
forms of term variables (``tables.py``, enforced by the row literal); they combine by
``cost/combine.step`` itself, run in ``CpArith`` (products with ``m`` and ``vpp`` as enforced
equalities per value, ceil-divisions by enforced linear inequalities, maxima by
``AddMaxEquality``); memory of every slot (``combine.scaled_stage_memory``) <= capacity by
enforced linear inequalities per (row, class of ``m``). Nothing enumerates the Cartesian product.

With ``configs`` (``solve._solve_cpsat``), the model is restricted to the (configuration, vpp, rc)
keys of ``bounds.py`` whose lower bound is below the current enumeration threshold: one more
allowed-assignment table ``(keys, bound)`` with ``step >= bound``, and cost tables cut to the
entries those keys can reach. Top-k: every layout below a growing threshold is enumerated; layouts
tied with the k-th are all collected and ordered like the oracle (lower peak memory, then the
fixed axis key).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from megasolve.solver.space import AXES, Point, SearchSpace, _fields_of
from megasolve.cost import combine
from megasolve.solver.space import rc_sel
from megasolve.solver.tables import CostTables, PipelineRow, sel_domain

ROW_AXES = ("pp", "vpp", "split", "rc")


@dataclass
class ModelStats:
    variables: int = 0
    constraints: int = 0
    rows: int = 0
    slots: int = 0
    build_s: float = 0.0
    solve_s: float = 0.0
    solves: int = 0
    proven_optimal: bool = True
    enumerated: int = 0


@dataclass
class LayoutModel:
    """A built CP-SAT model and the handles needed to decode and cut solutions."""

    model: cp_model.CpModel
    literals: dict[str, list[cp_model.IntVar]]
    step: cp_model.IntVar
    excess: cp_model.IntVar | None
    rule_assumptions: dict[str, cp_model.IntVar] = field(default_factory=dict)
    stats: ModelStats = field(default_factory=ModelStats)


def _linear(form: list[tuple[int, str]], y: dict[str, cp_model.IntVar]):
    """``sum(c * y[t])`` built in one call (operator overloading is slow for thousands of rows)."""
    if not form:
        return 0
    return cp_model.LinearExpr.weighted_sum([y[t] for _, t in form], [c for c, _ in form])


@dataclass(frozen=True)
class Bounded:
    """A linear expression of the model with known bounds (``CpArith``'s value type)."""

    expr: Any
    lo: int
    hi: int

    def __add__(self, other: Any) -> Bounded:
        if isinstance(other, Bounded):
            return Bounded(self.expr + other.expr, self.lo + other.lo, self.hi + other.hi)
        return Bounded(self.expr + other, self.lo + other, self.hi + other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Bounded:
        if isinstance(other, Bounded):
            return Bounded(self.expr - other.expr, self.lo - other.hi, self.hi - other.lo)
        return Bounded(self.expr - other, self.lo - other, self.hi - other)

    def __mul__(self, k: int) -> Bounded:
        lo, hi = sorted((k * self.lo, k * self.hi))
        return Bounded(self.expr * k, lo, hi)

    __rmul__ = __mul__


@dataclass(frozen=True)
class Choice:
    """An integer that takes ``values[i]`` when ``literals[i]`` holds (exactly one holds)."""

    values: tuple[int, ...]
    literals: tuple[Any, ...]

    def __mul__(self, k: int) -> Choice:
        return Choice(tuple(k * v for v in self.values), self.literals)

    __rmul__ = __mul__


class CpArith:
    """``cost/combine.py``'s arithmetic over model expressions: every product with a ``Choice``,
    ceil-division, ``pos`` and ``maximum`` becomes a new variable defined exactly by its constraints
    (fully determined by the operands, so enumeration never sees two copies of one layout)."""

    def __init__(self, model: cp_model.CpModel) -> None:
        self.model = model
        self._max: dict[tuple[int, ...], Bounded] = {}

    @staticmethod
    def var(v: cp_model.IntVar, lo: int, hi: int) -> Bounded:
        return Bounded(v, lo, hi)

    def mul(self, k: Any, x: Any) -> Any:
        if not isinstance(k, Choice):
            return k * x
        if not isinstance(x, Bounded):
            return k * x
        products = [sorted((val * x.lo, val * x.hi)) for val in k.values]
        r = self.model.NewIntVar(min(p[0] for p in products), max(p[1] for p in products), "")
        for val, lit in zip(k.values, k.literals):
            self.model.Add(r == val * x.expr).OnlyEnforceIf(lit)
        return Bounded(r, min(p[0] for p in products), max(p[1] for p in products))

    def ceil_div(self, x: Bounded, d: Any) -> Bounded:
        divisors = list(zip(d.values, d.literals)) if isinstance(d, Choice) else [(d, None)]
        lo = min(-(-x.lo // val) for val, _ in divisors)
        hi = max(-(-x.hi // val) for val, _ in divisors)
        e = self.model.NewIntVar(lo, hi, "")
        for val, lit in divisors:
            for ct in (self.model.Add(val * e >= x.expr), self.model.Add(val * e <= x.expr + val - 1)):
                if lit is not None:
                    ct.OnlyEnforceIf(lit)
        return Bounded(e, lo, hi)

    def pos(self, x: Bounded) -> Bounded:
        p = self.model.NewIntVar(max(0, x.lo), max(0, x.hi), "")
        self.model.AddMaxEquality(p, [x.expr, 0])
        return Bounded(p, max(0, x.lo), max(0, x.hi))

    def maximum(self, xs: list[Bounded]) -> Bounded:
        key = tuple(id(x.expr) for x in xs)
        if key not in self._max:
            r = self.model.NewIntVar(max(x.lo for x in xs), max(x.hi for x in xs), "")
            self.model.AddMaxEquality(r, [x.expr for x in xs])
            self._max[key] = Bounded(r, max(x.lo for x in xs), max(x.hi for x in xs))
        return self._max[key]


def _equal(model: cp_model.CpModel, var, form: list[tuple[int, str]], y, guard) -> None:
    """``var == form`` under ``guard``."""
    terms = [var] + [y[t] for _, t in form]
    coeffs = [1] + [-c for c, _ in form]
    model.Add(cp_model.LinearExpr.weighted_sum(terms, coeffs) == 0).OnlyEnforceIf(guard)


class NoLayout(Exception):
    """The rules (with the ``--fix`` pins) leave no pipeline shape or no value of some cost term."""


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeoutError("the time limit ran out while the CP-SAT model was being built")


def pipeline_rows(space: SearchSpace, tables: CostTables, deadline: float | None = None) -> list[PipelineRow]:
    """Pipeline rows ``(pp, vpp, split, rc)`` that obey the rules on those axes alone."""
    row_rules = [(r, a) for r, a in space.rules() if set(a) <= set(ROW_AXES)]
    rows: list[PipelineRow] = []
    for count, combo in enumerate(itertools.product(*(space.domains[a] for a in ROW_AXES))):
        if count % 64 == 0:
            _check_deadline(deadline)
        fields = _fields_of(dict(zip(ROW_AXES, combo)))
        if all(rule.check(space.ctx, fields) for rule, _ in row_rules):
            rows.append(tables.row(*combo))
    if not rows:
        raise NoLayout("no pipeline shape (pp, vpp, split, recompute) obeys the rules")
    return rows


def build_model(space: SearchSpace, tables: CostTables, *, memory: str = "constraint",
                rule_assumptions: bool = False, deadline: float | None = None,
                configs: dict[tuple, int] | None = None, rows: list[PipelineRow] | None = None) -> LayoutModel:
    """``memory``: ``"constraint"`` (every slot fits) or ``"excess"`` (minimise the worst overflow, to
    explain infeasibility). ``rule_assumptions``: guard each rule with an assumption literal.
    ``configs``: restrict ``bounds.GROUP_AXES`` (configuration, vpp, rc) to these keys, each with a
    lower bound on its step (``bounds.ConfigBounds``), or on its overflow with ``memory="excess"``. ``rows``: the
    space's ``pipeline_rows`` when the caller has them already.
    Raises ``NoLayout`` when the space is empty by construction, ``TimeoutError`` past ``deadline``."""
    start = time.perf_counter()
    b = _Builder(space, tables, memory=memory, deadline=deadline, configs=configs)
    b.axes()
    b.rules(rule_assumptions)
    b.microbatches()
    b.rows(rows if rows is not None else pipeline_rows(space, tables, deadline))
    b.terms()
    b.stage_slots()
    b.combination()
    b.redundant_cuts()
    b.objective()
    proto = b.model.Proto()
    stats = ModelStats(variables=len(proto.variables), constraints=len(proto.constraints), rows=len(b.row_lits),
                       slots=b.num_slots, build_s=time.perf_counter() - start)
    return LayoutModel(model=b.model, literals=b.lits, step=b.step, excess=b.excess, rule_assumptions=b.assumptions,
                       stats=stats)


SLOT_KINDS = ("tau", "comp", "grad", "param", "opt", "fsdp")  # per stage slot: its variables, in this order


class _Builder:
    """One CP-SAT model under construction; ``build_model`` runs its steps in order, each reading
    what the earlier ones made (read problem -> build model, step by step)."""

    def __init__(self, space: SearchSpace, tables: CostTables, *, memory: str, deadline: float | None,
                 configs: dict[tuple, int] | None) -> None:
        self.space, self.tables, self.deadline, self.configs = space, tables, deadline, configs
        self.model = cp_model.CpModel()
        self.domains = space.domains
        self.position = {a: {v: i for i, v in enumerate(self.domains[a])} for a in AXES}
        self.assumptions: dict[str, cp_model.IntVar] = {}
        self.excess = self.model.NewIntVar(0, 10**12, "excess") if memory == "excess" else None
        self._m_threshold: dict[int, cp_model.IntVar] = {}
        # With `configs`, a table over axes that the keys fix keeps only the keys' projections (the
        # other entries could never be selected): smaller tables, tighter term domains.
        self.projections: list[dict[str, Any]] | None = None
        if configs is not None:
            from megasolve.solver.bounds import GROUP_AXES

            self.projections = [dict(zip(GROUP_AXES, key)) for key in configs]
            for point in self.projections:
                point["sel"] = rc_sel(point["rc"])

    # ---------------------------------------------------------------- helpers
    def var_of(self, axis: str):
        return self.sel if axis == "sel" else self.index[axis]

    def value_index(self, axis: str, value: Any) -> int:
        return self.sel_values.index(value) if axis == "sel" else self.domains[axis].index(value)

    def domain_of(self, axis: str) -> tuple:
        return self.sel_values if axis == "sel" else self.domains[axis]

    def reachable(self, axes: tuple[str, ...]) -> set[tuple] | None:
        if self.projections is None or not set(axes) <= set(self.projections[0]):
            return None
        return {tuple(point[a] for a in axes) for point in self.projections}

    def m_at_least(self, t: int) -> cp_model.IntVar:
        if t not in self._m_threshold:
            lit = self.model.NewBoolVar(f"m>={t}")
            self.model.Add(self.m_var >= t).OnlyEnforceIf(lit)
            self.model.Add(self.m_var <= t - 1).OnlyEnforceIf(lit.Not())
            self._m_threshold[t] = lit
        return self._m_threshold[t]

    def upper(self, form: list[tuple[int, str]]) -> int:
        return sum(c * self.hi[t] for c, t in form)

    def slot_forms(self, row: PipelineRow, slot) -> dict[str, list[tuple[int, str]]]:
        """The linear forms (``tables.py``) behind one slot's variables, by ``SLOT_KINDS``."""
        g_form, p_form, o_form = self.tables.step_forms(row, slot)
        return {"tau": self.tables.time_form(row, slot, "t"), "comp": self.tables.time_form(row, slot, "c"),
                "grad": g_form, "param": p_form, "opt": o_form, "fsdp": self.tables.fsdp_form(row, slot)}

    # ---------------------------------------------------------------- steps
    def axes(self) -> None:
        """One Boolean per axis value (exactly one per axis), an index per axis, ``sel``."""
        model, domains = self.model, self.domains
        self.lits = {a: [model.NewBoolVar(f"{a}={v}") for v in domains[a]] for a in AXES}
        self.index = {}
        for a in AXES:
            model.AddExactlyOne(self.lits[a])
            self.index[a] = model.NewIntVar(0, len(domains[a]) - 1, f"i_{a}")
            model.Add(self.index[a] == sum(i * lit for i, lit in enumerate(self.lits[a])))
        # the derived axis of the per-layer terms: the selective modules of rc (space.rc_sel), by index
        self.sel_values = sel_domain(domains["rc"])
        self.sel = model.NewIntVar(0, len(self.sel_values) - 1, "sel")
        model.Add(self.sel == sum(self.sel_values.index(rc_sel(rc)) * lit
                                  for lit, rc in zip(self.lits["rc"], domains["rc"])))

    def rules(self, rule_assumptions: bool) -> None:
        """Megatron's rules (and --require): allowed-assignment tables over each rule's axes."""
        for rule, axes in self.space.rules():
            allowed = self.space.allowed(rule, axes)
            ct = self.model.AddAllowedAssignments(
                [self.index[a] for a in axes],
                [tuple(self.position[a][v] for a, v in zip(axes, values)) for values in allowed])
            if rule_assumptions:
                guard = self.model.NewBoolVar(f"rule:{rule.name}")
                ct.OnlyEnforceIf(guard)
                self.assumptions[rule.name] = guard

    def microbatches(self) -> None:
        """``m = gbs / (mbs * dp)``, with one literal per value. Every (mbs, dp) pair gets its m (0 when
        mbs*dp > gbs): divisibility is the guarded batch rule's job, so that an explanation can name it."""
        model, domains = self.model, self.domains
        gbs = self.tables.workload.global_batch_size
        m_of = {(b, d): gbs // (b * d) for b in domains["mbs"] for d in domains["dp"]}
        self.m_values = sorted(set(m_of.values())) or [1]
        self.m_var = model.NewIntVar(min(self.m_values), max(self.m_values), "m")
        model.AddAllowedAssignments([self.index["mbs"], self.index["dp"], self.m_var],
                                    [(domains["mbs"].index(b), domains["dp"].index(d), mv)
                                     for (b, d), mv in m_of.items()])
        self.m_lit = {mv: model.NewBoolVar(f"m={mv}") for mv in self.m_values}
        model.AddExactlyOne(self.m_lit.values())
        for mv, lit in self.m_lit.items():
            model.Add(self.m_var == mv).OnlyEnforceIf(lit)

    def rows(self, rows: list[PipelineRow]) -> None:
        """One Boolean per pipeline row ``(pp, vpp, split, rc)``, channelled to the axis literals."""
        self.row_lits = [(row, self.model.NewBoolVar(f"row{i}")) for i, row in enumerate(rows)]
        for axis_pos, axis in enumerate(ROW_AXES):
            for value, lit in zip(self.domains[axis], self.lits[axis]):
                self.model.Add(sum(r for row, r in self.row_lits
                                   if (row.pp, row.vpp, row.split, row.rc)[axis_pos] == value) == lit)

    def terms(self) -> None:
        """One integer per cost term the rows use, tied to its axes by its table."""
        tables = self.tables
        used: set[str] = set()
        for row, _ in self.row_lits:
            for slot in row.slots:
                for form in self.slot_forms(row, slot).values():
                    used |= {t for _, t in form}
                used |= {t for _, t in tables.fixed_memory_form(row, slot) + tables.activation_form(slot)}
                if slot.first:
                    used.add("ma_first")
        self.y: dict[str, cp_model.IntVar] = {}
        self.hi: dict[str, int] = {}
        for name in sorted(used):
            term = tables.terms[name]
            _check_deadline(self.deadline)
            keep = self.reachable(term.axes)
            if keep is None:
                table = tables.table(name, self.domains)
            else:  # the reachable entries only, in the order of the full table
                table = {key: tables.value(name, dict(zip(term.axes, key)))
                         for key in itertools.product(*(self.domain_of(a) for a in term.axes))
                         if key in keep}
            if not table:
                raise NoLayout(f"no value of the cost term {name} survives the rules")
            self.hi[name] = max(table.values())
            self.y[name] = self.model.NewIntVar(min(table.values()), self.hi[name], name)
            self.model.AddAllowedAssignments([self.var_of(a) for a in term.axes] + [self.y[name]],
                                             [tuple(self.value_index(a, v) for a, v in zip(term.axes, key)) + (val,)
                                              for key, val in table.items()])

    def stage_slots(self) -> None:
        """Per stage slot: time, compute, DP traffic and optimizer variables equal to the selected
        row's forms; ``sum(tau)``; every slot's memory (``combine.scaled_stage_memory``) <= capacity,
        per class of ``m`` (the live chunk-units stop changing once ``m`` is large)."""
        model, tables, y = self.model, self.tables, self.y
        self.num_slots = max(len(row.slots) for row, _ in self.row_lits)
        self.bounds = {kind: [0] * self.num_slots for kind in SLOT_KINDS}
        self.total_hi = self.total_fsdp_hi = 0
        for row, _ in self.row_lits:
            row_total = row_fsdp = 0
            for k, slot in enumerate(row.slots):
                forms = self.slot_forms(row, slot)
                for kind in SLOT_KINDS:
                    self.bounds[kind][k] = max(self.bounds[kind][k], self.upper(forms[kind]))
                row_total += slot.multiplicity * self.upper(forms["tau"])
                row_fsdp += slot.multiplicity * self.upper(forms["fsdp"])
            self.total_hi = max(self.total_hi, row_total)
            self.total_fsdp_hi = max(self.total_fsdp_hi, row_total + row_fsdp)
        self.slot_vars = {kind: [model.NewIntVar(0, self.bounds[kind][k], f"{kind}{k}") for k in range(self.num_slots)]
                          for kind in SLOT_KINDS}
        tau = self.slot_vars["tau"]
        self.total = model.NewIntVar(0, self.total_hi, "sum_tau")
        capacity, excess = tables.capacity_units, self.excess
        for count, (row, r) in enumerate(self.row_lits):
            if count % 32 == 0:
                _check_deadline(self.deadline)
            v = row.vpp
            model.Add(self.total == sum(slot.multiplicity * tau[k] for k, slot in enumerate(row.slots))
                      ).OnlyEnforceIf(r)
            for k, slot in enumerate(row.slots):
                forms = self.slot_forms(row, slot)
                for kind in SLOT_KINDS:
                    _equal(model, self.slot_vars[kind][k], forms[kind], y, r)
                base_live = tables.live_units(row, slot, 10**9)
                # the m values from which on the in-flight micro-batches are those of any larger m share one
                # constraint; each smaller m has its own
                large = []
                for mv in reversed(self.m_values):
                    if tables.live_units(row, slot, mv) != base_live:
                        break
                    large.insert(0, mv)
                small = [mv for mv in self.m_values if mv not in large]

                def fits(state: tuple, k=k, row=row, v=v):
                    lhs = _linear(tables.memory_form(row.pp, v, row.split, row.rc, k, state), y)
                    if excess is not None:
                        return lhs - v * excess <= v * capacity
                    return lhs <= v * capacity

                for mv in small:  # every peak state of the slot fits
                    for state in tables.live_units(row, slot, mv):
                        model.Add(fits(state)).OnlyEnforceIf([r, self.m_lit[mv]])
                if large:
                    guard = [r] if not small else [r, self.m_at_least(min(large))]
                    for state in base_live:
                        model.Add(fits(state)).OnlyEnforceIf(guard)
            for k in range(len(row.slots), self.num_slots):  # unused slots are zero: all variables determined
                for kind in SLOT_KINDS:
                    model.Add(self.slot_vars[kind][k] == 0).OnlyEnforceIf(r)

    def combination(self) -> None:
        """``cost/combine.step`` itself, run in ``CpArith``: m and vpp are choices over their literals."""
        model, ar = self.model, CpArith(self.model)
        names = {"tau": "tau", "comp": "compute", "grad": "grad", "param": "param", "opt": "optimizer", "fsdp": "fsdp"}
        stages = [combine.StageCost(**{names[kind]: ar.var(self.slot_vars[kind][k], 0, self.bounds[kind][k])
                                       if self.bounds[kind][k] or kind != "fsdp" else 0 for kind in SLOT_KINDS})
                  for k in range(self.num_slots)]
        fsdp_overlap = self.tables.fsdp_overlap
        taus = [combine.stage_time(ar, s, fsdp_overlap) for s in stages]
        if any(self.bounds["fsdp"]):  # Megatron-FSDP's exposed traffic is part of tau: sum the new taus
            total = model.NewIntVar(0, self.total_fsdp_hi, "sum_tau_fsdp")
            for row, r in self.row_lits:
                model.Add(total == sum(slot.multiplicity * taus[k].expr for k, slot in enumerate(row.slots))
                          ).OnlyEnforceIf(r)
            total_e = ar.var(total, 0, self.total_fsdp_hi)
        else:
            total_e = ar.var(self.total, 0, self.total_hi)
        taus = [tau if isinstance(tau, Bounded) else Bounded(tau, 0, 0) for tau in taus]
        self.t_max = ar.maximum(taus).expr  # the same variable as combine.step's maximum
        step_e, pipe_e = combine.step(ar, stages, Choice(tuple(self.m_values),
                                                         tuple(self.m_lit[mv] for mv in self.m_values)),
                                      Choice(self.domains["vpp"], tuple(self.lits["vpp"])), self.tables.overlap_pct,
                                      self.tables.overhead_us, total=total_e, fsdp_overlap=fsdp_overlap, taus=taus,
                                      dp_contention=self.tables.dp_contention)
        self.pipe = pipe_e.expr
        self.step_e = step_e

    def redundant_cuts(self) -> None:
        """Row-independent bounds implied by the combination (they only tighten the relaxation): every
        layer runs on some stage at least at its no-recompute cost, so sum(tau) >= the whole model's
        layer time, the slowest stage carries at least 1/pp of it, and the average stage's static
        memory fits too."""
        model, tables, y, domains = self.model, self.tables, self.y, self.domains
        t_max, pipe, total, excess = self.t_max, self.pipe, self.total, self.excess
        spec = tables.spec
        num_moe = sum(spec.is_moe_layer(i) for i in range(spec.num_layers))
        work = [(c, t) for c, t in tables.model_time_form() if c and t in y]
        model.Add(total >= _linear(work, y))
        static = [(spec.num_layers - num_moe, "ms_dense_layer"), (num_moe, "ms_moe_layer"), (num_moe, "ms_expert"),
                  (1, "ms_embedding")]
        static = [(c, t) for c, t in static if c and t in y]
        # pipeline >= m * sum(tau) / pp = gbs*tp*cp/(mbs*N) * (whole-model layer time): a table over the
        # per-layer axes only, so CP-SAT can bound a branch as soon as tp, cp, mbs, ... are chosen.
        gbs = tables.workload.global_batch_size
        lb_axes = ["tp", "cp", "mbs", "sp", "sel", "etp", "ep", "disp"]
        lb_rows = []
        n_gpus = tables.cluster.num_gpus
        keep = self.reachable(tuple(lb_axes))
        for key in itertools.product(*(self.domain_of(a) for a in lb_axes)):
            if keep is not None and key not in keep:
                continue
            point = dict(zip(lb_axes, key))
            try:
                layer_work = sum(c * tables.value(t, point) for c, t in work)
            except Exception:  # combinations the world-size rules exclude anyway
                continue
            bound = (gbs * point["tp"] * point["cp"] * layer_work) // (point["mbs"] * n_gpus)
            lb_rows.append(tuple(self.value_index(a, v) for a, v in zip(lb_axes, key)) + (bound,))
        if not lb_rows:
            raise NoLayout("no per-layer configuration survives the rules")
        pipe_lb = model.NewIntVar(0, max(r[-1] for r in lb_rows), "pipeline_lb")
        model.AddAllowedAssignments([self.var_of(a) for a in lb_axes] + [pipe_lb], lb_rows)
        model.Add(pipe >= pipe_lb)
        # Per pipeline shape (pp, vpp, split), before recompute is chosen: every stage takes at least its
        # layers at no-recompute cost, so tau_max and sum(tau) are bounded once the shape is known.
        prefixes: dict[tuple, list] = {}
        for row, r in self.row_lits:
            prefixes.setdefault((row.pp, row.vpp, row.split), []).append(r)
        for (p, v, split), members in prefixes.items():
            shape_lit = model.NewBoolVar("")
            model.Add(sum(members) == shape_lit)
            base_row = tables.row(p, v, split, ("none", None))
            if any(t not in y for slot in base_row.slots for _, t in tables.time_form(base_row, slot, "t")):
                continue  # a space without no-recompute rows (restricted or pinned) has no such terms
            stage_sum = 0
            for slot in base_row.slots:
                form = tables.time_form(base_row, slot, "t")
                model.Add(t_max >= _linear(form, y)).OnlyEnforceIf(shape_lit)
                stage_sum += slot.multiplicity * _linear(form, y)
            model.Add(total >= stage_sum).OnlyEnforceIf(shape_lit)
        for p, lit in zip(domains["pp"], self.lits["pp"]):
            model.Add(p * t_max >= total).OnlyEnforceIf(lit)
            model.Add(_linear(static, y) <= p * (tables.capacity_mib - tables.other_mib
                                                 + (excess if excess is not None else 0))).OnlyEnforceIf(lit)
            for mv, mlit in self.m_lit.items():
                model.Add(p * pipe >= mv * total).OnlyEnforceIf([lit, mlit])

    def objective(self) -> None:
        """``step``; with ``configs``, each key's lower bound; minimise the step (or the overflow)."""
        model, excess = self.model, self.excess
        self.step = model.NewIntVar(max(0, self.step_e.lo), self.step_e.hi, "step_us")
        model.Add(self.step == self.step_e.expr)
        if self.configs is not None:
            # Only these (configuration, vpp, rc) keys, each with a lower bound on its step (bounds.py):
            # CP-SAT drops a key as soon as the incumbent (or an enumeration bound) is below its bound.
            from megasolve.solver.bounds import GROUP_AXES

            configs = self.configs
            lb_var = model.NewIntVar(min(configs.values(), default=0), max(configs.values(), default=0), "config_lb")
            model.AddAllowedAssignments([self.index[a] for a in GROUP_AXES] + [lb_var],
                                        [tuple(self.position[a][v] for a, v in zip(GROUP_AXES, key)) + (bound,)
                                         for key, bound in configs.items()])
            # the keys' bounds are on the step (memory="constraint") or on the overflow (memory="excess",
            # bounds.ConfigBounds.configs(excess=True))
            model.Add((self.step if excess is None else excess) >= lb_var)
        if excess is not None:
            model.Minimize(excess)  # the closest layouts first (step-time ties are not ranked here)
        else:
            model.Minimize(self.step)


def build_restricted(space: SearchSpace, tables: CostTables, rows: list[PipelineRow], keys: dict[tuple, int], *,
                     deadline: float | None = None, memory: str = "constraint"
                     ) -> tuple[SearchSpace, LayoutModel] | None:
    """The model of ``space`` restricted to ``keys`` (``bounds.GROUP_AXES`` values -> lower bound on the
    step, or on the overflow with ``memory="excess"``):
    axis domains cut to the values the keys use, ``rows`` (the space's ``pipeline_rows``) to those
    domains. Returns the restricted space (decode with it; rank with ``space``) and the model, or
    None when nothing is left. Raises ``TimeoutError`` past ``deadline``."""
    from megasolve.solver.bounds import GROUP_AXES

    if not keys:
        return None
    domains = dict(space.domains)
    for i, axis in enumerate(GROUP_AXES):
        used = {key[i] for key in keys}
        domains[axis] = tuple(v for v in space.domains[axis] if v in used)
    sub = SearchSpace(ctx=space.ctx, domains=domains, requires=space.requires)
    sub_rows = [row for row in rows if row.pp in domains["pp"] and row.vpp in domains["vpp"]
                and row.rc in domains["rc"] and row.split in domains["split"]]
    if not sub_rows:
        return None
    try:
        return sub, build_model(sub, tables, memory=memory, deadline=deadline, configs=keys, rows=sub_rows)
    except NoLayout:
        return None


def decode(space: SearchSpace, built: LayoutModel, solver: cp_model.CpSolver) -> Point:
    point = {}
    for a in AXES:
        for value, lit in zip(space.domains[a], built.literals[a]):
            if solver.BooleanValue(lit):
                point[a] = value
    return point


def exclude(space: SearchSpace, built: LayoutModel, point: Point) -> None:
    """A clause that forbids exactly this layout."""
    chosen = [built.literals[a][space.domains[a].index(point[a])] for a in AXES]
    built.model.AddBoolOr([lit.Not() for lit in chosen])


def new_solver(time_limit_s: float | None, workers: int = 1, seed: int = 0) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.cp_model_presolve = False  # presolve and probing cost seconds per solve here
    solver.parameters.cp_model_probing_level = 0
    if time_limit_s is not None:  # CP-SAT overruns its limit a little: keep 10% in hand
        solver.parameters.max_time_in_seconds = max(0.01, 0.9 * time_limit_s)
    return solver
