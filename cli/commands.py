"""The commands: ``models``, ``gpus``, ``estimate`` (``solve`` and ``whatif`` in their modules)."""

from __future__ import annotations

import sys

import click

from megasolve.cli import render
from megasolve.cli.app import register
from megasolve.cli.options import (WORKLOAD_OPTIONS, build_layout, cluster_options, format_option, layout_options,
                                   load_inputs, load_profile_option, model_option, take, workload_options)
from megasolve.cli.plot import plot_option
from megasolve.cli.report import report_option


def _attention_label(spec) -> str:
    """``GQA``, ``MLA``, ``MHA`` plus the variants: ``+SWA 4096`` (sliding window), ``+chunk 8192``,
    ``+sinks``."""
    label = "MLA" if spec.mla else ("MHA" if spec.num_query_groups == spec.num_attention_heads else "GQA")
    if spec.window_size is not None:
        label += f"+SWA {spec.window_size}"
    if spec.attention_chunk_size is not None:
        label += f"+chunk {spec.attention_chunk_size}"
    if spec.softmax_type == "learnable":
        label += "+sinks"
    return label


@register
@click.command("models", epilog="Example:\n\n  megasolve models --format json")
@format_option()
def models_command(fmt: str) -> None:
    """List the built-in model presets and aliases."""
    from megasolve.models.params import model_params
    from megasolve.models.presets import _catalog, load_preset

    catalog = _catalog()
    rows = []
    for name, entry in catalog["presets"].items():
        spec = load_preset(name)
        rows.append({
            "name": name, "hf_id": entry.get("hf_id"), "layers": spec.num_layers, "hidden": spec.hidden_size,
            "heads": spec.num_attention_heads, "kv_heads": spec.num_query_groups,
            "attention": _attention_label(spec),
            "experts": spec.moe.num_experts if spec.is_moe else 0, "top_k": spec.moe.top_k if spec.is_moe else 0,
            "mtp": spec.mtp_num_layers, "vocab": spec.vocab_size,
            "params_b": round(model_params(spec)["params_total"] / 1e9, 2),
            "active_params_b": round(model_params(spec)["params_active"] / 1e9, 2),
            "official": entry.get("official_params"),
        })
    aliases = [{"alias": k, "resolves_to": v["resolves_to"]} for k, v in catalog["aliases"].items()]
    if fmt != "table":
        click.echo(render.dump({"models": rows, "aliases": aliases}, fmt))
        return
    from rich.table import Table

    table = Table(title="Model presets (--model NAME)", title_justify="left")
    for col in ("name", "layers", "hidden", "heads/kv", "attention", "experts (top-k)", "MTP", "params", "active"):
        table.add_column(col, justify="left" if col in ("name", "attention") else "right")
    for r in rows:
        experts = f"{r['experts']} ({r['top_k']})" if r["experts"] else "-"
        table.add_row(r["name"], str(r["layers"]), str(r["hidden"]), f"{r['heads']}/{r['kv_heads']}", r["attention"],
                      experts, str(r["mtp"] or "-"), f"{r['params_b']:.2f}B", f"{r['active_params_b']:.2f}B")
    out = render.console()
    out.print(table)
    for a in aliases:
        out.print(f"alias {a['alias']} -> {a['resolves_to']}")


@register
@click.command("gpus", epilog="Example:\n\n  megasolve gpus --format yaml")
@format_option()
def gpus_command(fmt: str) -> None:
    """List the GPU catalog (dense peak FLOP/s, memory, links)."""
    from megasolve.topology.gpus import all_gpus

    rows = [{
        "name": g.name, "aliases": list(g.aliases), "memory_gb": round(g.memory_bytes / 1e9, 1),
        "usable_gib": round(g.usable_memory_bytes / 2**30, 1), "bf16_tflops": g.bf16_flops / 1e12,
        "fp8_tflops": g.fp8_flops / 1e12 if g.fp8_flops else None,
        "fp4_tflops": g.fp4_flops / 1e12 if g.fp4_flops else None, "hbm_gbps": g.hbm_bytes_per_s / 1e9,
        "nvlink_gbps_per_direction": g.nvlink_bytes_per_s / 1e9 if g.nvlink_bytes_per_s else None,
        "nvlink_domain": g.nvlink_domain, "gpus_per_node": g.gpus_per_node,
        "nic_gbit_per_gpu": g.nic_bytes_per_s * 8 / 1e9, "compute_capability": g.compute_capability}
        for g in all_gpus()]
    if fmt != "table":
        click.echo(render.dump({"gpus": rows}, fmt))
        return
    from rich.table import Table

    table = Table(title="GPU catalog (--gpu NAME; dense TFLOP/s; GB/s per direction)", title_justify="left")
    for col in ("name", "memory", "bf16", "fp8", "fp4", "HBM GB/s", "NVLink GB/s", "domain", "NIC Gb/s", "sm",
                "aliases"):
        table.add_column(col, justify="left" if col in ("name", "aliases") else "right")
    for r in rows:
        table.add_row(r["name"], f"{r['memory_gb']:.0f} GB", f"{r['bf16_tflops']:.0f}",
                      f"{r['fp8_tflops']:.0f}" if r["fp8_tflops"] else "-",
                      f"{r['fp4_tflops']:.0f}" if r["fp4_tflops"] else "-", f"{r['hbm_gbps']:.0f}",
                      f"{r['nvlink_gbps_per_direction']:.0f}" if r["nvlink_gbps_per_direction"] else "PCIe",
                      str(r["nvlink_domain"]), f"{r['nic_gbit_per_gpu']:.0f}",
                      f"{r['compute_capability']:.1f}" if r["compute_capability"] else "-", ", ".join(r["aliases"]))
    render.console().print(table)


@register
@click.command("estimate", epilog="Examples:\n\n\b\n"
               "  megasolve estimate --model llama-3.1-70b --gpus 64 --gpu h100 --tp 4 --pp 4 --cp 2 --seq-len 8192\n"
               "  megasolve estimate -m deepseek-v3 -n 1024 -g h100 --tp 2 --pp 16 --ep 64 --etp 1 \\\n"
               "      --first-stage-layers 4 --last-stage-layers 1 --format json")
@model_option
@cluster_options()
@workload_options
@layout_options
@click.option("--allow-cross-domain-tp", is_flag=True, help="Allow TP groups that leave an NVLink domain.")
@format_option("megatron", "bridge", "bridge-main", "nemo", "verl")
@plot_option("Draw the per-stage memory against the GPU's usable capacity.")
@report_option
def estimate_command(model_ref: str, gpus, gpu, gpus_per_node, nvlink_domain, nic_gbps, cluster_file,
                     allow_cross_domain_tp: bool, fmt: str, plot_path, report_path, **options) -> None:
    """Memory per pipeline stage and step time of ONE layout.

    Exit code 0: it fits; 1: it does not fit (or breaks a planner rule such as TP across NVLink
    domains); 2: the layout or input is invalid for Megatron.
    """
    from megasolve.solver.api import estimate

    _check_extras(plot_path, report_path)
    profile = load_profile_option(options)
    resolved, cluster, workload = load_inputs(
        model_ref=model_ref, gpus=gpus, gpu=gpu, gpus_per_node=gpus_per_node, nvlink_domain=nvlink_domain,
        nic_gbps=nic_gbps, cluster_file=cluster_file, **take(options, WORKLOAD_OPTIONS))
    layout = build_layout(cluster.num_gpus, **options)  # the rest are the layout flags
    report = estimate(resolved.spec, cluster, workload, layout, allow_cross_domain_tp, profile=profile)
    data = report.as_dict()
    render.model_notes(resolved.spec)
    if fmt in ("json", "yaml"):
        click.echo(render.dump(data, fmt))
    elif fmt == "table":
        print_estimate(data)
    else:
        from megasolve.cli.launch import launch_text

        click.echo(launch_text(fmt, resolved.spec, cluster, workload, layout))
    if plot_path:
        from megasolve.cli.plot import memory_plot

        memory_plot(plot_path, data)
        render.note(f"plot written to {plot_path}")
    if report_path:
        from megasolve.cli.launch import launch_text
        from megasolve.cli.report import estimate_document, write_report

        write_report(report_path, estimate_document(data, spec=resolved.spec, cluster=cluster, workload=workload,
                                                    flags=launch_text("megatron", resolved.spec, cluster, workload,
                                                                      layout)))
        render.note(f"report written to {report_path}")
    if not data["feasible"]:
        sys.exit(1)


def _check_extras(plot_path: str | None, report_path: str | None) -> None:
    """Bad --plot/--report paths (or no matplotlib) fail before any work."""
    if plot_path:
        from megasolve.cli.plot import check_plot_path

        check_plot_path(plot_path)
    if report_path:
        from megasolve.cli.report import check_report_path

        check_report_path(report_path)


def print_estimate(data: dict) -> None:
    out = render.console()
    layout = data["layout"]
    mem, t = data["memory"], data["time"]
    out.print(f"[bold]{data['model']}[/] on {data['cluster']['num_gpus']} x {data['cluster']['gpu']}  "
              f"seq {data['workload']['seq_length']}  gbs {layout['gbs']} ({layout['num_microbatches']} micro-batches)"
              f"  {data['workload']['precision']}")
    out.print(render.model_line(data["model_params"]))
    out.print(f"layout: {render.layout_label(layout)}" + ("  sp" if layout["sequence_parallel"] else ""))
    out.print(render.memory_table(data, "Memory per GPU (GB = 1e9 bytes; * = peak stage)"))
    headroom = mem["capacity_gb"] - mem["peak_gb"]
    verdict = "fits" if headroom >= 0 else "DOES NOT FIT"
    out.print(f"peak {mem['peak_gb']:.1f} ± {mem.get('peak_uncertainty_gb', 0):.1f} GB of {mem['capacity_gb']:.1f} GB "
              f"usable -> {verdict} ({headroom:+.1f} GB headroom)")
    out.print(render.time_table(data))
    out.print(f"{t['tokens_per_s_per_gpu']:.0f} tokens/s/GPU, {t['model_tflops_per_gpu']:.0f} model TFLOP/s/GPU, "
              f"MFU {t['mfu']:.1%}, bubble {t['bubble_fraction']:.1%}")
    if line := render.speed_basis_line(data):
        out.print(line)
    for v in data["violations"]:
        out.print(f"[red]violation[/] {v['rule']}: {v['message']} -> {v['fix']}")
