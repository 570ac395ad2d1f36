"""Per-rank parameter counts against real Megatron-Core models.

``tests/data/megatron_param_golden.json`` was produced by ``benchmarks/megatron_param_golden.py``:
megatron-core 0.19.2 ``GPTModel`` built on the meta device for every distinct rank of each layout
(TE-spec parameter placement; see the file's ``notes``). Each case's model is given in Megatron
argument names, so it also exercises the Megatron-argument loader.
"""

from __future__ import annotations

import json

import pytest

from megasolve.models import Layout, stage_params
from megasolve.models.megatron_args import spec_from_megatron_args

from conftest import DATA

GOLDEN = json.loads((DATA / "megatron_param_golden.json").read_text())
CASES = GOLDEN["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_per_rank_params_equal_megatron_core(case):
    spec = spec_from_megatron_args(case["model"])
    lay = case["layout"]
    layout = Layout(tp=lay["tp"], pp=lay["pp"], vpp=lay["vpp"], ep=lay["ep"], etp=lay["etp"], cp=lay.get("cp", 1),
                    dp=lay.get("dp", 1), first_stage_layers=lay["first_stage_layers"],
                    last_stage_layers=lay["last_stage_layers"])
    ours = [s.total for s in stage_params(spec, layout)]
    theirs = [s["params"] for s in case["stages"]]
    assert ours == theirs


def test_golden_covers_the_issue_matrix():
    names = " ".join(c["name"] for c in CASES)
    for needle in ("gqa", "ep8", "etp2", "moonlight", "deepseek-v3", "tied", "untied", "first", "last", "vpp2", "mtp1",
                   "window", "sinks", "window-pattern", "hybrid"):
        assert needle in names.replace("-g8", "-gqa"), needle
    assert len(CASES) >= 40
