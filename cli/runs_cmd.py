"""``megasolve check RUN...`` and ``megasolve calibrate RUN... --out PROFILE.yaml``: learn from the
user's own training runs (Megatron-LM / NeMo / Megatron-Bridge logs, launch scripts, runs files)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from megasolve.cli import render
from megasolve.cli.app import one_line, register
from megasolve.cli.options import format_option
from megasolve.models.errors import MegasolveError


def run_options(func):
    """What a log may not say, supplied by the user (applies to every RUN that lacks it)."""
    for decorator in reversed([
        click.argument("paths", nargs=-1, required=True, metavar="RUN...", type=click.Path(dir_okay=False)),
        click.option("--gpu", "-g", default=None, metavar="TYPE",
                     help="GPU type where the log does not print it (see `megasolve gpus`)."),
        click.option("--gpus", "-n", "num_gpus", type=int, default=None,
                     help="GPU count where the log prints no world size."),
        click.option("--gpus-per-node", type=int, default=None, help="GPUs per node (default: the GPU's)."),
        click.option("--nvlink-domain", type=int, default=None, help="GPUs per NVLink domain (default: the GPU's)."),
        click.option("--model", "-m", "model", default=None, metavar="NAME|PATH",
                     help="The model (preset, config.json, Megatron YAML) where the log holds no shape."),
        click.option("--vocab-size", type=int, default=None, help="Tokenizer vocabulary where the log prints none."),
        click.option("--seq-len", "seq_length", type=int, default=None,
                     help="Sequence length where the RUN states none."),
        click.option("--gbs", "global_batch_size", type=int, default=None,
                     help="Global batch size where the RUN states none."),
        click.option("--step-time", "step_time_s", type=float, default=None,
                     help="Measured seconds per step where the log has no iteration lines (or a runs-file entry no "
                          "measured step time)."),
        click.option("--oom", "oom", is_flag=True, default=None,
                     help="The run ran out of GPU memory where the log does not show it (e.g. only an issue's title "
                          "says so)."),
        click.option("--arg", "args", multiple=True, metavar="NAME=VALUE",
                     help="A Megatron argument the log does not print, or prints wrong (repeatable; it wins over "
                          "the log), e.g. "
                          "--arg tensor-model-parallel-size=2 --arg micro-batch-size=1."),
    ]):
        func = decorator(func)
    return func


def read_all(paths: tuple[str, ...], defaults: dict[str, Any]) -> tuple[list[Any], list[MegasolveError]]:
    """Every run the paths hold; a path that cannot be read is one line naming what is missing."""
    from megasolve.solver.runs import read_runs

    defaults = dict(defaults)
    pairs = defaults.pop("args", ()) or ()
    parsed = {}
    for item in pairs:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise MegasolveError(field="--arg", value=item, rule="must be NAME=VALUE",
                                 fix="e.g. --arg tensor-model-parallel-size=2")
        parsed[key.strip()] = value.strip()
    defaults["args"] = parsed
    from megasolve.solver.api import check_layout

    runs, failed = [], []
    for path in paths:
        try:
            with render.status(f"reading {'stdin' if path == '-' else Path(path).name} ..."):  # a long log takes seconds
                read = read_runs(path, **defaults)
            for run in read:  # a layout Megatron would have refused means the log was misread
                run.spec.require_plannable()
                check_layout(run.spec, run.cluster, run.workload, run.layout, allow_cross_domain_tp=True)
            runs.extend(read)
        except MegasolveError as exc:
            fix, name = _run_fix(exc.fix), "stdin" if path == "-" else Path(path).name
            failed.append(MegasolveError(field=f"{name}: {exc.field}", value=exc.value, rule=exc.rule,
                                         fix=fix) if name not in exc.field else exc)
    return runs, failed


# A layout rule's fix names estimate's flags; a run's sizes come from its log, which wins over --seq-len and has no
# --tp: what replaces a value the log states is --arg with Megatron's argument name (solver/runs.py)
_RUN_FLAGS = {"--seq-len": "seq-length", "--tp": "tensor-model-parallel-size", "--pp": "pipeline-model-parallel-size",
              "--cp": "context-parallel-size", "--ep": "expert-model-parallel-size",
              "--etp": "expert-tensor-parallel-size", "--mbs": "micro-batch-size",
              "--vpp": "num-virtual-stages-per-pipeline-rank"}


def _run_fix(fix: str) -> str:
    """``fix`` with estimate's layout flags as the ``--arg NAME=N`` that replaces what a log states.

    >>> _run_fix("change --seq-len or --tp")
    'change --arg seq-length=N or --arg tensor-model-parallel-size=N (a value the log states wins over the flags)'
    """
    out = re.sub(r"(--[a-z-]+)(?![a-z-])", lambda m: f"--arg {_RUN_FLAGS[m.group(1)]}=N" if m.group(1) in _RUN_FLAGS
                 else m.group(1), fix)
    return out if out == fix else f"{out} (a value the log states wins over the flags)"


@register
@click.command("check", epilog="Examples:\n\n\b\n"
               "  megasolve check train.log --gpu h100\n"
               "  tail -n 500 train.log | megasolve check - --gpu h100\n"
               "  megasolve check runs.yaml --format json\n"
               "  megasolve check logs/*.log --gpu a100-80g --profile my-cluster.yaml")
@run_options
@click.option("--profile", default=None, metavar="PROFILE.yaml",
              help="Calibration profile to predict with (default: the shipped published-megatron-runs).")
@format_option()
def check_command(paths, profile, fmt: str, **defaults) -> None:
    """Prediction vs measurement for each run, term by term: step time (compute, TP/CP/EP/PP/DP
    communication, bubble, optimizer) and memory by component on the measured rank, with the term
    most likely behind each gap.

    Exit code 0: every RUN was read; 2: some RUN could not be read (each named on stderr; the others
    are still checked).
    """
    from megasolve.cost.calibration import load_profile
    from megasolve.solver.calibrate import check

    prof = load_profile(profile)
    runs, failed = read_all(paths, defaults)
    results = [check(run, prof) for run in runs]
    if fmt in ("json", "yaml"):
        click.echo(render.dump(results, fmt))
    else:
        for result in results:
            print_check(result)
    for exc in failed:
        click.echo(f"error: {one_line(str(exc))}", err=True)
    if failed:
        sys.exit(2)


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def print_check(r: dict[str, Any]) -> None:
    from rich.table import Table

    out = render.console()
    out.print(f"[bold]{r['run']}[/]: {r['model']} on {r['cluster']['num_gpus']} x {r['cluster']['gpu']}, "
              f"seq {r['workload']['seq_length']}, gbs {r['workload']['global_batch_size']}, "
              f"{r['workload']['precision']}  layout {render.layout_label(r['layout'])}  (profile {r['profile']})")
    table = Table(title_justify="left")
    for col in ("", "measured", "predicted", "error"):
        table.add_column(col, justify="left" if not col else "right")
    errors = {"step_time_s": r["error"].get("step_time"), "peak_allocated_gb": r["error"].get("peak_allocated"),
              "tokens_per_s_per_gpu": None}
    for key in ("step_time_s", "tokens_per_s_per_gpu", "peak_allocated_gb"):
        err = errors[key]
        if key == "tokens_per_s_per_gpu" and r["measured"][key] and r["predicted"][key]:
            err = r["predicted"][key] / r["measured"][key] - 1
        table.add_row(key + (f" (rank {r['measured_rank']}, stage {r['pipeline_stage']})"
                             if key == "peak_allocated_gb" and r["measured_rank"] is not None else ""),
                      _fmt(r["measured"][key], 4), _fmt(r["predicted"][key], 4), "-" if err is None else f"{err:+.1%}")
    out.print(table)
    step = r["predicted"]["step_time_s"]
    terms = ", ".join(f"{k} {v:.3g} s ({v / step:.0%})" for k, v in r["time_terms_s"].items() if v > 0)
    out.print(f"  time terms (predicted): {terms}")
    mem = ", ".join(f"{k.removesuffix('_gb')} {v:.1f} GB" for k, v in r["memory_terms_gb"].items())
    out.print(f"  memory on stage {r['pipeline_stage']} (predicted allocated): {mem}")
    for what, cause in r["likely_cause"].items():
        if cause:
            out.print(f"  likely cause of the {what.replace('_', ' ')} gap: {cause['text']}")
    if "oom" in r:
        out.print(f"  out of memory: {r['oom']['verdict']}")
    for row in r.get("parameters_per_rank", []):
        out.print(f"  parameters on rank (tp {row['tp_rank']}, pp {row['pp_rank']}): log {row['log']:,}, "
                  f"megasolve {row['megasolve']:,} ({row['error']:+.2%})")
    for note in r["notes"]:
        out.print(f"  [dim]note: {note}[/]")
    out.print()


@register
@click.command("calibrate", epilog="Examples:\n\n\b\n"
               "  megasolve calibrate run1.log run2.log --gpu h100 --out my-cluster.yaml\n"
               "  megasolve calibrate runs.yaml --out my-cluster.yaml && \\\n"
               "      megasolve -m llama-3.1-70b -n 64 -g h100 --profile my-cluster.yaml")
@run_options
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), metavar="PROFILE.yaml",
              help="Where to write the fitted profile (for --profile on solve, estimate, whatif, check).")
@click.option("--name", default=None, help="Profile name (default: the --out file's stem).")
@format_option()
def calibrate_command(paths, out_path: str, name: str | None, fmt: str, **defaults) -> None:
    """Fit the speed factors and the memory reserve to measured runs (the shipped values are the
    priors; only as many free factors as the runs support) and write a profile; print which factors
    are free or fixed and why, and each run's error before and after, with leave-one-out errors.

    Exit code 0: profile written; 2: bad input or an unreadable RUN.
    """
    from megasolve.solver.calibrate import calibrate

    runs, failed = read_all(paths, defaults)
    if failed:
        raise failed[0]
    profile = calibrate(runs, name=name or Path(out_path).stem)
    try:
        profile.write(out_path)
    except OSError as exc:
        raise MegasolveError(field="--out", value=out_path, rule=f"cannot be written ({exc.strerror})",
                             fix="choose a writable path") from None
    data = profile.as_dict()
    if fmt in ("json", "yaml"):
        click.echo(render.dump(data, fmt))
    else:
        print_calibration(data)
    render.note(f"profile written to {out_path}; use it with --profile {out_path}")


def print_calibration(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = render.console()
    out.print(f"[bold]profile {data['profile']}[/] for {data['gpu']} from {len(data['runs'])} run(s); "
              f"priors: {data['base']}" + (f"; software seen: {', '.join(data['software'])}" if data['software'] else ""))
    for knob, rec in data["fitted"].items():
        if rec.get("free"):
            if "factor" in rec:
                out.print(f"  {knob:14s} free   x{rec['factor']:.3f} (range {rec['range'][0]:.3f}-{rec['range'][1]:.3f}, "
                          f"prior x1 sd {rec['prior_sigma']:.0%})")
            else:
                high = "-" if rec["range"][1] is None else rec["range"][1]
                out.print(f"  {knob:14s} free   {rec['value']} GB (prior {rec['prior']}, range {rec['range'][0]}-{high}; "
                          f"{rec['from']})")
        else:
            shown = f"{rec['value']} GB (prior) " if "value" in rec else ""
            out.print(f"  {knob:14s} fixed  {shown}{rec.get('reason', '')}")
        for path, v in rec.get("values", {}).items():  # each factor the knob moves: prior -> value (range)
            rng = f" (range {v['range'][0]:.4g}-{v['range'][1]:.4g})" if "range" in v else ""
            out.print(f"  [dim]{'':14s}        {path}: {v['prior']:.4g} -> {v['value']:.4g}{rng}[/]")
    rows = data["report"].get("runs", [])
    if rows:
        table = Table(title="Step time error per run (predicted / measured - 1)", title_justify="left")
        for col in ("run", "measured s", "before", "after (fit on all)", "leave-one-out after"):
            table.add_column(col, justify="left" if col == "run" else "right")
        for row in rows:
            table.add_row(row["run"], f"{row['measured_step_s']:.3f}", f"{row['error_before']:+.1%}",
                          f"{row['error_after']:+.1%}", f"{row['loo_error_after']:+.1%}")
        out.print(table)
        rep = data["report"]
        out.print(f"median |error|: before {rep['median_abs_error_before']:.1%}, after {rep['median_abs_error_after']:.1%}, "
                  f"leave-one-out {rep['median_abs_loo_error_after']:.1%}")
