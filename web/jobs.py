"""A bounded job queue: at most ``workers`` commands run at once, each in its own process session
(``megasolve.web.worker``), at most ``max_queued`` wait, and each is killed after ``max_seconds``.

A job's state goes queued -> running -> done | failed | timeout | cancelled; while it waits it has
a queue position, while it runs its elapsed time and, for a what-if sweep, (points done, total).
Cancelling kills the worker's whole process group (the sweep's child processes included). The
folder for a job's model / cluster texts is the server's: made before the worker starts and removed
once it has exited, so a worker killed by a cancel or a timeout leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from megasolve.web.request import TEXT_FIELDS, CommandRequest

FINAL_STATES = ("done", "failed", "timeout", "cancelled")


class QueueFull(Exception):
    """More than ``max_queued`` jobs wait: the client should retry later (HTTP 503)."""


@dataclass(slots=True, kw_only=True)
class Job:
    id: str
    runs: list[CommandRequest]
    state: str = "queued"
    created_s: float = field(default_factory=time.monotonic)
    started_s: float | None = None
    finished_s: float | None = None
    progress: tuple[int, int] | None = None
    results: list[dict[str, Any]] | None = None  # the worker's answer, one per run
    error: str | None = None  # timeout / cancel / crash text (bad input is in the results)
    process: asyncio.subprocess.Process | None = None
    task: asyncio.Task | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class JobQueue:
    def __init__(self, *, workers: int = 2, max_queued: int = 16, max_seconds: float = 120.0,
                 keep: int = 256) -> None:
        self.workers = workers
        self.max_queued = max_queued
        self.max_seconds = max_seconds
        self.keep = keep
        self.jobs: dict[str, Job] = {}
        self._slots = asyncio.Semaphore(workers)
        self._ids = itertools.count(1)
        self._token = os.urandom(4).hex()  # ids differ between server runs

    # ------------------------------------------------------------------ submit / cancel
    def submit(self, runs: list[CommandRequest]) -> Job:
        if sum(j.state == "queued" for j in self.jobs.values()) >= self.max_queued:
            raise QueueFull(f"{self.max_queued} jobs are already waiting")
        job = Job(id=f"{self._token}-{next(self._ids)}", runs=runs)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job))
        self._forget_old()
        return job

    def cancel(self, job: Job) -> None:
        if job.state in FINAL_STATES:
            return
        job.error = "cancelled by the client"
        self._finish(job, "cancelled")
        self._kill(job)
        if job.task is not None:
            job.task.cancel()

    async def close(self) -> None:
        """Cancel everything (server shutdown): no worker outlives the server."""
        for job in list(self.jobs.values()):
            self.cancel(job)
        tasks = [j.task for j in self.jobs.values() if j.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def position(self, job: Job) -> int | None:
        """1 = next to start."""
        if job.state != "queued":
            return None
        waiting = [j for j in self.jobs.values() if j.state == "queued"]
        return sorted(waiting, key=lambda j: j.created_s).index(job) + 1

    def counts(self) -> dict[str, int]:
        return {"running": sum(j.state == "running" for j in self.jobs.values()),
                "queued": sum(j.state == "queued" for j in self.jobs.values()),
                "workers": self.workers, "max_queued": self.max_queued}

    # ------------------------------------------------------------------ running
    async def _run(self, job: Job) -> None:
        folder = tempfile.mkdtemp(prefix="megasolve-web-")
        try:
            await self._run_in(job, folder)
        finally:  # the worker has exited (reaped) or never started
            shutil.rmtree(folder, ignore_errors=True)

    async def _run_in(self, job: Job, folder: str) -> None:
        try:
            async with self._slots:
                if job.state != "queued":
                    return
                job.state = "running"
                job.started_s = time.monotonic()
                try:
                    answer = await asyncio.wait_for(self._work(job, folder), timeout=self.max_seconds)
                except asyncio.TimeoutError:
                    await self._reap(job)
                    job.error = (f"ran past the server's limit of {self.max_seconds:g} s and was stopped; fix: "
                                 "fewer sweep points, a smaller time_limit, or run megasolve locally")
                    self._finish(job, "timeout")
                    return
                if answer is None:
                    self._finish(job, "failed")
                    return
                job.results = answer
                self._finish(job, "done")
        except asyncio.CancelledError:
            await self._reap(job)
            self._finish(job, "cancelled")

    async def _work(self, job: Job, folder: str) -> list[dict[str, Any]] | None:
        payload = {"runs": [{"command": r.command, "argv": r.argv} for r in job.runs],
                   "files": {k: v for r in job.runs for k, v in r.files.items()}, "folder": folder}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "megasolve.web.worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        job.process = proc
        proc.stdin.write(json.dumps(payload).encode())
        await proc.stdin.drain()
        proc.stdin.close()
        stderr_lines: list[str] = []

        async def read_stderr() -> None:
            async for raw in proc.stderr:
                line = raw.decode(errors="replace").strip()
                if line.startswith('{"progress"'):
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        done, total = json.loads(line)["progress"]
                        job.progress = (int(done), int(total))
                        continue
                stderr_lines.append(line)

        out, _ = await asyncio.gather(proc.stdout.read(), read_stderr())
        await proc.wait()
        try:
            return json.loads(out)["results"]
        except (ValueError, KeyError):
            tail = stderr_lines[-1] if stderr_lines else f"exit status {proc.returncode}"
            job.error = f"the worker process failed: {tail}"
            return None

    def _kill(self, job: Job) -> None:
        proc = job.process
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    async def _reap(self, job: Job) -> None:
        """Kill the job's process group and collect the worker's exit status."""
        self._kill(job)
        if job.process is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, ProcessLookupError):
                await asyncio.wait_for(job.process.wait(), timeout=10)

    def _finish(self, job: Job, state: str) -> None:
        if job.state in FINAL_STATES:
            return
        job.state = state
        job.finished_s = time.monotonic()
        job.finished.set()

    def _forget_old(self) -> None:
        finished = sorted((j for j in self.jobs.values() if j.state in FINAL_STATES), key=lambda j: j.created_s)
        for job in finished[:max(0, len(self.jobs) - self.keep)]:
            del self.jobs[job.id]


# ---------------------------------------------------------------------------- reading a run's answer
FIELD_PATTERNS = (re.compile(r"^error: (<\w+>|--?[\w-]+(?=[ =])|[A-Za-z_][\w.]*(?==))"),  # MegasolveError: field=...
                  re.compile(r"'(--[\w-]+)'"))  # click: Invalid value for '--gpus' / '-n': ...


def error_line(stderr: str) -> str | None:
    lines = [line[len("error: "):] for line in stderr.splitlines() if line.startswith("error: ")]
    return lines[-1] if lines else None


def notes(stderr: str) -> list[str]:
    return [line[len("note: "):] for line in stderr.splitlines() if line.startswith("note: ")]


def error_field(stderr: str, request: CommandRequest) -> str | None:
    """The body field an error line names: ``--top-k`` -> ``top_k``; a file's field -> its text field."""
    from megasolve.web.request import offered_options

    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    if not lines:
        return None
    for pattern in FIELD_PATTERNS:
        match = pattern.search(lines[-1])
        if match:
            name = match.group(1)
            break
    else:
        return None
    if name.startswith("<"):
        return name[1:-1]
    flag_to_text = {flag: text for text, flag in TEXT_FIELDS.items() if text in request.files}
    if name in flag_to_text:
        return flag_to_text[name]
    options = offered_options(request.command)
    for key, option in options.items():
        if name in option.opts or name in option.secondary_opts:
            return key
    if "model_text" in request.files and not name.startswith("-"):
        return "model_text"  # a key of the uploaded model file (num_layers, vocab_size, ...)
    return name.lstrip("-").replace("-", "_")
