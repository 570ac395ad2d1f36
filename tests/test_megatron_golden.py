"""Per-rank parameter counts against real Megatron-Core models.

``tests/data/megatron_param_golden.json`` was produced by ``benchmarks/megatron_param_golden.py``:
megatron-core 0.19.2 ``GPTModel`` built on the meta device for every distinct rank of each layout
(TE-spec parameter placement; see the file's ``notes``). Each case's model is given in Megatron
argument names, so it also exercises the Megatron-argument loader. Cases with a ``model_class`` come from
the companion generators: hybrid ``MambaModel`` (``benchmarks/megatron_mamba_param_golden.py``) and GPTModel
with gated-DeltaNet layers (``GPTModel-gated_delta_net``, ``benchmarks/megatron_gdn_param_golden.py``,
megatron-core 0.16.1) and with DeepSeek Sparse Attention (``GPTModel-dsa``, ``benchmarks/megatron_dsa_param_golden.py``:
megatron-core 0.16.1, and Megatron-LM main @d98e8a6 for IndexShare, which 0.16 lacks).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from megasolve.models import Layout, stage_params
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.presets import load_preset

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
                   "window", "sinks", "window-pattern", "hybrid", "gdn"):
        assert needle in names.replace("-g8", "-gqa"), needle
    assert len(CASES) >= 40


GDN_CASES = [c for c in CASES if c.get("model_class") == "GPTModel-gated_delta_net"]


def test_gdn_golden_covers_tp_pp_ep_and_dense():
    names = " ".join(c["name"] for c in GDN_CASES)
    for needle in ("tp1-pp1", "tp2-pp1", "tp4-pp2", "ep4", "vpp2", "dense", "layernorm-qkvbias"):
        assert needle in names, needle


@pytest.mark.parametrize("case", [c for c in GDN_CASES if c["model"].get("num_moe_experts")],
                         ids=lambda c: c["name"])
def test_gdn_golden_model_is_the_qwen3_next_preset_cut(case):
    """The gated-DeltaNet golden model is Qwen3-Next-80B-A3B itself, cut in depth and experts only, and built
    without its MTP layer: the spec megasolve reads from the Megatron arguments equals the preset's with those cuts."""
    ours = spec_from_megatron_args(case["model"])
    preset = load_preset("qwen3-next-80b-a3b")
    layers = case["model"]["num_layers"]
    cut = dataclasses.replace(
        preset, name=ours.name, source=ours.source, num_layers=layers, mtp_num_layers=0,
        linear_attention_pattern=preset.linear_attention_pattern[:layers],
        moe=dataclasses.replace(preset.moe, num_experts=case["model"]["num_moe_experts"],
                                top_k=case["model"]["moe_router_topk"],
                                layer_pattern=preset.moe.layer_pattern[:layers]))
    assert ours == cut


DSA_CASES = [c for c in CASES if c.get("model_class") == "GPTModel-dsa"]


def test_dsa_golden_covers_tp_pp_ep_mtp_and_index_share():
    names = " ".join(c["name"] for c in DSA_CASES)
    for needle in ("tp1-pp1", "tp2-pp1", "tp4-pp2", "ep4", "vpp2", "mtp1", "noqknorm", "indexshare"):
        assert needle in names, needle
    shared = [c for c in DSA_CASES if c["model"].get("dsa_indexer_topk_freq", 1) > 1]
    assert shared and all(c.get("megatron_core_commit") for c in shared)  # built by the library that has it


# the golden models of presets read through the nemotron / glm4_moe_lite / olmoe HF readers: golden case -> preset
PRESET_CASES = {"nemotron-4-15b-": "nemotron-4-15b", "glm-4.7-flash-": "glm-4.7-flash", "olmoe-1b-7b-": "olmoe-1b-7b",
                "mimo-7b-": "mimo-7b"}


@pytest.mark.parametrize("case", [c for c in CASES if any(c["name"].startswith(k) for k in PRESET_CASES)],
                         ids=lambda c: c["name"])
def test_golden_model_is_the_hf_preset_cut(case):
    """Each golden model of an HF-read preset is the preset cut in depth (its MoE pattern and MTP layers with it):
    what megasolve reads from the config.json is what Megatron-Core builds from the Megatron arguments. Partial
    RoPE (Nemotron's 0.5) changes no parameter, so the golden model keeps Megatron's default."""
    ours = spec_from_megatron_args(case["model"])
    preset = load_preset(next(v for k, v in PRESET_CASES.items() if case["name"].startswith(k)))
    layers = case["model"]["num_layers"]
    cut = dataclasses.replace(
        preset, name=ours.name, source=ours.source, num_layers=layers, rotary_percent=ours.rotary_percent,
        max_position_embeddings=ours.max_position_embeddings,
        mtp_num_layers=case["model"].get("mtp_num_layers") or 0,
        moe=None if preset.moe is None else dataclasses.replace(preset.moe, layer_pattern=preset.moe.layer_pattern[:layers]))
    assert ours == cut
