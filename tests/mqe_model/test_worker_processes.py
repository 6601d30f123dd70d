"""Evaluation workers die with the training process that started them, even when it is killed with
SIGKILL (without this, each finished its 50-episode job first: minutes of a machine's cores)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
ROOT = Path(__file__).resolve().parents[2]


def children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; reaping it is its new parent's business


def kill_and_watch_workers(code: str) -> set[int]:
    """Run `code`, which starts pool workers and prints 'ready' once they have run jobs; SIGKILL it;
    return its children still alive 15 s later."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        pool = children(proc.pid)
        assert len(pool) >= 2 and proc.poll() is None, pool
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 15
    while any(map(alive, pool)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid for pid in pool if alive(pid)}
    for pid in left:  # do not leave them behind for the rest of the suite
        os.kill(pid, signal.SIGKILL)
    return left


def test_evaluation_workers_die_with_a_killed_training_process():
    code = """
        import os, time
        from mqe_model.evaluation import evaluation_pool
        pool = evaluation_pool(2)
        jobs = [pool.submit(time.sleep, 0.5) for _ in range(4)]  # starts both workers
        [job.result() for job in jobs]
        print("ready", flush=True)
        pool.submit(time.sleep, 600)  # a long evaluation, as the kill finds it
        time.sleep(600)
    """
    assert kill_and_watch_workers(code) == set()
