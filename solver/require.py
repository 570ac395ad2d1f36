"""``--require``: a team's own rules over the layout axes, as a small expression language.

    tp*cp <= 8          ep >= 8          cp > 1 -> tp > 1 and sp          recompute != "full"

Grammar: Python's expression syntax restricted to integer / string / boolean constants, the axis
names of ``NAMES``, ``+ - * // / %``, comparisons (chains too), ``and``, ``or``, ``not``,
parentheses, and ``A -> B`` (implication, lowest precedence, right-associative: ``not A or B``).
The text is parsed with ``ast.parse`` and every node is checked against a whitelist, then evaluated
by the small interpreter below: never ``eval``. Each expression becomes a ``Rule`` over the axes it
names, so it joins Megatron's rules everywhere they are used: the CP-SAT model (an
allowed-assignment table over those axes), the exhaustive oracle (checked per layout) and the
configuration bounds.

>>> rule = compile_requirement("cp > 1 -> tp > 1")
>>> rule.axes, rule.check(None, {"cp": 2, "tp": 1}), rule.check(None, {"cp": 1, "tp": 1})
(('cp', 'tp'), False, True)
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from megasolve.models.errors import MegasolveError
from megasolve.solver.rules import Rule

# expression name -> Layout field (what a Rule reads)
NAMES = {
    "tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "dp": "dp", "ep": "ep", "etp": "etp", "mbs": "mbs",
    "sp": "sequence_parallel", "sequence_parallel": "sequence_parallel",
    "dop": "distributed_optimizer", "distributed_optimizer": "distributed_optimizer", "fsdp": "fsdp",
    "recompute": "recompute", "recompute_num_layers": "recompute_num_layers",
    "first_stage_layers": "first_stage_layers", "last_stage_layers": "last_stage_layers",
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
_FIX = 'e.g. --require "tp*cp <= 8" or --require "cp > 1 -> tp > 1"'


def _error(text: str, rule: str) -> MegasolveError:
    return MegasolveError(field="--require", value=repr(text), rule=rule, fix=_FIX)


def _check_node(node: ast.AST, text: str) -> None:
    """Raise unless every node of the tree is in the whitelist."""
    if isinstance(node, ast.Expression):
        return _check_node(node.body, text)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, (ast.And, ast.Or)):
        for value in node.values:
            _check_node(value, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        _check_node(node.operand, text)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check_node(node.left, text)
        _check_node(node.right, text)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for part in [node.left, *node.comparators]:
            _check_node(part, text)
    elif isinstance(node, ast.Name):
        if node.id not in NAMES and node.id not in ("true", "false", "none"):
            raise _error(text, f"unknown name {node.id!r}; use {', '.join(sorted(NAMES))}")
    elif isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, str)) or node.value is None:
            raise _error(text, f"constant {node.value!r} is not an integer, a string or True/False")
    else:
        raise _error(text, f"{type(node).__name__} is not allowed (only arithmetic, comparisons, and, or, "
                           "not, ->)")


def _evaluate(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.BoolOp):
        results = (_evaluate(v, values) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, values)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, values)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, values)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        if node.id in ("true", "false", "none"):
            return {"true": True, "false": False, "none": None}[node.id]
        return values[NAMES[node.id]]
    return node.value  # ast.Constant (whitelisted)


def _parse(text: str) -> list[ast.Expression]:
    """The parts of ``A -> B -> C``, each a checked expression tree."""
    parts = [part.strip() for part in text.split("->")]
    if not text.strip() or any(not part for part in parts):
        raise _error(text, "empty expression or a '->' without both sides")
    trees = []
    for part in parts:
        try:
            tree = ast.parse(part, mode="eval")
        except SyntaxError as exc:
            raise _error(text, f"cannot parse {part!r} ({exc.msg})") from None
        _check_node(tree, text)
        if not isinstance(tree.body, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Name)) or (
                isinstance(tree.body, ast.UnaryOp) and not isinstance(tree.body.op, ast.Not)):
            raise _error(text, f"{part!r} is not a condition (compare with <, <=, ==, !=, >=, >)")
        trees.append(tree)
    return trees


def _names(trees: list[ast.Expression]) -> tuple[str, ...]:
    out: list[str] = []
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in NAMES and NAMES[node.id] not in out:
                out.append(NAMES[node.id])
    return tuple(out)


def compile_requirement(text: str) -> Rule:
    """One ``--require`` expression as a ``Rule`` over the Layout fields it names. Raises
    ``MegasolveError`` (one line) on anything outside the grammar."""
    trees = _parse(text)
    axes = _names(trees)
    if not axes:
        raise _error(text, "names no layout axis")

    def check(ctx: Any, fields: dict[str, Any]) -> bool:
        try:
            results = [bool(_evaluate(tree, fields)) for tree in trees]
        except (ZeroDivisionError, TypeError):
            return False  # e.g. tp // (cp - 1) at cp = 1, or a number compared with a string
        holds = results[-1]
        for premise in reversed(results[:-1]):  # A -> (B -> C)
            holds = (not premise) or holds
        return holds

    return Rule(name=f"require: {text.strip()}", axes=axes, check=check,
                message=lambda ctx, a: f"the layout breaks the team rule {text.strip()!r}",
                fix="drop or relax --require", source="--require")


def compile_requirements(texts: tuple[str, ...] | list[str]) -> tuple[Rule, ...]:
    return tuple(compile_requirement(t) for t in texts)
