"""Load ``calibration.yaml`` (efficiency factors with provenance), once, explicitly."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml


@functools.cache
def calibration() -> dict[str, Any]:
    text = resources.files("megasolve.cost").joinpath("calibration.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)
