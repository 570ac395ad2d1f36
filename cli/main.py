"""The ``megasolve`` command line: parse -> load -> one library call -> render.

Only this package turns ``MegasolveError`` into exit code 2; an infeasible problem exits 1.
Heavy imports (ortools, transformers, matplotlib) happen inside the commands that need them.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from megasolve.cli import options
from megasolve.models.errors import MegasolveError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class DefaultGroup(click.Group):
    """A group whose default command is ``solve``: ``megasolve --model X --gpus N --gpu T`` works."""

    default_command = "solve"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help", "--version"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings=CONTEXT,
             epilog="Examples:\n\n\b\n"
                    "  megasolve --model deepseek-v3-lite --gpus 64 --gpu a100-80g\n"
                    "  megasolve estimate --model llama-3.1-70b --gpus 64 --gpu h100 --tp 4 --pp 4 --cp 2\n"
                    "  megasolve whatif --model qwen3-235b-a22b --gpu h100 --gpus 64,128,256,512\n"
                    "  megasolve models\n  megasolve gpus")
@click.version_option(package_name="megasolve")
def cli() -> None:
    """Plan Megatron-LM / Megatron-Core training layouts: which TP/PP/VPP/CP/EP/ETP/DP,
    micro-batch and recompute to launch, how much memory each GPU needs, how fast it trains.

    The default command is `solve`.
    """


def main(argv: list[str] | None = None) -> None:
    """Console entry point: bad input is one line on stderr and exit code 2, never a traceback."""
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


def one_line(text: str) -> str:
    """An error message as one printable line: newlines and other control characters in user values
    (``--model $'a\\nb'``) are escaped, so stderr always holds exactly one ``error:`` line.

    >>> one_line("--model=a\\nb: not a preset")
    '--model=a\\\\nb: not a preset'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip())


def register(command: Any) -> Any:
    cli.add_command(command)
    return command


# Commands register themselves on import.
from megasolve.cli import commands, runs_cmd, solve_cmd, whatif_cmd  # noqa: E402,F401  (import for side effect)
from megasolve.cli import serve_cmd  # noqa: E402,F401  (the web page; its stack is imported lazily)

__all__ = ["cli", "main", "options"]
