"""The ``megasolve serve`` application (Starlette): the page, its assets and the HTTP API.

API (described at ``/api/openapi.json``):

- ``POST /api/solve | /api/estimate | /api/whatif``: the command's options as a JSON object
  (``megasolve.web.request``); the answer is exactly ``megasolve CMD --format json`` (the worker runs
  the CLI's own entry point), with the CLI's exit code in ``X-Megasolve-Exit-Code`` and its notes in
  ``X-Megasolve-Notes``. Bad input: 400 ``{"error": <the CLI's one line>, "field": <body field>}``.
- ``POST /api/jobs`` / ``GET /api/jobs/{id}`` / ``DELETE /api/jobs/{id}``: the same commands queued,
  with queue position, progress and cancel, for the page.
- ``GET /api/models``, ``GET /api/gpus``: the catalogs (``megasolve models|gpus --format json``).

The page makes no request outside this server: its script and styles ship in ``static/`` and the
Content-Security-Policy header forbids any other origin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from megasolve.models.errors import MegasolveError
from megasolve.web.jobs import Job, JobQueue, QueueFull, error_field, error_line, notes
from megasolve.web.request import COMMANDS, CommandRequest, body_to_argv, openapi

MAX_BODY_BYTES = 1024 * 1024
MAX_FORMATS = 8  # runs in one job (the page asks for json plus each launch format)
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    workers: int = 2  # commands running at once
    max_queued: int = 16  # commands waiting; more get 503
    max_seconds: float = 120.0  # a command running longer is killed (504 / state "timeout")
    sweep_jobs: int = 1  # processes one what-if sweep may use


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("megasolve")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


def bad_request(exc: MegasolveError, fallback_field: str | None = None) -> JSONResponse:
    from megasolve.cli.app import one_line

    return JSONResponse({"error": one_line(str(exc)), "field": exc.field or fallback_field}, status_code=400)


async def read_body(request: Request) -> Any:
    """The JSON body, at most ``MAX_BODY_BYTES``. A larger one is read to its end (up to 8 MiB, so
    the client gets the answer rather than a reset connection) and refused."""
    too_large = MegasolveError(field="body", value="more than 1 MiB", rule="larger than 1 MiB",
                               fix="send the options and a config.json's text, not a whole checkpoint")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > 8 * MAX_BODY_BYTES:
        raise too_large
    raw = bytearray()
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= MAX_BODY_BYTES:
            raw += chunk
        elif size > 8 * MAX_BODY_BYTES:
            break
    if size > MAX_BODY_BYTES:
        raise too_large
    try:
        return json.loads(bytes(raw) or b"{}")
    except (ValueError, RecursionError) as exc:
        raise MegasolveError(field="body", value="not JSON", rule=f"cannot be parsed ({exc.__class__.__name__})",
                             fix='send a JSON object, e.g. {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"}')


def run_view(job: Job, index: int) -> dict[str, Any]:
    """One run of a finished job, for the page: data (JSON formats) or text, error and field, notes."""
    request, result = job.runs[index], job.results[index]
    view: dict[str, Any] = {"command": request.command, "format": request.fmt, "exit_code": result["exit_code"],
                            "notes": notes(result["stderr"])}
    if result["exit_code"] in (0, 1):
        if request.fmt == "json":
            view["data"] = json.loads(result["stdout"])
            view.update(labels(request.command, view["data"]))
        else:
            view["text"] = result["stdout"]
    else:
        view["error"] = error_line(result["stderr"]) or "the command failed without an error line"
        view["field"] = error_field(result["stderr"], request)
    return view


def labels(command: str, data: dict[str, Any]) -> dict[str, Any]:
    """The CLI's short layout labels (``tp2 pp1 dp4 mbs2``) and, for a solve, its "why #1" line, so the
    page shows the same words as the terminal."""
    from megasolve.cli.render import layout_label

    if command == "solve":
        out: dict[str, Any] = {"labels": [layout_label(e["layout"]) for e in data.get("layouts", [])],
                               "closest_labels": [layout_label(e["layout"]) for e in data.get("closest", [])]}
        if data.get("layouts"):
            from megasolve.cli.solve_cmd import why_line

            out["why"] = why_line(data)
        return out
    if command == "estimate":
        return {"label": layout_label(data["layout"])}
    if command == "whatif":
        return {"labels": [[layout_label(p["layout"]) if p.get("layout") else None,
                            layout_label(p["runner_up"]["layout"]) if p.get("runner_up") else None]
                           for p in data.get("points", [])]}
    return {}


def job_view(queue: JobQueue, job: Job) -> dict[str, Any]:
    import time

    now = time.monotonic()
    view: dict[str, Any] = {"id": job.id, "command": job.runs[0].command, "state": job.state,
                            "position": queue.position(job), "error": job.error,
                            "elapsed_s": round((job.finished_s or now) - job.started_s, 1) if job.started_s else 0.0,
                            "limit_s": queue.max_seconds,
                            "progress": list(job.progress) if job.progress else None}
    if job.state == "done":
        view["runs"] = [run_view(job, i) for i in range(len(job.runs))]
    return view


def create_app(config: ServerConfig | None = None) -> Starlette:
    config = config or ServerConfig()
    state: dict[str, Any] = {"catalog": {}}
    static = resources.files("megasolve.web").joinpath("static")

    def queue() -> JobQueue:
        if "queue" not in state:  # created inside the running event loop
            state["queue"] = JobQueue(workers=config.workers, max_queued=config.max_queued,
                                      max_seconds=config.max_seconds)
        return state["queue"]

    async def index(request: Request) -> Response:
        return FileResponse(str(static.joinpath("index.html")))

    async def api_openapi(request: Request) -> Response:
        return JSONResponse(openapi(_version()))

    async def catalog(request: Request) -> Response:
        name = request.url.path.rsplit("/", 1)[-1]
        if name not in state["catalog"]:
            job = queue().submit([CommandRequest(command=name, argv=["--format", "json"])])
            await job.finished.wait()
            if job.state != "done" or job.results[0]["exit_code"] != 0:
                return JSONResponse({"error": job.error or error_line(job.results[0]["stderr"]), "field": None},
                                    status_code=500)
            state["catalog"][name] = job.results[0]["stdout"]
        return Response(state["catalog"][name], media_type="application/json")

    async def run_command(request: Request) -> Response:
        """POST /api/{command}: run it and answer with its output, exactly."""
        name = request.path_params["command"]
        try:
            body = await read_body(request)
            command_request = body_to_argv(name, body, max_sweep_jobs=config.sweep_jobs, max_seconds=config.max_seconds)
            job = queue().submit([command_request])
        except MegasolveError as exc:
            return bad_request(exc)
        except QueueFull as exc:
            return JSONResponse({"error": f"queue: {exc}; fix: retry in a few seconds", "field": None},
                                status_code=503)
        try:
            await job.finished.wait()
        finally:
            if not job.finished.is_set():  # the client went away: stop its work
                queue().cancel(job)
        if job.state != "done":
            return JSONResponse({"error": job.error, "field": None}, status_code=504 if job.state == "timeout" else 500)
        result = job.results[0]
        headers = {"X-Megasolve-Exit-Code": str(result["exit_code"])}
        if notes(result["stderr"]):
            # header values are latin-1: escape anything else rather than fail the answer
            headers["X-Megasolve-Notes"] = " | ".join(notes(result["stderr"])).encode("ascii", "backslashreplace").decode()
        if result["exit_code"] in (0, 1):
            media = "application/json" if command_request.fmt == "json" else "text/plain; charset=utf-8"
            return Response(result["stdout"], media_type=media, headers=headers)
        status = 400 if result["exit_code"] == 2 else 500
        return JSONResponse({"error": error_line(result["stderr"]),
                             "field": error_field(result["stderr"], command_request)},
                            status_code=status, headers=headers)

    async def submit_job(request: Request) -> Response:
        """POST /api/jobs {"command", "options", "formats"}: one job running the command once per format
        (the page asks for json plus the launch formats of a layout in one go)."""
        try:
            body = await read_body(request)
            if not isinstance(body, dict) or body.get("command") not in COMMANDS:
                raise MegasolveError(field="command", value=body.get("command") if isinstance(body, dict) else body,
                                     rule="must name a command", fix=f"one of {', '.join(COMMANDS)}")
            formats = body.get("formats") or ["json"]
            if not isinstance(formats, list) or not 0 < len(formats) <= MAX_FORMATS \
                    or not all(isinstance(f, str) for f in formats):
                raise MegasolveError(field="formats", value=formats, rule="must be a list of output formats",
                                     fix='e.g. ["json", "megatron"] (see the command\'s format choices)')
            options = body.get("options")
            if not isinstance(options, dict):
                raise MegasolveError(field="options", value=type(options).__name__, rule="must be a JSON object",
                                     fix='e.g. {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"}')
            runs = [body_to_argv(body["command"], {**options, "format": f}, max_sweep_jobs=config.sweep_jobs,
                                 max_seconds=config.max_seconds)
                    for f in formats]
            job = queue().submit(runs)
        except MegasolveError as exc:
            return bad_request(exc)
        except QueueFull as exc:
            return JSONResponse({"error": f"queue: {exc}; fix: retry in a few seconds", "field": None},
                                status_code=503)
        return JSONResponse(job_view(queue(), job), status_code=202)

    def find_job(request: Request) -> Job | None:
        return queue().jobs.get(request.path_params["job_id"])

    async def get_job(request: Request) -> Response:
        job = find_job(request)
        if job is None:
            return JSONResponse({"error": "job: not found (finished jobs are kept a while only); fix: submit again",
                                 "field": None}, status_code=404)
        return JSONResponse(job_view(queue(), job))

    async def cancel_job(request: Request) -> Response:
        job = find_job(request)
        if job is None:
            return JSONResponse({"error": "job: not found", "field": None}, status_code=404)
        queue().cancel(job)
        return JSONResponse(job_view(queue(), job))

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, **queue().counts()})

    async def shutdown() -> None:
        if "queue" in state:
            await state["queue"].close()

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app):
        yield
        await shutdown()

    routes = [
        Route("/", index),
        Route("/api/openapi.json", api_openapi),
        Route("/api/models", catalog),
        Route("/api/gpus", catalog),
        Route("/api/health", health),
        Route("/api/jobs", submit_job, methods=["POST"]),
        Route("/api/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/api/jobs/{job_id}", cancel_job, methods=["DELETE"]),
        Route("/api/{command}", run_command, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(static)), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(SecurityHeaders)])


class SecurityHeaders:
    """ASGI middleware: every response carries ``SECURITY_HEADERS`` (the page may load nothing from
    another origin)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                         if k.lower().encode() not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def serve(*, host: str, port: int, config: ServerConfig, log_level: str = "info") -> None:
    """Run the server until interrupted (uvicorn, one process; commands run in worker processes)."""
    import uvicorn

    uvicorn.run(create_app(config), host=host, port=port, log_level=log_level)


__all__ = ["ServerConfig", "create_app", "serve"]
