"""Every docstring example of the cost model, the model readers, the solver and the topology runs (their
numbers are the documentation of each formula: a stale one misleads whoever reads it)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("cost", "models", "solver", "topology")
MODULES = sorted(f"megasolve.{pkg}.{info.name}" for pkg in PACKAGES
                 for info in pkgutil.iter_modules(importlib.import_module(f"megasolve.{pkg}").__path__))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} fail"


def test_the_modules_were_found():
    assert "megasolve.cost.combine" in MODULES and "megasolve.solver.rules" in MODULES
