"""Hybrid Mamba-2 and gated-DeltaNet layers (issue 15, deliverable 4): per-kind formulas, Megatron's
rules for them, and the launch exports. The engines' agreement on these models is in test_combine.py and
test_solver.py."""

from __future__ import annotations

import doctest

import pytest

from megasolve.cli.launch import launch_text
from megasolve.cost import hybrid
from megasolve.cost.compute import layer_work, model_flops_per_sequence
from megasolve.cost.layers import LayerKind, model_layer_kinds
from megasolve.cost.memory import ActivationShape, layer_activation_bytes
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.params import model_params
from megasolve.solver.rules import RuleContext, violations
from megasolve.topology import Cluster

MAMBA = LayerKind(mixer="mamba", mlp=False)


def test_doctests_of_hybrid_module_pass():
    result = doctest.testmod(hybrid)
    assert result.failed == 0 and result.attempted > 0


def test_nemotron_h_layer_kinds_are_one_block_each():
    names = [k.name for k in model_layer_kinds(load_preset("nemotron-h-8b"))]
    assert names == ["h_mamba", "h_mlp", "h_attn"]
    assert [k.name for k in model_layer_kinds(load_preset("qwen3-next-80b-a3b"))] == ["gdn_moe", "moe"]


def test_nemotron_h_56b_layer_counts_match_the_release():
    # NVIDIA ADLR Nemotron-H page: "54 Mamba-2, 54 MLP, and 10 Self-Attention layers"
    pattern = load_preset("nemotron-h-56b").hybrid_pattern
    assert (pattern.count("M"), pattern.count("-"), pattern.count("*")) == (54, 54, 10)


def test_mamba_layer_has_no_quadratic_term():
    """Same tokens per micro-batch, twice the sequence: a Mamba layer's work and saved bytes stay the
    same (no KV cache, no s^2 scores); an attention layer's core FLOPs double."""
    spec = load_preset("nemotron-h-8b")
    shape1, shape2 = (ActivationShape(tp=1, cp=1, mbs=b, sequence_parallel=False) for b in (2, 1))
    short, long = Workload(seq_length=4096), Workload(seq_length=8192)
    assert layer_work(spec, short, shape1, moe=False, recompute="none", kind=MAMBA) == \
        layer_work(spec, long, shape2, moe=False, recompute="none", kind=MAMBA)
    assert layer_activation_bytes(spec, short, shape1, moe=False, recompute="none", kind=MAMBA) == \
        layer_activation_bytes(spec, long, shape2, moe=False, recompute="none", kind=MAMBA)
    attn = LayerKind(mlp=False)
    assert layer_work(spec, long, shape2, moe=False, recompute="none", kind=attn).attention_flops == pytest.approx(
        2 * layer_work(spec, short, shape1, moe=False, recompute="none", kind=attn).attention_flops)


def test_mamba_activations_split_over_tp():
    # bytes per token at tp1 (cost/hybrid.py doctest): 102,688; at tp 4 with SP everything splits by 4
    spec, w = load_preset("nemotron-h-8b"), Workload(seq_length=4096)
    one = layer_activation_bytes(spec, w, ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False),
                                 moe=False, recompute="none", kind=MAMBA)
    four = layer_activation_bytes(spec, w, ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True),
                                  moe=False, recompute="none", kind=MAMBA)
    assert one == 102_688 * 4096 and four == pytest.approx(one / 4)


def test_nemotron_h_model_flops_near_six_n():
    """Megatron's hybrid_flops at 8K: 46.7 GFLOPs per token; 6N (N = 8.10B with the embeddings, 7.56B
    without the input embedding) = 48.6 / 45.4: within 5 % of the 6N rule either way."""
    spec = load_preset("nemotron-h-8b")
    per_token = model_flops_per_sequence(spec, 8192) / 8192
    n = model_params(spec)["params_total"]
    assert per_token / 1e9 == pytest.approx(46.7, abs=0.05)
    assert per_token == pytest.approx(6 * n, rel=0.05)


def _ctx(name: str, gpus: int) -> RuleContext:
    return RuleContext(spec=load_preset(name), cluster=Cluster.from_flags(num_gpus=gpus, gpu="h100"),
                       workload=Workload(seq_length=8192, global_batch_size=256))


def test_mamba_tp_must_divide_the_groups():
    # 8 Mamba groups (mamba_mixer.py L270): tp 16 breaks it
    ctx = _ctx("nemotron-h-8b", 16)
    names = [v.rule for v in violations(ctx, Layout(tp=16, dp=1))]
    assert "mamba_groups_divisible_by_tp" in names and "mamba_heads_divisible_by_tp" not in names


def test_mamba_cp_rules_follow_mamba_context_parallel():
    # tp 2: 64 heads and 4 groups per TP rank; cp 8 repeats the groups (8 % 4 == 0), cp 3 splits nothing
    ctx = _ctx("nemotron-h-8b", 48)
    assert "mamba_heads_groups_vs_cp" not in [v.rule for v in violations(ctx, Layout(tp=2, cp=8, dp=3))]
    assert "mamba_heads_groups_vs_cp" in [v.rule for v in violations(ctx, Layout(tp=2, cp=3, dp=8))]


def test_hybrid_split_ignores_embedding_accounting():
    ctx = _ctx("nemotron-h-8b", 8)
    names = [v.rule for v in violations(ctx, Layout(pp=4, dp=2, account_for_embedding=True))]
    assert "hybrid_split_without_accounting" in names


def test_hybrid_vpp_is_written_as_pipe_segments():
    """VPP of a hybrid model: one '|' segment per virtual stage (Megatron refuses VPP without them,
    hybrid_layer_allocation.py L384-392), no VPP or first/last-stage flags (ARG L803-824); Megatron-LM's
    recorded parser reads the result."""
    import shlex

    from test_launch import megatron_parser

    spec = load_preset("nemotron-h-8b")
    ctx = _ctx("nemotron-h-8b", 8)
    layout = Layout(pp=4, vpp=2, dp=2, first_stage_layers=12, last_stage_layers=12)
    assert not [v for v in violations(ctx, layout) if v.rule.startswith("hybrid")]
    text = launch_text("megatron", spec, ctx.cluster, ctx.workload, layout)
    words = shlex.split(" ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#")))
    args = megatron_parser().parse_args(words[words.index("pretrain_hybrid.py") + 1:])
    segments = args.hybrid_layer_pattern.split("|")
    assert len(segments) == 8 and "".join(segments) == spec.hybrid_pattern
    assert [len(seg) for seg in segments] == [6, 7, 7, 6] * 2  # stages of 12, 14, 14, 12 layers, 2 chunks each
    assert args.num_virtual_stages_per_pipeline_rank is None and args.decoder_first_pipeline_num_layers is None
    assert args.num_layers_per_virtual_pipeline_stage is None


def test_deltanet_heads_vs_tp_and_cp():
    ctx = _ctx("qwen3-next-80b-a3b", 64)
    assert "gdn_heads_divisible_by_cp" in [v.rule for v in violations(ctx, Layout(tp=8, cp=4, dp=2, ep=8))]
    assert not [v for v in violations(ctx, Layout(tp=4, cp=2, dp=8, ep=8)) if v.rule.startswith("gdn_")]


def test_megatron_export_of_a_hybrid_model():
    spec = load_preset("nemotron-h-8b")
    text = launch_text("megatron", spec, Cluster.from_flags(num_gpus=8, gpu="h100"),
                       Workload(seq_length=8192, global_batch_size=256), Layout(tp=2, dp=4))
    assert "pretrain_hybrid.py" in text and "--hybrid-layer-pattern 'M-M-M-M*-M" in text
    for flag in ("--mamba-state-dim 128", "--mamba-head-dim 64", "--mamba-num-groups 8", "--mamba-num-heads 128"):
        assert flag in text
    # the config's squared ReLU (mlp_hidden_act relu2, NemotronHConfig's default) is launched, not GeLU
    assert "--squared-relu" in text.split("torchrun")[1] and "--swiglu" not in text


def test_megatron_export_of_gated_deltanet():
    spec = load_preset("qwen3-next-80b-a3b")
    text = launch_text("megatron", spec, Cluster.from_flags(num_gpus=64, gpu="h100"),
                       Workload(seq_length=4096, global_batch_size=256), Layout(tp=2, pp=4, dp=8, ep=8))
    assert "pretrain_gpt.py" in text
    for flag in ("--experimental-attention-variant gated_delta_net", "--linear-attention-freq 4",
                 "--linear-num-key-heads 16", "--linear-num-value-heads 32", "--attention-output-gate"):
        assert flag in text


# A hybrid MoE stack ('E' layers: MoE without attention, each with its own norm), Nemotron-3-Nano's shape
# (Megatron-Bridge nemotron_h_provider.py Nemotron3NanoProvider)
NANO_MOE = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "num_hidden_layers": 52,
    "intermediate_size": 1856, "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
    "conv_kernel": 4, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
    "tie_word_embeddings": False, "mlp_hidden_act": "relu2", "max_position_embeddings": 8192,
    "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
}


def test_hybrid_moe_layers_agree_across_engines():
    """'E' layers (MoE without attention): estimate, the oracle and CP-SAT agree on random layouts."""
    import random

    from megasolve.models.hf import spec_from_hf_config
    from megasolve.solver.cpsat import pipeline_rows
    from megasolve.solver.space import AXES, build_space
    from megasolve.solver.tables import CostTables
    from test_combine import assert_engines_agree

    spec = spec_from_hf_config(NANO_MOE, name="nano-moe")
    assert [k.name for k in model_layer_kinds(spec)] == ["h_mamba", "h_moe", "h_attn"]
    cluster = Cluster.from_flags(num_gpus=16, gpu="h100")
    workload = Workload(seq_length=8192, global_batch_size=128)
    space = build_space(spec, cluster, workload)
    tables = CostTables(spec, cluster, workload)
    rows = pipeline_rows(space, tables)
    rng, points = random.Random(5), []
    for _ in range(50_000):
        point = {a: rng.choice(space.domains[a]) for a in AXES if a != "dp"}
        dense = point["tp"] * point["cp"] * point["pp"]
        if 16 % dense:
            continue
        point["dp"] = 16 // dense
        if point["dp"] in space.domains["dp"] and space.legal(point) and point not in points:
            points.append(point)
        if len(points) == 8:
            break
    assert len(points) == 8 and {p["ep"] for p in points} != {1}
    for point in points:
        assert_engines_agree(spec, cluster, workload, space, tables, rows, point)


@pytest.mark.parametrize("name,gpus,script", [("nemotron-h-8b", "8", "pretrain_hybrid.py"),
                                              ("qwen3-next-80b-a3b", "64", "pretrain_gpt.py")])
def test_hybrid_exports_parse_with_megatron_lms_recorded_parser(name, gpus, script):
    """Every flag of the export exists in Megatron-LM's parser @d98e8a64 (tests/data/megatron_lm_arguments.json)
    and carries the planned architecture."""
    import shlex

    from click.testing import CliRunner

    from megasolve.cli.main import cli
    from test_launch import megatron_parser

    result = CliRunner().invoke(cli, ["estimate", "-m", name, "-n", gpus, "-g", "h100", "--tp", "2", "-o", "megatron"])
    assert result.exit_code in (0, 1), result.output
    words = shlex.split(" ".join(line.rstrip("\\") for line in result.stdout.splitlines() if not line.startswith("#")))
    args = megatron_parser().parse_args(words[words.index(script) + 1:])
    spec = load_preset(name)
    if spec.is_hybrid:
        assert args.hybrid_layer_pattern == spec.hybrid_pattern and args.mamba_num_heads == 128
        assert (args.mamba_state_dim, args.mamba_head_dim, args.mamba_num_groups) == (128, 64, 8)
    else:
        assert args.experimental_attention_variant == "gated_delta_net" and args.linear_attention_freq == "4"
        assert (args.linear_num_key_heads, args.linear_num_value_heads, args.attention_output_gate) == (16, 32, True)


def test_megatron_args_read_gated_delta_net():
    """``--experimental-attention-variant gated_delta_net`` and its ``--linear-*`` flags are read (TC defaults
    for the sizes); DSA and a missing frequency are refused."""
    from megasolve.models.errors import ConfigError
    from megasolve.models.megatron_args import spec_from_megatron_args

    base = dict(num_layers=8, hidden_size=2048, num_attention_heads=16, vocab_size=151936,
                experimental_attention_variant="gated_delta_net")
    spec = spec_from_megatron_args(dict(base, linear_attention_freq=4, attention_output_gate=True))
    assert spec.linear_attention_pattern == (1, 1, 1, 0, 1, 1, 1, 0) and spec.attention_output_gate
    g = spec.gated_delta_net
    assert (g.num_key_heads, g.key_head_dim, g.num_value_heads, g.value_head_dim, g.conv_kernel) == (16, 128, 32, 128, 4)
    listed = spec_from_megatron_args(dict(base, linear_attention_freq="([1]*3+[0]*1)*2"))
    assert listed.linear_attention_pattern == spec.linear_attention_pattern
    for bad in (dict(base), dict(base, linear_attention_freq=4, experimental_attention_variant="dsa"),
                dict(base, linear_attention_freq=4, linear_num_value_heads=24),
                dict({k: v for k, v in base.items() if k != "experimental_attention_variant"}, linear_attention_freq=4)):
        with pytest.raises(ConfigError):
            spec_from_megatron_args(bad)
