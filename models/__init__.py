"""Model architecture: presets, config loaders, exact per-rank parameter counts."""

from megasolve.models.errors import ConfigError, MegasolveError, UnknownNameError
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import StageParams, stage_params, total_params
from megasolve.models.presets import ResolvedModel, load_preset, preset_names, resolve_model
from megasolve.models.spec import MLASpec, MoESpec, ModelSpec

__all__ = [
    "ConfigError", "Layout", "MLASpec", "MegasolveError", "MoESpec", "ModelSpec", "ResolvedModel",
    "StageParams", "UnknownNameError", "Workload", "load_preset", "preset_names", "resolve_model",
    "stage_params", "total_params",
]
