"""Training metrics: a JSONL file in the workdir, plus TensorBoard or W&B only when asked."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
# Written once a run's updates are done and its last checkpoint is on disk; the evaluations still
# queued run on the CPUs after it, so a scheduler may hand the run's GPU to the next run.
TRAINED_FILE = "trained.json"


def truncate_after(path: Path, step: int) -> None:
    """Drop lines logged after `step` (a preempted run's tail that the resumed run will redo)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= step]
    path.write_text("".join(line + "\n" for line in kept))


def read_evaluations(workdir: Path, key: str = "eval/success") -> list[dict[str, Any]]:
    """The run's evaluation rows (those with `key`) from metrics.jsonl, one per step (latest wins), by step."""
    rows: dict[int, dict[str, Any]] = {}
    path = workdir / METRICS_FILE
    for line in path.read_text().splitlines() if path.is_file() else []:
        row = json.loads(line)
        if key in row:
            rows[int(row["step"])] = row
    return [rows[step] for step in sorted(rows)]


class MetricsWriter:
    """Appends one JSON object per line to `<workdir>/metrics.jsonl`; mirrors to TB/W&B if enabled."""

    def __init__(self, workdir: Path, tensorboard: bool = False, wandb_project: str | None = None,
                 run_config: dict[str, Any] | None = None, enabled: bool = True):
        self.enabled = enabled
        self._file = open(workdir / METRICS_FILE, "a") if enabled else None  # noqa: SIM115
        self._tb = self._wandb = None
        if enabled and tensorboard:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                raise ValueError("--tensorboard needs tensorboardX: pip install tensorboardX") from None
            self._tb = SummaryWriter(str(workdir / "tensorboard"))
        if enabled and wandb_project:
            try:
                import wandb
            except ImportError:
                raise ValueError("--wandb-project needs wandb: pip install wandb") from None
            self._wandb = wandb.init(project=wandb_project, config=run_config, dir=str(workdir))

    def write(self, step: int, values: dict[str, Any]) -> None:
        """Record `values` (floats, or anything JSON can hold) at `step`."""
        if not self.enabled:
            return
        self._file.write(json.dumps({"step": step, **values}) + "\n")
        self._file.flush()
        scalars = {k: v for k, v in values.items() if isinstance(v, int | float)}
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        """Flush and close every sink."""
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
