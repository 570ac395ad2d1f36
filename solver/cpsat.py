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
from megasolve.solver.tables import CostTables, PipelineRow

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
    model = cp_model.CpModel()
    domains = space.domains
    lits = {a: [model.NewBoolVar(f"{a}={v}") for v in domains[a]] for a in AXES}
    index = {}
    for a in AXES:
        model.AddExactlyOne(lits[a])
        index[a] = model.NewIntVar(0, len(domains[a]) - 1, f"i_{a}")
        model.Add(index[a] == sum(i * lit for i, lit in enumerate(lits[a])))
    sel = model.NewIntVar(0, 1, "sel")
    model.Add(sel == sum(l for l, rc in zip(lits["rc"], domains["rc"]) if rc[0] == "selective"))
    sel_values = (False, True)

    def var_of(axis: str):
        return sel if axis == "sel" else index[axis]

    def value_index(axis: str, value: Any) -> int:
        return sel_values.index(value) if axis == "sel" else domains[axis].index(value)

    # ---- rules: allowed-assignment tables over each rule's axes
    assumptions: dict[str, cp_model.IntVar] = {}
    position = {a: {v: i for i, v in enumerate(domains[a])} for a in AXES}
    for rule, axes in space.rules():
        allowed = space.allowed(rule, axes)
        ct = model.AddAllowedAssignments([index[a] for a in axes],
                                         [tuple(position[a][v] for a, v in zip(axes, values)) for values in allowed])
        if rule_assumptions:
            guard = model.NewBoolVar(f"rule:{rule.name}")
            ct.OnlyEnforceIf(guard)
            assumptions[rule.name] = guard

    # ---- micro-batch count m = gbs / (mbs * dp)
    gbs = tables.workload.global_batch_size
    # every (mbs, dp) pair gets its m (0 when mbs*dp > gbs): divisibility is the guarded batch rule's job,
    # so that an explanation can name it
    m_of = {(b, d): gbs // (b * d) for b in domains["mbs"] for d in domains["dp"]}
    m_values = sorted(set(m_of.values())) or [1]
    m_var = model.NewIntVar(min(m_values), max(m_values), "m")
    model.AddAllowedAssignments([index["mbs"], index["dp"], m_var],
                                [(domains["mbs"].index(b), domains["dp"].index(d), mv) for (b, d), mv in m_of.items()])
    m_lit = {mv: model.NewBoolVar(f"m={mv}") for mv in m_values}
    model.AddExactlyOne(m_lit.values())
    for mv, lit in m_lit.items():
        model.Add(m_var == mv).OnlyEnforceIf(lit)
    threshold: dict[int, cp_model.IntVar] = {}

    def m_at_least(t: int) -> cp_model.IntVar:
        if t not in threshold:
            lit = model.NewBoolVar(f"m>={t}")
            model.Add(m_var >= t).OnlyEnforceIf(lit)
            model.Add(m_var <= t - 1).OnlyEnforceIf(lit.Not())
            threshold[t] = lit
        return threshold[t]

    # ---- pipeline rows (pp, vpp, split, rc) that obey the rules on those axes alone
    if rows is None:
        rows = pipeline_rows(space, tables, deadline)
    rows = [(row, model.NewBoolVar(f"row{i}")) for i, row in enumerate(rows)]
    for axis_pos, axis in enumerate(ROW_AXES):
        for value, lit in zip(domains[axis], lits[axis]):
            model.Add(sum(r for row, r in rows if (row.pp, row.vpp, row.split, row.rc)[axis_pos] == value) == lit)

    # ---- term variables
    used_terms: set[str] = set()
    for row, _ in rows:
        for slot in row.slots:
            for part in ("t", "c"):
                used_terms |= {t for _, t in tables.time_form(row, slot, part)}
            grad, param = tables.dp_forms(row, slot)
            used_terms |= {t for _, t in grad + param}
            dense, expert = tables.param_form(row, slot, "o_")
            used_terms |= {t for _, t in dense + expert}
            used_terms |= {t for _, t in tables.fixed_memory_form(row, slot) + tables.activation_form(slot)}
            if slot.first:
                used_terms.add("ma_first")
    # With `configs`, a table over axes that the keys fix keeps only the keys' projections (the other
    # entries could never be selected): smaller tables, tighter term domains.
    projections: list[dict[str, Any]] | None = None
    if configs is not None:
        from megasolve.solver.bounds import GROUP_AXES

        projections = [dict(zip(GROUP_AXES, key)) for key in configs]
        for point in projections:
            point["sel"] = point["rc"][0] == "selective"

    def reachable(axes: tuple[str, ...]) -> set[tuple] | None:
        if projections is None or not set(axes) <= set(projections[0]):
            return None
        return {tuple(point[a] for a in axes) for point in projections}

    y: dict[str, cp_model.IntVar] = {}
    hi: dict[str, int] = {}
    for name in sorted(used_terms):
        term = tables.terms[name]
        _check_deadline(deadline)
        keep = reachable(term.axes)
        if keep is None:
            table = tables.table(name, domains)
        else:  # the reachable entries only, in the order of the full table
            table = {key: tables.value(name, dict(zip(term.axes, key)))
                     for key in itertools.product(*(domains[a] if a in domains else sel_values for a in term.axes))
                     if key in keep}
        if not table:
            raise NoLayout(f"no value of the cost term {name} survives the rules")
        hi[name] = max(table.values())
        y[name] = model.NewIntVar(min(table.values()), hi[name], name)
        model.AddAllowedAssignments([var_of(a) for a in term.axes] + [y[name]],
                                    [tuple(value_index(a, v) for a, v in zip(term.axes, key)) + (val,)
                                     for key, val in table.items()])
    def upper(form: list[tuple[int, str]]) -> int:
        return sum(c * hi[t] for c, t in form)

    num_slots = max(len(row.slots) for row, _ in rows)
    bounds = {kind: [0] * num_slots for kind in ("tau", "comp", "grad", "param", "opt")}
    total_hi = 0
    for row, _ in rows:
        row_total = 0
        for k, slot in enumerate(row.slots):
            g_form, p_form = tables.dp_forms(row, slot)
            o_dense, o_expert = tables.param_form(row, slot, "o_")
            for kind, form in (("tau", tables.time_form(row, slot, "t")), ("comp", tables.time_form(row, slot, "c")),
                               ("grad", g_form), ("param", p_form), ("opt", o_dense + o_expert)):
                bounds[kind][k] = max(bounds[kind][k], upper(form))
            row_total += slot.multiplicity * upper(tables.time_form(row, slot, "t"))
        total_hi = max(total_hi, row_total)
    tau = [model.NewIntVar(0, bounds["tau"][k], f"tau{k}") for k in range(num_slots)]
    comp = [model.NewIntVar(0, bounds["comp"][k], f"comp{k}") for k in range(num_slots)]
    grad = [model.NewIntVar(0, bounds["grad"][k], f"grad{k}") for k in range(num_slots)]
    param = [model.NewIntVar(0, bounds["param"][k], f"param{k}") for k in range(num_slots)]
    opt = [model.NewIntVar(0, bounds["opt"][k], f"opt{k}") for k in range(num_slots)]
    total = model.NewIntVar(0, total_hi, "sum_tau")
    excess = model.NewIntVar(0, 10**9, "excess") if memory == "excess" else None
    capacity = tables.capacity_mib
    other = tables.other_mib
    for count, (row, r) in enumerate(rows):
        if count % 32 == 0:
            _check_deadline(deadline)
        v = row.vpp
        model.Add(total == sum(slot.multiplicity * tau[k] for k, slot in enumerate(row.slots))).OnlyEnforceIf(r)
        for k, slot in enumerate(row.slots):
            _equal(model, tau[k], tables.time_form(row, slot, "t"), y, r)
            _equal(model, comp[k], tables.time_form(row, slot, "c"), y, r)
            g_form, p_form = tables.dp_forms(row, slot)
            _equal(model, grad[k], g_form, y, r)
            _equal(model, param[k], p_form, y, r)
            o_dense, o_expert = tables.param_form(row, slot, "o_")
            _equal(model, opt[k], o_dense + o_expert, y, r)
            # memory (combine.scaled_stage_memory) <= v*capacity, per class of m
            base_live = tables.live_units(row, slot, 10**9)
            small = [mv for mv in m_values if tables.live_units(row, slot, mv) < base_live]
            large = [mv for mv in m_values if mv not in small]
            def fits(live: int, k=k):
                lhs = _linear(tables.memory_form(row.pp, v, row.split, row.rc, k, live), y)
                if excess is not None:
                    return lhs - v * excess <= v * capacity
                return lhs <= v * capacity

            for mv in small:
                model.Add(fits(tables.live_units(row, slot, mv))).OnlyEnforceIf([r, m_lit[mv]])
            if large:
                guard = [r] if not small else [r, m_at_least(min(large))]
                model.Add(fits(base_live)).OnlyEnforceIf(guard)
        for k in range(len(row.slots), num_slots):  # unused slots are zero: every variable is determined
            for var in (tau[k], comp[k], grad[k], param[k], opt[k]):
                model.Add(var == 0).OnlyEnforceIf(r)

    # the combination of cost/combine.py, encoded: m and vpp are choices over their literals
    ar = CpArith(model)
    stages = [combine.StageCost(**{name: ar.var(var[k], 0, bounds[kind][k]) for name, var, kind in (
        ("tau", tau, "tau"), ("compute", comp, "comp"), ("grad", grad, "grad"), ("param", param, "param"),
        ("optimizer", opt, "opt"))}) for k in range(num_slots)]
    t_max_e = ar.maximum([s.tau for s in stages])  # the same variable as combine.step's maximum
    t_max = t_max_e.expr
    step_e, pipe_e = combine.step(ar, stages, Choice(tuple(m_values), tuple(m_lit[mv] for mv in m_values)),
                                  Choice(domains["vpp"], tuple(lits["vpp"])), tables.overlap_pct,
                                  tables.overhead_us, total=ar.var(total, 0, total_hi))
    pipe = pipe_e.expr
    # Redundant, row-independent bounds (they only tighten the relaxation): every layer runs on some
    # stage at least at its no-recompute cost, so sum(tau) >= the whole model's layer time, the slowest
    # stage carries at least 1/pp of it, and the average stage's static memory fits too.
    spec = tables.spec
    num_moe = sum(spec.is_moe_layer(i) for i in range(spec.num_layers))
    work = [(spec.num_layers - num_moe, "t_dense"), (num_moe, "t_moe"), (1, "t_logits")]
    work = [(c, t) for c, t in work if c and t in y]
    model.Add(total >= _linear(work, y))
    static = [(spec.num_layers - num_moe, "ms_dense_layer"), (num_moe, "ms_moe_layer"), (num_moe, "ms_expert"),
              (1, "ms_embedding")]
    static = [(c, t) for c, t in static if c and t in y]
    # pipeline >= m * sum(tau) / pp = gbs*tp*cp/(mbs*N) * (whole-model layer time): a table over the
    # per-layer axes only, so CP-SAT can bound a branch as soon as tp, cp, mbs, ... are chosen.
    lb_axes = ["tp", "cp", "mbs", "sp", "sel", "etp", "ep"]
    lb_rows = []
    n_gpus = tables.cluster.num_gpus
    keep = reachable(tuple(lb_axes))
    for key in itertools.product(*(sel_values if a == "sel" else domains[a] for a in lb_axes)):
        if keep is not None and key not in keep:
            continue
        point = dict(zip(lb_axes, key))
        try:
            layer_work = sum(c * tables.value(t, point) for c, t in work)
        except Exception:  # combinations the world-size rules exclude anyway
            continue
        bound = (gbs * point["tp"] * point["cp"] * layer_work) // (point["mbs"] * n_gpus)
        lb_rows.append(tuple(value_index(a, v) for a, v in zip(lb_axes, key)) + (bound,))
    if not lb_rows:
        raise NoLayout("no per-layer configuration survives the rules")
    pipe_lb = model.NewIntVar(0, max(r[-1] for r in lb_rows), "pipeline_lb")
    model.AddAllowedAssignments([var_of(a) for a in lb_axes] + [pipe_lb], lb_rows)
    model.Add(pipe >= pipe_lb)
    # Per pipeline shape (pp, vpp, split), before recompute is chosen: every stage takes at least its
    # layers at no-recompute cost, so tau_max and sum(tau) are bounded once the shape is known.
    prefixes: dict[tuple, list] = {}
    for row, r in rows:
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
    for p, lit in zip(domains["pp"], lits["pp"]):
        model.Add(p * t_max >= total).OnlyEnforceIf(lit)
        model.Add(_linear(static, y) <= p * (capacity - other + (excess if excess is not None else 0))
                  ).OnlyEnforceIf(lit)
        for mv, mlit in m_lit.items():
            model.Add(p * pipe >= mv * total).OnlyEnforceIf([lit, mlit])
    step = model.NewIntVar(max(0, step_e.lo), step_e.hi, "step_us")
    model.Add(step == step_e.expr)
    if configs is not None:
        # Only these (configuration, vpp, rc) keys, each with a lower bound on its step (bounds.py):
        # CP-SAT drops a key as soon as the incumbent (or an enumeration bound) is below its bound.
        from megasolve.solver.bounds import GROUP_AXES

        lb_var = model.NewIntVar(min(configs.values(), default=0), max(configs.values(), default=0), "config_lb")
        model.AddAllowedAssignments([index[a] for a in GROUP_AXES] + [lb_var],
                                    [tuple(position[a][v] for a, v in zip(GROUP_AXES, key)) + (bound,)
                                     for key, bound in configs.items()])
        # the keys' bounds are on the step (memory="constraint") or on the overflow (memory="excess",
        # bounds.ConfigBounds.configs(excess=True))
        model.Add((step if excess is None else excess) >= lb_var)
    if excess is not None:
        model.Minimize(excess)  # the closest layouts first (step-time ties are not ranked here)
    else:
        model.Minimize(step)
    proto = model.Proto()
    stats = ModelStats(variables=len(proto.variables), constraints=len(proto.constraints), rows=len(rows),
                       slots=num_slots, build_s=time.perf_counter() - start)
    return LayoutModel(model=model, literals=lits, step=step, excess=excess, rule_assumptions=assumptions,
                       stats=stats)


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
