"""Resets from sampled end-of-trial poses on the fake wx250s: the client's reset against the old one.

    python tests/robot_client/reset_sweep.py --poses 375

End poses: tips uniform in the evaluation workspace, the gripper turned from pointing down by
roll and pitch up to 0.4 rad and yaw up to 1.2 rad. A pose counts as reachable when Interbotix's IK
(its three default guesses) finds joints within the limits; the arm is put there at rest with the
step's trajectory time (0.2 s) in force, as a trial leaves it. Then each reset runs from there:
- old: `set_ee_pose_matrix(reset, moving_time=2 s, blocking=True)`, and on refusal
  `go_to_home_pose()` and the same call again (what the client did before its resets set their
  own trajectory time);
- new: `WidowXInterbotix.reset()`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fake_interbotix import (  # noqa: E402
    ARM_JOINTS,
    VELOCITY_LIMITS,
    FakeWorld,
    VirtualClock,
    fk,
    profile_fraction,
)

from robot_client import safety  # noqa: E402
from robot_client.robots.widowx import WidowXInterbotix, WidowXSettings, reset_pose_matrix  # noqa: E402
from robot_client.transforms import GRIPPER_DOWN, rpy_to_matrix  # noqa: E402

STEP_TIME_S = 0.2
MAX_TILT_RAD = 0.4
MAX_YAW_RAD = 1.2


@dataclasses.dataclass
class SweepResult:
    """Counts over the sampled end poses."""

    sampled: int = 0
    reachable: int = 0
    old_refused: int = 0  # the old reset's first set_ee_pose_matrix refused
    old_failed: int = 0  # ... and its home-pose fallback's retry refused too: the run stopped
    old_home_speeds: List[float] = dataclasses.field(default_factory=list)  # rad/s the fallback demanded
    new_failed: int = 0  # the client's reset raised, or ended more than 2 mm / 0.01 rad off
    new_dip_m: float = 0.0  # deepest the tip went below min(start, reset) height on a new reset's way


def sample_end_poses(n: int, seed: int) -> List[np.ndarray]:
    """`n` tip poses in the workspace with the gripper turned from pointing down."""
    rng = np.random.default_rng(seed)
    poses = []
    for _ in range(n):
        pose = np.eye(4)
        rpy = rng.uniform([-MAX_TILT_RAD, -MAX_TILT_RAD, -MAX_YAW_RAD], [MAX_TILT_RAD, MAX_TILT_RAD, MAX_YAW_RAD])
        pose[:3, :3] = rpy_to_matrix(rpy) @ GRIPPER_DOWN
        pose[:3, 3] = rng.uniform(safety.WORKSPACE_LOW, safety.WORKSPACE_HIGH)
        poses.append(pose)
    return poses


def settle_at(world: FakeWorld, joints) -> None:
    """The arm at rest at `joints`, the step's trajectory time in force."""
    world.driver.place(joints)
    arm = world.bot.arm
    arm.joint_commands = list(joints)
    arm.set_trajectory_time(STEP_TIME_S, STEP_TIME_S / 2)


def old_reset(world: FakeWorld) -> tuple:
    """The previous client's reset: (first call refused, retry refused, rad/s the home move demanded)."""
    arm = world.bot.arm
    _, ok = arm.set_ee_pose_matrix(reset_pose_matrix(), custom_guess=None, execute=True, moving_time=2.0,
                                   accel_time=0.5, blocking=True)
    if ok:
        return False, False, None
    demanded = max(abs(q) for q in arm.joint_commands) / arm.moving_time  # home is all zeros
    arm.go_to_home_pose()
    _, ok = arm.set_ee_pose_matrix(reset_pose_matrix(), custom_guess=None, execute=True, moving_time=2.0,
                                   accel_time=0.5, blocking=True)
    return True, not ok, demanded


def lowest_tip_on_the_way(world: FakeWorld, since: int) -> float:
    """Lowest tip height (m) along the joint profiles of the group commands from index `since` on."""
    lowest = np.inf
    commands = world.driver.commands[since:]
    start = None
    for _, goal, moving, accel in commands:
        if start is not None:
            for s in np.linspace(0, 1, 21):
                f = profile_fraction(s * moving, moving, accel)
                lowest = min(lowest, fk(np.add(start, np.multiply(f, np.subtract(goal, start))))[2, 3])
        start = goal
    return float(lowest)


def sweep(n: int = 375, seed: int = 0) -> SweepResult:
    """Run both resets from every reachable pose of `n` sampled end poses."""
    result = SweepResult(sampled=n)
    world = FakeWorld(ros=2, clock=VirtualClock(), lag_s=0.0)
    saved = {k: sys.modules.get(k) for k in world.modules()}
    sys.modules.update(world.modules())
    try:
        robot = WidowXInterbotix(WidowXSettings(moving_time_s=STEP_TIME_S))
        robot.connect()
        arm = world.bot.arm
        target = reset_pose_matrix()
        for pose in sample_end_poses(n, seed):
            arm.set_trajectory_time(1e9, 0.0)  # reachability alone: no speed limit
            joints, reachable = arm.solve(pose)
            if not reachable:
                continue
            result.reachable += 1
            settle_at(world, joints)
            refused, failed, speed = old_reset(world)
            result.old_refused += refused
            result.old_failed += failed
            if speed is not None:
                result.old_home_speeds.append(speed)
            settle_at(world, joints)
            world.driver.commands.clear()
            world.driver.commands.append((0.0, list(joints), 0.0, 0.0))
            try:
                robot.reset()
            except RuntimeError:
                result.new_failed += 1
                continue
            world.clock.sleep(1.0)
            reached = fk(world.driver.arm_positions())
            off = (np.linalg.norm(reached[:3, 3] - target[:3, 3]) > 0.002
                   or np.linalg.norm(reached[:3, :3] - target[:3, :3]) > 0.01)
            result.new_failed += off
            floor = min(pose[2, 3], target[2, 3])
            result.new_dip_m = max(result.new_dip_m, floor - lowest_tip_on_the_way(world, 0))
        robot.close()
    finally:
        world.close()
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poses", type=int, default=375)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    r = sweep(args.poses, args.seed)
    speeds = r.old_home_speeds
    print(f"{r.sampled} end poses sampled, {r.reachable} reachable ({', '.join(ARM_JOINTS)} within limits)")
    print(f"old reset: first call refused from {r.old_refused}/{r.reachable}; home fallback's retry refused "
          f"too from {r.old_failed}; the home move demanded "
          + (f"{min(speeds):.1f}-{max(speeds):.1f} rad/s (limit {VELOCITY_LIMITS[0]:.2f})" if speeds else "nothing"))
    print(f"new reset: failed from {r.new_failed}/{r.reachable}; deepest dip of the tip below its start "
          f"and end heights on the way {r.new_dip_m * 1000:.1f} mm")


if __name__ == "__main__":
    main()
