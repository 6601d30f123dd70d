"""`mqe-transfer`: move a training run's latest checkpoint between machines in files of bounded size.

    mqe-transfer pack --checkpoint runs/mqe --out moved/mqe                  # parts of <= 16 MiB
    mqe-transfer unpack --parts moved/mqe --workdir runs/mqe                 # on the other machine
    mqe-train ... --workdir runs/mqe --resume                                # continues at its step

`pack` writes the whole training state (parameters, optimizer state, step, RNG) and the metadata as
one MessagePack stream cut into `state.partNNN` files, and `manifest.json` with each part's size and
SHA-256. `unpack` checks every part against the manifest before it writes anything, then writes an
ordinary `mqe-train` checkpoint into `<workdir>/checkpoints/<step>/` (with the run's metrics when they
travelled), so resuming is `mqe-train --resume` as on the first machine, to the same numbers.

`--optimizer-dtype bfloat16` rounds Adam's moments to bfloat16 for the move (the state shrinks by
about a third; they are float32 again once unpacked): for links whose size limit the float32 state
does not fit. The resumed run then departs from an unmoved one by that rounding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import flax.serialization
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp
import tyro

from mqe_model import checkpoints
from mqe_model.checkpoints import CheckpointError
from mqe_model.cli_logging import setup_logging

FORMAT = "mqe-transfer"
VERSION = 1
MANIFEST = "manifest.json"
METRICS = "metrics.jsonl"  # the run's metric lines, carried so the resumed run's log continues them


@dataclasses.dataclass(frozen=True)
class Pack:
    """Cut a run's latest checkpoint (or a given step directory) into parts."""

    checkpoint: Path  # a step directory, a checkpoints root or a run workdir (latest step)
    out: Path  # directory for the parts and manifest.json; created, must be empty
    part_mib: float = 16.0  # largest part, in MiB (2^20 bytes)
    optimizer_dtype: Literal["float32", "bfloat16"] = "float32"  # Adam moments as moved: float32 (exact) or bfloat16 (a third smaller)

    def __post_init__(self) -> None:
        if not self.part_mib > 0:
            raise ValueError(f"--part-mib must be > 0, got {self.part_mib}")


@dataclasses.dataclass(frozen=True)
class Unpack:
    """Check the parts and write them back as a checkpoint a run resumes from."""

    parts: Path  # a directory written by `mqe-transfer pack`
    workdir: Path  # the run directory to resume; its checkpoints/<step>/ is written
    overwrite: bool = False  # replace an existing checkpoints/<step>/ of that step


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _moments(train_state: dict[str, Any], fn) -> dict[str, Any]:
    """`train_state` with `fn` applied to the floating arrays of its optimizer state."""
    def floats(x: Any) -> Any:
        return fn(x) if isinstance(x, np.ndarray) and jnp.issubdtype(x.dtype, jnp.floating) else x

    return {**train_state, "opt_state": jax.tree_util.tree_map(floats, train_state["opt_state"])}


def _read_item(step_dir: Path, item: str) -> Any:
    try:
        tree = ocp.StandardCheckpointer().restore((step_dir / item).absolute())
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise CheckpointError(f"{step_dir / item}: cannot read it ({e})") from None
    return jax.tree_util.tree_map(np.asarray, tree)


def pack(cfg: Pack) -> dict[str, Any]:
    """Write the parts and the manifest; returns the manifest."""
    step_dir = checkpoints.resolve_step_dir(cfg.checkpoint)
    metadata = checkpoints.read_metadata(step_dir)
    if cfg.out.exists() and any(cfg.out.iterdir()):
        raise CheckpointError(f"{cfg.out}: not empty; pack into a new directory")
    train_state = _read_item(step_dir, "train_state")
    if cfg.optimizer_dtype == "bfloat16":
        train_state = _moments(train_state, lambda x: x.astype(ml_dtypes.bfloat16))
    state = {"params": _read_item(step_dir, "params"), "train_state": train_state}
    stream = flax.serialization.msgpack_serialize(state)
    part_bytes = max(1, int(cfg.part_mib * 2**20))
    cfg.out.mkdir(parents=True, exist_ok=True)
    parts = []
    for index, start in enumerate(range(0, len(stream), part_bytes)):
        chunk = stream[start:start + part_bytes]
        name = f"state.part{index:03d}"
        (cfg.out / name).write_bytes(chunk)
        parts.append({"file": name, "bytes": len(chunk), "sha256": _sha256(chunk)})
    run_metrics = step_dir.parent.parent / METRICS
    if run_metrics.is_file():
        shutil.copy2(run_metrics, cfg.out / METRICS)
    manifest = {"format": FORMAT, "version": VERSION, "agent": metadata["agent"], "step": metadata["step"],
                "optimizer_dtype": cfg.optimizer_dtype, "bytes": len(stream), "sha256": _sha256(stream),
                "parts": parts, "metadata": metadata}
    (cfg.out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(parts_dir: Path) -> dict[str, Any]:
    """The manifest of a pack directory, checked for its format."""
    path = parts_dir / MANIFEST
    manifest = checkpoints.read_json(path, "mqe-transfer pack")
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise CheckpointError(f"{path}: format {manifest.get('format')!r} version {manifest.get('version')!r}; "
                              f"this code reads {FORMAT!r} version {VERSION}")
    return manifest


def _joined_stream(parts_dir: Path, manifest: dict[str, Any]) -> bytes:
    chunks = []
    for part in manifest["parts"]:
        path = parts_dir / part["file"]
        if not path.is_file():
            raise CheckpointError(f"{path}: missing; copy every part listed in {parts_dir / MANIFEST}")
        chunk = path.read_bytes()
        if len(chunk) != part["bytes"] or _sha256(chunk) != part["sha256"]:
            raise CheckpointError(f"{path}: {len(chunk)} bytes that do not match the manifest's "
                                  f"{part['bytes']} and checksum; copy it again")
        chunks.append(chunk)
    stream = b"".join(chunks)
    if _sha256(stream) != manifest["sha256"]:
        raise CheckpointError(f"{parts_dir}: the joined parts do not match the manifest's checksum")
    return stream


def unpack(cfg: Unpack) -> Path:
    """Write `<workdir>/checkpoints/<step>/` from checked parts; returns that step directory."""
    manifest = read_manifest(cfg.parts)
    state = flax.serialization.msgpack_restore(_joined_stream(cfg.parts, manifest))
    train_state = state["train_state"]
    if manifest["optimizer_dtype"] == "bfloat16":
        train_state = _moments(train_state, lambda x: x.astype(np.float32))
    step = int(manifest["step"])
    root = cfg.workdir / "checkpoints"
    dest = root / str(step)
    later = [s for s in checkpoints.step_dirs(root) if s > step]
    if later:
        raise CheckpointError(f"{root}: already holds later step(s) {later}; a resumed run would start "
                              "from those, so unpack into another --workdir")
    if dest.exists():
        if not cfg.overwrite:
            raise CheckpointError(f"{dest}: already exists; pass --overwrite to replace it")
        shutil.rmtree(dest)
    manager = checkpoints.make_manager(root, asynchronous=False)
    checkpoints.save_items(manager, step, state["params"], train_state, manifest["metadata"])
    manager.wait_until_finished()
    manager.close()
    metrics = cfg.parts / METRICS
    if metrics.is_file() and not (cfg.workdir / METRICS).exists():
        shutil.copy2(metrics, cfg.workdir / METRICS)
    return dest


Command = (Annotated[Pack, tyro.conf.subcommand("pack")] | Annotated[Unpack, tyro.conf.subcommand("unpack")])


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (2 for bad input)."""
    setup_logging(timestamps=False, absl_level=logging.ERROR)
    cfg = tyro.cli(Command, args=argv)
    try:
        if isinstance(cfg, Pack):
            manifest = pack(cfg)
            print(f"wrote {len(manifest['parts'])} part(s), {manifest['bytes'] / 2**20:.1f} MiB, of "
                  f"{manifest['agent']} step {manifest['step']} to {cfg.out}")
        else:
            dest = unpack(cfg)
            print(f"wrote {dest}; continue with mqe-train --workdir {cfg.workdir} --resume")
    except CheckpointError as e:
        print(f"mqe-transfer: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
