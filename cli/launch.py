"""Copy-pasteable launch settings for a layout (``reference/ecosystem.md`` section 4).

* ``megatron``: Megatron-LM flags. VPP is ``--num-layers-per-virtual-pipeline-stage`` (there is no
  ``--virtual-pipeline-model-parallel-size`` flag) or, with an uneven split,
  ``--num-virtual-stages-per-pipeline-rank`` (ARG L954-956); uneven splits use
  ``--decoder-first/last-pipeline-num-layers``.
* ``bridge``: Megatron-Bridge Hydra overrides (``model.*``, ``train.*``, ``optimizer.*``, ``ddp.*``).
* ``nemo``: NeMo 2 recipe overrides (``trainer.strategy.*``, ``data.*``, ``model.config.*``).
* ``verl``: ``actor_rollout_ref.actor.megatron.*`` keys.
"""

from __future__ import annotations

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import stage_layer_counts
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster


def megatron_flags(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[str]:
    flags = [f"--tensor-model-parallel-size {layout.tp}", f"--pipeline-model-parallel-size {layout.pp}"]
    uneven = layout.first_stage_layers is not None or layout.last_stage_layers is not None \
        or layout.account_for_embedding or layout.account_for_loss
    if layout.vpp > 1:
        if uneven:
            flags.append(f"--num-virtual-stages-per-pipeline-rank {layout.vpp}")
        else:
            per_stage = stage_layer_counts(spec, layout)[0]
            flags.append(f"--num-layers-per-virtual-pipeline-stage {per_stage // layout.vpp}")
    if layout.first_stage_layers is not None:
        flags.append(f"--decoder-first-pipeline-num-layers {layout.first_stage_layers}")
    if layout.last_stage_layers is not None:
        flags.append(f"--decoder-last-pipeline-num-layers {layout.last_stage_layers}")
    if layout.account_for_embedding:
        flags.append("--account-for-embedding-in-pipeline-split")
    if layout.account_for_loss:
        flags.append("--account-for-loss-in-pipeline-split")
    if layout.cp > 1:
        flags.append(f"--context-parallel-size {layout.cp}")
    if spec.is_moe:
        flags.append(f"--expert-model-parallel-size {layout.ep}")
        flags.append(f"--expert-tensor-parallel-size {layout.etp}")
    if layout.sequence_parallel:
        flags.append("--sequence-parallel")
    flags += [f"--micro-batch-size {layout.mbs}", f"--global-batch-size {workload.global_batch_size}",
              f"--seq-length {workload.seq_length}"]
    if layout.distributed_optimizer:
        flags.append("--use-distributed-optimizer")
        if workload.dp_comm_overlap:
            flags += ["--overlap-grad-reduce", "--overlap-param-gather"]
    elif workload.dp_comm_overlap:
        flags.append("--overlap-grad-reduce")  # --overlap-param-gather needs the distributed optimizer (ARG L1024-1029)
    if layout.fsdp:  # Megatron-LM docs/discussions/megatron-fsdp-user-guide, "Required Configurations"
        flags += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params",
                  "--no-gradient-accumulation-fusion", "--ckpt-format fsdp_dtensor"]
    if layout.cpu_offload_layers:
        flags.append(f"--cpu-offloading-num-layers {layout.cpu_offload_layers}")
    if layout.recompute == "selective":
        flags += ["--recompute-granularity selective", "--recompute-modules core_attn"]
    elif layout.recompute == "full":
        if layout.recompute_num_layers is None:
            flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
        else:
            flags += ["--recompute-granularity full", "--recompute-method block",
                      f"--recompute-num-layers {layout.recompute_num_layers}"]
    flags.append("--bf16")
    if workload.precision == "fp8":
        flags += ["--fp8-format hybrid", f"--fp8-recipe {workload.fp8_recipe}"]
        if workload.fp8_output_proj:
            flags += ["--fp8-output-proj"]
        if workload.fp8_param_gather:
            flags += ["--fp8-param-gather"]
    if workload.grad_reduce_in_bf16:
        flags.append("--grad-reduce-in-bf16")
    if workload.cross_entropy != "unfused":
        flags += ["--cross-entropy-loss-fusion", f"--cross-entropy-fusion-impl {workload.cross_entropy}"]
    if spec.is_moe:
        flags += [f"--moe-token-dispatcher-type {workload.moe_dispatcher}", "--moe-grouped-gemm"]
        if workload.moe_dispatcher == "flex":
            flags.append("--moe-flex-dispatcher-backend deepep")
    # communication overlap the estimate assumed (Workload knobs; Megatron-LM @d98e8a6 flag names), only
    # where Megatron accepts them: TP overlap needs SP (ARG L1441-1442), p2p overlap exists only for the
    # interleaved schedule (ARG L1010-1013), EP overlap needs ep > 1 (TC L3002-3046)
    if workload.tp_comm_overlap and layout.tp > 1 and layout.sequence_parallel:
        flags.append("--tp-comm-overlap")
    if not workload.overlap_p2p_comm and layout.vpp > 1:
        flags.append("--no-overlap-p2p-communication")
    if spec.is_moe and workload.moe_ep_overlap and layout.ep > 1:
        flags.append("--overlap-moe-expert-parallel-comm")
    if spec.is_moe and workload.moe_shared_expert_overlap and spec.moe.shared_expert_ffn_hidden_size:
        flags.append("--moe-shared-expert-overlap")
    flags += [f"--{key.replace('_', '-')} {_flag_value(value)}".rstrip() for key, value in attention_items(spec, layout)]
    return flags


# ---- attention variants (issue 15): the model flags the cost model assumed ---------------------------
def _skip_freq(pattern: tuple[int, ...]) -> int | None:
    """The int N of ``--window-attn-skip-freq`` when every N-th layer (1-based) is full attention."""
    for n in range(2, len(pattern) + 1):
        if all(bool(v) == ((i + 1) % n != 0) for i, v in enumerate(pattern)):
            return n
    return None


def attention_items(spec: ModelSpec, layout: Layout) -> list[tuple[str, object]]:
    """Attention-variant ``TransformerConfig`` fields / Megatron-LM flags of ``spec``:
    ``window_size`` (TC L247, ``--window-size W,0``), ``window_attn_skip_freq`` (TC L251: an int N,
    every N-th layer full, or the 0/1 list), ``no_rope_freq`` (TC L291), ``rotary_percent``,
    ``softmax_type learnable`` (sinks, TC L170), ``qk_l2_norm``; with CP > 1 and windows,
    ``cp_comm_type all_gather``: TE's ``attn_forward_func_with_cp`` asserts that sliding-window
    attention runs only with the ``a2a`` or ``all_gather`` CP communication (Megatron's default is
    ``p2p``). Chunked attention (Llama 4) has no Megatron-Core training flag and is not exported.

    >>> from megasolve.models.presets import load_preset
    >>> attention_items(load_preset("gpt-oss-20b"), Layout(cp=2))[:3]
    [('window_size', '128,0'), ('window_attn_skip_freq', 2), ('softmax_type', 'learnable')]
    """
    items: list[tuple[str, object]] = []
    if spec.window_size is not None:
        items.append(("window_size", f"{spec.window_size},0"))
        if spec.window_pattern is not None:
            freq = _skip_freq(spec.window_pattern)
            items.append(("window_attn_skip_freq", freq if freq else f"[{','.join(map(str, spec.window_pattern))}]"))
    if spec.softmax_type != "vanilla":
        items.append(("softmax_type", spec.softmax_type))
    if spec.no_rope_pattern is not None and any(spec.no_rope_pattern):
        period = next((n for n in range(1, spec.num_layers + 1) if spec.num_layers % n == 0 and all(
            bool(v) == ((i + 1) % n == 0) for i, v in enumerate(spec.no_rope_pattern))), None)
        items.append(("no_rope_freq", period if period else f"[{','.join(map(str, spec.no_rope_pattern))}]"))
    if spec.rotary_percent != 1.0:
        items.append(("rotary_percent", spec.rotary_percent))
    if spec.qk_l2_norm:
        items.append(("qk_l2_norm", True))
    if spec.window_size is not None and layout.cp > 1:
        items.append(("cp_comm_type", "all_gather"))
    return items


def _flag_value(value: object) -> str:
    if value is True:
        return ""
    return f'"{value}"' if isinstance(value, str) and value.startswith("[") else str(value)


def _recompute_items(layout: Layout) -> list[tuple[str, object]]:
    if layout.recompute == "none":
        return [("recompute_granularity", None)]
    if layout.recompute == "selective":
        return [("recompute_granularity", "selective"), ("recompute_modules", "[core_attn]")]
    method = "uniform" if layout.recompute_num_layers is None else "block"
    return [("recompute_granularity", "full"), ("recompute_method", method),
            ("recompute_num_layers", layout.recompute_num_layers or 1)]


def _offload_items(layout: Layout) -> list[tuple[str, object]]:
    """Activation offloading as ``TransformerConfig`` fields (MPC L458-475), as the Bridge perf recipes set them."""
    if not layout.cpu_offload_layers:
        return []
    return [("cpu_offloading", True), ("cpu_offloading_weights", False),
            ("cpu_offloading_num_layers", layout.cpu_offload_layers)]


def _loss_items(workload: Workload) -> list[tuple[str, object]]:
    """The fused loss as ``TransformerConfig`` fields (TC ``cross_entropy_loss_fusion`` /
    ``cross_entropy_fusion_impl``)."""
    if workload.cross_entropy == "unfused":
        return []
    return [("cross_entropy_loss_fusion", True), ("cross_entropy_fusion_impl", workload.cross_entropy)]


def _bridge_overlap_items(spec: ModelSpec, workload: Workload, layout: Layout) -> list[tuple[str, object]]:
    """The communication overlap the estimate assumed, as Megatron-Bridge ``CommOverlapConfig`` /
    model fields (``training/comm_overlap.py`` L384-398 @067f987df), where Megatron accepts them."""
    items: list[tuple[str, object]] = []
    if workload.tp_comm_overlap and layout.tp > 1 and layout.sequence_parallel:
        items.append(("comm_overlap.tp_comm_overlap", True))
    if layout.vpp > 1:
        items.append(("comm_overlap.overlap_p2p_comm", workload.overlap_p2p_comm))
    if spec.is_moe and workload.moe_ep_overlap and layout.ep > 1:
        items.append(("comm_overlap.overlap_moe_expert_parallel_comm", True))
    if spec.is_moe and workload.moe_shared_expert_overlap and spec.moe.shared_expert_ffn_hidden_size:
        items.append(("model.moe_shared_expert_overlap", True))
    return items


def _fmt(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def launch_text(fmt: str, spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> str:
    """The launch settings of ``layout`` in ``fmt`` (megatron | bridge | nemo | verl)."""
    if fmt == "megatron":
        return " \\\n".join(megatron_flags(spec, cluster, workload, layout))
    vpp = layout.vpp if layout.vpp > 1 else None
    if fmt == "bridge":
        items = [("model.tensor_model_parallel_size", layout.tp), ("model.pipeline_model_parallel_size", layout.pp),
                 ("model.virtual_pipeline_model_parallel_size", vpp), ("model.context_parallel_size", layout.cp),
                 ("model.sequence_parallel", layout.sequence_parallel)]
        if spec.is_moe:
            items += [("model.expert_model_parallel_size", layout.ep),
                      ("model.expert_tensor_parallel_size", layout.etp)]
        if layout.first_stage_layers is not None:
            items.append(("model.num_layers_in_first_pipeline_stage", layout.first_stage_layers))
        if layout.last_stage_layers is not None:
            items.append(("model.num_layers_in_last_pipeline_stage", layout.last_stage_layers))
        if layout.account_for_embedding:
            items.append(("model.account_for_embedding_in_pipeline_split", True))
        if layout.account_for_loss:
            items.append(("model.account_for_loss_in_pipeline_split", True))
        items += [("model.seq_length", workload.seq_length), ("dataset.seq_length", workload.seq_length),
                  ("train.micro_batch_size", layout.mbs), ("train.global_batch_size", workload.global_batch_size),
                  ("optimizer.use_distributed_optimizer", layout.distributed_optimizer),
                  ("ddp.use_distributed_optimizer", layout.distributed_optimizer)]
        if workload.grad_reduce_in_bf16:
            items.append(("ddp.grad_reduce_in_fp32", False))
        items += [(f"model.{k}", v) for k, v in _loss_items(workload)]
        if layout.fsdp:  # Megatron-Bridge skills/nemo-mbridge-perf-megatron-fsdp, "Enablement"
            items += [("dist.use_megatron_fsdp", True), ("ddp.use_megatron_fsdp", True),
                      ("ddp.data_parallel_sharding_strategy", "optim_grads_params"),
                      ("ddp.average_in_collective", False), ("checkpoint.ckpt_format", "fsdp_dtensor")]
        items += [(f"model.{k}", v) for k, v in _recompute_items(layout) + _offload_items(layout)]
        items += _bridge_overlap_items(spec, workload, layout)
        items += [(f"model.{k}", f"[{v}]" if k == "window_size" else v) for k, v in attention_items(spec, layout)]
        return " \\\n".join(f"{k}={_fmt(v)}" for k, v in items)
    if layout.fsdp:
        raise MegasolveError(field="--format", value=fmt,
                             rule="Megatron-FSDP launch settings are written for megatron and bridge only",
                             fix="use --format megatron or --format bridge")
    if fmt == "nemo":
        items = [("trainer.num_nodes", cluster.num_nodes), ("trainer.devices", min(cluster.gpus_per_node,
                                                                                    cluster.num_gpus)),
                 ("trainer.strategy.tensor_model_parallel_size", layout.tp),
                 ("trainer.strategy.pipeline_model_parallel_size", layout.pp),
                 ("trainer.strategy.virtual_pipeline_model_parallel_size", vpp),
                 ("trainer.strategy.context_parallel_size", layout.cp),
                 ("trainer.strategy.sequence_parallel", layout.sequence_parallel)]
        if spec.is_moe:
            items += [("trainer.strategy.expert_model_parallel_size", layout.ep),
                      ("trainer.strategy.expert_tensor_parallel_size", layout.etp)]
        if layout.first_stage_layers is not None:
            items.append(("trainer.strategy.num_layers_in_first_pipeline_stage", layout.first_stage_layers))
        if layout.last_stage_layers is not None:
            items.append(("trainer.strategy.num_layers_in_last_pipeline_stage", layout.last_stage_layers))
        if workload.grad_reduce_in_bf16:  # NeMo 2 recipes build DistributedDataParallelConfig here
            items.append(("trainer.strategy.ddp.grad_reduce_in_fp32", False))
        items += [("data.global_batch_size", workload.global_batch_size), ("data.micro_batch_size", layout.mbs),
                  ("data.seq_length", workload.seq_length)]
        items += [(f"model.config.{k}", v) for k, v in _recompute_items(layout) + _offload_items(layout)
                  + _loss_items(workload)]
        return " \\\n".join(f"{k}={_fmt(v)}" for k, v in items)
    if fmt == "verl":
        prefix = "actor_rollout_ref.actor.megatron."
        items = [("tensor_model_parallel_size", layout.tp), ("pipeline_model_parallel_size", layout.pp),
                 ("virtual_pipeline_model_parallel_size", vpp), ("context_parallel_size", layout.cp),
                 ("sequence_parallel", layout.sequence_parallel),
                 ("use_distributed_optimizer", layout.distributed_optimizer)]
        if spec.is_moe:
            items += [("expert_model_parallel_size", layout.ep), ("expert_tensor_parallel_size", layout.etp)]
        lines = [f"{prefix}{k}={_fmt(v)}" for k, v in items]
        for key, value in _recompute_items(layout) + _offload_items(layout) + _loss_items(workload):
            lines.append(f"+{prefix}override_transformer_config.{key}={_fmt(value)}")
        if workload.grad_reduce_in_bf16:
            lines.append(f"+{prefix}override_ddp_config.grad_reduce_in_fp32=False")
        if layout.first_stage_layers is not None:
            lines.append(f"+{prefix}override_transformer_config.num_layers_in_first_pipeline_stage="
                         f"{layout.first_stage_layers}")
        if layout.last_stage_layers is not None:
            lines.append(f"+{prefix}override_transformer_config.num_layers_in_last_pipeline_stage="
                         f"{layout.last_stage_layers}")
        return " \\\n".join(lines)
    raise ValueError(fmt)
