"""The Interbotix Python API of ROS 2 (humble) or ROS 1 (noetic): import, start, and read registers.

The modules are ROS packages, not on PyPI, so they are imported when the arm connects. ROS is started
here with its own signal handling off: rclpy's and rospy's SIGINT handlers shut the ROS context down
before the client's own handler could hold the arm and move it to a safe pose. Interbotix's
constructors wait for the driver (xs_sdk) without end (ROS 2) or exit the process (ROS 1); here they
run on a thread with a deadline, so an absent driver is one clear line.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from typing import Any, Callable, List, Optional

logger = logging.getLogger(__name__)

MISSING_INTERBOTIX = (
    "interbotix_xs_modules not found: install the Interbotix ROS packages and source their workspace "
    "(docs/operator_guide.md), or use --robot sim"
)
NODE_NAME = "mqe_robot_client"


def driver_absent(robot_model: str, seconds: float) -> str:
    """The line for a driver that did not answer within `seconds`."""
    return (f"the arm's driver (xs_sdk) did not answer within {seconds:g} s: start it with `ros2 launch "
            f"interbotix_xsarm_control xsarm_control.launch.py robot_model:={robot_model}` (ROS 1: "
            f"`roslaunch interbotix_xsarm_control xsarm_control.launch robot_model:={robot_model}`), "
            "check the arm's power and USB cable, then retry")


@dataclasses.dataclass(frozen=True)
class InterbotixAPI:
    """The pieces of the Interbotix API that differ between its ROS 2 and ROS 1 releases."""

    ros_version: int  # 2 or 1
    manipulator_cls: Any  # InterbotixManipulatorXS
    startup: Optional[Callable[[], None]] = None  # ROS 2: robot_startup() (spins the node's executor)
    shutdown: Optional[Callable[[], None]] = None  # ROS 2: robot_shutdown()


def import_interbotix() -> InterbotixAPI:
    """Import the ROS 2 Interbotix modules, else the ROS 1 ones, else one clear RuntimeError."""
    try:
        from interbotix_xs_modules.xs_robot.arm import InterbotixManipulatorXS

        try:
            from interbotix_common_modules.common_robot.robot import robot_shutdown, robot_startup
        except ImportError:  # older ROS 2 releases spin the node from the constructor
            robot_startup = robot_shutdown = None
        return InterbotixAPI(2, InterbotixManipulatorXS, robot_startup, robot_shutdown)
    except ImportError:
        pass
    try:
        from interbotix_xs_modules.arm import InterbotixManipulatorXS

        return InterbotixAPI(1, InterbotixManipulatorXS)
    except ImportError:
        raise RuntimeError(MISSING_INTERBOTIX) from None


def start_ros(ros_version: int) -> None:
    """Start ROS for this process with its signal handlers off (Ctrl-C stays the client's)."""
    if ros_version == 2:
        import rclpy

        if rclpy.ok():
            return
        try:
            from rclpy.signals import SignalHandlerOptions

            rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        except ImportError:  # rclpy before humble installs its handlers unconditionally
            raise RuntimeError("this rclpy cannot start without its signal handlers (ROS 2 humble or newer "
                               "is needed): use ROS 2 humble, or ROS 1 noetic") from None
    else:
        import rospy

        rospy.init_node(NODE_NAME, disable_signals=True)


def make_manipulator(api: InterbotixAPI, robot_model: str, moving_time_s: float, accel_time_s: float,
                     timeout_s: float) -> Any:
    """InterbotixManipulatorXS for the arm, or RuntimeError if the driver does not answer in time."""
    kwargs = dict(robot_model=robot_model, group_name="arm", gripper_name="gripper",
                  moving_time=moving_time_s, accel_time=accel_time_s)
    if api.ros_version == 1:
        kwargs["init_node"] = False  # start_ros made the node, without rospy's signal handlers
    outcome: dict = {}

    def construct() -> None:
        try:
            outcome["bot"] = api.manipulator_cls(**kwargs)
        except SystemExit:  # ROS 1 calls sys.exit(1) when xs_sdk is not found
            outcome["exit"] = True
        except BaseException as e:  # reported on the caller's thread
            outcome["error"] = e

    # a daemon thread: a constructor that never returns must not keep the process alive
    thread = threading.Thread(target=construct, name="interbotix-connect", daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(timeout_s)
    if "bot" in outcome:
        return outcome["bot"]
    if "error" in outcome:
        raise outcome["error"]
    waited = time.monotonic() - started if outcome.get("exit") else timeout_s  # ROS 1 gives up on its own
    raise RuntimeError(driver_absent(robot_model, round(waited, 1)))


class RegisterReader:
    """Reads a motor register of every motor on a worker, so that a hung service never blocks."""

    def __init__(self, core: Any):
        self.core = core
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="registers")
        self._pending: Optional[concurrent.futures.Future] = None

    def read(self, reg: str, timeout_s: float) -> List[int]:
        """Values of `reg` for every motor (xs_sdk stops at the first one that does not answer);
        TimeoutError if the driver does not answer in time, RuntimeError if it refuses."""
        if self._pending is not None and not self._pending.done():
            raise TimeoutError("the previous register read has not returned")  # one hung read is enough
        self._pending = self._pool.submit(self.core.robot_get_motor_registers, "group", "all", reg)
        try:
            reply = self._pending.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no answer to reading {reg} in {timeout_s:g} s") from None
        except Exception as e:  # rospy.ServiceException and the like: the driver is not there
            raise RuntimeError(f"reading {reg} failed: {type(e).__name__}: {e}") from None
        return list(getattr(reply, "values", reply))  # ROS 1 answers a response, ROS 2 the list

    def close(self) -> None:
        """Stop the worker (a hung read is abandoned)."""
        self._pool.shutdown(wait=False)
