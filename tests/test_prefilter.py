"""The literal guards of the log readers' patterns (solver/prefilter.py) never turn a match away: every text that a
pattern matches holds one of its required literals. Checked on texts drawn from each pattern (hypothesis' from_regex,
the match inside other text) and on the published log fixtures, whole."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megasolve.solver import logs, runs
from megasolve.solver.prefilter import Guarded, fold_case, required_literals

GUARDED = {f"{module.__name__.rsplit('.', 1)[-1]}.{name}": value for module in (logs, runs)
           for name, value in vars(module).items() if isinstance(value, Guarded)}
LOGS = Path(__file__).parent / "data" / "logs"


def test_every_module_pattern_is_guarded_and_most_have_a_literal():
    assert len(GUARDED) > 300
    without = sorted(name for name, g in GUARDED.items() if g.literals is None)
    assert len(without) < 10, without  # (each searched as before: nothing certain in it)


@pytest.mark.parametrize("name", sorted(name for name, g in GUARDED.items() if g.literals is not None))
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_text_the_pattern_matches_passes_its_guard(name, data):
    guarded = GUARDED[name]
    text = data.draw(st.from_regex(guarded.raw, fullmatch=False))  # (every pattern here can be drawn from)
    assert guarded.raw.search(text) and guarded.search(text) is not None, (text, sorted(guarded.literals))


def test_the_guards_answer_as_the_patterns_on_the_published_logs():
    files = sorted(p for p in LOGS.iterdir() if p.is_file() and p.name != "INDEX.yaml")
    for path in random.Random(7).sample(files, 60):
        text = path.read_text(errors="replace")
        for name, guarded in GUARDED.items():
            assert bool(guarded.raw.search(text)) == bool(guarded.search(text)), (path.name, name)


def test_ignorecase_literals_are_found_in_the_folded_text():
    pattern = Guarded(re.compile(r"\bthroughput per GPU\b", re.I))
    assert pattern.search("THROUGHPUT PER GPU: 1") and pattern.search("throughput per gpu")
    # re's IGNORECASE matches the dotless i, the long s and the Kelvin sign to ASCII letters: folded alike
    kits = re.compile("kits", re.I)
    assert kits.search("\u212a\u0131t\u017f") and Guarded(kits).search("\u212a\u0131t\u017f") is not None
    assert fold_case("\u0130") is None  # casefolds to two characters: searched whatever it holds
    assert Guarded(re.compile(r"显存(?:不足|溢出)|OOM", re.I)).search("显存不足") is not None
    assert required_literals(re.compile(r"(?i:abc)d")) == frozenset({"d"})  # a scoped flag: not relied on


@pytest.mark.parametrize("case", ["Megatron-LM, plain", "AMD Primus, coloured prefixes", "slurm-labelled with NCCL INFO"])
def test_a_lengthened_log_reads_as_its_excerpt(case):
    """benchmarks/reader_speed.py's cases, short: every repeated iteration line read as in the excerpt, the other
    facts the excerpt's (the speed is the benchmark's to report, not a test's)."""
    from _benchmarks import load

    lines, _parse_s, _run_s, problems = load("reader_speed").read_case(case, 600)
    assert lines >= 600 and problems == []
