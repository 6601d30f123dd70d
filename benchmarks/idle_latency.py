"""One robot's act at 5 Hz: does keeping the device busy between requests make it faster?

    python -m benchmarks.idle_latency --preset bridge                      # a random bridge checkpoint
    python -m benchmarks.idle_latency --checkpoint mqe_model/demo/checkpoint --image-size 64

A lone robot at 5 Hz leaves the server idle for ~200 ms between requests, and its act then takes
1.5-2x the back-to-back time (docs/benchmarks.md, issue 6). Two causes are possible: the GPU drops
its clocks when idle, or the host's caches and the act's dispatch path go cold. This benchmark
tells them apart by timing paced acts while a keeper thread, between them, every `--periods-ms`:
- `act`: runs the same compiled act on a blank observation (warms the whole path: host code,
  dispatch, the GPU's clocks), as a keep-warm loop in the server would (not built: it does not help);
- `tiny`: runs one tiny jitted kernel (keeps the GPU's clocks up, little else);
- `wide`: runs one elementwise kernel over `--wide-mb` (64 MB by default: every SM and the memory busy
  for ~30 us on an H200; 64 KB on a CPU), for a device whose memory clock or idle SMs, not its SM clock,
  slow the act; a larger array at a short period keeps the device busy most of the time, for a driver
  that lowers its clocks by utilization.
These keepers run on a thread of their own, as the server's would. Three more run in the thread that
calls the act, in place of its sleep between requests, as the server's worker could while it waits:
- `poll`: wakes every period and does nothing (is it the calling thread's long sleep?);
- `self-tiny`: wakes every period and runs the tiny kernel from the calling thread;
- `spin`: busy-waits until the request instead of sleeping (one core; the period is not used).
A keeper and the timed act share a lock, so a request that arrives while the keeper runs waits
for it, as it would in the server; each paced call sleeps a jittered period so its phase against
the keeper varies. Prints, per setting, the p50 / p90 act time and its ratio to no keeper measured
in the same run, and the keeper's share of the wall time (for `spin`, of one core's).

Then the onset: the act's p50 after idle gaps of `--gaps-ms` (how long the host and device must be
idle before the act slows), and with `--spinners N` the same again while N busy processes at the
lowest priority (nice 19) keep the host's cores from ever idling; they yield to the act's threads.
With `--evict-mb MB` every gap's acts alternate with as many that have MB of host memory written over
just before them, untimed: more than the last-level cache leaves the host's caches holding that buffer instead
of the act's code and data. If acts after short gaps then run as slowly as after long ones, the paced
act loses its time to cold host caches (the GPU's clocks stay up between paced acts and its kernels
take the same time: docs/benchmarks.md, issue 6).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tyro

from server.settings import ServeSettings, StackEncoders


@dataclasses.dataclass(frozen=True)
class Args:
    """Paced act latency with and without a keeper between requests."""

    checkpoint: Path | None = None  # a checkpoint; None: a random one of --preset
    preset: str = "bridge"  # MQE preset of the random checkpoint
    image_size: int = 128  # image size of the random checkpoint; 0 for a state policy
    stack_encoders: StackEncoders = "auto"  # as mqe-serve's --stack-encoders
    hz: float = 5.0  # rate of the timed acts (one robot)
    calls: int = 40  # timed acts per setting
    periods_ms: tuple[float, ...] = (50.0, 20.0, 10.0)  # keeper periods tried, ms between its runs
    kinds: tuple[str, ...] = ("act", "tiny")  # keepers tried: act, tiny, wide (own thread); poll, self-tiny, spin (the act's)
    wide_mb: float | None = None  # the wide keeper's array, MB; None: 64 on a GPU, 1/16 on a CPU
    gaps_ms: tuple[float, ...] = (0.0, 0.5, 2.0, 10.0, 50.0, 200.0)  # idle gaps before an act, ms
    gap_calls: int = 20  # timed acts per gap
    spinners: int = 0  # also measure the gaps with this many nice-19 busy processes (0: not)
    evict_mb: float = 0.0  # also measure the gaps with this many MB of host memory written before each act (0: not)


def main(argv: list[str] | None = None) -> int:
    """Run and print the figures."""
    args = tyro.cli(Args, args=argv)
    if args.hz <= 0 or args.calls < 5 or any(p <= 0 for p in args.periods_ms):
        print("idle_latency: error: --hz and --periods-ms must be > 0 and --calls >= 5", file=sys.stderr)
        return 2
    if args.gap_calls < 3 or args.spinners < 0 or args.evict_mb < 0 or any(g < 0 for g in args.gaps_ms):
        print("idle_latency: error: --gap-calls must be >= 3, --spinners, --evict-mb and --gaps-ms >= 0",
              file=sys.stderr)
        return 2
    if args.wide_mb is not None and args.wide_mb <= 0:
        print(f"idle_latency: error: --wide-mb must be > 0 (got {args.wide_mb}); leave it out for the device's default",
              file=sys.stderr)
        return 2
    if unknown := set(args.kinds) - set(KINDS):
        print(f"idle_latency: error: unknown --kinds {sorted(unknown)}; choose from {', '.join(KINDS)}",
              file=sys.stderr)
        return 2
    from server.runtime import PolicyRuntime

    checkpoint = args.checkpoint
    if checkpoint is None:
        from server.random_checkpoint import write_random_checkpoint

        try:
            checkpoint = write_random_checkpoint(Path(tempfile.mkdtemp(prefix="idle-bench-")), "mqe", args.preset,
                                                 (), args.image_size or None)
        except ValueError as e:
            print(f"idle_latency: error: {e}", file=sys.stderr)
            return 2
    device = jax.devices()[0]
    wanted = ServeSettings(stack_encoders=args.stack_encoders).encoders_on(device.platform)
    runtime = PolicyRuntime.load(checkpoint, buckets=(1,), encoders=wanted)
    act = blank_act(runtime)
    tiny = elementwise_kernel(device, 256)
    wide_mb = args.wide_mb if args.wide_mb is not None else 64.0 if device.platform == "gpu" else 1 / 16
    work = {"act": act, "tiny": tiny, "self-tiny": tiny, "poll": None, "spin": None,
            "wide": elementwise_kernel(device, max(1, round(wide_mb * (1 << 18))))}
    for _ in range(20):
        act()
    back_to_back = after_gap(act, 0.0, 100)[0]
    print(f"{runtime.policy.agent_name} checkpoint {checkpoint}, batch 1, encoders "
          f"{runtime.encoders}, on {device.device_kind} ({device.platform}), jax {jax.__version__}")
    print(f"act back to back: p50 {back_to_back:.3f} ms; the wide keeper's array {wide_mb:g} MB")
    print(f"{'keeper':>9} {'period ms':>9} {'act p50 ms':>10} {'p90 ms':>8} {'p50 / none':>10} {'keeper duty':>11}")
    settings = [("none", 0.0)] + [(kind, period) for kind in args.kinds
                                  for period in ((0.0,) if kind == "spin" else args.periods_ms)]
    none_p50 = None
    for kind, period in settings:
        times, duty = paced(act, args.hz, args.calls, kind, work.get(kind), period / 1e3)
        p50, p90 = float(np.median(times)), float(np.percentile(times, 90))
        none_p50 = p50 if none_p50 is None else none_p50
        print(f"{kind:>9} {period:9g} {p50:10.3f} {p90:8.3f} {p50 / none_p50:10.2f} {duty:11.1%}")
    if args.gaps_ms:
        evict = cache_evictor(args.evict_mb) if args.evict_mb else None
        pairs = {gap: after_gap(act, gap / 1e3, args.gap_calls, evict) for gap in args.gaps_ms}
        idle = {gap: plain for gap, (plain, _) in pairs.items()}
        evicted = {gap: cold for gap, (_, cold) in pairs.items() if cold is not None}
        busy = {}
        if args.spinners:
            with spinning(args.spinners):
                busy = {gap: after_gap(act, gap / 1e3, args.gap_calls)[0] for gap in args.gaps_ms}
        print(f"act p50 (ms) after an idle gap{f'; with {args.spinners} nice-19 spinners' if busy else ''}"
              f"{f'; with {args.evict_mb:g} MB written before each act' if evicted else ''}:")
        for gap, p50 in idle.items():
            spun = f"   spinners {busy[gap]:8.3f}  ({busy[gap] / p50:.2f}x)" if busy else ""
            cold = f"   evicted {evicted[gap]:8.3f}  ({evicted[gap] / p50:.2f}x)" if evicted else ""
            print(f"  gap {gap:7.1f} ms: {p50:8.3f}  ({p50 / idle[args.gaps_ms[0]]:.2f}x the first gap){spun}{cold}")
    return 0


def after_gap(act: Callable[[], None], gap_s: float, calls: int,
              before: Callable[[], Any] | None = None) -> tuple[float, float | None]:
    """p50 (ms) of `calls` acts, each after sleeping `gap_s`; with `before`, also the p50 of as many
    acts that each run `before` (untimed) between the sleep and the act, alternating with the plain
    ones so that a drift in the machine's speed reaches both (None without `before`)."""
    plain, preceded = [], []
    for _ in range(calls):
        for times in (plain, preceded) if before is not None else (plain,):
            time.sleep(gap_s)
            if times is preceded:
                before()
            start = time.perf_counter()
            act()
            times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(plain)), float(np.median(preceded)) if preceded else None


@contextlib.contextmanager
def spinning(count: int) -> Iterator[list[subprocess.Popen]]:
    """`count` busy processes at the lowest priority for the duration of the block (yielded; killed
    and reaped when it ends)."""
    code = "import os\nos.nice(19)\nwhile True:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        time.sleep(0.5)
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def cache_evictor(megabytes: float) -> Callable[[], np.ndarray]:
    """A call that adds 1 to every byte of a `megabytes` host buffer and returns it: with more than the
    last-level cache, what the caches held before it (the act's code and data) is gone after it."""
    buffer = np.zeros(max(1, round(megabytes * (1 << 20))), np.uint8)
    return lambda: np.add(buffer, 1, out=buffer)


def blank_act(runtime: Any) -> Callable[[], None]:
    """One batch-1 act of the runtime's compiled function on a blank observation, to completion."""
    policy = runtime.policy
    observation = np.zeros((1, *policy.observation_shape), runtime.observation_dtype)
    codes = runtime.encode_goal(observation[0], preprocessed=True)[None]
    return lambda: runtime.act_batch(observation, codes)


def elementwise_kernel(device: Any, size: int) -> Callable[[], None]:
    """One jitted elementwise kernel over `size` float32 numbers on the device, to completion."""
    x = jax.device_put(jnp.ones((size,), jnp.float32), device)
    add = jax.jit(lambda v: v + 1.0)
    jax.block_until_ready(add(x))
    return lambda: jax.block_until_ready(add(x))


KINDS = ("act", "tiny", "wide", "poll", "self-tiny", "spin")  # --kinds; the last three run in the act's thread


def paced(act: Callable[[], None], hz: float, calls: int, kind: str, keeper: Callable[[], None] | None,
          period_s: float) -> tuple[list[float], float]:
    """Times (ms) of `calls` acts at `hz` with keeper `kind` ('none' or one of KINDS) between them,
    and the keeper's share of the wall time. `act`, `tiny` and `wide` run `keeper` every `period_s` on
    a thread of their own; `poll`, `self-tiny` and `spin` replace the calling thread's sleep."""
    lock, stop, busy = threading.Lock(), threading.Event(), [0.0]

    def keep() -> None:
        while not stop.wait(period_s):
            with lock:
                start = time.perf_counter()
                keeper()
                busy[0] += time.perf_counter() - start

    def wait_until(deadline: float) -> None:
        if kind == "spin":
            start = time.perf_counter()
            while time.perf_counter() < deadline:
                pass
            busy[0] += time.perf_counter() - start
            return
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(min(left, period_s) if kind in ("poll", "self-tiny") else left)
            if kind == "self-tiny" and time.perf_counter() < deadline:
                start = time.perf_counter()
                keeper()
                busy[0] += time.perf_counter() - start

    thread = threading.Thread(target=keep, daemon=True) if kind in ("act", "tiny", "wide") else None
    if thread is not None:
        thread.start()
    rng, times, begin = np.random.default_rng(0), [], time.perf_counter()
    try:
        for _ in range(calls):
            wait_until(time.perf_counter() + rng.uniform(0.9, 1.1) / hz)
            start = time.perf_counter()
            with lock:
                act()
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        stop.set()
        if thread is not None:
            thread.join()
    return times, busy[0] / (time.perf_counter() - begin)


if __name__ == "__main__":
    raise SystemExit(main())
