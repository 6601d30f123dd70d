"""Micro-batching: one worker thread per device runs the model for requests of many robots at once.

A request is submitted as (runtime, observation, goal) and answered through a
`concurrent.futures.Future` that the event loop awaits with `asyncio.wrap_future`, so model work
never blocks the loop. The worker takes the first waiting request, then gathers more for at most
`max_wait_ms` -- but only while other requests are known to be on their way (`announce`d by the
app while their bodies are parsed), so a lone robot never pays the wait -- and runs one padded,
precompiled batch per policy.

Every request goes through the worker, a lone robot's too: one path at every load. A lone robot
pays the hand-off to the worker thread and back, two thread switches (0.16-0.23 ms at 5 Hz on the CPU
machine, docs/performance.md). Nothing runs on the device between requests.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ActResult:
    """What the worker answers for one request."""

    action: np.ndarray  # (A,) float32, robot units
    distance: float | None  # steps to the goal, None without a critic
    queue_ms: float  # from submit to the start of its batch
    compute_ms: float  # the batch's model call (shared by everyone in it)
    batch_size: int  # requests in the batch it ran in


@dataclasses.dataclass
class _Job:
    runtime: Any  # server.runtime.PolicyRuntime
    observation: np.ndarray
    goal: np.ndarray
    future: concurrent.futures.Future
    submitted: float


class PendingCounter:
    """Requests that arrived and are being parsed: the batchers wait for them, nobody else."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def announce(self) -> None:
        """A request has arrived and will submit (or `withdraw`) shortly."""
        with self._lock:
            self._count += 1

    def withdraw(self) -> None:
        """An announced request has submitted, or will not (it failed validation)."""
        with self._lock:
            self._count = max(0, self._count - 1)

    @property
    def expecting(self) -> bool:
        """Whether an announced request is still on its way."""
        return self._count > 0

    @contextlib.contextmanager
    def announced(self) -> Iterator[Callable[[], None]]:
        """One request's announcement: yields its `withdraw`, to call right after the submit (a worker
        waiting for the request then finds it queued); called on the way out if it never was (the
        request failed first). Later calls do nothing."""
        self.announce()
        withdrawn = False

        def withdraw() -> None:
            nonlocal withdrawn
            if not withdrawn:
                withdrawn = True
                self.withdraw()

        try:
            yield withdraw
        finally:
            withdraw()


class MicroBatcher:
    """A worker thread for one device; `submit` from any thread, `close` to stop."""

    def __init__(self, name: str, max_wait_ms: float = 2.0, max_batch: int = 32,
                 pending: PendingCounter | None = None,
                 on_batch: Callable[[str, int, float], None] | None = None):
        self.name = name  # device name, for logs and metrics
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_batch = max_batch
        self.pending = pending or PendingCounter()  # shared by the app with every batcher
        self._on_batch = on_batch  # metrics hook: (policy name, batch size, compute seconds)
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ producer side

    def submit(self, runtime: Any, observation: np.ndarray, goal: np.ndarray) -> concurrent.futures.Future:
        """Queue one request; the future resolves to an `ActResult` (or the model's exception)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put(_Job(runtime, observation, goal, future, time.perf_counter()))
        return future

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker after the queued requests."""
        self._queue.put(None)
        self._thread.join(timeout)

    # ------------------------------------------------------------------ worker side

    def _gather(self, first: _Job) -> tuple[list[_Job], bool]:
        jobs, deadline = [first], time.perf_counter() + self.max_wait_s
        while len(jobs) < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                remaining = deadline - time.perf_counter()
                if not self.pending.expecting or remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=min(remaining, 0.0005))
                except queue.Empty:
                    continue
            if job is None:
                return jobs, True
            jobs.append(job)
        return jobs, False

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                break
            jobs, stop = self._gather(first)
            by_runtime: dict[int, list[_Job]] = {}
            for job in jobs:
                by_runtime.setdefault(id(job.runtime), []).append(job)
            for group in by_runtime.values():
                self._run_group(group)

    def _run_group(self, jobs: list[_Job]) -> None:
        runtime = jobs[0].runtime
        start = time.perf_counter()
        try:
            actions, distances = runtime.act_batch(np.stack([j.observation for j in jobs]),
                                                   np.stack([j.goal for j in jobs]))
        except Exception as e:  # a model fault: every waiter gets it (as a 500), the worker lives on
            logger.exception("batch of %d on %s failed", len(jobs), self.name)
            for job in jobs:
                if not job.future.cancelled():
                    job.future.set_exception(e)
            return
        end = time.perf_counter()
        compute_ms = (end - start) * 1000
        if self._on_batch is not None:
            self._on_batch(getattr(runtime, "name", "?"), len(jobs), end - start)
        for i, job in enumerate(jobs):
            result = ActResult(actions[i], runtime.distance_or_none(distances[i]),
                               (start - job.submitted) * 1000, compute_ms, len(jobs))
            if not job.future.cancelled():
                job.future.set_result(result)
