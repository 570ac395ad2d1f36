#!/usr/bin/env python3
"""How fast the log readers read a long log, and that a long log reads as its short self.

Megatron-LM prints an iteration line every ``--log-interval`` steps, and a run's log, several ranks' output
interleaved with NCCL's, reaches tens of thousands of lines. ``megasolve check`` / ``calibrate`` read the whole of it.
Each case below is a published excerpt kept as a test fixture (``tests/data/logs``), lengthened: its iteration lines
repeated, renumbered, to ``--lines`` lines in all (with NCCL's INFO lines between them in the third). Per case the
script prints the lines, the seconds of ``parse_log`` (every fact the readers find) and of ``run_from_log`` (the run
``check`` costs: the facts and all that is made of them), the latter's milliseconds a line, and checks what was read:

* every iteration line is read, with the step time, TFLOP/s and batch it holds (the excerpt's, line for line);
* the rest of the facts (the argument dump, the world size, memory lines) equal the short excerpt's (but the NCCL
  communicator's size the added NCCL lines state).

It exits 1 when a check fails or a case reads slower than ``--budget-ms`` a line (default 0.4 ms). On a 2-core
machine, 20,000 lines a case, 2026-12-07: 0.08-0.12 / 0.17-0.23 / 0.24 ms a line; before the literal guards
(``solver/prefilter.py``) 0.50 / 0.80 / 0.87, and ``megasolve check`` of a 50,000-line Megatron-LM log took 33.5 s
(after: 5.4-7.2 s).

    python benchmarks/reader_speed.py               # 50,000 lines a case
    python benchmarks/reader_speed.py --lines 200000
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from megasolve.solver.logs import parse_log
from megasolve.solver.runs import run_from_log

LOGS = Path(__file__).resolve().parent.parent / "tests" / "data" / "logs"
ITERATION = re.compile(r"iteration\s+\d+/")
# NCCL's INFO chatter as NCCL_DEBUG=INFO prints it between a run's lines (the saienduri-Megatron-LM-rocm-llama3-8b
# fixture's, re-numbered)
NCCL = ("0: node-008:3880899:3905195 [{r}] NCCL INFO comm 0x7f7220404380 rank {r} nranks 8 cudaDev {r} busId aa000 "
        "commId 0x2824020121bfe110 localSize 112 used 2954031904 bytes - Init COMPLETE",
        "0: node-008:3880899:3905195 [{r}] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7",
        "0: node-008:3880899:3905195 [{r}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1")
CASES = {  # name -> (fixture, NCCL lines after each iteration line, what run_from_log needs that the log lacks)
    "Megatron-LM, plain": ("thu-pacman-SmartMoE-AE-fig8-fastmoe-gpt-l8-32moe-pp4-ep4.log", 0, {"gpu": "v100-32g"}),
    "AMD Primus, coloured prefixes": ("hisohara_primus_llama2_7b_fp8_64gpu_mi325x.log", 0, {}),
    "slurm-labelled with NCCL INFO": ("thu-pacman-SmartMoE-AE-fig8-fastmoe-gpt-l8-32moe-pp4-ep4.log", 3,
                                      {"gpu": "v100-32g"}),
}


def lengthen(text: str, lines: int, nccl: int) -> tuple[str, int]:
    """The excerpt with its iteration lines repeated in order, renumbered 1, 2, ..., to ``lines`` lines in all (each
    followed by ``nccl`` NCCL INFO lines), and the number of iteration lines."""
    rows = text.splitlines()
    steps = [row for row in rows if ITERATION.search(row)]
    body = [row for row in rows if not ITERATION.search(row)]
    out, count = list(body), 0
    while len(out) < lines:
        row = ITERATION.sub(f"iteration {count + 1:8d}/", steps[count % len(steps)], count=1)
        out.append(("0: " + row) if nccl else row)
        out.extend(NCCL[k % len(NCCL)].format(r=k % 8) for k in range(nccl))
        count += 1
    return "\n".join(out) + "\n", count


def read_case(name: str, lines: int) -> tuple[int, float, float, list[str]]:
    """One case lengthened to ``lines`` lines, read: (lines, parse_log seconds, run_from_log seconds, what differs from
    the excerpt)."""
    fixture, nccl, given = CASES[name]
    short_text = (LOGS / fixture).read_text()
    short = parse_log(short_text)
    text, steps = lengthen(short_text, lines, nccl)
    start = time.perf_counter()
    facts = parse_log(text)
    parse_s = time.perf_counter() - start
    start = time.perf_counter()
    run = run_from_log(text, fixture, given)
    run_s = time.perf_counter() - start
    problems = []
    expected = [short.iterations[k % len(short.iterations)][1:] for k in range(steps)]
    if len(facts.iterations) != steps:
        problems.append(f"{len(facts.iterations)} of {steps} iteration lines read")
    elif [it[1:] for it in facts.iterations] != expected:
        problems.append("an iteration line read otherwise than in the excerpt")
    facts.args.pop("_nccl_nranks", None)  # (what the NCCL lines added say: their communicator's size)
    for field in ("args", "world_size", "world_parts", "memory", "gpu_names", "rank_params"):
        if getattr(facts, field) != getattr(short, field):
            problems.append(f"{field} differs from the excerpt's")
    if run.measured.step_time_s is None:
        problems.append("no step time measured")
    return text.count("\n"), parse_s, run_s, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=50_000, help="lines a case (default 50,000)")
    parser.add_argument("--budget-ms", type=float, default=0.4, help="the most milliseconds a line (default 0.4)")
    args = parser.parse_args()
    failed = False
    print(f"{'case':32s} {'lines':>8s} {'parse_log s':>11s} {'run s':>7s} {'ms/line':>8s}  checks")
    for name in CASES:
        lines, parse_s, run_s, problems = read_case(name, args.lines)
        ms_line = 1e3 * run_s / lines
        if ms_line > args.budget_ms:
            problems.append(f"{ms_line:.3f} ms a line, over the {args.budget_ms} ms budget")
        failed |= bool(problems)
        print(f"{name:32s} {lines:8,d} {parse_s:11.2f} {run_s:7.2f} {ms_line:8.3f}  "
              + ("; ".join(problems) if problems else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
