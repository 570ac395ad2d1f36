"""The ``megasolve`` command line: parse -> load -> one library call -> render.

Only this package turns ``MegasolveError`` into exit code 2; an infeasible problem exits 1.
Heavy imports (ortools, transformers, matplotlib) happen inside the commands that need them.
"""

from __future__ import annotations

import sys

import click

from megasolve.cli import options, render
from megasolve.cli.app import cli, one_line, register  # noqa: F401  (re-exported for older command modules)
from megasolve.models.errors import MegasolveError

def main(argv: list[str] | None = None) -> None:
    """Console entry point: bad input is one line on stderr and exit code 2, never a traceback. Notes about
    defaults a command chose (``render.deferred_note``) follow its output, unless the input is rejected."""
    keep = True
    render.flush_deferred_notes(False)  # none left from an earlier call in this process
    try:
        _main(argv)
    except SystemExit as exc:
        keep = exc.code != 2
        raise
    finally:
        render.flush_deferred_notes(keep)


def _main(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="megasolve", standalone_mode=False)
    except MegasolveError as exc:
        click.echo(f"error: {one_line(str(exc))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `megasolve`: the help, then the one error line
        click.echo(exc.ctx.get_help() if exc.ctx else "")
        click.echo("error: no command or options given; fix: see the help above", err=True)
        sys.exit(2)
    except click.UsageError as exc:  # click's own text is three lines (usage, hint, error): keep one
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(f"error: {one_line(exc.format_message())}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"error: {one_line(exc.format_message())}", err=True)
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


# Commands register themselves on import.
from megasolve.cli import commands, runs_cmd, solve_cmd, whatif_cmd  # noqa: E402,F401  (import for side effect)
from megasolve.cli import serve_cmd  # noqa: E402,F401  (the web page; its stack is imported lazily)

__all__ = ["cli", "main", "options"]
