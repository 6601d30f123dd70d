"""Fault checks of the real WidowX: driver present, joint efforts in bounds, no motor error.

Each check returns None or one line saying what is wrong and what to do; the loop ends the trial as
aborted with that line. The motor error register is a service round trip, so a background thread
polls it and the loop reads the newest answer; joint states arrive on their topic at the driver's
rate (100 Hz for the wx250s), so a frozen message means the driver is gone.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, List, Optional, Sequence, Tuple

from robot_client.robots.interbotix import RegisterReader

logger = logging.getLogger(__name__)

# Bridge's WidowX controller (widowx_envs) aborts above these currents (mA) per arm joint, waist to
# wrist_rotate: its "experimental values" 800, 1000, 600, 600, 600, 700 times 1.7.
BRIDGE_EFFORT_LIMITS_MA = (1360.0, 1700.0, 1020.0, 1020.0, 1020.0, 1190.0)
HARDWARE_ERROR_BITS = {  # Dynamixel X series Hardware_Error_Status
    0: "input voltage",
    2: "overheating",
    3: "motor encoder",
    4: "electrical shock",
    5: "overload",
}
REBOOT_HINT = ("power-cycle the arm or reboot the motor (`ros2 service call /wx250s/reboot_motors ...`, "
               "docs/operator_guide.md), then restart the client")


def describe_hardware_error(status: int) -> str:
    """'overload, overheating' for the set bits of a Hardware_Error_Status value."""
    names = [name for bit, name in HARDWARE_ERROR_BITS.items() if status & (1 << bit)]
    return ", ".join(names) or f"status {status}"


def motor_status_fault(values: Sequence[int], motors: Sequence[str]) -> Optional[str]:
    """The line for a Hardware_Error_Status read of `motors` (in order), None if all are clear."""
    for name, value in zip(motors, values):
        if value:
            return f"motor error on {name}: {describe_hardware_error(int(value))} ({REBOOT_HINT})"
    if len(values) < len(motors):
        return (f"motor {motors[len(values)]} does not answer (its status read failed): check its cable "
                f"and the arm's power; {REBOOT_HINT}")
    return None


def effort_fault(efforts: Sequence[float], limits: Sequence[float], joints: Sequence[str]) -> Optional[str]:
    """The line for the first joint whose |effort| (mA) is over its limit, None if none is."""
    for name, effort, limit in zip(joints, efforts, limits):
        if abs(effort) > limit:
            return (f"joint {name} effort {abs(effort):.0f} mA over its limit {limit:.0f} mA (blocked or "
                    "colliding?): free the arm, check the scene, then rerun")
    return None


@dataclasses.dataclass(frozen=True)
class FaultLimits:
    """When the WidowX's readings end a trial."""

    effort_limits_ma: Tuple[float, ...] = BRIDGE_EFFORT_LIMITS_MA  # mA, per arm joint waist..wrist_rotate
    driver_timeout_s: float = 1.0  # s, joint states or a motor-status answer older than this: driver gone
    status_poll_s: float = 0.25  # s, between reads of the motors' Hardware_Error_Status

    def __post_init__(self) -> None:
        if len(self.effort_limits_ma) != 6 or not all(limit > 0 for limit in self.effort_limits_ma):
            raise ValueError(f"effort limits {self.effort_limits_ma} must be 6 positive currents in mA "
                             "(waist, shoulder, elbow, forearm_roll, wrist_angle, wrist_rotate)")
        if not self.driver_timeout_s > 0:
            raise ValueError(f"driver timeout {self.driver_timeout_s} s must be > 0")
        if not 0 < self.status_poll_s < self.driver_timeout_s:
            raise ValueError(f"status poll period {self.status_poll_s} s must be in (0, driver timeout "
                             f"{self.driver_timeout_s} s), or an absent driver would look present")


class FaultWatch:
    """Watches one connected arm: joint-state freshness, efforts and the motors' error register."""

    def __init__(self, core: Any, arm_joints: Sequence[str], limits: FaultLimits, robot_model: str):
        self.core, self.joints, self.limits, self.robot_model = core, list(arm_joints), limits, robot_model
        self.motors: List[str] = [*arm_joints, "gripper"]  # the "all" group of xs_sdk, in its order
        self._reader = RegisterReader(core)
        self._lock = threading.Lock()
        self._status_at = time.monotonic()  # when the last status answer arrived
        self._status_fault: Optional[str] = None
        self._status_error: Optional[str] = None
        self._last_msg: Any = None
        self._msg_at = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="motor-status", daemon=True)
        self.driver_lost = False  # a check found the driver gone: nothing can move the arm now

    def start(self) -> None:
        """Start polling the motors' error register."""
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.limits.status_poll_s):
            try:
                values = self._reader.read("Hardware_Error_Status", self.limits.driver_timeout_s)
            except (TimeoutError, RuntimeError) as e:
                with self._lock:
                    self._status_error = str(e)
                continue
            with self._lock:
                self._status_at, self._status_error = time.monotonic(), None
                self._status_fault = motor_status_fault(values, self.motors)

    def check(self) -> Optional[str]:
        """The first fault now, as one line; None if the arm is fine."""
        now = time.monotonic()
        msg = self.core.joint_states
        if msg is not self._last_msg:
            self._last_msg, self._msg_at = msg, now
        silent = now - self._msg_at
        if silent > self.limits.driver_timeout_s:
            self.driver_lost = True
            return (f"no joint states from the arm's driver for {silent:.1f} s (limit "
                    f"{self.limits.driver_timeout_s:g} s): xs_sdk stopped or lost the arm; check its "
                    "terminal and the USB cable, restart it, then rerun")
        with self._lock:
            status_fault, status_error, status_age = self._status_fault, self._status_error, now - self._status_at
        if status_fault is not None:
            return status_fault
        if status_age > self.limits.driver_timeout_s + self.limits.status_poll_s:
            self.driver_lost = True
            return (f"the arm's driver has not answered a motor status read for {status_age:.1f} s "
                    f"({status_error or 'no answer'}): check xs_sdk's terminal, restart it, then rerun")
        index = self.core.js_index_map
        efforts = [msg.effort[index[name]] for name in self.joints] if len(msg.effort) else []
        if efforts:
            return effort_fault(efforts, self.limits.effort_limits_ma, self.joints)
        return None

    def close(self) -> None:
        """Stop polling."""
        self._stop.set()
        self._reader.close()
