"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5 / 5.1 / 5.2): read, counted, ruled and costed as Megatron-Core
builds it (``transformer/experimental_attention_variant/dsa.py`` and ``absorbed_mla.py`` @d98e8a6)."""

from __future__ import annotations

import pytest
from _solve_check import solve_equals_estimate
from click.testing import CliRunner

from megasolve.cli.launch import megatron_flags
from megasolve.cli.main import cli
from megasolve.cost.compute import attention_core_flops_per_token_seq, dsa_indexer_flops_per_token, \
    model_flops_per_sequence
from megasolve.cost.memory import ActivationShape, attention_activation_terms
from megasolve.models import ConfigError, Layout, Workload, load_preset
from megasolve.models.hf import spec_from_hf_config
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.params import attention_params, dsa_indexer_params, mtp_params, total_params
from megasolve.models.presets import preset_info, resolve_model
from megasolve.solver.rules import RuleContext, model_rules, violations
from megasolve.solver.solve import solve
from megasolve.solver.space import index_share_splits
from megasolve.topology.cluster import Cluster

# one DeepSeek-V3.2 indexer by hand: linear_wq_b 1536 x 64*128, linear_wk 7168 x 128, linear_weights_proj
# 7168 x 64, the LayerNorm k_norm 2 x 128 (dsa.py L1159-1205)
DSV32_INDEXER = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128


def test_indexer_weights_are_replicated_over_tp():
    spec = load_preset("deepseek-v3.2")
    assert dsa_indexer_params(spec) == DSV32_INDEXER == 13_959_424
    for tp in (1, 2, 8):
        with_idx, without = attention_params(spec, tp, indexer=True), attention_params(spec, tp)
        assert with_idx.tp_sharded == without.tp_sharded
        assert with_idx.replicated - without.replicated == DSV32_INDEXER


def test_deepseek_v32_is_deepseek_v3_plus_61_indexers_and_one_for_mtp():
    v3, v32 = load_preset("deepseek-v3"), load_preset("deepseek-v3.2")
    assert total_params(v32) - total_params(v3) == 61 * DSV32_INDEXER
    assert mtp_params(v32, 1, 1).total - mtp_params(v3, 1, 1).total == DSV32_INDEXER


def test_glm5_counts_and_index_share():
    glm5, glm52 = load_preset("glm-5"), load_preset("glm-5.2")
    assert total_params(glm5) / 1e9 == pytest.approx(744.0, rel=0.01)  # zai-org/GLM-5 card
    # GLM-5.2: the indexer on layers 1-3 and 7, 11, ..., 75 only (index_topk_freq 4, offset 3): 21 of 78
    computing = [i + 1 for i in range(78) if glm52.layer_has_indexer(i)]
    assert computing[:5] == [1, 2, 3, 7, 11] and computing[-1] == 75 and len(computing) == 21
    assert total_params(glm5) - total_params(glm52) == (78 - 21) * dsa_indexer_params(glm5)
    # the "about 753B" quoted for GLM-5.2 is this count with its MTP layer (which runs its own indexer)
    assert total_params(glm52, include_mtp=True) / 1e9 == pytest.approx(753.0, rel=0.01)
    assert resolve_model("glm-5.1").spec == load_preset("glm-5")
    assert "index_topk_freq" in preset_info("glm-5.2")["hf"]


def test_indexer_types_must_agree_with_the_frequency():
    cfg = dict(preset_info("glm-5.2")["hf"])
    cfg["indexer_types"] = ["full"] * 78
    with pytest.raises(ConfigError, match="indexer_types"):
        spec_from_hf_config(cfg, name="bad")
    cfg["indexer_types"] = ["full" if i < 3 or (i - 2) % 4 == 0 else "shared" for i in range(78)]
    assert spec_from_hf_config(cfg, name="ok").dsa.topk_freq == 4


def test_megatron_arguments_read_dsa_and_name_what_is_missing():
    args = dict(num_layers=4, hidden_size=7168, num_attention_heads=128, ffn_hidden_size=18432, vocab_size=129280,
                multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, add_bias_linear=False,
                experimental_attention_variant="dsa",
                dsa_indexer_n_heads=64, dsa_indexer_head_dim=128, dsa_indexer_topk=2048, dsa_indexer_loss_coeff=0.01)
    spec = spec_from_megatron_args(args)
    assert (spec.dsa.n_heads, spec.dsa.topk, spec.dsa.loss_coeff) == (64, 2048, 0.01)
    with pytest.raises(ConfigError, match="dsa_indexer_topk"):
        spec_from_megatron_args({k: v for k, v in args.items() if k != "dsa_indexer_topk"})
    with pytest.raises(ConfigError, match="without experimental_attention_variant"):
        spec_from_megatron_args({k: v for k, v in args.items() if k != "experimental_attention_variant"})
    with pytest.raises(ConfigError, match="MLA"):
        spec_from_megatron_args({**args, "multi_latent_attention": False})
    # Megatron-Core's default kernel backend runs the PyTorch path, whose score tensors are not modelled: said
    assert any("dsa_kernel_backend none" in n for n in spec.notes)
    assert not any("kernel_backend" in n for n in spec_from_megatron_args({**args, "dsa_kernel_backend": "cudnn"}).notes)


def _ctx(spec, gpu="b200", n=384, **workload):
    return RuleContext(spec=spec, cluster=Cluster.from_flags(num_gpus=n, gpu=gpu), workload=Workload(**workload))


def _broken(ctx, **layout):
    return [v.rule for v in violations(ctx, Layout(**layout), model_rules(ctx.spec, ctx.workload))]


def test_megatron_rules_for_dsa():
    glm52 = load_preset("glm-5.2")
    ctx = _ctx(glm52)
    # every stage must start on a layer that computes its top-k (specs L395-430): the recipe's 14 / 12 x 4 / 16
    assert _broken(ctx, pp=6, dp=64, ep=32, first_stage_layers=14, last_stage_layers=16) == []
    bad = violations(ctx, Layout(pp=6, dp=64, ep=32, first_stage_layers=13, last_stage_layers=17),
                     model_rules(glm52, ctx.workload))
    assert bad and "starts at layer 14, which reuses the top-k indices of layer 11" in bad[0].message
    assert (14, 16) in index_share_splits(glm52, 6)
    # CP: all_gather only (TC L3162-3177)
    assert _broken(_ctx(glm52, cp_comm_type="p2p"), pp=6, cp=2, dp=32, ep=32, first_stage_layers=14,
                   last_stage_layers=16)
    assert not _broken(_ctx(glm52, cp_comm_type="all_gather"), pp=6, cp=2, dp=32, ep=32, first_stage_layers=14,
                       last_stage_layers=16)
    # DSAttention is its own kernel: --attention unfused describes no launch
    assert "dsa_attention_is_its_own" in _broken(_ctx(glm52, attention="unfused"), pp=6, dp=64, ep=32,
                                                 first_stage_layers=14, last_stage_layers=16)
    # AbsorbedMLA's up-projection recompute refuses FP8 (absorbed_mla.py L671-673)
    fp8 = _ctx(glm52, precision="fp8", fp8_recipe="tensorwise")
    assert _broken(fp8, pp=6, dp=64, ep=32, first_stage_layers=14, last_stage_layers=16, recompute="selective",
                   recompute_modules=("mla_up_proj",))


def test_sparse_attention_flops():
    v3, v32 = load_preset("deepseek-v3"), load_preset("deepseek-v3.2")
    # absorbed MLA: QK over kv_lora + r = 576, AV over kv_lora = 512 channels per head (Bridge flop_utils.py)
    assert attention_core_flops_per_token_seq(v32) == 6.0 * 128 * (512 + 576) / 2
    s, k = 131072, 2048  # query i attends to min(i + 1, topk) keys
    assert v32.attended_pairs(0, s) == k * (k + 1) / 2 + (s - k) * k
    assert v32.attended_pairs(0, 2048) == 2048 * 2049 / 2  # short sequences: dense causal
    idx = dsa_indexer_flops_per_token(v32, 4096)
    assert idx.projections == 2 * DSV32_INDEXER - 2 * 2 * 128 and idx.teacher == 0  # no loss: forward only
    # long context: DSA cuts the attention FLOPs, short context: the absorbed widths cost more than MLA's
    assert model_flops_per_sequence(v32, 131072) < 0.4 * model_flops_per_sequence(v3, 131072)
    assert model_flops_per_sequence(v32, 4096) > model_flops_per_sequence(v3, 4096)
    with_loss = dsa_indexer_flops_per_token(load_preset("glm-5"), 4096)
    assert with_loss.teacher > 0 and with_loss.projections == 4 * (2048 * 32 * 128 + 6144 * (128 + 32))


def test_dsa_activations():
    shape = ActivationShape(tp=2, cp=1, mbs=1, sequence_parallel=True)
    w = Workload(seq_length=4096)
    v32 = attention_activation_terms(load_preset("deepseek-v3.2"), w, shape)
    assert v32["dsa_topk"] == 4 * 4096 * 2048 and v32["dsa_indexer"] == 0  # no loss: the indexer under no_grad
    # the query up-projection's output, the absorbed query, the latent key, the RoPE tables (traced, below)
    assert v32["mla_up"] == 2 * 4096 * 64 * (128 + 64 + 576) + 2 * 4096 * 576 + 8 * 4096 * 64
    # under CP the sparse attention keeps the latent key gathered over the whole sequence (all_gather CP)
    cp4 = attention_activation_terms(load_preset("deepseek-v3.2"), w,
                                     ActivationShape(tp=2, cp=4, mbs=1, sequence_parallel=True))
    assert cp4["mla_up"] == 2 * 1024 * 64 * (128 + 64 + 576) + 2 * 4096 * 576 + 8 * 1024 * 64
    glm = attention_activation_terms(load_preset("glm-5"), w, shape)
    # loss on: q, weights, the k norm's input (+ its rstd), the SP-gathered inputs, k, the RoPE tables
    assert glm["dsa_indexer"] == 2 * 4096 * (32 * 128 + 32 + 128 + 6144 + 2048) + 4 * 4096 + 2 * 4096 * 128 \
        + 8 * 4096 * 64


def test_solve_equals_estimate_and_the_launch_sets_dsa():
    spec, cluster = load_preset("glm-5.2"), Cluster.from_flags(num_gpus=384, gpu="b200")
    workload = Workload(seq_length=4096, global_batch_size=256)
    result = solve_equals_estimate(spec, cluster, workload)
    flags = " ".join(megatron_flags(spec, cluster, result.layouts[0].workload, result.layouts[0].layout))
    for flag in ("--experimental-attention-variant dsa", "--dsa-indexer-topk 2048", "--dsa-indexer-topk-freq 4",
                 "--dsa-indexer-skip-topk-offset 3", "--dsa-kernel-backend cudnn", "--no-rope-fusion"):
        assert flag in flags


def test_cli_estimates_deepseek_v32_at_long_context():
    out = CliRunner().invoke(cli, ["estimate", "-m", "deepseek-v3.2", "-n", "256", "-g", "h100", "--seq-len", "32768",
                                   "--gbs", "64", "--tp", "8", "--pp", "8", "--ep", "32", "--etp", "1", "--cp", "4",
                                   "--first-stage-layers", "5", "--last-stage-layers", "8", "--recompute", "full",
                                   "--format", "json"])
    assert out.exit_code in (0, 1), out.output
    assert "all_gather" in out.output  # the CP type DSA runs


def test_a_megatron_log_of_a_dsa_run_reads_its_sparse_attention():
    """A printed argument dump carries the variant and its sizes: read, not left as plain MLA."""
    from megasolve.solver.runs import run_from_log

    args = dict(num_layers=4, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, vocab_size=129280,
                multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, add_bias_linear=False,
                experimental_attention_variant="dsa", dsa_indexer_n_heads=64, dsa_indexer_head_dim=128,
                dsa_indexer_topk=2048, dsa_kernel_backend="cudnn", tensor_model_parallel_size=1,
                pipeline_model_parallel_size=1, world_size=8, seq_length=4096, global_batch_size=64,
                micro_batch_size=1)
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (40 - len(k))} {v}" for k, v in sorted(args.items())]
    lines += ["-------------------- end of arguments ---------------------"]
    lines += [f" iteration {i:8d}/    1000 | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): 3000.0 | "
              f"global batch size:    64 | lm loss: 2.0E+00 |" for i in range(1, 8)]
    run = run_from_log("\n".join(lines), "dsa", {"gpu": "h100"})
    assert run.spec.dsa is not None and run.spec.dsa.topk == 2048 and run.spec.mla is not None


def test_dsa_memory_band_is_wider():
    """No DSA layer is traced and no DSA run measured: its activations get 5 % more band (cost/memory.py)."""
    from megasolve.cost import combine
    from megasolve.cost.memory import band_parts

    assert band_parts(Workload(), True, load_preset("glm-5")) == combine.Band(static=1, activation=30)
    assert band_parts(Workload(), True, load_preset("deepseek-v3")) == combine.Band(static=1, activation=20)


TRACE = __import__("json").loads((__import__("pathlib").Path(__file__).parent / "data" /
                                  "megatron_dsa_activation_trace.json").read_text())


@pytest.mark.parametrize("case", sorted(TRACE["cases"]))
def test_dsa_activation_terms_equal_the_traced_layer(case):
    """One DSA attention block of Megatron-LM main traced on the CPU (``benchmarks/megatron_dsa_activation_trace.py``,
    PyTorch kernels, ``tests/data/megatron_dsa_activation_trace.json``) against ``attention_activation_terms``: what
    the traced layer keeps that the fused kernels keep too ("shared") equals the formula, term by term, once the
    stated differences are added -- the RoPE tables and the V-weight copy the trace lists apart, the absorbed query
    the fused kernels always keep (the PyTorch path keeps it only with the indexer loss), Transformer Engine's norms
    (input and rstd where torch's keep fp32 copies), and the fused kernels' LSE and int32 top-k."""
    from megasolve.models.spec import DSASpec, MLASpec, ModelSpec

    z, traced = TRACE["sizes"], TRACE["cases"][case]
    spec = ModelSpec(name="trace", num_layers=1, hidden_size=z["hidden"], ffn_hidden_size=z["ffn"],
                     num_attention_heads=z["heads"], num_query_groups=z["heads"], vocab_size=1024, qk_layernorm=True,
                     mla=MLASpec(q_lora_rank=z["q_lora"], kv_lora_rank=z["kv_lora"], qk_head_dim=z["qk"],
                                 qk_pos_emb_head_dim=z["rope"], v_head_dim=z["v"]),
                     dsa=DSASpec(n_heads=z["idx_heads"], head_dim=z["idx_dim"], topk=z["topk"],
                                 loss_coeff=traced["loss_coeff"], sparse_loss=traced["sparse_loss"]))
    ours = attention_activation_terms(spec, Workload(seq_length=z["seq"], hidden_dropout=0.0),
                                      ActivationShape(tp=1, cp=1, mbs=z["batch"], sequence_parallel=False))
    shared = {name: t.get("shared", 0) for name, t in traced["terms"].items()}
    T, n, r, latent = z["seq"] * z["batch"], z["heads"], z["rope"], z["kv_lora"] + z["rope"]
    absorbed_query = 0 if traced["loss_coeff"] else 2 * T * n * latent  # kept by the PyTorch path with the loss only
    assert ours["attn_norm_output"] == shared["attn_norm_output"]
    te_norms = 2 * T * (z["q_lora"] + latent) + 2 * 4 * T  # TE's q / kv norms: bf16 input and fp32 rstd
    assert ours["mla_latents"] == shared["mla_latents"] + te_norms
    assert ours["mla_up"] == shared["mla_up"] + absorbed_query + shared["extra:rope_cos_sin"]
    assert ours["core_output"] == shared["core_output"] + shared["extra:up_v_weight_copy"]
    assert ours["dsa_indexer"] == shared["dsa_indexer"]
    assert ours["softmax_stats"] == 4 * T * n and ours["dsa_topk"] == 4 * T * z["topk"]  # cuDNN: fp32 LSE, int32 top-k
    assert r == 16 and shared["extra:rope_cos_sin"] == 8 * T * r  # four bf16 [T, r] tables


def test_index_share_layout_strings_reach_pipeline_sizes_no_first_last_split_keeps():
    """GLM-5.2's IndexShare admits stage starts on layers 1-3 and every 4th after: at PP 16 no first / last split
    keeps that rule, so the search offers the best one-stage-per-rank layout string (as Megatron-Bridge's GLM-5.2
    recipes set one), and it is legal."""
    from megasolve.models.params import dsa_split_problem, stage_layer_ids
    from megasolve.solver.space import index_share_layout

    spec = load_preset("glm-5.2")
    assert not index_share_splits(spec, 16) and index_share_splits(spec, 6)
    text = index_share_layout(spec, 16)
    assert index_share_layout(spec, 6) is None and text.startswith("E") and text.endswith("mL")
    assert dsa_split_problem(spec, stage_layer_ids(spec, Layout(pp=16, pipeline_layout=text))) is None
    result = solve(spec, Cluster.from_flags(num_gpus=512, gpu="h100"), Workload(seq_length=4096, global_batch_size=256),
                   top_k=1, time_limit_s=120, explain=False, fixed={"pp": 16})
    assert result.layouts and result.layouts[0].layout.pipeline_layout == text
