"""The log readers on damaged input: real excerpts truncated, interleaved, prefixed, with lines dropped or
repeated and numbers changed. Whatever the damage, reading gives a run that ``check`` costs, or one
``MegasolveError`` line naming what is missing or wrong: never a traceback."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megasolve.models.errors import MegasolveError
from megasolve.solver.runs import run_from_log

MAX_EXAMPLES = int(os.environ.get("MEGASOLVE_FUZZ_EXAMPLES", "200"))
LOGS = Path(__file__).parent / "data" / "logs"
INDEX = yaml.safe_load((LOGS / "INDEX.yaml").read_text(encoding="utf-8"))
TEXTS = [(LOGS / e["file"]).read_text(encoding="utf-8") for e in INDEX]
# launcher prefixes the readers strip (slurm --label, host:rank, torchrun, NeMo-Run, Ray, a platform stamp)
PREFIXES = ["", "0: ", "12: ", "[node01:3]: ", "[rank0]: ", "[default7]:", "job/0 [default0]:",
            "(main_task pid=8918) ", "(WorkerDict pid=1, ip=10.0.0.1) ", "【2025-02-20 23:16:43】", "\x1b[32m"]
# what a user adds with flags, sometimes (the readers must cope with and without)
DEFAULTS = [{}, {"gpu": "h100"}, {"model": "llama-2-7b", "gpu": "h100", "num_gpus": 8, "seq_length": 2048,
                                  "global_batch_size": 64, "vocab_size": 32000, "step_time_s": 1.0},
            {"model": "mixtral-8x7b", "gpu": "a100-80g", "num_gpus": 16, "args": {"expert-model-parallel-size": 8}}]


@st.composite
def damaged_logs(draw):
    lines = draw(st.sampled_from(TEXTS)).splitlines()
    if draw(st.booleans()):  # interleave a second excerpt, as ranks print over each other
        other = draw(st.sampled_from(TEXTS)).splitlines()
        merged = []
        for i in range(max(len(lines), len(other))):
            merged += lines[i:i + 1] + other[i:i + 1]
        lines = merged
    if lines and draw(st.booleans()):  # cut mid-line, where a post or a terminal buffer ends
        cut = draw(st.integers(0, len(lines) - 1))
        lines = lines[:cut] + [lines[cut][:draw(st.integers(0, len(lines[cut])))]]
    ops = draw(st.lists(st.tuples(st.sampled_from(["drop", "dup", "prefix", "number", "swap"]),
                                  st.integers(0, 10_000), st.sampled_from(PREFIXES),
                                  st.sampled_from(["0", "1", "-3", "7", "999999999", "1e400", "nan", "0.0",
                                                   "...", "1.2.3", "", "0B"])),  # elided, garbled, gone
                        max_size=12))
    for op, at, prefix, number in ops:
        if not lines:
            break
        i = at % len(lines)
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "prefix":
            lines[i] = prefix + lines[i]
        elif op == "swap":
            j = (at // 7) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        else:  # a number replaced (a size of 0, a negative one, an absurd one, an elided "...")
            lines[i] = re.sub(r"\d+(?:\.\d+)?", number, lines[i], count=1)
    return "\n".join(lines)


@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=os.environ.get("MEGASOLVE_FUZZ_EXAMPLES") is None, suppress_health_check=[HealthCheck.too_slow])
@given(text=damaged_logs(), defaults=st.sampled_from(DEFAULTS))
def test_damaged_logs_read_or_one_line_error(text, defaults):
    from megasolve.solver.api import check_layout
    from megasolve.solver.calibrate import check

    try:
        run = run_from_log(text, "fuzz.log", dict(defaults))
        run.spec.require_plannable()
        check_layout(run.spec, run.cluster, run.workload, run.layout, allow_cross_domain_tp=True)
    except MegasolveError as exc:
        message = str(exc)
        assert message and "\n" not in message  # one line: field, value, rule, fix
        return
    result = check(run)
    assert result["predicted"]["step_time_s"] > 0


def test_every_missing_fact_is_named_in_one_line():
    """An empty log, a log of noise and a bare prefix: each names what it lacks and the flag for it."""
    for text in ("", "hello\nworld", "[rank0]: ", "0: iteration 5/ 10 |", "elapsed time per iteration (ms): 12.0"):
        try:
            run_from_log(text, "x.log", {})
        except MegasolveError as exc:
            message = str(exc)
            assert "\n" not in message and "--model" in message and "--gpus N" in message and "--gpu TYPE" in message
        else:
            raise AssertionError(f"{text!r} read as a run")
