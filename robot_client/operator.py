"""What the operator types: start confirmation, the trial's points and notes, and the e-stop key."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import sys
import threading
from typing import Callable, Iterator, Optional, TextIO, Tuple

logger = logging.getLogger(__name__)

ESTOP_KEYS = (" ", "q", "\x1b")  # space, q or Esc stop the arm during a trial


def ask_points(max_points: int, status: str, reason: Optional[str],
               read: Callable[[str], str] = input, out: TextIO = sys.stdout) -> Optional[Tuple[int, str]]:
    """Ask for the trial's points (0..max_points) and notes; None if the operator skips the trial.

    Re-asks until the answer is a whole number in range; 's' skips (nothing goes to the sheet).
    """
    if status != "completed":
        print(f"The trial was aborted ({reason}). Score what the scene shows, or 's' to leave it "
              "out of the sheet.", file=out)
    while True:
        answer = read(f"Points (0..{max_points}, s to skip): ").strip().lower()
        if answer in ("s", "skip"):
            return None
        try:
            points = int(answer)
        except ValueError:
            print(f"'{answer}' is not a whole number; type 0..{max_points}, or s", file=out)
            continue
        if not 0 <= points <= max_points:
            print(f"{points} is outside 0..{max_points}", file=out)
            continue
        break
    notes = read("Notes (Enter for none): ").strip().replace("\n", " ")
    return points, notes


def confirm(prompt: str, read: Callable[[str], str] = input) -> bool:
    """Enter (or y) continues; q or n says no."""
    return read(prompt).strip().lower() not in ("q", "n", "no", "quit")


class StopRequest(threading.Event):
    """The trial's stop flag, with why it was set: the e-stop key, or Ctrl-C."""

    reason = "operator stop (e-stop key)"
    interrupted = False  # set by Ctrl-C: with --no-prompt the series stops too

    def interrupt(self) -> None:
        """Ctrl-C: stop the trial the way the e-stop key does."""
        self.reason, self.interrupted = "operator stop (Ctrl-C)", True
        self.set()


class CtrlC:
    """While active, Ctrl-C (SIGINT) stops the armed trial like the e-stop key: the loop holds the
    arm, then moves it to the safe pose, all through a ROS context that is still up (ROS's own
    handlers are off). Ctrl-C again, or with no trial running, raises KeyboardInterrupt: the arm
    is held where it is on the way out."""

    def __init__(self) -> None:
        self._stop: Optional[StopRequest] = None
        self._previous = None

    def __enter__(self) -> CtrlC:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def arm(self, stop: Optional[StopRequest]) -> None:
        """The trial whose stop flag Ctrl-C sets (None between trials)."""
        self._stop = stop

    def _handle(self, signum, frame) -> None:
        stop = self._stop
        if stop is None or stop.is_set():
            raise KeyboardInterrupt
        logger.warning("Ctrl-C: holding the arm and ending the trial (Ctrl-C again to stop at once)")
        stop.interrupt()


@contextlib.contextmanager
def estop_listener(stop_event: threading.Event, enabled: bool = True) -> Iterator[bool]:
    """While active, space/q/Esc on a terminal set `stop_event`; yields whether it listens.

    The terminal is put in cbreak mode (keys arrive without Enter) and restored on exit. Without a
    TTY (pipes, tests, --no-prompt) only Ctrl-C stops a trial.
    """
    if not enabled or not sys.stdin.isatty():
        yield False
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                key = os.read(fd, 1).decode(errors="ignore")
                if key in ESTOP_KEYS:
                    logger.warning("e-stop key pressed: holding the arm")
                    stop_event.set()

    tty.setcbreak(fd)
    thread = threading.Thread(target=listen, name="estop", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        done.set()
        thread.join(timeout=1.0)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
