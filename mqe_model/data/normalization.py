"""Action normalization: statistics computed from the data, stored in the checkpoint.

Per dimension, center c = (low + high) / 2 and half range h = (high - low) / 2; training sees
clip((a - c) / h, -1, 1), which is in [-1, 1] like the actors' clipped outputs, and the policy
answers c + h * x. A dimension that never changes (h = 0) trains on 0 and is restored to its
constant. Mean and standard deviation are stored too, for inspection only. `low` and `high` by scheme:

- "minmax": the data's minimum and maximum; every action of the data round-trips exactly.
- "bounds_q99": the 1st and 99th percentiles (numpy's linear quantiles), Octo's `bounds_q99`, so a
  few teleoperation outliers do not squeeze the rest of the actions into a sliver of [-1, 1];
  actions beyond them are clipped. A dimension whose percentiles coincide while it still varies
  (a gripper closed in under 1 % of the steps) takes its minimum and maximum instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

SCHEMES = ("minmax", "bounds_q99")


@dataclasses.dataclass(frozen=True)
class ActionStats:
    """Per-dimension statistics of the dataset's actions, in robot units."""

    mean: tuple[float, ...]  # mean action
    std: tuple[float, ...]  # standard deviation (informational)
    low: tuple[float, ...]  # maps to -1: the minimum ("minmax") or the 1st percentile ("bounds_q99")
    high: tuple[float, ...]  # maps to +1: the maximum or the 99th percentile
    scheme: str = "minmax"  # normalization scheme, one of SCHEMES (module docstring)

    def __post_init__(self) -> None:
        dims = {len(self.mean), len(self.std), len(self.low), len(self.high)}
        if len(dims) != 1:
            raise ValueError(f"action stats disagree on the dimension: {sorted(dims)}")
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown action normalization scheme {self.scheme!r}; expected one of {SCHEMES}")
        if any(lo > hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ValueError("action stats have low > high")

    @property
    def dim(self) -> int:
        """Action dimension."""
        return len(self.mean)

    @classmethod
    def from_actions(cls, actions: np.ndarray, scheme: str = "minmax") -> ActionStats:
        """Statistics of an (N, A) array of actions under `scheme`."""
        if scheme not in SCHEMES:
            raise ValueError(f"unknown action normalization scheme {scheme!r}; expected one of {SCHEMES}")
        a = np.asarray(actions, np.float64)
        low, high = a.min(0), a.max(0)
        if scheme == "bounds_q99":
            q01, q99 = np.quantile(a, [0.01, 0.99], axis=0)
            spread = q99 > q01
            low, high = np.where(spread, q01, low), np.where(spread, q99, high)
        as_tuple = lambda x: tuple(float(v) for v in x)  # noqa: E731
        return cls(mean=as_tuple(a.mean(0)), std=as_tuple(a.std(0)), low=as_tuple(low),
                   high=as_tuple(high), scheme=scheme)

    def to_json(self) -> dict[str, Any]:
        """The `action_stats` field of checkpoint metadata."""
        return dataclasses.asdict(self) | {k: list(getattr(self, k)) for k in ("mean", "std", "low", "high")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ActionStats:
        """Inverse of `to_json`."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def center_and_half_range(self) -> tuple[np.ndarray, np.ndarray]:
        """(c, h) as float32 arrays; h is 0 where the data never changes."""
        low = np.asarray(self.low, np.float32)
        high = np.asarray(self.high, np.float32)
        return (low + high) / 2, (high - low) / 2

    def normalize(self, actions: np.ndarray) -> np.ndarray:
        """Robot units to the training range [-1, 1]."""
        center, half = self.center_and_half_range()
        safe_half = np.where(half > 0, half, np.float32(1.0))  # a constant dimension trains on 0
        return np.clip((np.asarray(actions, np.float32) - center) / safe_half, -1.0, 1.0)

    def unnormalize(self, actions: Any, xp: Any = np) -> Any:
        """Training range to robot units (`xp` = numpy or jax.numpy); clips to [-1, 1] first."""
        center, half = self.center_and_half_range()
        return xp.asarray(center) + xp.asarray(half) * xp.clip(actions, -1.0, 1.0)
