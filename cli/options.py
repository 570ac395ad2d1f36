"""Shared click options and the helpers that turn them into library objects."""

from __future__ import annotations

from typing import Any, Callable

import click

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import (ADAM_STATE_DTYPES, CP_COMM_TYPES, CROSS_ENTROPY_KINDS, CUDA_GRAPH_IMPLS,
                                     FP8_RECIPES, FSDP_GRAD_DTYPES, MAIN_PARAMS_DTYPES, MOE_DISPATCHERS, OPTIMIZERS,
                                     PRECISION_CHOICES, Layout, Workload,
                                     cuda_graph_note, default_global_batch, fsdp_grad_comm_note, precision_fields)
from megasolve.models.presets import ResolvedModel, resolve_model
from megasolve.topology.cluster import Cluster

F = Callable[..., Any]


def _stack(*decorators: F) -> F:
    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func
    return apply


def _remember_mtp_layers(ctx: click.Context, _param: click.Parameter, value: int | None) -> None:
    if value is not None:
        ctx.meta["mtp_layers"] = value


def model_option(func: F) -> F:
    return _stack(
        click.option("--model", "-m", "model_ref", required=True, metavar="NAME|PATH",
                     help="Preset name (see `megasolve models`), a preset's HF id, a config.json "
                          "(or its folder), or a YAML of Megatron argument names."),
        click.option("--mtp-layers", type=click.IntRange(0, 16), default=None, expose_value=False,
                     callback=_remember_mtp_layers, metavar="N",
                     help="Multi-token-prediction layers to train (Megatron --mtp-num-layers), replacing the "
                          "model's: presets keep their released MTP layers (DeepSeek-V3, GLM-4.5, Qwen3-Next, "
                          "Qwen3.5, as Megatron-Bridge trains them); 0 plans without them."),
    )(func)


def cluster_options(multi_gpus: bool = False) -> Callable[[F], F]:
    gpus_help = ("GPU counts to sweep: 64,128,256, or a doubling range 8..1024 (8, 16, ..., 1024)." if multi_gpus
                 else "Number of GPUs in the job.")
    return _stack(
        click.option("--gpus", "-n", "gpus", type=str if multi_gpus else int, default=None,
                     help=gpus_help),
        click.option("--gpu", "-g", "gpu", default=None, metavar="TYPE" + (",TYPE" if multi_gpus else ""),
                     help="GPU type (see `megasolve gpus`), e.g. a100-80g, h100, b200, gb200."
                          + (" Several, comma-separated, to compare." if multi_gpus else "")),
        click.option("--gpus-per-node", type=int, default=None, help="GPUs per node (default: the GPU's)."),
        click.option("--nvlink-domain", type=int, default=None,
                     help="GPUs per NVLink domain (8 for HGX, 72 for NVL72; default: the GPU's)."),
        click.option("--nic-gbps", type=float, default=None,
                     help="Scale-out NIC bandwidth per GPU in Gbit/s (default: the GPU's, e.g. 400)."),
        click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False), default=None,
                     help="Cluster YAML (gpu, num_gpus or nodes, gpus_per_node, nvlink_domain, "
                          "nic_gbit_per_gpu, fabric_oversubscription)."),
    )


def build_cluster(*, gpus: int | None, gpu: str | None, gpus_per_node: int | None, nvlink_domain: int | None,
                  nic_gbps: float | None, cluster_file: str | None) -> Cluster:
    if cluster_file:
        cluster = Cluster.from_yaml(cluster_file, num_gpus=gpus)
        if gpu:
            raise MegasolveError(field="--gpu", value=gpu, rule="the --cluster file already names the GPU",
                                 fix="drop --gpu or edit the cluster file")
        return cluster
    if gpus is None:
        raise MegasolveError(field="--gpus", value="missing", rule="the cluster size is required",
                             fix="pass --gpus N (or --cluster FILE)")
    if gpu is None:
        raise MegasolveError(field="--gpu", value="missing", rule="the GPU type is required",
                             fix="pass --gpu TYPE, e.g. --gpu h100 (see `megasolve gpus`)")
    return Cluster.from_flags(num_gpus=gpus, gpu=gpu, gpus_per_node=gpus_per_node,
                              nvlink_domain=nvlink_domain, nic_gbit_per_gpu=nic_gbps)


# Workload fields set by the training recipe rather than the layout (shared by estimate, solve, whatif)
RECIPE_OPTIONS = ("fp8_recipe", "fp8_output_proj", "moe_dispatcher", "cp_comm_type", "cross_entropy",
                  "grad_reduce_in_bf16", "fsdp_main_grads_dtype", "fsdp_grad_comm_dtype",
                  "tp_comm_overlap", "overlap_p2p_comm", "moe_ep_overlap", "moe_shared_expert_overlap",
                  "dp_comm_overlap", "param_gather_overlap", "moe_expert_capacity_factor",
                  "moe_pad_expert_input_to_capacity", "moe_token_drop_policy", "moe_router_padding_for_fp8",
                  "defer_embedding_wgrad", "wgrad_deferral_limit", "deterministic_mode", "dist_optimizer_instances",
                  "cuda_graph_impl",
                  "microbatch_group_size", "activation_fusion", "activation_func_fp8_input_store", "offload_modules",
                  "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
                  "optimizer", "precision_aware_optimizer", "exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype",
                  "te_precision_config")


def recipe_options(func: F) -> F:
    return _stack(
        click.option("--fp8-recipe", type=click.Choice(list(FP8_RECIPES)), default="delayed", show_default=True,
                     help="FP8 scaling recipe (Megatron --fp8-recipe); block scaling (mxfp8, blockwise) costs "
                          "more quantisation work."),
        click.option("--fp8-output-proj", "fp8_output_proj", is_flag=True,
                     help="Run the output layer in MXFP8 too (needs --fp8-recipe mxfp8); default bf16."),
        click.option("--optimizer", "optimizer", type=click.Choice(list(OPTIMIZERS)), default="adam",
                     show_default=True,
                     help="Megatron --optimizer: adam, or muon (Megatron-LM's Muon: one fp32 momentum instead of "
                          "Adam's two moments on the 2-D weights, and their Newton-Schulz step; with the distributed "
                          "optimizer, the layer-wise one)."),
        click.option("--use-precision-aware-optimizer", "precision_aware_optimizer", is_flag=True,
                     help="Megatron --use-precision-aware-optimizer (Adam, distributed optimizer): Transformer Engine's "
                          "FusedAdam holds the master weights as 16-bit remainders of the bf16 ones (2 instead of 4 B "
                          "per parameter; fp32 with FP8 recipes other than delayed) and the moments in the dtypes "
                          "below."),
        click.option("--exp-avg-dtype", "exp_avg_dtype", type=click.Choice(list(ADAM_STATE_DTYPES)), default="fp32",
                     show_default=True, help="Adam's first moment with --use-precision-aware-optimizer."),
        click.option("--exp-avg-sq-dtype", "exp_avg_sq_dtype", type=click.Choice(list(ADAM_STATE_DTYPES)),
                     default="fp32", show_default=True,
                     help="Adam's second moment with --use-precision-aware-optimizer."),
        click.option("--main-params-dtype", "main_params_dtype", type=click.Choice(list(MAIN_PARAMS_DTYPES)),
                     default="fp32", show_default=True,
                     help="Master weights with --use-precision-aware-optimizer (fp16: 2 B)."),
        click.option("--num-layers-at-start-in-bf16", "num_layers_at_start_in_bf16", type=int, default=0,
                     show_default=True, metavar="N",
                     help="Keep the first N decoder layers in bf16 in an FP8 / FP4 run (Megatron "
                          "--first-last-layers-bf16 --num-layers-at-start-in-bf16 N)."),
        click.option("--num-layers-at-end-in-bf16", "num_layers_at_end_in_bf16", type=int, default=0,
                     show_default=True, metavar="N",
                     help="Keep the last N decoder layers in bf16 in an FP8 / FP4 run (e.g. 14 in Megatron-Bridge's "
                          "Nemotron 3 Super NVFP4 recipe)."),
        click.option("--moe-dispatcher", "--moe-token-dispatcher-type", "moe_dispatcher",
                     type=click.Choice(list(MOE_DISPATCHERS)), default="flex", show_default=True,
                     help="MoE token dispatcher: flex (DeepEP: one copy of a token per remote NVLink domain), "
                          "plain all-to-all (one copy per chosen expert) or allgather."),
        click.option("--cp-comm-type", "cp_comm_type", type=click.Choice(list(CP_COMM_TYPES)), default=None,
                     help="Context-parallel communication (Megatron --cp-comm-type): p2p KV ring overlapped with "
                          "attention, a2a (Ulysses: heads per TP rank divisible by --cp), all_gather of K/V, or "
                          "a2a+p2p (a2a inside the NVLink domain, p2p across). estimate: the type the model needs "
                          "(p2p; all_gather with sliding windows; a2a with sinks) unless given; solve chooses the "
                          "fastest allowed per layout unless given."),
        click.option("--cross-entropy", type=click.Choice(list(CROSS_ENTROPY_KINDS)), default="unfused",
                     show_default=True,
                     help="Loss kernel: Megatron's default, --cross-entropy-loss-fusion with the native or the "
                          "Transformer Engine implementation: fp32 logits and 52 B of HBM traffic a logit "
                          "(unfused), 28 B (native); TE's keeps an fp32 gradient and moves 22 B (te, TE 2.18+) "
                          "or writes it over the bf16 logits and moves 10 B (te-bf16grad, TE before 2.18)."),
        click.option("--grad-reduce-in-bf16", "grad_reduce_in_bf16", is_flag=True,
                     help="bf16 main grads and gradient reduction (Megatron --grad-reduce-in-bf16): 2 instead of "
                          "4 bytes per parameter held and reduced."),
        click.option("--megatron-fsdp-main-grads-dtype", "fsdp_main_grads_dtype",
                     type=click.Choice(list(FSDP_GRAD_DTYPES)), default="auto", show_default=True,
                     help="Main-grad dtype of Megatron-FSDP layouts: auto is Megatron-LM's default since July 2026, "
                          "the bf16 weights' dtype (older releases kept fp32 unless --grad-reduce-in-bf16: pass fp32 "
                          "for them)."),
        click.option("--megatron-fsdp-grad-comm-dtype", "fsdp_grad_comm_dtype",
                     type=click.Choice(list(FSDP_GRAD_DTYPES)), default="auto", show_default=True,
                     help="Gradient reduce-scatter dtype of Megatron-FSDP layouts (auto: the main grads' dtype)."),
        # communication overlap, defaults = Megatron-LM's
        click.option("--tp-comm-overlap", "tp_comm_overlap", is_flag=True,
                     help="Overlap TP all-gather / reduce-scatter with the GEMMs (Megatron --tp-comm-overlap, "
                          "TE userbuffers; needs --sequence-parallel). estimate: off unless given, as in Megatron-LM; "
                          "solve chooses it per layout unless given."),
        click.option("--no-overlap-p2p-communication", "overlap_p2p_comm", flag_value=False, default=True,
                     help="Do not overlap pipeline p2p with compute in the interleaved schedule (Megatron's "
                          "default overlaps it; 1F1B never does)."),
        click.option("--moe-ep-overlap", "--overlap-moe-expert-parallel-comm", "moe_ep_overlap", is_flag=True,
                     help="Hide the EP all-to-all behind another micro-batch's compute (Megatron "
                          "--overlap-moe-expert-parallel-comm: ep > 1, --vpp > 1 when --pp > 1, no full recompute). "
                          "solve chooses it per layout unless given."),
        click.option("--moe-shared-expert-overlap", "moe_shared_expert_overlap", is_flag=True,
                     help="Run shared experts during the token dispatch (Megatron --moe-shared-expert-overlap). "
                          "solve chooses it per layout unless given."),
        click.option("--cuda-graph-impl", "cuda_graph_impl", type=click.Choice(list(CUDA_GRAPH_IMPLS)),
                     default="none", show_default=True,
                     help="CUDA graphs (Megatron --cuda-graph-impl): full_iteration replays the whole forward-"
                          "backward as one graph (no kernel launches or host syncs: the MoE layers' fixed "
                          "overhead shrinks); local / transformer_engine graph layer modules, not modelled."),
        click.option("--defer-embedding-wgrad-compute", "defer_embedding_wgrad", is_flag=True,
                     help="Defer the output layer's weight-gradient GEMMs to the pipeline flush (Megatron "
                          "--defer-embedding-wgrad-compute; needs --pp > 1): the last stage keeps their inputs "
                          "and logits gradients until then (memory counted; the time saved is not)."),
        click.option("--deterministic-mode", "deterministic_mode", is_flag=True,
                     help="Megatron --deterministic-mode: its CUBLAS_WORKSPACE_CONFIG=:4096:8 gives PyTorch's cuBLAS "
                          "workspaces 32 MiB on every GPU (memory counted); its slower ring collectives and "
                          "deterministic kernels are not costed."),
        click.option("--wgrad-deferral-limit", "wgrad_deferral_limit", type=int, default=0, show_default=True,
                     help="With --defer-embedding-wgrad-compute: defer only this many output-layer calls "
                          "(Megatron --wgrad-deferral-limit; 0 = every micro-batch, NVIDIA's Llama recipes use 22)."),
        click.option("--microbatch-group-size-per-virtual-pipeline-stage", "microbatch_group_size", type=int,
                     default=None,
                     help="Interleaved schedule: consecutive micro-batches per model chunk (Megatron "
                          "--microbatch-group-size-per-virtual-pipeline-stage; default the pipeline size). A larger "
                          "group keeps (vpp-1) more micro-batch chunks in flight per step of the group; it lets the "
                          "micro-batch count be any M with pp <= G <= M and M % G zero or >= pp."),
        click.option("--num-distributed-optimizer-instances", "dist_optimizer_instances", type=int, default=1,
                     show_default=True,
                     help="Split the data-parallel group into N distributed-optimizer instances (Megatron "
                          "--num-distributed-optimizer-instances): the optimizer state shards over DP*CP/N ranks "
                          "(N times more of it per GPU), gradients reduce-scatter inside each instance and "
                          "all-reduce across them."),
        # MoE token dropping and padding (cost/moe_routing.py)
        click.option("--moe-expert-capacity-factor", "moe_expert_capacity_factor", type=float, default=None,
                     help="Expert capacity = ceil(tokens*k/E * factor); tokens over it are dropped (Megatron "
                          "--moe-expert-capacity-factor). Default: dropless."),
        click.option("--moe-pad-expert-input-to-capacity", "moe_pad_expert_input_to_capacity", is_flag=True,
                     help="Pad every expert's input to its capacity (memory and FLOPs of capacity x E rows; "
                          "needs --moe-expert-capacity-factor, not with the flex dispatcher)."),
        click.option("--moe-token-drop-policy", "moe_token_drop_policy", type=click.Choice(["probs", "position"]),
                     default="probs", show_default=True,
                     help="Which tokens over capacity go: lowest probability or last position (exported; the "
                          "costs are the same)."),
        click.option("--moe-router-padding-for-fp8", "moe_router_padding_for_fp8", is_flag=True,
                     help="Round each expert's token count up to the FP8 alignment (16, MXFP8 32) in the router "
                          "instead of padding inside the grouped GEMM (needs --precision fp8)."),
        click.option("--no-activation-fusion", "activation_fusion", flag_value=False, default=True,
                     help="The MLP activation without its fused kernel (Megatron --no-bias-swiglu-fusion; a GeLU "
                          "MoE always runs so): it keeps the activation output and, in the experts, its "
                          "probability-scaled copy (more activation memory, more elementwise time)."),
        click.option("--activation-func-fp8-input-store", "activation_func_fp8_input_store", is_flag=True,
                     help="Keep the SwiGLU input (the fc1 output) in FP8 for backward (Megatron "
                          "--activation-func-fp8-input-store; SwiGLU models, with the fused activation kernel): "
                          "half that tensor's activation memory, in bf16 or FP8 training."),
        click.option("--offload-modules", "offload_modules", default=None, metavar="MODULES",
                     help="Fine-grained activation offloading (Megatron --fine-grained-activation-offloading "
                          "--offload-modules): these modules' saved tensors go to host memory, comma-separated "
                          "(attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act)."),
        click.option("--te-precision-config", "te_precision_config", default=None, metavar="RECIPE.yaml",
                     help="Per-module precision recipe (Megatron --te-precision-config-file, Bridge "
                          "model.quant_recipe): the modules its matchers give bf16 or another format run, gather "
                          "and save their inputs in it, e.g. Megatron-Bridge's Nemotron 3 Super NVFP4 te_quant.cfg."),
        click.option("--no-dp-comm-overlap", "dp_comm_overlap", flag_value=False, default=True,
                     help="Launch without --overlap-grad-reduce/--overlap-param-gather (the exports set them by "
                          "default, as NVIDIA's recipes do): DP traffic exposed after the backward."),
        click.option("--no-overlap-param-gather", "param_gather_overlap", flag_value=False, default=True,
                     help="Launch with --overlap-grad-reduce but without --overlap-param-gather: the distributed "
                          "optimizer's parameter all-gather runs exposed after the optimizer step."),
        click.option("--profile", "profile", default=None, metavar="PROFILE.yaml",
                     help="Calibration profile written by `megasolve calibrate` (default: the shipped "
                          "published-megatron-runs)."),
    )(func)


def load_profile_option(options: dict[str, Any]) -> Any:
    """Remove ``--profile`` from a command's keyword arguments and load it (None: the shipped profile)."""
    from megasolve.cost.calibration import load_profile

    return load_profile(options.pop("profile", None))


def take(options: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """Remove and return the ``names`` entries of a command's keyword arguments."""
    return {name: options.pop(name) for name in names}


def workload_options(func: F) -> F:
    return _stack(
        click.option("--seq-len", "seq_len", type=int, default=4096, show_default=True,
                     help="Training sequence length (tokens)."),
        click.option("--gbs", type=int, default=None,
                     help="Global batch size in sequences (default: 1024 for seq <= 4096, fewer for longer"
                          " sequences: about 4M tokens per step)."),
        click.option("--precision", type=click.Choice(list(PRECISION_CHOICES)), default="bf16", show_default=True,
                     help="Training precision of the GEMMs: fp8 keeps bf16 parameters (+ cached FP8 copies); "
                          "fp8-params uses FP8 primary weights (--fp8-param-gather, with the distributed optimizer; "
                          "MXFP8 ones are gathered in bf16 through the grad buffer, "
                          "--reuse-grad-buf-for-mxfp8-param-ag); fp4 (or nvfp4) is NVFP4 "
                          "on Blackwell (--fp4-format e2m1)."),
        click.option("--attention", type=click.Choice(["flash", "unfused"]), default="flash",
                     show_default=True, help="Fused/flash attention (no s x s scores) or unfused."),
        recipe_options,
    )(func)


WORKLOAD_OPTIONS = ("seq_len", "gbs", "precision", "attention") + RECIPE_OPTIONS


def build_workload(*, seq_len: int, gbs: int | None, precision: str, attention: str,
                   tokens: float | None = None, **recipe: Any) -> Workload:
    """``recipe``: the ``RECIPE_OPTIONS`` fields (Workload defaults when absent)."""
    return Workload(seq_length=seq_len, global_batch_size=gbs if gbs is not None else default_global_batch(seq_len),
                    attention=attention, tokens=tokens, **precision_fields(precision), **recipe_fields(recipe))


def recipe_fields(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe options as Workload fields: ``--offload-modules a,b`` (or ``a+b``, as ``--fix`` writes lists)
    as a tuple, left out when not given."""
    out = dict(recipe)
    modules = out.pop("offload_modules", None)
    if isinstance(modules, str):
        modules = [m.strip() for m in modules.replace("+", ",").split(",")]
    if modules:
        out["offload_modules"] = tuple(m for m in modules if m)
    recipe = out.pop("te_precision_config", None)
    if recipe:
        from megasolve.models.precision_recipe import load_precision_recipe

        out["module_precision"] = load_precision_recipe(recipe)
    return out


def layout_options(func: F) -> F:
    return _stack(
        click.option("--tp", type=int, default=1, show_default=True, help="Tensor parallel size."),
        click.option("--pp", type=int, default=1, show_default=True, help="Pipeline parallel size."),
        click.option("--vpp", type=int, default=None,
                     help="Virtual pipeline stages per rank (interleaved 1F1B). Default: 1, or what "
                          "--pipeline-layout implies."),
        click.option("--cp", type=int, default=1, show_default=True, help="Context parallel size."),
        click.option("--ep", type=int, default=1, show_default=True, help="Expert parallel size."),
        click.option("--etp", type=int, default=None, help="Expert tensor parallel size (default: --tp)."),
        click.option("--mbs", type=int, default=1, show_default=True, help="Micro-batch size."),
        click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="none",
                     show_default=True, help="Activation recompute granularity."),
        click.option("--recompute-num-layers", type=int, default=None,
                     help="With --recompute full: recompute only this many layers per pipeline chunk "
                          "(block method); default: every layer (uniform)."),
        click.option("--recompute-modules", "recompute_modules", default=None,
                     help="With --recompute selective: Megatron's --recompute-modules, comma-separated "
                          "(core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts; default core_attn)."),
        click.option("--optimizer-offload-fraction", "optimizer_offload_fraction", type=float, default=0.0,
                     show_default=True,
                     help="Optimizer CPU offload: this fraction of the optimizer state lives and steps on the host "
                          "(--optimizer-cpu-offload --optimizer-offload-fraction F --use-precision-aware-optimizer)."),
        click.option("--sequence-parallel/--no-sequence-parallel", "sequence_parallel", default=None,
                     help="Sequence parallelism (default: on whenever --tp > 1)."),
        click.option("--distributed-optimizer/--no-distributed-optimizer", "distributed_optimizer",
                     default=True, show_default=True, help="Shard optimizer state over data parallel ranks."),
        click.option("--fsdp/--no-fsdp", "fsdp", default=False, show_default=True,
                     help="Megatron-FSDP: shard weights, grads and optimizer state over data parallel ranks "
                          "(--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params)."),
        click.option("--cpu-offload-layers", type=int, default=0, show_default=True,
                     help="Offload the activations of the first N layers to host memory "
                          "(--cpu-offloading-num-layers; needs --pp 1 and --recompute none)."),
        click.option("--account-for-embedding", "account_for_embedding", is_flag=True,
                     help="Count the embedding as a layer when splitting over pipeline stages "
                          "(--account-for-embedding-in-pipeline-split)."),
        click.option("--account-for-loss", "account_for_loss", is_flag=True,
                     help="Count the loss as a layer when splitting over pipeline stages "
                          "(--account-for-loss-in-pipeline-split)."),
        click.option("--first-stage-layers", type=int, default=None,
                     help="Decoder layers on the first pipeline stage (--decoder-first-pipeline-num-layers)."),
        click.option("--last-stage-layers", type=int, default=None,
                     help="Decoder layers on the last pipeline stage (--decoder-last-pipeline-num-layers)."),
        click.option("--pipeline-layout", "pipeline_layout", default=None, metavar="STRING",
                     help='The layers of every (virtual) pipeline stage as Megatron\'s layout string '
                          '(--pipeline-model-parallel-layout): E embedding, t decoder layer, m MTP, L loss, '
                          '"|" between stages, e.g. "Et*3|(tt|)*29,m|L" (vpp = stages / pp).'),
    )(func)


def build_layout(num_gpus: int, **axes: Any) -> Layout:
    """A ``Layout`` from the axis flags; ``dp = gpus / (tp * pp * cp)`` must be whole."""
    tp, pp, cp = axes["tp"], axes["pp"], axes["cp"]
    for name in ("tp", "pp", "cp"):
        if not isinstance(axes[name], int) or axes[name] <= 0:
            raise MegasolveError(field=f"--{name}", value=axes[name], rule="must be a positive integer",
                                 fix=f"pass --{name} >= 1")
    model_parallel = tp * pp * cp
    if num_gpus % model_parallel:
        raise MegasolveError(
            field="--gpus", value=num_gpus,
            rule=f"world size ({num_gpus}) is not divisible by tp({tp}) * pp({pp}) * cp({cp}) = {model_parallel}"
                 " (ARG L432-434)",
            fix=f"use a multiple of {model_parallel} GPUs or smaller --tp/--pp/--cp")
    sp = axes.pop("sequence_parallel")
    if sp is None:
        sp = tp > 1
    if axes.get("vpp") is None:  # what --pipeline-layout implies (stages / pp), else 1
        axes["vpp"] = 1
        if axes.get("pipeline_layout"):
            from megasolve.models.pipeline_layout import expand

            axes["vpp"] = max(1, len(expand(axes["pipeline_layout"])) // pp)
    modules = axes.pop("recompute_modules", None)
    if isinstance(modules, str):
        axes["recompute_modules"] = tuple(m.strip() for m in modules.split(",") if m.strip())
    elif modules is not None:
        axes["recompute_modules"] = tuple(modules)
    return Layout(dp=num_gpus // model_parallel, sequence_parallel=sp, **axes)


def format_option(*extra: str) -> F:
    choices = ["table", "json", "yaml", *extra]
    return click.option("--format", "-o", "fmt", type=click.Choice(choices), default="table", show_default=True,
                        help="Output format." + (" Launch formats print copy-pasteable flags." if extra else ""))


def load_inputs(*, model_ref: str, gpus: int | None, gpu: str | None, gpus_per_node: int | None,
                nvlink_domain: int | None, nic_gbps: float | None, cluster_file: str | None,
                **workload: Any) -> tuple[ResolvedModel, Cluster, Workload]:
    """The model (printing its alias note), cluster and workload (``WORKLOAD_OPTIONS``) of ``estimate``
    and ``solve``."""
    from megasolve.cli import render

    resolved = load_model(model_ref)
    if resolved.note:
        render.note(resolved.note)
    seq, note = default_seq_length(resolved.spec, workload["seq_len"], given=set_on_command_line("seq_len"))
    if note:
        workload["seq_len"] = seq
        render.deferred_note(note)
    cluster = build_cluster(gpus=gpus, gpu=gpu, gpus_per_node=gpus_per_node, nvlink_domain=nvlink_domain,
                            nic_gbps=nic_gbps, cluster_file=cluster_file)
    built = build_workload(**workload)
    reject_moe_knobs(resolved.spec, {f: getattr(built, f) for f in MOE_KNOBS})
    for note in (cuda_graph_note(built.cuda_graph_impl), fsdp_grad_comm_note(built)):
        if note:
            render.note(note)
    return resolved, cluster, built


# Workload fields that only an MoE model uses -> the value that means "not asked for" (_CHOSEN: a choice
# with a default, asked for when the command line set it)
_CHOSEN = object()
MOE_KNOBS = {"moe_expert_capacity_factor": None, "moe_pad_expert_input_to_capacity": False,
             "moe_router_padding_for_fp8": False, "moe_ep_overlap": False, "moe_shared_expert_overlap": False,
             "moe_dispatcher": _CHOSEN, "moe_token_drop_policy": _CHOSEN}


def reject_moe_knobs(spec: Any, values: dict[str, Any]) -> None:
    """An MoE knob asked for on a model without experts is an error, not silently ignored."""
    if spec.is_moe:
        return
    for field, unset in MOE_KNOBS.items():
        if field not in values:
            continue
        if set_on_command_line(field) if unset is _CHOSEN else values[field] != unset:
            flag = "--" + field.replace("_", "-")
            raise MegasolveError(field=flag, value=values[field], rule=f"{spec.name} has no MoE layers",
                                 fix=f"drop {flag} or pick an MoE model")


def default_seq_length(spec: Any, seq_len: int, *, given: bool) -> tuple[int, str | None]:
    """The sequence length to plan when ``--seq-len`` was not given: the default (4096), or the longest a model
    with learned absolute position embeddings can take (``max_position_embeddings``: GPT-2, GPT-3), with a note
    saying so. A length the user gave is kept (the rule ``position_embeddings_cover_seq`` then says why it
    cannot run).

    >>> from megasolve.models.presets import load_preset
    >>> default_seq_length(load_preset("gpt3-175b"), 4096, given=False)[0]
    2048
    >>> default_seq_length(load_preset("gpt3-175b"), 4096, given=True)
    (4096, None)
    >>> default_seq_length(load_preset("llama-3.1-8b"), 4096, given=False)
    (4096, None)
    """
    limit = spec.max_position_embeddings
    if given or spec.position_embedding_type != "learned_absolute" or seq_len <= limit:
        return seq_len, None
    return limit, (f"sequence length {limit}: {spec.name}'s learned position embeddings cover {limit} tokens, "
                   f"the default {seq_len} does not fit them (--seq-len N up to {limit} to choose)")


def set_on_command_line(param: str) -> bool:
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(param) not in (None, ParameterSource.DEFAULT)


def load_model(ref: str) -> ResolvedModel:
    """``--model``, with ``--mtp-layers`` applied: each MTP layer is the last decoder layer's kind, as Megatron-LM
    builds it (``gpt_builders.py``: the block's ``layer_specs[-1]``)."""
    resolved = resolve_model(ref)
    ctx = click.get_current_context(silent=True)
    layers = ctx.meta.get("mtp_layers") if ctx is not None else None
    if layers is None or layers == resolved.spec.mtp_num_layers:
        return resolved
    spec = resolved.spec.with_mtp_layers(layers)
    said = f"--mtp-layers {layers}: {resolved.spec.mtp_num_layers} MTP layer(s) of {spec.name} replaced"
    return ResolvedModel(spec, note=f"{resolved.note}; {said}" if resolved.note else said)
