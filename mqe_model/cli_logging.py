"""Logging set-up shared by the command-line entry points of `mqe_model`."""

from __future__ import annotations

import logging
import warnings

# Warnings that simulator packages print on every environment they make, and that no user can act on:
# gymnasium on OGBench's float64 observation bounds, glfw on a machine without a display (rendering
# goes through EGL or OSMesa there).
SIMULATOR_NOISE = (
    r".*precision lowered by casting to float32",
    r".*The DISPLAY environment variable is missing",
)


def quiet_simulator_warnings() -> None:
    """Drop SIMULATOR_NOISE from this process's warnings (call it in each worker process too)."""
    for message in SIMULATOR_NOISE:
        warnings.filterwarnings("ignore", message=message, category=UserWarning)


def setup_logging(timestamps: bool = True, absl_level: int = logging.WARNING) -> None:
    """INFO lines on stderr (`time level logger: message`); absl quietened to `absl_level`; the
    simulators' warnings that nobody can act on dropped.

    `force`: importing orbax installs a root handler, which would otherwise make this a no-op."""
    stamp = "%(asctime)s " if timestamps else ""
    logging.basicConfig(level=logging.INFO, format=f"{stamp}%(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("absl").setLevel(absl_level)
    quiet_simulator_warnings()
