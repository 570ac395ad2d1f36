"""The Python API behind the commands, for notebooks and scripts.

>>> from megasolve.solver import Cluster, Workload, load_model, solve, estimate, whatif  # doctest: +SKIP
>>> spec = load_model("llama-3.1-8b")                                                    # doctest: +SKIP
>>> result = solve(spec, Cluster.from_flags(num_gpus=16, gpu="h100"), Workload(seq_length=4096,
...                global_batch_size=256), top_k=3)                                   # doctest: +SKIP

``read_runs(path)`` -> ``[Run]`` (training logs, launch scripts, runs files); ``calibrate(runs)`` ->
``Profile`` (pass it as ``profile=`` to ``estimate``, ``solve``, ``whatif``); ``check(run, profile)`` ->
prediction vs measurement. ``solve`` -> ``SolveResult`` (``.layouts``: costed ``LayoutReport`` s, ``.as_dict()``: the JSON of
``megasolve solve``); ``estimate`` -> ``LayoutReport`` (``.as_dict()``: the JSON of ``megasolve
estimate``); ``whatif`` -> ``WhatIfResult`` (``.as_dict()``: the JSON of ``megasolve whatif``).

The names are bound here, eagerly, on purpose: ``solve``, ``whatif`` and ``calibrate`` are also submodule
names, and a lazy ``__getattr__`` would hand out the module once anything imported the submodule. None of
these modules imports ortools at import time (CP-SAT is imported when a search runs). The log readers'
names (``read_runs``, ``Run``, ``Measured``: no submodule is called that) load with their first use, so
that a solve does not compile the readers' patterns (~140 ms).
"""

from megasolve.cost.calibration import Profile, load_profile
from megasolve.models.layout import Layout, Workload
from megasolve.models.spec import ModelSpec
from megasolve.solver.api import LayoutReport, estimate
from megasolve.solver.calibrate import calibrate, check
from megasolve.solver.solve import SolveResult, solve
from megasolve.solver.whatif import ClusterKind, WhatIfResult, whatif
from megasolve.topology.cluster import Cluster


_READERS = ("Measured", "Run", "read_runs")


def __getattr__(name: str):
    if name in _READERS:
        from megasolve.solver import runs

        return getattr(runs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_model(ref: str) -> ModelSpec:
    """A model by preset name, preset HF id, config.json path or Megatron-argument YAML (``--model``)."""
    from megasolve.models.presets import resolve_model

    return resolve_model(ref).spec


__all__ = ["Cluster", "ClusterKind", "Layout", "LayoutReport", "Measured", "ModelSpec", "Profile", "Run", "SolveResult",
           "WhatIfResult", "Workload", "calibrate", "check", "estimate", "load_model", "load_profile", "read_runs",
           "solve", "whatif"]
