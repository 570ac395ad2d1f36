"""``--plot FILE.png|.svg``: pictures of a what-if sweep and of one layout's memory.

matplotlib is optional (``pip install "megasolve[plot]"``) and imported only here, only when a plot
is asked for, with the non-interactive Agg backend. The plots read the commands' JSON dicts, so
they show exactly the numbers the table and ``--format json`` show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from megasolve.models.errors import MegasolveError

SUFFIXES = (".png", ".svg")
MEMORY_PARTS = (("weights_gb", "weights", "#4C72B0"), ("grads_gb", "gradients", "#55A868"),
                ("optimizer_gb", "optimizer state", "#C44E52"), ("activations_gb", "activations", "#DD8452"),
                ("fixed_gb", "workspaces, persistent buffers", "#937860"),
                ("other_gb", "other (CUDA ctx, NCCL, reserve)", "#8C8C8C"))


def plot_option(help_text: str):
    import click

    return click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.png|.svg", help=help_text)


def check_plot_path(path: str) -> None:
    """Fail early (before any solving) on a bad suffix or a missing matplotlib."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise MegasolveError(field="--plot", value=path, rule="must end in .png or .svg",
                             fix="e.g. --plot sweep.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MegasolveError(field="--plot", value=path, rule="needs matplotlib, which is not installed",
                             fix='pip install "megasolve[plot]"') from None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> None:
    svg = Path(path).suffix.lower() == ".svg"
    try:  # no date in the SVG, so the same inputs give the same file
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata={"Date": None} if svg else None)
    except OSError as exc:
        raise MegasolveError(field="--plot", value=path, rule=f"cannot be written ({exc.strerror})",
                             fix="pass a writable path") from None


# ---------------------------------------------------------------------------- estimate / solve
def memory_plot(path: str, data: dict[str, Any], heading: str = "") -> None:
    """Stacked per-stage memory bars (one rank of each pipeline stage) against the usable capacity.
    ``data``: an entry in ``estimate``'s JSON shape (model, cluster, layout, memory)."""
    from megasolve.cli.render import layout_label

    plt = _pyplot()
    mem = data["memory"]
    stages = mem["stages"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(stages) + 3), 4.6))
    x = [s["stage"] for s in stages]
    bottom = [0.0] * len(stages)
    for key, label, color in MEMORY_PARTS:
        values = [s.get(key, 0.0) for s in stages]
        ax.bar(x, values, bottom=bottom, label=label, color=color, width=0.7)
        bottom = [b + v for b, v in zip(bottom, values)]
    cap = mem["capacity_gb"]
    ax.axhline(cap, color="black", linestyle="--", linewidth=1.2,
               label=f"usable capacity of one {data['cluster']['gpu']} ({cap:.1f} GB)")
    peak = next(s for s in stages if s["stage"] == mem["peak_stage"])
    ax.annotate(f"peak {mem['peak_gb']:.1f} GB", (peak["stage"], peak["total_gb"]), textcoords="offset points",
                xytext=(0, 4), ha="center", fontsize=8)
    ax.set_xlabel("pipeline stage (one rank of each)")
    ax.set_ylabel("memory per GPU (GB = 1e9 bytes)")
    ax.set_xticks(x)
    if len(x) > 24:
        ax.set_xticks(x[::max(1, len(x) // 16)])
    ax.set_ylim(0, max(cap, max(bottom)) * 1.25)
    verdict = "fits" if mem["peak_gb"] <= cap else "DOES NOT FIT"
    ax.set_title(f"{heading}{data['model']} on {data['cluster']['num_gpus']} x {data['cluster']['gpu']}: "
                 f"{layout_label(data['layout'])}\nseq {data['workload']['seq_length']}, gbs "
                 f"{data['layout']['gbs']}: peak {mem['peak_gb']:.1f} of {cap:.1f} GB ({verdict})", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, ncol=2, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
    plt.close(fig)


# ---------------------------------------------------------------------------- whatif
def _series(data: dict[str, Any]) -> dict[tuple[str, int, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for p in data["points"]:
        key = (p["cluster"]["gpu"], p["workload"]["seq_length"], p["workload"]["global_batch_size"])
        out.setdefault(key, []).append(p)
    return out


def _series_label(key: tuple[str, int, int], keys: list[tuple[str, int, int]], data: dict[str, Any]) -> str:
    gpu, seq, gbs = key
    parts = [gpu]
    if len({k[1] for k in keys}) > 1:
        parts.append(f"seq {seq}")
    if len({k[2] for k in keys}) > 1 or len({k[1] for k in keys}) > 1:
        parts.append(f"gbs {gbs}")
    minimum = data.get("min_gpus", {}).get(f"{gpu}/seq{seq}/gbs{gbs}")
    label = ", ".join(parts)
    if minimum and minimum["num_gpus"]:
        label += f" (fits from {minimum['num_gpus']} GPUs)"
    elif minimum:
        label += " (fits nowhere)"
    return label


def whatif_plot(path: str, data: dict[str, Any]) -> None:
    """Throughput per GPU, total throughput and MFU against cluster size (log2 axis, one line per
    GPU type / sequence length / batch); with ``tokens``: days and GPU-hours (and cost) to train."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    plt = _pyplot()
    series = _series(data)
    keys = list(series)
    with_tokens = data.get("tokens") is not None
    panels: list[tuple[str, str, Any]] = [
        ("tokens/s per GPU", "tokens/s/GPU", lambda p: p["time"]["tokens_per_s_per_gpu"]),
        ("total throughput", "million tokens/s (cluster)", lambda p: p["tokens_per_s"] / 1e6),
        ("model FLOPs utilisation", "MFU (%)", lambda p: p["time"]["mfu"] * 100),
    ]
    if with_tokens:
        tokens = data["tokens"]
        panels += [(f"time to train {tokens:.3g} tokens", "days (wall clock)", lambda p: p["days_to_train"]),
                   ("GPU time to train", "thousand GPU-hours", lambda p: p["gpu_hours"] / 1e3)]
        if data.get("gpu_hour_price") is not None:
            panels.append((f"cost at {data['gpu_hour_price']:g} per GPU-hour", "cost (thousands, currency of "
                           "--gpu-hour-price)", lambda p: p["cost"] / 1e3))
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    sizes = sorted({p["cluster"]["num_gpus"] for p in data["points"]})
    markers = "osD^vP*X"
    styles = ("-", "--", "-.", ":")  # overlapping series stay visible
    for ax, (title, ylabel, value) in zip(axes.flat, panels):
        for i, key in enumerate(keys):
            fitting = [p for p in series[key] if p["layout"] is not None]
            if not fitting:
                continue
            ax.plot([p["cluster"]["num_gpus"] for p in fitting], [value(p) for p in fitting],
                    marker=markers[i % len(markers)], linestyle=styles[i % len(styles)], markersize=7 - (i % 3),
                    alpha=0.9, label=_series_label(key, keys, data))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{int(v)}"))
        if len(sizes) > 1:
            ax.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)
        ax.set_xlabel("cluster size (GPUs, log2 scale)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(handles)), frameon=False,
                   bbox_to_anchor=(0.5, -0.02 - 0.03 * ((len(handles) - 1) // 4)))
    infeasible = sum(1 for p in data["points"] if p["layout"] is None)
    subtitle = f"{len(data['points'])} points" + (f", {infeasible} do not fit (not drawn)" if infeasible else "")
    precision = data["points"][0]["workload"]["precision"] if data["points"] else ""
    fig.suptitle(f"What-if: {data['model']} ({precision}), best layout at each size ({subtitle})", fontsize=12)
    fig.tight_layout(rect=(0, 0.04, 1, 0.98))
    _save(fig, path)
    plt.close(fig)


__all__ = ["check_plot_path", "memory_plot", "plot_option", "whatif_plot"]
