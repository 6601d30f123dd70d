"""Runs on GPUs: each on a GPU of a list as soon as one is free, and its GPU handed to the next run as
soon as the run's updates end (`mqe_model.metrics.TRAINED_FILE`), while its evaluations go on on the
CPUs. Used by `mqe-ogbench train`."""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

HANDOFF_POLL_S = 2.0  # seconds between looks for a run's TRAINED_FILE


def gpu_env(gpu: str, runs_per_gpu: int, handoff: bool = False) -> dict[str, str]:
    """Environment of a run on `gpu`: that GPU alone and, when runs share it, an even part of its memory
    (JAX otherwise takes 75% of it up front, and a second run on the GPU fails to start). With `handoff`
    the next run starts beside one that is still evaluating, so memory is taken as needed instead."""
    env = {"CUDA_VISIBLE_DEVICES": gpu}
    if runs_per_gpu > 1:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.9 / runs_per_gpu:.3f}"
    if handoff:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


def wait_for_run(process: subprocess.Popen, trained_file: Path, on_trained: Callable[[], None] | None) -> int:
    """The run's exit code; `on_trained` is called once, as soon as the run writes `trained_file` (its
    updates are done, evaluations may still be running), or at its exit if it never does."""
    while True:
        try:
            return process.wait(timeout=HANDOFF_POLL_S)
        except subprocess.TimeoutExpired:
            if on_trained is not None and trained_file.is_file():
                on_trained()
                on_trained = None


def on_free_gpus(gpus: tuple[str, ...], tasks: list[Callable[[str | None, Callable[[], None]], Any]]) -> list[Future]:
    """Call each task with a GPU of `gpus` as soon as one is free, one task per entry at a time (a GPU
    listed twice takes two at once; without GPUs, with None, one after another), and a `release`
    function: the task's GPU is free for the next task once the task calls it or ends. Returns the
    tasks' futures, in order, once all have ended."""
    free_gpus: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    for gpu in gpus or (None,):
        free_gpus.put(gpu)

    def on_free_gpu(task: Callable[[str | None, Callable[[], None]], Any]) -> Any:
        gpu, released = free_gpus.get(), threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                free_gpus.put(gpu)

        try:
            return task(gpu, release)
        finally:
            release()

    # A thread per task: one that released its GPU may still be waiting for its run's evaluations.
    with ThreadPoolExecutor(max_workers=max(1, len(tasks))) as pool:
        return [pool.submit(on_free_gpu, task) for task in tasks]
