"""The control loop: absolute deadlines, a server deadline per step, the safety path, the watchdog.

Each period: observe the arm, take the newest camera frame, check for faults (the robot's own:
driver, efforts, motor errors; the camera's: a frame too old or of the wrong size), send the frame
(resized to the policy's size) to /v1/act on a worker thread, wait for the answer at most until the
dispatch deadline, then
    raw action -> reject NaN/inf -> clip_action -> target_pose (from the measured pose, or from the
    previous target as Bridge's controller integrates; workspace clip) -> sticky gripper -> robot.apply.
No valid answer in time (late, unreachable, stale seq, malformed, non-finite) means the arm holds
for that step; K such steps in a row abort the trial. A fault aborts at once. Everything is counted
and logged per step.

Lockstep (the twin only): no wall clock at all. Each step waits for the server's answer (at most
the request deadline), then steps the twin by one period of simulated time, so a trial runs as
fast as server and simulation allow and its outcome does not depend on the machine's load.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import math
import threading
import time
from typing import Callable, Optional, Tuple

import numpy as np

from mqe_client.client import PolicyClient, ServerError
from mqe_client.images import preprocess_image
from robot_client import safety
from robot_client.camera import Camera, size_mismatch
from robot_client.records import TrialRecord
from robot_client.robots.base import Robot
from robot_client.transforms import matrix_to_rpy

logger = logging.getLogger(__name__)

SPIN_S = 0.002  # s before each deadline spent yielding rather than sleeping (see _wait_until)
# The request's own socket timeout outlasts the loop's wait by this much (s), so that a slow answer is
# always recorded as late rather than, by a race between two equal timeouts, as a failed request.
REQUEST_GRACE_S = 0.05
_SEQ = itertools.count(1)  # process-wide: a reply meant for an earlier step or trial never matches


@dataclasses.dataclass(frozen=True)
class LoopSettings:
    """What the loop needs from the CLI config."""

    hz: float = 5.0  # Hz, control rate
    max_steps: int = 120  # steps in the trial
    request_deadline_s: float = 0.15  # s, longest wait for a server answer
    max_consecutive_failures: int = 10  # steps in a row without a valid action that abort the trial
    sticky_steps: int = 2  # gripper switches after this many agreeing commands
    dry_run: bool = False  # never call robot.apply/hold: log what would have been sent
    abort_pose: str = "reset"  # after an abort: "reset" moves to the safe pose, "hold" stays
    dispatch_margin_s: float = 0.03  # s kept free at the end of a period for the safety path and apply
    lockstep: bool = False  # sim only: no pacing; wait for each answer (request_deadline_s), then step
    max_frame_age_s: float = 0.5  # s, a camera frame older than this aborts the trial
    action_frame: str = "measured"  # what an action's delta adds to: "measured" pose or "previous_target"

    def __post_init__(self) -> None:
        if self.action_frame not in safety.ACTION_FRAMES:
            raise ValueError(f"action_frame {self.action_frame!r} must be one of {safety.ACTION_FRAMES}")

    @property
    def period_s(self) -> float:
        """Seconds per step."""
        return 1.0 / self.hz


@dataclasses.dataclass
class Counters:
    """Per-trial counts of everything that did not go as planned."""

    steps: int = 0
    actions_applied: int = 0
    holds: int = 0
    clipped: int = 0  # actions whose per-step deltas or gripper were clipped
    workspace_clipped: int = 0  # targets pulled back into the workspace box
    nonfinite: int = 0  # answers with NaN or inf
    late: int = 0  # answers that missed the step's deadline
    stale: int = 0  # answers whose seq was not the request's
    request_failures: int = 0  # unreachable, HTTP errors, malformed answers
    deadline_misses: int = 0  # steps that overran their period
    ik_failures: int = 0
    goal_reuploads: int = 0
    lead_clipped: int = 0  # previous targets pulled back towards the measured pose (previous_target frame)
    longest_failure_run: int = 0


@dataclasses.dataclass
class TrialOutcome:
    """How a trial ended."""

    status: str  # "completed" or "aborted"
    reason: str | None  # why it aborted
    counters: Counters
    last_distance: float | None
    interrupted: bool = False  # ended by Ctrl-C (the operator wants the run to stop)


def executed_delta(current: np.ndarray, target: np.ndarray, gripper: float) -> np.ndarray:
    """The 7-d action actually commanded: target minus the pose it was added to, and the gripper sent."""
    out = np.empty(7)
    out[:3] = target[:3, 3] - current[:3, 3]
    out[3:6] = matrix_to_rpy(target[:3, :3] @ current[:3, :3].T)
    out[6] = gripper
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


class ControlLoop:
    """Runs one trial on a connected robot and camera against a client whose goal is set."""

    def __init__(self, robot: Robot, camera: Camera, client: PolicyClient, settings: LoopSettings,
                 image_size: tuple[int, int], policy_fingerprint: str,
                 stop_event: threading.Event | None = None,
                 on_step: Callable[[dict, np.ndarray], None] | None = None):
        self.robot, self.camera, self.client, self.s = robot, camera, client, settings
        self.image_size, self.fingerprint = image_size, policy_fingerprint
        self.stop_event = stop_event or threading.Event()
        self.on_step = on_step
        self.sticky = safety.StickyGripper(settings.sticky_steps)
        self._target: Optional[np.ndarray] = None  # the last target the arm took (previous_target frame)

    def _hold(self, counters: Counters) -> None:
        counters.holds += 1
        self._target = None  # the arm is told to stay where it is: that is the next delta's origin
        if not self.s.dry_run:
            self.robot.hold()

    def run(self, record: TrialRecord, episode_id: str) -> TrialOutcome:
        """Run until max_steps, an abort, Ctrl-C or the e-stop; always leaves the arm held."""
        c = Counters()
        self.sticky.reset(self.robot.observe().gripper)
        status, reason, last_distance = "completed", None, None
        interrupted = False
        self._target = None
        try:
            status, reason, last_distance = self._steps(record, episode_id, c)
            interrupted = status == "aborted" and bool(getattr(self.stop_event, "interrupted", False))
        except KeyboardInterrupt:
            self._hold(c)  # first thing: stop the arm
            status, reason, interrupted = "aborted", "operator stop (Ctrl-C)", True
        except BaseException:
            self._hold(c)
            raise
        if status == "aborted":
            logger.warning("trial aborted: %s", reason)
            if self.s.abort_pose == "reset" and not self.s.dry_run:
                try:
                    self.robot.safe_pose()
                except Exception:
                    logger.exception("moving to the safe pose failed; the arm holds where it is")
        return TrialOutcome(status, reason, c, last_distance, interrupted)

    def _wait_until(self, deadline: float) -> bool:
        """Sleep until `deadline` (time.monotonic); True as soon as the e-stop is set.

        The last SPIN_S are spent yielding in a loop instead of sleeping: on a loaded machine a
        sleeping thread is woken several ms late (measured: p99 3.5 ms sleeping, 1.5 ms this way).
        """
        while (left := deadline - time.monotonic()) > SPIN_S:
            if self.stop_event.wait(left - SPIN_S):
                return True
        while time.monotonic() < deadline:
            time.sleep(0)  # yields the CPU and the GIL (camera, video and request threads run)
        return self.stop_event.is_set()

    def _fault(self, frame: np.ndarray, frame_age: float) -> Optional[str]:
        """The first reason to end the trial now (robot or camera), as one line; None if none."""
        fault = self.robot.fault()
        if fault is not None:
            return fault
        if frame_age > self.s.max_frame_age_s:
            return (f"camera frame {frame_age * 1000:.0f} ms old (limit {self.s.max_frame_age_s * 1000:.0f} ms): "
                    "the camera stalled or its cable is loose; check it (`v4l2-ctl --list-devices`), then rerun")
        wanted = self.camera.frame_shape
        if wanted is not None and frame.shape[:2] != wanted:
            return size_mismatch(getattr(self.camera, "source", "camera"), frame.shape, wanted)
        return None

    def _steps(self, record: TrialRecord, episode_id: str,
               c: Counters) -> Tuple[str, Optional[str], Optional[float]]:
        period = self.s.period_s
        lockstep = self.s.lockstep
        t0 = time.monotonic() + (0.0 if lockstep else 0.01)
        slot = 0  # index of the period the next step starts in (missed periods are skipped)
        failures_in_row = 0
        last_distance = None
        for step in range(self.s.max_steps):
            deadline = t0 + slot * period
            if self.stop_event.is_set() if lockstep else self._wait_until(deadline):
                self._hold(c)
                return "aborted", getattr(self.stop_event, "reason", "operator stop (e-stop key)"), last_distance
            started = time.monotonic()
            flags: dict[str, bool] = {}
            if lockstep:  # t is the twin's clock (one period per step); wall_s the time really taken
                rec: dict = {"step": step, "t": round(step * period, 4), "lateness_ms": None,
                             "wall_s": round(started - t0, 4), "unix_time": round(time.time(), 4)}
            else:
                rec = {"step": step, "t": round(deadline - t0, 4), "lateness_ms": _ms(started - deadline),
                       "unix_time": round(time.time(), 4)}

            # -- observe
            state = self.robot.observe()  # first: the twin renders its camera frame here
            frame, frame_age = self.camera.frame()
            image = preprocess_image(frame, *self.image_size)
            observed = time.monotonic()
            rec.update(frame_age_ms=_ms(frame_age), observe_ms=_ms(observed - started),
                       ee_xyz=state.ee_pose[:3, 3].round(5).tolist())
            fault = self._fault(frame, frame_age)
            if fault is not None:
                self._hold(c)
                rec.update(flags={"fault": True, "held": True}, error=fault)
                record.steps.write(rec)
                c.steps += 1
                return "aborted", fault, last_distance

            # -- request, bounded by the dispatch deadline
            if lockstep:
                budget = self.s.request_deadline_s
                # a lost server: wait out the client's backoff instead of failing steps in a burst
                self.stop_event.wait(self.client.backoff_left_s())
            else:
                dispatch_by = deadline + period - self.s.dispatch_margin_s
                budget = max(0.0, min(self.s.request_deadline_s, dispatch_by - observed))
            seq = next(_SEQ)
            rec.update(seq=seq, request_budget_ms=_ms(budget))
            result, error = None, None
            future = self.client.act_async(image, seq, step, episode_id, max(budget, 0.005) + REQUEST_GRACE_S)
            try:
                result = future.result(timeout=budget)
            except concurrent.futures.TimeoutError:
                flags["late"] = True
                c.late += 1
                error = f"no answer within {budget * 1000:.0f} ms"
            except ServerError as e:
                flags["request_failed"] = True
                c.request_failures += 1
                error = e.message
            answered = time.monotonic()
            rec["request_ms"] = _ms(answered - observed)

            # -- check the answer
            raw = None
            if result is not None:
                resp = result.response
                rec.update(round_trip_ms=round(result.round_trip_ms, 3),
                           server_ms=dataclasses.asdict(resp.timing), distance=resp.distance)
                if result.goal_reuploaded:
                    flags["goal_reuploaded"] = True
                    c.goal_reuploads += 1
                raw = np.asarray(resp.action, dtype=np.float64)
                rec["raw_action"] = [x if math.isfinite(x) else str(x) for x in raw.tolist()]
                if resp.seq != seq:
                    flags["stale"] = True
                    c.stale += 1
                    error, raw = f"stale answer: seq {resp.seq}, expected {seq}", None
                elif resp.policy_fingerprint != self.fingerprint:
                    self._hold(c)
                    rec.update(flags={**flags, "held": True}, error="policy fingerprint changed")
                    record.steps.write(rec)
                    return "aborted", (f"the server's policy changed mid-trial (fingerprint "
                                       f"{resp.policy_fingerprint[:12]}, expected {self.fingerprint[:12]})"), last_distance
                elif raw.shape != (safety.ACTION_DIM,):
                    c.request_failures += 1
                    error, raw = f"action shape {raw.shape}, expected ({safety.ACTION_DIM},)", None
                elif not np.all(np.isfinite(raw)):
                    flags["nonfinite"] = True
                    c.nonfinite += 1
                    error, raw = "action contains NaN or inf", None
                else:
                    last_distance = resp.distance

            # -- act or hold
            if raw is not None:
                failures_in_row = 0
                clipped = safety.clip_action(raw)
                if not np.allclose(clipped, raw):
                    flags["clipped"] = True
                    c.clipped += 1
                    logger.info("step %d: action clipped to the per-step bounds: %s -> %s", step,
                                np.round(raw, 4).tolist(), np.round(clipped, 4).tolist())
                origin = state.ee_pose
                if self.s.action_frame == "previous_target" and self._target is not None:
                    origin, pulled = safety.lead_limited(self._target, state.ee_pose)
                    if pulled:
                        flags["lead_clipped"] = True
                        c.lead_clipped += 1
                    rec["origin_xyz"] = origin[:3, 3].round(5).tolist()
                target = safety.target_pose(origin, clipped)
                if not np.allclose(target[:3, 3], origin[:3, 3] + clipped[:3]):
                    flags["workspace_clipped"] = True
                    c.workspace_clipped += 1
                    logger.info("step %d: target clipped to the workspace at %s", step,
                                np.round(target[:3, 3], 4).tolist())
                gripper = self.sticky(clipped[6])
                executed = executed_delta(origin, target, gripper)
                rec["executed_action"] = executed.round(6).tolist()
                rec["target_xyz"] = target[:3, 3].round(5).tolist()
                taken = True
                if not self.s.dry_run:
                    applied = self.robot.apply(target, gripper)
                    c.actions_applied += 1
                    if applied.ik_failed:
                        flags["ik_failed"] = True
                        c.ik_failures += 1
                        taken = False  # the arm kept its last target
                if taken:
                    self._target = target
            else:
                failures_in_row += 1
                c.longest_failure_run = max(c.longest_failure_run, failures_in_row)
                flags["held"] = True
                self._hold(c)
            if self.s.dry_run:
                flags["dry_run"] = True
            done = time.monotonic()
            rec.update(dispatch_ms=_ms(done - answered), step_ms=_ms(done - started))

            next_deadline = t0 + (slot + 1) * period
            if not lockstep and done > next_deadline:
                flags["deadline_miss"] = True
                c.deadline_misses += 1
                slot += math.ceil((done - next_deadline) / period)  # skip, never burst to catch up
            slot += 1
            if error:
                rec["error"] = error
                logger.warning("step %d: %s; holding", step, error)
            rec["flags"] = flags
            record.steps.write(rec)
            c.steps += 1
            if self.on_step is not None:
                self.on_step(rec, frame)
            if failures_in_row >= self.s.max_consecutive_failures:
                return "aborted", (f"{failures_in_row} steps in a row without a valid action "
                                   f"(last: {error})"), last_distance
        return "completed", None, last_distance
