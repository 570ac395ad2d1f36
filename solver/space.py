"""The search space: candidate values per axis, and the axis <-> ``Layout`` mapping.

A point of the space assigns every axis of ``AXES``. ``split`` is the pair
``(first_stage_layers, last_stage_layers)`` (``(None, None)`` = even split) and ``rc`` how a layer's
activations are kept: ``("none", None)``, ``("selective", modules)`` (Megatron's --recompute-modules),
``("full", None)`` (uniform), ``("full", n)`` (block of n) or ``("offload", n)`` (activation offloading of
the first n layers, which Megatron allows only without recompute, TC L1884-1899 -- so it is one more
way to keep activations, not a separate axis). ``oo`` is the optimizer CPU-offload fraction. ``dp`` is
an axis too (the world-size rule ties it to ``tp*pp*cp``), so every rule reads plain axis values.
``disp`` is the MoE token dispatcher (a ``Workload`` field, not a ``Layout`` one): searched because it
changes memory (DeepEP's buffers with flex, ``memory.comm_buffer_bytes``), one value otherwise.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Iterable

from megasolve.cost.memory import DEFAULT_RECOMPUTE_MODULES
from megasolve.cost.offload import OPTIMIZER_OFFLOAD_FRACTIONS
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout, Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.rules import Rule, RuleContext, Violation, model_rules, rule_error, split_counts
from megasolve.topology.cluster import Cluster

AXES = ("tp", "cp", "pp", "dp", "mbs", "sp", "ep", "etp", "vpp", "split", "rc", "dop", "fsdp", "oo", "disp")
# Layout field -> the axis that carries it
FIELD_AXIS = {
    "tp": "tp", "cp": "cp", "pp": "pp", "dp": "dp", "mbs": "mbs", "sequence_parallel": "sp", "ep": "ep",
    "etp": "etp", "vpp": "vpp", "first_stage_layers": "split", "last_stage_layers": "split",
    "account_for_embedding": "split", "account_for_loss": "split", "pipeline_layout": "split", "recompute": "rc",
    "recompute_num_layers": "rc", "distributed_optimizer": "dop", "fsdp": "fsdp",
    "recompute_modules": "rc", "cpu_offload_layers": "rc", "optimizer_offload_fraction": "oo",
    "moe_dispatcher": "disp",  # a Workload field, searched with the layout (knobs.py)
}
FIX_NAMES = {
    "tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "dp": "dp", "ep": "ep", "etp": "etp", "mbs": "mbs",
    "sp": "sp", "sequence_parallel": "sp", "recompute": "recompute", "recompute_num_layers": "recompute_num_layers",
    "distributed_optimizer": "dop", "dop": "dop", "first_stage_layers": "first_stage_layers",
    "last_stage_layers": "last_stage_layers", "fsdp": "fsdp", "account_for_embedding": "account_for_embedding",
    "account_for_loss": "account_for_loss", "pipeline_layout": "pipeline_layout", "recompute_modules": "recompute_modules",
    "cpu_offload_layers": "cpu_offload_layers", "optimizer_offload_fraction": "optimizer_offload_fraction",
}
RC_FIELDS = ("recompute", "recompute_num_layers", "recompute_modules", "cpu_offload_layers")
# The split axis: (first_stage_layers, last_stage_layers, account_for_embedding, account_for_loss,
# pipeline_layout) -- the uneven first/last split, Megatron's embedding/loss accounting and the
# --pipeline-model-parallel-layout string are alternatives (TC L2229-2239, L1307-1324; reference/megatron.md
# rule 23), so one axis carries all three; EVEN is the plain even split.
SPLIT_FIELDS = ("first_stage_layers", "last_stage_layers", "account_for_embedding", "account_for_loss",
                "pipeline_layout")
EVEN = (None, None, False, False, None)
# --account-for-embedding/loss-in-pipeline-split (TB L146-203): the embedding, the loss or both count
# as one layer of the first / last stage
ACCOUNTING = ((None, None, True, False, None), (None, None, False, True, None), (None, None, True, True, None))
MAX_MBS = 8
MIN_TOKENS_PER_CP_RANK = 2048
MAX_UNEVEN_SPLITS = 4  # per pipeline size
MAX_VPP = 8
BLOCK_RECOMPUTE = (1, 2, 4, 8, 16)

Point = dict[str, Any]


class PinnedLayout(str):
    """A layout string the user pinned (``--fix pipeline_layout=...``): equal to the plain string
    everywhere, and let through by the canonical split rule at any vpp (the searched strings are
    interleaved only)."""


def rc_fields(rc: tuple) -> dict[str, Any]:
    """Layout fields of an ``rc`` value (``RC_FIELDS``).

    >>> rc_fields(("offload", 40))["cpu_offload_layers"], rc_fields(("selective", ("mlp",)))["recompute_modules"]
    (40, ('mlp',))
    """
    kind, arg = rc
    if kind == "offload":
        return {"recompute": "none", "recompute_num_layers": None, "recompute_modules": None, "cpu_offload_layers": arg}
    if kind == "selective":
        return {"recompute": "selective", "recompute_num_layers": None,
                "recompute_modules": arg or DEFAULT_RECOMPUTE_MODULES, "cpu_offload_layers": 0}
    return {"recompute": kind, "recompute_num_layers": arg, "recompute_modules": None, "cpu_offload_layers": 0}


def layout_rc(layout: Layout) -> tuple:
    """The ``rc`` value of a layout (inverse of ``rc_fields``)."""
    if layout.cpu_offload_layers:
        return ("offload", layout.cpu_offload_layers)
    if layout.recompute == "selective":
        return ("selective", tuple(layout.recompute_modules or DEFAULT_RECOMPUTE_MODULES))
    return (layout.recompute, layout.recompute_num_layers)


def rc_sel(rc: tuple) -> tuple[str, ...]:
    """The selective modules of an ``rc`` value, ``()`` when it is not selective (the derived axis
    ``sel`` of the per-layer cost terms)."""
    return tuple(rc[1] or DEFAULT_RECOMPUTE_MODULES) if rc[0] == "selective" else ()


def point_fields(point: Point) -> dict[str, Any]:
    """Layout field values of a point (the names the rules read)."""
    first, last, account_embedding, account_loss, pipeline_layout = point["split"]
    return {"tp": point["tp"], "cp": point["cp"], "pp": point["pp"], "dp": point["dp"], "mbs": point["mbs"],
            "sequence_parallel": point["sp"], "ep": point["ep"], "etp": point["etp"], "vpp": point["vpp"],
            "first_stage_layers": first, "last_stage_layers": last, "account_for_embedding": account_embedding,
            "account_for_loss": account_loss, "pipeline_layout": pipeline_layout, **rc_fields(point["rc"]),
            "distributed_optimizer": point["dop"], "fsdp": point["fsdp"],
            "optimizer_offload_fraction": point["oo"], "moe_dispatcher": point["disp"]}


def point_layout(point: Point) -> Layout:
    fields = point_fields(point)
    fields.pop("moe_dispatcher")
    return Layout(**fields)


def layout_point(layout: Layout, moe_dispatcher: str = "flex") -> Point:
    return {"disp": moe_dispatcher, "tp": layout.tp, "cp": layout.cp, "pp": layout.pp, "dp": layout.dp, "mbs": layout.mbs,
            "sp": layout.sequence_parallel, "ep": layout.ep, "etp": layout.etp, "vpp": layout.vpp,
            "split": (layout.first_stage_layers, layout.last_stage_layers, layout.account_for_embedding,
                      layout.account_for_loss, layout.pipeline_layout),
            "rc": layout_rc(layout), "dop": layout.distributed_optimizer,
            "fsdp": layout.fsdp, "oo": layout.optimizer_offload_fraction}


def rule_axes(rule: Rule) -> tuple[str, ...]:
    out: list[str] = []
    for name in rule.axes:
        axis = FIELD_AXIS[name]
        if axis not in out:
            out.append(axis)
    return tuple(out)


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Candidate values per axis (after single-axis rules and ``--fix``) and the rule context."""

    ctx: RuleContext
    domains: dict[str, tuple[Any, ...]]
    requires: tuple[Rule, ...] = ()  # the user's --require rules (require.py)

    @property
    def size(self) -> int:
        """Size of the Cartesian product (before multi-axis rules)."""
        size = 1
        for values in self.domains.values():
            size *= len(values)
        return size

    def rules(self) -> list[tuple[Rule, tuple[str, ...]]]:
        """Rules that involve at least one axis, with the axes they read: Megatron's rules, then the
        space's canonical-form rules (one spelling per distinct Megatron configuration)."""
        return [(rule, rule_axes(rule)) for rule in self._all_rules() if rule.axes]

    def _all_rules(self) -> tuple[Rule, ...]:
        return model_rules(self.ctx.spec, self.ctx.workload) + canonical_rules(self.ctx.spec) + self.requires

    def allowed(self, rule: Rule, axes: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """Tuples of ``axes`` values that obey ``rule`` (the rule's allowed-assignment table)."""
        out = []
        for values in itertools.product(*(self.domains[a] for a in axes)):
            point = dict(zip(axes, values))
            if rule.check(self.ctx, _fields_of(point)):
                out.append(values)
        return out

    def legal(self, point: Point) -> bool:
        fields = point_fields(point)
        return all(rule.check(self.ctx, fields) for rule in self._all_rules())


@functools.cache
def canonical_rules(spec: ModelSpec) -> tuple[Rule, ...]:
    """Not Megatron's rules: they keep one spelling of each configuration in the space. An uneven
    split that equals the even one, or block recompute of every layer of every chunk (= uniform full
    recompute), is the same job under another name; block recompute of one layer without pipelining
    saves nothing (its backward re-materialises exactly what it did not store) and only costs time."""

    def split_ok(ctx: RuleContext, a: dict[str, Any]) -> bool:
        if a.get("pipeline_layout") is not None:  # layout_candidates: interleaved only (one chunk per rank is
            # the uneven first/last split, pipeline_splits) but for DSA IndexShare's own strings; a --fix'd string
            # passes at any vpp
            return a["vpp"] > 1 or isinstance(a["pipeline_layout"], PinnedLayout) \
                or a["pipeline_layout"] == index_share_layout(spec, a["pp"])
        if a.get("account_for_embedding") or a.get("account_for_loss"):
            return a["pp"] > 1  # one stage: the accounting moves no layer (the even split, renamed)
        split = (a["first_stage_layers"], a["last_stage_layers"])
        return split in _splits(spec.num_layers, a["pp"]) or split not in _all_splits(spec.num_layers)

    def block_ok(ctx: RuleContext, a: dict[str, Any]) -> bool:
        if a["recompute"] != "full" or a["recompute_num_layers"] is None:
            return True
        counts = split_counts(spec, a["pp"], a["vpp"], a["first_stage_layers"], a["last_stage_layers"],
                              a.get("account_for_embedding", False), a.get("account_for_loss", False),
                              a.get("pipeline_layout"))
        if isinstance(counts, str):
            return True  # the Megatron rules reject it already
        if a["pp"] == 1 and a["recompute_num_layers"] == 1:
            return False  # one micro-batch in flight: re-materialising the layer costs what it saved
        return a["recompute_num_layers"] < max(counts) // a["vpp"]

    def dispatcher_ok(ctx: RuleContext, a: dict[str, Any]) -> bool:
        from megasolve.solver.knobs import disp_class

        default = ctx.workload.moe_dispatcher
        return a["ep"] > 1 or a["etp"] > 1 or a["moe_dispatcher"] in (default, disp_class(default))

    return (
        Rule(name="canonical_dispatcher", axes=("ep", "etp", "moe_dispatcher"), check=dispatcher_ok,
             message=lambda c, a: "without expert parallelism no token leaves the rank: every dispatcher is the "
                                  "same job", fix="leave --moe-dispatcher at its default",
             source="megasolve search space"),
        Rule(name="canonical_split", axes=("pp", "vpp", "first_stage_layers", "last_stage_layers",
                                           "account_for_embedding", "account_for_loss", "pipeline_layout"),
             check=split_ok,
             message=lambda c, a: "this uneven split (or accounting) is the even split (or not a candidate) for this pp",
             fix="leave --first/--last-stage-layers unset", source="megasolve search space"),
        Rule(name="canonical_block_recompute",
             axes=("recompute", "recompute_num_layers", "pp", "vpp") + SPLIT_FIELDS,
             check=block_ok, message=lambda c, a: "block recompute of every layer is uniform full recompute",
             fix="use --recompute full without --recompute-num-layers", source="megasolve search space"),
    )


@functools.lru_cache(maxsize=4096)
def _splits(num_layers: int, pp: int) -> frozenset:
    return frozenset(pipeline_splits(num_layers, pp))


@functools.lru_cache(maxsize=256)
def _all_splits(num_layers: int) -> frozenset:
    return frozenset(s for pp in range(1, num_layers + 1) for s in pipeline_splits(num_layers, pp))


def _fields_of(partial: Point) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for axis, value in partial.items():
        if axis == "split":
            out.update(zip(SPLIT_FIELDS, value))
        elif axis == "rc":
            out.update(rc_fields(value))
        elif axis == "oo":
            out["optimizer_offload_fraction"] = value
        elif axis == "sp":
            out["sequence_parallel"] = value
        elif axis == "dop":
            out["distributed_optimizer"] = value
        elif axis == "disp":
            out["moe_dispatcher"] = value
        else:
            out[axis] = value
    return out


def pipeline_splits(num_layers: int, pp: int, uneven: bool = True) -> list[tuple[int | None, int | None]]:
    """Candidate ``(first, last)`` stage layer counts for ``pp`` stages: the even split when layers divide,
    and splits within three layers below (one above) the middle stages' count that lighten the first
    / last stage (embedding, logits, MTP) or absorb a remainder.

    >>> pipeline_splits(61, 16)
    [(1, 4), (2, 3), (3, 2), (4, 1)]
    >>> pipeline_splits(32, 4)[0]
    (None, None)
    """
    out: list[tuple[int | None, int | None]] = []
    if pp == 1:
        return [(None, None)]
    if num_layers % pp == 0:
        out.append((None, None))
    if not uneven:
        return out
    top = -(-num_layers // pp) + 1
    uneven_splits: list[tuple[int, int]] = []
    for first in range(1, top + 1):
        for last in range(1, top + 1):
            middle = num_layers - first - last
            if pp == 2:
                if middle == 0 and abs(first - last) <= 3 and (first, last) != (num_layers // 2, num_layers // 2):
                    uneven_splits.append((first, last))
                continue
            if middle <= 0 or middle % (pp - 2):
                continue
            per_middle = middle // (pp - 2)
            near = max(first, last) <= per_middle + 1 and min(first, last) >= per_middle - 3
            if near and (num_layers % pp or (first, last) != (per_middle,) * 2):
                uneven_splits.append((first, last))
    # the MAX_UNEVEN_SPLITS closest to balanced (fewest layers moved), in a fixed order
    middle_of = {s: (num_layers - sum(s)) / max(pp - 2, 1) if pp > 2 else num_layers / 2 for s in uneven_splits}
    uneven_splits.sort(key=lambda s: (abs(s[0] - middle_of[s]) + abs(s[1] - middle_of[s]), s))
    return out + sorted(uneven_splits[:MAX_UNEVEN_SPLITS])


def index_share_splits(spec: ModelSpec, pp: int) -> list[tuple[int, int]]:
    """Uneven ``(first, last)`` splits for DSA IndexShare (``DSASpec.topk_freq > 1``), whose every stage must start
    on a layer that runs its indexer (``params.dsa_split_problem``): middle stages a multiple of the frequency near
    ``L / pp`` layers, the first stage ending before a computing layer; the ``MAX_UNEVEN_SPLITS`` most balanced.
    GLM-5.2's recipe (Megatron-Bridge ``perf_recipes/glm_moe_dsa/gb200/glm5.py``: pp 6, first 14, last 16) is one.

    >>> from megasolve.models.presets import load_preset
    >>> (14, 16) in index_share_splits(load_preset("glm-5.2"), 6)
    True
    """
    dsa, L = spec.dsa, spec.num_layers
    if dsa is None or dsa.topk_freq <= 1 or pp == 1:
        return []
    f = dsa.topk_freq
    target = L / pp
    middles = [m for m in range(f, L + 1, f) if abs(m - target) <= f + 1] if pp > 2 else [0]
    out = set()
    for m in middles:
        for first in range(1, L):
            last = L - first - (pp - 2) * m
            if last < 1 or not dsa.computes_topk(first + 1):
                continue
            if max(abs(first - target), abs(last - target)) <= f + 3:
                out.add((first, last))
    return sorted(out, key=lambda s: (abs(s[0] - target) + abs(s[1] - target), s))[:MAX_UNEVEN_SPLITS]


@functools.lru_cache(maxsize=256)
def index_share_layout(spec: ModelSpec, pp: int) -> str | None:
    """For DSA IndexShare, the ``--pipeline-model-parallel-layout`` (one stage per rank) whose stages all start on a
    layer that runs its indexer with the fewest layers on the fullest stage (an exact search over the allowed
    starts), where no first / last split (``index_share_splits``) can keep the rule; None otherwise. Megatron-Bridge
    sets such strings for GLM-5.2 (``model.pipeline_model_parallel_layout='Etttttt|tttttttt|...|ttttmL'``, its
    verification card's PP 11; #5039's PP 16).

    >>> from megasolve.models.presets import load_preset
    >>> index_share_layout(load_preset("glm-5.2"), 16)  # doctest: +NORMALIZE_WHITESPACE
    'Et*6|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4|t*8|t*8|t*8mL'
    """
    dsa, L = spec.dsa, spec.num_layers
    if dsa is None or dsa.topk_freq <= 1 or pp == 1 or index_share_splits(spec, pp) or spec.is_hybrid:
        return None
    starts = [i for i in range(L) if dsa.computes_topk(i + 1)]  # 0-based layers a stage may start on
    if len(starts) < pp:
        return None
    # best[k][j]: the least possible largest stage when stages 0..k cover layers 0..starts[j]-1 and stage k+1
    # starts at starts[j]; exact, by dynamic programming over the allowed starts
    inf = float("inf")
    n = len(starts)
    best = [[inf] * (n + 1) for _ in range(pp)]
    back = [[0] * (n + 1) for _ in range(pp)]
    for j in range(1, n + 1):
        best[0][j] = (starts[j] if j < n else L) - starts[0]
    for k in range(1, pp):
        for j in range(k + 1, n + 1):
            end = starts[j] if j < n else L
            for i in range(k, j):
                cand = max(best[k - 1][i], end - starts[i])
                if cand < best[k][j]:
                    best[k][j], back[k][j] = cand, i
    if best[pp - 1][n] == inf:
        return None
    cuts, j = [], n
    for k in range(pp - 1, 0, -1):
        j = back[k][j]
        cuts.append(starts[j])
    bounds = [0] + sorted(cuts) + [L]
    sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    stages = [f"t*{size}" for size in sizes]
    stages[0] = "E" + stages[0]
    stages[-1] += "m" * spec.mtp_num_layers + "L"
    return "|".join(stages)


@functools.lru_cache(maxsize=1024)
def layout_candidates(spec: ModelSpec, pp: int) -> tuple[str, ...]:
    """``--pipeline-model-parallel-layout`` strings searched for ``pp`` ranks: for each interleaved depth
    ``v >= 2`` whose ``N = pp*v`` virtual stages the decoder layers do not divide, Megatron-Bridge's
    DeepSeek-V3 family (``recipes/deepseek/h100/deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout``):
    the embedding and ``k`` layers on the first virtual stage, ``k`` on each of the next ``N - 2``, the
    remaining ``r = L - k(N-1)`` (``1 <= r < k``) with the MTP layers and the loss on the last, for the
    ``k = ceil(L/N)`` that leaves such an ``r``. Without interleaving the uneven first/last split is the
    same job (``pipeline_splits``); where ``L``, ``L + 1`` or ``L + 2`` divide by ``N``, the even split or an
    accounting variant (embedding and / or loss counted as a layer) balances the stages already.

    >>> from megasolve.models.presets import load_preset
    >>> layout_candidates(load_preset("deepseek-v3"), 4)  # 61 layers + 1 MTP: v 2 (N 8) and v 4 (N 16)
    ('Et*8|(t*8|)*6t*5mL', 'Et*4|(t*4|)*14t*1mL')
    """
    L, mtp = spec.num_layers, "m" * spec.mtp_num_layers
    if pp == 1 or spec.is_hybrid:  # a hybrid stack takes its pattern's '|' segments instead (cli/launch.py)
        return ()
    out = []
    for v in range(2, MAX_VPP + 1):
        n = pp * v
        if v > L // 2 or any((L + extra) % n == 0 for extra in (0, 1, 2)):
            continue  # the even split or an accounting variant divides the layers
        k = -(-L // n)
        r = L - k * (n - 1)
        if 1 <= r < k:
            out.append(f"Et*{k}|(t*{k}|)*{n - 2}t*{r}{mtp}L")
    return tuple(out)


def refusal(ctx: RuleContext) -> MegasolveError | None:
    """The error of a rule on no axis (GPU vs precision, sequence vs position embeddings, ...) that the
    model, GPU and workload break: it refuses every layout on every cluster size."""
    for rule in model_rules(ctx.spec, ctx.workload):
        if not rule.axes and not rule.check(ctx, {}):
            return rule_error(Violation(rule.name, rule.message(ctx, {}), rule.fix, rule.source), None, ctx.workload)
    return None


def build_space(spec: ModelSpec, cluster: Cluster, workload: Workload, *, fixed: dict[str, Any] | None = None,
                allow_cross_domain_tp: bool = False, uneven_splits: bool = True,
                block_recompute: Iterable[int] = BLOCK_RECOMPUTE, requires: Iterable[str] = (),
                knobs: Iterable[str] = ()) -> SearchSpace:
    """Candidate values per axis for ``spec`` on ``cluster`` (``fixed``: ``--fix`` pins, Layout field names;
    ``requires``: ``--require`` expressions, compiled into rules by ``require.py``; ``knobs``: the
    searched communication knobs, ``knobs.py`` -- with ``moe_dispatcher`` the ``disp`` axis holds every
    dispatcher the workload allows)."""
    from megasolve.solver.require import compile_requirements

    extra = compile_requirements(tuple(requires))
    fixed = dict(fixed or {})
    unknown = set(fixed) - set(FIX_NAMES)
    if unknown:
        name = sorted(unknown)[0]
        raise MegasolveError(field="--fix", value=f"{name}={fixed[name]}", rule="unknown axis",
                             fix=f"pin one of {', '.join(sorted(set(FIX_NAMES)))}")
    fixed = {FIX_NAMES[k]: v for k, v in fixed.items()}
    ctx = RuleContext(spec=spec, cluster=cluster, workload=workload, allow_cross_domain_tp=allow_cross_domain_tp)
    refused = refusal(ctx)
    if refused is not None:
        raise refused
    n = cluster.num_gpus
    L = spec.num_layers
    powers = [d for d in divisors(n)]
    domains: dict[str, tuple[Any, ...]] = {
        "tp": tuple(d for d in powers if d <= max(cluster.nvlink_domain, 8) or allow_cross_domain_tp),
        # at least MIN_TOKENS_PER_CP_RANK tokens of each sequence per CP rank (CP is for long sequences)
        "cp": tuple(d for d in powers if d <= max(1, workload.seq_length // MIN_TOKENS_PER_CP_RANK)),
        "pp": tuple(d for d in powers if d <= L),
        "dp": tuple(powers),
        "mbs": tuple(b for b in (1, 2, 4, 8) if b <= MAX_MBS and workload.global_batch_size % b == 0),
        "sp": (False, True),
        "dop": (True, False),
        # Megatron-FSDP (weights, grads and optimizer sharded over DP x CP, two layers gathered at a
        # time) or the distributed optimizer (models/layout.py; cost/memory.py fsdp_static_bytes,
        # cost/step.py fsdp_microbatch_comm_s)
        "fsdp": (False, True),
    }
    if spec.is_moe:
        domains["ep"] = tuple(d for d in divisors(spec.moe.num_experts) if n % d == 0)
        domains["etp"] = tuple(d for d in powers if d <= max(cluster.nvlink_domain, 8)
                               and spec.moe.expert_ffn_hidden_size % d == 0)
    else:
        domains["ep"] = (1,)
        domains["etp"] = domains["tp"]
    splits: list[tuple] = []
    for pp in domains["pp"]:
        shared = index_share_splits(spec, pp) if uneven_splits else []
        for split in pipeline_splits(L, pp, uneven_splits) + shared:
            if split + (False, False, None) not in splits:
                splits.append(split + (False, False, None))
    # the accounting variants: which pp (and vpp) they suit is Megatron's rule (rules.py split_counts)
    pinned = fixed.get("account_for_embedding") is True or fixed.get("account_for_loss") is True
    splits += [a for a in ACCOUNTING if uneven_splits or pinned]
    if uneven_splits:  # layout strings for interleaved pipelines the splits above cannot balance (and DSA
        # IndexShare's one-stage-per-rank strings where no first / last split keeps its rule)
        texts = dict.fromkeys(text for pp in domains["pp"]
                              for text in layout_candidates(spec, pp) + tuple(filter(None, [index_share_layout(spec, pp)])))
        splits += [(None, None, False, False, text) for text in texts]
    domains["split"] = tuple(splits)
    max_chunk = L
    domains["vpp"] = tuple(v for v in range(1, MAX_VPP + 1) if v <= L // 2 or v == 1)
    # selective recompute: the dominance-pruned ladder of module sets (cost/recompute.py module_ladder)
    from megasolve.cost.recompute_search import module_ladder

    rc: list[tuple] = [("none", None)] + [("selective", m) for m in module_ladder(spec, cluster, workload)]
    rc += [("full", None)] + [("full", r) for r in block_recompute if r < max_chunk]
    rc += [("offload", k) for k in offload_counts(L)]
    domains["rc"] = tuple(rc)
    # optimizer CPU offload fractions (cost/offload.py); Megatron's rules and the memory decide
    domains["oo"] = OPTIMIZER_OFFLOAD_FRACTIONS
    domains["disp"] = (workload.moe_dispatcher,)
    if spec.is_moe and "moe_dispatcher" in set(knobs):
        from megasolve.solver.knobs import dispatchers

        domains["disp"] = dispatchers(workload)
    # --fix pins
    for axis in ("tp", "cp", "pp", "dp", "mbs", "ep", "etp", "vpp"):
        if axis in fixed:
            domains[axis] = (_as_int(axis, fixed[axis]),)
    if "sp" in fixed:
        domains["sp"] = (_as_bool("sequence_parallel", fixed["sp"]),)
    if "dop" in fixed:
        domains["dop"] = (_as_bool("distributed_optimizer", fixed["dop"]),)
    if "fsdp" in fixed:
        domains["fsdp"] = (_as_bool("fsdp", fixed["fsdp"]),)
    if "optimizer_offload_fraction" in fixed:
        domains["oo"] = (_as_fraction("optimizer_offload_fraction", fixed["optimizer_offload_fraction"]),)
    if any(name in fixed for name in RC_FIELDS):
        domains["rc"] = _fixed_rc(domains["rc"], fixed)
    if "first_stage_layers" in fixed or "last_stage_layers" in fixed:
        first = _opt_int("first_stage_layers", fixed.get("first_stage_layers"))
        last = _opt_int("last_stage_layers", fixed.get("last_stage_layers"))
        domains["split"] = ((first, last, False, False, None),)
    if "pipeline_layout" in fixed:
        if "first_stage_layers" in fixed or "last_stage_layers" in fixed:
            raise MegasolveError(field="--fix", value=f"pipeline_layout={fixed['pipeline_layout']}",
                                 rule="a layout string replaces the first/last stage layer counts (TC L1307-1324)",
                                 fix="pin pipeline_layout or first/last_stage_layers, not both")
        text = None if fixed["pipeline_layout"] in (None, "none") else str(fixed["pipeline_layout"])
        if text is not None:  # Megatron's own rules on the string now (one line naming what is wrong)
            from megasolve.models.pipeline_layout import expand, parse

            parse(text, pp=len(expand(text)), num_layers=L, mtp_num_layers=spec.mtp_num_layers)
        domains["split"] = ((None, None, False, False, None if text is None else PinnedLayout(text)),)
    for name in ("account_for_embedding", "account_for_loss"):  # pins on the accounting flags
        if name in fixed:
            on = _as_bool(name, fixed[name])
            if on and ("first_stage_layers" in fixed or "last_stage_layers" in fixed):
                raise MegasolveError(field="--fix", value=f"{name}=true",
                                     rule="the embedding/loss accounting does not combine with an uneven "
                                          "first/last stage (transformer_block.py L104-112)",
                                     fix="pin first/last_stage_layers or the accounting, not both")
            at = SPLIT_FIELDS.index(name)
            domains["split"] = tuple(sp for sp in domains["split"] if sp[at] == on)
    # Dominated values are left out unless pinned: without the distributed optimizer a layout needs
    # more memory and moves more DP bytes (all-reduce vs reduce-scatter + all-gather) for nothing;
    # selective core-attention recompute with fused attention costs time and saves only the LSE --
    # Megatron itself warns it is pointless (TC L1983-1989): module_ladder leaves it out.
    if "dop" not in fixed:
        domains["dop"] = (True,)
    # single-axis rules prune each domain once
    emptied_by: dict[str, str] = {}  # the rule that removed an axis's last value(s), as its message says
    for rule, axes in ((r, a) for r, a in SearchSpace(ctx=ctx, domains=domains, requires=extra).rules()
                       if len(a) == 1):
        axis = axes[0]
        kept = tuple(v for v in domains[axis] if rule.check(ctx, _fields_of({axis: v})))
        if not kept and domains[axis]:
            emptied_by.setdefault(axis, f"{rule.message(ctx, _fields_of({axis: domains[axis][0]}))} ({rule.source})")
        domains[axis] = kept
    for axis in AXES:
        if not domains[axis]:
            why = emptied_by.get(axis)
            raise MegasolveError(field="--fix" if _fixed_axis(axis, fixed) else axis, value=_fixed_value(axis, fixed),
                                 rule=why or f"no value of {axis} is allowed by Megatron's rules (and --require) "
                                             "for this model/cluster",
                                 fix="relax --fix or change the cluster")
    return SearchSpace(ctx=ctx, domains={a: domains[a] for a in AXES}, requires=extra)


def offload_counts(num_layers: int) -> tuple[int, ...]:
    """Activation-offload layer counts searched: multiples of an eighth of the layers, below the layer
    count (``cpu_offloading_num_layers < num_layers``, TC L1884-1889); ``--fix cpu_offload_layers=N``
    pins any other.

    >>> offload_counts(80), offload_counts(4)
    ((10, 20, 30, 40, 50, 60, 70), (1, 2, 3))
    """
    step = max(1, num_layers // 8)
    return tuple(range(step, num_layers, step))


def _fixed_rc(options: tuple, fixed: dict[str, Any]) -> tuple:
    """The ``rc`` values left by ``--fix`` pins on recompute, recompute_num_layers, recompute_modules
    and cpu_offload_layers (each pin keeps the values whose fields equal it; a pinned value that is
    not a candidate is added)."""
    from megasolve.models.layout import RECOMPUTE_KINDS

    kind = fixed.get("recompute")
    if kind is not None and kind not in RECOMPUTE_KINDS:
        raise MegasolveError(field="--fix", value=f"recompute={kind}", rule="must be none, selective or full",
                             fix="e.g. --fix recompute=full")
    pins: dict[str, Any] = {}
    if kind is not None:
        pins["recompute"] = kind
    if "recompute_num_layers" in fixed:
        pins["recompute_num_layers"] = _opt_int("recompute_num_layers", fixed["recompute_num_layers"])
    if "cpu_offload_layers" in fixed:
        value = fixed["cpu_offload_layers"]
        pins["cpu_offload_layers"] = 0 if value in (0, None) else _as_int("cpu_offload_layers", value)
    if "recompute_modules" in fixed:
        pins["recompute_modules"] = _as_modules(fixed["recompute_modules"])
        pins.setdefault("recompute", "selective")
    extra = []
    if pins.get("recompute_modules"):
        extra.append(("selective", pins["recompute_modules"]))
    if pins.get("recompute_num_layers") is not None and pins.get("recompute") in (None, "full"):
        extra.append(("full", pins["recompute_num_layers"]))
    if pins.get("cpu_offload_layers"):
        extra.append(("offload", pins["cpu_offload_layers"]))
    if pins.get("recompute") == "selective" and "recompute_modules" not in pins:
        extra.append(("selective", DEFAULT_RECOMPUTE_MODULES))  # Megatron's default set, beside the ladder
    out = []
    for rc in tuple(options) + tuple(extra):
        fields = rc_fields(rc)
        if rc not in out and all(fields[k] == v for k, v in pins.items()):
            out.append(rc)
    return tuple(out)


def _as_modules(value: Any) -> tuple[str, ...]:
    """A ``--fix recompute_modules=a+b`` value (``cli`` splits it) as Megatron's canonical tuple."""
    from megasolve.models.layout import Layout

    modules = tuple(value) if isinstance(value, (tuple, list)) else tuple(str(value).replace("+", ",").split(","))
    try:
        return Layout(recompute="selective", recompute_modules=modules).recompute_modules
    except MegasolveError as err:
        raise MegasolveError(field="--fix", value=f"recompute_modules={'+'.join(modules)}", rule=err.rule,
                             fix="e.g. --fix recompute_modules=moe_act+layernorm") from None


def _as_fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise MegasolveError(field="--fix", value=f"{name}={value}", rule="must be a number in [0, 1]",
                             fix=f"e.g. --fix {name}=0.5")
    return float(value)


def _fixed_axis(axis: str, fixed: dict[str, Any]) -> bool:
    names = {"split": SPLIT_FIELDS, "rc": RC_FIELDS, "oo": ("optimizer_offload_fraction",)}
    return any(name in fixed for name in names.get(axis, (axis,)))


def _fixed_value(axis: str, fixed: dict[str, Any]) -> Any:
    pins = [f"{k}={v}" for k, v in fixed.items() if _fixed_axis(axis, {k: v})]
    return ",".join(pins) or "(none left)"


def _as_int(name: str, value: Any) -> int:
    """A ``--fix`` value that must be a positive integer (``cli.solve_cmd.parse_fix`` turns text into it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MegasolveError(field="--fix", value=f"{name}={value}", rule="must be an integer",
                             fix=f"e.g. --fix {name}=2")
    if value <= 0:
        raise MegasolveError(field="--fix", value=f"{name}={value}", rule="must be >= 1", fix=f"e.g. --fix {name}=2")
    return value


def _opt_int(name: str, value: Any) -> int | None:
    return None if value is None else _as_int(name, value)


def _as_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise MegasolveError(field="--fix", value=f"{name}={value}", rule="must be true or false",
                             fix=f"e.g. --fix {name}=true")
    return value
