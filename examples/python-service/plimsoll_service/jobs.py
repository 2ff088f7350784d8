"""One admitted request's job: stages with cooperative checkpoints (B1, B3), the per-request memory
budget (B2), the test hooks, the per-request temp dir, and the bridge between the event loop and the
worker thread that runs it.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .problems import Problem

MB = 1024 * 1024


class Stopped(Exception):
    """The job was told to stop: `timeout` (deadline) or `cancelled` (client went away)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class StageFailed(Exception):
    """A stage failed in a way the pipeline expected (the `fail` hook, a broken invariant)."""


class MemoryCapExceeded(Exception):
    pass


class BadInput(Exception):
    """Input found bad by a stage (e.g. an image that does not decode): answered 400 `code`."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


# --- test hooks -------------------------------------------------------------------------------

# Blanks around tokens are allowed; numbers may carry a `+` and leading zeros (at most 19 digits
# after them), as the OpenAPI header pattern states.
_B = r"[ \t]*"
_NUM = r"\+?0*([0-9]{1,19})"
_HOLD = re.compile(rf"^hold{_B}={_B}([a-z]+){_B}:{_B}{_NUM}$")
_STAGE = re.compile(rf"^(fail|panic){_B}={_B}([a-z]+)$")
_ALLOC = re.compile(rf"^alloc{_B}={_B}{_NUM}$")


@dataclass
class Hooks:
    # stage -> its directives in header order: ("hold", ms) / ("fail", 0) / ("panic", 0)
    at: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    alloc_mb: int = 0

    def add(self, stage: str, kind: str, value: int = 0) -> None:
        self.at.setdefault(stage, []).append((kind, value))

    def hold_ms(self, stage: str) -> int:
        return sum(v for k, v in self.at.get(stage, []) if k == "hold")


def parse_hooks(header: str | None, enabled: bool, stage_names: list[str], header_name: str) -> Hooks:
    """`directive *( ";" directive )`; directive = hold=STAGE:MS / fail=STAGE / panic=STAGE / alloc=MB.

    STAGE is any stage name of the contract (`queue` and `relay` included); a directive naming a
    stage this request does not run has no effect. Empty directives are ignored. Raises Problem
    `hooks_disabled` when hooks are off, `invalid_parameter` when a directive is malformed."""
    hooks = Hooks()
    if header is None:
        return hooks
    if not enabled:
        raise Problem("hooks_disabled", f"{header_name} is only honoured when PLIMSOLL_TEST_HOOKS=1")
    for raw in header.split(";"):
        d = raw.strip(" \t")
        if not d:
            continue
        if (m := _HOLD.match(d)) and m.group(1) in stage_names:
            hooks.add(m.group(1), "hold", int(m.group(2)))
        elif (m := _STAGE.match(d)) and m.group(2) in stage_names:
            hooks.add(m.group(2), m.group(1))
        elif m := _ALLOC.match(d):
            hooks.alloc_mb += int(m.group(1))
        else:
            raise Problem(
                "invalid_parameter",
                f"{header_name}: malformed directive {d!r} (hold=STAGE:MS, fail=STAGE, panic=STAGE, "
                f"alloc=MB; STAGE one of {', '.join(stage_names)})",
            )
    return hooks


# --- the job ----------------------------------------------------------------------------------


class Job:
    """State shared by the event loop (which may stop it) and the worker thread (which runs it)."""

    def __init__(self, kind: str, request_id: str, stages: list[str], hooks: Hooks,
                 deadline: float, timeout_ms: int, memory_cap_mb: int, temp_root: str):
        self.kind = kind
        self.timeout_ms = timeout_ms
        self.request_id = request_id
        self.stages = stages
        self.hooks = hooks
        self.deadline = deadline  # time.monotonic() clock, the same as the event loop's
        self.cap = memory_cap_mb * MB
        self.used = 0
        self.temp_root = temp_root
        self.tmpdir: str | None = None
        self.stage = "queue"
        self.completed: list[str] = []
        self._cancel = threading.Event()
        self.stop_reason: str | None = None

    # Called from the event loop.
    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self._cancel.set()

    # Called from the worker thread.
    def checkpoint(self) -> None:
        """Raises Stopped when the job was told to stop or its deadline has passed. Stages call it
        between steps and inside every long loop."""
        if self._cancel.is_set():
            raise Stopped(self.stop_reason or "cancelled")
        if time.monotonic() >= self.deadline:
            self.stop("timeout")
            raise Stopped("timeout")

    def charge(self, nbytes: int, what: str) -> None:
        """B2: charge a buffer to the request's budget before allocating it."""
        self.used += max(0, int(nbytes))
        if self.used > self.cap:
            raise MemoryCapExceeded(
                f"{what} needs {self.used / MB:.0f} MB, over the {self.cap // MB} MB per-request cap"
            )

    def credit(self, nbytes: int) -> None:
        self.used = max(0, self.used - int(nbytes))

    def make_tmpdir(self) -> str:
        self.tmpdir = tempfile.mkdtemp(prefix=f"{self.kind}-{self.request_id[:40]}-", dir=self.temp_root)
        return self.tmpdir

    def enter(self, stage: str) -> None:
        """Start `stage`: checkpoint, the alloc hook on the first stage, then this stage's hold,
        fail and panic directives in header order (a hold counts as the stage running)."""
        self.checkpoint()
        self.stage = stage
        if stage == self.stages[0] and self.hooks.alloc_mb:
            self.charge(self.hooks.alloc_mb * MB, f"the alloc hook ({self.hooks.alloc_mb} MB)")
        for kind, value in self.hooks.at.get(stage, []):
            if kind == "hold":
                end = time.monotonic() + value / 1000
                while True:
                    self.checkpoint()
                    now = time.monotonic()
                    if now >= end:
                        break
                    self._cancel.wait(min(end, self.deadline) - now)
            elif kind == "fail":
                raise StageFailed(f"{stage} failed (fail hook)")
            else:
                raise RuntimeError(f"{stage} panicked (panic hook)")

    def run_stages(self, steps, ctx):
        """Runs [(stage, fn)] in order; each fn(job, ctx) -> ctx."""
        for stage, fn in steps:
            self.enter(stage)
            ctx = fn(self, ctx)
            self.completed.append(stage)
        return ctx

    def cleanup(self) -> None:
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


async def run_job(executor, job: Job, fn, *args):
    """Runs fn(job, *args) on a worker thread and waits for it, enforcing the deadline.

    At the deadline the job is told to stop and waited for (the slot is released only once the
    worker has really stopped). If this task is cancelled (the client went away) the job is
    stopped the same way and CancelledError propagates once the worker is done. The temp dir is
    removed on every path before returning."""
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(executor, fn, job, *args)
    cancelled = False
    try:
        while not fut.done():
            try:
                timeout = max(0.0, job.deadline - loop.time())
                done, _ = await asyncio.wait({fut}, timeout=timeout)
                if not done:
                    job.stop("timeout")
                    await asyncio.wait({fut})
            except asyncio.CancelledError:
                cancelled = True
                job.stop("cancelled")
    finally:
        if not fut.done():  # only when cancelled twice mid-wait: never leave the worker behind
            job.stop("cancelled")
            await asyncio.shield(asyncio.wait({fut}))
        job.cleanup()
    if cancelled:
        raise asyncio.CancelledError()
    return fut.result()


def job_problem(job: Job, exc: BaseException) -> Problem:
    """Maps what a job raised to the contract's answer."""
    where = dict(stage=job.stage, failed_stage=job.stage, completed_stages=list(job.completed), cause=exc)
    if isinstance(exc, Stopped):
        detail = f"{job.kind} exceeded its {job.timeout_ms} ms timeout during {job.stage}"
        return Problem("timeout", detail, **where)
    if isinstance(exc, MemoryCapExceeded):
        return Problem("memory_cap_exceeded", str(exc), **where)
    if isinstance(exc, BadInput):
        return Problem(exc.code, exc.detail, **where)
    if isinstance(exc, StageFailed):
        return Problem("stage_failed", str(exc), **where)
    return Problem("stage_failed", f"{job.stage} failed: {type(exc).__name__}: {exc}", **where)
