"""``megasolve whatif``: the best layout, speed and cost over cluster sizes, GPU types, sequence
lengths and batch sizes; the smallest cluster that fits."""

from __future__ import annotations

import csv
import io
import sys
from typing import Any

import click

from megasolve.cli import render
from megasolve.cli.app import register
from megasolve.cli.options import (cluster_options, default_seq_length, format_option, load_model,
                                   load_profile_option, model_option, recipe_fields, recipe_options, reject_moe_knobs,
                                   set_on_command_line)
from megasolve.cli.plot import plot_option
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import ATTENTION_KINDS, PRECISION_CHOICES


@register
@click.command("whatif", epilog="Examples:\n\n\b\n"
               "  megasolve whatif --model qwen3-235b-a22b --gpu h100 --gpus 64,128,256,512\n"
               "  megasolve whatif -m llama-3.1-70b -g a100-80g,h100,b200 -n 64..1024 --tokens 15e12 \\\n"
               "      --gpu-hour-price 2.5 --plot sweep.png\n"
               "  megasolve whatif -m llama-3.1-8b -g h100 -n 8,16,32 --seq-len 4096,32768 --format csv")
@model_option
@cluster_options(multi_gpus=True)
@click.option("--seq-len", "seq_lens", default="4096", show_default=True, metavar="N[,N...]",
              help="Sequence length(s) to sweep.")
@click.option("--gbs", default=None, metavar="N[,N...]",
              help="Global batch size(s) to sweep (default: about 4M tokens per step for each sequence length).")
@click.option("--precision", type=click.Choice(list(PRECISION_CHOICES)), default="bf16", show_default=True,
              help="Training precision of the GEMMs (fp8-params: FP8 primary weights; fp4 / nvfp4: NVFP4).")
@click.option("--attention", type=click.Choice(list(ATTENTION_KINDS)), default="flash", show_default=True,
              help="Fused/flash attention or unfused.")
@recipe_options
@click.option("--tokens", type=float, default=None, metavar="N",
              help="Tokens to train on (e.g. 1e12): adds wall-clock days and GPU-hours per point.")
@click.option("--gpu-hour-price", type=float, default=None, metavar="PRICE",
              help="Price of one GPU-hour (any currency): adds the cost to train (needs --tokens).")
@click.option("--time-limit", type=click.FloatRange(0.1, 86400), default=60.0, show_default=True,
              help="Seconds per solve; a point that runs out is marked as not proven optimal.")
@click.option("--jobs", "-j", type=click.IntRange(1, 4096), default=None,
              help="Parallel solver processes (default: the number of CPUs).")
@click.option("--min-gpus/--no-min-gpus", "find_min", default=True, show_default=True,
              help="Search the smallest cluster that fits for every GPU type / seq / gbs.")
@click.option("--min-headroom", "min_headroom", metavar="PCT%|GB", default=None,
              help="Memory every stage must leave free, as in solve (10% of usable memory by default); the "
                   "smallest-cluster search uses the same margin.")
@click.option("--require", "requires", multiple=True, metavar="EXPR",
              help='A team rule over the layout axes (repeatable), as in solve, e.g. "tp*cp <= 8".')
@format_option("csv")
@plot_option("Draw throughput, MFU (and time and cost to train) against cluster size.")
def whatif_command(model_ref: str, gpus, gpu, gpus_per_node, nvlink_domain, nic_gbps, cluster_file, seq_lens, gbs,
                   precision, attention, tokens, gpu_hour_price, time_limit, jobs, find_min, min_headroom, requires,
                   fmt, plot_path, **recipe) -> None:
    """Sweep cluster sizes, GPU types, sequence lengths and batch sizes (every combination): the
    best layout and the runner-up at each point, peak memory, step time, tokens/s, MFU, scaling
    efficiency, time and cost to train, and the smallest cluster that fits (found by the solver).

    Exit code 0: the sweep ran (points that do not fit are reported, not errors); 2: invalid input, or a
    Megatron rule that refuses every GPU type and sequence of the sweep (e.g. FP8 on a100-80g alone).
    """
    from megasolve.cli.parsing import parse_gpu_counts, parse_int_list, parse_name_list
    from megasolve.cli.solve_cmd import parse_headroom, searched_knobs
    from megasolve.solver.whatif import ClusterKind, whatif

    if plot_path:
        from megasolve.cli.plot import check_plot_path

        check_plot_path(plot_path)
    if gpu_hour_price is not None and tokens is None:
        raise MegasolveError(field="--gpu-hour-price", value=gpu_hour_price, rule="a cost needs --tokens",
                             fix="add --tokens N (e.g. --tokens 1e12)")
    profile = load_profile_option(recipe)
    kinds, sizes = _cluster_kinds(gpus, gpu, gpus_per_node, nvlink_domain, nic_gbps, cluster_file)
    resolved = load_model(model_ref)
    if resolved.note:
        render.note(resolved.note)
    reject_moe_knobs(resolved.spec, recipe)
    seqs = parse_int_list("--seq-len", seq_lens)
    if len(seqs) == 1:
        seqs[0], note = default_seq_length(resolved.spec, seqs[0], given=set_on_command_line("seq_lens"))
        if note:
            render.deferred_note(note)
    batches = parse_int_list("--gbs", gbs) if gbs is not None else None
    sizes = sizes if sizes is not None else parse_gpu_counts(gpus)
    kinds = kinds if kinds is not None else [ClusterKind(gpu=name, gpus_per_node=gpus_per_node,
                                                         nvlink_domain=nvlink_domain, nic_gbit_per_gpu=nic_gbps)
                                             for name in parse_name_list("--gpu", gpu)]
    with _progress(f"what-if for {resolved.spec.name}") as progress:
        result = whatif(resolved.spec, gpus=sizes, gpu=kinds, seq_length=seqs, global_batch_size=batches,
                        precision=precision, attention=attention, tokens=tokens, gpu_hour_price=gpu_hour_price,
                        time_limit_s=time_limit, jobs=jobs, min_gpus=find_min, progress=progress,
                        recipe=recipe_fields(recipe), profile=profile, min_headroom=parse_headroom(min_headroom),
                        requires=requires, knobs=searched_knobs(click.get_current_context()))
    data = result.as_dict()
    if fmt in ("json", "yaml"):
        click.echo(render.dump(data, fmt))
    elif fmt == "csv":
        click.echo(to_csv(data), nl=False)
    else:
        print_whatif(data, render.console())
    render.model_notes(resolved.spec)
    if plot_path:
        from megasolve.cli.plot import whatif_plot

        whatif_plot(plot_path, data)
        render.note(f"plot written to {plot_path}")


def _cluster_kinds(gpus, gpu, gpus_per_node, nvlink_domain, nic_gbps, cluster_file):
    """(kinds, sizes) from a cluster file, or (None, None) to build them from the flags."""
    from megasolve.solver.whatif import ClusterKind
    from megasolve.topology.cluster import Cluster, check_cluster_flags

    check_cluster_flags(gpus_per_node=gpus_per_node, nvlink_domain=nvlink_domain, nic_gbit_per_gpu=nic_gbps)
    if cluster_file:
        if gpu:
            raise MegasolveError(field="--gpu", value=gpu, rule="the --cluster file already names the GPU",
                                 fix="drop --gpu or edit the cluster file")
        template = Cluster.from_yaml(cluster_file)
        return [ClusterKind(template=template)], None if gpus else [template.num_gpus]
    if gpus is None:
        raise MegasolveError(field="--gpus", value="missing", rule="the cluster sizes are required",
                             fix="pass --gpus 64,128,256 or a range --gpus 8..1024")
    if gpu is None:
        raise MegasolveError(field="--gpu", value="missing", rule="the GPU type is required",
                             fix="pass --gpu h100 or several: --gpu a100-80g,h100,b200 (see `megasolve gpus`)")
    return None, None


class _progress:
    """A rich progress bar on stderr while the sweep runs (only when stderr is a terminal)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.bar = None
        self.task = None

    def __enter__(self):
        if not sys.stderr.isatty():
            return None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=render.console(stderr=True), transient=True)
        self.bar.__enter__()
        self.task = self.bar.add_task(self.description, total=None)
        return self.update

    def update(self, done: int, total: int) -> None:
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


# ---------------------------------------------------------------------------- rendering
def _si(value: float) -> str:
    """914313 -> '914k', 1.23e6 -> '1.23M'."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            digits = 2 if abs(value) < 10 * scale else 1 if abs(value) < 100 * scale else 0
            return f"{value / scale:.{digits}f}{suffix}"
    return f"{value:.0f}"


def _series_key(p: dict[str, Any]) -> str:
    return f"{p['cluster']['gpu']}/seq{p['workload']['seq_length']}/gbs{p['workload']['global_batch_size']}"


def print_whatif(data: dict[str, Any], out) -> None:
    """The sweep as a rich table (deterministic: no wall-clock times). Swept dimensions get a column;
    the ones with a single value go to the title."""
    from rich import box
    from rich.table import Table

    points = data["points"]
    with_tokens = data["tokens"] is not None
    with_cost = data["gpu_hour_price"] is not None
    dims = [("GPU", lambda p: p["cluster"]["gpu"]), ("GPUs", lambda p: str(p["cluster"]["num_gpus"])),
            ("seq", lambda p: str(p["workload"]["seq_length"])),
            ("gbs", lambda p: str(p["workload"]["global_batch_size"]))]
    varying = [(name, get) for name, get in dims if name == "GPUs" or len({get(p) for p in points}) > 1]
    title = f"What-if: {data['model']}"
    if points:
        fixed = {name: get(points[0]) for name, get in dims if (name, get) not in varying}
        title += "".join(f" on {v}" if k == "GPU" else f", {k} {v}" for k, v in fixed.items())
        title += f", {points[0]['workload']['precision']}"
    if with_tokens:
        title += f"; {data['tokens']:.3g} tokens to train"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    columns = [name for name, _ in varying] + ["best layout / runner-up", "peak\nGB", "step\ns", "tok/s\n/GPU",
                                                "tok/s", "MFU", "scaling"]
    if with_tokens:
        columns += ["days", "GPU-h"]
    if with_cost:
        columns.append("cost")
    for col in columns:
        table.add_column(col, justify="left" if col in ("GPU", "best layout / runner-up") else "right")
    notes: list[str] = []
    for p in points:
        head = [get(p) for _, get in varying]
        if p["layout"] is None:
            notes.append(p["reason"])
            verdict = "not settled in time" if p["status"] == "unknown" else "does not fit"
            table.add_row(*head, f"{verdict} [{len(notes)}]", *["-"] * (len(columns) - len(head) - 1),
                          style="dim")
            continue
        t, mem = p["time"], p["memory"]
        label = _with_tag(render.layout_label(p["layout"]), p["comm"]) + ("" if p["status"] == "optimal" else " *")
        runner = p["runner_up"]
        if runner:
            label += (f"\n[dim]2nd: {_with_tag(render.layout_label(runner['layout']), runner['comm'])} "
                      f"(+{runner['slower_by']:.1%})[/]")
        row = head + [label, f"{mem['peak_gb']:.1f}", f"{t['step_s']:.2f}", f"{t['tokens_per_s_per_gpu']:,.0f}",
                      _si(p["tokens_per_s"]), f"{t['mfu']:.1%}", f"{p['scaling_efficiency']:.0%}"]
        if with_tokens:
            row += [f"{p['days_to_train']:.1f}", _si(p["gpu_hours"])]
        if with_cost:
            row.append(_si(p["cost"]))
        table.add_row(*row)
    out.print(table)
    for i, reason in enumerate(notes, start=1):
        out.print(f"[{i}] {reason}", markup=False)
    if any(p["status"] == "feasible" for p in points):
        out.print("* best found within --time-limit, not proven optimal")
    out.print("scaling: tokens/s/GPU relative to the smallest fitting size of the same GPU, seq and gbs"
              + (f"; cost at {data['gpu_hour_price']:g} per GPU-hour" if with_cost else ""))
    for name, basis in data.get("speed_basis", {}).items():
        line = render.speed_basis_line({"speed_basis": basis})
        out.print(line.replace("speed: ", f"speed on {name}: ", 1) if len(data["speed_basis"]) > 1 else line)
    for m in data["min_gpus"].values():
        where = f"{m['gpu']}, seq {m['seq_length']}, gbs {m['global_batch_size']}"
        if m["num_gpus"] is None:
            out.print(f"smallest cluster that fits ({where}): none ({m['note']})")
            continue
        below = f"; {m['largest_not_fitting']} do not" if m["largest_not_fitting"] else ""
        exact = "" if m["exact"] else f" (not exact: {m['note']})"
        plural = "" if m["num_gpus"] == 1 else "s"
        out.print(f"smallest cluster that fits ({where}): {m['num_gpus']} GPU{plural}{below}{exact} "
                  f"({m['feasibility_solves']} CP-SAT feasibility solves)")


def _with_tag(label: str, comm: dict[str, Any] | None) -> str:
    """A layout label with its communication settings' tag (``solve``'s table: ``deepep+epov``, ``tpov``)."""
    return f"{label} {comm['tag']}" if comm and comm.get("tag") else label


CSV_COLUMNS = ("gpu", "num_gpus", "seq_length", "global_batch_size", "status", "layout", "peak_gb", "capacity_gb",
               "step_s", "tokens_per_s_per_gpu", "tokens_per_s", "mfu", "scaling_efficiency", "days_to_train",
               "gpu_hours", "cost", "runner_up", "runner_up_slower_by", "reason")


def to_csv(data: dict[str, Any]) -> str:
    """One row per point (the table's numbers, unrounded by the table)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for p in data["points"]:
        runner = p["runner_up"]
        fits = p["layout"] is not None
        writer.writerow([
            p["cluster"]["gpu"], p["cluster"]["num_gpus"], p["workload"]["seq_length"],
            p["workload"]["global_batch_size"], p["status"], render.layout_label(p["layout"]) if fits else "",
            p["memory"]["peak_gb"] if fits else "", p["memory"]["capacity_gb"] if fits else "",
            p["time"]["step_s"] if fits else "", p["time"]["tokens_per_s_per_gpu"] if fits else "",
            _blank(p["tokens_per_s"]), p["time"]["mfu"] if fits else "", _blank(p["scaling_efficiency"]),
            _blank(p["days_to_train"]), _blank(p["gpu_hours"]), _blank(p["cost"]),
            render.layout_label(runner["layout"]) if runner else "", runner["slower_by"] if runner else "",
            p["reason"] or ""])
    return buffer.getvalue()


def _blank(value: Any) -> Any:
    return "" if value is None else value


__all__ = ["print_whatif", "to_csv", "whatif_command"]
