"""The canonical in-memory dataset and its loaders (docs/dataset_format.md)."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np

CANONICAL_FORMAT = "mqe-canonical"
CANONICAL_VERSION = 1
METADATA_FILE = "dataset.json"


class DatasetError(ValueError):
    """A dataset file is missing, corrupt or inconsistent; the message names the file and the fix."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Trajectories stored back to back as flat arrays; see docs/dataset_format.md."""

    observations: np.ndarray  # (N, D) float32 states or (N, H, W, 3) uint8 images
    actions: np.ndarray  # (N, A) float32, the action taken at each step
    terminals: np.ndarray  # (N,) bool, true at the last step of each trajectory
    proprio: np.ndarray | None = None  # (N, P) float32, optional proprioception
    source: str = "<arrays>"  # where the data came from, used in error messages

    def __post_init__(self) -> None:
        n = len(self.terminals)
        where = self.source
        if self.observations.ndim not in (2, 4):
            raise DatasetError(
                f"{where}: observations have shape {self.observations.shape}; expected (N, D) "
                "states or (N, H, W, 3) uint8 images"
            )
        if self.observations.ndim == 4 and (
            self.observations.dtype != np.uint8 or self.observations.shape[-1] != 3
        ):
            raise DatasetError(
                f"{where}: image observations must be uint8 (N, H, W, 3), got "
                f"{self.observations.dtype} {self.observations.shape}"
            )
        if self.actions.ndim != 2:
            raise DatasetError(f"{where}: actions have shape {self.actions.shape}; expected (N, A)")
        for name, arr in (("observations", self.observations), ("actions", self.actions)) + (
            (("proprio", self.proprio),) if self.proprio is not None else ()
        ):
            if len(arr) != n:
                raise DatasetError(
                    f"{where}: {name} has {len(arr)} rows but terminals has {n}; every key "
                    "must have one row per step"
                )
        if n == 0:
            raise DatasetError(f"{where}: the dataset is empty")
        if not self.terminals[-1]:
            raise DatasetError(
                f"{where}: the last step is not terminal; a file must hold whole trajectories"
            )
        if not np.all(np.isfinite(self.actions)):
            raise DatasetError(f"{where}: actions contain NaN or inf")
        lengths = self.trajectory_lengths
        if lengths.min() < 2:
            first_bad = int(np.argmin(lengths))
            raise DatasetError(
                f"{where}: trajectory {first_bad} has {lengths[first_bad]} step(s); each needs at "
                "least 2 (a state and its successor)"
            )

    @property
    def size(self) -> int:
        """Number of steps over all trajectories."""
        return len(self.terminals)

    @property
    def action_dim(self) -> int:
        """Dimension of one action."""
        return self.actions.shape[1]

    @property
    def trajectory_ends(self) -> np.ndarray:
        """Index of the last step of each trajectory, in order."""
        return np.flatnonzero(self.terminals)

    @property
    def trajectory_lengths(self) -> np.ndarray:
        """Number of steps in each trajectory."""
        ends = self.trajectory_ends
        return np.diff(np.concatenate([[-1], ends]))

    def steps_to_end(self) -> np.ndarray:
        """For each step, how many steps remain to its trajectory's last step (0 at the end)."""
        ends = self.trajectory_ends
        end_of_step = np.repeat(ends, self.trajectory_lengths)
        return end_of_step - np.arange(self.size)


def _coerce(arrays: dict[str, np.ndarray], source: str) -> Dataset:
    missing = [k for k in ("observations", "actions", "terminals") if k not in arrays]
    if missing:
        raise DatasetError(
            f"{source}: missing key(s) {missing}; found {sorted(arrays)}. A dataset needs "
            "'observations', 'actions' and 'terminals' (docs/dataset_format.md)"
        )
    obs = arrays["observations"]
    if obs.dtype != np.uint8:
        if not np.issubdtype(obs.dtype, np.floating):
            raise DatasetError(
                f"{source}: observations have dtype {obs.dtype}; expected float states or uint8 images"
            )
        obs = obs.astype(np.float32, copy=False)
    actions = arrays["actions"]
    if not np.issubdtype(actions.dtype, np.floating):
        raise DatasetError(f"{source}: actions have dtype {actions.dtype}; expected float32")
    terminals = arrays["terminals"]
    if terminals.dtype != np.bool_ and not np.issubdtype(terminals.dtype, np.number):
        raise DatasetError(f"{source}: terminals have dtype {terminals.dtype}; expected bool or 0/1")
    proprio = arrays.get("proprio")
    return Dataset(
        observations=obs,
        actions=actions.astype(np.float32, copy=False),
        terminals=terminals.astype(bool),
        proprio=None if proprio is None else proprio.astype(np.float32, copy=False),
        source=source,
    )


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise DatasetError(f"{path}: not a readable .npz file ({e}); regenerate or re-copy it") from None


def concatenate(parts: list[Dataset], source: str) -> Dataset:
    """Join datasets of whole trajectories into one."""
    if not parts:
        raise DatasetError(f"{source}: no trajectories to join")
    shapes = {p.observations.shape[1:] for p in parts}
    if len(shapes) > 1:
        raise DatasetError(f"{source}: shards disagree on the observation shape: {sorted(shapes)}")
    with_proprio = {p.proprio is not None for p in parts}
    if len(with_proprio) > 1:
        raise DatasetError(f"{source}: some shards have 'proprio' and some do not")
    return Dataset(
        observations=np.concatenate([p.observations for p in parts]),
        actions=np.concatenate([p.actions for p in parts]),
        terminals=np.concatenate([p.terminals for p in parts]),
        proprio=np.concatenate([p.proprio for p in parts]) if True in with_proprio else None,
        source=source,
    )


def load_dataset(path: str | Path) -> Dataset:
    """Load an OGBench `.npz` file or a canonical dataset directory (docs/dataset_format.md)."""
    path = Path(path)
    if path.is_dir():
        return _load_canonical(path)
    if path.suffix != ".npz":
        raise DatasetError(
            f"{path}: expected an OGBench .npz file or a canonical dataset directory with "
            f"{METADATA_FILE}"
        )
    return _coerce(_read_npz(path), str(path))


def _load_canonical(root: Path) -> Dataset:
    meta_path = root / METADATA_FILE
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise DatasetError(
            f"{root}: no {METADATA_FILE}; a canonical dataset directory needs one "
            "(docs/dataset_format.md)"
        ) from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"{meta_path}: not valid JSON ({e})") from None
    if meta.get("format") != CANONICAL_FORMAT or meta.get("version") != CANONICAL_VERSION:
        raise DatasetError(
            f"{meta_path}: format {meta.get('format')!r} version {meta.get('version')!r}; "
            f"this reader understands {CANONICAL_FORMAT!r} version {CANONICAL_VERSION}"
        )
    shards = sorted(root.glob("shard-*.npz"))
    if not shards:
        raise DatasetError(f"{root}: no shard-*.npz files next to {METADATA_FILE}")
    parts = [_coerce(_read_npz(s), str(s)) for s in shards]
    data = concatenate(parts, str(root))
    expected_shape = tuple(meta.get("observation", {}).get("shape", data.observations.shape[1:]))
    if data.observations.shape[1:] != expected_shape:
        raise DatasetError(
            f"{root}: shards hold observations of shape {data.observations.shape[1:]} but "
            f"{METADATA_FILE} says {list(expected_shape)}"
        )
    if "action_dim" in meta and data.action_dim != meta["action_dim"]:
        raise DatasetError(
            f"{root}: shards hold {data.action_dim}-d actions but {METADATA_FILE} says "
            f"action_dim {meta['action_dim']}"
        )
    return data
