"""Server CPU per request: `mqe-serve` on loopback with a state policy (model time ~0), hammered.

    python -m benchmarks.server_cpu --threads 1 4 --requests 500

Writes a random state-based MQE checkpoint (`tiny`), starts `python -m server` on a free loopback
port, sends `--requests` `/v1/act` calls from each of `--threads` client threads (keep-alive
connections, a cached goal), and reads the server process's CPU time (user + system) before and
after from /proc: what remains is the server's own cost per request (HTTP, MessagePack, routing,
metrics, the batcher), which bounds how many robots one server process can take. Linux only.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import tyro

from server.demo import Server, free_port


@dataclasses.dataclass(frozen=True)
class Args:
    """Server CPU per request."""

    threads: tuple[int, ...] = (1, 4)  # client thread counts, one measurement each
    requests: int = 500  # requests per client thread
    state_dim: int = 6  # size of the random state policy's observation


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid`, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hammer(url: str, threads: int, requests: int, state_dim: int) -> float:
    """Send the requests; returns the wall seconds."""
    from mqe_client import protocol

    headers = {"Content-Type": protocol.CONTENT_TYPE}
    errors: list[str] = []

    def client(index: int) -> None:
        state = np.random.default_rng(index).standard_normal(state_dim).astype(np.float32)
        with httpx.Client(base_url=url, timeout=30) as http:
            reply = http.post("/v1/goals", content=protocol.packb({"image": state}), headers=headers)
            body = protocol.packb({"image": state, "goal_id": protocol.unpackb(reply.content)["goal_id"],
                                   "seq": 0, "episode_id": f"cpu-{index}", "step": 0})
            for _ in range(requests):
                if (status := http.post("/v1/act", content=body, headers=headers).status_code) != 200:
                    errors.append(str(status))

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed (first status {errors[0]})")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run and print one line per thread count."""
    args = tyro.cli(Args, args=argv)
    from server.random_checkpoint import write_random_checkpoint

    workdir = Path(tempfile.mkdtemp(prefix="server-cpu-"))
    checkpoint = write_random_checkpoint(workdir, "mqe", "tiny", (), None, state_dim=args.state_dim)
    server = Server(free_port(), workdir / "server.log", ("--policy", f"bench={checkpoint}", "--log-level", "warning"))
    server.start()
    try:
        server.wait_ready(120)
        assert server.proc is not None
        for threads in args.threads:
            hammer(server.url, threads, 20, args.state_dim)  # warm the connections and the batcher
            before = cpu_seconds(server.proc.pid)
            wall = hammer(server.url, threads, args.requests, args.state_dim)
            used = cpu_seconds(server.proc.pid) - before
            total = threads * args.requests
            print(f"{threads} client thread(s): {total} requests in {wall:.2f} s ({total / wall:.0f}/s), "
                  f"server CPU {used * 1e3 / total:.2f} ms per request")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
