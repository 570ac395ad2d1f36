"""Each launch format as a table from a plan setting (``cli/launch.py``) to that target's key.

Adding a knob is one ``Setting`` in ``cli/launch.py`` plus, where its key differs from the default of a
format, one table entry: Megatron-LM ``--<name-with-dashes>``, Bridge ``model.<name>``, NeMo
``model.config.<name>``, verl ``override_transformer_config.<name>`` (all four are Megatron-Core config
field names). A table value is the target key (a string), a tuple of keys (the value goes to each), a
``NotExpressible`` reason (a ``# not expressible`` line), or None for a setting the target derives itself
(``DERIVED``).

Targets and the versions each output is written for:

* ``megatron``: Megatron-LM ``pretrain_gpt.py`` @ d98e8a64 (flags = ``arguments.py`` dests with dashes;
  VPP as ``--num-layers-per-virtual-pipeline-stage`` when even, else
  ``--num-virtual-stages-per-pipeline-rank``, ARG L954-956; ``virtual_pipeline_model_parallel_size`` has
  no flag, ARG ~L2307).
* ``bridge``: Megatron-Bridge v0.6.x release (tag v0.6.0): Hydra/OmegaConf overrides of the
  ``ConfigContainer`` for ``scripts/training/run_recipe.py``; the model provider is a flat
  ``TransformerConfig`` subclass (``model.tensor_model_parallel_size``). Precision on
  ``mixed_precision.*`` (``MixedPrecisionConfig``, ``training/mixed_precision.py`` L40-75), which the
  recipe's setup copies over ``ddp.grad_reduce_in_fp32``, so the grad dtype goes there.
* ``bridge-main``: Megatron-Bridge main @ 067f987d (2026-08-22): ``ConfigContainer.model`` may be a
  ``GPTModelConfig`` (Megatron-LM ``megatron/training/models/gpt.py`` L140-183) that nests the
  ``TransformerConfig`` under ``model.transformer``; only the GPT-level fields (vocab, seq_length,
  embeddings sharing, position embedding) stay on ``model``.
* ``nemo``: NeMo 2 recipes (NVIDIA/NeMo @ 8cfedd72) through NeMo-Run's CLI: parallelism on
  ``trainer.strategy`` (``MegatronStrategy`` L123-133, 264), precision on ``trainer.plugins``
  (``MegatronMixedPrecision`` L104-132), optimizer on ``optim.config``, the rest on ``model.config``.
  Values use NeMo-Run's parser (``nemo_run/cli/cli_parser.py`` ``parse_value``: ``ast.literal_eval``,
  then true/false): ``None``, ``True``, ``'["core_attn"]'`` (``[core_attn]`` is not a literal and
  stays a string, which the typed field rejects).
* ``verl``: verl @ b178a3cd Hydra overrides of ``ppo_megatron_trainer.yaml`` (``engine/megatron.yaml``):
  the same Megatron layout on ``actor_rollout_ref.actor.megatron``, ``actor_rollout_ref.ref.megatron``
  and ``critic.megatron``; ``override_transformer_config`` / ``override_ddp_config`` keys with ``++``
  (Hydra "add or override": the recipe file already defines some of them, and ``+`` on an existing key
  fails).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout
from megasolve.topology.cluster import Cluster

FORMATS = ("megatron", "bridge", "bridge-main", "nemo", "verl")
MEGATRON_LM_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"


@dataclass(frozen=True, slots=True)
class Setting:
    """One value the plan depends on, named by its Megatron-Core config field.

    ``group`` orders the output (model, layout, batch, optimizer, memory, precision, kernels, env);
    ``note`` travels with the setting into every format (e.g. why a value differs from the plan's option);
    a setting named ``_note`` carries only its note (no value to write).
    """

    name: str
    value: object
    group: str
    note: str = ""


# ----------------------------------------------------------------------------- Megatron-LM
# Setting name -> ARG dest where they differ (ARG ``_add_network_size_args`` / ``_add_moe_args`` /
# ``_add_distributed_args``); ``None``: Megatron-LM derives it (see the reason).
MEGATRON_DEST = {
    "num_moe_experts": "num_experts",
    "gated_linear_unit": "swiglu",
    "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
    "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers",
    "virtual_pipeline_model_parallel_size": "num_virtual_stages_per_pipeline_rank",
    "fp8": "fp8_format",
    "fp4": "fp4_format",  # TC fp4, arg_names --fp4-format (L673-674 @d98e8a6)
    "fp4_param": "fp4_param_gather",  # TC fp4_param, arg_names --fp4-param-gather (L683-684)
    "average_in_collective": "ddp_average_in_collective",
    "microbatch_group_size_per_vp_stage": "microbatch_group_size_per_virtual_pipeline_stage",
    # --pipeline-model-parallel-layout STRING (ARG; TC L1307-1357); no flag (None) means no layout
    "cpu_offloading": None,  # ARG L1950: --cpu-offloading-num-layers > 0 switches it on
    "cpu_offloading_weights": None,  # activations only is Megatron-LM's default
    # --hybrid-override-pattern is the deprecated alias (ARG L743-755 @d98e8a6)
    "hybrid_override_pattern": "hybrid_layer_pattern",
}


@dataclass(frozen=True, slots=True)
class NotExpressible:
    reason: str


# TransformerConfig fields Megatron-LM's arguments.py generates no flag for (its exclude list, ARG L2295-2330
# @d98e8a6): the command says so instead of printing a flag that does not parse
MEGATRON_NO_FLAG = {
    "activation_func_fp8_input_store": NotExpressible(
        "activation_func_fp8_input_store={value}: Megatron-LM has no flag for it (a TransformerConfig field its "
        "arguments.py leaves out); set it in the TransformerConfig the model provider builds, or launch with "
        "--format bridge / nemo / verl"),
}
# Booleans whose Megatron-LM default is True: False is written with this store_false flag
MEGATRON_FALSE_FLAG = {"add_bias_linear": "--disable-bias-linear",
                       "gradient_accumulation_fusion": "--no-gradient-accumulation-fusion",
                       "overlap_p2p_comm": "--no-overlap-p2p-communication",
                       "apply_rope_fusion": "--no-rope-fusion"}
# Booleans written as the negation of another flag
MEGATRON_NEGATED = {"share_embeddings_and_output_weights": "--untie-embeddings-and-output-weights",
                    "check_for_nan_in_loss_and_grad": "--no-check-for-nan-in-loss-and-grad",
                    "grad_reduce_in_fp32": "--grad-reduce-in-bf16"}
# Tuple settings whose flag takes one comma-joined word (``--window-size 128,0``, ARG ``tuple_type``)
MEGATRON_TUPLE_SEP = {"window_size": ","}
# Launch-only flags so that the command runs as printed: synthetic data and a tokenizer of the planned
# vocabulary (ARG ``_add_data_args`` / ``_add_tokenizer_args``; NullTokenizer's vocab is --vocab-size)
MEGATRON_RUN_FLAGS = ("--mock-data", "--tokenizer-type NullTokenizer")


def _megatron_flag(setting: Setting, settings: dict[str, Setting]) -> list[str]:
    name, value = setting.name, setting.value
    if name == "_note":
        return []
    layout = settings.get("pipeline_model_parallel_layout")
    if name in ("virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage") \
            and layout is not None and layout.value is not None:
        return []  # the layout string implies the virtual size; Megatron-LM refuses both (ARG L927-935 @d98e8a6)
    if name == "virtual_pipeline_model_parallel_size" and settings["num_layers_per_virtual_pipeline_stage"].value:
        return []  # the even split is written as layers per virtual stage
    pattern = settings.get("hybrid_override_pattern")
    if name == "virtual_pipeline_model_parallel_size" and pattern is not None and "|" in str(pattern.value):
        return []  # derived from the pattern's | segments (ARG L815-824, L847-860)
    if name == "num_query_groups":  # GQA needs its switch; MHA is the default
        heads = settings["num_attention_heads"].value
        return [] if value == heads else ["--group-query-attention", f"--num-query-groups {value}"]
    if name == "cpu_offloading_num_layers" and not value:
        return []
    if name in MEGATRON_NO_FLAG:  # said in the command's header (megatron_command)
        return []
    if name == "bias_activation_fusion":  # --no-bias-swiglu/gelu-fusion (training/argument_utils.py L314-319)
        gated = settings.get("gated_linear_unit")
        return [] if value else ["--no-bias-swiglu-fusion" if gated is not None and gated.value
                                 else "--no-bias-gelu-fusion"]
    if name in MEGATRON_NEGATED:
        return [] if value else [MEGATRON_NEGATED[name]]
    if name in MEGATRON_FALSE_FLAG:
        return [] if value else [MEGATRON_FALSE_FLAG[name]]
    dest = MEGATRON_DEST.get(name, name)
    if dest is None or value is None or value is False:
        return []
    flag = "--" + dest.replace("_", "-")
    if value is True:
        return [flag]
    if isinstance(value, tuple):  # nargs '+' (recompute modules), or a comma pair (ARG ``tuple_type``)
        sep = MEGATRON_TUPLE_SEP.get(name, " ")
        return [flag + " " + sep.join(shlex.quote(str(v)) for v in value)]
    if isinstance(value, list):  # a per-layer list (ARG ``la_freq_type`` / ``no_rope_freq_type`` parse it)
        return [flag + " " + shlex.quote("[" + ",".join(map(str, value)) + "]")]
    return [f"{flag} {shlex.quote(str(value))}"]


def megatron_flag_list(settings: list[Setting]) -> list[str]:
    """Every non-environment setting as Megatron-LM flags, in order."""
    by_name = {s.name: s for s in settings}
    return [f for s in settings if s.group != "env" for f in _megatron_flag(s, by_name)]


def _native_loss(setting: Setting) -> Setting:
    """Megatron-LM refuses ``--cross-entropy-fusion-impl te`` (arguments.py L1697-1702, since Megatron-LM#5115):
    a plan costed with TE's loss launches Megatron-Core's native one there, and the command says what that costs."""
    if setting.name != "cross_entropy_fusion_impl" or setting.value != "te":
        return setting
    return Setting(setting.name, "native", setting.group,
                   "the plan was costed with the TE fused loss; Megatron-LM rejects --cross-entropy-fusion-impl te "
                   "(arguments.py L1697-1702), so this launches the native fused loss: fp32 logits on the last "
                   "stage and 28 B of HBM traffic a logit (estimate --cross-entropy native prices it); the config "
                   "formats (bridge, nemo, verl) keep TE's")


def megatron_command(settings: list[Setting], cluster: Cluster) -> str:
    """A ``torchrun ... pretrain_gpt.py`` (hybrid models: ``pretrain_hybrid.py``) command; environment
    variables go before ``torchrun``."""
    settings = [_native_loss(s) for s in settings]
    env = [f"{s.name}={s.value}" for s in settings if s.group == "env"]
    flags = megatron_flag_list(settings) + list(MEGATRON_RUN_FLAGS)
    per_node = min(cluster.gpus_per_node, cluster.num_gpus)
    # a hybrid model trains with pretrain_hybrid.py (pretrain_mamba.py is its deprecated wrapper @d98e8a6)
    script = "pretrain_hybrid.py" if any(s.name == "hybrid_override_pattern" for s in settings) else "pretrain_gpt.py"
    launcher = (f"torchrun --nproc-per-node {per_node} --nnodes {cluster.num_nodes} --node-rank ${{NODE_RANK:-0}} "
                f"--master-addr ${{MASTER_ADDR:-localhost}} --master-port ${{MASTER_PORT:-6000}} {script}")
    header = [f"# Megatron-LM @ {MEGATRON_LM_COMMIT[:8]}: run from the Megatron-LM checkout on every node "
              f"(NODE_RANK 0..{cluster.num_nodes - 1}).",
              "# --mock-data and NullTokenizer make it run as is; for real data add --data-path and a tokenizer of "
              "the same vocabulary, plus --lr and --train-iters (the plan does not depend on them)."]
    lines = [" ".join(env + [launcher])] + ["  " + f for f in flags]
    header += [f"# not expressible in megatron: {MEGATRON_NO_FLAG[s.name].reason.replace('{value}', str(s.value))}"
               for s in settings if s.name in MEGATRON_NO_FLAG and s.value not in (None, False, 0)]
    return "\n".join(header + _notes(settings) + [" \\\n".join(lines)])


# ----------------------------------------------------------------------------- config overrides
_MAX_POS = NotExpressible("max_position_embeddings (positions are sized by seq_length)")
_SWIGLU = NotExpressible("the activation function (a callable): the recipe must build SiLU for gated_linear_unit")
_SQUARED_RELU = NotExpressible("the activation function (a callable): the recipe must set activation_func to "
                               "megatron.core.activations.squared_relu (as Megatron-Bridge's nemotron bridge does)")

# Optimizer CPU offload settings (cli/launch.py optimizer_offload_settings): fields of Megatron-Core's
# OptimizerConfig in every config-based format
OPTIMIZER_OFFLOAD_FIELDS = ("optimizer_cpu_offload", "optimizer_offload_fraction", "use_precision_aware_optimizer",
                            "overlap_cpu_optimizer_d2h_h2d")
# The precision-aware optimizer's dtypes, torch.dtype fields of OptimizerConfig: Megatron-Bridge turns an override's
# word back into the dtype (training/utils/omegaconf_utils.py L498-503 @v0.6.0, utils/activation_map.py DTYPE_MAP:
# fp32 / fp16 / bf16 / fp8); NeMo-Run's and verl's overrides were not checked to, so those formats say so
ADAM_DTYPE_FIELDS = ("exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype")
_ADAM_DTYPES = {name: NotExpressible(f"{name}={{value}}: a torch.dtype of OptimizerConfig, which this format's "
                                     "override was not checked to convert; set it in the recipe's optimizer config, "
                                     "or launch with --format megatron or bridge")
                for name in ADAM_DTYPE_FIELDS}
# Megatron-Bridge v0.6.x release: ConfigContainer paths (``training/config.py``; docs
# ``megatron-lm-to-megatron-bridge.md`` key table); unlisted model / layout / memory / kernel settings
# are ``model.<name>``
BRIDGE = {
    "max_position_embeddings": _MAX_POS,
    "num_layers_per_virtual_pipeline_stage": None,
    "micro_batch_size": "train.micro_batch_size", "global_batch_size": "train.global_batch_size",
    "seq_length": ("model.seq_length", "dataset.seq_length"),
    "use_distributed_optimizer": ("optimizer.use_distributed_optimizer", "ddp.use_distributed_optimizer"),
    "overlap_grad_reduce": "ddp.overlap_grad_reduce", "overlap_param_gather": "ddp.overlap_param_gather",
    # Megatron-Bridge skills/nemo-mbridge-perf-megatron-fsdp "Enablement"
    "use_megatron_fsdp": ("dist.use_megatron_fsdp", "ddp.use_megatron_fsdp"),
    "data_parallel_sharding_strategy": "ddp.data_parallel_sharding_strategy",
    "average_in_collective": "ddp.average_in_collective",
    "num_distributed_optimizer_instances": "ddp.num_distributed_optimizer_instances",
    # Bridge asserts the NaN check off under a full-iteration graph (training/config.py L1508-1512 @067f987)
    "check_for_nan_in_loss_and_grad": "rerun_state_machine.check_for_nan_in_loss",
    "ckpt_format": "checkpoint.ckpt_format",
    "grad_reduce_in_fp32": "mixed_precision.grad_reduce_in_fp32",
    "bf16": "mixed_precision.bf16", "fp8": "mixed_precision.fp8", "fp8_recipe": "mixed_precision.fp8_recipe",
    "fp8_param_gather": "mixed_precision.fp8_param_gather",
    # MixedPrecisionConfig field, passed on to the DDP and optimizer configs (training/mixed_precision.py L75 @v0.6.0)
    "reuse_grad_buf_for_mxfp8_param_ag": "mixed_precision.reuse_grad_buf_for_mxfp8_param_ag",
    "optimizer": "optimizer.optimizer",  # OptimizerConfig.optimizer (megatron/core/optimizer/optimizer_config.py)
    # MixedPrecisionConfig's NVFP4 fields (docs/training/mixed-precision.md "NVFP4 Configuration Parameters")
    "fp4": "mixed_precision.fp4", "fp4_recipe": "mixed_precision.fp4_recipe",
    "fp4_param": "mixed_precision.fp4_param_gather",
    **{name: f"mixed_precision.{name}" for name in ("first_last_layers_bf16", "num_layers_at_start_in_bf16",
                                                     "num_layers_at_end_in_bf16")},
    # ``model.quant_recipe`` is a RecipeConfig object (perf_recipes/nemotronh/*.py load_quantization_recipe)
    "te_precision_config_file": NotExpressible(
        "te_precision_config_file={value}: Bridge takes the recipe as an object, not an override; set "
        "cfg.model.quant_recipe = load_quantization_recipe('{value}') in the recipe"),
    "CUDA_DEVICE_MAX_CONNECTIONS": "env",
    # optimizer CPU offload: OptimizerConfig fields (megatron/core/optimizer/optimizer_config.py)
    **{name: f"optimizer.{name}" for name in OPTIMIZER_OFFLOAD_FIELDS + ADAM_DTYPE_FIELDS},
}
# Megatron-Bridge main: GPT-level fields of ``GPTModelConfig`` stay on ``model``; the rest of the model
# settings move under ``model.transformer``
# Megatron-Core @d98e8a6 has no TransformerConfig field for the hybrid pattern (``--hybrid-layer-pattern`` is a
# Megatron-LM argument read by the hybrid model builder): where Bridge main keeps it was not checked
_HYBRID_MAIN = NotExpressible("hybrid_override_pattern (not a TransformerConfig field at Megatron-Core main; "
                              "set the pattern in the hybrid recipe)")
BRIDGE_MAIN_GPT_FIELDS = ("vocab_size", "make_vocab_size_divisible_by", "share_embeddings_and_output_weights",
                          "position_embedding_type", "seq_length")

# NeMo 2: MegatronStrategy fields (``megatron_strategy.py`` L123-133) -> trainer.strategy
NEMO_STRATEGY = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
                 "context_parallel_size", "sequence_parallel", "expert_model_parallel_size",
                 "expert_tensor_parallel_size", "num_layers_in_first_pipeline_stage",
                 "num_layers_in_last_pipeline_stage", "account_for_embedding_in_pipeline_split",
                 "account_for_loss_in_pipeline_split", "pipeline_model_parallel_layout")
NEMO = {
    **{name: f"trainer.strategy.{name}" for name in NEMO_STRATEGY},
    "max_position_embeddings": _MAX_POS,
    "num_layers_per_virtual_pipeline_stage": None,
    "micro_batch_size": "data.micro_batch_size", "global_batch_size": "data.global_batch_size",
    "seq_length": ("data.seq_length", "model.config.seq_length"),
    "use_distributed_optimizer": ("optim.config.use_distributed_optimizer",
                                  "trainer.strategy.ddp.use_distributed_optimizer"),
    "overlap_grad_reduce": "trainer.strategy.ddp.overlap_grad_reduce",
    "overlap_param_gather": "trainer.strategy.ddp.overlap_param_gather",
    "use_megatron_fsdp": "trainer.strategy.ddp.use_megatron_fsdp",
    "data_parallel_sharding_strategy": "trainer.strategy.ddp.data_parallel_sharding_strategy",
    "average_in_collective": "trainer.strategy.ddp.average_in_collective",
    # the instances' partial DP groups are made by initialize_model_parallel (PS L982-1000); whether NeMo 2's
    # strategy passes the DDP field on to it was not checked
    "num_distributed_optimizer_instances": NotExpressible(
        "num_distributed_optimizer_instances={value}: not checked in NeMo 2 (its parallel-state set-up must create "
        "the partial distributed-optimizer groups); use the megatron or bridge format"),
    "ckpt_format": NotExpressible("ckpt_format: Megatron-FSDP checkpoints are written by NeMo's own checkpoint IO"),
    # whether NeMo 2's Megatron-Core and trainer loop run a full-iteration graph was not checked
    "cuda_graph_impl": NotExpressible("cuda_graph_impl={value}: not checked in NeMo 2; use the megatron or bridge "
                                      "format"),
    "check_for_nan_in_loss_and_grad": None,  # goes with cuda_graph_impl
    # a ModelParallelConfig field of the model config; whether NeMo 2's strategy keeps it was not checked
    "microbatch_group_size_per_vp_stage": NotExpressible(
        "microbatch_group_size_per_vp_stage={value}: not checked in NeMo 2; use the megatron or bridge format"),
    # NeMo-Run's TypeParser has no parser for Tuple[int, int] (cli_parser.py TypeParser.parse, "Unsupported type")
    "window_size": NotExpressible("window_size (a (left, right) tuple NeMo-Run's CLI cannot parse): the recipe "
                                  "must set window_size={value}"),
    # NeMo 2's MegatronStrategy builds the parallel groups without hierarchical CP sizes (no such field in
    # nemo/lightning @8cfedd72), so a2a+p2p has no groups to run on
    "hierarchical_context_parallel_sizes": NotExpressible(
        "hierarchical_context_parallel_sizes={value}: NeMo 2's MegatronStrategy creates no hierarchical CP groups; "
        "use cp_comm_type a2a or p2p"),
    # MegatronMixedPrecision (plugins/mixed_precision.py L104-132)
    "grad_reduce_in_fp32": ("trainer.plugins.grad_reduce_in_fp32", "trainer.strategy.ddp.grad_reduce_in_fp32"),
    "bf16": None, "fp8": "trainer.plugins.fp8", "fp8_recipe": "trainer.plugins.fp8_recipe",
    "fp8_param_gather": "trainer.plugins.fp8_param_gather",
    "reuse_grad_buf_for_mxfp8_param_ag": NotExpressible(
        "reuse_grad_buf_for_mxfp8_param_ag (MXFP8 primary weights gathered through the gradient buffer, as costed): "
        "not checked in NeMo 2's MegatronMixedPrecision; without it Megatron-Core keeps a separate parameter buffer; "
        "use the megatron or bridge format"),
    # NeMo 2's MegatronMixedPrecision plugin: its NVFP4 arguments were not checked
    "fp4": NotExpressible("fp4={value} (NVFP4): not checked in NeMo 2's MegatronMixedPrecision; use the megatron "
                          "or bridge format"),
    "fp4_recipe": None, "fp4_param": None,  # go with fp4
    "optimizer": "optim.config.optimizer",  # MegatronOptimizerModule(config=OptimizerConfig(optimizer=...))
    "first_last_layers_bf16": NotExpressible("first_last_layers_bf16 (layers kept in bf16): not checked in NeMo 2's "
                                             "MegatronMixedPrecision; use the megatron or bridge format"),
    "num_layers_at_start_in_bf16": None, "num_layers_at_end_in_bf16": None,  # go with first_last_layers_bf16
    "te_precision_config_file": NotExpressible("te_precision_config_file={value} (per-module precision): not "
                                               "checked in NeMo 2; use the megatron format"),
    "CUDA_DEVICE_MAX_CONNECTIONS": "env",
    # MegatronOptimizerModule(config=OptimizerConfig(...)): the recipe's optim.config
    **{name: f"optim.config.{name}" for name in OPTIMIZER_OFFLOAD_FIELDS}, **_ADAM_DTYPES,
}

# verl: per-role Megatron engine keys (engine/megatron.yaml); the rest go to override_transformer_config
VERL_ENGINE = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
               "sequence_parallel", "use_distributed_optimizer")
VERL_ROLES = ("actor_rollout_ref.actor.megatron", "actor_rollout_ref.ref.megatron", "critic.megatron")
VERL_MODEL = NotExpressible("the architecture: verl reads it from actor_rollout_ref.model.path (HF config.json); "
                            "point it at the planned model")
VERL = {
    "num_layers_per_virtual_pipeline_stage": None,
    "te_precision_config_file": NotExpressible("te_precision_config_file={value} (per-module precision): verl's "
                                               "engine was not checked for quant_recipe; use the megatron format"),
    "micro_batch_size": ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
                         "critic.ppo_micro_batch_size_per_gpu"),
    # ppo_mini_batch_size counts prompts; verl multiplies it by rollout.n (dp_actor / megatron_actor)
    "global_batch_size": ("actor_rollout_ref.actor.ppo_mini_batch_size", "critic.ppo_mini_batch_size"),
    "seq_length": NotExpressible("seq_length: a verl sequence is data.max_prompt_length + data.max_response_length; "
                                 "keep their sum at the planned length"),
    "overlap_grad_reduce": "override_ddp_config.overlap_grad_reduce",
    "overlap_param_gather": "override_ddp_config.overlap_param_gather",
    "use_megatron_fsdp": "override_ddp_config.use_megatron_fsdp",
    "data_parallel_sharding_strategy": "override_ddp_config.data_parallel_sharding_strategy",
    "average_in_collective": "override_ddp_config.average_in_collective",
    "grad_reduce_in_fp32": "override_ddp_config.grad_reduce_in_fp32",
    "num_distributed_optimizer_instances": NotExpressible(
        "num_distributed_optimizer_instances={value}: not checked in verl (its engine initialises Megatron's "
        "parallel state itself, and the partial distributed-optimizer groups are made there); use the megatron "
        "or bridge format"),
    "ckpt_format": NotExpressible("ckpt_format: verl writes its own checkpoints"),
    "cuda_graph_impl": NotExpressible("cuda_graph_impl={value}: not checked in verl (its engine runs its own "
                                      "training loop); use the megatron or bridge format"),
    "check_for_nan_in_loss_and_grad": None,  # goes with cuda_graph_impl
    "microbatch_group_size_per_vp_stage": NotExpressible(
        "microbatch_group_size_per_vp_stage={value}: not checked in verl (its engine runs its own schedule calls); "
        "use the megatron or bridge format"),
    "bf16": None,  # megatron.dtype: bfloat16 is verl's default
    "fp8_param_gather": NotExpressible("fp8_param_gather (FP8 primary weights): no verl Megatron engine key"),
    "reuse_grad_buf_for_mxfp8_param_ag": None,  # goes with fp8_param_gather
    "fp4_param": NotExpressible("fp4_param (NVFP4 primary weights): no verl Megatron engine key"),
    "optimizer": NotExpressible("optimizer={value}: not checked in verl's Megatron optimizer config; use the "
                                "megatron or bridge format"),
    # verl's engine initialises Megatron's parallel state without hierarchical CP sizes (none in verl @b178a3cd)
    "hierarchical_context_parallel_sizes": NotExpressible(
        "hierarchical_context_parallel_sizes={value}: verl's Megatron engine creates no hierarchical CP groups; "
        "use cp_comm_type a2a or p2p"),
    "CUDA_DEVICE_MAX_CONNECTIONS": "env",
    # verl's Megatron optimizer builds OptimizerConfig from optim.* plus optim.override_optimizer_config
    # (verl workers/config/optimizer.py McoreOptimizerConfig); '++' adds the key to that dict
    **{name: tuple(f"++{role}.optim.override_optimizer_config.{name}" for role in ("actor_rollout_ref.actor", "critic"))
       for name in OPTIMIZER_OFFLOAD_FIELDS}, **_ADAM_DTYPES,
}
# Where a recipe's own overlap object overrides the model field (Bridge ``comm_overlap.py`` L434-451
# copies CommOverlapConfig onto the model; NeMo's MegatronCommOverlapCallback does the same)
OVERLAP_OWNER = {"bridge": "comm_overlap (CommOverlapConfig)", "bridge-main": "comm_overlap (CommOverlapConfig)",
                 "nemo": "a MegatronCommOverlapCallback in trainer.callbacks", "verl": None}
# Derived by the target from other settings (the even-VPP layer count: from the VPP size), so never written
DERIVED = {"num_layers_per_virtual_pipeline_stage"}


def _value(fmt: str, value: object) -> str:
    """One value in the target's override syntax."""
    nemo = fmt == "nemo"
    if value is None:
        return "None" if nemo else "null"
    if isinstance(value, bool):
        return ("True" if value else "False") if nemo else ("true" if value else "false")
    if isinstance(value, (tuple, list)):
        if nemo:  # a Python literal: strings quoted, numbers bare
            return shlex.quote("[" + ", ".join(json.dumps(v) for v in value) + "]")
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, str) and value.startswith("("):  # moe_layer_freq list expression
        return _layer_freq_list(value, fmt)
    if isinstance(value, str) and re.search(r"[^A-Za-z0-9_.\-]", value):
        # e.g. a pipeline layout string "Et*3|(tt|)*29,m|L": a quoted string for Hydra / NeMo-Run, and
        # shell-quoted so that | ( ) * reach them as written
        return shlex.quote(json.dumps(value))
    return str(value)


def _layer_freq_list(expr: str, fmt: str) -> str:
    """Megatron's ``([0]*3+[1]*58)`` as a plain list literal, which Hydra and NeMo-Run both parse."""
    bits: list[int] = []
    for run in expr.strip("()").split("+"):
        bit, count = run.split("*")
        bits += [int(bit.strip("[]"))] * int(count)
    return ("'[" + ", ".join(map(str, bits)) + "]'") if fmt == "nemo" else "[" + ",".join(map(str, bits)) + "]"


def _target(fmt: str, setting: Setting) -> object:
    """The table entry of ``setting`` in ``fmt``: key(s), ``NotExpressible`` or None (omit)."""
    name = setting.name
    if fmt == "verl" and setting.group == "model":
        return VERL_MODEL
    if name == "squared_relu":  # Megatron-LM's flag sets TransformerConfig.activation_func (a callable)
        return _SQUARED_RELU
    if name == "gated_linear_unit" and setting.value:
        return (_SWIGLU, f"model.{name}" if fmt == "bridge" else
                f"model.transformer.{name}" if fmt == "bridge-main" else f"model.config.{name}")
    if fmt == "bridge-main" and name == "hybrid_override_pattern":
        return _HYBRID_MAIN
    if fmt in ("bridge", "bridge-main"):
        key = BRIDGE.get(name, f"model.{name}")
        if fmt == "bridge-main" and isinstance(key, str) and key.startswith("model.") \
                and name not in BRIDGE_MAIN_GPT_FIELDS:
            key = f"model.transformer.{name}"
        if fmt == "bridge-main" and isinstance(key, tuple):
            key = tuple(k if not k.startswith("model.") or name in BRIDGE_MAIN_GPT_FIELDS
                        else f"model.transformer.{name}" for k in key)
        return key
    if fmt == "nemo":
        return NEMO.get(name, f"model.config.{name}")
    if fmt == "verl":
        if name in VERL:
            return VERL[name]
        if name in VERL_ENGINE:
            return tuple(f"{role}.{name}" for role in VERL_ROLES)
        return f"override_transformer_config.{name}"
    raise ValueError(fmt)


def _keys(fmt: str, target: object) -> list[str]:
    keys = list(target) if isinstance(target, tuple) else [target]
    if fmt != "verl":
        return keys
    out = []
    for key in keys:  # verl: the override dicts exist under every role
        if key.startswith(("override_transformer_config.", "override_ddp_config.")):
            out += [f"++{role}.{key}" for role in VERL_ROLES]
        else:
            out.append(key)
    return out


def overrides_text(fmt: str, settings: list[Setting]) -> str:
    """Override lines of ``fmt`` below a header: target and version, environment, what is not
    expressible, which recipe object owns the overlaps, and the settings' notes."""
    lines: list[str] = []
    unexpressible: list[str] = []
    env: list[str] = []
    rope = any(s.name == "position_embedding_type" and s.value != "learned_absolute" for s in settings)
    verl_model_noted = False
    for setting in settings:
        if setting.name == "_note":
            continue
        target = _target(fmt, setting)
        targets = target if isinstance(target, tuple) else (target,)
        for t in targets:
            if t is None:
                continue
            if t == "env":
                env.append(f"{setting.name}={setting.value}")
            elif isinstance(t, NotExpressible):
                if t is _MAX_POS and rope:
                    continue  # only learned absolute positions are sized by it
                if setting.group not in ("model", "batch") and setting.value in (None, False, 0):
                    continue  # a knob that is off needs nothing from the target
                if t is VERL_MODEL:
                    if verl_model_noted:
                        continue
                    verl_model_noted = True
                unexpressible.append(t.reason.replace("{value}", str(setting.value)))
            else:
                lines += [f"{key}={_value(fmt, setting.value)}" for key in _keys(fmt, t)]
    header = [HEADERS[fmt]]
    if env:
        header.append(f"# environment: export {' '.join(env)} before launching")
    header += [f"# not expressible in {fmt}: {reason}" for reason in unexpressible]
    if fmt in OVERLAP_OWNER:
        owner = OVERLAP_OWNER[fmt]
        for name in ("tp_comm_overlap", "overlap_moe_expert_parallel_comm", "defer_embedding_wgrad_compute",
                     "wgrad_deferral_limit"):
            setting = next((s for s in settings if s.name == name), None)
            if setting is not None and owner:
                header.append(f"# when the recipe sets {owner}, it decides {name}: set it there to "
                              f"{_value(fmt, setting.value)} too")
    return "\n".join(header + _notes(settings) + [" \\\n".join(lines)])


HEADERS = {
    "bridge": "# Megatron-Bridge v0.6.x release (flat model provider): overrides for "
              "scripts/training/run_recipe.py --recipe <this model's recipe>",
    "bridge-main": "# Megatron-Bridge main @ 067f987d (model.transformer nests the TransformerConfig): overrides "
                   "for scripts/training/run_recipe.py --recipe <this model's recipe>",
    "nemo": "# NeMo 2 (NeMo-Run CLI): overrides for nemo llm pretrain --factory <this model's recipe>; "
            "quote as printed",
    "verl": "# verl (Hydra): overrides for python -m verl.trainer.main_ppo --config-name ppo_megatron_trainer\n"
            "# ppo_mini_batch_size counts prompts and verl multiplies it by actor_rollout_ref.rollout.n: "
            "with n > 1 divide it by n",
}


def _notes(settings: list[Setting]) -> list[str]:
    return [f"# note: {s.note}" for s in settings if s.note]


def render(fmt: str, settings: list[Setting], cluster: Cluster, layout: Layout) -> str:
    """The launch text of ``settings`` in ``fmt``; NeMo also gets its trainer size and FSDP switch."""
    if fmt == "megatron":
        return megatron_command(settings, cluster)
    if fmt in FORMATS:
        extra = []
        if fmt == "nemo":
            extra = [Setting("trainer.num_nodes", cluster.num_nodes, "cluster"),
                     Setting("trainer.devices", min(cluster.gpus_per_node, cluster.num_gpus), "cluster")]
            if layout.fsdp:
                extra.append(Setting("trainer.strategy.fsdp", "megatron", "cluster"))
        text = overrides_text(fmt, settings)
        if extra:
            text += " \\\n" + " \\\n".join(f"{s.name}={s.value}" for s in extra)
        return text
    raise MegasolveError(field="--format", value=fmt, rule=f"must be one of {', '.join(FORMATS)}", fix="pick one")
