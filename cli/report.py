"""``--report FILE.md|.html``: a self-contained report of an ``estimate`` or a ``solve``.

Inputs (model, cluster, workload), the layout or the top-k table, per-stage memory, the step-time
breakdown, Megatron-LM launch flags and the assumptions behind the numbers. The report is built as
a list of blocks from the commands' JSON dicts, then rendered as Markdown or as plain HTML with an
inline ``<style>`` (no external assets, every text escaped). No timestamps and no wall-clock times,
so the same inputs give the same file.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from megasolve.cli.render import layout_label
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Workload
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster

SUFFIXES = (".md", ".html", ".htm")

Block = tuple[str, Any]  # ("h1"|"h2"|"p"|"ul"|"code"|"table", payload)

ASSUMPTIONS = (
    "Every number is a prediction of megasolve's analytical cost model, not a measurement: run a few "
    "steps before committing a budget.",
    "Memory follows what Megatron-Core allocates per rank (bf16 weights, fp32 main gradients, Adam state "
    "sharded by the distributed optimizer, activations of the in-flight micro-batches of the 1F1B or "
    "interleaved schedule, fp32 logits on the last stage). GB = 1e9 bytes. 'other' is a calibrated "
    "reserve for the CUDA context, NCCL buffers and allocator fragmentation; the capacity is the usable "
    "memory the device reports.",
    "Step time = compute at a calibrated fraction of peak FLOP/s (lower for small per-rank GEMMs) + "
    "communication not overlapped (TP, CP, EP, pipeline p2p, DP) on the link tier each group spans "
    "(NVLink inside a domain, NIC across) + the pipeline bubble + optimizer step. Efficiency factors are "
    "fitted on published Megatron runs.",
    "MoE: dropless routing with perfectly balanced experts (each expert receives top_k / num_experts of "
    "the tokens); real imbalance makes steps slower and dispatch buffers larger.",
    "Megatron's divisibility rules (heads, query groups, experts, layers, sequence, batch), sequence "
    "parallelism with MoE+TP and the interleaved-schedule rules are checked; TP inside one NVLink domain "
    "is a planner policy.",
    "Not modelled: data loading, checkpointing, evaluation, restarts after failures, Megatron-FSDP's hybrid "
    "variants (HSDP / HFSDP), weight offloading, expert imbalance, software-version differences. The "
    "search varies Megatron-FSDP, activation offloading, optimizer CPU offload and selective recompute "
    "modules (a ladder of module sets).",
)


def report_option(func):
    import click

    return click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.md|.html",
                        help="Also write a self-contained report: inputs, layouts, memory and time breakdowns, "
                             "launch flags, assumptions.")(func)


def check_report_path(path: str) -> None:
    if Path(path).suffix.lower() not in SUFFIXES:
        raise MegasolveError(field="--report", value=path, rule="must end in .md or .html",
                             fix="e.g. --report plan.md or --report plan.html")


# ---------------------------------------------------------------------------- blocks
def inputs_blocks(spec: ModelSpec, cluster: Cluster, workload: Workload) -> list[Block]:
    from megasolve.models.params import active_params, total_params

    total, active = total_params(spec), active_params(spec)
    model_rows = [["model", spec.name], ["layers", str(spec.num_layers)], ["hidden size", str(spec.hidden_size)],
                  ["attention heads / query groups", f"{spec.num_attention_heads} / {spec.num_query_groups}"],
                  ["parameters", f"{total / 1e9:.2f}B" + (f" ({active / 1e9:.2f}B active)" if spec.is_moe else "")]]
    if spec.is_moe:
        model_rows.append(["experts (top-k)", f"{spec.moe.num_experts} ({spec.moe.top_k})"])
    gpu = cluster.gpu
    cluster_rows = [["GPUs", f"{cluster.num_gpus} x {gpu.name}"],
                    ["nodes", f"{cluster.num_nodes} x {cluster.gpus_per_node} GPUs"],
                    ["NVLink domain", f"{cluster.nvlink_domain} GPUs, {cluster.nvlink_bytes_per_s / 1e9:.0f} GB/s "
                                      "per GPU per direction"],
                    ["scale-out NIC", f"{cluster.nic_bytes_per_s * 8 / 1e9:.0f} Gb/s per GPU"],
                    ["usable memory", f"{gpu.usable_memory_bytes / 1e9:.1f} GB per GPU"],
                    ["dense peak", f"{gpu.peak_flops(workload.precision) / 1e12:.0f} TFLOP/s ({workload.precision})"]]
    workload_rows = [["sequence length", str(workload.seq_length)],
                     ["global batch size", f"{workload.global_batch_size} sequences "
                                           f"({workload.global_batch_size * workload.seq_length:,} tokens per step)"],
                     ["precision", workload.precision], ["attention", workload.attention]]
    return [("h2", "Inputs"),
            ("h3", "Model"), ("table", (["field", "value"], model_rows)),
            ("h3", "Cluster"), ("table", (["field", "value"], cluster_rows)),
            ("h3", "Workload"), ("table", (["field", "value"], workload_rows))]


def layout_blocks(entry: dict[str, Any]) -> list[Block]:
    layout = entry["layout"]
    keys = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "mbs", "num_microbatches", "sequence_parallel", "recompute",
            "recompute_num_layers", "distributed_optimizer", "first_stage_layers", "last_stage_layers")
    return [("p", f"Layout: `{layout_label(layout)}`"),
            ("table", (["setting", "value"], [[k, _cell(layout[k])] for k in keys]))]


def memory_blocks(entry: dict[str, Any]) -> list[Block]:
    mem = entry["memory"]
    cap = mem["capacity_gb"]
    rows = []
    for s in mem["stages"]:
        peak = " (peak)" if s["stage"] == mem["peak_stage"] else ""
        rows.append([f"{s['stage']}{peak}", str(s["layers"]), f"{s['params'] / 1e9:.3f}B", f"{s['weights_gb']:.1f}",
                     f"{s['grads_gb']:.1f}", f"{s['optimizer_gb']:.1f}", f"{s['activations_gb']:.1f}",
                     f"{s.get('fixed_gb', 0):.1f}", f"{s['other_gb']:.1f}", f"{s['total_gb']:.1f}",
                     f"{s.get('uncertainty_gb', 0):.1f}", f"{s['total_gb'] / cap:.0%}" if cap else "-"])
    headroom = cap - mem["peak_gb"]
    verdict = "fits" if headroom >= 0 else "DOES NOT FIT"
    return [("h2", "Memory per GPU, by pipeline stage"),
            ("p", "One rank of each pipeline stage, in GB (1e9 bytes); params/rank = parameters held by that rank."),
            ("table", (["stage", "layers", "params/rank", "weights", "grads", "optimizer", "activations", "fixed",
                        "other", "total", "±", "of GPU"], rows)),
            ("p", f"Peak {mem['peak_gb']:.1f} ± {mem.get('peak_uncertainty_gb', 0):.1f} GB of {cap:.1f} GB usable: "
                  f"{verdict} ({headroom:+.1f} GB headroom). 'fixed' = cuBLAS / Transformer Engine workspaces and "
                  "persistent buffers inside the allocator; ± = the stage's uncertainty band "
                  "(docs/memory-audit.md).")]


def time_blocks(entry: dict[str, Any], basis: dict[str, Any] | None = None) -> list[Block]:
    """The step-time table of a costed layout, and what the prediction rests on (``basis``: the
    ``speed_basis`` of estimate's / solve's JSON)."""
    t = entry["time"]
    step = t["step_s"] or 1.0
    rows = [[term.replace("_", " "), f"{value:.3f}", f"{value / step:.1%}"] for term, value in t["breakdown_s"].items()]
    rows.append(["step", f"{t['step_s']:.3f}", "100%"])
    return [("h2", "Step time"),
            ("table", (["term", "seconds", "share"], rows)),
            ("p", f"{t['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, {t['model_tflops_per_gpu']:.0f} model TFLOP/s "
                  f"per GPU, MFU {t['mfu']:.1%}, pipeline bubble {t['bubble_fraction']:.1%}.")] \
        + ([("p", f"Speed basis: {basis['note']}.")] if basis else [])


def launch_blocks(flags: str) -> list[Block]:
    return [("h2", "Launch command (Megatron-LM)"),
            ("code", flags),
            ("p", "Megatron-Bridge, NeMo and verl overrides: the same command with --format bridge|nemo|verl.")]


def assumptions_blocks() -> list[Block]:
    return [("h2", "Assumptions"), ("ul", list(ASSUMPTIONS))]


def estimate_document(data: dict[str, Any], *, spec: ModelSpec, cluster: Cluster, workload: Workload,
                      flags: str) -> list[Block]:
    """The report of one costed layout (``data``: estimate's JSON dict)."""
    blocks: list[Block] = [("h1", f"megasolve estimate: {data['model']} on {cluster.num_gpus} x {cluster.gpu.name}")]
    blocks += inputs_blocks(spec, cluster, workload)
    blocks += [("h2", "Layout")] + layout_blocks(data)
    if data["violations"]:
        blocks += [("h2", "Rule violations"),
                   ("ul", [f"{v['rule']}: {v['message']} (fix: {v.get('fix', '')})" for v in data["violations"]])]
    blocks += memory_blocks(data) + time_blocks(data, data.get("speed_basis")) + launch_blocks(flags) \
        + assumptions_blocks()
    return blocks


def solve_document(data: dict[str, Any], *, spec: ModelSpec, cluster: Cluster, workload: Workload,
                   flags: str | None) -> list[Block]:
    """The report of a search (``data``: solve's JSON dict; ``flags``: launch flags of #1)."""
    blocks: list[Block] = [("h1", f"megasolve solve: {spec.name} on {cluster.num_gpus} x {cluster.gpu.name}")]
    blocks += inputs_blocks(spec, cluster, workload)
    search = data["search"]
    proven = "proven optimal under the cost model" if search.get("proven_optimal") else \
        "not proven optimal (the time limit ended the search)"
    if not data["layouts"]:
        blocks += [("h2", "No layout fits"), ("ul", data.get("reasons", []) or ["no reason recorded"])]
        if data.get("closest"):
            blocks += [("h3", "Closest layouts"),
                       ("table", (["layout", "needs GB per GPU", "short by GB"],
                                  [[layout_label(c["layout"]), f"{c['peak_gb']:.1f}", f"{c['lacks_gb_per_gpu']:.1f}"]
                                   for c in data["closest"]]))]
        if data.get("repairs"):
            blocks += [("h3", "What would fit"), ("ul", data["repairs"])]
        return blocks + assumptions_blocks()
    rows = []
    for entry in data["layouts"]:
        mem, t = entry["memory"], entry["time"]
        rows.append([str(entry["rank"]), layout_label(entry["layout"]) + (" sp" if entry["layout"]["sequence_parallel"]
                                                                          else ""),
                     f"{mem['peak_gb']:.1f}", f"{mem['capacity_gb'] - mem['peak_gb']:.1f}", f"{t['step_s']:.3f}",
                     f"{t['tokens_per_s_per_gpu']:,.0f}", f"{t['mfu']:.1%}", f"{t['bubble_fraction']:.1%}"])
    blocks += [("h2", f"Top {len(rows)} layouts"),
               ("table", (["#", "layout", "peak GB", "headroom GB", "step s", "tokens/s/GPU", "MFU", "bubble"], rows)),
               ("p", f"Search: {search['engine']} over {search['space_size']:,} combinations, {proven}.")]
    best = data["layouts"][0]
    blocks += [("h2", "Best layout (#1)")] + layout_blocks(best)
    blocks += memory_blocks(best) + time_blocks(best, data.get("speed_basis"))
    if flags is not None:
        blocks += launch_blocks(flags)
    return blocks + assumptions_blocks()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# ---------------------------------------------------------------------------- rendering
def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for kind, payload in blocks:
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + payload)
        elif kind == "p":
            out.append(payload)
        elif kind == "ul":
            out.append("\n".join(f"- {item}" for item in payload))
        elif kind == "code":
            out.append(f"```bash\n{payload}\n```")
        elif kind == "table":
            headers, rows = payload
            lines = ["| " + " | ".join(_md(h) for h in headers) + " |",
                     "|" + "|".join("---" for _ in headers) + "|"]
            lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        else:
            raise ValueError(kind)
    return "\n\n".join(out) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:72rem;margin:2rem auto;
padding:0 1rem;color:#1d2329;line-height:1.45}
h1{font-size:1.5rem;border-bottom:2px solid #d0d7de;padding-bottom:.3rem}
h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.25rem .6rem;text-align:right}
th{background:#f3f5f7}
td:first-child,th:first-child{text-align:left}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.8rem;overflow-x:auto;font-size:.85rem}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}"""


def to_html(blocks: list[Block]) -> str:
    title = next((payload for kind, payload in blocks if kind == "h1"), "megasolve report")
    body: list[str] = []
    for kind, payload in blocks:
        if kind in ("h1", "h2", "h3"):
            body.append(f"<{kind}>{html.escape(payload)}</{kind}>")
        elif kind == "p":
            body.append(f"<p>{_inline_code(payload)}</p>")
        elif kind == "ul":
            body.append("<ul>\n" + "\n".join(f"<li>{html.escape(item)}</li>" for item in payload) + "\n</ul>")
        elif kind == "code":
            body.append(f"<pre><code>{html.escape(payload)}</code></pre>")
        elif kind == "table":
            headers, rows = payload
            head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
            lines = [f"<tr>{head}</tr>"]
            lines += ["<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows]
            body.append("<table>\n" + "\n".join(lines) + "\n</table>")
        else:
            raise ValueError(kind)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{STYLE}\n</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _inline_code(text: str) -> str:
    """Escape ``text``; `backticked` spans become <code>."""
    parts = str(text).split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def write_report(path: str, blocks: list[Block]) -> None:
    text = to_html(blocks) if Path(path).suffix.lower() in (".html", ".htm") else to_markdown(blocks)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise MegasolveError(field="--report", value=path, rule=f"cannot be written ({exc.strerror})",
                             fix="pass a writable path") from None


__all__ = ["check_report_path", "report_option", "estimate_document", "solve_document", "to_html", "to_markdown", "write_report"]
