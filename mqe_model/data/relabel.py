"""Goal relabeling for the baselines (GCBC, GCIQL), as OGBench's GCDataset and BridgeData V2.

For a state s_t (never the last step of its trajectory):
- actor goal: a future state of the same trajectory, offset uniform in 1..steps_to_end, or with
  probability p_random_actor_goal any state of the dataset;
- value goal (GCIQL): with probability p_current the state itself, p_trajectory a future state at
  offset min(Geom(1 - gamma), steps_to_end), p_random any state of the dataset;
- reward 0 and mask 0 when the value goal is the state itself (same index), else reward -1, mask 1.
MQE's own sampler (goals, waypoints) is `mqe_model.data.sampling.GoalSampler`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mqe_model.data.dataset import Dataset
from mqe_model.data.sampling import sample_actor_goals


@dataclasses.dataclass(frozen=True)
class RelabelConfig:
    """How goals are drawn for the baselines."""

    with_value_goals: bool  # also draw value goals, next states, rewards and masks (GCIQL)
    gamma: float = 0.99  # discount of the geometric trajectory goals
    p_current: float = 0.2  # value goal = the state itself
    p_trajectory: float = 0.5  # value goal = geometric future state
    p_random: float = 0.3  # value goal = random dataset state
    p_random_actor_goal: float = 0.0  # actor goal = random dataset state (else a uniform future one)


class RelabelSampler:
    """Draws GCBC / GCIQL training batches from a Dataset."""

    def __init__(self, dataset: Dataset, config: RelabelConfig):
        self.dataset = dataset
        self.config = config
        self._steps_to_end = dataset.steps_to_end()
        self._starts = np.flatnonzero(self._steps_to_end >= 1)

    def sample(self, rng: np.random.Generator, batch_size: int) -> dict[str, np.ndarray]:
        """One batch as numpy arrays (images stay uint8)."""
        idx = rng.choice(self._starts, size=batch_size)
        steps_left = self._steps_to_end[idx]
        obs = self.dataset.observations
        batch = {
            "observations": obs[idx],
            "actions": self.dataset.actions[idx],
            "actor_goals": obs[sample_actor_goals(rng, idx, steps_left, self.dataset.size,
                                                  self.config.p_random_actor_goal)],
        }
        if not self.config.with_value_goals:
            return batch
        c = self.config
        trajectory_goal = idx + np.minimum(rng.geometric(1.0 - c.gamma, size=batch_size), steps_left)
        random_goal = rng.integers(0, self.dataset.size, size=batch_size)
        u = rng.random(batch_size)
        goal_idx = np.where(
            u < c.p_current, idx, np.where(u < c.p_current + c.p_trajectory, trajectory_goal, random_goal)
        )
        success = goal_idx == idx
        batch.update(
            next_observations=obs[idx + 1],
            value_goals=obs[goal_idx],
            rewards=success.astype(np.float32) - 1.0,
            masks=1.0 - success.astype(np.float32),
        )
        return batch
