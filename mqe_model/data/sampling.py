"""Goal and waypoint sampling over trajectories (MQE paper, eq. for the geometric waypoint).

For a state s_t with `steps_to_end` steps left in its trajectory:
- the critic goal is s_{t+K}, K ~ Geom(1 - gamma), capped at the trajectory end (and, optionally, at a
  fixed number of steps: what a dataset of short trajectories does to every goal);
- the waypoint is s_{t+k'}: with probability p the next state (k' = 1), otherwise
  k' ~ Geom(1 - lambda) capped at K;
- the actor goal is a uniformly drawn future state of the same trajectory, or, with probability
  p_random_actor_goal, any state of the dataset (OGBench's setting on stitch datasets, whose
  trajectories are too short for a future state to be as far as an evaluation goal).
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
    max_waypoint_offset: int = 0,
    max_goal_offset: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Goal and waypoint offsets with 1 <= waypoint_offset <= goal_offset <= steps_to_end; with
    `max_waypoint_offset` > 0 the waypoint is also at most that many steps ahead, and with
    `max_goal_offset` > 0 the goal (and so the waypoint) too (0: no such cap)."""
    steps_to_end = np.asarray(steps_to_end)
    if steps_to_end.size and steps_to_end.min() < 1:
        raise ValueError("steps_to_end must be >= 1: a state at a trajectory end has no future")
    if not (0.0 < gamma < 1.0 and 0.0 < lam < 1.0 and 0.0 <= p_next <= 1.0):
        raise ValueError(f"need 0 < gamma, lam < 1 and 0 <= p_next <= 1, got {gamma}, {lam}, {p_next}")
    for name, cap in (("max_waypoint_offset", max_waypoint_offset), ("max_goal_offset", max_goal_offset)):
        if cap < 0:
            raise ValueError(f"{name} {cap}: must be >= 1, or 0 for no cap")
    goal_offset = np.minimum(rng.geometric(1.0 - gamma, size=steps_to_end.shape), steps_to_end)
    if max_goal_offset:
        goal_offset = np.minimum(goal_offset, max_goal_offset)
    geometric_waypoint = np.minimum(rng.geometric(1.0 - lam, size=steps_to_end.shape), goal_offset)
    if max_waypoint_offset:
        geometric_waypoint = np.minimum(geometric_waypoint, max_waypoint_offset)
    take_next = rng.random(size=steps_to_end.shape) < p_next
    waypoint_offset = np.where(take_next, 1, geometric_waypoint)
    return goal_offset.astype(np.int64), waypoint_offset.astype(np.int64)


def sample_uniform_future(rng: np.random.Generator, steps_to_end: np.ndarray) -> np.ndarray:
    """Offsets drawn uniformly from 1..steps_to_end (a future state of the same trajectory)."""
    return rng.integers(1, np.asarray(steps_to_end) + 1)


def check_probability(name: str, value: float) -> None:
    """A ValueError naming `name` unless 0 <= value <= 1 (for the configs' sampling probabilities)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} {value}: must be within [0, 1]")


def sample_actor_goals(rng: np.random.Generator, idx: np.ndarray, steps_to_end: np.ndarray, dataset_size: int,
                       p_random: float) -> np.ndarray:
    """Dataset indices of actor goals for the states at `idx`: a uniform future state of the same
    trajectory, or with probability `p_random` a uniformly random dataset state."""
    return sample_marked_actor_goals(rng, idx, steps_to_end, dataset_size, p_random)[0]


def sample_marked_actor_goals(rng: np.random.Generator, idx: np.ndarray, steps_to_end: np.ndarray,
                              dataset_size: int, p_random: float) -> tuple[np.ndarray, np.ndarray]:
    """`sample_actor_goals` and, per state, whether its goal is a future state of its own trajectory
    (True) or a random dataset state (False)."""
    future = idx + sample_uniform_future(rng, steps_to_end)
    if p_random <= 0.0:  # the common case draws nothing more, so its batches stay as they were
        return future, np.ones(np.shape(idx), bool)
    random_state = rng.integers(0, dataset_size, size=np.shape(idx))
    take_random = rng.random(np.shape(idx)) < p_random
    return np.where(take_random, random_state, future), ~take_random


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    """How goals and waypoints are drawn."""

    gamma: float  # discount; critic goals are Geom(1 - gamma) steps ahead
    lam: float  # waypoint discount; waypoints are Geom(1 - lam) steps ahead, capped at the goal
    p_next: float  # probability that the waypoint is the next state
    p_random_actor_goal: float = 0.0  # probability that the actor goal is a random dataset state
    mark_own_actor_goals: bool = False  # add "actor_goal_own" (1.0: own-trajectory goal, 0.0: random)
    max_waypoint_offset: int = 0  # waypoints at most this many steps ahead; 0: capped at the goal only
    max_goal_offset: int = 0  # critic goals at most this many steps ahead; 0: capped at the trajectory end only


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
        goal_offset, waypoint_offset = sample_offsets(rng, steps_left, c.gamma, c.lam, c.p_next,
                                                    c.max_waypoint_offset, c.max_goal_offset)
        actor_goal, own = sample_marked_actor_goals(rng, idx, steps_left, self.dataset.size, c.p_random_actor_goal)
        obs = self.dataset.observations
        batch = {
            "observations": obs[idx],
            "actions": self.dataset.actions[idx],
            "waypoints": obs[idx + waypoint_offset],
            "waypoint_offsets": waypoint_offset.astype(np.int32),
            "goals": obs[idx + goal_offset],
            "actor_goals": obs[actor_goal],
        }
        if c.mark_own_actor_goals:
            batch["actor_goal_own"] = own.astype(np.float32)
        return batch
