"""Micro-batching: one worker thread per device runs the model for requests of many robots at once.

A request is submitted as (runtime, observation, goal) and answered through a
`concurrent.futures.Future` that the event loop awaits with `asyncio.wrap_future`, so model work
never blocks the loop. The worker takes the first waiting request, then gathers more for at most
`max_wait_ms` -- but only while other requests are known to be on their way (`announce`d by the
app while their bodies are parsed), so a lone robot never pays the wait -- and runs one padded,
precompiled batch per policy.

A keeper reruns the last request's act while the worker waits and throws the answer away: a lone
robot's act after ~10 ms of idleness is 1.5-2x slower than back to back (the host's caches go cold,
docs/performance.md). It runs every `keep_warm_ms`, for at most `keep_warm_for_s` after the
last request: on an H200 one robot's served round trip at 5 Hz was 0.81-0.86x with it every 5 ms. (A
keeper run once per request, timed to end just before a steady robot's next request was due, measured
slower there and was removed.) A request that arrives during a keeper's act waits for it to finish.

With `inline`, a lone request (no other queued or on its way, none arrived in the `LONE_GAP_S`
before it, the device idle) runs its act on the calling thread, the event loop's, through
`try_inline`: it skips the hand-off to the worker and the wake-up of the loop after it, two thread
switches that cost 0.2-0.4 ms at 5 Hz (docs/performance.md); the loop is blocked for that act,
so requests that arrive meanwhile are read after it. The gap rule is what keeps a crowd off that path:
requests that came in during an inline act are not yet announced when the next one is decided (the
loop had not read them), so without it 100 robots on an H200 were all acted inline, one by one, and
waited 213 ms (p50) instead of 4.8.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
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


@dataclasses.dataclass(frozen=True)
class _Recent:
    """The last request a worker answered: what its keeper reruns, and until when."""

    runtime: Any
    observation: np.ndarray
    goal: np.ndarray
    answered: float  # perf_counter() when its batch ended


_WAKE = object()  # queued after an inline act, so that a worker idle without a keeper starts one

# A request is lone only if the one before it arrived at least this long before (seconds): one robot
# up to 50 Hz qualifies; 100 robots at 5 Hz arrive ~2 ms apart, 10 robots ~20 ms apart half the time.
LONE_GAP_S = 0.02


class PendingCounter:
    """Requests that arrived and are being parsed: the batchers wait for them, nobody else."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()
        self._arrivals = (-float("inf"), -float("inf"))  # perf_counter() of the two latest announces

    def announce(self) -> None:
        """A request has arrived and will submit (or `withdraw`) shortly."""
        with self._lock:
            self._count += 1
            self._arrivals = (self._arrivals[1], time.perf_counter())

    def withdraw(self) -> None:
        """An announced request has submitted, or will not (it failed validation)."""
        with self._lock:
            self._count = max(0, self._count - 1)

    @property
    def expecting(self) -> bool:
        """Whether an announced request is still on its way."""
        return self._count > 0

    @property
    def expecting_others(self) -> bool:
        """Whether a request besides the caller's own (announced, not yet withdrawn) is on its way."""
        return self._count > 1

    def quiet_for(self, seconds: float) -> bool:
        """Whether no request besides the caller's own has arrived in the last `seconds`: the older of
        the two latest arrivals is that old (had another come after the caller's, the older would be
        the caller's own, which is recent)."""
        with self._lock:
            return time.perf_counter() - self._arrivals[0] >= seconds


class MicroBatcher:
    """A worker thread for one device; `submit` from any thread, `close` to stop."""

    def __init__(self, name: str, max_wait_ms: float = 2.0, max_batch: int = 32,
                 pending: PendingCounter | None = None,
                 on_batch: Callable[[str, int, float], None] | None = None,
                 keep_warm_ms: float = 0.0, keep_warm_for_s: float = 5.0,
                 on_keep_warm: Callable[[str], None] | None = None, inline: bool = False,
                 on_inline: Callable[[str], None] | None = None):
        self.name = name  # device name, for logs and metrics
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_batch = max_batch
        self.pending = pending or PendingCounter()  # shared by the app with every batcher
        self._on_batch = on_batch  # metrics hook: (policy name, batch size, compute seconds)
        self.keep_warm_s = keep_warm_ms / 1000.0  # 0: no keeper
        self.keep_warm_for_s = keep_warm_for_s
        self._on_keep_warm = on_keep_warm  # metrics hook: (device name), once per keeper act
        self.inline = inline  # lone requests may act on the submitting thread (`try_inline`)
        self._on_inline = on_inline  # metrics hook: (device name), once per inline act
        self._acting = threading.Lock()  # held by whichever thread runs an act on this device
        self._recent: _Recent | None = None  # written under _acting
        self._queue: queue.Queue[_Job | object | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ producer side

    def submit(self, runtime: Any, observation: np.ndarray, goal: np.ndarray) -> concurrent.futures.Future:
        """Queue one request; the future resolves to an `ActResult` (or the model's exception)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put(_Job(runtime, observation, goal, future, time.perf_counter()))
        return future

    def try_inline(self, runtime: Any, observation: np.ndarray, goal: np.ndarray) -> ActResult | None:
        """With `inline`, a lone request's `ActResult`, its act run on the calling thread (the model's
        exception raised); None, and nothing run, when the request must go through `submit`: inline is
        off, requests are queued, another besides the caller's is on its way or arrived in the last
        `LONE_GAP_S`, or the device is acting.
        The caller's request must be announced to `pending`; it is withdrawn here when it acts inline,
        so that other devices' workers do not wait for it."""
        if (not self.inline or self.pending.expecting_others or not self._queue.empty()
                or not self.pending.quiet_for(LONE_GAP_S)):
            return None
        if not self._acting.acquire(blocking=False):
            return None
        self.pending.withdraw()
        try:
            keeper_idle = self._recent is None
            job = _Job(runtime, observation, goal, concurrent.futures.Future(), time.perf_counter())
            self._run_group([job])
        finally:
            self._acting.release()
        if keeper_idle and self.keep_warm_s > 0 and self._recent is not None:
            self._queue.put(_WAKE)
        if self._on_inline is not None:
            self._on_inline(self.name)
        return job.future.result()

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
            if job is not _WAKE:
                jobs.append(job)
        return jobs, False

    def _next(self) -> _Job | object | None:
        """The next queued item (a job, `_WAKE` or None to stop); while it has not come, a keeper act
        every `keep_warm_ms`."""
        while self._recent is not None and self.keep_warm_s > 0:
            recent = self._recent
            if time.perf_counter() - recent.answered > self.keep_warm_for_s:
                with self._acting:  # unless an inline act has just answered a newer request
                    if self._recent is recent:
                        self._recent = None
                continue
            try:
                return self._queue.get(timeout=self.keep_warm_s)
            except queue.Empty:
                self._keep_warm()
        return self._queue.get()

    def _keep_warm(self) -> None:
        if not self._acting.acquire(blocking=False):  # an inline act runs: the device is warm
            return
        try:
            recent = self._recent
            recent.runtime.act_batch(recent.observation[None], recent.goal[None])
        except Exception:  # the next real request will meet the fault and report it
            logger.exception("keep-warm act on %s failed; the keeper stops until the next request", self.name)
            self._recent = None
            return
        finally:
            self._acting.release()
        if self._on_keep_warm is not None:
            self._on_keep_warm(self.name)

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._next()
            if first is None:
                break
            if first is _WAKE:  # an inline act answered a request: the keeper loop starts again
                continue
            jobs, stop = self._gather(first)
            by_runtime: dict[int, list[_Job]] = {}
            for job in jobs:
                by_runtime.setdefault(id(job.runtime), []).append(job)
            with self._acting:
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
        self._recent = _Recent(runtime, jobs[-1].observation, jobs[-1].goal, end)
        if self._on_batch is not None:
            self._on_batch(getattr(runtime, "name", "?"), len(jobs), end - start)
        for i, job in enumerate(jobs):
            result = ActResult(actions[i], runtime.distance_or_none(distances[i]),
                               (start - job.submitted) * 1000, compute_ms, len(jobs))
            if not job.future.cancelled():
                job.future.set_result(result)
