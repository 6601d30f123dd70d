"""OpenCVCamera with a fake cv2.VideoCapture: newest frame only, its age, RGB order, failures."""

from __future__ import annotations

import threading
import time
from typing import Optional

import cv2
import numpy as np
import pytest

from robot_client.camera import CameraError, OpenCVCamera, parse_camera_source


class FakeCapture:
    """A 100 Hz device whose frame k is BGR (k, 1, 2) in every pixel. Like OpenCV, it takes a
    requested size only if it has that mode, and otherwise delivers its first mode."""

    instances: list = []

    def __init__(self, source, opened: bool = True, fail_after: Optional[int] = None,
                 modes=((64, 48), (640, 480))):
        self.source, self.opened, self.fail_after, self.modes = source, opened, fail_after, modes
        self.k = 0
        self.released = threading.Event()
        self.props = {}
        FakeCapture.instances.append(self)

    def isOpened(self):  # noqa: N802 (OpenCV's name)
        return self.opened

    def set(self, prop, value):
        self.props[prop] = value
        return True

    def read(self):
        time.sleep(0.01)
        if self.fail_after is not None and self.k >= self.fail_after:
            return False, None
        self.k += 1
        asked = (self.props.get(cv2.CAP_PROP_FRAME_WIDTH), self.props.get(cv2.CAP_PROP_FRAME_HEIGHT))
        width, height = asked if asked in self.modes else self.modes[0]
        frame = np.empty((height, width, 3), np.uint8)
        frame[...] = (self.k % 256, 1, 2)
        return True, frame

    def release(self):
        self.released.set()


@pytest.fixture
def fake_capture(monkeypatch):
    FakeCapture.instances.clear()
    monkeypatch.setattr(cv2, "VideoCapture", FakeCapture)
    return FakeCapture


def test_frames_are_the_newest_in_rgb_with_their_age(fake_capture):
    with OpenCVCamera(0, width=64, height=48) as camera:
        time.sleep(0.1)
        frame, age = camera.frame()
        device = fake_capture.instances[0]
        assert frame.shape == (48, 64, 3) and camera.frame_shape == (48, 64)
        assert tuple(frame[0, 0]) == (2, 1, frame[0, 0, 2])  # BGR (k, 1, 2) -> RGB (2, 1, k)
        assert device.k - int(frame[0, 0, 2]) <= 1  # the newest frame, not an old buffered one
        assert 0.0 <= age < 0.05
        assert device.props[cv2.CAP_PROP_FRAME_WIDTH] == 64
    assert device.released.is_set()


def test_a_camera_without_the_requested_size_is_refused_at_connect(monkeypatch, fake_capture):
    monkeypatch.setattr(cv2, "VideoCapture", lambda s: FakeCapture(s, modes=((1280, 720),)))
    camera = OpenCVCamera("/dev/video2", width=640, height=480)
    with pytest.raises(CameraError) as e:
        camera.connect()
    assert str(e.value) == ("camera '/dev/video2' delivers 1280x720 frames, not the 640x480 asked for: pass "
                            "--camera-width/--camera-height of a mode it has (`v4l2-ctl -d DEVICE "
                            "--list-formats-ext`), the training data's size where it has one")
    assert fake_capture.instances[-1].released.is_set()


def test_a_stalled_camera_shows_in_the_frame_age(monkeypatch, fake_capture):
    monkeypatch.setattr(cv2, "VideoCapture", lambda s: FakeCapture(s, fail_after=3))
    with OpenCVCamera(0, width=64, height=48) as camera:
        time.sleep(0.2)
        _, age = camera.frame()
        assert age > 0.1 and camera.read_failures > 0


def test_a_missing_camera_says_what_to_do(monkeypatch, fake_capture):
    monkeypatch.setattr(cv2, "VideoCapture", lambda s: FakeCapture(s, opened=False))
    with pytest.raises(CameraError, match="cannot be opened.*--camera"):
        OpenCVCamera("/dev/video9").connect()
    with pytest.raises(CameraError, match="not connected"):
        OpenCVCamera(0).frame()


def test_camera_source_parsing():
    assert parse_camera_source("0") == 0 and parse_camera_source("/dev/video2") == "/dev/video2"
