"""Does anything fit? One feasibility solve (``feasible_point``, ``fits_on``) and the smallest
cluster of a kind that fits (``find_min_gpus``): CP-SAT feasibility solves on 1, 2, 4, ... GPUs up
to one node, then doubling whole nodes, then bisection over whole nodes. Used by ``explain``
(repairs) and ``whatif`` (minimum size per series); it imports neither, so the solver's modules form
no import cycle (``tests/test_layering.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.rules import RuleContext
from megasolve.solver.space import SearchSpace, build_space, refusal
from megasolve.solver.tables import CostTables
from megasolve.topology.cluster import Cluster
from megasolve.topology.gpus import GpuSpec, get_gpu

MAX_SEARCH_GPUS = 1 << 17  # the minimum-size search gives up above 131,072 GPUs


def feasible_point(space: SearchSpace, tables: CostTables, time_limit_s: float = 10.0) -> dict | None:
    """Any layout that obeys the rules and fits (no objective). None: proven that none exists.
    Raises ``TimeoutError`` when the time limit ends the search first."""
    from ortools.sat.python import cp_model

    from megasolve.solver.bounds import GROUP_AXES, ConfigBounds
    from megasolve.solver.cpsat import NoLayout, build_restricted, decode, new_solver, pipeline_rows

    deadline = time.perf_counter() + time_limit_s
    try:
        rows = pipeline_rows(space, tables, deadline)
    except NoLayout:
        return None
    # per (configuration, vpp, rc) group, a lower bound on its layouts' memory overflow; groups that
    # cannot fit (bound > 0) are out, the rest go in order of their slack (most first): only memory
    # terms are costed, none of the time terms a step bound would need
    lows = ConfigBounds(space, tables, rows).configs(deadline, excess=True, clamp=False)
    order = sorted((key for key, low in lows.items() if low <= 0),
                   key=lambda key: (lows[key], [space.domains[a].index(v) for a, v in zip(GROUP_AXES, key)]))
    # 8, 16, 32, ... groups at a time: a restricted model per batch (small, so fast to load), until one
    # has a layout or none is left
    start, size = 0, 8
    while start < len(order):
        keys = {key: 0 for key in order[start:start + size]}
        start, size = start + size, 2 * size
        restricted = build_restricted(space, tables, rows, keys, deadline=deadline)
        if restricted is None:
            continue
        sub, built = restricted
        built.model.clear_objective()
        solver = new_solver(max(0.01, deadline - time.perf_counter()))
        status = solver.Solve(built.model)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return decode(sub, built, solver)
        if status == cp_model.UNKNOWN:
            raise TimeoutError
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRules:
    """What a layout must obey beyond Megatron's rules, the same wherever a layout is searched for:
    ``solve`` and its smallest-cluster repair (``explain``), and ``whatif``'s points and its
    minimum-size search. ``fixed``: ``--fix`` pins; ``requires``: ``--require`` rules
    (``require.py``); ``min_headroom``: ``solve.Headroom`` (``--min-headroom``), None for none."""

    fixed: dict[str, Any] | None = None
    allow_cross_domain_tp: bool = False
    requires: tuple[str, ...] = ()
    min_headroom: Any = field(default=None)
    knobs: frozenset = frozenset()  # communication knobs chosen per layout (knobs.py)

    def headroom_bytes(self, cluster: Cluster) -> float:
        return self.min_headroom.bytes(cluster) if self.min_headroom is not None else 0.0

    def space(self, spec: ModelSpec, cluster: Cluster, workload: Workload) -> SearchSpace:
        return build_space(spec, cluster, workload, fixed=self.fixed, allow_cross_domain_tp=self.allow_cross_domain_tp,
                           requires=self.requires, knobs=self.knobs)

    def tables(self, spec: ModelSpec, cluster: Cluster, workload: Workload, *, margin: bool = True,
               band: bool = True) -> CostTables:
        """The cost tables with the memory every stage must leave free: its uncertainty band (``band``)
        plus the headroom (``margin=False``: neither)."""
        return CostTables(spec, cluster, workload, headroom_bytes=self.headroom_bytes(cluster) if margin else 0.0,
                          band=band and margin, knobs=self.knobs)


def fits_on(spec: ModelSpec, cluster: Cluster, workload: Workload, rules: SearchRules,
            time_limit_s: float) -> dict | None:
    """A layout that obeys ``rules`` (pins, ``--require``) and leaves their headroom, or None."""
    try:
        space = rules.space(spec, cluster, workload)
    except MegasolveError:
        return None
    return feasible_point(space, rules.tables(spec, cluster, workload), time_limit_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterKind:
    """A GPU type with its node and fabric shape, at any size: a catalog GPU plus the cluster
    flags, or a cluster file's ``Cluster`` (resized with ``Cluster.with_num_gpus``)."""

    gpu: str | GpuSpec = "h100"
    gpus_per_node: int | None = None
    nvlink_domain: int | None = None
    nic_gbit_per_gpu: float | None = None
    template: Cluster | None = None

    @property
    def gpu_spec(self) -> GpuSpec:
        if self.template is not None:
            return self.template.gpu
        return self.gpu if isinstance(self.gpu, GpuSpec) else get_gpu(self.gpu)

    @property
    def name(self) -> str:
        return self.gpu_spec.name

    @property
    def node_size(self) -> int:
        if self.template is not None:
            return self.template.gpus_per_node
        return self.gpus_per_node or self.gpu_spec.gpus_per_node

    def at(self, num_gpus: int) -> Cluster:
        """This kind of cluster with ``num_gpus`` GPUs (raises ``MegasolveError`` on a size that is
        not a whole number of nodes)."""
        if self.template is not None:
            return self.template.with_num_gpus(num_gpus)
        return Cluster.from_flags(num_gpus=num_gpus, gpu=self.gpu_spec, gpus_per_node=self.gpus_per_node,
                                  nvlink_domain=self.nvlink_domain, nic_gbit_per_gpu=self.nic_gbit_per_gpu)


@dataclass(frozen=True, slots=True, kw_only=True)
class MinGpus:
    """The smallest cluster of one series that fits, as found by the solver.

    ``exact``: ``num_gpus`` fits and ``num_gpus`` minus one node does not (below one node: half of
    it does not), every feasibility solve settled within the time limit. Feasibility is not always
    monotone in the cluster size (batch divisibility), so "smallest" means "smallest whose next
    smaller whole-node size does not fit".
    """

    gpu: str
    seq_length: int
    global_batch_size: int
    num_gpus: int | None
    largest_not_fitting: int | None
    exact: bool
    solves: int
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "seq_length": self.seq_length, "global_batch_size": self.global_batch_size,
                "num_gpus": self.num_gpus, "largest_not_fitting": self.largest_not_fitting, "exact": self.exact,
                "feasibility_solves": self.solves, "note": self.note}


def find_min_gpus(spec: ModelSpec, kind: ClusterKind, workload: Workload, *, time_limit_s: float | None = 60.0,
                  max_gpus: int = MAX_SEARCH_GPUS, known_not_fitting: int | None = None,
                  rules: SearchRules = SearchRules(), deadline: float | None = None) -> MinGpus:
    """The smallest cluster of ``kind`` on which some layout obeys ``rules`` and fits with their
    headroom (what ``solve`` returns untight with the same rules): feasibility solves on 1, 2, 4, ...
    GPUs up to a node, then 1, 2, 4, ... nodes, then bisection over whole nodes. ``time_limit_s``
    bounds each feasibility solve, ``deadline`` the whole search (a probe cut short counts as not
    fitting and marks the answer inexact); sizes up to ``known_not_fitting`` are skipped."""
    node = kind.node_size
    limit = 60.0 if time_limit_s is None else time_limit_s
    solves = 0
    unsettled: list[int] = []

    def fits(size: int) -> bool:
        nonlocal solves
        try:
            cluster = kind.at(size)
        except MegasolveError:
            return False
        budget = limit if deadline is None else min(limit, deadline - time.perf_counter())
        if budget <= 0:
            unsettled.append(size)
            return False
        solves += 1
        try:
            return fits_on(spec, cluster, workload, rules, budget) is not None
        except TimeoutError:  # not settled: count it as not fitting, mark the answer inexact
            unsettled.append(size)
            return False

    series = dict(gpu=kind.name, seq_length=workload.seq_length, global_batch_size=workload.global_batch_size)
    try:
        refused = refusal(RuleContext(spec=spec, cluster=kind.at(node), workload=workload))
    except MegasolveError:  # (a node this kind cannot build: the sizes below say so)
        refused = None
    if refused is not None:  # no size helps
        return MinGpus(**series, num_gpus=None, largest_not_fitting=None, exact=True, solves=0,
                       note=f"no cluster size fits: {refused.rule}")
    sizes = [s for s in (1 << k for k in range(32)) if s < node] + \
            [node << k for k in range(32) if node << k <= max_gpus]
    low: int | None = None
    if known_not_fitting is not None:
        low = known_not_fitting
        sizes = [s for s in sizes if s > known_not_fitting]
    high: int | None = None
    for size in sizes:
        if fits(size):
            high = size
            break
        low = size
    if high is None:
        return MinGpus(**series, num_gpus=None, largest_not_fitting=low, exact=not unsettled, solves=solves,
                       note=f"no cluster of up to {sizes[-1] if sizes else max_gpus:,} x {kind.name} fits")
    while low is not None and high - low > node and low >= node:
        mid = (low + high) // 2 // node * node
        if mid <= low:
            break
        if fits(mid):
            high = mid
        else:
            low = mid
    note = "" if not unsettled else f"feasibility not settled within {limit:g} s on {unsettled} GPUs"
    return MinGpus(**series, num_gpus=high, largest_not_fitting=low, exact=not unsettled, solves=solves, note=note)
