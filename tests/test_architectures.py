"""Issue 15: the architectures people train now, read from their released config.json files
(``tests/data/configs``, sources in ``README.md`` there), and nothing ignored silently."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from megasolve.cli.launch import launch_text, megatron_flags
from megasolve.cli.main import cli
from megasolve.cost.compute import model_flops_per_sequence
from megasolve.models import ConfigError, Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.hf import spec_from_hf_config
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.params import active_params, attention_params, model_params, stage_params, total_params
from megasolve.models.presets import preset_info, preset_names, resolve_model

from conftest import DATA

CONFIGS = DATA / "configs"
REFUSED: dict[str, str] = {}
# hybrid MambaModel and gated-DeltaNet models: exact parameters, planning refused
# Configs read and counted but not planned: none left (hybrid Mamba-2 and gated-DeltaNet layers are costed
# since issue 15's deliverable 4, cost/hybrid.py)
COUNTED_NOT_PLANNED: dict[str, str] = {}
# The Kimi K2 report's 1.04T (arXiv 2507.20534) is 1.3 % above the released config's exact count
# (1.026T, no MTP layer shipped: num_nextn_predict_layers 0); every other card is within 1 %.
TOLERANCE = {"kimi-k2": 0.015}


def load(name: str):
    return spec_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text()), name=name)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_every_released_config_loads_or_is_refused_with_what_is_missing(path):
    if path.stem in REFUSED:
        with pytest.raises(ConfigError) as exc:
            load(path.stem)
        assert REFUSED[path.stem] in str(exc.value)
        assert "YAML describes attention + MLP/MoE stacks only" in str(exc.value)  # never points at the YAML
        return
    spec = load(path.stem)
    assert stage_params(spec, Layout()) and model_params(spec)["params_total"] > 0
    if path.stem in COUNTED_NOT_PLANNED:
        with pytest.raises(ConfigError, match=f"{COUNTED_NOT_PLANNED[path.stem]} are not modelled yet"):
            spec.require_plannable()


def test_qwen3_next_counts_gated_deltanet_and_gated_attention():
    spec = load("qwen3-next-80b-a3b")
    assert sum(spec.linear_attention_pattern) == 36 and spec.attention_output_gate
    # 80B on the Qwen/Qwen3-Next-80B-A3B card; 79.67B counted (36 DeltaNet + 12 gated-attention layers,
    # 512 experts + a gated shared expert on every layer)
    assert model_params(spec)["params_total"] / 1e9 == pytest.approx(80.0, rel=0.01)


def test_qwen3_5_is_the_qwen3_next_decoder_inside_a_vl_wrapper():
    """transformers 5.23 builds Qwen3_5MoeForConditionalGeneration from this config (its class defaults, the
    Qwen/Qwen3.5-35B-A3B configuration) with 35,114,261,360 parameters on the meta device, 453,650,672 of
    them the vision tower; the reader counts the same to the parameter."""
    spec = load("qwen3.5-35b-a3b")
    assert sum(spec.linear_attention_pattern) == 30 and spec.attention_output_gate and spec.qk_layernorm
    assert spec.rotary_percent == 0.25 and spec.moe.shared_expert_gate and all(spec.moe.layer_pattern)
    counts = model_params(spec)
    assert (counts["params_total"], counts["params_vision"]) == (35_114_261_360, 453_650_672)
    assert counts["params_active"] / 1e9 == pytest.approx(3.0, abs=0.06)  # "A3B"; the input embedding not counted
    # the dense family: Qwen3_5ForConditionalGeneration with transformers' Qwen3_5Config defaults, 9,407,453,936
    raw = json.loads((CONFIGS / "qwen3.5-35b-a3b.json").read_text())
    text = {k: v for k, v in raw["text_config"].items() if not k.startswith(("moe_", "num_experts", "shared_"))}
    dense = dict(raw, model_type="qwen3_5", architectures=["Qwen3_5ForConditionalGeneration"], tie_word_embeddings=False,
                 text_config=dict(text, model_type="qwen3_5_text", hidden_size=4096, intermediate_size=12288,
                                  num_hidden_layers=32, num_key_value_heads=4, layer_types=None))
    dense["text_config"].pop("layer_types")  # derived from the default interval 4, with a note
    dense_spec = spec_from_hf_config(dense)
    assert model_params(dense_spec)["params_total"] == 9_407_453_936 and dense_spec.moe is None
    assert any("full_attention_interval not set" in n for n in dense_spec.notes)
    # the MTP layer a released config declares is built as Megatron builds it: the last decoder layer's kind (a
    # gated-attention MoE layer) behind enorm, hnorm, eh_proj and a final norm. By hand: attention 2048*2*16*256
    # (q and its gate) + 2*2048*2*256 (k, v) + 16*256*2048 (o) + 2*256 (q/k norms) + 2048 (input norm) = 27,265,536;
    # MoE 256*2048 (router) + 256*3*2048*512 (experts) + 3*2048*512 + 2048 (shared expert and its gate) + 2048
    # (pre-MLP norm) = 808,980,480; eh_proj 2*2048*2048 + three norms 3*2048 = 8,394,752
    raw["text_config"]["mtp_num_hidden_layers"] = 1
    with_mtp = spec_from_hf_config(raw)
    assert with_mtp.mtp_num_layers == 1 and not with_mtp.ignored_features
    assert total_params(with_mtp, include_mtp=True) - total_params(with_mtp) == 27_265_536 + 808_980_480 + 8_394_752


@pytest.mark.parametrize("name,checkpoint,with_mtp", [
    ("llama-3.1-8b", 8_030_261_248, False), ("llama-3.1-70b", 70_553_706_496, False),
    ("llama-3.1-405b", 405_853_388_800, False), ("qwen3-32b", 32_762_123_264, False),
    ("qwen3-30b-a3b", 30_532_122_624, False), ("qwen3-235b-a22b", 235_093_634_560, False),
    ("gpt-oss-20b", 20_914_757_184, False), ("gpt-oss-120b", 116_829_156_672, False),
    ("kimi-k2", 1_026_408_209_408, False), ("glm-4.7", 356_785_884_416, True),
    ("mixtral-8x7b", 46_702_792_704, False), ("mixtral-8x22b", 140_620_634_112, False),
    ("qwen2.5-72b", 72_706_203_648, False), ("qwen2.5-7b", 7_615_616_512, False), ("phi-4", 14_659_507_200, False),
    ("llama-4-scout", 108_641_793_536, False), ("llama-4-maverick", 401_583_781_376, False),
])
def test_presets_count_their_released_checkpoints(name, checkpoint, with_mtp):
    """Each preset counts the released checkpoint's parameters exactly (safetensors metadata as public pages quote
    it), its MTP layer included where the checkpoint ships one (GLM-4.7) and its vision tower where it has one
    (Llama 4: 871,932,416 of encoder, adapter and projector)."""
    spec = load_preset(name)
    mtp = total_params(spec, include_mtp=True) - total_params(spec) if with_mtp else 0
    assert model_params(spec)["params_total"] + mtp == checkpoint


def test_deepseek_v2_lite_is_its_checkpoint_plus_megatrons_q_norm():
    """DeepSeek-V2-Lite's checkpoint holds 15,706,484,224 parameters; Megatron-Core (>= 0.19, without query LoRA)
    fuses one more norm over h into linear_q_proj, 2,048 per layer, which is what a Megatron run allocates."""
    assert total_params(load_preset("deepseek-v2-lite")) == 15_706_484_224 + 27 * 2048


def test_deepseek_v3_checkpoint_count_decomposes_exactly():
    """DeepSeek-V3's safetensors hold 684,531,386,000 values: the 671.03 B model and its MTP layer as counted here;
    the MTP module's own copies of the shared embedding and output head (2 x 129,280 x 7,168, stored again); the
    FP32 ``weight_scale_inv`` of every FP8 linear, one per 128 x 128 block; and the routers' FP32
    ``e_score_correction_bias`` (256 per MoE layer; Megatron keeps it as a buffer, not a parameter). The two FP32
    kinds come to 41,555,600, the published dtype split's "F32: 41M"."""
    spec = load_preset("deepseek-v3")

    def blocks(rows: int, cols: int) -> int:
        return -(-rows // 128) * -(-cols // 128)

    attention = (blocks(1536, 7168) + blocks(128 * 192, 1536) + blocks(512 + 64, 7168) + blocks(128 * 256, 512)
                 + blocks(7168, 128 * 128))
    expert = 2 * blocks(2048, 7168) + blocks(7168, 2048)
    dense_mlp = 2 * blocks(18432, 7168) + blocks(7168, 18432)
    moe_layers = 58 + 1  # and the MTP layer, an MoE layer; eh_proj is stored in BF16
    scales = 62 * attention + 3 * dense_mlp + moe_layers * (256 + 1) * expert
    fp32 = scales + moe_layers * 256
    assert fp32 == 41_555_600
    stored_again = 2 * 129_280 * 7_168
    assert total_params(spec) == 671_026_404_352
    assert total_params(spec, include_mtp=True) + stored_again + fp32 == 684_531_386_000


@pytest.mark.parametrize("name,checkpoint", [
    ("qwen3-coder-480b-a35b", 480_154_875_392), ("mistral-nemo-12b", 12_247_782_400), ("yi-1.5-6b", 6_061_035_520),
    ("yi-1.5-9b", 8_829_407_232), ("yi-1.5-34b", 34_388_917_248), ("internlm2.5-7b", 7_737_708_544),
    ("internlm2.5-20b", 19_861_149_696), ("phi-3-mini-4k", 3_821_079_552), ("phi-3-medium-4k", 13_960_238_080),
    ("glm-4-9b", 9_399_951_360),
])
def test_recalled_presets_count_their_checkpoints_to_the_parameter(name, checkpoint):
    """Presets whose config.json was written from memory: each counts the released checkpoint's parameters exactly
    (safetensors metadata as public pages quote it; GLM-4-9B's own demo prints "9399951360 (9.4B) parameters")."""
    assert total_params(load_preset(name)) == checkpoint


@pytest.mark.parametrize("name,checkpoint", [
    # the whole checkpoint's parameter count (the Hugging Face model API's safetensors total, as public write-ups
    # quote it; the 35B-A3B's also as NVIDIA-NeMo/Automodel#3827 prints it after loading it)
    ("qwen3.5-0.8b", 873_438_784), ("qwen3.5-2b", 2_274_069_824), ("qwen3.5-4b", 4_659_865_088),
    ("qwen3.5-9b", 9_653_104_368), ("qwen3.5-27b", 27_781_427_952), ("qwen3.5-35b-a3b", 35_951_822_704),
    ("qwen3.5-122b-a10b", 125_086_497_008), ("qwen3.5-397b-a17b", 403_397_928_944),
    ("qwen3-next-80b-a3b", 81_324_862_720),
])
def test_qwen_hybrid_presets_count_their_checkpoints_to_the_parameter(name, checkpoint):
    """The preset's language model, vision tower and MTP layer, counted apart from the module shapes, sum to the
    released checkpoint exactly (the 122B-A10B's width and heads, chosen from its totals, are pinned by this)."""
    spec = load_preset(name)
    mtp = total_params(spec, include_mtp=True) - total_params(spec)
    assert model_params(spec)["params_total"] + mtp == checkpoint
    if name == "qwen3.5-35b-a3b":
        assert (model_params(spec)["params_vision"], mtp) == (446_571_248, 844_640_768)


def test_qwen3_vl_is_the_qwen3_decoder_inside_a_vl_wrapper():
    """Qwen3-VL-30B-A3B's language model is Qwen3-30B-A3B's (every field but the context length); its vision tower is
    the Qwen3.5 one plus three DeepStack mergers, counted and not planned: 31,070,754,032 in all, the released
    checkpoint's count exactly (its 13 safetensors files, as a public model report lists them with this config)."""
    spec = load("qwen3-vl-30b-a3b")
    base = load_preset("qwen3-30b-a3b")
    differ = {f.name for f in dataclasses.fields(spec) if getattr(spec, f.name) != getattr(base, f.name)}
    assert differ == {"name", "source", "notes", "max_position_embeddings", "vision_params"}
    counts = model_params(spec)
    assert (counts["params_total"], counts["params_vision"]) == (31_070_754_032, 538_631_408)
    assert counts["params_total"] - counts["params_vision"] == model_params(base)["params_total"]


def test_internlm2_is_llamas_layer_with_one_bias_flag():
    """InternLM2 (remote code ``modeling_internlm2.py``): wqkv, wo, w1, w3, w2 of Llama's shapes; its one ``bias``
    key puts a bias on all five: 2 * (4096 + 2 * 1024) + 4096 + 2 * 14336 + 4096 = 43,008 per layer more."""
    plain = load_preset("internlm2.5-7b")
    assert model_params(plain)["params_total"] == 7_737_708_544  # the card's 7.74B
    cfg = dict(preset_info("internlm2.5-7b")["hf"], bias=True)
    biased = spec_from_hf_config(cfg)
    assert biased.add_bias_linear and biased.add_qkv_bias and not biased.ignored_features
    assert model_params(biased)["params_total"] - model_params(plain)["params_total"] == 32 * 43_008


def test_chatglm_is_megatrons_gpt_layer_under_megatrons_names():
    """GLM-4-9B's config keeps Megatron's argument names (num_layers, ffn_hidden_size, multi_query_group_num, ...):
    read as the layer they name, 9.40B as the card says; a layer ChatGLM can switch to and megasolve does not build
    (post-LN residuals, LayerNorm) is refused, not planned as something else."""
    spec = load_preset("glm-4-9b")
    assert (spec.num_layers, spec.num_query_groups, spec.kv_channels, spec.rotary_percent) == (40, 2, 128, 0.5)
    assert spec.add_qkv_bias and not spec.add_bias_linear and not spec.ignored_features
    # 40 x (4096 x (4096 + 2 x 2 x 128) + 4608 qkv bias + 4096 x 4096 + 3 x 4096 x 13696 + 2 x 4096 norms) + 4096
    # (final norm) + 2 x 151552 x 4096 (untied embedding and output)
    layer = 4096 * (4096 + 512) + 4608 + 4096 * 4096 + 3 * 4096 * 13696 + 2 * 4096
    assert model_params(spec)["params_total"] == 40 * layer + 4096 + 2 * 151552 * 4096 == 9_399_951_360
    for key, value in (("apply_residual_connection_post_layernorm", True), ("rmsnorm", False)):
        with pytest.raises(ConfigError, match=key):
            spec_from_hf_config(dict(preset_info("glm-4-9b")["hf"], **{key: value}))


def test_nemotron_h_is_read_as_megatron_core_builds_it():
    spec = load("nemotron-h-8b")
    assert spec.hybrid_pattern.count("M") == 24 and spec.position_embedding_type == "none" and not spec.swiglu
    # 24 Mamba-2 layers of 109,640,064 + 4 attention layers of 4096*(4096+2*1024) + 4096*4096 + 4096
    # + 24 squared-ReLU MLPs of 2*4096*21504 + 4096 + untied 131072 x 4096 embedding and output + final norm
    assert model_params(spec)["params_total"] == 24 * 109_640_064 + 4 * 41_947_136 + 24 * 176_164_864 \
        + 2 * 131072 * 4096 + 4096
    result = CliRunner().invoke(cli, ["estimate", "-m", str(CONFIGS / "nemotron-h-8b.json"), "-n", "8", "-g", "h100",
                                      "--format", "json"])
    assert result.exit_code in (0, 1), result.output  # 1: the default layout does not fit (an outcome)
    out = json.loads(result.output)
    assert out["memory"]["stages"][0]["layers"] == 52 and out["time"]["step_s"] > 0


@pytest.mark.parametrize("name", ["nemotron-h-8b", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b"])
def test_hybrid_configs_are_planned(name):
    """The hybrid Mamba-2 and gated-DeltaNet configs solve (issue 15, deliverable 4)."""
    spec = load(name)
    spec.require_plannable()
    gpus = "8" if name.startswith("nemotron") else "64"
    result = CliRunner().invoke(cli, ["-m", str(CONFIGS / f"{name}.json"), "-n", gpus, "-g", "h100", "--top-k", "1",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["layouts"]  # (notes go to stderr)

@pytest.mark.parametrize("name", [n for n in preset_names() if "official_total_b" in preset_info(n)])
def test_new_presets_match_the_model_cards_within_one_percent(name):
    total = model_params(load_preset(name))["params_total"] / 1e9
    assert total == pytest.approx(preset_info(name)["official_total_b"], rel=TOLERANCE.get(name, 0.01))


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
def test_active_params_exclude_the_input_embedding_as_the_gpt_oss_card_counts(name):
    # arXiv 2508.10925 Table 1: 3.61B / 5.13B active
    assert model_params(load_preset(name))["params_active"] / 1e9 == pytest.approx(
        preset_info(name)["official_active_b"], abs=0.006)


def test_mistral_v01_window_cuts_attention_flops_at_32k():
    v1, v3 = load("mistral-7b-v0.1"), load("mistral-7b-v0.3")
    assert v1.window_size == 4096 and v1.window_pattern is None and v3.window_size is None
    # per token per layer at s = 32768: linear 6*(4096*6144 + 4096*4096) + 6*3*4096*14336 = 1308.6 MFLOP;
    # attention 6*32*128*32768 = 805.3 MFLOP full causal, x 0.2344 with the 4096 window (pairs
    # 4097*4098/2 + 28670*4097 of 32768*32769/2) = 188.8 MFLOP: (805.3 - 188.8) / 2113.9 = 29.2 % fewer
    logits = (6 * 4096 * 32768, 6 * 4096 * 32000)  # the two (padded) vocabularies' output layer, per token
    per_layer = [(model_flops_per_sequence(s, 32768) / 32768 - v) / 32 for s, v in zip((v3, v1), logits)]
    assert 1 - per_layer[1] / per_layer[0] == pytest.approx(0.2916, abs=0.0005)


def test_window_patterns_follow_each_family():
    assert sum(load("gemma-3-27b-it").window_pattern) == 52  # 1,024 window on 52 of 62 layers
    assert load("gpt-oss-20b").window_pattern[:4] == (1, 0, 1, 0)  # layer_types: sliding, full, ...
    assert load("gemma-2-9b").window_pattern[:2] == (1, 0)  # Gemma2DecoderLayer: even layers slide
    assert load("qwen2.5-vl-7b-instruct").window_size is None  # use_sliding_window: false
    scout = load("llama-4-scout-17b-16e")
    assert scout.attention_chunk_size == 8192 and scout.chunk_pattern[:4] == (1, 1, 1, 0)
    assert scout.no_rope_pattern[:4] == (0, 0, 0, 1) and scout.qk_l2_norm


def test_kimi_k2_is_read_by_its_architecture():
    spec = load("kimi-k2-instruct")
    assert spec.mla is not None and spec.moe.num_experts == 384
    assert any("read as 'deepseek_v3'" in note for note in spec.notes)


def test_gemma3_vocab_default_is_filled_and_said():
    spec = load("gemma-3-27b-it")
    assert spec.vocab_size == 262_208
    assert any("vocab_size not set" in note for note in spec.notes)
    assert spec.vision_params == 423_060_336 and any("vision tower" in note for note in spec.notes)


def test_unknown_config_key_is_reported_not_dropped():
    cfg = json.loads((CONFIGS / "mistral-7b-v0.3.json").read_text())
    spec = spec_from_hf_config({**cfg, "attention_sparsity": 0.5})
    assert any(item.startswith("attention_sparsity=0.5") for item in spec.ignored_features)
    gemma2 = load("gemma-2-9b")
    assert any(item.startswith("attn_logit_softcapping") for item in gemma2.ignored_features)


def test_attention_sinks_are_one_parameter_per_head_split_over_tp():
    from dataclasses import replace

    spec = load_preset("gpt-oss-20b")
    assert spec.softmax_type == "learnable"
    vanilla = replace(spec, softmax_type="vanilla")
    assert attention_params(spec, tp=4).tp_sharded - attention_params(vanilla, tp=4).tp_sharded == 64 // 4


def test_megatron_yaml_unknown_key_is_an_error_with_the_closest_name():
    with pytest.raises(ConfigError, match="did you mean window_size"):
        spec_from_megatron_args({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
                                 "windw_size": [8, 0]})
    with pytest.raises(ConfigError, match="give the layers as hybrid_override_pattern"):
        spec_from_megatron_args({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
                                 "hybrid_attention_ratio": 0.1})


def test_megatron_yaml_window_flags_match_the_hf_reader():
    hf = load_preset("gpt-oss-20b")
    yaml_spec = spec_from_megatron_args({
        "num_layers": 24, "hidden_size": 2880, "ffn_hidden_size": 2880, "num_attention_heads": 64,
        "num_query_groups": 8, "kv_channels": 64, "swiglu": True, "normalization": "RMSNorm",
        "add_bias_linear": True, "add_qkv_bias": True, "untie_embeddings_and_output_weights": True,
        "position_embedding_type": "rope", "vocab_size": 201088, "num_moe_experts": 32, "moe_router_topk": 4,
        "moe_ffn_hidden_size": 2880, "window_size": "128,0", "window_attn_skip_freq": 2,
        "softmax_type": "learnable"})
    assert yaml_spec.window_pattern == hf.window_pattern and yaml_spec.window_size == hf.window_size
    assert [s.total for s in stage_params(yaml_spec, Layout(tp=2, pp=2, etp=1))] == \
        [s.total for s in stage_params(hf, Layout(tp=2, pp=2, etp=1))]
    # both readers say what the sinks need to run as costed (cuDNN >= 9.13.1, else TE's unfused attention)
    assert [n for n in yaml_spec.notes if "cuDNN 9.13.1" in n] == [n for n in hf.notes if "cuDNN 9.13.1" in n] != []


def test_launch_flags_carry_the_attention_variants():
    spec = load_preset("gpt-oss-120b")
    cluster = resolve_cluster()
    flags = megatron_flags(spec, cluster, Workload(seq_length=4096, global_batch_size=64), Layout(cp=2, dp=4))
    # sinks (softmax_type learnable) run under CP only with a2a (TE attn_forward_func_with_cp L5065-5067),
    # which also runs the windows; all_gather would be refused at the first attention call
    assert {"--window-size 128,0", "--window-attn-skip-freq 2", "--softmax-type learnable",
            "--cp-comm-type a2a"} <= set(flags)
    glm = launch_text("bridge", load_preset("glm-4.5-air"), cluster, Workload(seq_length=4096, global_batch_size=64),
                      Layout(dp=8))
    assert "model.rotary_percent=0.5" in glm


def resolve_cluster():
    from megasolve.cli.options import build_cluster

    return build_cluster(gpus=8, gpu="h100", gpus_per_node=None, nvlink_domain=None, nic_gbps=None,
                         cluster_file=None)


def test_estimate_json_shows_model_params_and_ignored_features(tmp_path):
    result = CliRunner().invoke(cli, ["estimate", "-m", str(CONFIGS / "gemma-2-9b.json"), "-n", "8", "-g", "h100",
                                      "--tp", "4", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model_params"]["params_total"] == 9_241_404_928  # 42 * (3584*(4096+2*2048) + 4096*3584 + 3*3584*14336 + 2*3584) + 256000*3584 + 3584
    assert data["ignored_features"] and data["ignored_features"][0].startswith("attn_logit_softcapping")
    assert data["model_notes"] == ["ignored: " + data["ignored_features"][0]]


def test_resolve_model_reads_a_nested_llama4_config(tmp_path):
    folder = tmp_path / "scout"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-4-scout-17b-16e.json").read_text())
    assert resolve_model(str(folder)).spec.moe.num_experts == 16


def test_lightning_attention_is_refused_with_why_no_megatron_launch_can_train_it():
    cfg = {"architectures": ["MiniMaxText01ForCausalLM"], "model_type": "minimax", "num_hidden_layers": 8}
    with pytest.raises(ConfigError, match="Megatron-Core has no lightning-attention layer") as exc:
        spec_from_hf_config(cfg)
    assert "YAML describes attention + MLP/MoE stacks only" in str(exc.value)  # never points at the YAML


# ---------------------------------------------------------------------------- readers added 2026-12-07
# Configs below are each class's released widths where a preset holds them, else transformers 5.25's configuration
# defaults (``models/<type>/configuration_<type>.py``) with the fields a released config.json sets: the tests check
# what each reader maps, not a checkpoint's size (the presets' sizes are tests/test_params.py's).
def _hf(**fields):
    return spec_from_hf_config(fields, name=fields["model_type"])


def test_nemotron_dense_is_layernorm_squared_relu_with_half_rope():
    """Nemotron-4 (models/nemotron; Megatron-Bridge nemotron_bridge.py: LayerNorm, squared ReLU, not gated): the 15B
    of arXiv:2402.16819 is 3.2B of embeddings and 12.5B of layers; partial rotary 0.5 is the class default, said."""
    spec = load_preset("nemotron-4-15b")
    assert (spec.swiglu, spec.normalization, spec.rotary_percent, spec.add_bias_linear) == (False, "LayerNorm", 0.5,
                                                                                              False)
    params = model_params(spec)
    embeddings = 2 * 256000 * 6144
    assert embeddings / 1e9 == pytest.approx(3.15, abs=0.01)
    assert (params["params_total"] - embeddings) / 1e9 == pytest.approx(12.5, abs=0.05)
    cfg = {k: v for k, v in preset_info("nemotron-4-15b")["hf"].items() if k != "partial_rotary_factor"}
    spec = spec_from_hf_config(cfg)
    assert spec.rotary_percent == 0.5 and any("partial_rotary_factor not set" in n for n in spec.notes)
    assert model_params(load_preset("nemotron-4-340b"))["params_total"] / 1e9 == pytest.approx(341.03, abs=0.01)


def test_olmoe_is_all_moe_with_its_expert_width_in_intermediate_size():
    spec = load_preset("olmoe-1b-7b")
    assert spec.moe.layer_pattern == (1,) * 16 and spec.moe.expert_ffn_hidden_size == 1024
    assert not spec.moe.shared_expert_ffn_hidden_size and spec.qk_layernorm
    assert any("--tp 1" in n for n in spec.notes)  # the full-width QK-norm Megatron-Bridge builds is not TP-split
    assert model_params(spec)["params_total"] / 1e9 == pytest.approx(6.92, abs=0.005)  # arXiv:2409.02060: 6.9B


def test_glm47_flash_is_mla_moe_with_its_dense_layers_named():
    spec = load_preset("glm-4.7-flash")
    assert spec.mla is not None and (spec.mla.q_lora_rank, spec.mla.qk_head_dim, spec.mla.v_head_dim) == (768, 192, 256)
    assert spec.moe.layer_pattern == (0,) + (1,) * 46 and spec.moe.shared_expert_ffn_hidden_size == 1536
    assert spec.mtp_num_layers == 1 and spec.qk_layernorm
    cfg = {k: v for k, v in preset_info("glm-4.7-flash")["hf"].items() if k != "first_k_dense_replace"}
    assert spec_from_hf_config(cfg).moe.layer_pattern == spec.moe.layer_pattern  # the class default, said
    assert any("first layer dense" in n for n in spec_from_hf_config(cfg).notes)
    named = spec_from_hf_config(dict(cfg, mlp_layer_types=["dense"] * 3 + ["sparse"] * 44))
    assert named.moe.layer_pattern == (0,) * 3 + (1,) * 44
    with pytest.raises(ConfigError, match="mlp_layer_types"):
        spec_from_hf_config(dict(cfg, mlp_layer_types=["dense"] * 3))


def test_ministral3_is_mistrals_layer_inside_the_mistral3_wrapper():
    text = dict(model_type="ministral3", hidden_size=4096, intermediate_size=14336, num_hidden_layers=34,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=131072,
                max_position_embeddings=262144, tie_word_embeddings=False)
    wrapped = spec_from_hf_config({"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
                                   "text_config": text})
    plain = spec_from_hf_config(dict(text, model_type="mistral"))
    assert dataclasses.replace(wrapped, name=plain.name) == plain and not wrapped.ignored_features
    windowed = _hf(model_type="ministral", hidden_size=4096, intermediate_size=12288, num_hidden_layers=4,
                   num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=131072,
                   sliding_window=32768, layer_types=["sliding_attention", "full_attention"] * 2,
                   max_position_embeddings=32768)
    assert windowed.window_pattern == (1, 0, 1, 0)


def test_plain_mlp_and_post_norm_readers_say_what_they_cost_as():
    apertus = _hf(model_type="apertus", hidden_size=4096, intermediate_size=21504, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, vocab_size=131072, hidden_act="xielu",
                  max_position_embeddings=65536)
    assert not apertus.swiglu and apertus.qk_layernorm and any("xIELU" in n for n in apertus.notes)
    # one up and one down projection: 2 x 4096 x 21504 a layer, where a gated MLP would have 3
    gated = dataclasses.replace(apertus, swiglu=True)
    assert total_params(gated) - total_params(apertus) == 32 * 4096 * 21504
    exaone = _hf(model_type="exaone4", hidden_size=5120, intermediate_size=27392, num_hidden_layers=64,
                 num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=102400, sliding_window=4096,
                 sliding_window_pattern="LLLG", max_position_embeddings=131072)
    assert exaone.window_pattern == (1, 1, 1, 0) * 16 and exaone.qk_layernorm
    assert any("normalises after" in n for n in exaone.notes)
    periodic = _hf(model_type="exaone4", hidden_size=256, intermediate_size=512, num_hidden_layers=8,
                   num_attention_heads=4, vocab_size=1000, sliding_window=128, sliding_window_pattern=4)
    assert periodic.window_pattern == (1, 1, 1, 0) * 2


def test_seed_oss_and_dots1_read_their_biases_norms_and_experts():
    seed = _hf(model_type="seed_oss", hidden_size=5120, intermediate_size=27648, num_hidden_layers=64,
               num_attention_heads=80, num_key_value_heads=8, head_dim=128, vocab_size=155136, attention_bias=True,
               attention_out_bias=False, mlp_bias=False, max_position_embeddings=524288)
    assert seed.add_qkv_bias and not seed.add_bias_linear
    assert not any(n.startswith("attention_out_bias") for n in seed.notes)
    out_bias = _hf(model_type="seed_oss", hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                   num_attention_heads=4, vocab_size=1000, attention_bias=True, attention_out_bias=True)
    assert any(n.startswith("attention_out_bias") for n in out_bias.notes)
    dots = _hf(model_type="dots1", hidden_size=4096, intermediate_size=10944, moe_intermediate_size=1408,
               num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=32, n_shared_experts=2,
               n_routed_experts=128, num_experts_per_tok=6, first_k_dense_replace=1, vocab_size=152064,
               max_position_embeddings=32768)
    assert dots.mla is None and dots.qk_layernorm and dots.moe.layer_pattern == (0,) + (1,) * 61
    assert dots.moe.shared_expert_ffn_hidden_size == 2 * 1408
    # dots.llm1's card: 142B total, 14B active
    assert model_params(dots)["params_total"] / 1e9 == pytest.approx(142, rel=0.01)


def test_mimo_reads_qwen2s_layer_with_its_mtp_layers():
    """MiMo (MiMoConfig(Qwen2Config), Megatron-Bridge models/mimo/mimo_bridge.py): q / k / v biases whether or not the
    config says attention_bias (Qwen2Attention always biases them), num_nextn_predict_layers MTP layers, Qwen2's
    sliding-window switch."""
    mimo = load_preset("mimo-7b")
    assert (mimo.add_qkv_bias, mimo.add_bias_linear, mimo.mtp_num_layers, mimo.window_size) == (True, False, 1, None)
    assert mimo.untie_embeddings_and_output_weights and mimo.num_query_groups == 8
    assert model_params(mimo)["params_total"] / 1e9 == pytest.approx(7.62, abs=0.005)
    bare = _hf(model_type="mimo", hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1000, num_nextn_predict_layers=2)
    assert bare.add_qkv_bias and bare.mtp_num_layers == 2 and not bare.ignored_features
    windowed = _hf(model_type="mimo", hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                   num_attention_heads=4, vocab_size=1000, use_sliding_window=True, sliding_window=128,
                   max_window_layers=2)
    assert windowed.window_size == 128 and windowed.window_pattern == (0, 0, 1, 1)


def test_launch_exports_write_the_activation_they_cannot_infer():
    """Squared ReLU is a Megatron-LM flag (ARG L2448, argument_utils.py L320-322; with the biases off Megatron-LM turns
    the GeLU fusion off, ARG L1605-1606, so the flag launches); the config formats cannot set a callable and say so.
    Apertus' xIELU has no upstream flag: the command says it."""
    cluster, workload = resolve_cluster(), Workload(seq_length=4096, global_batch_size=64)
    nemotron = load_preset("nemotron-4-15b")
    flags = megatron_flags(nemotron, cluster, workload, Layout(tp=8))
    assert {"--squared-relu", "--normalization LayerNorm", "--rotary-percent 0.5", "--disable-bias-linear"} <= set(flags)
    assert "--swiglu" not in flags
    bridge = launch_text("bridge", nemotron, cluster, workload, Layout(tp=8))
    assert any(line.startswith("# not expressible in bridge") and "squared_relu" in line for line in bridge.splitlines())
    assert "model.squared_relu" not in bridge
    assert nemotron.activation == spec_from_megatron_args({"num_layers": 32, "hidden_size": 6144,
                                                           "num_attention_heads": 48, "squared_relu": True,
                                                           "vocab_size": 256000}).activation == "squared_relu"
    apertus = _hf(model_type="apertus", hidden_size=512, intermediate_size=2048, num_hidden_layers=2,
                  num_attention_heads=8, num_key_value_heads=8, vocab_size=1000, hidden_act="xielu")
    assert "xIELU" in launch_text("megatron", apertus, cluster, workload, Layout(dp=8))
    # a Nemotron config's own hidden_act: relu2 (NemotronConfig's default), a GeLU (Megatron's default, no flag), or
    # another, costed and launched as squared ReLU with a note
    small = dict(model_type="nemotron", hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4, vocab_size=1000)
    assert _hf(**small).activation == _hf(**small, hidden_act="relu2").activation == "squared_relu"
    gelu = _hf(**small, hidden_act="gelu_pytorch_tanh")
    assert gelu.activation == "" and not gelu.swiglu
    assert "--squared-relu" not in megatron_flags(gelu, cluster, workload, Layout(dp=8))
    relu = _hf(**small, hidden_act="relu")
    assert relu.activation == "squared_relu" and any(n.startswith("hidden_act 'relu'") for n in relu.notes)


def test_hunyuan3_and_exaone_moe_read_their_shared_experts_and_dense_layers():
    """HY V3 / EXAONE MoE (transformers 5.25 class defaults): routed experts plus num_shared_experts of the expert
    width; the dense layers from mlp_layer_types, else first_k_dense_replace, else the class default (one, said)."""
    hy = dict(architectures=["HYV3ForCausalLM"], model_type="hy_v3", vocab_size=120832, hidden_size=4096,
              intermediate_size=13312, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
              num_experts=192, num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=1536,
              max_position_embeddings=131072, tie_word_embeddings=False)
    spec = spec_from_hf_config(hy)
    assert spec.moe.layer_pattern == (0,) + (1,) * 79 and spec.moe.shared_expert_ffn_hidden_size == 1536
    assert spec.qk_layernorm and any("first layer dense" in n for n in spec.notes)
    # per MoE layer: 192 routed + 1 shared expert of 3 x 4096 x 1536, and the 4096 x 192 router
    dense = spec_from_hf_config(dict(hy, mlp_layer_types=["dense"] * 80))
    assert total_params(spec) - total_params(dense) == 79 * (193 * 3 * 4096 * 1536 + 4096 * 192 - 3 * 4096 * 13312)
    exaone = spec_from_hf_config(dict(architectures=["ExaoneMoEForCausalLM"], model_type="exaone_moe", vocab_size=102400,
                                      hidden_size=4096, intermediate_size=16384, num_hidden_layers=8,
                                      num_attention_heads=32, num_key_value_heads=8, head_dim=128, num_experts=64,
                                      num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=1024,
                                      first_k_dense_replace=2, sliding_window=4096, sliding_window_pattern=4,
                                      max_position_embeddings=32768))
    assert exaone.moe.layer_pattern == (0, 0) + (1,) * 6 and exaone.window_pattern == (1, 1, 1, 0) * 2
    assert not exaone.notes and not exaone.ignored_features


def test_ling_2_reads_as_megatron_bridges_bailing_bridge_builds_it():
    """Ling 2.0 (``BailingMoeV2ForCausalLM``, released as model_type bailing_moe; the config class Megatron-Bridge ships
    in models/bailing): Ling-mini-2.0's widths give its card's 16B total / 1.4B active; group-limited routing, QK-norm,
    partial RoPE, and the o_proj bias that Megatron-Core cannot hold alone is said."""
    cfg = dict(architectures=["BailingMoeV2ForCausalLM"], model_type="bailing_moe", vocab_size=157184, hidden_size=2048,
               intermediate_size=5120, num_hidden_layers=20, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
               use_qkv_bias=False, use_bias=False, num_experts=256, num_shared_experts=1, num_experts_per_tok=8,
               n_group=8, topk_group=4, moe_intermediate_size=512, first_k_dense_replace=1, use_qk_norm=True,
               partial_rotary_factor=0.5, num_nextn_predict_layers=1, max_position_embeddings=32768,
               tie_word_embeddings=False, moe_router_enable_expert_bias=True)
    spec = spec_from_hf_config(cfg)
    assert (spec.moe.router_num_groups, spec.moe.router_group_topk, spec.rotary_percent) == (8, 4, 0.5)
    assert spec.qk_layernorm and not spec.add_qkv_bias and spec.mtp_num_layers == 1 and not spec.ignored_features
    assert total_params(spec) / 1e9 == pytest.approx(16.26, abs=0.01)
    assert active_params(spec, include_input_embedding=True) / 1e9 == pytest.approx(1.4, abs=0.05)  # the card counts it
    biased = spec_from_hf_config(dict(cfg, use_qkv_bias=True, use_bias=True))
    assert biased.add_qkv_bias and not biased.add_bias_linear and any(n.startswith("use_bias") for n in biased.notes)


def test_olmoe_full_width_qk_norm_is_planned_at_tp_1_only():
    """Megatron-Bridge's OLMoESelfAttention builds q / k norms over all heads at the full width: a TP-split query cannot
    take them, so TP > 1 is refused (exit 2, the rule and its fix) and the solver plans TP 1."""
    result = CliRunner().invoke(cli, ["estimate", "-m", "olmoe-1b-7b", "-n", "8", "-g", "h100", "--tp", "2"])
    text = str(result.exception)  # the console entry point (cli.main.main) prints it and exits 2
    assert isinstance(result.exception, MegasolveError) and "--tp=2" in text and "use --tp 1" in text
    result = CliRunner().invoke(cli, ["-m", "olmoe-1b-7b", "-n", "16", "-g", "h100", "--top-k", "3", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {row["layout"]["tp"] for row in json.loads(result.stdout)["layouts"]} == {1}
    assert not load_preset("qwen3-30b-a3b").qk_layernorm_all_heads  # per-head QK-norm: any TP the heads allow
