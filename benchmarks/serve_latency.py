"""Serving latency: a real `mqe-serve` on loopback driven by N simulated robots at a fixed rate.

    python -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 20
    python -m benchmarks.serve_latency --checkpoint runs/mqe --robots 100 --seconds 30   # on a GPU

With `--preset`, a randomly initialised checkpoint of that MQE preset is written first through the
checkpoint API (untrained weights: the timing is that of the real network, the actions mean
nothing). Each robot (a `mqe_client.client.PolicyClient`, as `mqe-robot` uses) uploads its goal
once, then sends a 128x128 frame (already resized, as the client does) every 1/hz seconds on its
own keep-alive connection; the robots are spread over
several driver processes so that the Python HTTP clients (one GIL per process) never become the
bottleneck being measured. Prints p50/p90/p99 round trip,
the server's stage times (from the replies), and the ratio of the p50 round trip to the bare
`PolicyRuntime.act` time measured in this process on the same checkpoint (batch 1).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import tyro

from server.cli import xla_flags
from server.demo import free_port
from server.metrics import sample_total

REPO = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Args:
    """Serving latency benchmark."""

    checkpoint: Path | None = None  # a checkpoint to serve; None: a random one of --preset
    preset: str = "bridge"  # MQE preset of the random checkpoint (bridge: ResNet-34 at 128x128)
    set: tuple[str, ...] = ()  # config overrides of the random checkpoint, e.g. encoder=impala_tiny
    image_size: int = 128  # image size of the random checkpoint
    robots: int = 1  # simulated robots, each on its own connection
    seconds: float = 20.0  # measured duration
    hz: float = 5.0  # request rate of each robot
    warmup_s: float = 2.0  # requests in the first seconds are not counted
    bare_runs: int = 50  # PolicyRuntime.act calls timed in-process for the ratio
    buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # server batch buckets
    compilation_cache: Path = Path("~/.cache/mqe-deploy/jax")  # shared with mqe-serve
    port: int = 0  # loopback port of the server; 0 picks a free one
    drivers: int = 0  # processes the robots are spread over; 0: one per 12 robots, at most cores - 2


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of values."""
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def bare_act_ms(checkpoint: Path, size: int, runs: int) -> tuple[float, float, str, str]:
    """(median ms of PolicyRuntime.act at batch 1, seconds to load and warm, encoders served, convolutions
    served), encoders and convolutions chosen as `mqe-serve` chooses them on this device."""
    import jax

    from server.runtime import PolicyRuntime, conv_on, encoders_on

    platform = jax.devices()[0].platform
    start = time.perf_counter()
    runtime = PolicyRuntime.load(checkpoint, buckets=(1,), encoders=encoders_on(platform), conv=conv_on(platform))
    load_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    goal = runtime.encode_goal(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))
    frames = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(8)]
    times = []
    for i in range(runs):
        t = time.perf_counter()
        runtime.act(frames[i % 8], goal)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), load_s, runtime.encoders, runtime.conv


def robot(url: str, size: int, args: Args, stop_at: float, count_from: float, index: int,
          out: list, errors: list) -> None:
    """One robot: upload a goal, then act at `hz` until `stop_at` (a `time.time()` instant).

    Through the robot client's own `PolicyClient`, so the round trip is the one `mqe-robot` sees
    (packing the frame, HTTP, checking the answer)."""
    from mqe_client.client import PolicyClient, ServerError

    rng = np.random.default_rng(index)
    frames = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(4)]
    period = 1.0 / args.hz
    with PolicyClient(url, timeout_s=10.0) as client:
        client.set_goal(frames[0], None, timeout_s=10.0)
        time.sleep(rng.uniform(0, period))  # robots are not in phase
        step, next_at = 0, time.time()
        while (now := time.time()) < stop_at:
            if now < next_at:
                time.sleep(next_at - now)
            next_at += period
            sent_at = time.time()
            try:
                result = client.act(frames[step % 4], step, step, f"bench-{index}", timeout_s=10.0)
            except ServerError as e:
                errors.append(f"{e.code}: {e.message}"[:300])
                step += 1
                continue
            if sent_at >= count_from:
                timing = result.response.timing
                out.append((result.round_trip_ms, timing.decode_ms, timing.infer_ms, timing.total_ms))
            step += 1


def driver(url: str, size: int, args: Args, stop_at: float, count_from: float,
           indices: list[int], results: multiprocessing.Queue) -> None:
    """One driver process: its robots in threads; sends back (samples, errors)."""
    samples: list = []
    errors: list = []
    threads = [threading.Thread(target=robot, args=(url, size, args, stop_at, count_from, i, samples, errors))
               for i in indices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put((samples, errors))


def drive(url: str, size: int, args: Args) -> tuple[list, list, int]:
    """Run every robot until the measurement ends; (samples, errors, driver processes)."""
    count = args.drivers or max(1, min(math.ceil(args.robots / 12), (os.cpu_count() or 4) - 2))
    count = min(count, args.robots)
    # spawn, not fork: the parent may have JAX initialised (the random checkpoint).
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = time.time() + 3.0  # time for the driver processes to start
    stop_at, count_from = start + args.warmup_s + args.seconds, start + args.warmup_s
    processes = [context.Process(target=driver, args=(url, size, args, stop_at, count_from,
                                                       list(range(args.robots))[k::count], results))
                 for k in range(count)]
    for p in processes:
        p.start()
    samples: list = []
    errors: list = []
    for _ in processes:
        part_samples, part_errors = results.get(timeout=args.warmup_s + args.seconds + 120)
        samples += part_samples
        errors += part_errors
    for p in processes:
        p.join()
    return samples, errors, count


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a compact summary."""
    args = tyro.cli(Args, args=argv)
    if args.robots < 1 or args.seconds <= 0 or args.hz <= 0 or args.warmup_s < 0 or args.bare_runs < 1:
        print("serve_latency: error: --robots and --bare-runs must be >= 1, --seconds and --hz > 0, "
              "--warmup-s >= 0", file=sys.stderr)
        return 2
    server_env = dict(os.environ)  # the server allocates GPU memory as mqe-serve always does
    # This process writes the random checkpoint and times the bare act; it must not take the GPU
    # memory that JAX preallocates by default away from the server it starts.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # before this process's first JAX backend starts, as mqe-serve does
    os.environ["XLA_FLAGS"] = xla_flags(os.environ.get("XLA_FLAGS", ""))
    checkpoint = args.checkpoint
    if checkpoint is None:
        from server.random_checkpoint import write_random_checkpoint

        workdir = Path(tempfile.mkdtemp(prefix="serve-bench-"))
        try:
            checkpoint = write_random_checkpoint(workdir, "mqe", args.preset, args.set, args.image_size)
        except ValueError as e:
            print(f"serve_latency: error: {e}", file=sys.stderr)
            return 2
    from mqe_model.checkpoints import read_metadata, resolve_step_dir

    image = read_metadata(resolve_step_dir(checkpoint))["image"]
    size = image["height"] if image else args.image_size
    port = args.port or free_port()
    # Keep whatever PYTHONPATH the caller set (e.g. packages unpacked beside the repo).
    env = {**server_env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "server", "--policy", f"bench={checkpoint}", "--port", str(port),
           "--compilation-cache", str(args.compilation_cache.expanduser()), "--log-level", "warning",
           "--batch-buckets", *map(str, args.buckets)]
    started = time.perf_counter()
    server = subprocess.Popen(cmd, env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if server.poll() is not None:
                print(f"server exited with code {server.returncode}", file=sys.stderr)
                return 1
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        ready_s = time.perf_counter() - started
        samples, errors, drivers = drive(url, size, args)
        metrics_text = httpx.get(url + "/metrics").text
    finally:
        server.terminate()
        server.wait(15)
    bare_ms, load_s, encoders, conv = bare_act_ms(checkpoint, size, args.bare_runs)
    rtt = [s[0] for s in samples]
    batches = sample_total(metrics_text, "mqe_batch_size_count")
    mean_batch = sample_total(metrics_text, "mqe_batch_size_sum") / batches if batches else float("nan")
    print(f"checkpoint {checkpoint} ({args.preset if args.checkpoint is None else 'given'}), "
          f"{args.robots} robot(s) at {args.hz} Hz for {args.seconds:.0f} s over {drivers} driver "
          f"process(es), image {size}x{size}, encoders {encoders}, convolutions {conv} "
          f"(XLA_FLAGS {os.environ.get('XLA_FLAGS') or 'unset'})")
    print(f"cold start to ready: {ready_s:.1f} s (compilation cache {args.compilation_cache})")
    print(f"requests: {len(rtt)} ok, {len(errors)} errors" + (f" (first: {errors[0]})" if errors else ""))
    print(f"round trip ms: p50 {percentile(rtt, 50):.2f}  p90 {percentile(rtt, 90):.2f}  "
          f"p99 {percentile(rtt, 99):.2f}  max {max(rtt, default=float('nan')):.2f}")
    for i, name in ((1, "decode"), (2, "infer"), (3, "server total")):
        values = [s[i] for s in samples]
        print(f"server {name} ms: p50 {percentile(values, 50):.2f}  p99 {percentile(values, 99):.2f}")
    print(f"mean batch size: {mean_batch:.2f}")
    print(f"bare PolicyRuntime.act (batch 1, in-process): {bare_ms:.2f} ms (load+warm {load_s:.1f} s)")
    print(f"ratio p50 round trip / bare act: {percentile(rtt, 50) / bare_ms:.3f}")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
