"""Megatron's layout rules as data: ``(name, axes, check, message, source)``.

Each rule reads only the axes it names, so the same predicate serves three callers: ``estimate``
(report every violation of one layout), the exhaustive oracle (filter layouts) and the CP-SAT model
(allowed-assignment tables over just those axes). Sources are ``reference/megatron.md`` section 4
(ARG = ``arguments.py``, TC = ``transformer_config.py``, PS = ``parallel_state.py``, SCH =
``schedules.py``). The memory rule lives in the solver, which owns the cost tables.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import CP_COMM_FASTEST, Layout, Workload
from megasolve.models.params import dsa_split_problem, stage_layer_counts, stage_layer_ids
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster

Axes = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleContext:
    spec: ModelSpec
    cluster: Cluster
    workload: Workload
    allow_cross_domain_tp: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    name: str
    axes: tuple[str, ...]  # Layout fields read by ``check`` (``m`` = number of micro-batches)
    check: Callable[[RuleContext, Axes], bool]  # True: the layout obeys the rule
    message: Callable[[RuleContext, Axes], str]
    fix: str
    source: str


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str
    fix: str
    source: str

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message, "fix": self.fix, "source": self.source}


@functools.lru_cache(maxsize=65536)
def split_counts(spec: ModelSpec, pp: int, vpp: int, first: int | None, last: int | None,
                 account_embedding: bool = False, account_loss: bool = False,
                 pipeline_layout: str | None = None) -> tuple[int, ...] | str:
    """Layers per pipeline stage, or the reason Megatron rejects the split (cached: the solver asks
    for the same few splits hundreds of thousands of times)."""
    layout = Layout(pp=pp, vpp=vpp, first_stage_layers=first, last_stage_layers=last,
                    account_for_embedding=account_embedding, account_for_loss=account_loss,
                    pipeline_layout=pipeline_layout)
    try:
        counts = tuple(stage_layer_counts(spec, layout))
        if spec.dsa is not None and spec.dsa.topk_freq > 1:  # DSA IndexShare: chunks start on computing layers
            problem = dsa_split_problem(spec, stage_layer_ids(spec, layout))
            if problem is not None:
                return problem
        return counts
    except MegasolveError as exc:  # the flag at fault, when it is not the pipeline size (rule_error reads it)
        return exc.rule if exc.field == "--pp" else f"{exc.field}={exc.value}: {exc.rule}"


def _split(ctx: RuleContext, a: Axes) -> tuple[int, ...] | str:
    # the accounting flags are Layout fields the search never varies (its points lack them: False)
    return split_counts(ctx.spec, a["pp"], a["vpp"], a["first_stage_layers"], a["last_stage_layers"],
                        a.get("account_for_embedding", False), a.get("account_for_loss", False),
                        a.get("pipeline_layout"))  # --pipeline-layout (estimate only: solve does not search it)


def _split_ok(ctx: RuleContext, a: Axes) -> bool:
    return not isinstance(_split(ctx, a), str)


def _split_message(ctx: RuleContext, a: Axes) -> str:
    counts = _split(ctx, a)
    return counts if isinstance(counts, str) else ""


def _dense_ffns(spec: ModelSpec) -> list[tuple[str, int]]:
    out = []
    if not spec.moe or not all(spec.moe.layer_pattern):
        out.append(("ffn_hidden_size", spec.ffn_hidden_size))
    if spec.moe and spec.moe.shared_expert_ffn_hidden_size:
        out.append(("moe_shared_expert_intermediate_size", spec.moe.shared_expert_ffn_hidden_size))
    return out


def _tp_tier(ctx: RuleContext, tp: int) -> str:
    return ctx.cluster.group_link(1, tp).tier if tp <= ctx.cluster.num_gpus else "network"


RULES: tuple[Rule, ...] = (
    # Megatron-FSDP v1 runs on the DistributedOptimizer: Megatron-LM ``training/arguments.py``
    # (@d98e8a6 L1118-1130) switches it on; the Megatron-FSDP user guide lists
    # ``--use-distributed-optimizer`` among the "Required Configurations" (models/layout.py checks it too)
    Rule(name="fsdp_needs_distributed_optimizer", axes=("fsdp", "distributed_optimizer"),
         check=lambda c, a: not a["fsdp"] or a["distributed_optimizer"],
         message=lambda c, a: "Megatron-FSDP requires the distributed optimizer",
         fix="drop --no-distributed-optimizer or --fsdp", source="arguments.py L1118-1130"),
    # FP8 only: "num_layers_at_start_in_bf16 (N) must be between 0 and number of layers per pipeline stage"
    Rule(name="fp8_bf16_layers_per_stage", axes=("pp",),
         check=lambda c, a: c.workload.precision != "fp8"
         or max(c.workload.bf16_layers) <= c.spec.num_layers // a["pp"],
         message=lambda c, a: f"the layers kept in bf16 {c.workload.bf16_layers} (start, end) must each be at most the "
                              f"layers per pipeline stage ({c.spec.num_layers // a['pp']} at pp {a['pp']})",
         fix="keep fewer layers in bf16 or use a smaller --pp",
         source="transformer_config.py L1532-1556 @d98e8a6"),
    # megasolve's limitation: Muon's state under Megatron-FSDP is not costed (Megatron-Core itself refuses emerging
    # optimizers with FSDP v2: optimizer/__init__.py L758-759 @d98e8a6)
    Rule(name="muon_fsdp_not_modelled", axes=("fsdp",),
         check=lambda c, a: c.workload.optimizer != "muon" or not a["fsdp"],
         message=lambda c, a: "megasolve does not model Muon under Megatron-FSDP (Megatron-Core refuses emerging "
                              "optimizers with FSDP v2)",
         fix="drop --fsdp (Muon runs with the layer-wise distributed optimizer) or use --optimizer adam",
         source="megatron/core/optimizer/__init__.py L758-759 @d98e8a6"),
    Rule(name="world_size_divisible_by_model_parallel", axes=("tp", "pp", "cp", "dp"),
         check=lambda c, a: a["tp"] * a["pp"] * a["cp"] * a["dp"] == c.cluster.num_gpus,
         message=lambda c, a: f"world size ({c.cluster.num_gpus}) != tp({a['tp']}) * pp({a['pp']}) * "
                              f"cp({a['cp']}) * dp({a['dp']})",
         fix="choose tp*pp*cp dividing the GPU count", source="ARG L432-434; PS L822-823"),
    Rule(name="world_size_divisible_by_expert_parallel", axes=("etp", "ep", "pp"),
         check=lambda c, a: c.cluster.num_gpus % (a["etp"] * a["ep"] * a["pp"]) == 0,
         message=lambda c, a: f"world size ({c.cluster.num_gpus}) is not divisible by etp({a['etp']}) * "
                              f"ep({a['ep']}) * pp({a['pp']})",
         fix="pick ep*etp dividing tp*cp*dp", source="PS L878-884"),
    Rule(name="num_heads_divisible_by_tp", axes=("tp",),
         check=lambda c, a: c.spec.num_attention_heads % a["tp"] == 0,
         message=lambda c, a: f"num_attention_heads ({c.spec.num_attention_heads}) must be a multiple of "
                              f"tensor_model_parallel_size ({a['tp']})",
         fix="use a tp that divides the head count", source="TC L1446-1450"),
    Rule(name="query_groups_vs_tp", axes=("tp",),
         check=lambda c, a: c.spec.mla is not None or c.spec.num_query_groups % a["tp"] == 0
         or a["tp"] % c.spec.num_query_groups == 0,
         message=lambda c, a: f"num_query_groups ({c.spec.num_query_groups}) must be a multiple or divisor of "
                              f"tensor_model_parallel_size ({a['tp']})",
         fix="use a tp that divides or is a multiple of the KV-head count (core >= 0.16)",
         source="TC L1461-1468"),
    Rule(name="ffn_divisible_by_tp", axes=("tp",),
         check=lambda c, a: all(size % a["tp"] == 0 for _, size in _dense_ffns(c.spec)),
         message=lambda c, a: "; ".join(f"{name} ({size}) is not divisible by tp ({a['tp']})"
                                        for name, size in _dense_ffns(c.spec) if size % a["tp"]),
         fix="use a tp that divides the MLP width", source="core/utils.py divide, layers.py L1038/L1408"),
    Rule(name="expert_ffn_divisible_by_etp", axes=("etp",),
         check=lambda c, a: not c.spec.is_moe or c.spec.moe.expert_ffn_hidden_size % a["etp"] == 0,
         message=lambda c, a: f"moe_ffn_hidden_size ({c.spec.moe.expert_ffn_hidden_size}) is not divisible by "
                              f"etp ({a['etp']})",
         fix="use an etp that divides the expert width", source="core/utils.py divide (rule 11)"),
    Rule(name="num_experts_divisible_by_ep", axes=("ep",),
         check=lambda c, a: (a["ep"] == 1) if not c.spec.is_moe else c.spec.moe.num_experts % a["ep"] == 0,
         message=lambda c, a: ("expert parallelism needs an MoE model" if not c.spec.is_moe else
                               f"num_experts ({c.spec.moe.num_experts}) should be a multiple of "
                               f"expert_model_parallel_size ({a['ep']})"),
         fix="use an ep that divides the expert count (ep 1 for dense models)", source="ARG L1655-1658"),
    Rule(name="etp_is_tp_for_dense_models", axes=("tp", "etp"),
         check=lambda c, a: c.spec.is_moe or a["etp"] == a["tp"],
         message=lambda c, a: f"expert_tensor_parallel_size ({a['etp']}) has no meaning without experts",
         fix="leave --etp unset for dense models", source="ARG L587-588 (etp defaults to tp)"),
    Rule(name="moe_bias_needs_etp_1", axes=("etp",),
         check=lambda c, a: not (c.spec.is_moe and c.spec.add_bias_linear) or a["etp"] == 1,
         message=lambda c, a: "Bias in MoE is only supported when ETP==1",
         fix="use --etp 1", source="TC L2612-2615"),
    Rule(name="pipeline_split", axes=("pp", "vpp", "first_stage_layers", "last_stage_layers"),
         check=_split_ok, message=_split_message,
         fix="use a pp (and vpp) that divide the layers, set --first/--last-stage-layers, or write a "
             "--pipeline-layout that obeys the rule above",
         source="ARG L953-998; TC L2296-2370"),
    Rule(name="vpp_needs_pp", axes=("pp", "vpp"),
         check=lambda c, a: a["vpp"] == 1 or a["pp"] > 1,
         message=lambda c, a: "pipeline-model-parallel size should be greater than 1 with interleaved schedule",
         fix="use --vpp 1 or --pp > 1", source="PS L827-831"),
    Rule(name="seq_divisible_by_2cp", axes=("cp",),
         check=lambda c, a: a["cp"] == 1 or c.workload.seq_length % (2 * a["cp"]) == 0,
         message=lambda c, a: f"seq-length ({c.workload.seq_length}) should be a multiple of 2 * "
                              f"context-parallel-size ({a['cp']})",
         fix="use a cp with seq % (2*cp) == 0", source="ARG L1335-1338"),
    Rule(name="sp_seq_divisible_by_tp", axes=("tp", "cp", "sequence_parallel"),
         check=lambda c, a: not a["sequence_parallel"] or (c.workload.seq_length // a["cp"]) % a["tp"] == 0,
         message=lambda c, a: f"with sequence parallelism the per-CP sequence ({c.workload.seq_length // a['cp']})"
                              f" must be divisible by tp ({a['tp']})",
         fix="change --seq-len or --tp", source="tensor_parallel/mappings.py L60-75"),
    Rule(name="sp_needs_tp", axes=("tp", "sequence_parallel"),
         check=lambda c, a: not a["sequence_parallel"] or a["tp"] > 1,
         message=lambda c, a: "Cannot use sequence parallelism without tensor parallelism",
         fix="drop --sequence-parallel when --tp 1", source="MPC L503-504"),
    Rule(name="moe_tp_needs_sp", axes=("tp", "sequence_parallel"),
         check=lambda c, a: not c.spec.is_moe or a["tp"] == 1 or a["sequence_parallel"],
         message=lambda c, a: "During training, MoE with tensor parallelism requires sequence parallelism",
         fix="add --sequence-parallel", source="moe_layer.py L636-640; MPC L560-565"),
    # communication-overlap knobs (Workload): Megatron's conditions (Megatron-LM @d98e8a6)
    Rule(name="tp_comm_overlap_needs_sp", axes=("tp", "sequence_parallel"),
         check=lambda c, a: not c.workload.tp_comm_overlap or a["tp"] == 1 or a["sequence_parallel"],
         message=lambda c, a: "Tensor parallel communication/GEMM overlap can happen only when sequence "
                              "parallelism is enabled",
         fix="add --sequence-parallel or drop --tp-comm-overlap", source="ARG L1441-1442"),
    Rule(name="moe_ep_overlap_conditions", axes=("ep", "pp", "vpp", "recompute"),
         check=lambda c, a: not c.workload.moe_ep_overlap or not c.spec.is_moe or (
             a["ep"] > 1 and (a["pp"] == 1 or a["vpp"] > 1) and a["recompute"] != "full"
             and c.spec.mtp_num_layers <= 1),
         message=lambda c, a: "overlap_moe_expert_parallel_comm needs ep > 1, an interleaved schedule when pp > 1, "
                              f"no full recompute and at most one MTP layer (ep {a['ep']}, pp {a['pp']}, "
                              f"vpp {a['vpp']}, recompute {a['recompute']})",
         fix="raise --ep/--vpp, drop --recompute full, or drop --moe-ep-overlap", source="TC L3002-3046"),
    Rule(name="defer_embedding_wgrad_needs_pp", axes=("pp", "fsdp"),
         check=lambda c, a: not c.workload.defer_embedding_wgrad or (a["pp"] > 1 and not a["fsdp"]),
         message=lambda c, a: "Cannot defer embedding wgrad compute when pipeline model parallel is not used"
         if a["pp"] == 1 else "deferring the embedding wgrad compute does not work with Megatron-FSDP",
         fix="use --pp > 1 without --fsdp, or drop --defer-embedding-wgrad-compute",
         source="MPC L545-548; Megatron-Bridge scripts/performance/utils/overrides.py L109-111 (FSDP)"),
    Rule(name="dist_optimizer_instances_divide_dp", axes=("tp", "pp", "cp", "dp", "etp", "ep", "distributed_optimizer",
                                                          "fsdp"),
         check=lambda c, a: c.workload.dist_optimizer_instances == 1 or (
             a["distributed_optimizer"] and not a["fsdp"]
             and (a["dp"] * a["cp"]) % c.workload.dist_optimizer_instances == 0
             and (c.cluster.num_gpus // (a["etp"] * a["ep"] * a["pp"])) % c.workload.dist_optimizer_instances == 0),
         message=lambda c, a: f"{c.workload.dist_optimizer_instances} distributed-optimizer instances need the "
                              f"distributed optimizer without Megatron-FSDP (HSDP is not modelled) and must divide "
                              f"DP x CP ({a['dp'] * a['cp']}) and the expert DP size "
                              f"({c.cluster.num_gpus // (a['etp'] * a['ep'] * a['pp'])}): Data parallel size should "
                              "be divisible by partial DistOpt shard factor",
         fix="use a --num-distributed-optimizer-instances that divides both DP sizes, with the distributed optimizer",
         source="PS L922-929, L1447-1452; megasolve limitation for Megatron-FSDP (HSDP, mcore_fsdp_adapter.py L346)"),
    Rule(name="gbs_divisible_by_mbs_dp", axes=("mbs", "dp"),
         check=lambda c, a: c.workload.global_batch_size % (a["mbs"] * a["dp"]) == 0,
         message=lambda c, a: f"global batch size ({c.workload.global_batch_size}) is not divisible by micro "
                              f"batch size ({a['mbs']}) times data parallel size ({a['dp']})",
         fix="pick gbs a multiple of mbs*dp", source="num_microbatches_calculator.py L357-395"),
    Rule(name="vpp_microbatches", axes=("vpp", "pp", "mbs", "dp"),
         check=lambda c, a: a["vpp"] == 1 or _group_problem(c, a) is None,
         message=lambda c, a: f"interleaved schedule: {_group_problem(c, a)}",
         fix="raise --gbs or lower --pp/--mbs (or set --microbatch-group-size-per-virtual-pipeline-stage G with "
             "pp <= G <= micro-batches and micro-batches % G either 0 or >= pp)", source="SCH L1160-1180"),
    Rule(name="recompute_layers_fit_chunk",
         axes=("recompute_num_layers", "pp", "vpp", "first_stage_layers", "last_stage_layers"),
         check=lambda c, a: a["recompute_num_layers"] is None or not _split_ok(c, a)
         or a["recompute_num_layers"] <= _min_chunk(c, a),
         message=lambda c, a: f"recompute_num_layers ({a['recompute_num_layers']}) exceeds the layers per "
                              f"pipeline chunk ({_min_chunk(c, a)})",
         fix="use a smaller --recompute-num-layers", source="TC L1901-1925"),
    Rule(name="tp_inside_nvlink_domain", axes=("tp",),
         check=lambda c, a: c.allow_cross_domain_tp or a["tp"] == 1 or _tp_tier(c, a["tp"]) == "nvlink",
         message=lambda c, a: f"tp ({a['tp']}) spans more than one NVLink domain ({c.cluster.nvlink_domain} GPUs)",
         fix="use tp <= the NVLink domain, or pass --allow-cross-domain-tp",
         source="moe/README.md Guideline 2; reference 5.1"),
    Rule(name="position_embeddings_cover_seq", axes=(),
         check=lambda c, a: c.spec.position_embedding_type != "learned_absolute"
         or c.spec.max_position_embeddings >= c.workload.seq_length,
         message=lambda c, a: f"max_position_embeddings ({c.spec.max_position_embeddings}) must be greater than or"
                              f" equal to seq_length ({c.workload.seq_length})",
         fix="use a shorter --seq-len", source="ARG L1353-1356"),
    Rule(name="latent_moe_without_shared_expert_overlap", axes=(),
         check=lambda c, a: not (c.spec.is_moe and c.spec.moe.latent_size and c.workload.moe_shared_expert_overlap),
         message=lambda c, a: "Shared expert overlap with MoE latent projections is not supported during training",
         fix="drop --moe-shared-expert-overlap (the model has --moe-latent-size)", source="moe_layer.py L476-486"),
    # megasolve's specs say gated or not, not which activation: a gated GeLU model (Gemma's GeGLU), which Megatron
    # refuses too, passes this check (README "Inputs")
    Rule(name="fp8_input_store_needs_swiglu", axes=(),
         check=lambda c, a: not c.workload.activation_func_fp8_input_store or c.spec.swiglu,
         message=lambda c, a: "Storing activation input in FP8 is supported only for SwiGLU.",
         fix="drop --activation-func-fp8-input-store (the model's MLP is not gated)",
         source="transformer_config.py L2467-2469 @d98e8a6"),
    Rule(name="fp8_needs_hardware", axes=(),
         check=lambda c, a: c.workload.precision != "fp8" or c.cluster.gpu.fp8_flops is not None,
         message=lambda c, a: f"{c.cluster.gpu.name} has no FP8 tensor cores",
         fix="use --precision bf16", source="reference/gpus.yaml (Ampere has no FP8)"),
    Rule(name="fp4_needs_hardware", axes=(),
         check=lambda c, a: c.workload.precision != "fp4" or c.cluster.gpu.fp4_flops is not None,
         message=lambda c, a: f"{c.cluster.gpu.name} cannot train in NVFP4: it has no FP4 tensor cores "
                              "(Transformer Engine's NVFP4BlockScaling needs compute capability 10.0 or higher)",
         fix="use --precision fp8 or bf16, or a Blackwell GPU (b200, gb200, b300, gb300)",
         source="TE pytorch/quantization.py check_nvfp4_support; topology/gpus.yaml fp4_tflops"),
    Rule(name="fp8_recipe_needs_hardware", axes=(),
         check=lambda c, a: _fp8_recipe_problem(c.cluster.gpu, c.workload) is None,
         message=lambda c, a: str(_fp8_recipe_problem(c.cluster.gpu, c.workload)),
         fix="use --fp8-recipe tensorwise or delayed, or a GPU that supports the recipe",
         source="TE pytorch/quantization.py _compute_mxfp8_support / _compute_fp8_block_scaling_support"),
)


# QK-norms over all heads (OLMoE, ``ModelSpec.qk_layernorm_all_heads``): encoded only for such a model
QK_ALL_HEADS_RULES: tuple[Rule, ...] = (
    Rule(name="qk_norm_all_heads_needs_tp_1", axes=("tp",),
         check=lambda c, a: not c.spec.qk_layernorm_all_heads or a["tp"] == 1,
         message=lambda c, a: f"the QK-norms span all {c.spec.num_attention_heads} heads of a layer (OLMoE), built at "
                              f"that full width, which a query split over tensor_model_parallel_size ({a['tp']}) "
                              "cannot take",
         fix="use --tp 1", source="Megatron-Bridge models/olmoe/olmoe_provider.py OLMoESelfAttention @067f987"),
)
DSA_RULES: tuple[Rule, ...] = (
    Rule(name="dsa_attention_is_its_own", axes=(),
         check=lambda c, a: c.spec.dsa is None or c.workload.attention != "unfused",
         message=lambda c, a: "a DSA model runs DSAttention's own sparse kernels whatever the attention backend "
                              "(get_dsa_module_spec_for_backend: a local implementation), so --attention unfused "
                              "describes no launch of it",
         fix="drop --attention unfused",
         source="experimental_attention_variant_module_specs.py L97-120 @d98e8a6"),
)


def _fp8_recipe_problem(gpu: Any, workload: Any) -> str | None:
    """What Transformer Engine's ``check_recipe_support`` says of the FP8 recipe on this GPU: MXFP8 needs
    compute capability 10.x (not 12.0+), block-scaled FP8 9.0 or higher -- for the run's recipe and for each a precision
    recipe gives its modules. None when it runs, when nothing is FP8, or when the GPU's capability is not known (AMD
    parts, a custom GPU)."""
    cc = gpu.compute_capability
    if cc is None:
        return None
    # the run's recipe, and those a precision recipe gives its modules (``Workload.module_precision``)
    recipes = [(workload.fp8_recipe, "")] if workload.precision == "fp8" else []
    recipes += [(fmt, f" (--te-precision-config: {pattern})") for pattern, fmt in workload.module_precision]
    for recipe, where in recipes:
        if recipe == "mxfp8" and not 10.0 <= cc < 12.0:
            return (f"{gpu.name} (compute capability {cc}) cannot run MXFP8{where}: it needs compute capability 10.x "
                    "(Blackwell)")
        if recipe == "blockwise" and cc < 9.0:
            return f"{gpu.name} (compute capability {cc}) cannot run block-scaled FP8{where}: it needs 9.0 or higher"
    return None


# The memory-side knobs the search varies (issue 11): activation offloading (one of the ``rc`` values),
# selective recompute modules (``rc``) and optimizer CPU offload (``oo``). TC lines are Megatron-LM @d98e8a6
# / Megatron-Core 0.16.1 ``transformer_config.py``; ARG = Megatron-LM ``training/arguments.py``.
MEMORY_KNOB_RULES: tuple[Rule, ...] = (
    # megasolve's check of the host, not Megatron's: the offloaded activations must fit in the host's DRAM
    # (the catalog's host_mem_gb per GPU: the whole share, nothing reserved for the OS, data loaders or the
    # optimizer CPU offload's state, which this check does not count)
    Rule(name="activation_offload_fits_host", axes=("tp", "cp", "mbs", "sequence_parallel", "etp",
                                                    "cpu_offload_layers"),
         check=lambda c, a: _host_problem(c, a) is None,
         message=lambda c, a: _host_problem(c, a) or "",
         fix="offload fewer layers (--cpu-offload-layers), or use more TP/CP/PP or GPUs with more memory",
         source="host DRAM per GPU (topology/gpus.yaml host_mem_gb); TE cpu_offload.py keeps offloaded "
                "tensors in pinned host memory"),
    Rule(name="cpu_offload_layers_below_num_layers", axes=("cpu_offload_layers",),
         check=lambda c, a: a["cpu_offload_layers"] < c.spec.num_layers,
         message=lambda c, a: f"CPU offloading can be done only for layers less than {c.spec.num_layers}",
         fix="use --cpu-offload-layers below the layer count", source="TC L1884-1889"),
    Rule(name="cpu_offload_needs_pp_1", axes=("cpu_offload_layers", "pp"),
         check=lambda c, a: a["cpu_offload_layers"] == 0 or a["pp"] == 1,
         message=lambda c, a: "Currently there is no support for Pipeline parallelism with CPU offloading",
         fix="use --pp 1 or drop --cpu-offload-layers", source="TC L1891-1894"),
    Rule(name="cpu_offload_without_recompute", axes=("cpu_offload_layers", "recompute"),
         check=lambda c, a: a["cpu_offload_layers"] == 0 or a["recompute"] == "none",
         message=lambda c, a: "CPU offloading does not work when activation recomputation is enabled",
         fix="use --recompute none or drop --cpu-offload-layers", source="TC L1896-1899"),
    Rule(name="fine_grained_offload_without_cpu_offload", axes=("cpu_offload_layers",),
         check=lambda c, a: not c.workload.offload_modules or a["cpu_offload_layers"] == 0,
         message=lambda c, a: "fine_grained_activation_offloading cannot be enabled with cpu_offloading",
         fix="drop --cpu-offload-layers or --offload-modules", source="TC L2127-2130"),
    Rule(name="fine_grained_offload_not_inside_moe_recompute", axes=("recompute", "recompute_modules"),
         check=lambda c, a: not (a["recompute"] == "selective" and "moe" in (a["recompute_modules"] or ())
                                 and {"moe_act", "expert_fc1"} & set(c.workload.offload_modules)),
         message=lambda c, a: "Cannot offload moe_act / expert_fc1 while recomputing the entire MoE layer "
                              "('moe' in recompute_modules wraps the full MoE forward in a checkpoint)",
         fix="remove moe from --recompute-modules or moe_act / expert_fc1 from --offload-modules",
         source="TC L2166-2175"),
    Rule(name="recompute_modules_usable", axes=("recompute", "recompute_modules"),
         check=lambda c, a: a["recompute"] != "selective" or _modules_problem(c, a) is None,
         message=lambda c, a: str(_modules_problem(c, a)),
         fix="pick modules this model has (--recompute-modules)",
         source="TC selective block (L1944-1990): moe_act needs grouped GEMM, mla_up_proj needs MLA, "
                "no shared_experts with shared-expert overlap, no moe_act/layernorm with FP8 delayed scaling"),
    Rule(name="optimizer_offload_needs_distributed_optimizer",
         axes=("optimizer_offload_fraction", "distributed_optimizer", "fsdp"),
         check=lambda c, a: not a["optimizer_offload_fraction"] or (a["distributed_optimizer"] and not a["fsdp"]),
         message=lambda c, a: "megasolve models optimizer CPU offload (HybridDeviceOptimizer) under the "
                              "distributed optimizer only, not with Megatron-FSDP",
         fix="drop --optimizer-offload-fraction, or use the distributed optimizer without --fsdp",
         source="megatron/core/optimizer/__init__.py (HybridDeviceOptimizer wrapped by DistributedOptimizer)"),
    # the emerging-optimizer path (Muon) builds no HybridDeviceOptimizer: the CPU offload is Adam's
    Rule(name="optimizer_offload_not_with_muon", axes=("optimizer_offload_fraction",),
         check=lambda c, a: not a["optimizer_offload_fraction"] or c.workload.optimizer != "muon",
         message=lambda c, a: "optimizer CPU offload is Adam's (HybridDeviceOptimizer); Megatron-LM's Muon path "
                              "(_get_megatron_emerging_optimizer) does not build it",
         fix="drop --optimizer-offload-fraction or use --optimizer adam",
         source="megatron/core/optimizer/__init__.py L497-540, L1044-1050 @d98e8a6"),
    Rule(name="precision_aware_optimizer_needs_distributed_optimizer", axes=("distributed_optimizer", "fsdp"),
         check=lambda c, a: not c.workload.precision_aware_optimizer or (a["distributed_optimizer"] and not a["fsdp"]),
         message=lambda c, a: "--use-precision-aware-optimizer only supported with distributed optimizer" if not
         a["distributed_optimizer"] else "megasolve does not model the precision-aware optimizer under Megatron-FSDP "
                                          "(FusedAdam then steps Megatron-FSDP's own main weights)",
         fix="use the distributed optimizer without --fsdp, or drop --use-precision-aware-optimizer",
         source="megatron/core/optimizer/__init__.py L1057-1060, L1148-1160 @d98e8a6"),
    Rule(name="fp8_param_gather_needs_distributed_optimizer", axes=("distributed_optimizer",),
         check=lambda c, a: not (c.workload.fp8_param_gather and c.workload.precision == "fp8")
         or a["distributed_optimizer"],
         message=lambda c, a: "--fp8-param-gather only supported with distributed optimizer, torch fsdp2, megatron "
                              "fsdp, or inference mode",
         fix="use the distributed optimizer (or --fsdp), or train with bf16 primary weights (--precision fp8)",
         source="ARG L1095-1097 @d98e8a6"),
    Rule(name="optimizer_offload_fp8_param_gather_delayed", axes=("optimizer_offload_fraction",),
         check=lambda c, a: not a["optimizer_offload_fraction"] or not c.workload.fp8_param_gather
         or c.workload.fp8_recipe == "delayed",
         message=lambda c, a: "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in "
                              "conjunction with `--fp8-recipe delayed`.",
         fix="use --fp8-recipe delayed, drop FP8 primary weights, or drop the optimizer offload",
         source="ARG (Optimizer CPU offload check)"),
)


def _mamba_cp_problem(spec: ModelSpec, tp: int, cp: int) -> str | None:
    """``MambaContextParallel.__init__`` (``ssm/mamba_context_parallel.py`` L106-133 @d98e8a6): heads per
    TP rank split over CP; groups per TP rank either split over CP or repeated to it."""
    m = spec.mamba
    if m is None or cp == 1 or m.num_heads % tp or m.num_groups % tp:
        return None
    heads, groups = m.num_heads // tp, m.num_groups // tp
    if heads % cp:
        return f"mamba_num_heads / tp ({heads}) is not divisible by cp ({cp})"
    if groups < cp and cp % groups:
        return f"cp ({cp}) is not divisible by mamba_num_groups / tp ({groups})"
    if groups >= cp and groups % cp:
        return f"mamba_num_groups / tp ({groups}) is not divisible by cp ({cp})"
    return None


def _has_mamba(spec: ModelSpec) -> bool:
    return spec.is_hybrid and "M" in spec.hybrid_pattern


def _gdn(spec: ModelSpec):
    has = spec.linear_attention_pattern is not None and any(spec.linear_attention_pattern)
    return spec.gated_delta_net if has else None


def _block_layers(spec: ModelSpec) -> bool:
    return spec.is_hybrid or _gdn(spec) is not None


# Hybrid models (issue 15). Mamba-2: Megatron-LM @d98e8a6 ``megatron/core/ssm/mamba_mixer.py`` and
# ``mamba_context_parallel.py``; the hybrid stack: ``megatron/core/models/hybrid/hybrid_layer_allocation.py``
# (``select_pipeline_segment``) and ``hybrid_block.py``; gated DeltaNet: ``ssm/gated_delta_net/common.py``.
HYBRID_RULES: tuple[Rule, ...] = (
    Rule(name="mamba_heads_divisible_by_tp", axes=("tp",),
         check=lambda c, a: not _has_mamba(c.spec) or c.spec.mamba.num_heads % a["tp"] == 0,
         message=lambda c, a: f"mamba_num_heads ({c.spec.mamba.num_heads}) must be evenly divisible by "
                              f"tensor_model_parallel_size ({a['tp']})",
         fix="use a tp that divides the Mamba head count", source="mamba_mixer.py L262"),
    Rule(name="mamba_groups_divisible_by_tp", axes=("tp",),
         check=lambda c, a: not _has_mamba(c.spec) or c.spec.mamba.num_groups % a["tp"] == 0,
         message=lambda c, a: f"mamba_num_groups ({c.spec.mamba.num_groups}) must be evenly divisible by "
                              f"tensor_model_parallel_size ({a['tp']})",
         fix="use a tp that divides the Mamba group count", source="mamba_mixer.py L270"),
    Rule(name="mamba_heads_groups_vs_cp", axes=("tp", "cp"),
         check=lambda c, a: not _has_mamba(c.spec) or _mamba_cp_problem(c.spec, a["tp"], a["cp"]) is None,
         message=lambda c, a: f"Mamba context parallelism: {_mamba_cp_problem(c.spec, a['tp'], a['cp'])}",
         fix="use a cp that divides the Mamba heads (and groups) per TP rank",
         source="mamba_context_parallel.py L106-133"),
    # VPP: Megatron refuses it for a pattern without '|' separators (hybrid_layer_allocation.py L384-392);
    # the export writes one segment per virtual stage (cli/launch.py hybrid_pipeline_settings), so it is legal
    Rule(name="hybrid_split_without_accounting", axes=("account_for_embedding", "account_for_loss"),
         check=lambda c, a: not c.spec.is_hybrid or not (a.get("account_for_embedding") or a.get("account_for_loss")),
         message=lambda c, a: "the hybrid stack splits its pattern over pipeline stages by layer count only "
                              "(first / last stage layers); the embedding / loss accounting is not read",
         fix="drop --account-for-embedding / --account-for-loss (use --first-stage-layers / --last-stage-layers)",
         source="hybrid_layer_allocation.py select_pipeline_segment L331-440; ARG L829-838"),
    Rule(name="hybrid_no_activation_offload", axes=("cpu_offload_layers",),
         check=lambda c, a: not c.spec.is_hybrid or a["cpu_offload_layers"] == 0,
         message=lambda c, a: "the hybrid stack has no CPU activation offloading (only TransformerBlock "
                              "opens the offload context)",
         fix="drop --cpu-offload-layers", source="hybrid_block.py forward L273-410 (no cpu_offloading context)"),
    Rule(name="gdn_heads_divisible_by_tp", axes=("tp",),
         check=lambda c, a: _gdn(c.spec) is None or (_gdn(c.spec).num_key_heads % a["tp"] == 0
                                                      and _gdn(c.spec).num_value_heads % a["tp"] == 0),
         message=lambda c, a: f"linear_num_key_heads ({_gdn(c.spec).num_key_heads}) and linear_num_value_heads "
                              f"({_gdn(c.spec).num_value_heads}) must be divisible by tp ({a['tp']})",
         fix="use a tp that divides the DeltaNet head counts",
         source="gated_delta_net/common.py L183-187 (heads per TP rank by floor division; in_proj is column-parallel)"),
    Rule(name="gdn_heads_divisible_by_cp", axes=("tp", "cp"),
         check=lambda c, a: _gdn(c.spec) is None or a["cp"] == 1 or (
             _gdn(c.spec).num_key_heads % (a["tp"] * a["cp"]) == 0
             and _gdn(c.spec).num_value_heads % (a["tp"] * a["cp"]) == 0),
         message=lambda c, a: f"DeltaNet heads per TP rank ({_gdn(c.spec).num_key_heads} key / "
                              f"{_gdn(c.spec).num_value_heads} value over tp {a['tp']}) must split over cp ({a['cp']})",
         fix="use a cp that divides the DeltaNet heads per TP rank",
         source="gated_delta_net/gdn.py L56-63, common.py L628-632"),
    # what megasolve does not cost for these layers (a limitation, not Megatron's rule)
    Rule(name="block_layers_fsdp_not_modelled", axes=("fsdp",),
         check=lambda c, a: not _block_layers(c.spec) or not a["fsdp"],
         message=lambda c, a: "megasolve does not model Megatron-FSDP units for hybrid / DeltaNet layers",
         fix="drop --fsdp (use the distributed optimizer)", source="megasolve limitation (cost/hybrid.py)"),
    Rule(name="block_layers_offload_not_modelled", axes=("cpu_offload_layers",),
         check=lambda c, a: _gdn(c.spec) is None or a["cpu_offload_layers"] == 0,
         message=lambda c, a: "megasolve does not model activation offloading of DeltaNet layers",
         fix="drop --cpu-offload-layers", source="megasolve limitation (cost/hybrid.py)"),
)


def _cp_comm_type(ctx: RuleContext) -> str:
    """The CP communication type a layout is checked with: the workload's, else the model's default. A
    searched type (``CP_COMM_FASTEST``) is legal exactly where the default is: the default is legal
    for every plain model (p2p) and windowed model (all_gather), and sinks allow a2a alone."""
    from megasolve.cost.step import default_cp_comm_type

    chosen = ctx.workload.cp_comm_type
    return chosen if chosen not in (None, CP_COMM_FASTEST) else default_cp_comm_type(ctx.spec)


def _cp_comm_problem(ctx: RuleContext, a: Axes) -> str | None:
    from megasolve.cost.step import cp_comm_problem

    return cp_comm_problem(ctx.spec, ctx.cluster, _cp_comm_type(ctx), a["tp"], a["cp"])


# Transformer Engine's context-parallel rules (``attn_forward_func_with_cp`` and
# ``AttnFuncWithCPAndQKVOA2A``, ``context_parallel.py`` @d0067d0; cost/step.py ``cp_comm_problem``)
CP_COMM_RULES: tuple[Rule, ...] = (
    Rule(name="cp_comm_type_supported", axes=("tp", "cp"),
         check=lambda c, a: _cp_comm_problem(c, a) is None,
         message=lambda c, a: _cp_comm_problem(c, a) or "",
         fix="pick a cp dividing the heads per TP rank, or another --cp-comm-type",
         source="TE context_parallel.py L4246-4249, L5020-5067"),
)
RULES = RULES + MEMORY_KNOB_RULES + HYBRID_RULES + CP_COMM_RULES + DSA_RULES + QK_ALL_HEADS_RULES


def _cp_rules_bind(spec: ModelSpec, workload: Workload | None) -> bool:
    """Whether ``CP_COMM_RULES`` can refuse a layout: a windowed, sink or DSA model, or a pinned type other
    than p2p (p2p runs every plain model)."""
    pinned = workload.cp_comm_type if workload is not None else None
    return (spec.window_size is not None or spec.dsa is not None or spec.softmax_type != "vanilla"
            or pinned not in (None, CP_COMM_FASTEST, "p2p"))


def model_rules(spec: ModelSpec, workload: Workload | None = None) -> tuple[Rule, ...]:
    """``RULES`` that can bind for ``spec`` and ``workload``: the hybrid rules only for a model with hybrid
    or DeltaNet layers, the CP communication rules only where ``_cp_rules_bind``, the DSA rules only with DSA, the
    all-heads QK-norm rule only with such norms (for any other model they hold for every layout, and the search need
    not encode them)."""
    skip = (() if _block_layers(spec) else HYBRID_RULES) + (() if _cp_rules_bind(spec, workload) else CP_COMM_RULES) \
        + (() if spec.dsa is not None else DSA_RULES) + (() if spec.qk_layernorm_all_heads else QK_ALL_HEADS_RULES)
    return tuple(rule for rule in RULES if rule not in skip)
# Rules on Layout fields the search does not vary: none left (kept for callers of violations())
FIXED_FIELD_RULES: tuple[Rule, ...] = ()


def _modules_problem(ctx: RuleContext, a: Axes) -> str | None:
    from megasolve.cost.recompute import modules_problem

    return modules_problem(ctx.spec, ctx.workload, tuple(a["recompute_modules"] or ("core_attn",)))


@functools.lru_cache(maxsize=4096)
def _offloaded_host_bytes(ctx: RuleContext, tp: int, cp: int, mbs: int, sp: bool, etp: int, layers: int) -> float:
    """Host memory that ``--cpu-offloading-num-layers`` fills: the saved activations of the first ``layers``
    layers of the one micro-batch in flight (PP 1: each micro-batch's backward follows its forward), as
    ``memory.offloaded_activation_bytes`` counts them (``saved``)."""
    from megasolve.cost.memory import ActivationShape, layer_activation_bytes, offloaded_activation_bytes

    shape = ActivationShape(tp=tp, cp=cp, mbs=mbs, sequence_parallel=sp, etp=etp)
    by_mlp = {moe: layer_activation_bytes(ctx.spec, ctx.workload, shape, moe=moe, recompute="none")
              for moe in ((False, True) if ctx.spec.is_moe else (False,))}
    return offloaded_activation_bytes(ctx.spec, layers, range(ctx.spec.num_layers), by_mlp).saved


def _host_problem(ctx: RuleContext, a: Axes) -> str | None:
    if not a["cpu_offload_layers"] or ctx.workload is None:
        return None
    need = _offloaded_host_bytes(ctx, a["tp"], a["cp"], a["mbs"], bool(a["sequence_parallel"]), a["etp"],
                                 a["cpu_offload_layers"])
    have = ctx.cluster.gpu.host_memory_bytes
    if need <= have:
        return None
    return (f"offloading the activations of {a['cpu_offload_layers']} layers puts {need / 1e9:.0f} GB per GPU in host "
            f"memory, more than the {have / 1e9:.0f} GB a {ctx.cluster.gpu.name} host has per GPU")


def _m(ctx: RuleContext, a: Axes) -> int:
    return ctx.workload.global_batch_size // (a["mbs"] * a["dp"])


def _group_problem(ctx: RuleContext, a: Axes) -> str | None:
    """What the interleaved schedule refuses about the micro-batch count ``m`` and the group size ``G``
    (``--microbatch-group-size-per-virtual-pipeline-stage``, default ``p``): ``p <= G <= m`` (ValueError)
    and a last group of ``m % G`` micro-batches either empty or at least ``p`` (RuntimeError), SCH
    L1160-1180; with ``G = p`` that is ``m >= p`` and ``m % p == 0``."""
    m, p = _m(ctx, a), a["pp"]
    g = ctx.workload.microbatch_group_size or p
    if not p <= g <= m:
        if g == p:
            return f"needs micro-batches ({m}) >= pp ({p}) and a multiple of it"
        return f"the micro-batch group size ({g}) must lie in [pp={p}, micro-batches={m}]"
    if 0 < m % g < p:
        if g == p:
            return f"needs micro-batches ({m}) >= pp ({p}) and a multiple of it"
        return f"the last group of micro-batches ({m} % {g} = {m % g}) must be empty or >= pp ({p})"
    return None


def _min_chunk(ctx: RuleContext, a: Axes) -> int:
    counts = _split(ctx, a)
    return min(counts) // a["vpp"]


def rule_error(broken: Violation, layout: Layout | None, workload: Workload) -> MegasolveError:
    """The input error for a broken Megatron rule: the flag it concerns and that flag's value."""
    if broken.rule == "pipeline_split" and (m := re.match(r"(--[\w/-]+)=(\S+): (.*)", broken.message, re.S)):
        # the split names its own flag: "--first-stage-layers=7: must be divisible by vpp (2)"
        return MegasolveError(field=m.group(1), value=m.group(2), rule=f"{m.group(3)} ({broken.source})",
                              fix=broken.fix)
    name = _RULE_FIELDS.get(broken.rule, "layout").lstrip("-").replace("-", "_")
    name = _FIELD_ATTRS.get(name, name)
    value = getattr(layout, name, getattr(workload, name, "see message"))
    if name == "precision" and workload.fp8_param_gather:  # the CLI spelling: fp8-params / fp4-params
        value = f"{value}-params"
    return MegasolveError(field=_RULE_FIELDS.get(broken.rule, "layout"), value=value,
                          rule=f"{broken.message} ({broken.source})", fix=broken.fix)


# flags whose Layout / Workload attribute is not the flag's own name
_FIELD_ATTRS = {"gbs": "global_batch_size", "seq_len": "seq_length", "gpus": "world_size",
                "defer_embedding_wgrad_compute": "defer_embedding_wgrad",
                "num_distributed_optimizer_instances": "dist_optimizer_instances",
                "use_precision_aware_optimizer": "precision_aware_optimizer"}
_RULE_FIELDS = {
    "num_heads_divisible_by_tp": "--tp", "query_groups_vs_tp": "--tp", "ffn_divisible_by_tp": "--tp",
    "qk_norm_all_heads_needs_tp_1": "--tp",
    "expert_ffn_divisible_by_etp": "--etp", "num_experts_divisible_by_ep": "--ep", "etp_is_tp_for_dense_models": "--etp",
    "moe_bias_needs_etp_1": "--etp", "pipeline_split": "--pp", "vpp_needs_pp": "--vpp", "seq_divisible_by_2cp": "--cp",
    "sp_seq_divisible_by_tp": "--seq-len", "sp_needs_tp": "--sequence-parallel", "moe_tp_needs_sp": "--sequence-parallel",
    "gbs_divisible_by_mbs_dp": "--gbs", "vpp_microbatches": "--vpp", "recompute_layers_fit_chunk": "--recompute-num-layers",
    "world_size_divisible_by_expert_parallel": "--ep", "position_embeddings_cover_seq": "--seq-len",
    "fp8_needs_hardware": "--precision", "fp8_recipe_needs_hardware": "--fp8-recipe",
    "latent_moe_without_shared_expert_overlap": "--moe-shared-expert-overlap",
    "fp8_input_store_needs_swiglu": "--activation-func-fp8-input-store",
    "world_size_divisible_by_model_parallel": "--gpus",
    "fp4_needs_hardware": "--precision", "fsdp_needs_distributed_optimizer": "--fsdp",
    "fp8_bf16_layers_per_stage": "--num-layers-at-start-in-bf16", "muon_fsdp_not_modelled": "--optimizer",
    "tp_comm_overlap_needs_sp": "--tp-comm-overlap", "moe_ep_overlap_conditions": "--moe-ep-overlap",
    "defer_embedding_wgrad_needs_pp": "--defer-embedding-wgrad-compute",
    "dist_optimizer_instances_divide_dp": "--num-distributed-optimizer-instances", "tp_inside_nvlink_domain": "--tp",
    "activation_offload_fits_host": "--cpu-offload-layers", "cpu_offload_layers_below_num_layers": "--cpu-offload-layers",
    "cpu_offload_needs_pp_1": "--cpu-offload-layers", "cpu_offload_without_recompute": "--cpu-offload-layers",
    "fine_grained_offload_without_cpu_offload": "--offload-modules",
    "fine_grained_offload_not_inside_moe_recompute": "--offload-modules", "recompute_modules_usable": "--recompute-modules",
    "optimizer_offload_needs_distributed_optimizer": "--optimizer-offload-fraction",
    "optimizer_offload_not_with_muon": "--optimizer-offload-fraction",
    "optimizer_offload_fp8_param_gather_delayed": "--optimizer-offload-fraction",
    "fp8_param_gather_needs_distributed_optimizer": "--precision",
    "precision_aware_optimizer_needs_distributed_optimizer": "--use-precision-aware-optimizer",
    "mamba_heads_divisible_by_tp": "--tp", "mamba_groups_divisible_by_tp": "--tp", "mamba_heads_groups_vs_cp": "--cp",
    "hybrid_split_without_accounting": "--account-for-embedding", "hybrid_no_activation_offload": "--cpu-offload-layers",
    "gdn_heads_divisible_by_tp": "--tp", "gdn_heads_divisible_by_cp": "--cp", "block_layers_fsdp_not_modelled": "--fsdp",
    "block_layers_offload_not_modelled": "--cpu-offload-layers", "cp_comm_type_supported": "--cp-comm-type",
    "dsa_attention_is_its_own": "--attention",
}


def layout_axes(layout: Layout) -> Axes:
    return {name: getattr(layout, name) for name in Layout.__slots__}


def violations(ctx: RuleContext, layout: Layout, rules: tuple[Rule, ...] = RULES + FIXED_FIELD_RULES
               ) -> list[Violation]:
    """Every rule ``layout`` breaks, in rule order."""
    axes = layout_axes(layout)
    return [Violation(rule.name, rule.message(ctx, axes), rule.fix, rule.source)
            for rule in rules if not rule.check(ctx, axes)]
