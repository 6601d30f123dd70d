"""Goal and waypoint sampling over trajectories (MQE paper, eq. for the geometric waypoint).

For a state s_t with `steps_to_end` steps left in its trajectory:
- the critic goal is s_{t+K}, K ~ Geom(1 - gamma), capped at the trajectory end;
- the waypoint is s_{t+k'}: with probability p the next state (k' = 1), otherwise
  k' ~ Geom(1 - lambda) capped at K;
- the actor goal is a uniformly drawn future state of the same trajectory.
All sampling uses an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mqe_model.data.dataset import Dataset


def sample_offsets(
    rng: np.random.Generator,
    steps_to_end: np.ndarray,
    gamma: float,
    lam: float,
    p_next: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Goal and waypoint offsets with 1 <= waypoint_offset <= goal_offset <= steps_to_end."""
    steps_to_end = np.asarray(steps_to_end)
    if steps_to_end.size and steps_to_end.min() < 1:
        raise ValueError("steps_to_end must be >= 1: a state at a trajectory end has no future")
    if not (0.0 < gamma < 1.0 and 0.0 < lam < 1.0 and 0.0 <= p_next <= 1.0):
        raise ValueError(f"need 0 < gamma, lam < 1 and 0 <= p_next <= 1, got {gamma}, {lam}, {p_next}")
    goal_offset = np.minimum(rng.geometric(1.0 - gamma, size=steps_to_end.shape), steps_to_end)
    geometric_waypoint = np.minimum(rng.geometric(1.0 - lam, size=steps_to_end.shape), goal_offset)
    take_next = rng.random(size=steps_to_end.shape) < p_next
    waypoint_offset = np.where(take_next, 1, geometric_waypoint)
    return goal_offset.astype(np.int64), waypoint_offset.astype(np.int64)


def sample_uniform_future(rng: np.random.Generator, steps_to_end: np.ndarray) -> np.ndarray:
    """Offsets drawn uniformly from 1..steps_to_end (a future state of the same trajectory)."""
    return rng.integers(1, np.asarray(steps_to_end) + 1)


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    """How goals and waypoints are drawn."""

    gamma: float  # discount; critic goals are Geom(1 - gamma) steps ahead
    lam: float  # waypoint discount; waypoints are Geom(1 - lam) steps ahead, capped at the goal
    p_next: float  # probability that the waypoint is the next state


class GoalSampler:
    """Draws MQE training batches (states, actions, waypoints, goals, actor goals) from a Dataset."""

    def __init__(self, dataset: Dataset, config: SamplerConfig):
        self.dataset = dataset
        self.config = config
        self._steps_to_end = dataset.steps_to_end()
        self._starts = np.flatnonzero(self._steps_to_end >= 1)

    def sample(self, rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]:
        """One batch of `batch_size` samples as numpy arrays (images stay uint8)."""
        c = self.config
        idx = rng.choice(self._starts, size=batch_size)
        steps_left = self._steps_to_end[idx]
        goal_offset, waypoint_offset = sample_offsets(rng, steps_left, c.gamma, c.lam, c.p_next)
        actor_offset = sample_uniform_future(rng, steps_left)
        obs = self.dataset.observations
        return {
            "observations": obs[idx],
            "actions": self.dataset.actions[idx],
            "waypoints": obs[idx + waypoint_offset],
            "waypoint_offsets": waypoint_offset.astype(np.int32),
            "goals": obs[idx + goal_offset],
            "actor_goals": obs[idx + actor_offset],
        }
