"""The twin's MJCF, written from the WidowX kinematic constants and the scene layout.

Primitive geoms only (capsules, boxes, cylinders); nothing is copied from other repositories.
Only the gripper (palm and fingers) collides with the scene: the arm links are visual, which keeps
contacts cheap and the demonstrators' paths simple, and a real WidowX rarely touches the table
with anything but its gripper in these tasks.
"""

from __future__ import annotations

import numpy as np

from robot_client.sim import kinematics as K
from robot_client.sim import layout as L

PHYSICS_DT = 0.002  # s; 100 substeps per 0.2 s action period
CAMERA_NAME = "third_person"
TIP_SITE = "ee_gripper_link"
FINGER_JOINTS = ("left_finger", "right_finger")

# Fixed third-person camera like the Bridge setup's: across the table, facing the robot,
# looking down at the workspace.
CAMERA_POS = np.array([0.64, -0.30, 0.40])
CAMERA_TARGET = np.array([0.26, 0.04, 0.05])
CAMERA_FOVY = 45.0  # deg, vertical, for the 4:3 frame

_ARM = 'rgba="0.12 0.12 0.13 1"'
_GRIP = 'rgba="0.25 0.25 0.27 1"'


def _f(v) -> str:
    return " ".join(f"{float(x):.6g}" for x in np.atleast_1d(v))


def _camera_xyaxes(pos: np.ndarray, target: np.ndarray) -> str:
    forward = (target - pos) / np.linalg.norm(target - pos)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    return _f(np.concatenate([right, up]))


def _arm_xml() -> str:
    """The six-joint chain; bodies sit at the joint frames so the FK equals the PoE product."""
    off = K.JOINT_OFFSETS
    lim = np.rad2deg(K.JOINT_LIMITS)
    j = [
        f'<joint name="{n}" axis="{_f(a)}" range="{_f(lim[i])}" class="arm"/>'
        for i, (n, a) in enumerate(zip(K.JOINT_NAMES, K.JOINT_AXES, strict=True))
    ]
    tip = K.TIP_OFFSET[0]
    fo, fr = 0.066, K.FINGER_RANGE  # finger carriage along the gripper, slide range
    pad = 'type="box" size="0.0145 0.005 0.01" friction="1.5 0.02 0.002" condim="4" class="grip"'
    return f"""
    <body name="base_link" pos="0 0 0">
      <geom type="box" size="0.06 0.06 0.02" pos="0 0 0.02" {_ARM} class="visual"/>
      <geom type="cylinder" size="0.045 0.02" pos="0 0 0.05" {_ARM} class="visual"/>
      <body name="shoulder_link" pos="{_f(off[0])}" gravcomp="1">
        <inertial pos="0 0 0.02" mass="0.5" diaginertia="0.001 0.001 0.001"/>
        {j[0]}
        <geom type="cylinder" size="0.04 0.02" pos="0 0 0.015" {_ARM} class="visual"/>
        <body name="upper_arm_link" pos="{_f(off[1])}" gravcomp="1">
          <inertial pos="0.02 0 0.12" mass="0.4" diaginertia="0.003 0.003 0.0005"/>
          {j[1]}
          <geom type="capsule" fromto="0 0 0 {_f(off[2])}" size="0.022" {_ARM} class="visual"/>
          <body name="upper_forearm_link" pos="{_f(off[2])}" gravcomp="1">
            <inertial pos="0.08 0 0" mass="0.3" diaginertia="0.0005 0.002 0.002"/>
            {j[2]}
            <geom type="capsule" fromto="0 0 0 {_f(off[3])}" size="0.02" {_ARM} class="visual"/>
            <body name="lower_forearm_link" pos="{_f(off[3])}" gravcomp="1">
              <inertial pos="0.04 0 0" mass="0.2" diaginertia="0.0003 0.0005 0.0005"/>
              {j[3]}
              <geom type="capsule" fromto="0 0 0 {_f(off[4])}" size="0.018" {_ARM} class="visual"/>
              <body name="wrist_link" pos="{_f(off[4])}" gravcomp="1">
                <inertial pos="0.03 0 0" mass="0.1" diaginertia="0.0001 0.0001 0.0001"/>
                {j[4]}
                <geom type="capsule" fromto="0 0 0 {_f(off[5])}" size="0.017" {_ARM} class="visual"/>
                <body name="gripper_link" pos="{_f(off[5])}" gravcomp="1">
                  <inertial pos="0.03 0 0" mass="0.15" diaginertia="0.0001 0.0002 0.0002"/>
                  {j[5]}
                  <geom type="box" size="0.02 0.035 0.018" pos="0.035 0 0" {_GRIP} class="grip"/>
                  <site name="{TIP_SITE}" pos="{tip:.6f} 0 0" size="0.004" rgba="1 0 1 0.0"/>
                  <body name="left_finger_link" pos="{fo} {fr[1]} 0" gravcomp="1">
                    <inertial pos="0.015 0 0" mass="0.02" diaginertia="1e-5 1e-5 1e-5"/>
                    <joint name="left_finger" type="slide" axis="0 1 0" ref="{fr[1]}" range="{_f(fr)}" class="finger"/>
                    <geom pos="0.0146 -0.003 0" {pad}/>
                  </body>
                  <body name="right_finger_link" pos="{fo} {-fr[1]} 0" gravcomp="1">
                    <inertial pos="0.015 0 0" mass="0.02" diaginertia="1e-5 1e-5 1e-5"/>
                    <joint name="right_finger" type="slide" axis="0 -1 0" ref="{fr[1]}" range="{_f(fr)}" class="finger"/>
                    <geom pos="0.0146 0.003 0" {pad}/>
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>"""


def _box(name: str, center, half, rgba: str, extra: str = "") -> str:
    return f'<geom name="{name}" type="box" pos="{_f(center)}" size="{_f(half)}" rgba="{rgba}" {extra}/>'


def _drawer_xml() -> str:
    """Housing fixed on the table and the sliding drawer with its handle, in the housing frame."""
    d, w, h = L.HOUSING_SIZE
    t = L.WALL
    wood = "0.55 0.38 0.22 1"
    housing = [
        _box("housing_bottom", (0, 0, t / 2), (d / 2, w / 2, t / 2), wood),
        _box("housing_top", (0, 0, h - t / 2), (d / 2, w / 2, t / 2), wood),
        _box("housing_left", (0, w / 2 - t / 2, h / 2), (d / 2, t / 2, h / 2), wood),
        _box("housing_right", (0, -w / 2 + t / 2, h / 2), (d / 2, t / 2, h / 2), wood),
        _box("housing_back", (d / 2 - t / 2, 0, h / 2), (t / 2, w / 2, h / 2), wood),
    ]
    dd, dw, dh = L.DRAWER_SIZE
    dt = L.DRAWER_WALL
    z0 = L.DRAWER_BOTTOM
    x0 = -d / 2  # drawer front face when closed, flush with the housing
    paint = "0.8 0.7 0.55 1"
    box = [
        _box("drawer_floor", (x0 + dd / 2, 0, z0 + dt / 2), (dd / 2, dw / 2, dt / 2), paint),
        _box("drawer_front", (x0 + dt / 2, 0, z0 + dh / 2), (dt / 2, dw / 2, dh / 2), paint),
        _box("drawer_back", (x0 + dd - dt / 2, 0, z0 + dh / 2), (dt / 2, dw / 2, dh / 2), paint),
        _box(
            "drawer_left",
            (x0 + dd / 2, dw / 2 - dt / 2, z0 + dh / 2),
            (dd / 2, dt / 2, dh / 2),
            paint,
        ),
        _box(
            "drawer_right",
            (x0 + dd / 2, -dw / 2 + dt / 2, z0 + dh / 2),
            (dd / 2, dt / 2, dh / 2),
            paint,
        ),
    ]
    so, hl, hz = L.HANDLE_STANDOFF, L.HANDLE_HALF_LENGTH, L.HANDLE_Z
    metal = "0.7 0.7 0.75 1"
    handle = [
        _box(
            "handle_bar",
            (x0 - so, 0, hz),
            (0.006, hl, 0.006),
            metal,
            'friction="1.5 0.02 0.002" condim="4"',
        ),
        _box("handle_post_l", (x0 - so / 2, hl - 0.006, hz), (so / 2, 0.005, 0.005), metal),
        _box("handle_post_r", (x0 - so / 2, -hl + 0.006, hz), (so / 2, 0.005, 0.005), metal),
    ]
    lo, hi = L.DRAWER_RANGE
    return f"""
    <body name="drawer_housing" pos="0.38 0.13 0">
      {"".join(housing)}
      <body name="drawer">
        <inertial pos="{x0 + dd / 2} 0 {z0 + dh / 2}" mass="0.4" diaginertia="0.001 0.001 0.001"/>
        <joint name="drawer_slide" type="slide" axis="-1 0 0" range="{lo} {hi}" damping="3" frictionloss="0.3" armature="0.05" solreflimit="0.005 1"/>
        {"".join(box)}{"".join(handle)}
      </body>
    </body>"""


def _objects_xml() -> str:
    out = []
    for i, o in enumerate(L.OBJECTS):
        if o.shape == "box":
            geom = f'type="box" size="{o.half_width} {o.half_width} {o.half_height}"'
        else:
            geom = f'type="cylinder" size="{o.half_width} {o.half_height}"'
        x = 0.2 + 0.06 * i  # overwritten at every reset
        out.append(
            f"""
    <body name="{o.name}" pos="{x} -0.12 {o.half_height}">
      <freejoint name="{o.name}_joint"/>
      <geom {geom} mass="0.03" rgba="{_f(o.rgba)}" friction="1.2 0.02 0.002"/>
    </body>"""
        )
    return "".join(out)


def build_mjcf() -> str:
    """The whole scene (robot, table, objects, plate, drawer, camera) as an MJCF string."""
    lim_ctrl = K.JOINT_LIMITS
    kp = (600, 900, 700, 250, 250, 120)  # N m / rad; stiffer where the arm's lever is longer
    actuators = "".join(
        f'<position name="{n}_act" joint="{n}" kp="{kp[i]}" dampratio="1" ctrlrange="{_f(lim_ctrl[i])}" forcerange="-40 40"/>'
        for i, n in enumerate(K.JOINT_NAMES)
    )
    fr = K.FINGER_RANGE
    actuators += "".join(
        f'<position name="{n}_act" joint="{n}" kp="800" dampratio="1" ctrlrange="{_f(fr)}" forcerange="-8 8"/>'
        for n in FINGER_JOINTS
    )
    return f"""<mujoco model="widowx250s_twin">
  <compiler angle="degree" autolimits="true"/>
  <option timestep="{PHYSICS_DT}" integrator="implicitfast" cone="elliptic" impratio="5"/>
  <visual>
    <quality shadowsize="0" offsamples="0" numslices="12" numstacks="4" numquads="1"/>
    <global offwidth="640" offheight="480"/>
    <headlight ambient="0.45 0.45 0.45" diffuse="0.5 0.5 0.5" specular="0.05 0.05 0.05"/>
  </visual>
  <default>
    <default class="visual"><geom contype="0" conaffinity="0" group="1"/></default>
    <default class="grip"><geom contype="1" conaffinity="1" group="1"/></default>
    <default class="arm"><joint damping="0.5" armature="0.05"/></default>
    <default class="finger"><joint damping="0.2" armature="0.01"/></default>
  </default>
  <worldbody>
    <light name="top" pos="0.3 0 1.2" dir="0 0 -1" diffuse="0.45 0.45 0.45" castshadow="false"/>
    <camera name="{CAMERA_NAME}" pos="{_f(CAMERA_POS)}" xyaxes="{_camera_xyaxes(CAMERA_POS, CAMERA_TARGET)}" fovy="{CAMERA_FOVY}"/>
    <geom name="table" type="plane" pos="0.3 0 0" size="0.6 0.6 0.6" rgba="0.72 0.66 0.58 1"/>
    <geom name="wall" type="box" pos="-0.35 0 0.3" size="0.02 0.6 0.32" rgba="0.85 0.85 0.82 1" contype="0" conaffinity="0"/>
    <geom name="side_wall" type="box" pos="0.3 0.62 0.3" size="0.7 0.02 0.32" rgba="0.8 0.82 0.85 1" contype="0" conaffinity="0"/>
    <body name="plate" pos="0.3 -0.08 0">
      <geom name="plate" type="cylinder" size="{L.PLATE_RADIUS} {L.PLATE_TOP / 2}" pos="0 0 {L.PLATE_TOP / 2}" rgba="0.95 0.95 0.97 1"/>
      <geom type="cylinder" size="{L.PLATE_RADIUS * 0.7} 0.0005" pos="0 0 {L.PLATE_TOP + 0.0003}" rgba="0.6 0.75 0.85 1" contype="0" conaffinity="0"/>
    </body>
    {_arm_xml()}
    {_drawer_xml()}
    {_objects_xml()}
  </worldbody>
  <actuator>{actuators}</actuator>
</mujoco>"""
