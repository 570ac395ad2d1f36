"""Imports go one way: models, topology -> cost -> solver -> cli (DESIGN.md section 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ORDER = {"models": 0, "topology": 0, "cost": 1, "solver": 2, "cli": 3, "web": 3}  # web: `megasolve serve`
BANNED = {
    "models": {"ortools", "click", "rich", "transformers", "networkx"},
    "topology": {"ortools", "click", "rich", "transformers"},
    "cost": {"ortools", "click", "rich", "transformers"},
    "solver": {"click", "rich", "transformers"},
}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", list(ORDER))
def test_imports_only_go_down(package):
    for path in (ROOT / package).glob("*.py"):
        for name in imports(path):
            top = name.split(".")[0]
            if top == "megasolve":
                target = name.split(".")[1]
                assert ORDER[target] <= ORDER[package], f"{path.name} imports {name}"
                if package == "topology":
                    assert target in ("models", "topology"), f"{path.name} imports {name}"
            assert top not in BANNED.get(package, set()), f"{path.name} imports {name}"
