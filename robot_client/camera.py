"""Cameras: the `Camera` interface and `OpenCVCamera`, which always hands out the newest frame.

OpenCV's capture buffers several frames; reading on demand would give the loop a frame from the
past. A background thread reads continuously and keeps only the newest frame and when it arrived,
so `frame()` never blocks on the device and the loop logs each frame's age.
"""

from __future__ import annotations

import abc
import logging
import threading
import time
from typing import Optional, Tuple, Union

import numpy as np

logger = logging.getLogger(__name__)


class CameraError(RuntimeError):
    """The camera cannot be opened or stopped delivering frames."""


class Camera(abc.ABC):
    """A source of RGB uint8 frames with their age."""

    frame_shape: Optional[Tuple[int, int]] = None  # (height, width) every frame must have; None: any

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the device and start delivering frames."""

    @abc.abstractmethod
    def frame(self) -> tuple[np.ndarray, float]:
        """The newest RGB uint8 (H, W, 3) frame and its age in seconds."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the device; safe to call twice."""

    def __enter__(self) -> Camera:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_camera_source(source: str) -> Union[int, str]:
    """'0' -> 0 (an OpenCV index); anything else (a /dev path, a URL, a file) stays a string."""
    return int(source) if source.strip().isdigit() else source


def size_mismatch(source, shape: Tuple[int, ...], wanted: Tuple[int, int]) -> str:
    """The line for a camera delivering `shape` frames instead of (height, width) `wanted`."""
    return (f"camera {source!r} delivers {shape[1]}x{shape[0]} frames, not the {wanted[1]}x{wanted[0]} asked "
            "for: pass --camera-width/--camera-height of a mode it has (`v4l2-ctl -d DEVICE "
            "--list-formats-ext`), the training data's size where it has one")


class OpenCVCamera(Camera):
    """A cv2.VideoCapture read by a background thread that keeps only the newest frame."""

    def __init__(self, source: Union[int, str], width: int = 640, height: int = 480,
                 first_frame_timeout_s: float = 5.0):
        self.source = source
        self.width, self.height = width, height
        self.frame_shape = (height, width)
        self.first_frame_timeout_s = first_frame_timeout_s
        self._capture = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._new_frame = threading.Condition()
        self._frame: np.ndarray | None = None
        self._stamp = 0.0  # time.monotonic() when the newest frame was read
        self.frames_read = 0
        self.read_failures = 0

    def connect(self) -> None:
        """Open the device, start the reader thread and wait for a first frame."""
        import cv2

        capture = cv2.VideoCapture(self.source)
        if not capture.isOpened():
            raise CameraError(
                f"camera {self.source!r} cannot be opened: check the cable and permissions, list "
                "devices with `v4l2-ctl --list-devices`, and pass --camera INDEX_OR_DEVICE"
            )
        capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
        capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
        capture.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # a hint only; the thread is what guarantees newness
        self._capture = capture
        self._stop.clear()
        self._thread = threading.Thread(target=self._read_forever, name="camera-reader", daemon=True)
        self._thread.start()
        with self._new_frame:
            if not self._new_frame.wait_for(lambda: self._frame is not None, self.first_frame_timeout_s):
                self.close()
                raise CameraError(f"camera {self.source!r} opened but gave no frame in "
                                  f"{self.first_frame_timeout_s:g} s")
            shape = self._frame.shape
        if shape[:2] != self.frame_shape:
            self.close()
            # OpenCV ignores a size the device has no mode for and delivers another one
            raise CameraError(size_mismatch(self.source, shape, self.frame_shape))
        logger.info("camera %r: %s frames", self.source, shape)

    def _read_forever(self) -> None:
        import cv2

        while not self._stop.is_set():
            ok, bgr = self._capture.read()
            stamp = time.monotonic()
            if not ok or bgr is None:
                self.read_failures += 1
                time.sleep(0.01)  # a device hiccup: do not spin; frame() reports the growing age
                continue
            rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)  # OpenCV delivers BGR; policies see RGB
            with self._new_frame:
                self._frame, self._stamp = rgb, stamp
                self.frames_read += 1
                self._new_frame.notify_all()

    def frame(self) -> tuple[np.ndarray, float]:
        """The newest RGB frame and its age in seconds."""
        with self._new_frame:
            if self._frame is None:
                raise CameraError(f"camera {self.source!r} is not connected. Run .connect() first.")
            return self._frame, time.monotonic() - self._stamp

    def close(self) -> None:
        """Stop the reader thread and release the device."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._capture is not None:
            self._capture.release()
            self._capture = None
