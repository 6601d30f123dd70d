"""Decoded datasets on disk, memory-mapped: sources too large for memory (BridgeData V2, LeRobot
videos) are decoded once, episode by episode, into flat files that training reads through the page
cache, so the process holds about one episode at a time whatever the dataset's size.

    <cache>/<key>/observations.u8     raw (N, H, W, 3) uint8 (or float32 states: observations.f4)
    <cache>/<key>/actions.npy, terminals.npy, proprio.npy (small: in memory)
    <cache>/<key>/layout.json         shapes and dtypes; written last, so a directory without it is
                                      an interrupted decode and is decoded again

`key` is a digest of the source files (names, sizes, modification times) and the decoding options,
so a changed source or option decodes anew and an unchanged one is read back at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from mqe_model.data.dataset import Dataset, DatasetError

logger = logging.getLogger(__name__)

LAYOUT = "layout.json"
LAYOUT_VERSION = 1
CACHE_ENV = "MQE_DATA_CACHE"  # overrides the default cache folder


def default_cache_dir() -> Path:
    """$MQE_DATA_CACHE, else ~/.cache/mqe-deploy/data."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mqe-deploy" / "data")


def source_key(files: Iterable[Path], options: dict[str, Any]) -> str:
    """Digest of the files' names, sizes and modification times and of the decoding options."""
    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for path in sorted(files):
        st = path.stat()
        h.update(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


class EpisodeWriter:
    """Appends whole episodes to a cache directory; `finish()` returns the memory-mapped Dataset."""

    def __init__(self, directory: Path, source: str):
        self.final = directory
        self.dir = directory.with_name(directory.name + ".partial")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.source = source
        self._obs_file = None
        self._obs_shape: tuple[int, ...] | None = None
        self._obs_dtype: np.dtype | None = None
        self._actions: list[np.ndarray] = []
        self._proprio: list[np.ndarray] = []
        self._has_proprio: bool | None = None
        self.steps = 0
        self.episodes = 0

    def add(self, observations: np.ndarray, actions: np.ndarray, proprio: np.ndarray | None = None) -> None:
        """One episode: (T, ...) observations, (T, A) actions, optionally (T, P) proprioception."""
        if observations.dtype != np.uint8:
            observations = observations.astype(np.float32, copy=False)
        if self._obs_file is None:
            self._obs_shape, self._obs_dtype = observations.shape[1:], observations.dtype
            self._has_proprio = proprio is not None
            self._obs_file = open(self.dir / _obs_name(self._obs_dtype), "wb")  # noqa: SIM115 (closed in finish)
        if observations.shape[1:] != self._obs_shape or observations.dtype != self._obs_dtype:
            raise DatasetError(f"{self.source}: episode {self.episodes} has observations {observations.dtype} "
                               f"{observations.shape[1:]}, the first had {self._obs_dtype} {self._obs_shape}")
        if (proprio is not None) != self._has_proprio:
            raise DatasetError(f"{self.source}: some episodes have proprioception and some do not")
        self._obs_file.write(np.ascontiguousarray(observations).tobytes())
        self._actions.append(np.asarray(actions, np.float32))
        if proprio is not None:
            self._proprio.append(np.asarray(proprio, np.float32))
        self.steps += len(observations)
        self.episodes += 1

    def abort(self) -> None:
        """Close and remove what was written (a decode that failed)."""
        if self._obs_file is not None:
            self._obs_file.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def finish(self) -> Dataset:
        """Close the files, write the layout, move the directory into place and open it."""
        if self._obs_file is None:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise DatasetError(f"{self.source}: no episode of at least 2 steps to train on")
        self._obs_file.close()
        lengths = [len(a) for a in self._actions]
        terminals = np.zeros(self.steps, bool)
        terminals[np.cumsum(lengths) - 1] = True
        np.save(self.dir / "actions.npy", np.concatenate(self._actions))
        np.save(self.dir / "terminals.npy", terminals)
        if self._proprio:
            np.save(self.dir / "proprio.npy", np.concatenate(self._proprio))
        layout = {"version": LAYOUT_VERSION, "source": self.source, "steps": self.steps,
                  "episodes": self.episodes, "observation_shape": list(self._obs_shape),
                  "observation_dtype": self._obs_dtype.str}
        (self.dir / LAYOUT).write_text(json.dumps(layout))
        shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.dir, self.final)
        return open_cached(self.final)


def _obs_name(dtype: np.dtype) -> str:
    return "observations.u8" if dtype == np.uint8 else "observations.f4"


def open_cached(directory: Path) -> Dataset | None:
    """The Dataset of a finished cache directory (observations memory-mapped), None if there is none."""
    try:
        layout = json.loads((directory / LAYOUT).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if layout.get("version") != LAYOUT_VERSION:
        return None
    dtype = np.dtype(layout["observation_dtype"])
    shape = (layout["steps"], *layout["observation_shape"])
    observations = np.memmap(directory / _obs_name(dtype), dtype=dtype, mode="r", shape=shape)
    proprio_path = directory / "proprio.npy"
    return Dataset(observations=observations, actions=np.load(directory / "actions.npy"),
                   terminals=np.load(directory / "terminals.npy"),
                   proprio=np.load(proprio_path) if proprio_path.exists() else None, source=layout["source"])
