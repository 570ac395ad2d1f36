"""Exact parameter counts (reference/megatron.md sections 1.1-1.9)."""

from __future__ import annotations

import pytest

from megasolve.models import Layout, MegasolveError, load_preset, preset_names, stage_params, total_params
from megasolve.models.params import (active_params, attention_params, dense_mlp_params, moe_mlp_params,
                                     stage_layer_counts, stage_layer_ids)
from megasolve.models.presets import preset_info

# Official sizes quoted by the model cards / reference (billions, MTP excluded).
OFFICIAL_B = {"deepseek-v3": 671.03, "llama-3.1-405b": 405.85, "qwen3-235b-a22b": 235.09, "llama-3.1-8b": 8.03,
              "llama-3.1-70b": 70.55, "mixtral-8x7b": 46.70, "qwen3-30b-a3b": 30.53, "gpt3-175b": 174.6}


@pytest.mark.parametrize("name", [n for n in preset_names() if "params_b" in preset_info(n)])
def test_every_preset_total_matches_reference(name):
    expected = preset_info(name)["params_b"]
    decimals = len(repr(float(expected)).split(".")[1])  # 27.0 is quoted to 0.1 B, 8.03 to 0.01 B
    assert total_params(load_preset(name)) / 1e9 == pytest.approx(expected, abs=0.6 * 10 ** -decimals)


@pytest.mark.parametrize("name,billions", sorted(OFFICIAL_B.items()))
def test_official_sizes(name, billions):
    assert total_params(load_preset(name)) / 1e9 == pytest.approx(billions, abs=0.006)


@pytest.mark.parametrize("name", [n for n in preset_names() if preset_info(n).get("active_params_b")])
def test_active_params_of_moe_presets(name):
    assert active_params(load_preset(name), include_input_embedding=True) / 1e9 == pytest.approx(preset_info(name)["active_params_b"], abs=0.011)


def test_llama3_8b_exact(llama8b):
    # 32 * (4096*6144 + 4096*4096 + 4096 + 3*4096*14336 + 4096) + 2*128256*4096 + 4096
    assert total_params(llama8b) == 8_030_261_248


def test_deepseek_v3_mtp_adds_one_moe_layer_and_projection(deepseek_v3):
    extra = total_params(deepseek_v3, include_mtp=True) - total_params(deepseek_v3)
    # one MoE layer (~11.5B) + eh_proj 2*7168^2 + 3 norms; the embedding/output are shared
    assert 11.4e9 < extra < 11.8e9


def test_vocab_padding_changes_with_tp(llama8b):
    assert llama8b.padded_vocab_size(1) == 128256
    assert llama8b.padded_vocab_size(8) == 129024  # ceil(128256 / 1024) * 1024


def test_worked_example_llama70b_stage0():
    # reference section 7.1: 20 layers x (layer/t + norms) + V*h/t = 4.542 B at t4 p4
    spec = load_preset("llama-3.1-70b")
    stages = stage_params(spec, Layout(tp=4, pp=4, cp=2, dp=2))
    assert stages[0].total == 4_541_710_336
    assert stages[1].total == 20 * (213_909_504 + 2 * 8192)  # no embedding on middle stages
    assert stages[3].params.tp_sharded - stages[1].params.tp_sharded == 128512 * 8192 // 4  # output layer
    assert stages[3].params.replicated - stages[1].params.replicated == 8192  # final norm


def test_tp_split_of_attention_and_mlp(llama8b):
    full = attention_params(llama8b, 1)
    half = attention_params(llama8b, 2)
    assert half.tp_sharded * 2 == full.tp_sharded and half.replicated == full.replicated == 4096
    assert dense_mlp_params(llama8b, 4).tp_sharded == 3 * 4096 * 14336 // 4


def test_gqa_with_fewer_groups_than_tp_still_splits_qkv():
    spec = load_preset("llama-3.1-405b")  # 8 KV groups, tp 16 allowed since core 0.16
    assert attention_params(spec, 16).tp_sharded * 16 == attention_params(spec, 1).tp_sharded


def test_mla_down_projections_are_replicated(deepseek_v3):
    a1, a8 = attention_params(deepseek_v3, 1), attention_params(deepseek_v3, 8)
    # h*q_lora + h*(kv_lora + r) + q_lora + kv_lora + input norm, identical on every TP rank
    replicated = 7168 * 1536 + 7168 * (512 + 64) + 1536 + 512 + 7168
    assert a1.replicated == a8.replicated == replicated
    assert a1.total == pytest.approx(187.1e6, rel=1e-3)  # reference section 1.6


def test_experts_split_over_ep_and_etp(deepseek_v3):
    one = moe_mlp_params(deepseek_v3, tp=1, ep=1, etp=1)
    split = moe_mlp_params(deepseek_v3, tp=2, ep=64, etp=2)
    assert split.expert * 128 == one.expert
    assert split.tp_sharded * 2 == one.tp_sharded  # shared expert follows attention TP
    assert split.replicated == one.replicated  # router + norm


def test_tied_embeddings_get_an_output_copy_only_with_pp():
    spec = load_preset("gpt3-175b")
    one_stage = stage_params(spec, Layout(tp=8, pp=1, dp=1))[0]
    two = stage_params(spec, Layout(tp=8, pp=2, dp=1))
    vocab = spec.padded_vocab_size(8) * 12288 // 8
    assert two[0].params.tp_sharded + two[1].params.tp_sharded - one_stage.params.tp_sharded == vocab


def test_mtp_lives_on_the_last_stage_with_an_embedding_copy(deepseek_v3):
    stages = stage_params(deepseek_v3, Layout(tp=1, pp=2, ep=8, etp=1, dp=8, first_stage_layers=31,
                                              last_stage_layers=30))
    assert stages[1].has_mtp and not stages[0].has_mtp
    assert stages[0].num_layers == 31 and stages[1].num_layers == 30
    assert stages[0].num_moe_layers == 28 and stages[1].num_moe_layers == 30


def test_uneven_split_counts(deepseek_v3):
    assert stage_layer_counts(deepseek_v3, Layout(pp=16, first_stage_layers=1, last_stage_layers=0 or None)) \
        == [1] + [4] * 15
    with pytest.raises(MegasolveError, match="middle"):
        stage_layer_counts(deepseek_v3, Layout(pp=16, first_stage_layers=4, last_stage_layers=3))


def test_even_split_requires_divisibility(llama8b):
    with pytest.raises(MegasolveError, match=r"num_layers \(32\) must be divisible"):
        stage_layer_counts(llama8b, Layout(pp=3))
    with pytest.raises(MegasolveError, match="divisible by vpp"):
        stage_layer_counts(llama8b, Layout(pp=4, vpp=3))


def test_vpp_round_robin_chunks(llama8b):
    ids = stage_layer_ids(llama8b, Layout(pp=4, vpp=2))
    assert ids[0] == [[0, 1, 2, 3], [16, 17, 18, 19]]
    assert ids[3] == [[12, 13, 14, 15], [28, 29, 30, 31]]


def test_expert_count_must_divide_by_ep(deepseek_v3):
    with pytest.raises(MegasolveError, match=r"num_moe_experts \(256\) is not divisible by ep \(3\)"):
        moe_mlp_params(deepseek_v3, tp=1, ep=3, etp=1)


def test_embedding_and_loss_accounted_in_the_pipeline_split():
    """--account-for-embedding/loss-in-pipeline-split (transformer_block.py L146-203): Llama-3.1 405B's
    126 layers + 2 split over pp 16 x vpp 8 as 1 layer per chunk, the first chunk holding only the
    embedding and the last only the loss."""
    spec = load_preset("llama-3.1-405b")
    layout = Layout(pp=16, vpp=8, account_for_embedding=True, account_for_loss=True)
    ids = stage_layer_ids(spec, layout)
    assert stage_layer_counts(spec, layout) == [7] + [8] * 14 + [7]
    assert ids[0][0] == [] and ids[-1][-1] == [] and ids[1][0] == [0] and ids[0][1] == [15]
    assert sorted(i for stage in ids for chunk in stage for i in chunk) == list(range(126))
    with pytest.raises(MegasolveError, match="split evenly"):
        stage_layer_counts(spec, Layout(pp=16, vpp=8, account_for_embedding=True))  # 127 layers
    with pytest.raises(MegasolveError, match="uneven first/last"):
        Layout(pp=16, account_for_loss=True, first_stage_layers=7)
