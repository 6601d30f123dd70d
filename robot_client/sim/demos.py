"""Scripted demonstrators of the three primitives, driving the twin through its 7-d action interface.

They read privileged simulator state (object and handle positions) and move the tip through
waypoints, like a teleoperator would. Only primitives exist here: no composite task is ever
demonstrated, so a policy that solves one from this data has stitched primitives together.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from robot_client import safety
from robot_client.sim import kinematics as K
from robot_client.sim import layout as L
from robot_client.sim import scoring
from robot_client.sim.env import WidowXSimEnv
from robot_client.transforms import GRIPPER_DOWN, rotation_towards, rpy_to_matrix

logger = logging.getLogger(__name__)

PRIMITIVES = ("pnp_plate", "open_drawer", "pnp_drawer")
SAFE_Z = 0.12  # m, travel height of the tip between waypoints
PRECISE_NOISE = 0.25  # noise factor in fine phases
GRASP_BELOW_CENTRE = 0.008  # m, tip below an object's centre when grasping (pads cover its middle)
RELEASE_CLEARANCE_STEPS = 4  # 5 mm steps of finger room past which a release yaw is clear enough
SLOT_JITTER = 0.003  # m, largest offset from a plate slot (slots are 2-2.4 cm from the centre)


@dataclasses.dataclass(frozen=True)
class Waypoint:
    """One phase of a demonstration: go to xyz at a gripper yaw, with a gripper command."""

    xyz: np.ndarray  # m, tip target in the base frame
    yaw: float  # rad, rotation of the gripper about the vertical (0: fingers close along y)
    gripper: float  # 1 open, 0 closed
    tol: float = 0.006  # m, phase ends when the tip is this close (and turned within 0.05 rad)
    hold: int = 0  # extra steps to stay once reached (let the gripper act)
    max_steps: int = 25  # phase gives up after this many steps
    max_speed: float = safety.MAX_DELTA_XYZ  # m per step
    precise: bool = False  # a fine phase (descend, grasp, pull): action noise is scaled down


@dataclasses.dataclass(frozen=True)
class Episode:
    """One demonstration: T + 1 observations and the T actions between them, plus a final hold."""

    images: np.ndarray  # (T + 1, S, S, 3) uint8
    proprio: np.ndarray  # (T + 1, 7) float32
    actions: np.ndarray  # (T + 1, 7) float32; the last is a no-motion hold (see datagen)
    success: bool  # the primitive's goal was reached at the end
    primitive: str
    object_index: int  # -1 for open_drawer
    ik_failures: int


def _yaw_for(env: WidowXSimEnv, index: int) -> float:
    """Gripper yaw that closes on a cube's faces (any yaw for an upright cylinder), near zero."""
    if L.OBJECTS[index].shape != "box":
        return 0.0
    yaw = env.object_yaw(index)
    return float((yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4)


def _pick(env: WidowXSimEnv, index: int) -> list[Waypoint]:
    pos = env.scene_state().objects_pos[index]
    yaw = _yaw_for(env, index)
    grasp_z = max(0.004, pos[2] - GRASP_BELOW_CENTRE)
    return [
        Waypoint(np.array([pos[0], pos[1], grasp_z + 0.07]), yaw, 1.0, tol=0.01),
        Waypoint(
            np.array([pos[0], pos[1], grasp_z]), yaw, 1.0, tol=0.004, max_speed=0.03, precise=True
        ),
        Waypoint(np.array([pos[0], pos[1], grasp_z]), yaw, 0.0, hold=3, precise=True),
        Waypoint(np.array([pos[0], pos[1], SAFE_Z]), yaw, 0.0, tol=0.01),
    ]


def _release_yaw(env: WidowXSimEnv, index: int, place_xy: np.ndarray) -> float:
    """Gripper yaw for letting go of object `index` at place_xy: the open fingers keep the most
    room from the other objects (a finger that lands on a neighbour drags it off the plate on the
    way up); of equally clear yaws, the one nearest the grasp yaw (the least wrist turn)."""
    grasp_yaw = _yaw_for(env, index)
    positions = env.scene_state().objects_pos[:, :2]
    others = [i for i in range(len(L.OBJECTS)) if i != index]
    best, best_key = grasp_yaw, None
    for yaw in grasp_yaw + np.linspace(-np.pi / 2, np.pi / 2, 12, endpoint=False):
        axis = np.array([-np.sin(yaw), np.cos(yaw)])  # fingers close along y at yaw 0
        fingers = place_xy + np.outer([-1.0, 1.0], axis) * K.FINGER_RANGE[1]
        clearance = min(
            np.linalg.norm(fingers - positions[i], axis=1).min() - L.OBJECTS[i].half_width
            for i in others
        )
        # clearance rounded to 5 mm: beyond that a smaller turn matters more
        key = (min(round(clearance / 0.005), RELEASE_CLEARANCE_STEPS), -abs(yaw - grasp_yaw))
        if best_key is None or key > best_key:
            best, best_key = float(yaw), key
    return best


def _place(place_xy: np.ndarray, release_z: float, yaw: float) -> list[Waypoint]:
    return [
        Waypoint(np.array([*place_xy, SAFE_Z]), yaw, 0.0, tol=0.008),
        Waypoint(np.array([*place_xy, release_z]), yaw, 0.0, tol=0.005, max_speed=0.03),
        Waypoint(np.array([*place_xy, release_z]), yaw, 1.0, hold=2),
        Waypoint(np.array([*place_xy, SAFE_Z]), yaw, 1.0, tol=0.01),
    ]


def _home() -> list[Waypoint]:
    # every primitive ends where it began, so that its last frame shows the scene as a goal image
    # does (arm at the reset pose, gripper open) and one episode's end is another's start
    return [Waypoint(safety.RESET_XYZ.copy(), 0.0, 1.0, tol=0.006)]


def plan(
    env: WidowXSimEnv,
    primitive: str,
    index: int,
    rng: np.random.Generator,
    place_xy: np.ndarray | None = None,
) -> list[Waypoint]:
    """Waypoints of a primitive in the current scene (object `index` where it applies), ending at
    the reset pose; a plate pick-and-place sets the object down at `place_xy`, or near the plate
    centre when None."""
    return _motion(env, primitive, index, rng, place_xy) + _home()


def _motion(
    env: WidowXSimEnv,
    primitive: str,
    index: int,
    rng: np.random.Generator,
    place_xy: np.ndarray | None,
) -> list[Waypoint]:
    lay = env.layout
    if primitive == "pnp_plate":
        spec = L.OBJECTS[index]
        yaw = _yaw_for(env, index)
        if place_xy is None:
            # not always the exact centre: more varied goals
            place_xy = lay.plate_xy + rng.uniform(-0.015, 0.015, size=2)
        release_z = L.PLATE_TOP + spec.half_height + 0.002
        return _pick(env, index) + _place(place_xy, release_z, _release_yaw(env, index, place_xy))
    if primitive == "pnp_drawer":
        spec = L.OBJECTS[index]
        opening = env.scene_state().drawer_opening
        drop = L.drawer_drop_point(lay.drawer_xy, opening)
        wall_top = L.DRAWER_BOTTOM + L.DRAWER_SIZE[2]
        release_z = wall_top + 0.012 - GRASP_BELOW_CENTRE + spec.half_height
        return _pick(env, index) + _place(drop, release_z, 0.0)
    if primitive == "open_drawer":
        opening = env.scene_state().drawer_opening
        handle = L.handle_position(lay.drawer_xy, opening)
        pulled = L.handle_position(lay.drawer_xy, rng.uniform(0.082, 0.095))
        grip_z = handle[2] - 0.01  # pads straddle the bar over its whole height
        yaw = np.pi / 2  # fingers close along x, across the bar
        return [
            Waypoint(
                np.array([handle[0], handle[1], grip_z + 0.07]), yaw, 1.0, tol=0.01, max_steps=30
            ),
            Waypoint(
                np.array([handle[0], handle[1], grip_z]),
                yaw,
                1.0,
                tol=0.004,
                max_speed=0.03,
                precise=True,
            ),
            Waypoint(np.array([handle[0], handle[1], grip_z]), yaw, 0.0, hold=3, precise=True),
            Waypoint(
                np.array([pulled[0], pulled[1], grip_z]),
                yaw,
                0.0,
                tol=0.005,
                max_speed=0.025,
                precise=True,
            ),
            Waypoint(np.array([pulled[0], pulled[1], grip_z]), yaw, 1.0, hold=2),
            Waypoint(np.array([pulled[0], pulled[1], SAFE_Z]), yaw, 1.0, tol=0.01),
        ]
    raise ValueError(f"unknown primitive '{primitive}'; choose one of {PRIMITIVES}")


def waypoint_action(env: WidowXSimEnv, wp: Waypoint) -> np.ndarray:
    """The 7-d action that moves the tip towards a waypoint within the per-step bounds."""
    pose = env.ee_pose()
    delta = wp.xyz - pose[:3, 3]
    n = np.linalg.norm(delta)
    if n > wp.max_speed:
        delta *= wp.max_speed / n
    goal_rot = rpy_to_matrix([0.0, 0.0, wp.yaw]) @ GRIPPER_DOWN
    drpy = rotation_towards(pose[:3, :3], goal_rot, safety.MAX_DELTA_RPY)
    return np.concatenate([delta, drpy, [wp.gripper]])


def succeeded(env: WidowXSimEnv, primitive: str, index: int) -> bool:
    """Whether the primitive's goal holds in the current scene."""
    state = env.scene_state()
    if primitive == "pnp_plate":
        return scoring.on_plate(state, index)
    if primitive == "pnp_drawer":
        return scoring.in_drawer(state, index)
    return scoring.drawer_open(state)


def run_primitive(
    env: WidowXSimEnv,
    primitive: str,
    index: int,
    rng: np.random.Generator,
    noise: float = 0.0,
    record: bool = True,
    place_xy: np.ndarray | None = None,
) -> Episode:
    """Run one demonstration in the env's current scene; `noise` is the Gaussian action noise
    std as a fraction of the per-step bounds (0.05 m, 0.25 rad), added to the motion only.
    A plate pick-and-place succeeds only if the objects already on the plate stay there."""
    scale = noise * np.array([safety.MAX_DELTA_XYZ] * 3 + [safety.MAX_DELTA_RPY] * 3)
    images, proprio, actions = [], [], []
    obs = env.observation() if record else {"proprio": env.proprio()}
    failures_before = env.ik_failures
    already_on_plate = _on_plate(env)
    for wp in plan(env, primitive, index, rng, place_xy):
        steps, held = 0, 0
        while steps < wp.max_steps:
            pose = env.ee_pose()
            reached = np.linalg.norm(wp.xyz - pose[:3, 3]) < wp.tol and _yaw_ok(pose, wp.yaw)
            if reached:
                if held >= wp.hold:
                    break
                held += 1
            action = waypoint_action(env, wp)
            if noise > 0:
                # fine phases get a quarter of the noise: a teleoperator slows down there too
                action[:6] += rng.normal(0.0, scale) * (PRECISE_NOISE if wp.precise else 1.0)
            action = safety.clip_action(action)
            if record:
                images.append(obs["image"])
                proprio.append(obs["proprio"])
                actions.append(action.astype(np.float32))
            obs, *_ = env.step(action)
            steps += 1
    success = succeeded(env, primitive, index) and already_on_plate <= _on_plate(env)
    hold = np.zeros(7, dtype=np.float32)
    hold[6] = env.gripper_command  # the final step holds still with the gripper as it is
    if record:
        images.append(obs["image"])
        proprio.append(obs["proprio"])
        actions.append(hold)
    size = env.config.image_size
    return Episode(
        images=np.stack(images) if record else np.zeros((0, size, size, 3), np.uint8),
        proprio=np.stack(proprio) if record else np.zeros((0, 7), np.float32),
        actions=np.stack(actions) if record else np.zeros((0, 7), np.float32),
        success=success,
        primitive=primitive,
        object_index=index if primitive != "open_drawer" else -1,
        ik_failures=env.ik_failures - failures_before,
    )


def solution(env: WidowXSimEnv) -> list[tuple[str, int, np.ndarray | None]]:
    """The primitives, (name, object index, place xy) each, that solve env's task from its fresh
    scene and leave the objects where its goal image shows them."""
    objects = env.task_objects
    if env.task in scoring.DRAWER_TASKS:
        opened = [("open_drawer", -1, None)]
        return opened + (
            [("pnp_drawer", objects[0], None)] if env.task == "open_drawer_place" else []
        )
    slots = L.plate_slots(env.layout.plate_xy, len(objects))
    return [("pnp_plate", i, None if len(objects) == 1 else xy) for i, xy in zip(objects, slots)]


def _on_plate(env: WidowXSimEnv) -> set[int]:
    state = env.scene_state()
    return {i for i in range(len(L.OBJECTS)) if scoring.on_plate(state, i)}


def _yaw_ok(pose: np.ndarray, yaw: float) -> bool:
    goal = rpy_to_matrix([0.0, 0.0, yaw]) @ GRIPPER_DOWN
    cos = np.clip((np.trace(goal @ pose[:3, :3].T) - 1.0) / 2.0, -1.0, 1.0)
    return bool(np.arccos(cos) < 0.05)


def reset_for(
    env: WidowXSimEnv, primitive: str, seed: int
) -> tuple[int, np.random.Generator, np.ndarray | None]:
    """Reset the env for a primitive episode from `seed`: (object index, the rng that drives the
    demonstrator's own choices, where a plate pick-and-place sets its object down or None).

    A plate pick-and-place scene may start part-way through a plate task: for a plate layout of
    n = 1..4 objects (`layout.plate_slots`), k = 0..n-1 others already sit in its first k slots and
    the object goes to slot k. Chained, such episodes lead from a fresh scene to any plate task's
    goal, though each one moves a single object."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1]))
    opening = rng.uniform(0.08, 0.095) if primitive == "pnp_drawer" else rng.uniform(0.0, 0.02)
    env.reset(seed=seed, drawer_opening=opening)
    if primitive == "open_drawer":
        return -1, rng, None
    if primitive == "pnp_drawer":
        return int(rng.integers(len(L.OBJECTS))), rng, None
    count = int(rng.integers(1, len(L.OBJECTS) + 1))
    placed = int(rng.integers(count))
    order = rng.permutation(len(L.OBJECTS))
    slots = L.plate_slots(env.layout.plate_xy, count)
    jitter = rng.uniform(-SLOT_JITTER, SLOT_JITTER, size=(placed + 1, 2))
    env.put_on_plate(
        [
            (int(i), slots[j] + jitter[j], rng.uniform(-0.2, 0.2))
            for j, i in enumerate(order[:placed])
        ]
    )
    place_xy = None if count == 1 else slots[placed] + jitter[placed]
    return int(order[placed]), rng, place_xy
