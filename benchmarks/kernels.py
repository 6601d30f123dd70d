"""GPU kernel times of a function from a JAX profiler trace (shared by the profiling benchmarks)."""

from __future__ import annotations

import collections
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax


def kernel_profile(call: Callable[[], None], calls: int) -> tuple[float, float, list[tuple[str, float, float]]]:
    """(kernel us per call, launches per call, [(name, us per call, launches per call)]) from a trace."""
    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir):
            for _ in range(calls):
                call()
        data = jax.profiler.ProfileData.from_file(str(next(Path(logdir).rglob("*.xplane.pb"))))
    totals: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    for plane in data.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if "stream" in line.name.lower():
                for event in line.events:
                    totals[event.name] += event.duration_ns
                    counts[event.name] += 1
    rows = sorted(((name, ns / calls / 1e3, counts[name] / calls) for name, ns in totals.items()),
                  key=lambda row: -row[1])
    return sum(totals.values()) / calls / 1e3, sum(counts.values()) / calls, rows
