"""`mqe-robot --robot widowx` in its own process, on the fake Interbotix and a still camera.

    python tests/robot_client/widowx_process.py REPORT.json ROS -- MQE_ROBOT_ARGS...

Writes what the fake arm and ROS saw (calls, events, the ROS context's state) to REPORT.json when
the client returns, then exits with the client's code. Tests send it real signals.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import numpy as np  # noqa: E402
from fake_interbotix import FakeWorld  # noqa: E402

from robot_client import camera, run  # noqa: E402


class StillCamera(camera.Camera):
    """Stands in for OpenCVCamera: 640x480 frames, always fresh."""

    def __init__(self, source, width: int = 640, height: int = 480, **_ignored):
        self.source, self.frame_shape = source, (height, width)

    def connect(self) -> None: ...

    def frame(self):
        return np.full((*self.frame_shape, 3), 90, np.uint8), 0.01

    def close(self) -> None: ...


def main() -> int:
    report, ros, sep, *args = sys.argv[1:]
    assert sep == "--"
    world = FakeWorld(ros=int(ros))
    sys.modules.update(world.modules())
    camera.OpenCVCamera = StillCamera
    rc = 1
    try:
        rc = run.main(args)
    finally:
        calls = [[name, {k: v for k, v in call.items() if k in ("moving_time", "blocking", "ok")}]
                 for bot in world.bots for name, call in bot.arm.log]
        Path(report).write_text(json.dumps({
            "rc": rc, "events": world.events, "context_ok": world.context.ok,
            "shutdown_reason": world.context.shutdown_reason, "signals_installed": world.context.signals_installed,
            "calls": calls, "arm": world.driver.arm_positions(),
        }))
    return rc


if __name__ == "__main__":
    sys.exit(main())
