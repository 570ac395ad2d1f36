"""Per-stage layer sums from one owner (``cost/layers.py``): sliding-window patterns costed per stage,
exactly, in estimate and in the solver's tables; windowed attention under CP priced as the K/V
all-gather Megatron runs for it."""

from __future__ import annotations

import doctest

import pytest

from megasolve.cost import layers
from megasolve.cost.layers import layer_kind, stage_layers
from megasolve.cost.memory import ActivationShape
from megasolve.cost.step import cp_allgather_comm_s, cp_comm_s, layer_time, stage_times, step_time
from megasolve.models import Layout, Workload, load_preset
from megasolve.solver.tables import CostTables
from megasolve.topology import Cluster

GEMMA = "gemma-3-27b"  # 62 layers, window 1,024, every 6th layer (1-based) global: 0-based 5, 11, ..., 59


def test_doctests_of_layers_module_pass():
    result = doctest.testmod(layers)
    assert result.attempted > 0 and result.failed == 0


def test_gemma3_pattern_follows_window_attn_skip_freq():
    """``--window-attn-skip-freq 6``: ``is_layer_window_attention`` makes 1-based layer numbers divisible
    by 6 full attention (``transformer/utils.py`` L531-548)."""
    spec = load_preset(GEMMA)
    full = [i for i in range(spec.num_layers) if layer_kind(spec, i).window is None]
    assert full == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]


@pytest.mark.parametrize("layout,globals_per_stage", [
    # 14/16/16/16: stage 0 = layers 0-13 (5, 11), stage 1 = 14-29 (17, 23, 29), stage 2 = 30-45 (35, 41),
    # stage 3 = 46-61 (47, 53, 59)
    (Layout(pp=4, first_stage_layers=14, last_stage_layers=16), [2, 3, 2, 3]),
    # the same with vpp 2 (chunks of 7 | 8 | 8 | 8 layers, round-robin, TB L161-186): stage 0 holds 0-6 and
    # 31-37 (5, 35), stage 1 7-14 and 38-45 (11, 41), stage 2 15-22 and 46-53 (17, 47, 53), stage 3 23-30
    # and 54-61 (23, 29, 59)
    (Layout(pp=4, vpp=2, first_stage_layers=14, last_stage_layers=16), [2, 2, 3, 3]),
])
def test_each_stage_holds_its_own_global_layers(layout, globals_per_stage):
    spec = load_preset(GEMMA)
    counts = [sum(n for k, n in s.base if k.window is None) for s in stage_layers(spec, layout)]
    assert counts == globals_per_stage


def test_two_gemma3_stages_with_the_same_layer_count_differ_by_one_global_layer():
    """Stages 1 and 2 of 14/16/16/16 hold 16 layers each, 3 and 2 of them global: estimate costs them
    apart by exactly one (global - windowed) layer; averaging the pattern made them equal. The oracle
    (integer tables) puts them in different slots with the same layer terms."""
    spec = load_preset(GEMMA)
    cluster = Cluster.from_flags(num_gpus=16, gpu="h100")
    workload = Workload(seq_length=32768, global_batch_size=64)
    layout = Layout(tp=4, pp=4, dp=1, first_stage_layers=14, last_stage_layers=16, sequence_parallel=True)
    stages = stage_times(spec, cluster, workload, layout)
    shape = ActivationShape(tp=4, cp=1, mbs=1, sequence_parallel=True)

    def one(layer: int) -> float:
        kind = layer_kind(spec, layer)
        return layer_time(spec, cluster, workload, shape, ep=1, moe=False, recompute="none", kind=kind).total

    full, windowed = one(5), one(0)
    assert full > 1.2 * windowed  # at 32K tokens a 1,024 window attends ~6 % of the pairs (attention: ~1/4 of the layer)
    assert stages[1].tau_s - stages[2].tau_s == pytest.approx(full - windowed, rel=1e-9)
    # each stage's time is the sum over the layers it holds
    p2p = stages[1].per_microbatch.pp_comm
    assert stages[1].tau_s == pytest.approx(3 * full + 13 * windowed + p2p, rel=1e-9)
    # the solver's rows hold the same compositions
    tables = CostTables(spec, cluster, workload)
    row = tables.row(4, 1, (14, 16, False, False, None), ("none", None))
    by_stage = {stage: slot for slot in row.slots for stage in slot.stages}
    assert by_stage[1] is not by_stage[2]
    form1 = dict((t, c) for c, t in tables.time_form(row, by_stage[1], "t"))
    form2 = dict((t, c) for c, t in tables.time_form(row, by_stage[2], "t"))
    assert (form1["t_dense"], form1["t_dense_w1024"]) == (3, 13)
    assert (form2["t_dense"], form2["t_dense_w1024"]) == (2, 14)


def test_windowed_layers_are_cheaper_per_stage_than_the_model_mean_implies():
    """gpt-oss alternates windowed (128) and full layers: an MoE model's kinds carry both the MLP kind
    and the span, and the whole step is the per-kind sum (vs the oracle in test_combine)."""
    spec = load_preset("gpt-oss-20b")
    names = [k.name for k in layers.model_layer_kinds(spec)]
    assert names == ["moe_w128", "moe"]
    (whole,) = stage_layers(spec, Layout())
    assert [(k.name, n) for k, n in whole.base] == [("moe_w128", 12), ("moe", 12)]


def test_windowed_attention_under_cp_is_priced_as_the_kv_all_gather():
    """The exports emit ``--cp-comm-type all_gather`` for a windowed model; the cost is TE's
    all-gather of K and V (forward, again in backward) and reduce-scatter of dK, dV -- not the ring,
    and independent of the window (the whole K/V is gathered)."""
    spec = load_preset(GEMMA)
    cluster = Cluster.from_flags(num_gpus=16, gpu="h100")
    workload = Workload(seq_length=32768)
    shape = ActivationShape(tp=2, cp=4, mbs=1, sequence_parallel=True)
    gathered = cp_allgather_comm_s(spec, cluster, workload, shape, "none")
    assert gathered > 0
    assert cp_comm_s(spec, cluster, workload, shape, attention_s=1.0, recompute="none") == gathered
    # full recompute: one more forward all-gather per K and V (3 AG + 1 RS -> 4 AG + 1 RS each)
    again = cp_allgather_comm_s(spec, cluster, workload, shape, "full")
    assert again > gathered
    # a full-attention model keeps the ring (p2p), which hides behind attention compute
    llama = load_preset("llama-3.1-70b")
    assert cp_comm_s(llama, cluster, workload, shape, attention_s=1.0, recompute="none") \
        != cp_allgather_comm_s(llama, cluster, workload, shape, "none")
    # estimate charges it on every layer of the stage (windowed and global alike)
    layout = Layout(tp=2, cp=4, dp=2, sequence_parallel=True)
    est = step_time(spec, cluster, Workload(seq_length=32768, global_batch_size=16), layout)
    per_mb = est.stages[0].per_microbatch.cp_comm
    assert per_mb == pytest.approx(spec.num_layers * gathered, rel=1e-9)
    assert est.breakdown_s["cp_comm"] == pytest.approx(16 // 2 * per_mb, rel=1e-9)  # m = 16 / dp 2 micro-batches


def test_megatron_export_names_the_cp_comm_type_the_cost_model_prices():
    from megasolve.cli.launch import context_parallel_settings

    cluster = Cluster.from_flags(num_gpus=16, gpu="h100")
    settings = {s.name: s.value for s in context_parallel_settings(load_preset(GEMMA), cluster, Workload(),
                                                                   Layout(cp=2, dp=8))}
    assert settings == {"cp_comm_type": "all_gather"}
    # written for p2p too (a recipe's own type must not survive), never without CP
    llama = load_preset("llama-3.1-8b")
    assert {s.name: s.value for s in context_parallel_settings(llama, cluster, Workload(), Layout(cp=2, dp=8))} \
        == {"cp_comm_type": "p2p"}
    assert context_parallel_settings(llama, cluster, Workload(), Layout(dp=16)) == []


# ---------------------------------------------------------------------------- --pipeline-layout
def test_layout_string_grammar_and_rules_follow_megatron():
    """megatron-core 0.16.1 ``pipeline_parallel_layer_layout.py``: repetition, stage order (virtual stage
    j is rank j % pp, chunk j // pp) and the validation rules, each a one-line error."""
    from megasolve.models import MegasolveError
    from megasolve.models.pipeline_layout import expand, parse

    assert expand("Et*3|(tt|)*29,m|L")[:3] == ["Ettt", "tt", "tt"] and len(expand("Et*3|(tt|)*29,m|L")) == 32
    parsed = parse("Ett|(tt|)*29,|tmL", pp=16, num_layers=61, mtp_num_layers=1)
    ids = parsed.decoder_ids()
    assert parsed.vpp == 2 and ids[0] == [[0, 1], [32, 33]] and ids[15] == [[30, 31], [60]]
    bad = [("Ett|tL", 2, 4, 0, "decoder layers"), ("tE|tL", 2, 2, 0, "first layer must be E"),
           ("Et|t|tL", 2, 3, 0, "not a multiple of pp"), ("Et|tx|L|t", 2, 3, 0, "unknown layer character"),
           ("Et|tm|t|L", 2, 3, 1, "before MTP"), ("Et|t|m|mL", 2, 2, 2, "one virtual stage"),
           ("Et|tm||L", 2, 2, 1, "only the last virtual stage"), ("EttL", 1, 2, 1, "MTP layers 'm'")]
    for text, pp, layers_, mtp, words in bad:
        with pytest.raises(MegasolveError, match=words):
            parse(text, pp=pp, num_layers=layers_, mtp_num_layers=mtp)


def test_estimate_costs_each_virtual_stage_from_the_layout_string():
    """DeepSeek-V3 (61 layers + 1 MTP) on pp 16 x vpp 2 with 2 layers per virtual stage, the first
    holding E + 2 and the last 1 + MTP + loss: stage 14 holds 2 layers, stage 15 3 (and MTP), the
    rest 4; the memory and the tables' rows use the same lists."""
    from megasolve.models.params import stage_layer_counts, stage_params
    from megasolve.cost.memory import stage_memory

    spec = load_preset("deepseek-v3")
    layout = Layout(pp=16, vpp=2, ep=64, dp=64, pipeline_layout="Ett|(tt|)*29,|tmL")
    assert stage_layer_counts(spec, layout) == [4] * 14 + [2, 3]
    assert [len(s.layer_ids) for s in stage_layers(spec, layout)] == [4] * 14 + [2, 3]
    params = stage_params(spec, layout)
    assert params[15].has_mtp and params[0].has_embedding
    memory = stage_memory(spec, Cluster.from_flags(num_gpus=1024, gpu="h100"), Workload(), layout)
    assert memory[14].num_layers == 2 and memory[14].total_bytes < memory[13].total_bytes
    # the same vpp Megatron infers; a conflicting one, a standalone MTP rank, or mixing with the split flags
    from megasolve.models import MegasolveError

    with pytest.raises(MegasolveError, match="conflicts with --pipeline-layout"):
        stage_layer_counts(spec, Layout(pp=16, vpp=1, pipeline_layout="Ett|(tt|)*29,|tmL"))
    with pytest.raises(MegasolveError, match="MTP on pipeline rank 14"):
        stage_layer_counts(spec, Layout(pp=16, vpp=2, pipeline_layout="Et*3|(tt|)*29,m|L"))
    with pytest.raises(MegasolveError, match="other pipeline layout arguments"):
        Layout(pp=2, first_stage_layers=3, pipeline_layout="Ettt|tL")


def test_estimate_cli_reads_the_layout_and_the_megatron_export_carries_it():
    from click.testing import CliRunner

    from megasolve.cli.main import cli

    args = ["estimate", "-m", "llama-3.1-8b", "-n", "16", "-g", "h100", "--pp", "4",
            "--pipeline-layout", "Et*6|t*8|t*9|t*9L"]
    ok = CliRunner().invoke(cli, args + ["--format", "json"])
    assert ok.exit_code in (0, 1), ok.output
    import json

    data = json.loads(ok.output[ok.output.index("{"):])
    assert [s["layers"] for s in data["memory"]["stages"]] == [6, 8, 9, 9]
    flags = CliRunner().invoke(cli, args + ["--format", "megatron"]).output
    assert "--pipeline-model-parallel-layout 'Et*6|t*8|t*9|t*9L'" in flags
    assert "--decoder-first-pipeline-num-layers" not in flags
    # Hydra / NeMo-Run overrides: a quoted string, shell-quoted so that | and * survive the shell
    bridge = CliRunner().invoke(cli, args + ["--format", "bridge"]).output
    assert "model.pipeline_model_parallel_layout='\"Et*6|t*8|t*9|t*9L\"'" in bridge
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "from megasolve.cli.main import main; main()",
                           *args[:-1], "Et*6|t*8|t*9|t*8L"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "31 decoder layers 't' but the model has 32" in proc.stderr


# ---------------------------------------------------------------------------- layout strings searched
def test_layout_candidates_are_megatron_bridges_deepseek_v3_layouts():
    """Megatron-Bridge ``recipes/deepseek/h100/deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout``: (pp, vp)
    (4, 2) and (8, 1) hold E+8 | 8 x 6 | 5+mtp+loss; (8, 2), (4, 4) and (16, 1) E+4 | 4 x 14 | 1+mtp+loss. The
    one-chunk ones are uneven first/last splits (pipeline_splits); the interleaved ones are these strings."""
    from megasolve.models.pipeline_layout import expand
    from megasolve.solver.space import layout_candidates, pipeline_splits

    spec = load_preset("deepseek-v3")
    eight = ["E" + "t" * 8] + ["t" * 8] * 6 + ["t" * 5 + "mL"]
    four = ["E" + "t" * 4] + ["t" * 4] * 14 + ["t" + "mL"]
    assert [expand(text) for text in layout_candidates(spec, 4)] == [eight, four]
    assert [expand(text) for text in layout_candidates(spec, 8)] == [four]
    assert (8, 5) in pipeline_splits(61, 8) and (4, 1) in pipeline_splits(61, 16)
    # where the layers (or the layers plus the embedding / loss) divide, no string is needed
    assert layout_candidates(load_preset("qwen3-235b-a22b"), 8) == ()  # 94 + 2 = 96 = 8 x 4 x 3


def test_solve_searches_layout_strings_the_same_in_cpsat_oracle_and_estimate():
    from megasolve.cli.launch import megatron_flags
    from megasolve.solver.knobs import COMM_KNOBS
    from megasolve.solver.solve import solve

    spec, cluster = load_preset("llama-3.1-8b"), Cluster.from_flags(num_gpus=8, gpu="h100")
    workload, fixed = Workload(seq_length=4096, global_batch_size=64), {"mbs": 1, "cp": 1, "pp": 2}
    fast = solve(spec, cluster, workload, top_k=5, fixed=fixed, knobs=COMM_KNOBS)
    oracle = solve(spec, cluster, workload, top_k=5, fixed=fixed, knobs=COMM_KNOBS, engine="exhaustive")
    assert [r.layout for r in fast.layouts] == [r.layout for r in oracle.layouts]
    assert fast.objective_us == oracle.objective_us
    best = fast.layouts[0]
    # 32 layers over pp 2 x vpp 3: E+6 | 6 | 6 | 6 | 6 | 2+L, which no even or uneven split can express
    assert (best.layout.vpp, best.layout.pipeline_layout) == (3, "Et*6|(t*6|)*4t*2L")
    assert best.estimate.time.step_s * 1e6 == pytest.approx(fast.objective_us[0], rel=2e-4)
    flags = megatron_flags(spec, cluster, best.workload, best.layout)
    assert "--pipeline-model-parallel-layout 'Et*6|(t*6|)*4t*2L'" in flags
    # the string implies vpp 3: Megatron-LM refuses a virtual-size flag beside it (ARG L927-935)
    assert not any("virtual" in f for f in flags)
    from megasolve.cli.render import layout_label

    assert "ppl:Et*6|(t*6|)*4t*2L" in layout_label(best.as_dict()["layout"])


def test_fix_pipeline_layout_pins_a_string_and_a_bad_one_is_one_error():
    from megasolve.models import MegasolveError
    from megasolve.solver.solve import solve

    spec, cluster = load_preset("deepseek-v3"), Cluster.from_flags(num_gpus=256, gpu="gb200", nvlink_domain=64)
    workload = Workload(seq_length=4096, global_batch_size=4096, precision="fp8", fp8_recipe="mxfp8")
    text = "Et*4|(t*4|)*14t*1mL"  # Bridge's DeepSeek-V3 GB200 recipe: pp 4, VP 4, one MTP layer
    result = solve(spec, cluster, workload, top_k=1, fixed={"pp": 4, "ep": 64, "pipeline_layout": text})
    assert result.layouts and (result.layouts[0].layout.vpp, result.layouts[0].layout.pipeline_layout) == (4, text)
    # pinned, a string also runs with one chunk per rank (the search itself leaves those to the uneven split)
    one_chunk = solve(spec, cluster, workload, top_k=1, fixed={"pp": 16, "pipeline_layout": text})
    assert one_chunk.layouts and (one_chunk.layouts[0].layout.vpp, one_chunk.layouts[0].layout.pipeline_layout) == (1, text)
    with pytest.raises(MegasolveError, match="57 decoder layers 't' but the model has 61"):
        solve(spec, cluster, workload, top_k=1, fixed={"pp": 4, "pipeline_layout": "Et*4|(t*4|)*13t*1mL"})
