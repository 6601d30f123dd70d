"""A timing-aware stand-in for the Interbotix X-Series Python API and the arm behind it.

The API side keeps the checks of Interbotix's `InterbotixArmXSInterface` (interbotix_xs_modules, ROS 1
noetic `arm.py` and ROS 2 humble `xs_robot/arm.py`) as they are written there:
- `set_trajectory_time` writes the profile registers only when a time changes;
- the joint-limit check divides |goal - last command| by `self.moving_time`, the moving time in force
  *before* the call (a call's own `moving_time` is applied after the check), against the URDF
  velocity limit;
- `set_ee_pose_matrix` runs modern_robotics' IKinSpace from the custom guess or the three default
  guesses, wraps the angles into the limits, checks, then publishes;
- `go_to_home_pose` and `go_to_sleep_pose` publish without any check; blocking calls sleep the
  moving time.

The driver side (xs_sdk and the Dynamixels): each group command starts a time-based profile
(trapezoid of `accel_time` within `moving_time`) from where the joints are; the measured joints trail
that profile by `lag_s`; the effort (mA) is a holding current plus a position-error term, so a
blocked joint's effort climbs, and an external load (a collision, a heavy object) adds its current;
`Hardware_Error_Status` can be set per motor; the driver can be
absent or stop (joint states freeze, publishes go nowhere, service calls hang on ROS 2 and raise on
ROS 1). ROS 2 and ROS 1 differ as the real ones do: `core`/`dxl`, `release/grasp`/`open/close`,
register reads as a list / a response with `.values`, rclpy's and rospy's SIGINT handlers.

Numbers for the wx250s are the real ones (interbotix_xsarm_descriptions wx250s.urdf.xacro limits,
interbotix_xsarm_control wx250s.yaml sleep positions, mr_descriptions wx250s Slist/M); the holding
currents and the position gain are this fake's model, not measurements.
"""

from __future__ import annotations

import enum
import math
import signal
import sys
import threading
import time
import types
from typing import Callable, Dict, List, Optional

import modern_robotics as mr
import numpy as np

ARM_JOINTS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")
ALL_JOINTS = ARM_JOINTS + ("gripper",)  # joint_order of wx250s.yaml: the "all" group
PI_OFFSET = 0.00001  # wx250s.urdf.xacro's pi_offset
LOWER = (-math.pi + PI_OFFSET, math.radians(-108), math.radians(-123), -math.pi + PI_OFFSET,
         math.radians(-100), -math.pi + PI_OFFSET)
UPPER = (math.pi - PI_OFFSET, math.radians(114), math.radians(92), math.pi - PI_OFFSET,
         math.radians(123), math.pi - PI_OFFSET)
VELOCITY_LIMITS = (math.pi,) * 6  # rad/s, every arm joint's URDF velocity limit
SLEEP = (0.0, -1.80, 1.55, 0.0, 0.8, 0.0)
SLIST = np.array([[0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
                  [0.0, 1.0, 0.0, -0.11065, 0.0, 0.0],
                  [0.0, 1.0, 0.0, -0.36065, 0.0, 0.04975],
                  [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0],
                  [0.0, 1.0, 0.0, -0.36065, 0.0, 0.29975],
                  [1.0, 0.0, 0.0, 0.0, 0.36065, 0.0]]).T
M_HOME = np.array([[1.0, 0.0, 0.0, 0.458325], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.36065],
                   [0.0, 0.0, 0.0, 1.0]])
HOLDING_MA = (0.0, 450.0, 300.0, 0.0, 80.0, 0.0, 0.0)  # this fake's holding currents (mA)
POSITION_GAIN_MA_PER_RAD = 10000.0  # this fake's current per radian of position error (Dynamixel P gain 800 at 12 V, roughly)
CURRENT_LIMIT_MA = 3209.0  # XM430-W350 Current_Limit (1193 x 2.69 mA): the effort saturates here
REV = 2 * math.pi


def fk(joints) -> np.ndarray:
    """Tip pose of arm joints (modern_robotics FKinSpace, as interbotix's get_ee_pose)."""
    return mr.FKinSpace(M_HOME, SLIST, list(joints))


class RealClock:
    """Wall-clock time: blocking calls really wait."""

    now = staticmethod(time.monotonic)
    sleep = staticmethod(time.sleep)


class VirtualClock:
    """Time that moves only when something sleeps: sweeps of many slow moves take no wall time."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


def profile_fraction(tau: float, moving: float, accel: float) -> float:
    """Fraction of the way done at `tau` s into a Dynamixel time-based profile (trapezoid)."""
    if moving <= 0 or tau >= moving:
        return 1.0
    if tau <= 0:
        return 0.0
    accel = min(accel, moving / 2)
    if accel <= 0:
        return tau / moving
    v = 1.0 / (moving - accel)
    if tau < accel:
        return 0.5 * v * tau * tau / accel
    if tau <= moving - accel:
        return v * (tau - accel / 2)
    rest = moving - tau
    return 1.0 - 0.5 * v * rest * rest / accel


class Driver:
    """xs_sdk and the motors: profiles, lag, efforts, error registers, presence."""

    def __init__(self, clock, lag_s: float = 0.03, running: bool = True):
        self.clock, self.lag_s = clock, lag_s
        self.running = threading.Event()
        if running:
            self.running.set()
        self.gone = threading.Event()  # set at teardown: hung service calls return
        self.profile_velocity_ms = 2000  # Profile_Velocity register of the arm group (time-based: ms)
        self.profile_acceleration_ms = 300
        now = clock.now()
        # per joint, oldest first: (t0, start, goal, moving_s, accel_s) of each profile commanded
        self.segments: List[List[tuple]] = [[(now, q, q, 0.0, 0.0)] for q in SLEEP + (0.0,)]
        self.frozen: Dict[int, float] = {}  # joint index -> position of a blocked or torqued-off joint
        self.loads = [0.0] * len(ALL_JOINTS)  # mA each joint's motor spends against an external force
        self.hardware_error = [0] * len(ALL_JOINTS)
        self.silent_motors: set = set()  # motors that do not answer register reads
        self.commands: List[tuple] = []  # (time, positions, moving_s, accel_s) of every group command
        self._seq = 0
        self._last_states = None

    # ---- motion
    def _profile(self, i: int, t: float) -> float:
        history = self.segments[i]
        k = len(history) - 1
        while k > 0 and history[k][0] > t:  # the profile in force at t
            k -= 1
        t0, start, goal, moving, accel = history[k]
        return start + (goal - start) * profile_fraction(t - t0, moving, accel)

    def _start(self, i: int, segment: tuple) -> None:
        history = self.segments[i]
        history.append(segment)
        while len(history) > 2 and history[1][0] < segment[0] - self.lag_s - 1.0:
            history.pop(0)  # older than any reading can ask for

    def position(self, i: int, t: Optional[float] = None) -> float:
        t = self.clock.now() if t is None else t
        if i in self.frozen:
            return self.frozen[i]
        return self._profile(i, t - self.lag_s)

    def arm_positions(self, t: Optional[float] = None) -> List[float]:
        return [self.position(i, t) for i in range(len(ARM_JOINTS))]

    def effort(self, i: int, t: float) -> float:
        error = self._profile(i, t) - self.position(i, t)
        value = HOLDING_MA[i] + self.loads[i] + POSITION_GAIN_MA_PER_RAD * error
        return float(np.clip(value, -CURRENT_LIMIT_MA, CURRENT_LIMIT_MA))

    def command_group(self, positions) -> None:
        """A JointGroupCommand for the arm: every joint starts a new profile from where it is."""
        if not self.running.is_set():
            return  # published into the void
        now = self.clock.now()
        moving, accel = self.profile_velocity_ms / 1000.0, self.profile_acceleration_ms / 1000.0
        self.commands.append((now, list(positions), moving, accel))
        for i, goal in enumerate(positions):
            start = self._profile(i, now)  # the profile continues from its commanded point
            self._start(i, (now, start, float(goal), moving, accel))

    def set_gripper(self, opening: float) -> None:
        if self.running.is_set():
            now = self.clock.now()
            self._start(6, (now, self._profile(6, now), opening, 0.5, 0.1))

    def block(self, joint: str) -> None:
        """An obstacle: the joint stops where it is now, its profile runs on (effort climbs)."""
        i = ALL_JOINTS.index(joint)
        self.frozen[i] = self.position(i)

    def load(self, joint: str, current_ma: float) -> None:
        """An external force on the joint (pressing on the table, a collision): its motor spends
        `current_ma` more to keep its position."""
        self.loads[ALL_JOINTS.index(joint)] = current_ma

    def fault(self, joint: str, status: int) -> None:
        """The motor reports `status` in Hardware_Error_Status and drops torque (it stops)."""
        i = ALL_JOINTS.index(joint)
        self.hardware_error[i] = status
        self.frozen[i] = self.position(i)

    def stop(self) -> None:
        """The driver goes away: joint states freeze, publishes go nowhere, services stop answering."""
        self.running.clear()

    def place(self, joints) -> None:
        """Put the arm at rest at `joints` (test setup)."""
        now = self.clock.now()
        for i, q in enumerate(joints):
            self.segments[i] = [(now - 10.0, float(q), float(q), 0.0, 0.0)]

    # ---- topics and services
    def joint_states(self):
        """A sensor_msgs/JointState as the driver publishes it; frozen while it is absent."""
        if not self.running.is_set() and self._last_states is not None:
            return self._last_states
        t = self.clock.now()
        self._seq += 1
        positions = [self.position(i, t) for i in range(len(ALL_JOINTS))]
        velocity = [0.0] * len(ALL_JOINTS)
        efforts = [self.effort(i, t) for i in range(len(ALL_JOINTS))]
        stamp = types.SimpleNamespace(sec=int(t), nanosec=int((t % 1) * 1e9))
        msg = types.SimpleNamespace(name=list(ALL_JOINTS), position=positions, velocity=velocity,
                                    effort=efforts, header=types.SimpleNamespace(stamp=stamp, seq=self._seq))
        self._last_states = msg
        return msg

    def read_registers(self, names, reg: str) -> List[int]:
        if reg != "Hardware_Error_Status":
            raise NotImplementedError(reg)
        values = []
        for name in names:  # xs_sdk stops at the first motor whose read fails
            i = ALL_JOINTS.index(name)
            if i in self.silent_motors:
                break
            values.append(self.hardware_error[i])
        return values


class SignalHandlerOptions(enum.Enum):
    """rclpy.signals.SignalHandlerOptions."""

    NO = 0
    SIGINT = 1
    SIGTERM = 2
    ALL = 3


class RosContext:
    """rclpy's default context or rospy's node state, with the SIGINT handler each installs."""

    def __init__(self, ros: int):
        self.ros = ros
        self.ok = False
        self.signals_installed = False
        self.shutdown_reason: Optional[str] = None

    def _on_sigint(self, signum, frame):
        # as rclpy and rospy do: the ROS context goes down first, then Python sees the interrupt
        self.shutdown("SIGINT")
        raise KeyboardInterrupt

    def start(self, install_signals: bool) -> None:
        self.ok = True
        if install_signals:
            signal.signal(signal.SIGINT, self._on_sigint)
            self.signals_installed = True

    def shutdown(self, reason: str = "shutdown") -> None:
        self.ok = False
        self.shutdown_reason = reason

    def check_publish(self) -> None:
        if not self.ok:
            if self.ros == 2:
                raise RuntimeError("Failed to publish: publisher's context is invalid")
            raise RosException("publish() to a closed topic")


class RosException(Exception):
    """rospy.exceptions.ROSException."""


class ServiceException(Exception):
    """rospy.ServiceException."""


class FakeArm:
    """InterbotixArmXSInterface: the checks and bookkeeping of Interbotix's arm.py."""

    def __init__(self, world: FakeWorld, moving_time: float, accel_time: float):
        self.world, self.driver, self.clock = world, world.driver, world.clock
        self.group_info = types.SimpleNamespace(
            joint_names=list(ARM_JOINTS), num_joints=6, joint_lower_limits=list(LOWER),
            joint_upper_limits=list(UPPER), joint_velocity_limits=list(VELOCITY_LIMITS),
            joint_sleep_positions=list(SLEEP), profile_type="time", mode="position")
        self.initial_guesses = [[0.0] * 6 for _ in range(3)]
        self.initial_guesses[1][0] = np.deg2rad(-120)
        self.initial_guesses[2][0] = np.deg2rad(120)
        self.moving_time: Optional[float] = None
        self.accel_time: Optional[float] = None
        self.joint_commands = self.driver.arm_positions()
        self.T_sb = fk(self.joint_commands)
        self.set_trajectory_time(moving_time, accel_time)
        self.log: List[tuple] = []  # every call: (name, dict of its arguments and outcome)
        self.refusals: List[dict] = []  # every failed limit check: which joint, why, by how much

    def set_trajectory_time(self, moving_time=None, accel_time=None) -> None:
        if moving_time is not None and moving_time != self.moving_time:
            self.world.set_register()
            self.moving_time = moving_time
            self.driver.profile_velocity_ms = int(moving_time * 1000)
        if accel_time is not None and accel_time != self.accel_time:
            self.world.set_register()
            self.accel_time = accel_time
            self.driver.profile_acceleration_ms = int(accel_time * 1000)

    def _check_joint_limits(self, positions) -> bool:
        theta_list = [int(elem * 1000) / 1000.0 for elem in positions]
        speed_list = [abs(goal - current) / float(self.moving_time)
                      for goal, current in zip(theta_list, self.joint_commands)]
        for x in range(6):
            if not (LOWER[x] <= theta_list[x] <= UPPER[x]):
                self.refusals.append({"joint": ARM_JOINTS[x], "why": "position", "value": theta_list[x]})
                return False
            if speed_list[x] > VELOCITY_LIMITS[x]:
                self.refusals.append({"joint": ARM_JOINTS[x], "why": "velocity", "value": speed_list[x],
                                      "moving_time": self.moving_time})
                return False
        return True

    check_joint_limits = _check_joint_limits  # the ROS 1 name

    def _publish_commands(self, positions, moving_time=None, accel_time=None, blocking=True) -> None:
        self.world.context.check_publish()
        self.set_trajectory_time(moving_time, accel_time)
        self.joint_commands = list(positions)
        self.driver.command_group(self.joint_commands)
        if blocking:
            self.clock.sleep(self.moving_time)
        self.T_sb = fk(self.joint_commands)

    publish_positions = _publish_commands  # the ROS 1 name

    def set_joint_positions(self, joint_positions, moving_time=None, accel_time=None, blocking=True) -> bool:
        ok = self._check_joint_limits(joint_positions)
        self.log.append(("set_joint_positions", {"positions": list(joint_positions), "moving_time": moving_time,
                                                 "blocking": blocking, "ok": ok}))
        if ok:
            self._publish_commands(joint_positions, moving_time, accel_time, blocking)
        return ok

    def go_to_home_pose(self, moving_time=None, accel_time=None, blocking=True) -> None:
        self.log.append(("go_to_home_pose", {"moving_time": moving_time}))
        self._publish_commands([0.0] * 6, moving_time, accel_time, blocking)

    def go_to_sleep_pose(self, moving_time=None, accel_time=None, blocking=True) -> None:
        self.log.append(("go_to_sleep_pose", {"moving_time": moving_time}))
        self._publish_commands(list(SLEEP), moving_time, accel_time, blocking)

    def solve(self, T_sd, custom_guess=None):
        """The IK part of set_ee_pose_matrix: (theta_list, solved and within position limits, checked)."""
        guesses = self.initial_guesses if custom_guess is None else [custom_guess]
        theta_list = None
        for guess in guesses:
            theta_list, success = mr.IKinSpace(SLIST, M_HOME, T_sd, guess, 0.001, 0.001)
            if success:
                for x in range(len(theta_list)):
                    if theta_list[x] <= -REV:
                        theta_list[x] %= -REV
                    elif theta_list[x] >= REV:
                        theta_list[x] %= REV
                    if round(theta_list[x], 3) < round(LOWER[x], 3):
                        theta_list[x] += REV
                    elif round(theta_list[x], 3) > round(UPPER[x], 3):
                        theta_list[x] -= REV
                if self._check_joint_limits(theta_list):
                    return theta_list, True
        return theta_list, False

    def set_ee_pose_matrix(self, T_sd, custom_guess=None, execute=True, moving_time=None, accel_time=None,
                           blocking=True):
        theta_list, ok = self.solve(np.asarray(T_sd), custom_guess)
        self.log.append(("set_ee_pose_matrix", {"T": np.array(T_sd), "custom_guess": custom_guess,
                                                "moving_time": moving_time, "accel_time": accel_time,
                                                "blocking": blocking, "ok": ok}))
        if ok and execute:
            self._publish_commands(theta_list, moving_time, accel_time, blocking)
            self.T_sb = np.array(T_sd)
        return theta_list, ok

    def get_joint_commands(self) -> List[float]:
        return list(self.joint_commands)

    def get_ee_pose_command(self) -> np.ndarray:
        return np.array(self.T_sb)

    def get_ee_pose(self) -> np.ndarray:
        return fk(self.driver.arm_positions())

    def capture_joint_positions(self) -> None:
        self.joint_commands = self.driver.arm_positions()
        self.T_sb = fk(self.joint_commands)


class FakeGripper:
    """InterbotixGripperXSInterface: release/grasp (ROS 2) or open/close (ROS 1)."""

    def __init__(self, world: FakeWorld):
        self.world = world
        self.calls: List[tuple] = []
        opening, closing = ("release", "grasp") if world.ros == 2 else ("open", "close")
        setattr(self, opening, lambda delay=1.0: self._move(opening, delay, 1.0))
        setattr(self, closing, lambda delay=1.0: self._move(closing, delay, 0.0))

    def _move(self, name: str, delay: float, opening: float) -> None:
        self.world.context.check_publish()
        self.calls.append((name, delay))
        self.world.driver.set_gripper(opening)
        self.world.clock.sleep(delay)


class FakeCore:
    """InterbotixRobotXSCore: joint states and register reads."""

    def __init__(self, world: FakeWorld):
        self.world = world
        self.js_index_map = {n: i for i, n in enumerate(ALL_JOINTS)}
        self.js_mutex = threading.Lock()

    @property
    def joint_states(self):
        return self.world.driver.joint_states()

    def robot_get_motor_registers(self, cmd_type: str, name: str, reg: str):
        names = ALL_JOINTS if (cmd_type, name) == ("group", "all") else (
            ARM_JOINTS if cmd_type == "group" else (name,))
        driver = self.world.driver
        if not driver.running.is_set():
            if self.world.ros == 1:
                raise ServiceException("service [/wx250s/get_motor_registers] unavailable")
            while not driver.running.is_set() and not driver.gone.is_set():  # ROS 2: waits for ever
                driver.running.wait(0.05)
        values = driver.read_registers(names, reg)
        self.world.register_reads += 1
        return values if self.world.ros == 2 else types.SimpleNamespace(values=values)


class FakeWorld:
    """One fake arm with its driver and ROS context; `modules()` gives the importable API."""

    def __init__(self, ros: int = 2, clock=None, lag_s: float = 0.03, driver_running: bool = True,
                 service_wait_s: float = 5.0):
        self.ros = ros
        self.clock = clock or RealClock()
        self.driver = Driver(self.clock, lag_s, driver_running)
        self.context = RosContext(ros)
        self.service_wait_s = service_wait_s  # ROS 1: how long the constructor waits for xs_sdk
        self.bots: list = []
        self.events: List[str] = []
        self.register_reads = 0

    # ---- the API objects
    def manipulator(self, robot_model, group_name="arm", gripper_name="gripper", robot_name=None,
                    moving_time=2.0, accel_time=0.3, init_node=True, **_ignored):
        world = self
        if world.ros == 2:
            if not world.context.ok:  # create_interbotix_global_node: rclpy.init() with its handlers
                world.rclpy_init()
            while not world.driver.running.wait(world.service_wait_s) and world.context.ok:
                world.events.append("Failed to find services. Is the xs_sdk running?")  # ROS 2 loops
                if world.driver.gone.is_set():
                    break
        else:
            if init_node:
                world.rospy_init_node(f"{robot_name or robot_model}_robot_manipulation")
            if not world.driver.running.wait(world.service_wait_s):
                print("The robot 'wx250s' is not discoverable. Is the xs_sdk node running? Quitting...")
                sys.exit(1)
        bot = types.SimpleNamespace(args=(robot_model, group_name, gripper_name))
        core = FakeCore(world)
        if world.ros == 2:
            bot.core = core
        else:
            bot.dxl = core
        bot.arm = FakeArm(world, moving_time, accel_time)
        bot.gripper = FakeGripper(world)
        world.bots.append(bot)
        return bot

    def rclpy_init(self, args=None, *, context=None, domain_id=None, signal_handler_options=None):
        if self.context.ok:
            raise RuntimeError("Context.init() must only be called once")
        self.events.append(f"rclpy.init({signal_handler_options})")
        self.context.start(install_signals=signal_handler_options is not SignalHandlerOptions.NO)

    def rospy_init_node(self, name, anonymous=False, disable_signals=False, **_ignored):
        self.events.append(f"rospy.init_node({name}, disable_signals={disable_signals})")
        self.context.start(install_signals=not disable_signals)

    def modules(self, robot_startup_api: bool = True) -> Dict[str, types.ModuleType]:
        """The fake packages, keyed by import name, as sys.modules entries."""
        def module(name: str, **attrs) -> types.ModuleType:
            m = types.ModuleType(name)
            m.__dict__.update(attrs)
            return m

        world = self
        out = {"interbotix_xs_modules": module("interbotix_xs_modules")}
        if self.ros == 2:
            signals = module("rclpy.signals", SignalHandlerOptions=SignalHandlerOptions)
            out["rclpy"] = module("rclpy", init=self.rclpy_init, ok=lambda: world.context.ok,
                                  shutdown=lambda: world.context.shutdown("rclpy.shutdown()"), signals=signals)
            out["rclpy.signals"] = signals
            out["interbotix_xs_modules.xs_robot"] = module("interbotix_xs_modules.xs_robot")
            out["interbotix_xs_modules.xs_robot.arm"] = module("interbotix_xs_modules.xs_robot.arm",
                                                               InterbotixManipulatorXS=self.manipulator)
            out["interbotix_common_modules"] = module("interbotix_common_modules")
            out["interbotix_common_modules.common_robot"] = module("interbotix_common_modules.common_robot")
            robot_attrs = {}
            if robot_startup_api:
                robot_attrs = {"robot_startup": lambda: world.events.append("robot_startup"),
                               "robot_shutdown": world._robot_shutdown}
            out["interbotix_common_modules.common_robot.robot"] = module(
                "interbotix_common_modules.common_robot.robot", **robot_attrs)
        else:
            out["rospy"] = module("rospy", init_node=self.rospy_init_node, is_shutdown=lambda: not world.context.ok,
                                  signal_shutdown=lambda reason: world.context.shutdown(reason),
                                  ROSException=RosException, ServiceException=ServiceException)
            out["interbotix_xs_modules.xs_robot"] = None  # the ROS 2 layout is absent: its import fails
            out["interbotix_xs_modules.arm"] = module("interbotix_xs_modules.arm",
                                                      InterbotixManipulatorXS=self.manipulator)
        return out

    def set_register(self) -> None:
        """The set_motor_registers service: waits for an absent driver (ROS 2), raises (ROS 1)."""
        driver = self.driver
        if driver.running.is_set():
            return
        if self.ros == 1:
            raise ServiceException("service [/wx250s/set_motor_registers] unavailable")
        while not driver.running.is_set() and not driver.gone.is_set():
            driver.running.wait(0.05)

    def _robot_shutdown(self) -> None:
        self.events.append("robot_shutdown")
        self.context.shutdown("robot_shutdown()")

    def install(self, setitem: Callable[[dict, str, object], None], delitem=None, **kwargs) -> FakeWorld:
        """Put the fake packages into sys.modules with `setitem` (monkeypatch.setitem)."""
        for name in [n for n in sys.modules if n.split(".")[0] in ("rclpy", "rospy", "interbotix_xs_modules",
                                                                    "interbotix_common_modules")]:
            if delitem is not None:
                delitem(sys.modules, name)
        for name, mod in self.modules(**kwargs).items():
            setitem(sys.modules, name, mod)
        return self

    @property
    def bot(self):
        return self.bots[-1]

    def close(self) -> None:
        self.driver.gone.set()
