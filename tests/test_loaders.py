"""config.json / Megatron-argument loading and the --model resolver."""

from __future__ import annotations

import json

import pytest

from megasolve.models import ConfigError, MegasolveError, UnknownNameError, load_preset, resolve_model, total_params
from megasolve.models.hf import spec_from_hf_config
from megasolve.models.megatron_args import parse_layer_freq, spec_from_megatron_args
from megasolve.models.presets import preset_info, preset_names

LLAMA8B_MEGATRON = {
    "num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32,
    "group_query_attention": True, "num_query_groups": 8, "swiglu": True, "normalization": "RMSNorm",
    "disable_bias_linear": True, "untie_embeddings_and_output_weights": True, "position_embedding_type": "rope",
    "vocab_size": 128256,
}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else data)
    return path


@pytest.mark.parametrize("name", preset_names())
def test_preset_config_json_round_trips_through_a_file(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(preset_info(name)["hf"]))
    assert resolve_model(str(folder)).spec == load_preset(name)  # a directory holding config.json


def test_megatron_yaml_matches_the_hf_preset(tmp_path):
    import yaml

    path = tmp_path / "llama.yaml"
    path.write_text(yaml.safe_dump(LLAMA8B_MEGATRON))
    spec = resolve_model(str(path)).spec
    assert total_params(spec) == total_params(load_preset("llama-3.1-8b"))


def test_megatron_defaults_are_megatrons():
    spec = spec_from_megatron_args({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100})
    # ARG defaults: LayerNorm, biases, tied embeddings, learned absolute positions, F = 4h
    assert (spec.normalization, spec.add_bias_linear, spec.untie_embeddings_and_output_weights,
            spec.position_embedding_type, spec.ffn_hidden_size) == ("LayerNorm", True, False, "learned_absolute", 256)
    swiglu = spec_from_megatron_args({"num_layers": 2, "hidden_size": 4096, "num_attention_heads": 32,
                                      "vocab_size": 100, "swiglu": True})
    assert swiglu.ffn_hidden_size == 10880  # int((4*4096*2/3)/64)*64


def test_deepseek_moe_layer_freq_expression():
    assert parse_layer_freq("([0]*3+[1]*58)", 61) == (0, 0, 0) + (1,) * 58
    assert parse_layer_freq([1, 0], 2) == (1, 0)
    with pytest.raises(ConfigError, match="moe_layer_freq"):
        parse_layer_freq("__import__('os').system('true')", 2)
    with pytest.raises(ConfigError, match="one entry per layer"):
        spec_from_megatron_args({**LLAMA8B_MEGATRON, "num_moe_experts": 8, "moe_layer_freq": "[1]*3"})


def test_dashed_keys_are_accepted():
    dashed = {"--" + k.replace("_", "-"): v for k, v in LLAMA8B_MEGATRON.items()}
    assert spec_from_megatron_args(dashed).num_query_groups == 8


def test_hf_head_dim_is_never_derived_when_given():
    spec = load_preset("qwen3-32b")
    assert spec.kv_channels == 128 and spec.hidden_size // spec.num_attention_heads == 80


def test_deepseek_without_mtp_field_has_no_mtp():
    assert load_preset("moonlight-16b-a3b").mtp_num_layers == 0
    assert load_preset("deepseek-v3").mtp_num_layers == 1


def test_qwen_moe_sparse_step_and_dense_only_layers():
    cfg = dict(preset_info("qwen3-30b-a3b")["hf"], num_hidden_layers=4, decoder_sparse_step=2, mlp_only_layers=[3])
    assert spec_from_hf_config(cfg).moe.layer_pattern == (0, 1, 0, 0)


def test_gemma3_text_config_is_lifted():
    spec = load_preset("gemma-3-27b")
    assert spec.num_layers == 62 and not spec.untie_embeddings_and_output_weights and spec.qk_layernorm


def test_alias_prints_a_note():
    resolved = resolve_model("deepseek-v3-lite")
    assert resolved.spec.name == "moonlight-16b-a3b"
    assert "deepseek-v2-lite" in resolved.note and "deepseek-v3-proxy" in resolved.note


def test_hf_id_resolves_to_the_preset():
    assert resolve_model("meta-llama/Llama-3.1-70B").spec.name == "llama-3.1-70b"


def test_unknown_model_suggests_names():
    with pytest.raises(UnknownNameError, match="did you mean llama-3.1-70b"):
        resolve_model("lama-3.1-70b")


@pytest.mark.parametrize("content,match", [
    ("", "file is empty"),
    ("{not json", "not valid .json"),
    ("[1, 2]", "must hold a mapping"),
    (json.dumps({"model_type": "llama", "hidden_size": 64}), "num_hidden_layers=missing"),
    (json.dumps({"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2, "num_attention_heads": 2,
                 "intermediate_size": 8, "vocab_size": 10}), "hidden_size='big': must be an integer"),
    (json.dumps({"model_type": "llama", "hidden_size": -64, "num_hidden_layers": 2, "num_attention_heads": 2,
                 "intermediate_size": 8, "vocab_size": 10}), "hidden_size=-64: must be a positive integer"),
    (json.dumps({"model_type": "mamba", "hidden_size": 64}), "model_type=mamba"),
    (json.dumps({"hidden_size": 64}), "neither model_type"),
])
def test_bad_config_json_is_one_clear_error(tmp_path, content, match):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(MegasolveError, match=match):
        resolve_model(str(path))


def test_directory_without_config(tmp_path):
    with pytest.raises(ConfigError, match="directory holds no config.json"):
        resolve_model(str(tmp_path))


def test_megatron_yaml_missing_field(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("num_layers: 4\nhidden_size: 64\nvocab_size: 10\n")
    with pytest.raises(ConfigError, match="num_attention_heads=missing"):
        resolve_model(str(path))
