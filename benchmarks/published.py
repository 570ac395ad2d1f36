#!/usr/bin/env python3
"""Published Megatron training runs as megasolve inputs: (ModelSpec, Cluster, Workload, Layout, measured).

Reads ``../shared/data/calibration_runs.yaml`` (relative to the repository root) and
``benchmarks/bridge_extra_runs.yaml`` (the Megatron-Bridge table rows the shared file does not hold;
``--data PATH`` to read one other file instead) and maps every usable throughput record to megasolve's types. Records that cannot
be mapped are skipped with a counted reason. Run it to see the mapping::

    python benchmarks/published.py            # summary: used / skipped by reason / split sizes
    python benchmarks/published.py --verbose  # one line per record with the assumptions made

Mapping rules (each applied rule is recorded in ``PublishedRun.assumptions``):

* Model: the preset of ``models/presets.yaml`` where the record is a known preset (Llama 2/3/3.1,
  Qwen3 MoE, DeepSeek-V3, GPT-OSS 120B with its banded layers, sinks and biased experts), else built
  from the record's ``model`` block. GPT sizes of Narayanan
  2021 / Korthikanti 2022 / the Megatron-LM README and NeMo GPT-3 are GPT-style (LayerNorm, GeLU,
  learned positions, tied embeddings, biases; vocab from the record, 51200 where it is null).
  Nemotron-3/4 use squared ReLU (not gated), LayerNorm, RoPE, untied, no biases.
  DeepSeek-V3 in Megatron-Bridge runs one MTP layer (the published TFLOP/s per token only match the
  Megatron formula with it; checked by ``flops_per_token_ratio``); Kimi K2 none (its config and Bridge's
  Kimi pipeline layouts have no MTP stage).
* Hardware: A100-SXM-80GB -> a100-80g, H100-SXM-80GB -> h100, B200, B300, GB200, GB300.
  GB200/GB300 (NVL72 racks) jobs of >= 64 GPUs use NVLink domains of 64 GPUs (16 of the 18 compute
  trays of a rack, the usual block size for power-of-two jobs).
* Layout: missing tp/pp/vpp/cp/ep/mbs -> 1 (noted); missing dp -> num_gpus / (tp*pp*cp); etp
  missing -> 1 for MoE (Megatron-Bridge recipes set ``expert_tensor_parallel_size=1``).
  Sequence parallel and the distributed optimizer are unknown for Bridge / NeMo / README tables:
  assumed as Megatron-Bridge recipes use them (SP on when tp > 1, distributed optimizer on).
  Narayanan 2021 / Korthikanti 2022 predate the distributed optimizer (off); SP as the record says.
  Recompute: as the record says; unknown -> full for Narayanan 2021 (the paper recomputes
  activations, section 3.5), none otherwise.
* Measured tokens/s/GPU: the record's value; else ``gbs*seq/step_time/num_gpus``; else from
  TFLOP/s with the source's own FLOP formula: Narayanan 2021 Eq. 3 (hardware FLOPs, includes the
  recompute forward: ``96*B*s*l*h^2*(1 + s/6h + V/(16*l*h))``), Megatron-LM README r0.8 and
  Korthikanti MFU (``72*B*s*l*h^2*(1 + s/6h + V/(12*l*h))``, full attention).
* Skipped: hybrid Mamba models without a preset (Nemotron 3 Nano and Super map to theirs), LoRA / SFT (not pretraining),
  ZeRO-3 (not a Megatron layout), layer micro-benchmarks (unit checks in
  tests/test_time.py), feasibility-only and memory-only records, layouts not stated, Megatron-Bridge MoE rows
  whose release recipe ``bridge_moe_recipes.yaml`` does not hold, expert grids that do not divide the GPUs.
* Split: deterministic, ``sha256(group) % 10 < 3`` -> holdout (~30%), where ``group`` is the
  record's ``series_group`` (same model/system/precision across releases), else its
  ``comparison_group``, else its id, so a series never straddles fit and holdout.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from megasolve.cost.compute import model_flops_per_sequence
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import total_params
from megasolve.models.presets import load_preset
from megasolve.models.spec import MLASpec, MoESpec, ModelSpec
from megasolve.solver.space import layout_candidates
from megasolve.topology.cluster import Cluster

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "calibration_runs.yaml"
EXTRA_DATA = Path(__file__).resolve().parent / "bridge_extra_runs.yaml"
HOLDOUT_BUCKETS = 3  # of 10

GPU_NAMES = {"A100-SXM-80GB": "a100-80g", "H100-SXM-80GB": "h100", "B200": "b200", "B300": "b300",
             "GB200": "gb200", "GB300": "gb300"}
GPU_FAMILY = {"a100-80g": "ampere", "h100": "hopper", "b200": "blackwell", "b300": "blackwell",
              "gb200": "blackwell", "gb300": "blackwell", "mi300x": "cdna3", "mi325x": "cdna3"}
LOG_RUNS = Path(__file__).resolve().parent / "log_runs.yaml"
LOGS = REPO / "tests" / "data" / "logs"
PRESETS = {"Llama 3.1 405B": "llama-3.1-405b", "Llama 3 70B": "llama-3.1-70b", "Llama 3 8B": "llama-3.1-8b",
           "Llama 2 7B": "llama-2-7b", "Llama 2 13B": "llama-2-13b", "Llama 2 70B": "llama-2-70b",
           "Qwen3-30B-A3B": "qwen3-30b-a3b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
           "DeepSeek-V3 671B": "deepseek-v3", "GPT-OSS 120B": "gpt-oss-120b",
           "Nemotron 3 Nano (30B-A3B hybrid Mamba-Transformer MoE)": "nemotron-3-nano-30b-a3b",
           "Nemotron 3 Super (~120B hybrid Mamba-Transformer MoE)": "nemotron-3-super-120b-a12b"}


# Megatron-Bridge's Nemotron 3 Super NVFP4 recipes' per-module precision (perf_recipes/nemotronh/te_quant.cfg @067f987,
# loaded as model.quant_recipe by the B200 / B300 / GB200 / GB300 nvfp4 configs; scripts/performance/configs/nemotronh/
# nemotron_3_llm_pretrain.py L48-51 @v0.4.0): its matchers in order, as ``Workload.module_precision``
NEMOTRON_3_SUPER_NVFP4_MODULES = (("*.linear_qkv", "bf16"), ("*.linear_proj", "bf16"),
                                  ("*mlp.fc[12]_latent_proj", "bf16"), ("mtp.*", "bf16"), ("*mixer.out_proj", "mxfp8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One published throughput measurement, mapped to megasolve's types."""

    id: str
    source_group: str
    software: str
    spec: ModelSpec
    cluster: Cluster
    workload: Workload
    layout: Layout
    measured_tokens_per_s_per_gpu: float
    measured_from: str  # "tokens_per_sec_per_gpu" | "step_time_s" | "tflops_per_gpu (...)" | "mfu_pct (...)"
    comparison_group: str | None
    series_group: str | None
    split: str  # "fit" | "holdout"
    assumptions: tuple[str, ...] = field(default=())
    reported_tflops_per_gpu: float | None = None

    @property
    def kind(self) -> str:
        return "moe" if self.spec.is_moe else "dense"

    @property
    def gpu(self) -> str:
        return self.cluster.gpu.name

    @property
    def gpu_family(self) -> str:
        return GPU_FAMILY[self.cluster.gpu.name]


class Skip(Exception):
    """A record that cannot be mapped; ``str(exc)`` is the counted reason."""


# ---------------------------------------------------------------------------- split
def split_of(record: dict[str, Any]) -> str:
    """``holdout`` for ~30% of the series / comparison groups, chosen by a stable hash."""
    group = record.get("series_group") or record.get("comparison_group") or record["id"]
    bucket = int(hashlib.sha256(group.encode()).hexdigest(), 16) % 10
    return "holdout" if bucket < HOLDOUT_BUCKETS else "fit"


# ---------------------------------------------------------------------------- model
def _gpt_style(m: dict[str, Any], vocab: int) -> ModelSpec:
    return ModelSpec(name=m["name"], num_layers=m["num_layers"], hidden_size=m["hidden_size"],
                     ffn_hidden_size=m["ffn_hidden_size"], num_attention_heads=m["num_attention_heads"],
                     num_query_groups=m.get("num_kv_heads") or m["num_attention_heads"],
                     kv_channels=m.get("head_dim"), vocab_size=vocab, untie_embeddings_and_output_weights=False,
                     swiglu=False, normalization="LayerNorm", add_bias_linear=True, add_qkv_bias=True,
                     position_embedding_type="learned_absolute", max_position_embeddings=m["seq_length"],
                     source="record model block (GPT-style)")


def _deepseek_like(m: dict[str, Any], first_dense: int, mtp: int) -> ModelSpec:
    mla = m["mla"]
    n = m["num_layers"]
    return ModelSpec(
        name=m["name"], num_layers=n, hidden_size=m["hidden_size"], ffn_hidden_size=m["ffn_hidden_size"],
        num_attention_heads=m["num_attention_heads"], num_query_groups=m["num_attention_heads"],
        vocab_size=m["vocab_size"], qk_layernorm=True,
        moe=MoESpec(num_experts=m["num_experts"], top_k=m["moe_topk"], expert_ffn_hidden_size=m["moe_ffn_hidden_size"],
                    shared_expert_ffn_hidden_size=m.get("shared_expert_ffn_hidden_size") or 0,
                    layer_pattern=tuple([0] * first_dense + [1] * (n - first_dense))),
        mla=MLASpec(q_lora_rank=mla["q_lora_rank"], kv_lora_rank=mla["kv_lora_rank"],
                    qk_head_dim=mla["qk_nope_head_dim"], qk_pos_emb_head_dim=mla["qk_rope_head_dim"],
                    v_head_dim=mla["v_head_dim"]),
        mtp_num_layers=mtp, source="record model block (DeepSeek-V3 architecture)")


def model_spec(record: dict[str, Any], notes: list[str]) -> ModelSpec:
    m = record["model"]
    name, family = m.get("name") or "", m.get("family")
    if m.get("type") == "hybrid_mamba_moe" and name not in PRESETS:
        raise Skip("hybrid Mamba-Transformer model (architecture not in the record, no preset)")
    bridge = record["source_group"] == "megatron_bridge_perf_summary"
    if name in PRESETS:
        spec = load_preset(PRESETS[name])
        if name == "DeepSeek-V3 671B" and not bridge:
            spec = replace(spec, mtp_num_layers=0)
        recipe = bridge_moe_recipe(record)
        if recipe is not None and recipe.get("mtp_num_layers"):
            # Nemotron 3 Super's Bridge recipe: mtp_num_layers 2 with mtp_use_repeated_layer (one MTP block
            # run twice: weights once, FLOPs and activations per depth)
            repeated = bool(recipe.get("mtp_use_repeated_layer"))
            spec = replace(spec, mtp_num_layers=recipe["mtp_num_layers"], mtp_use_repeated_layer=repeated)
            notes.append(f"{recipe['mtp_num_layers']} MTP depths (the recipe at {recipe['revision']}"
                         + ("; one repeated layer)" if repeated else ")"))
        notes.append(f"model: preset {PRESETS[name]}" + (f" (+{spec.mtp_num_layers} MTP depths, Bridge recipe)"
                                                          if spec.mtp_num_layers else ""))
        return spec
    if family == "deepseek" and m.get("mla"):  # Kimi K2
        # no MTP: Kimi K2's config has num_nextn_predict_layers 0 and Megatron-Bridge's Kimi layouts hold no
        # MTP stage (recipes/kimi/kimi_k2.py _get_kimi_k2_pipeline_layout @v0.4.2: "... ['decoder', 'loss']")
        first_dense = 1 if "first 1 layer dense" in (m.get("moe_layer_pattern") or "") else 3
        notes.append("model: DeepSeek-V3 architecture from the record, no MTP (Kimi K2)")
        return _deepseek_like(m, first_dense, 0)
    if family == "nemotron":
        notes.append("model: Nemotron (squared ReLU, LayerNorm, RoPE, untied) from the record")
        return ModelSpec(name=name, num_layers=m["num_layers"], hidden_size=m["hidden_size"],
                         ffn_hidden_size=m["ffn_hidden_size"], num_attention_heads=m["num_attention_heads"],
                         num_query_groups=m["num_kv_heads"], kv_channels=m["head_dim"], vocab_size=m["vocab_size"],
                         swiglu=False, normalization="LayerNorm", source="record model block (Nemotron)")
    if family in ("gpt", "gpt3"):
        vocab = m.get("vocab_size")
        if vocab is None:
            vocab = 51200
            notes.append("model: vocab not stated, assumed 51200 (NeMo GPT-3 NullTokenizer)")
        notes.append("model: GPT-style from the record")
        return _gpt_style(m, vocab)
    if family == "mixtral":
        raise Skip("memory-only record (Mixtral estimator validation model, no throughput)")
    raise Skip(f"model family {family!r} not mapped")


# ---------------------------------------------------------------------------- layout and workload
def _int_or(value: Any, default: int, name: str, notes: list[str]) -> int:
    if value is None:
        notes.append(f"{name} not stated, assumed {default}")
        return default
    if not isinstance(value, int):
        raise Skip(f"non-numeric {name}")
    return value


# Megatron-Bridge perf recipes that run Megatron-FSDP also offload the activations of the first N layers
# to host memory, which the performance-summary rows do not state. N from
# ``src/megatron/bridge/perf_recipes/llama/{gb200,gb300}/llama3.py`` at 067f987df (the commit the records
# were taken from): ``llama3_70b_pretrain_64gpu_{gb200,gb300}_{bf16,fp8cs}_config``.
RECIPE_CPU_OFFLOAD_LAYERS = {
    ("megatron_bridge_perf_summary", "Llama 3 70B", "GB300", "fp8"): 20,
    ("megatron_bridge_perf_summary", "Llama 3 70B", "GB300", "bf16"): 30,
    ("megatron_bridge_perf_summary", "Llama 3 70B", "GB200", "fp8"): 40,
    ("megatron_bridge_perf_summary", "Llama 3 70B", "GB200", "bf16"): 20,
}


# Sources whose recipes reduce gradients in bf16 (Megatron's ``--grad-reduce-in-bf16``):
# * NeMo 1.x (container 24.07): the NeMo-Framework-Launcher configs set ``optim.grad_sync_dtype: bf16``
#   (``conf/training/gpt3/20b_fp8_performance.yaml`` with Apex ``distributed_fused_adam`` and
#   ``contiguous_grad_buffer``; ``conf/training/nemotron/nemotron_340b.yaml`` with ``mcore_distributed_optim``);
# * Megatron-Bridge performance recipes: ``perf_recipes/_common.py::_benchmark_common`` (@067f987df) sets
#   ``ddp.grad_reduce_in_fp32 = False`` for every recipe (and ``cross_entropy_fusion_impl = "te"``, the
#   default of its ``cross_entropy_impl`` argument, for the Llama / Qwen / DeepSeek / GPT-OSS recipes).
BF16_GRAD_REDUCTION_SOURCES = ("nemo_perf_summary_2407", "megatron_bridge_perf_summary")
TE_CROSS_ENTROPY_SOURCES = ("megatron_bridge_perf_summary",)
# NeMo 1.x (container 24.07) fuses the loss where the launcher's training config says so: NeMo's
# ``MegatronBaseModel.build_transformer_config`` (NVIDIA/NeMo @v2.0.0, megatron_base_model.py L562-571) copies
# ``cross_entropy_loss_fusion`` from the model config into Megatron-Core's TransformerConfig, whose default is off;
# NeMo-Framework-Launcher @24.07 sets it in ``conf/training/llama/llama3_8b.yaml`` L94, ``llama3_70b.yaml`` L109,
# ``nemotron/nemotron_8b.yaml`` L114 and ``nemotron_22b.yaml`` L114, and not for Llama 2, GPT-3 or Nemotron-4. That
# Megatron-Core had one fused loss, the native one.
NATIVE_CROSS_ENTROPY_MODELS = {"nemo_perf_summary_2407": ("Llama 3 8B", "Llama 3 70B", "Nemotron-3 8B",
                                                          "Nemotron-3 22B")}
# The precision-aware optimizer (Workload.precision_aware_optimizer), as Megatron-Bridge's performance scripts launch
# it. Every BF16 run with Adam, in every release: ``scripts/performance/run_script.py`` L127-128 @v0.1.0rc4,
# ``utils/helpers.py`` L254-255 @v0.2.0, ``utils/overrides.py`` L436-437 @v0.3.1 (``set_post_overrides``), L471 @v0.4.2,
# ``run_script.py`` L150-151 @v0.6.0; the moments stay fp32. Megatron-FSDP rows are left out: the scripts switch it off
# there in the early releases (``helpers.py`` L87-88 @v0.1.0rc4) and megasolve does not model it under FSDP.
PRECISION_AWARE_BF16_SOURCES = ("megatron_bridge_perf_summary",)
# DeepSeek-V3's own recipe sets it at every precision, with bf16 moments and fp32 main parameters
# (``recipes/deepseek/deepseek_v3.py`` L240-244 @v0.1.0rc4, L272-276 @v0.2.0, L161-165 @v0.3.1-v0.4.2, L205-209
# @v0.5.0-v0.5.1; ``recipes/deepseek/h100/deepseek_v3.py`` L206-210 @v0.6.0, which ``recipes/deepseek/deepseek_v3.py``
# re-exports and ``perf_recipes/deepseek/common.py`` builds on); no performance override resets the moments.
PRECISION_AWARE_BF16_MOMENT_MODELS = ("DeepSeek-V3 671B",)
# Bridge splits layers that do not divide evenly with the embedding and loss counted as layers
# (``recipes/llama/h100/llama3.py`` L1227-1228, Llama-3.1 405B: 126 + 2 = 128 layers over pp x vpp)
ACCOUNTING_SOURCES = ("megatron_bridge_perf_summary",)
# Bridge MXFP8 recipes that run the LM head in MXFP8 too (``fp8_output_proj = True``, @067f987df):
# ``perf_recipes/deepseek/{gb200,gb300,b300}/deepseek_v3.py`` and ``perf_recipes/gpt_oss/common.py``
FP8_OUTPUT_PROJ_MODELS = ("DeepSeek-V3", "GPT-OSS")


# Megatron-Bridge's FP8 precision configs keep FP8 primary weights (Megatron ``--fp8-param-gather``):
# ``training/mixed_precision.py`` ``bf16_with_fp8_current_scaling_mixed`` (L268 @v0.1.0rc4, L302 @v0.6.0) and, since
# v0.1.0rc2, ``bf16_with_mxfp8_mixed`` with ``reuse_grad_buf_for_mxfp8_param_ag`` (L230-231 @v0.1.0rc4, L264-265
# @v0.6.0), and the performance scripts take them unchanged for "FP8" (current scaling) and "MXFP8" rows
# (``utils/helpers.py::get_precision_config`` L92-111 @v0.1.0rc4, ``utils/precision.py`` L26-42 @v0.5.1,
# ``perf_recipes/_common.py::_perf_precision`` L97-118 @v0.6.0). The exceptions that reach a table row: Kimi K2, whose
# rows ran Muon (MUON_MODELS). GPT-OSS 20B's configs switch it off too; no row has that model.
FP8_PARAM_GATHER_SOURCES = ("megatron_bridge_perf_summary",)
# Kimi K2's Bridge rows ran Muon: "Muon optimizer was used for pre-training Kimi-K2" (docs/performance-summary.md
# L113 @v0.4.2); the perf configs' ``optimizer_type`` defaults to "muon" (scripts/performance/configs/kimi/
# kimi_llm_pretrain.py L61 @v0.3.1-v0.5.1; recipes/kimi/h100/kimi_k2.py L200 @v0.6.0) and turn FP8 primary weights off
# for it, Muon's layer-wise distributed optimizer having no FP8 parameter path (kimi_llm_pretrain.py L35-44;
# perf_recipes/kimi/gb300/kimi_k2.py L142-143 @v0.6.0). TP is 1 in every row, so Bridge's ``muon_tp_mode
# blockwise`` (recipes/utils/optimizer_utils.py L35 @v0.4.2) and Megatron-LM's default ``duplicated`` cost the same.
MUON_MODELS = ("Kimi K2 (1T-A32B)",)


RECIPES_FILE = Path(__file__).resolve().parent / "bridge_moe_recipes.yaml"
_RECIPES: list[dict[str, Any]] | None = None


def bridge_moe_recipe(record: dict[str, Any]) -> dict[str, Any] | None:
    """The Megatron-Bridge perf recipe behind a MoE row of its performance summary, from
    ``bridge_moe_recipes.yaml`` (the recipe at the release's revision: dispatcher, EP overlap, shared-expert
    overlap, recompute): the entry of the row's release, model, GPU and precision whose table values (GBS,
    MBS, TP, PP, EP) are the row's; None for other sources or a row the file does not hold."""
    global _RECIPES
    if record["source_group"] != "megatron_bridge_perf_summary" \
            or record["model"].get("type") not in ("moe", "hybrid_mamba_moe"):
        return None
    if _RECIPES is None:
        _RECIPES = yaml.safe_load(RECIPES_FILE.read_text(encoding="utf-8"))
    release = (record.get("software_version") or "").removeprefix("NeMo container ").strip()
    par = record["parallel"]
    precision = (par.get("precision") or "").upper()
    stated = {"gbs": par.get("gbs"), "mbs": par.get("mbs"), "tp": par.get("tp") or 1, "pp": par.get("pp") or 1,
              "ep": par.get("ep") or 1}
    for entry in _RECIPES:
        if (entry["release"], entry["model"], entry["gpu"], entry["precision"]) != \
                (release, record["model"]["name"], record["hardware"]["gpu"], precision):
            continue
        row = entry["row"]
        if all(row.get(k) is None or row[k] == v for k, v in stated.items()):
            return entry
    return None


def _cuda_graph_impl(recipe: dict[str, Any] | None) -> str:
    """``--cuda-graph-impl`` of a MoE recipe (``bridge_moe_recipes.yaml`` ``cuda_graph``): ``full_iteration``
    where the recipe captures the whole iteration, ``transformer_engine`` / ``local`` for per-layer graphs,
    else (and for rows the file does not hold) ``none``."""
    text = (recipe or {}).get("cuda_graph") or "none"
    if "full_iteration" in text or "full-iteration" in text:
        return "full_iteration"
    for impl in ("transformer_engine", "local"):
        if text.startswith(impl):
            return impl
    return "none"


def _dispatcher(record: dict[str, Any], recipe: dict[str, Any] | None) -> str:
    """The release's recipe (``bridge_moe_recipe``) where the file holds the row. Otherwise Megatron-Bridge
    rows take the flex dispatcher (DeepEP / HybridEP), which its perf recipes use for most MoE models
    (@067f987df), except Qwen3-235B-A22B on H100 / B200 outside MXFP8, which sets
    ``moe_token_dispatcher_type = "alltoall"`` (``perf_recipes/qwen/h100/qwen3_moe.py`` L159, L212).
    Older sources predate the flex dispatcher."""
    if recipe is not None:
        return recipe["dispatcher"]
    if record["source_group"] != "megatron_bridge_perf_summary":
        return "alltoall"
    par, hw = record["parallel"], record["hardware"]
    if record["model"]["name"] == "Qwen3-235B-A22B" and hw["gpu"] in ("H100-SXM-80GB", "B200") \
            and "mx" not in (par.get("precision") or "").lower():
        return "alltoall"
    return "flex"


# Sources whose runs used ``--tp-comm-overlap`` (TE userbuffers) wherever TP > 1 with sequence parallelism:
# * Megatron-LM README (H100 tables): "tensor-parallel (``--tp-comm-overlap``) ... overlapping";
# * NeMo 24.07 performance configs (``ub_tp_comm_overlap: True`` in the launcher's GPT-3 / Nemotron configs);
# * Megatron-Bridge perf recipes (@067f987df: ``CommOverlapConfig(tp_comm_overlap=True)`` with a userbuffers
#   config for the TP > 1 recipes, e.g. ``perf_recipes/llama/b200/llama31.py`` L51, ``qwen/b200/qwen3_moe.py`` L61).
# Narayanan 2021 / Korthikanti 2022 predate userbuffers (and ``overlap_p2p_comm``).
TP_OVERLAP_SOURCES = ("megatron_lm_readme_h100", "nemo_perf_summary_2407", "megatron_bridge_perf_summary")
NO_P2P_OVERLAP_SOURCES = ("narayanan2021", "korthikanti2022")
# Megatron-Bridge recipes that turn TP overlap off although TP > 1 (@067f987df):
# ``perf_recipes/qwen/h100/qwen3_moe.py`` L163-165 / L216-218 (Qwen3-235B-A22B on H100)
NO_TP_OVERLAP_RECIPES = (("Qwen3-235B-A22B", "H100-SXM-80GB"),)
# ... and every Nemotron 3 Super row: its pretrain recipe sets no CommOverlapConfig (``recipes/nemotronh/
# nemotron_3_super.py`` L29-139 @v0.4.0 .. v0.5.1; ``recipes/common.py::_pretrain_common`` and the perf scripts'
# ``set_workload_base_configs`` / ``_set_common_perf_overrides`` add none), so its TP 2 rows run without TP overlap
NEMOTRON_3_SUPER = "Nemotron 3 Super (~120B hybrid Mamba-Transformer MoE)"
# Rows whose VP column is empty although the release's perf recipe sets a virtual pipeline size: (software version,
# model, GPU, precision) -> vpp. Llama 3 70B MXFP8 on GB300 in 26.02.01 (Megatron-Bridge v0.3.1):
# scripts/performance/configs/llama/llama3_workload_base_configs.py L70-74 / L219-223 (FP8_MX V1 / V2:
# pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=5), as the table prints it for 26.04.
RECIPE_VPP = {("NeMo container 26.02.01", "Llama 3 70B", "GB300", "MXFP8"): 5}
# ... and every DeepSeek-V3 and Kimi K2 row: their pretrain recipes set ``CommOverlapConfig(tp_comm_overlap=False)`` in
# every release (``recipes/deepseek/deepseek_v3.py`` L314-317 @v0.1.0rc4, L350-352 @v0.2.0, L168 / L313 @v0.3.1-v0.4.2,
# L212 / L357 @v0.5.0-v0.5.1, ``recipes/deepseek/h100/deepseek_v3.py`` L213 / L369 @v0.6.0; ``recipes/kimi/kimi_k2.py``
# L393 @v0.3.0, L179-182 @v0.3.1-v0.5.1, ``recipes/kimi/h100/kimi_k2.py`` L189 @v0.6.0), and their perf scripts change
# only the userbuffer config (``tp_comm_overlap_cfg``, unused without the flag; run_script.py L122-125 @v0.1.0rc4)
NO_TP_OVERLAP_MODELS = (NEMOTRON_3_SUPER, "DeepSeek-V3 671B", "Kimi K2 (1T-A32B)")
# The DeepSeek-V3 H100 perf config does not overlap the DP gradient reduction (``overlap_grad_reduce = False``:
# scripts/performance/run_script.py L97-102 @v0.1.0rc4, configs/deepseek/deepseek_llm_pretrain.py
# ``deepseek_v3_pretrain_config_h100`` L170 @v0.2.0, L223 @v0.3.1, L250 @v0.4.2, L291 @v0.5.1,
# perf_recipes/deepseek/h100/deepseek_v3.py L46 / L95 @v0.6.0); every other GPU's config overlaps it
NO_DP_OVERLAP_RECIPES = (("DeepSeek-V3 671B", "H100-SXM-80GB"),)
# Megatron-Bridge v0.2.0 (NeMo container 25.11) turned the parameter all-gather overlap off in its MXFP8 configs of
# DeepSeek-V3 (GB300, GB200), Llama 3 70B and Llama 3.1 405B (GB300, GB200, B200) and Qwen3-235B-A22B (B200):
# ``if precision == "fp8_mx":  # keeping this eanbled causes NaN grad norm`` -> ``overlap_param_gather = False``
# (scripts/performance/configs/deepseek/deepseek_llm_pretrain.py L75-78, L112-115; llama3/llama3_llm_pretrain.py
# L80-83, L115-118, L150-153; llama31/llama31_llm_pretrain.py L75-78, L110-113, L140-143; qwen3/qwen3_llm_pretrain.py
# L133-136 @v0.2.0). v0.1.0rc4 and v0.3.0 .. v0.4.0 have no such line for a pretraining table's model; v0.4.2 .. v0.5.1
# (Llama 3.1 405B NVFP4, config variant "v2" only) and v0.6.0 (Llama 3.1 405B NVFP4 on B200 / GB200) do, and a table
# row does not say which variant ran: those rows keep the overlap (not mapped).
NO_PARAM_GATHER_OVERLAP_RECIPES = {("NeMo container 25.11", model, gpu, "MXFP8") for model, gpu in (
    ("DeepSeek-V3 671B", "GB300"), ("DeepSeek-V3 671B", "GB200"), ("Llama 3 70B", "GB300"), ("Llama 3 70B", "GB200"),
    ("Llama 3 70B", "B200"), ("Llama 3.1 405B", "GB300"), ("Llama 3.1 405B", "GB200"), ("Llama 3.1 405B", "B200"),
    ("Qwen3-235B-A22B", "B200"))}
# No TP overlap in NVFP4 or blockwise FP8: Transformer Engine's userbuffers cannot gather those tensors
# (``Workload.tp_overlap_supported``), and the recipes say so: the Llama and GPT-OSS perf configs turn it off in NVFP4
# (``cfg.comm_overlap.tp_comm_overlap = False if precision == "nvfp4"``, scripts/performance/configs/llama/
# llama3_llm_pretrain.py L79-80, L114-115, L149-150, L184-185 and llama31_llm_pretrain.py L74-75, L109-110, L139-140
# @v0.3.1; v0.3.0 .. v0.5.0 alike; gpt_oss_llm_pretrain.py L81-82 @v0.4.2), Bridge's own test says "NVFP4's
# fp4_param_gather path is incompatible with TP comm overlap" (tests/unit_tests/recipes/test_qwen_perf_recipes.py
# @067f987df). Priced in bf16 bytes, the exposed gathers had pulled the Llama and Nemotron NVFP4 rows apart (in-fit
# 4.8 -> 9.3 % dense); they move the quantized bytes since (``Workload.tp_gather_bytes``).
# Nemotron 3 Super's perf recipe pads each expert's routed tokens to the quantisation alignment in NVFP4 and MXFP8
# (``moe_router_padding_for_quantization = True``: ``scripts/performance/configs/nemotronh/nemotron_3_llm_pretrain.py``
# L53-54 @v0.4.0, L55-56 @v0.5.1)
ROUTER_PADDING_MODELS = (NEMOTRON_3_SUPER,)


def _comm_overlap(source: str, spec: ModelSpec, layout: Layout, notes: list[str], *, stated_vpp: int,
                  model_name: str, gpu_name: str, precision: str = "bf16", fp8_recipe: str = "delayed",
                  recipe: dict[str, Any] | None = None, release: str = "", stated_precision: str = "") -> dict[str, bool]:
    """Overlap knobs of a source's recipes. Megatron-Bridge MoE perf recipes set
    ``overlap_moe_expert_parallel_comm`` (with ``delay_wgrad_compute``) wherever Megatron's conditions
    allow it (``perf_recipes/deepseek/common.py`` L76-77, ``gpt_oss/common.py`` L47-49,
    ``qwen/b200/qwen3_moe.py`` L322-323, ``qwen/h100/qwen3_moe.py`` L41, L165): ep > 1, interleaved
    schedule when pp > 1 (the recipe's stated vpp: Bridge pipeline layouts keep it where the layers do
    not split evenly), no full recompute."""
    tp_overlap = source in TP_OVERLAP_SOURCES and layout.tp > 1 and layout.sequence_parallel \
        and (model_name, gpu_name) not in NO_TP_OVERLAP_RECIPES and model_name not in NO_TP_OVERLAP_MODELS \
        and Workload(precision=precision, fp8_recipe=fp8_recipe).tp_overlap_supported
    out = {"tp_comm_overlap": tp_overlap, "overlap_p2p_comm": source not in NO_P2P_OVERLAP_SOURCES}
    if out["tp_comm_overlap"]:
        notes.append("TP comm overlap (--tp-comm-overlap, as the source's recipes set)")
    if source == "megatron_bridge_perf_summary" and (model_name, gpu_name) in NO_DP_OVERLAP_RECIPES:
        out["dp_comm_overlap"] = False
        notes.append("DP gradient reduction not overlapped (the recipe sets overlap_grad_reduce = False)")
    if source == "megatron_bridge_perf_summary" and (release, model_name, gpu_name, stated_precision) \
            in NO_PARAM_GATHER_OVERLAP_RECIPES:
        out["param_gather_overlap"] = False
        notes.append("parameter all-gather not overlapped (the release's MXFP8 config sets overlap_param_gather = "
                     "False)")
    allowed = spec.is_moe and layout.ep > 1 and (layout.pp == 1 or stated_vpp > 1) and layout.recompute != "full" \
        and spec.mtp_num_layers <= 1
    if recipe is not None:
        if recipe["ep_overlap"] and allowed:
            out["moe_ep_overlap"] = True
            notes.append(f"EP all-to-all overlap (--overlap-moe-expert-parallel-comm, as the recipe at "
                         f"{recipe['revision']} sets)")
        if recipe["shared_expert_overlap"] and spec.moe.shared_expert_ffn_hidden_size:
            out["moe_shared_expert_overlap"] = True
            notes.append(f"shared-expert overlap (--moe-shared-expert-overlap, as the recipe at {recipe['revision']} sets)")
    elif source == "megatron_bridge_perf_summary" and allowed:
        out["moe_ep_overlap"] = True
        notes.append("EP all-to-all overlap (--overlap-moe-expert-parallel-comm, as the Bridge MoE recipes set)")
    return out


def _fp8_recipe(raw: str | None, source: str) -> str:
    """MXFP8 rows are block-scaled; Megatron-Bridge's plain "FP8" rows are current scaling
    (``fp8_cs`` in its perf recipes); older sources used delayed scaling (Megatron's default)."""
    text = (raw or "").lower()
    if "mx" in text:
        return "mxfp8"
    return "tensorwise" if source == "megatron_bridge_perf_summary" else "delayed"


def _precision(raw: str | None) -> str:
    text = (raw or "").lower()
    if "nvfp4" in text:
        return "fp4"
    if "fp8" in text:  # FP8 (delayed/current scaling) and MXFP8
        return "fp8"
    return "bf16"


def _recompute(raw: Any, source_group: str, notes: list[str]) -> str:
    text = str(raw or "").lower()
    if not text and source_group == "narayanan2021":
        notes.append("recompute not stated, assumed full (Narayanan 2021 section 3.5 recomputes activations)")
        return "full"
    if text.startswith("full"):
        return "full"
    if text.startswith("selective"):
        return "selective"
    if text in ("none",):
        return "none"
    notes.append("recompute not stated, assumed none")
    return "none"


def pipeline_split(num_layers: int, pp: int, vpp: int, num_microbatches: int,
                   last_extra: float = 0.0) -> tuple[int, int | None, int | None]:
    """The even split if there is one, else the (vpp', first, last) with ``vpp' <= vpp`` that Megatron
    accepts (``models.params.stage_layer_counts``) and minimises ``max_load * (m + (p-1)/vpp')``,
    where the last stage's load counts ``last_extra`` layer-equivalents for the MTP layers and the
    loss (what ``--account-for-loss-in-pipeline-split`` / Bridge's pipeline layouts balance).

    >>> pipeline_split(80, 4, 5, 64), pipeline_split(61, 2, 8, 32), pipeline_split(61, 16, 1, 16, 2.0)
    ((5, None, None), (1, 30, 31), (1, 3, 2))
    """
    if num_layers % pp == 0 and (num_layers // pp) % vpp == 0:
        return vpp, None, None
    best: tuple[float, int, int, int] | None = None
    for v in range(vpp, 0, -1):
        for first in range(v, num_layers + 1, v):
            for last in range(v, num_layers - first + 1, v):
                middle, stages = num_layers - first - last, pp - 2
                if pp < 2 or (stages == 0 and middle) or (stages and (middle <= 0 or middle % (stages * v))):
                    continue
                biggest = max(first, last + last_extra, middle // stages if stages else 0)
                score = biggest * (num_microbatches + (pp - 1) / v)
                if best is None or score < best[0]:
                    best = (score, v, first, last)
    if best is None:
        raise Skip(f"{num_layers} layers cannot be split over pp {pp}")
    return best[1], best[2], best[3]


def bridge_layout(spec: ModelSpec, pp: int, vpp: int) -> tuple[str | None, tuple[int, int] | None]:
    """Megatron-Bridge's DeepSeek-V3 / Kimi-K2 layout for ``pp x vpp`` when the layers do not divide
    (``recipes/deepseek/h100/deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout``, ``recipes/kimi/h100/
    kimi_k2.py``): the layout string with interleaving, the uneven (first, last) split without.

    >>> spec = load_preset("deepseek-v3")
    >>> bridge_layout(spec, 4, 4), bridge_layout(spec, 16, 1), bridge_layout(spec, 8, 1)
    (('Et*4|(t*4|)*14t*1mL', None), (None, (4, 1)), (None, (8, 5)))
    """
    from megasolve.models.pipeline_layout import expand

    n = pp * vpp
    if pp == 1 or spec.num_layers % n == 0 or spec.is_hybrid:
        return None, None
    if vpp > 1:
        return next((t for t in layout_candidates(spec, pp) if len(expand(t)) == n), None), None
    k = -(-spec.num_layers // n)
    r = spec.num_layers - k * (n - 1)
    return (None, (k, r)) if 1 <= r < k else (None, None)


# Scale-out bandwidth of the DGX-B300 systems behind Megatron-Bridge's tables. The catalog's B300 default is
# the ConnectX-8's 800 Gb/s per GPU; the tables do not state the fabric, and their own rows say it carried
# about half of that: in one release (26.02) and one layout (GPT-OSS 120B, tp1 pp1 ep64, mbs 4, BF16, NCCL
# all-to-all over 8 nodes: the all-to-all is half of the step), DGX-B300 ran 8,359 tokens/s/GPU and DGX-B200
# (ConnectX-7, 400 Gb/s) 8,047, 4 % apart where 800 Gb/s would make B300 ~35 % faster. The other B300 rows
# with traffic across nodes agree (GPT-OSS ep8 DP traffic: +6.5..+7.3 % too fast at 800, -0.7..-1.5 % at 400;
# table in the README's "Speed"). A user's own B300 fabric is theirs to state (``--nic-gbps``).
BENCHMARK_NIC_GBIT = {"b300": 400}


def cluster_for(gpu: str, num_gpus: int, notes: list[str]) -> Cluster:
    # (an NVL72 job's NVLink domains are the catalog's default: equal segments of each rack, topology.cluster
    # rack_segment -- 64 GPUs for these tables' 64..512-GPU jobs)
    nic = BENCHMARK_NIC_GBIT.get(gpu)
    if nic:
        notes.append(f"{nic} Gb/s per GPU scale-out (BENCHMARK_NIC_GBIT)")
    return Cluster.from_flags(num_gpus=num_gpus, gpu=gpu, nic_gbit_per_gpu=nic)


def map_record(record: dict[str, Any]) -> PublishedRun:
    """Map one YAML record to a ``PublishedRun`` or raise ``Skip(reason)``."""
    task = record.get("task")
    if task == "layer_microbenchmark":
        raise Skip("layer micro-benchmark (unit check in tests/test_time.py)")
    if task in ("lora", "sft"):
        raise Skip(f"{task} run (not pretraining)")
    if task == "feasibility":
        raise Skip("feasibility-only record (no throughput)")
    par = record.get("parallel") or {}
    other = par.get("other") or {}
    if other.get("zero_stage"):
        raise Skip("DeepSpeed ZeRO-3 (not a Megatron layout)")
    hardware = record.get("hardware") or {}
    if hardware.get("gpu") not in GPU_NAMES:
        raise Skip(f"GPU {hardware.get('gpu')!r} not mapped")
    precision = _precision(par.get("precision"))
    notes: list[str] = []
    spec = model_spec(record, notes)
    gpu = GPU_NAMES[hardware["gpu"]]
    num_gpus = hardware["num_gpus"]
    source = record["source_group"]
    tp, pp = par.get("tp"), par.get("pp")
    if tp is None and pp is None:
        mp = other.get("model_parallel_size")
        if mp is None:
            raise Skip("layout not stated")
        tp = 8
        pp = mp // 8
        notes.append(f"model-parallel size {mp} split as TP8 x PP{pp} (the paper's Table 1 uses TP=8)")
    tp = _int_or(tp, 1, "tp", notes)
    pp = _int_or(pp, 1, "pp", notes)
    vpp = par.get("vpp") or 1
    recipe_vpp = RECIPE_VPP.get((record.get("software_version"), record["model"]["name"], hardware["gpu"],
                                 par.get("precision")))
    if par.get("vpp") is None and recipe_vpp:
        vpp = recipe_vpp
        notes.append(f"vpp {vpp}: the table leaves VP empty, the release's recipe sets it (RECIPE_VPP)")
    cp = par.get("cp") or 1
    ep = par.get("ep") or 1
    if par.get("mbs") is None:
        notes.append("mbs not stated, assumed 1")
    mbs = par.get("mbs") or 1
    dp = num_gpus // (tp * pp * cp)
    if par.get("dp") is not None and par["dp"] != dp:
        raise Skip("dp inconsistent with num_gpus / (tp*pp*cp)")
    etp = par.get("etp")
    if spec.is_moe and etp is None:
        etp = 1
        notes.append("etp not stated, assumed 1 (Megatron-Bridge MoE recipes)")
    if par.get("sp") is None or not isinstance(par.get("sp"), bool):
        sp = tp > 1 and source not in ("narayanan2021",)
        notes.append(f"sequence parallel not stated, assumed {'on' if sp else 'off'}")
    else:
        sp = par["sp"]
    if spec.is_moe and tp > 1:
        sp = True  # Megatron requires SP with MoE + TP (reference section 4.6)
    if num_gpus % (ep * (etp or 1) * pp):  # Megatron asserts the expert grid divides the world (PS L878-884)
        raise Skip("expert grid ep*etp*pp does not divide the GPU count (a table inconsistency)")
    if source == "megatron_bridge_perf_summary" and spec.is_moe and bridge_moe_recipe(record) is None:
        raise Skip("Megatron-Bridge MoE row whose release recipe is not in bridge_moe_recipes.yaml")
    dist_opt = par.get("distributed_optimizer")
    if dist_opt is None:
        dist_opt = source not in ("narayanan2021", "korthikanti2022")
        notes.append(f"distributed optimizer not stated, assumed {'on' if dist_opt else 'off'}")
    recipe = bridge_moe_recipe(record)
    modules: tuple[str, ...] | None = None
    if recipe is not None and par.get("recompute") is None:
        notes.append(f"MoE recipe at {recipe['revision']} (bridge_moe_recipes.yaml): {recipe['dispatcher']} dispatcher"
                     + (f" ({recipe['flex_backend']})" if recipe["flex_backend"] else "")
                     + f", recompute {recipe['recompute']}")
        recompute = "none" if recipe["recompute"] == "none" else "selective"
        if recompute == "selective":
            modules = tuple(m.strip() for m in recipe["recompute"].split(":", 1)[1].split(","))
    else:
        recompute = _recompute(par.get("recompute"), source, notes)
    fsdp = bool(par.get("fsdp")) and par["fsdp"] > 1
    capacity = cluster_for(GPU_NAMES[hardware["gpu"]], num_gpus, []).gpu.memory_bytes
    if not fsdp and tp * pp * cp * ep == 1 and 6 * total_params(spec) > capacity:
        # e.g. the 26.02.01 Llama 3 70B NVFP4 row on GB300: FSDP 0 and TP = PP = 1, while the FP8 rows of that model
        # and system run FSDP 64 -- the weights alone (141 GB bf16) plus fp32 grads cannot sit on one GPU
        raise Skip("no model parallelism and no FSDP, yet the bf16 weights and grads exceed the GPU (a table "
                   "inconsistency)")
    offload = 0
    if fsdp:
        dist_opt = True  # Megatron-FSDP runs on the distributed optimizer
        offload = RECIPE_CPU_OFFLOAD_LAYERS.get((source, record["model"]["name"], hardware["gpu"], precision), 0)
        if offload:
            notes.append(f"activations of the first {offload} layers offloaded to host memory (the Bridge perf "
                         f"recipe's cpu_offloading_num_layers; not in the record)")
    seq = record["model"]["seq_length"]
    gbs = par.get("gbs")
    if gbs is None:
        raise Skip("global batch not stated")
    if gbs % (mbs * dp):
        raise Skip("gbs not divisible by mbs*dp")
    account = False
    # Bridge's DeepSeek-V3 / Kimi-K2 recipes lay 61 layers out with a layout per (pp, vp) (E + k | k ... |
    # r + MTP + loss): megasolve's search family of the same name (solver/space.py layout_candidates); with one
    # chunk per rank that is the uneven split (k, r)
    layout_text, bridge_split = bridge_layout(spec, pp, vpp) if source in ACCOUNTING_SOURCES else (None, None)
    stated_layout = (bridge_moe_recipe(record) or {}).get("pipeline_layout")
    if stated_layout and vpp > 1:  # the recipe's own layout string (bridge_moe_recipes.yaml, with its source line)
        from megasolve.models.pipeline_layout import expand

        if len(expand(stated_layout)) != pp * vpp:
            raise ValueError(f"{record['id']}: the recipe's layout {stated_layout!r} is not {pp} x {vpp} chunks")
        layout_text, bridge_split = stated_layout, None
    if (spec.num_layers % pp or (spec.num_layers // pp) % vpp) and source in ACCOUNTING_SOURCES \
            and (spec.num_layers + 2) % pp == 0 and ((spec.num_layers + 2) // pp) % vpp == 0:
        account = True  # the stated vpp splits the layers + embedding + loss evenly
        v_used, first, last = vpp, None, None
        notes.append("embedding and loss counted as pipeline layers (--account-for-embedding/loss-in-pipeline-"
                     "split, as the Bridge Llama-3.1 405B recipe sets)")
    elif layout_text is not None or bridge_split is not None:
        v_used, (first, last) = vpp, bridge_split or (None, None)
        notes.append(f"{spec.num_layers} layers over pp {pp} x vpp {vpp}: Bridge's pipeline layout "
                     f"{layout_text or f'first/last stage {first}/{last} layers'} (recipes/deepseek/h100/"
                     "deepseek_v3.py, recipes/kimi/h100/kimi_k2.py)")
    else:
        v_used, first, last = pipeline_split(spec.num_layers, pp, vpp, gbs // (mbs * dp),
                                             last_extra=spec.mtp_num_layers + 1.0)
    if (v_used, first, last) != (vpp, None, None):
        notes.append(f"{spec.num_layers} layers do not split evenly over pp {pp} x vpp {vpp}: modelled as "
                     f"vpp {v_used}, first/last stage {first}/{last} layers (Bridge uses a custom pipeline layout)")
    layout = Layout(tp=tp, pp=pp, vpp=v_used, cp=cp, dp=dp, ep=ep, etp=etp, mbs=mbs, sequence_parallel=sp,
                    recompute=recompute, recompute_modules=modules, distributed_optimizer=bool(dist_opt), fsdp=fsdp,
                    cpu_offload_layers=offload, account_for_embedding=account, account_for_loss=account,
                    first_stage_layers=first,
                    last_stage_layers=last, pipeline_layout=layout_text if v_used == vpp and first is None
                    and not account else None)
    attention = "unfused" if source in ("narayanan2021", "korthikanti2022") else "flash"
    if attention == "unfused":
        notes.append("attention unfused (Megatron-LM 2021-2022 had no flash attention)")
    fp8_recipe = _fp8_recipe(par.get("precision"), source)
    output_proj = (precision == "fp8" and fp8_recipe == "mxfp8" and source == "megatron_bridge_perf_summary"
                   and record["model"]["name"].startswith(FP8_OUTPUT_PROJ_MODELS))
    if output_proj:
        notes.append("MXFP8 output projection (the Bridge perf recipe sets fp8_output_proj)")
    grad_bf16 = source in BF16_GRAD_REDUCTION_SOURCES
    if grad_bf16:
        notes.append("bf16 main grads and gradient reduction (the source's recipes set it)")
    loss = "te" if source in TE_CROSS_ENTROPY_SOURCES else \
        "native" if record["model"]["name"] in NATIVE_CROSS_ENTROPY_MODELS.get(source, ()) else "unfused"
    if loss == "te":
        from megasolve.solver.runs import te_before_2_18

        # TE 2.18 (TE#3193, the NeMo 26.08 container's) keeps the loss's gradient in fp32 ("te"); a release before
        # it, or none stated, ran the kernel that wrote it over the bf16 logits ("te-bf16grad")
        release = (record.get("software_version") or "").removeprefix("NeMo container ").strip()
        if te_before_2_18({}, {"container": release}) is not False:
            loss = "te-bf16grad"
        notes.append("Transformer Engine fused cross entropy (the source's recipes set it"
                     + ("; TE 2.18's fp32 gradient)" if loss == "te" else "; TE before 2.18)"))
    elif loss == "native":
        notes.append("Megatron-Core's fused cross entropy (the launcher's config sets cross_entropy_loss_fusion)")
    overlap = _comm_overlap(source, spec, layout, notes, stated_vpp=vpp,
                            model_name=record["model"]["name"], gpu_name=hardware["gpu"], precision=precision,
                            fp8_recipe=fp8_recipe, recipe=recipe, release=record.get("software_version") or "",
                            stated_precision=par.get("precision") or "")
    graph = _cuda_graph_impl(recipe)
    if graph != "none":
        notes.append(f"CUDA graphs {graph} (the recipe at {recipe['revision']}: {recipe['cuda_graph']})")
    bf16_layers = {}
    if recipe is not None and recipe.get("first_last_layers_bf16"):  # the NVFP4 Nemotron 3 rows (recipe file)
        bf16_layers = {key: recipe.get(key, 0) for key in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16")}
        notes.append("decoder layers kept in bf16 (the recipe's first_last_layers_bf16): first "
                     f"{bf16_layers['num_layers_at_start_in_bf16']}, last {bf16_layers['num_layers_at_end_in_bf16']}")
        if precision == "fp4" and record["model"]["name"].startswith("Nemotron 3 Super"):
            # from v0.4.0 the NVFP4 perf configs also load te_quant.cfg (scripts/performance/configs/nemotronh/
            # nemotron_3_llm_pretrain.py L48-51 @v0.4.0; perf_recipes/nemotronh/common.py L33 @067f987)
            bf16_layers["module_precision"] = NEMOTRON_3_SUPER_NVFP4_MODULES
            notes.append("the recipe's per-module precisions (te_quant.cfg: attention QKV / proj, latent "
                         "projections and MTP in bf16, Mamba out_proj in MXFP8)")
    padding = (source == "megatron_bridge_perf_summary" and record["model"]["name"] in ROUTER_PADDING_MODELS
               and (precision == "fp4" or (precision == "fp8" and fp8_recipe == "mxfp8")))
    if padding:
        notes.append("expert inputs padded by the router to the quantisation alignment (the recipe's "
                     "moe_router_padding_for_quantization)")
    optimizer_state = _precision_aware_optimizer(source, record["model"]["name"], precision, layout, notes)
    muon = source in FP8_PARAM_GATHER_SOURCES and record["model"]["name"] in MUON_MODELS
    if muon:
        optimizer_state["optimizer"] = "muon"
        notes.append("Muon optimizer (the Kimi K2 perf recipes; FP8 primary weights off with it)")
    fp8_params = source in FP8_PARAM_GATHER_SOURCES and precision == "fp8" and not muon
    if fp8_params:
        notes.append("FP8 primary weights, --fp8-param-gather (the release's FP8 precision config sets it)")
    workload = Workload(seq_length=seq, global_batch_size=gbs, precision=precision, attention=attention, **bf16_layers,
                        **optimizer_state,
                        moe_router_padding_for_fp8=padding,
                        grad_reduce_in_bf16=grad_bf16, cross_entropy=loss,
                        fp8_recipe=fp8_recipe, fp8_output_proj=output_proj, fp8_param_gather=fp8_params,
                        moe_dispatcher=_dispatcher(record, recipe), cuda_graph_impl=graph, **overlap)
    measured, how = measured_tokens(record, spec, layout, num_gpus)
    return PublishedRun(
        id=record["id"], source_group=source, software=record.get("software_version") or "",
        spec=spec, cluster=cluster_for(gpu, num_gpus, notes), workload=workload, layout=layout,
        measured_tokens_per_s_per_gpu=measured, measured_from=how,
        comparison_group=record.get("comparison_group"), series_group=record.get("series_group"),
        split=split_of(record), assumptions=tuple(notes),
        reported_tflops_per_gpu=(record.get("measured") or {}).get("tflops_per_gpu"))


def _precision_aware_optimizer(source: str, model_name: str, precision: str, layout: Layout,
                               notes: list[str]) -> dict[str, Any]:
    """The Workload fields of the precision-aware optimizer where the source's recipes set it
    (``PRECISION_AWARE_BF16_SOURCES``, ``PRECISION_AWARE_BF16_MOMENT_MODELS``); empty otherwise.

    >>> _precision_aware_optimizer("megatron_bridge_perf_summary", "DeepSeek-V3 671B", "fp8",
    ...                            Layout(tp=1, pp=1, dp=8, distributed_optimizer=True), [])
    {'precision_aware_optimizer': True, 'exp_avg_dtype': 'bf16', 'exp_avg_sq_dtype': 'bf16'}
    >>> _precision_aware_optimizer("megatron_bridge_perf_summary", "GPT-OSS 120B", "fp8",
    ...                            Layout(tp=1, pp=1, dp=8, distributed_optimizer=True), [])
    {}
    """
    if source not in PRECISION_AWARE_BF16_SOURCES or layout.fsdp or not layout.distributed_optimizer:
        return {}
    if model_name in PRECISION_AWARE_BF16_MOMENT_MODELS:
        notes.append("precision-aware optimizer with bf16 moments (the DeepSeek-V3 recipe sets it)")
        return {"precision_aware_optimizer": True, "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}
    if precision == "bf16":
        notes.append("precision-aware optimizer, fp32 moments (the performance scripts set it for BF16 with Adam)")
        return {"precision_aware_optimizer": True}
    return {}


# ---------------------------------------------------------------------------- measured throughput
def gpt_flops_per_token(spec: ModelSpec, seq: int, *, recompute_forward: bool) -> float:
    """The FLOPs per token the 2021-2022 Megatron papers report with (MHA GPT, full attention).

    Narayanan 2021 Eq. 3 (with the recompute forward): ``96*l*h^2*(1 + s/6h + V/(16*l*h))``;
    Korthikanti 2022 / Megatron-LM r0.8 model FLOPs: ``72*l*h^2*(1 + s/6h + V/(12*l*h))``.

    >>> spec = ModelSpec(name="g", num_layers=96, hidden_size=12288, ffn_hidden_size=49152,
    ...                  num_attention_heads=96, num_query_groups=96, vocab_size=51200)
    >>> round(gpt_flops_per_token(spec, 2048, recompute_forward=False) / 1e12, 3)  # ~6 * 175e9 + attention
    1.076
    """
    l, h, V, s = spec.num_layers, spec.hidden_size, spec.vocab_size, seq
    if recompute_forward:
        return 96.0 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return 72.0 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def measured_tokens(record: dict[str, Any], spec: ModelSpec, layout: Layout, num_gpus: int) -> tuple[float, str]:
    m = record.get("measured") or {}
    seq = record["model"]["seq_length"]
    if m.get("tokens_per_sec_per_gpu"):
        return float(m["tokens_per_sec_per_gpu"]), "tokens_per_sec_per_gpu"
    gbs = record["parallel"].get("gbs")
    if m.get("step_time_s") and gbs:
        return gbs * seq / m["step_time_s"] / num_gpus, "step_time_s"
    source = record["source_group"]
    if m.get("tflops_per_gpu") and source == "narayanan2021":
        full = layout.recompute == "full"
        return m["tflops_per_gpu"] * 1e12 / gpt_flops_per_token(spec, seq, recompute_forward=full), \
            "tflops_per_gpu (Narayanan Eq. 3" + (", recompute forward counted)" if full else ")")
    if m.get("tflops_per_gpu") and source == "megatron_lm_readme_h100":
        return m["tflops_per_gpu"] * 1e12 / gpt_flops_per_token(spec, seq, recompute_forward=False), \
            "tflops_per_gpu (Megatron r0.8 formula, full attention)"
    if m.get("mfu_pct") and source == "korthikanti2022":
        tflops = m["mfu_pct"] / 100 * 312
        return tflops * 1e12 / gpt_flops_per_token(spec, seq, recompute_forward=False), "mfu_pct (x 312 TFLOP/s)"
    raise Skip("no throughput measurement")


def flops_per_token_ratio(run: PublishedRun) -> float | None:
    """Reported TFLOP/s / tokens/s over megasolve's Megatron-formula FLOPs per token (~1 for Bridge
    >= 25.09, which counts causal attention; > 1 for sources counting full attention)."""
    if not run.reported_tflops_per_gpu or run.measured_from != "tokens_per_sec_per_gpu":
        return None
    reported = run.reported_tflops_per_gpu * 1e12 / run.measured_tokens_per_s_per_gpu
    return reported / (model_flops_per_sequence(run.spec, run.workload.seq_length) / run.workload.seq_length)


# ---------------------------------------------------------------------------- loading
def load_records(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The records of ``path``; by default the shared calibration file and ``bridge_extra_runs.yaml`` (the
    Megatron-Bridge table rows the shared file does not transcribe, ``benchmarks/bridge_tables.py``)."""
    if path:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return [*yaml.safe_load(DEFAULT_DATA.read_text(encoding="utf-8")),
            *yaml.safe_load(EXTRA_DATA.read_text(encoding="utf-8"))]


def load_published(path: str | Path | None = None) -> tuple[list[PublishedRun], Counter]:
    """All mapped runs and a counter of skip reasons."""
    runs, skipped = [], Counter()
    for record in load_records(path):
        try:
            runs.append(map_record(record))
        except Skip as exc:
            skipped[str(exc)] += 1
    return runs, skipped


def load_log_runs(path: str | Path = LOG_RUNS) -> list[PublishedRun]:
    """The public training logs of ``log_runs.yaml``, read as ``megasolve check`` reads them (``read_runs`` with the
    entry's ``given`` and ``args``), as fit-split runs: too few to hold any out, so their error is in-sample."""
    from megasolve.solver.runs import read_runs

    out = []
    for entry in yaml.safe_load(Path(path).read_text(encoding="utf-8")):
        given = dict(entry.get("given") or {})
        if entry.get("args"):
            given["args"] = {k: str(v) for k, v in entry["args"].items()}
        run = read_runs(LOGS / entry["file"], **given)[0]
        out.append(PublishedRun(
            id=f"user_log:{entry['file']}", source_group="user_logs", software=" ".join(run.software),
            spec=run.spec, cluster=run.cluster, workload=run.workload, layout=run.layout,
            measured_tokens_per_s_per_gpu=run.measured_tokens_per_s_per_gpu, measured_from="step_time_s (log)",
            comparison_group=None, series_group=entry["series"], split="fit"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=None, help="calibration_runs.yaml (default ../shared/data/...)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    runs, skipped = load_published(args.data)
    print(f"mapped {len(runs)} records, skipped {sum(skipped.values())}")
    for reason, count in skipped.most_common():
        print(f"  skip {count:3d}  {reason}")
    split = Counter((r.split, r.kind) for r in runs)
    print("split:", dict(sorted(split.items())))
    if args.verbose:
        for r in runs:
            ratio = flops_per_token_ratio(r)
            print(f"{r.split:7s} {r.id:60s} {r.measured_tokens_per_s_per_gpu:9.1f} "
                  f"{'' if ratio is None else f'flops-ratio {ratio:.3f}'}  {'; '.join(r.assumptions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
