"""Request overhead: what one robot's /v1/act round trip costs beyond the model call.

    python -m benchmarks.request_overhead                      # the bundled demo policy, 5 Hz, 15 s
    python -m benchmarks.request_overhead --policy state --hz 0 --requests 2000   # model ~0, back to back

Starts `mqe-serve` on a free loopback port (`--policy demo`: the bundled demo checkpoint; `state`: a
random tiny state-based MQE, whose model call is ~0.1 ms; or a checkpoint path) and drives it from
this process with the robot client's own `PolicyClient.act` (one keep-alive connection, a cached
goal), at `--hz` or back to back. The model time is the server's own `compute` stage (the batch's
model call, mean from /metrics); the overhead is the p50 round trip minus it, split into
  client + HTTP   round trip - server total (client, sockets, HTTP parsing, ASGI routing)
  decode          body read, MessagePack decode, preprocessing (the reply's decode_ms)
  hand-off        reply's infer_ms - compute: to the batch worker thread and back to the event loop
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import tyro

from server.demo import Server, free_port


@dataclasses.dataclass(frozen=True)
class Args:
    """Request overhead outside the model, one robot."""

    policy: str = "demo"  # demo: the bundled demo checkpoint; state: a random tiny state MQE; or a checkpoint path
    hz: float = 5.0  # request rate; 0: back to back
    seconds: float = 15.0  # measured duration (with --hz > 0)
    requests: int = 2000  # measured requests (with --hz 0)
    warmup: int = 20  # requests sent first and not counted
    buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # server batch buckets (mqe-serve's default)


def server_args(policy: str, buckets: tuple[int, ...]) -> tuple[str, ...]:
    """mqe-serve options for `--policy`."""
    args = ("--log-level", "warning", "--batch-buckets", *map(str, buckets))
    if policy == "demo":
        return args
    if policy == "state":
        from server.random_checkpoint import write_random_checkpoint

        workdir = Path(tempfile.mkdtemp(prefix="request-overhead-"))
        policy = str(write_random_checkpoint(workdir, "mqe", "tiny", (), None))
    return (*args, "--policy", f"bench={policy}")


def observation(meta: dict, rng: np.random.Generator) -> np.ndarray:
    """A random frame (image policy) or state vector of the served policy's shape."""
    entry = meta["policies"][0]
    if entry["image"] is not None:
        return rng.integers(0, 256, (entry["image"]["height"], entry["image"]["width"], 3), dtype=np.uint8)
    return rng.standard_normal(entry["observation"]["shape"]).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """Run and print the round trip, the server's stages and the overhead."""
    args = tyro.cli(Args, args=argv)
    from mqe_client.client import PolicyClient

    with tempfile.TemporaryDirectory(prefix="request-overhead-") as tmp:
        server = Server(free_port(), Path(tmp) / "server.log", server_args(args.policy, args.buckets))
        server.start()
        try:
            server.wait_ready(300)
            with PolicyClient(server.url, timeout_s=10.0) as client:
                meta = client.metadata()
                rng = np.random.default_rng(0)
                frames = [observation(meta, rng) for _ in range(4)]
                client.set_goal(observation(meta, rng), None)
                for step in range(args.warmup):
                    client.act(frames[step % 4], step, step, "warmup", 10.0)
                before = httpx.get(server.url + "/metrics").text
                samples = []
                period = 1.0 / args.hz if args.hz > 0 else 0.0
                stop_at = time.perf_counter() + args.seconds
                next_at, step = time.perf_counter(), 0
                while (len(samples) < args.requests) if period == 0 else (time.perf_counter() < stop_at):
                    if period:
                        time.sleep(max(0.0, next_at - time.perf_counter()))
                        next_at += period
                    result = client.act(frames[step % 4], step, step, "bench", 10.0)
                    timing = result.response.timing
                    samples.append((result.round_trip_ms, timing.decode_ms, timing.infer_ms, timing.total_ms))
                    step += 1
                after = httpx.get(server.url + "/metrics").text
        finally:
            server.stop()

    def p50(i: int) -> float:
        return statistics.median(s[i] for s in samples)

    # Means of this run's requests only: the counters before and after, subtracted.
    compute = _run_mean(before, after, "compute")
    rtt, decode, infer, total = p50(0), p50(1), p50(2), p50(3)
    outside = statistics.median(s[0] - s[3] for s in samples)
    print(f"policy {args.policy}, {len(samples)} requests at "
          f"{'back to back' if period == 0 else f'{args.hz:g} Hz'}, one PolicyClient on loopback")
    print(f"round trip ms: p50 {rtt:.3f}  p90 {np.percentile([s[0] for s in samples], 90):.3f}  "
          f"p99 {np.percentile([s[0] for s in samples], 99):.3f}")
    print(f"server ms, p50: decode {decode:.3f}  infer {infer:.3f}  total {total:.3f};  "
          f"model (compute, mean) {compute:.3f}")
    print(f"overhead ms (p50 round trip - model): {rtt - compute:.3f} = client + HTTP {outside:.3f} "
          f"+ decode {decode:.3f} + hand-off {infer - compute:.3f} (p50s; parts need not add up exactly)")
    return 0


def _run_mean(before: str, after: str, stage: str) -> float:
    """Mean of a stage over the requests between two /metrics snapshots, in ms."""

    def sums(text: str) -> tuple[float, float]:
        total = count = 0.0
        for line in text.splitlines():
            if f'stage="{stage}"' in line and line.startswith("mqe_stage_seconds_sum"):
                total += float(line.split()[-1])
            elif f'stage="{stage}"' in line and line.startswith("mqe_stage_seconds_count"):
                count += float(line.split()[-1])
        return total, count

    (t0, c0), (t1, c1) = sums(before), sums(after)
    return (t1 - t0) / (c1 - c0) * 1000 if c1 > c0 else float("nan")


if __name__ == "__main__":
    sys.exit(main())
