"""Helpers of the WidowX tests: the fake Interbotix in sys.modules, a scripted policy, a still camera."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Callable, Optional, Tuple

import numpy as np
from fake_interbotix import FakeWorld

from mqe_client.client import ActResult
from mqe_client.protocol import ActResponse, Timing
from robot_client.loop import ControlLoop, LoopSettings
from robot_client.records import TrialRecord, read_steps
from robot_client.robots.widowx import RESET_JOINTS, WidowXInterbotix, WidowXSettings

FINGERPRINT = "f" * 64
IMAGE_SIZE = (32, 32)


def install(monkeypatch, world: FakeWorld, **kwargs) -> FakeWorld:
    """The world's fake ROS and Interbotix packages in sys.modules for this test."""
    return world.install(monkeypatch.setitem, monkeypatch.delitem, **kwargs)


class ScriptedClient:
    """A PolicyClient stand-in answering `action_at(step)` at once, with the request's seq."""

    def __init__(self, action_at: Callable[[int], np.ndarray]):
        self.action_at = action_at
        self.goal_uploads = 1

    def act_async(self, image, seq, step, episode_id, timeout_s) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        response = ActResponse(np.asarray(self.action_at(step), np.float32), None, seq, FINGERPRINT,
                               Timing(0.0, 0.0, 0.0))
        future.set_result(ActResult(response, 0.1, False))
        return future

    def backoff_left_s(self) -> float:
        return 0.0


def still(step: int) -> np.ndarray:
    """Stay put, gripper open."""
    return np.array([0, 0, 0, 0, 0, 0, 1.0])


class StillCamera:
    """640x480 frames of one colour; `age_s` and `shape` can be changed while a trial runs."""

    source = "test-camera"

    def __init__(self, frame_shape: Optional[Tuple[int, int]] = (480, 640)):
        self.frame_shape = frame_shape
        self.shape = (480, 640)
        self.age_s = 0.01

    def connect(self) -> None: ...

    def frame(self):
        return np.full((*self.shape, 3), 90, np.uint8), self.age_s

    def close(self) -> None: ...


def connected(monkeypatch, world: FakeWorld, at_reset: bool = True, **settings) -> WidowXInterbotix:
    """A WidowXInterbotix connected to the world's fake arm, the arm at rest at the reset pose
    (without the seconds a real reset takes) unless `at_reset` is False."""
    install(monkeypatch, world)
    robot = WidowXInterbotix(WidowXSettings(**settings))
    robot.connect()
    if at_reset:
        world.driver.place(RESET_JOINTS["wx250s"])
        world.bot.arm.capture_joint_positions()
    return robot


def run_trial(robot, tmp_path, action_at=still, camera=None, steps: int = 10, hz: float = 10.0,
              on_step=None, **settings) -> tuple:
    """One trial of the control loop on `robot`: (outcome, steps.jsonl records)."""
    loop_settings = LoopSettings(hz=hz, max_steps=steps, request_deadline_s=0.5 / hz, **settings)
    record = TrialRecord(tmp_path, 1, {})
    loop = ControlLoop(robot, camera or StillCamera(), ScriptedClient(action_at), loop_settings, IMAGE_SIZE,
                       FINGERPRINT, threading.Event(), on_step=on_step)
    outcome = loop.run(record, "ep")
    record.finish(status=outcome.status, reason=outcome.reason)
    return outcome, read_steps(tmp_path / "steps.jsonl")


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll `condition` until true or `timeout_s` passes; its last value."""
    end = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)
    return condition()
