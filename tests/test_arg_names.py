"""``--arg NAME=VALUE`` on ``check`` / ``calibrate``: every name the readers look up is known, and a name they do not
look up is said (a note, or an error where it is a typo of one they do) instead of silently changing nothing.

``RUN_ARG_NAMES`` (solver/runs.py) is a written list; the scan below finds every lookup of a run's arguments in that
module's source (``args.get("x")``, ``args["x"]``, ``"x" in args``, ``f(args, "x")``, and loops over constant names
whose variable keys a lookup) and holds the list to it, so a new lookup cannot leave its name out.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from _cli import exit_code as _cli

from megasolve.models.errors import MegasolveError
from megasolve.solver import runs
from megasolve.solver.runs import MODEL_ARG_NAMES, RUN_ARG_NAMES, arg_notes, read_runs, run_from_log

ARG_DICTS = {"args", "model_args"}  # the names runs.py gives a run's argument dict


def _strings(node: ast.AST, consts: dict[str, set[str]]) -> set[str] | None:
    """The strings a constant expression holds (a literal, a tuple / list / set of them, a module constant, a sum)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        parts = [_strings(e, consts) for e in node.elts]
        return None if any(p is None for p in parts) else set().union(*parts)
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
        left, right = _strings(node.left, consts), _strings(node.right, consts)
        return None if left is None or right is None else left | right
    return None


def _key(node: ast.AST) -> ast.AST | None:
    """The key of a lookup in a run's arguments, or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in ("get", "pop", "setdefault") and isinstance(node.func.value, ast.Name) \
            and node.func.value.id in ARG_DICTS and node.args:
        return node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ARG_DICTS:
        return node.slice
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
            and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id in ARG_DICTS:
        return node.left
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1 \
            and isinstance(node.args[0], ast.Name) and node.args[0].id in ARG_DICTS:
        return node.args[1]
    return None


def _columns(it: ast.AST, consts: dict[str, set[str]], dicts: dict[str, tuple[set[str], set[str]]],
             width: int) -> list[set[str]] | None:
    """The strings each position of a ``for a, b in IT`` loop takes, IT a constant tuple of tuples or a constant
    dict's ``.items()``; None where IT is neither."""
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items" \
            and isinstance(it.func.value, ast.Name) and it.func.value.id in dicts and width == 2:
        return list(dicts[it.func.value.id])
    if isinstance(it, (ast.Tuple, ast.List)) and it.elts and all(
            isinstance(e, ast.Tuple) and len(e.elts) == width for e in it.elts):
        columns = [set() for _ in range(width)]
        for e in it.elts:
            for i, part in enumerate(e.elts):
                columns[i] |= _strings(part, consts) or set()
        return columns
    return None


def _loop_names(target: ast.AST, it: ast.AST, consts: dict[str, set[str]],
                dicts: dict[str, tuple[set[str], set[str]]]) -> dict[str, set[str]]:
    """Loop variable -> the constant names it takes (a plain target over constant names, a dict's keys or values,
    or a tuple target over a constant tuple of tuples / a dict's items)."""
    if isinstance(target, ast.Name):
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("keys", "values") \
                and isinstance(it.func.value, ast.Name) and it.func.value.id in dicts:
            return {target.id: dicts[it.func.value.id][it.func.attr == "values"]}
        if isinstance(it, ast.Name) and it.id in dicts:
            return {target.id: dicts[it.id][0]}
        found = _strings(it, consts)
        return {target.id: found} if found is not None else {}
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        columns = _columns(it, consts, dicts, len(target.elts))
        return {e.id: col for e, col in zip(target.elts, columns)} if columns else {}
    return {}


def names_looked_up(source: str) -> set[str]:
    tree = ast.parse(source)
    consts: dict[str, set[str]] = {}
    dicts: dict[str, tuple[set[str], set[str]]] = {}  # constant dicts of names: (keys, values)
    for stmt in tree.body:  # module constants that are collections of names (LAYOUT_ARGS, SHAPE_KEYS, ...)
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                    and value.func.id in ("frozenset", "set", "tuple") and value.args:
                value = value.args[0]
            if (found := _strings(value, consts)) is not None:
                consts[stmt.targets[0].id] = found
            elif isinstance(value, ast.Dict) and None not in value.keys:
                keys = [_strings(k, consts) for k in value.keys]
                values = [_strings(v, consts) for v in value.values]
                if all(k is not None for k in keys):
                    dicts[stmt.targets[0].id] = (set().union(*keys),
                                                 set().union(*(v for v in values if v is not None)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if (key := _key(node)) is not None and (found := _strings(key, consts)) is not None:
            names |= found
        if isinstance(node, ast.For):
            loops = [(node.target, node.iter)]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            loops = [(g.target, g.iter) for g in node.generators]
        else:
            continue
        for target, it in loops:  # a lookup keyed by a loop variable reads the names the variable takes
            for variable, found in _loop_names(target, it, consts, dicts).items():
                if any(isinstance(k := _key(n), ast.Name) and k.id == variable for n in ast.walk(node)):
                    names |= found
    return names


def test_run_arg_names_are_every_name_the_readers_look_up():
    looked_up = {n for n in names_looked_up(Path(runs.__file__).read_text()) if not n.startswith("_")}
    assert looked_up - MODEL_ARG_NAMES == RUN_ARG_NAMES, (
        f"missing from RUN_ARG_NAMES: {sorted(looked_up - MODEL_ARG_NAMES - RUN_ARG_NAMES)}; "
        f"no longer looked up: {sorted(RUN_ARG_NAMES - looked_up)}")
    assert len(RUN_ARG_NAMES) > 100
    assert {"tensor_model_parallel_size", "micro_batch_size", "fp8_format", "tp_comm_overlap"} <= RUN_ARG_NAMES


def test_the_scan_finds_each_kind_of_lookup():
    source = '''
NAMES = ("a_in_const", "b_in_const")
def f(args, model_args):
    args.get("by_get"); args["by_index"]; "by_in" in args; _int(args, "by_helper", 1)
    any(k in args for k in NAMES); [model_args.get(k) for k in ("c_loop",)]
    for key in ("d_loop",):
        args.setdefault(key, 1)
    for unrelated in ("not_a_lookup",):
        print(unrelated)
    for arg, field in (("e_pair", "not_read"), ("f_pair", "not_read_either")):
        work[field] = args.get(arg)
    for printed, name in PRINTED.items():
        args.setdefault(name, 1)
PRINTED = {"printed words": "g_value"}
'''
    assert names_looked_up(source) == {"by_get", "by_index", "by_in", "by_helper", "a_in_const", "b_in_const",
                                       "c_loop", "d_loop", "e_pair", "f_pair", "g_value"}


def test_arg_notes_say_what_changes_nothing():
    assert arg_notes({"tensor-model-parallel-size": "2", "--micro-batch-size": "1", "num-key-value-heads": "8",
                      "num_layers": "4"}) == []  # read (the last two under an alias / as a model key)
    notes = arg_notes({"lr": "1e-4", "rotary-base": "500000"})
    assert notes == ["--arg lr=1e-4: a Megatron-LM option megasolve does not model (it changes nothing in the "
                     "estimate)",
                     "--arg rotary-base=500000: rotary_base changes no parameter, FLOP or byte that megasolve models"]
    with pytest.raises(MegasolveError, match="did you mean tensor-model-parallel-size"):
        arg_notes({"tensor-model-paralel-size": "2"})


LOG = "".join(f" iteration {i:8d}/    1000 | consumed samples: {64 * i:12d} | "
              f"elapsed time per iteration (ms): 1200.5 | "
              f"learning rate: 1.0E-04 | global batch size:    64 | lm loss: 5.0E+00 |\n" for i in (10, 20, 30))


def test_a_log_run_carries_the_note_and_uses_what_is_read():
    run = run_from_log(LOG, defaults=dict(model="llama-3.1-8b", gpu="h100", num_gpus=8, seq_length=4096,
                                          args={"tensor-model-parallel-size": "2", "lr": "3e-4"}))
    assert run.layout.tp == 2
    assert any(n.startswith("--arg lr=3e-4: a Megatron-LM option megasolve does not model") for n in run.notes)



def test_cli_check_refuses_a_misspelt_arg(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    base = ["check", str(log), "-m", "llama-3.1-8b", "-g", "h100", "-n", "8", "--seq-len", "4096"]
    assert _cli(base + ["--arg", "tensor-model-paralel-size=2"]) == 2
    err = capsys.readouterr().err
    assert "--arg=tensor-model-paralel-size: not a Megatron-LM option nor a name megasolve reads" in err
    assert "did you mean tensor-model-parallel-size?" in err and "Traceback" not in err
    assert _cli(base + ["--arg", "tensor-model-parallel-size=2", "--arg", "lr=1e-4", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)[0]
    assert result["layout"]["tp"] == 2 and any(n.startswith("--arg lr=1e-4") for n in result["notes"])


def test_runs_file_takes_the_command_lines_sizes_and_names_what_it_cannot(tmp_path):
    path = tmp_path / "runs.yaml"
    path.write_text("- model: llama-3.1-8b\n  cluster: {gpu: h100, num_gpus: 8}\n  layout: {tp: 1, pp: 1, mbs: 1}\n"
                    "  workload: {global_batch_size: 64}\n  measured: {peak_allocated_gb: 60}\n"
                    "- model: llama-3.1-8b\n  cluster: {gpu: h100, num_gpus: 8}\n  layout: {tp: 1, pp: 1, mbs: 1}\n"
                    "  workload: {global_batch_size: 32, seq_length: 2048}\n  measured: {step_time_s: 1.5}\n")
    first, second = read_runs(path, seq_length=8192, global_batch_size=128, step_time_s=3.1,
                              args={"lr": "1e-4"}, vocab_size=32000)
    assert (first.workload.seq_length, first.workload.global_batch_size, first.measured.step_time_s) == (8192, 64, 3.1)
    assert (second.workload.seq_length, second.workload.global_batch_size, second.measured.step_time_s) == (2048, 32,
                                                                                                          1.5)
    assert [n.split(" ")[0] for n in first.notes] == ["--vocab-size", "--arg"]
    assert read_runs(path)[0].notes == ()


def test_the_option_table_is_the_recorded_parser():
    """``solver/megatron_options.tsv`` (package data) holds every option of Megatron-LM's parser that
    ``tests/data/megatron_lm_arguments.json`` recorded, with its dest and whether it stores False."""
    recorded = json.loads((Path(__file__).parent / "data" / "megatron_lm_arguments.json").read_text())["arguments"]
    expected = {o[2:].replace("-", "_"): (a["dest"], a["action"] == "_StoreFalseAction"
                                           or (a["action"] == "BooleanOptionalAction" and o.startswith("--no-")))
                for a in recorded for o in a["options"] if o.startswith("--")}
    assert runs.megatron_options() == expected and len(expected) > 800


def test_no_megatron_option_is_taken_for_a_typo():
    """Every option of Megatron-LM's parser is read, or said to change nothing: none is refused as a misspelling
    (``--arg eval-global-batch-size=8`` is a real option beside ``global-batch-size``)."""
    for option in runs.megatron_options():
        arg_notes({option.replace("_", "-"): "1"})


@pytest.mark.parametrize("given, name, value", [
    ({"no-bias-swiglu-fusion": "true"}, "bias_swiglu_fusion", False),  # store_false
    ({"no-overlap-p2p-communication": "true"}, "overlap_p2p_comm", False),  # dest differs from the option
    ({"num-experts": "8"}, "num_moe_experts", 8),  # Megatron's option, then the readers' name
])
def test_an_arg_is_stored_as_megatron_stores_it(given, name, value):
    assert runs.resolve_arg(*next(iter(given.items()))) == (name, value)
    assert arg_notes(given) == []
