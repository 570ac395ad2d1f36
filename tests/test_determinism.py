"""Determinism: the same question gives byte-identical JSON.

Across processes (with different ``PYTHONHASHSEED``, so no answer may depend on set or dict-of-str
iteration order), across CP-SAT worker counts (``solve(..., workers=1)`` vs ``workers=2``; the CLI
has no ``--workers`` flag and always uses 1), and between the CP-SAT engine and the exhaustive oracle.

The only fields allowed to differ are the wall-clock measurements under ``search``: ``wall_s``,
``build_s`` and ``solve_s`` time the run itself, so they are removed before comparing (everything
else under ``search`` -- model size, space size, proven_optimal -- must match).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TIMING_FIELDS = ("wall_s", "build_s", "solve_s")

CASES = [
    ["models", "--format", "json"],
    ["gpus", "--format", "json"],
    ["estimate", "-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4", "--pp", "4", "--cp", "2",
     "--seq-len", "8192", "--format", "json"],
    ["estimate", "-m", "deepseek-v3", "-n", "1024", "-g", "h100", "--tp", "2", "--pp", "16", "--ep", "64",
     "--etp", "1", "--first-stage-layers", "4", "--last-stage-layers", "1", "--format", "json"],
    ["estimate", "-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--ep", "8", "--format", "yaml"],
    ["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--time-limit", "60", "--format", "json"],
    ["solve", "-m", "mixtral-8x7b", "-n", "16", "-g", "h100", "--top-k", "3", "--time-limit", "60",
     "--format", "json"],
    ["solve", "-m", "llama-3.1-70b", "-n", "1", "-g", "a100-40g", "--time-limit", "60", "--format", "json"],
]

_RUNNER = """
import contextlib, io, json, sys
from megasolve.cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    results.append([code, out.getvalue()])
print(json.dumps(results))
"""


def strip_timing(text: str) -> str:
    """The JSON text with the wall-clock fields under ``search`` removed (other text unchanged)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(data, dict) and isinstance(data.get("search"), dict):
        for key in TIMING_FIELDS:
            data["search"].pop(key, None)
        return json.dumps(data, indent=2, ensure_ascii=False)
    return text


def run_in_fresh_process(cases: list[list[str]], hash_seed: str) -> list[list]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(cases)], capture_output=True, text=True,
                          timeout=600, env=env, check=True)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def two_runs():
    return run_in_fresh_process(CASES, "1"), run_in_fresh_process(CASES, "12345")


@pytest.mark.parametrize("index", range(len(CASES)), ids=[" ".join(c[:3]) for c in CASES])
def test_same_input_same_bytes_across_processes(two_runs, index):
    (code_a, out_a), (code_b, out_b) = two_runs[0][index], two_runs[1][index]
    assert code_a == code_b
    assert out_a.strip(), "the command printed nothing"
    assert strip_timing(out_a) == strip_timing(out_b)


def test_only_timing_fields_are_stripped(two_runs):
    solve_out = two_runs[0][CASES.index(CASES[5])][1]
    search = json.loads(solve_out)["search"]
    assert set(TIMING_FIELDS) <= set(search)
    assert {"space_size", "proven_optimal", "engine"} <= set(json.loads(strip_timing(solve_out))["search"])


# ------------------------------------------------------------------------------------ library: engines, workers

def _solve(model: str, gpus: int, gpu: str = "h100", **kwargs):
    from megasolve.cli.options import build_workload
    from megasolve.models.presets import load_preset
    from megasolve.solver.solve import solve
    from megasolve.topology.cluster import Cluster

    workload = build_workload(seq_len=4096, gbs=None, precision="bf16", attention="flash")
    return solve(load_preset(model), Cluster.from_flags(num_gpus=gpus, gpu=gpu), workload, **kwargs)


def _comparable(result) -> str:
    data = result.as_dict()
    for key in TIMING_FIELDS:
        data["search"].pop(key, None)
    return json.dumps(data, indent=2)


@pytest.mark.parametrize("model,gpus", [("llama-3.1-8b", 8), ("moonlight-16b-a3b", 8)])
def test_one_or_two_cpsat_workers_give_identical_json(model, gpus):
    one = _solve(model, gpus, top_k=5, time_limit_s=120, workers=1)
    two = _solve(model, gpus, top_k=5, time_limit_s=120, workers=2)
    assert one.status == two.status == "optimal"
    assert _comparable(one) == _comparable(two)


@pytest.mark.parametrize("model,gpus", [("llama-3.1-8b", 8), ("qwen3-30b-a3b", 8), ("mixtral-8x7b", 16)])
def test_exhaustive_oracle_gives_the_same_layouts(model, gpus):
    cpsat = _solve(model, gpus, top_k=5, time_limit_s=120)
    oracle = _solve(model, gpus, top_k=5, engine="exhaustive")
    assert cpsat.status == oracle.status == "optimal"
    layouts = lambda r: [x["layout"] for x in r.as_dict()["layouts"]]  # noqa: E731
    assert layouts(cpsat) == layouts(oracle)
    assert cpsat.objective_us == oracle.objective_us
