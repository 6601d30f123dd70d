"""benchmarks.kernels: each call's device span and busy time from kernel intervals; the trace on the CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.kernels import KernelProfile, device_spans, kernel_profile


def test_kernels_closer_than_the_gap_are_one_call_and_overlaps_count_once():
    intervals = [(30, 40), (0, 10), (5, 20), (1000, 1010), (1002, 1004)]
    assert device_spans(intervals, min_gap=100) == [(40, 30), (10, 10)]
    assert device_spans(intervals, min_gap=10) == [(20, 20), (10, 10), (10, 10)]  # a gap of exactly 10 splits
    assert device_spans([], min_gap=1) == []


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30)), min_size=1, max_size=40),
       st.integers(1, 50))
def test_busy_time_is_the_union_of_the_kernels_and_runs_split_at_the_gaps(starts_and_lengths, min_gap):
    intervals = [(start, start + length) for start, length in starts_and_lengths]
    spans = device_spans(intervals, min_gap)
    covered = {t for start, end in intervals for t in range(start, end)}  # unit time steps some kernel ran
    assert sum(used for _, used in spans) == len(covered)
    assert all(0 < used <= span for span, used in spans)
    idle_gaps, last_end = 0, None
    for start, end in sorted(intervals):
        idle_gaps += last_end is not None and start - last_end >= min_gap
        last_end = end if last_end is None else max(last_end, end)
    assert len(spans) == 1 + idle_gaps


def test_a_cpu_trace_has_no_device_kernels_and_so_no_spans():
    x = jnp.ones((64, 64))
    add = jax.jit(lambda v: v + 1.0)
    add(x).block_until_ready()
    profile = kernel_profile(lambda: add(x).block_until_ready(), 3, pause_s=0.001)
    assert profile == KernelProfile(0.0, 0.0, [], None, None)
