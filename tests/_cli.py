"""Run ``megasolve`` in this process, as its console entry point does, and return the exit code."""

from __future__ import annotations

from megasolve.cli.main import main


def exit_code(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return exc.code or 0
    return 0
