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
from megasolve.models.hf import spec_from_hf_config
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.params import model_params
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


# config.json files of the Megatron-Bridge providers' widths (models/sarvam/sarvam_provider.py @067f987; the keys as the
# remote-code configs name them, vLLM's sarvam.py and bailing_moe.py): golden case prefix -> config
SARVAM_CONFIGS = {
    "sarvam-moe-": dict(architectures=["SarvamMoEForCausalLM"], model_type="sarvam_moe", vocab_size=262144,
                        hidden_size=4096, intermediate_size=8192, num_hidden_layers=19, num_attention_heads=64,
                        num_key_value_heads=4, head_dim=64, num_experts=128, num_experts_per_tok=6,
                        moe_intermediate_size=1024, num_shared_experts=1, first_k_dense_replace=1, use_qk_norm=True,
                        score_function="sigmoid", routed_scaling_factor=2.5, max_position_embeddings=131072,
                        tie_word_embeddings=False),
    "sarvam-mla-": dict(architectures=["SarvamMLAForCausalLM"], model_type="sarvam_mla", vocab_size=262144,
                        hidden_size=4096, intermediate_size=16384, num_hidden_layers=32, num_attention_heads=64,
                        num_experts=128, num_experts_per_tok=8, moe_intermediate_size=2048, num_shared_experts=1,
                        first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128,
                        qk_rope_head_dim=64, v_head_dim=128, max_position_embeddings=131072,
                        tie_word_embeddings=False),
}


@pytest.mark.parametrize("case", [c for c in CASES if any(c["name"].startswith(k) for k in SARVAM_CONFIGS)],
                         ids=lambda c: c["name"])
def test_golden_model_is_the_sarvam_config_cut(case):
    """Sarvam's two readers build what Megatron-Core builds from the Bridge providers' arguments (the golden above
    equals megasolve per rank); the full widths count 32.15B (sarvam-30b: 30B without its 2.15B of embeddings) and
    106.03B (sarvam-105b)."""
    config = next(v for k, v in SARVAM_CONFIGS.items() if case["name"].startswith(k))
    layers = case["model"]["num_layers"]
    ours = spec_from_megatron_args(case["model"])
    read = spec_from_hf_config({**config, "num_hidden_layers": layers})
    assert dataclasses.replace(read, name=ours.name, source=ours.source, notes=ours.notes,
                               ignored_features=ours.ignored_features) == ours
    total = model_params(spec_from_hf_config(config))["params_total"] / 1e9
    assert round(total, 2) == (32.15 if "moe" in case["name"] else 106.03)
