"""The parallel layout and the workload of one training job.

``Layout`` sits at the bottom of the package (beside ``ModelSpec``) because the exact parameter
count of a rank already depends on it (vocab padding per TP, layers per pipeline stage, experts per
EP rank). Rules that need the model or the cluster live in ``solver/rules.py``; here only the
shape of each field is checked.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace

from megasolve.models import ranks
from megasolve.models.errors import MegasolveError

RECOMPUTE_KINDS = ("none", "selective", "full")
# Megatron's --recompute-modules choices, in the order of TC's allowed set (Megatron-Core 0.16.1
# ``transformer_config.py`` selective block, L1944-1962); a Layout keeps its modules in this order so
# that one set has one spelling (``cost/memory.py`` RECOMPUTE_MODULES says what each one drops)
RECOMPUTE_MODULE_NAMES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
# Megatron's --offload-modules choices megasolve models (TC L2132-2142; fused_group_mlp and gdp_qkv are not)
OFFLOAD_MODULE_NAMES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act")
# "fp4" is NVFP4, Megatron-LM's only FP4 recipe (``--fp4-format e2m1``, ``--fp4-recipe nvfp4``: TC L671-692,
# Transformer Engine's NVFP4BlockScaling: E2M1 values with an E4M3 scale per 16 elements, Blackwell)
PRECISIONS = ("bf16", "fp8", "fp4")
# Megatron ``--optimizer`` (ARG L2914): Adam, or Muon (``megatron/core/optimizer/emerging_optimizers.py`` @d98e8a6:
# the 2-D weights but the word embedding and output layer orthogonalised by 5 Newton-Schulz steps, the rest Adam)
OPTIMIZERS = ("adam", "muon")
# --exp-avg-dtype / --exp-avg-sq-dtype and --main-params-dtype choices (ARG L3671-3685 @d98e8a6) -> bytes per element
ADAM_STATE_DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
MAIN_PARAMS_DTYPES = ("fp32", "fp16")
# Megatron-LM --megatron-fsdp-main-grads-dtype / --megatron-fsdp-grad-comm-dtype choices (fp16 is costed as bf16: 2 B)
FSDP_GRAD_DTYPES = ("auto", "fp32", "bf16", "fp16")
# --precision choices of the CLI: "fp8-params" is FP8 with FP8 primary weights (--fp8-param-gather);
# "nvfp4" spells "fp4" as Megatron-Bridge does (``--compute_dtype nvfp4``); "fp4-params" is NVFP4 with NVFP4
# primary weights (--fp4-param-gather, which Bridge's bf16_with_nvfp4_mixed sets: mixed_precision.py L405-417)
PRECISION_CHOICES = ("bf16", "fp8", "fp8-params", "fp4", "nvfp4", "fp4-params")
# bytes per element of an NVFP4 tensor: a 4-bit E2M1 value plus one 1-byte E4M3 scale per 16 elements
# (TE ``NVFP4BlockScaling``, ``tensor/nvfp4_tensor.py``; the per-tensor fp32 scale is negligible)
NVFP4_BYTES = 0.5 + 1 / 16
# bytes per element of a GEMM operand in each precision (one layout, scales included): the one table of them
ELEMENT_BYTES = {"bf16": 2, "fp8": 1, "fp4": NVFP4_BYTES}


def precision_fields(choice: str) -> dict[str, object]:
    """Workload fields for a ``--precision`` choice.

    >>> precision_fields("fp8-params"), precision_fields("nvfp4")
    ({'precision': 'fp8', 'fp8_param_gather': True}, {'precision': 'fp4', 'fp8_param_gather': False})
    """
    if choice in ("fp8-params", "fp4-params"):
        return {"precision": choice[:3], "fp8_param_gather": True}
    return {"precision": "fp4" if choice == "nvfp4" else choice, "fp8_param_gather": False}
ATTENTION_KINDS = ("flash", "unfused")
# Megatron's loss: unfused ``vocab_parallel_cross_entropy`` (default), ``--cross-entropy-loss-fusion``
# with ``--cross-entropy-fusion-impl native`` or ``te`` (language_module.py L173-199). Transformer Engine's
# kernel changed in TE 2.18 (TE#3193, the NeMo 26.08 container's): ``te`` keeps the logits' gradient in fp32,
# ``te-bf16grad`` is the kernel before it, which wrote the gradient over the bf16 logits
CROSS_ENTROPY_KINDS = ("unfused", "native", "te", "te-bf16grad")
# Megatron ``--fp8-recipe`` (ARG; TE recipes): per-tensor scaling (delayed: amax history, tensorwise:
# current scaling) or block scaling (mxfp8: E8M0 scale per 32 elements, Blackwell; blockwise: 1x128 / 128x128)
FP8_RECIPES = ("delayed", "tensorwise", "mxfp8", "blockwise")
# the formats a precision recipe (``Workload.module_precision``) can give a GEMM module
MODULE_FORMATS = ("bf16",) + FP8_RECIPES + ("nvfp4",)
# Megatron ``--moe-token-dispatcher-type``: all-to-all (one copy of a token per chosen expert), the
# flex dispatcher (DeepEP / HybridEP: one copy per remote NVLink domain, TC L891-898) or allgather
# (every rank gathers all tokens of the EP group, ``token_dispatcher.py::MoEAllGatherTokenDispatcher``)
MOE_DISPATCHERS = ("alltoall", "flex", "allgather")
# Megatron's ``--cp-comm-type`` (ARG L3221-3226; TC ``cp_comm_type`` L1030-1047; the spelling Transformer
# Engine's ``attn_forward_func_with_cp`` dispatches on: ``all_gather``, not the help text's "allgather")
CP_COMM_TYPES = ("p2p", "a2a", "all_gather", "a2a+p2p")
# the time terms' marker for "the fastest type Megatron allows for this layout" (solve's search,
# ``cost/step.py`` ``resolve_cp_comm_type``); never in a workload a user sees
CP_COMM_FASTEST = "fastest"
MOE_TOKEN_DROP_POLICIES = ("probs", "position")  # TC L699-704
CUDA_GRAPH_IMPLS = ("none", "local", "transformer_engine", "full_iteration")  # TC L1075-1088


def cuda_graph_note(impl: str) -> str | None:
    """What megasolve does not model of ``--cuda-graph-impl impl`` (None for ``none``): said wherever the
    setting comes in, a flag or a log."""
    if impl == "full_iteration":
        return ("full-iteration CUDA graph: its time effect is costed (no launches or host syncs), its memory "
                "(static buffers, graph pools) is not counted")
    if impl != "none":
        return (f"per-layer CUDA graphs (--cuda-graph-impl {impl}) are not modelled (their static input / output "
                "buffers and graph pools are not counted; time as eager)")
    return None


def fsdp_grad_comm_note(workload: Workload) -> str | None:
    """What megasolve does not model of a Megatron-FSDP gradient-communication dtype other than the main grads'
    (None otherwise): its own communication buffers (``distributed_data_parallel_config.py``: "allocating
    dtype-custom gradient communication buffers (per FSDP group) adds memory overhead")."""
    if workload.fsdp_grad_comm_dtype == "auto" or workload.fsdp_grad_comm_bytes == workload.fsdp_grad_bytes:
        return None
    return (f"--megatron-fsdp-grad-comm-dtype {workload.fsdp_grad_comm_dtype} (Megatron-FSDP layouts only): its "
            "reduce-scatter traffic is costed, its separate communication buffers are not counted in memory")


def _check_choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise MegasolveError(field=field, value=value, rule=f"must be one of {', '.join(choices)}", fix="pick one")


def _check_positive(field: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise MegasolveError(field=field, value=value, rule="must be a positive integer",
                             fix=f"pass {field} >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One Megatron parallel layout. ``world_size = tp * cp * dp * pp``.

    ``etp`` defaults to ``tp`` as in Megatron-LM (ARG L587-588). ``first_stage_layers`` /
    ``last_stage_layers`` are ``--decoder-first/last-pipeline-num-layers`` (None: even split).

    >>> Layout(tp=4, pp=4, cp=2, dp=2).world_size, Layout(tp=4, pp=4, cp=2, dp=2).etp
    (64, 4)
    """

    tp: int = 1
    pp: int = 1
    vpp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    etp: int | None = None
    mbs: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    recompute_num_layers: int | None = None  # full recompute: layers per stage (block) recomputed
    # selective recompute: Megatron's --recompute-modules (None with --recompute selective = ("core_attn",),
    # Megatron's default, TC L1940-1943); only with selective recompute
    recompute_modules: tuple[str, ...] | None = None
    distributed_optimizer: bool = True
    # Megatron-FSDP (``--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params``):
    # weights, grads and optimizer state sharded over the data-parallel ranks (ZeRO-3)
    fsdp: bool = False
    # activation offloading to host memory (``--cpu-offloading --cpu-offloading-num-layers N``, activations
    # only): the first N transformer layers' saved activations leave the GPU (MPC L458-475)
    cpu_offload_layers: int = 0
    # count the embedding / the loss as one layer each when splitting layers over pipeline (and virtual)
    # stages (``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split``,
    # ``transformer_block.py::get_num_layers_to_build`` L146-203): 126 layers + 2 split over pp 16 x vpp 8
    account_for_embedding: bool = False
    account_for_loss: bool = False
    # optimizer CPU offload (``--optimizer-cpu-offload --optimizer-offload-fraction F
    # --use-precision-aware-optimizer``, HybridDeviceOptimizer): the fraction of the optimizer shard held
    # and stepped on the host (0: off)
    optimizer_offload_fraction: float = 0.0
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    # ``--pipeline-model-parallel-layout``: the layers of every (virtual) stage as Megatron's layout string
    # (``models/pipeline_layout.py``); validated against the model in ``params.stage_layer_ids``
    pipeline_layout: str | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "vpp", "cp", "dp", "ep", "mbs"):
            _check_positive(f"--{name}", getattr(self, name))
        if self.etp is None:
            object.__setattr__(self, "etp", self.tp)
        _check_positive("--etp", self.etp)
        _check_choice("--recompute", self.recompute, RECOMPUTE_KINDS)
        if self.recompute_num_layers is not None:
            _check_positive("--recompute-num-layers", self.recompute_num_layers)
            if self.recompute != "full":
                raise MegasolveError(
                    field="--recompute-num-layers", value=self.recompute_num_layers,
                    rule="only valid with --recompute full (TC L1926-1932)",
                    fix="drop it or use --recompute full")
        self._check_recompute_modules()
        fraction = self.optimizer_offload_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
            raise MegasolveError(field="--optimizer-offload-fraction", value=fraction,
                                 rule="must be a number in [0, 1] (arguments.py --optimizer-offload-fraction)",
                                 fix="pass e.g. --optimizer-offload-fraction 0.5")
        object.__setattr__(self, "optimizer_offload_fraction", float(fraction))
        if fraction > 0 and not self.distributed_optimizer:
            raise MegasolveError(field="--optimizer-offload-fraction", value=fraction,
                                 rule="megasolve models optimizer CPU offload on the distributed optimizer only",
                                 fix="drop --no-distributed-optimizer or the optimizer offload")
        if not isinstance(self.cpu_offload_layers, int) or isinstance(self.cpu_offload_layers, bool) \
                or self.cpu_offload_layers < 0:
            raise MegasolveError(field="--cpu-offload-layers", value=self.cpu_offload_layers,
                                 rule="must be a non-negative integer", fix="pass --cpu-offload-layers >= 0")
        if self.fsdp and not self.distributed_optimizer:
            # Megatron-FSDP v1 runs on the DistributedOptimizer: Megatron-LM ``training/arguments.py``
            # (@d98e8a6 L1118-1130) switches it on
            raise MegasolveError(field="--no-distributed-optimizer", value=False,
                                 rule="Megatron-FSDP requires the distributed optimizer (arguments.py L1118-1130)",
                                 fix="drop --no-distributed-optimizer or --fsdp")
        for name in ("first_stage_layers", "last_stage_layers"):
            value = getattr(self, name)
            if value is not None:
                _check_positive("--" + name.replace("_", "-"), value)
        if (self.account_for_embedding or self.account_for_loss) and (
                self.first_stage_layers is not None or self.last_stage_layers is not None):
            raise MegasolveError(
                field="--account-for-embedding/--account-for-loss", value=True,
                rule="a standalone embedding / loss stage does not combine with an uneven first/last stage "
                     "(transformer_block.py L104-112)",
                fix="drop --first-stage-layers/--last-stage-layers or the accounting flags")

        if self.pipeline_layout is not None and (
                self.first_stage_layers is not None or self.last_stage_layers is not None
                or self.account_for_embedding or self.account_for_loss):
            raise MegasolveError(
                field="--pipeline-layout", value=self.pipeline_layout,
                rule="cannot be set with other pipeline layout arguments (transformer_config.py L1307-1324)",
                fix="drop --first-stage-layers/--last-stage-layers/--account-for-embedding/--account-for-loss")

    def _check_recompute_modules(self) -> None:
        modules = self.recompute_modules
        if modules is None:
            if self.recompute == "selective":
                object.__setattr__(self, "recompute_modules", ("core_attn",))
            return
        if isinstance(modules, str) or not isinstance(modules, (tuple, list)) \
                or not all(isinstance(m, str) for m in modules):
            raise MegasolveError(field="--recompute-modules", value=modules, rule="must be a list of module names",
                                 fix=f"e.g. --recompute-modules {','.join(RECOMPUTE_MODULE_NAMES[:2])}")
        unknown = [m for m in modules if m not in RECOMPUTE_MODULE_NAMES]
        if unknown or not modules or len(set(modules)) != len(modules):
            raise MegasolveError(field="--recompute-modules", value=",".join(modules) or "(empty)",
                                 rule=f"each of {', '.join(RECOMPUTE_MODULE_NAMES)}, once (TC L1944-1962)",
                                 fix="e.g. --recompute-modules moe_act,layernorm")
        if self.recompute != "selective":
            raise MegasolveError(field="--recompute-modules", value=",".join(modules),
                                 rule="Megatron reads recompute_modules only with --recompute selective (TC L1940-1962)",
                                 fix="add --recompute selective or drop --recompute-modules")
        object.__setattr__(self, "recompute_modules",
                           tuple(m for m in RECOMPUTE_MODULE_NAMES if m in modules))

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_dp(self) -> int:
        """Expert data-parallel size ``EDP = world / (etp * ep * pp)`` (reference section 1.9)."""
        return ranks.expert_dp_group(self.world_size, self.etp, self.ep, self.pp).size

    @property
    def full_recompute_layers(self) -> int | None:
        return self.recompute_num_layers if self.recompute == "full" else None


def default_global_batch(seq_length: int) -> int:
    """The default global batch: about 4M tokens per step, 16 to 1024 sequences (a common
    pretraining choice); ``--gbs`` overrides it.

    >>> default_global_batch(4096), default_global_batch(32768), default_global_batch(1 << 20)
    (1024, 128, 16)
    """
    return max(16, min(1024, (4 * 1024 * 1024) // max(seq_length, 1)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What is trained: sequence length, global batch, precision; tokens for time-to-train."""

    seq_length: int = 4096
    global_batch_size: int = 256
    precision: str = "bf16"
    # quantized primary weights: FP8 (Megatron --fp8-param-gather) or, with fp4, NVFP4 (--fp4-param-gather)
    fp8_param_gather: bool = False
    # bf16 main grads and gradient reduction (Megatron --grad-reduce-in-bf16; ARG L1205-1217 otherwise
    # keeps fp32 main grads with --bf16)
    grad_reduce_in_bf16: bool = False
    # Megatron-FSDP's main-grad and gradient-communication dtypes (``--megatron-fsdp-main-grads-dtype`` /
    # ``--megatron-fsdp-grad-comm-dtype``, FSDP_GRAD_DTYPES; ARG L3691-3699 @d98e8a6). ``auto``, Megatron-LM's
    # default: main grads take the compute weights' dtype, bf16 (``param_and_grad_buffer.py``
    # ``_resolve_group_grad_dtype`` L2313-2322, bf16 for FP8 weights too), and the reduction the main grads' dtype.
    # ``--grad-reduce-in-bf16`` no longer applies to Megatron-FSDP: Megatron-LM adfe9e11d9 (2026-07-02) dropped the
    # ``grad_reduce_in_fp32`` override (fp32 before it unless --grad-reduce-in-bf16) and pinned fp32 in the
    # functional tests that needed it
    fsdp_main_grads_dtype: str = "auto"
    fsdp_grad_comm_dtype: str = "auto"
    cross_entropy: str = "unfused"
    moe_dispatcher: str = "flex"  # MoE models only
    # ``--cp-comm-type`` (CP_COMM_TYPES); None: the type the model needs (``cost/step.py``
    # ``default_cp_comm_type``: p2p, all_gather with sliding windows, a2a with attention sinks)
    cp_comm_type: str | None = None
    fp8_recipe: str = "delayed"  # with precision "fp8"
    # ``--optimizer`` (OPTIMIZERS); ``muon`` with Megatron-LM's defaults (--muon-num-ns-steps 5, --muon-tp-mode
    # duplicated, --muon-scalar-optimizer adam); with the distributed optimizer, Megatron's layer-wise one (each DP
    # rank steps whole tensors; ``--optimizer dist_muon`` is its deprecated spelling, ARG L1727-1732)
    optimizer: str = "adam"
    # ``--use-precision-aware-optimizer`` with ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` / ``--main-params-dtype``
    # (ARG L3667-3685; OptimizerConfig L187-206 @d98e8a6): Transformer Engine's FusedAdam holds Adam's moments in those
    # dtypes and, without FP8 or with delayed scaling, the master weights too (``memory.adam_state_bytes_per_param``).
    # Adam only, with the distributed optimizer (``core/optimizer/__init__.py`` L1057-1060, OptimizerConfig L433-435)
    precision_aware_optimizer: bool = False
    exp_avg_dtype: str = "fp32"
    exp_avg_sq_dtype: str = "fp32"
    main_params_dtype: str = "fp32"
    # decoder layers kept in bf16 in an FP8 / FP4 run: Megatron's ``--first-last-layers-bf16`` with
    # ``--num-layers-at-start-in-bf16`` / ``--num-layers-at-end-in-bf16`` (TC L649-658; global layer numbers,
    # ``fp8_utils.py::is_first_last_bf16_layer`` L711-727, ``fp4_utils.py::get_fp4_context`` L247-263 @d98e8a6);
    # 0 and 0: every layer quantized (the flag off)
    num_layers_at_start_in_bf16: int = 0
    num_layers_at_end_in_bf16: int = 0
    # the LM-head output projection in MXFP8 too (TC ``fp8_output_proj``; only with the mxfp8 recipe,
    # ``fp8_utils.py::is_mxfp8_output_proj_active`` L730-745); otherwise it stays bf16
    fp8_output_proj: bool = False
    # Communication overlap knobs, defaults = Megatron-LM's (Megatron-LM @d98e8a6):
    # ``--tp-comm-overlap`` (MPC L265, default off; needs sequence parallelism, ARG L1441-1442): TE
    # userbuffers pipeline TP all-gather / reduce-scatter with the GEMMs
    tp_comm_overlap: bool = False
    # ``--no-overlap-p2p-communication`` turns it off (ARG L3118-3120, default on); only the interleaved
    # schedule overlaps p2p, 1F1B forces it off (ARG L1010-1013)
    overlap_p2p_comm: bool = True
    # ``--overlap-moe-expert-parallel-comm`` (MPC L343, default off): EP all-to-all of one micro-batch
    # hidden behind another micro-batch's compute (1F1B A2A overlap; conditions TC L3002-3046)
    moe_ep_overlap: bool = False
    # ``--moe-shared-expert-overlap`` (TC L717, default off): shared experts run during the dispatch
    moe_shared_expert_overlap: bool = False
    # ``--cuda-graph-impl`` (TC L1075-1088, default none): ``full_iteration`` captures the whole forward-
    # backward path in one CUDA graph (no kernel launches or host syncs left; ARG L1235-1237 wants
    # --no-check-for-nan-in-loss-and-grad with it); ``local`` / ``transformer_engine`` graph the layer
    # modules of --cuda-graph-modules, whose effect is not modelled (the estimate says so)
    cuda_graph_impl: str = "none"
    # ``--overlap-grad-reduce`` + ``--overlap-param-gather`` (ARG L3121, L3148; Megatron's default is off):
    # megasolve's exports set both with the distributed optimizer (every NVIDIA recipe does), so the
    # estimate assumes them unless this is False (then the DP reduce-scatter / all-gather are exposed)
    dp_comm_overlap: bool = True
    # ``--overlap-param-gather`` alone off (``--overlap-grad-reduce`` on): the distributed optimizer's parameter
    # all-gather runs after the optimizer step, before the next forward (``distrib_optimizer.py`` L3175-3195 @d98e8a6:
    # ``should_sync_params = not overlap_param_gather``), exposed; the gradient reduce-scatter stays overlapped
    param_gather_overlap: bool = True
    # ``--defer-embedding-wgrad-compute`` / ``--wgrad-deferral-limit`` (MPC L410-418; default off, limit 0 =
    # every micro-batch): the output layer's weight-gradient GEMMs of the first ``limit`` calls wait for the
    # pipeline flush, so the last stage keeps their inputs and logits gradients until then
    # (``memory.deferred_wgrad_bytes``); needs PP > 1 (MPC L545-548)
    defer_embedding_wgrad: bool = False
    wgrad_deferral_limit: int = 0
    # ``--deterministic-mode`` (validate_args, ARG L1709-1711 @d98e8a6, applies ``training/determinism.py``): NCCL ring
    # collectives, TE's deterministic kernels (not costed: slower than planned), and ``CUBLAS_WORKSPACE_CONFIG=:4096:8``
    # set before the first GEMM: PyTorch's cuBLAS workspaces are 32 MiB on every GPU (``memory.torch_workspace_bytes``)
    deterministic_mode: bool = False
    # ``--num-distributed-optimizer-instances N`` (DDP config, default 1): the DP x CP group (and the expert
    # DP group) splits into N consecutive parts; each part shards the optimizer state (and reduce-scatters
    # the gradients) over DP*CP/N ranks, then the shards are all-reduced across the N parts (PS L922-1000,
    # L1447-1490; param_and_grad_buffer.py L675-760)
    dist_optimizer_instances: int = 1
    # ``--microbatch-group-size-per-virtual-pipeline-stage G`` (MPC L431-445; None = Megatron's default, the
    # pipeline size, MPC L567-568): the interleaved schedule runs G consecutive micro-batches per model chunk,
    # so stage r warms up ``2(p - r - 1) + (v - 1)G`` chunks (SCH L960-965) -- more activations in flight for
    # G > p -- and the micro-batch count need only satisfy ``p <= G <= m`` and ``m % G in {0} | [p, G)``
    # (SCH L1160-1180; rule ``vpp_microbatches``); the fill and drain are the same (no time term)
    microbatch_group_size: int | None = None
    attention: str = "flash"
    hidden_dropout: float = 0.0
    tokens: float | None = None
    # MoE token dropping and padding (TC L686-705, L589-596; memory and FLOPs: cost/moe_routing.py):
    # ``--moe-expert-capacity-factor`` (None: dropless), ``--moe-pad-expert-input-to-capacity``,
    # ``--moe-token-drop-policy`` and ``--moe-router-padding-for-fp8`` (alias of -for-quantization)
    moe_expert_capacity_factor: float | None = None
    moe_pad_expert_input_to_capacity: bool = False
    moe_token_drop_policy: str = "probs"
    moe_router_padding_for_fp8: bool = False
    # The MLP activation's fused kernel (Megatron-LM ``--bias-swiglu-fusion`` / ``--bias-gelu-fusion``, on by
    # default -> TransformerConfig ``bias_activation_fusion``, argument_utils.py L314-319). Routed experts
    # have a fused probability-weighted kernel for SwiGLU / quick-GeGLU only, and for squared ReLU with
    # ``--use-fused-weighted-squared-relu`` (``moe/experts.py`` L961-993); every other expert activation
    # (GeLU) runs the unfused path, which keeps the activation output for the probability multiply and its
    # bf16 cast for FC2 (L995-1013; dense SwiGLU: the SiLU output and the linear half's copy, ``mlp.py``
    # L319-333). False: that unfused path (``memory.mlp_activation_terms``, ``compute.layer_work``).
    activation_fusion: bool = True
    # ``--activation-func-fp8-input-store`` (TransformerConfig ``activation_func_fp8_input_store``, off by default):
    # the fused SwiGLU kernels keep their input, the fc1 output, in FP8 (``float8_e4m3fn``, 1 B) for backward instead
    # of bf16 and cast it back there (``fusions/fused_bias_swiglu.py`` L168-208 @d98e8a6) -- dense MLP, routed experts
    # (the weighted kernel, ``moe/experts.py`` L961-972) and shared experts, in bf16 training as in FP8. Megatron
    # refuses it for any activation but SwiGLU (TC L2467-2469); without the fused kernel (``activation_fusion``
    # False) nothing reads it. Memory only (``memory.fc1_output_bytes``): the kernel writes one FP8 copy and the
    # backward reads it instead of the bf16 input, about the same HBM traffic, so no time term.
    activation_func_fp8_input_store: bool = False
    # ``--fine-grained-activation-offloading --offload-modules ...`` (TC L1320-1345, L2127-2175; () = off): the
    # tensors each listed module saves for backward (>= 1M elements, ``--min-offloaded-tensor-size``) go to host
    # memory after its forward and come back before its backward
    # (``pipeline_parallel/fine_grained_activation_offload.py``; ``memory.offloaded_terms``)
    offload_modules: tuple[str, ...] = ()
    # ``--te-precision-config-file`` (Megatron-LM; Megatron-Bridge ``model.quant_recipe``): the recipe's enabled
    # glob matchers in order, ``(pattern, format)``; a GEMM module whose path (``decoder.layers.3.mlp.linear_fc1``)
    # a pattern matches first runs in that format -- ``bf16`` (a config with an empty training recipe), an FP8
    # recipe (``fp8_quantization_recipe``: delayed, tensorwise, mxfp8, blockwise) or ``nvfp4``
    # (``fp4_quantization_recipe``) -- instead of the run's (``quantization/quant_config.py`` ``RecipeConfig``,
    # ``GlobMatcher``: "the first matcher in the collection that successfully matches ... determines the key");
    # modules that run unquantized anyway (bf16 layers, the router) are not overridden
    # (``extensions/TransformerEngineMixedPrecision.md``). () = no recipe file. ``cost/layers.py`` resolves it per
    # layer into ``gemm_overrides``.
    module_precision: tuple[tuple[str, str], ...] = ()
    # resolved per layer kind (``LayerKind.overrides``, set by ``for_kind``; not an input): ``(module, format)``
    # for each GEMM module of the layer whose format differs from the run's
    gemm_overrides: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _check_positive("--seq-len", self.seq_length)
        _check_positive("--gbs", self.global_batch_size)
        _check_choice("--precision", self.precision, PRECISIONS)
        if self.fp8_param_gather and not self.quantized:
            raise MegasolveError(field="--precision", value=self.precision,
                                 rule="quantized primary weights (--fp8-param-gather / --fp4-param-gather) need FP8 "
                                      "or FP4 training",
                                 fix="use --precision fp8-params or fp4-params, or drop the quantized parameters")
        _check_choice("--attention", self.attention, ATTENTION_KINDS)
        _check_choice("--optimizer", self.optimizer, OPTIMIZERS)
        self._check_precision_aware_optimizer()
        _check_choice("--megatron-fsdp-main-grads-dtype", self.fsdp_main_grads_dtype, FSDP_GRAD_DTYPES)
        _check_choice("--megatron-fsdp-grad-comm-dtype", self.fsdp_grad_comm_dtype, FSDP_GRAD_DTYPES)
        for flag, count in (("--num-layers-at-start-in-bf16", self.num_layers_at_start_in_bf16),
                            ("--num-layers-at-end-in-bf16", self.num_layers_at_end_in_bf16)):
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise MegasolveError(field=flag, value=count, rule="must be a whole number >= 0", fix="e.g. 1")
            if count and not self.quantized:
                raise MegasolveError(field=flag, value=count, rule="layers are kept in bf16 only in an FP8 or FP4 run "
                                     "(--first-last-layers-bf16)", fix="add --precision fp8 or fp4, or drop it")
        if any(self.bf16_layers) and self.precision == "fp8" and self.fp8_recipe == "delayed":
            raise MegasolveError(field="--num-layers-at-start-in-bf16", value=self.bf16_layers,
                                 rule="Delayed scaling does not support first / last layer in BF16 "
                                      "(transformer_config.py L1527-1530 @d98e8a6)",
                                 fix="use --fp8-recipe tensorwise (or another recipe), or drop the bf16 layers")
        _check_choice("--fp8-recipe", self.fp8_recipe, FP8_RECIPES)
        if self.fp8_output_proj and not (self.precision == "fp8" and self.fp8_recipe == "mxfp8"):
            raise MegasolveError(field="--fp8-output-proj", value=True,
                                 rule="the output projection runs in FP8 only with the mxfp8 recipe "
                                      "(fp8_utils.py L730-745)",
                                 fix="add --precision fp8 --fp8-recipe mxfp8, or drop --fp8-output-proj")
        if self.deterministic_mode and (self.tp_comm_overlap or self.cross_entropy != "unfused"):
            raise MegasolveError(field="--deterministic-mode", value=True,
                                 rule="Megatron-LM requires cross_entropy_loss_fusion=False and tp_comm_overlap=False "
                                      f"with it (got --cross-entropy {self.cross_entropy}, TP overlap "
                                      f"{self.tp_comm_overlap}; training/determinism.py L24 @d98e8a6)",
                                 fix="drop --tp-comm-overlap and use --cross-entropy unfused, or drop "
                                     "--deterministic-mode")
        if self.tp_comm_overlap and not self.tp_overlap_supported:
            raise MegasolveError(field="--tp-comm-overlap", value=True,
                                 rule=f"Transformer Engine's userbuffers gather only bf16, per-tensor FP8 and MXFP8 "
                                      f"tensors, not {'NVFP4' if self.precision == 'fp4' else 'blockwise FP8'} "
                                      "(module/base.py fill_userbuffers_buffer_for_all_gather L607-755 @d0067d0d: "
                                      "'Unsupported quantizer for Userbuffers'; Megatron-Bridge turns it off in every "
                                      "NVFP4 recipe)",
                                 fix="drop --tp-comm-overlap" + (", or use --fp8-recipe tensorwise or mxfp8"
                                                                 if self.precision == "fp8" else ""))
        _check_choice("--moe-dispatcher", self.moe_dispatcher, MOE_DISPATCHERS)
        _check_choice("--cuda-graph-impl", self.cuda_graph_impl, CUDA_GRAPH_IMPLS)
        if self.cp_comm_type not in (None, CP_COMM_FASTEST):
            _check_choice("--cp-comm-type", self.cp_comm_type, CP_COMM_TYPES)
        if self.moe_shared_expert_overlap and self.moe_dispatcher not in ("alltoall", "flex"):
            raise MegasolveError(field="--moe-shared-expert-overlap", value=True,
                                 rule="only works with the alltoall or flex dispatcher (TC L1820-1826)",
                                 fix="use --moe-dispatcher alltoall/flex or drop --moe-shared-expert-overlap")
        if self.moe_ep_overlap and self.moe_dispatcher not in ("alltoall", "flex"):
            raise MegasolveError(field="--moe-ep-overlap", value=True,
                                 rule="EP A2A overlap is supported with the alltoall/flex dispatcher (TC L3016-3019)",
                                 fix="use --moe-dispatcher alltoall/flex or drop --moe-ep-overlap")
        if self.moe_ep_overlap and self.moe_shared_expert_overlap:
            raise MegasolveError(field="--moe-shared-expert-overlap", value=True,
                                 rule="disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm"
                                      " (TC L3039-3041)",
                                 fix="drop one of --moe-ep-overlap / --moe-shared-expert-overlap")
        _check_choice("--cross-entropy", self.cross_entropy, CROSS_ENTROPY_KINDS)
        _check_positive("--num-distributed-optimizer-instances", self.dist_optimizer_instances)
        if self.microbatch_group_size is not None:
            _check_positive("--microbatch-group-size-per-virtual-pipeline-stage", self.microbatch_group_size)
        if self.wgrad_deferral_limit < 0:
            raise MegasolveError(field="--wgrad-deferral-limit", value=self.wgrad_deferral_limit,
                                 rule="Wgrad deferral limit should be greater than or equal to 0 (MPC L555-558)",
                                 fix="use 0 (defer every micro-batch) or a positive count")
        if self.defer_embedding_wgrad and self.fp8_output_proj:
            raise MegasolveError(field="--defer-embedding-wgrad-compute", value=True,
                                 rule="TE MXFP8 output projection does not support defer_embedding_wgrad_compute "
                                      "(extensions/transformer_engine.py L1827-1829)",
                                 fix="drop --fp8-output-proj or --defer-embedding-wgrad-compute")
        self._check_moe_capacity()
        self._check_offload_modules()
        self._check_module_precision()
        if not 0.0 <= self.hidden_dropout < 1.0:
            raise MegasolveError(field="hidden_dropout", value=self.hidden_dropout,
                                 rule="must be in [0, 1)", fix="use 0 (LLM recipes) or 0.1")
        if self.tokens is not None and not self.tokens > 0:
            raise MegasolveError(field="--tokens", value=self.tokens, rule="must be > 0",
                                 fix="e.g. --tokens 1e12")

    def _check_precision_aware_optimizer(self) -> None:
        """The precision-aware optimizer's dtypes (ARG L3671-3685) and its rules: Adam only (OptimizerConfig L433-435);
        a dtype other than fp32 means nothing without the optimizer (Megatron ignores it), so it is refused here."""
        _check_choice("--exp-avg-dtype", self.exp_avg_dtype, tuple(ADAM_STATE_DTYPES))
        _check_choice("--exp-avg-sq-dtype", self.exp_avg_sq_dtype, tuple(ADAM_STATE_DTYPES))
        _check_choice("--main-params-dtype", self.main_params_dtype, MAIN_PARAMS_DTYPES)
        if not self.precision_aware_optimizer:
            for flag, value in (("--exp-avg-dtype", self.exp_avg_dtype), ("--exp-avg-sq-dtype", self.exp_avg_sq_dtype),
                                ("--main-params-dtype", self.main_params_dtype)):
                if value != "fp32":
                    raise MegasolveError(field=flag, value=value,
                                         rule="sets a dtype of the precision-aware optimizer only (ARG L3671-3685)",
                                         fix="add --use-precision-aware-optimizer, or drop the dtype")
        elif self.optimizer != "adam":
            raise MegasolveError(field="--use-precision-aware-optimizer", value=True,
                                 rule="--use-precision-aware-optimizer only supported with adam "
                                      "(optimizer_config.py L433-435 @d98e8a6)",
                                 fix="use --optimizer adam, or drop --use-precision-aware-optimizer")

    def _check_moe_capacity(self) -> None:
        """Megatron-Core's rules for token dropping and padding (TC = transformer_config.py, 0.16.1)."""
        _check_choice("--moe-token-drop-policy", self.moe_token_drop_policy, MOE_TOKEN_DROP_POLICIES)
        factor = self.moe_expert_capacity_factor
        if factor is not None and not factor > 0:  # TC L1105-1107 turns a negative factor into None
            raise MegasolveError(field="--moe-expert-capacity-factor", value=factor, rule="must be > 0",
                                 fix="e.g. 1.0 or 1.25; leave it out for dropless MoE")
        if self.moe_pad_expert_input_to_capacity and factor is None:
            raise MegasolveError(field="--moe-pad-expert-input-to-capacity", value=True,
                                 rule="needs --moe-expert-capacity-factor (TC L1131-1134)",
                                 fix="add --moe-expert-capacity-factor 1.0 or drop the padding")
        if self.moe_pad_expert_input_to_capacity and self.moe_dispatcher == "flex":
            raise MegasolveError(field="--moe-pad-expert-input-to-capacity", value=True,
                                 rule="the flex dispatcher with DeepEP does not support it (TC L1074-1081)",
                                 fix="use --moe-dispatcher alltoall or allgather")
        if self.moe_router_padding_for_fp8 and not self.quantized:
            raise MegasolveError(field="--moe-router-padding-for-fp8", value=True,
                                 rule="needs FP8 or FP4 training (transformer_config.py L2650-2652 @d98e8a6)",
                                 fix="add --precision fp8")
        if self.moe_router_padding_for_fp8 and self.moe_dispatcher == "allgather":
            raise MegasolveError(field="--moe-router-padding-for-fp8", value=True,
                                 rule="the allgather dispatcher does not support it (TC L1627-1631)",
                                 fix="use --moe-dispatcher alltoall or flex")

    def _check_offload_modules(self) -> None:
        """Megatron's offload-module choices and the attn_proj rule (TC L2127-2153)."""
        if not isinstance(self.offload_modules, tuple):  # a list from a runs file / the Python API; None: off
            object.__setattr__(self, "offload_modules", tuple(self.offload_modules or ()))
        unknown = sorted(set(self.offload_modules) - set(OFFLOAD_MODULE_NAMES))
        if unknown:
            not_modelled = set(unknown) & {"fused_group_mlp", "gdp_qkv"}
            raise MegasolveError(field="--offload-modules", value=",".join(unknown),
                                 rule=(f"{', '.join(sorted(not_modelled))}: Megatron offloads it, megasolve does not "
                                       "model it" if not_modelled else
                                       f"not one of Megatron's offload modules {', '.join(OFFLOAD_MODULE_NAMES)}"),
                                 fix="pick from " + ", ".join(OFFLOAD_MODULE_NAMES) + " (TC L2132-2142)")
        if "attn_proj" in self.offload_modules and "core_attn" not in self.offload_modules:
            raise MegasolveError(field="--offload-modules", value=",".join(self.offload_modules),
                                 rule="attn_proj cannot be offloaded without core_attn: its input is core "
                                      "attention's output, which core attention's backward needs (TC L2148-2153)",
                                 fix="add core_attn or drop attn_proj")

    def _check_module_precision(self) -> None:
        """The formats a precision recipe may give a module: bf16 always; another quantized format only where the
        run is quantized (an override applies to quantized modules only) and the GPU class supports it -- NVFP4
        modules in an FP8 run are not modelled (the run's GPU is not known here)."""
        if not isinstance(self.module_precision, tuple) or any(not isinstance(m, tuple) for m in self.module_precision):
            object.__setattr__(self, "module_precision", tuple(tuple(m) for m in (self.module_precision or ())))
        if self.module_precision and not self.quantized:
            raise MegasolveError(field="--te-precision-config", value=f"{len(self.module_precision)} matcher(s)",
                                 rule="a precision recipe overrides quantized modules only (Megatron's "
                                      "TransformerEngineMixedPrecision.md: override_nonquantized_autocast is off): a "
                                      "bf16 run changes nothing",
                                 fix="train with --precision fp8 or fp4, or drop the recipe")
        for entry in self.module_precision:
            if len(entry) != 2 or not all(isinstance(x, str) and x for x in entry):
                raise MegasolveError(field="--te-precision-config", value=entry,
                                     rule="each matcher is a (glob pattern, format) pair",
                                     fix="e.g. ('*.linear_qkv', 'bf16')")
            pattern, fmt = entry
            if fmt not in MODULE_FORMATS:
                raise MegasolveError(field="--te-precision-config", value=f"{pattern}: {fmt}",
                                     rule=f"a module's format is one of {', '.join(MODULE_FORMATS)}",
                                     fix="bf16 for an empty training recipe, the fp8_quantization_recipe's name, or "
                                         "nvfp4")
            if fmt == "nvfp4" and self.precision != "fp4":
                raise MegasolveError(field="--te-precision-config", value=f"{pattern}: {fmt}",
                                     rule="NVFP4 modules in a run that is not NVFP4 are not modelled",
                                     fix="train with --precision fp4, or give those modules an FP8 recipe or bf16")
        if self.gemm_overrides and not self.module_precision:
            raise MegasolveError(field="gemm_overrides", value=self.gemm_overrides,
                                 rule="is resolved from module_precision per layer, not an input",
                                 fix="give the recipe's matchers as module_precision")

    def module_format(self, path: str) -> str:
        """The format the GEMM module at ``path`` (its name in ``GPTModel.named_modules()``) runs in: the first
        matcher of ``module_precision`` that matches it, else the run's (``quant_recipe``, or ``bf16``).

        >>> w = Workload(precision="fp4", module_precision=(("*.linear_qkv", "bf16"), ("*mixer.out_proj", "mxfp8")))
        >>> [w.module_format(p) for p in ("decoder.layers.1.self_attention.linear_qkv",
        ...                                "decoder.layers.0.mixer.out_proj", "decoder.layers.0.mixer.in_proj")]
        ['bf16', 'mxfp8', 'nvfp4']
        """
        if not self.quantized:
            return "bf16"
        for pattern, fmt in self.module_precision:
            if fnmatch.fnmatchcase(path, pattern):
                return fmt
        return self.quant_recipe

    def module(self, name: str) -> Workload:
        """This workload as GEMM module ``name`` of the current layer kind runs it (``gemm_overrides``): its
        precision and recipe; itself when the module is not overridden.

        >>> w = Workload(precision="fp4", module_precision=(("*", "bf16"),), gemm_overrides=(("linear_qkv", "bf16"),))
        >>> w.module("linear_qkv").precision, w.module("linear_fc1").precision
        ('bf16', 'fp4')
        """
        for module, fmt in self.gemm_overrides:
            if module == name:
                precision = "bf16" if fmt == "bf16" else "fp4" if fmt == "nvfp4" else "fp8"
                return replace(self, precision=precision, fp8_recipe=fmt if precision == "fp8" else self.fp8_recipe,
                               fp8_param_gather=False, fp8_output_proj=False, moe_router_padding_for_fp8=False,
                               num_layers_at_start_in_bf16=0, num_layers_at_end_in_bf16=0, module_precision=(),
                               gemm_overrides=())
        return self

    def for_kind(self, bf16: bool, overrides: tuple[tuple[str, str], ...] = ()) -> Workload:
        """This workload as a layer kind runs it: in bf16 (``layer_precision``), or with its GEMM modules'
        overrides (``LayerKind.overrides``)."""
        if bf16 or not overrides:
            return self.layer_precision(bf16)
        return replace(self, gemm_overrides=overrides)

    @property
    def param_bytes(self) -> float:
        """Bytes per GEMM weight element that the parameter all-gather moves (1 with FP8 primary weights,
        ``NVFP4_BYTES`` with NVFP4 ones: TE gathers the rowwise data and scales, fp4_utils.py). MXFP8 primary weights
        are gathered in bf16: with the distributed optimizer their bucket's parameter buffer is a bf16 view of the
        gradient buffer, into which the optimizer copies its fp32 shard before the all-gather and out of which each
        rank quantizes its MXFP8 weights after it (``param_and_grad_buffer.py`` L1160-1179, ``_post_param_sync``
        L301-330; ``distrib_optimizer.py::_copy_main_params_to_param_buffer`` L2904-2930 @d98e8a6): 2. Megatron-FSDP's
        MXFP8 gather was not checked and is costed the same."""
        if self.fp8_param_gather and self.precision == "fp8" and self.fp8_recipe == "mxfp8":
            return ELEMENT_BYTES["bf16"]
        return ELEMENT_BYTES[self.precision] if self.fp8_param_gather else ELEMENT_BYTES["bf16"]

    @property
    def bf16_layers(self) -> tuple[int, int]:
        """``(start, end)``: decoder layers kept in bf16 at the model's start and end (``(0, 0)``: none)."""
        return self.num_layers_at_start_in_bf16, self.num_layers_at_end_in_bf16

    def in_bf16(self, layer: int, num_layers: int) -> bool:
        """Whether decoder layer ``layer`` (0-based, global) runs its GEMMs in bf16 in this quantized run."""
        start, end = self.bf16_layers
        return self.quantized and (layer < start or layer >= num_layers - end)

    def layer_precision(self, bf16: bool) -> Workload:
        """This workload as a layer kept in bf16 runs it (``bf16``), else itself."""
        if not bf16 or not self.quantized:
            return self
        return replace(self, precision="bf16", fp8_param_gather=False, fp8_output_proj=False,
                       moe_router_padding_for_fp8=False, num_layers_at_start_in_bf16=0, num_layers_at_end_in_bf16=0,
                       module_precision=(), gemm_overrides=())

    @property
    def tp_gather_bytes(self) -> tuple[float, float]:
        """Bytes per element of a sequence-parallel TP all-gather of a linear layer: ``(input, grad_output)``.

        Transformer Engine quantizes before it gathers (``distributed.py`` ``gather_along_first_dim``
        @d0067d0d: ``_all_gather_fp8`` / ``_mxfp8`` / ``_nvfp4`` / ``_fp8_blockwise``): the forward input of a
        column-parallel linear with rowwise usage only (``layernorm_linear.py`` L296-312), the backward's
        grad output of a row-parallel one with the usages its dgrad and wgrad GEMMs need (``base.py``
        ``grad_output_preprocess`` L1719-1750): per-tensor FP8 gathers the rowwise bytes and transposes
        after (1 B); the block-scaled formats gather rowwise and columnwise data, each with its scales
        (MXFP8 ``2 x (1 + 1/32)``, blockwise ``2 x (1 + 4/128)``, NVFP4 ``2 x NVFP4_BYTES``). bf16: 2 and 2.
        Reduce-scatters stay bf16.

        >>> Workload(precision="fp8", fp8_recipe="mxfp8").tp_gather_bytes
        (1.03125, 2.0625)
        """
        if not self.quantized:
            return ELEMENT_BYTES["bf16"], ELEMENT_BYTES["bf16"]
        block_scaled = {"nvfp4": NVFP4_BYTES, "mxfp8": 1 + 1 / 32, "blockwise": 1 + 4 / 128}
        if self.quant_recipe in block_scaled:
            return block_scaled[self.quant_recipe], 2 * block_scaled[self.quant_recipe]
        return 1, 1

    @property
    def tp_overlap_supported(self) -> bool:
        """Whether ``--tp-comm-overlap`` can run: Transformer Engine's userbuffers all-gather bf16, per-tensor
        FP8 (delayed / current scaling) and MXFP8 tensors and raise for any other quantizer (``module/base.py``
        ``fill_userbuffers_buffer_for_all_gather`` L607-755 @d0067d0d), i.e. not NVFP4 and not blockwise FP8; nor under
        ``--deterministic-mode``, which Megatron-LM runs without it."""
        unsupported = ("nvfp4", "blockwise")
        if self.deterministic_mode:  # Megatron-LM asserts it off (training/determinism.py L24 @d98e8a6)
            return False
        if any(fmt in unsupported for _, fmt in self.module_precision):  # a recipe's module in such a format
            return False
        return self.quant_recipe not in unsupported if self.quantized else True

    @property
    def quantized(self) -> bool:
        """GEMMs in FP8 or NVFP4 through Transformer Engine (anything but plain bf16)."""
        return self.precision != "bf16"

    @property
    def quant_recipe(self) -> str:
        """Transformer Engine's recipe of the quantized GEMMs: ``nvfp4`` with FP4, else ``fp8_recipe``."""
        return "nvfp4" if self.precision == "fp4" else self.fp8_recipe

    @property
    def block_scaled_fp8(self) -> bool:
        """FP8 with a block-scaling recipe (MXFP8, blockwise): more quantisation work per GEMM input."""
        return self.precision == "fp8" and self.fp8_recipe in ("mxfp8", "blockwise")

    @property
    def grad_bytes(self) -> int:
        """Bytes per main-grad element, held and reduced: fp32 (4) unless --grad-reduce-in-bf16 (2)."""
        return 2 if self.grad_reduce_in_bf16 else 4

    @property
    def fsdp_grad_bytes(self) -> int:
        """Bytes per main-grad element under Megatron-FSDP: 4 with ``--megatron-fsdp-main-grads-dtype fp32``, else 2
        (``auto``: the bf16 compute weights' dtype; ``fsdp_main_grads_dtype``)."""
        return 4 if self.fsdp_main_grads_dtype == "fp32" else 2

    @property
    def fsdp_grad_comm_bytes(self) -> int:
        """Bytes per gradient element reduce-scattered by Megatron-FSDP: the comm dtype's, or the main grads' with
        ``auto`` (``mixed_precision.py`` MixedPrecisionPolicy.grad_comm_dtype: None uses main_grads_dtype)."""
        if self.fsdp_grad_comm_dtype == "auto":
            return self.fsdp_grad_bytes
        return 4 if self.fsdp_grad_comm_dtype == "fp32" else 2

    def num_microbatches(self, layout: Layout) -> int:
        """``m = global_batch / (mbs * dp)``; CP is not part of this DP (reference 4.5 rule 28)."""
        return self.global_batch_size // (layout.mbs * layout.dp)
