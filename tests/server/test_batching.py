"""MicroBatcher and GoalCache without a model: batching, the wait rule, the keeper, inline acts, LRU eviction."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from mqe_client.protocol import ErrorCode, ProtocolError
from server.batching import LONE_GAP_S, MicroBatcher, PendingCounter
from server.goals import GoalCache


class FakeRuntime:
    """Adds observation and goal; records the batch sizes it was called with."""

    name = "fake"

    def __init__(self, delay: float = 0.0):
        self.calls: list[int] = []
        self.inputs: list[tuple[np.ndarray, np.ndarray]] = []
        self.delay = delay
        self.fail = False

    def act_batch(self, observations, goals):
        self.calls.append(len(observations))
        self.inputs.append((observations.copy(), goals.copy()))
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("device lost")
        return observations + goals, np.full(len(observations), 3.0, np.float32)

    def distance_or_none(self, value):
        return float(value)


def test_concurrent_requests_share_a_batch():
    pending = PendingCounter()
    batcher = MicroBatcher("test", max_wait_ms=50, max_batch=8, pending=pending)
    runtime = FakeRuntime(delay=0.05)
    try:
        busy = batcher.submit(runtime, np.zeros(2), np.zeros(2))  # keeps the worker busy 50 ms
        time.sleep(0.01)  # the worker has taken it alone
        futures = [batcher.submit(runtime, np.full(2, i), np.ones(2)) for i in range(5)]
        results = [f.result(5) for f in futures]
        busy.result(5)
    finally:
        batcher.close()
    assert runtime.calls == [1, 5]
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r.action, np.full(2, i + 1))
        assert r.batch_size == 5 and r.distance == 3.0


def test_a_lone_request_does_not_wait_but_an_announced_one_is_awaited():
    pending = PendingCounter()
    batcher = MicroBatcher("test", max_wait_ms=200, max_batch=8, pending=pending)
    runtime = FakeRuntime()
    try:
        start = time.perf_counter()
        batcher.submit(runtime, np.zeros(1), np.zeros(1)).result(5)
        assert time.perf_counter() - start < 0.1  # nothing announced: no 200 ms wait
        pending.announce()
        first = batcher.submit(runtime, np.zeros(1), np.zeros(1))
        threading.Timer(0.03, lambda: (batcher.submit(runtime, np.ones(1), np.zeros(1)),
                                       pending.withdraw())).start()
        assert first.result(5).batch_size == 2
    finally:
        batcher.close()


def test_a_model_fault_reaches_every_waiter_and_the_worker_survives():
    class Broken(FakeRuntime):
        def act_batch(self, observations, goals):
            raise RuntimeError("device lost")

    batcher = MicroBatcher("test", max_wait_ms=0, max_batch=4)
    try:
        with pytest.raises(RuntimeError, match="device lost"):
            batcher.submit(Broken(), np.zeros(1), np.zeros(1)).result(5)
        assert batcher.submit(FakeRuntime(), np.zeros(1), np.ones(1)).result(5).action[0] == 1
    finally:
        batcher.close()


def test_the_keeper_reruns_the_last_act_while_idle_then_stops():
    kept: list[str] = []
    batcher = MicroBatcher("dev", keep_warm_ms=5, keep_warm_for_s=0.3, on_keep_warm=kept.append)
    runtime = FakeRuntime()
    try:
        first = batcher.submit(runtime, np.full(2, 1.0), np.full(2, 2.0)).result(5)
        time.sleep(0.6)  # the keeper runs for 0.3 s after the answer, then stops
        stopped_at = len(runtime.calls)
        time.sleep(0.2)
        assert len(runtime.calls) == stopped_at
        second = batcher.submit(runtime, np.full(2, 5.0), np.zeros(2)).result(5)
    finally:
        batcher.close()
    keeper_acts = stopped_at - 1
    # every 5 ms for 0.3 s is at most 60; a loaded CI machine sleeps longer than asked, so fewer
    assert 10 <= keeper_acts <= 61 and len(kept) == keeper_acts and set(kept) == {"dev"}
    for observations, goals in runtime.inputs[1:stopped_at]:  # the last request's inputs, alone
        np.testing.assert_array_equal(observations, [[1.0, 1.0]])
        np.testing.assert_array_equal(goals, [[2.0, 2.0]])
    # the keeper's answers reach nobody: each request got its own
    np.testing.assert_array_equal(first.action, [3.0, 3.0])
    np.testing.assert_array_equal(second.action, [5.0, 5.0])
    assert first.batch_size == second.batch_size == 1


def test_no_keeper_without_keep_warm_ms_and_a_failing_keeper_stops_quietly():
    off = MicroBatcher("dev")
    runtime = FakeRuntime()
    try:
        off.submit(runtime, np.zeros(2), np.zeros(2)).result(5)
        time.sleep(0.1)
    finally:
        off.close()
    assert runtime.calls == [1]
    kept: list[str] = []
    batcher = MicroBatcher("dev", keep_warm_ms=2, keep_warm_for_s=5, on_keep_warm=kept.append)
    failing = FakeRuntime()
    try:
        batcher.submit(failing, np.zeros(2), np.zeros(2)).result(5)
        failing.fail = True
        time.sleep(0.1)
        assert failing.calls == [1, 1] and kept == []  # one failed keeper act, then no more
        with pytest.raises(RuntimeError, match="device lost"):  # the next request meets the fault itself
            batcher.submit(failing, np.zeros(2), np.zeros(2)).result(5)
        failing.fail = False
        assert batcher.submit(failing, np.ones(2), np.ones(2)).result(5).action.tolist() == [2.0, 2.0]
    finally:
        batcher.close()


class ThreadRecordingRuntime(FakeRuntime):
    """Also records which thread ran each act."""

    def __init__(self, delay: float = 0.0):
        super().__init__(delay)
        self.threads: list[str] = []

    def act_batch(self, observations, goals):
        self.threads.append(threading.current_thread().name)
        return super().act_batch(observations, goals)


def test_a_lone_request_acts_on_the_calling_thread_only_when_inline_is_on():
    pending = PendingCounter()
    off = MicroBatcher("dev", pending=pending)
    on = MicroBatcher("dev", pending=pending, inline=True)
    runtime = ThreadRecordingRuntime()
    try:
        pending.announce()  # as the app does before it parses the request
        assert off.try_inline(runtime, np.ones(2), np.ones(2)) is None and runtime.calls == []
        result = on.try_inline(runtime, np.full(2, 2.0), np.ones(2))
        assert not pending.expecting  # withdrawn by the inline act
    finally:
        off.close()
        on.close()
    np.testing.assert_array_equal(result.action, [3.0, 3.0])
    assert result.batch_size == 1 and result.distance == 3.0 and result.queue_ms < 50
    assert runtime.threads == [threading.current_thread().name]


def test_inline_gives_way_to_other_requests_and_to_a_busy_device():
    pending = PendingCounter()
    batcher = MicroBatcher("dev", max_wait_ms=0, pending=pending, inline=True)
    runtime = ThreadRecordingRuntime(delay=0.2)
    try:
        pending.announce()
        pending.announce()  # a second request is being parsed
        assert batcher.try_inline(runtime, np.ones(2), np.ones(2)) is None
        pending.withdraw()
        busy = batcher.submit(runtime, np.zeros(2), np.zeros(2))  # the worker acts for 0.2 s
        while not runtime.calls:  # until the worker is inside that act
            time.sleep(0.001)
        assert batcher.try_inline(runtime, np.ones(2), np.ones(2)) is None  # the device is acting
        assert pending.expecting  # not withdrawn: the caller submits instead
        busy.result(5)
        queued = batcher.submit(runtime, np.ones(2), np.zeros(2))  # queued behind nothing, taken at once
        assert queued.result(5).batch_size == 1
    finally:
        batcher.close()
    assert runtime.calls == [1, 1] and set(runtime.threads) == {"batcher-dev"}


def test_a_request_that_follows_another_closely_is_not_lone():
    pending = PendingCounter()
    inlined: list[str] = []
    batcher = MicroBatcher("dev", max_wait_ms=0, pending=pending, inline=True, on_inline=inlined.append)
    runtime = ThreadRecordingRuntime()
    try:
        assert pending.quiet_for(LONE_GAP_S)  # nothing has arrived yet
        pending.announce()
        assert pending.quiet_for(LONE_GAP_S)  # only the caller's own request
        assert batcher.try_inline(runtime, np.ones(2), np.ones(2)) is not None
        pending.announce()  # a second robot, right behind the first: its predecessor is recent
        assert not pending.quiet_for(LONE_GAP_S) and pending.quiet_for(0.0)
        assert batcher.try_inline(runtime, np.ones(2), np.ones(2)) is None
        assert pending.expecting  # not withdrawn: the caller submits instead
        pending.withdraw()
        time.sleep(LONE_GAP_S * 1.5)
        pending.announce()  # the first robot again, one gap after the last arrival
        assert batcher.try_inline(runtime, np.ones(2), np.ones(2)) is not None
        pending.announce()
        pending.announce()  # another arrives after the caller's: the caller's own is now the older one
        assert not pending.quiet_for(LONE_GAP_S)
    finally:
        batcher.close()
    assert runtime.calls == [1, 1] and inlined == ["dev", "dev"]


def test_an_inline_fault_reaches_its_caller_and_an_inline_act_restarts_an_idle_keeper():
    kept: list[str] = []
    pending = PendingCounter()
    batcher = MicroBatcher("dev", pending=pending, keep_warm_ms=5, keep_warm_for_s=0.2,
                           on_keep_warm=kept.append, inline=True)
    runtime = ThreadRecordingRuntime()
    try:
        runtime.fail = True
        pending.announce()
        with pytest.raises(RuntimeError, match="device lost"):
            batcher.try_inline(runtime, np.zeros(2), np.zeros(2))
        assert not pending.expecting
        runtime.fail = False
        time.sleep(0.1)
        assert kept == []  # a failed act leaves nothing for the keeper to rerun
        pending.announce()
        assert batcher.try_inline(runtime, np.full(2, 1.0), np.full(2, 2.0)).batch_size == 1
        time.sleep(0.1)  # the worker sat in a plain wait; the inline act woke it to keep warm
        assert len(kept) >= 3 and set(runtime.threads[2:]) == {"batcher-dev"}
        for observations, goals in runtime.inputs[2:]:  # the inline request's inputs, rerun
            np.testing.assert_array_equal(observations, [[1.0, 1.0]])
            np.testing.assert_array_equal(goals, [[2.0, 2.0]])
    finally:
        batcher.close()


def test_goal_cache_is_lru_bounded_and_per_policy():
    cache = GoalCache(max_entries=2)
    a = cache.put("p", "f", np.zeros(3))
    b = cache.put("p", "f", np.ones(3))
    cache.get(a, "p")  # a is now the most recent
    cache.put("p", "f", np.full(3, 2.0))  # evicts b
    with pytest.raises(ProtocolError) as info:
        cache.get(b, "p")
    assert info.value.code == ErrorCode.UNKNOWN_GOAL
    assert cache.get(a, "p")[0] == 0 and len(cache) == 2 and cache.evictions == 1
    with pytest.raises(ProtocolError) as info:
        cache.get(a, "other")
    assert info.value.code == ErrorCode.INVALID_VALUE
    assert cache.hits == 3 and cache.misses == 1
    with pytest.raises(ValueError):
        cache.get(a, "p")[0] = 5.0  # stored goals are read-only
