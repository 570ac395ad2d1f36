"""Launch arguments the log readers used to drop without a word (a Megatron-LM command line, read by
``solver/runs.py``): those megasolve costs are read into the run, the others are named in a note."""

from __future__ import annotations

import pytest

from megasolve.solver.runs import run_from_log

MOE = """torchrun pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 \\
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --vocab-size 32000 --bf16 --swiglu \\
  --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 2 --use-distributed-optimizer {extra}
"""
DEFAULTS = {"gpu": "h100", "num_gpus": 8, "step_time_s": 1.0}


def read(extra: str, text: str = MOE):
    return run_from_log(text.format(extra=extra), defaults=DEFAULTS)


def noted(run, needle: str) -> bool:
    return any(needle in note for note in run.notes)


def test_moe_token_dropping_and_padding_are_read():
    run = read("--moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity --moe-token-drop-policy position")
    w = run.workload
    assert (w.moe_expert_capacity_factor, w.moe_pad_expert_input_to_capacity, w.moe_token_drop_policy) == \
        (1.25, True, "position")
    assert read("").workload.moe_expert_capacity_factor is None  # dropless, Megatron's default


@pytest.mark.parametrize("flag", ["--moe-router-padding-for-quantization", "--moe-router-padding-for-fp8"])
def test_router_padding_is_read_under_either_name(flag):
    run = read(f"--fp8-format hybrid --fp8-recipe mxfp8 --moe-token-dispatcher-type alltoall {flag}")
    assert run.workload.moe_router_padding_for_fp8 is True


def test_a_refused_padding_is_named_and_left_out():
    run = read("--moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity --moe-token-dispatcher-type flex")
    assert run.workload.moe_expert_capacity_factor is None and run.workload.moe_dispatcher == "flex"
    assert noted(run, "MoE token dropping / padding not costed (--moe-pad-expert-input-to-capacity")


def test_output_layer_in_mxfp8_only_with_the_mxfp8_recipe():
    assert read("--fp8-format hybrid --fp8-recipe mxfp8 --fp8-output-proj").workload.fp8_output_proj is True
    plain = read("--fp8-output-proj")
    assert plain.workload.fp8_output_proj is False and noted(plain, "--fp8-output-proj costed as a bf16 output layer")


def test_bf16_main_grads_and_the_precision_aware_optimizer():
    run = read("--main-grads-dtype bf16 --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16")
    w = run.workload
    assert w.grad_reduce_in_bf16 is True and w.precision_aware_optimizer is True
    assert (w.exp_avg_dtype, w.exp_avg_sq_dtype, w.main_params_dtype) == ("bf16", "bf16", "fp32")
    plain = read("--use-precision-aware-optimizer").workload
    assert plain.precision_aware_optimizer is True and plain.exp_avg_dtype == "fp32"
    # a printed dump spells the dtypes as torch's
    dump = read("--use-precision-aware-optimizer --exp-avg-dtype torch.bfloat16").workload
    assert dump.exp_avg_dtype == "bf16"
    fsdp = read("--use-precision-aware-optimizer --use-megatron-fsdp --exp-avg-dtype bf16")
    assert fsdp.workload.precision_aware_optimizer is False
    assert noted(fsdp, "--use-precision-aware-optimizer costed as Adam's fp32 state")


def test_deprecated_moe_layer_recompute_is_selective_recompute_of_the_moe_layer():
    run = read("--moe-layer-recompute")
    assert run.layout.recompute == "selective" and run.layout.recompute_modules == ("core_attn", "moe")


def test_a_parameter_gather_left_unoverlapped_is_read():
    assert read("--overlap-grad-reduce").workload.param_gather_overlap is False  # Megatron-LM's default: off
    both = read("--overlap-grad-reduce --overlap-param-gather").workload
    assert both.dp_comm_overlap and both.param_gather_overlap


HYBRID = """torchrun pretrain_mamba.py --num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 1024 \\
  --max-position-embeddings 1024 --micro-batch-size 2 --global-batch-size 16 --vocab-size 32000 --bf16 \\
  --squared-relu --ffn-hidden-size 4096 --mamba-state-dim 128 --mamba-head-dim 64 --mamba-num-groups 8 {extra}
"""


@pytest.mark.parametrize("flag", ["--hybrid-override-pattern", "--hybrid-layer-pattern"])
def test_a_hybrid_launch_is_read_as_its_layer_pattern(flag):
    spec = read(f"{flag} M-M*M-M-", HYBRID).spec
    assert spec.is_hybrid and spec.hybrid_pattern == "M-M*M-M-" and not spec.swiglu
    assert spec.mamba.state_dim == 128 and spec.mamba.num_heads == 2 * 1024 // 64


def test_latent_experts_sinks_and_a_repeated_mtp_layer_are_read():
    spec = read("--moe-latent-size 128 --softmax-type learnable --mtp-num-layers 2 --mtp-use-repeated-layer").spec
    assert spec.moe.latent_size == 128 and spec.softmax_type == "learnable"
    assert spec.mtp_num_layers == 2 and spec.mtp_use_repeated_layer is True


@pytest.mark.parametrize("extra, flag", [
    ("--no-gradient-accumulation-fusion", "--no-gradient-accumulation-fusion"),
    ("--delay-wgrad-compute", "--delay-wgrad-compute"),
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep", "--moe-flex-dispatcher-backend"),
    ("--empty-unused-memory-level 1", "--empty-unused-memory-level"),
    ("--recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
     "--recompute-num-layers with --recompute-method uniform"),
    ("--fp32-residual-connection", "--fp32-residual-connection"),
    ("--moe-apply-probs-on-input", "--moe-apply-probs-on-input"),
    ("--moe-paged-stash", "--moe-paged-stash"),
    ("--moe-token-dispatcher-type alltoall --overlap-moe-expert-parallel-comm --ep-overlap-early-attn-memory-release",
     "--ep-overlap-early-attn-memory-release"),
    ("--moe-router-fusion", "--moe-router-fusion"),
    ("--log-num-zeros-in-grad", "--log-num-zeros-in-grad"),
])
def test_a_setting_megasolve_does_not_cost_is_named(extra, flag):
    grouped = "--moe-grouped-gemm "
    assert noted(read(grouped + extra), f"{flag} is not modelled")
    assert not any("is not modelled" in note for note in read(grouped).notes)


def test_a_flex_backend_is_named_only_under_the_flex_dispatcher():
    assert not noted(read("--moe-grouped-gemm --moe-token-dispatcher-type alltoall --moe-flex-dispatcher-backend "
                          "hybridep"), "--moe-flex-dispatcher-backend")


def test_manual_gc_is_read_without_a_note():  # the step is costed without collector pauses, as the flag gives
    assert not any("manual-gc" in note for note in read("--moe-grouped-gemm --manual-gc").notes)


def test_experts_without_grouped_gemm_are_named():
    assert noted(read(""), "--moe-grouped-gemm off is not modelled")  # Megatron-LM's default: off
    assert not noted(read("--moe-grouped-gemm"), "--moe-grouped-gemm off")


DUMP = """------------------------ arguments ------------------------
  bf16 ............................................ True
  ffn_hidden_size ................................. 4096
  global_batch_size ............................... 16
  hidden_size ..................................... 1024
  hybrid_layer_pattern ............................ {current}
  hybrid_override_pattern ......................... {deprecated}
  max_position_embeddings ......................... 1024
  micro_batch_size ................................ 2
  num_attention_heads ............................. 8
  num_layers ...................................... 8
  pipeline_model_parallel_size .................... 1
  seq_length ...................................... 1024
  squared_relu .................................... True
  tensor_model_parallel_size ...................... 1
  vocab_size ...................................... 32000
-------------------- end of arguments ---------------------
"""


@pytest.mark.parametrize("current, deprecated", [("M-M*M-M-", "None"), ("None", "M-M*M-M-")])
def test_a_dump_printing_both_names_keeps_the_one_that_is_set(current, deprecated):
    """Megatron-LM's argument dump prints the deprecated --hybrid-override-pattern beside --hybrid-layer-pattern
    (alphabetically after it): the unset one must not erase the other."""
    spec = run_from_log(DUMP.format(current=current, deprecated=deprecated), defaults=DEFAULTS).spec
    assert spec.is_hybrid and spec.hybrid_pattern == "M-M*M-M-"


@pytest.mark.parametrize("strategy, distributed_optimizer, fsdp", [
    ("optim_grads_params", True, True),  # ZeRO-3: Megatron-FSDP as megasolve costs it
    ("optim_grads", True, False),  # ZeRO-2: the parameters stay whole, costed as the distributed optimizer
    ("optim", True, False),  # ZeRO-1: what the distributed optimizer shards
    ("no_shard", False, False),  # DDP
])
def test_megatron_fsdp_strategies_that_keep_the_parameters_whole(strategy, distributed_optimizer, fsdp):
    run = read(f"--moe-grouped-gemm --use-megatron-fsdp --data-parallel-sharding-strategy {strategy}")
    assert (run.layout.distributed_optimizer, run.layout.fsdp) == (distributed_optimizer, fsdp)
    assert run.workload.grad_reduce_in_bf16 is not fsdp  # Megatron-FSDP's auto main grads: bf16
    assert noted(run, f"--data-parallel-sharding-strategy {strategy} costed as") is not fsdp
