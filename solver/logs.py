"""Find the facts in a training log, a launch script or a printed config: ``parse_log(text) -> LogFacts``.

The line formats (Megatron-LM ``training.py`` / ``arguments.py`` / ``theoretical_memory_usage.py``,
NeMo / Megatron-Bridge, PyTorch's OOM message, launcher prefixes) are listed in ``solver/runs.py``,
which turns the facts into a ``Run``. Nothing here knows about models or clusters.
"""

from __future__ import annotations

import ast
import functools
import math
import itertools
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from megasolve.solver.prefilter import Guarded, fold_case, guard_patterns

UNKNOWN_RANK = -1  # a memory line that names no rank

# ---------------------------------------------------------------------------- log lines
# launcher prefixes: slurm --label ("0: ", "12: "), "[host:rank]:", torchrun "[rank0]:" / "[default0]:", NeMo-Run's
# "name/0 [default0]:" (NVIDIA-NeMo/NeMo#13903), Ray's "(main_task pid=8918)" / "(WorkerDict pid=1, ip=10.0.0.1)"
# and a platform's "【2025-02-20 23:16:43】" stamp (verl-project/verl#330)
_PREFIX = re.compile(r"^\s*(?:\d+:\s|\[[^\]\s]*(?::\d+|rank\d+|default\d+)\]:\s?|[\w.-]+:\d+:\s"
                     r"|[\w.-]+/\d+\s+\[default\d+\]:\s?|\([\w.]*\s*pid=\d+(?:,\s*ip=[\d.]+)?\)\s?|【[^】]*】\s?)")
# what log collectors put before each line: an ISO-8601 or Python-logging time stamp (``kubectl logs --timestamps``,
# ``%(asctime)s - %(levelname)s - ``), a bracketed stamp, level or dotted logger name, NeMo's "[NeMo I 2025-01-01
# 10:00:00 nemo_logging:393]", Open MPI's ``--tag-output`` "[1,0]<stdout>:", docker compose's "trainer-1  | " and
# ``kubectl logs --prefix``'s "[pod/name/container]"; and a reply's Markdown / e-mail quote marks ("> ")
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
_COLLECTOR_PREFIX = re.compile(
    r"^\s*(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s+-)?\s+"
    r"|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]\s*"
    rf"|\[{_LEVEL}\]\s*|(?:[\w.]+\s+-\s+)?{_LEVEL}\s+-\s+|\[[a-z_]\w*(?:\.\w+)+\]\s*"
    r"|\[NeMo [DIWEC] [^\]]*\]\s?|\[\d+,\d+\]<std(?:out|err)>:\s?|[\w.-]+[-_]\d+\s+\|\s|\[pod/[^\]]+\]\s"
    # AMD Primus's logger: "[20251114 13:54:06][rank-0/16][DEBUG] [------arguments.py:1028] :   bf16 ...... True"
    rf"|\[\d{{8}} \d\d:\d\d:\d\d\]|\[rank-\d+/\d+\]|\[\s*{_LEVEL}\s*\]\s*|\[-*[\w.]+\.py:\d+\]\s*:\s?"
    r"|(?:>[ \t]?)+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# spaces a web page or chat client puts in copied text: no-break, narrow no-break, figure and thin spaces as spaces,
# zero-width ones removed
_SPACES = str.maketrans({"\u00a0": " ", "\u202f": " ", "\u2007": " ", "\u2009": " ", "\u200b": None,
                         "\ufeff": None})
_SPACE_CHARS = tuple(chr(code) for code in _SPACES)


def _starts_a_match(pattern: Guarded, text: str, words: tuple[str, ...]) -> bool:
    """Whether the IGNORECASE ``pattern``, each of whose matches starts with one of ``words`` (lower case), matches in
    ``text``: tried only where a word starts in the folded text (where folding kept every character one character,
    the same places in ``text``; else searched whole).

    >>> [_starts_a_match(_COMPARED_RUN, line, _COMPARED_WORDS) for line in ("- Improved (This PR)", "12 hours")]
    [True, False]
    """
    folded = fold_case(text)
    if folded is None or len(folded) != len(text):
        return bool(pattern.search(text))
    for word in words:
        at = folded.find(word)
        while at >= 0:
            if pattern.raw.match(text, at):  # (the pattern itself: its guard would look at the whole text again)
                return True
            at = folded.find(word, at + 1)
    return False


_PREFIX_RANK = re.compile(r"^\s*(?:(\d+):\s|\[rank(\d+)\]:)")  # global ranks: slurm --label, torchrun
_ARG_LINE = re.compile(r"^\s*([A-Za-z_][\w]*)\s\.{3,}\s?(.*?)\s*$")
# Megatron-LM before 2021 padded names to 32 characters (megatron/arguments.py::_print_args at 94e2ca5, L81:
# ``dots = '.' * (32 - len(arg))``): a longer name prints no dots, "  name  value" (inside the dump only)
_ARG_LINE_NO_DOTS = re.compile(r"^\s*([A-Za-z_]\w{31,})\s{2,}(\S.*?)\s*$")
_ARGS_START = re.compile(r"-{3,}\s*arguments\s*-{3,}")
_ARGS_END = re.compile(r"-{3,}\s*end of arguments\s*-{3,}")
_WORLD = re.compile(r"using world size:\s*(\d+)(.*)")
# "tensor-model-parallel size: 4"; Megatron-DeepSpeed writes "data-parallel-size: 8" (megatron/arguments.py
# of deepspeedai/Megatron-DeepSpeed, as posted in its #337)
_WORLD_PART = re.compile(r"([a-z][a-z-]*?)[- ]size:\s*(\d+)")
# the parallel setup's own error names the world size: "RuntimeError: world_size (1) is not divisible by 2"
# (megatron/core/parallel_state.py initialize_model_parallel; NVIDIA-NeMo/NeMo#11480)
# Megatron-LM 0.12's message lost a comma: "hierarchical context-parallel sizes: Nonetensor-model-parallel size: 1"
# (megatron/training/arguments.py, fixed by NVIDIA/Megatron-LM#1552): a part name glued to the value before it is
# the longest known part name it ends with
_WORLD_PART_NAMES = ("encoder-tensor-model-parallel", "encoder-pipeline-model-parallel", "tensor-model-parallel",
                     "pipeline-model-parallel", "expert-model-parallel", "expert-tensor-parallel",
                     "virtual-pipeline-model-parallel", "context-parallel", "data-parallel", "model-parallel")


def _world_part_name(name: str) -> str:
    """
    >>> _world_part_name("onetensor-model-parallel"), _world_part_name("data-parallel")
    ('tensor-model-parallel', 'data-parallel')
    """
    if name in _WORLD_PART_NAMES:
        return name
    return next((k for k in _WORLD_PART_NAMES if name.endswith(k)), name)


_WORLD_ERROR = re.compile(r"\bworld_size \((\d+)\) is not (?:divisible|equal)")
# GPT-NeoX: "NeoXArgs.calculate_derived() Total number of GPUs determined to be: 1" (VHellendoorn/Code-LMs#21)
# AMD Primus's iteration line: "hip mem usage/free/total/usage_ratio: 126.03GB/129.96GB/255.98GB/49.23%": the
# device's total names the part (192 GB MI300X, 256 GB MI325X, 288 GB MI355X; ROCm reports GiB of 2^30 less a few MB)
_HIP_TOTAL = re.compile(r"hip mem usage/free/total/usage_ratio:\s*[\d.]+GB/[\d.]+GB/(\d+(?:\.\d+)?)GB")
_HIP_PARTS = {192: "MI300X", 256: "MI325X", 288: "MI355X"}
_PRIMUS_ENV = re.compile(r"\[Primus:Env\].*?\bworld_size=(\d+)")  # "[Primus:Env] rank=0, world_size=8, local_rank=0"
_NEOX_GPUS = re.compile(r"Total number of GPUs determined to be:\s*(\d+)")
# GPT-NeoX's argument dump marks each value "....default" / "....updated" (neox_arguments/arguments.py print)
_NEOX_SUFFIX = re.compile(r"(?:\.{2,}|(?<=[\]}'\"]))(?:default|updated)$")
# DeepSpeed's pipeline engine (Megatron-DeepSpeed): "steps: 2 loss: 12.6157 iter time (s): 2.673 samples/sec: 95.775"
# (deepspeed/runtime/pipe/engine.py train_batch)
# DeepSpeed's pipeline module prints its process grid: "Using topology: {ProcessCoord(pipe=0, data=0, model=0): 0,
# ...}" (deepspeed/runtime/pipe/module.py; bigscience-workshop/Megatron-DeepSpeed#356); Megatron-DeepSpeed's
# "model" axis is the tensor-parallel one
_DS_TOPOLOGY = re.compile(r"Using topology:\s*(\{.*)")
_DS_COORD = re.compile(r"ProcessCoord\(([^)]*)\):\s*(\d+)")
_DS_AXES = {"pipe": "pipeline-model-parallel", "data": "data-parallel", "model": "tensor-model-parallel"}
_DS_STEP = re.compile(r"^steps:\s*(\d+)\b.*?\biter time \(s\):\s*(\d*\.?\d+)")
# verl's log_gpu_memory_usage: "... max memory allocated (GB): 52.26, ... max memory reserved (GB): 58.40" and its
# step metrics "perf/max_memory_allocated_gb:25.921"; verl's GB is bytes / 2**30 (verl/utils/debug/performance.py)
_VERL_MEMORY = re.compile(r"max memory allocated \(GB\):\s*(\d*\.?\d+).*?max memory reserved \(GB\):\s*(\d*\.?\d+)")
# NeMo's / Megatron-Bridge's performance scripts name a run by its layout: "bf16_2nodes_tp1_pp2_cp1_vp24_ep2_etp1_
# 1mbs_512gbs" (scripts/performance: compute dtype, nodes, sizes, micro and global batch; NVIDIA-NeMo/NeMo#14838)
_NEMO_PERF_NAME = re.compile(r"(?<![A-Za-z0-9])(?:(bf16|fp16|fp8|fp32|mxfp8)\w*?_)?(\d+)nodes_tp(\d+)_pp(\d+)_cp(\d+)"
                             r"_vp(\d+|None)_ep(\d+)(?:_etp(\d+|None))?_(?:(\d+)mbs_(\d+)gbs|mbs(\d+)_gbs(\d+))"
                             r"(?![A-Za-z0-9])")  # (the layout's own order too: "..._etpNone_mbs1_gbs64", dgxc-benchmarking)
# NVIDIA's dgxc-benchmarking (llmb-run) names an experiment "pretrain_llama3_8b_bf16_gpus8_tp1_pp1_cp1_vpNone_ep1_mbs4_
# gbs128" (llama3.1/README.md): precision, GPUs, sizes, micro and global batch
_LLMB_NAME = re.compile(r"(?<![A-Za-z0-9])(?:(bf16|fp16|fp8|fp32|mxfp8)\w*?_)?gpus(\d+)_tp(\d+)_pp(\d+)_cp(\d+)"
                        r"_vp(\d+|None)(?:_ep(\d+))?(?:_etp(\d+|None))?_mbs(\d+)_gbs(\d+)(?![A-Za-z0-9])")
_VERL_RANK = re.compile(r"\[Rank (\d+)\b")
# dgxc-benchmarking's older experiment names: pretrain_<model>_<size>_<dtype>_<GPUs>_<job id> ("pretrain_grok1_314b_bf16_256_
# 388660", grok1/README.md)
_DGXC_GPUS_NAME = re.compile(r"\bpretrain_[a-z0-9.-]+(?:_[a-z0-9.-]+)*?_(?:bf16|fp8|fp16|mxfp8|nvfp4)_(\d+)_\d{5,}\b", re.I)
# NeMo's "optim: name: mcore_distributed_optim" / "distributed_fused_adam" (nemo/core/optim/optimizers.py: the
# Megatron-Core distributed optimizer, Apex's DistributedFusedAdam: both shard the optimizer state over DP)
_NEMO_DIST_OPTIM = re.compile(r"\s*name:\s*(?:mcore_distributed_optim|distributed_fused_adam)\s*$")
# the same names wherever NeMo's optimizer is named (a Hydra override, DLLogger's cfg/optim/name): sharded or not;
# Apex's FusedAdam (fused_adam) keeps the whole state on every rank (NVIDIA/NeMo#9727)
_NEMO_OPTIMIZER_SHARDED = {"mcore_distributed_optim": True, "distributed_fused_adam": True, "fused_adam": False}
# a launcher's CPU-binding line counts NUMA nodes: "num_gpus=4 num_sockets = 2 num_nodes=2 cores_per_socket=48" (MLPerf)
_CPU_BINDING = re.compile(r"\bnum_sockets\b|\bcores_per_socket\b")
# MLPerf training results (mlcommons/training_results_v*: NeMo / Megatron submissions) log with mlperf-logging's
# ":::MLLOG {json}": the batch and sequence as keys, step times in "tracked_stats" (NeMo's "train_step_timing in s",
# "train_step_time")
_MLLOG = re.compile(r":::MLLOG\s+(\{.*\})\s*$")
_MLLOG_ARGS = {"global_batch_size": "global_batch_size", "max_sequence_length": "seq_length",
               "micro_batch_size": "micro_batch_size", "tensor_parallelism": "tensor_model_parallel_size",
               "pipeline_parallelism": "pipeline_model_parallel_size", "context_parallelism": "context_parallel_size",
               "expert_parallelism": "expert_model_parallel_size"}
_MLLOG_STEP_KEYS = ("train_step_timing in s", "train_step_time", "train_step_timing")  # (the last: MLPerf v3.x NeMo)
# "submission_platform": nodes x the system's name ("640xNVIDIA GB200", "1xXE9780x8B300-SXM-270GB",
# "8xKinabalux18x4GB200", "8xSUBMISSION_PLATFORM_PLACEHOLDER" beside the config's "num_nodes: 8"): the leading count is
# nodes, not GPUs; the GPUs a node where the name states them ("x8B300"), else the named GPU's node (runs.py)
_MLLOG_PLATFORM = re.compile(r"(\d+)x(.+)")
_MLLOG_PLATFORM_COUNT = re.compile(r'("key":\s*"submission_platform",\s*"value":\s*")\d+x')
# Megatron-LM's start-up lines (initialize.py): "> initialized tensor model parallel with size 8"
_INITIALIZED_SIZE = re.compile(r"\binitiali[sz](?:ed|ing) (tensor|pipeline) model parallel with size (\d+)")
# SkyPilot's "sky queue" resources: nodes x [GPU:per node] ("1x[L40S:4]")
_SKY_RESOURCES = re.compile(r"\b(\d+)x\[[A-Za-z0-9-]+:(\d+)\]")
# the summary table of dgxc-benchmarking's parse_train_timing.sh: its header names the unit, each row is an experiment
# ("pretrain_qwen3_235b_..._4006524  Success  25532.270  13.911  190.00  0.11": mean and std step, mean and std TFLOPS)
_TIMING_TABLE_HEAD = re.compile(r"^\s*Experiment\s+Status\s+Time Mean \((ms|s)\)\s+Time Std")
_TIMING_TABLE_ROW = re.compile(r"^\s*\S+\s+Success\s+(\d+\.?\d*)\s+\d+\.?\d*\s+(\d+\.?\d*|-)\s+(?:\d+\.?\d*|-)\s*$")
_VERL_PERF_MEMORY = re.compile(r"perf/max_memory_(allocated|reserved)_gb:\s*(\d*\.?\d+)")
# (and the key=value form of argonne-lcf/Megatron-DeepSpeed's training_log.py: "iteration=      22/  105963 |
# consumed_samples=       14976 | consumed_tokens=    61341696 | elapsed_time_per_iteration_ms=20723.0 |")
_ITER = re.compile(r"iteration(?:\s+|=\s*)(\d+)\s*/\s*(\d+)\s*\|(.*)")
# training.py::training_log prints "elapsed time per iteration (ms): T"; condensed copies of it in issue
# threads shorten the label to "elapsed (ms): T" (Megatron-Bridge#5088); BigScience's Megatron-DeepSpeed prints
# seconds, "elapsed time per iteration (s): 106.46" (bigscience-workshop/bigscience tr11-176B chronicles)
_ELAPSED = re.compile(r"elapsed(?: time per iteration)?\s*(?:\((ms|s)\):\s*(\d*\.?\d+)|:\s*(\d*\.?\d+)\s*(ms)\b)"
                      r"|elapsed_time_per_iteration_(ms|s)=\s*(\d*\.?\d+)")
_TFLOPS = re.compile(r"(?:throughput per GPU \(TFLOP/s/GPU\)|TFLOPs? per GPU|TFLOP/s/GPU|tflops(?:_per_gpu)?)"
                     r"\s*[:=]\s*(\d*\.?\d+(?:e[+-]?\d+)?)", re.I)  # NeMo 2 may print "TFLOPS_per_GPU: 1.249e+03"
_GBS = re.compile(r"gl(?:oba|oab)l batch size:\s*(\d+)")  # (and Megatron-DeepSpeed forks' "gloabl batch size")
_LOSS_SCALE = re.compile(r"loss scale:\s*(\d+(?:\.\d*)?(?:E[+-]?\d+)?)", re.I)
# GPT-NeoX's iteration line: "approx flops per GPU: 33.1TFLOPS" (its human-readable prefix: G, T, P ...)
_NEOX_FLOPS = re.compile(r"approx flops per GPU:\s*(\d*\.?\d+)\s*([KMGTPE]?)FLOPS")
_FLOPS_PREFIX = {"": 1e-12, "K": 1e-9, "M": 1e-6, "G": 1e-3, "T": 1.0, "P": 1e3, "E": 1e6}  # -> TFLOP/s
# (Megatron-LM of 2020 printed PyTorch's old names, "cached" / "max cached", for reserved: NVIDIA/Megatron-LM#5)
_MEMORY = re.compile(r"(?:\[Rank (\d+)\]\s*)?\(?after (\d+) iterations\)? memory \(MB\)\s*\|\s*allocated:\s*(\d*\.?\d+)\s*\|"
                     r"\s*max allocated:\s*(\d*\.?\d+)\s*\|\s*(?:reserved|cached):\s*(\d*\.?\d+)\s*\|"
                     r"\s*max (?:reserved|cached):\s*(\d*\.?\d+)")
# DeepSpeed's engine prints its resolved config one key a line (deepspeed/runtime/config.py DeepSpeedConfig.print):
# "[2025-04-20 21:31:24,890] [INFO] [config.py:1003:print]   world_size ................... 8"; a long name has no
# dots ("train_micro_batch_size_per_gpu  4"). Its "world_size" is the data-parallel size when Megatron passes its mpu
# (DeepSpeedConfig.__init__: mpu.get_data_parallel_world_size()); it, the micro-batch and the accumulation steps are read
_DS_CONFIG_PRINT = re.compile(r"\[config\.py:\d+:print\]\s+(\w+)\s+(?:\.+\s*)?(\S+)\s*$")
_DS_CONFIG_KEYS = {"world_size": "data_parallel_size", "train_micro_batch_size_per_gpu": "micro_batch_size",
                   "gradient_accumulation_steps": "_grad_accum_steps"}
# DeepSpeed's ThroughputTimer line: "... CurrSamplesPerSec=61.35, MemAllocated=6.01GB, MaxMemAllocated=19.52GB"
# (deepspeed/utils/timer.py: memory_allocated() / 1024**3; argonne-lcf/Megatron-DeepSpeed ALCF/README.md)
_DS_TIMER_MEMORY = re.compile(r"\bMaxMemAllocated=(\d*\.?\d+)GB\b")
_THEORY = re.compile(r"Theoretical memory footprints: weight and optimizer=(\d*\.?\d+) MB"
                     r"(?:, activation=(\d*\.?\d+) MB, total=(\d*\.?\d+) MB)?")
# an Ascend NPU run (MindSpeed, verl's NPU recipes): its launcher's variables, torch_npu, HCCL, a device="npu"
_NPU_MARKER = re.compile(r"\bNPUS_PER_NODE\b|\btorch_npu\b|\bASCEND_[A-Z_]+|\bHCCL_[A-Z_]+|\bPYTORCH_NPU_ALLOC_CONF\b"
                         r"|\bdevice\s*=\s*['\"]?npu\b|\bNPU out of memory")
_DEEPEP_FRAME = re.compile(r"deep_ep/buffer\.py|DeepEP error:")
# a Hyena / StripedHyena model (Evo2, NeMo 2's gpt/model/hyena.py, BioNeMo's train_evo2 entry point): its long-convolution
# mixers are no layer kind megasolve costs, and runs.py refuses it by name (NVIDIA-BioNeMo/bionemo-recipes#814)
# a BERT run: Megatron's pretrain_bert.py, whose iteration lines add the sentence-order loss ("| lm loss: 9.59E+00 |
# sop loss: 6.55E-01 |", sfantao/lumi-megatron-lm-scripts from-pizdaint/README.md), or NeMo 2's model summary naming
# a BERT class (BioNeMo's "MegatronBioBertModel" and its "BertLMHead": NVIDIA/bionemo-framework's Geneformer tutorial)
_BERT_MARKER = re.compile(r"\bpretrain_bert\.py\b|\|\s*sop loss:|\bMegatron\w*BertMod\w*|\bBertLMHead\b")
_HYENA_MARKER = re.compile(r"\btrain_evo2\b|/gpt/model/hyena\.py|\bHyena(?:Model|Config\w*)\b|\bStripedHyena\b")
# torch_npu (Ascend) raises the same message with NPU for CUDA: "NPU out of memory. Tried to allocate 26.44 GiB
# (NPU 2; 60.96 GiB total capacity; ...)" (modelscope/ms-swift#9403); XPU and HPU builds likewise
_OOM = re.compile(r"(?:CUDA|NPU|XPU|HPU) out of memory\. Tried to allocate (\d*\.?\d+) ([GM]i?B)")
# (and a shortened "torch.OutOfMemoryError: Tried to allocate 12.60 GiB. GPU had 12.44 GiB free of 79.19", NVIDIA-NeMo/RL#2871)
# (PyTorch 2.1-2.2 misspell it: "GPU 0 has a total capacty of 79.33 GiB", fwyc0573/Megatron-LM's node0.log)
_OOM_CAPACITY = re.compile(r"total capac(?:it[yi]?|ty) of (\d*\.?\d+) GiB|(\d*\.?\d+) GiB total capacity"
                           r"|GiB free of (\d+\.\d+)(?: GiB)?\b")
# Megatron-SWIFT's iteration line adds "memory(GiB): X", torch.cuda.max_memory_reserved() / 2**30
# (modelscope/ms-swift#5194, swift/megatron/init.py training_log)
_SWIFT_MEMORY = re.compile(r"\|\s*memory\(GiB\):\s*(\d*\.?\d+)")
# ms-swift's trainers log a dict a logging step: "{'loss': 0.32, ..., 'iteration': '34/107', 'elapsed_time': '2h 12m 6s',
# ..., 'memory(GiB)': 75.71, 'train_speed(s/it)': 233.114145}" (Megatron-SWIFT, modelscope/ms-swift#8152), or ms-swift
# 3's "'train_speed(iter/s)': 0.010773, ..., 'global_step/max_steps': '22/94'" (#4146; later also
# 'train_speed(sec/iter)'). Every speed is a running average since training began, not the step's: Megatron-SWIFT
# writes elapsed / (iteration - start_step) (swift/megatron/trainers/base.py), ms-swift 3 global_step / elapsed
# (swift/trainers/mixin.py, callback.py); _swift_intervals turns them into the seconds between logged steps
_SWIFT_DICT_SPEED = re.compile(r"'train_speed\((s/it|iter/s|sec/iter)\)':\s*(\d+(?:\.\d+)?(?:e-?\d+)?)")
_SWIFT_DICT_ITERATION = re.compile(r"'(?:iteration|global_step/max_steps)':\s*'(\d+)/\d+'|'global_step':\s*(\d+)\b")
_SWIFT_DICT_ELAPSED = re.compile(r"'elapsed_time':\s*'((?:\d+[dhms]\s*)+)'")
_SWIFT_DICT_MEMORY = re.compile(r"'memory\(GiB\)':\s*(\d+(?:\.\d+)?)")
# NeMo 2 MegatronStrategy logs max_memory_reserved / max_memory_allocated in bytes with the step
# (nemo/lightning/pytorch/strategies/megatron_strategy.py L802-808)
_NEMO_MEMORY = re.compile(r"max_memory_(allocated|reserved)\s*[:=]\s*(\d*\.?\d+(?:e\+?\d+)?)")
# NeMo's megatron_init logs every parallel group: "All tensor model parallel group ranks: [[0, 1], [2, 3]]"
# (nemo/lightning/megatron_init.py L474-530; the NeMo 1 copy in nemo/collections/nlp/modules/common/megatron)
_NEMO_GROUPS = re.compile(r"All (tensor model|pipeline model|context|data) parallel group ranks"
                          r"( with context parallel combined)?: (\[\[[\d,\s\[\]]*\]\])")
_NEMO_GROUP_PARTS = {"tensor model": "tensor-model-parallel", "pipeline model": "pipeline-model-parallel",
                     "context": "context-parallel", "data": "data-parallel"}
_PADDED = re.compile(r"padded vocab \(size: (\d+)\) with \d+ dummy tokens \(new size: (\d+)\)")
# a printed parameter list (``for name, p in model.named_parameters(): print(name, p.shape)``, NVIDIA/Megatron-LM#845):
# the word embedding's rows are the padded vocabulary over the TP ranks (VocabParallelEmbedding)
_WORD_EMBEDDING_SHAPE = re.compile(r"word_embeddings\.weight\W+(?:torch\.Size\(\[|\[|\()(\d+),\s*(\d+)[\])]")
_NEMO_STEP = re.compile(r"train_step_timing(?: in s)?\s*[:=]\s*(\d*\.?\d+)")
_NEMO_GBS = re.compile(r"global_batch_size\s*[:=]\s*(\d+)")
_NEMO_CONSUMED = re.compile(r"consumed_samples\s*[:=]\s*(\d+(?:\.0+)?)\b")
_NEMO_ITER = re.compile(r"(?:global_step|iteration)\s*[:=]?\s*(\d+)")
# a progress bar's numbers in Lightning's short float form ("global_step=2e+3, consumed_samples=2.56e+5": 3 significant
# digits; nig-sc's NeMo-Megatron-Launcher LoRA guide), written out before they are read
_BAR_EXPONENT = re.compile(r"(?<==)(\d+(?:\.\d+)?e\+?\d+)\b")
# NeMo 2's step line without the timing callback: "Training epoch 0, iteration 0/9 | lr: 0.0006 | consumed_samples: 32 |
# global_batch_size: 32 | ..." (NVIDIA/NeMo#10128)
_NEMO_TRAIN_LINE = re.compile(r"Training epoch \d+, iteration \d+/\d+\s*\|")
# NeMo 1 / Lightning progress bar: "795/77225 [9:07:58<878:01:48, 41.36s/it, ..., global_step=794.0, ...]"
_TQDM = re.compile(r"\d+/\d+ \[[\d:]+<[\d:?]+,\s*(\d*\.?\d+)(s/it|it/s)")
# a bar of another phase than the training steps: an RL job's "Update weights: 98%|...| 112/114 [00:14<00:00, 15.93it/s]"
# (weight sync to the rollout engine, THUDM/slime#953), rollout generation, checkpoint loading, evaluation
_BAR_TFLOPS = re.compile(r"\bTFLOPS_per_gpu\s*=\s*(\d+(?:\.\d+)?)", re.I)
_NOT_TRAINING_BAR = re.compile(r"\b(?:update weights|weights? (?:sync|update)|rollout|generat\w*|load\w*|sav\w*|"
                               r"eval\w*|validat\w*|download\w*|tokeniz\w*|convert\w*|prefill|decod\w*|sampl\w*|"
                               r"infer\w*|preprocess\w*|map(?:ping)?|build\w*|fetch\w*)\b", re.I)  # "Fetching 1 files: 100%|...|" (hub)
# "key: value" / "key=value", optionally ending in a YAML comment ("num_query_groups: 16 # num_key_value_heads")
# Megatron-Bridge's configuration summary adds the Megatron-Core default to each non-default value:
# "  add_bias_linear: False  (Mcore default: True)" (training/config.py, "Non-default values (vs Mcore ...)";
# as posted in NVIDIA-NeMo/Megatron-Bridge#2974)
_CONFIG_PAIRS = re.compile(r"^\s*[A-Za-z_]\w*\s*[:=]\s*[\w.]+(?:,\s*[A-Za-z_]\w*\s*[:=]\s*[\w.]+)+\s*$")
# DLLogger's parameter record of a NeMo 1 model config, all on one line (AI-Hypercomputer/gpu-recipes' NeMo logs:
# "DLL 2025-06-23 18:01:47.719333 - PARAMETER cfg/override_vocab_size : 151936  cfg/num_layers : 48  ..."): the model
# config's own keys (cfg/<key>), not its nested sections (cfg/optim/..., cfg/data/...)
_DLL_PARAMETER = re.compile(r"\bDLL\b.* - PARAMETER .*\bcfg/\w+ : ")
_DLL_CFG_PAIR = re.compile(r"(?<![\w/])cfg/(\w+) : (\S+)")
# a Markdown list item: "- micro_batch_size=4, global_batch_size=512"; a NeMo 1 launcher's printed config, every line
# behind one "| " ("NeMo configuration file:" then "|   micro_batch_size: 2", AI-Hypercomputer's GKE recipes; a
# table's row has more bars)
_BULLET = re.compile(r"^\s*(?:[-*]|\|(?=[^|]*$))\s+")
_CONFIG_LINE = re.compile(r"^\s*\"?([A-Za-z_][\w-]*)\"?\s*[:=]\s*([^\s#,{}\[\]][^#]*?|\[[^\]]*\])\s*,?"
                          r"(?:\s+\((?:Mcore|Megatron[- ]Core) default: .*\))?\s*(?:\s#.*)?$")
_TYPED = re.compile(r"\s+\((?:int|float|bool|str|NoneType|list|tuple|dict)\)$")
_ANNOTATED = re.compile(r"^(?:int|float|bool|str|Optional\[\w+\]|\w+ \| None)\s*=\s*(.+)$")
# workstation, consumer and inference boards (topology/gpus.yaml): "NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000",
# "NVIDIA L20", "NVIDIA A10"; GeForce boards also bare where a counter or "GPU" says so, as Chinese posts write them
# ("4卡4090", "8张3090", "4090显卡"), not a bare number ("iteration 4090/ 10000 | ... per GPU")
_BOARD_NAMES_RE = (r"RTX[ -]?(?:4090|3090|2080[ -]?Ti|A6000)(?![A-Za-z0-9])"
                   r"|(?<=[卡张块])\s?(?:4090|3090)(?![\dA-Za-z.])|(?<![\d.])(?:4090|3090)(?=\s*(?:显卡|卡|GPUs?\b))"
                   r"|L40(?![\dA-Za-z])|L20(?![\dA-Za-z])|L4(?![\dA-Za-z])|A10(?![\dA-Za-z])|A30(?![\dA-Za-z])")
# every GPU a post may name (topology/gpus.yaml): the names a count ("8 L40S", "16x MI300X") and a device line both use
# of them, the parts no other word is spelled like: named without "GPU" too ("verified GB300 MXFP8 performance",
# Megatron-Bridge#5718; "16x8 H200 nodes", radixark/miles#968); a board name (A10, L4, L20) or a bare number needs
# "GPU" or a count
_DATACENTER_NAMES_RE = r"GH200|GB200|GB300|B200|B300|H200|H100|H800|A800|A100|MI250X|MI300X|MI325X|MI355X|L40S"
_GPU_NAMES_RE = "(?:" + _DATACENTER_NAMES_RE + r"|H20|A40(?!\d)|V100|" + _BOARD_NAMES_RE + ")"
# ("on 8xH800", THUDM/slime#1305; FlagPerf's "加速卡型号: NVIDIA_A800-SXM4-80GB")
_GPU_NAME = re.compile(r"(?:(?<![A-Za-z0-9_])|(?<=\d[xX×])|(?<=[xX×]\d)|(?<=[xX×]\d\d)|(?<=NVIDIA_))("  # "4x8H100"
                       + _GPU_NAMES_RE + r")"
                       r"((?:[- ](?:SXM\d?|PCIE|NVL|HBM3e?))*)[- ]?(?:\(?(\d+)\s?G(?:B|(?![A-Za-z]))\)?)?"  # "A100 (40GB)"
                       r"((?:[- ](?:SXM\d?|PCIE|NVL|HBM3e?)(?![A-Za-z0-9]))*)", re.I)  # "80GB", "80G";
# not "A100 40 GPUs"


# the memory of the one GPU a line names, written apart from its name: "16GB GPU memory", "80G显存"
_GPU_MEMORY_SIZE = re.compile(r"(?<![\d.])(\d{2,3})\s*G(?:i?B)?\s*(?:of\s+)?(?:GPU\s+memory|HBM\w*|显存)", re.I)
_DATACENTER_GPU = re.compile(_DATACENTER_NAMES_RE, re.I)
_DEVICE_LINE = re.compile(r"加速卡型号|机器型号|(?:GPU|accelerator)\s*(?:model|type)\s*[:：]", re.I)
DEVICE_LINE_WEIGHT = 3
_URL = re.compile(r"https?://\S+")
_COUNT_BEFORE = re.compile(r"(?<![\w.])\d+\s*[x×*]?\s*(?:NVIDIA\s+)?$")  # "64 GB200", "8xH100", "8 x NVIDIA H100"
_COUNT_AFTER = re.compile(r"\s*[x×*]\s*\d+\b|\s*\d+\s*[机卡]")  # "H100x8", "B200 x 64", "H1004机32卡" (FlagPerf)


def gpu_key(m: re.Match[str]) -> str:
    """A ``_GPU_NAME`` match as ``runs.log_gpu`` reads it: the chip, a PCIe or NVL board (a catalog GPU of its own: its
    peak, memory bandwidth and missing NVSwitch differ from the SXM part's), then the memory size.

    >>> [gpu_key(_GPU_NAME.search(t)) for t in ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "A100-PCIE-40GB",
    ...                                         "H100 NVL", "NVIDIA A100 80GB PCIe")]
    ['H100-80', 'H100-PCIE', 'A100-PCIE-40', 'H100-NVL', 'A100-PCIE-80']
    >>> [gpu_key(_GPU_NAME.search(t)) for t in ("NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000", "4卡4090",
    ...                                         "NVIDIA GeForce RTX 2080 Ti", "NVIDIA L20", "NVIDIA A10")]
    ['RTX4090', 'RTXA6000', 'RTX4090', 'RTX2080TI', 'L20', 'A10']
    >>> [_GPU_NAME.search(t) for t in ("iteration 4090/ 100000 | per GPU", "Qwen3.5-122B-A10B", "NVIDIA L20C")]
    [None, None, None]
    """
    board = (m.group(2) + m.group(4)).upper()
    form = "-PCIE" if "PCIE" in board else "-NVL" if "NVL" in board else ""
    chip = re.sub(r"[ -]", "", m.group(1).upper())
    return ("RTX" + chip if chip in ("4090", "3090") else chip) + form + (f"-{m.group(3)}" if m.group(3) else "")


_VERSION = re.compile(r"\b(megatron[-_ ]core|megatron[-_ ]bridge|nemo|transformer[-_ ]engine|torch|pytorch)"
                      r"(?: version)?\s*[:=]?\s*v?(\d+\.\d+(?:\.\d+)?(?:[.+\w-]*)?)", re.I)
_REPR_PAIR = re.compile(r"\b([a-z_][a-z0-9_]*)=([^,()\s]+)")
REPR_KEYS = {"bf16", "fp16", "use_distributed_optimizer", "fp8_param_gather", "overlap_grad_reduce",
             "grad_reduce_in_fp32"}
_RANK_PARAMS = re.compile(r"number of parameters on \(tensor, pipeline\) model parallel rank \((\d+), (\d+)\): (\d+)")
# Megatron-LM before pipeline parallelism (megatron/training.py at 73af129, L146): "... on model parallel rank R: N"
_RANK_PARAMS_OLD = re.compile(r"number of parameters on model parallel rank (\d+): (\d+)")
# a Python dict of TransformerConfig keyword arguments, as RL frameworks print it before building the model
# (verl#1467: "{'num_layers': 94, 'hidden_size': 4096, ..., 'tensor_model_parallel_size': 2, ...}"), or the same as
# one line of JSON (a wandb / args.json config: '{"num_layers": 94, ...}')
# verl's printed config (a pprint of its OmegaConf, keys sorted: the actor's ppo_mini_batch_size comes before the
# critic's, the rollout's n before its val_kwargs' and the sampling kwargs'): the actor's batch and the longest sequence,
# as its overrides give them (_VERL_BATCH_KEYS), read where the dump holds 'actor_rollout_ref' (verl-project/verl#1638)
_VERL_DUMP_KEYS = {"ppo_mini_batch_size": "_verl_ppo_mini_batch", "n": "_verl_rollout_n",
                   "max_prompt_length": "_verl_max_prompt", "max_response_length": "_verl_max_response",
                   "train_batch_size": "_verl_train_batch", "ppo_epochs": "_verl_ppo_epochs"}
# verl's metrics line a RL step: "step:4 - ... - timing_s/update_actor:34.207 - ..." (verl/trainer/ppo/ray_trainer.py:
# the actor's update over the step's batch, ppo_epochs x train_batch_size / ppo_mini_batch_size optimizer steps)
_VERL_UPDATE_ACTOR = re.compile(r"\bstep:(\d+) - .*?\btiming_s/update_actor:(\d+(?:\.\d+)?)")
_UNNUMBERED_STEP = 10**9  # the key of an RL step the text does not number
# ... or its metrics pasted one a line, without the step ("- timing_s/update_actor:16783.45", verl-project/verl#3727)
_VERL_UPDATE_ACTOR_ALONE = re.compile(r"^[\s\-*]*timing_s/update_actor:\s*(\d+(?:\.\d+)?)\s*$")
# and the step's mean prompt and response lengths, "response_length/mean:1306.096 ... prompt_length/mean:84.297"
_VERL_LENGTH = re.compile(r"\b(prompt|response)_length/mean:(\d+(?:\.\d+)?)")
_DICT_PAIR = re.compile(r"""(['"])([a-z_][a-z0-9_]*)\1:\s*('[^']*'|"[^"]*"|[^,{}<>]+?)\s*(?=[,}])""")
_DTYPE = re.compile(r"using torch\.(float32|float16|bfloat16) for parameters")
# Megatron-LM's micro-batch calculator (``megatron/microbatches.py`` L17 @23.04, ConstantNumMicroBatchesCalculator): the
# micro-batches a step accumulates, global batch / (micro batch x data-parallel size); Megatron-Core's calculator
# spells it "microbatches" (``megatron/core/num_microbatches_calculator.py``, as NeMo 2 logs it)
_CONSTANT_MICROBATCHES = re.compile(r"setting number of micro-?batches to constant (\d+)")
# Megatron-Bridge's per-step print: "Step Time : 12.78s GPU utilization: 528.1 TFLOP/s/GPU" (Megatron-Bridge#388),
# later "... 24.7MODEL_TFLOP/s/GPU" (bionemo-recipes#1357): seconds of the step, model TFLOP/s per GPU
_BRIDGE_STEP = re.compile(r"Step Time\s*:\s*(\d*\.?\d+)\s*s\b(?:.*?GPU utilization:\s*(\d*\.?\d+)\s*(?:MODEL_)?TFLOP)?")
# Megatron-Bridge / Megatron-LM report_memory in decimal GB (bytes / 1e9, training/utils/train_utils.py report_memory):
# "[Rank 0] (after 1 iterations) memory (GB) | mem-allocated-gigabytes: 13.367 | ... | mem-max-allocated-gigabytes: X"
_MEMORY_GB = re.compile(r"(?:\[Rank (\d+)\]\s*)?\(after \d+ iterations\) memory \(GB\)(.*)")
_MEMORY_GB_FIELD = re.compile(r"mem-(max-allocated|max-reserved|reserved)-gigabytes:\s*(\d*\.?\d+)")
# DeepSpeed's flops profiler summary (deepspeed/profiling/flops_profiler/profiler.py print_model_profile):
# "world size: 128", "data parallel size: 16", "model parallel size: 8", "batch size per GPU: 8"
_DS_PROFILE = re.compile(r"^(world size|data parallel size|model parallel size|batch size per GPU):\s+(\d+)\s*$")
# BigScience Megatron-DeepSpeed's parameter print (bigscience-workshop/Megatron-DeepSpeed#202):
# "[001-003] 13.2894B / 12.5869B" = [tensor rank-pipeline rank] billions with / without embeddings
_BIG_PARAMS = re.compile(r"^\[(\d{3})-(\d{3})\]\s+(\d*\.?\d+)B\s*/\s*[\d.]+B$")
# swiss-ai/Megatron-LM progress.txt (swiss-ai/Megatron-LM#46): "... # GPUs: 8 ... Job throughput: 364.8 TFLOP/s/GPU"
_PROGRESS_GPUS = re.compile(r"#\s*GPUs:\s*(\d+)")
# the number first, on a summary line: "Final-10: 12455.140 ms, 937.770 TFLOP/s/GPU, 42094.107 tokens/s/GPU"
# (NVIDIA-NeMo/Megatron-Bridge#5718)
# Megatron-LM's parameter report (training.py, report_theoretical_memory's neighbour): "Total number of parameters
# in billions: 6.44"
_TOTAL_PARAMS_B = re.compile(r"\bTotal number of parameters in billions:\s*(\d+(?:\.\d+)?)\b")
# ... and the theoretical-memory report's parameter counts (megatron/training/theoretical_memory_usage.py L180-285
# @d98e8a6, verbose): the transformer's ("layers", or "block" in older releases), the embeddings', and one rank's: the
# most loaded shard (its 1/pp of the layers plus the embedding, over TP) and, only with PP > 1, every other shard's
_SHARD_PARAMS_B = re.compile(r"\bNumber of parameters in (transformer layers|transformer block|embedding layers|"
                             r"most loaded shard|other shards) in billions:\s*(\d+(?:\.\d+)?)\b")
# an MPI launch, one rank a process: "mpirun --np 8 singularity exec --nv ./pytorch.sif bash train_gpt3_7b_mpi.sh"
# (fixstars/mdk's Megatron-LM guide), "mpirun -np 16", "mpiexec -n 4"
_MPIRUN_NP = re.compile(r"\b(?:mpirun|mpiexec)\b[^|;&]*?\s-{1,2}(?:np|n)\s*=?\s*(\d+)\b")
# a Markdown row of one snake_case key and its value, both maybe in backticks (Megatron-Bridge's verification cards,
# docs/model-verification: "| `last_10_steps_step_time_ms_avg` | `11636.35` |"), read as "key: value"
_KEY_VALUE_ROW = re.compile(r"^\s*\|\s*`?([a-z][a-z0-9_]*)`?\s*\|\s*`?(\d[\d,]*(?:\.\d+)?)`?\s*\|\s*$")
# ... and the card's rates: "last_10_steps_model_tflops_per_gpu_avg: 386.59",
# "last_10_steps_tokens_per_second_per_gpu_avg: 22528.026"
_CARD_RATES = re.compile(r"\b(?:last_\d+_steps_)?(model_tflops_per_gpu|tokens_per_second_per_gpu)(?:_avg)?\s*[:=]\s*"
                         r"(\d[\d,]*(?:\.\d+)?)")
_SUMMARY_TFLOPS = re.compile(r"\bFinal-\d+:.*?\b(\d[\d,]*\.?\d*)\s*TFLOP/s/GPU\b")
_PROGRESS_TFLOPS = re.compile(r"\bJob throughput:\s*(\d*\.?\d+)\s*TFLOP/s/GPU")
# slime's timers (slime/utils/timer.py): "Timer train end (elapsed: 3.4s)", one pass of the training loop
# (THUDM/slime#1450)
_SLIME_TRAIN = re.compile(r"\bTimer train end \(elapsed:\s*(\d*\.?\d+)\s*s\)")
# Megatron-DeepSpeed's iteration line adds the trained sequence length: "| actual seqlen:  2048 |"
# (microsoft/Megatron-DeepSpeed megatron/training.py training_log, curriculum learning)
_ACTUAL_SEQLEN = re.compile(r"\|\s*actual seqlen:\s*(\d+)")
# Megatron-DeepSpeed's iteration line: "consumed samples: 4 | consumed tokens: 512 |" -- their ratio is the sequence
# length (without curriculum learning, which shortens early samples: the ratio is then below the final length)
_CONSUMED = re.compile(r"consumed[ _]samples[:=]\s*(\d+)\s*\|\s*consumed[ _]tokens[:=]\s*(\d+)")
# Megatron-LM's "consumed samples: 51200" on every iteration line: with no "global batch size" field, the samples per
# iteration between two logged lines are the global batch (haok1402/megatron-deepseek-v2-lite README)
_CONSUMED_SAMPLES = re.compile(r"consumed[ _]samples[:=]\s*(\d+)\b")
_CONTAINER = re.compile(r"nvcr\.io/nvidia/(?:nemo|pytorch)[:/]([\w.-]+)")


def strip_prefix(line: str) -> str:
    """A log line without ANSI colours and the launcher's rank prefix.

    >>> strip_prefix("[node01:3]: iteration 5/ 10 |")
    'iteration 5/ 10 |'
    >>> strip_prefix("0:  [Rank 0] (after 10 iterations)")
    '[Rank 0] (after 10 iterations)'
    >>> strip_prefix("2025-01-01T10:00:00.123456789Z   tensor_model_parallel_size ...... 8")
    'tensor_model_parallel_size ...... 8'
    >>> strip_prefix("trainer-1  | 2025-01-01 10:00:00,123 - megatron - INFO - iteration 5/ 10 |")
    'iteration 5/ 10 |'
    >>> strip_prefix("[2025-01-01 10:00:00,123] [INFO] [megatron.training.utils] iteration 5/ 10 |")
    'iteration 5/ 10 |'
    >>> strip_prefix("[20251114 13:54:06][rank-0/16][DEBUG] [------arguments.py:1028] :   bf16 ...... True")
    'bf16 ...... True'
    """
    line = _ANSI.sub("", line)
    for _ in range(6):
        stripped = _COLLECTOR_PREFIX.sub("", _PREFIX.sub("", line, count=1), count=1)
        if stripped == line:
            break
        line = stripped
    return line.strip()


@dataclass(slots=True)
class LogFacts:
    """What one log says, before it becomes a ``Run``."""

    args: dict[str, Any] = field(default_factory=dict)
    world_size: int | None = None
    world_parts: dict[str, int] = field(default_factory=dict)
    iterations: list[tuple[int, float, float | None, int | None]] = field(default_factory=list)  # it, s, tflops, gbs
    nemo_steps: list[tuple[int | None, float]] = field(default_factory=list)
    # ms-swift's running-average speeds: (step or None, seconds per step, elapsed seconds logged, Megatron-SWIFT's)
    swift_speeds: list[tuple[int | None, float, float | None, bool]] = field(default_factory=list)
    memory: dict[int, tuple[float, float]] = field(default_factory=dict)  # rank -> (max alloc, max reserved) MiB
    theoretical_mb: float | None = None
    oom: bool = False
    oom_logged: bool = False  # the OOM is an error message, not only words ("OOM occurs")
    oom_capacity_gib: float | None = None
    padded_vocab: tuple[int, int] | None = None
    gpu_names: dict[str, int] = field(default_factory=dict)
    gpu_counted: dict[str, int] = field(default_factory=dict)  # of those, named beside a count ("64 GB200 nodes")
    consumed: dict[int, int] = field(default_factory=dict)  # iteration -> consumed samples, from iteration lines
    software: dict[str, str] = field(default_factory=dict)
    # "> number of parameters on (tensor, pipeline) model parallel rank (t, p): N" (training.py get_model)
    rank_params: dict[tuple[int, int], int] = field(default_factory=dict)
    reserved_only_mib: float | None = None  # a peak reserved figure with no allocated one (Megatron-SWIFT)
    model_names: dict[str, int] = field(default_factory=dict)  # preset -> lines naming it (recipe / config class)
    variant_notes: dict[str, str] = field(default_factory=dict)  # preset -> what a variant named adds, unmodelled
    seq_alternatives: tuple[int, ...] = ()  # sequence lengths the text names as alternatives ("16k or 32k context")
    reported_tflops: list[float] = field(default_factory=list)  # TFLOP/s/GPU printed outside iteration lines
    stated_step_s: float | None = None  # seconds per iteration a results table's first row or a summary states
    stated_tokens_per_gpu: float | None = None  # tokens/s per GPU a summary or a results table states (the first)
    dump_keys: set[str] = field(default_factory=set)  # argument names read from a Megatron argument dump
    whole_dump: bool = False  # the dump's start and end lines were both read
    ds_timer_memory: bool = False  # a peak read from DeepSpeed's timer line (no rank)
    throughput_formula: bool = False  # the text wrote "(sequence length) * (global batch size) / (step time)"
    loss_scaled: bool = False  # an iteration line's loss scale is not 1.0 (fp16's dynamic scaling)
    timing_table_unit: str | None = None  # "ms" / "s" under a parse_train_timing.sh summary header
    prose_sizes: dict[str, int] = field(default_factory=dict)  # sizes taken from compact prose ("TP2/PP1/EP16")
    prose_keys: set[str] = field(default_factory=set)  # arguments read from prose, which flags and variables replace
    later_rows: set[str] = field(default_factory=set)  # a results table's rows after its first: other runs' sizes
    title: str = ""  # a post's Markdown title ("# perf(qwen3-next): ... on GB300 ..."), as the line reader sees it
    title_gpus: set[str] = field(default_factory=set)  # the GPUs it names (``gpu_key``)
    run_gpu: str | None = None  # the GPU a results table's run column names ("| Metric | H200 (p5en) | B300 |")


_DIFF_START = re.compile(r"^\s*(?:```\s*diff\s*$|diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@)", re.M)
_DIFF_HEADER = re.compile(r"^(?:diff --git |index [0-9a-f]+\.\.|--- (?:a/|/dev/null)|\+\+\+ (?:b/|/dev/null)|@@ -\d)")


def _plain_diff_blocks(lines: list[str]) -> set[int]:
    """The opening fences of plain ```` ``` ```` blocks that hold a change: every line starts with ``+`` or ``-``,
    with at least one of each and no ``--flag`` line (EleutherAI/gpt-neox#903: "-   \"num-layers\": 96," then
    "+   \"num-layers\": 70,")."""
    out: set[int] = set()
    fenced, start = False, None  # inside a fence; where a bare one opened
    for i, line in enumerate(lines):
        if not line.strip().startswith("```"):
            continue
        if not fenced:
            fenced, start = True, (i if line.strip() == "```" else None)
            continue
        body = [x for x in lines[start + 1:i] if x.strip()] if start is not None else []
        if body and all(x[:1] in "+-" for x in body) and not any(x.startswith("--") for x in body) \
                and any(x.startswith("+") for x in body) and any(x.startswith("-") for x in body):
            out.add(start)
        fenced, start = False, None
    return out


def undiff(text: str) -> str:
    r"""A change as posted in a pull request or issue (a ```` ```diff ```` block, ``diff --git``, ``@@`` hunks)
    as the file reads after it: added lines without their ``+``, removed lines dropped, context lines as they are,
    of the headers only the file's path and the code a hunk header quotes. Text outside such a block is kept as it
    is, and so is text without one.

    >>> undiff("```diff\n+  num_layers: 12\n-  num_layers: 32\n   hidden_size: 768\n```\n- not a diff line")
    '  num_layers: 12\n   hidden_size: 768\n```\n- not a diff line'
    """
    if not _DIFF_START.search(text) and "```" not in text:  # no hunk and no fence: nothing to read as a diff
        return text
    lines = text.splitlines()
    plain = _plain_diff_blocks(lines)
    if not _DIFF_START.search(text) and "```diff" not in text and not plain:
        return text
    out, inside = [], False
    for i, line in enumerate(lines):
        if _DIFF_START.match(line) or i in plain:
            inside = True
            if line.strip().startswith("```"):
                continue
        elif inside and line.strip().startswith("```"):
            inside = False
        if inside:
            if _DIFF_HEADER.match(line):  # keep what names the file and the code around the hunk
                kept = line[6:] if line.startswith("+++ b/") else line.rsplit("@@", 1)[1].strip() \
                    if line.startswith("@@") else ""
                if kept:
                    out.append(kept)
                continue
            if line.startswith("+"):
                line = line[1:]
            elif line.startswith("-"):
                continue
        out.append(line)
    return "\n".join(out)


_RECORD_FIELD = re.compile(r"\s*(?:learning rate|global batch size|loss scale|lm loss|grad norm|number of (?:skipped|nan) "
                           r"iterations|consumed samples|throughput per GPU|elapsed time)\b")


def _joined_records(lines: Iterable[str]) -> Iterator[str]:
    """Lines, with an iteration record that a post wraps over several lines joined back:

    * at a field boundary ("iteration 5/50 | elapsed time per iteration: 21392.5 ms |" / "learning rate: ... |
      global batch size: 4096 |", Megatron-Bridge#5306): a line holding ``iteration N/M |`` that ends in ``|``
      takes the lines after it that start with a field of the record (``_RECORD_FIELD``), up to one that does
      not end in ``|``;
    * inside a field, as a terminal wraps at its width ("... (s): 105.16 | learning" / " rate: 4.475E-05 | ... |
      number of nan" / "iterations:  0 | ... | TFLOPs: 149.10 |", bigscience-workshop/bigscience tr11-176B
      chronicles): a record line that does not end in ``|`` takes up to ``_MAX_WRAPPED`` lines, none of them a
      record or a prefixed log line of its own, up to one that ends in ``|``; if none does, nothing is joined.

    >>> list(_joined_records(["iteration 5/50 | elapsed time per iteration: 21392.5 ms |", "global batch size: 8 |",
    ...                       "other"]))
    ['iteration 5/50 | elapsed time per iteration: 21392.5 ms | global batch size: 8 |', 'other']
    >>> list(_joined_records(["iteration 5/50 | elapsed time per iteration (ms): 3.5 | learning", " rate: 1E-4 |"]))
    ['iteration 5/50 | elapsed time per iteration (ms): 3.5 | learning rate: 1E-4 |']
    >>> list(_joined_records(["iteration 5/50 | elapsed time per iteration (ms): 3.5", "done", "next"]))
    ['iteration 5/50 | elapsed time per iteration (ms): 3.5', 'done', 'next']
    """
    record = None
    wrapped: list[str] = []
    for line in lines:
        if wrapped and _NEMO_TRAIN_LINE.search(wrapped[0]):
            if line.lstrip().startswith("|") and len(wrapped) <= _MAX_WRAPPED:
                wrapped.append(line)
                if "train_step_timing" in line:
                    yield " ".join(part.strip() for part in wrapped)
                    wrapped = []
                continue
            yield from wrapped
            wrapped = []
        elif wrapped:
            if _ITER.search(line) or _LOG_LINE_START.match(line) or len(wrapped) > _MAX_WRAPPED \
                    or (line.lstrip().startswith("|") and not _RECORD_FIELD.match(line.lstrip()[1:])):
                yield from wrapped  # not a wrapped record after all (a table row is no part of a record)
                wrapped = []
            else:
                wrapped.append(line)
                if line.rstrip().endswith("|"):
                    yield _rejoined(wrapped)
                    wrapped = []
                continue
        if record is not None:
            if _RECORD_FIELD.match(line):
                record += " " + line.strip()
                if record.rstrip().endswith("|"):
                    continue
                yield record
                record = None
                continue
            yield record
            record = None
        if _NEMO_TRAIN_LINE.search(line) and "train_step_timing" not in line:  # NeMo 2's step line wrapped before
            wrapped = [line]  # its "| ... | train_step_timing in s: ..." (vuiseng9/nemo-perf-nvfp4 README)
            continue
        if not line.lstrip().startswith("|") and _ITER.search(line):
            if line.rstrip().endswith("|"):
                record = line.rstrip()
                continue
            if not _ELAPSED_END.search(line):  # cut inside a field
                wrapped = [line]
                continue
        yield line
    if record is not None:
        yield record
    yield from wrapped


_MAX_WRAPPED = 3
# the words of an iteration record: a terminal's wrap inside one ("elapsed time per iterati" / "on (ms): 69179.8",
# NVIDIA-NeMo/Megatron-Bridge#682) is joined without a space, a wrap between two with one
_RECORD_WORDS = frozenset("iteration iterations elapsed learning consumed samples tokens global batch loss scale "
                          "grad norm number skipped throughput".split())


def _rejoined(pieces: list[str]) -> str:
    """A record's wrapped pieces as one line.

    >>> _rejoined(["iteration 1/ 25 | elapsed time per iterati", "on (ms): 69.8 | learning", "rate: 1E-4 |"])
    'iteration 1/ 25 | elapsed time per iteration (ms): 69.8 | learning rate: 1E-4 |'
    """
    out = pieces[0].rstrip()
    for piece in pieces[1:]:
        piece = piece.strip()
        left = re.search(r"[A-Za-z]+$", out)
        right = re.match(r"[A-Za-z]+", piece)
        glued = left and right and (left.group(0) + right.group(0)).lower() in _RECORD_WORDS \
            and left.group(0).lower() not in _RECORD_WORDS
        out += ("" if glued else " ") + piece
    return out
# a line that opens a log record of its own: a launcher's rank tag or a timestamp
_LOG_LINE_START = re.compile(r"\s*(?:\[[\w.:-]+\]:?|\d{4}-\d\d-\d\d|\d+:\s)")
# a record that ends right after its timing (a condensed quote, "... | elapsed time per iteration (ms): 3.5"): whole
_ELAPSED_END = re.compile(r"elapsed[^|]*\d\s*(?:ms)?\s*$")


def _without_dump_prefix(lines: list[str]) -> list[str]:
    """Lines without a prefix no known collector writes, found where the argument dump opens: what stands before
    ``---- arguments ----`` (a bare pod or host name, ``pytorchjob-worker-0``; stern's ``pod container``) is taken
    off every line that starts with it, its numbers any numbers (the other pods' lines: ``...-worker-1``).

    >>> _without_dump_prefix(["job-worker-0 ------ arguments ------", "job-worker-0   num_layers ..... 32",
    ...                       "job-worker-12 iteration 5/ 10 |", "other"])
    ['------ arguments ------', 'num_layers ..... 32', 'iteration 5/ 10 |', 'other']
    >>> _without_dump_prefix(["v100x16-1:   seq_length ..... 2048", "v100x16-1:   swiglu ..... True",
    ...                       "v100x16-2:   zero_stage ..... 1", "v100x16-1: iteration 5/ 10 |"])
    ['seq_length ..... 2048', 'swiglu ..... True', 'zero_stage ..... 1', 'iteration 5/ 10 |']
    """
    prefix = None
    for line in lines:
        if (m := _ARGS_START.search(line)) and "end of" not in line:
            prefix = line[:m.start()].rstrip()
            if not prefix or len(prefix) > 80 or not re.fullmatch(r"[\w.:/@-]+(?: [\w.:/@-]+)?", prefix):
                return lines
            break
    else:  # an excerpt cut inside the dump: the prefix its rows carry ("v100x16-1:   zero_stage ..... 1", pdsh's host
        # name before every line of a multi-node DeepSpeed launch), when three rows or more carry it
        rows = Counter(re.sub(r"\d+", "0", m.group(1)) for line in lines if (m := _PREFIXED_DUMP_ROW.match(line)))
        prefix = next((p for p, n in rows.most_common(1) if n >= 3), None)  # (its numbers any numbers, as below)
        if prefix is None:
            return lines
    pattern = re.compile(r"\d+".join(re.escape(part) for part in re.split(r"\d+", prefix)) + r"(?:\s+|$)")
    return [pattern.sub("", x, count=1) if pattern.match(x) else x for x in lines]


# a dump row behind a prefix no collector writes: "v100x16-1:   zero_stage ...... 1"
_PREFIXED_DUMP_ROW = re.compile(r"^([\w.:/@-]*[:\d][\w.:/@-]*)\s+[A-Za-z_]\w*\s\.{3,}\s?\S")


_BASELINE_LINE = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*)?(?:the\s+)?baseline\b", re.I)
_COMPARED_RUN = re.compile(r"\b(?:this PR|this change|improved|proposed|ours)\b", re.I)  # (anywhere in a line)
_OPENRLHF = re.compile(r"\bopenrlhf\b", re.I)
_COMPARED_WORDS = ("this pr", "this change", "improved", "proposed", "ours")  # each match starts with one, folded


def _ds_pipe_sizes(facts: LogFacts) -> None:
    """The pipeline and tensor-parallel sizes DeepSpeed's pipeline engine lines show (``_DS_PIPE_STAGE``): stages
    0..P-1 each printed by the same number T of ranks give PP = P and TP = T, read as prose is (what the arguments
    print wins); an excerpt that shows some stages only, or stages of different sizes, gives nothing.

    >>> f = LogFacts(args={"_ds_stage_ranks": {0: {0, 1}, 1: {4, 5}}}); _ds_pipe_sizes(f)
    >>> f.args["pipeline_model_parallel_size"], f.args["tensor_model_parallel_size"]
    (2, 2)
    """
    stages = facts.args.pop("_ds_stage_ranks", None)
    if not stages or set(stages) != set(range(len(stages))) or len({len(r) for r in stages.values()}) != 1:
        return
    _prose_set(facts, "pipeline_model_parallel_size", len(stages))
    _prose_set(facts, "tensor_model_parallel_size", len(stages[0]))


def _rank_grid_sizes(facts: LogFacts) -> None:
    """TP and PP from Megatron's "number of parameters on (tensor, pipeline) model parallel rank (t, p)" lines, which
    each data-parallel rank 0 prints (training.py get_model): a whole grid of T tensor by P pipeline ranks, larger than
    one rank, gives TP = T and PP = P, read as prose is (what the arguments print wins; a cut grid gives nothing).

    >>> f = LogFacts(rank_params={(t, p): 1 for t in range(4) for p in range(16)}); _rank_grid_sizes(f)
    >>> f.args["tensor_model_parallel_size"], f.args["pipeline_model_parallel_size"]
    (4, 16)
    """
    grid = set(facts.rank_params)
    if len(grid) < 2:
        return
    tp, pp = max(t for t, _ in grid) + 1, max(p for _, p in grid) + 1
    if grid == {(t, p) for t in range(tp) for p in range(pp)}:
        _prose_set(facts, "tensor_model_parallel_size", tp)
        _prose_set(facts, "pipeline_model_parallel_size", pp)


def _duration_s(text: str) -> float:
    """ms-swift's ``format_time``: '2h 12m 6s', '23d 14h 27m 6s' -> seconds."""
    unit = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return float(sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)([dhms])", text)))


def _swift_intervals(facts: LogFacts) -> None:
    """ms-swift's running-average speeds (``_SWIFT_DICT_SPEED``) as the seconds per step between logged steps, in the
    order logged (a step at or below the one before starts another run): the elapsed time at a step is the average
    times the steps it averages, ``(E_k - E_(k-1)) / (step_k - step_(k-1))``; the first logged step gives
    ``E_0 / n_0``, warm-up included (the reader leaves the first interval out). Megatron-SWIFT counts from the step it
    resumed at, which the logged elapsed time gives (``round(elapsed / average)`` steps, when that is clearly fewer
    than the step number); ms-swift 3 from 0. A speed with no step in its dict is the running average as it stands,
    in the order logged.

    >>> f = LogFacts(swift_speeds=[(1, 191.764682, 192.0, True), (5, 116.095699, 580.0, True),
    ...                            (10, 103.737077, 1037.0, True)])  # elapsed 3m 12s, 9m 40s, 17m 17s
    >>> _swift_intervals(f); [(step, round(s, 2)) for step, s, _, _ in f.iterations]
    [(1, 191.76), (5, 97.18), (10, 91.38)]
    """
    last: tuple[int, float] | None = None  # (step, elapsed) of the step logged before
    for step, average, elapsed, resumable in facts.swift_speeds:
        if step is None:
            facts.nemo_steps.append((None, average))
            continue
        counted = step  # steps the average spans: all of them, unless a resumed run's elapsed time says fewer
        if resumable and elapsed and step - elapsed / average > 1 / average + 0.5:  # (elapsed is logged to 1 s)
            counted = max(1, round(elapsed / average))
        at = counted * average
        if last is not None and step > last[0]:
            if at > last[1]:
                facts.iterations.append((step, (at - last[1]) / (step - last[0]), None, None))
        elif counted > 0:
            facts.iterations.append((step, at / counted, None, None))
        last = (step, at)


def _batch_from_consumed(facts: LogFacts) -> None:
    """Iteration lines without a global batch get the one their consumed samples imply: the same number of samples
    per iteration between every pair of logged lines (a batch ramp-up gives several, and then none is taken)."""
    if any(g for *_, g in facts.iterations) or len(facts.consumed) < 2:
        return
    its = sorted(facts.consumed)
    rates = {(facts.consumed[b] - facts.consumed[a]) / (b - a) for a, b in zip(its, its[1:])}
    if len(rates) == 1 and (rate := rates.pop()) > 0 and rate == int(rate):
        facts.iterations = [(i, s, t, int(rate)) for i, s, t, _ in facts.iterations]


_QUOTED_LINE = re.compile(r"^>[ \t]?")
_QUOTE_MARK = re.compile(r"^>\s*(?:```|~~~|$)")  # a quoted fence, or a quoted blank line


def unquote(text: str) -> str:
    r"""A reply's Markdown quote of an earlier post (every line behind ``> ``) as the post reads, where the quoted run
    of lines holds a code fence or a blank quoted line: verl-project/verl#2100 quotes a launch script, whose
    ``MBS=4`` was lost behind the marks. Megatron's own ``> building ...`` lines hold neither and stay as they are.

    >>> unquote("> ```\n> MBS=4\n> \n> python3 -m verl.trainer.main_ppo\n> ```\nthanks")
    '```\nMBS=4\n\npython3 -m verl.trainer.main_ppo\n```\nthanks'
    >>> unquote("> building GPT model ...\n> number of parameters on rank 0: 1")
    '> building GPT model ...\n> number of parameters on rank 0: 1'
    """
    if "\n>" not in "\n" + text:
        return text
    lines = text.split("\n")
    start = None
    for i in range(len(lines) + 1):
        quoted = i < len(lines) and lines[i].startswith(">")
        if quoted and start is None:
            start = i
        elif not quoted and start is not None:
            if any(_QUOTE_MARK.match(lines[j]) for j in range(start, i)):
                lines[start:i] = [_QUOTED_LINE.sub("", lines[j], count=1) for j in range(start, i)]
            start = None
    return "\n".join(lines)


# AMD Primus's loguru prefix, "[20251218 08:15:50][rank-7/8][INFO ]": the rank and the world size
_PRIMUS_RANK_OF = re.compile(r"\[rank-\d+/(\d+)\]")


def _unwrap_fixed_width(text: str) -> str:
    r"""A log a terminal, pager or mail client broke at a fixed width, its lines joined back. Where the longest line
    is ``W`` >= 60 characters long and at least three lines (and 5 % of the non-empty ones) are exactly ``W`` long,
    a line of width ``W`` is taken to continue on the next (joined without a space: the break falls anywhere, inside
    a word too), unless it ends a record (``|``: a Megatron iteration line, a table row) or the next line starts as
    it does (lines of one fixed format that happen to be the longest). The joined text is kept only where it holds
    more whole measurements -- iteration step times (``_ELAPSED``) and memory reports (``_MEMORY``) -- than the text
    as given: an argument dump padded to one width (GPT-NeoX's) or a table is left as it is.

    >>> record = (" iteration       10/     100 | consumed samples:          640 | elapsed time per iteration (ms): "
    ...           "1234.5 | learning rate: 1.0E-04 | global batch size:    64 | lm loss: 5.0E+00 |")
    >>> wrapped = "\n".join(record[i:i + 80] for i in range(0, len(record), 80))
    >>> _unwrap_fixed_width("\n".join([wrapped, wrapped.replace("10/", "20/")])).count("elapsed time per iteration")
    2
    >>> rows = "\n".join(["  name ........ " + "x" * 60] * 4)  # one width, nothing gained: kept as it is
    >>> _unwrap_fixed_width(rows) == rows
    True
    """
    lines = text.split("\n")
    lengths = Counter(len(line) for line in lines if line.strip())
    if not lengths:
        return text
    width = max(lengths)
    if width < 60 or lengths[width] < 3 or lengths[width] < 0.05 * sum(lengths.values()):
        return text
    out: list[str] = []
    for i, line in enumerate(lines):
        previous = lines[i - 1] if i else ""
        if out and len(previous) == width and not previous.rstrip().endswith("|") and line.strip() \
                and line[:12] != previous[:12]:
            out[-1] += line
        else:
            out.append(line)
    joined = "\n".join(out)

    def whole(t: str) -> int:
        return len(_ELAPSED.findall(t)) + len(_MEMORY.findall(t))

    return joined if whole(joined) > whole(text) else text


def parse_log(text: str) -> LogFacts:
    """Every fact the readers know how to find in a log, script or config dump (a posted diff read as the
    file after it, ``undiff``; a reply's quote of a post as the post, ``unquote``)."""
    if not text.isascii() and any(ch in text for ch in _SPACE_CHARS):
        text = text.translate(_SPACES)
    text = _one_cell_tables(undiff(unquote(_unwrap_fixed_width(_ANSI.sub("", text)))))  # (a coloured log's codes)
    text = _WRAPPED_SLASH_SIZES.sub(r"\1 ", text)  # "GBS/MBS" at a line's end, "8192/1" starting the next
    text = _join_wrapped_flags(text)
    facts = LogFacts()
    if "'actor_rollout_ref'" in text:  # verl's printed config (_VERL_DUMP_KEYS)
        facts.args["_verl_dump"] = True
    # the rank a launcher prefix names on NeMo's memory lines (which name none): slurm's "0: ", torchrun's "[rank0]:"
    ranks = {int(m.group(1) or m.group(2)) for raw in text.splitlines() if "max_memory_allocated" in raw
             and (m := _PREFIX_RANK.match(raw))}
    if len(ranks) == 1:
        facts.args["_memory_line_rank"] = ranks.pop()
    worlds = {int(m.group(1)) for m in _PRIMUS_RANK_OF.finditer(text)}
    if len(worlds) == 1:  # AMD Primus's logger names each line's rank of the world: "[rank-7/8]" (stripped below)
        facts.args["_prefix_world_size"] = worlds.pop()
    facts.later_rows = _later_table_rows(text)
    first = next((line for line in text.splitlines() if line.strip()), "")
    facts.title = strip_prefix(first) if re.match(r"\s*#\s", first) else ""
    in_args = elided = False
    call = ""  # a dataclass constructor written over several lines: TransformerConfig(\n num_layers=32, ...\n)
    # a post comparing its run with a baseline ("- Baseline (MBS 4, SEQLEN 4096, TP 2): ~8000 Tokens/Sec/GPU" above
    # "- Improved (This PR, MBS 1, ...)", swiss-ai/Megatron-LM#33): the baseline's prose is read last, so the run the
    # post is about sets the facts it states
    deferred: list[str] = []
    compares = _starts_a_match(_COMPARED_RUN, text, _COMPARED_WORDS)
    for line in _joined_records(_without_dump_prefix([strip_prefix(raw) for raw in text.splitlines()])):
        if not line:
            continue
        if compares and _BASELINE_LINE.match(line) and not in_args:
            deferred.append(line)
            continue
        if call or ("Config(" in line and line.count("(") > line.count(")") and line.rstrip().endswith(("(", ","))):
            call += " " + line
            if call.count("(") > call.count(")") and len(call) < 20000:
                continue
            line, call = call.strip(), ""
        if _ARGS_START.search(line) and "end of" not in line:
            in_args = True
            continue
        if _ARGS_END.search(line):
            if in_args and not elided:  # the whole dump, start to end: an argument it lacks did not exist then
                facts.whole_dump = True
            in_args = False
            continue
        if in_args and line.strip() in ("...", "…", "[...]"):  # an excerpt's cut inside the dump: not all of it
            elided = True
        m = _ARG_LINE.match(line)
        if m and (in_args or not m.group(2).startswith(":")):  # excerpts may start inside the dump
            facts.args.setdefault(m.group(1), scalar(_unglued(_NEOX_SUFFIX.sub("", m.group(2)))))
            facts.dump_keys.add(m.group(1))
            continue
        if in_args and (m := _ARG_LINE_NO_DOTS.match(line)):
            facts.args.setdefault(m.group(1), scalar(m.group(2)))
            facts.dump_keys.add(m.group(1))
            continue
        _parse_line(line, facts)  # a dump cut off without its end line still lets the rest through
    if call:  # the excerpt ends inside the constructor call
        _parse_line(call.strip(), facts)
    for line in deferred:
        _parse_line(line, facts)
    for config in _EMBEDDED_CONFIG.finditer(text):
        # GPT-NeoX prints the config files it read as one dump value, their text with escaped newlines
        # ("config_files .... {'410M.yml': '{\n  \"num-layers\": 24,\n ...'}"): their lines count too,
        # after the dump's own values (which win)
        for sub in config.group(1).replace("\\n", "\n").replace('\\"', '"').splitlines():
            if sub.strip():
                _parse_line(sub.strip(), facts)
    _script_args(text, facts)
    _sbatch_args(text, facts)
    _rocm_model_size(text, facts)
    _tables(text, facts)
    _metric_summary(text, facts)
    _wandb_summary(facts)
    if _SWIFT_ARGS_JSON.search(text) and (m := re.search(r'"max_length"\s*:\s*(\d+)', text)):
        facts.args.setdefault("max_length", int(m.group(1)))  # ms-swift's args.json (modelscope/ms-swift#8314)
        facts.args.setdefault("_launcher", "megatron-swift")
    _batch_from_consumed(facts)
    _swift_intervals(facts)
    _ds_pipe_sizes(facts)
    _rank_grid_sizes(facts)
    if (rates := facts.args.pop("_iter_tgs", None)) and not facts.stated_tokens_per_gpu:
        facts.stated_tokens_per_gpu = statistics.median(rates)
    # a DeepSpeed config pasted as JSON: '"zero_optimization": {"stage": 2}', '"fp16": {"enabled": true}'
    # (deepspeedai/DeepSpeed#477)
    if m := re.search(r'"zero_optimization"\s*:\s*\{[^{}]*?"stage"\s*:\s*(\d)', text):
        facts.args.setdefault("zero_stage", int(m.group(1)))
    for dtype in ("fp16", "bf16"):
        if re.search(rf'"{dtype}"\s*:\s*\{{[^{{}}]*?"enabled"\s*:\s*true', text, re.I):
            facts.args.setdefault(dtype, True)
    if _OPENRLHF.search(text):  # OpenRLHF's trainers (DeepSpeed): their bars count micro-batches
        facts.args["_openrlhf"] = True
    if facts.oom and not facts.args.get("_checkpoint_oom") and (m := _SAVE_OOM_SENTENCE.search(text)):
        facts.args["_checkpoint_oom"] = m.group(0).strip()[:120]  # said in a sentence of its own (NVIDIA-NeMo/Skills#26)
    if facts.oom and facts.args.get("_checkpoint_oom") and (not facts.oom_logged or "save_checkpoint" in text):
        facts.oom = False  # the run trained; it ran out of memory saving a checkpoint (not a step's peak; runs.py)
        for key in ("_prose_oom_if", "_prose_oom_always"):
            facts.args.pop(key, None)
    if facts.oom and not facts.oom_logged and _HOST_OOM.search(_RAY_DEATH_CAUSES.sub(" ", text)):  # the host's OOM
        facts.oom = False
        facts.args["_host_oom"] = facts.args.pop("_prose_oom", "host memory")
        for key in ("_prose_oom_if", "_prose_oom_always"):
            facts.args.pop(key, None)
    if facts.ds_timer_memory and any(rank >= 0 for rank in facts.memory):  # Megatron's own report names the rank
        facts.memory.pop(UNKNOWN_RANK, None)  # that DeepSpeed's timer line (rank 0's) repeats
    if facts.whole_dump:  # the Megatron that ran had no such argument: a script's variable for it
        for key in _LATER_SIZES - facts.dump_keys:  # ("+ PP_SIZE=16" in a set -x trace) set nothing
            facts.args.pop(key, None)
    return facts


# Another process's output glued to a dump value, when several ranks write one stream: DeepSpeed's op report
# ("ffn_hidden_size .... 18944stochastic_transformer", "finetune .... False.", "fp16 .... False[NO]";
# stark-sim/megatron-deepspeed-lock-clock's dual-node pilot logs)
_GLUED_NUMBER = re.compile(r"(?!0[xX])(\d+)[A-Za-z_][A-Za-z_0-9]{3,}")
_GLUED_CONSTANT = re.compile(r"(True|False|None)(?:\.+|\[(?:NO|OKAY|YES)\])")


def _unglued(value: str) -> str:
    """A dump value without the text of another process glued to its end: a number followed by a word, or
    ``True`` / ``False`` / ``None`` followed by dots or an op report's ``[NO]`` / ``[OKAY]``.

    >>> _unglued("18944stochastic_transformer"), _unglued("False[NO]"), _unglued("None......."), _unglued("1e-05")
    ('18944', 'False', 'None', '1e-05')
    """
    if m := _GLUED_NUMBER.fullmatch(value) or _GLUED_CONSTANT.fullmatch(value):
        return m.group(1)
    return value


_CELL_LINE = re.compile(r"^\s*[^|]*[^|\s][^|]*\|\s*$")  # "LLAMA3-8B |": one cell and its closing pipe


def _one_cell_tables(text: str) -> str:
    r"""A Markdown table copied from a rendered page, one cell a line (NeMo's performance summary as stored:
    "Model |", "#-GPUs |", ..., "---|---|...|", then each row's cells, a line each), written back as rows: the
    ``n`` lines above a separator of ``n`` columns are the header, the lines below it rows of ``n``.

    >>> print(_one_cell_tables("Model |\nGPUs |\n---|---|\nLLAMA3-8B |\n8 |\nLLAMA3-70B |\n64 |\nnotes"))
    | Model | GPUs |
    |---|---|
    | LLAMA3-8B | 8 |
    | LLAMA3-70B | 64 |
    notes
    """
    if "|\n" not in text:
        return text
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        n = line.strip().strip("|").count("|") + 1 if _TABLE_SEPARATOR.match(line) else 0
        head = lines[i - n:i] if n >= 2 and i >= n else []
        if head and all(_CELL_LINE.match(h) for h in head) and out[-n:] == head:
            rows, k = [], i + 1
            while k + n <= len(lines) and all(_CELL_LINE.match(c) for c in lines[k:k + n]):
                rows.append(lines[k:k + n])
                k += n
            if rows:
                cells = lambda group: "| " + " | ".join(c.strip().rstrip("|").strip() for c in group) + " |"  # noqa: E731
                out[-n:] = [cells(head), "|" + "---|" * n]
                out += [cells(row) for row in rows]
                i = k
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


# parallel sizes an old Megatron-LM lacked (v1.x: only --model-parallel-size; bigscience-workshop/bigscience
# meg_ds_zero_gpt2_perf_n16 runs DeepSpeedExamples' Megatron-LM v1.1.5)
_LATER_SIZES = {"pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size", "context_parallel_size",
                "expert_model_parallel_size", "expert_tensor_parallel_size"}


# an out-of-memory of the host, not of a GPU: "Pre-Training 20TB Dataset out-of-memory (CPU memory)" (data loader
# workers, NVIDIA/NeMo#11784), "CPU OOM", "host memory OOM", "OOM-killed" (the kernel's OOM killer)
_HOST_OOM = re.compile(r"\bout[- ]of[- ]memory\s*\(\s*(?:CPU|host|system)\b|\b(?:CPU|host|system)[- ](?:memory[- ])?(?:OOM|"
                       r"out[- ]of[- ]memory)\b|\bOOM[- ]kill(?:ed|er)\b|\boom_kill\b"
                       # the kernel's OOM killer ends a process with SIGKILL: "crashed due to OOM (i.e. exit code 9)"
                       # (NVIDIA/Megatron-LM#2401, host memory growing to ~940 GB)
                       r"|\bOOM\b[^\n]{0,24}\bexit\s*code[:\s]*-?9\b", re.I)
# Ray's memory monitor: "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory"
# Ray's list of what may have killed a worker names the OOM killer whatever happened ("There are some potential root
# causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop --force ...",
# verl-project/verl#3987): no evidence of a host OOM
_RAY_DEATH_CAUSES = re.compile(r"\(1\) The process is killed by SIGKILL by OOM killer due to high memory usage\.")
# NeMo 1's MegatronDistributedFusedAdam prints its settings, "process_group: 0x7fd084b16db0, world size 8": the
# data-parallel group (nemo/core/optim/distributed_adam.py: parallel_state.get_data_parallel_group(), with context
# parallelism since NeMo 1.23) -- with TP and PP, the GPU count (runs.py _world)
_DIST_ADAM_GROUP = re.compile(r"^\s*(\w*)process_group: 0x[0-9a-f]+, world size (\d+)\s*$")
# DeepSpeed's config print: "[config.py:684:__init__] Config mesh_device None world_size = 3072" (the data-parallel
# size under Megatron's mpu, as _DS_CONFIG_KEYS reads its config block; argonne-lcf/Megatron-DeepSpeed ALCF notes)
_DS_MESH_WORLD = re.compile(r"\bConfig mesh_device \S+ world_size = (\d+)\b")
# NCCL's communicator setup, "NCCL INFO comm 0x7f72... rank 5 nranks 8 cudaDev 5 ... - Init COMPLETE": the largest
# communicator is the world's (runs.py _world, where nothing else counts the GPUs)
_NCCL_INIT = re.compile(r"\bNCCL INFO comm 0x[0-9a-f]+ rank \d+ nranks (\d+)\b.*\bInit COMPLETE")
# a job's settings printed as "NAME: value", upper case (FASOP's job info: "NNODES: 8", "WORLD_SIZE: 32",
# "TENSOR_MP_SIZE: 1", "NUM_LAYERS: 48"): a script's variables
_UPPER_KEY_COLON = re.compile(r"^\s*([A-Z][A-Z0-9_]+):\s+(\d+)\s*$")
# FASOP's job info also prints its own uneven pipeline split, "PARTITION: 0-11-8-8-8-8-5-0" (AvatarHwang/FASOP
# Megatron-LM-2/readme.md): read to be named in a run note (runs.py UNMODELLED_ARGS), not costed
_FASOP_PARTITION = re.compile(r"^\s*PARTITION:\s+(\d+(?:-\d+)+)\s*$")
# Megatron-Core's whole-step CUDA graph capturing ("INFO:megatron.core.full_cuda_graph:Capture CUDA graph for
# training!!!", megatron/core/full_cuda_graph.py, --cuda-graph-impl full_iteration; together-dgxc-benchmarking B300)
_FULL_CUDA_GRAPH_CAPTURE = re.compile(r"\bfull_cuda_graph\b.*\bCapture CUDA graph for training\b")
# Weights & Biases' run summary at the end of a NeMo run ("wandb:     train_step_timing in s 0.02442", "wandb:
# consumed_samples 64000000.0", "wandb: global_step 1999999.0"; nig-sc's BioNeMo guide): the last logged values (the
# run history above them is drawn as sparklines, no numbers)
_WANDB_SUMMARY = re.compile(r"^wandb:\s+(train_step_timing in s|consumed_samples|global_step|loss_scale)\s+"
                            r"(\d+(?:\.\d+)?)\s*$")
# an encoder-decoder run (Megatron's pretrain_t5.py, NeMo's T5 / BART models, BioNeMo's MegaMolBART): costed as a GPT
# decoder of the printed shape, with a note (runs.py)
_ENC_DEC_MARKER = re.compile(r"\bpretrain_t5\.py\b|\bMegaMolBART\b|\benc_dec_model\b|\bMegatron(?:T5|BART)Model\b")
# NeMo 1's PEFT run names in its checkpoints and results ("megatron_llama_peft_tuning-lora--validation_loss=...",
# "megatron_gpt_peft_ptuning_tuning"; nig-sc's NeMo PEFT guides): the scheme that trained
_NEMO_PEFT_NAME = re.compile(r"\bmegatron_\w*?peft_(?:tuning-)?(lora|ptuning|adapter|ia3)(?:_tuning)?\b", re.I)
# DeepSpeed-MoE's layer constructor, rank 0 once a MoE layer: "[Rank 0] Creating MoE layer with num_experts: 64 |
# num_local_experts: 16 | expert_parallel_size: 4" (deepspeed/moe/layer.py; Megatron-DeepSpeed's MoE examples)
_DS_MOE_LAYER = re.compile(r"\bCreating MoE layer with num_experts: (\d+) \| num_local_experts: \d+ \| "
                           r"expert_parallel_size: (\d+)")
# Megatron's evaluation print, "validation loss at iteration 3 | lm loss value: ...": where the interval timer is not
# stopped for it (Megatron-DeepSpeed), the next logged iteration's time holds the evaluation (runs.py _step_time)
_VALIDATION_AT = re.compile(r"\bvalidation loss at iteration (\d+)\b")
# DeepSpeed's activation checkpointing reports itself on its first checkpointed forward ("[checkpointing.py:529:forward]
# Activation Checkpointing Information", deepspeed/runtime/activation_checkpointing/checkpointing.py): Megatron-
# DeepSpeed's --checkpoint-activations ran (an OLCF Frontier GPT-3 175B log, sajal-vt/Megatron-DeepSpeed-ORNL)
_DS_ACTIVATION_CHECKPOINTING = re.compile(r"\bActivation Checkpointing Information\b")
# DeepSpeed's pipeline engine: "RANK=6 STAGE=1 LAYERS=3 [5, 8) STAGE_PARAMS=...", printed by each data-parallel rank 0
# (deepspeed/runtime/pipe/engine.py: the ranks of one data-parallel replica): the stages are the pipeline, one
# stage's ranks its tensor-parallel group (_ds_pipe_sizes)
_DS_PIPE_STAGE = re.compile(r"\bRANK=(\d+) STAGE=(\d+) LAYERS=\d+ \[")
# Megatron-DeepSpeed's (and ModelLink's) iteration field "tokens per gpu per second (tgs): 2069.506": tokens a second
# over the world size (training.py training_log), which with the step, batch and sequence gives the GPU count
_ITER_TGS = re.compile(r"\btokens per gpu per second \(tgs\):\s*(\d+(?:\.\d+)?)")
_RAY_HOST_OOM = re.compile(r"ray\.exceptions\.OutOfMemoryError|node running low on memory", re.I)
# "slurmstepd: error: Detected 1 oom_kill event in StepId=17109804.0. Some of the step tasks have been OOM Killed."
# (saforem2/vault Pipeline-Parallelism-Scaling-Perlmutter.md; srun then says "task 2: Out Of Memory")
_SLURM_OOM_KILL = re.compile(r"slurmstepd: error: Detected \d+ oom[_-]kill event")
_EMBEDDED_CONFIG = re.compile(r"config_files\s*\.*\s*(\{.*\\n.*)$", re.M)


# the arguments printed as a Python repr, "Args= Namespace(num_layers=12, ..., num_experts=[2], ..., world_size=12, ...)"
# (a Megatron-DeepSpeed fork's log on Summit, sajal-vt/Megatron-DeepSpeed-Summit logs/gpt3-megatron.3329131.o)
_NAMESPACE = re.compile(r"\bNamespace\((?=\w+=)")
_NAMESPACE_PAIR = re.compile(r"(?:^|,\s)(\w+)=('(?:[^'\\]|\\.)*'|\[[^\[\]]*\]|[^,()\[\]{}]+?)(?=,\s\w+=|\)|$)")


def _namespace_args(text: str) -> dict[str, Any]:
    """The ``key=value`` pairs of an ``argparse.Namespace`` repr: literals as Python reads them (a list, such as
    Megatron-DeepSpeed's ``num_experts=[2]``, as its text, which the dump reader also gets); a value that is no literal
    (``<function ...>``, ``torch.bfloat16``) as its text, a pair cut off by an interleaved line left out.

    >>> _namespace_args("num_layers=12, num_experts=[2], bf16=False, lr=0.0001, optimizer='adam', x=None, world_size=12)")
    {'num_layers': 12, 'num_experts': '[2]', 'bf16': False, 'lr': 0.0001, 'optimizer': 'adam', 'x': None, 'world_size': 12}
    """
    out: dict[str, Any] = {}
    for m in _NAMESPACE_PAIR.finditer(text):
        raw = m.group(2).strip()
        if raw.startswith("["):
            out[m.group(1)] = raw
            continue
        try:
            out[m.group(1)] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[m.group(1)] = raw
    return out


# DLLogger's JSON lines ("DLLL {"timestamp": ..., "step": "PARAMETER", "data": {"cfg/num_layers": 96, ...}}", a step's
# "data": {"global_step": 8.0, ..., "train_step_timing in s": 25.8}; AI-Hypercomputer/gpu-recipes
# src/utils/training_metrics/examples/dllogger.json): read as the text form DLLogger prints to stdout
_DLLL_JSON = re.compile(r"^\s*DLLL\s+(\{.*\})\s*$")


def _dllogger_text(record: str) -> str | None:
    """A DLLogger JSON record as its stdout line ("DLL <time> - PARAMETER cfg/num_layers : 96  ...", "DLL <time> -
    8 global_step : 8.0  train_step_timing in s : 25.8"), or None.

    >>> _dllogger_text('{"datetime": "t", "step": 3, "data": {"global_step": 3.0, "train_step_timing in s": 25.9}}')
    'DLL t - 3 global_step : 3.0  train_step_timing in s : 25.9'
    >>> _dllogger_text('{"datetime": "t", "step": "PARAMETER", "data": {"cfg/fp8": true, "cfg/kv_channels": null}}')
    'DLL t - PARAMETER cfg/fp8 : True  cfg/kv_channels : None'
    """
    try:
        data = json.loads(record)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        return None
    pairs = "  ".join(f"{key} : {value}" for key, value in data["data"].items() if not isinstance(value, (dict, list)))
    return f"DLL {data.get('datetime', '')} - {data.get('step', '')} {pairs}"


def _parse_line(line: str, facts: LogFacts) -> None:
    if m := _WANDB_SUMMARY.match(line):
        facts.args.setdefault("_wandb_" + m.group(1).split()[0], float(m.group(2)))
        return
    if (m := _ENC_DEC_MARKER.search(line)) and "_enc_dec" not in facts.args:
        facts.args["_enc_dec"] = m.group(0)
    if m := _NEMO_PEFT_NAME.search(line):  # (a checkpoint name glued to a progress bar's line, too)
        facts.args.setdefault("train_type", m.group(1).lower())
    if m := _VERL_UPDATE_ACTOR_ALONE.match(line):  # one RL step's, numbered in the order the text gives them
        updates = facts.args.setdefault("_verl_update_actor", {})
        updates[_UNNUMBERED_STEP + len(updates)] = float(m.group(1))  # after any numbered ones
        return
    if m := _VERL_UPDATE_ACTOR.search(line):
        facts.args.setdefault("_verl_update_actor", {}).setdefault(int(m.group(1)), float(m.group(2)))
        lengths = dict(_VERL_LENGTH.findall(line))
        if {"prompt", "response"} <= set(lengths):
            facts.args.setdefault("_verl_mean_lengths", []).append(float(lengths["prompt"]) + float(lengths["response"]))
    if (m := _DLLL_JSON.match(line)) and (text := _dllogger_text(m.group(1))):
        _parse_line(text, facts)
        return
    if (m := _NAMESPACE.search(line)) and "tensor_model_parallel_size=" in line:  # Megatron's whole argument list
        for key, value in _namespace_args(line[m.end():]).items():
            facts.args.setdefault(key, value)
            facts.dump_keys.add(key)
        return
    if m := _TOTAL_PARAMS_B.search(line):  # Megatron-LM's report of the model it built
        facts.args.setdefault("_printed_params_b", float(m.group(1)))
        return
    if m := _SHARD_PARAMS_B.search(line):  # runs.py _sizes_from_shard_report
        part = {"transformer layers": "transformer", "transformer block": "transformer", "embedding layers": "embedding",
                "most loaded shard": "most", "other shards": "other"}[m.group(1)]
        facts.args.setdefault("_shard_params_b", {}).setdefault(part, float(m.group(2)))
        # (no return: an iteration record may follow on the same line, "... in billions:  6.98 [2025-09-17 22:26:24]
        # iteration        1/      25 | ...", Megatron-Bridge#643)
    if m := _MPIRUN_NP.search(line):  # Open MPI / MPICH start one rank a process: "mpirun --np 8 ... train.sh"
        facts.args.setdefault("_mpirun_np", int(m.group(1)))
    if m := _KEY_VALUE_ROW.match(line):  # "| `last_10_steps_step_time_ms_avg` | `11636.35` |": a key and its value
        line = f"{m.group(1)}: {m.group(2)}"
    if m := _CARD_RATES.search(line):
        if m.group(1) == "model_tflops_per_gpu":
            facts.reported_tflops.append(float(m.group(2).replace(",", "")))
        elif facts.stated_tokens_per_gpu is None:
            facts.stated_tokens_per_gpu = float(m.group(2).replace(",", ""))
        return
    if m := _SLIME_TRAIN.search(line):
        facts.nemo_steps.append((None, float(m.group(1))))
        return
    if m := _DS_STEP.match(line):
        facts.nemo_steps.append((int(m.group(1)), float(m.group(2))))
        return
    if m := _NEMO_PERF_NAME.search(line) or _LLMB_NAME.search(line):
        count = "num_nodes" if m.re is _NEMO_PERF_NAME.raw else "_prose_num_gpus"
        for key, value in zip(("precision", count, "tensor_model_parallel_size", "pipeline_model_parallel_size",
                               "context_parallel_size", "virtual_pipeline_model_parallel_size",
                               "expert_model_parallel_size", "expert_tensor_parallel_size", "micro_batch_size",
                               "global_batch_size"), _name_fields(m)):
            if value is not None and value != "None" and key not in facts.args:
                facts.args[key] = scalar(value)
                facts.prose_keys.add(key)  # a name: the run's own flags and logged batch replace it
    if _NEMO_DIST_OPTIM.match(line):  # NeMo's optim.name: Megatron-Core's distributed optimizer (or Apex's, sharded too)
        facts.args.setdefault("use_distributed_optimizer", True)
        return
    if m := _MLLOG.search(line):  # MLPerf's logger: one JSON record a line (its values name the model too)
        _mllog_record(m.group(1), facts)
        line = _MLLOG_PLATFORM_COUNT.sub(r"\1", line)  # the platform's node count is read: no "640x GB200" GPUs
    if m := _INITIALIZED_SIZE.search(line):  # the sizes Megatron set up (the dump, printed before, agrees)
        facts.args.setdefault(f"{m.group(1)}_model_parallel_size", int(m.group(2)))
        return
    if m := _DGXC_GPUS_NAME.search(line):
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)))
    if m := _SKY_RESOURCES.search(line):
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)) * int(m.group(2)))
    if m := _TIMING_TABLE_HEAD.match(line):
        facts.timing_table_unit = m.group(1)
        return
    if facts.timing_table_unit and (m := _TIMING_TABLE_ROW.match(line)):
        if facts.stated_step_s is None:  # the first experiment's mean (its iterations already past the warm-up)
            facts.stated_step_s = float(m.group(1)) / (1e3 if facts.timing_table_unit == "ms" else 1.0)
            if m.group(2) != "-":  # (a LoRA run's table prints no FLOPs)
                facts.reported_tflops.append(float(m.group(2)))
    if m := _VERL_MEMORY.search(line):
        r = _VERL_RANK.search(line)
        _peak_memory(facts, int(r.group(1)) if r else UNKNOWN_RANK, float(m.group(1)) * 1024, float(m.group(2)) * 1024)
        return
    if perf := dict(_VERL_PERF_MEMORY.findall(line)):
        if "allocated" in perf:
            _peak_memory(facts, UNKNOWN_RANK, float(perf["allocated"]) * 1024, float(perf.get("reserved", 0.0)) * 1024)
        return
    if (m := _WORLD_ERROR.search(line)) or (m := _NEOX_GPUS.search(line)) or (m := _PRIMUS_ENV.search(line)):
        facts.world_size = facts.world_size or int(m.group(1))
        return
    if (m := _DS_TOPOLOGY.search(line)) and m.group(1).rstrip().endswith("}"):  # a cut dict: the sizes unknown
        coords = _DS_COORD.findall(m.group(1))
        sizes: dict[str, int] = {}
        for axes, _rank in coords:
            for axis, value in re.findall(r"(\w+)=(\d+)", axes):
                sizes[axis] = max(sizes.get(axis, 0), int(value) + 1)
        facts.world_size = facts.world_size or len(coords)
        for axis, size in sizes.items():
            facts.world_parts.setdefault(_DS_AXES.get(axis, axis), size)
        return
    if m := _WORLD.search(line):
        facts.world_size = int(m.group(1))
        for name, value in _WORLD_PART.findall(m.group(2)):
            facts.world_parts[_world_part_name(name)] = int(value)
        return
    if (m := _HIP_TOTAL.search(line)) and (part := _HIP_PARTS.get(round(float(m.group(1))))) \
            and not facts.args.get("_hip_part"):  # (once: every iteration line repeats it)
        facts.args["_hip_part"] = part
        facts.gpu_names[part] = facts.gpu_names.get(part, 0) + 1
    if (m := _ITER.search(line)) and (e := _ELAPSED.search(m.group(3))):
        t = _TFLOPS.search(m.group(3)) or _NEOX_FLOPS.search(m.group(3))
        g = _GBS.search(m.group(3))
        seconds = float(e.group(2) or e.group(3) or e.group(6)) / (1.0 if "s" in (e.group(1), e.group(5)) else 1e3)
        prefix = t.group(2) if t is not None and t.re is _NEOX_FLOPS.raw else "T"
        tflops = float(t.group(1)) * _FLOPS_PREFIX.get(prefix, 1.0) if t else None
        facts.iterations.append((int(m.group(1)), seconds, tflops, int(g.group(1)) if g else None))
        if (ls := _LOSS_SCALE.search(m.group(3))) and float(ls.group(1)) != 1.0:
            facts.loss_scaled = True  # a dynamic loss scale: fp16 (bf16 prints 1.0)
        if r := _SWIFT_MEMORY.search(m.group(3)):
            facts.reserved_only_mib = max(facts.reserved_only_mib or 0.0, float(r.group(1)) * 1024)
        if q := _ACTUAL_SEQLEN.search(m.group(3)):
            facts.args.setdefault("seq_length", int(q.group(1)))
        if q := _ITER_TGS.search(m.group(3)):
            facts.args.setdefault("_iter_tgs", []).append(float(q.group(1)))
        if (c := _CONSUMED.search(m.group(3))) and int(c.group(1)) and int(c.group(2)) % int(c.group(1)) == 0:
            facts.args.setdefault("seq_length", int(c.group(2)) // int(c.group(1)))
        if c := _CONSUMED_SAMPLES.search(m.group(3)):
            facts.consumed[int(m.group(1))] = int(c.group(1))
        return
    if speeds := [m for m in _SWIFT_DICT_SPEED.finditer(line) if float(m.group(2)) > 0]:
        for m in speeds:  # each in its own dict: a wrapped line holds the end of one and the next ones
            start, end = line.rfind("{", 0, m.start()) + 1, line.find("}", m.end())
            record = line[start:end if end >= 0 else len(line)]
            value = float(m.group(2))
            seconds = 1.0 / value if m.group(1) == "iter/s" else value
            step = _SWIFT_DICT_ITERATION.search(record)
            elapsed = _SWIFT_DICT_ELAPSED.search(record)
            facts.swift_speeds.append((int(step.group(1) or step.group(2)) if step else None, seconds,
                                       _duration_s(elapsed.group(1)) if elapsed else None, m.group(1) == "s/it"))
            if r := _SWIFT_DICT_MEMORY.search(record):  # ms-swift's get_max_cuda_memory: the reserved peak
                facts.reserved_only_mib = max(facts.reserved_only_mib or 0.0, float(r.group(1)) * 1024)
        return
    if m := _BRIDGE_STEP.search(line):
        facts.nemo_steps.append((None, float(m.group(1))))
        if m.group(2):
            if m.group(2) != "-":  # (a LoRA run's table prints no FLOPs)
                facts.reported_tflops.append(float(m.group(2)))
        return
    if m := _MEMORY_GB.search(line):
        gb = {kind: float(value) for kind, value in _MEMORY_GB_FIELD.findall(m.group(2))}
        if "max-allocated" in gb:  # decimal GB -> MiB; a cut line may lack the peak reserved: the current one bounds it
            rank = int(m.group(1)) if m.group(1) is not None else UNKNOWN_RANK
            reserved = gb.get("max-reserved", gb.get("reserved", 0.0))
            _peak_memory(facts, rank, gb["max-allocated"] * 1e9 / 2**20, reserved * 1e9 / 2**20)
        return
    if m := _DS_PROFILE.match(line):
        kind, value = m.group(1), int(m.group(2))
        if kind == "world size":
            facts.world_size = value
        elif kind == "batch size per GPU":
            facts.args.setdefault("micro_batch_size", value)
        else:  # DeepSpeed's mp_size: Megatron's model (tensor) parallel size
            facts.world_parts[kind.replace(" size", "").replace(" ", "-")] = value
        return
    if m := _BIG_PARAMS.match(line):
        facts.rank_params[(int(m.group(1)), int(m.group(2)))] = round(float(m.group(3)) * 1e9)
        return
    if (m := _PROGRESS_GPUS.search(line)) and "Job ID" in line:
        facts.world_size = int(m.group(1))
        if t := _PROGRESS_TFLOPS.search(line):
            facts.reported_tflops.append(float(t.group(1)))
        return
    if m := _NEMO_STEP.search(line):
        line = _BAR_EXPONENT.sub(lambda e: f"{float(e.group(1)):.0f}", line)  # "global_step=2e+3" -> 2000
        it = _NEMO_ITER.search(line)
        step = int(it.group(1)) if it else None
        if step is not None and any(seen == step for seen, _ in facts.nemo_steps):
            return  # the progress bar redrawn for a step already logged ("2/20 [..., global_step=0.000, ...]" after
            # step 0's own line, AI-Hypercomputer/gpu-recipes' NeMo logs): one step, once
        facts.nemo_steps.append((step, float(m.group(1))))
        if t := _TFLOPS.search(line):  # NeMo 2's FLOPs callback: "... | TFLOPS_per_GPU: 865.7 | ..."
            facts.reported_tflops.append(float(t.group(1)))
        if g := _NEMO_GBS.search(line):  # NeMo 2: "... | global_batch_size: 16 | ... | train_step_timing in s: 2.6"
            if "global_batch_size" in facts.prose_keys:  # the batch the run logs, not the one its name or text asked
                facts.prose_keys.discard("global_batch_size")  # for (NVIDIA-NeMo/NeMo#14857: 512gbs, ran 256)
                facts.args["global_batch_size"] = int(g.group(1))
            facts.args.setdefault("global_batch_size", int(g.group(1)))
        elif it and (c := _NEMO_CONSUMED.search(line)) and float(c.group(1)) % (int(it.group(1)) + 1) == 0:
            # NeMo 1's bar prints no batch: "global_step=49.00, consumed_samples=51200.0" is 50 steps of 1024 (a
            # batch ramp-up divides unevenly and is left alone; NGC DGX Cloud benchmarking recipes)
            facts.args.setdefault("global_batch_size", round(float(c.group(1))) // (int(it.group(1)) + 1))
        elif it and (c := _NEMO_CONSUMED.search(line)) and (done := int(it.group(1))) > 0 \
                and float(c.group(1)) % done == 0 \
                and round(float(c.group(1))) // done % facts.args.get("_grad_accum_steps", 1) == 0:
            # ... or the samples before the step it logs ("13/20 [...] global_step=12.00, consumed_samples=24576.0":
            # 12 steps of 2048, 128 micro-batches each; saltysoup/a3-bootcamp-ce's fine-tuning README)
            facts.args.setdefault("global_batch_size", round(float(c.group(1))) // done)
        mem = {kind: float(value) / 2**20 for kind, value in _NEMO_MEMORY.findall(line)}
        if "allocated" in mem:  # the logging rank is not named (unless a launcher prefix does): the peak stage
            _peak_memory(facts, facts.args.get("_memory_line_rank", UNKNOWN_RANK), mem["allocated"],
                         mem.get("reserved", 0.0))
        return
    if _NEMO_TRAIN_LINE.search(line) and (g := _NEMO_GBS.search(line)):  # a step line without its timing field
        facts.args.setdefault("global_batch_size", int(g.group(1)))
        return
    if (m := _TQDM.search(line)) and not _NOT_TRAINING_BAR.search(line[:m.start()]):  # tqdm's rate: a running average
        it = _NEMO_ITER.search(line)
        value = float(m.group(1))
        facts.nemo_steps.append((int(it.group(1)) if it else None, value if m.group(2) == "s/it" else 1 / value))
        facts.args["_tqdm_rate"] = True
        if t := _BAR_TFLOPS.search(line):  # NeMo's FLOPs callback in the bar's fields: "..., TFLOPS_per_gpu=249.0, ..."
            facts.reported_tflops.append(float(t.group(1)))  # (EleutherAI/NeMo#2)
        return
    if m := _DS_TIMER_MEMORY.search(line):  # DeepSpeed's step timer: this rank's peak allocated, GiB (no reserved)
        _peak_memory(facts, UNKNOWN_RANK, float(m.group(1)) * 1024, 0.0)
        facts.ds_timer_memory = True
        return
    if found := list(_MEMORY.finditer(line)):  # several ranks' reports written into one line (unflushed prints)
        for m in found:
            rank = int(m.group(1)) if m.group(1) is not None else UNKNOWN_RANK  # GPT-NeoX / old Megatron: no rank
            _peak_memory(facts, rank, float(m.group(4)), float(m.group(6)))
        return
    if m := _NEMO_GROUPS.search(line):
        groups = [g for g in re.findall(r"\[([\d,\s]*)\]", m.group(3))]
        sizes = [len([r for r in g.split(",") if r.strip()]) for g in groups]
        if sizes and sizes[0]:
            if not m.group(2):  # the DP x CP groups ("with context parallel combined") are not the DP size
                facts.world_parts[_NEMO_GROUP_PARTS[m.group(1)]] = sizes[0]
            facts.world_size = max(facts.world_size or 0, sum(sizes))  # each kind of group covers every rank
        return
    if m := _THEORY.search(line):
        facts.theoretical_mb = float(m.group(3) or m.group(1))
        facts.args.setdefault("_theory_weight_optimizer_mb", float(m.group(1)))  # its bytes a parameter (runs.py)
        return
    # NCCL's own allocation failure is an OOM too: "NCCL WARN Cuda failure 2 'out of memory'" (CUDA error 2,
    # cudaErrorMemoryAllocation; NVIDIA-NeMo/Megatron-Bridge#771)
    # and the driver API's: "[torch_memory_saver.cpp] CUresult error: 2 (out of memory)" (THUDM/slime#274)
    if _FULL_CUDA_GRAPH_CAPTURE.search(line):
        facts.args.setdefault("cuda_graph_impl", "full_iteration")
        return
    if m := _DS_MOE_LAYER.search(line):
        facts.args.setdefault("_ds_moe_experts", int(m.group(1)))
        facts.args.setdefault("_ds_moe_ep", int(m.group(2)))
        facts.args["_ds_moe_layers"] = facts.args.get("_ds_moe_layers", 0) + 1
        return
    if m := _VALIDATION_AT.search(line):
        facts.args.setdefault("_eval_after", []).append(int(m.group(1)))
        return
    if _DS_ACTIVATION_CHECKPOINTING.search(line):
        facts.args["_ds_activation_checkpointing"] = True
        return
    if m := _DS_PIPE_STAGE.search(line):
        facts.args.setdefault("_ds_stage_ranks", {}).setdefault(int(m.group(2)), set()).add(int(m.group(1)))
        return
    if m := _DS_MESH_WORLD.search(line):
        facts.args.setdefault("data_parallel_size", int(m.group(1)))
        return
    if m := _NCCL_INIT.search(line):
        facts.args["_nccl_nranks"] = max(facts.args.get("_nccl_nranks", 0), int(m.group(1)))
        return
    if m := _FASOP_PARTITION.match(line):
        facts.args.setdefault("_fasop_partition", m.group(1))
        return
    if m := _UPPER_KEY_COLON.match(line):
        name, value = m.group(1), m.group(2)
        if name in ("WORLD_SIZE", "NNODES"):
            _prose_set(facts, "_prose_num_gpus" if name == "WORLD_SIZE" else "_prose_nodes", int(value))
        elif found := _script_var_arg(name, value):
            _prose_set(facts, *found)
        return
    if m := _DIST_ADAM_GROUP.match(line):  # (its distributed_ / redundant_ subgroups: no size of the run's)
        if not m.group(1):
            facts.args.setdefault("_dist_adam_dp", int(m.group(2)))
        return
    if _RAY_HOST_OOM.search(line):  # Ray's memory monitor killed a task: the node's RAM, not a GPU's (slime#1851)
        facts.args.setdefault("_host_oom", line.strip()[:100])
    elif _SLURM_OOM_KILL.search(line):  # slurm's cgroup OOM killer: the job step's host memory (a Perlmutter run, 1 step)
        facts.args.setdefault("_host_oom", line.strip()[:100])
    elif _OOM.search(line) or re.search(r"(?:CUDA|NPU|XPU|HPU) out of memory|OutOfMemoryError|Cuda failure 2 'out of "
                                        r"memory'|cudaErrorMemoryAllocation|CUresult error: 2 \(out of memory\)"
                                        # the CUDA runtime's own: "RuntimeError: CUDA error: out of memory"
                                        r"|CUDA error: out of memory", line, re.I):
        facts.oom = facts.oom_logged = True  # the message cut before "Tried to allocate", or quoted in the post
    if re.search(r"out of memory|OutOfMemoryError", line, re.I) and (c := _OOM_CAPACITY.search(line)):
        facts.oom_capacity_gib = float(c.group(1) or c.group(2) or c.group(3))
    if found := list(_RANK_PARAMS.finditer(line)):
        for m in found:
            facts.rank_params[(int(m.group(1)), int(m.group(2)))] = int(m.group(3))
        return
    if m := _RANK_PARAMS_OLD.search(line):  # no pipeline parallelism then: every rank is stage 0
        facts.rank_params[(int(m.group(1)), 0)] = int(m.group(2))
        return
    if m := _DTYPE.search(line):
        facts.args.setdefault("_params_dtype", m.group(1))
        return
    if m := _CONSTANT_MICROBATCHES.search(line):
        facts.args.setdefault("_grad_accum_steps", int(m.group(1)))
        return
    if (m := _DS_CONFIG_PRINT.search(line)) and m.group(2).isdigit():  # DeepSpeed's config, as its engine prints it
        if (key := _DS_CONFIG_KEYS.get(m.group(1))) and int(m.group(2)) > 0:
            facts.args.setdefault(key, int(m.group(2)))
        elif m.group(1) == "zero_optimization_stage":  # the ZeRO stage the engine runs (runs.py: over --zero-stage)
            facts.args.setdefault("_ds_zero_stage", int(m.group(2)))
        return
    if m := _PADDED.search(line):
        facts.padded_vocab = (int(m.group(1)), int(m.group(2)))
        return
    if m := _WORD_EMBEDDING_SHAPE.search(line):
        facts.args.setdefault("_embedding_shape", (int(m.group(1)), int(m.group(2))))
        return
    if (m := _NPU_MARKER.search(line)) and "_npu" not in facts.args:
        facts.args["_npu"] = m.group(0)
    if (m := _HYENA_MARKER.search(line)) and "_hyena" not in facts.args:
        facts.args["_hyena"] = m.group(0)
    if (m := _BERT_MARKER.search(line)) and "_bert" not in facts.args:
        facts.args["_bert"] = m.group(0).strip("| ")
    if _DEEPEP_FRAME.search(line):  # DeepEP's own frames or errors: the flex dispatcher ran (Megatron-Bridge#1335)
        facts.args.setdefault("_deepep_seen", True)
    _prose_sizes(line, facts)
    named_line = _URL.sub(" ", line)  # a link's words are not the run's: ".../language-modeling-using-megatron-a100-gpu/"
    if _ONLY_ON_GPUS.search(named_line):  # a feature's GPU list, not the run's: "DeepEP is only applicable to Ampere,
        named_line = ""  # Hopper, and Blackwell (only B200 and B300) GPUs. Skipping ..." (Megatron-Bridge's warnings)
    for m in _GPU_NAME.finditer(named_line):
        if re.search(r"NVIDIA|Tesla|Instinct|GPU|device|gpu|显卡|\d\s*卡|(?<![A-Za-z])env\s*:", named_line) \
                or _GPU_COUNT.search(named_line) \
                or _CN_GPU_COUNT.search(named_line) or _GPU_GRID.search(named_line) \
                or _DATACENTER_GPU.fullmatch(m.group(1)):
            key = gpu_key(m)
            if not m.group(3) and len({x.group(1).upper() for x in _GPU_NAME.finditer(named_line)}) == 1 \
                    and (size := _GPU_MEMORY_SIZE.search(named_line)):
                key += f"-{size.group(1)}"  # "V100 GPU, 16GB GPU memory" (NVIDIA/Megatron-LM#144): the 16 GB part
            # a line that states the device ("加速卡型号: NVIDIA_A800-SXM4-80GB", "机器型号: NVIDIA DGX A800(80G)", "GPU
            # model: ...") outweighs labels elsewhere ("A100单机8卡" in FlagPerf's tables, copied from the A100 README)
            weight = DEVICE_LINE_WEIGHT if _DEVICE_LINE.search(named_line) else 1
            if facts.title and line == facts.title:  # a post's title names what it is about (runs.py _gpu)
                facts.title_gpus.add(gpu_key(m))
            facts.gpu_names[key] = facts.gpu_names.get(key, 0) + weight
            # a name with its count ("64 GB200 nodes / 256 GPUs", "8xH100"): what breaks a tie between names
            if _COUNT_BEFORE.search(named_line[max(0, m.start() - 16):m.start()]) \
                    or _COUNT_AFTER.match(named_line[m.end():m.end() + 12]):
                facts.gpu_counted[key] = facts.gpu_counted.get(key, 0) + 1
    for pattern, part in _SYSTEM_GPUS:  # a system, machine type or build target that names its GPU
        if pattern.search(named_line):
            facts.gpu_names[part] = facts.gpu_names.get(part, 0) + 1
    for m in _VERSION.finditer(line):
        facts.software.setdefault(m.group(1).lower().replace("_", "-").replace(" ", "-"), m.group(2))
    named = _preset_names_in(line)
    for pattern, preset, text in UNMODELLED_VARIANTS:
        if pattern.search(line):
            facts.variant_notes.setdefault(preset, text)
    for pattern, preset in MODEL_NAMES:
        if m := pattern.search(line):
            named[preset] = min(named.get(preset, m.start()), m.start())
    if _COMMENTED_FLAG.match(line):  # "#--hf-checkpoint /root/Qwen3-4B-FP8" under the one in use (THUDM/slime#537)
        named = {}
    for preset in sorted(named, key=named.__getitem__):  # in the order the line names them
        facts.model_names[preset] = facts.model_names.get(preset, 0) + 1
    if m := _CONTAINER.search(line):
        facts.software.setdefault("container", m.group(1))
    if _DLL_PARAMETER.search(line):  # NeMo's config as DLLogger prints it: "PARAMETER cfg/num_layers : 48  cfg/..."
        for key, value in _DLL_CFG_PAIR.findall(line):
            if key in CONFIG_KEYS:
                facts.args.setdefault(key, scalar(value))
        for key, value in re.findall(r"\bcfg/tokenizer/(type|model|vocab_file) : (\S+)", line):  # NeMo 1's tokenizer
            if value != "None":
                facts.args.setdefault({"type": "tokenizer_type", "model": "tokenizer_model"}.get(key, key), value)
        if (m := re.search(r"\bcfg/optim/name : (\w+)", line)) and m.group(1) in _NEMO_OPTIMIZER_SHARDED:
            facts.args.setdefault("use_distributed_optimizer", _NEMO_OPTIMIZER_SHARDED[m.group(1)])
        return
    if "{'" in line or re.match(r"'[a-z_][a-z0-9_]*':", line) \
            or ('{"' in line and len(_DICT_PAIR.findall(line)) > 1):  # a printed dict or JSON, or one line of a pprint
        for _, key, value in _DICT_PAIR.findall(line):
            if key in CONFIG_KEYS or key in REPR_KEYS:
                facts.args.setdefault(key, scalar(value.strip().strip("'\"")))
            elif key in _VERL_DUMP_KEYS and facts.args.get("_verl_dump") and value.strip().isdigit():
                facts.args.setdefault(_VERL_DUMP_KEYS[key], int(value))
        return
    if "Config(" in line:  # NeMo 2 / Bridge print dataclass reprs: OptimizerConfig(..., bf16=True, ...)
        for key, value in _REPR_PAIR.findall(line):
            if key in CONFIG_KEYS or key in REPR_KEYS:
                facts.args.setdefault(key, scalar(value.strip("'\"")))
        # Megatron-Core's dataset builder: "config=GPTDatasetConfig(random_seed=1234, sequence_length=1024, ...)", the
        # sequence trained (blended_megatron_dataset_builder.py; hwang2006/large-scale-lm-tutorials)
        if m := re.search(r"\bGPTDatasetConfig\([^()]*?\bsequence_length=(\d+)", line):
            facts.args.setdefault("seq_length", int(m.group(1)))
        return
    # several settings on one line, "actor_tp: 2, actor_pp: 1, dp: 4" (a posted summary, verl-project/verl#7203)
    item = _BULLET.sub("", line)
    parts = [item] if not _CONFIG_PAIRS.match(item) else [p.strip() for p in item.split(",")]
    for part in parts:
        if m := _CONFIG_LINE.match(part):
            key = m.group(1).replace("-", "_")  # GPT-NeoX configs spell keys with hyphens: "num-layers": 24,
            if key in CONFIG_KEYS:
                value = m.group(2).strip()
                if t := _ANNOTATED.match(value):  # a dataclass field as written: "num_layers: int = 8"
                    value = t.group(1)
                value = _TYPED.sub("", value)  # AMD Primus's dump: "micro_batch_size   : 14 (int)"
                if "$" in value:  # a shell or OmegaConf reference, "num_layers=${num_layers:-94}": the launch
                    continue  # script reader expands it (Victarry/PyTorch-Memory-Profiler's qwen3_235b.sh)
                facts.args.setdefault(key, scalar(value.strip("'\"")))


# Sizes written as prose in issue and pull-request text (a setup summary rather than flags):
# "Tensor Parallelism (TP): 4" (THUDM/slime#1740), "TP1/PP1/CP1/EP8/ETP1", "MBS1, GBS1024", "sequence length 4096",
# "2 nodes, 16 H100s" / "8xB200" (NVIDIA-NeMo/Megatron-Bridge#5098). Flags and config keys, read elsewhere, win.
_PROSE_PARALLEL = re.compile(r"\b(?:tensor|pipeline|context|expert|virtual pipeline)[\w -]*?parallel(?:ism| size)?\s*"
                             r"\((TP|PP|CP|EP|VPP|ETP)\)\s*[:=]\s*(\d+)\b", re.I)
# "4-way tensor parallel and 8-way pipeline parallelism" (zai-org/GLM-130B#6), "8-way expert-parallel"
# a named model cut to N layers, "DeepSeek-V3 (4 layers + MTP, ...)" (AMD Primus's MoE blog), "Qwen3-30B-A3B with
# only 2 layers"
_CUT_MODEL = re.compile(r"\b(?:DeepSeek|Qwen|Llama|Mixtral|GPT|Kimi|GLM|Nemotron|Mistral)[\w.-]*\s*(?:\(\s*|with only\s+)"
                        r"(\d+)\s+(?:decoder\s+|transformer\s+)?layers?\b", re.I)
_PROSE_WAY = re.compile(r"\b(\d+)-way\s+(tensor|pipeline|context|expert|data)[ -](?:model[ -])?parallel(?:ism)?\b", re.I)
_WAY_ARGS = {"tensor": "tensor_model_parallel_size", "pipeline": "pipeline_model_parallel_size",
             "context": "context_parallel_size", "expert": "expert_model_parallel_size",
             "data": "_prose_data_parallel_size"}
# a rate stated in prose: "approximately 135 TFLOPS / GPU" (zai-org/GLM-130B#6), "approximately 996 calibrated
# TFLOP/s/GPU versus 967 for the MCore-direct reference" (NVIDIA-NeMo/Megatron-Bridge#4808): the first one stated
# (also "~35 TF/GPU", deepspeedai/DeepSpeed#1776; "413 tflops pre sec per gpu", swiss-ai/Megatron-LM#29)
_STATED_TFLOPS = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(?:calibrated\s+|model\s+|achieved\s+)?(?:TFLOPS?|TF)"
                            r"(?:\s*/\s*s|\s+(?:pre|per)\s+sec(?:ond)?)?\s*(?:/|per)\s*GPU\b", re.I)
# a throughput per GPU in tokens: "~**8290** Tokens/Sec/GPU (85 GB)" (swiss-ai/Megatron-LM#33), "1,234 tokens/s/GPU"
_STATED_TOKENS = re.compile(r"(?<![A-Za-z0-9_.])(\d[\d,]*(?:\.\d+)?)\**\s*tokens?\s*/\s*(?:s(?:ec)?\s*/\s*GPU\b|GPU\s*/\s*s(?:ec)?\b)",
                            re.I)  # "1845 tokens / gpu / s" (alibaba/Megatron-LLaMA#49)
# ... labelled, the value after: "tokens/GPU/s: 12786.891099" (ROCm Megatron-LM's examples/llama/train_llama2.sh summary)
_STATED_TOKENS_LABEL = re.compile(
    r"\btokens?\s*/\s*(?:GPU\s*/\s*s(?:ec)?|s(?:ec)?\s*/\s*GPU)\s*[:=]\s*(\d[\d,]*(?:\.\d+)?)", re.I)
# the precision a post or a results page states in words: "the pre-training performance of various models using FP8
# precision" (NeMo's performance summary), "trained in MXFP8 precision"; a flag, argument or config value wins
# a rate someone else reached, quoted for comparison: "Refer to this blog, training LLaMA 13B with NeMo 23.08 could
# achieve 2357 Tokens/s/GPU" before "Yet, I can only achieve under 1900 Tokens/s/GPU" (NVIDIA/NeMo#8059)
_REFERENCE_RATE = re.compile(r"\b(?:blog|paper|official|published|reported|advertised|claim(?:s|ed)?|could achieve|"
                             r"should (?:achieve|get|reach)|expected to)\b", re.I)
_ENGINE_WORDS = re.compile(r"vllm|sglang|rollout|推理", re.I)
_TP_WORD = re.compile(r"(?<![A-Za-z])(?:TP|tp)\s*[=:]?\s*\d+")
# ... and one the engine word follows closely in the same clause: "TP8 to 2xTP4 increases rollout concurrency"
# (redai-studio/Relax#193); a comma ends the clause ("Training TP=4, rollout TP=8" keeps the training TP), and a
# trainer's word or another parallel size between them keeps it too ("TP=4 PP=2 and run rollout with vLLM")
_TP_BEFORE_ENGINE = re.compile(r"(?<![A-Za-z])(?:TP|tp)\s*[=:]?\s*\d+"
                               r"(?=(?:(?!(?<![A-Za-z])(?:PP|EP|CP|DP|ETP)\s*[=:]?\s*\d|train|actor|megatron)[^,;.\n])"
                               r"{0,40}?(?:vllm|sglang|rollout|推理))", re.I)
_TITLE_PRECISION = re.compile(r"\b(?:with|in|using)\s+(FP8|MXFP8|NVFP4)\b", re.I)
# a precision another run used, not this one: "unlike NVFP4 precision runs"
_COMPARED_BEFORE = re.compile(r"\b(?:unlike|than|vs\.?|versus|instead of|compared (?:to|with))\s*\**$", re.I)
_PROSE_PRECISION = re.compile(r"\b(?:using|in|with|at)\s+(FP8|MXFP8|NVFP4|BF16|FP16)\s+(?:mixed[- ])?precision\b"
                              # "- Model: Llama-3 70B, **NVFP4** precision, ..." (NVIDIA/TransformerEngine#3427),
                              # "- Precision: MXFP8 (e4m3)" (NVIDIA/Megatron-LM#4383)
                              r"|(?<![\w-])\**(MXFP8|NVFP4)\**\s+precision\b"
                              r"|^\s*[-*]?\s*\**precision\**\s*[:=]\s*\**`?(FP8|MXFP8|NVFP4|BF16|FP16)\b"
                              # "The results in the table below show pre-training performance of various models on
                              # DGXH100, with FP8." (NVIDIA/NeMo-Framework-Launcher examples/README.md)
                              r"|\b(?:performance|results?|throughput)\b[^.\n]{0,80}?\b(?:with|in|using)\s+"
                              r"(FP8|MXFP8|NVFP4|BF16)\s*(?:[.,;:)]|$)", re.I)
# a MoE dispatcher named in a setup list: "- Dispatcher: DeepEP"
_PROSE_DISPATCHER = re.compile(r"^\s*[-*]?\s*\**(?:moe\s+)?(?:token\s+)?dispatcher\**\s*[:=]\s*`?([A-Za-z][\w-]*)", re.I)
# ... and its FP8 scaling: "per-tensor FP8 quantization, leveraging scaling factors computed in the current step"
# (NeMo 25.x performance summary: current scaling, Megatron's --fp8-recipe tensorwise)
_PROSE_CURRENT_SCALING = re.compile(r"\bscaling factors computed in the current step\b|\bper-tensor current scaling\b",
                                    re.I)
_PROSE_FSDP = re.compile(r"(?<![A-Za-z_])FSDP\s*=\s*(?:True|true|1)\b")
_PROSE_OFFLOAD_LAYERS = re.compile(r"\bcpu[ _]offload(?:ing)?[ _](?:num[ _])?layers\s*=\s*(\d+)\b", re.I)
# (a full stop may end the sentence: "divided using PP=8 and TP=4.", NVIDIA-NeMo/Speech#9031; not "4.5")
# (VP is the VPP of NVIDIA's performance tables and bug reports: "TP=1, PP=1, CP=1, ..., VP=1", Megatron-Bridge#1976)
_COMPACT_SIZE = re.compile(r"(?<![A-Za-z])(TP|PP|VPP|VP|CP|EP|ETP|DP|MBS|GBS)\s*=?\s*(\d+)(?!\d|\.\d|[a-z])")
_COMPACT_SIZE_EQ = re.compile(r"(?<![A-Za-z_])(tp|pp|vpp|vp|cp|ep|etp|dp|mbs|gbs)\s*=\s*(\d+)(?!\d|\.\d)")  # "tp=4,pp=2"
_COMPACT_SIZE_ANY = re.compile(r"(?<![A-Za-z])(tp|pp|vpp|cp|ep|etp|dp|mbs|gbs)\s*=?\s*(\d+)(?![\d.]|[a-z])", re.I)
_PROSE_MBS = re.compile(r"\b(?:micro[- ]?batch[- ]size|batch size per (?:device|gpu)|per[- ](?:device|gpu) batch(?: size)?|"
                        r"(?:rank[- ])?local batch size)(?:\s*\([^)]*\))?\s*(?:of\s*|is\s*|[:=]\s*)?(\d+)\b", re.I)
# "global-batch-size = 64" (sail-sg/zero-bubble-pipeline-parallelism#24), "effective global batch size 32" (marin#5815)
_PROSE_GBS = re.compile(r"\bglobal[- _]?batch(?:[- _]?size)?\s*(?:of\s*|is\s*(?:set\s+to\s*)?|[:=]\s*)?`?(\d+)`?\b"
                        r"(?!\s*[|,]?\s*\w+:)"  # "the global batch size is set to 2048", "of `1920`" (llm-analysis)
                        r"|(?:^|(?<=[\s,;(`*-]))GBS\s*=\s*(\d+)\b"  # "- Batch: GBS=16, LBS=1" (Automodel#3827)
                        # Hugging Face's trainer loop, as Accelerate's Megatron-LM plugin prints it (its guide's run:
                        # "Total train batch size (w. parallel, distributed & accumulation) = 48")
                        r"|\bTotal train batch size \(w\. parallel, distributed & accumulation\)\s*=\s*(\d+)\b", re.I)
# a unit the text computes with, not the run's batch: "The model flops for NeMoTron4 15b for GBS=1 is 434.5e12"
# (NGC DGX Cloud benchmarking recipes' MFU example)
_PER_SAMPLE_FLOPS = re.compile(r"\bflops\b.*\bfor\s+GBS\s*=\s*1\b", re.I)
# one size named with its word: "the pp parallelism is 4" (zero-bubble#24), "(pp size=8, tp size=1)" (zero-bubble#10)
_PROSE_NAMED_PARALLEL = re.compile(r"(?<![A-Za-z])(tp|pp|vpp|cp|ep|etp)[ _-]?(?:parallel(?:ism)?[ _-]?)?"
                                   r"(?:size|parallelism|degree)\s*(?:is|=|:|of)\s*(\d+)\b"
                                   # the abbreviation alone, in capitals: "PP is 2" (Megatron-DeepSpeed#330)
                                   r"|(?<![A-Za-z])(?-i:(TP|PP|VPP|CP|EP|ETP))\s+is\s+(\d+)\b", re.I)
# "model parallelism degree 8": Megatron-LM's and GPT-NeoX's older name for the tensor-parallel size
# (EleutherAI/gpt-neox#409), not the pipeline's
_PROSE_MP_DEGREE = re.compile(r"(?<![\w-])(?<!pipeline )(?<!expert )(?<!pipeline_)(?<!expert_)model[- _]parallel(?:ism)?"
                              r"[- _](?:size|degree)\s*"
                              r"(?:is\s*|=\s*|:\s*|of\s*)?(\d+)\b", re.I)
# one size after "with" / "using": "on 4 nodes (32 H100s) with EP32 and CI local batch size 16" (NVIDIA-NeMo/Automodel#3483)
_WITH_SIZE = re.compile(r"\b(?:with|using)\s+(TP|PP|VPP|CP|EP|ETP)\s?=?\s?(\d+)\b(?![./])", re.I)
# one size in a list of what a run uses: "grouped-gemm, CUDA Graph, HybridEP and EP8 are used" (NVIDIA/Megatron-LM#3245)
_USED_SIZE = re.compile(r"(?<![A-Za-z])(TP|PP|VPP|CP|EP|ETP)\s?=?\s?(\d+)\s+(?:are|is|was|were)\s+(?:used|enabled)\b")
# two sizes paired by "respectively": "The global batch size and the mini batch size of the testing are 256 and 4
# respectively" (sail-sg/zero-bubble-pipeline-parallelism#10)
_PROSE_RESPECTIVELY = re.compile(r"\b(?:the\s+)?([A-Za-z][\w -]*?)\s+and\s+(?:the\s+)?([A-Za-z][\w -]*?)\s+"
                                 r"(?:of\s+[\w ]+?\s+)?(?:are|were|is|was)\s+(\d+)\s+and\s+(\d+),?\s+respectively\b",
                                 re.I)
# a setting changed in words: "only overrides `global_batch_size` to **15360**" (NVIDIA-NeMo/Megatron-Bridge#4330)
_PROSE_SET_TO = re.compile(r"\b(?:sets?|overrides?|changes?|raises?|increases?|reduces?)\s+(?:the\s+)?"
                           r"`?([a-z][a-z_-]*)`?\s+to\s+[*`]*(\d+)\b")
_AND_SET_TO = re.compile(r"^[^.;]*?\band\s+(?:the\s+)?`?([a-z][a-z_-]*)`?\s+to\s+[*`]*(\d+)\b")
# names and values paired by slashes: "HIDDEN_SIZE / NUM_ATTN_HEADS/ NUM_LAYERS/ BATCHSIZE = 4096/16/50/8"
# (deepspeedai/DeepSpeedExamples#192), or with a space: "GBS/MBS 512/2" (NVIDIA-NeMo/Megatron-Bridge#5124)
_SLASH_PAIRS = re.compile(r"((?:[A-Za-z_][\w ]*?\s*/\s*)+[A-Za-z_][\w ]*?)\s*[=:]?\s*(\d+(?:\s*/\s*\d+)+)\b")
# an OOM told in words: "keep getting OOM error" (NVIDIA/Megatron-LM#1308), "will meet OOM error", "4 nodes OOMs",
# "❌ OOM at `optimizer.step`" (NVIDIA-NeMo/Automodel#2546); not where the text avoids or fixes one
_PROSE_OOM = re.compile(r"\b(?:keeps? getting|get(?:s|ting)?|got|meets?|met|hit(?:s|ting)?|run(?:s|ning)? into|ran into|"
                        r"raise[sd]?|raising|"  # "it even raise oom by the table param" (NVIDIA/Megatron-LM#1571)
                        r"throws?|threw|fails? with|failed with|dies? with|occurs?|occurred|"
                        r"(?:will\s+)?report(?:s|ed)?|"  # "several ranks ... will report an OOM error" (Megatron-LM#1516)
                        r"turns? out|turned out)\s+(?:an?\s+|the\s+|to be\s+)?"  # "it turns out OOM" (Megatron-LM#1237)
                        r"(?:CUDA\s+)?(?:OOMs?|out[- ]of[- ]memory)\b|\bOOMs\b|\bOOMed\b|❌\s*(?:still\s+)?OOM\b"
                        r"|^\s*OOM\s+(?:when|while|during|at|in|after)\b"  # "OOM when compute_teacher_logits" (ms-swift#7295)
                        # the verb after it: "GPU OOM always occur after only 3~4 rollout steps" (THUDM/slime#1022),
                        # "the CUDA OOM error consistently occurs" (THUDM/slime#274)
                        r"|\bOOM\s+(?:errors?\s+|problems?\s+|issues?\s+)?(?:is\s+)?"
                        r"(?:always\s+|consistently\s+|still\s+|often\s+|sometimes\s+|"
                        r"randomly\s+|suddenly\s+)?(?:occurs?|occurred|happens?|happened)\b"  # "OOM suddenly occurs
                        # while backwarding", "OOM is still occurred processing backward" (NVIDIA/Megatron-LM#1300)
                        # "ran out of GPU memory"; "That topology exhausted each GPU" (NVIDIA-NeMo/Automodel#3483)
                        r"|\b(?:ran|runs|running)\s+out\s+of\s+(?:\w+\s+)?memory\b"
                        r"|\bexhausted\s+(?:each|every|the|all)\s+GPUs?\b"
                        # "I still facing OOM" (NVIDIA/NeMo threads), "I still encountered the OOM issue" (verl#3987);
                        # not after an attempt at another setup ("When I try to train on a single node using Megatron, I
                        # encounter OOM", Megatron-LM#2762: _ATTEMPT_BEFORE)
                        r"|\b(?:facing|faces?|faced|encounter(?:s|ed|ing)?|experienc(?:e|es|ed|ing)|seeing|saw)\s+"
                        r"(?:an?\s+|the\s+|this\s+)?(?:CUDA\s+)?(?:OOM|out[- ]of[- ]memory)\b"
                        # Chinese posts: "显存不够" / "显存不足" (GPU memory not enough), "爆显存", and the cards named as
                        # not enough, "8卡 H200 也完全不够" (modelscope/ms-swift#8169)
                        r"|显存(?:占用)?(?:不够|不足|爆了|溢出)|爆显存|\d+\s*卡\s*\S{0,12}?\s*也?(?:完全)?不够"
                        # "The job fails due to OOM when warming up jit fusion" (NVIDIA-NeMo/Megatron-Bridge#2811), "it
                        # always oom in the backward" (NVIDIA/TransformerEngine#2543)
                        r"|\b(?:fails?|failed|crash(?:es|ed)?|dies|died|aborts?|aborted)\s+(?:due\s+to|because\s+of)\s+"
                        r"(?:an?\s+|the\s+)?(?:CUDA\s+)?(?:OOM|out[- ]of[- ]memory)\b"
                        r"|\b(?:always|still|immediately|quickly)\s+OOMs?\b"
                        # "but it's OOM after some training updates"; a title "# OOM with Llama3-8b on 8*H100"
                        # (OpenRLHF/OpenRLHF#519)
                        r"|\bit'?s\s+(?:an?\s+)?OOM\b|^\s*#\s+(?:\[[^\]]*\]\s*)?OOM\s+(?:with|on|for|in|when)\b", re.I)
_ATTEMPT_BEFORE = re.compile(r"\bwhen\s+I\s+(?:try|tried|attempt|attempted)\b[^.!?]*$", re.I)
_PROSE_NO_OOM = re.compile(r"\b(?:no|without|avoids?|avoid(?:ing|ed)|prevents?|fix(?:es|ed)?|clears?|not|n't|never)\s+"
                           r"(?:\w+\s+){0,2}(?:an?\s+|the\s+)?(?:OOM|(?:ran|runs|running)\s+out|exhausted)|✅"
                           r"|(?:不会|没有|没|避免|防止|不)\s*(?:爆显存|显存不足|显存溢出|显存不够)", re.I)
# the condition an OOM sentence puts on a size, before it ("When tp=1 is set, OOM occurs", verl-project/verl#2197,
# where the run's own train_tp is 2) or right after it ("OOM occurs if pp=2")
_OOM_IF_BEFORE = re.compile(r"\b(?:when|if|once|with)\b[^.;!?]*?(?<![A-Za-z_])(tp|pp|vpp|cp|ep|etp|mbs)\s*(?:=|==|is)?"
                            r"\s*(\d+)(?![\d.])[^.;!?]*$", re.I)
_OOM_IF_AFTER = re.compile(r"^[^.;!?]{0,20}?\b(?:when|if|with)\b[^.;!?]{0,20}?(?<![A-Za-z_])(tp|pp|vpp|cp|ep|etp|mbs)"
                           r"\s*(?:=|==|is)?\s*(\d+)(?![\d.])", re.I)


def _oom_condition(line: str, m: re.Match[str]) -> tuple[str, int] | None:
    """``(size, value)`` where the sentence puts the OOM under a condition on a parallel size or the micro batch.

    >>> import re; line = "When tp=1 is set, OOM occurs"; _oom_condition(line, _PROSE_OOM.search(line))
    ('tp', 1)
    >>> line = "we keep getting OOM errors"; _oom_condition(line, _PROSE_OOM.search(line)) is None
    True
    """
    c = _OOM_IF_BEFORE.search(line[:m.start()]) or _OOM_IF_AFTER.search(line[m.end():])
    return (c.group(1).lower(), int(c.group(2))) if c else None


# an OOM told in Chinese: "爆显存", "显存不足", "每一张卡显存都满了" (alibaba/Pai-Megatron-Patch#409: every card's memory full)
# and "遇到OOM" (ran into), "报错OOM" / "报错：oom" (fails with), "出现OOM", "直接爆OOM", "OOM了" (modelscope/ms-swift#5851,
# #6387, #7190, #5966)
_PROSE_OOM_CN = re.compile(r"爆显存|显存(?:不足|溢出|不够|爆了|都满了|满了)"
                           r"|(?:遇到|出现|报错|发生|爆)了?\s*[：:]?\s*(?:CUDA\s*)?OOM(?![A-Za-z])|(?<![A-Za-z])OOM\s*了", re.I)
# an OOM while saving a checkpoint, not in a training step: "Training works fine but checkpointing OOMs out"
# (NVIDIA-NeMo/Megatron-Bridge#1748), "可训练但在保存模型时报错：oom" (modelscope/ms-swift#5966)
# "when I save the model, I keep prompting me to out of memory" (NVIDIA-NeMo/Skills#26): the sentence that says when
_SAVE_OOM_SENTENCE = re.compile(r"(?:\bsav(?:e|ing)\s+(?:the\s+|a\s+)?(?:model|checkpoints?|weights)\b|\bcheckpointing\b|保存)"
                                r"[^.。\n]{0,60}(?:out[- ]of[- ]memory|\bOOM)|(?:\bOOM|out[- ]of[- ]memory)[^.。\n]{0,40}"
                                r"\b(?:when|while)\s+sav(?:e|ing)\b", re.I)
_CHECKPOINT_OOM = re.compile(r"\bcheckpointing\b|\bsav(?:e|es|ing)\s+(?:the\s+|a\s+)?(?:model|checkpoints?|weights)\b"
                             r"|\bsave_checkpoint\b|保存(?:模型|权重|checkpoint)?", re.I)  # (not loading one: #1516)
# sizes written the other way round or run together: "2pp-1dp-1cp-8ep" (mlc-ai/pith-train#7), "tp2pp1" / "tp2 pp1"
# (ISEEKYAN/verl_megatron_practice#2); like "TP1/PP1", a line must hold two of them
_SIZE_FIRST = re.compile(r"(?<![A-Za-z0-9.])(\d+)(tp|pp|vpp|cp|ep|etp|dp)(?![A-Za-z])", re.I)
_SIZE_ATTACHED = re.compile(r"(?<![A-Za-z])(tp|pp|vpp|cp|ep|etp|dp)(\d+)(?![\d.])"  # run together: "tp2pp8ep8vpp1"
                            r"(?!(?!(?:tp|pp|vpp|cp|ep|etp|dp)\d)[A-Za-z])")  # (NVIDIA/Megatron-LM#6034's test name)
# "2n8g" in a recipe's name: 2 nodes of 8 GPUs (NVIDIA-NeMo/RL#2668); "#GPUs=2" (OpenSparseLLMs/Linear-MoE#6);
# "one 8×B200 node" (mlc-ai/pith-train#79)
_NODES_GPUS_TOKEN = re.compile(r"(?<![A-Za-z0-9])(\d+)n(\d+)g(?![A-Za-z0-9])")
_GPUS_EQ = re.compile(r"#\s*GPUs?\s*[:=]\s*(\d+)\b", re.I)
_GPUS_TO = re.compile(r"\bGPUs\s+to\s+(\d+)\b", re.I)  # "reduce minimum gpus to 96 for deepseek-v3" (verl-project/verl#3019)
# nodes of k GPUs: "two complete four-GPU GB200 nodes" (NVIDIA-NeMo/Megatron-Bridge#5124), "4 8-GPU nodes"
_NODES_OF_K_GPUS = re.compile(rf"\b(an?|single|one|two|four|eight|sixteen|\d+)\s+(?:[a-z]+\s+)?(one|two|four|eight|\d+)-GPU\s+"
                              rf"(?:NVIDIA\s+)?(?:(?:DGX-?)?{_GPU_NAMES_RE}\s+)?(?:nodes?|servers?|machines?|hosts?)\b", re.I)
# NVIDIA DGX-2 / DGX-2H: 16 Tesla V100 SXM3 32 GB on NVSwitch (DGX-2 datasheet); named as a system, not a GPU
_DGX2 = r"DGX[- ]?2(?:[- ]?H)?(?![\w.])"
# names that are not a GPU's but fix it, as ``gpu_key`` spells the GPU: a DGX-2 (32 GB V100s); AMD Instinct parts by
# their LLVM target (ROCm docs, "GPU hardware specifications": gfx942 is MI300X -- also MI300A and MI325X, the same
# CDNA 3 chip --, gfx950 MI355X), as ROCm builds name them ("PYTORCH_ROCM_ARCH=gfx942"); Google Cloud's
# accelerator-optimized machine types (cloud.google.com/compute/docs/gpus, "GPU machine types": A2 Standard A100 40 GB,
# A2 Ultra A100 80 GB, A3 High / Mega / Edge H100 80 GB, A3 Ultra H200, A4 B200)
_SYSTEM_GPUS = tuple((re.compile(pattern, re.I), part) for pattern, part in (
    (r"\b" + _DGX2, "V100-32"), (r"\bgfx942\b", "MI300X"), (r"\bgfx950\b", "MI355X"),
    (r"\ba2-(?:highgpu|megagpu)-\d+g\b", "A100-40"), (r"\ba2-ultragpu-\d+g\b", "A100-80"),
    (r"\ba3-(?:highgpu|megagpu|edgegpu)-\d+g\b", "H100-80"), (r"\ba3-ultragpu-\d+g\b", "H200"),
    (r"\ba4-highgpu-\d+g\b", "B200"),
    # the same machines by their family names: "a GKE cluster with 2 A3 Mega nodes" (NVIDIA/NeMo#11784)
    (r"\bA3[- ](?:Mega|High)\b", "H100-80"), (r"\bA3[- ]Ultra\b", "H200")))
# nodes of a system that fixes its GPU count -> GPUs a node: "one node of DGX2", "2 DGX-2 nodes" (16 V100s each);
# "2 A3 Mega nodes" (Google Cloud, 8 GPUs each)
_SYSTEM_NODES = tuple((re.compile(pattern, re.I), per_node) for pattern, per_node in (
    (rf"\b(one|a|an|two|four|eight|\d+)\s+(?:nodes?|servers?|systems?|machines?)\s+of\s+{_DGX2}"
     rf"|\b(one|a|an|two|four|eight|\d+)\s+{_DGX2}\s+(?:nodes?|servers?|systems?|machines?)\b", 16),
    (r"\b(one|a|an|two|four|eight|\d+)\s+(?:GCP\s+)?A3[- ](?:Mega|High|Ultra)\s+"
     r"(?:nodes?|VMs?|instances?|machines?|hosts?)\b", 8),
    # DGX-1 / A100 / H100 / H200 / B200 / B300 systems hold 8 GPUs each (NVIDIA's DGX datasheets): "4 DGX nodes"
    # (microsoft/Megatron-DeepSpeed's long-sequence README)
    (r"\b(one|a|an|two|four|eight|\d+)\s+(?:NVIDIA\s+)?DGX(?:[- ]?(?:1|A100|H100|H200|B200|B300)(?:-\d+GB)?)?\s+"
     r"(?:nodes?|servers?|systems?|machines?|boxes)\b", 8)))
_NODE_OF_GPUS = re.compile(rf"\b(one|two|four|eight|\d+)\s+(\d+)\s*[x×]\s*(?:NVIDIA\s+)?{_GPU_NAMES_RE}\s+nodes?\b", re.I)
# a node's GPU count, not the run's: "DGX nodes, each equipped with 8 H100 GPUs" (NVIDIA-NeMo/NeMo#9031), and the
# node count as a results row writes it: "#nodes=4,    DP=1, GBPT = 2 sec" (the first one stated is read)
_EACH_NODE_GPUS = re.compile(rf"\b(?:(\d+|one|two|four|eight)\s+(?:[A-Za-z-]+\s+)?)?(?:nodes?|servers?|machines?|hosts?)\b"
                             rf"[^.\n]{{0,40}}?\beach\s+(?:equipped\s+with|with|having|has|containing)\s+(\d+)\s*[x×]?\s*"
                             rf"(?:NVIDIA\s+)?(?:{_GPU_NAMES_RE}\s*)?(?:GPUs?|{_GPU_NAMES_RE}s?)\b", re.I)
_GPUS_PER_NODE_PROSE = re.compile(rf"(?<![\w.])(\d+)\s*(?:NVIDIA\s+)?(?:{_GPU_NAMES_RE}\s*(?:\d+\s*GB\s*)?)?GPUs?\s*"
                                  r"(?:per|/|a|each|on\s+each|in\s+each)\s*node\b", re.I)
# a node count of a named GPU without its GPUs a node: "on two nodes of GB300" (NVIDIA/Megatron-LM#3245); runs.py takes
# the catalog's GPUs a node
_NODES_OF_PART = re.compile(rf"\b(one|two|four|eight|sixteen|\d+)\s+nodes?\s+of\s+(?:NVIDIA\s+)?{_GPU_NAMES_RE}\b"
                            r"(?!\s*(?:[x×*]|GPUs?\b))", re.I)
_PROSE_NODES_EQ = re.compile(r"(?:^\s*#nodes|\bnum[_ ]nodes|(?<![-\w])nodes)\s*[=:]\s*(\d+)\b", re.I)
# a sentence naming the GPUs a feature runs on, not the run's (_parse_line)
_ONLY_ON_GPUS = re.compile(r"\b(?:is|are) only (?:applicable|supported|available)\b", re.I)
# a GPU row of nvidia-smi's table: its first number is the GPU's index, not a count (_prose_sizes)
_NVIDIA_SMI_ROW = re.compile(r"^\|\s+\d+\s+(?:NVIDIA|Tesla)\b[^|]*\|")
# a launcher's own line: "Launching Torch distributed as node rank 0 out of 2 nodes" (AI-Hypercomputer's GKE recipes)
_NODE_RANK_OF = re.compile(r"\bnode rank \d+ out of (\d+) nodes?\b")
# a sequence length written after its number or run together: "4096 sequence length" (NVIDIA-NeMo/RL#366),
# "seq8192" (pith-train#79), "seqlen 10240", "SeqLen=2048"
_SEQ_AFTER = re.compile(r"\b(\d{3,}|\d+[kK])\s+(?:sequence length|seq[ _-]?len(?:gth)?|context(?:[ -]length)?"
                        r"(?![ -]window))\b", re.I)  # "Qwen3 32b + 128k context is runnable" (NVIDIA-NeMo/RL#957)
# activation checkpointing in words: "using TP8+CP4+actckpt", "with activation checkpointing" (full recompute)
_PROSE_ACT_CKPT = re.compile(r"(?<![A-Za-z])actckpt\b|\b(?:with|using|and|\+)\s*(?:full\s+)?activation[ _-]checkpointing\b"
                             r"|\bactivation[ _-]checkpointing\s*(?:=|:)\s*(?:true|on|enabled)\b", re.I)
# Megatron-DeepSpeed's run names, used for its output, log and checkpoint folders: "ds_z${ZERO_STAGE}_nl${NLAYERS}_
# hs${HIDDEN}_gb${GLOBAL_BATCH}_mb${MICRO_BATCH}" (deepspeedai/Megatron-DeepSpeed examples_deepspeed scripts'
# OUTPUT_DIR), "ds_stage${ZERO_STAGE}_nl${NLAYERS}_hs${HIDDEN}_mb${MICRO_BATCH}_seq${SEQ}_gb${GLOBAL_BATCH}_pp${PP}_
# tp${TP}_${DTYPE}_opt${OPT}" (argonne-lcf/Megatron-DeepSpeed ALCF/helpers.sh setOutput): the layers and the width
# after the prefix, then the batch fields in either order (tp / pp / seq are read as anywhere else)
_DS_RUN_NAME = re.compile(r"(?<![A-Za-z0-9])ds_(?:z|stage)\d+_nl(\d+)_hs(\d+)((?:_(?:gb|mb|seq|sp|pp|tp)\d+)*)")
_DS_RUN_FIELDS = {"gb": "global_batch_size", "mb": "micro_batch_size"}
_SEQ_TOKEN = re.compile(r"(?<![A-Za-z])seq(?:len)?\s?(\d{3,})(?![\d.])", re.I)  # "seq8192", "seq 2048" (trl#6869)
# two lengths offered as alternatives before the word: "with 16k or 32k context", "4k/8k sequence length"
_SEQ_ALTERNATIVES = re.compile(r"\b(\d{3,}|\d+[kK])\s*(?:or|/|and)\s*(\d{3,}|\d+[kK])\s+(?:sequence length|"
                               r"seq[ _-]?len(?:gth)?|context(?:[ -]length)?(?![ -]window))\b", re.I)
# a Megatron config key and its value in running text: "num_layers 24, num_heads 16, hidden_size 2048"
# (bigcode-project/Megatron-LM#41), "with expert_tensor_parallel_size=1 and sequence_parallel=True" (NVIDIA-NeMo/RL#2668)
_KEY_VALUE_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_.-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`?(?:\s+|\s*=\s*)(\d+)"
                                r"(?![A-Za-z0-9_.])")  # "`micro_batch_size` 3"
# a config object's attribute set in Python: "model_provider.tensor_model_parallel_size = 4" (Megatron-Bridge#546),
# "cfg.model.expert_model_parallel_size = 8" (Bridge recipes); not an inference engine's (``_ENGINE_SECTIONS``)
_UPPER_PAIRS = re.compile(r"(?<![\w$])([A-Z][A-Z0-9_]*)=(\d+)\b(?![.\dkKmMbB])")
SHAPE_ARGS = {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "num_query_groups"}
_ATTR_SET = re.compile(r"\b((?:[A-Za-z_]\w*\.)+)([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\s*=\s*(\d+)\b(?![.\d])")
_TEXT_KEY_ALIASES = {"num_heads": "num_attention_heads", "n_heads": "num_attention_heads", "n_layers": "num_layers",
                     "num_kv_heads": "num_query_groups", "batch_size_per_gpu": "micro_batch_size",
                     # SkyRL's / verl's SFT trainer: "`train_batch_size=256, max_len=4096, micro_batch_size=8`"
                     # (NovaSky-AI/SkyRL#1734)
                     "train_batch_size": "global_batch_size", "max_len": "seq_length"}
# a launcher's rank tags ("[INFO|DP=0|PP=0|TP=0|lm_head]", nanotron) name the rank, not the sizes
_RANK_TAGS = re.compile(r"\[[^\]\n]*\|(?:DP|PP|TP|CP|EP)=\d+[^\]\n]*\]")
# "world size 8" in a post (the log's own "using world size: 8" is read as the world size)
# (not a process group's: NeMo 1's distributed Adam prints "process_group: 0x7fd084b16db0, world size 8", its DP group,
# which _DIST_ADAM_GROUP reads first)
# (a launch script's banner: "  World Size: 64", together-dgxc-benchmarking's Megatron-Bridge configs)
_PROSE_WORLD = re.compile(r"\b[Ww]orld [Ss]ize\s*(?:of\s*|is\s*|[:=]\s*)?(\d+)\b")
# "tokens/step 131,072": with the global batch, the sequence length (runs.py)
_PROSE_TOKENS_PER_STEP = re.compile(r"\btokens\s*/\s*(?:step|iter(?:ation)?)\s*[:=]?\s*(\d[\d,]*)\b", re.I)
# NeMo's and AutoModel's packed sequences are the trained length: "packed_sequence_size=1024" (PackedSequenceSpecs)
# "max_length=4096" (a Megatron-SWIFT post's setup, modelscope/ms-swift#5851: its sequence, packed or not)
_PROSE_SEQ = re.compile(r"\b(?:sequence[ -]length|seq[ _-]?len(?:gth|g)?|seq(?=\s*=)|max_length(?=\s*=)|"
                        r"packed[ _]sequence[ _]size|"
                        r"(?<!max )(?<!maximum )context[ -]length)\s*"  # "Llama-3.1-8B context length 8192" (okoge-kaz)
                        r"(?:of\s*|[:=-]\s*)?`?"
                        r"(\d{1,3}(?:,\d{3})+|\d{3,}|\d+[kK])\b", re.I)
# "4 H100 nodes" counts nodes, not GPUs; "a fresh 4xH100 machine" (THUDM/slime#148) is one machine of 4
# nor recipes or configs: "alongside the existing four H100 recipes" (NVIDIA-NeMo/Megatron-Bridge#5039)
_NOT_NODES = r"(?!\s*(?:nodes|servers|machines|hosts|boxes|systems|recipes|configs|configurations)\b)"
# a version's digit is no count: "GLM-5.2 GB200" (NVIDIA-NeMo/Megatron-Bridge#5401), "GLM-5 H100"
_GPU_COUNT = re.compile(rf"(?<![.-])\b(\d+)\s*[x×*]?\s*(?:of\s+)?(?:NVIDIA\s+)?{_GPU_NAMES_RE}(?:[- ]?\d+\s?GB?)?s?\b"
                        rf"{_NOT_NODES}(?!(?:[- ]?\d+\s?GB?)?\s*(?:GPUs?\s*)?(?:per|/|on\s+each|in\s+each)\s*node)",
                        re.I)  # (not a node's: "6 Nvidia V100 16GB GPUs per node", deepspeedai/DeepSpeed#115)
# nodes x GPUs per node: "1 × 8 H200" (basetenlabs/ml-cookbook#104), "2x8 H100 GPUs"; FlagPerf's config names,
# "config_A800x1x8.py" (flagos-ai/FlagPerf#421: 1 node of 8)
# (a vendor's part the catalog lacks too: "config_C500x1x8.py", MetaX, flagos-ai/FlagPerf#670; "config_R300x10x8.py")
# "2 * 8 H20" (modelscope/ms-swift#7992), "4*8*80GB nodes" (verl-project/verl#1649)
_GPU_GRID = re.compile(rf"(?<![A-Za-z0-9.])(\d+)\s*[x×*]\s*(\d+)(?!\d)\s*(?:[x×*]?\s*\d+\s*GB\s+|[x×*]\s*)?(?:NVIDIA\s+)?"
                       rf"(?:{_GPU_NAMES_RE}|GPUs?|nodes)(?![A-Za-z0-9])"  # "使用4*8*A800进行" (modelscope/ms-swift#9243)
                       rf"|(?<![A-Za-z0-9]){_GPU_NAMES_RE}x(\d+)x(\d+)(?!\d)"
                       r"|\bconfig_[A-Za-z]+\d*[A-Za-z]*x(\d+)x(\d+)\.py\b", re.I)
# a bound on the GPU count, not the run's (NGC DGX Cloud benchmarking READMEs: "At least 128 GPUs with at least 80 GB")
_BOUND_COUNT = re.compile(rf"\b(?:at least|at most|a minimum of|minimum of|up to|no fewer than|more than|fewer than)\s+"
                          rf"\d+\s*[x×]?\s*(?:NVIDIA\s+)?(?:GPUs?|{_GPU_NAMES_RE})\b|\b\d+\s+(?:GPUs?\s+)?or more GPUs\b", re.I)
# "One H100 will oom" (NVIDIA/Megatron-LM#783); "mxfp8_128GPU_TP2PP1EP16" in a recipe's file name (#5289)
_GPU_COUNT_WORDS = {"one": 1, "two": 2, "four": 4, "eight": 8, "sixteen": 16}
# boxes of k GPUs counted: "three 8xA100 40GB servers" (EleutherAI/gpt-neox#707), "four 8xA100-80GB devices"
# (alibaba/Megatron-LLaMA's README)
_BOXES_OF_K = re.compile(rf"\b(an?|one|two|three|four|five|six|eight|sixteen|\d+)\s+(\d+)\s*[x×]\s*(?:NVIDIA\s+)?"
                         rf"{_GPU_NAMES_RE}(?:[- ]?\d+\s*GB)?\s+(?:nodes?|servers?|machines?|hosts?|devices|boxes|systems)\b",
                         re.I)
_GPU_COUNT_SPELLED = re.compile(rf"\b(one|two|four|eight|sixteen)\s+(?:NVIDIA\s+)?{_GPU_NAMES_RE}s?\b{_NOT_NODES}", re.I)
# "256GPUs", and in a run id "deepseekv3_671b_bf16_h200_256gpus-2026-03-25" (AI-Hypercomputer/gpu-recipes#195); not
# a recipe's name, "glm52_pretrain_416gpu_h100_bf16_config", which a text often names beside others (Bridge#5039)
_GPU_COUNT_TOKEN = re.compile(r"(?<![A-Za-z0-9.])(\d+)(?:GPUs?|gpus)(?![A-Za-z0-9])")
# "528.9ms per iteration for single GPU"; not a per-GPU metric: "the measured single-GPU computing power is
# significantly lower than the 666 TFLOPS" (NVIDIA/Megatron-LM#3245, a run on two GB300 nodes)
_SINGLE_GPU = re.compile(r"\b(?:a |one |for |on )?single[- ]GPU\b(?![- ](?:comput\w*|performance|throughput|TFLOPS|"
                         r"FLOPS|power|speed|efficiency|utili[sz]ation|memory|peak)\b)", re.I)
# what fits in one GPU's memory is not the run's GPU count: "With 64 nodes we are able to fit the 8B with sequence
# length = 8192 in a single GPU" (swiss-ai/Megatron-LM#33)
_FITS_IN = re.compile(r"\bfit(?:s|ting)?\b", re.I)
# nor a metric's definition: "**Tokens/sec/GPU**: The rate at which the tokens are processed ... on a single GPU"
# (NeMo RL's performance summary)
_RATE_DEFINITION = re.compile(r"\b(?:the\s+)?rate\s+at\s+which\b|/\s*GPU\W*\s*:", re.I)
# FlagPerf's case READMEs define each batch and length and then give the case's value: "1. local_batchsize(micro_
# batchsize)，简写为LBS ... 在本case中默认为1。" (flagos-ai/FlagPerf training/benchmarks/*/megatron/README.md); the
# first name the line defines is the one its value belongs to
_FLAGPERF_DEFAULT = re.compile(r"在本case中默认为\s*(\d+)")
_FLAGPERF_KEYS = ((r"^\W*\d*\.?\s*(?:local|micro)_?batch_?size", "micro_batch_size"),
                  (r"^\W*\d*\.?\s*global_?batch_?size", "global_batch_size"),
                  (r"^\W*\d*\.?\s*(?:seq_?length|max_position_embedding)", "seq_length"),
                  (r"^\W*\d*\.?\s*gradient_?accumulat\w*_?steps", "_grad_accum_steps"))
# GPU counts in Chinese posts: "N卡" is N GPUs ("增加资源到8卡", alibaba/Pai-Megatron-Patch#409; "H800 256卡"), "N机M卡" N
# nodes and M GPUs in all ("单机8卡", flagos-ai/FlagPerf#439), "16机 * A800 80 GB * 8卡" 16 nodes of 8 (alibaba/Megatron-LLaMA#22)
# a sequence length in Chinese: "序列长度 4096" / "序列长度为8192", "训练32k的上下文" (alibaba/Pai-Megatron-Patch), "8k的长度"
# (modelscope/ms-swift#9191)
_CN_SEQ = re.compile(r"(?:序列长度|上下文长度)\s*[:：=]?\s*(?:为|是)?\s*(\d{3,}|\d+[kK])\b|(?<![\d.])(\d+[kK])\s*(?:的)?\s*"
                     r"(?:上下文|序列长度|长度)|长度\S{0,6}?(\d{3,})\s*(?:个\s*)?tokens?")  # "长度填充到6000token"
# parallel sizes in Chinese: "4张量并行" / "张量并行为4" (tensor), 流水线 (pipeline), 专家 (expert), 上下文 (context)
# (alibaba/Pai-Megatron-Patch#135: "做无数据并行、无模型并行、4张量并行的分布式训练")
_CN_PARALLEL_KINDS = {"张量": "tensor_model_parallel_size", "流水线": "pipeline_model_parallel_size",
                      "专家": "expert_model_parallel_size", "上下文": "context_parallel_size"}
_CN_PARALLEL = re.compile(r"(\d+)\s*(?:路)?\s*(张量|流水线|专家|上下文)并行|(张量|流水线|专家|上下文)并行\s*(?:度|大小|数)?\s*"
                          r"(?:为|是|=|:|：)?\s*(\d+)")
# a GPU count with a Chinese counter: "使用4块A800显卡", "8张H100"
_CN_GPU_COUNT = re.compile(rf"(?<![\d.])(?:(\d+)\s*[*x×]\s*)?(\d+)\s*(?:块|张)\s*(?:\d+\s*GB?\s*)?(?:NVIDIA\s*)?{_GPU_NAMES_RE}",
                           re.I)  # "16*8 块80G A800" (modelscope/ms-swift#6703): 128; not 台: machines
# ("4台A800 80G，共32卡训练": 4 machines, 32 GPUs, modelscope/ms-swift#8081)
_CN_COUNT_WORDS = {"单": 1, "一": 1, "两": 2, "二": 2, "四": 4, "八": 8}
_CN_NODES_TIMES_CARDS = re.compile(r"(\d+|[单一两二四八])\s*(?:机|台|节点)\s*[*x×]\s*(?:[^*x×\n]{0,24}[*x×]\s*)?(\d+)\s*(?:张\s*)?卡")
# the cards in Chinese numerals too: "单机八卡" (modelscope/ms-swift's Megatron-SWIFT benchmark), "双机十六卡"
_CN_NODES_CARDS = re.compile(r"(\d+|[单双一两二四八])\s*(?:机|台机器|台|节点)\s*(\d+|[一二两三四五六七八九十]+)\s*(?:张\s*)?卡")
# "4节点. 每节点8卡", "在4台机器（每台8卡）" (modelscope/ms-swift#9243): nodes, then the cards of each
_CN_NODES_EACH = re.compile(r"(\d+|[单双一两二四八])\s*(?:机|台机器|台|节点|个节点)[^\n]{0,12}?每(?:台|个节点|节点|机)(?:机器)?"
                            r"\s*(\d+|[一二两三四五六七八九十]+)\s*(?:张\s*)?卡")
_CN_PER_NODE = re.compile(r"每(?:台|个节点|节点|机)(?:机器)?\s*(\d+|[一二两三四五六七八九十]+)\s*(?:张\s*)?卡")
_CN_NODES_ALONE = re.compile(r"^\s*(\d+)\s*(?:个)?节点\s*[.。,，]?\s*$")  # a line of its own: "4节点."
_CN_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


def _cn_int(text: str) -> int:
    """A count in Arabic or Chinese numerals (up to 99).

    >>> [_cn_int(t) for t in ("16", "八", "十", "十六", "三十二")]
    [16, 8, 10, 16, 32]
    """
    if text.isdigit():
        return int(text)
    tens, ten, ones = text.partition("十")
    if not ten:
        return _CN_DIGITS.get(text, 0)
    return (_CN_DIGITS.get(tens, 0) if tens else 1) * 10 + _CN_DIGITS.get(ones, 0)
_CN_CARDS = re.compile(r"(?<![\d.A-Za-z])(\d+)\s*(?:张\s*)?卡(?![型住死顿])")  # not 卡住 / 卡死: stuck
_CN_ALTERNATIVES = re.compile(r"卡\s*(?:或者?|or|/)\s*\d")  # "32卡或64卡": either (Pai-Megatron-Patch#643), not read
# multi-query attention: one key-value group ("Some tests with a 1B MQA model", bigcode-project/Megatron-LM#41)
_PROSE_MQA = re.compile(r"\bMQA\b|\bmulti[- ]query[- ]attention\b", re.I)
# data parallelism alone: TP = PP = 1 ("and only use data parallelism", NVIDIA/Megatron-LM#1214)
_PROSE_DP_ONLY = re.compile(r"\b(?:only|just|purely|pure)\s+(?:use\s+|using\s+)?data[- ]parallel(?:ism)?\b|"
                            r"\bdata[- ]parallel(?:ism)?\s+only\b", re.I)
# "16 nodes of H100x8GPUs", "16 nodes of 8x H100 80GB" (NVIDIA-NeMo/Megatron-Bridge#3463)
# "16 nodes × 8 H800 GPUs = **128 GPUs**" (modelscope/ms-swift#9451): nodes times the GPUs of each
_NODES_TIMES_GPUS = re.compile(rf"\b(\d+)\s+nodes?\s*[x×*]\s*(\d+)\s*(?:NVIDIA\s+)?"
                               rf"(?:{_GPU_NAMES_RE}(?:\s*(?:GPUs?|cards?))?|GPUs?|cards?)(?![A-Za-z0-9])", re.I)
# "on 8x80GB A100", "4*40G A100s" (OpenRLHF/OpenRLHF#762): a count of GPUs of one memory size
_COUNT_SIZE_GPU = re.compile(rf"(?<![\w.])(\d+)\s*[x×*]\s*(\d+)\s*GB?\s+(?:NVIDIA\s+)?({_GPU_NAMES_RE})s?"
                             r"(?![A-Za-z0-9])", re.I)
_NODES_OF = re.compile(rf"\b(\d+)\s+nodes?\s+(?:of|with)\s+(?:(\d+)\s*[x×]\s*(?:NVIDIA\s+)?{_GPU_NAMES_RE}"
                       rf"|{_GPU_NAMES_RE}\s*[x×]\s*(\d+)\s*(?:GPUs?)?|(\d+)\s+(?:NVIDIA\s+)?(?:{_GPU_NAMES_RE}s?|GPUs?))\b",
                       re.I)
# "256-GPU recipes", "trained on 64 GPUs" (not "8 GPUs per node", "8-GPU nodes")
# a job's rank count: "a valid 128-rank topology" (NVIDIA-NeMo/Megatron-Bridge#5008); a count the text sets aside
# is not the run's: "derived on 128 GPUs instead of the 64 its own command allocates" (#5596); nor is a communicator's,
# "this will result in a new 2-rank NCCL communicator to be created" (PyTorch's warning for a pipeline's p2p group,
# inclusionAI/AReaL moonlight_moe_r3.txt)
_GPU_COUNT_WORD = re.compile(r"\b(\d+)(?:-GPU\b|-rank\b|\s+GPUs\b)(?!\s*(?:per\b|/|nodes?\b|servers?\b|machines?\b|"
                             r"hosts?\b|boxes\b|instead\b|(?:NCCL\s+)?communicators?\b))", re.I)
PROSE_SIZE_ARGS = {"TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size",
                   "VPP": "virtual_pipeline_model_parallel_size", "VP": "virtual_pipeline_model_parallel_size",
                   "CP": "context_parallel_size", "EP": "expert_model_parallel_size", "ETP": "expert_tensor_parallel_size",
                   "DP": "data_parallel_size", "MBS": "micro_batch_size", "GBS": "global_batch_size"}


# a two-column Markdown table of sizes, "| # Layers | 126 |" (mlcommons/training#799): the row names as people
# write them -> Megatron's argument names
_TABLE_ROW = re.compile(r"^\s*\|\s*([^|]+?)\s*\|\s*(\d[\d,]*)\s*\|\s*$")
_BOLD_CELL = re.compile(r"(?<=\|)(\s*)\*\*([^*|]+)\*\*(?=\s*\|)")
# ... and the same names written "hidden size = 3072" / "- Sequence length: 4096" (NVIDIA/Megatron-LM#965)
_NAMED_SIZES = re.compile(r"(?:^|[:,;]\s*)([A-Za-z][A-Za-z ]*[A-Za-z])\s*=\s*(\d+)\b(?=\s*(?:,|;|$))")
# a step time stated in a summary: "14,920.840 ms/step" (Megatron-Bridge#5722), "last_10_steps_step_time_ms_avg: 68588.270"
# (Bridge verification cards), "Final-10: 2481.140 ms, ..." (#5717), "Iteration time ~0.9 s" (swiss-ai/Megatron-LM#23)
_STATED_STEP = re.compile(r"(\d[\d,]*\.?\d*)\s*ms\s*/\s*(?:step|iter(?:ation)?)\b|step_time_ms\w*\s*[:=]\s*(\d+(?:\.\d+)?)"
                          r"|\bFinal-\d+:\s*(\d[\d,]*\.?\d*)\s*ms\b|\biteration time\s*[:=~≈]*\s*~?(\d+(?:\.\d+)?)\s*s\b"
                          r"|(\d+(?:\.\d+)?)\s*s\s*/\s*(?:step|iter(?:ation)?|it)\b"  # "**4.1314 s/it**" (Bridge#1976)
                          r"|(\d[\d,]*\.?\d*)\s*ms\s+per\s+(?:step|iter(?:ation)?)\b"
                          r"|(\d+(?:\.\d+)?)\s*s(?:ec(?:onds?)?)?\s+per\s+(?:step|iter(?:ation)?)\b",
                          re.I)
# NGC DGX Cloud benchmarking READMEs: "(sequence length) * (global batch size) / (training_step_timing) = (throughput in
# tokens per second)", then their run's numbers, "E.g. 4096 * 256 / 3.59 = 292082"
_THROUGHPUT_FORMULA = re.compile(r"\(sequence length\)\s*\*\s*\(global batch size\)\s*/", re.I)
_THROUGHPUT_EXAMPLE = re.compile(r"^\s*E\.g\.\s*(\d+)\s*\*\s*(\d+)\s*/\s*\d*\.?\d+\s*=")
# ms-swift's Megatron example scripts open with the run they made: GPUs x memory each (nvidia-smi's), seconds an
# iteration ("# 8 * 57GiB, 2.95s/it"; examples/megatron/moe/moe.sh)
# ms-swift's example scripts open with the run they made: "# 8 * 57GiB, 2.95s/it", "# FP8: 8 * 58GiB 8s/it" (the
# script's precision first), "# GPU Memory: 4 * 50GB, Training Speed 23s/it"
_SWIFT_EXAMPLE_HEAD = re.compile(r"\s*#\s*(?:(?:FP8|BF16|FP16|GPU Memory|Megatron-LM)\s*:\s*)?(?P<gpus>\d+)\s*\*\s*"
                                 r"(?P<gib>\d+(?:\.\d+)?)\s*Gi?B\s*[,;.]?\s*(?:Training Speed\s*:?\s*)?"
                                 r"(?P<step>\d+(?:\.\d+)?)\s*s/it\b", re.I)
# ... and the speed first: "# 28s/it; 4 * 75GiB", "# Megatron-LM: 9.6s/it; 16 * 60GiB" (not "# ZeRO3: 91.2s/it; ...",
# the same example run with DeepSpeed)
_SWIFT_EXAMPLE_HEAD_SPEED_FIRST = re.compile(r"\s*#\s*(?:(?:FP8|BF16|FP16|Megatron-LM)\s*:\s*)?(?P<step>\d+(?:\.\d+)?)\s*"
                                             r"s/it\s*[,;.]?\s*(?P<gpus>\d+)\s*\*\s*(?P<gib>\d+(?:\.\d+)?)\s*Gi?B\b",
                                             re.I)
_NAMED_SIZE = re.compile(r"^\s*(?:[-*]\s+)?([A-Za-z][A-Za-z _/#]*[A-Za-z])\s*[:=]\s*(\d[\d,]*)\s*$")  # FlagPerf's
# "tensor_parallel = 1" too (flagos-ai/FlagPerf#670)
# more step times stated in words (Megatron-Bridge verification PRs): "Steps 41-50: 20,147.290 ms average" (#5123),
# "Step time: 18,467.280 ms average" (#5266), "MXFP8 step time improved from 20.1s to 16.9s" (#1760: the after
# value), "The 52.4021-second median" (marin-community/marin#7668): (pattern, seconds per unit)
_STATED_STEP_WORDS = (
    # "latency per iteration `60.1` seconds" (MT-NLG 530B's step, as cli99/llm-analysis quotes it)
    (re.compile(r"\b(?:latency|time) per (?:iteration|step)\s*(?:of|is|was|:)?\s*`?(\d+(?:\.\d+)?)`?\s*s(?:ec(?:onds?)?)?\b",
                re.I), 1.0),
    (re.compile(r"(\d[\d,]*\.?\d*)\s*ms\s+(?:average|avg|mean|median)\b", re.I), 1e-3),
    # "step time: 18,467.280 ms", "the leaf records step_time 9926.350 ms" (Megatron-Bridge#5596), "step
    # time：16876.9ms" with a full-width colon (modelscope/ms-swift#8127)
    (re.compile(r"\bstep[ _]time\s*[:：=]?\s*(\d[\d,]*\.?\d*)\s*ms\b", re.I), 1e-3),
    # "- Step time: 1.93 s → 0.70 s (2.75×)": the first run's, as the first setup is the one read (NovaSky-AI/SkyRL#1734)
    (re.compile(r"\bstep time\s*[:：]\s*(\d+(?:\.\d+)?)\s*s\b", re.I), 1.0),
    # "step time improved from 20.1s to 16.9s"; "reduced Qwen step time from 24.714s to 20.992s" (Megatron-Bridge#5129)
    (re.compile(r"\bstep time\s+(?:\w+\s+)?from \d+(?:\.\d+)?\s*s to (\d+(?:\.\d+)?)\s*s\b", re.I), 1.0),
    (re.compile(r"\b(\d+(?:\.\d+)?)-second (?:median|average|mean)\b", re.I), 1.0),
    # "With profiler off, the steps take 12secs." (THUDM/slime#1139), "each step took about 3.5 s"
    (re.compile(r"\b(?:the |each |a )?steps?\s+(?:take|takes|took)\s+(?:about\s+|around\s+|~\s*)?(\d+(?:\.\d+)?)\s*"
                r"(?:s|secs?|seconds)\b", re.I), 1.0),
    # in Chinese: "每个iter耗时60s", "单步耗时 3.2 秒", "每步迭代时间为850ms" (per iteration / step, its time)
    (re.compile(r"(?:每个?|单)\s*(?:iter(?:ation)?|step|迭代|步)\s*(?:的)?\s*(?:训练|迭代)?\s*(?:耗时|时间|用时|需要|要)\s*"
                r"(?:是|为|约|大概|大约)?\s*(\d+(?:\.\d+)?)\s*(?:s|秒)(?![A-Za-z])", re.I), 1.0),
    (re.compile(r"(?:每个?|单)\s*(?:iter(?:ation)?|step|迭代|步)\s*(?:的)?\s*(?:训练|迭代)?\s*(?:耗时|时间|用时|需要|要)\s*"
                r"(?:是|为|约|大概|大约)?\s*(\d+(?:\.\d+)?)\s*(?:ms|毫秒)", re.I), 1e-3),
    # a validator's row, the measured value first: "| Median steady-state iteration time | 7.654155 s | 7.020375 s |"
    # (NVIDIA/Megatron-LM#6034)
    (re.compile(r"\b(?:median|mean|average)\s+(?:steady[- ]state\s+)?(?:iteration|step) time\s*\|\s*(\d+(?:\.\d+)?)\s*s\b",
                re.I), 1.0),  # "| Mean step time | 2.807s |" (NVIDIA-NeMo/RL#2438)
)
# NeMo RL's timing block under each step: "• Total step time: 66.55s" holds generation, log-prob inference and the
# weight sync as well; "• policy_training: 25.05s (37.6%)" is the Megatron (or DTensor) training (NVIDIA-NeMo/RL#1052)
_RL_POLICY_TRAINING = re.compile(r"^\s*(?:[•*-]\s*)?policy_training:\s*(\d+(?:\.\d+)?)\s*s\b")
# a step time stated as a range: "一个训练 step 4～5min", "一个训练step就是大概4-5min" (THUDM/slime#2324), "each step takes
# 4-5 minutes"; read as its middle (runs.py says so)
_STEP_RANGE = re.compile(r"(?:\bsteps?\b|step(?=[^\x00-\x7f])|迭代|\biter(?:ation)?s?\b)[^\d\n|]{0,12}?"
                         r"(\d+(?:\.\d+)?)\s*[～~\-–到至]\s*(\d+(?:\.\d+)?)\s*(min(?:ute)?s?|分钟|s|sec(?:ond)?s?|秒)"
                         r"(?![A-Za-z])", re.I)
# a peak stated in words: "Peak allocated memory: 62.166 GiB/GPU" (#5123), "Peak rank-0 memory: 72.066 GiB allocated
# / 75.340 GiB reserved" (#5266)
# a Megatron-Bridge verification card's keys: "peak_allocated_memory_gib: 158.220", "peak_reserved_memory_gib: 162.290"
# (NVIDIA-NeMo/Megatron-Bridge#5124)
_CARD_PEAK = re.compile(r"\bpeak_(allocated|reserved)_memory_gib\s*:\s*(\d+(?:\.\d+)?)\b")
# ... and as a sentence: "Observed peak memory was 65.223 GiB allocated / 72.356 GiB reserved" (Megatron-Bridge#5506)
_PROSE_PEAK = re.compile(r"\bpeak (?:allocated memory|(?:rank[- ](\d+) )?memory)\s*(?::|was|of)\s*(\d+(?:\.\d+)?)\s*GiB"
                         r"(?:\s*allocated\s*/\s*(\d+(?:\.\d+)?)\s*GiB reserved)?", re.I)
# the size first: "2377.386 ms average step time and 9.001975 GB peak allocated memory" (ISEEKYAN/Megatron-LM#169)
_PROSE_PEAK_AFTER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:GB|GiB)\s+peak allocated memory\b", re.I)
# Megatron's --recompute-activations (selective recompute) as a list item of a README's optimisations (FlagPerf)
_BULLET_RECOMPUTE = re.compile(r"^\s*[-*]\s+`?(?:--)?recompute[-_]activations`?\s*$", re.I)
_BATCH_OF = re.compile(r"\b(micro[- ]?batch size|global batch size)\s*(?:\(`?\w+`?\)\s*)?of\s+(\d+)\b", re.I)
# data parallelism only, with the node it fills: "DP8 on one 8-GPU node" (ISEEKYAN/Megatron-LM#169)
_DP_ON_NODES = re.compile(r"\bDP\s*=?\s*(\d+)\s+on\s+(one|a|\d+)\s+(\d+)[- ]GPU nodes?\b", re.I)
# a printed table's row, symbol, description and value apart by runs of spaces:
# "       b                                     Global batchsize   1200" (a DataFrame, NVIDIA/Megatron-LM#617)
_SPACED_ROW = re.compile(r"^\s*(?:\S{1,3}\s{2,})?([A-Za-z][A-Za-z /-]*[A-Za-z])\s{2,}(\d[\d,]*)\s*$")
TABLE_KEYS = {"layers": "num_layers", "transformer layers": "num_layers", "model dimension": "hidden_size",
              "hidden size": "hidden_size", "model dim": "hidden_size", "d model": "hidden_size",
              "attn heads": "num_attention_heads", "attention heads": "num_attention_heads", "heads": "num_attention_heads",
              "query heads": "num_attention_heads", "key value heads": "num_query_groups", "kv heads": "num_query_groups",
              "query groups": "num_query_groups", "ffn hidden size": "ffn_hidden_size", "ffn dimension": "ffn_hidden_size",
              "intermediate size": "ffn_hidden_size", "sequence length": "seq_length", "seq length": "seq_length",
              "global batch size": "global_batch_size", "micro batch size": "micro_batch_size",
              "tp": "tensor_model_parallel_size", "tensor parallel": "tensor_model_parallel_size",
              "tensor model parallel": "tensor_model_parallel_size",
              "pipeline model parallel": "pipeline_model_parallel_size",
              "expert model parallel": "expert_model_parallel_size",
              "pp": "pipeline_model_parallel_size", "pipeline parallel": "pipeline_model_parallel_size",
              "cp": "context_parallel_size", "context parallel": "context_parallel_size",
              "ep": "expert_model_parallel_size", "expert parallel": "expert_model_parallel_size",
              "experts": "num_experts", "vocab size": "vocab_size", "vocabulary size": "vocab_size",
              "ffn size": "ffn_hidden_size", "hidden ffn size": "ffn_hidden_size", "ffn hidden": "ffn_hidden_size",
              "micro batch": "micro_batch_size", "minibatch size": "micro_batch_size", "seqlength": "seq_length",
              "minibatchsize": "micro_batch_size", "global batch": "global_batch_size",
              "global batchsize": "global_batch_size", "micro batchsize": "micro_batch_size",
              "mini batch size": "micro_batch_size", "vpp": "virtual_pipeline_model_parallel_size",
              "etp": "expert_tensor_parallel_size"}


def _table_key(name: str) -> str | None:
    """The argument a table row's name gives, or None: "# Layers", "Key/Value Heads", "Tensor Parallel (TP)".

    >>> _table_key("# Layers"), _table_key("Key/Value Heads"), _table_key("Model Dimension"), _table_key("Loss")
    ('num_layers', 'num_query_groups', 'hidden_size', None)
    """
    key = re.sub(r"\(.*?\)|\bnum(?:ber of)?\b|\bsize of\b|[#*`]", " ", name.lower())
    key = " ".join(re.sub(r"[^a-z0-9]+", " ", key).split())
    return TABLE_KEYS.get(key) or TABLE_KEYS.get(key.removesuffix(" size"))


# A results table as people post them (Markdown with or without outer pipes), NVIDIA-NeMo/RL#966:
#   |Nodes|GPUs | Max Seq Length | Global Batch Size | Micro Batch Size | Expert parallelism | ... | s/iter|
#   |--|--|--|...
#   | 4 | 8 | 4k | 512 | 8 | 8| 1| **~13** |
# and alibaba/Pai-Megatron-Patch#658 ("配置 | SeqLen | GlobalBatchSize | GPUNum | TimePerIter (s) | ...", the first cell
# "tp1, ep8, pp32, vpp3, mbs=4"). Each row is one run: the first data row is read, the others are alternatives.
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)+\|?\s*$")
TABLE_COLUMNS = {"nodes": "_table_nodes", "nnodes": "_table_nodes", "gpus": "_table_gpus", "gpunum": "_table_gpus", "gpu num": "_table_gpus",
                 "gpus per node": "_table_gpus",
                 "num gpus": "_table_gpus", "max seq length": "seq_length", "seqlen": "seq_length",
                 "seq": "seq_length", "seq len": "seq_length", "sequence length": "seq_length",
                 "globalbatchsize": "global_batch_size", "gbs": "global_batch_size", "mbs": "micro_batch_size",
                 "micro batch size": "micro_batch_size", "expert parallelism": "expert_model_parallel_size",
                 "dp": "_prose_data_parallel_size",
                 "tensor parallelism": "tensor_model_parallel_size", "pipeline parallelism": "pipeline_model_parallel_size",
                 "context parallelism": "context_parallel_size",
                 "model parallel gpus": "tensor_model_parallel_size",
                 # verl's MoE recipe tables (docs/perf/dpsk.md): LAST_LAYER is the last pipeline stage's layer count
                 "last_layer": "decoder_last_pipeline_num_layers", "last layer": "decoder_last_pipeline_num_layers",
                 # Megatron-Bridge's performance summary: "| TP | PP | CP | VP | EP |"
                 "vp": "virtual_pipeline_model_parallel_size", "vpp": "virtual_pipeline_model_parallel_size"}
_CELL_RECOMPUTE = re.compile(r"\brecompute\s*[=:]\s*(full|select(?:ive)?|none)\b", re.I)
_STEP_COLUMN = re.compile(r"^(?:(?:steady|avg|average|mean|median)\s+)?"
                          r"(?:s\s*/\s*it(?:er)?|sec(?:onds)?\s*/\s*it(?:er)?|(?:time\s*per\s*iter(?:ation)?|step\s*time|"
                          r"iter(?:ation)?(?:\s*time)?|elapsed time per iter(?:ation)?)\s*\((s|sec|ms)\)|step\s+(ms|s)"
                          r"|(ms|s)\s*/\s*step)$", re.I)
# a results table's step columns named by their statistic, the unit in the cell ("| Mean step | Median step |" with
# "31.05s", NVIDIA-NeMo/Megatron-Bridge#3880: the median wins), and its peak column ("Peak max allocated", "62.036 GB")
# "Steady mean, iters 3-8" with "41.25s" (NVIDIA-NeMo/Megatron-Bridge#3862): the steady-state mean of a step
_STAT_STEP_COLUMN = re.compile(r"^(?:(median|mean|avg|average)\s+step(?:\s*time)?|steady(?:[- ]state)?\s+"
                               r"(median|mean|avg|average)(?:\s*(?:step(?:\s*time)?|iter(?:ation)?\s*time))?"
                               r"(?:\s*,\s*iters?\s*\d+\s*[-–]\s*\d+)?)$", re.I)
# a throughput column per GPU: "token/p/s" (FlagPerf's "平均单卡每秒处理的token数"), "tokens/s/GPU"
_TOKENS_COLUMN = re.compile(r"^tokens?\s*/\s*(?:p\s*/\s*s|s\s*/\s*(?:gpu|p)|sec\s*/\s*gpu)$", re.I)
_TFLOPS_COLUMN = re.compile(r"^(?:model\s+)?TF(?:LOP)?S?\s*/\s*s(?:ec)?\s*/\s*GPU$|^per\s+GPU\s+TF(?:LOP)?S?(?:\s*/\s*s)?$"
                            r"|^TF(?:LOP)?S?(?:\s*/\s*s)?\s+per\s+GPU$", re.I)
# Chinese headers (spaces removed): "GPU 数", "卡数", "序列长度"
_ZH_COLUMNS = {"gpu数": "_table_gpus", "卡数": "_table_gpus", "序列长度": "seq_length"}
_PRECISION_COLUMN = re.compile(r"^(?:precision|dtype|精度)$", re.I)
# sizes named together in one header, "并行（TP/PP/CP/EP/DP）", and a cell of as many numbers
_SLASH_HEADER = re.compile(r"(?<![A-Za-z])(?:TP|PP|VPP|CP|EP|ETP|DP)(?:\s*/\s*(?:TP|PP|VPP|CP|EP|ETP|DP))+(?![A-Za-z])",
                           re.I)
_SLASH_CELL = re.compile(r"\s*(\d+(?:\s*/\s*\d+)+)\s*")


def _precision_label(cell: str) -> str | None:
    """The precision a table cell names, or None: "bf16", "amp", "FP8-CS" (Megatron-Bridge's fp8_cs: current scaling)
    and "FP8-MX" / "MXFP8", "NVFP4".

    >>> [_precision_label(c) for c in ("BF16", "FP8-CS", "fp8_mx", "MXFP8", "NVFP4", "fast")]
    ['bf16', 'fp8', 'mxfp8', 'mxfp8', 'nvfp4', None]
    """
    word = cell.strip().strip("*`").lower().replace("_", "-")
    if word in _PRECISIONS | {"amp", "nvfp4"}:
        return word
    if m := re.fullmatch(r"fp8(?:[- ](cs|mx|sc|bs|ds|delayed|tensorwise|blockwise))?", word):
        return "mxfp8" if m.group(1) == "mx" else "fp8"
    return None
# a step time named plainly, its unit in the cell: "| Step time (100 iters) | 3.23s |"
_STEP_TIME_NAME = re.compile(r"^(?:steady(?:[- ]state)?\s+)?step\s*time\b(?:\s*\([^)]*\))?$", re.I)
# a step column with no unit anywhere: "| Time/iter |" with "14797.88823529412" (ROCm/Megatron-LM#45's perf summary,
# milliseconds): read only where the row's tokens per second per GPU, batch and sequence pin the unit (_unitless_step)
_UNITLESS_STEP_COLUMN = re.compile(r"^(?:time\s*/\s*iter(?:ation)?|time\s+per\s+iter(?:ation)?|iter(?:ation)?\s+time)$",
                                   re.I)
# the first header cell of a table whose rows are settings and whose columns are runs
_METRIC_HEADER = re.compile(r"metric|metrics|指标|setting|parameter|item", re.I)
_KEY_VALUE_HEADER = re.compile(r"field|key|name|setting|parameter", re.I)
_PEAK_COLUMN = re.compile(r"^peak\s+(?:max\s+)?allocated(?:\s+memory)?$", re.I)
# a peak that does not say allocated ("| peak mem | **47.7 GiB** | swift `memory(GiB)` |", fyh2001/megatron-sft-recipes):
# taken as the reserved peak, the larger and the one tools print (ms-swift's memory(GiB), nvidia-smi)
_PEAK_MEMORY_COLUMN = re.compile(r"^peak\s+mem(?:ory)?$", re.I)
_CELL_WITH_UNIT = re.compile(r"[~≈\s]*(\d[\d,]*(?:\.\d+)?)\s*(ms|s|GiB|GB)\s*")


def _table_cells(line: str, n: int | None = None) -> list[str]:
    """A row's cells; outer pipes dropped down to the separator's ``n`` columns (a header may open with an
    empty cell for the row names: "  | global batch size | ...", Megatron-LLaMA#22)."""
    out = [c.strip() for c in line.split("|")]
    while out and len(out) > (n or 0) and out[0] == "":
        out.pop(0)
    while out and len(out) > (n or 0) and out[-1] == "":
        out.pop()
    return out


def _column_key(name: str) -> str:
    """A table header as ``TABLE_COLUMNS`` spells it: lower case, words only ("GPU Num" -> "gpu num")."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


def _run_row(header: list[str], below: list[str], n: int, facts: LogFacts) -> list[str] | None:
    """Of a recipe table's rows (one per cluster size), the one of the GPU count the text names for its run ("...
    pretrain_grok1_314b_bf16_256_388660": the 256-GPU row, not the first); None when it names none or no row has it."""
    gpus = facts.args.get("_prose_num_gpus")
    column = next((k for k, name in enumerate(header)
                   if TABLE_COLUMNS.get(_column_key(name)) == "_table_gpus"
                   and name.strip("* ").lower() != "gpus per node"), None)
    if not isinstance(gpus, int) or column is None:
        return None
    for line in below:
        if "|" not in line:
            return None
        row = _table_cells(line, n)
        if len(row) == n and _cell_number(row[column]) == gpus:
            return row
    return None


_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_HTML_BREAK = re.compile(r"<br\s*/?>", re.I)


def _cell_number(text: str) -> float | None:
    """A table cell's number: "**~13**" -> 13, "4k" -> 4096, "1,024" -> 1024, "42.537" -> 42.537, and the first of
    an annotated cell, "~88  (Qwen3.5) / ~135 incl JIT" -> 88, "28.4 / 35" -> 28.4; else None.

    >>> _cell_number("~88  (Qwen3.5) / ~135 incl JIT (Qwen3.6)"), _cell_number("128K"), _cell_number("2 (full)")
    (88.0, 131072.0, 2.0)
    >>> _cell_number("[797*](https://developer.nvidia.com/blog/setting-new-records)")
    797.0
    """
    text = _MD_LINK.sub(r"\1", text)  # a link's text: "[797*](https://developer.nvidia.com/...)" (NeMo launcher)
    m = re.fullmatch(r"[*~≈\s]*(\d[\d,]*(?:\.\d+)?)\s*([kK])?[*\s]*(?:(?:\(|/)[^|]*)?", text)
    if not m:
        return None
    value = float(m.group(1).replace(",", ""))
    return value * 1024 if m.group(2) else value


def _later_table_rows(text: str) -> set[str]:
    r"""The data rows after the first of each results table (runs as rows, three columns or more), as the line
    reader sees them; not those of a table whose rows are settings ("| Micro-batch size | 2 | 4 |": runs as columns).

    >>> sorted(_later_table_rows("|cfg|parallel|tok/s|\n|--|--|--|\n|a|TP1PP1|3.1|\n|b|TP2PP1|3.2|\n|c|TP1PP2|3|\nx"))
    ['|b|TP2PP1|3.2|', '|c|TP1PP2|3|']
    >>> _later_table_rows("| |H200|B300|\n|--|--|--|\n|Micro-batch size|2|4|\n|Global batch size|128|128|")
    set()
    """
    lines = text.splitlines()
    later: set[str] = set()
    for i in range(1, len(lines) - 1):
        if not _TABLE_SEPARATOR.match(lines[i]) or "|" not in lines[i - 1] or len(_table_cells(lines[i])) < 3:
            continue
        rows = []
        for line in lines[i + 1:]:
            if "|" not in line:
                break
            rows.append(line)
        if not rows:
            continue
        firsts = [_table_cells(row)[0] if _table_cells(row) else "" for row in rows]
        if sum(1 for c in firsts if _table_key(c) or TABLE_COLUMNS.get(_column_key(c))) >= 2:
            continue  # a settings-per-row table
        first = _table_cells(rows[0])
        if not (_COMPACT_SIZE_ANY.search(rows[0]) or sum(1 for c in first if _cell_number(c) is not None) >= 2):
            continue  # the first row states no run (a tracking table's work items)
        later.update(strip_prefix(row) for row in rows[1:])
    return later


# a log-summary script's table, metrics as rows and measures as columns ("| Metric | Throughput (TFLOP/s) | Time per
# Iter (ms) |", then "| Mean | 185.64 | 284.30 |", "| Median | 185.70 | 284.20 |"; NVIDIA/Megatron-LM#3524)
_SUMMARY_HEADER = re.compile(r"^\s*\|\s*Metric\s*\|.*\bTime per Iter\w*\s*\((ms|s)\)", re.I)
_SUMMARY_ROW = re.compile(r"^\s*\|\s*(Median|Mean|Average)\s*\|", re.I)


def _wandb_summary(facts: LogFacts) -> None:
    """A W&B run summary's last step time, where nothing else times the run, and the global batch its consumed samples
    and global step imply (NeMo logs the step 0-based: 64,000,000 samples at global_step 1,999,999 are 2,000,000 steps
    of 32)."""
    step = facts.args.pop("_wandb_train_step_timing", None)
    consumed, done = facts.args.pop("_wandb_consumed_samples", None), facts.args.pop("_wandb_global_step", None)
    if step and not (facts.iterations or facts.nemo_steps or facts.stated_step_s):
        facts.stated_step_s = step
        facts.args["_wandb_step"] = True
    if consumed and done is not None and consumed % (done + 1) == 0:
        facts.args.setdefault("global_batch_size", round(consumed / (done + 1)))
    if (scale := facts.args.pop("_wandb_loss_scale", None)) and scale > 1:  # a dynamic loss scale: an fp16 run
        facts.loss_scaled = True


def _metric_summary(text: str, facts: LogFacts) -> None:
    r"""The step time (and TFLOP/s) of the first such summary table: its median row, else its mean. Later tables are
    other runs (a PR's before / after) and are not read.

    >>> f = LogFacts(); _metric_summary("| Metric | Throughput (TFLOP/s) | Time per Iter (ms) |\n---\n"
    ...                                 "| Mean | 185.64 | 284.30 |\n| Median | 185.70 | 284.20 |", f)
    >>> f.stated_step_s, f.reported_tflops
    (0.2842, [185.7])
    """
    if facts.iterations or facts.nemo_steps or facts.stated_step_s:
        return
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not (m := _SUMMARY_HEADER.match(line)):
            continue
        header = [c.strip().lower() for c in line.strip().strip("|").split("|")]
        time_col = next(k for k, c in enumerate(header) if c.startswith("time per iter"))
        rate_col = next((k for k, c in enumerate(header) if "tflop" in c), None)
        rows: dict[str, list[str]] = {}
        for row in lines[i + 1:]:
            if _SUMMARY_HEADER.match(row) or not row.strip():
                break
            if r := _SUMMARY_ROW.match(row):
                rows[r.group(1).lower()] = [c.strip() for c in row.strip().strip("|").split("|")]
        cells = rows.get("median") or rows.get("mean") or rows.get("average")
        if cells and len(cells) == len(header):
            try:
                facts.stated_step_s = float(cells[time_col]) / (1e3 if m.group(1).lower() == "ms" else 1.0)
                if rate_col is not None:
                    facts.reported_tflops.append(float(cells[rate_col]))
            except ValueError:
                pass
        return


def _tables(text: str, facts: LogFacts) -> None:
    r"""Sizes, GPU count and step time from the first data row of a results table (``_TABLE_SEPARATOR``).

    >>> f = LogFacts(); _tables("|Nodes|GPUs|Max Seq Length|Global Batch Size|s/iter|\n|--|--|--|--|--|\n"
    ...                         "| 4 | 8 | 4k | 512 | **~13** |", f)
    >>> f.args, f.stated_step_s
    ({'seq_length': 4096, 'global_batch_size': 512, '_prose_num_gpus': 32}, 13.0)
    """
    cells = _table_cells
    lines = text.splitlines()
    for i in range(1, len(lines) - 1):
        if not _TABLE_SEPARATOR.match(lines[i]) or "|" not in lines[i - 1]:
            continue
        n = len(cells(lines[i]))
        # a header's line breaks and emphasis ("Sequence <br> Length", "***Est. time ...***") are not its words
        header, row = [_HTML_BREAK.sub(" ", c) for c in cells(lines[i - 1], n)], cells(lines[i + 1], n)
        header = [" ".join(c.split()) for c in header]
        below = i + 1
        while sum(1 for c in row if c) <= 1 and below + 1 < len(lines) and "|" in lines[below + 1]:
            below += 1  # a section row ("| Cross-node EP strategy | | | ...", Megatron-MoE-ModelZoo): the next
            row = cells(lines[below], n)
        if not (len(row) == len(header) == n):
            continue
        row = _run_row(header, lines[below:], n, facts) or row
        found: dict[str, Any] = {}
        pairs = list(zip(header, row))
        if (n >= 3 and _METRIC_HEADER.fullmatch(header[0].strip("* "))) \
                or (n == 2 and _KEY_VALUE_HEADER.fullmatch(header[0].strip("* ")) and header[1].strip("* ").lower() == "value"):
            # (and a card's "| Field | Value |" rows, Megatron-Bridge's docs/model-verification: "| Precision | `fp8_mx` |")
            # runs as columns, settings as rows ("| Metric | H200 (p5en) | B300 (p6-b300) |", awslabs's Qwen3-8B
            # README): the first run's column, each row's name its header, its GPU the one its header names
            pairs = []
            if (g := _GPU_NAME.search(header[1])) and facts.run_gpu is None:
                facts.run_gpu = gpu_key(g)
            for line in lines[i + 1:]:
                if "|" not in line or _TABLE_SEPARATOR.match(line):
                    break
                cells_of = cells(line, n)
                if len(cells_of) == n:
                    pairs.append((_HTML_BREAK.sub(" ", cells_of[0]), cells_of[1]))
        for name, cell in pairs:
            sizes = {PROSE_SIZE_ARGS[k.upper()]: int(v) for k, v in _COMPACT_SIZE_ANY.findall(cell)}
            if len(sizes) >= 2:  # a layout cell: "tp1, ep8, pp32, vpp3, mbs=4, recompute=full"
                found.update(sizes)
                if r := _CELL_RECOMPUTE.search(cell):  # the row's own recompute wins over flags quoted around it
                    facts.args["recompute_granularity"] = "selective" if r.group(1).lower().startswith("sel") \
                        else r.group(1).lower()
                    facts.args["_recompute_from_table"] = True
                    if facts.args["recompute_granularity"] != "selective":
                        facts.args.pop("recompute_modules", None)
                continue
            column = name.strip("* ")
            if (names := _SLASH_HEADER.search(column)) and (values := _SLASH_CELL.fullmatch(cell)):
                # sizes in one column, "并行（TP/PP/CP/EP/DP）" / "TP/DP/PP" with "1/1/4/8/1" (AMD Primus's blog,
                # Megatron-LM's discussions)
                keys, numbers = re.split(r"\s*/\s*", names.group(0).upper()), re.split(r"\s*/\s*", values.group(1))
                if len(keys) == len(numbers):
                    for key, number in zip(keys, numbers):  # (the first such column: "Homo TP/DP/PP" before
                        found.setdefault("_prose_data_parallel_size" if key == "DP" else PROSE_SIZE_ARGS[key],
                                         int(number))  # "Hetero TP/DP/PP")
                    continue
            if _PRECISION_COLUMN.match(column) and (label := _precision_label(cell)):
                found["precision"] = label  # FlagPerf's "precision" (fp32/amp/fp16/bf16), Primus's "精度" (FP8-CS)
                continue
            unit = _CELL_WITH_UNIT.fullmatch(cell.strip("*"))  # (a bold value: "**2.20 s**")
            if unit and (stat := _STAT_STEP_COLUMN.match(column) or _STEP_TIME_NAME.match(column)) \
                    and unit.group(2) in ("s", "ms"):
                if stat.re is _STEP_TIME_NAME.raw or (stat.group(1) or stat.group(2)).lower() == "median" \
                        or "_step_s" not in found:
                    found["_step_s"] = float(unit.group(1).replace(",", "")) / (1e3 if unit.group(2) == "ms" else 1)
                continue
            if unit and _PEAK_COLUMN.match(column) and unit.group(2) in ("GB", "GiB"):
                found["_peak_mib"] = float(unit.group(1).replace(",", "")) * 1024  # "GB" as torch reports it, 2^30
                continue
            if unit and _PEAK_MEMORY_COLUMN.match(column) and unit.group(2) in ("GB", "GiB"):
                found["_reserved_mib"] = float(unit.group(1).replace(",", "")) * 1024
                continue
            if found_cell := _dispatcher_or_recompute_cell(column, cell):
                found.update(found_cell)
                continue
            value = _cell_number(cell)
            if value is None:
                continue
            if step := _STEP_COLUMN.match(column):
                found["_step_s"] = value / (1e3 if "ms" in step.groups() else 1)
                continue
            if _UNITLESS_STEP_COLUMN.match(column):
                found["_step_unitless"] = value
                continue
            if _TOKENS_COLUMN.match(column):  # FlagPerf's "token/p/s": tokens per second per GPU
                found["_tokens_per_gpu"] = value
                continue
            if key := _ZH_COLUMNS.get("".join(column.lower().split())):
                found[key] = int(value) if value == int(value) else value
                continue
            if _TFLOPS_COLUMN.match(column):  # "TF/s/GPU" (Megatron-Bridge#4226), "TFLOP/s/GPU"
                found["_tflops"] = value
                continue
            key = TABLE_COLUMNS.get(_column_key(name)) or _table_key(name)
            if key and value == int(value):
                found[key] = int(value)
        if not found:
            continue
        _unitless_step(found)
        nodes, gpus = found.pop("_table_nodes", None), found.pop("_table_gpus", None)
        if gpus:  # with a nodes column, the GPUs column counts per node (the post's layout of NeMo-RL#966)
            found["_prose_num_gpus"] = gpus * nodes if nodes else gpus
        elif nodes:  # nodes alone ("| NNODES |", Megatron-MoE-ModelZoo): runs.py takes the named GPU's node size
            found["_prose_nodes"] = nodes
        if "_step_s" in found and facts.stated_step_s is None:
            facts.stated_step_s = found.pop("_step_s")
        if (tokens := found.pop("_tokens_per_gpu", None)) and facts.stated_tokens_per_gpu is None:
            facts.stated_tokens_per_gpu = tokens
        if (tflops := found.pop("_tflops", None)) and not facts.reported_tflops:
            facts.reported_tflops.append(tflops)
        found.pop("_step_s", None)
        if (peak := found.pop("_peak_mib", None)) and not facts.memory:
            facts.memory[UNKNOWN_RANK] = (peak, peak)
        if (reserved := found.pop("_reserved_mib", None)) and not facts.memory and facts.reserved_only_mib is None:
            facts.reserved_only_mib = reserved
        for key, value in found.items():
            facts.args.setdefault(key, value)


def _unitless_step(found: dict[str, Any]) -> None:
    """A row's step time from a column without a unit (``_UNITLESS_STEP_COLUMN``): seconds or milliseconds, whichever
    makes the row's ``global batch x sequence / (tokens/s/GPU x step)`` a whole GPU count (within 1 %, a multiple of
    its nodes where the row has a nodes column); neither fits, or both: not read. (runs.py ``_gpus_from_rates`` then
    derives the GPU count, where no column states it, from the same rates.)

    >>> f = {"_step_unitless": 14797.888, "_tokens_per_gpu": 1107.185, "global_batch_size": 64, "seq_length": 2048,
    ...      "_table_nodes": 1}
    >>> _unitless_step(f); round(f["_step_s"], 3)
    14.798
    """
    value, tokens = found.pop("_step_unitless", None), found.get("_tokens_per_gpu")
    batch, seq, nodes = found.get("global_batch_size"), found.get("seq_length"), found.get("_table_nodes") or 1
    if not (value and tokens and batch and seq):
        return
    fits = []
    for step in (value, value / 1e3):
        gpus = batch * seq / (tokens * step)
        whole = round(gpus)
        if whole >= 1 and abs(gpus - whole) <= 0.01 * gpus and whole % nodes == 0:
            fits.append((step, whole))
    if len(fits) == 1:
        found.setdefault("_step_s", fits[0][0])


# a results table's MoE dispatcher and recompute cells (Megatron-MoE-ModelZoo's best-practice tables: "| DeepEP |",
# "| norm, act |"): the dispatcher's name, and the selective recompute's modules by their short names
_TABLE_DISPATCHERS = {"deepep": ("flex", "deepep"), "hybridep": ("flex", "hybridep"), "alltoall": ("alltoall", None),
                      "a2a": ("alltoall", None), "all-to-all": ("alltoall", None), "allgather": ("allgather", None)}
_TABLE_RECOMPUTE_WORDS = {"norm": "layernorm", "layernorm": "layernorm", "act": "moe_act", "moe_act": "moe_act",
                          "attn": "core_attn", "core_attn": "core_attn", "mla_up_proj": "mla_up_proj", "mlp": "mlp",
                          "moe": "moe", "shared_experts": "shared_experts"}


def _dispatcher_or_recompute_cell(column: str, cell: str) -> dict[str, Any]:
    """The arguments a results table's "Dispatcher" or "recompute" cell states (empty for any other column).

    >>> _dispatcher_or_recompute_cell("Dispatcher", "DeepEP"), _dispatcher_or_recompute_cell("recompute", "norm, act")
    ({'moe_token_dispatcher_type': 'flex', 'moe_flex_dispatcher_backend': 'deepep'}, \
{'recompute_granularity': 'selective', 'recompute_modules': 'layernorm moe_act', '_recompute_from_table': True})
    """
    name, value = column.strip("`* ").lower().replace("_", " "), cell.strip().strip("`* ").lower()
    if name in ("dispatcher", "token dispatcher", "moe dispatcher") and value in _TABLE_DISPATCHERS:
        kind, backend = _TABLE_DISPATCHERS[value]
        return {"moe_token_dispatcher_type": kind, **({"moe_flex_dispatcher_backend": backend} if backend else {})}
    if name not in ("recompute", "recomputation", "activation recompute"):
        return {}
    if value in ("full", "none", "/", "-", "no", "false"):
        return {"recompute_granularity": "full" if value == "full" else "none", "_recompute_from_table": True}
    words = [w for w in re.split(r"[\s,+/&]+", value) if w]
    if words and all(w in _TABLE_RECOMPUTE_WORDS for w in words):
        return {"recompute_granularity": "selective", "recompute_modules": " ".join(_TABLE_RECOMPUTE_WORDS[w] for w in words),
                "_recompute_from_table": True}
    return {}


def _prose_set(facts: LogFacts, key: str, value: Any) -> None:
    """A value read from prose, unless the text already gave one; a flag or script variable read later replaces it
    (``_script_args``): "## GPT-3 models use 2K sequence length" above "seq_len=32768" (Megatron-DeepSpeed#415)."""
    if key == "_prose_num_gpus" and not value:  # a zero count ("0 GPUs") is none
        return
    if key not in facts.args:
        facts.args[key] = value
        facts.prose_keys.add(key)


_OTHER_GPUS_ASIDE = re.compile(rf"\([^()]*\b{_GPU_NAMES_RE}\b[^()]*\b(?:uses?|sister|others?|vs\.?|versus|unlike)\b"
                               r"[^()]*\)", re.I)
_RANK_RANGE = re.compile(r"\b(TP|PP|CP|EP|DP)(\d+)\s*[–—~-]\s*\1(\d+)\b", re.I)
_EXAMPLE_TAIL = re.compile(r"(?:例如|比如|e\.g\.|for example)[\s:：,，]*(?:(?:TP|PP|DP|EP|CP|VPP|ETP)\s*\d+[\s/,_x]*)+",
                           re.I)
_CARD_GRID = re.compile(r"卡\s*[（(]\s*(\d+)\s*[x×]\s*(\d+)\s*[）)]")


# sizes named together and their values together, in the same order: "GBS/MBS 1024/2" (Megatron-Bridge's
# verification cards), "TP/PP/EP = 2/4/8"
_SIZE_NAMES = r"(?:TP|PP|VPP|CP|EP|ETP|DP|MBS|GBS)"
# sizes named at the end of a wrapped line and their values at the start of the next (a YAML folded scalar:
# "... VPP3, GBS/MBS\n  8192/1, and sequence length 4096", Megatron-Bridge's model verification cards)
_WRAPPED_SLASH_SIZES = re.compile(rf"(?<![A-Za-z/])({_SIZE_NAMES}(?:/{_SIZE_NAMES})+)[ \t]*\r?\n[ \t]*(?=\d+(?:/\d+)+(?![\d/.]))",
                                  re.I)
# a command line hard-wrapped at a terminal's width inside a flag ("... --ffn-hidden-siz\ne 1792 --swiglu",
# SeunghyunSEO/Megatron-LM moe_exp/README.md): the two parts of the flag, joined when only together they name a known
# argument (_join_wrapped_flags)
_WRAPPED_FLAG = re.compile(r"(--[A-Za-z][\w-]*)\r?\n(?=([A-Za-z][\w-]*)(?:[ \t=]|$))", re.M)


def _join_wrapped_flags(text: str) -> str:
    r"""``text`` with each flag cut by a hard wrap joined again (``_WRAPPED_FLAG``).

    >>> _join_wrapped_flags("--num-query-groups 1 --ffn-hidden-siz\ne 1792 --swiglu\n--bf16\nline two")
    '--num-query-groups 1 --ffn-hidden-size 1792 --swiglu\n--bf16\nline two'
    """
    def name(flag: str) -> str:
        return flag.lstrip("-").replace("-", "_")

    def join(m: re.Match) -> str:
        whole = name(m.group(1) + m.group(2))
        return m.group(1) if whole in CONFIG_KEYS and name(m.group(1)) not in CONFIG_KEYS else m.group(0)
    return _WRAPPED_FLAG.sub(join, text) if "--" in text else text


_SLASH_SIZES = re.compile(rf"(?<![A-Za-z/])({_SIZE_NAMES}(?:\s*/\s*{_SIZE_NAMES})+)\s*[:=]?\s*(\d+(?:\s*/\s*\d+)+)(?![\d/.])",
                          re.I)


def _paired_sizes(m: re.Match[str]) -> str:
    names, values = re.split(r"\s*/\s*", m.group(1)), re.split(r"\s*/\s*", m.group(2))
    if len(names) != len(values):
        return m.group(0)
    return " ".join(f"{n.upper()}{v}" for n, v in zip(names, values))


# SGLang's log-line tag: the time and this process's ranks ("[2026-04-04 06:50:54 TP7 EP7]", radixark/miles' logs;
# "[2025-11-25 08:01:52 DP0 TP0]")
_ENGINE_RANK_TAG = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\s+(?:DP|TP|EP|PP|CP)\d+)+\]")


def _prose_sizes(line: str, facts: LogFacts) -> None:
    """Parallel sizes, batch, sequence length and GPU count written as prose (``_PROSE_PARALLEL`` ...); a line
    must name two sizes in the compact form ("TP1/PP1", "MBS1, GBS1024") for them to count, or one with its word
    ("the pp parallelism is 4"); comment lines (``#``, not a Markdown heading) do not.

    >>> f = LogFacts(); _prose_sizes("- Parallelism: TP1/PP1/CP1/EP8/ETP1", f); f.args["expert_model_parallel_size"]
    8
    >>> f = LogFacts(); _prose_sizes("Tensor Parallelism (TP): 4", f); f.args
    {'tensor_model_parallel_size': 4}
    >>> f = LogFacts(); _prose_sizes("- Hardware/precision: 2 nodes, 16 H100s, BF16 compute", f); f.args
    {'_prose_num_gpus': 16}
    >>> f = LogFacts(); _prose_sizes("on 4 H100 nodes", f); f.args  # nodes, not GPUs
    {}
    >>> f = LogFacts(); _prose_sizes("## Verified compute (1 × 8 H200, packed)", f); f.args  # a heading is text
    {'_prose_num_gpus': 8}
    >>> f = LogFacts(); _prose_sizes("DGX nodes, each equipped with 8 H100 GPUs.", f); _prose_sizes("#nodes=4, DP=1", f)
    >>> f.args  # a node's GPU count, and a results row's node count
    {'_prose_gpus_per_node': 8, '_prose_nodes': 4}
    >>> f = LogFacts(); _prose_sizes("on two DGX nodes, each with 8 H100 GPUs", f); f.args
    {'_prose_gpus_per_node': 8, '_prose_nodes': 2}
    >>> f = LogFacts(); _prose_sizes("- **Hardware**: 16 nodes × 8 H800 GPUs = **128 GPUs**", f); f.args
    {'_prose_num_gpus': 128}
    >>> [_prose_sizes(t, f := LogFacts()) or f.args.get("_prose_num_gpus") for t in ("增加资源到8卡", "2机16卡",
    ...  "在16机 * A800 80 GB * 8卡的机器上", "H800 32卡或64卡")]  # Chinese posts: "N卡" is N GPUs
    [8, 16, 128, None]
    >>> f = LogFacts(); _prose_sizes("训练32k的上下文，每一张卡显存都满了", f); f.args["seq_length"], f.oom
    (32768, True)
    >>> f = LogFacts(); _prose_sizes("每个iter耗时60s", f); f.stated_step_s  # a step time in Chinese
    60.0
    >>> f = LogFacts(); _prose_sizes("a 1B MQA model on 2 A40 GPUS, and only use data parallelism", f); f.args
    {'_prose_mqa': True, 'tensor_model_parallel_size': 1, 'pipeline_model_parallel_size': 1, '_prose_num_gpus': 2}
    >>> f = LogFacts(); _prose_sizes("i test llama 13b, the pp parallelism is 4 and global-batch-size = 64", f); f.args
    {'pipeline_model_parallel_size': 4, 'global_batch_size': 64}
    >>> f = LogFacts(); _prose_sizes("- `a.yaml`: TP2/PP1/EP16, MBS3", f); _prose_sizes("- `b.yaml`: TP2/PP4, VPP12", f)
    >>> f.args["pipeline_model_parallel_size"], "virtual_pipeline_model_parallel_size" in f.args  # PP restated
    (1, False)
    >>> f = LogFacts(); _prose_sizes("The global batch size and the mini batch size of the testing are 256 and 4 "
    ...                              "respectively.", f); f.args
    {'global_batch_size': 256, 'micro_batch_size': 4}
    >>> f = LogFacts(); _prose_sizes("at TP1/PP1/CP1/EP8/ETP1, DP16, GBS/MBS 1024/2, and 32-way", f)
    >>> f.args["micro_batch_size"], f.args["global_batch_size"]
    (2, 1024)
    """
    if line.strip() in facts.later_rows:  # another run's row: "| A800单机8卡（1x8） | TP1PP1DP8 | GAS=16(GBS=128...) |"
        return  # under the first's (FlagPerf's READMEs); _tables reads the row of the run
    if _NVIDIA_SMI_ROW.match(line):  # "|   7  NVIDIA H100 80GB HBM3  Off |": nvidia-smi's GPU index, no count
        return
    line = _SLASH_SIZES.sub(_paired_sizes, line)  # "GBS/MBS 1024/2" -> "GBS1024 MBS2"
    stripped = line.lstrip()
    if (m := _PROSE_NODES_EQ.match(line)) and stripped.startswith("#nodes"):  # a results row, not a comment
        _prose_set(facts, "_prose_nodes", int(m.group(1)))
    if _THROUGHPUT_FORMULA.search(line):
        facts.throughput_formula = True
    elif facts.throughput_formula and (m := _THROUGHPUT_EXAMPLE.search(line)):
        _prose_set(facts, "seq_length", int(m.group(1)))  # "E.g. 4096 * 256 / 3.59 = 292082" under the formula
        _prose_set(facts, "global_batch_size", int(m.group(2)))
    if m := _SWIFT_EXAMPLE_HEAD.match(line) or _SWIFT_EXAMPLE_HEAD_SPEED_FIRST.match(line):
        # "# 8 * 57GiB, 2.95s/it": the run the example script made
        _prose_set(facts, "_prose_num_gpus", int(m.group("gpus")))
        if facts.stated_step_s is None:
            facts.stated_step_s = float(m.group("step"))
            # its memory is ms-swift's get_max_cuda_memory, the peak reserved (as its 'memory(GiB)' field)
            facts.reserved_only_mib = max(facts.reserved_only_mib or 0.0, float(m.group("gib")) * 1024)
        return
    if stripped.startswith("#") and not re.match(r"#{2,6}\s", stripped) \
            and not (facts.title and line.strip() == facts.title):  # a script's or config's comment (often
        return  # the alternatives not taken); "## ..." is a Markdown heading, text like any other
    line = _RANK_TAGS.sub(" ", line).replace("\\*", "*")  # Markdown's escaped "4\*H200" (THUDM/slime#1022)
    if _ENGINE_WORDS.search(line):  # an inference engine's TP is not Megatron's: "在vllm加载模型(TP=8)时会报OOM，
        # 加大TP=32" (modelscope/ms-swift#9093), "Training parallelism: TP=4, PP=2, EP=16, SGLang TP=8" (radixark/miles#968)
        line = _TP_BEFORE_ENGINE.sub(" ", line)
        m = _ENGINE_WORDS.search(line)
        line = line[:m.start()] + _TP_WORD.sub(" ", line[m.start():])
    if facts.title and line.strip() == facts.title and (m := _TITLE_PRECISION.search(line)):
        # "Found no performance gain training Mixtral-8x7B with FP8 on H800" (NVIDIA/NeMo#11959): the title's run
        facts.args.setdefault("_prose_precision", {"mxfp8": "fp8", "nvfp4": "fp4"}.get(m.group(1).lower(),
                                                                                       m.group(1).lower()))
    # what other GPUs' runs use, in an aside: "variant with `micro_batch_size=4` (the GB200 sister uses MBS=2;
    # B200/B300/H100 use MBS=1)" (NVIDIA-NeMo/Megatron-Bridge#3767)
    line = _OTHER_GPUS_ASIDE.sub(" ", line)
    # a legend's example is not the run: "格式为TPxPPyDPz，例如TP2PP1DP4" ("the format is ..., e.g. ...", FlagPerf)
    line = _EXAMPLE_TAIL.sub(" ", line)
    # a range of ranks is not a size, but from rank 0 it counts them: "across PP0–PP3" is 4 stages (Megatron-LM#6392)
    for m in _RANK_RANGE.finditer(line):
        if int(m.group(2)) == 0 and m.group(1).upper() in PROSE_SIZE_ARGS:
            _prose_set(facts, PROSE_SIZE_ARGS[m.group(1).upper()], int(m.group(3)) + 1)
    line = _RANK_RANGE.sub(" ", line)
    if m := _CARD_GRID.search(line):  # FlagPerf's configuration cell "H800单机8卡（4x8）": 4 nodes of 8
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)) * int(m.group(2)))
    # an OOM not denied by the words just before it: "it OOMs at zero2/zero3... does not OOM when using CPU offloading"
    # (EleutherAI/gpt-neox#892) is one
    if m := next((m for pattern in (_PROSE_OOM, _PROSE_OOM_CN) for m in pattern.finditer(line)
                  if not _PROSE_NO_OOM.search(line[max(0, m.start() - 40):m.end()])
                  and not _ATTEMPT_BEFORE.search(line[max(0, m.start() - 120):m.start()])), None):
        facts.oom = True
        _prose_set(facts, "_prose_oom", line[max(0, m.start() - 40):m.end() + 20].strip())
        if _CHECKPOINT_OOM.search(line):
            facts.args.setdefault("_checkpoint_oom", line.strip()[:120])
        if cond := _oom_condition(line, m):  # "When tp=1 is set, OOM occurs": maybe another layout's (runs.py)
            facts.args.setdefault("_prose_oom_if", cond)
        else:  # an OOM the text states without a condition: the run's, whatever another sentence says
            facts.args["_prose_oom_always"] = True
    # a Markdown table's bold cells, "| **TP** | **4** |" (NVIDIA-NeMo/Megatron-Bridge#4214), are its plain ones
    row = _TABLE_ROW.match(_BOLD_CELL.sub(r"\1\2", line)) or _NAMED_SIZE.match(line) or _SPACED_ROW.match(line)
    names = [_table_key(part) for part in row.group(1).split("/")] if row else []
    if name := next((n for n in names if n), None):  # | # Layers | 126 |, hidden size = 3072, "h  Hidden size  8192"
        _prose_set(facts, name, int(row.group(2).replace(",", "")))
        return
    for m in _NAMED_SIZES.finditer(line):  # "Setup: tensor model parallel size = 4, pipeline model parallel size = 2"
        if name := _table_key(m.group(1)):
            _prose_set(facts, name, int(m.group(2)))
    if m := _SUMMARY_TFLOPS.search(line):
        facts.reported_tflops.append(float(m.group(1).replace(",", "")))
    elif (m := _STATED_TFLOPS.search(line)) and not facts.reported_tflops \
            and not re.search(r"\bpeak\b", line[max(0, m.start() - 40):m.start()], re.I):
        # (not a GPU's peak: "I considered a peak capacity of 312 TFLOP/s/GPU", NVIDIA/Megatron-LM#1841)
        facts.reported_tflops.append(float(m.group(1).replace(",", "")))
    if (m := _STATED_TOKENS.search(line) or _STATED_TOKENS_LABEL.search(line)) and facts.stated_tokens_per_gpu is None \
            and not _REFERENCE_RATE.search(line[:m.start()]):
        facts.stated_tokens_per_gpu = float(m.group(1).replace(",", ""))
    if (m := _PROSE_PRECISION.search(line)) \
            and not _COMPARED_BEFORE.search(line[:m.start()]):
        word = next(g for g in m.groups() if g).lower()
        facts.args.setdefault("_prose_precision", {"mxfp8": "fp8", "nvfp4": "fp4"}.get(word, word))
        if word == "mxfp8":
            facts.args.setdefault("_prose_fp8_recipe", "mxfp8")
    if m := _PROSE_DISPATCHER.match(line):  # "- Dispatcher: DeepEP" (Megatron-MoE-ModelZoo's experiment setups)
        for key, value in _dispatcher_or_recompute_cell("dispatcher", m.group(1)).items():
            _prose_set(facts, key, value)
    if _PROSE_CURRENT_SCALING.search(line):
        facts.args.setdefault("_prose_fp8_recipe", "tensorwise")
    if m := _CUT_MODEL.search(line):  # "DeepSeek-V3 (4 layers + MTP)": a model cut to a few layers
        _prose_set(facts, "num_layers", int(m.group(1)))
    for m in _PROSE_WAY.finditer(line):
        _prose_set(facts, _WAY_ARGS[m.group(2).lower()], int(m.group(1)))
    if m := _RL_POLICY_TRAINING.match(line):  # the policy's training, not the RL step that holds it
        facts.stated_step_s = float(m.group(1))
        facts.args["_rl_policy_training"] = True
    if (m := _STATED_STEP.search(line)) and facts.stated_step_s is None and not _TQDM.search(line):
        value = float(next(g for g in m.groups() if g).replace(",", ""))
        facts.stated_step_s = value / 1e3 if (m.group(1) or m.group(2) or m.group(3) or m.group(6)) else value
    for pattern, unit in _STATED_STEP_WORDS:
        if facts.stated_step_s is None and (m := pattern.search(line)):
            facts.stated_step_s = float(m.group(1).replace(",", "")) * unit
    if facts.stated_step_s is None and (m := _STEP_RANGE.search(line)):  # "step 4～5min": the middle of the range
        low, high = float(m.group(1)), float(m.group(2))
        if 0 < low <= high <= 2 * low:
            facts.stated_step_s = (low + high) / 2 * (60.0 if m.group(3).lower() in ("min", "mins", "minutes", "分钟")
                                                      else 1.0)
            facts.args["_step_range"] = m.group(0).strip()
    if (m := _CARD_PEAK.search(line)) and set(facts.memory) <= {UNKNOWN_RANK}:
        allocated, reserved = facts.memory.get(UNKNOWN_RANK, (0.0, 0.0))
        value = float(m.group(2)) * 1024
        facts.memory[UNKNOWN_RANK] = (value, max(reserved, value)) if m.group(1) == "allocated" else (allocated, value)
    if (m := _PROSE_PEAK.search(line)) and not facts.memory:
        rank = int(m.group(1)) if m.group(1) is not None else UNKNOWN_RANK
        allocated = float(m.group(2)) * 1024
        facts.memory[rank] = (allocated, float(m.group(3)) * 1024 if m.group(3) else allocated)
    elif (m := _PROSE_PEAK_AFTER.search(line)) and not facts.memory:  # (GB as torch reports it: 2^30, as above)
        facts.memory[UNKNOWN_RANK] = (float(m.group(1)) * 1024, float(m.group(1)) * 1024)
    if _PROSE_ACT_CKPT.search(line):
        facts.args.setdefault("_prose_recompute", "full")
    if _BULLET_RECOMPUTE.match(line):  # FlagPerf's optimisation list: "   - recompute-activations"
        _prose_set(facts, "recompute_activations", True)
    for m in _BATCH_OF.finditer(line):  # "a micro-batch size (`mbs`) of 1 and global batch size (`gbs`) of 32"
        _prose_set(facts, "micro_batch_size" if m.group(1).lower().startswith("micro") else "global_batch_size",
                   int(m.group(2)))
    if m := _DP_ON_NODES.search(line):
        nodes = {"one": 1, "a": 1}.get(m.group(2).lower()) or int(m.group(2))
        _prose_set(facts, "_prose_num_gpus", nodes * int(m.group(3)))
        _prose_set(facts, "_prose_data_parallel_size", int(m.group(1)))
    for m in _PROSE_PARALLEL.finditer(line):
        _prose_set(facts, PROSE_SIZE_ARGS[m.group(1).upper()], int(m.group(2)))
    for m in _PROSE_NAMED_PARALLEL.finditer(line):
        _prose_set(facts, PROSE_SIZE_ARGS[(m.group(1) or m.group(3)).upper()], int(m.group(2) or m.group(4)))
    for m in (*_WITH_SIZE.finditer(line), *_USED_SIZE.finditer(line)):
        _prose_set(facts, PROSE_SIZE_ARGS[m.group(1).upper()], int(m.group(2)))
    if (m := _PROSE_MP_DEGREE.search(line)) and "model_parallel_size" not in m.group(0).lower():
        # (the key "model_parallel_size" is a config's: GPT-NeoX's TP, NeMo's checkpoint TP x PP; runs.py reads it)
        _prose_set(facts, "tensor_model_parallel_size", int(m.group(1)))
    for m in _CN_PARALLEL.finditer(line):
        _prose_set(facts, _CN_PARALLEL_KINDS[m.group(2) or m.group(3)], int(m.group(1) or m.group(4)))
    # upper- and lower-case sizes on one line together: "configured for **PP=8 / dp=4** (32 GPUs)" (NVIDIA-NeMo/Automodel#2673)
    line = _ENGINE_RANK_TAG.sub(" ", line)  # SGLang's rank tag, "[2026-04-04 06:50:54 TP7 EP7]": a rank, no size
    upper = _COMPACT_SIZE.findall(line)
    compact = upper + [(k.upper(), v) for k, v in _COMPACT_SIZE_EQ.findall(line)
                       if k.upper() not in {name for name, _ in upper}] \
        or [(k.upper(), v) for v, k in _SIZE_FIRST.findall(line)] \
        or [(k.upper(), v) for k, v in _SIZE_ATTACHED.findall(line)]
    # a size 0 names a rank, not a size: SGLang's "[2025-11-25 08:01:52 TP0 EP0]" tag (THUDM/slime#953)
    compact = [(name, value) for name, value in compact if int(value) > 0]
    sizes = {("_prose_data_parallel_size" if name == "DP" else PROSE_SIZE_ARGS[name]): int(value)
             for name, value in compact}
    # a DP size in prose only stands in for a GPU count the text does not state (runs.py); a line that restates an
    # earlier line's sizes otherwise describes another setup (a list of recipes): the first one is read
    if len(compact) >= 2 and not any(facts.prose_sizes.get(k, v) != v for k, v in sizes.items()):
        for key, value in sizes.items():
            facts.prose_sizes.setdefault(key, value)
            _prose_set(facts, key, value)
        # the same line's Megatron-FSDP and activation offloading: "#GPUS=64, seq_leng=8192, FSDP=True, cpu
        # offloading_layers=40, TP=1, PP=1, ..." (NVIDIA-NeMo/Megatron-Bridge#1976)
        if _PROSE_FSDP.search(line):
            _prose_set(facts, "use_megatron_fsdp", True)
        if m := _PROSE_OFFLOAD_LAYERS.search(line):
            _prose_set(facts, "cpu_offloading_num_layers", int(m.group(1)))
    if m := _FLAGPERF_DEFAULT.search(line):  # "seqlength(max_position_embedding) ... 在本case中默认为8192"
        if key := next((k for name, k in _FLAGPERF_KEYS if re.search(name, line[:m.start()], re.I)), None):
            _prose_set(facts, key, int(m.group(1)))
            return
    if m := _PROSE_SEQ.search(line) or _SEQ_AFTER.search(line) or _SEQ_TOKEN.search(line) or _CN_SEQ.search(line):
        value = next(g for g in m.groups() if g).replace(",", "")  # "seq_len 4K": K = 1024
        _prose_set(facts, "seq_length", int(value[:-1]) * 1024 if value[-1] in "kK" else int(value))
    if m := _DS_RUN_NAME.search(line):
        _prose_set(facts, "num_layers", int(m.group(1)))
        _prose_set(facts, "hidden_size", int(m.group(2)))
        for field, value in re.findall(r"_([a-z]+)(\d+)", m.group(3)):
            if field in _DS_RUN_FIELDS:
                _prose_set(facts, _DS_RUN_FIELDS[field], int(value))
    if (m := _SEQ_ALTERNATIVES.search(line)) and not facts.seq_alternatives:
        facts.seq_alternatives = tuple(int(v[:-1]) * 1024 if v[-1] in "kK" else int(v) for v in m.groups())
    for owner, key, value in _ATTR_SET.findall(line):
        if key in CONFIG_KEYS and int(value) > 0 and not _ENGINE_SECTIONS & set(owner.lower().split(".")):
            _prose_set(facts, key, int(value))
    for key, value in _KEY_VALUE_IN_TEXT.findall(line):
        key = _TEXT_KEY_ALIASES.get(key, key)
        if key in CONFIG_KEYS and key in _SCRIPT_ARG_NAMES | set(PROSE_SIZE_ARGS.values()) and int(value) > 0:
            _prose_set(facts, key, int(value))
    if len(pairs := _UPPER_PAIRS.findall(line)) >= 2:  # a script's variables quoted as a setup: "20B model: TP=8, PP=1,
        for name, value in pairs:  # NLAYERS=8, NHIDDEN=14400, NHEADS=32, SEQ_LEN=2048" (BigScience's tr11 chronicles)
            if (found := _script_var_arg(name, value)) and found[0] in SHAPE_ARGS:
                _prose_set(facts, *found)
    if m := _PROSE_MBS.search(line):  # "batch size per device = 2" (Megatron-LLaMA#22)
        _prose_set(facts, "micro_batch_size", int(m.group(1)))
    if (m := _PROSE_GBS.search(line)) and not (m.group(2) and _PER_SAMPLE_FLOPS.search(line)):
        _prose_set(facts, "global_batch_size", int(next(g for g in m.groups() if g)))
    if m := _PROSE_SET_TO.search(line):  # "Need to set `pipe-parallel-size` to 6, and `model-parallel-size` to 4"
        for name, value in [(m.group(1), m.group(2)), *_AND_SET_TO.findall(line[m.end():])]:  # (EleutherAI/gpt-neox#707)
            if (key := name.replace("-", "_")) in CONFIG_KEYS | {"pipe_parallel_size", "model_parallel_size"}:
                _prose_set(facts, key, int(value))
    if (m := _SLASH_PAIRS.search(line)) and len(names := m.group(1).split("/")) == len(values := m.group(2).split("/")):
        for name, value in zip(names, values):
            if found := _script_var_arg(name.strip(), value.strip()) or (
                    (key := _table_key(name)) and (key, int(value))):
                _prose_set(facts, *found)
    if m := _PROSE_RESPECTIVELY.search(line):
        for name, value in ((m.group(1), m.group(3)), (m.group(2), m.group(4))):
            if key := _table_key(name) or PROSE_SIZE_ARGS.get(name.strip().upper()):
                _prose_set(facts, key, int(value))
    if m := _PROSE_TOKENS_PER_STEP.search(line):
        _prose_set(facts, "_tokens_per_step", int(m.group(1).replace(",", "")))
    if _PROSE_MQA.search(line):  # only for a shape the text prints (runs.py): "is MQA supported?" beside a named
        _prose_set(facts, "_prose_mqa", True)  # model leaves that model's groups alone
    if _PROSE_DP_ONLY.search(line):
        _prose_set(facts, "tensor_model_parallel_size", 1)
        _prose_set(facts, "pipeline_model_parallel_size", 1)
    if m := _CN_NODES_ALONE.match(line):
        _prose_set(facts, "_prose_nodes", int(m.group(1)))
    if m := _NODES_OF_PART.search(line):
        _prose_set(facts, "_prose_nodes", _GPU_COUNT_WORDS.get(m.group(1).lower()) or int(m.group(1)))
    if m := _NODE_RANK_OF.search(line):
        _prose_set(facts, "_prose_nodes", int(m.group(1)))
    if (m := _PROSE_NODES_EQ.search(line)) and not _CPU_BINDING.search(line):
        _prose_set(facts, "_prose_nodes", int(m.group(1)))
    if m := _GPUS_PER_NODE_PROSE.search(line):  # "we use 6 V100 GPUs per node" (deepspeedai/DeepSpeed#115): a node's
        _prose_set(facts, "_prose_gpus_per_node", int(m.group(1)))
    if _BOUND_COUNT.search(line):  # a requirement, not the run: "At least 128 GPUs with at least 80 GB memory each"
        pass
    elif m := _EACH_NODE_GPUS.search(line):  # "4 DGX nodes, each with 8 H100 GPUs": 32
        _prose_set(facts, "_prose_gpus_per_node", int(m.group(2)))
        if m.group(1):
            _prose_set(facts, "_prose_nodes", _GPU_COUNT_WORDS.get(m.group(1).lower()) or int(m.group(1)))
    elif m := _NODES_OF.search(line):
        nodes, gpus = int(m.group(1)), int(m.group(2) or m.group(3) or m.group(4))
        per = _GPUS_PER_NODE_PROSE.search(line)  # "4 nodes with 16 GPUs, 4 GPUs/node" (NVIDIA/Megatron-LM#640): 16 in all
        _prose_set(facts, "_prose_num_gpus", gpus if per and nodes * int(per.group(1)) == gpus else nodes * gpus)
    elif m := _NODES_TIMES_GPUS.search(line):
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)) * int(m.group(2)))
    elif m := _NODE_OF_GPUS.search(line):
        nodes = _GPU_COUNT_WORDS.get(m.group(1).lower()) or int(m.group(1))
        _prose_set(facts, "_prose_num_gpus", nodes * int(m.group(2)))
    elif m := _BOXES_OF_K.search(line):  # "three 8xA100 40GB servers" (EleutherAI/gpt-neox#707): 24
        nodes = {"a": 1, "an": 1, "three": 3, "five": 5, "six": 6, **_GPU_COUNT_WORDS}.get(m.group(1).lower()) \
            or int(m.group(1))
        _prose_set(facts, "_prose_num_gpus", nodes * int(m.group(2)))
    elif m := _NODES_OF_K_GPUS.search(line):
        nodes, per_node = ({"a": 1, "an": 1, "single": 1, **_GPU_COUNT_WORDS}.get(g.lower()) or int(g) for g in m.groups())
        _prose_set(facts, "_prose_num_gpus", nodes * per_node)
    elif found := list(_NODES_GPUS_TOKEN.finditer(line)):
        # the one the run is "on", not a reference recipe's name: "a single-node variant of the reference recipe
        # `grpo-...-2n8g-megatron-ep16.yaml` on 1n8g with EP=4, TP=2 instead of 2n8g" (NVIDIA-NeMo/RL#2319)
        m = next((t for t in found if re.search(r"\bon\s+$", line[:t.start()])), found[0])
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)) * int(m.group(2)))
    elif m := _GPUS_EQ.search(line) or _GPUS_TO.search(line):
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)))
    elif m := _COUNT_SIZE_GPU.search(line):  # "on 8x80GB A100": eight 80 GB A100s
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)))
        key = f"{m.group(3).upper()}-{m.group(2)}"  # the size before the name: "40G A100s" is the 40 GB part
        facts.gpu_names[key] = facts.gpu_names.get(key, 0) + 1
    elif m := _GPU_GRID.search(line):
        nodes, per_node = m.group(m.lastindex - 1), m.group(m.lastindex)
        _prose_set(facts, "_prose_num_gpus", int(nodes) * int(per_node))
    elif m := _GPU_COUNT.search(line) or _GPU_COUNT_WORD.search(line) or _GPU_COUNT_TOKEN.search(line) \
            or _PROSE_WORLD.search(line):
        # an MI250X is two GCDs, each a GPU to ROCm and in the catalog (OLCF Frontier guide): "16 MI250X" are 32
        gcds = re.search(r"MI250X", m.group(0), re.I) and not re.match(r"\s*GCDs?\b", line[m.end():], re.I)
        _prose_set(facts, "_prose_num_gpus", int(m.group(1)) * (2 if gcds else 1))
    elif m := _GPU_COUNT_SPELLED.search(line):
        _prose_set(facts, "_prose_num_gpus", _GPU_COUNT_WORDS[m.group(1).lower()])
    elif (m := _SINGLE_GPU.search(line)) and not _FITS_IN.search(line[:m.start()]) \
            and not _RATE_DEFINITION.search(line[:m.start()]):
        _prose_set(facts, "_prose_num_gpus", 1)
    elif system := next(((m, n) for pattern, n in _SYSTEM_NODES if (m := pattern.search(line))), None):
        count = next(g for g in system[0].groups() if g)  # "2 DGX-2 nodes", "2 A3 Mega nodes"
        _prose_set(facts, "_prose_num_gpus", system[1] * ({"a": 1, "an": 1, **_GPU_COUNT_WORDS}.get(count.lower())
                                                          or int(count)))
    elif m := _CN_GPU_COUNT.search(line):
        _prose_set(facts, "_prose_num_gpus", int(m.group(1) or 1) * int(m.group(2)))
    elif m := _CN_NODES_EACH.search(line):
        nodes = {"单": 1, "双": 2, **_CN_COUNT_WORDS}.get(m.group(1)) or int(m.group(1))
        _prose_set(facts, "_prose_num_gpus", nodes * _cn_int(m.group(2)))
    elif m := _CN_PER_NODE.search(line):  # "4节点." above "每节点8卡H100." (modelscope/ms-swift#9243): a node's cards
        _prose_set(facts, "_prose_gpus_per_node", _cn_int(m.group(1)))
    elif m := _CN_NODES_TIMES_CARDS.search(line):
        _prose_set(facts, "_prose_num_gpus", (_CN_COUNT_WORDS.get(m.group(1)) or int(m.group(1))) * int(m.group(2)))
    elif ((m := _CN_NODES_CARDS.search(line)) or (m := _CN_CARDS.search(line))) and not _CN_ALTERNATIVES.search(line):
        _prose_set(facts, "_prose_num_gpus", _cn_int(m.group(m.lastindex)))


def _mllog_record(text: str, facts: LogFacts) -> None:
    """One ``:::MLLOG`` record: the global batch and sequence length it states, a step time it tracks."""
    try:
        record = json.loads(text)
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    key, value = record.get("key"), record.get("value")
    if key in _MLLOG_ARGS and isinstance(value, int) and not isinstance(value, bool) and value > 0:
        facts.args.setdefault(_MLLOG_ARGS[key], value)
    elif key == "lowest_numerical_precision_linear" and value in ("fp8", "fp4", "bf16"):  # Primus's MLPerf runs
        facts.args.setdefault("precision", value)
    elif key == "submission_benchmark" and isinstance(value, str) and "lora" in value.lower():
        facts.args.setdefault("train_type", "lora")  # MLPerf's llama2_70b_lora: a LoRA fine-tuning benchmark
    elif key == "submission_benchmark" and value == "gpt3":  # MLPerf Training's GPT-3 is the 175B model (its rules)
        facts.model_names["gpt3-175b"] = facts.model_names.get("gpt3-175b", 0) + 1
    elif key == "submission_platform" and isinstance(value, str) and (m := _MLLOG_PLATFORM.fullmatch(value.strip())):
        nodes, per_node = int(m.group(1)), [int(k) for k in re.findall(r"x(\d+)(?=[A-Za-z])", m.group(2))]
        # a cloud VM's name holds its GPU between underscores ("1344xND_H100_v5", Azure's ND H100 v5)
        for name in re.findall(r"(?<=_)(H100|H200|A100|MI300X)(?=_)", m.group(2)):
            facts.gpu_names[name] = facts.gpu_names.get(name, 0) + 1
        if per_node:  # "XE9780x8B300": 8 a node; "Kinabalux18x4GB200": 18 trays of 4 a rack
            _prose_set(facts, "_prose_num_gpus", nodes * math.prod(per_node))
        else:
            _prose_set(facts, "_prose_nodes", nodes)
    elif key == "tracked_stats" and isinstance(value, dict):
        step = (record.get("metadata") or {}).get("step")
        for name in _MLLOG_STEP_KEYS:
            if isinstance(value.get(name), (int, float)) and not isinstance(value.get(name), bool):
                facts.nemo_steps.append((step if isinstance(step, int) else None, float(value[name])))
                break


def _name_fields(m: re.Match[str]) -> tuple[Any, ...]:
    """A run name's fields in ``_NEMO_PERF_NAME`` order (precision, count, tp, pp, cp, vp, ep, etp, mbs, gbs): its
    micro and global batch come in either order."""
    groups = m.groups()
    if m.re is _NEMO_PERF_NAME.raw:
        return groups[:8] + ((groups[8], groups[9]) if groups[8] is not None else (groups[10], groups[11]))
    return groups


def _peak_memory(facts: LogFacts, rank: int, allocated_mib: float, reserved_mib: float) -> None:
    old = facts.memory.get(rank, (0.0, 0.0))
    facts.memory[rank] = (max(old[0], allocated_mib), max(old[1], reserved_mib))


def scalar(text: str) -> Any:
    """A printed value as Python: None, booleans, ints, floats, else the string.

    >>> scalar("None"), scalar("True"), scalar("4096"), scalar("1e-05"), scalar("RMSNorm")
    (None, True, 4096, 1e-05, 'RMSNorm')
    """
    text = text.strip()
    low = text.lower()
    if low in ("none", "null", "~", ""):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
        return value if math.isfinite(value) else text
    except ValueError:
        return text


# ---------------------------------------------------------------------------- launch scripts
# words that follow a flag named in prose, never a flag's value (THUDM/slime#148: "update `--num-gpus` and
# `--actor-num-gpus-per-node` from 8 to 4")
_PROSE_WORDS = {"and", "or", "from", "to", "the", "a", "an", "with", "in", "is", "are", "was", "for", "of", "on", "at",
                "by", "as", "but", "if", "when", "which", "that", "this", "it", "not", "also", "then", "so", "than"}
_HYDRA = re.compile(r"^(?:\+?[a-z_]+\.)+([a-z_][a-z0-9_]*)=(\S+)$")
_ENGINE_SECTIONS = {"rollout", "generation", "vllm_cfg", "sglang_cfg", "vllm", "sglang"}
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|\S*)")
# a shell variable: $X, ${X}, ${X:-default} / ${X-default} / ${X:=default}, and a script's positional parameter with
# its default, ${1:-32} (a script posted as it is run without arguments takes the default: "MBS=${1:-32}",
# NVIDIA/Megatron-LM#770)
_VAR = re.compile(r"\$\{([A-Za-z_]\w*|\d+)(?::?[-=]([^}]*))?\}|\$([A-Za-z_]\w*)")


# the flags that make a text a launch command or a pasted flag list, whatever the launcher (pretrain_gpt.py,
# torchrun, Megatron-SWIFT's "megatron sft" with underscore names, verl's Hydra overrides)
# a flag may open a quoted string: Python launchers list flags as strings ("--tensor-model-parallel-size", "4",
# THUDM/slime#1136) or write overrides in f-strings (f'++policy.megatron_cfg.context_parallel_size=2 ', NeMo-RL#903)
# a launch flag's name: "--name" after a space, quote or backtick (or a line's start), or a Hydra override
# "+model.name=" / "model.name=" after a space or quote. Found from the literal each match holds (``_flag_names``):
# every "--", and the lines with an "="
_DASH_FLAG = re.compile(r"--([a-z][a-z0-9_-]*)")
_DOTTED_FLAG = re.compile(r"(?:^|[\s\"'])\+*(?:[a-z_]+\.)+([a-z_][a-z0-9_]*)=", re.M)
# Megatron-SWIFT's launcher (modelscope/ms-swift swift/cli/_megatron: "megatron sft|pt|rlhf ...")
# the args.json ms-swift writes beside a run: its own keys ("model_type", "max_length", "packing") as JSON
_SWIFT_ARGS_JSON = re.compile(r'^\s*"model_type"\s*:\s*"[\w.-]+",?\s*$', re.M)
# ... also as torchrun's program, by its path: "/root/miniconda3/envs/xxx/bin/megatron sft \" (QwenLM/Qwen3-VL#2093)
# ... or its script by path under torch.distributed.run: ".../swift/cli/_megatron/sft.py" (modelscope/ms-swift#9191)
_SWIFT_LAUNCH = re.compile(r"^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*(?:torchrun|python3?\S*\s+-m\s+torch\.distributed\.run)"
                           r"\b[^\n]*?\s)?(?:\S*/)?(?:megatron\s+(?:sft|pt|rlhf)\b|_megatron/(?:sft|pt|rlhf)\.py\b)", re.M)


# the parallel sizes by their short names -> Megatron-LM argument names (launchers spell them tp, tp_size, actor_tp ...)
SIZE_NAMES = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size", "cp": "context_parallel_size",
              "ep": "expert_model_parallel_size", "etp": "expert_tensor_parallel_size",
              "vpp": "virtual_pipeline_model_parallel_size"}
# shell variables that launch scripts set for Megatron's sizes, by the names Megatron-LM's examples, Megatron-
# DeepSpeed's, Pai-Megatron-Patch's and Megatron-MoE-ModelZoo's launchers use (TP=2 PP=2 ...
# "--tensor-model-parallel-size $TP"), and upper-case copies of argument names (HIDDEN_SIZE, VOCAB_FILE): the values
# when the excerpt is cut before the flags that use them (NVIDIA/Megatron-LM#509, #1721); a flag that is printed wins
SCRIPT_VARS = {"TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size",
               "VPP": "virtual_pipeline_model_parallel_size", "CP": "context_parallel_size",
               "EP": "expert_model_parallel_size", "ETP": "expert_tensor_parallel_size", "MBS": "micro_batch_size",
               "GBS": "global_batch_size", "NUM_HEADS": "num_attention_heads", "SEQ_LEN": "seq_length",
               "MAX_SEQ_LEN": "seq_length",
               "PR": "precision",
               # MoE variables (NVIDIA/Megatron-LM#1456's DeepSeek-V3 script: MOE_INTERMEDIATE_SIZE=2048 beside the
               # dense INTERMEDIATE_SIZE=18432, ROUTER_TOPK=8, NUM_EXPERTS=32, Q_LORA_RANK / KV_LORA_RANK)
               "MOE_INTERMEDIATE_SIZE": "moe_ffn_hidden_size", "MOE_FFN_HIDDEN_SIZE": "moe_ffn_hidden_size",
               "ROUTER_TOPK": "moe_router_topk", "MOE_ROUTER_TOPK": "moe_router_topk", "NUM_EXPERTS": "num_experts",
               "Q_LORA_RANK": "q_lora_rank", "KV_LORA_RANK": "kv_lora_rank",
               # BigScience's slurm scripts (bigscience-workshop/bigscience train/tr*/: NLAYERS=..., NHIDDEN=...)
               "NLAYERS": "num_layers", "NHIDDEN": "hidden_size", "NHEADS": "num_attention_heads",
               # Megatron-DeepSpeed's examples (examples_deepspeed/ds_pretrain_gpt_*.sh): MP_SIZE is the tensor-
               # parallel size, BATCH_SIZE the micro batch ("--micro-batch-size ${BATCH_SIZE}"), NUM_ATTN_HEADS
               # (deepspeedai/Megatron-DeepSpeed#311); *_SIZE spellings of the other sizes likewise
               "MP_SIZE": "tensor_model_parallel_size", "TP_SIZE": "tensor_model_parallel_size",
               "PP_SIZE": "pipeline_model_parallel_size", "EP_SIZE": "expert_model_parallel_size",
               "CP_SIZE": "context_parallel_size", "NUM_ATTN_HEADS": "num_attention_heads",
               "BATCH_SIZE": "micro_batch_size", "ETP_SIZE": "expert_tensor_parallel_size",
               # Pai-Megatron-Patch's run scripts (alibaba/Pai-Megatron-Patch#638): HF names for the FFN and KV heads
               "INTERMEDIATE_SIZE": "ffn_hidden_size", "NUM_KEY_VALUE_HEADS": "num_query_groups",
               "VPP_SIZE": "virtual_pipeline_model_parallel_size",
               # FASOP's job info ("TENSOR_MP_SIZE: 1", "PIPELINE_MP_SIZE: 8", "DP_SIZE: 4"; AvatarHwang/FASOP)
               "TENSOR_MP_SIZE": "tensor_model_parallel_size", "PIPELINE_MP_SIZE": "pipeline_model_parallel_size",
               "DP_SIZE": "data_parallel_size",
               # Megatron-LM's Megatron-FSDP example scripts (NVIDIA/Megatron-LM#6314): NUM_HEAD, NUM_QUERY_GROUP
               "NUM_HEAD": "num_attention_heads", "NUM_QUERY_GROUP": "num_query_groups",
               # verl's recipe scripts name the trainer's sizes actor_* / train_* (the rollout engine's gen_tp /
               # infer_tp are vLLM's and SGLang's, not Megatron's, and are not read)
               **{f"{role}_{short}": name for role in ("actor", "train") for short, name in SIZE_NAMES.items()},
               # SkyRL's Megatron examples (NovaSky-AI/SkyRL#1000): MEGATRON_TP=4 ... MEGATRON_LAST_PIPELINE_STAGE_LAYER
               **{f"MEGATRON_{short.upper()}": name for short, name in SIZE_NAMES.items()},
               "MEGATRON_LAST_PIPELINE_STAGE_LAYER": "decoder_last_pipeline_num_layers",
               "MEGATRON_FIRST_PIPELINE_STAGE_LAYER": "decoder_first_pipeline_num_layers"}
_SCRIPT_ARG_NAMES = {"num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                     "seq_length", "micro_batch_size", "global_batch_size", "num_experts", "moe_router_topk",
                     "moe_ffn_hidden_size", "vocab_file", "tokenizer_model", "tokenizer_type", "vocab_size"}
_PRECISIONS = {"bf16", "fp16", "fp8", "fp32", "mxfp8"}


def _script_var_arg(name: str, value: str) -> tuple[str, Any] | None:
    """The Megatron argument a launch script's variable sets, or None.

    >>> _script_var_arg("TP", "2"), _script_var_arg("HIDDEN_SIZE", "4096"), _script_var_arg("PR", "fp8")
    (('tensor_model_parallel_size', 2), ('hidden_size', 4096), ('precision', 'fp8'))
    >>> _script_var_arg("TP", "${TP}") is None, _script_var_arg("PR", "yes") is None
    (True, True)
    """
    # Megatron-DeepSpeed's examples spell them in lower case too (num_attn_heads=16, seq_len=32768; #415)
    arg = SCRIPT_VARS.get(name) or SCRIPT_VARS.get(name.upper()) \
        or (name.lower() if name.lower() in _SCRIPT_ARG_NAMES else None)
    if name.upper() == "TE_FP8" and value in ("1", "true", "True"):  # ROCm Megatron-LM's examples/llama/*.sh
        return ("precision", "fp8")
    if arg is None or "$" in value:
        return None
    parsed = scalar(value)
    if arg == "precision":
        return (arg, parsed) if parsed in _PRECISIONS else None
    if arg in ("vocab_file", "tokenizer_model", "tokenizer_type"):
        return (arg, value) if value else None
    return (arg, parsed) if isinstance(parsed, int) and not isinstance(parsed, bool) and parsed > 0 else None


# Megatron-LM flags megasolve reads whose argparse ``dest`` is not their own name (ARG; every entry is checked
# against the recorded parser in tests/test_runs.py): flag -> (dest, the value a bare flag stores, or None for
# "the value given")
FLAG_DESTS = {
    "no_overlap_p2p_communication": ("overlap_p2p_comm", False),
    "no_bias_swiglu_fusion": ("bias_swiglu_fusion", False),
    "no_bias_gelu_fusion": ("bias_gelu_fusion", False),
    "microbatch_group_size_per_virtual_pipeline_stage": ("microbatch_group_size_per_vp_stage", None),
}


def _flag_dest(name: str, value: Any) -> tuple[str, Any]:
    """``(argument name, value)`` of a launch-script flag, as Megatron-LM's parser stores it."""
    if name not in FLAG_DESTS:
        return name, value
    dest, const = FLAG_DESTS[name]
    return dest, (const if const is not None and value is True else value)


# flags that take a list of words (argparse nargs='*'): --recompute-modules core_attn moe_act, --cp-comm-type
LIST_FLAGS = frozenset({"recompute_modules", "cp_comm_type", "offload_modules", "rampup_batch_size", "cuda_graph_scope",
                        "cuda_graph_modules"})
# Megatron-LM's training entry points (pretrain_gpt.py, pretrain_mamba.py, ...), run as a script
# (not a traceback's frame: File "./pretrain_gpt.py", line 222)
_MEGATRON_SCRIPT = re.compile(r"\bpretrain_\w+\.py\b(?!\"?,\s*line\s\d)")
_SCRIPT_VAR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)=(\S+)", re.M)


# a torchrun setup's GPUs a node and node count, set as variables (Megatron-LM's example scripts: GPUS_PER_NODE=8,
# NUM_NODES=1, WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES)))
_PER_NODE_VAR = re.compile(r"^\s*(?:export\s+)?(?:GPUS_PER_NODE|NPROC_PER_NODE|N_PER_NODE)=['\"]?\d+\b", re.M)
_NODES_VAR = re.compile(r"^\s*(?:export\s+)?(?:NNODES|NUM_NODES|NODES)=['\"]?\d+\b", re.M)


# ms-swift's Megatron front end, "NPROC_PER_NODE=4 ... megatron sft --load GLM-4.5-Air-mcore --train_type lora"
# (zai-org/GLM-4.5#7): its subcommands train with Megatron-Core (ms-swift docs, "Megatron-SWIFT"); "swift sft" does not
_SWIFT_MEGATRON = re.compile(r"(?m)^\s*(?:\S+=\S*\s+)*megatron\s+(?:sft|pt|rlhf)\b")


def _is_launch(text: str) -> bool:
    """A launch command, a pasted flag list, or a launch script's variables (the command cut off).

    >>> _is_launch("GPUS_PER_NODE=8\\nNUM_NODES=1\\n# Path to the pretrain_gpt.py script")
    True
    >>> _is_launch("MBS=${1:-32}\\nGBS=${2:-128}"), _is_launch("see pretrain_gpt.py")
    (True, False)
    """
    if ("pretrain" in text or "torchrun" in text or "_ARGS" in text or "setup_experiment.py" in text
            or _SWIFT_MEGATRON.search(text)) and ("--" in text or "model." in text):
        return True
    if _flag_names(text) & (CONFIG_KEYS | {"num_experts", "micro_batch_size", "seq_length", "max_length"}):
        return True
    # a script of variables only (the flags cut off): two or more of Megatron's sizes set as variables (with their
    # defaults: "MBS=${1:-32}"), or a torchrun setup's GPUs a node and nodes (NVIDIA/Megatron-LM#1847)
    sizes = {m.group(1) for line in text.split("\n") if "=" in line for m in _SCRIPT_VAR.finditer(line)
             if _script_var_arg(m.group(1), _expand(m.group(2).strip("'\""), {}).strip("'\""))}
    return len(sizes) >= 2 or bool(_PER_NODE_VAR.search(text) and _NODES_VAR.search(text))


def _flag_names(text: str) -> set[str]:
    """The flag names (``_DASH_FLAG``, ``_DOTTED_FLAG``) in ``text``, dashes as underscores. No match spans a line or
    holds another's start, so each is found where its literal is: at every "--" whose character before is a space,
    quote or backtick, and in every line with an "=".

    >>> sorted(_flag_names("torchrun pretrain_gpt.py --num-layers 2\\n  +model.seq_length=8 x--no 'y.z=1'"))
    ['num_layers', 'seq_length', 'z']
    """
    names = {m.group(1) for m in _DASH_FLAG.finditer(text)
             if m.start() == 0 or text[m.start() - 1].isspace() or text[m.start() - 1] in "\"'`"}
    names.update(m.group(1) for line in text.split("\n") if "=" in line for m in _DOTTED_FLAG.finditer(line))
    return {name.replace("-", "_") for name in names}


# Megatron-Bridge's performance launcher (``scripts/performance/setup_experiment.py``; its flags in
# ``scripts/performance/argument_parser.py`` @067f987df: -ng/--num_gpus, -gn/--gpus_per_node, -g/--gpu, -tp, -pp,
# -cp, -vp, -ep, -et, -mb, -gb, -sl, -rl/--recompute_num_layers, -ol/--activation_offload_layers) as posted in
# NVIDIA-NeMo/Megatron-Bridge#1865
BRIDGE_LAUNCHER_FLAGS = {"ng": "world_size", "gn": "gpus_per_node", "tp": "tensor_model_parallel_size",
                         "pp": "pipeline_model_parallel_size", "cp": "context_parallel_size",
                         "vp": "virtual_pipeline_model_parallel_size", "ep": "expert_model_parallel_size",
                         "et": "expert_tensor_parallel_size", "mb": "micro_batch_size", "gb": "global_batch_size",
                         "sl": "seq_length", "rl": "recompute_num_layers", "ol": "activation_offload_layers"}
_BRIDGE_LAUNCHER_FLAG = re.compile(r"(?:^|\s)-(ng|gn|tp|pp|cp|vp|ep|et|mb|gb|sl|rl|ol)[\s=]+(\d+)\b")
_BRIDGE_LAUNCHER_GPU = re.compile(r"(?:^|\s)(?:-g|--gpu)[\s=]+([a-z0-9]+)\b", re.I)
_BRIDGE_LAUNCHER_MODEL = re.compile(r"(?:^|\s)(?:-m|--model_name|--model_family_name)[\s=]+([A-Za-z0-9_.]+)")
_BRIDGE_LAUNCHER_SIZE = re.compile(r"(?:^|\s)(?:-s|--model_size)[\s=]+([A-Za-z0-9_.]+)")
_BRIDGE_LAUNCHER_RECIPE = re.compile(r"(?:^|\s)(?:-mr|--model_recipe_name)[\s=]+([A-Za-z0-9_.]+)")
# -c / --compute_dtype (argument_parser.py @067f987df L694-701: bf16, fp8_cs, fp8_mx, fp8_sc, nvfp4; runs.py reads it)
_BRIDGE_LAUNCHER_DTYPE = re.compile(r"(?:^|\s)-c[\s=]+(bf16|fp8_cs|fp8_mx|fp8_sc|nvfp4)\b")


def _bridge_launcher_args(text: str, facts: LogFacts) -> None:
    """The sizes, compute dtype and GPU of a ``setup_experiment.py`` command (``BRIDGE_LAUNCHER_FLAGS``); its long
    flags (``--deterministic``, ``--use_megatron_fsdp true``) are read with any launch's (``_script_args``)."""
    if "setup_experiment.py" not in text:
        return
    body = re.sub(r"\\\r?\n", " ", text)
    for m in _BRIDGE_LAUNCHER_FLAG.finditer(body):
        facts.args.setdefault(BRIDGE_LAUNCHER_FLAGS[m.group(1)], int(m.group(2)))
    if m := _BRIDGE_LAUNCHER_DTYPE.search(body[body.index("setup_experiment.py"):]):
        facts.args.setdefault("compute_dtype", m.group(1))
    if m := _BRIDGE_LAUNCHER_GPU.search(body):
        name = m.group(1).upper()
        if _GPU_NAME.fullmatch(name):
            facts.gpu_names[name] = facts.gpu_names.get(name, 0) + 1
    # the model: "-m deepseek -s v3" (argument_parser.py -m/--model_name, -s/--model_size @v0.2.0 L231-243) or, from
    # v0.4, "-m llama -mr llama31_405b" (--model_family_name, --model_recipe_name @v0.4.2 L178-188)
    command = body[body.index("setup_experiment.py"):]  # its own flags ("python -m torch..." before it is not a model)
    family = _BRIDGE_LAUNCHER_MODEL.search(command)
    size = _BRIDGE_LAUNCHER_SIZE.search(command)
    recipe = _BRIDGE_LAUNCHER_RECIPE.search(command)
    named = _preset_names_in(recipe.group(1)) if recipe else \
        _preset_names_in(f"{family.group(1)}-{size.group(1)}") if family and size else {}
    for preset in named:
        facts.model_names[preset] = facts.model_names.get(preset, 0) + 1


# flags kept in a bash associative array, "declare -A MODEL_CONFIG; MODEL_CONFIG[num-layers]=28" and expanded into
# the command later (NVIDIA/Megatron-LM#2401)
_ASSOC_FLAG = re.compile(r"^(\s*)[A-Za-z_]\w*\[([a-z][a-z0-9_-]*)\]=", re.M)


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_QUOTED_VALUE = re.compile(r"=(['\"])([^'\"\s]+)\1")
_SHELL_OPERATOR = re.compile(r"\d?>>?(?:&\d)?|<|\|\|?|&&?|;")  # a whole token: redirection, pipe, list


_GPU_COUNT_VARS = ("NUM_GPUS", "N_GPUS", "NGPUS")  # a launch script's GPU count, by the names scripts give it


# a flag commented out in a launch script: not the run's setting, and the model it names is not the run's
_COMMENTED_FLAG = re.compile(r"\s*#+\s*--?[A-Za-z]")
# ROCm Megatron-LM's Llama launchers size the model by MODEL_SIZE (examples/llama/train_llama2.sh: 7, 13, 70;
# train_llama3.sh: 8, 70 -- Llama 3.1's shapes): "MODEL_SIZE=7 ... bash examples/llama/train_llama2.sh"
_ROCM_LLAMA_SCRIPT = re.compile(r"\btrain_llama(2|3|3\.1|31)\.sh\b", re.I)
_ROCM_DEEPSEEK_SCRIPT = re.compile(r"\btrain_deepseekv3\.sh\b")
_MODEL_SIZE_VAR = re.compile(r"(?:^|\s)MODEL_SIZE=['\"]?(\d+)[bB]?\b", re.M)  # "MODEL_SIZE=70", "MODEL_SIZE=16B"


def _rocm_model_size(text: str, facts: LogFacts) -> None:
    """The preset a ROCm Llama launcher's ``MODEL_SIZE`` names (``_ROCM_LLAMA_SCRIPT``). ROCm's
    ``examples/deepseek_v3/train_deepseekv3.sh`` builds DeepSeek-V3 only with ``MODEL_SIZE=671B``; its 16B and 236B
    are shapes of its own (16B: 27 layers, 64 experts, the first 3 dense, q_lora_rank 512; not DeepSeek-V2-Lite's 1
    dense layer and no q LoRA), so the script's name is not the model's then."""
    size = _MODEL_SIZE_VAR.search(text)
    if size and _ROCM_DEEPSEEK_SCRIPT.search(text) and size.group(1) != "671":
        facts.model_names.pop("deepseek-v3", None)
        facts.args["_model_not_preset"] = (f"ROCm Megatron-LM's train_deepseekv3.sh with MODEL_SIZE={size.group(1)}B, "
                                           "a shape of its own")
    if (script := _ROCM_LLAMA_SCRIPT.search(text)) and size:
        family = "llama2" if script.group(1) == "2" else "llama-3.1"
        for preset in _preset_names_in(f"{family}-{size.group(1)}b"):
            facts.model_names[preset] = facts.model_names.get(preset, 0) + 1


_INLINE_CODE_BLOCK = re.compile(r"^`([^`\n][^`]*\n[^`]*?)`[ \t]*$", re.M)


# Pai-Megatron-Patch's example launchers take their settings by position (examples/*/run_mcore_*.sh @ the mirror of
# alibaba/Pai-Megatron-Patch: ENV=$1 MODEL_SIZE=$2 BATCH_SIZE=$3 GLOBAL_BATCH_SIZE=$4 ... SEQ_LEN=$7 ... PR=$9
# TP=${10} PP=${11} CP=${12} in every one; the expert sizes after them differ by script)
_PAI_LAUNCH = re.compile(r"\b(?:sh|bash)\s+(?:\S*/)?(run_mcore_\w+)\.sh\s+([^\n|;&]*)")
_PAI_COMMON = {2: "micro_batch_size", 3: "global_batch_size", 6: "seq_length", 9: "tensor_model_parallel_size",
               10: "pipeline_model_parallel_size", 11: "context_parallel_size"}  # 0-based after the script
_PAI_EXPERT = {"run_mcore_qwen3": {12: "expert_tensor_parallel_size", 13: "expert_model_parallel_size"},
               "run_mcore_qwen2_moe": {12: "expert_tensor_parallel_size", 13: "expert_model_parallel_size"},
               "run_mcore_mistral": {12: "expert_model_parallel_size"},
               "run_mcore_moonlight": {12: "expert_tensor_parallel_size", 13: "expert_model_parallel_size"}}
# ... then their switches, true / false, in this order (SP=${13} DO=${14} FL=${15} SFT=${16} after CP, or after the
# expert sizes; the VL scripts have no SFT, Moonlight no FL, LLaVA neither SP nor SFT), the recompute word (AC: full,
# sel, none, offload) and OPTIMIZER_OFFLOAD (Pai-Megatron-Patch @a098ca5 examples/*/run_mcore_*.sh)
_PAI_BOOLS = {"run_mcore_moonlight": ("SP", "DO", "SFT"), "run_mcore_llava": ("DO", "FL")}
_PAI_DEFAULT_BOOLS = ("SP", "DO", "FL", "SFT")


# The older run_pretrain_megatron_*.sh / run_finetune_megatron_*.sh launchers (examples/llama2/run_pretrain_megatron_
# llama.sh @16a5fa2, examples/baichuan2/run_pretrain_megatron_baichuan.sh @1c2282f) take, after ENV and one or two
# paths, MODEL_SIZE BATCH_SIZE GLOBAL_BATCH_SIZE LR MIN_LR SEQ_LEN PAD_LEN EXTRA_VOCAB_SIZE PR TP PP AC DO FL SP TE ...
_PAI_LEGACY_LAUNCH = re.compile(r"\b(?:sh|bash)\s+(?:\S*/)?run_(?:pretrain|finetune)_megatron_\w+\.sh\s+([^\n|;&]*)")
_PAI_LEGACY_SIZES = {1: "micro_batch_size", 2: "global_batch_size", 5: "seq_length", 9: "tensor_model_parallel_size",
                     10: "pipeline_model_parallel_size"}  # 0-based after MODEL_SIZE
_MODEL_SIZE_WORD = re.compile(r"\d+(?:\.\d+)?[BbMm]")
_LEARNING_RATE = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


# ... and their switches by name, in the variables section every run_mcore_*.sh opens with
_PAI_SCRIPT = re.compile(r"### PARALLEL / BOOL OPTION ###|\brun_mcore_\w+\.sh\b")


def _pai_switches(env: dict[str, str]) -> dict[str, Any]:
    """The Megatron arguments of a Pai-Megatron-Patch run script's switches (``examples/moonlight/
    run_mcore_moonlight.sh`` @0f5c122 and its siblings: ``AC`` full -> ``--recompute-method uniform
    --recompute-num-layers ${MP_AC_LAYERS:-1} --recompute-granularity full``, sel -> ``--recompute-activations``,
    offload -> ``--cpu-offloading-num-layers ${MP_AC_LAYERS}``; ``DO`` true -> ``--use-distributed-optimizer``; ``SP``
    true -> ``--sequence-parallel`` with TP > 1, false -> none; ``OPTIMIZER_OFFLOAD`` other than false ->
    ``--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction ${OPTIMIZER_OFFLOAD}``), as
    alibaba/Pai-Megatron-Patch#529 posts them.

    >>> _pai_switches({"AC": "full", "DO": "true", "SP": "true", "TP": "1"})
    {'recompute_granularity': 'full', 'recompute_method': 'uniform', 'recompute_num_layers': 1, \
'use_distributed_optimizer': True}
    """
    out: dict[str, Any] = {}
    layers = scalar(env.get("MP_AC_LAYERS", "1"))
    layers = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else 1
    ac = env.get("AC", "").strip("'\"")
    if ac == "full":
        out.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=layers)
    elif ac == "sel":
        out["recompute_activations"] = True
    elif ac == "offload":
        out.update(cpu_offloading=True, cpu_offloading_num_layers=layers)
    if env.get("DO") in ("true", "false"):
        out["use_distributed_optimizer"] = env["DO"] == "true"
    tp = scalar(env.get("TP", "1"))
    if env.get("SP") == "true" and isinstance(tp, int) and tp > 1:
        out["sequence_parallel"] = True
    elif env.get("SP") == "false":
        out["sequence_parallel"] = False
    fraction = scalar(env.get("OPTIMIZER_OFFLOAD", "false"))
    if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 <= fraction <= 1:
        out.update(optimizer_cpu_offload=True, use_precision_aware_optimizer=True,
                   optimizer_offload_fraction=float(fraction))
    return out


def _pai_positional(body: str, facts: LogFacts) -> None:
    """The sizes a Pai-Megatron-Patch ``run_mcore_*.sh`` command passes by position (modelscope-style issue posts:
    alibaba/Pai-Megatron-Patch#413 "sh run_mcore_qwen.sh dsw 7B 2 512 1e-5 1e-6 4096 4096 bf16 2 1 1 ...").

    >>> f = LogFacts(); _pai_positional("sh run_mcore_qwen.sh dsw 7B 2 512 1e-5 1e-6 4096 4096 bf16 2 1 1 true", f)
    >>> f.args
    {'micro_batch_size': 2, 'global_batch_size': 512, 'seq_length': 4096, 'tensor_model_parallel_size': 2, \
'pipeline_model_parallel_size': 1, 'context_parallel_size': 1, 'precision': 'bf16', 'sequence_parallel': True}
    >>> f = LogFacts(); _pai_positional("sh run_mcore_llama3_1.sh dsw 8B 8 8 1e-6 1e-7 1024 1024 bf16 2 2 1 false true "
    ...                                 "false true sel false 1000 /d /d /c 1000 0 /o", f)  # SP DO FL SFT AC OFFLOAD
    >>> {k: f.args[k] for k in ("sequence_parallel", "use_distributed_optimizer", "recompute_activations")}
    {'sequence_parallel': False, 'use_distributed_optimizer': True, 'recompute_activations': True}
    >>> f = LogFacts(); _pai_positional("sh run_pretrain_megatron_baichuan.sh dsw /m/ /p/ 13B 1 8 1e-5 1e-6 2048 2048 0 "
    ...                                 "bf16 2 1 sel true false true false 100", f)
    >>> f.args
    {'micro_batch_size': 1, 'global_batch_size': 8, 'seq_length': 2048, 'tensor_model_parallel_size': 2, \
'pipeline_model_parallel_size': 1, 'precision': 'bf16', 'recompute_activations': True, 'use_distributed_optimizer': True, \
'sequence_parallel': True, 'transformer_impl': 'local'}
    """
    for m in _PAI_LAUNCH.finditer(body):
        words = m.group(2).split()
        for index, key in {**_PAI_COMMON, **_PAI_EXPERT.get(m.group(1), {})}.items():
            if index < len(words) and words[index].isdigit() and int(words[index]) > 0:
                facts.args.setdefault(key, int(words[index]))
        if len(words) > 8 and words[8].lower() in _PRECISIONS:
            facts.args.setdefault("precision", words[8].lower())
        first = next((i for i in range(12, min(len(words), 15)) if words[i] in ("true", "false")), None)
        if first is not None:
            names = _PAI_BOOLS.get(m.group(1), _PAI_DEFAULT_BOOLS)
            env = dict(zip(names, (w for w in words[first:first + len(names)] if w in ("true", "false"))))
            after = words[first + len(env):]
            if len(env) == len(names) and after and after[0] in ("full", "sel", "none", "offload"):
                env["AC"] = after[0]
                if len(after) > 1:
                    env["OPTIMIZER_OFFLOAD"] = after[1]
            env["TP"] = str(facts.args.get("tensor_model_parallel_size", 1))
            for key, value in _pai_switches(env).items():
                facts.args.setdefault(key, value)
            if env.get("FL") == "true":
                facts.args.setdefault("use_flash_attn", True)
        return
    for m in _PAI_LEGACY_LAUNCH.finditer(body):  # the older launchers (alibaba/Pai-Megatron-Patch#59)
        words = m.group(1).split()
        size = next((i for i, w in enumerate(words[1:4], 1) if _MODEL_SIZE_WORD.fullmatch(w)), None)
        rest = words[size:] if size is not None else []
        if len(rest) < 15 or not all(_LEARNING_RATE.fullmatch(w) for w in rest[3:5]) \
                or rest[8].lower() not in _PRECISIONS or rest[11] not in ("full", "sel", "none") \
                or not all(w in ("true", "false") for w in rest[12:15]):
            continue  # not the layout these scripts take: nothing is read by position
        for index, key in _PAI_LEGACY_SIZES.items():
            if rest[index].isdigit() and int(rest[index]) > 0:
                facts.args.setdefault(key, int(rest[index]))
        facts.args.setdefault("precision", rest[8].lower())
        for key, value in _pai_switches({"AC": rest[11], "DO": rest[12], "SP": rest[14], "TP": rest[9]}).items():
            facts.args.setdefault(key, value)
        # FL true -> --use-flash-attn; TE true -> --transformer-impl transformer_engine, false -> no flag, which the
        # Megatron-LM these scripts run (2023, legacy models) takes as its default, local (examples/baichuan2/
        # run_pretrain_megatron_baichuan.sh @1c2282f L117-133; PR fp8 adds transformer_engine itself, L99-105)
        if rest[13] == "true":
            facts.args.setdefault("use_flash_attn", True)
        if len(rest) > 15 and rest[15] in ("true", "false"):
            te = rest[15] == "true" or rest[8].lower() == "fp8"
            facts.args.setdefault("transformer_impl", "transformer_engine" if te else "local")
        return


# flags whose path is read for being given at all, so a path behind an unset variable still counts: a distillation
# teacher (runs.py _training_notes)
_PATH_IS_THE_FACT = frozenset({"export_kd_teacher_load"})


# Slurm's batch directives (sbatch(1)): "#SBATCH --nodes 3", "#SBATCH -N 3", "#SBATCH --gpus-per-node=8",
# "#SBATCH --gres=gpu:8" / "gpu:h100:8", "#SBATCH --ntasks-per-node=8" (srun starts one Megatron rank a task)
_SBATCH = re.compile(r"^\s*#SBATCH\s+(--nodes|-N|--gpus-per-node|--gres|--ntasks-per-node)(?:=|\s+)(\S+)", re.M)


def _sbatch_args(text: str, facts: LogFacts) -> None:
    """Nodes and GPUs a node from a Slurm script's ``#SBATCH`` lines (NVIDIA/Megatron-LM#792: ``--nodes 3``,
    ``--gpus-per-node=8``): ``_sbatch_nodes`` / ``_sbatch_gpus_per_node``, below the launch command's own flags.
    A task count a node stands for its GPUs only above one (one task a node is a torchrun launching the GPUs).

    >>> f = LogFacts(); _sbatch_args("#SBATCH --nodes 3\\n#SBATCH --gres=gpu:h100:8\\n#SBATCH --ntasks-per-node=1", f)
    >>> f.args
    {'_sbatch_nodes': 3, '_sbatch_gpus_per_node': 8}
    """
    found: dict[str, int] = {}
    for m in _SBATCH.finditer(text):
        flag, value = m.group(1), m.group(2)
        if flag == "--gres":
            value = value.split(",")[0]
            if not value.startswith("gpu:"):
                continue
            value = value.rsplit(":", 1)[-1]
        if not value.isdigit() or int(value) < 1:
            continue
        key = {"--nodes": "_sbatch_nodes", "-N": "_sbatch_nodes", "--ntasks-per-node": "tasks"}.get(
            flag, "_sbatch_gpus_per_node")
        found.setdefault(key, int(value))
    tasks = found.pop("tasks", 0)
    if tasks > 1:  # GPUs a node named by --gpus-per-node / --gres win over the task count
        found.setdefault("_sbatch_gpus_per_node", tasks)
    for key, value in found.items():
        facts.args.setdefault(key, value)


# verl's overrides that size the actor's optimizer step (verl/workers/megatron_workers.py: ppo_mini_batch_size *=
# rollout.n, then // the DP size): prompts a mini batch, responses a prompt, and the longest prompt and response
_VERL_BATCH_KEYS = {"actor_rollout_ref.actor.ppo_mini_batch_size": "_verl_ppo_mini_batch",
                    "actor_rollout_ref.rollout.n": "_verl_rollout_n", "data.max_prompt_length": "_verl_max_prompt",
                    "data.max_response_length": "_verl_max_response", "data.train_batch_size": "_verl_train_batch",
                    "actor_rollout_ref.actor.ppo_epochs": "_verl_ppo_epochs"}
_VERL_BATCH = re.compile(rf"^({'|'.join(re.escape(k) for k in _VERL_BATCH_KEYS)})=(\d+)$")


# commands of a launch script that clean up or wait, whose flags are not the training's (THUDM/slime#537: "ray stop
# --force", "pkill -9 sglang")
_NOT_TRAINING_COMMAND = re.compile(r"\s*(?:ray\s+stop|pkill|killall|kill|sleep|rm|mkdir|cd|nvidia-smi|pip3?\s+install)\b")


_FLAGS_VARIABLE = re.compile(r"\$\{?\w+\}?\\?")  # a token that is one shell variable: "$GPT_ARGS", "${ARGS}"


def _script_args(text: str, facts: LogFacts) -> None:
    """``--flag value`` tokens of a launch script (``pretrain_gpt.py`` flags, torchrun's world size)."""
    _bridge_launcher_args(text, facts)
    if "run_mcore_" in text or "_megatron_" in text:  # (the launchers _pai_positional reads)
        _pai_positional(re.sub(r"\\\r?\n", " ", text), facts)
    text = _ASSOC_FLAG.sub(r"\1--\2 ", text)
    # a command posted in inline backticks over several lines ("`PYTORCH_CUDA_ALLOC_CONF=... \" ... "--model_name
    # x`", modelscope/ms-swift#6387) is the command
    text = _INLINE_CODE_BLOCK.sub(lambda m: m.group(1), text)
    if not _is_launch(text):
        return
    env: dict[str, str] = _chain_hints(text)
    if env:  # said by runs.py: the branch the text names, not one the script decides
        facts.args["_chain_choice"] = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
    # a line commented out inside a continued command ("# USE_FLASH_ATTENTION=0 \\" above "megatron rlhf \\",
    # modelscope/ms-swift#8035) is dropped whole, so that its backslash does not fold the command into the comment
    body = re.sub(r"\\\r?\n", " ", re.sub(r"(?m)^[ \t]*#[^\n]*\\\r?\n", "", text))
    lines = []
    for line in _taken_statements(body.splitlines(), env):
        # (bars inside quotes are a value's, not a table's: model.pipeline_model_parallel_layout='Et|tt|tmL')
        if _QUOTED.sub("", line).count("|") >= 2 and "--" not in line and "$" not in line:
            continue  # a results table's row posted beside the script ("tp=1, pp=4, ep=4 | 8192 | ...", Pai#643)
        rest = line
        # "A=1 B=2 cmd ...": every leading assignment of the command's environment (NPROC_PER_NODE=8 megatron sft)
        while m := _ASSIGN.match(rest):
            value = m.group(2).strip("'\"")
            if value.startswith("$(("):  # shell arithmetic: GBS=$(($WORLD_SIZE * $MBS / $TP * 8))
                close = _arith_end(rest, m.start(2))
                value = _arith(rest[m.start(2):close], env) or ""
                if value:
                    env[m.group(1)] = value
                rest = rest[close:]
                continue
            if not value.startswith(("(", "$(")) and "`" not in value:
                env[m.group(1)] = _expand(value, env)
            rest = rest[m.end():]
        if _NOT_TRAINING_COMMAND.match(rest) and not re.search(r"&&|\|\||;", rest):
            continue  # "ray stop --force", "pkill -9 python": not the run's flags ("rm -rf x && torchrun ..." is)
        lines.append(line)
    flags: dict[str, Any] = {}
    for line in lines:
        if "=" not in line and "--" not in line and "$" not in line:
            continue  # no flag, override or variable (a log's iteration record): nothing for the tokens below
        # flags also live inside quoted strings (DISTRIBUTED_ARGS="--nnodes=1 --nproc_per_node=8"): unquote
        # a Python list of flag strings separates them with commas: "--pp", "2", -> --pp 2
        # flags quoted in Markdown backticks (`--num-layers 28`) as well
        # a quoted override's value keeps its token: model.pipeline_model_parallel_layout='Et|tt|tmL'
        line = _QUOTED_VALUE.sub(r"=\2", line)
        tokens = [t.strip(",") for t in re.split(r"\s+", _expand(line, env).replace('"', " ").replace("'", " ")
                                                  .replace("`", " "))]
        tokens = [t for t in tokens if t]
        if any("$" in t for t in tokens):  # a variable the excerpt never sets: flags may hide behind it
            flags["_unresolved_vars"] = True
            if any(_FLAGS_VARIABLE.fullmatch(t) and (i == 0 or not tokens[i - 1].startswith("-"))
                   for i, t in enumerate(tokens)):  # one standing for flags ("$GPT_ARGS"), not a flag's value
                flags["_unresolved_flag_vars"] = True
        for i, token in enumerate(tokens):
            token = token.strip("()")
            if "=" not in token and not token.startswith("--"):
                continue  # neither an override (_VERL_BATCH, _HYDRA: "name=value") nor a flag (a log line's words)
            if v := _VERL_BATCH.match(token.lstrip("+")):  # verl's batch and lengths (runs.py: the actor's step)
                flags.setdefault(_VERL_BATCH_KEYS[v.group(1)], int(v.group(2)))
                continue
            h = _HYDRA.match(token.lstrip("+"))
            if h and token.lstrip("+").startswith("model.optim.name="):  # NeMo's optimizer, as _NEMO_DIST_OPTIM reads
                name = h.group(2).strip("'\"")  # it in a config
                if name in _NEMO_OPTIMIZER_SHARDED:
                    flags.setdefault("use_distributed_optimizer", _NEMO_OPTIMIZER_SHARDED[name])
                continue
            if h and h.group(1) in ("param_offload", "grad_offload", "optimizer_offload") \
                    and token.lstrip("+").startswith(("actor_rollout_ref.actor.megatron.",
                                                      "actor_rollout_ref.actor.mindspeed.")):
                # verl's actor offload: state on the host between phases, loaded back for update_actor (runs.py)
                if scalar(h.group(2).strip("'\"")) is True:
                    flags["_verl_offload"] = ", ".join(sorted({*str(flags.get("_verl_offload", "")).split(", "),
                                                               h.group(1)} - {""}))
                continue
            if h and token.lstrip("+").startswith(("actor_rollout_ref.actor.strategy=", "critic.strategy=")):
                # verl's training backend: fsdp / fsdp2 train with PyTorch FSDP, not Megatron-Core (runs.py)
                flags.setdefault("_train_backend", "verl " + h.group(2).strip("'\""))
                continue
            if h and h.group(1) in CONFIG_KEYS:  # NeMo: model.num_layers=40
                # the inference engine's sizes are not the trainer's: verl's actor_rollout_ref.rollout.tensor_model_
                # parallel_size is vLLM's / SGLang's TP (verl-project/verl#388); NeMo-RL's generation.vllm_cfg likewise
                if _ENGINE_SECTIONS & set(token.lstrip("+").split("=", 1)[0].split(".")):
                    continue
                if "$" not in h.group(2):  # a shell variable the excerpt never sets is not a value
                    flags.setdefault(h.group(1), scalar(h.group(2).strip("'\"")))
                continue
            if not token.startswith("--") or len(token) < 4:
                continue
            name, eq, inline = token[2:].partition("=")
            if not name.strip("-_"):  # a rule of dashes ("----------") is not a flag
                continue
            if eq:
                value: Any = scalar(inline)
            elif name.replace("-", "_") in LIST_FLAGS:  # nargs='*': every word up to the next flag
                words = list(itertools.takewhile(lambda w: not w.startswith("--") and w not in (")", "\\"),
                                                 tokens[i + 1:]))
                value = " ".join(words) if words else True
            elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--") and tokens[i + 1] not in (")", "\\") \
                    and not _SHELL_OPERATOR.fullmatch(tokens[i + 1]):  # "--mtp-num-layers > 0": a redirection, no value
                value = scalar(tokens[i + 1].strip("()"))
                if isinstance(value, str) and value.lower() in _PROSE_WORDS:
                    continue  # a flag named in a sentence: "update `--num-gpus` and `--actor-num-gpus-per-node`"
            else:
                value = True
            if isinstance(value, str) and "$" in value and name.replace("-", "_") not in _PATH_IS_THE_FACT:
                if name.replace("-", "_") in ("nnodes", "num_nodes"):  # "--nnodes $HOST_NUM": not one node either
                    flags.setdefault("_env_nodes_unset", True)
                continue  # "--tensor-model-parallel-size $TP" with TP never set: unknown, not a value
            flags.setdefault(*_flag_dest(name.replace("-", "_"), value))
    for key in ("GPUS_PER_NODE", "NPROC_PER_NODE", "NNODES", "NUM_NODES", "WORLD_SIZE", *_GPU_COUNT_VARS, "NODES",
                "N_PER_NODE"):
        # Megatron-DeepSpeed's scripts set NUM_GPUS to every GPU of the run (NUM_NODE = NUM_GPUS / NUM_GPUS_PERNODE),
        # BigScience's N_GPUS likewise (bigscience-workshop/Megatron-DeepSpeed#93); beside a node count above one
        # and at most a node's 8, it counts one node's (SkyRL: NUM_NODES=4, NUM_GPUS=8)
        nodes = next((scalar(env[k]) for k in ("NNODES", "NUM_NODES", "NODES") if k in env), None)
        gpu_count = key in _GPU_COUNT_VARS
        per_node = gpu_count and isinstance(nodes, int) and nodes > 1 and scalar(env.get(key, "")) in range(1, 9)
        name = ("_env_gpus_per_node" if per_node else "_env_world_size") if gpu_count else "_env_" + key.lower()
        if key in env and isinstance(scalar(env[key]), int):
            flags.setdefault(name, scalar(env[key]))
        elif key in ("NNODES", "NUM_NODES", "NODES") and key in env and "$" in env[key]:
            flags.setdefault("_env_nodes_unset", True)  # "NNODES=$NNODES": set outside the excerpt, not one node
    for key, value in env.items():
        if found := _script_var_arg(key, value):
            flags.setdefault(*found)
    devices = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").strip("'\"").split(",") if d.strip().isdigit()]
    if devices:  # a node's GPUs, where nothing else counts them (verl-project/verl#3043: 0,...,15 for 16 GPUs)
        flags.setdefault("_env_visible_devices", len(devices))
    if _PAI_SCRIPT.search(text):
        for key, value in _pai_switches(env).items():
            flags.setdefault(key, value)
    if _SWIFT_LAUNCH.search(body):
        flags.setdefault("_launcher", "megatron-swift")
    elif _MEGATRON_SCRIPT.search(body):  # a Megatron-LM training command: a flag it leaves out takes Megatron's default
        flags.setdefault("_megatron_launch", True)
    for key, value in flags.items():
        if key in facts.prose_keys:  # a script's own flag or variable wins over what its comments or prose say
            facts.args[key] = value
            facts.prose_keys.discard(key)
        else:
            facts.args.setdefault(key, value)


def _arith_end(text: str, start: int) -> int:
    """The index just past the ``))`` closing the ``$((`` at ``start`` (the end of the text if unclosed)."""
    depth = 0
    for i in range(start + 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    return len(text)


def _arith(text: str, env: dict[str, str]) -> str | None:
    """The value of a shell arithmetic expansion ``$((expr))`` of integers, ``+ - * / %`` and parentheses, its
    variables (``$X``, ``${X}`` or a bare name, as bash reads them inside) taken from ``env``; None when a
    variable is unknown or the expression is anything else.

    >>> _arith("$((($W * $M) / ($TP * $PP) * 8))", {"W": "8", "M": "4", "TP": "2", "PP": "1"})
    '128'
    >>> _arith("$((max_prompt_length + 1024 * 20))", {"max_prompt_length": "2048"}), _arith("$((N * 2))", {})
    ('22528', None)
    """
    if not (text.startswith("$((") and text.endswith("))")):
        return None
    expr = re.sub(r"\$\{?([A-Za-z_]\w*)\}?|\b([A-Za-z_]\w*)\b",
                  lambda m: env.get(m.group(1) or m.group(2), "?"), text[3:-2])
    if not re.fullmatch(r"[\d\s+*/%()-]+", expr):
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)  # bash truncates toward zero
                return q if not isinstance(node.op, ast.Mod) else a - b * q
        raise ValueError(ast.dump(node))

    try:
        return str(value(ast.parse(expr, mode="eval").body))
    except (SyntaxError, ValueError, RecursionError):
        return None


# a test of one variable against a literal: [ ${MODEL_SIZE} == 7 ], [[ "$PR" = "fp8" ]], [ $N -eq 2 ]
_IF = re.compile(r"^\s*(if|elif)\s+(\[\[?.*?\]\]?)\s*;?\s*then\b\s*(.*)$")
_TEST = re.compile(r"^\[\[?\s*\"?\$\{?([A-Za-z_]\w*)\}?\"?\s*(==|=|!=|-eq|-ne)\s*\"?([^\"\s\]]*)\"?\s*\]\]?$")


def _chain_hints(text: str) -> dict[str, str]:
    """Values for the variables that a script's ``if / elif`` chains compare but the script never sets, where the
    text around it names exactly one of the values compared: "I test 70b gpt model" above ``if [[ ${MODEL_SIZE} ==
    "1.7b" ]]; then ... elif [[ ${MODEL_SIZE} == "70b" ]]`` takes the 70b branch (NVIDIA/Megatron-LM#1571).

    >>> _chain_hints('I test the 70b model\\nif [[ $S == "7b" ]]; then L=32;\\nelif [[ $S == "70b" ]]; then L=80;\\nfi')
    {'S': '70b'}
    """
    compared: dict[str, set[str]] = {}
    other = []
    for line in text.splitlines():
        if m := _IF.match(line):
            if t := _TEST.match(m.group(2).strip()):
                compared.setdefault(t.group(1), set()).add(t.group(3))
        else:
            other.append(line)
    assigned = set(re.findall(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=", text, re.M))
    rest = "\n".join(other)
    out = {}
    for name, values in compared.items():
        named = [v for v in values if v and re.search(rf"(?<![\w.]){re.escape(v)}(?![\w.])", rest, re.I)]
        if name not in assigned and len(named) == 1:
            out[name] = named[0]
    return out


def _test(condition: str, env: dict[str, str]) -> bool | None:
    """A script's ``[ $VAR == value ]`` test with what ``env`` holds, or None when it cannot be decided."""
    m = _TEST.match(condition)
    if m is None or m.group(1) not in env:
        return None
    equal = env[m.group(1)] == m.group(3)
    return equal if m.group(2) in ("==", "=", "-eq") else not equal


def _taken_statements(lines: Iterable[str], env: dict[str, str]) -> Iterator[str]:
    """A script's lines without comments, the statements of ``if / elif / else / fi`` chains split off and
    kept only for the branch the chain takes with the variables set so far (``env``, filled by the caller
    as it reads the lines): ``if [ ${MODEL_SIZE} == 7 ]; then HIDDEN_SIZE=4096; NUM_LAYERS=32; elif ...``
    picks one model's shape (NVIDIA/Megatron-LM#6314). A chain whose test cannot be decided keeps every
    branch, as a reader that knows no shell would."""
    # per open chain: [this branch active (None: undecided, kept), a branch was taken, a test was undecided]
    stack: list[list[bool | None]] = []

    def active() -> bool:
        return all(state[0] is not False for state in stack)

    def statements(text: str) -> Iterator[str]:
        for part in re.split(r";\s*(?![^(]*\))", text):
            part = part.strip()
            if part == "fi":
                if stack:
                    stack.pop()
            elif part and active():
                yield part

    for raw in lines:
        line = raw.split(" #", 1)[0] if not raw.lstrip().startswith("#") else ""
        if m := _IF.match(line):
            decided = _test(m.group(2), env)
            if m.group(1) == "if" or not stack:
                stack.append([decided, bool(decided), decided is None])
            else:
                state = stack[-1]
                if state[2] or decided is None:  # the chain cannot be decided: every branch is kept
                    state[0], state[2] = None, True
                else:
                    state[0] = not state[1] and decided
                    state[1] = state[1] or decided
            yield from statements(m.group(3))
        elif (m := re.match(r"^\s*else\b\s*(.*)$", line)) and stack:
            state = stack[-1]
            state[0] = None if state[2] else not state[1]
            yield from statements(m.group(1))
        elif re.match(r"^\s*fi\b", line) and stack:
            stack.pop()
        elif ";" in line and re.match(r"^\s*(?:export\s+)?[A-Za-z_]\w*=", line):
            yield from statements(line)
        elif active():
            yield line


def _expand(text: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        return env.get(name, m.group(2) if m.group(2) is not None else m.group(0))
    for _ in range(3):
        new = _VAR.sub(sub, text)
        if new == text:
            break
        text = new
    return text


# NeMo 2 recipe helpers' names of the parallel sizes (``nemo/collections/llm/recipes/*.py``
# ``trainer(tensor_parallelism=..., pipeline_parallelism=..., context_parallelism=..., sequence_parallelism=...)``)
NEMO_RECIPE_SIZES = {"tensor_parallelism": "tensor_model_parallel_size",
                     "pipeline_parallelism": "pipeline_model_parallel_size",
                     "virtual_pipeline_parallelism": "virtual_pipeline_model_parallel_size",
                     "context_parallelism": "context_parallel_size", "expert_parallelism": "expert_model_parallel_size",
                     "expert_tensor_parallelism": "expert_tensor_parallel_size",
                     "sequence_parallelism": "sequence_parallel"}
# Megatron-Core TransformerConfig / Megatron-LM / NeMo names the readers take from a printed config
CONFIG_KEYS = {
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
    "swiglu", "gated_linear_unit", "normalization", "add_bias_linear", "bias", "add_qkv_bias", "qk_layernorm",
    "vocab_size", "padded_vocab_size", "make_vocab_size_divisible_by", "seq_length", "encoder_seq_length",
    "max_position_embeddings", "position_embedding_type", "share_embeddings_and_output_weights",
    "untie_embeddings_and_output_weights", "num_moe_experts", "num_experts", "moe_router_topk", "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size", "moe_layer_freq", "moe_token_dispatcher_type", "multi_latent_attention",
    "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers",
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    # (Megatron-Bridge prints the data-parallel size under comm_overlap: ConfigContainer sets it, training/config.py
    # L1041 @067f987df)
    "data_parallel_size", "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
    "sequence_parallel",
    "micro_batch_size", "global_batch_size", "recompute_granularity", "recompute_method", "recompute_num_layers",
    "recompute_modules",
    "activations_checkpoint_granularity", "activations_checkpoint_method", "activations_checkpoint_num_layers",
    "use_distributed_optimizer", "devices", "num_nodes", "precision", "bf16", "fp16", "fp8", "fp8_recipe", "fp8_param_gather",
    "fp8_params",
    "moe_num_experts", "moe_top_k", "no_weight_tying", "pos_emb",  # GPT-NeoX's model keys (runs.py CONFIG_ALIASES)
    "compute_dtype",  # Megatron-Bridge's performance scripts (--compute_dtype bf16 / fp8_cs / fp8_mx / fp8_sc / nvfp4)
    # NVFP4 (TC fp4 / fp4_recipe / fp4_param; Bridge's mixed_precision.fp4_param_gather) and the layers kept in bf16
    "fp4", "fp4_recipe", "fp4_param", "fp4_param_gather", "first_last_layers_bf16", "num_layers_at_start_in_bf16",
    "num_layers_at_end_in_bf16",
    # the optimizer (Megatron-LM's --optimizer adam / muon / dist_muon; Bridge's OptimizerConfig.optimizer) and the
    # Muon settings the cost follows at their defaults (runs.py MUON_COSTED_DEFAULTS names the others)
    "optimizer", "muon_num_ns_steps", "muon_tp_mode", "muon_scalar_optimizer",
    # a per-module precision recipe (Megatron-LM --te-precision-config-file, Bridge's model.quant_recipe): named as
    # not modelled (runs.py)
    "te_precision_config_file", "quant_recipe",
    # activation CPU offloading (Megatron-Core TransformerConfig; --cpu-offloading-num-layers)
    "cpu_offloading", "cpu_offloading_num_layers", "cpu_offloading_activations", "cpu_offloading_weights",
    "grad_reduce_in_fp32", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage", "override_vocab_size",
    "tp_comm_overlap", "ub_tp_comm_overlap", "overlap_p2p_comm", "overlap_moe_expert_parallel_comm",
    "moe_shared_expert_overlap", "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
    "overlap_grad_reduce", "cp_comm_type", "microbatch_group_size_per_vp_stage", "disable_bias_linear", "group_query_attention", "num_virtual_stages_per_pipeline_rank",
    "attention_head_type",  # BigCode's Megatron-LM fork: multiquery (one KV group) / multihead
    # CUDA graphs (TransformerConfig cuda_graph_impl / cuda_graph_scope / cuda_graph_modules; Bridge prints them
    # under model:, e.g. its full-iteration perf recipes)
    "cuda_graph_impl", "cuda_graph_scope", "cuda_graph_modules", "enable_cuda_graph", "external_cuda_graph",
    # NeMo 2 recipes' trainer() arguments (nemo/collections/llm/recipes: tensor_parallelism=4, ...)
    *NEMO_RECIPE_SIZES,
    # GPUs per node and nodes as launchers spell them (NeMo-Run num_gpus_per_node, verl trainer.n_gpus_per_node /
    # trainer.nnodes, torchrun nproc_per_node / nnodes, a posted "num_gpu_per_node=8" list: Megatron-LM#637)
    "num_gpus_per_node", "num_gpu_per_node", "n_gpus_per_node", "gpus_per_node", "nproc_per_node", "nnodes",
    # NeMo-RL's policy names for the batch and the sequence (examples/configs/*.yaml policy.*)
    "train_global_batch_size", "train_micro_batch_size", "max_total_sequence_length",
    # GPT-NeoX configs (model-parallel-size is its TP, pipe-parallel-size its PP, global-num-gpus the world;
    # EleutherAI/gpt-neox#836) and Python launch scripts' size variables (tp_size = 1 ...; NVIDIA-NeMo/NeMo#14712),
    # verl's actor_tp / actor_pp in a posted summary; slime's --actor-num-nodes / --actor-num-gpus-per-node
    "model_parallel_size", "pipe_parallel_size", "global_num_gpus", *(f"{short}_size" for short in SIZE_NAMES),
    "actor_tp", "actor_pp", "actor_num_nodes", "actor_num_gpus_per_node",
    # the stages' layers as a string (a Bridge override, model.pipeline_model_parallel_layout='Et*6|...|tmL',
    # NVIDIA-NeMo/Megatron-Bridge#5034); DeepSeek Sparse Attention as TransformerConfig names it (GLM5Bridge)
    "pipeline_model_parallel_layout", "experimental_attention_variant", "dsa_indexer_n_heads", "dsa_indexer_head_dim",
    "dsa_indexer_topk", "dsa_indexer_topk_freq", "dsa_indexer_skip_topk_offset", "dsa_indexer_loss_coeff",
    "dsa_indexer_use_sparse_loss",
    # the MLP activation kernel and its FP8 input store (TransformerConfig; Megatron-LM has no flag for the latter)
    "bias_activation_fusion", "activation_func_fp8_input_store",
    # MoE token dropping / padding and the output layer in MXFP8 (Workload fields), hybrid and latent-MoE shapes
    "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_token_drop_policy",
    "moe_router_padding_for_fp8", "moe_router_padding_for_quantization", "fp8_output_proj", "moe_layer_recompute",
    "hybrid_override_pattern", "hybrid_layer_pattern", "is_hybrid_model", "mamba_state_dim", "mamba_head_dim",
    "mamba_num_groups", "mamba_num_heads", "moe_latent_size", "softmax_type", "mtp_use_repeated_layer",
    "main_grads_dtype", "overlap_param_gather", "use_precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype",
    "main_params_dtype",
    # optimizer CPU offload (Megatron-LM --optimizer-cpu-offload / --optimizer-offload-fraction; verl's
    # +actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=True, verl-project/verl#3873)
    "optimizer_cpu_offload", "optimizer_offload_fraction",
    # verl's actor micro batch (actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu, runs.py CONFIG_ALIASES)
    "ppo_micro_batch_size_per_gpu",
    # token-packed micro-batches: verl's use_dynamic_bsz / ppo_max_token_len_per_gpu (runs.py UNMODELLED_ARGS)
    "use_dynamic_bsz", "ppo_max_token_len_per_gpu",
    # NeMo 1's MLP activation, "activation: fast-swiglu" (runs.py: gated or not)
    "activation",
    # settings named as not modelled when set (runs.py UNMODELLED_ARGS)
    "gradient_accumulation_fusion", "moe_grouped_gemm", "delay_wgrad_compute", "moe_flex_dispatcher_backend", "fp32_residual_connection",
    "distribute_saved_activations", "moe_apply_probs_on_input", "keep_fp8_transpose_cache", "enable_mhc_connections",
    "moe_paged_stash", "ep_overlap_early_attn_memory_release", "moe_router_fusion", "log_num_zeros_in_grad", "manual_gc",
}


# Variants the name matcher reads as a preset of the same layers, with what they add that is not modelled (the run
# says it). DeepSeek-V3.2 (DSA), once read as DeepSeek-V3 with a note, has its own preset.
UNMODELLED_VARIANTS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # transformers' Glm4DecoderLayer (the -0414 models) normalises each block's output too: post_self_attn_layernorm
    # and post_mlp_layernorm beside the two input norms GLM-4-9B (ChatGLMModel) has
    (re.compile(r"\bGLM-(?:4|Z1)(?:-Rumination)?-9B-0414\b", re.I), "glm-4-9b",
     "GLM-4-0414's two extra RMSNorms a layer (after attention and after the MLP, 2 x 4096 weights) are not "
     "counted: costed as GLM-4-9B's layers"),
)


def _name_body(name: str) -> str:
    """A preset's name as a pattern: its parts joined by ``-``, ``_`` or a space, with no separator where a
    version number follows a word ("llama2-70b", "Qwen3_235B"), and a version's dot optional, as recipe and script
    names drop it (Megatron-Bridge's ``qwen35_vl``, ``llama31_8b``; "Qwen35-35B-A3B", modelscope/ms-swift#8314).

    >>> bool(re.fullmatch(_name_body("llama-2-70b"), "llama2-70b", re.I)), re.fullmatch(_name_body("qwen3-8b"), "qwen38b")
    (True, None)
    >>> [bool(re.fullmatch(_name_body("qwen3.5-35b-a3b"), t, re.I)) for t in ("Qwen3.5-35B-A3B", "qwen35_35b_a3b")]
    [True, True]
    >>> [bool(re.fullmatch(_name_body("gpt3-175b"), t, re.I)) for t in ("GPT-3 175B", "GPT 3 175b", "gpt3_175b")]
    [True, True, True]
    """
    def escaped(part: str) -> str:
        return re.sub(r"(?<=\d)\\\.(?=\d)", r"\\.?", re.escape(part))

    parts = name.split("-")
    # the family's version may stand apart from its word too: "GPT-3 175B", "GPT 3 175b" (NGC benchmarking pages)
    body = re.sub(r"^([a-z]+)(?=\d)", r"\1[-_ ]?", escaped(parts[0]), flags=re.I)
    for before, part in zip(parts, parts[1:]):
        # ... and before a version "v3" ("DeepSeekV3", Megatron-Bridge's performance summary headings)
        optional = before[-1].isalpha() and (part[0].isdigit() or re.fullmatch(r"v\d+(?:\.\d+)?", part) is not None)
        body += ("[-_ ]?" if optional else "[-_ ]") + escaped(part)
    return body


@functools.cache
def _preset_patterns() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Every preset's and alias's name as a checkpoint / path / post would spell it ("qwen3-8b": "Qwen3-8B",
    "qwen3_8b"; "llama-2-70b": "llama2-70b"), not followed by a suffix that names a different model ("-Lite",
    "-Mini", "-A3B" ...). An MoE name may drop its active-parameter suffix where no other model takes the rest
    ("qwen3_235b/b300/..." is Qwen3-235B-A22B, NVIDIA/Megatron-LM#5289)."""
    from megasolve.models.presets import alias_targets, preset_names

    targets = {**{name: name for name in preset_names()}, **alias_targets()}  # an alias names its preset
    names = list(targets)
    out = []
    for name in names:
        # ("-Distill": a student of another family or a dataset, "Chinese-DeepSeek-R1-Distill-data-110k-SFT")
        # (a module path's dot may precede it, "recipes.nemotronh.nemotron_3_super" (Megatron-Bridge#4214); a version's,
        # "v3.1-8b", may not)
        # ("-Flash": another model of the family, "glm-4.7-flash" is 30B-A3B, not GLM-4.7; THUDM/slime#2384)
        out.append((re.compile(rf"(?<![A-Za-z0-9])(?<!\d\.){_name_body(name)}(?![A-Za-z0-9]|[-_ .]?(?:lite|mini|nano|small|"
                               rf"tiny|proxy|distill|flash|air|turbo|vl|omni|a\d+b|\d)\b)", re.I), targets[name]))
        # short forms, only where the name ends ("Qwen3-235B-2507-..." is a dataset): without the active-parameter
        # suffix ("qwen3_235b"), and without the sizes where a qualifier word stays ("the nemotron-3-super model",
        # NVIDIA-NeMo/Megatron-Bridge#3463), each only where no other model shares it
        shorts = {re.sub(r"-a\d+b$", "", name), re.sub(r"(?:-a?\d+(?:\.\d+)?b)+$", "", name)}
        for short in shorts - {name}:
            qualified = short.count("-") >= 1 and short.rsplit("-", 1)[1].isalpha() or short.endswith(tuple(
                f"-{part}" for part in name.split("-") if re.fullmatch(r"\d+(?:\.\d+)?b", part)))
            if qualified and short not in names and sum(n.startswith(short + "-") for n in names) == 1:
                out.append((re.compile(rf"(?<![A-Za-z0-9.]){_name_body(short)}(?![-_.A-Za-z0-9])", re.I),
                            targets[name]))
        # the size without its "b" where the name ends ("gpt-oss-20", NVIDIA-NeMo/RL#2157), two digits or more and
        # only where no other model's name begins with it
        if (m := re.fullmatch(r"(.+-\d{2,})b", name)) and not any(n.startswith(m.group(1)) and n != name for n in names):
            out.append((re.compile(rf"(?<![A-Za-z0-9.]){_name_body(m.group(1))}(?![-_.A-Za-z0-9]|\.\d)", re.I),
                        targets[name]))
    return tuple(out)


@functools.cache
def _preset_patterns_by_word() -> tuple[tuple[str, tuple[tuple[re.Pattern[str], str], ...]], ...]:
    """``_preset_patterns`` grouped by the letters every match of theirs begins with (a name's leading word, which
    ``_name_body`` keeps literal: "llama" of "llama-2-70b", "gpt" of "gpt3-175b"): a line that does not hold the
    word, in any case, is not scanned with its patterns -- the same answer, at a substring test a group instead of
    a regular-expression scan a pattern (most of a log's lines name no model)."""
    groups: dict[str, list[tuple[re.Pattern[str], str]]] = {}
    for pattern, target in _preset_patterns():
        word = re.match(r"\(\?<!\[A-Za-z0-9\.?\]\)(?:\(\?<!\\d\\\.\))?([a-z]+)", pattern.pattern)
        groups.setdefault(word.group(1).lower() if word else "", []).append((pattern, target))
    return tuple((word, tuple(patterns)) for word, patterns in groups.items())


# a family name with the total (and active) parameter count: "glm4.5-106B-A12B", "Qwen3 235B-A22B"
_SIZED_NAME = re.compile(r"(?<![A-Za-z0-9.])([A-Za-z][A-Za-z0-9.]*?)[-_ ]?(\d+(?:\.\d+)?)[bB]"
                         r"(?:[-_ ][aA](\d+(?:\.\d+)?)[bB])?(?![-_.]?[A-Za-z0-9])")  # where the name ends: not
# "Chinese-Qwen3-235B-2507-Distill-data" (a dataset, modelscope/ms-swift#5737)


# a version written with underscores, as recipe and file names do: "llama_3_3_70b", "qwen3_5_35b_a3b"
# (NVIDIA-NeMo/Automodel#2673) read as "llama-3.3-70b", "qwen3.5-35b-a3b" (the same length: positions stay)
_UNDERSCORED_VERSION = re.compile(r"(?<=[A-Za-z])(_?)(\d)_(\d)_(?=\d+(?:\.\d+)?[bB](?![A-Za-z0-9]))")


def _dotted_version(m: re.Match) -> str:
    """The dotted spelling of one ``_UNDERSCORED_VERSION`` match.

    >>> _UNDERSCORED_VERSION.sub(_dotted_version, "llama_3_3_70b llama3_1_8b qwen3_5_35b_a3b run_1_2.sh")
    'llama-3.3-70b llama3.1-8b qwen3.5-35b_a3b run_1_2.sh'
    """
    return f"{'-' if m.group(1) else ''}{m.group(2)}.{m.group(3)}-"


@functools.cache
def _preset_sizes() -> tuple[tuple[str, str, float, float], ...]:
    """``(preset, name without separators, total, active parameters in billions)`` of every preset."""
    from megasolve.models.params import active_params, total_params
    from megasolve.models.presets import load_preset, preset_names

    out = []
    for name in preset_names():
        spec = load_preset(name)
        out.append((name, re.sub(r"[-_ ]", "", name), total_params(spec) / 1e9, active_params(spec) / 1e9))
    return tuple(out)


def _sized_preset(family: str, total: float, active: float | None) -> str | None:
    """The one preset of ``family`` whose parameter counts the name states (total within 10 %, active within 15 %):
    "glm4.5-106B-A12B" is GLM-4.5-Air, "glm4.5-355B-A32B" GLM-4.5 (THUDM/slime#1139).

    >>> _sized_preset("glm4.5", 106, 12), _sized_preset("glm4.5", 355, 32), _sized_preset("glm4.5", 50, None)
    ('glm-4.5-air', 'glm-4.5', None)
    >>> _sized_preset("DeepSeek", 671, None)  # the base model, not its V3.2 of the same size
    'deepseek-v3'
    >>> _sized_preset("gpt", 20, None)  # NeMo's "megatron_gpt_20B" (NVIDIA/NeMo#5542) is no GPT-OSS
    """
    key = re.sub(r"[-_ ]", "", family.lower())
    if len(key) < 3 or total <= 0 or active == 0:  # "Qwen3-0B": no model
        return None
    # a family word goes on with its version ("DeepSeek" -> deepseek-v3, "Kimi" -> kimi-k2), not with another word
    # ("gpt" is not gpt-oss); a name with its version may name a variant ("glm4.5" -> glm-4.5-air)
    found = [name for name, flat, n, a in _preset_sizes() if flat.startswith(key) and abs(n / total - 1) <= 0.10
             and (active is None or abs(a / active - 1) <= 0.15)
             and (key[-1].isdigit() or re.match(r"[a-z]?\d|$", flat[len(key):]))]
    # of a base model and its later variants of the same size, the base: "DeepSeek 671b" is DeepSeek-V3, not V3.2
    # (verl's docs/perf/dpsk.md benchmark row)
    base = [name for name in found if all(other.startswith(name) for other in found)]
    return found[0] if len(found) == 1 else base[0] if len(base) == 1 and len(found) == 2 else None


def _preset_names_in(line: str) -> dict[str, int]:
    """Presets named in a line, each with where it is first named; of names overlapping in the line, the longest
    ("deepseek-v3-proxy", not "deepseek-v3"); a family named with its sizes is the preset of those sizes
    (``_sized_preset``)."""
    if not re.search(r"\d", line):  # every preset's name holds a digit
        return {}
    line = _UNDERSCORED_VERSION.sub(_dotted_version, line)
    lower = line.lower()
    spans = [(m.start(), m.end(), name) for word, patterns in _preset_patterns_by_word() if word in lower
             for pattern, name in patterns for m in pattern.finditer(line)]
    for m in _SIZED_NAME.finditer(line):
        if name := _sized_preset(m.group(1), float(m.group(2)), float(m.group(3)) if m.group(3) else None):
            spans.append((m.start(), m.end(), name))
    out: dict[str, int] = {}
    for s, e, name in spans:
        if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in spans):
            out[name] = min(out.get(name, s), s)
    return out


# NeMo 2 config classes and Megatron-Bridge recipe names that fix a model's shape -> megasolve presets; a recipe
# name may go on with an underscore ("llama3_8b_llm_pretrain.yaml", Megatron-Bridge#388)
# (NeMo nemo/collections/llm/gpt/model/{llama,mixtral,qwen3,deepseek}.py; Megatron-Bridge recipes/)
MODEL_NAMES = tuple((re.compile(p, re.I), preset) for p, preset in (
    (r"\bLlama31?Config8B\b|\bllama3[1_]*_8b(?![A-Za-z0-9])|Meta-Llama-3(?:\.1)?-8B\b", "llama-3.1-8b"),
    (r"\bLlama31?Config70B\b|\bllama3[1_]*_70b(?![A-Za-z0-9])|Meta-Llama-3(?:\.1)?-70B\b", "llama-3.1-70b"),
    (r"\bLlama31Config405B\b|\bllama31_405b(?![A-Za-z0-9])|Llama-3\.1-405B\b", "llama-3.1-405b"),
    (r"\bLlama2Config7B\b|\bllama2_7b(?![A-Za-z0-9])|Llama-2-7b\b", "llama-2-7b"),
    (r"\bLlama2Config13B\b|\bllama2_13b(?![A-Za-z0-9])|Llama-2-13b\b", "llama-2-13b"),
    (r"\bLlama2Config70B\b|\bllama2_70b(?![A-Za-z0-9])|Llama-2-70b\b", "llama-2-70b"),
    # FlagPerf's case names: "mixtral_8*7B" (flagos-ai/FlagPerf README tables)
    (r"\bMixtralConfig8x7B\b|\bmixtral_8[x*]7b(?![A-Za-z0-9])|Mixtral-8x7B\b", "mixtral-8x7b"),
    (r"\bMixtralConfig8x22B\b|\bmixtral_8x22b(?![A-Za-z0-9])|Mixtral-8x22B\b", "mixtral-8x22b"),
    # "Qwen-next lora" (modelscope/ms-swift#7371): one model of the name
    (r"\bQwen-?next\b(?![-_.]?\d)", "qwen3-next-80b-a3b"),
    # verl's example scripts: "run_qwen3moe-30b_megatron.sh" (verl-project/verl#1649)
    (r"(?<![A-Za-z0-9])qwen3[-_]?moe[-_]30b(?![A-Za-z0-9])", "qwen3-30b-a3b"),
    (r"(?<![A-Za-z0-9])qwen3[-_]?moe[-_]235b(?![A-Za-z0-9])", "qwen3-235b-a22b"),
    (r"\bQwen3MoEConfig30B_A3B\b|\bqwen3_30b_a3b(?![A-Za-z0-9])|Qwen3-30B-A3B\b", "qwen3-30b-a3b"),
    (r"\bQwen3MoEConfig235B_A22B\b|\bqwen3_235b_a22b(?![A-Za-z0-9])|Qwen3-235B-A22B\b", "qwen3-235b-a22b"),
    # "DSv3-671B mxfp8" (NVIDIA-NeMo/Megatron-Bridge#4226)
    (r"\bDeepSeekV3Config\b|\bdeepseek_v3(?![A-Za-z0-9])|DeepSeek-V3\b|\bDSv3(?:[-_]671B)?(?![A-Za-z0-9.])", "deepseek-v3"),
    # FlagPerf's "qwen1.5_14B_MoE": Qwen1.5-MoE-A2.7B, 14.3B parameters (flagos-ai/FlagPerf README tables)
    (r"(?<![A-Za-z0-9])qwen1\.5[-_]14B[-_]MoE(?![A-Za-z0-9])", "qwen1.5-moe-a2.7b"),
    (r"\bDeepSeekV2LiteConfig\b|\bdeepseek_v2_lite(?![A-Za-z0-9])|DeepSeek-V2-Lite\b", "deepseek-v2-lite"),
    # a point release with its predecessor's config.json shape (MiniMaxAI/MiniMax-M2.1: 62 layers, 256 experts top-8)
    (r"\bMiniMax[-_]M2\.1\b", "minimax-m2"),
    # GLM-4's April 2025 9B models, the reasoning ones included ("GLM/GLM-Z1-9B-0414/", THUDM/slime#1321): GLM-4-9B's
    # layers (slime's scripts/models/glm4-9B.sh, which its GLM-Z1-9B-0414 example runs: 40 layers, hidden 4096, FFN
    # 13696, 32 heads, 2 query groups, QKV bias, plus --post-self-attn-layernorm --post-mlp-layernorm, which are said:
    # UNMODELLED_VARIANTS)
    (r"\bGLM-Z1(?:-Rumination)?-9B-0414\b", "glm-4-9b"),
))


# every pattern above searched only in a text that holds one of the literals its matches hold (prefilter.py): the same
# answers, without some three hundred searches on every line of a long log
guard_patterns(globals())
