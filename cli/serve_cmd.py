"""``megasolve serve``: the web page and HTTP API (``megasolve.web``, the optional ``web`` extra)."""

from __future__ import annotations

import click

from megasolve.cli.app import register
from megasolve.models.errors import MegasolveError


@register
@click.command("serve", epilog="Examples:\n\n\b\n"
               "  megasolve serve                      # http://127.0.0.1:8765\n"
               "  megasolve serve --port 9000 --workers 4 --max-seconds 300")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; the default serves this machine only (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="TCP port.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Commands that run at once (each in its own process); the rest wait in a queue.")
@click.option("--max-queued", type=click.IntRange(0, 10_000), default=16, show_default=True,
              help="Commands that may wait; beyond that a request gets HTTP 503.")
@click.option("--max-seconds", type=click.FloatRange(1, 86400), default=120.0, show_default=True,
              help="A command running longer is stopped (HTTP 504, or the job's state 'timeout').")
@click.option("--sweep-jobs", type=click.IntRange(1, 4096), default=1, show_default=True,
              help="Processes one what-if sweep may use (its `jobs` option may not exceed this).")
def serve_command(host: str, port: int, workers: int, max_queued: int, max_seconds: float, sweep_jobs: int) -> None:
    """Serve the planner as a web page and an HTTP API on this machine.

    The page plans, compares and sweeps in the browser; POST /api/solve, /api/estimate and
    /api/whatif return exactly the CLI's JSON (described at /api/openapi.json). Commands run in
    worker processes, at most --workers at once, each stopped after --max-seconds. Needs the web
    extra: pip install 'megasolve[web]'.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MegasolveError(field="serve", value=f"{exc.name} not installed", rule="needs the web extra",
                             fix="pip install 'megasolve[web]'") from None
    from megasolve.web.app import ServerConfig, serve

    click.echo(f"megasolve: serving on http://{host}:{port}/ (Ctrl-C stops)", err=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"note: --host {host} lets other machines reach this server; it has no login, so anyone who "
                   f"can reach port {port} can run solves (each bounded by --max-seconds)", err=True)
    serve(host=host, port=port, config=ServerConfig(workers=workers, max_queued=max_queued, max_seconds=max_seconds,
                                                    sweep_jobs=sweep_jobs))
