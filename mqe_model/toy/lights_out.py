"""Lights out, the game behind OGBench's puzzle tasks, where the true distances are known exactly.

A press flips its button's light and its four neighbours' (ogbench.md section 30). The fewest presses
that turn one light pattern into another depend only on which lights differ (their XOR), through a
table of all 2^(side^2) press sets. On puzzle-4x4-play the MQE critic's distance stops growing at ~3
presses; this toy asks, at no device cost, whether that is the critic's (it must compute a parity-like
function of s XOR g through separate encoders of s and g) or the puzzle's (an arm that needs ~30
steps a press, a 200-step horizon).

One step is one press. Actions are 2-d vectors in [-1, 1]^2 that point at a button on the side x side
board (as the arm's position does in the puzzle), so a continuous actor acts here. The offline data
presses uniformly random buttons from random reachable patterns. `--agent gciql` trains GCIQL instead,
whose critic reads s and g together (one MLP over both), against MQE's separate phi(s, a) and psi(g).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Literal

import numpy as np
import tyro

from mqe_model.data.dataset import Dataset
from mqe_model.toy.training import (
    actor_policy,
    agent_config_of,
    critic_greedy_policy,
    distance_steps,
    rollout_success,
    train_agent,
)

Encoding = Literal["onehot", "binary", "signed"]
Presses = Literal["random", "distinct"]


class LightsOut:
    """A side x side lights-out board: states are light patterns as integers (bit i: light i is on)."""

    def __init__(self, side: int = 4):
        if not 2 <= side <= 4:
            raise ValueError(f"side {side}: the press table holds 2^(side^2) press sets, so 2 <= side <= 4")
        self.side = side
        self.buttons = side * side
        self.masks = np.zeros(self.buttons, np.int64)  # the lights button i flips
        for i in range(self.buttons):
            row, col = divmod(i, side)
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= row + dr < side and 0 <= col + dc < side:
                    self.masks[i] |= 1 << ((row + dr) * side + col + dc)
        self.presses = self._press_table()
        self.reachable = np.flatnonzero(self.presses >= 0)  # the patterns some press set flips
        # The action at each button's centre: the candidates of the critic's greedy read-out.
        centres = (np.arange(side) + 0.5) / side * 2.0 - 1.0
        self.button_actions = np.stack(np.meshgrid(centres, centres, indexing="ij"), -1).reshape(-1, 2)

    def _press_table(self) -> np.ndarray:
        """(2^buttons,) the fewest presses that flip exactly each pattern's lights; -1 where none does."""
        sets = np.arange(1 << self.buttons, dtype=np.int64)
        flipped = np.zeros_like(sets)
        weight = np.zeros_like(sets)
        for i in range(self.buttons):
            bit = (sets >> i) & 1
            flipped ^= np.where(bit, self.masks[i], 0)
            weight += bit
        table = np.full(1 << self.buttons, self.buttons + 1)
        np.minimum.at(table, flipped, weight)
        table[table > self.buttons] = -1
        return table

    def distance(self, states: np.ndarray, goals: np.ndarray) -> np.ndarray:
        """Fewest presses from each state to its goal (-1: the goal cannot be reached)."""
        return self.presses[np.asarray(states) ^ np.asarray(goals)]

    def button(self, actions: np.ndarray) -> np.ndarray:
        """The button each 2-d action in [-1, 1]^2 points at: (row, column) cells of width 2 / side."""
        cell = np.clip(np.floor((np.asarray(actions) + 1.0) / 2.0 * self.side), 0, self.side - 1).astype(np.int64)
        return cell[..., 0] * self.side + cell[..., 1]

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The patterns after pressing the button each action points at."""
        return np.asarray(states) ^ self.masks[self.button(actions)]

    def observe(self, states: np.ndarray, encoding: Encoding = "onehot") -> np.ndarray:
        """float32 observations: per light [off, on] (`onehot`, the puzzle's layout), 0/1 (`binary`), or -1/+1
        (`signed`, zero-mean over random patterns)."""
        on = ((np.asarray(states)[..., None] >> np.arange(self.buttons)) & 1).astype(np.float32)
        if encoding == "onehot":
            return np.stack([1.0 - on, on], -1).reshape(*on.shape[:-1], 2 * self.buttons)
        if encoding == "binary":
            return on
        return 2.0 * on - 1.0


def random_press_dataset(board: LightsOut, rng: np.random.Generator, episodes: int, length: int,
                         encoding: Encoding, presses: Presses = "random") -> Dataset:
    """Offline data from uniformly random reachable patterns. `random`: uniform random actions in
    [-1, 1]^2 (a uniformly random button each). `distinct`: each run of side^2 presses presses every
    button once, in a random order (uniform within each button's cell), so no press undoes an earlier one
    of its run and k steps apart are usually k presses apart, for k up to side^2."""
    states = np.empty((episodes, length), dtype=np.int64)
    actions = rng.uniform(-1.0, 1.0, size=(episodes, length, 2)).astype(np.float32)
    if presses == "distinct":
        runs = -(-length // board.buttons)
        order = np.argsort(rng.random((episodes, runs, board.buttons)), axis=-1).reshape(episodes, -1)[:, :length]
        cell = np.stack(np.divmod(order, board.side), -1)
        actions = ((cell + (actions + 1.0) / 2.0) / board.side * 2.0 - 1.0).astype(np.float32)
    states[:, 0] = rng.choice(board.reachable, size=episodes)
    for t in range(1, length):
        states[:, t] = board.step(states[:, t - 1], actions[:, t - 1])
    terminals = np.zeros((episodes, length), dtype=bool)
    terminals[:, -1] = True
    return Dataset(observations=board.observe(states.reshape(-1), encoding), actions=actions.reshape(-1, 2),
                   terminals=terminals.reshape(-1), source=f"lights out {board.side}x{board.side} {presses} presses")


@dataclasses.dataclass(frozen=True)
class LightsOutConfig:
    """Train an agent on random presses and report how its critic's distance follows the presses a goal needs."""

    agent: Literal["mqe", "gciql"] = "mqe"  # whose critic: MQE's MRN over phi(s, a), psi(g), or GCIQL's V(s, g) on both
    steps: int = 20000  # gradient updates
    seed: int = 0  # seed for data, initialisation and evaluation
    side: int = 4  # board side: 4 is puzzle-4x4 (rank 12, at most 7 presses), 3 has one press set per pattern
    episodes: int = 2000  # random-press episodes in the offline dataset
    episode_length: int = 50  # presses per episode
    encoding: Encoding = "onehot"  # how a light reaches the networks (onehot is the puzzle's)
    presses: Presses = "random"  # the data's presses: uniformly random, or each button once per side^2 presses
    preset: str = "tiny"  # the agent's preset (mqe_model.agents.mqe.get_config, gciql.get_config)
    gamma: float = 0.95  # discount per press; the farthest reachable pattern is at most side^2 presses
    alpha: float = 0.03  # behaviour-cloning weight
    lr: float = 1e-3  # Adam learning rate (higher than the paper's 3e-4 to train fast on a CPU)
    updates_per_dispatch: int = 50  # updates run in one jitted lax.scan call
    pairs: int = 4000  # random reachable (state, goal) pairs the distances and rollouts are measured on
    far: int = 4  # goals at least this many presses away count as far (puzzle-4x4's tasks need 4-7)
    budget_factor: float = 2.0  # a rollout gets budget_factor x the pairs' most presses
    set: tuple[str, ...] = ()  # agent config overrides, key=value (e.g. --set lam=0.9)

    def __post_init__(self) -> None:
        if not 2 <= self.side <= 4:
            raise ValueError(f"side {self.side}: must be 2, 3 or 4")
        if self.episode_length < 2 or self.episodes < 1 or self.pairs < 1:
            raise ValueError("need episodes >= 1, episode_length >= 2 and pairs >= 1")
        if self.far < 1:
            raise ValueError(f"far {self.far}: must be at least 1 press")
        self.agent_config()  # a bad --set or step count is refused here, before any training

    def agent_config(self):
        """The preset with this run's gamma, alpha, lr and --set overrides."""
        return agent_config_of(self)


@dataclasses.dataclass(frozen=True)
class LightsOutResult:
    """How the trained agent's distance follows the presses, and whether it reaches far patterns."""

    spearman: float  # rank correlation of the critic's d(s, g) with the fewest presses, random reachable pairs
    mean_distance_by_presses: dict[int, float]  # mean learned d(s, g) in steps (presses) per true press count
    critic_greedy_success_far: float  # the critic's greedy press, goals >= far presses away
    policy_success_far: float  # the actor on the same goals
    random_success_far: float  # random presses (the data's policy) on the same goals and budget
    num_far_pairs: int  # far pairs among the random ones
    train_seconds: float  # wall time of the training updates


def train_and_evaluate(config: LightsOutConfig) -> LightsOutResult:
    """Train on random presses, then compare d(s, g) with the fewest presses and roll out far goals."""
    from scipy.stats import spearmanr

    board = LightsOut(config.side)
    rng = np.random.default_rng(config.seed)
    data = random_press_dataset(board, rng, config.episodes, config.episode_length, config.encoding,
                                config.presses)
    agent, train_seconds = train_agent(config.agent, data, config.agent_config(), config.steps, config.updates_per_dispatch,
                                     config.seed, rng)

    def observe(states: np.ndarray) -> np.ndarray:
        return board.observe(states, config.encoding)

    starts = rng.choice(board.reachable, size=config.pairs)
    goals = starts ^ rng.choice(board.reachable, size=config.pairs)  # reachable from the start by construction
    presses = board.distance(starts, goals)
    learned = distance_steps(agent, observe(starts), observe(goals))
    by_presses = {int(p): float(learned[presses == p].mean()) for p in np.unique(presses)}

    far = presses >= config.far
    budget = int(np.ceil(config.budget_factor * presses.max()))

    def success(policy) -> float:
        return rollout_success(board.step, observe, policy, starts[far], goals[far], budget)

    def random_presses(obs: np.ndarray, goal_obs: np.ndarray) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, size=(len(obs), 2))

    return LightsOutResult(
        spearman=float(spearmanr(learned, presses).statistic),
        mean_distance_by_presses=by_presses,
        critic_greedy_success_far=success(critic_greedy_policy(agent, board.button_actions)),
        policy_success_far=success(actor_policy(agent, config.seed)),
        random_success_far=success(random_presses),
        num_far_pairs=int(far.sum()),
        train_seconds=train_seconds,
    )


def main() -> None:
    """CLI: train on random presses and print what the critic learned (the last line is the result as JSON)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = tyro.cli(LightsOutConfig)
    result = train_and_evaluate(config)
    print(f"trained {config.steps} updates in {result.train_seconds:.1f} s")
    print(f"Spearman(learned distance, fewest presses), random reachable pairs: {result.spearman:.3f}")
    print("mean learned distance by presses: "
          + ", ".join(f"{p}: {d:.2f}" for p, d in result.mean_distance_by_presses.items()))
    print(f"far goals (>= {config.far} presses, {result.num_far_pairs} pairs), success within "
          f"{config.budget_factor:g}x the most presses: critic greedy {result.critic_greedy_success_far:.2f}, "
          f"actor {result.policy_success_far:.2f}, random presses {result.random_success_far:.2f}")
    print(json.dumps(dataclasses.asdict(result)))


if __name__ == "__main__":
    main()
