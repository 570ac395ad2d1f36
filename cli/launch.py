"""Launch settings for one planned layout, in the syntax each training stack parses as is.

The plan is first written once as an ordered list of ``Setting``s named after Megatron-Core's config
fields (``TransformerConfig`` / ``ModelParallelConfig`` / ``DistributedDataParallelConfig`` and the
training arguments), the vocabulary all four targets share; ``cli/launch_formats.py`` then maps each
name onto one target with a one-line table entry per format. A setting a target cannot express becomes
a ``# not expressible in <target>: ...`` comment line, never a silently different plan.

Sources (``Megatron-LM`` = NVIDIA/Megatron-LM @ d98e8a64, 2026-08-22; ``ARG`` = its
``megatron/training/arguments.py``; ``TC`` = ``megatron/core/transformer/transformer_config.py``):

* every Megatron-LM flag below is one ``ARG`` defines (``tests/data/megatron_lm_arguments.json`` records
  all 838 option strings, dests, actions and defaults of that commit; ``tests/test_launch.py`` parses
  every ``--format megatron`` output with them);
* ``CUDA_DEVICE_MAX_CONNECTIONS``: ARG L1452-1479 asserts it is ``1`` when TP > 1 or CP > 1 on a GPU
  before Blackwell (compute capability < 10) unless FSDP or the MoE EP overlap is on; ARG L1048 and
  L1166 assert it is not ``1`` with Torch-FSDP2 / Megatron-FSDP ("requires ... > 1 or unset"); the
  warning at L1466-1473 names 32 as the larger value;
* ``--cross-entropy-fusion-impl te`` is rejected by ARG L1697-1702 ("Transformer Engine cross entropy
  loss fusion is disabled due to stability issues", since Megatron-LM#5115, 2026-06), so the megatron format
  launches a plan costed with the TE loss with ``native`` and says so; the config formats keep ``te``
  (Megatron-Core's TransformerConfig takes it, and Megatron-Bridge's performance scripts set it).
"""

from __future__ import annotations

from megasolve.cli.launch_formats import Setting, megatron_flag_list, render
from megasolve.cost.step import cp_a2a_size, layout_cp_comm_type
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import stage_layer_counts, stage_layer_ids
from megasolve.models.precision_recipe import recipe_text
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster

# GPUs of compute capability >= 10 (Blackwell): no CUDA_DEVICE_MAX_CONNECTIONS=1 requirement (ARG L1455)
BLACKWELL_PREFIXES = ("b200", "gb200", "b300", "gb300")
TE_PRECISION_FILE = "te_precision.yaml"  # the per-module precision recipe's file name in the exports
# CUDA_DEVICE_MAX_CONNECTIONS with FSDP: anything but 1 (ARG L1166); 32 is the value ARG L1472 names
FSDP_MAX_CONNECTIONS = 32


def moe_layer_freq_expr(pattern: tuple[int, ...]) -> int | str:
    """``--moe-layer-freq`` for a layer pattern: 1 when every layer is MoE, else Megatron's list
    expression (ARG ``moe_freq_type``: a string such as ``"([0]*3+[1]*58)"`` evaluated to a list).

    >>> moe_layer_freq_expr((1, 1, 1)), moe_layer_freq_expr((0, 0, 0, 1, 1)), moe_layer_freq_expr((1, 0, 1, 0))
    (1, '([0]*3+[1]*2)', '([1]*1+[0]*1+[1]*1+[0]*1)')
    """
    if all(pattern):
        return 1
    runs: list[list[int]] = []
    for bit in pattern:
        if runs and runs[-1][0] == bit:
            runs[-1][1] += 1
        else:
            runs.append([bit, 1])
    return "(" + "+".join(f"[{bit}]*{count}" for bit, count in runs) + ")"


def model_settings(spec: ModelSpec) -> list[Setting]:
    """The architecture as ``TransformerConfig`` / GPT model fields (DESIGN section 2 lists them)."""
    s = [("num_layers", spec.num_layers), ("hidden_size", spec.hidden_size),
         ("ffn_hidden_size", spec.ffn_hidden_size), ("num_attention_heads", spec.num_attention_heads)]
    if spec.mla is None:
        s += [("num_query_groups", spec.num_query_groups), ("kv_channels", spec.kv_channels)]
    s += [("vocab_size", spec.vocab_size), ("make_vocab_size_divisible_by", spec.make_vocab_size_divisible_by),
          ("max_position_embeddings", spec.max_position_embeddings), ("normalization", spec.normalization),
          ("gated_linear_unit", spec.swiglu), ("add_bias_linear", spec.add_bias_linear),
          ("add_qkv_bias", spec.add_qkv_bias), ("qk_layernorm", spec.qk_layernorm),
          ("position_embedding_type", spec.position_embedding_type),
          ("share_embeddings_and_output_weights", not spec.untie_embeddings_and_output_weights)]
    if spec.is_moe:
        moe = spec.moe
        s += [("num_moe_experts", moe.num_experts), ("moe_router_topk", moe.top_k),
              ("moe_ffn_hidden_size", moe.expert_ffn_hidden_size),
              ("moe_shared_expert_intermediate_size", moe.shared_expert_ffn_hidden_size or None),
              ("moe_shared_expert_gate", moe.shared_expert_gate),
              ("moe_layer_freq", moe_layer_freq_expr(moe.layer_pattern)),
              ("moe_latent_size", moe.latent_size)]
        if moe.router_num_groups > 1:  # group-limited routing (Bridge maps HF n_group / topk_group to these,
            # conversion/model_bridge.py L487): the dispatcher's traffic depends on it
            s += [("moe_router_num_groups", moe.router_num_groups), ("moe_router_group_topk", moe.router_group_topk)]
    if spec.mla is not None:
        mla = spec.mla
        s += [("multi_latent_attention", True), ("q_lora_rank", mla.q_lora_rank), ("kv_lora_rank", mla.kv_lora_rank),
              ("qk_head_dim", mla.qk_head_dim), ("qk_pos_emb_head_dim", mla.qk_pos_emb_head_dim),
              ("v_head_dim", mla.v_head_dim)]
    if spec.dsa is not None:  # DeepSeek Sparse Attention (TC L301-338 @d98e8a6; Megatron-Bridge glm5_bridge.py L130-141)
        dsa = spec.dsa
        s += [("experimental_attention_variant", "dsa"), ("dsa_indexer_n_heads", dsa.n_heads),
              ("dsa_indexer_head_dim", dsa.head_dim), ("dsa_indexer_topk", dsa.topk)]
        if dsa.topk_freq > 1:
            s += [("dsa_indexer_topk_freq", dsa.topk_freq), ("dsa_indexer_skip_topk_offset", dsa.skip_topk_offset)]
        if dsa.loss_coeff:
            s += [("dsa_indexer_loss_coeff", dsa.loss_coeff), ("dsa_indexer_use_sparse_loss", dsa.sparse_loss)]
        # the fused kernels the memory estimate assumes (the default "none" runs the PyTorch path, whose
        # s x s x heads fp32 score tensors are not modelled); Megatron-Bridge's GLM-5 recipes set cudnn
        s.append(("dsa_kernel_backend", "cudnn"))
        s.append(("apply_rope_fusion", False))  # "RoPE fusion is not supported for DSAttention" (TC L3162-3163)
    if spec.activation == "squared_relu":  # --squared-relu (ARG L2448, argument_utils.py L320-322 @d98e8a6)
        s.append(("squared_relu", True))
    if spec.mtp_num_layers:
        s.append(("mtp_num_layers", spec.mtp_num_layers))
        if spec.mtp_use_repeated_layer:
            s.append(("mtp_use_repeated_layer", True))
    out = [Setting(name, value, "model") for name, value in s]
    if spec.activation == "xielu":
        out.append(Setting("_note", None, "model", "the MLP activation is xIELU (Apertus): upstream Megatron-LM has no "
                           "flag for it (swiss-ai/Megatron-LM's --xielu); the plan costs it as a non-gated MLP's"))
    return out + hybrid_settings(spec)


def hybrid_settings(spec: ModelSpec) -> list[Setting]:
    """Hybrid layers as Megatron-Core config fields (issue 15).

    * ``MambaModel`` / ``HybridModel``: the pattern (``hybrid_override_pattern``; Megatron-LM @d98e8a6
      writes it as ``--hybrid-layer-pattern`` and runs ``pretrain_hybrid.py``: ``--hybrid-override-pattern``
      and ``pretrain_mamba.py`` are its deprecated aliases, ``arguments.py`` L743-755) and the Mamba-2
      mixer's ``mamba_state_dim`` / ``mamba_head_dim`` / ``mamba_num_groups`` / ``mamba_num_heads`` (TC
      L1259-1270, flags through ``ArgumentGroupFactory(TransformerConfig)``, ARG L2373).
    * gated DeltaNet in a GPT stack (Qwen3-Next): ``experimental_attention_variant gated_delta_net`` (TC
      L301), ``linear_attention_freq`` (an int N: every N-th layer softmax attention, else the 0/1 list as
      a Python expression; ARG ``la_freq_type``, TRN L1172-1186), the ``linear_*`` head sizes and conv
      kernel (TC L363-382), ``attention_output_gate`` (TC L278).

    >>> from megasolve.models.presets import load_preset
    >>> [(s.name, s.value) for s in hybrid_settings(load_preset("nemotron-h-8b"))][1:3]
    [('mamba_state_dim', 128), ('mamba_head_dim', 64)]
    >>> [(s.name, s.value) for s in hybrid_settings(load_preset("qwen3-next-80b-a3b"))][:2]
    [('experimental_attention_variant', 'gated_delta_net'), ('linear_attention_freq', 4)]
    """
    s: list[Setting] = []
    if spec.is_hybrid:
        m = spec.mamba
        s.append(Setting("hybrid_override_pattern", spec.hybrid_pattern, "model"))
        if m is not None:
            s += [Setting("mamba_state_dim", m.state_dim, "model"), Setting("mamba_head_dim", m.head_dim, "model"),
                  Setting("mamba_num_groups", m.num_groups, "model"), Setting("mamba_num_heads", m.num_heads, "model")]
        if not spec.swiglu and not spec.activation:
            s.append(Setting("_note", None, "model",
                             "the MLP activation is not part of the plan (not SwiGLU, and the config names no squared "
                             "ReLU): Megatron-LM's default GeLU is launched; Nemotron-H's is --squared-relu"))
    pattern = spec.linear_attention_pattern
    if pattern is not None and any(pattern) and spec.gated_delta_net is not None:
        g = spec.gated_delta_net
        period = next((n for n in range(2, len(pattern) + 1)
                       if all(bool(v) == ((i + 1) % n != 0) for i, v in enumerate(pattern))), None)
        s += [Setting("experimental_attention_variant", "gated_delta_net", "model"),
              Setting("linear_attention_freq", period or moe_layer_freq_expr(pattern), "model"),
              Setting("linear_key_head_dim", g.key_head_dim, "model"),
              Setting("linear_value_head_dim", g.value_head_dim, "model"),
              Setting("linear_num_key_heads", g.num_key_heads, "model"),
              Setting("linear_num_value_heads", g.num_value_heads, "model"),
              Setting("linear_conv_kernel_dim", g.conv_kernel, "model")]
    if spec.attention_output_gate:
        s.append(Setting("attention_output_gate", True, "model"))
    return s


def _skip_freq(pattern: tuple[int, ...]) -> int | None:
    """The int N of ``--window-attn-skip-freq`` when every N-th layer (1-based) is full attention."""
    for n in range(2, len(pattern) + 1):
        if all(bool(v) == ((i + 1) % n != 0) for i, v in enumerate(pattern)):
            return n
    return None


def attention_settings(spec: ModelSpec, layout: Layout) -> list[Setting]:
    """Attention-variant ``TransformerConfig`` fields of ``spec`` (issue 15): ``window_size`` (TC L247,
    a (left, right) pair: ``--window-size W,0``), ``window_attn_skip_freq`` (TC L251: an int N, every N-th
    layer full, or the 0/1 list), ``no_rope_freq`` (TC L291), ``rotary_percent``, ``softmax_type
    learnable`` (sinks, TC L170), ``qk_l2_norm`` (the CP communication they need:
    ``context_parallel_settings``). Chunked attention (Llama 4) has no Megatron-Core training flag and
    is not exported.

    >>> from megasolve.models.presets import load_preset
    >>> [(s.name, s.value) for s in attention_settings(load_preset("gpt-oss-20b"), Layout(cp=2))][:3]
    [('window_size', (128, 0)), ('window_attn_skip_freq', 2), ('softmax_type', 'learnable')]
    """
    s: list[tuple[str, object]] = []
    if spec.window_size is not None:
        s.append(("window_size", (spec.window_size, 0)))
        if spec.window_pattern is not None:
            s.append(("window_attn_skip_freq", _skip_freq(spec.window_pattern) or list(spec.window_pattern)))
    if spec.softmax_type != "vanilla":
        s.append(("softmax_type", spec.softmax_type))
    if spec.no_rope_pattern is not None and any(spec.no_rope_pattern):
        period = next((n for n in range(1, spec.num_layers + 1) if spec.num_layers % n == 0 and all(
            bool(v) == ((i + 1) % n == 0) for i, v in enumerate(spec.no_rope_pattern))), None)
        s.append(("no_rope_freq", period or list(spec.no_rope_pattern)))
    if spec.rotary_percent != 1.0:
        s.append(("rotary_percent", spec.rotary_percent))
    if spec.qk_l2_norm:
        s.append(("qk_l2_norm", True))
    return [Setting(name, value, "model") for name, value in s]


def context_parallel_settings(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[Setting]:
    """With CP > 1, the ``cp_comm_type`` the plan was costed with (``cost/step.py``
    ``layout_cp_comm_type``; TC L1030-1047, ARG ``--cp-comm-type``), written even when it is Megatron's
    default ``p2p`` (a recipe may set another: NeMo's Mistral config sets ``a2a``), and for ``a2a+p2p``
    its ``hierarchical_context_parallel_sizes`` ``[A, cp/A]`` (MPC L103; ARG L580-585: required, product
    == cp; ``cost/step.py`` ``cp_a2a_size``).

    >>> from megasolve.models.presets import load_preset
    >>> spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=32, gpu="h100")
    >>> [(s.name, s.value) for s in context_parallel_settings(spec, cluster, Workload(cp_comm_type="a2a+p2p"),
    ...                                                       Layout(cp=16, dp=2))]
    [('cp_comm_type', 'a2a+p2p'), ('hierarchical_context_parallel_sizes', (8, 2))]
    """
    comm_type = layout_cp_comm_type(spec, cluster, workload, layout)
    if comm_type is None:
        return []
    out = [Setting("cp_comm_type", comm_type, "layout")]
    a2a = cp_a2a_size(spec, cluster, layout.tp, layout.cp) if comm_type == "a2a+p2p" else None
    if a2a is not None:
        out.append(Setting("hierarchical_context_parallel_sizes", (a2a, layout.cp // a2a), "layout",
                           f"a2a over {a2a} CP ranks inside the NVLink domain, p2p across {layout.cp // a2a}"))
    return out


def layout_settings(spec: ModelSpec, workload: Workload, layout: Layout) -> list[Setting]:
    """Parallel sizes, the pipeline split and the batch (``ModelParallelConfig``, TC L2296-2370 for the
    split). ``pipeline_model_parallel_layout``: the plan's layout string (``--pipeline-layout``), else
    reset: a recipe's layout string overrides first/last-stage counts (TC L1307-1324), so it must not
    survive. With a layout string the config formats still write the virtual size (TC L1340-1351: it must
    equal the layout's), as stages per rank, never as layers per virtual stage; Megatron-LM's flags leave it
    out (ARG L927-935: at most one of the layout and the two virtual-size flags; ``launch_formats.py``)."""
    s = [Setting("tensor_model_parallel_size", layout.tp, "layout"),
         Setting("pipeline_model_parallel_size", layout.pp, "layout"),
         Setting("virtual_pipeline_model_parallel_size", layout.vpp if layout.vpp > 1 else None, "layout"),
         Setting("num_layers_per_virtual_pipeline_stage", _layers_per_virtual_stage(spec, layout), "layout"),
         Setting("context_parallel_size", layout.cp, "layout")]
    if spec.is_moe:
        s += [Setting("expert_model_parallel_size", layout.ep, "layout"),
              Setting("expert_tensor_parallel_size", layout.etp, "layout")]
    s += [Setting("sequence_parallel", layout.sequence_parallel, "layout"),
          Setting("num_layers_in_first_pipeline_stage", layout.first_stage_layers, "layout"),
          Setting("num_layers_in_last_pipeline_stage", layout.last_stage_layers, "layout"),
          Setting("account_for_embedding_in_pipeline_split", layout.account_for_embedding, "layout"),
          Setting("account_for_loss_in_pipeline_split", layout.account_for_loss, "layout"),
          Setting("pipeline_model_parallel_layout", layout.pipeline_layout, "layout"),
          Setting("micro_batch_size", layout.mbs, "batch"),
          Setting("global_batch_size", workload.global_batch_size, "batch"),
          Setting("seq_length", workload.seq_length, "batch")]
    return s


def _layers_per_virtual_stage(spec: ModelSpec, layout: Layout) -> int | None:
    """Megatron-LM's even VPP flag ``--num-layers-per-virtual-pipeline-stage``; None when the split is
    uneven (then ``--num-virtual-stages-per-pipeline-rank``, ARG L954-956)."""
    uneven = layout.first_stage_layers is not None or layout.last_stage_layers is not None \
        or layout.account_for_embedding or layout.account_for_loss or layout.pipeline_layout is not None
    if layout.vpp == 1 or uneven:
        return None
    return stage_layer_counts(spec, layout)[0] // layout.vpp


def optimizer_settings(workload: Workload, layout: Layout) -> list[Setting]:
    """Distributed optimizer or Megatron-FSDP and the DP overlaps the cost model assumes (reference
    section 3: grad reduce and param gather overlapped). FSDP: Megatron-LM
    ``docs/discussions/megatron-fsdp-user-guide`` "Required Configurations" (``optim_grads_params``,
    no gradient-accumulation fusion, ``fsdp_dtensor`` checkpoints; ARG L1169 asserts the format)."""
    # --overlap-param-gather needs the distributed optimizer (ARG L1024-1029)
    dp_overlap = workload.dp_comm_overlap
    s = [Setting("use_distributed_optimizer", layout.distributed_optimizer, "optimizer"),
         Setting("overlap_grad_reduce", dp_overlap, "optimizer"),
         Setting("overlap_param_gather", dp_overlap and layout.distributed_optimizer and workload.param_gather_overlap,
                 "optimizer"),
         Setting("use_megatron_fsdp", layout.fsdp, "optimizer")]
    if layout.fsdp:
        # Megatron-Bridge skills/nemo-mbridge-perf-megatron-fsdp "Enablement": no averaging inside the
        # collective with FSDP (Megatron-LM's default; Bridge recipes turn it on)
        s += [Setting("data_parallel_sharding_strategy", "optim_grads_params", "optimizer"),
              Setting("average_in_collective", False, "optimizer"),
              Setting("gradient_accumulation_fusion", False, "optimizer"),
              Setting("ckpt_format", "fsdp_dtensor", "optimizer")]
    if workload.precision == "fp8" and workload.fp8_recipe == "mxfp8" and workload.fp8_param_gather \
            and layout.distributed_optimizer and not layout.fsdp:
        # MXFP8 primary weights gathered through the gradient buffer, as costed (Workload.param_bytes; no separate
        # parameter buffer): Megatron-Core warns that MXFP8 without it "will use significant amount additional GPU
        # memory" (optimizer_config.py L416-423 @d98e8a6); Megatron-LM turns it off itself under Megatron-FSDP (ARG L1137)
        s.append(Setting("reuse_grad_buf_for_mxfp8_param_ag", True, "optimizer"))
    if workload.dist_optimizer_instances > 1:  # DistributedDataParallelConfig field (the rules checked it)
        s.append(Setting("num_distributed_optimizer_instances", workload.dist_optimizer_instances, "optimizer"))
    if layout.fsdp:
        # Megatron-FSDP: the main-grad / reduction dtypes the estimate assumed. Releases before Megatron-LM adfe9e11d9
        # (2026-07-02) follow grad_reduce_in_fp32 instead of 'auto' (fp32 unless --grad-reduce-in-bf16), so it is
        # set to match: bf16 grads launch as bf16 on both
        s.append(Setting("grad_reduce_in_fp32", workload.fsdp_grad_bytes == 4, "optimizer"))
        for name, dtype in (("megatron_fsdp_main_grads_dtype", workload.fsdp_main_grads_dtype),
                            ("megatron_fsdp_grad_comm_dtype", workload.fsdp_grad_comm_dtype)):
            if dtype != "auto":  # ARG L3691-3699 @d98e8a6
                s.append(Setting(name, dtype, "optimizer"))
        return s
    # fp32 main grads and reduction unless --grad-reduce-in-bf16 (ARG L1205-1217)
    s.append(Setting("grad_reduce_in_fp32", not workload.grad_reduce_in_bf16, "optimizer"))
    if workload.precision_aware_optimizer:  # ARG L3667-3685; the optimizer offload writes the switch itself
        if not layout.optimizer_offload_fraction:
            s.append(Setting("use_precision_aware_optimizer", True, "optimizer"))
        s += [Setting(name, getattr(workload, name), "optimizer")
              for name in ("exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype") if getattr(workload, name) != "fp32"]
    return s


def memory_settings(layout: Layout) -> list[Setting]:
    """Recompute (TC L1926-1932: method and layer count only with ``full``) and activation offloading
    (TC L1884-1899, ``cpu_offloading_num_layers`` < layers, activations only)."""
    granularity = None if layout.recompute == "none" else layout.recompute
    s = [Setting("recompute_granularity", granularity, "memory")]
    if layout.recompute == "selective":
        s.append(Setting("recompute_modules", tuple(layout.recompute_modules or ("core_attn",)), "memory"))
    elif layout.recompute == "full":
        method = "uniform" if layout.recompute_num_layers is None else "block"
        s += [Setting("recompute_method", method, "memory"),
              Setting("recompute_num_layers", layout.recompute_num_layers or 1, "memory")]
    else:
        s += [Setting("recompute_method", None, "memory"), Setting("recompute_num_layers", None, "memory")]
    s += [Setting("cpu_offloading", layout.cpu_offload_layers > 0, "memory"),
          Setting("cpu_offloading_num_layers", layout.cpu_offload_layers, "memory")]
    if layout.cpu_offload_layers:
        s.append(Setting("cpu_offloading_weights", False, "memory"))
    return s + optimizer_offload_settings(layout)


def optimizer_offload_settings(layout: Layout) -> list[Setting]:
    """Optimizer CPU offload (``cost/offload.py``), written only when on: Megatron-LM ``arguments.py``
    requires ``--use-precision-aware-optimizer`` with ``--optimizer-cpu-offload`` ("Optimizer CPU offload
    check"); ``--overlap-cpu-optimizer-d2h-h2d`` overlaps the copies with the CPU step as the cost model
    assumes (``optimizer/cpu_offloading/README.md`` recommends it)."""
    if not layout.optimizer_offload_fraction:
        return []
    return [Setting("optimizer_cpu_offload", True, "memory"),
            Setting("optimizer_offload_fraction", layout.optimizer_offload_fraction, "memory"),
            Setting("use_precision_aware_optimizer", True, "memory"),
            Setting("overlap_cpu_optimizer_d2h_h2d", True, "memory")]


def precision_settings(workload: Workload) -> list[Setting]:
    """BF16 training, FP8 with its format and recipe (TC ``fp8`` / ``fp8_recipe``; ``hybrid`` = E4M3
    forward, E5M2 backward, the recipe of the calibration runs), NVFP4 (``e2m1``, recipe ``nvfp4``),
    FP8 / NVFP4 primary weights, MXFP8 output projection."""
    fp8, fp4 = workload.precision == "fp8", workload.precision == "fp4"
    s = [Setting("bf16", True, "precision"), Setting("fp8", "hybrid" if fp8 else None, "precision")]
    if fp8:  # fp8_recipe is not Optional in the configs: written only with FP8
        s.append(Setting("fp8_recipe", workload.fp8_recipe, "precision"))
    if fp4:  # NVFP4 (TC ``fp4`` / ``fp4_recipe`` / ``fp4_param``, L671-692 @d98e8a6): written only with FP4
        s += [Setting("fp4", "e2m1", "precision"), Setting("fp4_recipe", "nvfp4", "precision"),
              Setting("fp4_param", workload.fp8_param_gather, "precision")]
    if workload.optimizer != "adam":  # Megatron-LM's default is adam (ARG L2914): written only for Muon
        s.append(Setting("optimizer", workload.optimizer, "optimizer"))
    if any(workload.bf16_layers):  # TC first_last_layers_bf16 / num_layers_at_{start,end}_in_bf16 (L649-658)
        s += [Setting("first_last_layers_bf16", True, "precision"),
              Setting("num_layers_at_start_in_bf16", workload.num_layers_at_start_in_bf16, "precision"),
              Setting("num_layers_at_end_in_bf16", workload.num_layers_at_end_in_bf16, "precision")]
    if workload.module_precision and workload.quantized:  # --te-precision-config-file (ARG L2020)
        s.append(Setting("te_precision_config_file", TE_PRECISION_FILE, "precision",
                         f"write {TE_PRECISION_FILE} (the recipe the plan was costed with) as: "
                         + recipe_text(workload.module_precision, one_line=True)))
    return s + [Setting("fp8_param_gather", fp8 and workload.fp8_param_gather, "precision"),
                Setting("fp8_output_proj", workload.fp8_output_proj, "precision")]


def kernel_settings(spec: ModelSpec, workload: Workload) -> list[Setting]:
    """The fused loss (TC ``cross_entropy_loss_fusion`` / ``cross_entropy_fusion_impl``), the MoE
    dispatcher the cost model assumed (flex: DeepEP backend; grouped GEMM for the experts) and the CUDA
    graphs it was costed with."""
    fused = workload.cross_entropy != "unfused"
    impl = workload.cross_entropy.removesuffix("-bf16grad")  # TE's kernel of any release: one flag value
    s = [Setting("cross_entropy_loss_fusion", fused, "kernels")]
    if fused:  # cross_entropy_fusion_impl is not Optional in TransformerConfig (the megatron format launches TE's
        s.append(Setting("cross_entropy_fusion_impl", impl, "kernels"))  # as native: launch_formats.py)
    s += activation_settings(spec, workload)
    if workload.offload_modules:  # fine-grained activation offloading (TC L1320-1345)
        s += [Setting("fine_grained_activation_offloading", True, "memory"),
              Setting("offload_modules", tuple(workload.offload_modules), "memory")]
    if spec.is_moe:
        s += [Setting("moe_token_dispatcher_type", workload.moe_dispatcher, "kernels"),
              Setting("moe_grouped_gemm", True, "kernels")]
        if workload.moe_dispatcher == "flex":
            s.append(Setting("moe_flex_dispatcher_backend", "deepep", "kernels"))
        if workload.moe_expert_capacity_factor is not None:  # token dropping (TC L686-705)
            s += [Setting("moe_expert_capacity_factor", workload.moe_expert_capacity_factor, "kernels"),
                  Setting("moe_pad_expert_input_to_capacity", workload.moe_pad_expert_input_to_capacity, "kernels"),
                  Setting("moe_token_drop_policy", workload.moe_token_drop_policy, "kernels")]
        if workload.moe_router_padding_for_fp8:  # TC L594-596
            s.append(Setting("moe_router_padding_for_fp8", True, "kernels"))
    if workload.cuda_graph_impl != "none":  # TC L1075-1088; full_iteration needs the NaN check off (ARG L1235)
        s.append(Setting("cuda_graph_impl", workload.cuda_graph_impl, "kernels"))
        if workload.cuda_graph_impl == "full_iteration":
            s.append(Setting("check_for_nan_in_loss_and_grad", False, "kernels"))
    return s


def activation_settings(spec: ModelSpec, workload: Workload) -> list[Setting]:
    """The MLP activation kernel the memory was costed with (``Workload.activation_fusion``;
    ``argument_utils.py`` L314-319, ``moe/experts.py`` L961-993). Unfused: ``bias_activation_fusion`` off
    (Megatron-LM ``--no-bias-swiglu-fusion`` / ``--no-bias-gelu-fusion``). Fused with non-gated experts:
    Megatron-Core's only fused probability-weighted kernel for them is squared ReLU's, so the plan says so. The
    fused SwiGLU's FP8 input store (``Workload.activation_func_fp8_input_store``) when the memory was costed with it."""
    if not workload.activation_fusion:
        return [Setting("bias_activation_fusion", False, "kernels")]
    if spec.is_moe and not spec.swiglu:
        return [Setting("bias_activation_fusion", False, "kernels"),
                Setting("use_fused_weighted_squared_relu", True, "kernels",
                        "costed with the experts' fused probability-weighted activation, which Megatron-Core has "
                        "for squared ReLU only (moe/experts.py L986-993); a GeLU MoE runs unfused: plan it with "
                        "--no-activation-fusion")]
    if workload.activation_func_fp8_input_store and spec.swiglu:
        return [Setting("activation_func_fp8_input_store", True, "kernels")]
    return []


def overlap_settings(spec: ModelSpec, workload: Workload, layout: Layout) -> list[Setting]:
    """The communication overlaps the step time was costed with (``Workload`` knobs, Megatron-LM's
    defaults), launched only where Megatron accepts them, else left off and said: TP comm-GEMM overlap
    needs TP > 1 with SP (ARG L1441-1442); p2p overlap exists only for the interleaved schedule (ARG
    L1010-1013); the MoE all-to-all overlap has Megatron-Core's conditions (TC L3002-3045); the
    shared-expert overlap needs shared experts."""
    notes = []
    tp_overlap = workload.tp_comm_overlap
    if tp_overlap and not (layout.tp > 1 and layout.sequence_parallel):
        tp_overlap = False
        notes.append("TP comm-GEMM overlap needs TP > 1 with sequence parallelism (arguments.py L1441): left off, "
                     "expect more exposed TP time than planned")
    s = [Setting("tp_comm_overlap", tp_overlap, "kernels")]
    if layout.vpp > 1:
        p2p_overlap = workload.overlap_p2p_comm
        if not p2p_overlap and layout.pp <= 2:  # ARG L1005-1008: without it, interleaving needs PP > 2
            p2p_overlap = True
            notes.append("Megatron-LM needs the p2p overlap for the interleaved schedule at PP <= 2 (arguments.py "
                         "L1005-1008): launched with it on, so the pipeline p2p is more hidden than planned")
        s.append(Setting("overlap_p2p_comm", p2p_overlap, "kernels"))
        if workload.microbatch_group_size is not None:  # ModelParallelConfig field (MPC L431-445); the rules checked it
            s.append(Setting("microbatch_group_size_per_vp_stage", workload.microbatch_group_size, "kernels"))
    if workload.deterministic_mode:  # its cuBLAS workspaces are planned (memory.torch_workspace_bytes)
        s.append(Setting("deterministic_mode", True, "kernels"))
    if workload.defer_embedding_wgrad:  # the rules require PP > 1 (MPC L545-548); its memory is planned
        s += [Setting("defer_embedding_wgrad_compute", True, "kernels"),
              Setting("wgrad_deferral_limit", workload.wgrad_deferral_limit, "kernels")]
    if spec.is_moe:
        ep_overlap = workload.moe_ep_overlap
        blocker = _ep_overlap_blocker(spec, workload, layout)
        if ep_overlap and blocker:
            ep_overlap = False
            notes.append(f"the MoE all-to-all overlap is refused by Megatron-Core here ({blocker}, "
                         "transformer_config.py L3002-3045): left off, expect more exposed EP time than planned")
        s.append(Setting("overlap_moe_expert_parallel_comm", ep_overlap, "kernels"))
        if spec.moe.shared_expert_ffn_hidden_size:
            s.append(Setting("moe_shared_expert_overlap", workload.moe_shared_expert_overlap, "kernels"))
    return s + [Setting("_note", None, "kernels", note) for note in notes]


def _ep_overlap_blocker(spec: ModelSpec, workload: Workload, layout: Layout) -> str | None:
    """Why ``overlap_moe_expert_parallel_comm`` cannot be on for this layout (TC L3002-3045), or None."""
    if layout.ep == 1:
        return "no expert parallelism"
    if workload.moe_dispatcher not in ("alltoall", "flex"):
        return f"the {workload.moe_dispatcher} dispatcher"
    if layout.recompute == "full":
        return "full recompute"
    if layout.pp > 1 and layout.vpp == 1:
        return "pipeline parallelism without virtual stages"
    if spec.mtp_num_layers > 1:
        return "more than one MTP layer"
    return None


def env_settings(cluster: Cluster, layout: Layout) -> list[Setting]:
    """``CUDA_DEVICE_MAX_CONNECTIONS`` as Megatron-LM's own check wants it (module docstring)."""
    if layout.fsdp:
        return [Setting("CUDA_DEVICE_MAX_CONNECTIONS", FSDP_MAX_CONNECTIONS, "env",
                        "Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1 (arguments.py L1166); "
                        "Megatron's example scripts export 1, this overrides it")]
    blackwell = cluster.gpu.name.startswith(BLACKWELL_PREFIXES)
    if (layout.tp > 1 or layout.cp > 1) and not blackwell:
        return [Setting("CUDA_DEVICE_MAX_CONNECTIONS", 1, "env")]
    return []


def plan_settings(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[Setting]:
    """Everything the plan depends on, in output order."""
    return hybrid_pipeline_settings(spec, layout, (
        model_settings(spec) + attention_settings(spec, layout) + layout_settings(spec, workload, layout)
        + context_parallel_settings(spec, cluster, workload, layout)
        + optimizer_settings(workload, layout) + memory_settings(layout) + precision_settings(workload)
        + kernel_settings(spec, workload) + overlap_settings(spec, workload, layout) + env_settings(cluster, layout)))


def hybrid_pipeline_settings(spec: ModelSpec, layout: Layout, settings: list[Setting]) -> list[Setting]:
    """Interleaved pipelining of a hybrid model: its pattern with one ``|`` segment per virtual stage, in
    Megatron's order (segment ``v*pp + r`` is virtual stage ``v`` of pipeline rank ``r``,
    ``hybrid_layer_allocation.py`` ``select_pipeline_segment`` L440-460), each holding the layers the plan
    puts there (``params.stage_layer_ids``). Without pipes Megatron refuses VPP for a hybrid pattern
    (L384-392); with them, first / last stage layer counts are refused (L376-382, ARG L803-813) and
    Megatron-LM derives the virtual size from the segments (ARG L815-824, L847-860), so those settings go.

    >>> from megasolve.models.presets import load_preset
    >>> out = hybrid_pipeline_settings(load_preset("nemotron-h-8b"), Layout(pp=2, vpp=2), model_settings(
    ...     load_preset("nemotron-h-8b")))
    >>> next(s.value for s in out if s.name == "hybrid_override_pattern")
    'M-M-M-M*-M-M-|M-M-M*-M-M-M-|M-M*-M-M-M-M-|M*-M-M-M-M-M-'
    """
    if not spec.is_hybrid or layout.vpp == 1:
        return settings
    ids = stage_layer_ids(spec, layout)
    piped = "|".join("".join(spec.hybrid_pattern[i] for i in ids[rank][chunk])
                     for chunk in range(layout.vpp) for rank in range(layout.pp))
    dropped = ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
               "num_layers_per_virtual_pipeline_stage")
    out = []
    for setting in settings:
        if setting.name == "hybrid_override_pattern":
            setting = Setting(setting.name, piped, setting.group,
                              f"{layout.pp * layout.vpp} pipeline segments: {layout.vpp} virtual stages per rank")
        elif setting.name in dropped:
            setting = Setting(setting.name, None, setting.group)
        out.append(setting)
    return out


def megatron_flags(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> list[str]:
    """The plan's Megatron-LM flags, one ``--flag value`` string each (the command of ``launch_text``
    without the launcher, environment and synthetic-data flags)."""
    return megatron_flag_list(plan_settings(spec, cluster, workload, layout))


def launch_text(fmt: str, spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> str:
    """The launch settings of ``layout`` in ``fmt`` (megatron | bridge | bridge-main | nemo | verl)."""
    return render(fmt, plan_settings(spec, cluster, workload, layout), cluster, layout)
