"""GPU kernel times of a function from a JAX profiler trace (shared by the profiling benchmarks)."""

from __future__ import annotations

import collections
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import jax


class KernelProfile(NamedTuple):
    """What the device did per call in one trace."""

    kernel_us: float  # device time of the kernels per call, us
    launches: float  # kernel launches per call
    rows: list[tuple[str, float, float]]  # (name, us per call, launches per call), the largest first
    span_us: float | None  # p50 over calls of first kernel start to last kernel end, us (paused traces only)
    busy: float | None  # p50 over calls of the share of that span some kernel ran (paused traces only)


def kernel_profile(call: Callable[[], None], calls: int, pause_s: float = 0.0) -> KernelProfile:
    """Kernels of `calls` calls of `call` in one trace. With `pause_s` > 0 each call comes after a sleep
    of that long, the device idle in between, and each call's kernels are told apart by those idle
    gaps: its device span and how busy the device was in it (None if the gaps did not separate them)."""
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for _ in range(calls):
                if pause_s > 0:  # a back-to-back trace does not even yield between calls
                    time.sleep(pause_s)
                call()
        data = jax.profiler.ProfileData.from_file(str(next(Path(logdir).rglob("*.xplane.pb"))))
    totals: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    intervals = []
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "stream" in line.name.lower():
                for event in line.events:
                    totals[event.name] += event.duration_ns
                    counts[event.name] += 1
                    intervals.append((event.start_ns, event.end_ns))
    rows = sorted(((name, ns / calls / 1e3, counts[name] / calls) for name, ns in totals.items()),
                  key=lambda row: -row[1])
    span_us = busy = None
    if pause_s > 0 and len(spans := device_spans(intervals, pause_s * 1e9 / 2)) == calls:
        span_us = statistics.median(span for span, _ in spans) / 1e3
        busy = statistics.median(used / span if span else 0.0 for span, used in spans)
    return KernelProfile(sum(totals.values()) / calls / 1e3, sum(counts.values()) / calls, rows, span_us, busy)


def device_spans(intervals: Sequence[tuple[float, float]], min_gap: float) -> list[tuple[float, float]]:
    """(span, busy time) of each run of (start, end) intervals whose idle gaps are all shorter than
    `min_gap`: span from the run's first start to its last end, busy time the length of the intervals'
    union (kernels on several streams overlap)."""
    runs: list[tuple[float, float, float]] = []  # (start, end, busy) of each run so far
    for start, end in sorted(intervals):
        if runs and start - runs[-1][1] < min_gap:
            first, last, used = runs[-1]
            runs[-1] = (first, max(last, end), used + max(0.0, end - max(start, last)))
        else:
            runs.append((start, end, end - start))
    return [(last - first, used) for first, last, used in runs]
