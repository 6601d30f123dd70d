"""The bundled demo policy: an MQE checkpoint (preset `sim`, 64x64 images) trained on the twin's data.

It ships inside the package (`mqe_model/demo/checkpoint/<step>/`, only `params/` and `metadata/`),
so `mqe-serve` with no `--policy` and `mqe-demo` work straight after an install. This module
imports neither jax nor orbax: the server's settings checks and the demo command stay instant.
"""

from __future__ import annotations

from pathlib import Path

DEMO_CHECKPOINT = Path(__file__).resolve().parent / "checkpoint"  # checkpoints root: <step>/ inside
DEMO_POLICY_NAME = "demo"  # the name the server gives the demo policy
_METADATA_FILE = Path("metadata") / "metadata"  # as mqe_model.checkpoints.METADATA_FILE (no orbax import)
RESTORE_HINT = (
    "restore it (git checkout -- mqe_model/demo/checkpoint, or reinstall mqe-deploy) or rebuild it on "
    "a GPU (bash scripts/build_demo_policy.sh WORKDIR, then copy WORKDIR/export/mqe/<step> into "
    "mqe_model/demo/checkpoint/)"
)


class DemoCheckpointMissing(FileNotFoundError):
    """The bundled demo checkpoint is not there; the message is one line saying how to get it back."""


def demo_step_dir(root: Path | None = None) -> Path:
    """The step directory of the bundled demo checkpoint (the latest, should there be several)."""
    root = DEMO_CHECKPOINT if root is None else root
    steps = []
    if root.is_dir():
        steps = [p for p in root.iterdir() if p.is_dir() and p.name.isdigit() and (p / _METADATA_FILE).is_file()]
    if not steps:
        raise DemoCheckpointMissing(f"the bundled demo checkpoint is missing (no <step>/{_METADATA_FILE} "
                                    f"under {root}): {RESTORE_HINT}")
    return max(steps, key=lambda p: int(p.name))
