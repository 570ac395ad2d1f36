"""Shared fixtures. Tests run offline on a 2-core machine without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from megasolve.models.presets import load_preset

DATA = Path(__file__).parent / "data"


@pytest.fixture
def llama8b():
    return load_preset("llama-3.1-8b")


@pytest.fixture
def deepseek_v3():
    return load_preset("deepseek-v3")
