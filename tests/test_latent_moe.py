"""Latent MoE (``--moe-latent-size``) and a repeated MTP layer (``--mtp-use-repeated-layer``), as
Nemotron 3 Super uses them: weights, FLOPs, expert-parallel bytes, Megatron's rule, the readers and the
launch export. The per-kind formulas are hand-computed here from the preset's numbers."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from megasolve.cli.launch import launch_text
from megasolve.cost.compute import moe_mlp_flops_per_token
from megasolve.cost.memory import ActivationShape
from megasolve.cost.step import ep_traffic_s
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.megatron_args import spec_from_megatron_args
from megasolve.models.params import moe_mlp_params, mtp_params
from megasolve.solver.rules import RuleContext, violations
from megasolve.topology import Cluster

SUPER = "nemotron-3-super-120b-a12b"
H, D, F, E, K, FS = 4096, 1024, 2688, 512, 22, 5376  # hidden, latent, expert FFN, experts, top-k, shared FFN


def _without_latent(spec):
    return replace(spec, moe=replace(spec.moe, latent_size=None))


def test_latent_expert_weights_are_latent_wide_and_the_projections_replicated():
    spec = load_preset(SUPER)
    assert spec.expert_hidden_size == D and spec.latent_projection_params == 2 * H * D
    p = moe_mlp_params(spec, tp=1, ep=64, etp=1)
    # squared ReLU (not gated): fc1 d x F and fc2 F x d per expert, 512 / 64 = 8 local experts
    assert p.expert == 8 * 2 * D * F
    # norm, router (h x E), the two h x d latent projections (duplicated on every TP rank)
    assert p.replicated == H + E * H + 2 * H * D
    assert p.tp_sharded == 2 * H * FS
    dense = moe_mlp_params(_without_latent(spec), tp=1, ep=64, etp=1)
    assert dense.expert == 8 * 2 * H * F  # without the latent width the experts are h wide: 4x the weights


def test_latent_moe_flops_per_token():
    routed, shared, latent = moe_mlp_flops_per_token(load_preset(SUPER))
    assert routed == 6 * 2 * D * F * K and shared == 6 * 2 * H * FS and latent == 6 * 2 * H * D


def test_expert_parallel_bytes_scale_with_the_latent_width():
    spec = load_preset(SUPER)
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    workload = Workload(seq_length=8192, global_batch_size=512, moe_dispatcher="alltoall")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    latent = ep_traffic_s(spec, cluster, workload, shape, 8, "none")
    full = ep_traffic_s(_without_latent(spec), cluster, workload, shape, 8, "none")
    # per copy 2d + 4 bytes vs 2h + 4 (bf16 token + fp32 probability); the latency part is the same
    assert latent < full
    assert latent / full == pytest.approx((2 * D + 4) / (2 * H + 4), rel=0.05)


def test_shared_expert_overlap_is_refused_with_latent_experts():
    spec = load_preset(SUPER)
    cluster = Cluster.from_flags(num_gpus=64, gpu="h100")
    layout = Layout(ep=64, dp=64)
    on = RuleContext(spec=spec, cluster=cluster,
                     workload=Workload(seq_length=8192, global_batch_size=512, moe_shared_expert_overlap=True))
    off = replace(on, workload=replace(on.workload, moe_shared_expert_overlap=False))
    assert "latent_moe_without_shared_expert_overlap" in [v.rule for v in violations(on, layout)]
    assert "latent_moe_without_shared_expert_overlap" not in [v.rule for v in violations(off, layout)]


def test_repeated_mtp_layer_builds_one_layer_for_all_depths():
    spec = replace(load_preset(SUPER), mtp_num_layers=2)
    repeated = replace(spec, mtp_use_repeated_layer=True)
    assert spec.mtp_built_layers == 2 and repeated.mtp_built_layers == 1
    two = mtp_params(spec, tp=1, pp=1, ep=64)
    one = mtp_params(repeated, tp=1, pp=1, ep=64)
    assert two.total == 2 * one.total and one.total > 0
    with pytest.raises(MegasolveError, match="mtp_use_repeated_layer"):
        replace(load_preset(SUPER), mtp_use_repeated_layer=True)  # no MTP depth to repeat


def test_megatron_arguments_read_latent_size_and_repeated_mtp():
    base = {"num_layers": 4, "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 8,
            "seq_length": 4096, "max_position_embeddings": 4096, "padded_vocab_size": 32768,
            "num_experts": 16, "moe_router_topk": 2, "moe_ffn_hidden_size": 512}
    spec = spec_from_megatron_args({**base, "moe_latent_size": 256, "mtp_num_layers": 2,
                                    "mtp_use_repeated_layer": True})
    assert spec.moe.latent_size == 256 and spec.expert_hidden_size == 256
    assert spec.mtp_num_layers == 2 and spec.mtp_built_layers == 1
    plain = spec_from_megatron_args(base)
    assert plain.moe.latent_size is None and plain.expert_hidden_size == 1024 and not plain.mtp_use_repeated_layer


def test_megatron_export_sets_the_latent_size_and_repeated_mtp():
    from test_launch import megatron_parser

    spec = replace(load_preset(SUPER), mtp_num_layers=2, mtp_use_repeated_layer=True)
    text = launch_text("megatron", spec, Cluster.from_flags(num_gpus=64, gpu="h100"),
                       Workload(seq_length=8192, global_batch_size=512), Layout(ep=64, dp=64))
    words = shlex.split(" ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#")))
    args = megatron_parser().parse_args(words[words.index("pretrain_hybrid.py") + 1:])
    assert args.moe_latent_size == D and args.mtp_num_layers == 2 and args.mtp_use_repeated_layer
