"""The robot client's settings: one frozen dataclass per command, parsed by tyro.

Bad combinations are refused at parse time with the fix in the message, before anything connects
to the server or the arm.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal

DEFAULT_SERVER = "http://127.0.0.1:8000"
LOCKSTEP_TIMEOUT_S = 10.0  # s, default wait for one answer with --pace lockstep (a loaded CPU server)
LOCKSTEP_MAX_TIMEOUT_S = 120.0  # s, the longest --request-timeout-s accepted with --pace lockstep
TOKEN_ENV = "MQE_SERVER_TOKEN"


class ClientError(Exception):
    """Bad input or an unusable environment: the CLI prints the message as one line and exits 2."""


def _check_common(robot: str, camera: str | None, hz: float | None = None) -> None:
    if robot == "widowx" and not camera:
        raise ValueError(
            "--robot widowx needs --camera (an OpenCV index such as 0, or a device such as "
            "/dev/video0); the twin (--robot sim) renders its own camera"
        )
    if hz is not None and not (0.0 < hz <= 50.0):
        raise ValueError(f"--hz {hz} must be in (0, 50]; the Bridge policies run at 5")


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Run goal-conditioned trials: camera frame -> server -> safety checks -> arm, at --hz."""

    task: str  # eval_protocols task name, e.g. single_pnp (sets the scoring sheet's max points)
    goal: Path | None = None  # goal image (PNG/JPEG); optional with --robot sim (the twin renders the scene's goal)
    server: str = DEFAULT_SERVER  # inference server base URL
    policy: str | None = None  # policy name on the server; None: the server's only policy
    robot: Literal["widowx", "sim"] = "sim"  # widowx: the real arm via interbotix; sim: the MuJoCo twin
    camera: str | None = None  # OpenCV camera index (0) or device path (/dev/video0); needed for widowx
    hz: float = 5.0  # Hz, control rate; each step's motion lasts one period
    pace: Literal["realtime", "lockstep"] = "realtime"  # realtime: one step per period of wall clock; lockstep (sim only): each step waits for the answer, then steps the twin, as fast as server and twin allow
    max_steps: int = 120  # steps per trial (120 at 5 Hz = 24 s)
    trials: int = 1  # trials to run back to back, each scored before the next
    out: Path = Path("runs")  # root of the trial records: <out>/<date>/<policy>/<task>/trial_<n>/
    sheet: Path | None = None  # scoring sheet CSV; None: <out>/<date>/sheet.csv
    operator: str = ""  # who runs and scores the trials (goes to meta.json and the sheet)
    token: str | None = None  # bearer token for the server; None: env MQE_SERVER_TOKEN if set
    no_prompt: bool = False  # never ask the operator (sim: the task's scorer fills the sheet)
    seed: int = 0  # twin scene seed of trial 1 (trial n uses seed + n - 1)
    dry_run: bool = False  # query the server and log what would be sent, never move the arm
    show: bool = False  # window with the live frame, the goal and the distance curve (needs a display)
    request_timeout_s: float | None = None  # s, deadline of one server answer; None: 0.75 of a period (lockstep: 10 s)
    max_consecutive_failures: int = 10  # failed steps in a row (no valid action) that abort the trial
    sticky_steps: int = 2  # steps a new gripper command must persist before the gripper switches
    abort_pose: Literal["reset", "hold"] = "reset"  # after an abort: move to the reset pose, or stay held
    moving_time_s: float | None = None  # s, interbotix trajectory time per step; None: one period
    video_fps: float = 10.0  # frames/s of the trial video, written at this steady rate
    robot_model: str = "wx250s"  # interbotix robot_model
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"  # console log level

    def __post_init__(self) -> None:
        _check_common(self.robot, self.camera, self.hz)
        if self.robot == "widowx" and self.goal is None:
            raise ValueError("--robot widowx needs --goal PATH (make one with `mqe-robot capture-goal`)")
        if self.max_steps < 1:
            raise ValueError(f"--max-steps {self.max_steps} must be >= 1")
        if self.trials < 1:
            raise ValueError(f"--trials {self.trials} must be >= 1")
        if self.max_consecutive_failures < 1:
            raise ValueError(f"--max-consecutive-failures {self.max_consecutive_failures} must be >= 1")
        if self.sticky_steps < 1:
            raise ValueError(f"--sticky-steps {self.sticky_steps} must be >= 1")
        if self.pace == "lockstep" and self.robot != "sim":
            raise ValueError("--pace lockstep steps the twin without a wall clock and is for --robot sim only; "
                             "drop --pace lockstep (the real arm runs --pace realtime)")
        if self.pace == "lockstep":
            if self.request_timeout_s is not None and not 0.0 < self.request_timeout_s <= LOCKSTEP_MAX_TIMEOUT_S:
                raise ValueError(f"--request-timeout-s {self.request_timeout_s} must be in (0, "
                                 f"{LOCKSTEP_MAX_TIMEOUT_S:g}] s with --pace lockstep")
        elif self.request_timeout_s is not None and not 0.0 < self.request_timeout_s < self.period_s:
            raise ValueError(
                f"--request-timeout-s {self.request_timeout_s} must be in (0, {self.period_s:g}) s, "
                "shorter than one period, so a late answer never delays the next step"
            )
        if self.moving_time_s is not None and self.moving_time_s <= 0:
            raise ValueError(f"--moving-time-s {self.moving_time_s} must be > 0")
        if not 0.0 < self.video_fps <= 60.0:
            raise ValueError(f"--video-fps {self.video_fps} must be in (0, 60]")
        if not self.server.startswith(("http://", "https://")):
            raise ValueError(f"--server {self.server!r} must be a URL such as {DEFAULT_SERVER}")

    @property
    def period_s(self) -> float:
        """Seconds per control step."""
        return 1.0 / self.hz

    @property
    def request_deadline_s(self) -> float:
        """Seconds the loop waits for a server answer before holding the arm for this step."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return LOCKSTEP_TIMEOUT_S if self.pace == "lockstep" else 0.75 * self.period_s

    def resolved_token(self) -> str | None:
        """--token, else the MQE_SERVER_TOKEN environment variable, else None."""
        return self.token or os.environ.get(TOKEN_ENV) or None


@dataclasses.dataclass(frozen=True)
class CaptureGoalConfig:
    """Save the current camera frame as a goal image, after the operator confirms it."""

    out: Path = Path("goal.png")  # where to write the goal image (PNG)
    robot: Literal["widowx", "sim"] = "sim"  # camera source: the real camera (widowx) or the twin
    camera: str | None = None  # OpenCV camera index or device path; needed for widowx
    task: str = "single_pnp"  # sim only: the twin's task, whose goal scene is rendered
    seed: int = 0  # sim only: scene seed
    no_prompt: bool = False  # save without asking
    overwrite: bool = False  # replace an existing file at --out
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"  # console log level

    def __post_init__(self) -> None:
        _check_common(self.robot, self.camera)
        if self.out.suffix.lower() not in (".png", ".jpg", ".jpeg"):
            raise ValueError(f"--out {self.out} must end in .png (or .jpg)")
