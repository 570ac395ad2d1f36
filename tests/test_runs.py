"""Readers of training logs, launch scripts and runs files (solver/runs.py), on real logs users
posted in public issue threads (tests/data/logs/INDEX.yaml) and on the formats' edge cases."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from megasolve.models.errors import MegasolveError
from megasolve.solver.logs import parse_log, strip_prefix
from megasolve.solver.runs import _world_from_memory_ranks, read_runs, run_from_log

LOGS = Path(__file__).parent / "data" / "logs"
INDEX = yaml.safe_load((LOGS / "INDEX.yaml").read_text(encoding="utf-8"))


def test_every_fixture_is_indexed_with_its_source():
    files = {p.name for p in LOGS.iterdir() if p.name != "INDEX.yaml"}
    assert files == {e["file"] for e in INDEX}
    assert all(e["source"].startswith("https://") for e in INDEX)  # an issue thread, a blog post, a repository's file


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_real_log_facts(entry):
    facts = parse_log((LOGS / entry["file"]).read_text(encoding="utf-8"))
    want = entry["expect"]
    for key, value in want.get("args", {}).items():
        assert facts.args.get(key) == value, key
    if "world_size" in want:
        assert facts.world_size == want["world_size"]
        assert facts.world_parts == want["world_parts"]
    if "iterations" in want:
        assert len(facts.iterations) == want["iterations"]
        assert {g for *_, g in facts.iterations} == ({want["global_batch_size"]} if "global_batch_size" in want else {None})
    if "memory_rank" in want:
        assert facts.memory == {want["memory_rank"]: (want["max_allocated_mib"], want["max_reserved_mib"])}
    assert facts.oom == want.get("oom", False)
    if "oom_if" in want:  # the condition the text puts on its OOM ("When tp=1 is set, OOM occurs")
        assert list(facts.args["_prose_oom_if"]) == want["oom_if"]
    if "reported_tflops" in want:  # rates stated outside iteration lines
        assert facts.reported_tflops == want["reported_tflops"]
    if "stated_step_s" in want:
        assert facts.stated_step_s == pytest.approx(want["stated_step_s"])
    if "oom_capacity_gib" in want:
        assert facts.oom_capacity_gib == want["oom_capacity_gib"]
    if "theoretical_mb" in want:
        assert facts.theoretical_mb == want["theoretical_mb"]
    if "nemo_step_s" in want:
        assert [s for _, s in facts.nemo_steps] == [want["nemo_step_s"]]
    if "nemo_steps" in want:
        assert [s for _, s in facts.nemo_steps] == want["nemo_steps"]
    if "rank_params" in want:
        assert facts.rank_params == {(t, p): n for t, p, n in want["rank_params"]}
    if "gpu_names" in want:
        assert facts.gpu_names == want["gpu_names"]
    assert facts.reserved_only_mib == pytest.approx(want.get("reserved_only_mib"))
    if "memory_all" in want:  # every rank's (max allocated, max reserved) MiB
        assert facts.memory == {int(r): tuple(v) for r, v in want["memory_all"].items()}
    if "model_names" in want:
        assert set(facts.model_names) == set(want["model_names"])
    if "world_from_memory" in want:  # the GPU count from the ranks that print memory (runs._world_from_memory_ranks)
        tp, pp, cp = (want.get("args", {}).get(f"{k}_parallel_size", 1) for k in ("tensor_model", "pipeline_model",
                                                                                  "context"))
        assert _world_from_memory_ranks(facts, tp, pp, cp, facts.args) == want["world_from_memory"]
    assert list(facts.seq_alternatives) == want.get("seq_alternatives", [])  # "16k or 32k context"
    for key in want.get("unset", []):  # a value the excerpt leaves to a shell variable it never sets
        assert key not in facts.args, key


@pytest.mark.parametrize("entry", [e for e in INDEX if "step_time_s" in e["expect"]], ids=lambda e: e["file"])
def test_real_log_step_time_skips_warmup(entry):
    run = read_runs(LOGS / entry["file"], model="llama-3.1-8b", gpu="h100", num_gpus=16, seq_length=4096,
                    global_batch_size=128, args={"tensor-model-parallel-size": 1, "expert-model-parallel-size": 1})[0]
    assert run.measured.step_time_s == pytest.approx(entry["expect"]["step_time_s"], rel=1e-6)
    assert run.measured.iterations == entry["expect"]["timed"]  # the first logged interval and iterations 1-3 are warm-up


@pytest.mark.parametrize("entry", [e for e in INDEX if "tflops_per_gpu" in e["expect"]], ids=lambda e: e["file"])
def test_real_log_reported_tflops(entry):
    """The TFLOP/s per GPU the framework printed (its own FLOP convention), median after the warm-up."""
    run = read_runs(LOGS / entry["file"], model="llama-3.1-8b", gpu="h100", num_gpus=16, seq_length=4096,
                    global_batch_size=128, step_time_s=1.0, args={"tensor-model-parallel-size": 1})[0]
    assert run.measured.tflops_per_gpu == pytest.approx(entry["expect"]["tflops_per_gpu"], rel=1e-6)


@pytest.mark.parametrize("entry", [e for e in INDEX if e.get("complete")], ids=lambda e: e["file"])
def test_real_log_that_says_everything_reads_with_no_flags(entry):
    """An excerpt that states model, GPU type and count, layout, batch, sequence and an outcome is read bare."""
    run = read_runs(LOGS / entry["file"])[0]
    assert run.cluster.num_gpus > 0 and run.measured is not None


@pytest.mark.parametrize("entry", [e for e in INDEX if not e.get("complete")], ids=lambda e: e["file"])
def test_real_log_missing_facts_are_named_with_their_flag(entry):
    with pytest.raises(MegasolveError) as err:
        read_runs(LOGS / entry["file"])
    text = str(err.value)
    assert entry["file"] in text and "\n" not in text
    if "refused" in entry:  # a run megasolve cannot cost (a Hyena model): refused by name, nothing asked for
        assert entry["refused"] in text and "--model" not in text
        return
    named = bool(parse_log((LOGS / entry["file"]).read_text(encoding="utf-8")).model_names)  # a preset's name
    if not entry.get("whole_model") and not named:
        assert "--model" in text or "--vocab-size" in text  # the excerpt does not print the whole model
    counts = {"_env_gpus_per_node", "data_parallel_size", "nproc_per_node", "devices", "_env_nproc_per_node", "num_nodes",
              "global_num_gpus", "actor_num_gpus_per_node", "num_gpus_per_node", "_env_n_per_node", "_env_world_size",
              "world_size", "gpus_per_node", "_prose_num_gpus", "_prose_data_parallel_size", "_prose_nodes", "_prefix_world_size",
              "n_gpus_per_node", "_mpirun_np", "_sbatch_gpus_per_node", "_env_visible_devices",
              "_dist_adam_dp", "_nccl_nranks"}  # what gives a GPU count
    if "gpu_names" in entry["expect"]:  # nodes of a named GPU: the catalog's node (runs._world)
        counts |= {"nnodes", "_env_nnodes", "_env_num_nodes", "_env_nodes", "_sbatch_nodes"}
    rates = parse_log((LOGS / entry["file"]).read_text(encoding="utf-8")).stated_tokens_per_gpu  # they can count GPUs
    if not {"world_size", "world_from_memory"} & set(entry["expect"]) \
            and not counts & set(entry["expect"].get("args", {})) and not rates:
        assert "--gpus N" in text
    if "gpu_names" not in entry["expect"]:
        assert "--gpu TYPE" in text  # the excerpt prints no GPU name
    if "missing" in entry:
        assert entry["missing"] in text


def test_mixtral_excerpt_completed_by_flags():
    """NVIDIA/Megatron-LM#756: Mixtral 8x7B on 16 H100 (the title); the excerpt prints no layout, so the
    layout here is an example supplied with --arg, and what the log does print (batch, memory rank) is read."""
    run = read_runs(LOGS / "megatron-lm-756-mixtral-h100.log", model="mixtral-8x7b", gpu="h100", num_gpus=16,
                    seq_length=4096, args={"tensor-model-parallel-size": 2, "expert-model-parallel-size": 8})[0]
    assert (run.layout.tp, run.layout.ep, run.layout.dp, run.cluster.num_gpus) == (2, 8, 8, 16)
    assert run.workload.global_batch_size == 128  # from the iteration lines
    assert run.measured.rank == 1 and run.measured_stage() == 0
    assert run.measured.peak_allocated_gb == pytest.approx(54250.98583984375 * 2**20 / 1e9)
    assert run.workload.moe_dispatcher == "alltoall"
    assert any("dispatcher" in n for n in run.notes) and any("distributed optimizer" in n for n in run.notes)


def test_v100_oom_thread():
    """NVIDIA/Megatron-LM#60: 16 ranks, model-parallel 2, batch_size 8, activation checkpointing, OOM."""
    run = read_runs(LOGS / "megatron-lm-60-v100-oom.log", model="llama-2-7b", gpu="v100-32g", seq_length=1024,
                    global_batch_size=128)[0]
    assert (run.layout.tp, run.layout.dp, run.layout.mbs, run.layout.recompute) == (2, 8, 8, "full")
    assert run.measured.oom and run.cluster.gpu.name == "v100-32g"
    # "using torch.float16 for parameters" is printed when --fp16 is set (megatron/arguments.py L152-168 @23.04)
    assert any("fp16 run costed as bf16" in n for n in run.notes)


def test_printed_word_embedding_rows_are_one_tp_ranks_share_of_the_vocabulary():
    """A ``named_parameters()`` print (NVIDIA/Megatron-LM#845) gives the padded vocabulary: the rows times TP."""
    text = ("torchrun pretrain_gpt.py --num-layers 2 --hidden-size 4096 --num-attention-heads 32 --seq-length 512 "
            "--max-position-embeddings 512 --micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 2 "
            "--bf16\nembedding.word_embeddings.weight torch.Size([64128, 4096])\n")
    run = run_from_log(text, "shapes", {"gpu": "h100", "num_gpus": 2, "step_time_s": 1.0})
    assert run.spec.vocab_size == 128256 and any("64128 rows x TP 2" in n for n in run.notes)
    with pytest.raises(MegasolveError, match="--vocab-size"):  # a width that is not the model's: not its embedding
        run_from_log(text.replace("4096])", "1024])"), "shapes", {"gpu": "h100", "num_gpus": 2, "step_time_s": 1.0})


def test_a_rate_bf16_cannot_reach_says_the_precision_is_lower():
    """vuiseng9/nemo-perf-nvfp4: 1,831 TFLOP/s per B200 (81 % of its bf16 peak) beside no precision flag."""
    given = {"model": "llama-3.1-8b", "gpu": "b200", "num_gpus": 8, "seq_length": 8192,
             "args": {"tensor-model-parallel-size": 1, "micro-batch-size": 2}}
    run = read_runs(LOGS / "vuiseng9-nemo-perf-nvfp4-llama3-8b-8xb200-wrapped-step-line.txt", **given)[0]
    assert any("81% of the b200's bf16 peak" in n and "likely FP8 or FP4" in n for n in run.notes)
    run = read_runs(LOGS / "vuiseng9-nemo-perf-nvfp4-llama3-8b-8xb200-wrapped-step-line.txt", precision="fp8", **given)[0]
    assert not any("likely FP8" in n for n in run.notes)  # a precision given is not second-guessed


def test_a_gpu_the_catalog_lacks_is_said_before_the_facts_the_log_lacks():
    """flagos-ai/TransformerEngine-FL#61 posts an Enflame GCU run: --gpu enflame is the first error, not the last."""
    with pytest.raises(MegasolveError, match="--gpu=enflame: not in the GPU catalog"):
        run_from_log("iteration        4/      10 | elapsed time per iteration (ms): 558.7 |", "gcu", {"gpu": "enflame"})


@pytest.mark.parametrize("text, tp", [
    ("TP4/PP1/EP8 for the trainer. TP8 to 2xTP4 increases rollout concurrency", 4),  # Relax#193: the engine's TP
    ("We train with TP=4 PP=2 and run rollout with vLLM", 4),  # the trainer's sizes, then the engine's word
    ("Training parallelism: TP=4, PP=2, rollout TP=8", 4),
])
def test_a_rollout_engines_tp_is_not_the_trainers(text, tp):
    assert parse_log(text).args.get("tensor_model_parallel_size") == tp


def test_a_performance_summary_rows_vp_column_is_read():
    """Megatron-Bridge's docs/performance-summary.md (@4ab94df L37-46): "| TP | PP | CP | VP | EP |", MXFP8."""
    text = ("| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
            "| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 |\n")
    args = parse_log(text).args
    assert (args["virtual_pipeline_model_parallel_size"], args["pipeline_model_parallel_size"], args["precision"]) == \
        (8, 2, "mxfp8")


@pytest.mark.parametrize("text, name", [
    ("#### Model: DeepSeekV3", "deepseek-v3"),  # Megatron-Bridge's performance-summary heading
    ("deepseekv3 671b on 256 GB300", "deepseek-v3"),
    ("DeepSeekV3.2 with DSA", "deepseek-v3.2"),
])
def test_a_version_written_against_the_family_name_is_read(text, name):
    assert set(parse_log(text).model_names) == {name}


def test_a_setup_lists_dispatcher_and_a_tables_node_count_are_read():
    """Megatron-MoE-ModelZoo's long-context section: "- Dispatcher: DeepEP" and an "| NNODES |" column."""
    text = ("- Dispatcher: DeepEP\n\n| GPU | SEQ_LEN | NNODES | TP | CP | GBS |\n| --- | --- | --- | --- | --- | --- |\n"
            "| H100| 16384 | 32 | 4 | 1 | 256 |\n")
    args = parse_log(text).args
    assert (args["moe_token_dispatcher_type"], args["moe_flex_dispatcher_backend"], args["_prose_nodes"]) == \
        ("flex", "deepep", 32)


def test_launch_script_variables_and_world_size():
    # GPUS_PER_NODE=8 but NNODES=${WORLD_SIZE}, a variable the excerpt never sets: the node count is unknown, so
    # the world size is named missing rather than taken as one node (the fifth collection's rule, ms-swift#5120)
    with pytest.raises(MegasolveError, match="--gpus N"):
        read_runs(LOGS / "megatron-lm-606-launch-script.sh", model="llama-2-7b", gpu="a100-40g",
                  seq_length=64, global_batch_size=8, step_time_s=1.0)
    run = read_runs(LOGS / "megatron-lm-606-launch-script.sh", model="llama-2-7b", gpu="a100-40g", num_gpus=8,
                    seq_length=64, global_batch_size=8, step_time_s=1.0)[0]
    assert run.cluster.num_gpus == 8 and run.layout.tp == 1 and run.layout.pp == 1


# ---------------------------------------------------------------------------- format edge cases
ARGS_DUMP = """\
------------------------ arguments ------------------------
  bf16 ............................................ True
  ffn_hidden_size ................................. 14336
  global_batch_size ............................... 256
  group_query_attention ........................... True
  hidden_size ..................................... 4096
  micro_batch_size ................................ 2
  normalization ................................... RMSNorm
  num_attention_heads ............................. 32
  num_layers ...................................... 32
  num_query_groups ................................ 8
  pipeline_model_parallel_size .................... 2
  position_embedding_type ......................... rope
  recompute_granularity ........................... selective
  seq_length ...................................... 8192
  sequence_parallel ............................... True
  swiglu .......................................... True
  tensor_model_parallel_size ...................... 2
  untie_embeddings_and_output_weights ............. True
  use_distributed_optimizer ....................... True
  add_bias_linear ................................. False
  vocab_size ...................................... 128256
  world_size ...................................... 16
-------------------- end of arguments ---------------------
"""


def _iteration(i: int, ms: float, stamp: bool = True, gbs: int = 256) -> str:
    head = "[2025-01-01 00:00:00] " if stamp else ""
    return (f" {head}iteration {i:8d}/    1000 | consumed samples: {i * gbs:12d} | elapsed time per iteration (ms): {ms} "
            f"| throughput per GPU (TFLOP/s/GPU): 400.0 | learning rate: 1.0E-04 | global batch size: {gbs:5d} | "
            f"lm loss: 2.0E+00 | extra field: 7 |")


def test_args_dump_with_slurm_prefixes_and_interleaved_ranks():
    lines = ["0: " + line for line in ARGS_DUMP.splitlines()]
    for i in range(1, 8):  # the last pipeline stage logs iterations; ranks 8 and 12 interleave
        lines.append(f"8: {_iteration(i, 30000.0 if i == 1 else 1000.0 + i)}")
        lines.append(f"12: {_iteration(i, 30000.0 if i == 1 else 1000.0 + i, stamp=False)}")
        lines.append("[node3:13]: [Rank 13] (after 2 iterations) memory (MB) | allocated: 100.0 | max allocated: "
                     "30000.0 | reserved: 32000.0 | max reserved: 33000.0")
    run = run_from_log("\n".join(lines), "interleaved", {"gpu": "h100"})
    assert run.spec.num_layers == 32 and run.spec.num_query_groups == 8 and run.spec.vocab_size == 128256
    assert (run.layout.tp, run.layout.pp, run.layout.dp, run.layout.mbs) == (2, 2, 4, 2)
    assert run.layout.recompute == "selective" and run.layout.distributed_optimizer
    assert run.workload.seq_length == 8192 and run.workload.global_batch_size == 256
    assert run.measured.step_time_s == pytest.approx(1005.5 / 1e3)  # iterations 4..7; 1..3 are warm-up
    assert run.measured.rank == 13 and run.measured_stage() == 1
    assert run.measured.peak_allocated_gb == pytest.approx(30000.0 * 2**20 / 1e9)


def test_prefixes():
    assert strip_prefix("[rank3]: iteration 5/ 10 |") == "iteration 5/ 10 |"
    assert strip_prefix("[default7]: iteration 2/ 25 |") == "iteration 2/ 25 |"
    assert strip_prefix("3:  [2026-05-29 03:52:45] iteration 300/ 300 |") == "iteration 300/ 300 |"  # stamp too
    assert strip_prefix("\x1b[32mtrain\x1b[0m") == "train"


def test_oom_message_new_and_old_forms():
    new = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacity of "
           "79.10 GiB of which 1.2 GiB is free.")
    facts = parse_log(new)
    assert facts.oom and facts.oom_capacity_gib == 79.10
    old = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 39.59 GiB total capacity; 1 GiB)"
    facts = parse_log(old)
    assert facts.oom and facts.oom_capacity_gib == 39.59


def test_gpu_and_versions_from_the_log():
    text = ARGS_DUMP + "\n".join(_iteration(i, 900.0) for i in range(1, 6)) + \
        "\n|   0  NVIDIA H100 80GB HBM3          On  | 00000000:1B:00.0 Off |\nmegatron-core 0.14.0rc8\n"
    run = run_from_log(text, "gpu")
    assert run.cluster.gpu.name == "h100" and "megatron-core 0.14.0rc8" in run.software


def test_nemo_config_dump_and_step_timing():
    text = """\
trainer:
  devices: 8
  num_nodes: 2
  precision: bf16-mixed
model:
  micro_batch_size: 1
  global_batch_size: 128
  tensor_model_parallel_size: 4
  pipeline_model_parallel_size: 1
  encoder_seq_length: 4096
  num_layers: 32
  hidden_size: 4096
  ffn_hidden_size: 14336
  num_attention_heads: 32
  num_query_groups: 8
  gated_linear_unit: true
  normalization: rmsnorm
  bias: false
  override_vocab_size: 128256
Epoch 0: : 3/100 [00:10<00:00, reduced_train_loss=10.1, global_step=2.000, train_step_timing in s=5.10]
Epoch 0: : 4/100 [00:10<00:00, reduced_train_loss=10.1, global_step=3.000, train_step_timing in s=2.10]
Epoch 0: : 5/100 [00:10<00:00, reduced_train_loss=10.1, global_step=4.000, train_step_timing in s=2.00]
Epoch 0: : 6/100 [00:10<00:00, reduced_train_loss=10.1, global_step=5.000, train_step_timing in s=2.20]
Epoch 0: : 7/100 [00:10<00:00, reduced_train_loss=10.1, global_step=6.000, train_step_timing in s=2.10]
"""
    run = run_from_log(text, "nemo", {"gpu": "a100-80g"})
    assert run.cluster.num_gpus == 16 and run.layout.tp == 4 and run.layout.dp == 4
    assert run.spec.swiglu and run.spec.normalization == "RMSNorm" and not run.spec.add_bias_linear
    assert run.workload.seq_length == 4096
    assert run.measured.step_time_s == pytest.approx(2.15)


def test_runs_yaml_and_csv(tmp_path):
    entry = {"model": "qwen3-30b-a3b", "cluster": {"gpu": "h100", "num_gpus": 16},
             "layout": {"tp": 1, "pp": 1, "ep": 16, "etp": 1, "mbs": 1, "recompute": "none"},
             "workload": {"seq_length": 4096, "global_batch_size": 512, "precision": "fp8"},
             "measured": {"step_time_s": 24.1, "peak_allocated_gb": 61.2, "rank": "last"}}
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump([entry]))
    run = read_runs(tmp_path / "runs.yaml")[0]
    assert run.layout.ep == 16 and run.layout.dp == 16 and run.workload.precision == "fp8"
    assert run.measured_stage() == 0 and run.measured_tokens_per_s_per_gpu == pytest.approx(512 * 4096 / 24.1 / 16)
    (tmp_path / "runs.csv").write_text(
        "model,cluster.gpu,cluster.num_gpus,layout.tp,layout.ep,workload.seq_length,workload.global_batch_size,"
        "measured.step_time_s\nqwen3-30b-a3b,h100,16,1,16,4096,512,24.1\n")
    assert read_runs(tmp_path / "runs.csv")[0].layout == run.layout.__class__(tp=1, dp=16, ep=16, etp=1)


def test_runs_file_errors_are_one_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump([{"model": "llama-3.1-8b", "cluster": {"gpu": "h100",
                                                         "num_gpus": 8}, "layout": {"tq": 2},
                                                         "measured": {"step_time_s": 1.0}}]))
    with pytest.raises(MegasolveError, match="layout=tq"):
        read_runs(tmp_path / "bad.yaml")
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump([{"model": "llama-3.1-8b", "cluster": {"gpu": "h100",
                                                           "num_gpus": 8}, "measured": {}}]))
    with pytest.raises(MegasolveError, match="needs step_time_s"):
        read_runs(tmp_path / "empty.yaml")
    with pytest.raises(MegasolveError, match="no such file"):
        read_runs(tmp_path / "missing.log")
    with pytest.raises(MegasolveError, match="is a directory"):
        read_runs(tmp_path)


def test_standard_input_and_a_pipe_read_like_the_file(monkeypatch, tmp_path):
    """``-`` reads standard input (named ``stdin``), and a FIFO (what ``<(cat train.log)`` passes) reads as a
    stream with no size to check first; both give the run the file gives, with text-mode newlines."""
    import io
    import os
    import sys
    import threading

    log = LOGS / "AI-Hypercomputer-gpu-recipes-a4-qwen3-30b-32gpu-ep8-dll.log"  # NeMo 2 progress-bar lines
    want = read_runs(log, num_gpus=32)[0]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    run = read_runs("-", num_gpus=32)[0]
    assert (run.id, run.layout, run.measured) == ("stdin", want.layout, want.measured)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(log.read_bytes().replace(b"\n", b"\r\n")))
    writer.start()
    run = read_runs(fifo, num_gpus=32)[0]
    writer.join()
    assert (run.layout, run.measured) == (want.layout, want.measured)


def test_nemo_hydra_launch_read_as_a_run_and_checked():
    """NVIDIA-NeMo/NeMo#8059: LLaMA-13B shape as NeMo overrides on 8 x A100; the thread measured
    under 1900 tokens/s/GPU (gbs 32, seq 4096 -> 8.6 s per step)."""
    from megasolve.solver.calibrate import check

    run = read_runs(LOGS / "nemo-8059-hydra-launch.sh", gpu="a100-80g", vocab_size=32000, seq_length=4096,
                    step_time_s=32 * 4096 / (1900 * 8))[0]
    assert (run.cluster.num_gpus, run.layout.tp, run.layout.dp) == (8, 4, 2)
    assert run.layout.sequence_parallel and run.layout.recompute == "selective"
    assert (run.spec.num_layers, run.spec.hidden_size, run.spec.num_query_groups) == (40, 5120, 40)
    result = check(run)
    assert result["measured"]["tokens_per_s_per_gpu"] == pytest.approx(1900, rel=1e-3)
    assert result["predicted"]["tokens_per_s_per_gpu"] > 0 and result["likely_cause"]["step_time"]


@pytest.mark.parametrize("entry", [e for e in INDEX if "refused" not in e], ids=lambda e: e["file"])
def test_check_runs_on_every_fixture_once_completed(entry):
    """Every excerpt becomes a run once the user supplies what it lacks, and ``check`` costs it (but a run that
    megasolve refuses by name, ``refused``)."""
    from megasolve.solver.calibrate import check

    facts = parse_log((LOGS / entry["file"]).read_text(encoding="utf-8"))
    given = {**entry.get("assume", {}), **entry.get("given", {})}
    defaults = {"gpu": given.get("gpu", "h100"), "num_gpus": 16, "seq_length": 2048, "global_batch_size": 128,
                "vocab_size": 32000, "args": {"tensor-model-parallel-size": 1}}
    if facts.oom is False and not facts.iterations and not facts.nemo_steps:
        defaults["step_time_s"] = 10.0
    if "model" in given or not (facts.model_names or all(  # the shape printed, or completed by --arg
            isinstance(facts.args.get(k), int) or k.replace("_", "-") in given.get("args", {})
            for k in ("num_layers", "hidden_size", "num_attention_heads"))):
        moe = isinstance(facts.args.get("expert_model_parallel_size"), int) and facts.args["expert_model_parallel_size"] > 1
        defaults["model"] = given.get("model", "mixtral-8x7b" if moe else "llama-2-7b")  # a placeholder of the kind
    if "tensor_model_parallel_size" in facts.args or facts.world_parts or "args" in given:
        defaults["args"] = dict(given.get("args", {}))
    for key in ("seq_length", "global_batch_size"):
        defaults[key] = given.get(key, defaults[key])
    if "gpus_per_node" in given:  # a machine whose nodes are not the catalog's (Summit's six V100s)
        defaults["gpus_per_node"] = given["gpus_per_node"]
    from megasolve.solver.api import check_layout

    # a GPU count the thread does not give: the log's own (None), else the first placeholder its sizes and batch allow
    del defaults["num_gpus"]
    for num_gpus in [given["num_gpus"]] if "num_gpus" in given else [None, 16, 8, 4, 2, 1]:
        try:
            run = read_runs(LOGS / entry["file"], **defaults, **({"num_gpus": num_gpus} if num_gpus else {}))[0]
            check_layout(run.spec, run.cluster, run.workload, run.layout, allow_cross_domain_tp=True)
            break
        except MegasolveError:
            continue
    else:
        pytest.fail(f"no GPU count makes {entry['file']} a layout Megatron accepts")
    result = check(run)
    assert set(result["predicted"]) == {"step_time_s", "tokens_per_s_per_gpu", "peak_allocated_gb"}
    assert result["predicted"]["step_time_s"] > 0
    # a gap measured is a gap explained: the culprit is one of the predicted terms, and the same one
    # when the measurement moves by MEASURE_NOISE either way (and when checked again)
    from megasolve.solver.calibrate import MEASURE_NOISE

    for what, key, terms in (("step_time", "step_time_s", "time_terms_s"),
                             ("peak_allocated", "peak_allocated_gb", "memory_terms_gb")):
        if result["measured"][key] is None:
            assert what not in result["likely_cause"]
            continue
        cause = result["likely_cause"][what]
        assert cause and cause["term"] in result[terms], (what, cause)
        assert check(run)["likely_cause"][what] == cause
        if not cause["stable"]:  # two terms explain the gap about equally (the text names both), or
            # within the measurement's noise no term can close it (the text says to check the inputs)
            runner = cause["runner_up"]
            assert (runner in result[terms] and runner in cause["text"]) or "check the model" in cause["text"], cause
            continue
        for k in (1 - MEASURE_NOISE, 1 + MEASURE_NOISE):
            field = ({"step_time_s": run.measured_step_s * k, "tokens_per_s_per_gpu": None} if what == "step_time"
                     else {"peak_allocated_gb": run.measured.peak_allocated_gb * k})
            moved = dataclasses.replace(run, measured=dataclasses.replace(run.measured, **field))
            assert check(moved)["likely_cause"][what]["term"] == cause["term"], (what, k)


def test_doctests_of_the_run_modules_pass():
    import doctest
    import importlib

    for name in ("megasolve.cost.calibration", "megasolve.solver.logs", "megasolve.solver.calibrate"):
        module = importlib.import_module(name)  # (megasolve.solver.calibrate the attribute is the function)
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, name


def test_moe_mla_argument_dump_reads_the_preset_shape():
    """An argument dump with Megatron-LM's MoE/MLA names (``num_experts``, ``moe_layer_freq`` printed
    as a list, ``q_lora_rank None``) gives the same parameters as the DeepSeek-V2-Lite preset."""
    from megasolve.models.params import total_params
    from megasolve.models.presets import load_preset

    dump = """\
------------------------ arguments ------------------------
  num_layers ...................................... 27
  hidden_size ..................................... 2048
  ffn_hidden_size ................................. 10944
  num_attention_heads ............................. 16
  num_query_groups ................................ 1
  group_query_attention ........................... False
  kv_channels ..................................... 128
  swiglu .......................................... True
  normalization ................................... RMSNorm
  add_bias_linear ................................. False
  qk_layernorm .................................... True
  untie_embeddings_and_output_weights ............. True
  position_embedding_type ......................... rope
  num_experts ..................................... 64
  moe_router_topk ................................. 6
  moe_ffn_hidden_size ............................. 1408
  moe_shared_expert_intermediate_size ............. 2816
  moe_layer_freq .................................. [0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
  moe_token_dispatcher_type ....................... alltoall
  multi_latent_attention .......................... True
  q_lora_rank ..................................... None
  kv_lora_rank .................................... 512
  qk_head_dim ..................................... 128
  qk_pos_emb_head_dim ............................. 64
  v_head_dim ...................................... 128
  tensor_model_parallel_size ...................... 1
  pipeline_model_parallel_size .................... 1
  expert_model_parallel_size ...................... 8
  expert_tensor_parallel_size ..................... 1
  micro_batch_size ................................ 1
  global_batch_size ............................... 512
  seq_length ...................................... 4096
  bf16 ............................................ True
  use_distributed_optimizer ....................... True
  world_size ...................................... 16
-------------------- end of arguments ---------------------
 > padded vocab (size: 102400) with 0 dummy tokens (new size: 102400)
"""
    run = run_from_log(dump + "\n".join(_iteration(i, 2000.0) for i in range(1, 6)), "v2-lite", {"gpu": "h800"})
    preset = load_preset("deepseek-v2-lite")
    assert total_params(run.spec) == total_params(preset)
    assert run.spec.moe.layer_pattern == preset.moe.layer_pattern and run.spec.mla == preset.mla
    assert (run.layout.ep, run.layout.etp, run.layout.dp) == (8, 1, 16)
    assert run.workload.moe_dispatcher == "alltoall" and run.cluster.gpu.name == "h800"


def test_bridge_config_container_dump():
    """Megatron-Bridge prints its ConfigContainer as YAML, sections in alphabetical order (dataset before
    model: the dataset's sequence length is the one trained), then Megatron-style iteration lines."""
    text = """\
$ torchrun --standalone --nproc_per_node=8 train.py
dataset:
  seq_length: 1024
ddp:
  use_distributed_optimizer: true
model:
  gated_linear_unit: true
  hidden_size: 2048
  ffn_hidden_size: 8192
  kv_channels: 64
  normalization: RMSNorm
  num_attention_heads: 32
  num_layers: 16
  num_query_groups: 8
  add_bias_linear: false
  pipeline_model_parallel_size: 1
  position_embedding_type: rope
  recompute_granularity: null
  seq_length: 131072
  sequence_parallel: false
  share_embeddings_and_output_weights: true
  tensor_model_parallel_size: 1
  vocab_size: 128256
optimizer:
  bf16: true
train:
  global_batch_size: 512
  micro_batch_size: 1
""" + "\n".join(_iteration(i, 4600.0 + i, gbs=512) for i in range(1, 11))
    run = run_from_log(text, "bridge", {"gpu": "h100"})
    assert run.workload.seq_length == 1024 and run.cluster.num_gpus == 8 and run.layout.dp == 8
    assert run.spec.swiglu and run.spec.num_query_groups == 8 and not run.spec.untie_embeddings_and_output_weights
    assert run.layout.distributed_optimizer and run.workload.global_batch_size == 512
    assert run.measured.step_time_s == pytest.approx(4.607)  # median of iterations 4-10
    # Bridge's full-iteration perf recipes print the graph under model: (deepseek/common.py L60-61)
    graphed = run_from_log(text.replace("model:\n", "model:\n  cuda_graph_impl: full_iteration\n  cuda_graph_scope: []\n"),
                           "bridge", {"gpu": "h100"})
    assert graphed.workload.cuda_graph_impl == "full_iteration" and run.workload.cuda_graph_impl == "none"


def test_printed_parameter_count_checks_the_shape():
    from megasolve.models.params import total_params
    from megasolve.solver.calibrate import check

    text = ARGS_DUMP.replace("pipeline_model_parallel_size .................... 2",
                             "pipeline_model_parallel_size .................... 1")
    base = run_from_log(text + "\n".join(_iteration(i, 900.0) for i in range(1, 6)), "p", {"gpu": "h100"})
    n = check(base)["parameters_per_rank"] if base.printed_params else None
    assert n is None
    ours = total_params(base.spec) // 2  # tp 2, pp 1: close to half of the model on each rank
    good = text + f"\n > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {ours}\n"
    run = run_from_log(good + "\n".join(_iteration(i, 900.0) for i in range(1, 6)), "p", {"gpu": "h100"})
    result = check(run)
    assert result["parameters_per_rank"][0]["log"] == ours
    assert abs(result["parameters_per_rank"][0]["error"]) < 0.01
    assert not any("counts" in n for n in result["notes"])
    bad = run_from_log(good.replace("vocab_size ...................................... 128256",
                                    "vocab_size ...................................... 32000")
                       + "\n".join(_iteration(i, 900.0) for i in range(1, 6)), "p", {"gpu": "h100"})
    assert any("counts" in n for n in check(bad)["notes"])


def test_an_estimate_json_with_a_measured_block_is_a_run(tmp_path, capsys):
    import json

    from megasolve.cli.main import main

    main(["estimate", "-m", "qwen3-30b-a3b", "-n", "16", "-g", "h100", "--ep", "8", "--etp", "1", "--gbs", "256",
          "--format", "json"])
    entry = json.loads(capsys.readouterr().out)
    entry["measured"] = {"step_time_s": 9.0}
    (tmp_path / "run.json").write_text(json.dumps([entry]))
    run = read_runs(tmp_path / "run.json")[0]
    assert (run.layout.ep, run.layout.etp, run.layout.dp, run.cluster.num_gpus) == (8, 1, 16, 16)
    assert run.workload.global_batch_size == 256 and run.spec.is_moe


def test_nemo2_recipe_name_gives_the_model_and_recipe_defaults():
    text = """\
[NeMo I 2025-01-01 00:00:00] recipe = llm.llama3_8b.pretrain_recipe(num_nodes=1, num_gpus_per_node=8)
  tensor_model_parallel_size: 1
  seq_length: 8192
""" + "\n".join(f"Training epoch 0, iteration {i}/99 | lr: 3e-06 | global_batch_size: 16 | global_step: {i} | "
                f"reduced_train_loss: 11.0 | train_step_timing in s: {2.6 + i / 100} | consumed_samples: {16 * i}"
                for i in range(1, 8))
    run = run_from_log(text, "nemo2", {"gpu": "h100", "num_gpus": 8})
    assert run.spec.name == "llama-3.1-8b" and run.workload.global_batch_size == 16
    assert run.layout.distributed_optimizer and run.workload.seq_length == 8192
    assert run.measured.step_time_s == pytest.approx(2.655)  # steps 4-7; the first three are warm-up


@pytest.mark.parametrize("entry", [e for e in INDEX if "reads" in e], ids=lambda e: e["file"])
def test_second_collection_reads_shape_and_layout(entry):
    """Completed with only what the thread says outside the excerpt (``given``), the run holds the model
    shape, layout, GPU count and batch the excerpt prints (``reads``)."""
    given = {**entry.get("assume", {}), **entry.get("given", {})}
    given.setdefault("gpu", "h100")
    want = entry["reads"]
    for key, value in {"seq_length": 4096, "global_batch_size": 128, "num_gpus": 16}.items():
        if key not in want and key not in want.get("workload", {}):  # no placeholder for a fact to be read
            given.setdefault(key, value)  # what the log says wins over these
    facts = parse_log((LOGS / entry["file"]).read_text(encoding="utf-8"))
    if not (facts.iterations or facts.nemo_steps or facts.memory or facts.oom or facts.stated_step_s
            or facts.stated_tokens_per_gpu or facts.args.get("_verl_update_actor")):
        given.setdefault("step_time_s", 1.0)  # a launch script or config: the measurement is supplied
    if not entry.get("whole_model"):
        given.setdefault("vocab_size", 32000)
    run = read_runs(LOGS / entry["file"], **given)[0]
    for key, value in want.get("spec", {}).items():  # "moe.top_k": a field of the MoE part
        obj = run.spec
        for part in key.split("."):
            obj = getattr(obj, part)
        assert obj == value, key
    for key, value in want.get("layout", {}).items():
        assert getattr(run.layout, key) == value, key
    if "num_gpus" in want:
        assert run.cluster.num_gpus == want["num_gpus"]
    if "global_batch_size" in want:
        assert run.workload.global_batch_size == want["global_batch_size"]
    for key, value in want.get("workload", {}).items():
        assert getattr(run.workload, key) == value, key
    for part in want.get("notes", []):
        assert any(part in note for note in run.notes), part
    if "rank" in want:
        assert run.measured.rank == want["rank"]
    if "peak_allocated_mib" in want:
        assert run.measured.peak_allocated_gb == pytest.approx(want["peak_allocated_mib"] * 2**20 / 1e9)
    if "step_time_s" in want:  # step_time_rel: a hand read that averages where megasolve takes the median
        assert run.measured_step_s == pytest.approx(want["step_time_s"], rel=want.get("step_time_rel", 1e-6))
    if "oom" in want:
        assert run.measured.oom == want["oom"]
    from megasolve.cli.runs_cmd import read_all  # the layout Megatron would accept, and check costs it
    from megasolve.solver.calibrate import check

    runs, failed = read_all((str(LOGS / entry["file"]),), {**given, "args": tuple(
        f"{k}={v}" for k, v in given.get("args", {}).items())})
    assert not failed, failed
    assert check(runs[0])["predicted"]["step_time_s"] > 0


def test_uneven_split_without_pipeline_size_names_the_flag():
    """NVIDIA/Megatron-LM#1445: first/last-stage layer counts but no PP size: the one-line error names
    ``--arg pipeline-model-parallel-size=N``, not the estimator's uneven-split rule."""
    with pytest.raises(MegasolveError) as err:
        read_runs(LOGS / "megatron-lm-1445-mla-flags.sh", gpu="h100", num_gpus=32, vocab_size=102400,
                  global_batch_size=256, step_time_s=10.0)
    assert "--arg pipeline-model-parallel-size=N" in str(err.value) and "\n" not in str(err.value)


def test_dict_repr_config_and_old_formats():
    """Formats found in the second collection: a printed dict of TransformerConfig kwargs (verl#1467), the
    pre-2021 argument dump's undotted long names, the pre-pipeline parameter count, ``elapsed (ms)``."""
    facts = parse_log("{'num_layers': 4, 'hidden_size': 256, 'activation_func': <function silu at 0x1>, "
                      "'normalization': 'RMSNorm', 'tensor_model_parallel_size': 2, 'unrelated_key': 7}")
    assert facts.args == {"num_layers": 4, "hidden_size": 256, "normalization": "RMSNorm",
                          "tensor_model_parallel_size": 2}
    facts = parse_log("-------------------- arguments --------------------\n"
                      "  apply_residual_connection_post_layernorm  False\n  batch_size ...... 4\n"
                      "---------------- end of arguments ----------------\n"
                      "short_name  value outside the dump\n"
                      " > number of parameters on model parallel rank 1: 1234\n"
                      "[2026-07-27 19:08:04] iteration  7/9 | elapsed (ms): 35.1 | lm loss: 5.4")
    assert facts.args == {"apply_residual_connection_post_layernorm": False, "batch_size": 4}
    assert facts.rank_params == {(1, 0): 1234}
    assert facts.iterations == [(7, 0.0351, None, None)]


def test_truncated_yaml_config_dump_is_read_as_a_log(tmp_path):
    """FlagScale#387: a config YAML cut off mid-line is not valid YAML; with no ``measured:`` key it is a
    config dump, read as a log; a broken runs file (it has ``measured:``) is still an error."""
    dump = tmp_path / "cfg.yaml"
    dump.write_text("model:\n  num_layers: 24\n  hidden_size: 2048\n  num_attention_heads: 16\n  use_rot\n"
                    "  seq_length: 4096\n  tensor_model_parallel_size: 2\n  x: [\n", encoding="utf-8")
    run = read_runs(dump, gpu="h100", num_gpus=8, vocab_size=32000, global_batch_size=64, step_time_s=1.0)[0]
    assert (run.spec.num_layers, run.layout.tp) == (24, 2)
    broken = tmp_path / "runs.yaml"
    broken.write_text("- model: llama-2-7b\n  measured: {step_time_s: [\n", encoding="utf-8")
    with pytest.raises(MegasolveError, match="not valid YAML"):
        read_runs(broken)


def test_nemo2_step_memory_and_parallel_groups():
    """NeMo 2 logs max_memory_allocated / max_memory_reserved (bytes) with each step (line as posted in
    NVIDIA-NeMo/NeMo#14850); NeMo's megatron_init prints every parallel group (line from NeMo's
    resiliency demo): group sizes give the layout and the world size."""
    facts = parse_log(" 0: Training epoch 0, iteration 8/29 | lr: 5.389e-06 | global_batch_size: 512 | global_step: 8 | "
                      "max_memory_reserved: 57466159104 | max_memory_allocated: 53930270720 | reduced_train_loss: 10.22 | "
                      "train_step_timing in s: 27.01 | consumed_samples: 4608 | TFLOPS_per_GPU: 48.58")
    assert facts.memory == {0: (53930270720 / 2**20, 57466159104 / 2**20)}  # slurm's "0: " names the rank
    assert facts.nemo_steps == [(8, 27.01)]
    facts = parse_log("[NeMo I 2025-03-07 22:33:57 megatron_init:473] All tensor model parallel group ranks: "
                      "[[0, 1], [2, 3], [4, 5], [6, 7]]\n"
                      "[NeMo I 2025-03-07 22:33:57 megatron_init:512] All pipeline model parallel group ranks: "
                      "[[0], [1], [2], [3], [4], [5], [6], [7]]")
    assert facts.world_size == 8
    assert facts.world_parts == {"tensor-model-parallel": 2, "pipeline-model-parallel": 1}


def test_swift_reserved_memory_is_the_measured_reserve():
    run = read_runs(LOGS / "ms-swift-7832-qwen3-omni-iterations.log", model="qwen3-30b-a3b", gpu="h100", num_gpus=8,
                    seq_length=4096, args={"tensor-model-parallel-size": 1, "expert-model-parallel-size": 8})[0]
    assert run.measured.peak_reserved_gb == pytest.approx(21.56 * 2**30 / 1e9)
    assert run.measured.peak_allocated_gb is None
    assert any("reserved memory only" in n for n in run.notes)


def test_cp_comm_type_read_from_the_argument_dump():
    """``cp_comm_type ... ['a2a']`` (nargs '+') is the type ``check`` prices; a per-layer list is costed as its
    first type and said; the help text's ``allgather`` is TE's ``all_gather``."""
    dump = ARGS_DUMP.replace("  bf16 ...", "  context_parallel_size ........................... 2\n"
                             "  cp_comm_type .................................... ['a2a']\n  bf16 ...")
    lines = dump.splitlines() + [_iteration(i, 1000.0) for i in range(1, 6)]
    run = run_from_log("\n".join(lines), "cp", {"gpu": "h100"})
    assert run.layout.cp == 2 and run.workload.cp_comm_type == "a2a"
    mixed = run_from_log("\n".join(lines).replace("['a2a']", "['allgather', 'p2p']"), "cp", {"gpu": "h100"})
    assert mixed.workload.cp_comm_type == "all_gather" and any("per-layer --cp-comm-type" in n for n in mixed.notes)


@pytest.mark.parametrize("lines, impl, note", [
    ("  cuda_graph_impl ................................. full_iteration\n", "full_iteration",
     "full-iteration CUDA graph: its time effect is costed"),
    ("  cuda_graph_impl ................................. transformer_engine\n"
     "  cuda_graph_modules .............................. ['attn', 'moe_router']\n", "transformer_engine",
     "per-layer CUDA graphs (--cuda-graph-impl transformer_engine) are not modelled"),
    ("  enable_cuda_graph ............................... True\n", "local",
     "per-layer CUDA graphs (--cuda-graph-impl local) are not modelled"),
])
def test_cuda_graphs_read_from_the_argument_dump(lines, impl, note):
    """``--cuda-graph-impl`` as Megatron-LM resolves it becomes the run's workload (a full-iteration graph is
    costed), and the reader says what of it is not modelled."""
    dump = ARGS_DUMP.replace("  bf16 ...", lines + "  bf16 ...")
    run = run_from_log("\n".join(dump.splitlines() + [_iteration(i, 1000.0) for i in range(1, 6)]), "graphs",
                       {"gpu": "h100"})
    assert run.workload.cuda_graph_impl == impl
    assert any(note in n for n in run.notes), run.notes


def test_a_model_given_over_another_printed_shape_is_said():
    """Pai-Megatron-Patch#693: the title says Qwen3-Next, the command prints --num-layers 96; with --model the
    preset is costed and the difference is named, without it the printed shape is read."""
    log = LOGS / "alibaba-pai-megatron-patch-693-qwen3-next-b200-pyspy-cmdline.log"
    run = read_runs(log, model="qwen3-next-80b-a3b", gpu="b200", num_gpus=8, step_time_s=1.0)[0]
    assert run.spec.num_layers == 48
    assert any("the log prints num_layers 96 (the model: 48)" in n for n in run.notes)
    run = read_runs(log, gpu="b200", num_gpus=8, step_time_s=1.0, vocab_size=151936)[0]
    assert (run.spec.num_layers, run.spec.hidden_size, run.layout.tp) == (96, 2048, 2)


@pytest.mark.parametrize("optimizer,costed,note", [
    ("muon", "muon", "Muon's Newton-Schulz temporaries"),
    ("dist_muon", "muon", "Muon's Newton-Schulz temporaries"),
    ("sgd", "adam", "optimizer sgd costed as Adam (its state and step are not modelled)"),
])
def test_an_optimizer_other_than_adam_is_named_with_what_it_changes(optimizer, costed, note):
    """Megatron-LM's Muon (``emerging_optimizers.py``) is costed as Muon, with what it leaves out said; another
    optimizer is costed as Adam, said."""
    dump = ARGS_DUMP.replace("  bf16 ...", f"  optimizer ....................................... {optimizer}\n"
                                           "  bf16 ...")
    run = run_from_log("\n".join(dump.splitlines() + [_iteration(i, 1000.0) for i in range(1, 6)]), "opt",
                       {"gpu": "h100"})
    assert run.workload.optimizer == costed
    assert any(note in n for n in run.notes), run.notes


@pytest.mark.parametrize("prefix", [
    "2025-01-01T10:00:00.123456789Z ",                       # kubectl logs --timestamps
    "trainer-1  | ",                                          # docker compose
    "[1,0]<stdout>:",                                         # Open MPI --tag-output
    "[NeMo I 2025-01-01 10:00:00 nemo_logging:393] ",          # NeMo's logger
    "2025-01-01 10:00:00,123 - INFO - ",                       # Python logging, %(asctime)s - %(levelname)s
    "2025-01-01 10:00:00,123 - megatron.training - INFO - ",   # ... with %(name)s
    "[2025-01-01 10:00:00,123] [INFO] [megatron.training.utils] ",
    "[pod/trainer-0/pytorch] ",                                # kubectl logs --prefix
    "> ", ">> ",                                               # a reply quoting the log
    "pytorchjob-worker-0 ",                                    # a bare pod name (a log aggregator's export)
    "llama-pretrain-worker-0 pytorch ",                        # stern: pod and container
])
def test_a_log_collector_prefix_on_every_line_reads_the_same(prefix):
    """The argument dump and the iteration lines read the same with what a log collector puts before each line."""
    lines = ARGS_DUMP.splitlines() + [_iteration(i, 1000.0 + i) for i in range(1, 8)]
    plain = run_from_log("\n".join(lines), "plain", {"gpu": "h100"})
    run = run_from_log("\n".join(prefix + line for line in lines), "prefixed", {"gpu": "h100"})
    assert (run.spec, run.layout, run.workload, run.cluster.num_gpus) == (plain.spec, plain.layout, plain.workload,
                                                                           plain.cluster.num_gpus)
    assert run.measured.step_time_s == plain.measured.step_time_s == pytest.approx(1005.5 / 1e3)


def test_spaces_a_web_page_puts_in_copied_text_read_as_spaces():
    """A log copied from a web page or chat carries no-break spaces (and zero-width ones): read as the plain text."""
    lines = ARGS_DUMP.splitlines() + [_iteration(i, 1000.0 + i) for i in range(1, 8)]
    text = "\n".join(lines)
    plain = run_from_log(text, "plain", {"gpu": "h100"})
    copied = run_from_log("\ufeff" + text.replace(" ", "\u00a0").replace("|", "\u200b|"), "copied", {"gpu": "h100"})
    assert (copied.spec, copied.layout, copied.workload) == (plain.spec, plain.layout, plain.workload)
    assert copied.measured.step_time_s == plain.measured.step_time_s


def test_a_config_printed_as_one_line_of_json_is_read_like_a_python_dict():
    """wandb / args.json configs print as one JSON line: the same keys as verl's printed Python dict."""
    as_json = parse_log('config: {"num_layers": 94, "hidden_size": 4096, "tensor_model_parallel_size": 2, '
                        '"name": "qwen3, moe", "fp8": null}').args
    as_dict = parse_log("{'num_layers': 94, 'hidden_size': 4096, 'tensor_model_parallel_size': 2, "
                        "'name': 'qwen3, moe', 'fp8': None}").args
    assert as_json == as_dict
    assert (as_json["num_layers"], as_json["hidden_size"], as_json["tensor_model_parallel_size"]) == (94, 4096, 2)


@pytest.mark.parametrize("printed,gpu", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA A100-SXM4-80GB", "a100-80g"), ("NVIDIA A100 80GB PCIe", "a100-pcie-80g"),
    ("A100-PCIE-40GB", "a100-pcie-40g"),
])
def test_a_pcie_or_nvl_board_is_its_own_gpu(printed, gpu):
    """torch.cuda.get_device_name of a PCIe or NVL board names it: its peak, memory bandwidth and missing NVSwitch are
    not the SXM part's (NVIDIA A100 / H100 datasheets), so it maps to its own catalog entry."""
    text = "\n".join(ARGS_DUMP.splitlines() + [f"GPU: {printed}"] + [_iteration(i, 1000.0 + i) for i in range(1, 8)])
    run = run_from_log(text, "board", {})
    assert run.cluster.gpu.name == gpu


@pytest.mark.parametrize("printed,gpu,peak", [
    ("NVIDIA GeForce RTX 4090", "rtx-4090", 165.2), ("NVIDIA GeForce RTX 3090", "rtx-3090", 71),
    ("NVIDIA RTX A6000", "rtx-a6000", 154.8), ("NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti", 53.8),
    ("NVIDIA L40", "l40", 181.05), ("NVIDIA L20", "l20", 119.5), ("NVIDIA L4", "l4", 121), ("NVIDIA A10", "a10", 125),
    ("NVIDIA A30", "a30", 165), ("8卡4090", "rtx-4090", 165.2),
])
def test_a_workstation_or_consumer_board_is_read_with_its_own_peak(printed, gpu, peak):
    """The boards public threads train on (torch.cuda.get_device_name, or a post's "8卡4090") map to catalog entries
    with their datasheet peaks (BF16 with FP32 accumulate), not to a data-centre part or to nothing."""
    text = "\n".join(ARGS_DUMP.splitlines() + [f"GPU: {printed}"] + [_iteration(i, 1000.0 + i) for i in range(1, 8)])
    run = run_from_log(text, "board", {})
    assert run.cluster.gpu.name == gpu
    assert run.cluster.gpu.bf16_flops == pytest.approx(peak * 1e12)
    assert run.cluster.gpu.nvlink_domain == 1  # no NVSwitch: TP beyond one board crosses PCIe


@pytest.mark.parametrize("written,preset", [
    ("--model Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b"), ("Qwen35-35B-A3B", "qwen3.5-35b-a3b"),
    ("model: Qwen/Qwen3.6-35B-A3B", "qwen3.5-35b-a3b"), ("qwen3.5-27B", "qwen3.5-27b"),
    ("Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5-397b-a17b"), ("Qwen/Qwen3.5-0.8B", "qwen3.5-0.8b"),
    ("Qwen/Qwen3.5-2B", "qwen3.5-2b"), ("Qwen/Qwen3.5-4B-Base", "qwen3.5-4b"),
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder-480b-a35b"), ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-30b-a3b"),
    ("examples/grpo_trainer/run_qwen3moe-30b_megatron.sh", "qwen3-30b-a3b"), ("Qwen-next lora", "qwen3-next-80b-a3b"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-12b"), ("01-ai/Yi-1.5-34B-Chat", "yi-1.5-34b"),
    ("Yi-1.5-9B", "yi-1.5-9b"), ("--model internlm/internlm2_5-7b-chat", "internlm2.5-7b"),
    ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini-4k"), ("--model THUDM/glm-4-9b-chat", "glm-4-9b"),
    ("zai-org/GLM-4.5-Air", "glm-4.5-air"), ("zai-org/GLM-4.6", "glm-4.7"),
])
def test_model_names_posts_write_resolve_to_their_presets(written, preset):
    """Hugging Face ids and the spellings scripts use (a version's dot dropped, as Megatron-Bridge's ``qwen35``)."""
    assert parse_log(written).model_names == {preset: 1}


@pytest.mark.parametrize("printed,layers", [(None, 1), ("None", 0), ("0", 0), ("1", 1)])
def test_a_printed_mtp_setting_replaces_the_presets(printed, layers):
    """A preset keeps its released MTP layer (Qwen3-Next's, as Megatron-Bridge trains it); a run that prints
    ``mtp_num_layers`` (Megatron's ``None``: unset) is costed with what it trained."""
    lines = ["--model Qwen/Qwen3-Next-80B-A3B-Instruct --tensor-model-parallel-size 1 --expert-model-parallel-size 8"]
    if printed is not None:
        lines.append(f"  mtp_num_layers ........................................ {printed}")
    text = "\n".join(lines + [_iteration(i, 1000.0 + i) for i in range(1, 8)])
    run = run_from_log(text, "mtp", {"gpu": "h100", "num_gpus": 8, "seq_length": 4096, "global_batch_size": 64})
    assert run.spec.name == "qwen3-next-80b-a3b" and run.spec.mtp_num_layers == layers
    assert any("mtp_num_layers" in n for n in run.notes) == (printed is not None and layers == 0)


@pytest.mark.parametrize("written,args,gpus", [
    ("I used 2 * 8 H20 to train the Qwen3-30B-A3B", {"_prose_num_gpus": 16}, {"H20": 1}),
    ("on 8xH800 with the official example", {"_prose_num_gpus": 8}, {"H800": 1}),
    ("I started a fresh 4xH100 machine", {"_prose_num_gpus": 4}, {"H100": 1}),  # one machine of 4
    ("on 4 H100 nodes", {}, {"H100": 1}),  # four nodes: no GPU count
    ("On two complete four-GPU GB200 nodes in one segment", {"_prose_num_gpus": 8}, {"GB200": 1}),
    ("a single 8-GPU node", {"_prose_num_gpus": 8}, {}), ("the 8-GPU nodes", {}, {}),
    ("I have 4*8*80GB nodes", {"_prose_num_gpus": 32}, {}),
    ("model_provider.tensor_model_parallel_size = 4", {"tensor_model_parallel_size": 4}, {}),
    ("actor_rollout_ref.rollout.tensor_model_parallel_size = 8", {}, {}),  # the inference engine's TP
    ("I did not update `--num-gpus` and `--actor-num-gpus-per-node` from 8 to 4", {}, {}),  # flags named, no values
    ("--------------------------------------- Job failed", {}, {}),
])
def test_counts_names_and_settings_as_posts_write_them(written, args, gpus):
    facts = parse_log(written)
    assert facts.args == args and facts.gpu_names == gpus


def test_a_text_naming_two_gpus_equally_names_none():
    """"hybridEP for NVL8 systems (H100, B200, and B300)" is no run's GPU: the count of each name decides, a tie
    leaves the GPU to --gpu."""
    text = "\n".join(ARGS_DUMP.splitlines() + ["We need this on H100 and B200 systems."]
                     + [_iteration(i, 1000.0 + i) for i in range(1, 8)])
    with pytest.raises(MegasolveError, match="--gpu TYPE"):
        run_from_log(text, "tie", {})
    assert run_from_log(text + "\nthe B200 run", "tie", {}).cluster.gpu.name == "b200"


def test_gpus_per_node_alone_yields_to_the_users_gpu_count():
    """A launcher that states GPUs per node but no node count runs one node by default; a --gpus the user gives
    wins over that default (not over a node count the launcher states: ``--nodes 16 --gpus-per-node 4`` is 64)."""
    from megasolve.solver.runs import _world

    def world(text: str, **defaults) -> int:
        facts = parse_log(text)
        return _world(facts.args, facts, defaults, [], [])

    assert world("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2") == 8
    assert world("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2", num_gpus=32) == 32
    assert world("the command allocates `--nodes 16 --gpus-per-node 4` = 64", num_gpus=8) == 64


@pytest.mark.parametrize("written,count,gpu", [("We train on 8 L40S GPUs", 8, "L40S"), ("running on 16x MI300X", 16, "MI300X"),
                                               ("2 nodes of 8x MI355X", 16, "MI355X"), ("4卡4090", 4, "RTX4090")])
def test_every_catalog_gpu_a_post_names_also_counts(written, count, gpu):
    """The GPU-count patterns use the same names as the GPU-name pattern: "8 L40S" counts 8, not only names the part."""
    facts = parse_log(written)
    assert facts.args["_prose_num_gpus"] == count and facts.gpu_names == {gpu: 1}


@pytest.mark.parametrize("printed,gpu,memory_gb", [("AMD Instinct MI325X", "mi325x", 256),
                                                    ("AMD Instinct MI355X", "mi355x", 288),
                                                    ("AMD Instinct MI300X", "mi300x", 192)])
def test_amd_instinct_parts_are_read_with_their_memory(printed, gpu, memory_gb):
    """torch.cuda.get_device_name on ROCm prints "AMD Instinct MI3x5X": each maps to its own catalog part."""
    text = "\n".join(ARGS_DUMP.splitlines() + [f"Card Series: {printed}"] + [_iteration(i, 1000.0 + i)
                                                                               for i in range(1, 8)])  # rocm-smi
    run = run_from_log(text, "amd", {})
    assert run.cluster.gpu.name == gpu and run.cluster.gpu.memory_bytes == memory_gb * 1e9


@pytest.mark.parametrize("name,preset", [("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2"),
                                         ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3")])
def test_deepseek_v31_is_read_as_v3_and_v32_as_its_dsa_preset(name, preset):
    """DeepSeek-V3.1 is V3's architecture; V3.2 (and its -Exp release) adds DSA sparse attention, now its own preset."""
    text = "\n".join([f"--model {name}"] + [_iteration(i, 10000.0) for i in range(1, 8)])
    run = run_from_log(text, "v3", {"gpu": "h100", "num_gpus": 256, "seq_length": 4096, "global_batch_size": 64,
                                    "args": {"tensor-model-parallel-size": "1", "expert-model-parallel-size": "32"}})
    assert run.spec.name == preset
    assert (run.spec.dsa is not None) == (preset == "deepseek-v3.2")


@pytest.mark.parametrize("dtype,precision,recipe", [("fp8_cs", "fp8", "tensorwise"), ("fp8_mx", "fp8", "mxfp8"),
                                                    ("fp8_sc", "fp8", "blockwise"), ("nvfp4", "fp4", None),
                                                    ("bf16", "bf16", None)])
def test_bridge_compute_dtype_sets_precision_and_recipe(tmp_path, dtype, precision, recipe):
    """Megatron-Bridge's performance scripts name the precision by ``--compute_dtype``
    (scripts/performance/utils/precision.py); nvfp4 is NVFP4 training, costed as such."""
    path = tmp_path / "run.toml"
    path.write_text(f'compute_dtype = "{dtype}"\n', encoding="utf-8")
    run = read_runs(path, model="qwen3-30b-a3b", gpu="gb200", num_gpus=8, seq_length=4096, global_batch_size=128,
                    step_time_s=1.0, args={"tensor-model-parallel-size": 1, "expert-model-parallel-size": 8})[0]
    assert run.workload.precision == precision
    if recipe:
        assert run.workload.fp8_recipe == recipe
    assert not any("NVFP4" in n for n in run.notes)


def test_deterministic_mode_is_named_as_not_modelled():
    """Megatron-LM --deterministic-mode (Bridge's verification runs use --deterministic) slows a step in ways the
    cost model does not price: said, not ignored."""
    text = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
            "--ffn-hidden-size 4096 --vocab-size 32000 --seq-length 4096 --global-batch-size 64 --micro-batch-size 1 "
            "--deterministic-mode\n" + "\n".join(_iteration(i, 3000.0) for i in range(1, 8)))
    run = run_from_log(text, "det", {"gpu": "h100"})
    assert any("deterministic mode's speed is not modelled" in n for n in run.notes)
    plain = run_from_log(text.replace(" --deterministic-mode", ""), "plain", {"gpu": "h100"})
    assert not any("deterministic" in n for n in plain.notes)
    assert run.workload.deterministic_mode and not plain.workload.deterministic_mode  # its cuBLAS workspaces, costed
    fused = run_from_log(text.replace("--deterministic-mode", "--deterministic-mode --cross-entropy-loss-fusion"),
                         "fused", {"gpu": "h100"})  # refused by Megatron-LM @d98e8a6: an older release's run
    assert not fused.workload.deterministic_mode and any("an older release" in n for n in fused.notes)


def test_a_per_module_precision_recipe_is_read_when_its_file_is_here(tmp_path):
    """Megatron-LM --te-precision-config-file (Bridge's model.quant_recipe) matches modules to other precisions: the
    file the log names is read where it exists (or given with --arg); otherwise the note says every GEMM is costed
    at the run's precision."""
    script = tmp_path / "run.sh"
    script.write_text("python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--seq-length 4096 --micro-batch-size 1 --global-batch-size 128 --vocab-size 32000 --bf16 "
                      "--fp4-format e2m1 --te-precision-config-file /cfg/te_quant.yaml\n")
    run = read_runs(script, gpu="b200", num_gpus=8, step_time_s=2.0)[0]
    assert run.workload.precision == "fp4" and run.workload.module_precision == ()
    assert any("per-module precision recipe (/cfg/te_quant.yaml) not read" in n for n in run.notes)
    recipe = Path(__file__).parent / "data" / "precision" / "nemotron3_super_nvfp4.yaml"
    here = tmp_path / "here.sh"
    here.write_text(script.read_text().replace("/cfg/te_quant.yaml", str(recipe)))
    run = read_runs(here, gpu="b200", num_gpus=8, step_time_s=2.0)[0]
    assert run.workload.module_precision[0] == ("*.linear_qkv", "bf16")
    assert any("recipe read from" in n for n in run.notes)
    bare = tmp_path / "bare.sh"
    bare.write_text(script.read_text().replace(" --te-precision-config-file /cfg/te_quant.yaml", ""))
    assert not any("per-module" in n for n in read_runs(bare, gpu="b200", num_gpus=8, step_time_s=2.0)[0].notes)


def test_activation_cpu_offloading_is_read(tmp_path):
    """--cpu-offloading-num-layers N (Megatron-LM turns cpu_offloading on with it; NeMo / Bridge configs set
    cpu_offloading and cpu_offloading_num_layers) is the layout's activation offloading, not dropped."""
    script = tmp_path / "run.sh"
    script.write_text("python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--seq-length 4096 --micro-batch-size 1 --global-batch-size 128 --vocab-size 32000 --bf16 "
                      "--cpu-offloading-num-layers 8 --cpu-offloading-weights\n")
    run = read_runs(script, gpu="h100", num_gpus=8, step_time_s=2.0)[0]
    assert run.layout.cpu_offload_layers == 8
    assert any("weight offloading is not modelled" in n for n in run.notes)
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  num_layers: 32\n  hidden_size: 4096\n  num_attention_heads: 32\n  seq_length: 4096\n"
                      "  cpu_offloading: false\n  cpu_offloading_num_layers: 8\n")
    assert read_runs(config, gpu="h100", num_gpus=8, step_time_s=2.0, vocab_size=32000, global_batch_size=128,
                     args={"tensor-model-parallel-size": 1})[0].layout.cpu_offload_layers == 0


def test_an_oom_under_another_layout_is_not_the_runs(tmp_path):
    """verl-project/verl#2197: "When tp=1 is set, OOM occurs" beside train_tp=2 is another layout's OOM; an OOM the
    text states without a condition stays the run's, whatever another sentence adds."""
    base = ("python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
            "--micro-batch-size 1 --global-batch-size 128 --vocab-size 32000 --bf16 --tensor-model-parallel-size 2\n")
    other = tmp_path / "other.txt"
    other.write_text(base + "When tp=1 is set, OOM occurs\n")
    run = read_runs(other, gpu="h100", num_gpus=8, step_time_s=1.0)[0]
    assert run.measured.oom is False and any("not this run's tp=2" in n for n in run.notes)
    same = tmp_path / "same.txt"
    same.write_text(base + "When tp=2 is set, OOM occurs\n")
    assert read_runs(same, gpu="h100", num_gpus=8)[0].measured.oom is True
    both = tmp_path / "both.txt"
    both.write_text(base + "I keep getting OOM errors.\nWhen tp=1 is set, OOM occurs too\n")
    assert read_runs(both, gpu="h100", num_gpus=8)[0].measured.oom is True


def test_a_baseline_line_yields_to_the_run_the_post_is_about():
    """swiss-ai/Megatron-LM#33 lists "Baseline (MBS 4, SEQLEN 4096, TP 2)" before "Improved (This PR, MBS 1, SEQLEN
    8192, TP 1)": the baseline's prose is read last, so the PR's run sets the sizes and the rate; a post with no
    compared run keeps its baseline line."""
    text = ("- Baseline (MBS 4, SEQLEN 4096, TP 2): ~8000 Tokens/Sec/GPU\n"
            "- Improved (This PR, MBS 1, SEQLEN 8192, TP 1): ~8290 Tokens/Sec/GPU\n")
    facts = parse_log(text)
    assert facts.args["micro_batch_size"] == 1 and facts.args["tensor_model_parallel_size"] == 1
    assert facts.args["seq_length"] == 8192
    alone = parse_log("- Baseline (MBS 4, SEQLEN 4096, TP 2): ~8000 Tokens/Sec/GPU\n")
    assert alone.args["micro_batch_size"] == 4 and alone.args["tensor_model_parallel_size"] == 2


def test_a_readme_names_its_gpu_by_its_hardware_lines_and_its_memory():
    """FlagPerf READMEs copy labels from one another ("A100单机8卡" in an A800 README): the hardware lines
    (机器型号 / 加速卡型号) outweigh them, and a bare "A100" joins the size the text gives it (A100-SXM4-40GB)."""
    gpus = {name: read_runs(LOGS / name)[0].cluster.gpu.name for name in (
        "FlagOpen-FlagPerf-llama2_7b-megatron-deepspeed-a100-40g.txt", "FlagOpen-FlagPerf-llama3_8B-megatron-a800-pp2dp4.txt",
        "FlagOpen-FlagPerf-llama2_70B-megatron-h800-32gpu-tp8pp4.txt")}
    assert list(gpus.values()) == ["a100-40g", "a800", "h800"]


def test_two_sequence_lengths_offered_as_alternatives_are_said():
    """"16k or 32k context" names two lengths: the one next to the word is read, and the note names both and how
    to take the other (a post that offers alternatives is not one run's fact)."""
    text = ("Training Llama-3.1-8B with Megatron-LM on 2 nodes of 8x H100 with 16k or 32k context.\n"
            "TP=2 PP=1 CP=2, micro batch size 1, global batch size 256.\n"
            " iteration      100/    1000 | consumed samples:        25600 | elapsed time per iteration (ms): 41230.4 |\n")
    run = run_from_log(text, "alternatives")
    assert run.workload.seq_length == 32768
    assert any("the text names 16384 or 32768 as alternatives" in n and "--arg seq-length=N" in n for n in run.notes)
    single = run_from_log(text.replace("16k or 32k context", "32k context"), "single")
    assert single.workload.seq_length == 32768 and not any("alternatives" in n for n in single.notes)


@pytest.mark.parametrize("flags, attention", [
    ("", "flash"),  # today's default: Transformer Engine, flash attention
    (" --transformer-impl local", "unfused"),  # the local spec's DotProductAttention
    (" --transformer-impl local --use-flash-attn", "flash"),  # the legacy models' FlashSelfAttention (Megatron-LM 23.x)
])
def test_the_attention_kernel_follows_the_transformer_impl(flags, attention):
    text = ARGS_DUMP + "torchrun --nproc_per_node 8 pretrain_gpt.py --bf16" + flags + "\n" + \
        "\n".join(_iteration(i, 5000.0) for i in range(1, 6))
    run = run_from_log(text, defaults={"gpu": "h100"})
    assert run.workload.attention == attention


def test_pai_legacy_launch_reads_flash_and_te_switches():
    """Pai-Megatron-Patch's older run_pretrain_megatron_*.sh: FL false and TE false pass neither --use-flash-attn nor
    --transformer-impl, so the 2023 Megatron-LM they run uses its local implementation and unfused attention."""
    base = ("sh run_pretrain_megatron_baichuan.sh dsw /m/ /p/ 13B 1 8 1e-5 1e-6 2048 2048 0 bf16 2 1 sel true {fl} "
            "true {te} 100 /data /ckpt 100000 1000 /out\n")
    facts = parse_log(base.format(fl="false", te="false"))
    assert facts.args["transformer_impl"] == "local" and "use_flash_attn" not in facts.args
    facts = parse_log(base.format(fl="true", te="true"))
    assert facts.args["transformer_impl"] == "transformer_engine" and facts.args["use_flash_attn"] is True


def test_fp8_param_gather_implies_the_distributed_optimizer():
    """Megatron-LM asserts --fp8-param-gather only with the distributed optimizer (or an FSDP, ARG L1095-1097): a
    command that passes it without --use-distributed-optimizer ran with the optimizer on another way (a config)."""
    dump = ARGS_DUMP.replace("  use_distributed_optimizer ....................... True\n", "")
    text = dump + "torchrun --nproc_per_node 8 pretrain_gpt.py --fp8-format hybrid --fp8-param-gather\n" + \
        "\n".join(_iteration(i, 5000.0) for i in range(1, 6))
    run = run_from_log(text, defaults={"gpu": "h100"})
    assert run.layout.distributed_optimizer and run.workload.fp8_param_gather
    assert any("--fp8-param-gather runs only under it" in n for n in run.notes)


@pytest.mark.parametrize("script, backend", [
    ("python3 -m verl.trainer.main_ppo \\\n    actor_rollout_ref.actor.strategy=fsdp2 \\\n"
     "    actor_rollout_ref.model.path=Qwen/Qwen3-8B \\\n    trainer.n_gpus_per_node=8 trainer.nnodes=1\n", "verl fsdp2"),
    ("ray job submit -- python3 train.py \\\n  --train-backend fsdp \\\n  --hf-checkpoint /root/Qwen3-4B \\\n"
     "  --actor-num-gpus-per-node 8\n", "slime --train-backend fsdp"),
])
def test_a_run_on_an_fsdp_backend_is_refused_by_name(script, backend):
    """verl's FSDP actor and slime's former FSDP backend train with PyTorch FSDP: costing them as Megatron-Core would
    be a wrong answer, so the reader says what the run is (exit 2 in ``check``)."""
    with pytest.raises(MegasolveError) as err:
        run_from_log(script, "run.sh", {"gpu": "h100", "seq_length": 4096, "global_batch_size": 64, "step_time_s": 5.0})
    assert err.value.value == backend and "FSDP" in err.value.rule
    megatron = script.replace("strategy=fsdp2", "strategy=megatron").replace("--train-backend fsdp",
                                                                            "--train-backend megatron")
    assert "_train_backend" not in parse_log(megatron).args or parse_log(megatron).args["_train_backend"] == "verl megatron"


def test_cleanup_commands_of_a_script_are_not_its_training_flags():
    """"ray stop --force" / "pkill -9 python" before the launch (THUDM/slime#537) are not flags of the run."""
    text = "pkill -9 sglang\nray stop --force\nsleep 3\npython pretrain_gpt.py --tensor-model-parallel-size 2 \\\n" \
           "  --num-layers 24\n"
    args = parse_log(text).args
    assert args["tensor_model_parallel_size"] == 2 and args["num_layers"] == 24 and "force" not in args


def test_mindspeed_noop_layers_outside_the_end_stages_are_said_and_kept():
    """MindSpeed's --noop-layers become Megatron's uneven split only where they sit on the first / last stage of an
    even split without VPP (the fixtures: DeepSeek-V3 61 + 3, GLM-4.5-Air 46 + 2); elsewhere they are named and the
    padded count is costed."""
    from megasolve.solver.runs import _mindspeed_args

    for args in (dict(num_layers=48, pipeline_model_parallel_size=4, noop_layers="20"),
                 dict(num_layers=48, pipeline_model_parallel_size=4, noop_layers="0,47",
                      virtual_pipeline_model_parallel_size=2)):
        notes: list[str] = []
        _mindspeed_args(args, notes)
        assert args["num_layers"] == 48 and "decoder_last_pipeline_num_layers" not in args
        assert "costed as real layers" in notes[0]
    args, notes = dict(num_layers=48, pipeline_model_parallel_size=1, noop_layers=47), []
    _mindspeed_args(args, notes)
    assert args["num_layers"] == 47 and "47 real layers" in notes[0]


def test_mindspeed_memory_and_overlap_flags_are_named():
    """MindSpeed's flags that move memory or hide communication, which megasolve does not cost, are each named; a
    disabled or absent one is not."""
    from megasolve.solver.runs import _unmodelled_args

    script = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --num-layers 8 "
              "--moe-alltoall-overlap-comm --moe-zero-memory level0 --reuse-fp32-param --swap-attention "
              "--recompute-activation-function --use-ascend-mc2 --tp-2d --tp-x 2 --tp-y 1")
    notes: list[str] = []
    _unmodelled_args(parse_log(script).args, notes)
    for flag in ("--moe-alltoall-overlap-comm", "--moe-zero-memory", "--reuse-fp32-param", "--swap-attention",
                 "--recompute-activation-function", "--use-ascend-mc2", "--tp-2d"):
        assert sum(note.startswith(flag) for note in notes) == 1, (flag, notes)
    notes = []
    _unmodelled_args(parse_log("torchrun pretrain_gpt.py --num-layers 8 --moe-zero-memory disable").args, notes)
    assert not any("MindSpeed" in note for note in notes)


def test_bridge_setup_experiment_names_the_model_from_its_own_flags():
    """Megatron-Bridge's ``setup_experiment.py``: ``-m deepseek -s v3`` (v0.2) or ``-m llama -mr llama31_405b`` (v0.4)
    name the model; a ``python -m ...`` before the script is not its model flag."""
    assert set(parse_log("python3 -m pdb scripts/performance/setup_experiment.py -g h100 -m deepseek -s v3 -ng 1024")
               .model_names) == {"deepseek-v3"}
    assert set(parse_log("python scripts/performance/setup_experiment.py -g gb200 -m llama -mr llama31_405b -ng 256")
               .model_names) == {"llama-3.1-405b"}


def test_global_batch_from_the_stated_rates_when_no_batch_is_printed(tmp_path):
    """A text that states tokens/s/GPU and a step time over a known GPU count and sequence, but no batch (the
    Megatron-Bridge verification card without its "GBS/MBS" pair): the global batch is what those rates imply,
    said in a note; a --gbs given wins."""
    card = (LOGS / "NVIDIA-NeMo-Megatron-Bridge-verification-card-qwen3-235b-gb200.yaml").read_text(encoding="utf-8")
    cut = tmp_path / "card.yaml"
    cut.write_text(re.sub(r"GBS/MBS\s+8192/1,", "", card), encoding="utf-8")
    assert "global_batch_size" not in parse_log(cut.read_text(encoding="utf-8")).args
    args = {"account-for-embedding-in-pipeline-split": True, "account-for-loss-in-pipeline-split": True}
    run = read_runs(cut, args=args)[0]
    assert run.workload.global_batch_size == 8192 and any("global batch 8192: the stated tokens/s/GPU" in n
                                                          for n in run.notes)
    assert read_runs(cut, args=args, global_batch_size=4096)[0].workload.global_batch_size == 4096


def test_mllog_platform_counts_nodes():
    """MLPerf's "submission_platform" is nodes x the system: "640xNVIDIA GB200" is 640 trays (2,560 GPUs), not 640
    GPUs; a system name that states its GPUs ("x8B300", "x18x4GB200") gives the count."""
    def platform(value: str) -> dict:
        return parse_log(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": '
                         f'"submission_platform", "value": "{value}", "metadata": {{}}}}').args
    assert platform("640xNVIDIA GB200") == {"_prose_nodes": 640}
    assert platform("1xXE9780x8B300-SXM-270GB") == {"_prose_num_gpus": 8}
    assert platform("8xKinabalux18x4GB200") == {"_prose_num_gpus": 576}


def test_verl_metrics_one_a_line_name_the_actor_update():
    """verl-project/verl#3727 pastes one RL step's metrics one a line, without its number: the actor update is read,
    and with no batch sizes to give its optimizer steps the error says so instead of "no measurement"."""
    with pytest.raises(MegasolveError) as err:
        read_runs(LOGS / "verl-3727-gspo-timing-list.log", model="qwen3-30b-a3b", gpu="h200", num_gpus=16,
                  seq_length=38192, global_batch_size=128, args={"tensor-model-parallel-size": 1})
    assert "timing_s/update_actor, 16783.5 s an RL step" in str(err.value) and "ppo_mini_batch_size" in str(err.value)


def test_megatron_core_microbatches_spelling_and_a_bert_summary():
    """Megatron-Core's calculator logs "microbatches" (no hyphen); with the batch and DP it gives the micro batch.
    A NeMo model summary naming a BERT class is named as BERT (BioNeMo's Geneformer tutorial)."""
    text = ("[NeMo I 2025-05-21 01:46:05 num_microbatches_calculator:228] setting number of microbatches to constant 1\n"
            "| 2 | module.module.module | MegatronBioBertModel | 10.3 M | train |\n"
            + "\n".join(f"Training epoch 0, iteration {i}/99 | lr: 1e-4 | global_batch_size: 8 | global_step: {i} | "
                        f"reduced_train_loss: 9.0 | train_step_timing in s: 0.11" for i in range(1, 9)))
    run = run_from_log(text, "geneformer", {"model": "llama-3.2-1b", "gpu": "a100-80g", "num_gpus": 1,
                                            "seq_length": 2048})
    assert run.layout.mbs == 8 and any("micro batch 8 = global batch 8" in n for n in run.notes)
    assert any(n.startswith("a BERT run (MegatronBioBertModel)") for n in run.notes)


def test_only_warm_up_iterations_take_the_last():
    """A 3-iteration test (AMD-AGI/Primus ut_out): 36.96, 1.18 and 0.85 s are all warm-up; the last has the least
    start-up in it, where their median (1.18 s) had been taken and called "more than one run"."""
    lines = "\n".join(f" [2025-10-30 10:00:0{i}] iteration {i}/ 3 | consumed samples: {16 * i} | elapsed time per "
                      f"iteration (ms): {ms} | global batch size: 16 |" for i, ms in ((1, 36960.0), (2, 1178.4), (3, 846.5)))
    run = run_from_log(lines, "ut", {"model": "llama-3.2-1b", "gpu": "mi300x", "num_gpus": 8, "seq_length": 4096,
                                     "args": {"tensor-model-parallel-size": 1}})
    assert run.measured.step_time_s == pytest.approx(0.8465)
    assert any("the last one's time taken (iteration 3)" in n for n in run.notes)
    assert not any("more than one run" in n for n in run.notes)


@pytest.mark.parametrize("written,count", [("16x MI250X", 32), ("Running on 8 MI250X GCDs", 8)])
def test_an_mi250x_is_two_gcds(written, count):
    """ROCm shows each of an MI250X's two dies (GCDs) as a GPU, and the catalog's mi250x is one GCD (OLCF's Frontier
    guide): a count of MI250X modules is twice as many GPUs, a count of GCDs is as written."""
    facts = parse_log(written)
    assert facts.args["_prose_num_gpus"] == count and facts.gpu_names == {"MI250X": 1}


@pytest.mark.parametrize("marker, kernel, said", [
    ("from megatron.bridge.recipes.llama import llama3_8b_pretrain_config", "native", "model configs default it"),
    ("python scripts/performance/setup_experiment.py --model_family_name llama", "te", "performance scripts set it"),
    ("torchrun pretrain_gpt.py", "unfused", "loss kernel not in the log"),
])
def test_a_loss_kernel_the_log_does_not_print_is_the_frameworks_default_and_said(tmp_path, marker, kernel, said):
    """NeMo 2 / Megatron-Bridge model configs fuse the loss (Megatron-Core's native kernel), Bridge's performance
    scripts pick TE's, Megatron-LM leaves it off: an excerpt that does not print it gets its framework's, with a note
    naming the --arg that changes it (the kernels cost 28 / 10 / 52 B a logit, calibration.yaml)."""
    log = tmp_path / "run.log"
    log.write_text(marker + "\n iteration 10/ 100 | elapsed time per iteration (ms): 1000.0 | global batch size: 64 |\n")
    run = read_runs(log, model="llama-3.1-8b", gpu="h100", num_gpus=8, seq_length=4096,
                    args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1})[0]
    assert run.workload.cross_entropy == kernel
    assert any(said in n and "--arg cross-entropy-" in n for n in run.notes), run.notes
    stated = read_runs(log, model="llama-3.1-8b", gpu="h100", num_gpus=8, seq_length=4096,
                       args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1,
                             "cross_entropy_loss_fusion": False})[0]
    assert stated.workload.cross_entropy == "unfused" and not any("cross-entropy-" in n for n in stated.notes)


def test_bridge_performance_scripts_deterministic_and_compute_dtype_flags(tmp_path):
    """Megatron-Bridge's ``setup_experiment.py --deterministic`` applies ``apply_determinism_overrides``
    (recipes/utils/determinism_utils.py @067f987df): Megatron-Core's deterministic mode with its 32 MiB cuBLAS
    workspaces, the unfused loss instead of the scripts' TE kernel, no TP overlap; ``-c fp8_mx`` is the compute dtype.
    Both had been ignored (the run costed as bf16 with TE's fused loss)."""
    log = tmp_path / "run.log"
    command = "python scripts/performance/setup_experiment.py -g h100 -m llama -mr llama3_8b -ng 8 -c fp8_mx"
    given = dict(model="llama-3.1-8b", gpu="h100", num_gpus=8, seq_length=4096,
                 args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1})
    for flags, deterministic in (("", False), (" --deterministic", True)):
        log.write_text(command + flags + "\n iteration 10/ 100 | elapsed time per iteration (ms): 1000.0 |"
                       " global batch size: 64 |\n")
        run = read_runs(log, **given)[0]
        assert (run.workload.precision, run.workload.fp8_recipe) == ("fp8", "mxfp8")
        assert run.workload.deterministic_mode is deterministic
        assert run.workload.cross_entropy == ("unfused" if deterministic else "te") and not run.workload.tp_comm_overlap
        assert any("deterministic mode's speed is not modelled" in n for n in run.notes) is deterministic


@pytest.mark.parametrize("flags, model, gpu, want", [
    ("-rl 4", "llama-3.1-8b", "h100", {"recompute": "full", "recompute_num_layers": 4}),
    ("--recompute_modules core_attn,mlp", "llama-3.1-8b", "h100",
     {"recompute": "selective", "recompute_modules": ("core_attn", "mlp")}),
    ("-ol 2", "llama-3.1-8b", "h100", {"recompute": "none", "cpu_offload_layers": 2}),
    ("-ep 8 --moe_a2a_overlap true", "qwen3-30b-a3b", "h100",
     {"ep": 8, "moe_ep_overlap": True, "moe_shared_expert_overlap": False}),
    ("-ep 8 --moe_flex_dispatcher_backend deepep", "qwen3-30b-a3b", "h100", {"moe_dispatcher": "flex"}),
    ("-ep 8 --moe_flex_dispatcher_backend deepep", "qwen3-30b-a3b", "gb200", {"moe_dispatcher": "alltoall"}),
    ("-ep 8 --moe_flex_dispatcher_backend hybridep", "qwen3-30b-a3b", "gb200", {"moe_dispatcher": "flex"}),
    ("-ep 8 --moe_flex_dispatcher_backend None", "qwen3-30b-a3b", "h100", {"moe_dispatcher": "alltoall"}),
    ("-ep 8 --use_tokendrop true", "qwen3-30b-a3b", "h100",
     {"moe_expert_capacity_factor": 1.0, "moe_pad_expert_input_to_capacity": True}),
    ("--use_tokendrop true", "llama-3.1-8b", "h100", {"moe_expert_capacity_factor": None}),
])
def test_bridge_performance_scripts_recompute_offload_and_moe_flags(tmp_path, flags, model, gpu, want):
    """The performance scripts' own flags as ``scripts/performance/utils/overrides.py`` @067f987df applies them:
    ``-rl N`` full block recompute of N layers, ``--recompute_modules`` selective, ``-ol N`` activation offloading of
    N layers, ``--moe_a2a_overlap true`` the EP all-to-all overlap with the shared-expert overlap off,
    ``--moe_flex_dispatcher_backend`` the flex dispatcher (DeepEP falls back to alltoall on GB200, as
    ``apply_flex_dispatcher_backend`` does; ``None``: alltoall), ``--use_tokendrop true`` a capacity factor of 1 with
    padding (a dense model: said and ignored). Each had been read and dropped."""
    log = tmp_path / "run.log"
    log.write_text(f"python scripts/performance/setup_experiment.py -g {gpu} -m x -ng 8 {flags}\n"
                   " iteration 10/ 100 | elapsed time per iteration (ms): 1000.0 | global batch size: 64 |\n")
    run = read_runs(log, model=model, gpu=gpu, num_gpus=8, seq_length=4096,
                    args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1})[0]
    for key, value in want.items():
        assert getattr(run.layout if hasattr(run.layout, key) else run.workload, key) == value, key
    assert ("falls back to the alltoall" in " ".join(run.notes)) == ("deepep" in flags and gpu == "gb200")
    assert ("no effect on a dense model" in " ".join(run.notes)) == (model == "llama-3.1-8b" and "tokendrop" in flags)


def test_bridge_summary_recompute_modules_and_nemo1_tp_overlap():
    """Megatron-Bridge's non-default summary ("recompute_modules: ['layernorm']  (Mcore default: None)") gives the
    modules (they had been left at Megatron's default core_attn); NeMo 1's ub_tp_comm_overlap is the TP overlap, on
    with sequence parallelism and off without it (NeMo turns it off, Megatron-LM refuses it: ARG L1441-1442)."""
    bridge = LOGS / "togethercomputer-dgxc-benchmarking-gb200-qwen2.5-72b-tp8-pp4-banner.log"
    run = run_from_log(bridge.read_text(encoding="utf-8"), bridge.name, {"gpu": "gb200"})
    assert (run.layout.recompute, run.layout.recompute_modules) == ("selective", ("layernorm",))
    for name, sp in (("AI-Hypercomputer-gpu-recipes-a4-qwen2.5-32b-32gpu-nemo1-tp2-pp2-vp4-ub-overlap.log", True),
                     ("AI-Hypercomputer-gpu-recipes-a4-qwen2.5-7b-8gpu-nemo1-dp8.log", False)):
        run = run_from_log((LOGS / name).read_text(encoding="utf-8"), name, {})
        assert run.layout.sequence_parallel is sp and run.workload.tp_comm_overlap is sp
        assert run.workload.cross_entropy == "native"  # cross_entropy_loss_fusion: true in NeMo 1's config


def test_moe_capacity_factor_given_with_a_preset_is_applied(tmp_path):
    """``--arg moe-expert-capacity-factor=1.5`` with ``--model`` (no expert count in the log) had been dropped without a
    word: the routing fields were read only where the log printed the number of experts."""
    log = tmp_path / "run.log"
    log.write_text(" iteration 10/ 100 | elapsed time per iteration (ms): 1000.0 | global batch size: 64 |\n")
    run = read_runs(log, model="qwen3-30b-a3b", gpu="h100", num_gpus=8, seq_length=4096,
                    args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1,
                          "expert_model_parallel_size": 8, "moe_token_dispatcher_type": "alltoall",
                          "moe_expert_capacity_factor": 1.5})[0]
    assert run.workload.moe_expert_capacity_factor == 1.5


@pytest.mark.parametrize("extra, kernel", [("", "te"), ("image: nvcr.io/nvidia/nemo:25.09\n", "te-bf16grad"),
                                           ("image: nvcr.io/nvidia/nemo:26.08\n", "te"),
                                           ("transformer_engine version: 2.17.0\n", "te-bf16grad")])
def test_te_loss_kernel_follows_the_te_release_the_log_names(tmp_path, extra, kernel):
    """TE 2.18 (TE#3193; the NeMo 26.08 container's branch) keeps the loss's gradient in fp32: 22 B of traffic and
    4 B held a logit against 10 and 2 before it. A log naming its container or TE version gets that release's kernel;
    one naming neither gets 2.18's, said in a note with the --arg that changes it."""
    log = tmp_path / "run.log"
    log.write_text(extra + "python scripts/performance/setup_experiment.py --model_family_name llama\n"
                   " iteration 10/ 100 | elapsed time per iteration (ms): 1000.0 | global batch size: 64 |\n")
    run = read_runs(log, model="llama-3.1-8b", gpu="h100", num_gpus=8, seq_length=4096,
                    args={"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1})[0]
    assert run.workload.cross_entropy == kernel
    assert any("--arg te-version=2.17" in n for n in run.notes) == (not extra), run.notes


def _hard_wrapped(text: str, width: int) -> str:
    """``text`` as a terminal that breaks every line at ``width`` columns shows it."""
    return "\n".join(line[i:i + width] for line in text.splitlines() for i in range(0, max(len(line), 1), width))


@pytest.mark.parametrize("name", ["pai-megatron-patch-410-llama31-8b-128k.log",
                                  "megatron-deepspeed-396-tflops-iterations.log",
                                  "FZJ-JSC-jubench-megatron-lm-13b-8x4-a100-readme-iterations.txt",
                                  "modelscope-ms-swift-test-megatron-qwen2-0.5b-dp2.log"])
@pytest.mark.parametrize("width", [100, 160])
def test_a_log_broken_at_a_fixed_width_reads_as_posted(name, width):
    """A log copied from a terminal that broke its lines at a fixed width (``logs._unwrap_fixed_width``): the run
    read is the one its unbroken excerpt gives; the breaks had cost the step times, the batch, or the whole read."""
    entry = next(e for e in INDEX if e["file"] == name)
    given = {**entry.get("assume", {}), **entry.get("given", {})}
    given.setdefault("gpu", "h100")
    text = (LOGS / name).read_text(encoding="utf-8")
    plain, broken = run_from_log(text, name, given), run_from_log(_hard_wrapped(text, width), name, given)
    assert (broken.spec, broken.layout, broken.workload, broken.measured) == (plain.spec, plain.layout, plain.workload,
                                                                               plain.measured)
