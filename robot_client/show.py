"""`--show`: a window with the live frame, the goal and the distance-to-goal curve (OpenCV HighGUI)."""

from __future__ import annotations

import logging

import numpy as np

from robot_client.config import ClientError

logger = logging.getLogger(__name__)

PANEL = 320  # px, side of each of the three panels


class LiveView:
    """One OpenCV window, refreshed from the loop after each step (cheap: a resize and a waitKey)."""

    def __init__(self, window: str = "mqe-robot") -> None:
        import cv2

        self.window = window
        try:
            cv2.namedWindow(window, cv2.WINDOW_AUTOSIZE)
        except cv2.error:
            raise ClientError("--show needs a display and OpenCV with windows (opencv-python, not "
                              "opencv-python-headless): install it or drop --show") from None
        self.goal = np.zeros((PANEL, PANEL, 3), np.uint8)
        self.distances: list[float] = []

    def start_trial(self, goal: np.ndarray) -> None:
        """Show a new goal and clear the curve."""
        import cv2

        self.goal = cv2.resize(goal, (PANEL, PANEL), interpolation=cv2.INTER_AREA)
        self.distances = []

    def _curve(self) -> np.ndarray:
        import cv2

        img = np.full((PANEL, PANEL, 3), 255, np.uint8)
        d = [x for x in self.distances if x is not None]
        if len(d) >= 2:
            top = max(max(d), 1e-6)
            pts = np.array([[int(i * (PANEL - 1) / (len(d) - 1)), int((PANEL - 20) * (1 - v / top)) + 10]
                            for i, v in enumerate(d)], np.int32)
            cv2.polylines(img, [pts], False, (200, 60, 0), 2)
            cv2.putText(img, f"d = {d[-1]:.1f} steps", (8, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1)
        return img

    def update(self, record: dict, frame: np.ndarray) -> None:
        """Add one step's frame and distance."""
        import cv2

        self.distances.append(record.get("distance"))
        live = cv2.resize(frame, (PANEL, PANEL), interpolation=cv2.INTER_AREA)
        canvas = np.concatenate([live, self.goal, self._curve()], axis=1)
        cv2.imshow(self.window, cv2.cvtColor(canvas, cv2.COLOR_RGB2BGR))
        cv2.waitKey(1)

    def close(self) -> None:
        """Close the window."""
        import cv2

        cv2.destroyWindow(self.window)
