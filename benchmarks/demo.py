"""The first-run experience: `mqe-serve` on the bundled demo policy to /readyz, and `mqe-demo`.

    python benchmarks/demo.py                       # 3 repeats of each, trials of 120 steps
    python benchmarks/demo.py --repeats 1 --max-steps 30

Measures, each as wall time from process start (the processes a user starts, on this machine):
  - `mqe-serve` (no --policy: the demo policy, default batch buckets) until GET /readyz is 200,
    with an empty compilation cache (`--compilation-cache` a fresh directory) and with a warm one;
  - `mqe-demo --trials 1` (server start, one lockstep trial on the twin, the report), with an empty
    and with a warm compilation cache (`MQE_SERVE_COMPILATION_CACHE`).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mqe_model import demo  # noqa: E402 (after the path: runs from a checkout without install)
from server.demo import Server, free_port  # noqa: E402


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What to measure."""

    repeats: int = 3  # measurements of each figure
    max_steps: int = 120  # steps of the mqe-demo trial (mqe-demo's default)
    task: str = "single_pnp"  # mqe-demo's task


def serve_to_ready(cache: Path, log: Path, timeout_s: float = 600.0) -> float:
    """Seconds from starting `python -m server` (no --policy) to /readyz 200; the server is stopped."""
    server = Server(free_port(), log, ("--compilation-cache", str(cache)))
    started = time.monotonic()
    server.start()
    try:
        server.wait_ready(timeout_s)
        return time.monotonic() - started
    finally:
        server.stop()


def demo_total(cache: Path, out: Path, cfg: BenchConfig) -> tuple[float, float, float]:
    """`mqe-demo --trials 1` (python -m server.demo): seconds start to exit, and its own figures for
    the server start and the trial."""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "server.demo", "--trials", "1", "--task", cfg.task,
                             "--max-steps", str(cfg.max_steps), "--out", str(out)], cwd=REPO, capture_output=True,
                            text=True, env={**os.environ, "MQE_SERVE_COMPILATION_CACHE": str(cache)})
    total = time.monotonic() - started
    parts = re.search(r"server start ([\d.]+) s, trials ([\d.]+) s", result.stdout)
    if result.returncode != 0 or parts is None:
        raise RuntimeError(f"mqe-demo exited with {result.returncode}: {result.stderr[-2000:]}")
    return total, float(parts.group(1)), float(parts.group(2))


def _row(name: str, seconds: list[float]) -> str:
    return (f"| {name} | {statistics.median(seconds):.1f} s | {min(seconds):.1f}-{max(seconds):.1f} s | "
            f"{len(seconds)} |")


def main(cfg: BenchConfig) -> None:
    """Run every measurement and print a markdown table."""
    step_dir = demo.demo_step_dir()
    # the processes it starts import this checkout too
    os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    print(f"demo checkpoint {step_dir}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS', '')!r}",
          flush=True)
    cold, warm, demo_cold, demo_warm, demo_parts = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="mqe-bench-demo-") as tmp:
        tmp = Path(tmp)
        for i in range(cfg.repeats):
            log = tmp / "server.log"
            cold.append(serve_to_ready(tmp / f"cache-cold-{i}", log))
            warm.append(serve_to_ready(tmp / f"cache-cold-{i}", log))  # the cache the cold start just filled
            demo_cold.append(demo_total(tmp / f"demo-cache-{i}", tmp / "runs", cfg)[0])
            total, server_s, trial_s = demo_total(tmp / f"demo-cache-{i}", tmp / "runs", cfg)
            demo_warm.append(total)
            demo_parts.append((server_s, trial_s))
            print(f"repeat {i + 1}: serve cold {cold[-1]:.1f} s, warm {warm[-1]:.1f} s; mqe-demo cold "
                  f"{demo_cold[-1]:.1f} s, warm {demo_warm[-1]:.1f} s", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}\n")
    print("| figure | median | range | runs |\n| --- | --- | --- | --- |")
    print(_row("`mqe-serve` (demo policy) to /readyz, empty compilation cache", cold))
    print(_row("`mqe-serve` (demo policy) to /readyz, warm compilation cache", warm))
    print(_row(f"`mqe-demo --trials 1` ({cfg.max_steps} steps), empty compilation cache", demo_cold))
    print(_row(f"`mqe-demo --trials 1` ({cfg.max_steps} steps), warm compilation cache", demo_warm))
    print(_row("of which: server start (`--batch-buckets 1`), warm cache", [p[0] for p in demo_parts]))
    print(_row(f"of which: the lockstep trial, {cfg.max_steps} steps", [p[1] for p in demo_parts]))


if __name__ == "__main__":
    main(tyro.cli(BenchConfig))
