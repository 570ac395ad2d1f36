"""A per-module precision recipe (Megatron-LM ``--te-precision-config-file``, Megatron-Bridge ``model.quant_recipe``):
read from Megatron's YAML, resolved per layer kind like Megatron's first-matching glob, and costed per module --
GEMM time at the module's precision, its saved inputs and TP gathers in its format -- in estimate and solve alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from _solve_check import solve_equals_estimate
from click.testing import CliRunner

from megasolve.cli.launch import megatron_flags
from megasolve.cli.main import cli, main
from megasolve.cost.layers import layer_kind, model_layer_kinds, mtp_layer_kind
from megasolve.cost.memory import ActivationShape, layer_activation_bytes, stage_memory
from megasolve.cost.step import layer_time, step_time, tp_comm_s
from megasolve.models import Layout, Workload, load_preset
from megasolve.models.errors import MegasolveError
from megasolve.models.precision_recipe import load_precision_recipe, parse_precision_recipe, recipe_text
from megasolve.topology.cluster import Cluster

RECIPE = Path(__file__).parent / "data" / "precision" / "nemotron3_super_nvfp4.yaml"
SUPER_NVFP4 = (("*.linear_qkv", "bf16"), ("*.linear_proj", "bf16"), ("*mlp.fc[12]_latent_proj", "bf16"),
               ("mtp.*", "bf16"), ("*mixer.out_proj", "mxfp8"))


def _te(training_recipe):
    return {"transformer_engine_config_type": "TEQuantizationParams", "training_recipe": training_recipe}


def test_the_recipe_file_reads_as_its_matchers_in_order():
    assert load_precision_recipe(RECIPE) == SUPER_NVFP4
    # what the launch exports write reads back the same
    assert parse_precision_recipe(yaml.safe_load(recipe_text(SUPER_NVFP4))) == SUPER_NVFP4
    assert parse_precision_recipe(yaml.safe_load(recipe_text(SUPER_NVFP4, one_line=True))) == SUPER_NVFP4


@pytest.mark.parametrize("recipe, message", [
    ({"configs": {"d": _te({"fp8_quantization_recipe": "delayed"})},
      "matchers": {"a": {"config": "d", "type": "glob", "pattern": "*", "enabled": True}}}, "delayed scaling"),
    ({"configs": {"k": {"kitchen_config_type": "QLinearParams", "recipe_idx": 1}},
      "matchers": {"a": {"config": "k", "type": "glob", "pattern": "*", "enabled": True}}}, "kitchen"),
    ({"configs": {"b": _te({})}, "matchers": {"a": {"config": "b", "type": "regex", "pattern": "*", "enabled": True}}},
     "only glob"),
    ({"configs": {"b": _te({"override_nonquantized_autocast": True})},
      "matchers": {"a": {"config": "b", "type": "glob", "pattern": "*", "enabled": True}}}, "not modelled"),
    ({"configs": {}, "matchers": {"a": {"config": "b", "type": "glob", "pattern": "*", "enabled": True}}},
     "config named under configs"),
])
def test_what_is_not_modelled_is_refused_with_the_reason(recipe, message):
    with pytest.raises(MegasolveError, match=message):
        parse_precision_recipe(recipe)


def test_modules_resolve_like_megatrons_first_matching_glob():
    """Nemotron 3 Super (Mamba, attention and latent-MoE layers): each kind names the modules the recipe moves;
    under NVFP4 the MTP layer is bf16 already (Megatron ignores FP4 there), under FP8 the recipe's ``mtp.*`` moves
    every MTP module; a bf16 run has nothing to override."""
    spec = load_preset("nemotron-3-super-120b-a12b")
    w = Workload(precision="fp4", module_precision=SUPER_NVFP4)
    kinds = {k.mixer + ("_moe" if k.moe else ""): dict(k.overrides) for k in model_layer_kinds(spec, w)}
    assert kinds == {"mamba": {"mixer.out_proj": "mxfp8"},
                     "none_moe": {"mlp.fc1_latent_proj": "bf16", "mlp.fc2_latent_proj": "bf16"},
                     "attention": {"self_attention.linear_qkv": "bf16", "self_attention.linear_proj": "bf16"}}
    assert mtp_layer_kind(spec, w).bf16
    fp8 = Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=SUPER_NVFP4)
    assert set(dict(mtp_layer_kind(spec, fp8).overrides).values()) == {"bf16"}
    with pytest.raises(MegasolveError, match="overrides quantized modules only"):  # a bf16 run: nothing to override
        Workload(module_precision=SUPER_NVFP4)
    # first match wins, as RecipeConfig.match_to_config_key
    first = Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=(("*fc1", "bf16"), ("*", "tensorwise")))
    assert dict(layer_kind(load_preset("llama-3.1-8b"), 0, first).overrides) == {
        "mlp.linear_fc1": "bf16", "self_attention.linear_qkv": "tensorwise",
        "self_attention.linear_proj": "tensorwise", "mlp.linear_fc2": "tensorwise"}
    with pytest.raises(MegasolveError, match="NVFP4 modules in a run that is not NVFP4"):
        Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=(("*", "nvfp4"),))


def test_every_module_in_bf16_costs_a_bf16_layer():
    """``*`` -> bf16 in an FP8 run: compute, TP traffic and saved activations equal a bf16 run's layer exactly."""
    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    shape = ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True)
    fp8 = Workload(seq_length=8192, precision="fp8", fp8_recipe="tensorwise")
    everything = dataclasses.replace(fp8, module_precision=(("*", "bf16"),))
    bf16 = Workload(seq_length=8192)
    kind = layer_kind(spec, 3, everything)
    assert len(kind.overrides) == 4
    got = layer_time(spec, cluster, everything, shape, ep=1, moe=False, recompute="none", kind=kind)
    want = layer_time(spec, cluster, bf16, shape, ep=1, moe=False, recompute="none", kind=layer_kind(spec, 3))
    assert got.compute == pytest.approx(want.compute, rel=1e-12)
    assert got.tp_comm == pytest.approx(want.tp_comm, rel=1e-12)
    assert layer_activation_bytes(spec, everything.for_kind(False, kind.overrides), shape, moe=False,
                                  recompute="none") == layer_activation_bytes(spec, bf16, shape, moe=False,
                                                                              recompute="none")
    # one module in bf16: between the two, and its gathered input moves bf16 bytes
    qkv = dataclasses.replace(fp8, module_precision=(("*.linear_qkv", "bf16"),))
    times = [layer_time(spec, cluster, w, shape, ep=1, moe=False, recompute="none", kind=layer_kind(spec, 3, w))
             for w in (fp8, qkv, everything)]
    assert times[0].compute < times[1].compute < times[2].compute
    gathers = [tp_comm_s(spec, cluster, w.for_kind(False, layer_kind(spec, 3, w).overrides), shape, moe=False,
                         recompute="none") for w in (fp8, qkv, everything)]
    assert gathers[0] < gathers[1] < gathers[2]


def test_the_nemotron_3_super_recipe_in_estimate_and_solve():
    """The recipe adds time (bf16 attention and latent projections, MXFP8 Mamba out_proj instead of NVFP4) and
    activation memory (their bf16 / MXFP8 inputs); the solver's tables cost it as estimate does."""
    spec, cluster = load_preset("nemotron-3-super-120b-a12b"), Cluster.from_flags(num_gpus=64, gpu="gb200")
    base = Workload(seq_length=8192, global_batch_size=512, precision="fp4", num_layers_at_end_in_bf16=14)
    recipe = dataclasses.replace(base, module_precision=SUPER_NVFP4)
    layout = Layout(tp=2, ep=32, dp=32, mbs=1, sequence_parallel=True)
    steps = [step_time(spec, cluster, w, layout) for w in (base, recipe)]
    assert steps[1].breakdown_s["compute"] > steps[0].breakdown_s["compute"]
    assert steps[1].breakdown_s["tp_comm"] > steps[0].breakdown_s["tp_comm"]
    acts = [max(s.activations_bytes for s in stage_memory(spec, cluster, w, layout)) for w in (base, recipe)]
    assert acts[1] > acts[0]
    solve_equals_estimate(load_preset("nemotron-h-8b"), Cluster.from_flags(num_gpus=8, gpu="b200"),
                          Workload(seq_length=4096, global_batch_size=128, precision="fp4",
                                   module_precision=SUPER_NVFP4))
    solve_equals_estimate(load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=16, gpu="gb200"),
                          Workload(seq_length=4096, global_batch_size=256, precision="fp4",
                                   module_precision=(("*.linear_qkv", "bf16"), ("*experts.linear_fc2", "mxfp8"))))


def test_the_cli_reads_the_file_reports_it_and_exports_it(tmp_path, capsys):
    args = ["estimate", "-m", "nemotron-h-8b", "-n", "8", "-g", "b200", "--precision", "fp4", "--tp", "2",
            "--te-precision-config", str(RECIPE)]
    out = CliRunner().invoke(cli, args + ["--format", "json"])
    assert out.exit_code in (0, 1), out.output
    assert json.loads(out.output)["workload"]["module_precision"] == [list(m) for m in SUPER_NVFP4]
    bad = tmp_path / "bad.yaml"
    bad.write_text("configs: {x: {transformer_engine_config_type: TEQuantizationParams, "
                   "training_recipe: {fp8_quantization_recipe: delayed}}}\n"
                   "matchers: {a: {config: x, type: glob, pattern: '*', enabled: true}}\n")
    with pytest.raises(SystemExit) as exit_:
        main(args[:-1] + [str(bad)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "delayed scaling" in err and "Traceback" not in err
    spec, cluster = load_preset("nemotron-h-8b"), Cluster.from_flags(num_gpus=8, gpu="b200")
    flags = megatron_flags(spec, cluster, Workload(precision="fp4", module_precision=SUPER_NVFP4), Layout(dp=8))
    assert "--te-precision-config-file te_precision.yaml" in flags


def test_unfused_attention_batched_gemms_stay_bf16_in_a_quantized_run():
    """CoreAttention's QK^T and AV are torch batched GEMMs (dot_product_attention.py baddbmm / bmm), outside Transformer
    Engine's quantized linears: an FP8 run costs them at bf16, a bf16 run in its GEMMs as before."""
    from megasolve.cost.compute import attention_core_flops_per_token_seq, layer_work

    spec = load_preset("llama-3.1-8b")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    bmm = 2 * attention_core_flops_per_token_seq(spec) * 4096 * 4096
    fp8 = layer_work(spec, Workload(precision="fp8", fp8_recipe="tensorwise", attention="unfused"), shape,
                     moe=False, recompute="none")
    bf16 = layer_work(spec, Workload(attention="unfused"), shape, moe=False, recompute="none")
    assert fp8.gemm_at == (("bf16", pytest.approx(bmm), 0.0),)
    assert bf16.gemm_flops == pytest.approx(fp8.gemm_flops + bmm) and bf16.gemm_at == ()


def test_a_recipe_format_userbuffers_cannot_gather_rules_out_tp_overlap():
    """TE's userbuffers raise for NVFP4 and blockwise FP8 tensors: a recipe giving any module such a format rules
    --tp-comm-overlap out (refused as input, never searched), as the run's own precision does."""
    blockwise = (("*experts.linear_fc2", "blockwise"),)
    assert not Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=blockwise).tp_overlap_supported
    assert Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=(("*", "bf16"),)).tp_overlap_supported
    with pytest.raises(MegasolveError, match="userbuffers"):
        Workload(precision="fp8", fp8_recipe="mxfp8", module_precision=blockwise, tp_comm_overlap=True)


def test_a_module_format_the_gpu_cannot_run_is_refused():
    """MXFP8 modules need Blackwell, as an MXFP8 run does (TE check_recipe_support): a recipe giving an H100 run's
    experts MXFP8 is refused, naming the matcher."""
    from megasolve.solver.api import check_layout

    spec, cluster = load_preset("qwen3-30b-a3b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    workload = Workload(precision="fp8", fp8_recipe="tensorwise", module_precision=(("*experts*", "mxfp8"),))
    with pytest.raises(MegasolveError, match=r"cannot run MXFP8 \(--te-precision-config: \*experts\*\)"):
        check_layout(spec, cluster, workload, Layout(ep=8, dp=8))
    check_layout(spec, Cluster.from_flags(num_gpus=8, gpu="b200"), workload, Layout(ep=8, dp=8))
