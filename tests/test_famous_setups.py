"""benchmarks/famous_setups.py on a small subset: the published expert layouts still solve, the pinned
solve honours the expert's TP / PP / CP / EP, and the free #1 is never slower than the pinned best
(the free search includes the pinned layout). Issue 12, "How it will be checked" 3."""

from __future__ import annotations

import pytest
from _benchmarks import load

FAMOUS = load("famous_setups")


def test_setups_are_sourced_and_pin_the_four_axes():
    assert len(FAMOUS.SETUPS) == 22
    assert len({s.name for s in FAMOUS.SETUPS}) == 22
    for s in FAMOUS.SETUPS:
        assert set(s.pins) == {"tp", "pp", "cp", "ep"}, s.name
        assert "arXiv:" in s.source or "github.com" in s.source, s.name
        assert s.num_gpus % (s.pins["tp"] * s.pins["pp"] * s.pins["cp"]) == 0, s.name


@pytest.mark.parametrize("name", ["llama3-8b-h100-8", "qwen3-30b-gb200-8", "llama2-70b-h100-64",
                                  "llama3-405b-h100-16k-128k"])
def test_pinned_best_vs_free_first(name):
    setup = next(s for s in FAMOUS.SETUPS if s.name == name)
    outcome = FAMOUS.run_setup(setup, time_limit_s=None)
    assert outcome.status == "ok"
    assert outcome.pinned_layout.startswith(f"tp{setup.pins['tp']} pp{setup.pins['pp']}")
    # the free search space contains the pinned one: #1 is at least as fast (proven optimal, no time limit)
    assert outcome.free_step_s <= outcome.pinned_step_s * (1 + 1e-9)
    assert outcome.gap <= FAMOUS.TARGET  # these agree with the experts today


def test_llama3_setups_run_llama3s_context_parallelism():
    """arXiv:2407.21783 section 3.3.2: Llama 3 all-gathers K and V (no ring), Megatron's ``all_gather``; with
    the ring the 128K setup's free #1 took CP 32 at +15 % over the pinned CP 16, whose prediction was +12 % off
    the paper's 380 TFLOP/s; with the stated method the two agree (+0.7 %) and the prediction is +2.6 %."""
    llama3 = [s for s in FAMOUS.SETUPS if s.name.startswith("llama3-405b-h100-")]
    assert len(llama3) == 3 and all(s.workload["cp_comm_type"] == "all_gather" for s in llama3)


def test_scale_check_converts_published_tflops():
    setup = next(s for s in FAMOUS.SETUPS if s.name == "llama3-405b-h100-16k")
    outcome = FAMOUS.Outcome(setup=setup, free_step_s=1.0, pinned_step_s=1.0, free_layout="", pinned_layout="",
                             pinned_tokens_per_s_per_gpu=1.0, status="ok")
    # 400 TFLOP/s / (6 * 405e9 params + causal attention) ~ 158 tokens/s/GPU
    assert 150 < outcome.measured_tokens() < 165
