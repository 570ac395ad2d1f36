"""``python -m megasolve.web.worker``: run megasolve commands for the server, one process per job.

The server starts this module in a new process session for every job, writes one JSON request on
its stdin and reads one JSON answer from its stdout; a cancel or a timeout kills the session (the
worker and any sweep processes it started). Each command runs through ``megasolve.cli.main.main``,
the console entry point itself, so the server answers with exactly the CLI's output, exit code and
one-line errors.

Request::

    {"runs": [{"command": "solve", "argv": ["--model", "@model_text", "--gpus", "8", ...]}],
     "files": {"model_text": "{...config.json...}"}}

``@model_text`` / ``@cluster_text`` in an argv stand for a file the worker writes with that text
(``.json`` when it starts with ``{``, else ``.yaml``) in the request's ``folder`` (the server's, which it
removes after the worker exits, killed or not) or, without one, a temporary folder of its own; error
lines name the field (``<model_text>``), never the folder.

Answer: ``{"results": [{"exit_code": 0, "stdout": "...", "stderr": "..."}]}``. While a what-if
sweep runs, lines ``{"progress": [done, total]}`` go to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def _write_files(folder: Path, files: dict[str, str]) -> dict[str, str]:
    """Write each text to ``folder/<field>.json|yaml``; return placeholder -> path."""
    paths = {}
    for name, text in files.items():
        suffix = ".json" if text.lstrip().startswith("{") else ".yaml"
        path = folder / f"{name.removesuffix('_text')}{suffix}"
        path.write_text(text, encoding="utf-8")
        paths["@" + name] = str(path)
    return paths


class _SweepProgress:
    """Stands in for the what-if command's terminal progress bar: reports (done, total) to the server."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __enter__(self):
        return self.update

    def update(self, done: int, total: int) -> None:
        sys.__stderr__.write(json.dumps({"progress": [done, total]}) + "\n")
        sys.__stderr__.flush()

    def __exit__(self, *exc) -> None:
        return None


def run(command: str, argv: list[str], paths: dict[str, str]) -> dict[str, Any]:
    """Run ``megasolve COMMAND ARGV`` in this process; its stdout, stderr and exit code."""
    from megasolve.cli import main as cli_main
    from megasolve.cli.app import one_line

    argv = [paths.get(word, word) for word in argv]
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli_main.main([command, *argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception as exc:  # a bug, not bad input: one line for the server's 500 answer
            err.write(f"error: internal error ({exc.__class__.__name__}: {one_line(str(exc))})\n")
            code = 3
    stderr = err.getvalue()
    for placeholder, path in paths.items():
        stderr = stderr.replace(path, "<" + placeholder[1:] + ">")
    return {"exit_code": code, "stdout": out.getvalue(), "stderr": stderr}


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        from megasolve.cli import whatif_cmd

        whatif_cmd._progress = _SweepProgress  # the bar would draw on a terminal; report to the server instead
    except (ImportError, AttributeError):  # pragma: no cover - the sweep then runs without progress
        pass
    with contextlib.ExitStack() as stack:
        folder = request.get("folder") or stack.enter_context(tempfile.TemporaryDirectory(prefix="megasolve-web-"))
        paths = _write_files(Path(folder), request.get("files", {}))
        results = [run(r["command"], r["argv"], paths) for r in request["runs"]]
    sys.__stdout__.write(json.dumps({"results": results}))
    sys.__stdout__.flush()


if __name__ == "__main__":
    main()
