"""`WidowXSimEnv`: the MuJoCo twin behind the same 7-d, 5 Hz action interface as the real WidowX."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import weakref

import numpy as np

from mqe_client.images import preprocess_image
from robot_client import safety
from robot_client.sim import kinematics as K
from robot_client.sim import layout as L
from robot_client.sim import require_mujoco, scoring
from robot_client.sim.model import CAMERA_NAME, FINGER_JOINTS, PHYSICS_DT, TIP_SITE, build_mjcf
from robot_client.transforms import GRIPPER_DOWN, matrix_to_rotvec, pose_to_ee_state

mujoco = require_mujoco()
logger = logging.getLogger(__name__)

FRAME_ASPECT = 4 / 3  # the real camera's 640 x 480
_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    # free GL contexts before interpreter teardown; osmesa's free fails noisily once modules are gone
    for env in list(_LIVE):
        env.close()


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """Settings of the twin; the defaults mirror the real Bridge WidowX setup."""

    image_size: int = 128  # px, side of the square observation image (policy input)
    frame_size: tuple[int, int] = (640, 480)  # px, width and height of render(), the camera frame
    control_hz: float = safety.CONTROL_HZ  # action rate
    ik_iterations: int = 20  # damped least-squares iterations per step
    ik_damping: float = 0.01  # lambda of the damped least squares
    ik_pos_tol: float = 0.003  # m, a solution further than this from the target is an IK failure
    ik_rot_tol: float = 0.03  # rad
    sticky_steps: int = 2  # gripper switches after this many agreeing commands (as the real client)
    ramp_fraction: float = 0.6  # share of the action period over which joint targets are ramped
    max_steps: int = 150  # episode length after which `truncated` is true
    render_observations: bool = True  # False skips the image (demonstrator checks, benchmarks)

    def __post_init__(self) -> None:
        if self.image_size < 16:
            raise ValueError(
                f"image_size {self.image_size} is too small; use >= 16 (128 for Bridge)"
            )
        substeps = 1.0 / (self.control_hz * PHYSICS_DT)
        if abs(substeps - round(substeps)) > 1e-9:
            raise ValueError(f"control_hz {self.control_hz} must divide 1 / {PHYSICS_DT} s evenly")


class WidowXSimEnv:
    """The twin: reset a seeded scene, step 7-d Bridge actions at 5 Hz, render, score the task."""

    def __init__(self, task: str = "single_pnp", seed: int = 0, config: SimConfig | None = None):
        self.config = config or SimConfig()
        self.task = task
        self.task_object_count = scoring.task_object_count(task)  # raises on an unscorable task
        self._task = scoring.get_task(task)
        self.max_points = self._task.max_points
        self.model = mujoco.MjModel.from_xml_string(build_mjcf())
        self.data = mujoco.MjData(self.model)
        self._ik_data = mujoco.MjData(self.model)
        m = self.model
        self._site = m.site(TIP_SITE).id
        self._arm_qpos = np.array([m.joint(n).qposadr[0] for n in K.JOINT_NAMES])
        self._arm_dof = np.array([m.joint(n).dofadr[0] for n in K.JOINT_NAMES])
        self._finger_qpos = np.array([m.joint(n).qposadr[0] for n in FINGER_JOINTS])
        self._drawer_qpos = m.joint("drawer_slide").qposadr[0]
        self._object_qpos = np.array([m.joint(f"{o.name}_joint").qposadr[0] for o in L.OBJECTS])
        self._object_dof = np.array([m.joint(f"{o.name}_joint").dofadr[0] for o in L.OBJECTS])
        self._plate_body = m.body("plate").id
        self._housing_body = m.body("drawer_housing").id
        self._substeps = round(1.0 / (self.config.control_hz * m.opt.timestep))
        self._seed_seq = np.random.SeedSequence(seed)
        self._renderers: dict[tuple[int, int], object] = {}
        self._sticky = safety.StickyGripper(self.config.sticky_steps)
        self._q_reset = self._solve_reset_joints()
        self.ik_failures = 0  # IK failures since the last reset; step info reports each step's too
        self.layout: L.Layout | None = None
        self.steps = 0
        _LIVE.add(self)

    # ---- scene ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, drawer_opening: float = 0.0) -> dict[str, np.ndarray]:
        """New seeded scene; arm at the reset pose, gripper open. Without `seed` the next seed of
        the constructor's seed sequence is used, so a run of resets is deterministic too."""
        ss = np.random.SeedSequence(seed) if seed is not None else self._seed_seq.spawn(1)[0]
        rng = np.random.default_rng(ss)
        self.layout = L.sample_layout(rng)
        m, d = self.model, self.data
        m.body_pos[self._plate_body, :2] = self.layout.plate_xy
        m.body_pos[self._housing_body, :2] = self.layout.drawer_xy
        mujoco.mj_resetData(m, d)
        for i, spec in enumerate(L.OBJECTS):
            self._place_object(
                d, i, self.layout.objects_xy[i], spec.half_height, self.layout.objects_yaw[i]
            )
        d.qpos[self._drawer_qpos] = np.clip(drawer_opening, *L.DRAWER_RANGE)
        d.qpos[self._arm_qpos] = self._q_reset
        d.qpos[self._finger_qpos] = K.FINGER_RANGE[1]
        d.ctrl[:6] = self._q_reset
        d.ctrl[6:8] = K.FINGER_RANGE[1]
        self._sticky.reset(1.0)
        self.ik_failures = 0
        mujoco.mj_forward(m, d)
        mujoco.mj_step(m, d, nstep=50)  # let the objects settle onto the table
        mujoco.mj_forward(m, d)
        self.steps = 0
        return self.observation()

    def _place_object(self, d, index: int, xy: np.ndarray, z: float, yaw: float) -> None:
        adr = self._object_qpos[index]
        d.qpos[adr : adr + 3] = (xy[0], xy[1], z)
        d.qpos[adr + 3 : adr + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
        d.qvel[self._object_dof[index] : self._object_dof[index] + 6] = 0.0

    def put_on_plate(self, placements: list[tuple[int, np.ndarray, float]]) -> None:
        """Set objects down on the plate, (index, xy in m, yaw in rad) each, and let them settle:
        a scene part-way through a plate task."""
        self._require_reset()
        if not placements:
            return
        for index, xy, yaw in placements:
            self._place_object(self.data, index, xy, L.PLATE_TOP + L.OBJECTS[index].half_height, yaw)
        mujoco.mj_forward(self.model, self.data)
        mujoco.mj_step(self.model, self.data, nstep=50)
        mujoco.mj_forward(self.model, self.data)

    @property
    def task_objects(self) -> tuple[int, ...]:
        """Objects (indices into layout.OBJECTS) the current task instance uses, in order."""
        self._require_reset()
        return self.layout.order[: max(self.task_object_count, 1)]

    def scene_state(self) -> scoring.SceneState:
        """Object and drawer positions for the scorers."""
        self._require_reset()
        return scoring.SceneState(
            objects_pos=np.array([self.data.qpos[a : a + 3] for a in self._object_qpos]),
            plate_xy=self.layout.plate_xy.copy(),
            drawer_xy=self.layout.drawer_xy.copy(),
            drawer_opening=float(self.data.qpos[self._drawer_qpos]),
            task_objects=self.task_objects,
        )

    def object_yaw(self, index: int) -> float:
        """Yaw (rad) of object `index` about the vertical."""
        w, x, y, z = self.data.qpos[self._object_qpos[index] + 3 : self._object_qpos[index] + 7]
        return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))

    def score(self) -> int:
        """Points of the current scene for this env's task."""
        return scoring.score_task(self._task, self.scene_state())

    # ---- stepping ---------------------------------------------------------------------------
    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Apply one 7-d Bridge action for 0.2 s; returns (obs, progress, success, truncated, info)."""
        self._require_reset()
        action = safety.clip_action(action)
        target = safety.target_pose(self.ee_pose(), action)
        q_now = self.data.qpos[self._arm_qpos].copy()
        q_goal, ok, err = self._solve_ik(target, q_now)
        reason = None
        if not ok:
            at_limit = np.isclose(q_goal, K.JOINT_LIMITS[:, 0]) | np.isclose(
                q_goal, K.JOINT_LIMITS[:, 1]
            )
            reason = "joint_limit" if at_limit.any() else "unreachable"
            # as the real arm (set_ee_pose_matrix -> success False): do not move, count, report
            self.ik_failures += 1
            logger.debug("IK failed for target %s (error %.4f m / %.4f rad)", target[:3, 3], *err)
            q_goal = self.data.ctrl[:6].copy()
        gripper = self._sticky(action[6])
        lo, hi = K.FINGER_RANGE
        self.data.ctrl[6:8] = lo + gripper * (hi - lo)
        self._drive(q_goal)
        self.steps += 1
        points = self.score()
        obs = self.observation()
        info = {
            "ik_failed": not ok,
            "ik_error": err,  # (m, rad) from the target after the iterations
            "ik_failure_reason": reason,  # None, "joint_limit" or "unreachable"
            "ik_failures": self.ik_failures,
            "points": points,
            "gripper_command": gripper,
            "action_applied": action,
        }
        truncated = self.steps >= self.config.max_steps
        return obs, points / self.max_points, points >= self.max_points, truncated, info

    def _drive(self, q_goal: np.ndarray) -> None:
        """Ramp the joint set-points to q_goal over part of the period, then hold: a smooth move
        like interbotix's moving_time, which keeps grasped objects in the fingers."""
        m, d = self.model, self.data
        q_start = d.ctrl[:6].copy()
        ramp = max(1, round(self.config.ramp_fraction * self._substeps))
        chunks = 6
        done = 0
        for c in range(1, chunks + 1):
            n = round(c * ramp / chunks) - done
            d.ctrl[:6] = q_start + (q_goal - q_start) * (c / chunks)
            mujoco.mj_step(m, d, nstep=n)
            done += n
        mujoco.mj_step(m, d, nstep=self._substeps - done)
        mujoco.mj_forward(m, d)

    def _solve_ik(
        self, target: np.ndarray, q0: np.ndarray
    ) -> tuple[np.ndarray, bool, tuple[float, float]]:
        """Damped least squares on the tip site's Jacobian from q0; returns (q, success, errors)."""
        m, d = self.model, self._ik_data
        cfg = self.config
        q = q0.copy()
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        lam2 = cfg.ik_damping**2
        for _ in range(cfg.ik_iterations + 1):
            d.qpos[self._arm_qpos] = q
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            pos_err = target[:3, 3] - d.site_xpos[self._site]
            rot_err = matrix_to_rotvec(target[:3, :3] @ d.site_xmat[self._site].reshape(3, 3).T)
            err = (float(np.linalg.norm(pos_err)), float(np.linalg.norm(rot_err)))
            if err[0] < 1e-4 and err[1] < 1e-3:
                break
            mujoco.mj_jacSite(m, d, jacp, jacr, self._site)
            jac = np.vstack([jacp[:, self._arm_dof], jacr[:, self._arm_dof]])
            e = np.concatenate([pos_err, rot_err])
            dq = jac.T @ np.linalg.solve(jac @ jac.T + lam2 * np.eye(6), e)
            q = np.clip(q + dq, K.JOINT_LIMITS[:, 0], K.JOINT_LIMITS[:, 1])
        ok = err[0] <= cfg.ik_pos_tol and err[1] <= cfg.ik_rot_tol
        return q, ok, err

    def _solve_reset_joints(self) -> np.ndarray:
        """Joint angles of the reset pose (0.3, 0, 0.15), gripper down, from a nearby guess."""
        target = np.eye(4)
        target[:3, :3] = GRIPPER_DOWN
        target[:3, 3] = safety.RESET_XYZ
        q = np.array([0.0, -0.3, 0.6, 0.0, 1.2, 0.0])
        for _ in range(10):
            q, ok, _ = self._solve_ik(target, q)
            if ok:
                return q
        raise RuntimeError("the twin's reset pose is unreachable; check the kinematic constants")

    # ---- robot state ------------------------------------------------------------------------
    def set_joint_positions(self, q: np.ndarray) -> None:
        """Teleport the 6 arm joints to q (rad) and hold them there."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (6,):
            raise ValueError(f"expected 6 arm joint angles {K.JOINT_NAMES}, got shape {q.shape}")
        if not K.within_limits(q):
            raise ValueError(
                f"joint angles {q.tolist()} are outside the limits {K.JOINT_LIMITS.tolist()}"
            )
        self.data.qpos[self._arm_qpos] = q
        self.data.qvel[self._arm_dof] = 0.0
        self.data.ctrl[:6] = q
        mujoco.mj_forward(self.model, self.data)

    def joint_positions(self) -> np.ndarray:
        """The 6 arm joint angles (rad)."""
        return self.data.qpos[self._arm_qpos].copy()

    def ee_pose(self) -> np.ndarray:
        """4x4 pose of the gripper tip (interbotix ee_gripper_link) in the base frame."""
        pose = np.eye(4)
        pose[:3, :3] = self.data.site_xmat[self._site].reshape(3, 3)
        pose[:3, 3] = self.data.site_xpos[self._site]
        return pose

    @property
    def gripper_command(self) -> float:
        """The gripper command in force after the sticky filter (1 open, 0 closed)."""
        return self._sticky.state

    def gripper_opening(self) -> float:
        """Measured finger opening, 0 closed .. 1 open."""
        lo, hi = K.FINGER_RANGE
        return float(np.clip((self.data.qpos[self._finger_qpos].mean() - lo) / (hi - lo), 0.0, 1.0))

    def proprio(self) -> np.ndarray:
        """ee xyz, Bridge roll/pitch/yaw (relative to gripper down) and gripper opening (7,)."""
        return np.append(pose_to_ee_state(self.ee_pose()), self.gripper_opening()).astype(
            np.float32
        )

    # ---- rendering ---------------------------------------------------------------------------
    def _renderer(self, width: int, height: int):
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = mujoco.Renderer(self.model, height=height, width=width)
        return self._renderers[key]

    def render(self, width: int | None = None, height: int | None = None) -> np.ndarray:
        """RGB uint8 frame of the fixed third-person camera (640 x 480 like the real camera)."""
        w, h = width or self.config.frame_size[0], height or self.config.frame_size[1]
        r = self._renderer(w, h)
        r.update_scene(self.data, camera=CAMERA_NAME)
        return r.render()

    def render_observation(self, size: int | None = None) -> np.ndarray:
        """Square policy image: the 4:3 camera view squeezed to size x size with area averaging,
        the same geometry the real client gets by resizing its 640 x 480 frame."""
        size = size or self.config.image_size
        frame = self.render(round(size * FRAME_ASPECT), size)
        return preprocess_image(frame, size, size)

    def observation(self) -> dict[str, np.ndarray]:
        """The current observation: 'image' (if rendering observations) and 'proprio'."""
        obs = {"proprio": self.proprio()}
        if self.config.render_observations:
            obs["image"] = self.render_observation()
        return obs

    def goal_image(self, size: int | None = None) -> np.ndarray:
        """The task instance's goal image: this scene with its objects at their goal places and the
        arm at the reset pose. The simulation state is restored afterwards."""
        self._require_reset()
        m, d = self.model, self.data
        saved = (d.qpos.copy(), d.qvel.copy(), d.ctrl.copy())
        objects = self.task_objects
        if self.task in scoring.PNP_TASKS:
            slots = L.plate_slots(self.layout.plate_xy, self.task_object_count)
            for i, xy in zip(objects, slots, strict=False):
                self._place_object(d, i, xy, L.PLATE_TOP + L.OBJECTS[i].half_height, 0.0)
        else:
            opening = 0.09
            d.qpos[self._drawer_qpos] = opening
            if self.task == "open_drawer_place":
                xy = L.drawer_drop_point(self.layout.drawer_xy, opening)
                z = L.DRAWER_BOTTOM + L.DRAWER_WALL + L.OBJECTS[objects[0]].half_height
                self._place_object(d, objects[0], xy, z, 0.0)
        d.qpos[self._arm_qpos] = self._q_reset
        d.qpos[self._finger_qpos] = K.FINGER_RANGE[1]
        mujoco.mj_forward(m, d)
        image = self.render_observation(size)
        d.qpos[:], d.qvel[:], d.ctrl[:] = saved
        mujoco.mj_forward(m, d)
        return image

    def _require_reset(self) -> None:
        if self.layout is None:
            raise RuntimeError("WidowXSimEnv has no scene yet. Call .reset() first.")

    def close(self) -> None:
        """Free the renderers' GL contexts."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()
