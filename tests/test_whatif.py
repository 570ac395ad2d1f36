"""What-if sweeps, plots, reports and the Python API: monotone throughput, the solver-found minimum
cluster, the per-point JSON contract, golden table and report, valid image files.

Golden files live in tests/golden/; regenerate with ``MEGASOLVE_UPDATE_GOLDEN=1 pytest tests/test_whatif.py``
(then read the diff). Small presets, small clusters and ``jobs=2`` keep this file well under a minute
on two cores.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from click.testing import CliRunner

from megasolve.cli.main import cli
from megasolve.models import MegasolveError, Workload, load_preset
from megasolve.cli.parsing import parse_gpu_counts, parse_int_list
from megasolve.solver.whatif import ClusterKind, batch_split_reason, find_min_gpus, whatif
from megasolve.topology import Cluster

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("MEGASOLVE_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` (trailing spaces dropped) with ``tests/golden/name``."""
    text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}: run with MEGASOLVE_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.fixture(scope="module")
def dense_sweep():
    """llama-3.1-8b on 1 to 32 A100-40GB (1 GPU does not fit: 16 GB of bf16 weights and 32 GB of fp32
    grads even with the optimizer on the host; on an 80 GB H100 it would), 1e12 tokens at 2.0 per GPU-hour."""
    return whatif(load_preset("llama-3.1-8b"), gpus=[1, 8, 16, 32], gpu="a100-40g", tokens=1e12, gpu_hour_price=2.0,
                  jobs=2)


@pytest.fixture(scope="module")
def moe_sweep():
    return whatif(load_preset("qwen3-30b-a3b"), gpus=[8, 16], gpu="h100", global_batch_size=256, jobs=2,
                  min_gpus=False)


# ---------------------------------------------------------------------------- inputs
def test_gpu_counts_accept_lists_and_doubling_ranges():
    assert parse_gpu_counts("8..1024") == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert parse_gpu_counts("24..100") == [24, 48, 96]
    assert parse_gpu_counts("128,32, 64,32") == [32, 64, 128]
    assert parse_int_list("--seq-len", "32768,4096") == [32768, 4096]


@pytest.mark.parametrize("text", ["", "8,,16", "0", "-8", "64..8", "abc", "8..x"])
def test_bad_gpu_counts_name_the_flag(text):
    with pytest.raises(MegasolveError, match="--gpus"):
        parse_gpu_counts(text)


def test_python_api_exports_the_three_commands():
    from megasolve.solver import estimate, solve
    from megasolve.solver import whatif as whatif_api

    assert callable(solve) and callable(estimate) and whatif_api is whatif
    code = "import sys, megasolve.solver; print('ortools' in sys.modules, 'click' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ---------------------------------------------------------------------------- sweep behaviour
@pytest.mark.parametrize("sweep", ["dense_sweep", "moe_sweep"])
def test_more_gpus_never_lower_the_best_total_throughput(sweep, request):
    result = request.getfixturevalue(sweep)
    fitting = [p for p in result.points if p.best is not None]
    assert len(fitting) >= 2
    for smaller, larger in zip(fitting, fitting[1:]):
        assert larger.scenario.num_gpus > smaller.scenario.num_gpus
        assert larger.tokens_per_s >= smaller.tokens_per_s


def test_points_come_back_in_sweep_order_with_the_infeasible_one_explained(dense_sweep):
    assert [p.scenario.num_gpus for p in dense_sweep.points] == [1, 8, 16, 32]
    first = dense_sweep.points[0]
    assert first.status == "infeasible" and first.best is None
    (minimum,) = dense_sweep.min_gpus
    assert first.reason == f"memory: no layout fits on 1 x a100-40g; the smallest fitting cluster is {minimum.num_gpus} GPUs"
    assert all(p.status == "optimal" and p.runner_up is not None for p in dense_sweep.points[1:])


def test_scaling_time_and_cost_follow_from_throughput(dense_sweep):
    base = dense_sweep.points[1]
    assert dense_sweep.scaling_efficiency(base) == 1.0
    for p in dense_sweep.points[1:]:
        seconds = 1e12 / p.tokens_per_s
        assert dense_sweep.days_to_train(p) == pytest.approx(seconds / 86400)
        assert dense_sweep.gpu_hours(p) == pytest.approx(seconds * p.scenario.num_gpus / 3600)
        assert dense_sweep.cost(p) == pytest.approx(2.0 * dense_sweep.gpu_hours(p))
        per_gpu = p.best.estimate.time.tokens_per_s_per_gpu / base.best.estimate.time.tokens_per_s_per_gpu
        assert dense_sweep.scaling_efficiency(p) == pytest.approx(per_gpu)


def test_min_gpus_is_where_solve_starts_finding_layouts():
    """Bisection over whole 2-GPU nodes (1, 2, 4, 8 by doubling, then 6): the minimum fits and one
    node fewer does not, checked with full solves."""
    from megasolve.solver.solve import solve

    spec, workload = load_preset("qwen2.5-14b"), Workload(seq_length=4096, global_batch_size=1024)
    kind = ClusterKind(gpu="a100-40g", gpus_per_node=2, nvlink_domain=2)
    found = find_min_gpus(spec, kind, workload)
    assert found.exact and found.num_gpus is not None and found.num_gpus % 2 == 0
    assert found.largest_not_fitting == found.num_gpus - 2
    assert solve(spec, kind.at(found.num_gpus), workload, top_k=1, explain=False).layouts
    assert solve(spec, kind.at(found.num_gpus - 2), workload, top_k=1, explain=False).status == "infeasible"


def test_min_gpus_when_no_size_can_run_the_precision():
    """A rule on no axis (FP8 on Ampere, MXFP8 on Hopper) refuses every size: no minimum, the rule named,
    no feasibility solve run; solve refuses it as an input error before searching."""
    from megasolve.models.errors import MegasolveError
    from megasolve.solver.solve import solve

    spec = load_preset("llama-3.1-8b")
    for gpu, workload, needle in (("a100-80g", Workload(precision="fp8"), "has no FP8 tensor cores"),
                                  ("h100", Workload(precision="fp8", fp8_recipe="mxfp8"), "cannot run MXFP8")):
        found = find_min_gpus(spec, ClusterKind(gpu=gpu), workload)
        assert found.num_gpus is None and found.solves == 0 and needle in found.note
        with pytest.raises(MegasolveError, match=needle):
            solve(spec, ClusterKind(gpu=gpu).at(8), workload, top_k=1)
    ok = find_min_gpus(spec, ClusterKind(gpu="b200"), Workload(precision="fp8", fp8_recipe="mxfp8"))
    assert ok.num_gpus == 1


def test_a_rule_that_refuses_every_series_is_bad_input_and_one_that_refuses_some_is_a_point_reason():
    """FP8 on a100-80g alone, or a SwiGLU-only knob on a GeLU model: no point of the sweep can run, so the sweep
    raises the rule's error (exit 2 on the command line) before solving anything; beside h100 the a100-80g points
    are refused with the rule as their reason and the h100 points are solved."""
    spec = load_preset("llama-3.1-8b")
    with pytest.raises(MegasolveError, match="has no FP8 tensor cores"):
        whatif(spec, gpus=[8], gpu="a100-80g", precision="fp8", min_gpus=False, jobs=1)
    with pytest.raises(MegasolveError, match="only for SwiGLU"):
        whatif(load_preset("gpt3-175b"), gpus=[64], gpu="h100", seq_length=2048, min_gpus=False, jobs=1,
               recipe={"activation_func_fp8_input_store": True})
    mixed = whatif(spec, gpus=[8], gpu=["a100-80g", "h100"], precision="fp8", min_gpus=False, jobs=1)
    a100, h100 = mixed.points
    assert a100.best is None and "has no FP8 tensor cores" in a100.reason
    assert h100.best is not None


def test_min_gpus_below_one_node(dense_sweep):
    """The sweep's minimum is where solve (same default headroom) returns a layout that leaves the
    margin; half of it returns none, or only layouts marked tight."""
    from megasolve.solver.solve import solve

    (found,) = dense_sweep.min_gpus
    spec, workload = load_preset("llama-3.1-8b"), dense_sweep.points[0].workload
    assert found.exact and found.num_gpus < 8 and found.largest_not_fitting == found.num_gpus // 2
    kind = ClusterKind(gpu="a100-40g")
    at_min = solve(spec, kind.at(found.num_gpus), workload, top_k=1, explain=False)
    assert at_min.layouts and not at_min.search["tight"]
    below = solve(spec, kind.at(found.largest_not_fitting), workload, top_k=1, explain=False)
    assert not below.layouts or below.search["tight"]


def test_min_gpus_uses_the_headroom_and_require_rules_of_solve():
    """One code path (``SearchRules``): the smallest cluster honours --min-headroom and --require as
    solve does. Llama-3.1-8B, 4,096 x 256 on A100-40G: 2 GPUs fit with the default check (each stage's
    uncertainty band), 4 with a 40 % margin on top; a team rule tp*pp >= 16 needs 16 GPUs (dp >= 1)."""
    from megasolve.solver.feasibility import SearchRules
    from megasolve.solver.solve import Headroom, solve

    spec, workload = load_preset("llama-3.1-8b"), Workload(seq_length=4096, global_batch_size=256)
    kind = ClusterKind(gpu="a100-40g")
    bare = find_min_gpus(spec, kind, workload)
    wide = Headroom(fraction=0.4)
    margin = find_min_gpus(spec, kind, workload, rules=SearchRules(min_headroom=wide))
    assert (bare.num_gpus, margin.num_gpus) == (2, 4)
    tight = solve(spec, kind.at(2), workload, top_k=1, explain=False, min_headroom=wide)
    assert tight.layouts and tight.search["tight"]  # 2 GPUs: only inside the margin
    ruled = find_min_gpus(spec, kind, workload, rules=SearchRules(requires=("tp*pp >= 16",)))
    assert ruled.exact and ruled.num_gpus == 16
    # whatif: every point and the minimum-size search under the same rules
    sweep = whatif(spec, gpus=[8, 16], gpu="h100", global_batch_size=256, jobs=1, requires=("tp*pp >= 16",),
                   min_headroom=Headroom(gb=0))
    (found,) = sweep.min_gpus
    assert found.num_gpus == 16
    assert sweep.points[0].best is None and "16 GPUs" in sweep.points[0].reason
    best = sweep.points[1].best.layout
    assert best.tp * best.pp >= 16
    with pytest.raises(MegasolveError, match="--require"):
        whatif(spec, gpus=[8], gpu="h100", jobs=1, requires=("tp ** 2 > 1",))


def test_explain_repairs_use_the_require_rules():
    """With a --require rule, "use at least N GPUs" names the smallest cluster where solve with that
    rule (and its default check, the band) fits, not the smallest without it."""
    from megasolve.solver.feasibility import SearchRules
    from megasolve.solver.solve import solve

    spec, workload = load_preset("qwen2.5-14b"), Workload(seq_length=4096, global_batch_size=1024)
    kind = ClusterKind(gpu="a100-40g", gpus_per_node=2, nvlink_domain=2)
    rule = ("pp == 1",)  # no pipeline parallelism
    plain = find_min_gpus(spec, kind, workload)
    bare = find_min_gpus(spec, kind, workload, rules=SearchRules(requires=rule))
    ruled = bare
    assert plain.num_gpus < ruled.num_gpus  # 4, 8
    result = solve(spec, kind.at(bare.largest_not_fitting), workload, top_k=1, requires=rule, time_limit_s=120)
    assert result.status == "infeasible"
    assert any(f"use at least {ruled.num_gpus} x a100-40g" in r for r in result.repairs), result.repairs


def test_an_impossible_batch_split_is_a_reason_not_an_error():
    spec = load_preset("llama-3.1-8b")
    reason = batch_split_reason(spec, Cluster.from_flags(num_gpus=32768, gpu="h100"),
                                Workload(seq_length=4096, global_batch_size=1))
    assert reason is not None and reason.startswith("--gbs=1: not divisible by any data-parallel size")
    smallest_dp = int(re.search(r"a multiple of (\d+)", reason).group(1))
    assert smallest_dp > 1 and 32768 % smallest_dp == 0
    assert batch_split_reason(spec, Cluster.from_flags(num_gpus=64, gpu="h100"),
                              Workload(seq_length=4096, global_batch_size=16)) is None


def test_parallel_and_serial_sweeps_agree():
    spec = load_preset("llama-3.1-8b")
    runs = [whatif(spec, gpus=[4, 8], gpu="h100", global_batch_size=[32, 64], jobs=jobs, min_gpus=False)
            for jobs in (1, 2)]
    strip = [[{k: v for k, v in p.items() if k != "solve_s"} for p in r.as_dict()["points"]] for r in runs]
    assert strip[0] == strip[1]
    assert [(p.scenario.global_batch_size, p.scenario.num_gpus) for p in runs[1].points] == \
        [(32, 4), (32, 8), (64, 4), (64, 8)]


# ---------------------------------------------------------------------------- JSON contract
POINT_KEYS = {"cluster", "workload", "status", "reason", "layout", "memory", "time", "tokens_per_s", "runner_up",
              "scaling_efficiency", "days_to_train", "gpu_hours", "cost", "solve_s", "comm"}


def test_json_contract_per_point(dense_sweep):
    data = json.loads(json.dumps(dense_sweep.as_dict()))
    assert set(data) == {"model", "tokens", "gpu_hour_price", "points", "min_gpus", "search", "speed_basis"}
    estimate_shape = dense_sweep.points[1].best.as_dict()
    for point in data["points"]:
        assert set(point) == POINT_KEYS
        assert set(point["cluster"]) == {"gpu", "num_gpus", "gpus_per_node", "nvlink_domain"}
        assert set(point["workload"]) == {"seq_length", "global_batch_size", "precision", "attention"}
        if point["status"] == "infeasible":
            assert point["reason"] and point["layout"] is None and point["runner_up"] is None
            continue
        assert set(point["layout"]) == set(estimate_shape["layout"])
        assert set(point["memory"]) == set(estimate_shape["memory"])
        assert set(point["time"]) == set(estimate_shape["time"])
        assert set(point["runner_up"]) == {"layout", "memory", "time", "slower_by", "comm"}
        assert point["runner_up"]["slower_by"] >= 0
        assert point["memory"]["peak_gb"] <= point["memory"]["capacity_gb"]
    assert list(data["min_gpus"]) == ["a100-40g/seq4096/gbs1024"]


def test_a_sweep_point_is_solve_at_that_size_with_the_same_knobs_searched():
    """whatif searches the communication knobs solve searches (the CLI: every one whose flag is not passed),
    so its best layout at N GPUs is solve's #1 at N, with the same settings."""
    from megasolve.solver.knobs import COMM_KNOBS
    from megasolve.solver.solve import solve

    spec = load_preset("qwen3-30b-a3b")
    sweep = whatif(spec, gpus=[16], gpu="h100", global_batch_size=256, jobs=1, min_gpus=False, knobs=COMM_KNOBS)
    alone = solve(spec, Cluster.from_flags(num_gpus=16, gpu="h100"), Workload(seq_length=4096, global_batch_size=256),
                  top_k=2, knobs=COMM_KNOBS)
    best = sweep.points[0].best
    assert (best.layout, best.workload) == (alone.layouts[0].layout, alone.layouts[0].workload)
    assert sweep.as_dict()["points"][0]["comm"]["tag"]  # e.g. deepep+epov, shown after the layout in the table
    result = CliRunner().invoke(cli, ["whatif", "-m", "qwen3-30b-a3b", "-g", "h100", "-n", "16", "--gbs", "256",
                                      "--no-min-gpus", "-j", "1", "--format", "json"])
    assert json.loads(result.stdout)["points"][0]["layout"] == sweep.as_dict()["points"][0]["layout"]


def test_cli_whatif_json_csv_and_errors(moe_sweep, tmp_path):
    args = ["whatif", "-m", "llama-3.1-8b", "-g", "h100", "-n", "8", "--gbs", "64", "--no-min-gpus", "-j", "1"]
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [set(p) for p in data["points"]] == [POINT_KEYS] and data["min_gpus"] == {}
    result = CliRunner().invoke(cli, [*args, "--format", "csv"])
    lines = result.output.splitlines()
    assert lines[0].startswith("gpu,num_gpus,seq_length,global_batch_size,status,layout") and len(lines) == 2
    for bad, field in ((["-n", "8..4"], "--gpus"), (["-g", "h100,nope"], "--gpu"),
                       (["--gpu-hour-price", "2"], "--gpu-hour-price"), (["--plot", "x.jpg"], "--plot")):
        proc = subprocess.run([sys.executable, "-c", "from megasolve.cli.main import main; main()", *args, *bad],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and field in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- golden table and reports
def test_whatif_table_golden(dense_sweep):
    from rich.console import Console

    from megasolve.cli.whatif_cmd import print_whatif

    buffer = io.StringIO()
    print_whatif(dense_sweep.as_dict(), Console(file=buffer, width=130, color_system=None, force_terminal=False))
    check_golden("whatif_llama-3.1-8b_a100-40g.txt", buffer.getvalue())


def test_estimate_report_golden(tmp_path):
    md, page = tmp_path / "plan.md", tmp_path / "plan.html"
    args = ["estimate", "-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4", "--pp", "4", "--cp", "2",
            "--seq-len", "8192", "--gbs", "512"]
    for path in (md, page):
        result = CliRunner().invoke(cli, [*args, "--report", str(path)])
        assert result.exit_code == 0, result.output
    check_golden("estimate_llama-3.1-70b_report.md", md.read_text(encoding="utf-8"))
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<style>" in text and "</html>" in text
    assert "http" not in text.replace("http-equiv", "") and "<script" not in text and "src=" not in text
    assert "--tensor-model-parallel-size 4" in text and "Assumptions" in text


def test_solve_report_golden_has_no_timings(tmp_path):
    path = tmp_path / "solve.md"
    result = CliRunner().invoke(cli, ["solve", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--gbs", "64", "-k", "3",
                                      "--report", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert "## Top 3 layouts" in text and "wall" not in text
    # the search-space size is the solver's business (it changes when the space is pruned): masked
    text = re.sub(r"over [0-9,]+ combinations", "over N combinations", text)
    check_golden("solve_llama-3.1-8b_report.md", text)


def test_html_report_escapes_text():
    from megasolve.cli.report import to_html

    page = to_html([("h1", "a <b> & c"), ("p", "x < `y<z>`"), ("table", (["<h>"], [["<td>"]])), ("code", "<x>")])
    assert "<b>" not in page and "&lt;b&gt; &amp; c" in page and "<code>y&lt;z&gt;</code>" in page
    assert "<th>&lt;h&gt;</th>" in page and "<pre><code>&lt;x&gt;</code></pre>" in page


# ---------------------------------------------------------------------------- plots
def test_whatif_png_plot(dense_sweep, tmp_path):
    from megasolve.cli.plot import whatif_plot

    path = tmp_path / "sweep.png"
    whatif_plot(str(path), dense_sweep.as_dict())
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def test_estimate_and_solve_svg_plots(tmp_path):
    for command in (["estimate", "--tp", "2"], ["solve", "-k", "1"]):
        path = tmp_path / f"{command[0]}.svg"
        result = CliRunner().invoke(cli, [*command, "-m", "llama-3.1-8b", "-n", "8", "-g", "h100", "--gbs", "64",
                                          "--plot", str(path)])
        assert result.exit_code == 0, result.output
        root = ElementTree.parse(path).getroot()
        assert root.tag.endswith("svg")
        text = path.read_text(encoding="utf-8")
        assert "usable capacity" in text and "memory per GPU" in text and "pipeline stage" in text


def test_plot_without_matplotlib_is_one_line_exit_2(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from megasolve.cli.main import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100",
                           "--plot", "m.png"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == 'error: --plot=m.png: needs matplotlib, which is not installed; ' \
                          'fix: pip install "megasolve[plot]"\n'


def test_whatif_help_imports_neither_matplotlib_nor_ortools():
    code = ("import sys; from megasolve.cli.main import cli; from click.testing import CliRunner; "
            "r = CliRunner().invoke(cli, ['whatif', '--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('ortools', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
