"""Logging set-up shared by the command-line entry points of `mqe_model`."""

from __future__ import annotations

import logging


def setup_logging(timestamps: bool = True, absl_level: int = logging.WARNING) -> None:
    """INFO lines on stderr (`time level logger: message`); absl quietened to `absl_level`.

    `force`: importing orbax installs a root handler, which would otherwise make this a no-op."""
    stamp = "%(asctime)s " if timestamps else ""
    logging.basicConfig(level=logging.INFO, format=f"{stamp}%(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("absl").setLevel(absl_level)
