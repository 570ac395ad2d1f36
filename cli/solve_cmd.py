"""``megasolve solve`` (the default command): ranked top-k layouts, or why nothing fits."""

from __future__ import annotations

import dataclasses

import sys
from typing import Any

import click

from megasolve.cli import render
from megasolve.cli.app import register
from megasolve.cli.options import (cluster_options, format_option, load_inputs, load_profile_option, model_option,
                                   workload_options)
from megasolve.cli.plot import plot_option
from megasolve.cli.report import report_option
from megasolve.models.errors import MegasolveError


FIX_INTS = ("tp", "pp", "vpp", "cp", "dp", "ep", "etp", "mbs", "cpu_offload_layers")
FIX_FLOATS = ("optimizer_offload_fraction",)
FIX_LISTS = ("recompute_modules",)  # a+b or a,b: Megatron's --recompute-modules
FIX_OPTIONAL_INTS = ("recompute_num_layers", "first_stage_layers", "last_stage_layers")  # or "none"
FIX_BOOLS = ("sp", "sequence_parallel", "dop", "distributed_optimizer", "fsdp", "account_for_embedding",
             "account_for_loss", "tp_comm_overlap", "moe_ep_overlap", "moe_shared_expert_overlap")


def parse_fix(values: tuple[str, ...]) -> dict[str, Any]:
    """``--fix tp=4 --fix recompute=full --fix sp=true`` -> {"tp": 4, "recompute": "full", "sp": True}:
    the text typed by axis (the solver checks the names and the values' ranges).

    >>> parse_fix(("tp=4", "first_stage_layers=none", "dop=yes"))
    {'tp': 4, 'first_stage_layers': None, 'dop': True}
    """
    fixed: dict[str, Any] = {}
    for item in values:
        if "=" not in item:
            raise MegasolveError(field="--fix", value=item, rule="must be AXIS=VALUE", fix="e.g. --fix tp=4")
        key, value = item.split("=", 1)
        key, value = key.strip().replace("-", "_"), value.strip()
        if not key or not value:
            raise MegasolveError(field="--fix", value=item, rule="must be AXIS=VALUE", fix="e.g. --fix pp=8")
        fixed[key] = _fix_value(key, value)
    return fixed


def _fix_value(key: str, text: str) -> Any:
    if key in FIX_OPTIONAL_INTS and text.lower() == "none":
        return None
    if key in FIX_INTS + FIX_OPTIONAL_INTS:
        try:
            return int(text)
        except ValueError:
            raise MegasolveError(field="--fix", value=f"{key}={text}", rule="must be an integer",
                                 fix=f"e.g. --fix {key}=2") from None
    if key in FIX_FLOATS:
        try:
            return float(text)
        except ValueError:
            raise MegasolveError(field="--fix", value=f"{key}={text}", rule="must be a number",
                                 fix=f"e.g. --fix {key}=0.5") from None
    if key in FIX_LISTS:
        return tuple(m.strip() for m in text.replace("+", ",").split(",") if m.strip())
    if key in FIX_BOOLS:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise MegasolveError(field="--fix", value=f"{key}={text}", rule="must be true or false",
                             fix=f"e.g. --fix {key}=true")
    return text  # recompute kind, or a name the solver rejects with the list of axes


def searched_knobs(ctx: click.Context) -> tuple[str, ...]:
    """The communication knobs ``solve`` chooses per layout (``solver/knobs.py``): every one whose flag
    the user did not pass (a passed flag pins it, as ``--fix`` does)."""
    from click.core import ParameterSource

    from megasolve.solver.knobs import COMM_KNOBS

    return tuple(k for k in COMM_KNOBS if ctx.get_parameter_source(k) in (None, ParameterSource.DEFAULT))


def parse_headroom(text: str | None):
    """``--min-headroom``: ``10%`` (of usable memory), ``8`` or ``8GB`` (10^9 bytes), ``0`` (none), on
    top of every stage's uncertainty band; None: the default (``solver.solve.DEFAULT_MIN_HEADROOM``)."""
    from megasolve.solver.solve import DEFAULT_MIN_HEADROOM, Headroom

    if text is None:
        return DEFAULT_MIN_HEADROOM
    raw = text.strip().lower().replace(" ", "")
    try:
        if raw.endswith("%"):
            return Headroom(fraction=float(raw[:-1]) / 100)
        return Headroom(gb=float(raw[:-2] if raw.endswith("gb") else raw))
    except ValueError:
        raise MegasolveError(field="--min-headroom", value=text, rule="must be a percentage or GB",
                             fix="e.g. --min-headroom 10% or --min-headroom 8GB") from None


@register
@click.command("solve", epilog="Examples:\n\n\b\n"
               "  megasolve --model deepseek-v3-lite --gpus 64 --gpu a100-80g\n"
               "  megasolve solve -m llama-3.1-70b -n 64 -g h100 --seq-len 8192 --top-k 10 --fix tp=4\n"
               "  megasolve solve -m qwen3-30b-a3b -n 16 -g h100 --format megatron\n"
               "  megasolve solve -m my-model/config.json --cluster cluster.yaml --format json")
@model_option
@cluster_options()
@workload_options
@click.option("--top-k", "-k", type=click.IntRange(1, 100), default=5, show_default=True,
              help="How many layouts to rank.")
@click.option("--fix", "fix", multiple=True, metavar="AXIS=VALUE",
              help="Pin an axis (repeatable): tp, pp, vpp, cp, dp, ep, etp, mbs, sequence_parallel, recompute, "
                   "recompute_num_layers, distributed_optimizer, fsdp, first_stage_layers, last_stage_layers; "
                   "or a searched communication knob: tp_comm_overlap, moe_ep_overlap, "
                   "moe_shared_expert_overlap (=true/false; passing its flag pins it too).")
@click.option("--time-limit", type=click.FloatRange(0.1, 86400), default=60.0, show_default=True,
              help="Seconds for the search; when it runs out the best layouts found so far are returned, "
                   "marked as not proven optimal.")
@click.option("--engine", type=click.Choice(["cpsat", "exhaustive"]), default="cpsat", show_default=True,
              help="CP-SAT, or the brute-force oracle (for verification).")
@click.option("--allow-cross-domain-tp", is_flag=True, help="Allow TP groups that leave an NVLink domain.")
@click.option("--min-headroom", "min_headroom", metavar="PCT%|GB", default=None,
              help="Memory every stage must leave free on top of its uncertainty band (by default every "
                   "stage must fit with its band alone: 0.5% of static bytes + 5-15% of activations, see "
                   "README): 10% of usable memory or 8GB. If nothing fits with band and margin, the "
                   "layouts that fit without them are shown marked tight.")
@click.option("--require", "requires", multiple=True, metavar="EXPR",
              help='A team rule over the layout axes (repeatable), e.g. "tp*cp <= 8", "ep >= 8", '
                   '"cp > 1 -> tp > 1 and sp".')
@format_option("megatron", "bridge", "bridge-main", "nemo", "verl")
@click.option("--rank", "launch_rank", type=click.IntRange(1, 100), default=1, show_default=True,
              help="With a launch format: which ranked layout to print (one, so the output pastes as is).")
@plot_option("Draw the per-stage memory of layout #1 against the GPU's usable capacity.")
@report_option
def solve_command(model_ref: str, gpus, gpu, gpus_per_node, nvlink_domain, nic_gbps, cluster_file,
                  top_k: int, fix: tuple[str, ...], time_limit: float, engine: str,
                  allow_cross_domain_tp: bool, min_headroom: str | None, requires: tuple[str, ...], fmt: str,
                  launch_rank: int, plot_path: str | None, report_path: str | None, **workload) -> None:
    """Rank the fastest Megatron layouts that fit, with memory and time breakdowns.

    Exit code 0: layouts found; 1: nothing fits (the reasons, the closest layouts and repairs are
    printed); 2: invalid input.
    """
    from megasolve.cli.commands import _check_extras
    from megasolve.solver.solve import solve

    _check_extras(plot_path, report_path)
    if launch_rank > top_k:
        raise MegasolveError(field="--rank", value=launch_rank, rule=f"beyond --top-k {top_k}",
                             fix=f"pass --rank 1..{top_k} or --top-k {launch_rank}")
    headroom = parse_headroom(min_headroom)
    knobs = searched_knobs(click.get_current_context())
    profile = load_profile_option(workload)
    resolved, cluster, workload = load_inputs(
        model_ref=model_ref, gpus=gpus, gpu=gpu, gpus_per_node=gpus_per_node, nvlink_domain=nvlink_domain,
        nic_gbps=nic_gbps, cluster_file=cluster_file, **workload)
    with render.status(f"searching layouts for {resolved.spec.name} on {cluster.num_gpus} x {cluster.gpu.name}"):
        result = solve(resolved.spec, cluster, workload, top_k=top_k, fixed=parse_fix(fix), time_limit_s=time_limit,
                       engine=engine, allow_cross_domain_tp=allow_cross_domain_tp, min_headroom=headroom,
                       requires=requires, profile=profile, knobs=knobs)
    data = result.as_dict()
    render.model_notes(resolved.spec)
    if fmt in ("json", "yaml"):
        click.echo(render.dump(data, fmt))
    elif fmt == "table":
        print_solve(data, resolved.spec.name, cluster, workload)
        if result.layouts and (tip := fused_loss_tip(resolved.spec, cluster, result.layouts[0], profile)):
            render.note(tip)
    elif result.layouts:
        from megasolve.cli.launch import launch_text

        if launch_rank > len(result.layouts):
            raise MegasolveError(field="--rank", value=launch_rank,
                                 rule=f"only {len(result.layouts)} layouts were ranked",
                                 fix=f"pass --rank 1..{len(result.layouts)} or a larger --top-k")
        report = result.layouts[launch_rank - 1]
        click.echo(f"# rank {launch_rank} of {len(result.layouts)}: {render.layout_label(report.layout_dict())}, "
                   f"{report.estimate.time.tokens_per_s_per_gpu:.0f} tokens/s/GPU")
        click.echo(launch_text(fmt, resolved.spec, cluster, report.workload, report.layout))
    if plot_path or report_path:
        _write_extras(plot_path, report_path, result, data, resolved.spec, cluster, workload)
    if result.status in ("infeasible", "unknown"):
        if fmt not in ("json", "yaml", "table"):
            print_infeasible(data)
        sys.exit(1)


def fused_loss_tip(spec, cluster, report, profile) -> str | None:
    """What Megatron's fused loss (``--cross-entropy-loss-fusion``, its native kernel: the one Megatron-LM accepts)
    would save #1 when the plan runs the unfused default: 28 against 52 B of HBM traffic a logit
    (``calibration.yaml`` ``loss_bytes_per_logit``); said when it is at least 1 % of the step."""
    if report.workload.cross_entropy != "unfused":
        return None
    from megasolve.solver.api import estimate

    fused = estimate(spec, cluster, dataclasses.replace(report.workload, cross_entropy="native"), report.layout,
                     allow_cross_domain_tp=True, profile=profile).estimate.time.step_s
    now = report.estimate.time.step_s
    if fused > now * 0.99:
        return None
    return (f"#1 with Megatron's fused loss (--cross-entropy native: --cross-entropy-loss-fusion) would take "
            f"{fused:.2f} s a step instead of {now:.2f} ({1 - fused / now:.1%} less)")


def _write_extras(plot_path, report_path, result, data: dict, spec, cluster, workload) -> None:
    if plot_path and result.layouts:
        from megasolve.cli.plot import memory_plot

        memory_plot(plot_path, result.layouts[0].as_dict(), heading="#1 ")
        render.note(f"plot written to {plot_path}")
    elif plot_path:
        render.note(f"no layout fits, so there is no memory to plot; {plot_path} not written")
    if report_path:
        from megasolve.cli.launch import launch_text
        from megasolve.cli.report import solve_document, write_report

        flags = launch_text("megatron", spec, cluster, result.layouts[0].workload,
                            result.layouts[0].layout) if result.layouts else None
        write_report(report_path, solve_document(data, spec=spec, cluster=cluster, workload=workload, flags=flags))
        render.note(f"report written to {report_path}")


def why_line(data: dict) -> str:
    """One line on why the winner wins."""
    layouts = data["layouts"]
    best = layouts[0]
    t = best["time"]
    parts = [f"fastest predicted step ({t['step_s']:.2f} s, {t['tokens_per_s_per_gpu']:.0f} tokens/s/GPU)"]
    if len(layouts) > 1:
        gap = layouts[1]["time"]["step_s"] / t["step_s"] - 1
        parts.append(f"{gap:.1%} ahead of #2")
    tag = best.get("comm", {}).get("tag")
    if tag:  # the communication settings the search chose (solver/knobs.py), launched with the flags
        parts.append(f"launched with {tag}")
    breakdown = {k: v for k, v in t["breakdown_s"].items() if k not in ("compute", "optimizer")}
    worst = max(breakdown, key=breakdown.get)
    parts.append(f"compute {t['breakdown_s']['compute'] / t['step_s']:.0%} of the step; largest overhead "
                 f"{worst.replace('_', ' ')} {breakdown[worst] / t['step_s']:.0%}")
    headroom = best["memory"]["capacity_gb"] - best["memory"]["peak_gb"]
    required = data["search"].get("min_headroom_gb", 0.0)
    band = best["memory"].get("peak_uncertainty_gb", 0.0) if data["search"].get("uncertainty_band") else 0.0
    asked = (f"its ±{band:.1f} GB band" if band else "") + (" + " if band and required else "") \
        + (f"the {required:.1f} GB asked" if required or not band else "")
    if best.get("tight"):
        parts.append(f"only {headroom:.1f} GB headroom on its peak stage, less than {asked} "
                     "(TIGHT: nothing fits with it; it may run out of memory)")
    else:
        parts.append(f"{headroom:.1f} GB headroom on its peak stage (covers {asked})")
    return "; ".join(parts)


def equivalent_label(entry: dict) -> str:
    """`` = cp2 dp32 mbs4``: the values in which each other spelling of the plan differs."""
    spellings = []
    mine = entry["layout"]
    for other in entry.get("equivalent_layouts", []):
        differ = [f"{axis}{other[axis]}" for axis in ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "mbs")
                  if other[axis] != mine[axis]]
        if other["sequence_parallel"] != mine["sequence_parallel"]:
            differ.append("sp" if other["sequence_parallel"] else "no-sp")
        ours = set(render.layout_label(mine).split())
        differ += [part for part in render.layout_label(other).split() if part not in ours
                   and not any(part.startswith(axis) and part[len(axis):].isdigit()
                               for axis in ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "mbs"))]
        spellings.append(" ".join(differ) or "same flags")
    return f" = {'; = '.join(spellings)}" if spellings else ""


def equivalent_lines(entries: list[dict]) -> list[str]:
    """One line per distinct respelling, naming every plan it applies to (``#1, #2 = cp2 dp32 mbs4``)."""
    ranks: dict[str, list[str]] = {}
    for entry in entries:
        if entry.get("equivalent_layouts"):
            ranks.setdefault(equivalent_label(entry), []).append(f"#{entry['rank']}")
    return [f"{', '.join(names)}{label} (same cost, other spelling)" for label, names in ranks.items()]


def print_solve(data: dict, model: str, cluster, workload) -> None:
    from rich.table import Table

    out = render.console()
    search = data["search"]
    if not data["layouts"]:
        print_infeasible(data)
        return
    title = (f"{model} on {cluster.num_gpus} x {cluster.gpu.name}, seq {workload.seq_length}, "
             f"gbs {workload.global_batch_size}, {workload.precision}")
    table = Table(title=title, title_justify="left")
    for col in ("#", "layout", "peak GB", "headroom", "step s", "tokens/s/GPU", "MFU", "bubble", "top comm"):
        table.add_column(col, justify="left" if col in ("layout", "top comm") else "right")
    for entry in data["layouts"]:
        mem, t = entry["memory"], entry["time"]
        comm = {k: v for k, v in t["breakdown_s"].items() if k.endswith("_comm")}
        top = max(comm, key=comm.get)
        tag = entry.get("comm", {}).get("tag")
        label = render.layout_label(entry["layout"]) + (" sp" if entry["layout"]["sequence_parallel"] else "") \
            + (f" {tag}" if tag else "") + (" TIGHT" if entry.get("tight") else "")
        table.add_row(str(entry["rank"]), label, f"{mem['peak_gb']:.1f}", f"{mem['capacity_gb'] - mem['peak_gb']:.1f}",
                      f"{t['step_s']:.3f}", f"{t['tokens_per_s_per_gpu']:.0f}", f"{t['mfu']:.1%}",
                      f"{t['bubble_fraction']:.1%}", f"{top.replace('_comm', '')} {comm[top] / t['step_s']:.0%}")
    out.print(table)
    for line in equivalent_lines(data["layouts"]):  # one plan per row; its other spellings cost the same
        out.print(line)
    out.print(render.model_line(data["model_params"]))
    out.print(f"why #1: {why_line(data)}")
    if line := render.speed_basis_line(data):
        out.print(line)
    proven = "proven optimal under the cost model" if search["proven_optimal"] else \
        "NOT proven optimal (time limit): best found so far"
    out.print(f"search: {search['engine']}, {search['space_size']:,} combinations, {proven}, {search['wall_s']:.1f} s")
    out.print("launch #1 with: megasolve solve ... --format megatron (or bridge|bridge-main|nemo|verl; --rank N for #N)")


def print_infeasible(data: dict) -> None:
    out = render.console(stderr=False)
    out.print("[bold red]no layout fits[/]")
    for reason in data.get("reasons", []):
        out.print(f"  reason: {reason}")
    for entry in data.get("closest", []):
        out.print(f"  closest: {render.layout_label(entry['layout'])} needs {entry['peak_gb']:.1f} GB per GPU "
                  f"({entry['lacks_gb_per_gpu']:.1f} GB short)")
    for repair in data.get("repairs", []):
        out.print(f"  repair: {repair}")
