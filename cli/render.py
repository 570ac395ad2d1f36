"""Rendering: rich tables for people, JSON/YAML for machines. No domain logic here."""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml


def dump(data: Any, fmt: str) -> str:
    """Deterministic JSON (sorted keys off: the contract's order) or YAML text."""
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    raise ValueError(fmt)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=False,
                   width=None if sys.stdout.isatty() else 120)


def status(message: str):
    """A spinner on stderr while a long search runs (silent when stderr is not a terminal)."""
    import contextlib

    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    return console(stderr=True).status(message)


def model_line(params: dict) -> str:
    """``model: 8.03B parameters (8.03B active per token, input embedding excluded)`` and the vision
    tower when a multimodal config has one."""
    line = f"model: {params['params_total'] / 1e9:.2f}B parameters, {params['params_active'] / 1e9:.2f}B active per token"
    if params.get("params_vision"):
        line += (f" (incl. a {params['params_vision'] / 1e9:.2f}B vision tower, not planned; language model "
                 f"{params['params_language'] / 1e9:.2f}B)")
    return line


def model_notes(spec) -> None:
    """The reader's notes on the model (defaults filled, features not modelled: never silent), printed
    once the command has an answer, so that bad input still ends in exactly one error line."""
    for text in spec.notes:
        note(text)


def note(text: str) -> None:
    """A line for the person at the terminal (stderr, so stdout stays machine-readable)."""
    print(f"note: {text}", file=sys.stderr)


_DEFERRED: list[str] = []


def deferred_note(text: str) -> None:
    """A note about a default the command chose, which stands only if the command goes on: ``cli.main.main``
    prints it when the command ends (exit 0 or 1) and drops it when the input is rejected (exit 2: then the one
    error line is all that stderr holds)."""
    _DEFERRED.append(text)


def flush_deferred_notes(keep: bool) -> None:
    """Print (``keep``) or drop the notes ``deferred_note`` collected."""
    pending = list(_DEFERRED)
    _DEFERRED.clear()
    for text in pending if keep else ():
        note(text)


# A plan's MFU this far above the best measured run of its chip family, precision and kind is an extrapolation, not a
# prediction: the GEMM efficiencies saturate there (calibration.yaml e_max) and no measurement stands beside it. A
# quarter: wider than the median error of every basis entry but one (NVFP4 MoE, 26.9 %), so the flag is no rounding.
MFU_BEYOND_MEASURED = 1.25


def speed_basis_line(data: dict) -> str | None:
    """The ``speed:`` line of the tables: what the step time rests on (``calibration.speed_basis``), yellow where
    no fitted run stands behind it, or where the plan's MFU (estimate's, or solve's #1) is more than a quarter above the
    highest MFU measured among those runs (``MFU_BEYOND_MEASURED``): far outside anything the fit saw."""
    basis = data.get("speed_basis")
    if not basis:
        return None
    borrowed = not basis["published_runs"] and not basis["profile_runs"]
    note = basis["note"]
    timed = data.get("time") or (data.get("layouts") or [{}])[0].get("time") or {}
    ceiling = basis.get("measured_mfu_max_pct")
    if ceiling is not None and timed.get("mfu") is not None and 100 * timed["mfu"] > ceiling * MFU_BEYOND_MEASURED:
        which = "#1's" if data.get("layouts") else "its"
        note += (f"; {which} predicted MFU {100 * timed['mfu']:.1f} % is far above the highest measured among them "
                 f"({ceiling:.1f} %): treat that speed with suspicion")
        borrowed = True
    return f"[yellow]speed: {note}[/]" if borrowed else f"speed: {note}"


def gb(value_bytes: float) -> str:
    return f"{value_bytes / 1e9:.1f}"


def layout_label(layout: dict[str, Any]) -> str:
    """``tp4 pp4 vpp5 cp2 dp2 mbs1 sel`` - short, for table cells (``no-sp``: TP > 1 without sequence parallelism)."""
    parts = [f"tp{layout['tp']}", f"pp{layout['pp']}"]
    if layout["vpp"] > 1:
        parts.append(f"vpp{layout['vpp']}")
    if layout["cp"] > 1:
        parts.append(f"cp{layout['cp']}")
    if layout["ep"] > 1 or layout["etp"] != layout["tp"]:
        parts.append(f"ep{layout['ep']}")
        parts.append(f"etp{layout['etp']}")
    parts += [f"dp{layout['dp']}", f"mbs{layout['mbs']}"]
    rc = layout["recompute"]
    if rc == "full":
        parts.append("full" + (f"{layout['recompute_num_layers']}" if layout["recompute_num_layers"] else ""))
    elif rc == "selective":
        modules = layout.get("recompute_modules") or ["core_attn"]
        parts.append("sel" if modules == ["core_attn"] else "sel:" + "+".join(MODULE_SHORT.get(m, m) for m in modules))
    if layout["tp"] > 1 and not layout.get("sequence_parallel", True):
        parts.append("no-sp")
    if layout["first_stage_layers"] or layout["last_stage_layers"]:
        parts.append(f"split{layout['first_stage_layers'] or '-'}/{layout['last_stage_layers'] or '-'}")
    if layout.get("pipeline_layout"):  # --pipeline-model-parallel-layout, as Megatron writes it
        parts.append(f"ppl:{layout['pipeline_layout']}")
    if not layout["distributed_optimizer"]:
        parts.append("no-distopt")
    if layout.get("fsdp"):
        parts.append("fsdp")
    if layout.get("account_for_embedding") or layout.get("account_for_loss"):
        parts.append("+" + "/".join(name for name, key in (("emb", "account_for_embedding"),
                                                           ("loss", "account_for_loss")) if layout.get(key)))
    if layout.get("cpu_offload_layers"):
        parts.append(f"offload{layout['cpu_offload_layers']}")
    if layout.get("optimizer_offload_fraction"):
        parts.append(f"optoff{layout['optimizer_offload_fraction']:g}")
    return " ".join(parts)


# short names of Megatron's --recompute-modules in table cells (``sel:act+ln``)
MODULE_SHORT = {"core_attn": "attn", "moe_act": "act", "layernorm": "ln", "mla_up_proj": "mla", "mlp": "mlp",
                "moe": "moe", "shared_experts": "shared"}


def memory_table(report: dict[str, Any], title: str):
    from rich.table import Table

    mem = report["memory"]
    table = Table(title=title, title_justify="left")
    for col in ("stage", "layers", "params/rank", "weights", "grads", "optimizer", "activations", "fixed", "other",
                "total GB", "±", "of GPU"):
        table.add_column(col, justify="right")
    cap = mem["capacity_gb"]
    for s in mem["stages"]:
        peak = s["stage"] == mem["peak_stage"]
        style = "bold" if peak else ""
        share = s["total_gb"] / cap if cap else 0
        table.add_row(str(s["stage"]) + (" *" if peak else ""), str(s["layers"]), f"{s['params'] / 1e9:.3f}B",
                      f"{s['weights_gb']:.1f}", f"{s['grads_gb']:.1f}", f"{s['optimizer_gb']:.1f}",
                      f"{s['activations_gb']:.1f}", f"{s.get('fixed_gb', 0):.1f}", f"{s['other_gb']:.1f}",
                      f"{s['total_gb']:.1f}", f"{s.get('uncertainty_gb', 0):.1f}", f"{share:.0%}", style=style)
    return table


def time_table(report: dict[str, Any]):
    from rich.table import Table

    t = report["time"]
    table = Table(title="Step time", title_justify="left")
    table.add_column("term")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    step = t["step_s"] or 1
    for term, value in t["breakdown_s"].items():
        if term == "offload" and not value and not report["layout"].get("cpu_offload_layers"):
            continue  # only layouts that offload activations have this term
        table.add_row(term.replace("_", " "), f"{value:.3f}", f"{value / step:.0%}")
    table.add_row("step", f"{t['step_s']:.3f}", "100%", style="bold")
    return table
