"""`mqe-export`: a serving-only copy of a checkpoint (parameters and metadata, no optimizer state).

    mqe-export --checkpoint runs/mqe --out policies/mqe     # latest step of the run

The copy is a step directory `<out>/<step>/` that `mqe-serve --policy NAME=<out>` and
`mqe_model.policy.load_policy` read like any other; it is about a third of the training
checkpoint (Adam's two moments are left behind), which is what makes a policy small enough to
ship inside the repository. The copy is loaded back and its fingerprint compared before the
command reports success.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
from pathlib import Path

import tyro

from mqe_model import checkpoints
from mqe_model.checkpoints import CheckpointError
from mqe_model.cli_logging import setup_logging

logger = logging.getLogger(__name__)

SERVING_ITEMS = ("params", checkpoints.METADATA_FILE.parts[0], "_CHECKPOINT_METADATA")


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Copy the parts of a checkpoint that serving needs."""

    checkpoint: Path  # a step directory, a checkpoints root or a run workdir (latest step)
    out: Path  # destination root; the step directory <out>/<step>/ is created
    overwrite: bool = False  # replace an existing <out>/<step>/


def export(cfg: ExportConfig) -> Path:
    """Write `<out>/<step>/` and check that it loads with the same fingerprint; returns its path."""
    from mqe_model.policy import load_policy

    step_dir = checkpoints.resolve_step_dir(cfg.checkpoint)
    metadata = checkpoints.read_metadata(step_dir)
    if not (step_dir / "params").is_dir():
        raise CheckpointError(f"{step_dir}: has no params/ item; not a checkpoint written by mqe-train")
    dest = cfg.out / str(int(metadata["step"]))
    if dest.exists():
        if not cfg.overwrite:
            raise CheckpointError(f"{dest}: already exists; pass --overwrite to replace it")
        shutil.rmtree(dest)
    others = checkpoints.step_dirs(cfg.out) if cfg.out.is_dir() else {}
    if others:
        raise CheckpointError(
            f"{cfg.out}: already holds step(s) {sorted(others)}; a served directory resolves to its "
            "latest step, so export into an empty --out"
        )
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in SERVING_ITEMS:
        src = step_dir / item
        if src.is_dir():
            shutil.copytree(src, tmp / item)
        elif src.is_file():
            shutil.copy2(src, tmp / item)
    tmp.rename(dest)  # the step directory appears whole or not at all
    original, copy = load_policy(step_dir), load_policy(dest)
    if original.fingerprint != copy.fingerprint:
        shutil.rmtree(dest)
        raise CheckpointError(f"{dest}: the copy does not load with the original's fingerprint")
    return dest


def directory_bytes(path: Path) -> int:
    """Total size of the files under `path`."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input)."""
    setup_logging(timestamps=False, absl_level=logging.ERROR)
    cfg = tyro.cli(ExportConfig, args=argv)
    try:
        dest = export(cfg)
    except CheckpointError as e:
        print(f"mqe-export: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {dest} ({directory_bytes(dest) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
