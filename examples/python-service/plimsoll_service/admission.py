"""Admission (T1, T2, T3): per-pool worker slots, a bounded FIFO queue, immediate refusal with the
Retry-After estimator, and the metrics the checker reads.

Everything here runs on the event loop thread, so plain attributes need no locks.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

from .contract import PoolSettings


class Overloaded(Exception):
    def __init__(self, retry_after: int, detail: str):
        super().__init__(detail)
        self.retry_after = retry_after
        self.detail = detail


class QueueTimeout(Exception):
    """The deadline passed while the request was still waiting for a worker."""


class Estimator:
    """T3: Retry-After = p50 of the last `window` queue-wait samples, rounded up, clamped to
    [min_seconds, the pool's timeout]; `empty_seconds` while there are no samples.

    Samples: arrival -> worker start of every admitted request (0 when it started at once), and for a
    refused request the time from its refusal until the next slot of the pool freed.
    """

    def __init__(self, window: int, min_seconds: int, empty_seconds: int, max_seconds: int):
        self.samples: deque[float] = deque(maxlen=max(1, window))
        # Only the newest `window` open refusals can survive in the window when they close
        # together, so no more are kept (a refusal flood costs no memory).
        self.pending_refusals: deque[float] = deque(maxlen=max(1, window))
        self.min_seconds = min_seconds
        self.empty_seconds = empty_seconds
        self.max_seconds = max(min_seconds, max_seconds)

    def add(self, seconds: float) -> None:
        self.samples.append(max(0.0, seconds))

    def refused(self, now: float) -> None:
        self.pending_refusals.append(now)

    def slot_freed(self, now: float) -> None:
        for t in self.pending_refusals:
            self.add(now - t)
        self.pending_refusals.clear()

    def p50(self) -> float | None:
        """Nearest-rank median: the ceil(n/2)-th smallest (an even window's lower middle value)."""
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return ordered[math.ceil(len(ordered) / 2) - 1]

    def retry_after(self) -> int:
        p50 = self.p50()
        if p50 is None:
            return self.empty_seconds
        return min(self.max_seconds, max(self.min_seconds, math.ceil(p50)))


# The `outcome` label values of plimsoll_requests_total (its help text in the contract; rule
# `metric-series`): every pool has each series from start-up.
OUTCOMES = ("ok", "overloaded", "timeout", "memory_cap_exceeded", "stage_failed", "invalid", "cancelled")

# Queue-wait histogram buckets, in seconds.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Histogram:
    def __init__(self):
        self.counts = [0] * len(BUCKETS)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1


class Pool:
    """`workers` slots and a FIFO queue of at most `queue_capacity` waiters (None: unbounded)."""

    def __init__(self, settings: PoolSettings, window: int, min_seconds: int, empty_seconds: int):
        self.name = settings.name
        self.limit = settings.workers
        self.capacity = settings.queue_capacity
        self.timeout_ms = settings.timeout_ms
        max_seconds = (settings.timeout_ms or 0) // 1000
        self.estimator = Estimator(window, min_seconds, empty_seconds, max_seconds)
        self.busy = 0
        self.waiters: deque[asyncio.Future] = deque()
        self.queue_wait = Histogram()
        self.outcomes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.cancellations = 0

    @property
    def queue_depth(self) -> int:
        return sum(1 for f in self.waiters if not f.done())

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def _started(self, arrived: float, now: float) -> float:
        self.estimator.add(now - arrived)
        self.queue_wait.observe(now - arrived)
        return now

    def retry_after(self) -> int:
        """T3: the Retry-After this pool's overload refusal gives now. Reading it records nothing:
        B5's upload-budget refusal asked for no slot, so it adds no sample to the window."""
        return self.estimator.retry_after()

    async def acquire(self, arrived: float, deadline: float | None) -> float:
        """Takes a slot, waiting in FIFO order; returns the worker start time (loop clock).

        Raises Overloaded at once when every slot and queue place is taken, QueueTimeout when the
        deadline passes in the queue, CancelledError when the client goes away while queued."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.busy < self.limit and not self.queue_depth:
            self.busy += 1
            return self._started(arrived, now)
        if self.capacity is not None and self.queue_depth >= self.capacity:
            self.estimator.refused(now)
            retry = self.retry_after()
            queue = f"the queue ({self.capacity}) is full" if self.capacity else "nothing queues"
            raise Overloaded(
                retry,
                f"all {self.limit} {self.name} workers are busy and {queue}; retry after {retry} s",
            )
        fut = loop.create_future()
        self.waiters.append(fut)
        try:
            if deadline is None:
                started = await fut
            else:
                async with asyncio.timeout_at(deadline):
                    started = await fut
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                # The slot was handed over just as we gave up: pass it on.
                self.release()
            else:
                fut.cancel()
            try:
                self.waiters.remove(fut)
            except ValueError:
                pass
            if isinstance(exc, TimeoutError):
                raise QueueTimeout() from None
            raise
        return self._started(arrived, started)

    def release(self) -> None:
        """Frees a slot: the oldest live waiter gets it directly (FIFO, no barging)."""
        now = asyncio.get_running_loop().time()
        self.estimator.slot_freed(now)
        while self.waiters:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(now)
                return
        self.busy -= 1


def render_metrics(pools: dict[str, Pool], temp_files: int, metric_specs: list[dict]) -> str:
    """Prometheus text exposition with exactly the contract's metric names and labels."""
    help_of = {m["name"]: (m["type"], m["help"]) for m in metric_specs}
    out: list[str] = []

    def head(name: str) -> None:
        kind, text = help_of[name]
        out.append(f"# HELP {name} {text}")
        out.append(f"# TYPE {name} {kind}")

    def lbl(**labels) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return "{" + inner + "}" if inner else ""

    head("plimsoll_workers_busy")
    for p in pools.values():
        out.append(f"plimsoll_workers_busy{lbl(pool=p.name)} {p.busy}")
    head("plimsoll_workers_limit")
    for p in pools.values():
        out.append(f"plimsoll_workers_limit{lbl(pool=p.name)} {p.limit}")
    head("plimsoll_queue_depth")
    for p in pools.values():
        out.append(f"plimsoll_queue_depth{lbl(pool=p.name)} {p.queue_depth}")
    head("plimsoll_queue_wait_seconds")
    for p in pools.values():
        h = p.queue_wait
        for bound, count in zip(BUCKETS, h.counts):
            out.append(f'plimsoll_queue_wait_seconds_bucket{{pool="{p.name}",le="{bound}"}} {count}')
        out.append(f'plimsoll_queue_wait_seconds_bucket{{pool="{p.name}",le="+Inf"}} {h.total}')
        out.append(f"plimsoll_queue_wait_seconds_sum{lbl(pool=p.name)} {h.sum:.6f}")
        out.append(f"plimsoll_queue_wait_seconds_count{lbl(pool=p.name)} {h.total}")
    head("plimsoll_requests_total")
    for p in pools.values():
        for outcome, n in p.outcomes.items():
            out.append(f"plimsoll_requests_total{lbl(pool=p.name, outcome=outcome)} {n}")
    head("plimsoll_cancellations_total")
    for p in pools.values():
        out.append(f"plimsoll_cancellations_total{lbl(pool=p.name)} {p.cancellations}")
    head("plimsoll_temp_files")
    out.append(f"plimsoll_temp_files {temp_files}")
    return "\n".join(out) + "\n"
