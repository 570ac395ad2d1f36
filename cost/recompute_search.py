"""The selective recompute module sets ``solve`` searches (``module_ladder``). Apart from
``cost/recompute.py`` because ranking the modules needs the step-time model (``cost/step.py``), which
itself imports ``recompute.py``."""

from __future__ import annotations

from megasolve.cost.memory import ActivationShape, layer_activation_bytes
from megasolve.cost.recompute import module_problem
from megasolve.cost.step import layer_time
from megasolve.models.layout import RECOMPUTE_MODULE_NAMES, Workload
from megasolve.models.spec import ModelSpec


# At most this many module sets are searched (the cheapest prefixes of the ladder): each rung is one
# more value of the per-layer time terms' ``sel`` axis; 5 rungs put DeepSeek-V3 @ 1,024 H100 at 2.4 s
# of CPU, 3 at 2.0 s (benchmarks/solver_benchmark.py's 2 s budget); deeper sets: --fix recompute_modules
MAX_LADDER = 3


def module_ladder(spec: ModelSpec, cluster, workload: Workload) -> tuple[tuple[str, ...], ...]:
    """The selective module sets ``solve`` searches: a dominance-pruned ladder.

    Every usable module (``module_problem`` None) that drops something for this model is ranked by
    its extra seconds per byte saved, both summed over the model's layers at a reference shape (tp 1,
    cp 1, mbs 1, no SP: both sides scale alike with the tokens per rank, so the order hardly moves with
    the layout); the ladder is the prefixes of that order -- a set that recomputes an expensive
    module but skips a cheaper one per byte is dominated (more time for less memory) by a prefix.
    core_attn with flash attention is left out: it keeps more than it drops (``memory.
    core_attention_checkpoint_inputs_bytes``; Megatron warns, TC L1983-1989). Each set is written as
    Megatron's modules in canonical order (``layout.RECOMPUTE_MODULE_NAMES``), ``moe`` absorbing
    moe_act and shared_experts (it checkpoints them itself).

    >>> from megasolve.models.presets import load_preset
    >>> from megasolve.topology.cluster import Cluster
    >>> module_ladder(load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100"), Workload())
    (('mlp',),)
    """
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    kinds = {moe: sum(1 for i in range(spec.num_layers) if spec.is_moe_layer(i) == moe) for moe in (False, True)}
    scored = []
    for module in RECOMPUTE_MODULE_NAMES:
        if module_problem(spec, workload, module) or (module == "core_attn" and workload.attention == "flash"):
            continue
        saved = cost = 0.0
        for moe, count in kinds.items():
            if not count:
                continue
            none = layer_activation_bytes(spec, workload, shape, moe=moe, recompute="none")
            sel = layer_activation_bytes(spec, workload, shape, moe=moe, recompute="selective",
                                         recompute_modules=(module,))
            base = layer_time(spec, cluster, workload, shape, ep=1, moe=moe, recompute="none").total
            extra = layer_time(spec, cluster, workload, shape, ep=1, moe=moe, recompute="selective",
                               recompute_modules=(module,)).total
            saved += count * (none - sel)
            cost += count * max(0.0, extra - base)
        if saved > 0:
            scored.append((cost / saved, RECOMPUTE_MODULE_NAMES.index(module), module))
    ladder: list[tuple[str, ...]] = []
    chosen: list[str] = []
    for _, _, module in sorted(scored):
        chosen.append(module)
        modules = set(chosen)
        if "moe" in modules:
            modules -= {"moe_act", "shared_experts"}
        spelled = tuple(m for m in RECOMPUTE_MODULE_NAMES if m in modules)
        if spelled not in ladder:
            ladder.append(spelled)
    return tuple(ladder[:MAX_LADDER])
