"""Scene geometry and seeded randomisation of the twin's table (numpy only, no mujoco).

All positions are in the robot base frame, whose z = 0 is the table top (the base sits on it).
The scorers and demonstrators read the same constants as the MJCF builder.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class ObjectSpec:
    """One small graspable object."""

    name: str  # body name in the model, e.g. "red_cube"
    shape: str  # "box" (a cube) or "cylinder" (upright)
    half_width: float  # m, half the side of the cube or the cylinder's radius
    half_height: float  # m, half the height; the centre rests at this z on the table
    rgba: tuple[float, float, float, float]


OBJECTS = (
    ObjectSpec("red_cube", "box", 0.0125, 0.0125, (0.85, 0.1, 0.1, 1.0)),
    ObjectSpec("green_cylinder", "cylinder", 0.0125, 0.016, (0.1, 0.7, 0.15, 1.0)),
    ObjectSpec("blue_cube", "box", 0.0125, 0.0125, (0.1, 0.25, 0.9, 1.0)),
    ObjectSpec("yellow_cylinder", "cylinder", 0.0125, 0.016, (0.95, 0.85, 0.1, 1.0)),
)
OBJECT_NAMES = tuple(o.name for o in OBJECTS)

PLATE_RADIUS = 0.06  # m
PLATE_TOP = 0.008  # m, height of the plate's upper face above the table

# Drawer housing, in its own frame: origin on the table at the housing's centre, x pointing away
# from the robot (the drawer opens towards -x, i.e. towards the robot).
HOUSING_SIZE = (0.14, 0.15, 0.085)  # m, depth (x), width (y), height (z)
WALL = 0.006  # m, housing wall thickness
DRAWER_SIZE = (0.13, 0.134, 0.055)  # m, outer depth, width, height of the sliding box
DRAWER_WALL = 0.005  # m
DRAWER_BOTTOM = WALL + 0.001  # m, z of the drawer box's underside
DRAWER_RANGE = (0.0, 0.10)  # m, slide joint range; the upper stop keeps 3 cm of it on its base
HANDLE_STANDOFF = 0.05  # m, handle bar distance in front of the drawer face (room for a finger)
HANDLE_Z = DRAWER_BOTTOM + 0.033  # m, handle bar height above the table
HANDLE_HALF_LENGTH = 0.04  # m, half the bar's length along y
DRAWER_OPEN_THRESHOLD = 0.07  # m, opening that leaves room to put an object in (scoring)
DRAWER_STOP_TOLERANCE = 0.002  # m, the stop is a soft constraint: a hard pull sinks into it ~0.3 mm


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where things are on the table for one seeded scene."""

    objects_xy: np.ndarray  # (4, 2) object centres, in OBJECTS order
    objects_yaw: np.ndarray  # (4,) rad
    plate_xy: np.ndarray  # (2,)
    drawer_xy: np.ndarray  # (2,) housing centre
    order: tuple[int, ...]  # seeded object order; a task with i objects uses order[:i]


def drawer_front_x(drawer_xy: np.ndarray, opening: float) -> float:
    """x of the drawer's front face for a given opening (m)."""
    return float(drawer_xy[0] - HOUSING_SIZE[0] / 2 - opening)


def handle_position(drawer_xy: np.ndarray, opening: float) -> np.ndarray:
    """Centre of the drawer handle bar in the base frame."""
    return np.array([drawer_front_x(drawer_xy, opening) - HANDLE_STANDOFF, drawer_xy[1], HANDLE_Z])


def drawer_interior(drawer_xy: np.ndarray, opening: float) -> tuple[np.ndarray, np.ndarray]:
    """Low and high corners (base frame) of the drawer box's inside."""
    front = drawer_front_x(drawer_xy, opening)
    low = np.array(
        [
            front + DRAWER_WALL,
            drawer_xy[1] - DRAWER_SIZE[1] / 2 + DRAWER_WALL,
            DRAWER_BOTTOM + DRAWER_WALL,
        ]
    )
    high = np.array(
        [
            front + DRAWER_SIZE[0] - DRAWER_WALL,
            drawer_xy[1] + DRAWER_SIZE[1] / 2 - DRAWER_WALL,
            DRAWER_BOTTOM + DRAWER_SIZE[2],
        ]
    )
    return low, high


def drawer_drop_point(drawer_xy: np.ndarray, opening: float) -> np.ndarray:
    """Centre (xy) of the part of the open drawer that sticks out of the housing."""
    front = drawer_front_x(drawer_xy, opening)
    housing_front = drawer_xy[0] - HOUSING_SIZE[0] / 2
    return np.array([(front + DRAWER_WALL + housing_front) / 2, drawer_xy[1]])


def sample_layout(rng: np.random.Generator) -> Layout:
    """Seeded placement of the drawer, plate and four objects, keeping them apart and reachable."""
    for _ in range(1000):
        drawer_xy = np.array([rng.uniform(0.36, 0.40), rng.uniform(0.11, 0.16)])
        plate_xy = np.array([rng.uniform(0.24, 0.34), rng.uniform(-0.10, -0.05)])
        # the drawer's keep-out box covers the housing, the fully open drawer and the handle reach
        keep_low = np.array(
            [
                drawer_xy[0] - HOUSING_SIZE[0] / 2 - DRAWER_RANGE[1] - HANDLE_STANDOFF - 0.05,
                drawer_xy[1] - HOUSING_SIZE[1] / 2 - 0.05,
            ]
        )
        keep_high = np.array([drawer_xy[0] + HOUSING_SIZE[0] / 2 + 0.02, 1.0])
        placed: list[np.ndarray] = []
        for _ in range(400):
            xy = np.array([rng.uniform(0.17, 0.40), rng.uniform(-0.13, 0.20)])
            if np.all(xy > keep_low) and np.all(xy < keep_high):
                continue
            if np.linalg.norm(xy - plate_xy) < PLATE_RADIUS + 0.035:
                continue
            if any(np.linalg.norm(xy - p) < 0.065 for p in placed):
                continue
            placed.append(xy)
            if len(placed) == len(OBJECTS):
                break
        if len(placed) == len(OBJECTS):
            return Layout(
                objects_xy=np.array(placed),
                objects_yaw=rng.uniform(-np.pi / 4, np.pi / 4, size=len(OBJECTS)),
                plate_xy=plate_xy,
                drawer_xy=drawer_xy,
                order=tuple(int(i) for i in rng.permutation(len(OBJECTS))),
            )
    raise RuntimeError("could not place the scene's objects apart; widen the sampling regions")


def plate_slots(plate_xy: np.ndarray, count: int) -> np.ndarray:
    """Goal centres (xy) of `count` objects on the plate, spread so they do not overlap."""
    if count == 1:
        return plate_xy[None, :].copy()
    angles = np.pi / 4 + 2 * np.pi * np.arange(count) / count
    radius = 0.024 if count > 2 else 0.02
    return plate_xy + radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
