"""mqe_model.ogbench.gpus: runs on free GPUs, each GPU handed on when its run releases it."""

from __future__ import annotations

import threading

from mqe_model.ogbench import gpus


def test_runs_sharing_a_gpu_split_its_memory():
    assert gpus.gpu_env("1", 1) == {"CUDA_VISIBLE_DEVICES": "1"}
    assert gpus.gpu_env("1", 4) == {"CUDA_VISIBLE_DEVICES": "1", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.225"}
    assert gpus.gpu_env("1", 1, handoff=True) == {"CUDA_VISIBLE_DEVICES": "1",
                                                  "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def test_a_released_gpu_takes_the_next_task_while_the_first_still_runs():
    second_started, log = threading.Event(), []

    def first(gpu, release):
        log.append(("first", gpu))
        release()
        release()  # a second call must not free the GPU twice
        assert second_started.wait(10), "the released GPU was not given to the next task"
        return "first"

    def second(gpu, release):
        log.append(("second", gpu))
        second_started.set()
        return "second"

    def third(gpu, release):
        assert second_started.is_set()
        log.append(("third", gpu))
        return "third"

    futures = gpus.on_free_gpus(("7",), [first, second, third])
    assert [f.result() for f in futures] == ["first", "second", "third"]
    assert log == [("first", "7"), ("second", "7"), ("third", "7")]
