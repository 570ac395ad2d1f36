"""The click group and the registry of commands (command modules import ``register`` from here, and
``main`` imports the command modules: no import cycle)."""

from __future__ import annotations

from typing import Any

import click

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


def register(command: Any) -> Any:
    cli.add_command(command)
    return command


def one_line(text: str) -> str:
    """An error message as one printable line: newlines and other control characters in user values
    (``--model $'a\\nb'``) are escaped, so stderr always holds exactly one ``error:`` line.

    >>> one_line("--model=a\\nb: not a preset")
    '--model=a\\\\nb: not a preset'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text.strip())
