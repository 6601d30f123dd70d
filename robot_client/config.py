"""The robot client's settings: one frozen dataclass per command, parsed by tyro.

Bad combinations are refused at parse time with the fix in the message, before anything connects
to the server or the arm.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal, Optional, Tuple

from robot_client.robots.widowx_faults import BRIDGE_EFFORT_LIMITS_MA

DEFAULT_SERVER = "http://127.0.0.1:8000"
LOCKSTEP_TIMEOUT_S = 10.0  # s, default wait for one answer with --pace lockstep (a loaded CPU server)
LOCKSTEP_MAX_TIMEOUT_S = 120.0  # s, the longest --request-timeout-s accepted with --pace lockstep
TOKEN_ENV = "MQE_SERVER_TOKEN"


class ClientError(Exception):
    """Bad input or an unusable environment: the CLI prints the message as one line and exits 2."""


def _check_common(robot: str, camera: Optional[str], hz: Optional[float] = None) -> None:
    if robot == "widowx" and not camera:
        raise ValueError(
            "--robot widowx needs --camera (an OpenCV index such as 0, or a device such as "
            "/dev/video0); the twin (--robot sim) renders its own camera"
        )
    if hz is not None and not (0.0 < hz <= 50.0):
        raise ValueError(f"--hz {hz} must be in (0, 50]; the Bridge policies run at 5")


@dataclasses.dataclass(frozen=True)
class ClientConfig:
    """Run goal-conditioned trials: camera frame -> server -> safety checks -> arm, at --hz.

    Annotations are typing's Optional/Tuple, not `X | None`: tyro evaluates them, and the client
    runs on Python 3.8 beside ROS Noetic.
    """

    task: str  # eval_protocols task name, e.g. single_pnp (sets the scoring sheet's max points)
    goal: Optional[Path] = None  # goal image (PNG/JPEG); optional with --robot sim (the twin renders the scene's goal)
    server: str = DEFAULT_SERVER  # inference server base URL
    policy: Optional[str] = None  # policy name on the server; None: the server's only policy
    robot: Literal["widowx", "sim"] = "sim"  # widowx: the real arm via interbotix; sim: the MuJoCo twin
    camera: Optional[str] = None  # OpenCV camera index (0) or device path (/dev/video0); needed for widowx
    hz: float = 5.0  # Hz, control rate; each step's motion lasts one period
    pace: Literal["realtime", "lockstep"] = "realtime"  # realtime: one step per period of wall clock; lockstep (sim only): each step waits for the answer, then steps the twin, as fast as server and twin allow
    max_steps: int = 120  # steps per trial (120 at 5 Hz = 24 s)
    trials: int = 1  # trials to run back to back, each scored before the next
    out: Path = Path("runs")  # root of the trial records: <out>/<date>/<policy>/<task>/trial_<n>/
    sheet: Optional[Path] = None  # scoring sheet CSV; None: <out>/<date>/sheet.csv
    operator: str = ""  # who runs and scores the trials (goes to meta.json and the sheet)
    token: Optional[str] = None  # bearer token for the server; None: env MQE_SERVER_TOKEN if set
    no_prompt: bool = False  # never ask the operator (sim: the task's scorer fills the sheet)
    seed: int = 0  # twin scene seed of trial 1 (trial n uses seed + n - 1)
    dry_run: bool = False  # query the server and log what would be sent, never move the arm
    show: bool = False  # window with the live frame, the goal and the distance curve (needs a display)
    request_timeout_s: Optional[float] = None  # s, deadline of one server answer; None: 0.75 of a period (lockstep: 10 s)
    max_consecutive_failures: int = 10  # failed steps in a row (no valid action) that abort the trial
    sticky_steps: int = 2  # steps a new gripper command must persist before the gripper switches
    abort_pose: Literal["reset", "hold"] = "reset"  # after an abort: move to the reset pose, or stay held
    moving_time_s: Optional[float] = None  # s, interbotix trajectory time per step; None: one period
    video_fps: float = 10.0  # frames/s of the trial video, written at this steady rate
    robot_model: str = "wx250s"  # interbotix robot_model (wx250s: the one with known reset joints)
    action_frame: Literal["policy", "measured", "previous_target"] = "policy"  # what each action's delta adds to: the measured pose or the previous target (Bridge's controller); policy: what its checkpoint says it was trained on
    reset_time_s: float = 2.0  # s, trajectory time of each leg of a reset, safe-pose or sleep move (widowx)
    shutdown_pose: Literal["sleep", "hold"] = "sleep"  # when the client exits: the sleep pose, or hold where the arm is (widowx)
    connect_timeout_s: float = 10.0  # s, longest wait for the arm's driver (xs_sdk) when connecting (widowx)
    driver_timeout_s: float = 1.0  # s, joint states or motor-status answers older than this abort the trial (widowx)
    effort_limits_ma: Tuple[float, float, float, float, float, float] = BRIDGE_EFFORT_LIMITS_MA  # mA, a joint's current over its limit aborts the trial (widowx; waist..wrist_rotate)
    max_frame_age_s: float = 0.5  # s, a camera frame older than this aborts the trial
    camera_width: int = 640  # px, frame width asked of the camera; other widths abort (widowx)
    camera_height: int = 480  # px, frame height asked of the camera; other heights abort (widowx)
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
        if not self.max_frame_age_s > 0:
            raise ValueError(f"--max-frame-age-s {self.max_frame_age_s} must be > 0")
        if self.camera_width < 1 or self.camera_height < 1:
            raise ValueError(f"--camera-width/--camera-height {self.camera_width}x{self.camera_height} must be >= 1")
        if self.robot == "widowx":
            self.widowx_settings()  # its own checks, at parse time

    def widowx_settings(self):
        """The WidowX backend's settings from these options (ValueError if they do not fit)."""
        from robot_client.robots.widowx import WidowXSettings
        from robot_client.robots.widowx_faults import FaultLimits

        try:
            return WidowXSettings(
                robot_model=self.robot_model, moving_time_s=self.moving_time_s or self.period_s,
                reset_time_s=self.reset_time_s, connect_timeout_s=self.connect_timeout_s,
                faults=FaultLimits(effort_limits_ma=tuple(self.effort_limits_ma),
                                   driver_timeout_s=self.driver_timeout_s,
                                   status_poll_s=min(0.25, self.driver_timeout_s / 2)))
        except ValueError as e:
            raise ValueError(f"--robot widowx: {e}") from None

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

    def resolved_token(self) -> Optional[str]:
        """--token, else the MQE_SERVER_TOKEN environment variable, else None."""
        return self.token or os.environ.get(TOKEN_ENV) or None


@dataclasses.dataclass(frozen=True)
class CaptureGoalConfig:
    """Save the current camera frame as a goal image, after the operator confirms it."""

    out: Path = Path("goal.png")  # where to write the goal image (PNG)
    robot: Literal["widowx", "sim"] = "sim"  # camera source: the real camera (widowx) or the twin
    camera: Optional[str] = None  # OpenCV camera index or device path; needed for widowx
    task: str = "single_pnp"  # sim only: the twin's task, whose goal scene is rendered
    seed: int = 0  # sim only: scene seed
    no_prompt: bool = False  # save without asking
    overwrite: bool = False  # replace an existing file at --out
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"  # console log level

    def __post_init__(self) -> None:
        _check_common(self.robot, self.camera)
        if self.out.suffix.lower() not in (".png", ".jpg", ".jpeg"):
            raise ValueError(f"--out {self.out} must end in .png (or .jpg)")
