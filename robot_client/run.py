"""`mqe-robot`: run scored goal-conditioned trials on a WidowX 250 (or its twin) against the server.

    mqe-robot --task single_pnp --goal goal.png --robot widowx --camera 0 --trials 15 --operator jd
    mqe-robot --task single_pnp --robot sim --no-prompt            # rehearsal on the twin
    mqe-robot --task single_pnp --robot sim --no-prompt --pace lockstep   # the twin, unpaced
    mqe-robot capture-goal --out goal.png --robot widowx --camera 0

Bad input (a missing goal file, an unknown task, an unreachable server, a policy that does not fit
the robot) prints one line and exits with code 2 before the arm moves.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # run as a file (python robot_client/run.py): import from the repository root, and drop this
    # folder from the path, where http.py would shadow the standard library's http package
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import dataclasses
import datetime
import logging
import os
import subprocess
import uuid
from typing import List, Optional

import numpy as np

from robot_client.config import CaptureGoalConfig, ClientConfig, ClientError

logger = logging.getLogger("robot_client.run")

EXIT_BAD_INPUT = 2


def client_version() -> str:
    """The installed mqe-deploy version, or 'source' when run from a checkout without install."""
    from importlib import metadata

    try:
        return metadata.version("mqe-deploy")
    except metadata.PackageNotFoundError:
        return "source"


def git_commit() -> Optional[str]:
    """HEAD of the checkout the client runs from, with '-dirty' if it has local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "")


def load_goal(path: Path) -> np.ndarray:
    """The goal image as RGB uint8; ClientError with the fix if missing or unreadable."""
    import cv2

    if not path.is_file():
        raise ClientError(f"goal image {path} not found: capture one with `mqe-robot capture-goal --out {path}`")
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None or bgr.size == 0:
        raise ClientError(f"goal image {path} cannot be read as PNG or JPEG: capture it again")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def build_robot(robot: str, camera: Optional[str], task: str, seed: int, widowx=None,
                camera_size: tuple = (640, 480)):
    """The chosen backend and its camera (not yet connected); `widowx` is the WidowX's settings
    (WidowXSettings; None: the defaults), `camera_size` the (width, height) asked of the camera."""
    if robot == "sim":
        from robot_client.robots.sim import WidowXSim
        from robot_client.sim.scoring import SCORED_TASKS

        if task not in SCORED_TASKS:
            raise ClientError(f"the twin cannot set up task '{task}'; it has {', '.join(SCORED_TASKS)}")
        sim = WidowXSim(task=task, seed=seed)
        return sim, sim.camera
    from robot_client.camera import OpenCVCamera, parse_camera_source
    from robot_client.robots.widowx import WidowXInterbotix, WidowXSettings

    width, height = camera_size
    return (WidowXInterbotix(widowx or WidowXSettings()),
            OpenCVCamera(parse_camera_source(camera), width=width, height=height))


def _connect(robot, camera) -> None:
    from robot_client.camera import CameraError

    try:
        robot.connect()
        if camera is not getattr(robot, "camera", None):
            camera.connect()
    except (RuntimeError, CameraError) as e:  # interbotix or mujoco missing, camera absent
        robot.close()
        raise ClientError(str(e)) from None


def _config_for_meta(cfg: ClientConfig) -> dict:
    out = dataclasses.asdict(cfg)
    out["token"] = "<set>" if cfg.resolved_token() else None  # never write a secret to disk
    return out


def run_trials(cfg: ClientConfig) -> int:
    """Check the server, connect the robot, then run, record and score cfg.trials trials."""
    from eval_protocols.tasks import TaskError, get_task
    from mqe_client.client import MetadataMismatch, PolicyClient, ServerError, check_metadata
    from mqe_client.images import preprocess_image
    from robot_client import operator, safety
    from robot_client.loop import ControlLoop, LoopSettings
    from robot_client.records import TrialRecord, new_trial_dir
    from robot_client.safety import policy_action_frame

    try:
        task = get_task(cfg.task)
    except TaskError as e:
        raise ClientError(str(e)) from None
    goal_rgb = load_goal(cfg.goal) if cfg.goal is not None else None
    client = PolicyClient(cfg.server, cfg.resolved_token(), timeout_s=cfg.request_deadline_s)
    try:
        try:
            meta = client.metadata()
        except ServerError as e:
            raise ClientError(f"server {cfg.server} is unreachable or failing ({e.message}): start it "
                              "(mqe-serve) or pass --server URL") from None
        try:
            info = check_metadata(meta, cfg.policy, safety.ACTION_NAMES)
        except MetadataMismatch as e:
            raise ClientError(f"refusing to move the robot: {e}") from None
        if info.control_hz is not None and abs(info.control_hz - cfg.hz) > 1e-6:
            logger.warning("policy '%s' was trained at %g Hz; running at --hz %g", info.name, info.control_hz, cfg.hz)
        try:
            trained_frame = policy_action_frame(info.raw)
        except ValueError as e:
            raise ClientError(f"refusing to move the robot: {e}") from None
        action_frame = trained_frame if cfg.action_frame == "policy" else cfg.action_frame
        if action_frame != trained_frame:
            logger.warning("policy '%s' was trained on actions added to the %s pose; --action-frame %s adds "
                           "them to the %s pose", info.name, trained_frame, cfg.action_frame, action_frame)
        if not client.ready():
            raise ClientError(f"server {cfg.server} is not ready (GET /readyz): wait until it has loaded")
        if cfg.show:
            from robot_client.show import LiveView

            view = LiveView()
        else:
            view = None
        robot, camera = build_robot(cfg.robot, cfg.camera, task.name, cfg.seed,
                                    cfg.widowx_settings() if cfg.robot == "widowx" else None,
                                    (cfg.camera_width, cfg.camera_height))
        _connect(robot, camera)
        date = datetime.date.today()
        sheet = cfg.sheet or cfg.out / date.isoformat() / "sheet.csv"
        settings = LoopSettings(hz=cfg.hz, max_steps=cfg.max_steps, request_deadline_s=cfg.request_deadline_s,
                                max_consecutive_failures=cfg.max_consecutive_failures,
                                sticky_steps=cfg.sticky_steps, dry_run=cfg.dry_run, abort_pose=cfg.abort_pose,
                                lockstep=cfg.pace == "lockstep", max_frame_age_s=cfg.max_frame_age_s,
                                action_frame=action_frame)
        base_meta = {
            "server": cfg.server, "server_metadata": meta, "policy": info.raw,
            "policy_fingerprint": info.fingerprint, "client_version": client_version(),
            "git_commit": git_commit(), "config": _config_for_meta(cfg), "operator": cfg.operator,
            "task": task.name, "max_points": task.max_points, "robot": cfg.robot, "hz": cfg.hz,
            "image_size": list(info.image_size), "dry_run": cfg.dry_run, "pace": cfg.pace,
            "action_frame": action_frame, "policy_action_frame": trained_frame,
        }
        ctrl_c = operator.CtrlC()
        park = True
        try:
            ctrl_c.__enter__()
            for i in range(cfg.trials):
                if not cfg.no_prompt and not operator.confirm(
                        f"Trial {i + 1}/{cfg.trials} ({task.title}): set up the scene, then Enter to start "
                        "(q to quit): "):
                    break
                seed = cfg.seed + i
                if cfg.robot == "sim" or not cfg.dry_run:
                    try:
                        robot.reset(seed)  # dry runs never move the real arm; the twin needs its scene
                    except RuntimeError as e:  # the reset pose unreachable: the operator must look
                        raise ClientError(str(e)) from None
                goal = goal_rgb if goal_rgb is not None else robot.goal_image(max(info.image_size))
                try:
                    client.set_goal(preprocess_image(goal, *info.image_size), info.name)
                except ServerError as e:
                    raise ClientError(f"cannot upload the goal: {e.message}") from None
                trial_dir, n = new_trial_dir(cfg.out, info.name, task.name, date)
                episode_id = f"{date.isoformat()}-{info.name}-{task.name}-{n}-{uuid.uuid4().hex[:8]}"
                record = TrialRecord(trial_dir, n, {**base_meta, "episode_id": episode_id, "seed": seed,
                                                    "goal_source": str(cfg.goal) if cfg.goal else "sim"})
                record.save_goal(goal)
                record.start_video(camera, cfg.video_fps)
                stop = operator.StopRequest()
                loop = ControlLoop(robot, camera, client, settings, info.image_size, info.fingerprint, stop,
                                   on_step=view.update if view else None)
                if view:
                    view.start_trial(goal)
                logger.info("trial %d -> %s", n, trial_dir)
                outcome = None
                ctrl_c.arm(stop)
                try:
                    with operator.estop_listener(stop, enabled=not cfg.no_prompt):
                        outcome = loop.run(record, episode_id)
                finally:
                    ctrl_c.arm(None)
                    if outcome is None:  # Ctrl-C twice, or a fault in the client itself: the record says so
                        record.finish(status="aborted",
                                      reason=stop.reason if stop.interrupted else "client error (see the log)")
                record.finish(status=outcome.status, reason=outcome.reason,
                              counters=dataclasses.asdict(outcome.counters), last_distance=outcome.last_distance,
                              goal_uploads=client.goal_uploads)
                c = record.meta["counters"]
                print(f"trial {n}: {record.meta['status']}{' (' + record.meta['reason'] + ')' if record.meta['reason'] else ''}; "
                      f"{c['steps']} steps, {c['holds']} holds, {c['clipped']} clipped, {c['deadline_misses']} "
                      f"deadline misses, {c['ik_failures']} IK failures -> {trial_dir}", flush=True)
                _score(cfg, robot, task, record, info.name, info.fingerprint, sheet, date)
                if outcome.interrupted and cfg.no_prompt and i + 1 < cfg.trials:
                    # nobody is asked before the next trial: Ctrl-C means stop the series
                    print(f"stopped after trial {n} (Ctrl-C); {cfg.trials - i - 1} trial(s) not run", flush=True)
                    break
        except KeyboardInterrupt:
            park = False  # Ctrl-C outside a trial, or twice: the arm stays held where it is
            raise
        finally:
            ctrl_c.__exit__(None, None, None)
            _shut_down(cfg, robot, park)
            if camera is not getattr(robot, "camera", None):
                camera.close()
            if view:
                view.close()
    finally:
        client.close()
    return 0


def _shut_down(cfg: ClientConfig, robot, park: bool) -> None:
    """The sleep pose (if `park`, unless --shutdown-pose hold or a dry run), then hold and release
    the arm whatever happened; Ctrl-C during the move holds the arm where it is."""
    try:
        if park and cfg.shutdown_pose == "sleep" and not cfg.dry_run and robot.is_connected:
            print("moving the arm to its sleep pose (Ctrl-C holds it where it is)", flush=True)
            robot.park()
    except Exception:
        logger.exception("moving to the sleep pose failed; the arm holds where it is")
    finally:
        robot.__exit__(None, None, None)


def _score(cfg: ClientConfig, robot, task, record, policy: str, fingerprint: str, sheet: Path,
           date: datetime.date) -> None:
    """Points from the operator (or the twin's scorer with --no-prompt) into the sheet and meta.json."""
    from eval_protocols.sheets import SheetError, TrialRow, append_row
    from robot_client import operator

    if cfg.dry_run:
        return
    if cfg.no_prompt:
        if cfg.robot != "sim":
            logger.info("--no-prompt on the real arm: trial %d left unscored (score it in %s)", record.trial, sheet)
            return
        points = robot.score()
        notes = "auto-scored by the twin" + ("" if record.meta["status"] == "completed"
                                             else f"; aborted: {record.meta['reason']}")
    else:
        answer = operator.ask_points(task.max_points, record.meta["status"], record.meta["reason"])
        if answer is None:
            record.meta["score"] = None
            record.save_meta()
            return
        points, notes = answer
        if record.meta["status"] != "completed" and "aborted" not in notes:
            notes = f"aborted: {record.meta['reason']}" + (f"; {notes}" if notes else "")
    row = TrialRow(policy=policy, task=task.name, trial=record.trial, points=points, max_points=task.max_points,
                   operator=cfg.operator, date=date.isoformat(), policy_fingerprint=fingerprint, notes=notes,
                   trial_dir=os.path.relpath(record.dir, Path(sheet).parent))
    record.meta["score"] = {"points": points, "max_points": task.max_points, "notes": notes, "sheet": str(sheet)}
    record.save_meta()
    try:
        append_row(sheet, row)
        print(f"trial {record.trial}: {points}/{task.max_points} points -> {sheet}", flush=True)
    except (SheetError, OSError) as e:  # the trial's record keeps the score; the sheet can be fixed by hand
        logger.error("could not append trial %d to %s: %s (the score is in %s)", record.trial, sheet, e,
                     record.dir / "meta.json")


def capture_goal(cfg: CaptureGoalConfig) -> int:
    """Save the camera's current frame (the twin: its goal scene) as the goal image."""
    from robot_client import operator
    from robot_client.records import write_png

    if cfg.out.exists() and not cfg.overwrite:
        raise ClientError(f"{cfg.out} exists: choose another --out or pass --overwrite")
    robot, camera = build_robot(cfg.robot, cfg.camera, cfg.task, cfg.seed)
    if cfg.robot == "sim":
        _connect(robot, camera)
        try:
            robot.reset(cfg.seed)
            frame = robot.goal_image(256)
        finally:
            robot.close()
    else:
        from robot_client.camera import CameraError

        try:
            camera.connect()
        except CameraError as e:
            raise ClientError(str(e)) from None
        try:
            if not cfg.no_prompt and not operator.confirm(
                    "Arrange the scene as the goal, move the arm out of view, then Enter to capture (q to quit): "):
                return 1
            frame, age = camera.frame()
            logger.info("captured a %dx%d frame %.0f ms old", frame.shape[1], frame.shape[0], age * 1000)
        finally:
            camera.close()
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    write_png(cfg.out, frame)
    print(f"goal saved to {cfg.out} ({frame.shape[1]}x{frame.shape[0]})", flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Console entry point (`mqe-robot`)."""
    import tyro

    argv = list(sys.argv[1:] if argv is None else argv)
    capture = bool(argv) and argv[0] == "capture-goal"
    if capture:
        cfg = tyro.cli(CaptureGoalConfig, args=argv[1:], prog="mqe-robot capture-goal")
    else:
        cfg = tyro.cli(ClientConfig, args=argv, prog="mqe-robot")
    logging.basicConfig(level=cfg.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return capture_goal(cfg) if capture else run_trials(cfg)
    except ClientError as e:
        print(f"mqe-robot: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mqe-robot: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
