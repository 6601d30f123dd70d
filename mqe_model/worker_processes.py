"""Worker processes that do not outlive the process that started them.

A training run killed with SIGKILL (the out-of-memory killer, `kill -9`, a scheduler's
preemption) cannot shut its evaluation pool down, and Python's pools leave their workers running
until their current job ends: an OGBench evaluation job is 50 episodes, minutes of a core that the
next job needs. The pool's initializer therefore asks the kernel to kill its worker with the parent.
(A data generator's workers need no such care: their jobs are single episodes, and a worker whose
parent is gone fails at the next hand-over.)
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def exit_with_parent(parent_pid: int) -> None:
    """Have this process killed (SIGKILL) when its parent dies; `parent_pid` is the parent's pid as
    the parent saw it, to catch a parent that died before the request took effect. Linux only; a
    no-op elsewhere. The kernel acts when the parent *thread* that started this process ends, so
    pools using it must be created and fed from a thread that lives as long as they do."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os._exit(1)
