"""A user's own training runs as megasolve inputs: ``read_runs(path) -> list[Run]``.

Reads, from any of:

* **Megatron-LM logs** as printed by ``megatron/training``: the argument dump between
  ``------------------------ arguments ------------------------`` and ``end of arguments``
  (``arguments.py::_print_args``: ``  name ........ value``), ``using world size: ...``
  (``arguments.py::validate_args``), the padded vocabulary (``tokenizer.py::_vocab_size_with_padding``:
  ``> padded vocab (size: V) with D dummy tokens (new size: P)``), the iteration lines of
  ``training.py::training_log`` (``iteration N/ M | ... | elapsed time per iteration (ms): T |
  throughput per GPU (TFLOP/s/GPU): F | ...``, with or without a ``[date time]`` stamp and any extra
  fields), the memory report of ``training.py::report_memory`` (``[Rank R] (after K iterations)
  memory (MB) | allocated: A | max allocated: B | reserved: C | max reserved: D``; MB = 2^20 bytes),
  the theoretical-memory line (``theoretical_memory_usage.py``: ``Theoretical memory footprints:
  weight and optimizer=X MB, activation=Y MB, total=Z MB``), and PyTorch's OOM message
  (``CUDA out of memory. Tried to allocate X GiB. GPU 0 has a total capacity of Y GiB ...``; the
  pre-2.1 form ``(GPU 0; Y GiB total capacity; ...)`` too). Launcher prefixes (slurm ``--label``
  ``0: ``, ``[host:rank]:``, torchrun ``[rank0]:`` / ``[default0]:``) are stripped, and lines of
  several ranks may be interleaved.
* **NeMo 2 / Megatron-Bridge logs**: the printed config (``key: value`` lines whose keys are
  Megatron-Core ``TransformerConfig`` / NeMo names: ``tensor_model_parallel_size``, ``num_layers``,
  ``gated_linear_unit``, ``devices``, ``num_nodes``, ...), ``train_step_timing in s: T`` (NeMo's
  Lightning progress line) and the Megatron-style iteration lines Bridge prints; ``TFLOP/s`` lines.
* **Shell launch scripts** holding a ``pretrain_gpt.py`` flag array (``--num-layers 32 ...``), with
  ``VAR=value`` / ``${VAR:-default}`` substitution and ``GPUS_PER_NODE`` / ``NNODES`` /
  ``--nproc_per_node`` / ``--nnodes`` for the world size.
* **A runs file** (YAML list, or CSV with the same columns flattened as ``layout.tp``), one entry
  per run, in the keys of ``estimate``'s JSON contract (README "Learn from your runs").

Facts a log does not hold (the GPU type, usually) come from ``defaults`` (the CLI's ``--gpu``,
``--vocab-size``, ...); when one is still missing, ``MegasolveError`` names it and the flag that
supplies it.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from megasolve.cost.compute import model_flops_per_sequence
from megasolve.cost.layers import has_block_kinds
from megasolve.cost.recompute import idle_module
from megasolve.models.errors import MegasolveError, UnknownNameError
from megasolve.models.layout import (ADAM_STATE_DTYPES, CP_COMM_TYPES, CUDA_GRAPH_IMPLS, FSDP_GRAD_DTYPES,
                                     MAIN_PARAMS_DTYPES, MOE_DISPATCHERS, OFFLOAD_MODULE_NAMES, RECOMPUTE_MODULE_NAMES,
                                     PRECISION_CHOICES, Layout, Workload, cuda_graph_note, fsdp_grad_comm_note,
                                     precision_fields)
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.pipeline_layout import even_text, expand as expand_pipeline_layout
from megasolve.models.params import total_params
from megasolve.models.presets import resolve_model
from megasolve.models.spec import ModelSpec
from megasolve.solver.logs import (DEVICE_LINE_WEIGHT, NEMO_RECIPE_SIZES, SIZE_NAMES, UNKNOWN_RANK, LogFacts, parse_log,
                                   scalar, undiff)
from megasolve.solver.prefilter import guard_patterns
from megasolve.topology.cluster import Cluster
from megasolve.topology.gpus import all_gpus, get_gpu

MIB = 2**20
GIB = 2**30
MAX_LOG_BYTES = 256 * 1024 * 1024
# iterations whose timing includes start-up work (CUDA graphs, NCCL setup, allocator growth): Megatron's
# first logged interval always does; with --log-interval 1 the first few single iterations do too
WARMUP_ITERATIONS = 3


# ---------------------------------------------------------------------------- the run
@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """What a run measured. ``rank``: the rank whose memory was measured (an int, ``"first"`` or
    ``"last"`` pipeline stage, or None: the peak stage). Memory in GB = 1e9 bytes."""

    step_time_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    peak_allocated_gb: float | None = None
    peak_reserved_gb: float | None = None
    rank: int | str | None = None
    oom: bool = False
    tflops_per_gpu: float | None = None  # as the framework reported it (its own FLOP convention)
    theoretical_memory_gb: float | None = None  # Megatron's own estimate, when printed
    iterations: int = 0  # timed iterations the step time is the median of

    def as_dict(self) -> dict[str, Any]:
        out = {"step_time_s": self.step_time_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
               "peak_allocated_gb": self.peak_allocated_gb, "rank": self.rank}
        if self.peak_reserved_gb is not None:
            out["peak_reserved_gb"] = self.peak_reserved_gb
        if self.oom:
            out["oom"] = True
        if self.tflops_per_gpu is not None:
            out["tflops_per_gpu"] = self.tflops_per_gpu
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One measured run: what ``estimate`` takes, plus the measurement and where it came from."""

    id: str
    spec: ModelSpec
    cluster: Cluster
    workload: Workload
    layout: Layout
    measured: Measured
    source: str = ""
    software: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # assumptions the reader made
    # parameters the log printed per (tensor rank, pipeline rank): a check of the model shape read
    printed_params: tuple[tuple[int, int, int], ...] = ()

    @property
    def measured_tokens_per_s_per_gpu(self) -> float | None:
        m = self.measured
        if m.tokens_per_s_per_gpu is not None:
            return m.tokens_per_s_per_gpu
        if m.step_time_s:
            return self.workload.global_batch_size * self.workload.seq_length / m.step_time_s / self.cluster.num_gpus
        return None

    @property
    def measured_step_s(self) -> float | None:
        m = self.measured
        if m.step_time_s is not None:
            return m.step_time_s
        if m.tokens_per_s_per_gpu:
            return self.workload.global_batch_size * self.workload.seq_length / m.tokens_per_s_per_gpu \
                / self.cluster.num_gpus
        return None

    def measured_stage(self) -> int | None:
        """The pipeline stage of the measured rank (Megatron orders ranks tp-cp-ep-dp-pp, PP slowest:
        ``parallel_state.py`` ``order="tp-cp-ep-dp-pp"``), None when no rank was named."""
        rank = self.measured.rank
        if rank is None:
            return None
        if rank == "first":
            return 0
        if rank == "last":
            return self.layout.pp - 1
        return int(rank) // (self.cluster.num_gpus // self.layout.pp)


# ---------------------------------------------------------------------------- entry point
def read_runs(path: str | Path, **defaults: Any) -> list[Run]:
    """Runs from a Megatron-LM / NeMo / Megatron-Bridge log, a launch script, or a runs file (YAML/CSV).

    ``defaults`` fill what the input does not say (what it says wins): ``gpu``, ``num_gpus``,
    ``gpus_per_node``, ``nvlink_domain``, ``model`` (anything ``--model`` takes; it replaces the shape in
    the log, and ``gpu`` replaces a GPU name found in it),
    ``vocab_size``, ``seq_length``, ``global_batch_size``, ``precision``, ``step_time_s``, ``oom`` and ``args``
    (a mapping of Megatron argument names, e.g. ``{"tensor-model-parallel-size": 2}``, for logs that do
    not print their argument dump).
    """
    text, path = _read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return [run_from_entry(e, f"{path.name}#{i + 1}", defaults) for i, e in enumerate(_csv_entries(text))]
    if suffix in (".yaml", ".yml", ".json") and not _looks_like_log(text):
        entries = _yaml_entries(text, path)
        if entries is not None:
            return [run_from_entry(e, f"{path.name}#{i + 1}", defaults) for i, e in enumerate(entries)]
    return [run_from_log(text, path.name, defaults)]


def _read_text(path: str | Path) -> tuple[str, Path]:
    """The text of a RUN (``undiff``-ed) and the path it is named by: a file; ``-``, standard input (named
    ``stdin``: ``tail -n 400 train.log | megasolve check -``); or a pipe or device that reads as a stream (``<(ssh
    host cat train.log)``), at most ``MAX_LOG_BYTES``."""
    too_large = MegasolveError(field="RUN", value=str(path), rule="is larger than 256 MiB",
                               fix="pass an excerpt: the argument dump and a few hundred iteration lines")
    if str(path) == "-":
        raw = sys.stdin.buffer.read(MAX_LOG_BYTES + 1)
        path = Path("stdin")
    else:
        path = Path(path)
        if path.is_dir():
            raise MegasolveError(field="RUN", value=str(path), rule="is a directory",
                                 fix="pass the log files in it (e.g. logs/*.log)")
        if not path.exists():
            raise MegasolveError(field="RUN", value=str(path), rule="no such file",
                                 fix="pass a training log, a launch script, or a runs YAML/CSV")
        if path.is_file() and path.stat().st_size > MAX_LOG_BYTES:
            raise too_large
        try:
            with path.open("rb") as stream:  # a pipe (process substitution) has no size to check first
                raw = stream.read(MAX_LOG_BYTES + 1)
        except OSError as exc:
            raise MegasolveError(field="RUN", value=str(path), rule=f"cannot be read ({exc.strerror})",
                                 fix="check the path and its permissions") from None
    if len(raw) > MAX_LOG_BYTES:
        raise too_large
    # universal newlines, as a text-mode read: a progress bar's bare '\r' ends a line
    return undiff(io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="replace").read()), path


def _looks_like_log(text: str) -> bool:
    return bool(re.search(r"elapsed time per iteration|-{4,} arguments -{4,}|train_step_timing|\s\.{6,}\s", text))


# ---------------------------------------------------------------------------- runs file
def _yaml_entries(text: str, path: Path) -> list[dict[str, Any]] | None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if not re.search(r"^[\s-]*measured\s*:", text, re.M):
            return None  # a config dump cut off mid-line (an issue excerpt) is no runs file: read it as a log
        raise MegasolveError(field="RUN", value=str(path), rule=f"is not valid YAML ({str(exc).splitlines()[0]})",
                             fix="check the file's syntax") from None
    if isinstance(data, dict) and "runs" in data:
        data = data["runs"]
    if isinstance(data, dict) and "measured" in data:
        data = [data]
    if not isinstance(data, list):
        return None  # a config dump saved as YAML: read as a log
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise MegasolveError(field=f"{path.name} entry {i + 1}", value=type(entry).__name__,
                                 rule="must be a mapping (model, cluster, layout, workload, measured)",
                                 fix="see README 'Learn from your runs'")
    return data


def _csv_entries(text: str) -> list[dict[str, Any]]:
    """CSV rows with dotted columns (``layout.tp``, ``measured.step_time_s``) as nested entries."""
    rows = list(csv.DictReader(io.StringIO(text)))
    out = []
    for row in rows:
        entry: dict[str, Any] = {}
        for key, raw in row.items():
            if key is None or raw is None or raw.strip() == "":
                continue
            node = entry
            parts = key.strip().split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = scalar(raw.strip())
        out.append(entry)
    return out


ENTRY_KEYS = {"id", "model", "cluster", "layout", "workload", "measured", "software", "source"}
# what marks `megasolve estimate --format json` output: with a `measured:` block added it is a runs-file
# entry, and every key it prints beyond the inputs (predictions, notes) is dropped
ESTIMATE_OUTPUT_KEYS = {"feasible", "memory", "time"}
LAYOUT_KEYS = {"tp", "pp", "vpp", "cp", "ep", "etp", "dp", "mbs", "sequence_parallel", "recompute",
               "recompute_num_layers", "recompute_modules", "distributed_optimizer", "fsdp", "cpu_offload_layers",
               "optimizer_offload_fraction",
               "account_for_embedding", "account_for_loss", "first_stage_layers", "last_stage_layers",
               "pipeline_layout"}
DERIVED_LAYOUT_KEYS = {"gbs", "num_microbatches"}  # in estimate's JSON, derived from the workload
WORKLOAD_KEYS = {f.name for f in fields(Workload)} - {"tokens", "gemm_overrides"}  # every input field but time-to-train
MEASURED_KEYS = {"step_time_s", "tokens_per_s_per_gpu", "peak_allocated_gb", "peak_reserved_gb", "rank", "oom",
                 "tflops_per_gpu"}


def _unknown(where: str, given: dict[str, Any], known: set[str]) -> None:
    extra = sorted(set(given) - known)
    if extra:
        raise MegasolveError(field=where, value=extra[0], rule=f"is not one of {', '.join(sorted(known))}",
                             fix="fix the key (estimate's JSON contract names)")


def run_from_entry(entry: dict[str, Any], run_id: str, defaults: dict[str, Any] | None = None) -> Run:
    """One runs-file entry (``model``, ``cluster``, ``layout``, ``workload``, ``measured``)."""
    defaults = defaults or {}
    if ESTIMATE_OUTPUT_KEYS <= set(entry):  # an estimate's JSON: keep the inputs, drop every output it printed
        entry = {k: v for k, v in entry.items() if k in ENTRY_KEYS}
    _unknown(f"{run_id}", entry, ENTRY_KEYS)
    model = entry.get("model") or defaults.get("model")
    if not model:
        raise MegasolveError(field=f"{run_id}: model", value="missing", rule="every run names its model",
                             fix="add model: <preset, config.json or Megatron YAML> (or pass --model)")
    spec = resolve_model(str(model)).spec
    cluster_raw = dict(entry.get("cluster") or {})
    for key in ("gpu", "num_gpus", "gpus_per_node", "nvlink_domain"):
        if key not in cluster_raw and defaults.get(key) is not None:
            cluster_raw[key] = defaults[key]
    if "gpu" not in cluster_raw:
        raise MegasolveError(field=f"{run_id}: cluster.gpu", value="missing", rule="the GPU type is required",
                             fix="add cluster: {gpu: h100, num_gpus: N} (or pass --gpu)")
    layout_raw = {k: v for k, v in dict(entry.get("layout") or {}).items() if k not in DERIVED_LAYOUT_KEYS}
    _unknown(f"{run_id}: layout", layout_raw, LAYOUT_KEYS)
    work_raw = {k: v for k, v in dict(entry.get("workload") or {}).items() if v is not None}  # JSON nulls: unset
    gbs_from_layout = (entry.get("layout") or {}).get("gbs")
    if "global_batch_size" not in work_raw and gbs_from_layout is not None:
        work_raw["global_batch_size"] = gbs_from_layout
    _unknown(f"{run_id}: workload", work_raw, WORKLOAD_KEYS)
    measured_raw = dict(entry.get("measured") or {})
    _unknown(f"{run_id}: measured", measured_raw, MEASURED_KEYS)
    # what the entry does not say, from the command line (--seq-len, --gbs, --step-time, --oom), as for a log
    for key, into in (("seq_length", work_raw), ("global_batch_size", work_raw), ("step_time_s", measured_raw),
                      ("oom", measured_raw)):
        if key not in into and defaults.get(key) is not None:
            into[key] = defaults[key]
    notes = [f"{flag} applies to logs and launch scripts: a runs-file entry names its model (the vocabulary is the "
             f"model's) and states its layout and workload under layout: and workload:"
             for key, flag in (("vocab_size", "--vocab-size"), ("args", "--arg")) if defaults.get(key)]
    if not any(k in measured_raw for k in ("step_time_s", "tokens_per_s_per_gpu", "peak_allocated_gb", "oom")):
        raise MegasolveError(field=f"{run_id}: measured", value="empty",
                             rule="needs step_time_s, tokens_per_s_per_gpu, peak_allocated_gb or oom",
                             fix="add what the run measured")
    if "num_gpus" not in cluster_raw and "nodes" not in cluster_raw:
        tp, pp, cp, dp = (int(layout_raw.get(k, 1)) for k in ("tp", "pp", "cp", "dp"))
        if "dp" not in layout_raw:
            raise MegasolveError(field=f"{run_id}: cluster.num_gpus", value="missing",
                                 rule="the GPU count is needed (or layout.dp)", fix="add cluster.num_gpus")
        cluster_raw["num_gpus"] = tp * pp * cp * dp
    cluster = Cluster.from_mapping(cluster_raw, where=f"{run_id}: cluster")
    workload = _workload(work_raw, run_id)
    layout = _layout_for(cluster.num_gpus, layout_raw, run_id)
    measured = Measured(**{k: v for k, v in measured_raw.items()})
    if isinstance(measured.rank, str) and measured.rank not in ("first", "last"):
        raise MegasolveError(field=f"{run_id}: measured.rank", value=measured.rank,
                             rule="must be a rank number, first or last", fix="e.g. rank: last")
    return Run(id=str(entry.get("id") or run_id), spec=spec, cluster=cluster, workload=workload, layout=layout,
               measured=measured, source=str(entry.get("source") or run_id),
               software=tuple(str(s) for s in _listify(entry.get("software"))), notes=tuple(notes))


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _workload(raw: dict[str, Any], where: str) -> Workload:
    raw = dict(raw)
    precision = raw.pop("precision", "bf16")
    if precision not in PRECISION_CHOICES:
        raise MegasolveError(field=f"{where}: workload.precision", value=precision,
                             rule="must be one of " + ", ".join(PRECISION_CHOICES),
                             fix="fp16 runs: use bf16 (same bytes)")
    fields = precision_fields(precision)
    if raw.pop("fp8_param_gather", False):
        fields["fp8_param_gather"] = True
    return Workload(**raw, **fields)


def _layout_for(num_gpus: int, raw: dict[str, Any], where: str) -> Layout:
    raw = dict(raw)
    tp, pp, cp = (int(raw.pop(k, 1)) for k in ("tp", "pp", "cp"))
    model_parallel = tp * pp * cp
    if num_gpus % model_parallel:
        raise MegasolveError(field=f"{where}: world size", value=num_gpus,
                             rule=f"is not divisible by tp({tp}) * pp({pp}) * cp({cp}) = {model_parallel} (ARG L432-434)",
                             fix="check the GPU count and the layout")
    dp = num_gpus // model_parallel
    if "dp" in raw and int(raw.pop("dp")) != dp:
        raise MegasolveError(field=f"{where}: layout.dp", value=dp,
                             rule=f"world {num_gpus} / (tp*pp*cp = {model_parallel}) gives dp {dp}",
                             fix="fix dp or the GPU count")
    raw.setdefault("sequence_parallel", tp > 1)
    if raw.get("recompute") in (None, "None", "null"):
        raw["recompute"] = "none"
    return Layout(tp=tp, pp=pp, cp=cp, dp=dp, **raw)


# ---------------------------------------------------------------------------- facts -> run
# NeMo / Megatron-Bridge config names -> Megatron-LM argument names
CONFIG_ALIASES = {
    "gated_linear_unit": "swiglu", "encoder_seq_length": "seq_length", "max_position_embeddings": "max_position_embeddings",
    "virtual_pipeline_model_parallel_size": "virtual_pipeline_model_parallel_size",
    "share_embeddings_and_output_weights": "share_embeddings_and_output_weights",
    "activations_checkpoint_granularity": "recompute_granularity", "activations_checkpoint_method": "recompute_method",
    "activations_checkpoint_num_layers": "recompute_num_layers", "override_vocab_size": "vocab_size",
    "moe_router_topk": "moe_router_topk", "num_experts": "num_moe_experts",
    "train_global_batch_size": "global_batch_size", "train_micro_batch_size": "micro_batch_size",
    "max_total_sequence_length": "seq_length",
    # Megatron-LM's current spellings of deprecated names (ARG L743-755; TC L771-777 @d98e8a6)
    "hybrid_layer_pattern": "hybrid_override_pattern",
    "moe_router_padding_for_quantization": "moe_router_padding_for_fp8",
    # --num-virtual-stages-per-pipeline-rank sets the VPP degree as it is (arguments.py L976-977)
    "num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size",
    # GPT-NeoX (pipe-parallel-size), launch scripts' *_size variables and verl's actor_* sizes (solver/logs.py)
    "pipe_parallel_size": "pipeline_model_parallel_size", "global_num_gpus": "world_size",
    # GPT-NeoX's model keys (megatron/neox_arguments/neox_args.py): its MoE, untied output layer and position embedding
    "moe_num_experts": "num_moe_experts", "moe_top_k": "moe_router_topk", "pos_emb": "position_embedding_type",
    **{f"{short}_size": name for short, name in SIZE_NAMES.items()},
    "actor_tp": SIZE_NAMES["tp"], "actor_pp": SIZE_NAMES["pp"],
    # verl: the actor's micro batch per GPU is Megatron's (workers/megatron_workers.py; the first one a command sets,
    # the actor's, wins over the critic's)
    "ppo_micro_batch_size_per_gpu": "micro_batch_size",
    # Megatron-DeepSpeed's GQA (--num-key-value-heads, megatron/arguments.py; no --group-query-attention there)
    "num_key_value_heads": "num_query_groups",
    # NeMo 1's userbuffer TP overlap (megatron_gpt_config.yaml ub_tp_comm_overlap; Megatron-Core's tp_comm_overlap)
    "ub_tp_comm_overlap": "tp_comm_overlap",
    **NEMO_RECIPE_SIZES,
}
SHAPE_KEYS = ("num_layers", "hidden_size", "num_attention_heads")
# tokenizer -> vocabulary size where the log names a well-known tokenizer and prints no size (first match
# wins): GPT-2 BPE 50257 (Radford et al. 2019); the rest are the vocab_size of the families' HF configs
# (Llama 2 / Mistral 7B / Mixtral 32000, Mistral-Nemo 131072, Llama 3 128256, Qwen3 151936,
# DeepSeek-V3 129280); T5's 32100 is len() of its tokenizer (32000 pieces + 100 sentinel ids), the size
# Megatron-DeepSpeed's PretrainedFromHF tokenizer reports (megatron/tokenizer/tokenizer.py _AutoTokenizer.vocab_size).
# Qwen2 / Qwen2.5 are left out: their sizes differ by model (151936, 152064). A key matches at a word's start.
TOKENIZER_VOCAB = (("gpt2bpe", 50257), ("gpt2-vocab", 50257), ("llama-3", 128256), ("llama3", 128256),
                   ("meta-llama-3", 128256), ("llama-2", 32000), ("llama2", 32000), ("mistral-nemo", 131072),
                   ("mistral", 32000), ("mixtral", 32000), ("qwen3", 151936), ("deepseek-v3", 129280),
                   ("t5-small", 32100), ("t5-base", 32100), ("t5-large", 32100), ("t5-3b", 32100), ("t5-11b", 32100))
# tokenizer types that load a Hugging Face tokenizer by name or path (Megatron-DeepSpeed, Megatron-LM)
HF_TOKENIZER_TYPES = ("pretrainedfromhf", "huggingfacetokenizer")
# NeMo 2 and Megatron-Bridge, whose GPT model configs switch the fused loss on (NVIDIA/NeMo @v2.0.0
# nemo/collections/llm/gpt/model/base.py L171 ``cross_entropy_loss_fusion: bool = True``; Megatron-Bridge
# models/gpt_provider.py L205, Megatron-Core's native kernel unless a model's bridge picks TE's), against NeMo 1,
# whose megatron_gpt configs leave it to Megatron-Core's default, off (MegatronBaseModel.build_transformer_config)
_NEMO2_MARK = re.compile(r"megatron\.bridge|Megatron-Bridge|ConfigContainer|nemo\.collections\.llm|nemo\.lightning|"
                         r"\bnemo_run\b|\bGPTConfig\b|scripts/performance/setup_experiment\.py")
# Megatron-Bridge's performance scripts pick TE's kernel for every recipe (scripts/performance/utils/overrides.py
# @067f987df L83-84, _set_common_perf_overrides)
_BRIDGE_PERF_MARK = re.compile(r"scripts/performance|perf_recipes|setup_experiment\.py|performance[-_ ]summary", re.I)
# their --deterministic (_bridge_perf_overrides)
_BRIDGE_DETERMINISTIC = {"deterministic_mode": True, "cross_entropy_loss_fusion": False, "tp_comm_overlap": False}
_NEMO1_MARK = re.compile(r"\bmcore_gpt\b|megatron_amp_O2|MegatronGPTModel|megatron_gpt_(?:config|pretraining)")
# verl's Megatron workers (its Megatron actor's overrides, or the trainer config that runs them): the actor's
# use_distributed_optimizer is True in every release (verl/trainer/config/ppo_megatron_trainer.yaml L50 @30911f1, its
# first; engine/megatron.yaml L35 @b178a3c), so a command that does not set it runs with it
_VERL_MEGATRON = re.compile(r"actor_rollout_ref\.actor\.megatron\.|ppo_megatron_trainer")
# NeMo / Megatron-Bridge named; DeepSpeed's loggers and optimizer (its "steps: N ... iter time (s)" lines are read as
# steps too, logs.py)
_NEMO_MARK = re.compile(r"\bNeMo\b|megatron\.bridge|Megatron-Bridge|scripts/performance/setup_experiment\.py")
_DEEPSPEED_MARK = re.compile(r"\[(?:config|engine|logging)\.py:\d+:\w+\]|\bZeRO optimizer\b")


def _bridge_perf_overrides(args: dict[str, Any]) -> None:
    """What Megatron-Bridge's performance scripts make of their own flags (``scripts/performance/utils/overrides.py``
    @067f987df), where the config they set is not printed: ``--deterministic`` applies
    ``apply_determinism_overrides`` (``recipes/utils/determinism_utils.py`` L36-46: deterministic mode, the unfused
    loss, no TP overlap, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``); ``-rl N`` is full block recompute of N layers and
    ``--recompute_modules`` selective recompute (``_set_recompute_overrides`` L163-186); ``-ol N`` offloads N layers'
    activations (L170-173); ``--moe_a2a_overlap true`` the EP all-to-all overlap without the shared-expert one
    (``_set_moe_a2a_overlap_overrides`` L189-199); ``--moe_flex_dispatcher_backend deepep | hybridep`` the flex
    dispatcher without the shared-expert overlap (``training/flex_dispatcher_backend.py`` L33-81; DeepEP falls back to
    alltoall on GB200 / GB300, run_from_log) and ``None`` the alltoall dispatcher (overrides.py L628-630);
    ``--use_tokendrop true`` a capacity factor of 1 with padding (``training/utils/moe_token_drop.py`` L25-29,
    overrides.py L455-461)."""
    if args.get("deterministic") is True:
        for key, value in _BRIDGE_DETERMINISTIC.items():
            args.setdefault(key, value)
    if "recompute_granularity" not in args:
        if args.get("recompute_modules"):
            args["recompute_granularity"] = "selective"
        elif isinstance(args.get("recompute_num_layers"), int):
            args["recompute_granularity"] = "full"
            args.setdefault("recompute_method", "block")
    offloaded = args.get("activation_offload_layers")
    if isinstance(offloaded, int) and not isinstance(offloaded, bool) and offloaded > 0:
        args.setdefault("cpu_offloading_num_layers", offloaded)
    if args.get("moe_a2a_overlap") is True:
        args.setdefault("overlap_moe_expert_parallel_comm", True)
        args.setdefault("moe_shared_expert_overlap", False)
    if "moe_flex_dispatcher_backend" in args and "moe_token_dispatcher_type" not in args:
        backend = args["moe_flex_dispatcher_backend"]
        if backend in ("deepep", "hybridep"):
            args["moe_token_dispatcher_type"] = "flex"
            args.setdefault("moe_shared_expert_overlap", False)
            args["_bridge_flex_backend"] = backend
        elif backend is None:
            args["moe_token_dispatcher_type"] = "alltoall"
    if args.get("use_tokendrop") is True:
        args.setdefault("moe_expert_capacity_factor", 1.0)
        args.setdefault("moe_pad_expert_input_to_capacity", True)


# the sizes ``validate_args`` prints on its "using world size" line -> argument names
WORLD_PARTS = {"tensor-model-parallel": "tensor_model_parallel_size", "pipeline-model-parallel":
               "pipeline_model_parallel_size", "context-parallel": "context_parallel_size",
               "data-parallel": "data_parallel_size", "model-parallel": "model_parallel_size"}


# arguments that say the layout (any one means the log printed its parallel setup)
LAYOUT_ARGS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size", "data_parallel_size")


def run_from_log(text: str, name: str = "log", defaults: dict[str, Any] | None = None) -> Run:
    """A ``Run`` from one Megatron-LM / NeMo / Megatron-Bridge log or launch script."""
    defaults = {k: v for k, v in (defaults or {}).items() if v is not None}
    defaults["_name"] = name
    if isinstance(defaults.get("gpu"), str):  # a --gpu the catalog lacks is said first, not after every missing fact
        try:
            get_gpu(defaults["gpu"])
        except UnknownNameError as exc:
            raise UnknownNameError(field=exc.field, value=exc.value, rule=exc.rule,
                                   fix=exc.fix.replace("a --cluster file", "a runs file's cluster: mapping "
                                                       "(bf16_tflops, mem_gb, ...)")) from None
    facts = parse_log(text)  # reads a posted diff as the file after it (logs.undiff)
    args: dict[str, Any] = {}
    for key, value in facts.args.items():  # an alias's None (a deprecated name a dump prints unset) keeps the value
        name_ = CONFIG_ALIASES.get(key, key)
        if name_ != key and name_ in facts.dump_keys and key not in facts.dump_keys and args.get(name_) is not None:
            continue  # the argument dump's own value wins over another spelling read elsewhere ("pp_size=8" printed
            # by a fork that simulates a larger job, fwyc0573/Megatron-LM, under a dump of pipeline size 1)
        if value is not None or args.get(name_) is None:
            args[name_] = value
    backend = args.get("_train_backend") or (f"slime --train-backend {args['train_backend']}"
                                             if args.get("train_backend") not in (None, "megatron") else None)
    if backend and not backend.endswith("megatron"):  # verl's actor strategy / slime's backend: PyTorch FSDP
        raise MegasolveError(field=f"{name}: training backend", value=backend,
                             rule="the run trains with PyTorch FSDP, not Megatron-Core, which is what megasolve costs",
                             fix="check a run of the Megatron backend (verl actor_rollout_ref.actor.strategy=megatron, "
                                 "slime --train-backend megatron)")
    if hyena := args.get("_hyena"):
        raise MegasolveError(field=f"{name}: model", value=f"a Hyena model ({hyena})",
                             rule="Hyena / StripedHyena mixers (Evo2) are no layer kind megasolve costs: it models "
                                  "attention, MoE, Mamba-2 and Gated DeltaNet layers",
                             fix="check a run of a transformer, MoE or hybrid Mamba model")
    for key in ("num_experts", "num_moe_experts"):  # Megatron-DeepSpeed prints a list per expert layer group: "[1]"
        if isinstance(args.get(key), str) and (m := re.fullmatch(r"\[\s*(\d+)(?:\s*,\s*\1)*\s*\]", args[key].strip())):
            args[key] = int(m.group(1))
            if args[key] == 1:  # one expert: a dense model (DeepSpeed's default)
                del args[key]
    _deepspeed_moe_args(args)
    _fastmoe_args(args)
    act = args.get("activation")
    if isinstance(act, str) and "swiglu" not in args:
        # NeMo 1's megatron_gpt config "activation: fast-swiglu" (its choices: gelu, geglu, reglu, swiglu, squared-relu,
        # and fast- variants; a gated one is Megatron's gated linear unit, two up-projections)
        function = act.lower().removeprefix("fast-")
        if function in ("swiglu", "geglu", "reglu"):
            args["swiglu"] = True
        elif function in ("gelu", "relu", "squared-relu", "approx-gelu"):
            args["swiglu"] = False
    if facts.whole_dump:  # every argument that Megatron had (runs.py reads what a missing one means)
        args["_whole_dump"] = True
    if facts.loss_scaled and not any(k in args for k in ("fp16", "bf16", "precision", "fp8", "compute_dtype")):
        args["fp16"] = True  # Megatron prints "loss scale: 1.0" for bf16; a dynamic scale means fp16
    for printed, arg in WORLD_PARTS.items():  # "using world size: ..., tensor-model-parallel size: 4, ..."
        if printed in facts.world_parts:
            args.setdefault(arg, facts.world_parts[printed])
    for key, value in (defaults.get("args") or {}).items():  # --arg NAME=VALUE: what the log does not print, under
        name, value = resolve_arg(key, value)  # the name a dump's would take (--num-key-value-heads: GQA)
        args[name] = value
    # (DeepSpeed's "steps: N ... iter time (s)" lines are read as steps too, logs.py: no sign of NeMo)
    if (facts.nemo_steps and not _DEEPSPEED_MARK.search(text)) or _NEMO_MARK.search(text):
        args.setdefault("_nemo", True)
    if (old_te := te_before_2_18(args, facts.software)) is not None:  # which of TE's loss kernels ran
        args.setdefault("_te_bf16grad", old_te)
    if _NEMO2_MARK.search(text) and not _NEMO1_MARK.search(text):  # whose model configs fuse the loss by default
        args.setdefault("_nemo2", True)
        if _BRIDGE_PERF_MARK.search(text):
            args.setdefault("_bridge_perf", True)
            _bridge_perf_overrides(args)
    if _VERL_MEGATRON.search(text):  # verl's Megatron actor: its config sets the distributed optimizer on
        args.setdefault("_verl_megatron", True)
    notes: list[str] = arg_notes(defaults.get("args") or {})
    if args.get("_deepspeed_moe"):
        notes.append("DeepSpeed-MoE (Megatron-DeepSpeed's --num-experts / --topk / --expert-interval) costed as "
                     "Megatron-Core's MoE layers: its gate, its all-to-all and its --moe-min-capacity floor are not "
                     "modelled" + ("; with sequence parallelism, which Megatron-Core's MoE needs under TP (the run had "
                                   "none: its dense layers' activations, TP-replicated, are under-counted)"
                                   if args.get("_deepspeed_moe_sp") else ""))
    if args.get("_fastmoe"):
        notes.append(f"FastMoE (fmoefy): --num-experts counts a worker's experts, "
                     + (f"x expert-parallel {args['_fastmoe_ep']} = {args.get('num_moe_experts')} in all; "
                        if args.get("_fastmoe_ep") else "the expert-parallel size is not printed, so the count is "
                        "taken as the model's (--arg num-experts=N for all of them); ")
                     + "each expert as wide as --ffn-hidden-size (FastMoE's patched model provider divides 4h by the "
                     "top-k: --arg moe-ffn-hidden-size=N if it ran); costed as Megatron-Core's MoE layers (FastMoE's "
                     "gate and all-to-all are not modelled)")
    if enc_dec := args.get("_enc_dec"):
        notes.append(f"an encoder-decoder run ({enc_dec}) costed as a GPT decoder of the shape given: its encoder, "
                     "cross-attention and decoder split are not modelled")
    if args.get("_wandb_step"):
        notes.append("step time from the W&B run summary: the last step's, not a steady-state median")
    if bert := args.get("_bert"):
        notes.append(f"a BERT run ({bert}) costed as a GPT decoder: its bidirectional attention core (twice the causal "
                     "FLOPs) and its binary (sentence-order) head are not modelled, expect a slower step")
    if args.get("_launcher") == "megatron-swift":
        _swift_defaults(args, notes)
    batches = [g for *_, g in facts.iterations if g]
    if batches and not isinstance(args.get("global_batch_size"), int):
        args["global_batch_size"] = statistics.mode(batches)
    elif batches and args["global_batch_size"] != (timed := statistics.mode(batches)):
        # the timed steps' own batch: a batch ramp-up's, or a later run's header in the excerpt (ALCF's ThetaGPU logs
        # hold several runs, microsoft/Megatron-DeepSpeed deepspeed4science long_seq_support)
        notes.append(f"global batch {timed}, as the iteration lines print it (the arguments say "
                     f"{args['global_batch_size']}: a batch ramp-up, or another run's)")
        args["global_batch_size"] = timed
    missing: list[str] = []
    _mindspeed_args(args, notes)
    if offloaded := args.get("_verl_offload"):  # verl/workers/megatron_workers.py update_actor: loaded back first
        notes.append(f"verl's actor {offloaded}: that state waits on the host between phases and "
                     "is loaded back for the actor update, so the training step holds it on the GPU, as costed")
    _training_notes(args, notes)
    if facts.seq_alternatives and args.get("seq_length") in facts.seq_alternatives:
        named = " or ".join(str(v) for v in facts.seq_alternatives)
        notes.append(f"sequence length {args['seq_length']}: the text names {named} as alternatives "
                     "(--arg seq-length=N to take another)")
    if isinstance(args.get("_chain_choice"), str):
        notes.append(f"the script's if/elif chain taken at {args['_chain_choice']}, the value the text names "
                     "(the script does not set it)")

    spec = _spec(args, facts, defaults, notes, missing)
    _sizes_from_shard_report(spec, args, notes)
    num_gpus = _world(args, facts, defaults, notes, missing)
    if not isinstance(args.get("global_batch_size"), int) and isinstance(args.get("_grad_accum_steps"), int) \
            and num_gpus:  # FlagPerf: "global_batchsize恒等于local_batchsize*gradient_accumulate_steps*data_parallel_size"
        mp = _int(args, "tensor_model_parallel_size", 1) * _int(args, "pipeline_model_parallel_size", 1) \
            * _int(args, "context_parallel_size", 1)
        if num_gpus % mp == 0 and isinstance(args.get("micro_batch_size"), int):
            args["global_batch_size"] = args["micro_batch_size"] * args["_grad_accum_steps"] * (num_gpus // mp)
            notes.append(f"global batch {args['global_batch_size']} = micro batch {args['micro_batch_size']} x "
                         f"{args['_grad_accum_steps']} accumulation steps x {num_gpus // mp} data-parallel ranks")
    _verl_batch(args, defaults, notes)
    _slime_batch(args, defaults, notes)
    gbs = args.get("global_batch_size") if isinstance(args.get("global_batch_size"), int) else \
        defaults.get("global_batch_size")
    if not isinstance(args.get("micro_batch_size"), int) and not isinstance(args.get("batch_size"), int) \
            and isinstance(args.get("_grad_accum_steps"), int) and isinstance(gbs, int) and num_gpus:
        # the micro-batch from the batch and the log's "setting number of micro-batches to constant N"
        mp = _int(args, "tensor_model_parallel_size", 1) * _int(args, "pipeline_model_parallel_size", 1) \
            * _int(args, "context_parallel_size", 1)
        steps = args["_grad_accum_steps"]
        if num_gpus % mp == 0 and gbs % (steps * (num_gpus // mp)) == 0:
            args["micro_batch_size"] = gbs // (steps * (num_gpus // mp))
            notes.append(f"micro batch {args['micro_batch_size']} = global batch {gbs} / ({steps} micro-batches x "
                         f"{num_gpus // mp} data-parallel ranks)")
    if not isinstance(args.get("global_batch_size"), int) and isinstance(args.get("batch_size"), int) and num_gpus:
        # Megatron-LM before 2021: --batch-size per data-parallel rank, no gradient accumulation
        mp = _int(args, "tensor_model_parallel_size", _int(args, "model_parallel_size", 1)) \
            * _int(args, "pipeline_model_parallel_size", 1)
        if num_gpus % mp == 0:
            args["global_batch_size"] = args["batch_size"] * (num_gpus // mp)
            notes.append(f"global batch {args['global_batch_size']} = batch_size {args['batch_size']} x "
                         f"{num_gpus // mp} data-parallel ranks (Megatron-LM before 2021)")
    if not isinstance(args.get("global_batch_size"), int) and not defaults.get("global_batch_size") \
            and (derived := _gbs_from_rates(args, facts, num_gpus)):
        args["global_batch_size"] = derived
        notes.append(f"global batch {derived}: the stated tokens/s/GPU x {num_gpus} GPUs x step time over the sequence "
                     "(--gbs N to override)")
    gpu = _gpu(facts, defaults, notes, missing)
    whole_command = bool(args.get("_megatron_launch")) and not args.get("_nemo") and not args.get("_unresolved_vars")
    if not any(k in args for k in LAYOUT_ARGS) and num_gpus != 1:  # one GPU: every parallel size is 1
        if args.get("_prose_data_parallel_size") == num_gpus:  # "DP8 on one 8-GPU node": data parallelism only
            notes.append(f"parallel sizes 1: the text states data parallelism {num_gpus} over all {num_gpus} GPUs")
        elif whole_command:  # a pretrain_*.py command with every variable set: no size flag means Megatron's 1
            notes.append("parallel sizes 1: the command passes no --tensor/--pipeline/--context/--expert-model-"
                         "parallel-size (Megatron-LM's defaults)")
        else:
            missing.append(("parallel layout", "--arg tensor-model-parallel-size=N (pipeline-, context-, "
                                               "expert-model-parallel-size, micro-batch-size likewise)"))
    if (facts.dump_keys & set(LAYOUT_ARGS) and "tensor_model_parallel_size" not in args
            and "model_parallel_size" not in args):
        # Megatron prints every argument; an excerpt of the dump without this one was cut before it
        missing.append(("tensor-model-parallel size (the argument dump is cut before it)",
                        "--arg tensor-model-parallel-size=N"))
    shape_printed = spec is not None or all(isinstance(args.get(k), int) for k in SHAPE_KEYS)
    has_experts = spec.is_moe if spec is not None else bool(args.get("num_moe_experts") or args.get("num_experts"))
    if shape_printed and not has_experts and _int(args, "expert_model_parallel_size", 1) > 1:
        # expert parallelism needs experts (ARG L1655-1658): the log was cut before the MoE shape
        missing.append((f"MoE shape (expert-model-parallel size {args['expert_model_parallel_size']}, "
                        "but no expert count is printed)",
                        "--arg num-experts=N --arg moe-router-topk=K --arg moe-ffn-hidden-size=F (or --model)"))
    layout_raw, work_raw = _layout_and_workload(args, defaults, notes, missing)
    if spec is not None:
        _check_pipeline_split(spec, layout_raw, missing)
        if modules := layout_raw.get("recompute_modules"):  # the run's modules: one that checkpoints nothing here
            idle = {m: why for m in modules if (why := idle_module(spec, m))}  # Megatron accepts and ignores
            for module, why in idle.items():
                notes.append(f"recompute module {module} left out: {why}")
            layout_raw["recompute_modules"] = tuple(m for m in modules if m not in idle)
            if not layout_raw["recompute_modules"]:
                del layout_raw["recompute_modules"]
    if args.get("_openrlhf") and args.get("_tqdm_rate") and facts.nemo_steps and not facts.iterations:
        # OpenRLHF's progress bar advances once a micro-batch (OpenRLHF/OpenRLHF#519: 3.10 s/it, an optimizer step
        # 8 of them): its rate is no step time
        facts.nemo_steps.clear()
        notes.append("OpenRLHF's progress-bar rate counts micro-batches, not optimizer steps: not taken as the step "
                     "time (--step-time SECONDS to give it)")
    if spec is not None and isinstance(work_raw.get("seq_length"), int):
        _tokens_from_stated_tflops(spec, work_raw["seq_length"], facts, defaults, notes)
    measured = _measured(facts, defaults, notes, missing, layout_raw)
    if missing:
        first = missing[0]
        raise MegasolveError(field=f"{name}: {first[0]}", value="missing",
                             rule="the log does not say" + ("" if len(missing) == 1 else
                                                            f" (also missing: {', '.join(m[0] for m in missing[1:])})"),
                             fix="; ".join(f"pass {m[1]}" for m in missing))
    cluster = Cluster.from_flags(num_gpus=num_gpus, gpu=gpu, gpus_per_node=defaults.get("gpus_per_node")
                                 or _gpus_per_node(args, num_gpus), nvlink_domain=defaults.get("nvlink_domain"))
    # Bridge's apply_flex_dispatcher_backend (training/flex_dispatcher_backend.py L58-67): DeepEP only on Ampere,
    # Hopper, B200 and B300; elsewhere the alltoall dispatcher
    if args.get("_bridge_flex_backend") == "deepep" and work_raw.get("moe_dispatcher") == "flex" \
            and cluster.gpu.name in ("gb200", "gb300"):
        work_raw["moe_dispatcher"] = "alltoall"
        notes.append(f"--moe_flex_dispatcher_backend deepep on {cluster.gpu.name}: Megatron-Bridge falls back to the "
                     "alltoall dispatcher there (DeepEP runs on Ampere, Hopper, B200 and B300; hybridep on NVL72)")
    if spec.is_moe and "moe_dispatcher" not in work_raw and args.get("_megatron_launch") and not args.get("_nemo"):
        work_raw["moe_dispatcher"] = "allgather"  # TC moe_token_dispatcher_type default
        notes.append("MoE dispatcher allgather: the command does not pass --moe-token-dispatcher-type "
                     "(Megatron-LM's default)")
    elif spec.is_moe and "moe_dispatcher" not in work_raw and args.get("_deepep_seen"):
        work_raw["moe_dispatcher"] = "flex"
        notes.append("MoE dispatcher flex (DeepEP): the log shows DeepEP running (deep_ep frames or errors)")
    elif spec.is_moe and "moe_dispatcher" not in work_raw:
        work_raw["moe_dispatcher"] = "alltoall"  # megasolve models alltoall and flex; Megatron's default is allgather
        notes.append("MoE dispatcher costed as alltoall (the log does not say; "
                     "--arg moe-token-dispatcher-type=flex for DeepEP)")
    ep_grid = layout_raw["tp"] * layout_raw.get("ep", 1) * layout_raw["pp"]
    if spec.is_moe and "etp" not in layout_raw and layout_raw["tp"] > 1 and num_gpus % ep_grid \
            and num_gpus % (ep_grid // layout_raw["tp"]) == 0:
        # Megatron's default ETP is TP (ARG), which these GPUs cannot hold: the run set it, as launchers do, to 1
        # (verl's DeepSeek 671B row: TP 8, EP 8, PP 12 on 96 GPUs)
        layout_raw["etp"] = 1
        notes.append(f"expert-tensor-parallel size taken as 1: the log does not say, and Megatron's default (TP = "
                     f"{layout_raw['tp']}) cannot split {num_gpus} GPUs into TP x EP x PP expert groups "
                     "(--arg expert-tensor-parallel-size=N to override)")
    if not spec.is_moe and "etp" in layout_raw:
        # Megatron accepts --expert-tensor-parallel-size for a dense model and builds its (unused) expert groups;
        # launchers pass it for every model (THUDM/slime#1522: ETP_SIZE=1 with a dense 4B model)
        notes.append(f"--expert-tensor-parallel-size {layout_raw.pop('etp')} has no effect on a dense model: ignored")
    if not spec.is_moe and (routing := [f for f in MOE_ROUTING_FIELDS if work_raw.pop(f, None) is not None]):
        notes.append(f"{', '.join(routing)}: no effect on a dense model, ignored")
    workload = _workload_read(work_raw, name, notes)
    layout = _layout_for(num_gpus, layout_raw, name)
    if isinstance(measured.rank, int) and measured.rank >= num_gpus:
        raise MegasolveError(field=f"{name}: memory report rank", value=measured.rank,
                             rule=f"is not a rank of a {num_gpus}-GPU run (the log mixes runs, or the GPU count is wrong)",
                             fix="pass --gpus N, or a log of one run")
    peak = cluster.gpu.peak_flops("fp8") / 1e12
    if measured.tflops_per_gpu is not None and measured.tflops_per_gpu > peak:  # a mislabelled field, not a rate
        notes.append(f"reported {measured.tflops_per_gpu:g} TFLOP/s per GPU is above the {cluster.gpu.name}'s dense peak "
                     f"({peak:g}): not used")
        measured = replace(measured, tflops_per_gpu=None,
                           tokens_per_s_per_gpu=None if args.get("_tokens_from_tflops") else measured.tokens_per_s_per_gpu)
    bf16_peak = cluster.gpu.peak_flops("bf16") / 1e12
    if measured.tflops_per_gpu is not None and workload.precision == "bf16" and not defaults.get("precision") \
            and measured.tflops_per_gpu > BF16_MFU_CEILING * bf16_peak:
        # vuiseng9/nemo-perf-nvfp4: 1,831 TFLOP/s per B200 (81 % of its bf16 peak) beside no precision flag
        share = f"reported {measured.tflops_per_gpu:g} TFLOP/s per GPU is {measured.tflops_per_gpu / bf16_peak:.0%} of " \
                f"the {cluster.gpu.name}'s bf16 peak, more than bf16 training reaches"
        if cluster.gpu.fp8_flops:
            notes.append(f"{share}: the run is likely FP8 or FP4 (--precision fp8 or fp4)")
        else:  # no FP8 units (MI250X, A100): the rate counts more than the model's FLOPs
            notes.append(f"{share}, and the {cluster.gpu.name} has no FP8: the rate counts more than the model's FLOPs "
                         "(Megatron-DeepSpeed's TFLOPs field counts the recomputed forward too)")
    software = tuple(f"{k} {v}" for k, v in sorted(facts.software.items()))
    return Run(id=name, spec=spec, cluster=cluster, workload=workload, layout=layout, measured=measured,
               source=name, software=software, notes=tuple(notes),
               printed_params=tuple((t, p, n) for (t, p), n in sorted(facts.rank_params.items())))


# the model FLOP utilisation above which a reported rate cannot be bf16's: the 53 published bf16 runs with a reported
# rate reach at most 0.55 (Narayanan et al. 2021's 530B GPT on 560 A100), and dense GEMMs alone ~0.87 of the peak
# (cost/calibration.yaml gemm_efficiency)
BF16_MFU_CEILING = 0.75


def _check_pipeline_split(spec: ModelSpec, layout: dict[str, Any], missing: list[tuple[str, str]]) -> None:
    """An even split needs the layers (and the embedding / loss stages the log accounts for) to divide over the
    pipeline's (virtual) stages; Megatron asserts it (ARG L985-998) unless the first/last stage or a layout
    string says otherwise: name the argument that gives the split (ms-swift#5737: GLM-4.5-Air's 46 layers, PP 4)."""
    stages = layout["pp"] * layout.get("vpp", 1)
    if stages == 1 or any(k in layout for k in ("first_stage_layers", "last_stage_layers", "pipeline_layout")):
        return
    extra = int(bool(layout.get("account_for_embedding"))) + int(bool(layout.get("account_for_loss")))
    if (spec.num_layers + extra) % stages:
        vpp = f" x {layout['vpp']} virtual stages" if stages != layout["pp"] else ""
        what = f"pipeline size {layout['pp']}{vpp}"
        fix = "--arg decoder-last-pipeline-num-layers=N (or decoder-first-pipeline-num-layers=N)"
        if stages != layout["pp"] and spec.num_layers % layout["vpp"]:
            # with VPP the first, last and middle ranks' layers must each divide by it (TC uneven-PP checks):
            # only a layout string splits these layers
            example = even_text(spec.num_layers, stages, spec.mtp_num_layers)
            fix = f"--arg pipeline-model-parallel-layout=LAYOUT (e.g. '{example}', the most even split)"
        missing.append((f"pipeline split ({spec.num_layers} layers do not divide over {what}; Megatron asserts it)",
                        fix))


def _sizes_from_shard_report(spec: ModelSpec | None, args: dict[str, Any], notes: list[str]) -> None:
    """TP and PP from Megatron's theoretical-memory report where the log states neither (``logs._SHARD_PARAMS_B``):
    the most loaded shard holds ``(T/pp + E)/tp`` parameters, every other shard ``T/(pp*tp)`` (printed only with
    PP > 1), ``T`` the transformer's, ``E`` one embedding (the printed "embedding layers" are two of them for an
    untied output layer, which PP 1 also puts on the most loaded shard: ``theoretical_memory_usage.py`` L246-285
    @d98e8a6). So with PP 1 ``tp = (T + embedding layers) / most``; with PP > 1 ``tp = E / (most - other)`` and
    ``pp = T / (other * tp)``. Dense transformers only (experts shard over EP and ETP as well; latent attention's
    down-projections and hybrid or DeltaNet layers are not all sharded over TP), and each size must come out a whole
    number within the report's rounding.

    >>> args, notes = {"_shard_params_b": {"transformer": 6.98, "embedding": 1.05, "most": 2.2703, "other": 1.745}}, []
    >>> _sizes_from_shard_report(resolve_model("llama-3.1-8b").spec, args, notes)
    >>> args["tensor_model_parallel_size"], args["pipeline_model_parallel_size"]
    (1, 4)
    """
    report = args.get("_shard_params_b") or {}
    if spec is None or spec.is_moe or spec.mla is not None or has_block_kinds(spec) \
            or any(k in args for k in LAYOUT_ARGS) \
            or not all(isinstance(report.get(k), float) for k in ("transformer", "embedding", "most")):
        return
    t, e, most, other = report["transformer"], report["embedding"], report["most"], report.get("other")

    def whole(x: float, tolerance: float) -> int | None:
        n = round(x)
        return n if n >= 1 and abs(x - n) <= tolerance * n else None

    if other is None:
        tp, pp = whole((t + e) / most, 0.02), 1
    else:
        single = e / 2 if spec.untie_embeddings_and_output_weights else e
        tp = whole(single / (most - other), 0.05) if most > other else None
        pp = whole(t / (other * tp), 0.03) if tp else None
    if not tp or not pp or tp & (tp - 1) or spec.num_attention_heads % tp:
        return
    args["tensor_model_parallel_size"], args["pipeline_model_parallel_size"] = tp, pp
    notes.append(f"TP {tp}, PP {pp} from Megatron's theoretical-memory report (most loaded shard {most:g}B"
                 + (f", other shards {other:g}B" if other is not None else ", no other shards") +
                 f" of a {t:g}B transformer; the log states no parallel size)")


def _world_from_memory_ranks(facts: LogFacts, tp: int, pp: int, cp: int, args: dict[str, Any]) -> int | None:
    """The GPU count from which ranks print their memory, where the pipeline has stages to tell it by: Megatron's
    ``report_memory`` prints on data-parallel rank 0 only (``training/utils.py``), so under the default rank order
    (``tp-cp-ep-dp-pp``, ``core/parallel_state.py`` RankGenerator) stage ``p`` prints ranks ``p*S .. p*S + TP*CP - 1``
    with ``S = TP*CP*DP``: the first printed rank past stage 0 is ``S``, and the world ``S x PP``. Taken only where
    every stage prints and every printed rank fits that pattern (a cut excerpt or another order leaves it to --gpus).

    >>> facts = LogFacts(); facts.memory = {r: (1.0, 2.0) for r in (0, 1, 4, 5, 8, 9, 12, 13)}
    >>> _world_from_memory_ranks(facts, 2, 4, 1, {})
    16
    >>> facts.memory = {r: (1.0, 2.0) for r in (0, 1, 8, 9)}  # stages 1 and 3 (ranks 4, 5, 12, 13) missing
    >>> _world_from_memory_ranks(facts, 2, 4, 1, {}) is None
    True
    """
    ranks = sorted(r for r in facts.memory if r != UNKNOWN_RANK)
    local = tp * cp
    if pp < 2 or args.get("use_tp_pp_dp_mapping") or not set(range(local)) <= set(ranks) \
            or not (beyond := [r for r in ranks if r >= local]):
        return None
    stride = beyond[0]
    if stride % local or any(r % stride >= local for r in ranks) or {r // stride for r in ranks} != set(range(pp)):
        return None
    return stride * pp


def _vocab_from_shard_report(model_args: dict[str, Any], args: dict[str, Any]) -> int | None:
    """The padded vocabulary from Megatron's theoretical-memory report where the log prints no size: the most loaded
    shard holds ``(T/pp + V*h)/tp`` parameters, plus ``V*h/tp`` more for an untied output layer with PP 1
    (``theoretical_memory_usage.py`` L246-285 @d98e8a6), ``T`` the transformer's, from the printed shape by the report's
    own formula (``2*L*h^2*((1 + g/a)*r + ffn/h*gated + 2/h) + h``: QKV and output, the MLP (x1.5 gated), two norms a
    layer and the final one, no biases). The shard is printed to 4 decimals (+-50,000 parameters) and the norms are
    split over TP in older releases, replicated in newer ones: ``V`` is taken only where exactly one multiple of
    ``make_vocab_size_divisible_by x TP`` (Megatron's padding, ``tokenizer.py::_vocab_size_with_padding``) lies within
    that error. Dense transformers with standard attention only (the report's formula for experts, latent attention
    and MTP layers has changed across releases).

    >>> shape = dict(num_layers=24, hidden_size=896, num_attention_heads=14, num_query_groups=2, ffn_hidden_size=4864,
    ...              swiglu=True, untie_embeddings_and_output_weights=True)
    >>> _vocab_from_shard_report(shape, {"_shard_params_b": {"transformer": 0.36, "embedding": 0.27, "most": 0.6302}})
    151936
    """
    most = (args.get("_shard_params_b") or {}).get("most")
    L, h, a = (model_args.get(k) for k in ("num_layers", "hidden_size", "num_attention_heads"))
    ffn = model_args.get("ffn_hidden_size") or (4 * h if isinstance(h, int) else None)
    if not isinstance(most, float) or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                              for v in (L, h, a, ffn)) \
            or (model_args.get("num_moe_experts") or 1) > 1 or model_args.get("multi_latent_attention") \
            or model_args.get("mtp_num_layers") or model_args.get("hybrid_override_pattern") \
            or model_args.get("experimental_attention_variant") or model_args.get("linear_attention_freq"):
        return None
    tp, pp = _int(args, "tensor_model_parallel_size", 1), _int(args, "pipeline_model_parallel_size", 1)
    g = model_args.get("num_query_groups") if model_args.get("group_query_attention") is not False else None
    g = g if isinstance(g, int) and g > 0 else a
    kv = model_args.get("kv_channels")
    ratio = (kv * a / h) if isinstance(kv, int) and kv > 0 else 1.0
    gated = 1.5 if model_args.get("swiglu") else 1.0
    norms = 2 * L * h + h
    transformer = 2 * L * h * h * ((1 + g / a) * ratio + ffn / h * gated) + norms
    copies = 2 if model_args.get("untie_embeddings_and_output_weights") and pp == 1 else 1
    # most*tp = T/pp + copies*V*h (norms counted inside /tp, as older releases did); newer ones replicate the norms
    centre = (most * 1e9 * tp - transformer / pp) / (copies * h)
    slack = (0.5e5 * tp + norms / pp * tp) / (copies * h)
    unit = (model_args.get("make_vocab_size_divisible_by") or 128) * tp
    if not isinstance(unit, int) or unit <= 0:
        return None
    candidates = [n * unit for n in range(max(1, math.floor((centre - slack) / unit)),
                                          math.ceil((centre + slack) / unit) + 1)
                  if abs(n * unit - centre) <= slack]
    return candidates[0] if len(candidates) == 1 else None


def _slime_batch(args: dict[str, Any], defaults: dict[str, Any], notes: list[str]) -> None:
    """slime's training batch where the command sets no ``--global-batch-size``: ``--rollout-batch-size`` prompts x
    ``--n-samples-per-prompt`` responses (default 1) // ``--num-steps-per-rollout`` (``slime/utils/arguments.py``
    L1971-1979 @624b824: the value slime sets, and asserts against a stated one). Without
    ``--num-steps-per-rollout`` slime leaves the batch to the command.

    >>> args, notes = {"rollout_batch_size": 16, "n_samples_per_prompt": 64, "num_steps_per_rollout": 1}, []
    >>> _slime_batch(args, {}, notes); args["global_batch_size"]
    1024
    """
    prompts, steps = args.get("rollout_batch_size"), args.get("num_steps_per_rollout")
    samples = args.get("n_samples_per_prompt", 1)
    if isinstance(args.get("global_batch_size"), int) or defaults.get("global_batch_size") \
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (prompts, steps, samples)):
        return
    args["global_batch_size"] = prompts * samples // steps
    notes.append(f"global batch {args['global_batch_size']}: slime's {prompts} prompts a rollout x {samples} samples "
                 f"each // {steps} training step(s) a rollout")


def _verl_batch(args: dict[str, Any], defaults: dict[str, Any], notes: list[str]) -> None:
    """verl's actor step where the log does not state Megatron's own: the global batch is ``ppo_mini_batch_size``
    prompts times ``rollout.n`` responses each (``verl/workers/megatron_workers.py``: ``ppo_mini_batch_size *=
    rollout.n``, then divided over the DP ranks), the sequence the longest prompt plus the longest response.

    >>> args, notes = {"_verl_ppo_mini_batch": 8, "_verl_rollout_n": 32, "_verl_max_prompt": 1024,
    ...                "_verl_max_response": 2048}, []
    >>> _verl_batch(args, {}, notes); args["global_batch_size"], args["seq_length"]
    (256, 3072)
    """
    m, n = args.get("_verl_ppo_mini_batch"), args.get("_verl_rollout_n")  # (n's default, 1, is no GRPO run's)
    if isinstance(m, int) and isinstance(n, int) and not isinstance(args.get("global_batch_size"), int) \
            and not defaults.get("global_batch_size"):
        args["global_batch_size"] = m * n
        notes.append(f"global batch {m * n}: verl's actor mini batch of {m} prompts x {n} responses each "
                     "(ppo_mini_batch_size x rollout.n)")
    prompt, response = args.get("_verl_max_prompt"), args.get("_verl_max_response")
    if isinstance(prompt, int) and isinstance(response, int) and not isinstance(args.get("seq_length"), int) \
            and not defaults.get("seq_length"):
        args["seq_length"] = prompt + response
        mean = args.get("_verl_mean_lengths")
        notes.append(f"sequence length {prompt + response}: verl's longest prompt ({prompt}) plus longest response "
                     f"({response}); generated responses vary, so expect a shorter mean sequence than costed"
                     + (f" (the RL steps' mean prompt plus response: {statistics.median(mean):.0f} tokens; with packed "
                        "sequences, --seq-len N costs that length)" if mean else ""))


def _swift_defaults(args: dict[str, Any], notes: list[str]) -> None:
    """Megatron-SWIFT (``megatron sft|pt|rlhf``) passes its own defaults to Megatron-LM
    (modelscope/ms-swift swift/megatron/argument/megatron_args.py): ``expert_tensor_parallel_size = 1`` (Megatron's
    own default is the TP size), the distributed optimizer on (its docs: "zero1 (use_distributed_optimizer on by
    default)"). Samples are packed or cut to ``--max_length``; Megatron's ``seq_length`` is only the position
    capacity there (it defaults to ``max_position_embeddings``), so ``max_length`` is the sequence trained."""
    if "expert_model_parallel_size" in args:
        args.setdefault("expert_tensor_parallel_size", 1)
    args.setdefault("use_distributed_optimizer", True)
    if isinstance(args.get("max_length"), int) and not isinstance(args.get("seq_length"), int):
        args["seq_length"] = args["max_length"]
        notes.append(f"sequence length {args['max_length']} from Megatron-SWIFT's --max_length"
                     + (" (packed: attention is costed over the whole sequence, while each packed sample attends "
                        "only to itself, so expect less attention work than predicted)" if args.get("packing") is True
                        else " (without --packing samples are up to this long: the run trains fewer tokens)"))


def _training_notes(args: dict[str, Any], notes: list[str]) -> None:
    """What a launch sets that megasolve does not cost, said rather than ignored."""
    if args.get("_recompute_from_table"):
        notes.append(f"recompute {args.get('recompute_granularity')} from the results table's first row "
                     "(recompute flags quoted around the table, the other rows' settings, are not used)")
    tuner = str(args.get("train_type") or args.get("tuner_type") or args.get("finetuning_type") or "").lower()
    if tuner == "lora" or args.get("lora_rank") not in (None, False) and tuner not in ("full", ""):
        notes.append("LoRA fine-tuning costed as full-parameter training (megasolve models full training: expect "
                     "less optimizer memory and a shorter backward than predicted)")
    elif tuner in ("ptuning", "adapter", "ia3"):  # NeMo 1's other PEFT schemes (logs.py _NEMO_PEFT_NAME)
        notes.append(f"PEFT ({tuner}) fine-tuning costed as full-parameter training (megasolve models full training: "
                     "expect less optimizer memory and a shorter backward than predicted)")
    if args.get("export_kd_teacher_load") not in (None, False, "None"):
        # Megatron-LM's ModelOpt distillation (post_training/arguments.py L65 @d98e8a6, --export-kd-teacher-load):
        # the teacher is built and loaded beside the student, and its forward runs every micro-batch
        notes.append("knowledge distillation (--export-kd-teacher-load) is not modelled: the teacher model's "
                     "weights and forward activations sit beside the student's, which is all megasolve costs "
                     "(expect more memory and a longer step than predicted)")
    if args.get("defer_embedding_wgrad_compute") is True:
        notes.append("--defer-embedding-wgrad-compute: the deferred inputs and logits gradients are counted on the "
                     "last stage; the time it saves (the output layer's wgrad GEMMs moved into the pipeline "
                     "flush) is not modelled")
    optimizer = args.get("optimizer")
    if isinstance(optimizer, str) and optimizer.lower() in ("muon", "dist_muon"):
        # Workload.optimizer muon (the workload reader sets it); what its cost leaves out, said
        notes.append(f"optimizer {optimizer}: Muon's Newton-Schulz temporaries (about 14 B per element of the "
                     "largest matrix a rank orthogonalises) and its fp32 TP all-gather are not modelled")
        legacy = args.get("use_layer_wise_param_layout") is False or args.get("no_use_layer_wise_param_layout") is True
        if legacy and (
                optimizer.lower() == "dist_muon" or args.get("use_distributed_optimizer") is True):
            # --no-use-layer-wise-param-layout: the "legacy LayerWise ping-pong path" (optimizer/__init__.py
            # L827-831 @d98e8a6), where Adam's parameters stay inside the layer-wise optimizer too
            notes.append("--no-use-layer-wise-param-layout (Muon's legacy layer-wise path) is costed as the default "
                         "layout path; its buffers differ and are not modelled")
        for key, default in MUON_COSTED_DEFAULTS.items():
            if args.get(key) not in (None, default):
                notes.append(f"--{key.replace('_', '-')} {args[key]} costed as Megatron-LM's default {default}")
    elif isinstance(optimizer, str) and optimizer and "adam" not in optimizer.lower():  # sgd, adaptive_muon, ...
        notes.append(f"optimizer {optimizer} costed as Adam (its state and step are not modelled)")
    if isinstance(ramp := args.get("rampup_batch_size"), str) and len(words := ramp.split()) == 3:
        # --rampup-batch-size START INCREMENT SAMPLES (ARG, nargs='*'): smaller batches over the first SAMPLES
        notes.append(f"batch-size ramp-up (--rampup-batch-size {ramp}): iterations of the first {words[2]} samples "
                     f"run global batches from {words[0]} up; costed at the full global batch")
    if args.get("deterministic_mode") is True or args.get("deterministic") is True:
        # Megatron-LM --deterministic-mode (NCCL ring algorithms, TE's deterministic attention backward, deterministic
        # MoE scatter), Megatron-Bridge's --deterministic: costed as the default, non-deterministic run; Megatron-LM's
        # CUBLAS_WORKSPACE_CONFIG is counted (Workload.deterministic_mode)
        notes.append("deterministic mode's speed is not modelled (NCCL ring-only collectives, deterministic attention "
                     "and MoE kernels): expect the measured step slower than predicted")
    graphs = cuda_graph_note(cuda_graph_impl(args))
    if graphs:
        notes.append(graphs)


def cuda_graph_impl(args: dict[str, Any]) -> str:
    """``--cuda-graph-impl`` as Megatron-LM resolves it: the deprecated ``--enable-cuda-graph`` is ``local``
    and ``--external-cuda-graph`` is ``transformer_engine`` (ARG L611-632), and a ``full_iteration`` entry of
    ``--cuda-graph-scope`` / ``--cuda-graph-modules`` means ``--cuda-graph-impl full_iteration``
    (``cuda_graph_config.py`` CUDA_GRAPH_MODULES_DEPRECATIONS).

    >>> cuda_graph_impl({}), cuda_graph_impl({"enable_cuda_graph": True})
    ('none', 'local')
    >>> cuda_graph_impl({"cuda_graph_impl": "local", "cuda_graph_scope": "['full_iteration']"})
    'full_iteration'
    """
    impl = args.get("cuda_graph_impl")
    impl = impl if isinstance(impl, str) and impl in CUDA_GRAPH_IMPLS else "none"
    if impl == "none" and args.get("enable_cuda_graph") is True:
        impl = "local"
    if impl == "none" and args.get("external_cuda_graph") is True:
        impl = "transformer_engine"
    scopes = " ".join(_words(args.get("cuda_graph_scope")) + _words(args.get("cuda_graph_modules")))
    if re.search(r"\bfull_iteration\b", scopes) and impl in ("none", "local"):  # enum spellings too
        impl = "full_iteration"
    return impl


def _spec(args: dict[str, Any], facts: LogFacts, defaults: dict[str, Any], notes: list[str],
          missing: list[tuple[str, str]]) -> ModelSpec:
    if defaults.get("model"):
        spec = resolve_model(str(defaults["model"])).spec
        printed = {k: args[k] for k in SHAPE_KEYS + ("ffn_hidden_size",)
                   if isinstance(args.get(k), int) and not isinstance(args.get(k), bool)}
        differ = [f"{k} {v} (the model: {getattr(spec, k)})" for k, v in printed.items() if v != getattr(spec, k)]
        experts = args.get("num_moe_experts")
        if isinstance(experts, int) and not isinstance(experts, bool) and experts > 1 \
                and experts != (spec.moe.num_experts if spec.moe else 1):  # an MoE run costed as another model
            differ.append(f"{experts} experts (the model: {spec.moe.num_experts if spec.moe else 'dense'})")
        if differ:  # the model given wins, but a log that prints another shape is said, not ignored
            notes.append(f"the log prints {', '.join(differ)}: costed as {spec.name}, as --model says (leave "
                         "--model out to cost the printed shape)")
        return _with_printed_mtp(spec, args, notes)
    absent = [k for k in SHAPE_KEYS if not isinstance(args.get(k), int)]
    if not absent and facts.model_names and (lacking := _preset_features_unprinted(facts, args)):
        # the named preset's layers, width and heads, printed without what makes it that model: a translated command
        # cut before --num-experts and the hybrid pattern (NVIDIA-NeMo/Megatron-Bridge#3027, Nemotron 3 Super):
        # built from the printed flags alone it would be a dense transformer
        notes.append(f"the log prints {lacking[0]}'s layers, width and heads but not its {lacking[1]}: costed as "
                     f"{lacking[0]}")
        spec = resolve_model(lacking[0]).spec
        return _with_printed_mtp(_with_printed_shape(spec, args, notes, missing), args, notes)
    if absent and facts.model_names:  # a recipe / config class / model name that fixes the shape
        # of several, the one named on most lines, then the first named ("Qwen3-30B-A3B on H800 is slow ... any
        # reports for Qwen3-30B-A3B and Qwen3-235B-A22B?", alibaba/Pai-Megatron-Patch#643)
        named = {name: lines for name, lines in facts.model_names.items()  # a proxy is described by its base model
                 if f"{name}-proxy" not in facts.model_names}  # ("Layer parameters are same as DeepSeek-V3 model")
        printed = args.get("_printed_params_b")
        if isinstance(printed, float) and printed > 0:  # a name the model Megatron built does not match is not its
            # (a script copied from train_gpt3_175b_distributed.sh into a 7B run's: "Total number of parameters in
            # billions: 6.44", fixstars/mdk)
            sized = {name: lines for name, lines in named.items()
                     if 0.75 <= total_params(resolve_model(name).spec) / 1e9 / printed <= 1.33}
            if not sized:
                missing.append((f"model (the log names {', '.join(named)} but prints {printed:g}B parameters)",
                                "--model NAME|config.json"))
                return None  # type: ignore[return-value]
            named = sized
        most = max(named.values())
        preset = next(name for name, lines in named.items() if lines == most)
        others = [name for name in facts.model_names if name != preset]
        also = f"; the text also names {', '.join(others)}" if others else ""
        notes.append(f"model {preset} as the log names it{also} (--model to override)")
        if preset in facts.variant_notes:  # a variant read as this preset, whose difference is not modelled
            notes.append(facts.variant_notes[preset])
        return _with_printed_mtp(_with_printed_shape(resolve_model(preset).spec, args, notes, missing), args, notes)
    if absent and args.get("_model_not_preset"):
        missing.append((f"model ({args['_model_not_preset']}, no preset)", "--model config.json"))
        return None  # type: ignore[return-value]
    if absent:
        missing.append((f"model shape ({', '.join(absent)})", "--model NAME|config.json"))
        return None  # type: ignore[return-value]
    model_args = dict(args)
    if "bias" in model_args and "add_bias_linear" not in model_args:
        model_args["add_bias_linear"] = bool(model_args.pop("bias"))
    if isinstance(model_args.get("normalization"), str):
        # NeMo's layernorm1p (Megatron's --apply-layernorm-1p: a zero-centred gamma) and low_precision_layernorm
        # cost what LayerNorm costs (nemo/collections/nlp/modules/common/megatron/layer_norm_1p.py)
        model_args["normalization"] = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm", "layernorm1p": "LayerNorm",
                                       "layernorm_1p": "LayerNorm", "low_precision_layernorm": "LayerNorm"}.get(
            model_args["normalization"].lower(), model_args["normalization"])
    if isinstance(model_args.get("position_embedding_type"), str):
        kind = model_args["position_embedding_type"].split(".")[-1].replace("rotary", "rope")
        model_args["position_embedding_type"] = "learned_absolute" if kind == "learned" else kind  # GPT-NeoX's name
    if model_args.pop("no_weight_tying", None) is True:  # GPT-NeoX: an output layer of its own
        model_args.setdefault("untie_embeddings_and_output_weights", True)
    if str(model_args.pop("attention_head_type", "")).lower() == "multiquery" or model_args.get("_prose_mqa"):
        model_args.setdefault("num_query_groups", 1)  # BigCode's fork's flag, or "a 1B MQA model": one KV group
    if model_args.get("num_query_groups") and model_args.get("num_query_groups") != model_args["num_attention_heads"]:
        model_args.setdefault("group_query_attention", True)
    if model_args.get("group_query_attention") is None:
        model_args.pop("group_query_attention", None)
    vocab = model_args.get("vocab_size") or defaults.get("vocab_size")
    if facts.padded_vocab and not vocab:
        vocab = facts.padded_vocab[0]
        notes.append(f"vocabulary {vocab} from the tokenizer line (padded to {facts.padded_vocab[1]})")
    if not vocab and model_args.get("padded_vocab_size"):
        vocab = model_args["padded_vocab_size"]
    rows, width = args.get("_embedding_shape") or (0, 0)
    if not vocab and rows and width == model_args.get("hidden_size"):
        tp = _int(args, "tensor_model_parallel_size", 1)  # the printed rows are one TP rank's share
        vocab = rows * tp
        notes.append(f"vocabulary {vocab} from the printed word-embedding shape ({rows} rows"
                     + (f" x TP {tp}" if tp > 1 else "") + ", padded)")
    if not vocab and (vocab := _vocab_from_shard_report(model_args, args)):
        notes.append(f"vocabulary {vocab} from Megatron's theoretical-memory report (the most loaded shard's "
                     f"{args['_shard_params_b']['most']:g}B parameters less the printed shape's transformer share)")
    if not vocab:
        # a Hugging Face tokenizer loads by name or path; a --vocab-file beside it is unused (bigscience-workshop/
        # Megatron-DeepSpeed#93: VOCAB_FILE=data/gpt2-vocab.json set, --tokenizer-name-or-path t5-small used)
        by_name = str(model_args.get("tokenizer_type") or "").lower() in HF_TOKENIZER_TYPES
        tokenizer = " ".join(str(model_args.get(k) or "") for k in ("tokenizer_type", "tokenizer_model",
                                                                      "tokenizer_name_or_path",
                                                                      *(() if by_name else ("vocab_file",)))).lower()
        for key, size in TOKENIZER_VOCAB:
            if any(re.search(rf"(?<![a-z0-9]){re.escape(key)}", t) for t in {tokenizer, tokenizer.replace("_", "-")}):
                vocab = size
                notes.append(f"vocabulary {size} assumed from the tokenizer ({key})")
                break
    if not vocab and facts.model_names:  # a named model whose printed shape this is: its tokenizer
        # (alibaba/Pai-Megatron-Patch#652: a converter's command prints Qwen2.5-VL-7B's shape and names it)
        preset = max(facts.model_names, key=facts.model_names.__getitem__)
        if _prints_shape_of(preset, args):
            vocab = resolve_model(preset).spec.vocab_size
            notes.append(f"vocabulary {vocab} from {preset}, which the log names and whose shape it prints")
    if not vocab:
        missing.append(("vocab_size", "--vocab-size N"))
        return None  # type: ignore[return-value]
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab <= 0:
        raise MegasolveError(field=f"{defaults.get('_name', 'log')}: vocab_size", value=vocab,
                             rule="must be a positive whole number", fix="pass --vocab-size N")
    model_args["vocab_size"] = int(vocab)
    model_args.pop("padded_vocab_size", None)
    # None is a value only for q_lora_rank (no query LoRA, DeepSeek-V2-Lite); elsewhere it means "unset"
    known = {k: v for k, v in model_args.items() if k in MODEL_ARG_NAMES and (v is not None or k == "q_lora_rank")}
    if not isinstance(known.get("moe_layer_freq", 1), (int, list, str)):
        known.pop("moe_layer_freq")
    # the name: a model the log names whose shape it prints ("mixtral-8x7b (printed shape)"), else "from-log"
    named = next((preset for preset in sorted(facts.model_names, key=lambda n: -facts.model_names[n])
                  if _prints_shape_of(preset, model_args)), None)
    label = f"{named} (printed shape)" if named else "from-log"
    if named:
        _fill_model_level(resolve_model(named).spec, model_args, known, notes)
    try:
        return spec_from_megatron_args(known, name=str(defaults.get("name") or label), source="training log")
    except (ValueError, TypeError, ZeroDivisionError) as exc:  # a printed value of the wrong kind (a cut line)
        raise MegasolveError(field=f"{defaults.get('_name', 'log')}: model arguments", value=str(exc).split("\n")[0],
                             rule="do not make a model", fix="check the log's model arguments, or pass --model") from None


# the sizes a log may print beside a recipe name; what it prints wins over the named preset (NVIDIA-NeMo/NeMo#12103:
# a Mixtral 8x7B recipe edited to 8 layers)
PRINTED_SIZE_KEYS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups")


def _with_printed_mtp(spec: ModelSpec, args: dict[str, Any], notes: list[str]) -> ModelSpec:
    """``spec`` with the MTP layers the run trained: a printed ``mtp_num_layers`` (``None``, Megatron's unset, is
    none) replaces the model's (a preset keeps its released MTP layers, which a framework may not train)."""
    layout = args.get("pipeline_model_parallel_layout")
    if "mtp_num_layers" not in args and isinstance(layout, str) and spec.mtp_num_layers and "L" in layout \
            and "m" not in layout:
        # a layout string places every MTP layer ('m', PPL L111-113): one with none trained none ("Et|(tt|)*30L",
        # Megatron-LM's DeepSeek-V3 GB200 discussion)
        notes.append(f"the pipeline layout {layout!r} holds no MTP layer: {spec.name} costed without its "
                     f"{spec.mtp_num_layers} MTP layer(s)")
        return spec.with_mtp_layers(0)
    if "mtp_num_layers" not in args:
        return spec
    value = args["mtp_num_layers"]
    layers = 0 if value is None else value
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 0 or layers == spec.mtp_num_layers:
        return spec
    notes.append(f"the log prints mtp_num_layers {value}: {spec.name} costed with {layers} MTP layer(s), not "
                 f"{spec.mtp_num_layers}")
    return spec.with_mtp_layers(layers)


def _with_printed_shape(spec: ModelSpec, args: dict[str, Any], notes: list[str],
                        missing: list[tuple[str, str]]) -> ModelSpec:
    """``spec`` (a preset named in the log) with the sizes the log prints where they differ, said in a note; sizes
    the preset cannot take (DeepSeek-V3's dense-then-MoE pattern cut to 4 layers) leave the shape missing."""
    printed = {k: args[k] for k in PRINTED_SIZE_KEYS
               if isinstance(args.get(k), int) and not isinstance(args.get(k), bool) and args[k] > 0
               and args[k] != getattr(spec, k)}
    if not printed:
        return spec
    changes: dict[str, Any] = dict(printed)
    if {"hidden_size", "num_attention_heads"} & set(printed) and not isinstance(args.get("kv_channels"), int):
        changes["kv_channels"] = None  # h / n again, unless the log prints it
    if "num_layers" in printed and spec.moe is not None:  # the MoE pattern repeated over the new depth
        pattern = spec.moe.layer_pattern
        period = next(p for p in range(1, len(pattern) + 1)
                      if len(pattern) % p == 0 and pattern == pattern[:p] * (len(pattern) // p))
        if printed["num_layers"] % period == 0:
            changes["moe"] = replace(spec.moe, layer_pattern=pattern[:period] * (printed["num_layers"] // period))
    try:
        out = replace(spec, **changes)
    except (ValueError, TypeError, MegasolveError) as exc:  # a size the preset's other fields cannot take
        # ("DeepSeek-V3 (4 layers + MTP)", AMD Primus's MoE blog: costed whole, it came out 10x the measured step)
        said = ", ".join(f"{k} {v}" for k, v in printed.items())
        missing.append((f"model shape (the log prints {said}, which {spec.name} cannot take: "
                        f"{str(exc).splitlines()[0]})", "--model config.json (or --arg with the sizes it lacks)"))
        return spec
    notes.append("the log prints " + ", ".join(f"{k} {v}" for k, v in printed.items())
                 + f": {spec.name} costed with them")
    return out


def _preset_features_unprinted(facts: LogFacts, args: dict[str, Any]) -> tuple[str, str] | None:
    """The preset the log names most, and what of it the log leaves out, when the log prints that preset's shape
    but not its experts, hybrid layer pattern or latent attention; else None."""
    preset = max(facts.model_names, key=facts.model_names.__getitem__)
    if not _prints_shape_of(preset, args):
        return None
    spec = resolve_model(preset).spec
    lacking = [what for what, has, printed in (
        ("experts", spec.is_moe, ("num_experts", "num_moe_experts", "moe_num_experts")),
        ("hybrid layer pattern", spec.is_hybrid, ("hybrid_override_pattern",)),
        ("latent attention", spec.mla is not None, ("multi_latent_attention", "kv_lora_rank")))
        if has and not any(args.get(k) for k in printed)]
    return (preset, " and ".join(lacking)) if lacking else None


def _fill_model_level(named: ModelSpec, printed: dict[str, Any], known: dict[str, Any], notes: list[str]) -> None:
    """Into ``known``, what a model takes beside its transformer config that the log leaves out, from ``named``, the
    preset the log names and whose shape it prints: a printed ``TransformerConfig(...)`` (verl, Megatron-Bridge) holds
    no position embedding, rotary share, output-layer tying or position limit, which ``GPTModel`` takes apart
    (``gpt_model.py`` ``GPTModel.__init__``). Built without them, verl's Qwen3-235B-A22B log was costed with learned
    positions up to 4,096 and any longer sequence was refused. A Megatron-LM argument dump prints them all: nothing
    is filled then.

    >>> known, notes = {}, []
    >>> _fill_model_level(resolve_model("qwen3-8b").spec, {"num_layers": 36}, known, notes)
    >>> known["position_embedding_type"], known["untie_embeddings_and_output_weights"], len(notes)
    ('rope', True, 1)
    """
    tying = ("untie_embeddings_and_output_weights", "share_embeddings_and_output_weights")
    filled = []
    for key, value in (("position_embedding_type", named.position_embedding_type),
                       ("rotary_percent", named.rotary_percent),
                       ("max_position_embeddings", named.max_position_embeddings),
                       ("untie_embeddings_and_output_weights", named.untie_embeddings_and_output_weights)):
        if key in printed or (key in tying and any(k in printed for k in tying)):
            continue
        known[key] = value
        filled.append(key)
    if filled:
        notes.append(f"{', '.join(filled)} from {named.name}, which the log names and whose shape it prints "
                     "(the printed config does not hold them)")


def _prints_shape_of(preset: str, args: dict[str, Any]) -> bool:
    """The layers, width and heads a log prints are ``preset``'s (the preset the log names is the model it built)."""
    named = resolve_model(preset).spec
    return all(args.get(k) == getattr(named, k) for k in ("num_layers", "hidden_size", "num_attention_heads"))


MODEL_ARG_NAMES = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "group_query_attention",
    "num_query_groups", "kv_channels", "swiglu", "normalization", "add_bias_linear", "disable_bias_linear",
    "add_qkv_bias", "qk_layernorm", "untie_embeddings_and_output_weights", "share_embeddings_and_output_weights",
    "position_embedding_type", "vocab_size", "max_position_embeddings", "seq_length", "num_moe_experts",
    "num_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq",
    "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "mtp_num_layers", "make_vocab_size_divisible_by", "moe_router_num_groups", "moe_router_group_topk",
    # attention variants a printed argument dump carries (models/megatron_args.py reads them; left out, a DSA or
    # DeltaNet run would be read as plain attention): windows, DeltaNet, DSA
    "window_size", "window_attn_skip_freq", "experimental_attention_variant", "linear_attention_freq",
    "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_conv_kernel_dim", "attention_output_gate", "dsa_indexer_n_heads", "dsa_indexer_head_dim",
    "dsa_indexer_topk", "dsa_indexer_topk_freq", "dsa_indexer_skip_topk_offset", "dsa_indexer_loss_coeff",
    "dsa_indexer_use_sparse_loss", "dsa_kernel_backend",
    # hybrid Mamba layers (left out, a Nemotron-H run was read as a plain transformer of num_layers layers), latent
    # experts, attention sinks, one repeated MTP layer, squared-ReLU MLPs, the shared-expert gate
    "hybrid_override_pattern", "is_hybrid_model", "mamba_state_dim", "mamba_head_dim", "mamba_num_groups",
    "mamba_num_heads", "moe_latent_size", "softmax_type", "mtp_use_repeated_layer", "squared_relu",
    "moe_shared_expert_gate",
}
# Every other argument name the readers look up in a run's arguments (layout, precision, batch, launcher and framework
# names; tests/test_arg_names.py scans this module's source for each lookup and holds this set to it).
# ``--arg NAME=VALUE`` with a name neither here, in MODEL_ARG_NAMES nor among the model keys megatron_args reads changes
# nothing, and says so.
RUN_ARG_NAMES = frozenset({
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "activation",
    "activation_func_fp8_input_store", "activation_offload_fraction", "activation_offload_layers",
    "actor_num_gpus_per_node",
    "attention_backend", "attention_dropout", "attention_head_type", "batch_size", "batch_size_per_gpu", "bf16",
    "bias", "bias_activation_fusion", "bias_swiglu_fusion", "checkpoint_activations", "compute_dtype",
    "context_parallel_size", "cp_comm_type", "cpu_offloading", "cpu_offloading_activations",
    "cpu_offloading_num_layers", "cpu_offloading_weights", "cross_entropy_fusion_impl", "cross_entropy_loss_fusion",
    "cuda_graph_impl", "cuda_graph_modules", "cuda_graph_scope", "cutoff_len", "data_parallel_sharding_strategy",
    "data_parallel_size", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", "deepspeed",
    "defer_embedding_wgrad_compute", "delta_offload_bytes_across_pp_ranks", "deterministic", "deterministic_mode",
    "devices", "enable_cuda_graph", "enable_expert_tensor_parallelism", "exp_avg_dtype", "exp_avg_sq_dtype",
    "expert_ep_size", "expert_interval", "expert_model_parallel_size", "expert_tensor_parallel_size",
    "export_kd_teacher_load", "external_cuda_graph", "fine_grained_activation_offloading", "finetuning_type",
    "first_last_layers_bf16", "fmoe_num_experts", "fmoefy", "fp16", "fp4", "fp4_format", "fp4_param",
    "fp4_param_gather", "fp4_recipe", "fp8", "fp8_format", "fp8_output_proj", "fp8_param_gather", "fp8_params",
    "fp8_recipe", "gated_linear_unit", "global_batch_size", "gpus_per_node", "grad_reduce_in_bf16",
    "grad_reduce_in_fp32", "hidden_dropout", "lora_rank", "main_grads_dtype", "main_params_dtype", "max_length",
    "megatron_fsdp_grad_comm_dtype", "megatron_fsdp_main_grads_dtype", "megatron_fsdp_main_params_dtype",
    "megatron_fsdp_max_pool_double_buffer", "micro_batch_size", "microbatch_group_size_per_vp_stage",
    "min_offloaded_tensor_size", "mixed_precision", "model_parallel_size", "moe_a2a_overlap",
    "moe_expert_capacity_factor", "moe_flex_dispatcher_backend",
    "moe_expert_parallel_size", "moe_layer_recompute", "moe_pad_expert_input_to_capacity",
    "moe_router_padding_for_fp8", "moe_shared_expert_overlap", "moe_token_dispatcher_type", "moe_token_drop_policy",
    "moe_token_dropping", "moe_tp_extend_ep", "moe_train_capacity_factor", "muon_num_ns_steps",
    "muon_scalar_optimizer", "muon_tp_mode", "n_gpus_per_node", "n_samples_per_prompt", "nnodes",
    "no_use_layer_wise_param_layout", "no_weight_tying", "noop_layers", "nproc_per_node",
    "num_distributed_optimizer_instances", "num_gpu_per_node", "num_gpus_per_node", "num_layers_at_end_in_bf16",
    "num_layers_at_start_in_bf16", "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "num_layers_per_virtual_pipeline_stage", "num_nodes", "num_steps_per_rollout", "offload_modules", "optimizer",
    "optimizer_cpu_offload", "optimizer_offload_fraction", "overlap_grad_reduce",
    "overlap_moe_expert_parallel_comm", "overlap_p2p_comm", "overlap_param_gather", "packing", "padded_vocab_size",
    "pipeline_model_parallel_layout", "pipeline_model_parallel_size", "precision", "quant_recipe", "quick_geglu",
    "rampup_batch_size", "recompute_activations", "recompute_granularity", "recompute_method", "recompute_modules",
    "recompute_num_layers", "rollout_batch_size", "sequence_parallel", "te_precision_config_file", "te_version",
    "tensor_model_parallel_size", "tokenizer_type", "topk", "tp_comm_overlap", "train_backend", "train_type",
    "transformer_impl", "tuner_type", "use_distributed_optimizer", "use_flash_attn",
    "use_fused_weighted_squared_relu", "use_layer_wise_param_layout", "use_megatron_fsdp",
    "use_precision_aware_optimizer", "use_tokendrop", "use_torch_fsdp2", "use_tp_pp_dp_mapping",
    "virtual_pipeline_model_parallel_size", "wgrad_deferral_limit", "world_size", "zero_stage"
})


@functools.cache
def megatron_options() -> dict[str, tuple[str, bool]]:
    """Megatron-LM's training options (``megatron_options.tsv``, @d98e8a64), underscored: option -> (argparse dest,
    whether the flag stores False)."""
    rows = (line.split("\t") for line in (Path(__file__).parent / "megatron_options.tsv").read_text().splitlines()
            if line and not line.startswith("#"))
    return {option.replace("-", "_"): (dest, negates == "1") for option, dest, negates in rows}


@functools.cache
def read_names() -> frozenset[str]:
    """Every argument name the readers use: ``RUN_ARG_NAMES``, ``MODEL_ARG_NAMES`` and the model keys
    ``megatron_args`` reads."""
    from megasolve.models.megatron_args import READ_KEYS

    return RUN_ARG_NAMES | MODEL_ARG_NAMES | READ_KEYS


def resolve_arg(key: Any, value: Any) -> tuple[str, Any]:
    """``--arg NAME=VALUE`` under the name the readers use: a name they read as it is (``fp8-format``, as logs of
    every release print it), else as Megatron-LM's parser would store it -- the option's argparse dest
    (``no-bias-swiglu-fusion=true`` -> ``bias_swiglu_fusion`` False) -- and NeMo / Megatron-DeepSpeed spellings
    (``CONFIG_ALIASES``: ``num-key-value-heads`` -> ``num_query_groups``).

    >>> resolve_arg("no-bias-swiglu-fusion", "true"), resolve_arg("--num-experts", "8"), resolve_arg("tp_size", "2")
    (('bias_swiglu_fusion', False), ('num_moe_experts', 8), ('tensor_model_parallel_size', 2))
    >>> resolve_arg("fp8-format", "hybrid"), resolve_arg("cuda-graph-scope", "attn")  # read as named
    (('fp8_format', 'hybrid'), ('cuda_graph_scope', 'attn'))
    """
    key = str(key).lstrip("-").replace("-", "_")
    value = scalar(str(value)) if isinstance(value, str) else value
    if key in read_names() or CONFIG_ALIASES.get(key, key) in read_names():
        return CONFIG_ALIASES.get(key, key), value
    dest, negates = megatron_options().get(key, (key, False))
    if negates and isinstance(value, bool):
        value = not value
    return CONFIG_ALIASES.get(dest, dest), value


def arg_notes(given: dict[str, Any]) -> list[str]:
    """What ``--arg NAME=VALUE`` cannot change, said: a note for a name no reader uses, an error for one that is no
    Megatron-LM option and within a typo of a name that is read (``difflib``; a misspelt ``--arg
    tensor-model-paralel-size=2`` would otherwise leave the layout the log's).

    >>> given = {"micro-batch-size": "2", "num-key-value-heads": "8", "lr": "3e-4", "rotary-base": "1e6",
    ...          "eval-micro-batch-size": "4", "mystery-knob": "1"}
    >>> for note in arg_notes(given):
    ...     print(note)
    --arg lr=3e-4: a Megatron-LM option megasolve does not model (it changes nothing in the estimate)
    --arg rotary-base=1e6: rotary_base changes no parameter, FLOP or byte that megasolve models
    --arg eval-micro-batch-size=4: a Megatron-LM option megasolve does not model (it changes nothing in the estimate)
    --arg mystery-knob=1: neither a Megatron-LM option (@d98e8a64) nor a name megasolve reads: it changes nothing
    >>> arg_notes({"micro-bach-size": "2"})
    Traceback (most recent call last):
    ...
    megasolve.models.errors.MegasolveError: --arg=micro-bach-size: not a Megatron-LM option nor a name megasolve \
reads; fix: did you mean micro-batch-size?
    """
    import difflib

    from megasolve.models.megatron_args import NO_EFFECT_KEYS

    read = read_names()
    notes = []
    for raw, value in given.items():
        name, _ = resolve_arg(raw, value)
        if name in read:
            continue
        if name in NO_EFFECT_KEYS:
            notes.append(f"--arg {raw}={value}: {name} changes no parameter, FLOP or byte that megasolve models")
        elif str(raw).lstrip("-").replace("-", "_") in megatron_options():
            notes.append(f"--arg {raw}={value}: a Megatron-LM option megasolve does not model (it changes nothing in "
                         "the estimate)")
        elif close := difflib.get_close_matches(name, sorted(read | CONFIG_ALIASES.keys()), n=3, cutoff=0.85):
            raise MegasolveError(field="--arg", value=raw, rule="not a Megatron-LM option nor a name megasolve reads",
                                 fix="did you mean " + ", ".join(c.replace("_", "-") for c in close) + "?")
        else:
            notes.append(f"--arg {raw}={value}: neither a Megatron-LM option (@d98e8a64) nor a name megasolve reads: "
                         "it changes nothing")
    return notes


def _world(args: dict[str, Any], facts: LogFacts, defaults: dict[str, Any], notes: list[str],
           missing: list[tuple[str, str]]) -> int:
    if facts.world_size:
        return facts.world_size
    if isinstance(args.get("world_size"), int):
        return args["world_size"]
    if isinstance(args.get("_prefix_world_size"), int):  # Primus's "[rank-7/8]" line prefix
        return args["_prefix_world_size"]
    if isinstance(args.get("devices"), int) and isinstance(args.get("num_nodes"), int):
        return args["devices"] * args["num_nodes"]
    per_node = next((args[k] for k in ("nproc_per_node", "num_gpus_per_node", "n_gpus_per_node", "num_gpu_per_node",
                                       "gpus_per_node", "actor_num_gpus_per_node", "_env_gpus_per_node",
                                       "_env_nproc_per_node", "_env_n_per_node", "_sbatch_gpus_per_node",
                                       "_env_visible_devices")
                     if isinstance(args.get(k), int)), None)
    # "nodes": NeMo-Run / Megatron-Bridge launchers (``--nodes 16 --gpus-per-node 4``, NVIDIA-NeMo/Megatron-Bridge#5596)
    node_keys = ("nnodes", "num_nodes", "actor_num_nodes", "nodes", "_env_nnodes", "_env_num_nodes", "_env_nodes",
                 "_sbatch_nodes")
    nodes = next((args[k] for k in node_keys if isinstance(args.get(k), int)), 1)
    if isinstance(args.get("nproc_per_node"), int) and isinstance(args.get("_env_world_size"), int) \
            and args.get("nnodes", 1) == args["_env_world_size"] != per_node * nodes:
        # torchrun's own flags win over a WORLD_SIZE variable that the script passes as --nnodes
        # (NVIDIA/Megatron-LM#1327: WORLD_SIZE=1, --nproc_per_node 4 --nnodes $WORLD_SIZE)
        notes.append(f"world size {per_node * nodes} from torchrun ({nodes} nodes x {per_node} GPUs; the script's "
                     f"WORLD_SIZE={args['_env_world_size']} is its --nnodes)")
        return per_node * nodes
    if isinstance(args.get("_env_world_size"), int):
        return args["_env_world_size"]
    if isinstance(args.get("_mpirun_np"), int) and args["_mpirun_np"] > 0:
        notes.append(f"world size {args['_mpirun_np']} from mpirun's process count (-np)")
        return args["_mpirun_np"]
    # GPUs per node and no node count: the launchers' default of one node, unless the script leaves the count to a
    # variable it never sets or the user gives --gpus
    nodes_stated = any(isinstance(args.get(k), int) for k in node_keys)
    if per_node is None and nodes_stated and isinstance(args.get("_prose_gpus_per_node"), int):
        per_node = args["_prose_gpus_per_node"]  # "NNODES=4" beside "6 V100 GPUs per node" (deepspeedai/DeepSpeed#115)
    if per_node is None and nodes_stated and not defaults.get("num_gpus") and (part := _named_part(facts)) is not None:
        # "NNODES=32" in a script whose launcher sets the GPUs a node itself, beside "# H100 config"
        # (Megatron-MoE-ModelZoo best_practice/qwen3/run_h100_235b.sh): a node of the named part as the catalog has it
        per_node = get_gpu(part).gpus_per_node
        notes.append(f"{per_node} GPUs a node: a {part} node as the catalog has it (the log states the nodes, not "
                     "their GPUs; --gpus N to override)")
    tp, pp, cp = (_int(args, k, 1) for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                "context_parallel_size"))
    ep_grid = _int(args, "expert_model_parallel_size", 1) * _int(args, "expert_tensor_parallel_size", 1) * pp
    one_node_short = isinstance(per_node, int) and not nodes_stated and per_node < max(tp * pp * cp, ep_grid)
    if one_node_short:  # "--nproc-per-node=4" with EP 64: GPUs a node, the node count not in the log
        notes.append(f"the launcher's {per_node} GPUs a node cannot hold the layout (TP x PP x CP = {tp * pp * cp}, "
                     f"EP x ETP x PP = {ep_grid}): more nodes than one, how many the log does not say")
    if isinstance(per_node, int) and not one_node_short \
            and (nodes_stated or not (args.get("_env_nodes_unset") or defaults.get("num_gpus"))):
        if defaults.get("num_gpus") and (per_node * nodes) % (tp * pp * cp):
            # a launch that cannot hold its own layout is not the training's (a checkpoint converter run as one
            # process with --target-tensor-model-parallel-size 2, alibaba/Pai-Megatron-Patch#652): --gpus N wins
            notes.append(f"{defaults['num_gpus']} GPUs as given: the launcher's {per_node * nodes} cannot hold "
                         f"TP x PP x CP = {tp * pp * cp}")
            return int(defaults["num_gpus"])
        notes.append(f"world size {per_node * nodes} from the launcher ({nodes} nodes x {per_node} GPUs)")
        return per_node * nodes
    dp = args.get("data_parallel_size")
    if isinstance(dp, int):
        return tp * pp * cp * dp
    if isinstance(args.get("_dist_adam_dp"), int) and cp == 1:  # (with CP its group may or may not hold the CP ranks)
        notes.append(f"world size {tp * pp * args['_dist_adam_dp']}: the distributed Adam's data-parallel group of "
                     f"{args['_dist_adam_dp']} x TP {tp} x PP {pp}")
        return tp * pp * args["_dist_adam_dp"]
    if defaults.get("num_gpus"):
        return int(defaults["num_gpus"])
    if isinstance(args.get("_prose_nodes"), int) and isinstance(args.get("_prose_gpus_per_node"), int):
        # "#nodes=4" and "nodes, each equipped with 8 H100 GPUs"
        notes.append(f"{args['_prose_nodes'] * args['_prose_gpus_per_node']} GPUs: {args['_prose_nodes']} nodes of "
                     f"{args['_prose_gpus_per_node']}, as the text says (--gpus N to override)")
        return args["_prose_nodes"] * args["_prose_gpus_per_node"]
    if isinstance(args.get("_prose_num_gpus"), int) and args["_prose_num_gpus"] > 0:  # "16 H100s" in the text
        notes.append(f"{args['_prose_num_gpus']} GPUs, as the text says (--gpus N to override)")
        return args["_prose_num_gpus"]
    if isinstance(args.get("_prose_nodes"), int) and (part := _named_part(facts)) is not None:
        # "two nodes of GB300" (NVIDIA/Megatron-LM#3245): a node of the named part as the catalog holds it
        per = get_gpu(part).gpus_per_node
        notes.append(f"{args['_prose_nodes'] * per} GPUs: {args['_prose_nodes']} nodes of {part}, {per} GPUs a node as "
                     "the catalog has it (--gpus N to override)")
        return args["_prose_nodes"] * per
    if isinstance(args.get("_prose_data_parallel_size"), int):  # "TP1PP1DP8" with no GPU count stated
        notes.append("GPU count from the sizes the text states (TP x PP x CP x DP; --gpus N to override)")
        return tp * pp * cp * args["_prose_data_parallel_size"]
    if world := _world_from_memory_ranks(facts, tp, pp, cp, args):
        notes.append(f"{world} GPUs from the ranks that print memory (data-parallel rank 0 of each stage, under "
                     f"Megatron's default rank order tp-cp-ep-dp-pp: stage 1 starts at rank {world // pp}; --gpus N to "
                     "override)")
        return world
    if isinstance(args.get("_nccl_nranks"), int) and args["_nccl_nranks"] >= tp * pp * cp:
        notes.append(f"{args['_nccl_nranks']} GPUs: NCCL's largest communicator (\"nranks {args['_nccl_nranks']}\"), "
                     "taken as the world's (--gpus N to override)")
        return args["_nccl_nranks"]
    if derived := _gpus_from_rates(args, facts):
        notes.append(f"{derived} GPUs: the stated tokens/s/GPU times GPUs equals global batch x sequence / step time "
                     "(--gpus N to override)")
        return derived
    if one_node_short:
        missing.append((f"world size (GPU count: {per_node} a node, the number of nodes not in the log)", "--gpus N"))
        return 0
    missing.append(("world size (GPU count)", "--gpus N"))
    return 0


def _named_part(facts: LogFacts) -> str | None:
    """The catalog part the log names most, or None."""
    if not facts.gpu_names:
        return None
    return log_gpu(max(facts.gpu_names, key=facts.gpu_names.get))


def _stated_step(facts: LogFacts) -> float | None:
    """The median step a text states (its iteration lines, else a stated step time), for the rate identities below."""
    steps = [s for _, s, _, _ in facts.iterations] or ([facts.stated_step_s] if facts.stated_step_s else [])
    return statistics.median(steps) if steps else None


def _whole(value: float, tolerance: float) -> int | None:
    """``value`` as a whole number of at least 1 when it is within ``tolerance`` (relative) of one, else None."""
    return round(value) if round(value) >= 1 and abs(value - round(value)) <= tolerance * value else None


def _gpus_from_rates(args: dict[str, Any], facts: LogFacts) -> int | None:
    """The GPU count a text implies when it states both a step time and tokens/s/GPU with the batch and sequence
    (``gbs x seq / (step x tokens per GPU)``, within 2 % of a whole number), else None."""
    tokens, step = facts.stated_tokens_per_gpu, _stated_step(facts)
    gbs = args.get("global_batch_size")
    if not isinstance(gbs, int) and facts.iterations:
        gbs = next((g for *_, g in facts.iterations if g), None)
    seq = args.get("seq_length")
    if not (tokens and step and isinstance(gbs, int) and isinstance(seq, int)):
        return None
    return _whole(gbs * seq / (step * tokens), 0.02)


def _gbs_from_rates(args: dict[str, Any], facts: LogFacts, num_gpus: int) -> int | None:
    """The global batch a text implies when it states tokens/s/GPU and a step time with the GPU count and sequence
    (``tokens x GPUs x step / seq``, within 1 % of a whole number of sequences: a Megatron-Bridge verification card's
    metrics without its "GBS/MBS" pair, tests/test_runs.py), else None."""
    tokens, step, seq = facts.stated_tokens_per_gpu, _stated_step(facts), args.get("seq_length")
    if not (tokens and step and num_gpus and isinstance(seq, int) and seq > 0):
        return None
    return _whole(tokens * num_gpus * step / seq, 0.01)


def _gpus_per_node(args: dict[str, Any], num_gpus: int) -> int | None:
    per_node = next((args[k] for k in ("devices", "nproc_per_node", "num_gpus_per_node", "n_gpus_per_node",
                                       "num_gpu_per_node", "gpus_per_node", "actor_num_gpus_per_node",
                                       "_env_gpus_per_node", "_env_nproc_per_node", "_env_n_per_node",
                                       "_sbatch_gpus_per_node", "_env_visible_devices", "_prose_gpus_per_node")
                     if isinstance(args.get(k), int)), None)
    if isinstance(per_node, int) and per_node > 0 and num_gpus % per_node == 0:
        return per_node
    return None


def log_gpu(seen: str) -> str | None:
    """A GPU name as ``logs.gpu_key`` spells it (``H100-80``, ``A100-PCIE-40``, ``RTX4090``, ``GH200-480``) -> its
    catalog entry (``topology/gpus.yaml``, by name or alias): with its memory size, without it, the chip alone.

    A size no catalog part of that chip has is not another part's: the A100 64GB (NVIDIA/Megatron-LM#1841) is None,
    not the 80 GB A100.

    >>> [log_gpu(k) for k in ("H100-80", "A100-40", "A100", "A100-PCIE", "H100-NVL-94", "GH200-624", "RTX2080TI", "X9")]
    ['h100', 'a100-40g', 'a100-80g', 'a100-pcie-80g', 'h100-nvl', 'gh200-144g', 'rtx-2080-ti', None]
    >>> log_gpu("A100-64"), log_gpu("H800-80"), log_gpu("H100-94")
    (None, 'h800', 'h100-nvl')
    """
    key = seen.lower()
    size = re.search(r"-(\d+)$", key)
    sized = key + "g" if size else key
    for name in dict.fromkeys((sized, re.sub(r"-\d+$", "", key), key.split("-")[0])):
        try:
            gpu = get_gpu(name)
        except MegasolveError:
            continue
        # the chip's part without the size: only if its memory is the size stated (GB or GiB, as logs print it)
        if size and name != sized and not gpu.name.startswith("gh200") and not _same_size(int(size.group(1)), gpu):
            # another part of the chip with that memory ("H100-94": the H100 NVL), else none
            chip = key.split("-")[0]
            parts = [g.name for g in all_gpus() if (g.name == chip or g.name.startswith(chip + "-"))
                     and _same_size(int(size.group(1)), g)]
            return parts[0] if len(parts) == 1 else None
        return gpu.name
    return None


def _same_size(gb: int, gpu: Any) -> bool:
    """A memory size as a log prints it (GB or GiB, "80GB" or "81559MiB" rounded) is ``gpu``'s."""
    return 0.9 <= gb * 1e9 / gpu.memory_bytes <= 1.12


def _gpu(facts: LogFacts, defaults: dict[str, Any], notes: list[str], missing: list[tuple[str, str]]) -> str:
    if defaults.get("gpu"):
        return str(defaults["gpu"])
    if facts.run_gpu and (name := log_gpu(facts.run_gpu)):  # the results the run's figures come from name it
        notes.append(f"GPU {name} from the results table's first run column ({facts.run_gpu}; the text names "
                     f"{', '.join(sorted(facts.gpu_names))})")
        return name
    if facts.gpu_names:
        # names of one catalog GPU count together ("A800" and "NVIDIA_A800-SXM4-80GB": a800)
        # and a chip named without its memory joins the size the text gives it elsewhere ("A100" in FlagPerf's labels
        # beside "NVIDIA_A100-SXM4-40GB": a100-40g, not the 80 GB default)
        names = dict(facts.gpu_names)
        for key in facts.title_gpus & set(names):  # a post's title outweighs the parts its text compares ("... on
            names[key] += DEVICE_LINE_WEIGHT - 1  # GB300 ... to fix OOM" over H100 and B200, Megatron-Bridge#3767)
        for key in [k for k in names if not re.search(r"-\d+$", k)]:
            sized = [k for k in names if re.fullmatch(re.escape(key) + r"-\d+", k)]
            if sized:
                target = max(sized, key=names.get)
                names[target] += names.pop(key)
        totals: dict[str | None, int] = {}
        for key, count in names.items():
            totals[log_gpu(key)] = totals.get(log_gpu(key), 0) + count
        best = max((n for n in totals if n), key=totals.get, default=None)
        seen = max((k for k in names if log_gpu(k) == best), key=names.get) if best else max(names, key=names.get)
        name = log_gpu(seen)
        # a text that names two parts equally often ("hybridEP for NVL8 systems (H100, B200, and B300)") names no run's
        tied = {n for n, total in totals.items() if best and total == totals[best]} - {None}
        counted = {log_gpu(k) for k in facts.gpu_counted} & tied
        if name and len(tied) > 1 and len(counted) == 1:  # "64 GB200 nodes" beside a GB300 recipe (Bridge#4226)
            name = counted.pop()
            notes.append(f"GPU {name} from the log (named as often as {', '.join(sorted(tied - {name}))}, but with "
                         "the run's GPU count)")
            return name
        if name and len(tied) > 1:
            notes.append(f"the log names {', '.join(sorted(tied))} equally often: no GPU taken from it")
        elif name:
            notes.append(f"GPU {name} from the log ({seen})")
            return name
        elif re.search(r"-\d+$", seen):  # "A100 64GB": a size no catalog part of the chip has
            missing.append(("GPU type", f"--gpu TYPE (the log's {seen.replace('-', ' ', 1)}GB is no catalog part, "
                                        "see `megasolve gpus`; or give its numbers in a --cluster file)"))
            return ""
    if npu := facts.args.get("_npu"):  # an Ascend run: no catalog part is its device
        missing.append((f"GPU type (the run is on Ascend NPUs: the log sets {npu}; the catalog holds no NPU)",
                        "--gpu TYPE of a catalog part to compare with, or the device's numbers in a runs file's "
                        "cluster: mapping (bf16_tflops, mem_gb, ...)"))
        return ""
    missing.append(("GPU type", "--gpu TYPE"))
    return ""


def _mindspeed_args(args: dict[str, Any], notes: list[str]) -> None:
    """Ascend MindSpeed-LLM's own flags, as Megatron-Core arguments where one says the same:

    * ``--moe-tp-extend-ep``: each TP rank owns whole experts, ``E / (TP x EP)`` of them, not TP shards (Ascend/MindSpeed
      ``mindspeed/core/transformer/moe/moe_feature/tp_extend_ep/experts.py``: the GMM weights built with expert TP 1;
      ``initialization.py``: ``num_local_experts * tp_size * ep_size == num_moe_experts``): Megatron's expert grid with
      ETP 1 and EP = TP x EP;
    * ``--noop-layers i,j,...``: identity layers that pad ``--num-layers`` to a count PP divides; when they all
      sit on the first or the last pipeline stage (no VPP) that is Megatron's uneven split
      (``--decoder-first/last-pipeline-num-layers``) of the real layers, else it is said and costed padded."""
    if args.get("moe_tp_extend_ep") is True and isinstance(tp := args.get("tensor_model_parallel_size"), int) \
            and tp > 1 and isinstance(ep := args.get("expert_model_parallel_size"), int):
        args["expert_model_parallel_size"], args["expert_tensor_parallel_size"] = ep * tp, 1
        notes.append(f"--moe-tp-extend-ep (MindSpeed): experts over EP {ep * tp} (TP {tp} x EP {ep}), not TP-split")
    noop = args.get("noop_layers")
    layers, pp = args.get("num_layers"), args.get("pipeline_model_parallel_size")
    if noop is None or noop is True or not isinstance(layers, int):
        return
    try:
        ids = sorted({int(x) for x in re.split(r"[,\s]+", str(noop).strip("[]() ")) if x})
    except ValueError:
        notes.append(f"--noop-layers {noop} (MindSpeed's identity layers): not read, costed as real layers")
        return
    if not ids:
        return
    pp = pp if isinstance(pp, int) and pp > 0 else 1
    if pp == 1:  # no pipeline: the identity layers are simply not there
        args["num_layers"] = layers - len(ids)
        notes.append(f"--noop-layers {noop} (MindSpeed's identity layers): {layers - len(ids)} real layers")
        return
    per = layers // pp if layers % pp == 0 else None
    vpp = args.get("virtual_pipeline_model_parallel_size") or args.get("num_layers_per_virtual_pipeline_stage")
    first = [i for i in ids if per and i < per]
    last = [i for i in ids if per and i >= layers - per]
    uneven = any(k in args for k in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                                     "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"))
    if per is None or vpp not in (None, 1) or uneven or len(first) + len(last) != len(ids):
        notes.append(f"--noop-layers {noop} (MindSpeed's identity layers): costed as real layers (they do not all "
                     "sit on the first or last stage of an even split without VPP)")
        return
    args["num_layers"] = layers - len(ids)
    if first:
        args["decoder_first_pipeline_num_layers"] = per - len(first)
    if last:
        args["decoder_last_pipeline_num_layers"] = per - len(last)
    notes.append(f"--noop-layers {noop} (MindSpeed's identity layers): {layers - len(ids)} real layers"
                 + (f", {per - len(first)} on the first stage" if first else "")
                 + (f", {per - len(last)} on the last stage" if last else ""))


def _int(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


# a dtype as Megatron-LM's flags and its argument dump (``torch.bfloat16``) spell it -> megasolve's word
DTYPE_NAMES = {"fp32": "fp32", "float32": "fp32", "torch.float32": "fp32", "bf16": "bf16", "bfloat16": "bf16",
               "torch.bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "torch.float16": "fp16",
               "fp8": "fp8", "float8_e4m3fn": "fp8", "torch.float8_e4m3fn": "fp8", "uint8": "fp8", "torch.uint8": "fp8"}


# Megatron-FSDP's strategies that keep the parameters whole, with the Megatron layout that shards as they do
# (megatron_fsdp/src/docs/mfsdp_design.md, the strategy table: ZeRO-0 / 1 / 2)
FSDP_AS_DDP = {
    "no_shard": "Megatron's DDP (weights, gradients and optimizer state on every rank)",
    "optim": "Megatron's distributed optimizer (ZeRO-1: the optimizer state and fp32 main weights sharded over DP, the "
             "gradients reduce-scattered on the last micro-batch)",
    "optim_grads": "Megatron's distributed optimizer (ZeRO-2 also shards the gradients and reduce-scatters them every "
                   "micro-batch: not modelled; expect less gradient memory and more DP traffic than predicted)",
}


def _fsdp_grad_dtypes(args: dict[str, Any], notes: list[str]) -> dict[str, str]:
    """Megatron-FSDP's main-grad / reduction dtypes (``Workload.fsdp_main_grads_dtype``): as the log states them
    (``--megatron-fsdp-main-grads-dtype`` / ``--megatron-fsdp-grad-comm-dtype``; a dump prints ``torch.float32``),
    else Megatron-LM's ``auto`` -- except in a whole argument dump of a release before adfe9e11d9 (2026-07-02; it
    has no ``megatron_fsdp_max_pool_double_buffer``, added by that commit), which followed ``grad_reduce_in_fp32``:
    fp32 unless --grad-reduce-in-bf16."""
    out = {}
    for key, field in (("megatron_fsdp_main_grads_dtype", "fsdp_main_grads_dtype"),
                       ("megatron_fsdp_grad_comm_dtype", "fsdp_grad_comm_dtype")):
        name = DTYPE_NAMES.get(str(args.get(key)).lower())
        if name in FSDP_GRAD_DTYPES:
            out[field] = name
    if note := fsdp_grad_comm_note(Workload(**out)):
        notes.append(note)
    main_params = DTYPE_NAMES.get(str(args.get("megatron_fsdp_main_params_dtype")).lower())
    if main_params not in (None, "fp32"):  # ARG L3687: fp32 default
        notes.append(f"--megatron-fsdp-main-params-dtype {main_params} is costed as fp32 main weights (4 B a parameter "
                     "in the sharded optimizer state; the only main-weight dtype modelled)")
    if "fsdp_main_grads_dtype" in out:
        return out
    bf16 = args.get("grad_reduce_in_bf16") is True or args.get("grad_reduce_in_fp32") is False
    if args.get("_whole_dump") and "megatron_fsdp_max_pool_double_buffer" not in args:
        dtype = "bf16" if bf16 else "fp32"
        notes.append(f"Megatron-FSDP main grads {dtype}: this Megatron-LM predates 2026-07 (adfe9e11d9), whose "
                     "Megatron-FSDP followed --grad-reduce-in-bf16 (fp32 without it)")
        out["fsdp_main_grads_dtype"] = dtype
    elif not bf16:
        notes.append("Megatron-FSDP main grads bf16, Megatron-LM's default since 2026-07 (adfe9e11d9); releases "
                     "before it keep fp32 unless --grad-reduce-in-bf16 (--arg megatron-fsdp-main-grads-dtype=fp32 "
                     "if this one did)")
    return out


def _deepspeed_moe_args(args: dict[str, Any]) -> None:
    """Megatron-DeepSpeed's MoE arguments as Megatron-Core's (microsoft/Megatron-DeepSpeed megatron/arguments.py,
    model/transformer.py): ``--topk`` (default 1) is the router's top-k; ``--expert-interval`` N (default 2) makes
    1-based layer numbers divisible by N MoE layers (``layer_num % expert_interval == 0``: the pattern
    ``[0]*(N-1)+[1]``); ``--moe-expert-parallel-size`` the expert-parallel size; with ``--moe-token-dropping``
    (default on) ``--moe-train-capacity-factor`` caps each expert at ``factor x tokens x k / experts`` tokens, as
    Megatron-Core's ``--moe-expert-capacity-factor`` (DeepSpeed's ``--moe-min-capacity`` floor is not modelled);
    ``--enable-expert-tensor-parallelism`` off keeps the experts whole (expert TP 1); with TP and no sequence
    parallelism, which Megatron-Core's MoE refuses, sequence parallelism (DeepSpeed splits the MoE layer's tokens over
    the TP ranks itself). Read only from a run that printed ``expert_interval`` (no Megatron-Core argument has that
    name); a note says so.

    >>> a = {"num_experts": 2, "topk": 1, "expert_interval": 2, "moe_expert_parallel_size": 2, "num_layers": 12,
    ...      "moe_token_dropping": True, "moe_train_capacity_factor": 1.0}
    >>> _deepspeed_moe_args(a); a["moe_router_topk"], a["moe_layer_freq"], a["expert_model_parallel_size"]
    (1, '([0]*1+[1]*1)*6', 2)
    """
    if isinstance(args.get("_ds_moe_experts"), int) and args["_ds_moe_experts"] > 1:
        # DeepSpeed's own "Creating MoE layer with num_experts: N | ... | expert_parallel_size: E" lines, one a MoE layer
        # of rank 0's model: the experts, the expert-parallel size, and (over the printed layers) the interval
        args.setdefault("num_moe_experts", args["_ds_moe_experts"])
        args.setdefault("moe_expert_parallel_size", args["_ds_moe_ep"])
        layers, moe_layers = args.get("num_layers"), args.get("_ds_moe_layers", 0)
        if "expert_interval" not in args and isinstance(layers, int) and moe_layers and layers % moe_layers == 0 \
                and _int(args, "pipeline_model_parallel_size", 1) == 1:
            args["expert_interval"] = layers // moe_layers
    experts = args.get("num_moe_experts", args.get("num_experts"))
    interval, layers = args.get("expert_interval"), args.get("num_layers")
    if not isinstance(experts, int) or experts <= 1 or isinstance(interval, bool) or not isinstance(interval, int):
        return
    if isinstance(args.get("topk"), int) and not isinstance(args["topk"], bool):
        args.setdefault("moe_router_topk", args["topk"])
    if isinstance(args.get("moe_expert_parallel_size"), int) and not isinstance(args["moe_expert_parallel_size"], bool):
        args.setdefault("expert_model_parallel_size", args["moe_expert_parallel_size"])
    if interval > 1 and isinstance(layers, int) and layers % interval == 0:
        args.setdefault("moe_layer_freq", f"([0]*{interval - 1}+[1]*1)*{layers // interval}")
    factor = args.get("moe_train_capacity_factor")
    if args.get("moe_token_dropping") is not False and isinstance(factor, (int, float)) and factor > 0:
        args.setdefault("moe_expert_capacity_factor", float(factor))
    if args.get("enable_expert_tensor_parallelism") is False:  # experts whole on every tensor-parallel rank
        args.setdefault("expert_tensor_parallel_size", 1)
    if _int(args, "tensor_model_parallel_size", 1) > 1 and args.get("sequence_parallel") is not True:
        # Megatron-Core refuses MoE with TP and no sequence parallelism (moe_layer.py); DeepSpeed-MoE splits the MoE
        # layer's tokens over the TP ranks itself (deepspeed/moe/sharded_moe.py drop_tokens), much as SP does there
        args["sequence_parallel"] = True
        args["_deepspeed_moe_sp"] = True
    args["_deepspeed_moe"] = True


def _fastmoe_args(args: dict[str, Any]) -> None:
    """FastMoE's Megatron integration (``fmoefy``; SmartMoE's fork of it): ``--num-experts`` (``fmoe_num_experts``)
    counts one worker's experts, spread over the expert-parallel group, so the model has that many times the group's
    size (laekov/fastmoe ``fmoe/megatron``; MAGI's runtime on it counts ``num_layers x fmoe_num_experts x
    data_parallel_size / 4`` proxy experts); SmartMoE prints the group as ``expert_ep_size``. Costed as Megatron-Core's
    MoE layers (their gate and all-to-all, not FastMoE's), with a note. Without the group's size the count is left as
    printed, and the note says so.

    >>> a = {"fmoefy": True, "num_moe_experts": 8, "expert_ep_size": 4}
    >>> _fastmoe_args(a); a["num_moe_experts"], a["expert_model_parallel_size"]
    (32, 4)
    """
    if args.get("fmoefy") is not True:
        return
    local, ep = args.get("num_moe_experts", args.get("fmoe_num_experts")), args.get("expert_ep_size")
    args["_fastmoe"] = True
    if isinstance(local, int) and not isinstance(local, bool) and isinstance(ep, int) and not isinstance(ep, bool) \
            and ep >= 1:
        args["num_moe_experts"] = local * ep
        args.setdefault("expert_model_parallel_size", ep)
        args["_fastmoe_ep"] = ep


def _distributed_optimizer_from_theory(args: dict[str, Any]) -> tuple[bool, str] | None:
    """The distributed optimizer as Megatron-LM's theoretical-memory line implies it, where the log prints both that
    line's "weight and optimizer" MB and the most loaded shard's parameters: 18 bytes a parameter without it, ``6 +
    12 / DP`` with it (``theoretical_memory_usage.py`` ``num_bytes_per_parameter``, @d98e8a6 L292-295; MB there is
    2^20 bytes). None when either is missing or the bytes fit neither, and at 18 bytes: off, or on with DP 1 (where it
    shards nothing), which the line cannot tell apart (a Megatron-Bridge run at 18 keeps its recipe's optimizer).

    >>> on, note = _distributed_optimizer_from_theory({"_theory_weight_optimizer_mb": 20029.52,
    ...                                                 "_shard_params_b": {"most": 1.7502}})  # DP 2
    >>> on, note.split(": ")[1][:50]
    (True, "the log's theoretical memory is 12.0 bytes a param")
    """
    most = (args.get("_shard_params_b") or {}).get("most")
    memory = args.get("_theory_weight_optimizer_mb")
    if not (isinstance(most, float) and most > 0 and isinstance(memory, float) and memory > 0):
        return None
    per_param = memory * MIB / (most * 1e9)
    if 6.05 < per_param < 17.95:
        return True, f"distributed optimizer on: the log's theoretical memory is {per_param:.1f} bytes a parameter " \
                     "of its most loaded shard (6 + 12 / DP; 18 without it)"
    return None


def te_before_2_18(args: dict[str, Any], software: dict[str, str]) -> bool | None:
    """Whether the run's Transformer Engine predates 2.18 (TE#3193: its loss keeps the gradient in fp32 from
    then on), from ``--arg te-version=X``, the TE version the log prints, or the NeMo container it names (TE 2.18's
    release_v2.18_nemo_26.08 branch is the 26.08 container's); None when none of them is known.

    >>> te_before_2_18({}, {"transformer-engine": "2.17.1"}), te_before_2_18({}, {"container": "26.08"})
    (True, False)
    >>> te_before_2_18({"te_version": "2.18"}, {"container": "25.09"}), te_before_2_18({}, {"torch": "2.9"})
    (False, None)
    """
    def key(text: Any) -> tuple[int, int] | None:
        m = re.match(r"v?(\d+)\.(\d+)", str(text))
        return (int(m.group(1)), int(m.group(2))) if m else None

    if (version := key(args.get("te_version", software.get("transformer-engine", "")))) is not None:
        return version < (2, 18)
    if (container := key(software.get("container", ""))) is not None and container[0] >= 23:
        return container < (26, 8)
    return None


def _layout_and_workload(args: dict[str, Any], defaults: dict[str, Any], notes: list[str],
                         missing: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    tp = _int(args, "tensor_model_parallel_size", _int(args, "model_parallel_size", 1))
    pp = _int(args, "pipeline_model_parallel_size", 1)
    layout: dict[str, Any] = {"tp": tp, "pp": pp, "cp": _int(args, "context_parallel_size", 1),
                              "ep": _int(args, "expert_model_parallel_size", 1),
                              "mbs": _int(args, "micro_batch_size", _int(args, "batch_size", 1))}
    if not isinstance(args.get("micro_batch_size"), int) and not isinstance(args.get("batch_size"), int):
        notes.append("micro batch 1 assumed (the log does not say; --arg micro-batch-size=N)")
    if isinstance(args.get("expert_tensor_parallel_size"), int):
        layout["etp"] = args["expert_tensor_parallel_size"]
    vpp = args.get("virtual_pipeline_model_parallel_size")
    per_chunk = args.get("num_layers_per_virtual_pipeline_stage")
    if isinstance(vpp, int) and vpp > 1:
        layout["vpp"] = vpp
    elif isinstance(per_chunk, int) and per_chunk > 0 and isinstance(args.get("num_layers"), int) and pp > 1:
        layout["vpp"] = max(1, args["num_layers"] // (pp * per_chunk))
    text = args.get("pipeline_model_parallel_layout")
    if isinstance(text, str) and text.strip():  # --pipeline-model-parallel-layout "Et*2|(tt|)*22t|(tt|)*7mL"
        layout["pipeline_layout"] = text.strip()
        stages = len(expand_pipeline_layout(text))
        if "vpp" not in layout and pp > 1 and stages % pp == 0 and stages > pp:
            layout["vpp"] = stages // pp
    # a pretrain_*.py command line leaves out what it does not change: those flags are Megatron-LM's defaults
    # (ARG: --sequence-parallel store_true; --hidden-dropout 0.1); NeMo / Bridge recipes have their own
    megatron_defaults = bool(args.get("_megatron_launch")) and not args.get("_nemo") \
        and not args.get("_unresolved_flag_vars")  # ("$GPT_ARGS" never set in the excerpt: flags may hide there)
    sp = args.get("sequence_parallel")
    if sp is None and megatron_defaults:
        sp = False
        if tp > 1:
            notes.append("sequence parallel off: the command does not pass --sequence-parallel (Megatron-LM's default)")
    if sp is None and args.get("_whole_dump"):
        sp = False
        if tp > 1:
            notes.append("sequence parallel off: the whole argument dump has no sequence_parallel (a Megatron-LM "
                         "from before the flag)")
    seq = args.get("seq_length")
    if sp is None and tp > 1 and isinstance(seq, int) and seq % tp:  # Megatron refuses SP on a sequence TP does not
        sp = False  # divide, so this run had none (a Summit run at TP 6 and sequence 2048)
        notes.append(f"sequence parallel off: the log does not say, and TP {tp} does not divide the sequence ({seq}), "
                     "which sequence parallelism needs")
    layout["sequence_parallel"] = bool(sp) and tp > 1 if sp is not None else tp > 1
    if sp is None and tp > 1:
        notes.append("sequence parallel assumed on (tp > 1; the log does not say)")
    granularity = args.get("recompute_granularity")
    if args.get("recompute_activations") is True:
        granularity = granularity or "selective"
    if args.get("checkpoint_activations") is True:  # Megatron-LM before 2022
        granularity = "full"
    if granularity is None and args.get("_ds_activation_checkpointing"):
        granularity = "full"
        notes.append("full recompute: DeepSpeed's activation checkpointing ran (its 'Activation Checkpointing "
                     "Information' print); costed as Megatron's full uniform recompute of one layer a checkpoint")
    if granularity is None and args.get("_prose_recompute"):  # "TP8+CP4+actckpt" (NVIDIA-NeMo/RL#957)
        granularity = "full"
        notes.append("full recompute: the text says activation checkpointing (NeMo RL's activation_checkpointing is "
                     "Megatron's full, uniform recompute)")
    moe_layer = args.get("moe_layer_recompute") is True and granularity != "full"
    if moe_layer:  # deprecated: Megatron-Core turns it into selective recompute of the MoE layer (TC L2014-2025)
        granularity = "selective"
    if granularity in ("full", "selective"):
        layout["recompute"] = granularity
        modules = _words(args.get("recompute_modules"))
        if moe_layer:
            modules = list(dict.fromkeys((modules or ["core_attn"]) + ["moe"]))
        if granularity == "selective" and modules:
            known = [m for m in modules if m in RECOMPUTE_MODULE_NAMES]
            if len(known) < len(modules):
                notes.append(f"recompute modules {', '.join(m for m in modules if m not in known)} not modelled "
                             "(left out)")
            if known:
                layout["recompute_modules"] = tuple(dict.fromkeys(known))
        n = args.get("recompute_num_layers")
        if granularity == "full" and args.get("recompute_method") == "block" and isinstance(n, int):
            layout["recompute_num_layers"] = n
    dist = args.get("use_distributed_optimizer")
    if str(args.get("optimizer") or "").lower() == "dist_muon":  # Muon's layer-wise distributed optimizer (ARG L1727)
        dist = True
    nemo = bool(args.get("_nemo"))  # NeMo / Megatron-Bridge recipes switch the distributed optimizer on
    verl = bool(args.get("_verl_megatron")) and not nemo  # ... and so does verl's actor config (_VERL_MEGATRON)
    layout["distributed_optimizer"] = bool(dist) if dist is not None else nemo or verl
    zero = args.get("zero_stage")  # Megatron-DeepSpeed: ZeRO shards the optimizer states (1), the grads (2), the weights (3)
    if isinstance(zero, float) and zero.is_integer():  # a Namespace repr prints its float type: "zero_stage=1.0"
        zero = int(zero)
    engine = args.get("_ds_zero_stage")  # DeepSpeed's engine config print: the stage that ran (its JSON config's)
    if isinstance(engine, int) and not isinstance(engine, bool) and engine != zero:
        if zero is not None:
            notes.append(f"ZeRO stage {engine} as DeepSpeed's engine prints it (zero_optimization_stage), where the "
                         f"arguments say --zero-stage {zero}: the engine's config is what ran")
        zero = engine
    # (with --deepspeed the optimizer is DeepSpeed's: Megatron's own --use-distributed-optimizer False says nothing)
    if (dist is None or (dist is False and args.get("deepspeed") is True)) and isinstance(zero, int) \
            and not isinstance(zero, bool) and zero >= 1:
        dist = True
        layout["distributed_optimizer"] = True
        notes.append(f"DeepSpeed ZeRO stage {zero} costed as Megatron's distributed optimizer (optimizer states sharded"
                     + (f"; ZeRO {zero} also shards the {'gradients' if zero == 2 else 'gradients and weights'}, not "
                        "modelled: expect less memory than predicted)" if zero > 1 else ")"))
    elif dist is None and zero == 0 and not isinstance(zero, bool):  # a DeepSpeed engine without ZeRO: nothing sharded
        dist = False
        layout["distributed_optimizer"] = False
        notes.append("distributed optimizer off: DeepSpeed ZeRO stage 0 keeps the optimizer states on every "
                     "data-parallel rank")
    offload = args.get("optimizer_cpu_offload") is True  # HybridDeviceOptimizer (cost/offload.py)
    if offload:
        fraction = args.get("optimizer_offload_fraction")
        valid = isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 <= fraction <= 1
        layout["optimizer_offload_fraction"] = float(fraction) if valid else 1.0  # ARG: default 1.0
        if fraction is not None and not valid:
            notes.append(f"--optimizer-offload-fraction {fraction} is not a fraction in [0, 1]: costed as Megatron's "
                         "default, 1.0")
    if dist is None and offload and not nemo:
        # ARG "Optimizer CPU offload check": it needs --use-precision-aware-optimizer, which needs the distributed
        # optimizer (core/optimizer/__init__.py: "only supported with distributed optimizer")
        layout["distributed_optimizer"] = True
        notes.append("distributed optimizer on: --optimizer-cpu-offload runs only under it")
    elif dist is None and args.get("fp8_param_gather") is True and not nemo and not verl:
        # ARG L1095-1097: "--fp8-param-gather only supported with distributed optimizer, torch fsdp2, megatron fsdp"
        layout["distributed_optimizer"] = True
        notes.append("distributed optimizer on: --fp8-param-gather runs only under it (or an FSDP)")
    elif dist is None and (theory := _distributed_optimizer_from_theory(args)) is not None:
        layout["distributed_optimizer"], note = theory
        notes.append(note)
    elif dist is None:
        notes.append("distributed optimizer on, as NeMo / Megatron-Bridge recipes set it (the log does not say)"
                     if nemo else "distributed optimizer on, as verl's Megatron actor config sets it "
                                  "(actor_rollout_ref.actor.megatron.use_distributed_optimizer; the log does not say)"
                     if verl else "distributed optimizer off, Megatron-LM's default (the log does not say; "
                                  "--arg use-distributed-optimizer=true if it was on)")
    strategy = args.get("data_parallel_sharding_strategy")
    if args.get("use_megatron_fsdp") is True and strategy in FSDP_AS_DDP:
        # Megatron-FSDP's ZeRO-0/1/2 keep every parameter on every rank (param_and_grad_buffer.py L2328-2349 @d98e8a6):
        # no layer-at-a-time gather, so not the FSDP (ZeRO-3) megasolve costs; Megatron's DDP and distributed
        # optimizer shard alike (optim: reduce-scatter on the last micro-batch, mcore_fsdp_adapter.py L165-169)
        layout["distributed_optimizer"] = strategy != "no_shard"
        notes.append(f"--data-parallel-sharding-strategy {strategy} costed as {FSDP_AS_DDP[strategy]}")
    elif args.get("use_megatron_fsdp") is True:
        layout["fsdp"] = True
        layout["distributed_optimizer"] = True
        if isinstance(strategy, str) and strategy != "optim_grads_params":  # ARG L3190-3192: optim_grads_params default
            notes.append(f"--data-parallel-sharding-strategy {strategy} is costed as optim_grads_params (Megatron-FSDP's "
                         "ZeRO-3, the only strategy modelled: parameters gathered a layer at a time)")
    elif args.get("use_torch_fsdp2") is True:  # Megatron-LM --use-torch-fsdp2 (torch_fully_sharded_data_parallel.py)
        layout["fsdp"] = True
        layout["distributed_optimizer"] = True
        notes.append("--use-torch-fsdp2 costed as Megatron-FSDP's full sharding (parameters, gradients and optimizer "
                     "state over DP, gathered a layer at a time); torch FSDP2's own buffers and prefetch are not "
                     "modelled")
    # activation CPU offloading of the first N layers (--cpu-offloading-num-layers N turns it on, ARG L1950-1951;
    # Megatron-Core TransformerConfig.cpu_offloading / cpu_offloading_num_layers, as NeMo and Bridge configs set them)
    offloaded = args.get("cpu_offloading_num_layers")
    if isinstance(offloaded, int) and not isinstance(offloaded, bool) and offloaded > 0 \
            and args.get("cpu_offloading") is not False:
        layout["cpu_offload_layers"] = offloaded
        if args.get("cpu_offloading_weights") is True:
            notes.append("--cpu-offloading-weights: weight offloading is not modelled (the layers' weights are "
                         "counted on the GPU)")
        if args.get("cpu_offloading_activations") is False:
            notes.append("cpu_offloading_activations false: costed as activation offloading (Megatron's default)")
    for src, dst in (("decoder_first_pipeline_num_layers", "first_stage_layers"),
                     ("num_layers_in_first_pipeline_stage", "first_stage_layers"),
                     ("decoder_last_pipeline_num_layers", "last_stage_layers"),
                     ("num_layers_in_last_pipeline_stage", "last_stage_layers")):
        if isinstance(args.get(src), int):
            layout[dst] = args[src]
    if ("first_stage_layers" in layout or "last_stage_layers" in layout) and not isinstance(
            args.get("pipeline_model_parallel_size"), int):  # an uneven split says PP > 1 but not how many
        missing.append(("pipeline-model-parallel size (the log sets the first/last stage's layers)",
                        "--arg pipeline-model-parallel-size=N"))
    if args.get("account_for_embedding_in_pipeline_split") is True:
        layout["account_for_embedding"] = True
    if args.get("account_for_loss_in_pipeline_split") is True:
        layout["account_for_loss"] = True

    work: dict[str, Any] = {}
    if isinstance(args.get("batch_size_per_gpu"), int) and not isinstance(args.get("micro_batch_size"), int):
        args["micro_batch_size"] = args["batch_size_per_gpu"]  # "--batch_size_per_gpu 36" (SeanNaren/min-LLM#16)
    if isinstance(args.get("cutoff_len"), int) and not isinstance(args.get("seq_length"), int):
        # LLaMA-Factory's (and ROLL's mcore_adapter's) --cutoff_len: samples are cut to it (alibaba/ROLL#416)
        args["seq_length"] = args["cutoff_len"]
        notes.append(f"sequence length {args['cutoff_len']} from --cutoff_len (samples up to this long)")
    seq = args.get("seq_length") if isinstance(args.get("seq_length"), int) else defaults.get("seq_length")
    tokens, gbs_read = args.get("_tokens_per_step"), args.get("global_batch_size")
    if not isinstance(seq, int) and isinstance(tokens, int) and isinstance(gbs_read, int) and gbs_read > 0 \
            and tokens % gbs_read == 0:  # "global batch size 32, tokens/step 131,072" (marin-community/marin#5815)
        seq = tokens // gbs_read
        notes.append(f"sequence length {seq}: the text's {tokens:,} tokens per step over its global batch of "
                     f"{gbs_read} (--seq-len N to override)")
    if not isinstance(seq, int):
        missing.append(("sequence length", "--seq-len N"))
    else:
        work["seq_length"] = seq
    gbs = args.get("global_batch_size") if isinstance(args.get("global_batch_size"), int) else \
        defaults.get("global_batch_size")
    if not isinstance(gbs, int):
        missing.append(("global batch size", "--gbs N"))
    else:
        work["global_batch_size"] = gbs
    work["precision"] = defaults.get("precision") or _precision(args, notes)
    # NeMo 1's fp8_params: True builds the weights in FP8 under Transformer Engine's fp8_model_init, Megatron's
    # --fp8-param-gather (nemo/collections/nlp/models/language_modeling/megatron_base_model.py)
    if work["precision"] == "fp8" and True in (args.get("fp8_param_gather"), args.get("fp8_params")):
        work["precision"] = "fp8-params"
    elif args.get("fp8_params") is True and work["precision"] not in ("fp8", "fp8-params") \
            and not defaults.get("precision"):
        # NeMo 1 builds the model under Transformer Engine's fp8_model_init only when fp8 is on too
        # (megatron_gpt_model.py model setup: "if HAVE_TE and cfg.fp8 and cfg.fp8_params"), so fp8_params alone
        # leaves the weights in the run's own precision
        notes.append(f"fp8_params: True without fp8: NeMo ignores it, costed as {work['precision']}")
    if work["precision"] == "fp4" and True in (args.get("fp4_param"), args.get("fp4_param_gather")):
        work["precision"] = "fp4-params"
    recipe = args.get("fp8_recipe") or BRIDGE_FP8_DTYPES.get(str(args.get("compute_dtype") or "").lower()) \
        or args.get("_prose_fp8_recipe") or ("mxfp8" if str(args.get("precision")).lower() == "mxfp8" else None)
    # (a results table's or card's "MXFP8" / "fp8_mx" precision: logs._precision_label)
    if work["precision"].startswith("fp8") and isinstance(recipe, str) and recipe in ("delayed", "tensorwise", "mxfp8",
                                                                                      "blockwise"):
        work["fp8_recipe"] = recipe
    optimizer = str(args.get("optimizer") or "").lower()
    if optimizer in ("muon", "dist_muon"):  # dist_muon: muon with the layer-wise distributed optimizer (ARG L1727)
        work["optimizer"] = "muon"
    if args.get("first_last_layers_bf16") is True and work["precision"] != "bf16":
        # the counts default to Megatron-Core's 1 and 1 (TC L652-658; a printout of non-default values omits them)
        for key in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
            count = args.get(key, 1)
            work[key] = count if isinstance(count, int) and not isinstance(count, bool) else 1
    if args.get("grad_reduce_in_bf16") is True or args.get("grad_reduce_in_fp32") is False:
        work["grad_reduce_in_bf16"] = True
    if args.get("use_megatron_fsdp") is True:
        fsdp_grads = _fsdp_grad_dtypes(args, notes)
        if args.get("data_parallel_sharding_strategy") not in FSDP_AS_DDP:
            work.update(fsdp_grads)
        elif fsdp_grads.get("fsdp_main_grads_dtype", "auto") != "fp32":  # auto: the bf16 weights' dtype
            work["grad_reduce_in_bf16"] = True
    impl = "te" if args.get("cross_entropy_fusion_impl") == "te" else "native"
    if args.get("cross_entropy_loss_fusion") is True:
        work["cross_entropy"] = impl
    elif "cross_entropy_loss_fusion" not in args and args.get("_nemo2"):
        perf = args.get("_bridge_perf") and "cross_entropy_fusion_impl" not in args
        work["cross_entropy"] = "te" if perf else impl
        notes.append(f"loss fused ({work['cross_entropy']}), as "
                     + ("Megatron-Bridge's performance scripts set it (TE's kernel" if perf else
                        "NeMo 2 / Megatron-Bridge model configs default it (") +
                     "; the log does not print cross_entropy_loss_fusion: --arg cross-entropy-fusion-impl=te or "
                     "native to change the kernel, --arg cross-entropy-loss-fusion=false if it was off)")
    elif "cross_entropy_loss_fusion" not in args and not (megatron_defaults or args.get("_whole_dump")):
        notes.append("loss kernel not in the log: costed as Megatron's unfused loss (--arg cross-entropy-loss-fusion="
                     "true, with --arg cross-entropy-fusion-impl=te or native, if the run fused it)")
    if work.get("cross_entropy") == "te":  # Transformer Engine's kernel changed in TE 2.18 (models/layout.py)
        if args.get("_te_bf16grad"):
            work["cross_entropy"] = "te-bf16grad"
        elif "_te_bf16grad" not in args:
            notes.append("Transformer Engine's loss costed as TE 2.18's (an fp32 gradient: 22 B of traffic and 4 B "
                         "held a logit) -- the log names no TE or NeMo container version; --arg te-version=2.17 for "
                         "the kernel before it (10 B, 2 B held)")
    dispatcher = args.get("moe_token_dispatcher_type")
    if dispatcher in MOE_DISPATCHERS:
        work["moe_dispatcher"] = dispatcher
    elif dispatcher == "alltoall_seq":  # Megatron-Core 0.9-0.12 (ARG choices @core_r0.12.0 L2557; removed by !3306)
        work["moe_dispatcher"] = "alltoall"
        notes.append("--moe-token-dispatcher-type alltoall_seq (Megatron-Core 0.9-0.12's sequence-parallel "
                     "all-to-all) costed as alltoall: the same token copies cross the EP group")
    cp_types = _cp_comm_types(args.get("cp_comm_type"))
    if cp_types:
        if len(set(cp_types)) > 1:
            notes.append(f"per-layer --cp-comm-type {' '.join(cp_types)}: costed as {cp_types[0]} on every layer "
                         "(megasolve prices one type per run)")
        work["cp_comm_type"] = cp_types[0]
    # communication overlap as launched (Megatron-LM argument names -> Workload fields)
    for arg, name in (("tp_comm_overlap", "tp_comm_overlap"), ("overlap_p2p_comm", "overlap_p2p_comm"),
                      ("overlap_moe_expert_parallel_comm", "moe_ep_overlap"),
                      ("moe_shared_expert_overlap", "moe_shared_expert_overlap"),
                      ("overlap_grad_reduce", "dp_comm_overlap")):
        if isinstance(args.get(arg), bool):
            work[name] = args[arg]
    quantized = Workload(**precision_fields(work["precision"]), fp8_recipe=work.get("fp8_recipe", "delayed"))
    if work.get("tp_comm_overlap") and not quantized.tp_overlap_supported:
        quant = "NVFP4" if quantized.precision == "fp4" else "blockwise FP8"
        work["tp_comm_overlap"] = False
        notes.append(f"--tp-comm-overlap with {quant}: Transformer Engine's userbuffers cannot gather {quant} tensors "
                     "(fill_userbuffers_buffer_for_all_gather raises), so the TP collectives are costed without it")
    if work.get("tp_comm_overlap") and not layout.get("sequence_parallel"):
        # the userbuffer overlap needs sequence parallelism: Megatron-LM refuses it without (ARG L1441-1442), NeMo 1
        # turns ub_tp_comm_overlap off ("Setting `ub_tp_comm_overlap` to False", megatron_gpt_model.py)
        work["tp_comm_overlap"] = False
        if layout.get("tp", 1) > 1:
            notes.append("TP communication overlap without sequence parallelism: off, as NeMo turns it off and "
                         "Megatron-LM refuses it")
    if "overlap_grad_reduce" not in args and megatron_defaults:
        work["dp_comm_overlap"] = False
        notes.append("DP gradient reduction not overlapped: the command does not pass --overlap-grad-reduce "
                     "(Megatron-LM's default)")
    elif "overlap_grad_reduce" not in args:
        notes.append("DP gradient reduction assumed overlapped (--overlap-grad-reduce, as NVIDIA's recipes set; "
                     "the log does not say)")
    if cuda_graph_impl(args) != "none":
        work["cuda_graph_impl"] = cuda_graph_impl(args)
    group = args.get("microbatch_group_size_per_vp_stage")
    if isinstance(group, int) and not isinstance(group, bool) and group > 0:
        work["microbatch_group_size"] = group
    instances = args.get("num_distributed_optimizer_instances")
    if isinstance(instances, int) and not isinstance(instances, bool) and instances > 1:
        work["dist_optimizer_instances"] = instances
    if args.get("deterministic_mode") is True:  # Megatron-LM's flag, Bridge's model field (CUBLAS_WORKSPACE_CONFIG)
        work["deterministic_mode"] = True
    if args.get("defer_embedding_wgrad_compute") is True:
        work["defer_embedding_wgrad"] = True
        limit = args.get("wgrad_deferral_limit")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
            work["wgrad_deferral_limit"] = limit
    _activation_fusion(args, work, notes, megatron_defaults)
    _fp8_input_store(args, work, notes)
    _moe_routing(args, work, notes)
    _output_layer_and_optimizer_state(args, work, layout, notes, megatron_defaults)
    _unmodelled_args(args, notes)
    _fine_grained_offload(args, work, notes)
    _precision_recipe(args, work, notes)
    dropout = args.get("hidden_dropout")
    if isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and 0.0 <= dropout < 1.0:
        work["hidden_dropout"] = float(dropout)
    elif dropout is None and megatron_defaults:
        work["hidden_dropout"] = 0.1
        notes.append("hidden dropout 0.1: the command does not pass --hidden-dropout (Megatron-LM's default)")
    attention_dropout = args.get("attention_dropout", 0.1 if megatron_defaults else None)
    backend = str(args.get("attention_backend") or "").split(".")[-1]
    if backend == "unfused":  # Megatron AttnBackend.unfused (ARG --attention-backend)
        work["attention"] = "unfused"
    elif args.get("transformer_impl") == "local" and args.get("use_flash_attn") is True:
        # --use-flash-attn exists only in the legacy models (megatron/model/transformer.py ParallelAttention's
        # FlashSelfAttention, Megatron-LM 23.x; removed with them): flash attention there
        notes.append("--transformer-impl local with --use-flash-attn: the legacy models' flash attention; their unfused "
                     "norms and activations keep more than Transformer Engine's, not modelled")
    elif args.get("transformer_impl") == "local":
        # the local spec's core attention is Megatron's own DotProductAttention (dot_product_attention.py):
        # unfused, whatever --attention-backend says (gpt_layer_specs.py::get_gpt_layer_local_spec)
        work["attention"] = "unfused"
        notes.append("--transformer-impl local: unfused attention (Megatron's DotProductAttention); the local "
                     "spec's unfused norms and activations keep more than Transformer Engine's, not modelled")
    hidden_dropout = work.get("hidden_dropout", 0.0)
    if work.get("attention") == "unfused" and isinstance(attention_dropout, (int, float)) \
            and not isinstance(attention_dropout, bool) and (attention_dropout > 0) != (hidden_dropout > 0):
        # unfused attention keeps a dropout mask per score only with attention dropout; the Workload has one
        # dropout setting for both (flash attention draws its dropout inside the kernel: no mask either way)
        notes.append(f"attention dropout {attention_dropout} costed as the hidden dropout {hidden_dropout} "
                     "(megasolve has one dropout setting: the unfused scores' dropout masks follow it)")
    if layout.get("optimizer_offload_fraction") and work["precision"] == "fp8-params" \
            and work.get("fp8_recipe", "delayed") != "delayed":  # ARG "Optimizer CPU offload check"
        del layout["optimizer_offload_fraction"]
        notes.append("optimizer CPU offload with FP8 primary weights under a non-delayed recipe: Megatron-LM now refuses "
                     "it (arguments.py), so this run's release predates the check; the offload is not costed")
    return layout, work


def _activation_fusion(args: dict[str, Any], work: dict[str, Any], notes: list[str], megatron_defaults: bool) -> None:
    """``Workload.activation_fusion`` as launched. Megatron-LM passes ``--bias-swiglu-fusion`` (SwiGLU) or
    ``--bias-gelu-fusion`` to TransformerConfig ``bias_activation_fusion`` (argument_utils.py L314-319; both on
    by default). The routed experts have a fused probability-weighted kernel only for SwiGLU and, with
    ``--use-fused-weighted-squared-relu``, squared ReLU (``moe/experts.py`` L961-993; a GeLU MoE must pass
    ``--no-bias-gelu-fusion`` or TEGroupedMLP refuses to build): any other MoE runs the unfused path."""
    gated = args.get("swiglu") is True or args.get("gated_linear_unit") is True or args.get("quick_geglu") is True
    # a Megatron-LM dump prints --bias-swiglu-fusion; a NeMo / Bridge config the TransformerConfig field
    swiglu_flag = args.get("bias_swiglu_fusion") if args.get("swiglu") is True else None
    fusion = swiglu_flag if swiglu_flag is not None else args.get("bias_activation_fusion")
    if gated and fusion is False:
        work["activation_fusion"] = False
        return
    experts = args.get("num_experts", args.get("num_moe_experts"))
    moe = isinstance(experts, int) and not isinstance(experts, bool) and experts > 0
    plain = not gated and (args.get("swiglu") is False or args.get("gated_linear_unit") is False or megatron_defaults)
    if moe and plain and args.get("use_fused_weighted_squared_relu") is not True:
        work["activation_fusion"] = False
        activation = "squared ReLU" if args.get("squared_relu") is True else "GeLU"
        notes.append(f"routed experts' {activation} unfused (Megatron-Core fuses the probability-weighted activation "
                     "of SwiGLU experts, and of squared ReLU ones with --use-fused-weighted-squared-relu only): "
                     "the activation output and its scaled copy are kept")


def _precision_recipe(args: dict[str, Any], work: dict[str, Any], notes: list[str]) -> None:
    """``Workload.module_precision`` from a per-module precision recipe (Megatron-LM ``--te-precision-config-file``,
    Bridge ``model.quant_recipe``; e.g. Nemotron 3 Super's NVFP4 recipes keep attention, the latent projections and
    MTP in bf16 and the Mamba out_proj in MXFP8): the file the log names, read where it exists here (or given with
    ``--arg te-precision-config-file=PATH``); a log prints only its path (Bridge the recipe object), so otherwise
    the note says the modules are costed at the run's precision."""
    recipe = args.get("te_precision_config_file") or args.get("quant_recipe")
    if recipe in (None, False, "None", "null", ""):
        return
    path = Path(str(recipe))
    if work.get("precision", "bf16") == "bf16":
        notes.append(f"per-module precision recipe ({recipe}) ignored: a bf16 run has no quantized module to override")
        return
    if isinstance(recipe, str) and path.suffix in (".yaml", ".yml", ".cfg") and path.is_file():
        from megasolve.models.precision_recipe import load_precision_recipe

        work["module_precision"] = load_precision_recipe(path)
        notes.append(f"per-module precision recipe read from {recipe}")
        return
    notes.append(f"per-module precision recipe ({recipe}) not read (the log gives no readable file): every GEMM is "
                 "costed at the run's precision except the layers --first-last-layers-bf16 keeps in bf16; give the "
                 "file with --arg te-precision-config-file=PATH")


def _fp8_input_store(args: dict[str, Any], work: dict[str, Any], notes: list[str]) -> None:
    """``Workload.activation_func_fp8_input_store`` from the TransformerConfig field a NeMo / Megatron-Bridge config
    or verl override prints (Megatron-LM has no flag for it). Megatron refuses it for any activation but SwiGLU (TC
    L2467-2469), so a log that sets it on a model the log says is not gated is named, not costed."""
    if args.get("activation_func_fp8_input_store") is not True and args.get("activation_func_fp8_input_store") != 1:
        return
    if args.get("swiglu") is False or args.get("gated_linear_unit") is False:
        notes.append("activation_func_fp8_input_store set on a model without SwiGLU, which Megatron refuses: not costed")
        return
    if work.get("activation_fusion") is False:
        notes.append("activation_func_fp8_input_store has no effect without the fused activation kernel "
                     "(bias_activation_fusion off): not costed")
        return
    work["activation_func_fp8_input_store"] = True


def _moe_routing(args: dict[str, Any], work: dict[str, Any], notes: list[str]) -> None:
    """MoE token dropping and padding as launched (``--moe-expert-capacity-factor``, ``--moe-pad-expert-input-to-capacity``,
    ``--moe-token-drop-policy``, ``--moe-router-padding-for-quantization`` / ``-for-fp8``; TC L686-705, L771-777):
    the ``Workload`` fields ``cost/moe_routing.py`` costs. A combination megasolve's rules refuse (as Megatron does) is
    named and left out."""
    # (the expert count is not printed where --model gives the shape: run_from_log drops these for a dense model)
    experts = args.get("num_moe_experts")
    if experts is not None and (not isinstance(experts, int) or isinstance(experts, bool) or experts <= 0):
        return
    read: dict[str, Any] = {}
    factor = args.get("moe_expert_capacity_factor")
    if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 0:  # TC: < 0 means dropless
        read["moe_expert_capacity_factor"] = float(factor)
        if args.get("moe_pad_expert_input_to_capacity") is True:
            read["moe_pad_expert_input_to_capacity"] = True
        if args.get("moe_token_drop_policy") in ("probs", "position"):
            read["moe_token_drop_policy"] = args["moe_token_drop_policy"]
    if args.get("moe_router_padding_for_fp8") is True:
        read["moe_router_padding_for_fp8"] = True
    work.update(read)


MOE_ROUTING_FIELDS = ("moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_token_drop_policy",
                      "moe_router_padding_for_fp8")


def _workload_read(raw: dict[str, Any], name: str, notes: list[str]) -> Workload:
    """``_workload``, but a token dropping / padding setting the rules refuse with the run's dispatcher and precision
    (as Megatron does, so the log is not of that launch) is named and left out, not an error. So is
    ``--deterministic-mode`` beside a fused loss or TP overlap, which today's Megatron-LM refuses (an older release,
    whose workspaces are then costed as PyTorch's default)."""
    if raw.get("deterministic_mode") and (raw.get("tp_comm_overlap")
                                          or raw.get("cross_entropy", "unfused") != "unfused"):
        raw = {k: v for k, v in raw.items() if k != "deterministic_mode"}
        notes.append("--deterministic-mode beside a fused loss or --tp-comm-overlap, which Megatron-LM @d98e8a6 "
                     "refuses (training/determinism.py L24): an older release, whose cuBLAS workspaces are costed as "
                     "PyTorch's default rather than the 32 MiB its CUBLAS_WORKSPACE_CONFIG would give")
    try:
        return _workload(raw, name)
    except MegasolveError as exc:
        if not any(f in raw for f in MOE_ROUTING_FIELDS) or not exc.field.lstrip("-").replace("-", "_").startswith(
                MOE_ROUTING_FIELDS):
            raise
        notes.append(f"MoE token dropping / padding not costed ({exc.field}: {exc.rule}): costed without it")
        return _workload({k: v for k, v in raw.items() if k not in MOE_ROUTING_FIELDS}, name)


def _output_layer_and_optimizer_state(args: dict[str, Any], work: dict[str, Any], layout: dict[str, Any],
                                      notes: list[str], megatron_defaults: bool) -> None:
    """The output layer in MXFP8 (``--fp8-output-proj``, TC L1569-1575: FP8 with the mxfp8 recipe only), bf16 main
    grads (``--main-grads-dtype bf16``: gradients accumulated and reduced in bf16, ARG L1204-1217), and what the log
    sets: the precision-aware optimizer with ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` / ``--main-params-dtype``
    (``Workload.precision_aware_optimizer``; named where megasolve does not model it: Megatron-FSDP), and a
    parameter all-gather left unoverlapped (``--overlap-grad-reduce`` without ``--overlap-param-gather``:
    ``Workload.param_gather_overlap`` False)."""
    if args.get("fp8_output_proj") is True:
        if work["precision"].startswith("fp8") and work.get("fp8_recipe") == "mxfp8" \
                and not work.get("defer_embedding_wgrad"):
            work["fp8_output_proj"] = True
        else:
            notes.append("--fp8-output-proj costed as a bf16 output layer (Megatron runs it in MXFP8 only with "
                         "--fp8-recipe mxfp8, and not with --defer-embedding-wgrad-compute)")
    main_grads = DTYPE_NAMES.get(str(args.get("main_grads_dtype")).lower())
    if main_grads == "bf16" and not args.get("use_megatron_fsdp"):
        work["grad_reduce_in_bf16"] = True
    if args.get("use_precision_aware_optimizer") is True:
        why = ("under Megatron-FSDP" if args.get("use_megatron_fsdp") is True else
               "without the distributed optimizer" if not layout.get("distributed_optimizer") else
               f"with --optimizer {work['optimizer']}" if work.get("optimizer", "adam") != "adam" else None)
        if why:
            notes.append(f"--use-precision-aware-optimizer costed as Adam's fp32 state (12 B per parameter): megasolve "
                         f"does not model it {why}")
        else:
            work["precision_aware_optimizer"] = True
            for key, choices in (("exp_avg_dtype", ADAM_STATE_DTYPES), ("exp_avg_sq_dtype", ADAM_STATE_DTYPES),
                                 ("main_params_dtype", MAIN_PARAMS_DTYPES)):
                dtype = DTYPE_NAMES.get(str(args.get(key)).lower())
                if dtype in choices and dtype != "fp32":
                    work[key] = dtype
    gather = args.get("overlap_param_gather")
    if work.get("dp_comm_overlap", True) and layout.get("distributed_optimizer") and args.get("overlap_grad_reduce") \
            and (gather is False or (gather is None and megatron_defaults)):
        work["param_gather_overlap"] = False  # the parameter all-gather exposed after the optimizer step


def _set(value: Any) -> bool:
    return value is not None and value is not False and value != 0 and value != "" and value != []


def _int_above_one(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 1


# Launch settings that change memory or step time and that megasolve does not cost: a log that sets one gets a note
# (``--name value``: what it changes, with the Megatron source; @d98e8a6). The test: tests/test_log_recipe_args.py
UNMODELLED_ARGS: tuple[tuple[str, Callable[[dict[str, Any]], bool], str], ...] = (
    ("--no-gradient-accumulation-fusion",
     lambda a: (a.get("no_gradient_accumulation_fusion") is True or a.get("gradient_accumulation_fusion") is False)
     and a.get("use_megatron_fsdp") is not True,  # Megatron-FSDP requires it off (its traffic is costed per micro-batch)
     "every micro-batch adds each weight gradient into the main grads in a pass of its own "
     "(distributed_data_parallel.py L575-579): not costed, expect a slower step"),
    ("--moe-grouped-gemm off", lambda a: _set(a.get("num_moe_experts")) and (a.get("moe_grouped_gemm") is False or (
        a.get("_megatron_launch") and not a.get("_nemo") and "moe_grouped_gemm" not in a)),
     "without it (transformer_config.py L850: off by default) the local experts run one after another as "
     "SequentialMLP (moe/experts.py L1409; moe_module_specs.py L82), smaller GEMMs and more launches than the "
     "grouped GEMM the step is costed with: expect a slower step"),
    ("--delay-wgrad-compute", lambda a: a.get("delay_wgrad_compute") is True,
     "the weight-gradient GEMMs deferred behind the EP all-to-all (distributed_data_parallel.py L440-450): the EP "
     "overlap is costed without it"),
    ("--moe-flex-dispatcher-backend", lambda a: a.get("moe_token_dispatcher_type") == "flex"
     and a.get("moe_flex_dispatcher_backend") not in (None, "deepep"),  # without flex the backend is not used
     "costed as DeepEP, its buffers and kernels (transformer_config.py L898-902)"),
    # Ascend MindSpeed-LLM's own (Ascend/MindSpeed-LLM examples/mcore/deepseek3/pretrain_deepseek3_671b_4k_ptd.sh)
    ("--swap-optimizer (MindSpeed)", lambda a: a.get("swap_optimizer") is True,
     "the optimizer states swapped to host memory between steps: costed on the device"),
    ("--schedules-method (MindSpeed)", lambda a: _set(a.get("schedules_method")),
     "MindSpeed's own pipeline schedule (dualpipev): costed as Megatron's 1F1B / interleaved schedule"),
    ("--moe-fb-overlap (MindSpeed)", lambda a: a.get("moe_fb_overlap") is True,
     "MindSpeed's forward-backward overlap of the MoE all-to-all: costed without it"),
    # Ascend/MindSpeed docs/features/: megatron_moe/megatron-moe-alltoall-overlap-comm.md, -allgather-overlap-comm.md,
    # megatron-moe-zero-memory.md, reuse-fp32-param.md, swap_attention.md, activation-function-recompute.md, mc2.md,
    # communication-over-computation.md, tensor-parallel-2d.md
    ("--moe-alltoall-overlap-comm / --moe-allgather-overlap-comm (MindSpeed)",
     lambda a: a.get("moe_alltoall_overlap_comm") is True or a.get("moe_allgather_overlap_comm") is True,
     "MindSpeed hides the EP all-to-all / all-gather behind the expert computation with its own sub-graph schedule "
     "(more activation memory, its docs say): costed without the overlap"),
    ("--moe-zero-memory (MindSpeed)", lambda a: a.get("moe_zero_memory") not in (None, "disable"),
     "MindSpeed recomputes and swaps parts of the MoE layer (level0 / level1 save 70 % / 90 % of what recomputing the "
     "MLP saves, its docs say): costed without it"),
    ("--reuse-fp32-param (MindSpeed)", lambda a: a.get("reuse_fp32_param") is True,
     "the fp32 main parameters share storage with the bf16 weights (2 B a parameter, / DP with the distributed "
     "optimizer, saved): costed with both copies"),
    ("--swap-attention (MindSpeed)", lambda a: a.get("swap_attention") is True,
     "the attention block's activations are swapped to host memory and prefetched for the backward: costed on the "
     "device"),
    ("--recompute-activation-function (MindSpeed)", lambda a: a.get("recompute_activation_function") is True,
     "the MLP activation's output is dropped and recomputed before its backward: costed as kept"),
    ("--use-ascend-mc2 / --use-ascend-coc (MindSpeed)",
     lambda a: a.get("use_ascend_mc2") is True or a.get("use_ascend_coc") is True,
     "the TP all-gather / reduce-scatter fused with the GEMMs on the NPU: costed as Megatron's TP communication"),
    ("--tp-2d (MindSpeed)", lambda a: a.get("tp_2d") is True,
     "two-dimensional tensor parallelism (--tp-x / --tp-y): costed as Megatron's one-dimensional TP"),
    ("--empty-unused-memory-level", lambda a: _set(a.get("empty_unused_memory_level")),
     "torch.cuda.empty_cache() every step (training.py L3149, L3229): reserved memory and the step include the "
     "allocator's churn, not costed"),
    ("--recompute-num-layers with --recompute-method uniform",
     lambda a: a.get("recompute_method") == "uniform" and _int_above_one(a.get("recompute_num_layers")),
     "costed as one layer per checkpoint: fewer saved inputs, and that many layers recomputed at once, in the run"),
    ("--fp32-residual-connection", lambda a: a.get("fp32_residual_connection") is True,
     "the residual stream and the pipeline sends in fp32 (transformer_config.py L1421-1426): costed in bf16"),
    ("--distribute-saved-activations", lambda a: a.get("distribute_saved_activations") is True,
     "full recompute's checkpointed inputs split over the TP ranks (transformer_config.py L1934-1936): costed whole"),
    ("--hierarchical-context-parallel-sizes", lambda a: _set(a.get("hierarchical_context_parallel_sizes")),
     "megasolve chooses its own all-to-all / ring split of the CP group"),
    ("--enable-mhc-connections", lambda a: a.get("enable_mhc_connections") is True,
     "hyper-connections widen the residual stream (transformer_config.py L1142-1166): not modelled"),
    ("--heterogeneous-layers-config-path", lambda a: _set(a.get("heterogeneous_layers_config_path"))
     or _set(a.get("heterogeneous_layers_config_encoded_json")),
     "per-layer sizes are not read: costed as a uniform model of the printed shape"),
    ("--tensor-parallel-num-weight-shards", lambda a: _set(a.get("tensor_parallel_num_weight_shards")),
     "weight re-materialisation over extra shards (model_parallel_config.py L12-76): not modelled"),
    ("--moe-apply-probs-on-input", lambda a: a.get("moe_apply_probs_on_input") is True,
     "the routing probabilities applied to the expert input (transformer_config.py L949): costed as applied after "
     "the activation"),
    ("--keep-fp8-transpose-cache", lambda a: a.get("keep_fp8_transpose_cache") is True,
     "Megatron-FSDP keeps every parameter's FP8 transpose, 1 B per parameter (distributed_data_parallel_config.py "
     "L118): not costed"),
    ("--moe-paged-stash", lambda a: a.get("moe_paged_stash") is True,
     "the routed experts' saved activations go to a paged stash buffer sized from the average (or maximum) token "
     "count times --moe-paged-stash-buffer-size-factor-cuda (transformer_config.py L1364-1376): costed as ordinary "
     "saved tensors of the routed tokens"),
    ("--ep-overlap-early-attn-memory-release", lambda a: a.get("ep_overlap_early_attn_memory_release") is True,
     "the EP overlap runs the attention backward before the next forward's combine to free its activations sooner "
     "(model_chunk_schedule_plan.py L280-292): the overlap's memory is costed as the 1F1B schedule's, with or "
     "without it"),
    ("--moe-router-fusion", lambda a: a.get("moe_router_fusion") is True and _set(a.get("num_moe_experts")),
     "Transformer Engine's fused top-k and aux-loss kernels (transformer_config.py L944-947): the router's kernels "
     "and saved tensors are costed unfused"),
    # THUDM/slime slime/utils/arguments.py (--use-dynamic-batch-size, --max-tokens-per-gpu); verl
    # trainer/config actor use_dynamic_bsz / ppo_max_token_len_per_gpu (THUDM/slime#1321, verl's recipes)
    ("dynamic batch size (--use-dynamic-batch-size / use_dynamic_bsz)",
     lambda a: a.get("use_dynamic_batch_size") is True or a.get("use_dynamic_bsz") is True,
     "micro-batches packed to a token budget (--max-tokens-per-gpu / ppo_max_token_len_per_gpu) from sequences of "
     "varied length: costed as micro-batches of micro-batch size x sequence length; --seq-len N --mbs 1 costs a "
     "packed one of N tokens"),
    ("FASOP's PARTITION", lambda a: _set(a.get("_fasop_partition")),
     "the layers a stage holds in FASOP's fork (its job info's PARTITION line), an uneven split of its own: costed as "
     "Megatron's even split; --pipeline-layout or --first-stage-layers / --last-stage-layers cost another split"),
    ("--log-num-zeros-in-grad", lambda a: a.get("log_num_zeros_in_grad") is True,
     "one more pass over every gradient and an all-reduce each step to count zeros (optimizer.py L428-442, L840): "
     "not costed"),
)
# Not named: --manual-gc (Python's collector run by hand at --manual-gc-interval, training_config.py L91-100): the step
# is costed without collector pauses, which is what the flag gives; Megatron-Bridge's recipes set it, so a note would
# stand on most of their logs and say nothing.


def _unmodelled_args(args: dict[str, Any], notes: list[str]) -> None:
    """A note for each ``UNMODELLED_ARGS`` setting the log sets."""
    for flag, is_set, what in UNMODELLED_ARGS:
        if is_set(args):
            notes.append(f"{flag} is not modelled: {what}")


def _fine_grained_offload(args: dict[str, Any], work: dict[str, Any], notes: list[str]) -> None:
    """``Workload.offload_modules`` from ``--fine-grained-activation-offloading --offload-modules ...``; the modules
    and tuning flags megasolve does not model are named."""
    if args.get("fine_grained_activation_offloading") is not True:
        return
    words = _words(args.get("offload_modules"))
    known = tuple(w for w in words if w in OFFLOAD_MODULE_NAMES)
    if known:
        work["offload_modules"] = known
    skipped = [w for w in words if w not in OFFLOAD_MODULE_NAMES]
    if skipped or not words:
        notes.append(f"fine-grained activation offloading of {' '.join(skipped) or '(no --offload-modules)'} is not "
                     "modelled: those activations are counted on the GPU (expect less GPU memory than predicted)")
    for arg, default, what in (("activation_offload_fraction", 1.0, "a fraction of the offload groups"),
                               ("delta_offload_bytes_across_pp_ranks", 0, "less offloading on later stages"),
                               ("min_offloaded_tensor_size", 1024 * 1024, "another minimum tensor size")):
        value = args.get(arg)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value != default:
            notes.append(f"--{arg.replace('_', '-')} {value} ({what}) is not modelled: costed as Megatron's default "
                         f"{default}")


def _words(value: Any) -> list[str]:
    """A list-valued argument as printed (``['core_attn', 'moe_act']`` in the argument dump, ``core_attn moe_act``
    in a launch script); [] when absent."""
    if not isinstance(value, str):
        return []
    return [w.strip("'\"") for w in re.split(r"[\s,\[\]]+", value) if w.strip("'\"")]


def _cp_comm_types(value: Any) -> list[str]:
    """``--cp-comm-type`` as printed (``['p2p']`` in the argument dump, ``a2a`` in a launch script, a
    per-layer list ``p2p p2p a2a``), Megatron's help-text spelling ``allgather`` read as TE's ``all_gather``;
    [] when absent or unknown."""
    if not isinstance(value, str):
        return []
    words = ["all_gather" if w == "allgather" else w for w in _words(value)]
    return words if words and all(w in CP_COMM_TYPES for w in words) else []


# Megatron-Bridge's performance scripts: --compute_dtype -> the FP8 recipe (scripts/performance/utils/precision.py:
# fp8_cs current (tensorwise) scaling, fp8_mx MXFP8, fp8_sc sub-channel (blockwise) scaling); nvfp4 is NVFP4
BRIDGE_FP8_DTYPES = {"fp8_cs": "tensorwise", "fp8_mx": "mxfp8", "fp8_sc": "blockwise"}


# the Muon settings its cost depends on, at Megatron-LM's defaults (ARG L2648-2664 @d98e8a6): the Newton-Schulz
# steps, where TP shards are orthogonalised, which optimizer takes the non-matrix parameters
MUON_COSTED_DEFAULTS = {"muon_num_ns_steps": 5, "muon_tp_mode": "duplicated", "muon_scalar_optimizer": "adam"}


def _precision(args: dict[str, Any], notes: list[str]) -> str:
    fp32_dump = args.get("bf16") is False and args.get("fp16") is False \
        and not any(args.get(k) for k in ("fp8", "fp8_format", "fp4", "fp4_format", "precision", "compute_dtype",
                                          "mixed_precision", "_prose_precision"))
    if args.get("_params_dtype") == "float32" or (fp32_dump and "_params_dtype" not in args):
        # ("using torch.float32 for parameters"; or a dump's bf16 False and fp16 False, Megatron-LM's fp32 default)
        notes.append("fp32 parameters (no --bf16/--fp16): megasolve models 16-bit training; costed as bf16, "
                     "so expect the run to be slower and larger than predicted")
    fp8 = args.get("fp8") or args.get("fp8_format")
    if isinstance(fp8, str) and fp8.lower() in ("hybrid", "e4m3"):
        return "fp8"
    if fp8 is True:  # NeMo 1's model config (MLPerf's NeMo logs): "fp8: true" beside fp8_hybrid / fp8_e4m3
        return "fp8"
    # NVFP4: Megatron-LM --fp4-format e2m1 (TC ``fp4``), Bridge's MixedPrecisionConfig ``fp4`` / compute_dtype nvfp4
    fp4 = args.get("fp4") or args.get("fp4_format")
    if isinstance(fp4, str) and fp4.lower() == "e2m1":
        if str(args.get("fp4_recipe") or "nvfp4").lower() != "nvfp4":  # --fp4-recipe custom (TC L679-692)
            notes.append(f"--fp4-recipe {args['fp4_recipe']} costed as nvfp4 (its quantizers are not modelled)")
        return "fp4"
    precision = str(args.get("precision") or "").lower()
    if "fp8" in precision:
        return "fp8"
    dtype = str(args.get("compute_dtype") or "").lower()
    if dtype == "nvfp4" or "nvfp4" in precision:
        return "fp4"
    if dtype in BRIDGE_FP8_DTYPES:
        return "fp8"
    if not any(k in args for k in ("fp16", "bf16", "precision", "compute_dtype", "fp8", "fp8_format")) \
            and args.get("_prose_precision") in ("fp8", "fp4"):
        notes.append(f"{args['_prose_precision'].upper()} as the text states it (no precision flag in the log)")
        return args["_prose_precision"]
    if args.get("fp16") is True or precision.startswith("16") or "fp16" in precision \
            or (args.get("_params_dtype") == "float16" and args.get("bf16") is not True):
        # "using torch.float16 for parameters" is printed for --fp16 (megatron/arguments.py L152-168 @23.04)
        notes.append("fp16 run costed as bf16 (the same bytes and tensor-core rate)")
    elif precision in ("fp32", "32"):  # a results table's precision column (FlagPerf)
        notes.append("fp32 run: megasolve models 16-bit training; costed as bf16, so expect the run to be slower and "
                     "larger than predicted")
    elif not any(k in args for k in ("fp16", "bf16", "precision", "compute_dtype", "fp8", "fp8_format",
                                     "_params_dtype", "_prose_precision")):
        notes.append("bf16 assumed: the log states no precision (--arg fp8-format=hybrid for FP8, --arg fp16=true)")
    return "bf16"


def _measured(facts: LogFacts, defaults: dict[str, Any], notes: list[str], missing: list[tuple[str, str]],
              layout: dict[str, Any]) -> Measured:
    step, used, tflops = _step_time(facts, notes)
    if defaults.get("step_time_s"):
        step, used = float(defaults["step_time_s"]), 0
    peak = reserved = None
    rank: int | str | None = None
    if facts.memory:
        rank = max(facts.memory, key=lambda r: (facts.memory[r][0], -r))
        peak = facts.memory[rank][0] * MIB / 1e9
        reserved = facts.memory[rank][1] * MIB / 1e9
        if rank == UNKNOWN_RANK:
            rank = None
            notes.append("the memory report names no rank: compared with the peak stage")
    if not facts.memory and facts.reserved_only_mib:  # Megatron-SWIFT prints only the peak reserved
        reserved = facts.reserved_only_mib * MIB / 1e9
        notes.append("the log prints peak reserved memory only (no allocated figure to compare)")
    tokens = facts.stated_tokens_per_gpu if step is None else None
    if tokens and not facts.args.get("_tokens_from_tflops"):
        notes.append(f"throughput {tokens:g} tokens/s/GPU as the text states it (no step time)")
    if step is None and tokens is None and peak is None and reserved is None and not facts.oom \
            and not defaults.get("oom"):
        verl = [n for n in notes if n.startswith("verl's actor update (timing_s/update_actor")]
        missing.append(("measurement (iteration timing, memory report or OOM)" if not verl else
                        "measurement (" + verl[-1].split(" read, but ")[0] + " read, but not its optimizer steps: "
                        "data.train_batch_size / actor.ppo_mini_batch_size x ppo_epochs)",
                        "a log with iteration lines, or --step-time SECONDS"))
    oom = facts.oom
    if defaults.get("oom") and not oom:
        oom = True
        notes.append("the run ran out of GPU memory, as given (--oom)")
    if facts.args.get("_checkpoint_oom"):
        notes.append(f"the text's out-of-memory came while saving a checkpoint, not in a training step: not compared "
                     f"with the step's peak (\"{facts.args['_checkpoint_oom']}\"; --oom to compare it anyway)")
    if facts.args.get("_host_oom"):
        notes.append(f"the text's out-of-memory is the host's (CPU memory), not a GPU's: not taken as a GPU OOM "
                     f"(\"{facts.args['_host_oom']}\")")
    if oom and not facts.oom_logged and not facts.args.get("_prose_oom_always") \
            and (cond := facts.args.get("_prose_oom_if")) and layout.get(cond[0], 1) != cond[1]:
        oom = False  # verl-project/verl#2197: train_tp=2 ..., "When tp=1 is set, OOM occurs"
        notes.append(f"the text's OOM is under {cond[0]}={cond[1]}, not this run's {cond[0]}={layout.get(cond[0], 1)}: "
                     f"not taken as this run's (\"{facts.args.get('_prose_oom')}\")")
    if oom and facts.oom:  # (an OOM given with --oom has its own note above)
        notes.append("the run ran out of memory" + (f" (GPU capacity {facts.oom_capacity_gib} GiB)"
                                                     if facts.oom_capacity_gib else "")
                     + (f", as the text says: \"{facts.args['_prose_oom']}\"" if facts.args.get("_prose_oom") else ""))
    return Measured(step_time_s=step, tokens_per_s_per_gpu=tokens, peak_allocated_gb=peak, peak_reserved_gb=reserved,
                    rank=rank, oom=oom, tflops_per_gpu=tflops, iterations=used,
                    theoretical_memory_gb=facts.theoretical_mb * MIB / 1e9 if facts.theoretical_mb else None)


def _tokens_from_stated_tflops(spec: ModelSpec, seq_length: int, facts: LogFacts, defaults: dict[str, Any],
                               notes: list[str]) -> None:
    """A text that states only TFLOP/s per GPU ("achieved a performance of 494 TFLOPS/GPU", a results table's
    TFLOP/s column) measured tokens/s per GPU = that rate / Megatron's FLOPs per token of the model (the count
    Megatron-LM and Megatron-Bridge report TFLOP/s with; ``compute.model_flops_per_sequence``)."""
    if facts.iterations or facts.nemo_steps or facts.stated_step_s or facts.stated_tokens_per_gpu \
            or defaults.get("step_time_s") or not facts.reported_tflops:
        return
    tflops = statistics.median(_steady(facts.reported_tflops))
    per_token = model_flops_per_sequence(spec, seq_length) / seq_length
    facts.stated_tokens_per_gpu = round(tflops * 1e12 / per_token, 1)
    facts.args["_tokens_from_tflops"] = True
    notes.append(f"throughput from the stated {tflops:g} TFLOP/s/GPU and Megatron's count of this model's FLOPs "
                 f"({per_token / 1e9:.1f} GFLOP a token); a source that counts FLOPs otherwise shifts it "
                 "(--step-time SECONDS to give the measured step)")


def _step_time(facts: LogFacts, notes: list[str]) -> tuple[float | None, int, float | None]:
    """Median seconds per iteration after the warm-up: the first logged interval and every iteration
    up to ``WARMUP_ITERATIONS`` are dropped (kept only when nothing else was logged)."""
    if facts.iterations:
        # one entry per iteration (ranks that log the same line, e.g. the last stage of every pipeline)
        by_iter: dict[int, tuple[float, float | None]] = {}
        for it, seconds, tflops, _ in facts.iterations:
            by_iter.setdefault(it, (seconds, tflops))
        ordered = sorted(by_iter.items())
        # the logged iteration after an evaluation ("validation loss at iteration 3") holds it where the timer ran on
        # (iteration 4 of a Megatron-DeepSpeed run: 280 s against 195-197 s): left out while others remain
        after_eval = {min((it for it, _ in ordered if it > n), default=None)
                      for n in facts.args.get("_eval_after") or ()} - {None}
        kept = [(it, v) for it, v in ordered if it not in after_eval]
        if after_eval and len(kept) > 1 and len(kept) < len(ordered):
            notes.append(f"iteration {', '.join(map(str, sorted(after_eval & set(by_iter))))} left out: its time holds "
                         "the evaluation logged before it")
            ordered = kept
        steady = _settled([v for i, (it, v) in enumerate(ordered) if i > 0 and it > WARMUP_ITERATIONS])
        if not steady:
            steady = [v for _, v in ordered]
            if len(ordered) == 1 and ordered[0][0] > 5 * WARMUP_ITERATIONS:  # "iteration 50/ 50" after a "<snip>"
                notes.append(f"one iteration logged ({ordered[0][0]}): its time averages the iterations since the "
                             "log before it, start-up included if none was logged before")
            else:  # the last has the least start-up in it (a 3-iteration test: 36.96, 1.18, 0.85 s)
                steady = steady[-1:]
                notes.append(f"only warm-up iterations logged: the last one's time taken (iteration {ordered[-1][0]}), "
                             "which may still include start-up")
        step = statistics.median(s for s, _ in steady)
        _note_spread([s for s, _ in steady], notes)
        tfl = [t for _, t in steady if t is not None] or _steady(facts.reported_tflops)
        return step, len(steady), statistics.median(tfl) if tfl else None
    if facts.nemo_steps:
        values = [s for _, s in facts.nemo_steps]
        if all(it is not None and it > WARMUP_ITERATIONS for it, _ in facts.nemo_steps):
            steady, warm = values, False  # logged from past the warm-up on ("iteration 400/999", NeMo#14850)
        else:
            steady = _settled(values[WARMUP_ITERATIONS:]) if len(values) > WARMUP_ITERATIONS else values
            warm = len(values) <= WARMUP_ITERATIONS
        if warm and len(steady) > 1:  # the last has the least start-up in it
            steady = steady[-1:]
            notes.append("only warm-up steps logged: the last one's time taken, which may still include start-up")
        elif warm:
            notes.append("only warm-up iterations logged: their time includes start-up")
        _note_spread(steady, notes)
        tfl = _steady(facts.reported_tflops)
        return statistics.median(steady), len(steady), statistics.median(tfl) if tfl else None
    tfl = _steady(facts.reported_tflops)
    if facts.stated_step_s and facts.args.get("_step_range"):  # "step 4～5min": a range, its middle taken
        notes.append(f"step time {facts.stated_step_s:g} s: the middle of the range the text states "
                     f"(\"{facts.args['_step_range']}\"); --step-time SECONDS to give the measured one")
        return facts.stated_step_s, 1, statistics.median(tfl) if tfl else None
    if facts.stated_step_s and facts.args.get("_rl_policy_training"):
        notes.append(f"step time {facts.stated_step_s:g} s: the policy's training in NeMo RL's timing block "
                     "(policy_training), not its whole step, which holds generation and log-prob inference too")
        return facts.stated_step_s, 1, statistics.median(tfl) if tfl else None
    if updates := facts.args.get("_verl_update_actor"):
        step = _verl_actor_step(facts.args, updates, notes)
        if step is not None:
            return step, len(updates), statistics.median(tfl) if tfl else None
    if facts.stated_step_s:  # a results table's first row, or a summary line (logs.py _tables, _STATED_STEP)
        notes.append(f"step time {facts.stated_step_s:g} s as the text states it (a results table's first row or a "
                     "summary line, not iteration lines)")
        return facts.stated_step_s, 1, statistics.median(tfl) if tfl else None
    return None, 0, statistics.median(tfl) if tfl else None


def _verl_actor_step(args: dict[str, Any], updates: dict[int, float], notes: list[str]) -> float | None:
    """One optimizer step of verl's Megatron actor from its RL steps' ``timing_s/update_actor``: the median update
    (the first RL step left out when there are more) over the optimizer steps it runs, ``ppo_epochs x train_batch_size /
    ppo_mini_batch_size`` (verl/workers/actor/megatron_actor.py update_policy: the batch split into mini-batches, each
    one step, for each epoch); None, with a note, when the log does not say how many.

    >>> notes = []
    >>> _verl_actor_step({"_verl_train_batch": 1024, "_verl_ppo_mini_batch": 256}, {1: 40.0, 2: 36.0, 3: 34.0}, notes)
    8.75
    >>> _verl_actor_step({}, {1: 40.0}, notes), "timing_s/update_actor" in notes[-1]
    (None, True)
    """
    ordered = [updates[k] for k in sorted(updates)]
    update = statistics.median(ordered[1:] if len(ordered) > 1 else ordered)
    batch, mini, epochs = (args.get(k) for k in ("_verl_train_batch", "_verl_ppo_mini_batch", "_verl_ppo_epochs"))
    epochs = epochs if isinstance(epochs, int) and epochs > 0 else 1
    if not (isinstance(batch, int) and isinstance(mini, int) and 0 < mini <= batch and batch % mini == 0):
        notes.append(f"verl's actor update (timing_s/update_actor, {update:g} s an RL step) read, but not how many "
                     "optimizer steps it holds (data.train_batch_size / actor.ppo_mini_batch_size x ppo_epochs): "
                     "--step-time SECONDS for one")
        return None
    steps = epochs * batch // mini
    notes.append(f"step time {update / steps:.4g} s: verl's actor update (timing_s/update_actor, median {update:g} s "
                 f"an RL step) over its {steps} optimizer step(s) ({epochs} epoch(s) x {batch} / {mini} prompts); "
                 "generation, log-probabilities and any critic are not in it")
    return update / steps


def _note_spread(steps: list[float], notes: list[str]) -> None:
    """Say when the steps a log times differ by more than 3x: several runs in one excerpt (FlagScale's README: one
    card's 24.4 s iterations beside eight cards' 1.5 s) have no one step, and their median is no run's."""
    if len(steps) > 1 and max(steps) > 3 * min(steps):
        notes.append(f"the step times logged run from {min(steps):.4g} to {max(steps):.4g} s: more than one run in the "
                     "excerpt? their median is taken (--step-time SECONDS for the run meant)")


def _settled(steady: list[Any]) -> list[Any]:
    """``steady`` without a warm-up that outlasts ``WARMUP_ITERATIONS``: leading entries each over 1.5x the median of
    those after them are dropped while at least half remain (a NeMo FP8 run on B200 logging 20.5, 11.3, 8.19, 6.64,
    5.72 s, then 2.01-2.03 s from its sixth step on, AI-Hypercomputer/gpu-recipes). Entries: seconds, or (seconds, x).

    >>> _settled([6.64, 5.72, 2.03, 2.01, 2.02, 2.02, 2.03, 2.03]), _settled([2.0, 9.0, 2.1])
    ([2.03, 2.01, 2.02, 2.02, 2.03, 2.03], [2.0, 9.0, 2.1])
    """
    seconds = [v[0] if isinstance(v, tuple) else v for v in steady]
    start = 0
    while len(seconds) - start - 1 >= len(seconds) / 2 and seconds[start] > 1.5 * statistics.median(seconds[start + 1:]):
        start += 1
    return list(steady[start:])


def _steady(values: list[float]) -> list[float]:
    """Values printed once per step, the warm-up steps dropped when there is more than the warm-up."""
    return values[WARMUP_ITERATIONS:] if len(values) > WARMUP_ITERATIONS else list(values)


guard_patterns(globals())  # (logs.py's reason: a long log's text is searched only by the patterns it may match)
