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


def _module_graph() -> dict[str, set[str]]:
    """megasolve module -> the megasolve modules it imports, at module level or inside functions."""
    graph: dict[str, set[str]] = {}
    for package in ORDER:
        for path in (ROOT / package).glob("*.py"):
            name = f"megasolve.{package}.{path.stem}"
            graph[name] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megasolve."):
                    targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names if a.name.startswith("megasolve.")]
                else:
                    continue
                graph[name] |= {t for t in targets if t != name}
    return {name: {t for t in targets if t in graph} for name, targets in graph.items()}


def test_no_import_cycles_even_through_function_level_imports():
    """A cycle hidden in function-level imports (solve -> explain -> whatif -> solve) still couples
    the modules; the graph of every import must be acyclic."""
    graph = _module_graph()
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycle = trail[trail.index(target):] + [target] if target in trail else [node, target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, trail + [target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
