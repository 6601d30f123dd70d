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
`--target presses` trains no agent: MQE's psi is regressed onto the true presses, to ask whether its
architecture can represent them at all; `--target successor` regresses it onto the data's own successor
distance (`LightsOut.successor_distance`), the behaviour quantity that the paper's theorem bounds MQE's by.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from typing import Literal

import jax
import numpy as np
import tyro

from mqe_model.agents import mqe
from mqe_model.data.dataset import Dataset
from mqe_model.toy.training import (
    action_distance_steps,
    actor_policy,
    agent_config_of,
    critic_greedy_policy,
    distance_steps,
    rollout_success,
    train_agent,
)

Encoding = Literal["onehot", "binary", "signed", "index"]
Presses = Literal["random", "distinct"]
Target = Literal["backup", "presses", "successor"]

log = logging.getLogger(__name__)


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

    def successor_distance(self, gamma: float) -> np.ndarray:
        """(2^buttons,) the random-press data's own successor distance, in steps, from any pattern s to
        s XOR x for each x: (log p(s | s) - log p(s XOR x | s)) / -log(gamma), p the discounted occupancy
        (1 - gamma) sum_k>=0 gamma^k P(s_k | s_0) of uniformly random presses; inf where x is unreachable.
        A metric (Myers et al.'s; the MQE paper's theorem bounds MQE's distance by it). Exact: the walk is
        diagonal in the Walsh-Hadamard basis, press set x's eigenvalue the mean of (-1)^popcount(x & mask)."""
        if not 0.0 < gamma < 1.0:
            raise ValueError(f"gamma {gamma}: must be in (0, 1)")
        characters = np.arange(1 << self.buttons)
        eigenvalues = np.mean([1.0 - 2.0 * (np.bitwise_count(characters & m) & 1) for m in self.masks], axis=0)
        occupancy = _walsh_hadamard((1.0 - gamma) / (1.0 - gamma * eigenvalues)) / len(characters)
        steps = np.full(len(characters), np.inf)
        steps[self.reachable] = np.log(occupancy[0] / occupancy[self.reachable]) / -np.log(gamma)
        return steps

    def button(self, actions: np.ndarray) -> np.ndarray:
        """The button each 2-d action in [-1, 1]^2 points at: (row, column) cells of width 2 / side."""
        cell = np.clip(np.floor((np.asarray(actions) + 1.0) / 2.0 * self.side), 0, self.side - 1).astype(np.int64)
        return cell[..., 0] * self.side + cell[..., 1]

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The patterns after pressing the button each action points at."""
        return np.asarray(states) ^ self.masks[self.button(actions)]

    def observe(self, states: np.ndarray, encoding: Encoding = "onehot") -> np.ndarray:
        """float32 observations: per light [off, on] (`onehot`, the puzzle's layout), 0/1 (`binary`), -1/+1
        (`signed`, zero-mean over random patterns), or one entry per reachable pattern (`index`: patterns
        share no input, so a network's first layer is a table of them and no parity needs computing)."""
        if encoding == "index":
            observations = np.zeros((*np.shape(states), len(self.reachable)), np.float32)
            np.put_along_axis(observations, self.reachable_index(states)[..., None], 1.0, axis=-1)
            return observations
        on = ((np.asarray(states)[..., None] >> np.arange(self.buttons)) & 1).astype(np.float32)
        if encoding == "onehot":
            return np.stack([1.0 - on, on], -1).reshape(*on.shape[:-1], 2 * self.buttons)
        if encoding == "binary":
            return on
        return 2.0 * on - 1.0

    def reachable_index(self, states: np.ndarray) -> np.ndarray:
        """Each pattern's position among the reachable ones; ValueError for a pattern no press set makes."""
        states = np.asarray(states)
        index = np.minimum(np.searchsorted(self.reachable, states), len(self.reachable) - 1)
        missing = self.reachable[index] != states
        if missing.any():
            unreachable = states[missing].ravel()[:3].tolist()
            raise ValueError(f"patterns {unreachable} are not reachable on the {self.side}x{self.side} board: "
                             "the index encoding numbers the reachable patterns only")
        return index

    def patterns(self, observations: np.ndarray, encoding: Encoding = "onehot") -> np.ndarray:
        """The light patterns that `observe` made `observations` of (its inverse)."""
        obs = np.asarray(observations)
        if encoding == "index":
            return self.reachable[np.argmax(obs, axis=-1)]
        on = obs[..., 1::2] if encoding == "onehot" else obs if encoding == "binary" else (obs + 1.0) / 2.0
        return ((on > 0.5).astype(np.int64) << np.arange(self.buttons)).sum(axis=-1)


def _walsh_hadamard(values: np.ndarray) -> np.ndarray:
    """sum_y (-1)^popcount(x & y) values[y] for every x, by butterflies (len(values) a power of two)."""
    out, half = np.asarray(values, np.float64), 1
    while half < len(out):
        pairs = out.reshape(-1, 2, half)
        out = np.concatenate([pairs[:, :1] + pairs[:, 1:], pairs[:, :1] - pairs[:, 1:]], axis=1).reshape(-1)
        half *= 2
    return out


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
    encoding: Encoding = "onehot"  # how a light reaches the networks (onehot is the puzzle's; index: one input per reachable pattern, a table)
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
    target: Target = "backup"  # 'presses' / 'successor': no RL, MQE's psi regressed onto the fewest presses / the data's successor distance

    def __post_init__(self) -> None:
        if not 2 <= self.side <= 4:
            raise ValueError(f"side {self.side}: must be 2, 3 or 4")
        if self.target != "backup" and self.agent != "mqe":
            raise ValueError(f"target {self.target!r} fits MQE's quasimetric critic; agent {self.agent!r} has none: "
                             f"leave --agent at mqe")
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
    action_spearman: float | None  # the same for the critic through its best button, min_a d(phi(s, a), psi(g)) (GCIQL: max_a Q); None with a supervised target
    action_distance_by_presses: dict[int, float] | None  # its mean in steps per true press count
    behaviour_spearman: float  # the same for the data's own successor distance (exact, LightsOut.successor_distance at gamma)
    behaviour_distance_by_presses: dict[int, float]  # its mean in steps per true press count
    critic_greedy_success_far: float  # the critic's greedy press, goals >= far presses away (supervised targets: by psi of the next pattern)
    policy_success_far: float | None  # the actor on the same goals; None with a supervised target, which trains no actor
    random_success_far: float  # random presses (the data's policy) on the same goals and budget
    num_far_pairs: int  # far pairs among the random ones
    train_seconds: float  # wall time of the training updates


def random_pairs(board: LightsOut, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` random reachable patterns and goals reachable from each (a reachable pattern XOR-ed on)."""
    starts = rng.choice(board.reachable, size=size)
    return starts, starts ^ rng.choice(board.reachable, size=size)


def fit_distance(board: LightsOut, config: LightsOutConfig, rng: np.random.Generator):
    """MQE's critic with no backup: psi regressed so that each head's MRN(psi(s), psi(g)), in steps, is the
    config's target from s to g (the fewest presses, or the data's successor distance at its gamma), on fresh
    random reachable pairs each update (mean squared error over heads and pairs, Adam at the config's lr).
    Whether this fits tells whether MQE's architecture can represent that distance at all. Returns (critic
    params, training seconds)."""
    import jax.numpy as jnp
    import optax

    agent_config = config.agent_config()
    critic = mqe.Critic(agent_config)
    example = jnp.asarray(board.observe(board.reachable[:1], config.encoding))
    params = critic.init(jax.random.PRNGKey(config.seed), example, jnp.zeros((1, 2)))["params"]
    optimizer = optax.adam(config.lr)

    successor = board.successor_distance(config.gamma) if config.target == "successor" else None

    def loss(params, s, g, target_steps):
        psi = critic.apply({"params": params}, jnp.concatenate([s, g]), method=mqe.Critic.psi)
        psi_s, psi_g = jnp.split(psi, 2, axis=1)
        steps = mqe.mrn_distance(psi_s, psi_g, agent_config.num_components) / agent_config.step_scale
        return jnp.mean(jnp.square(steps - target_steps[None]))

    @jax.jit
    def updates(params, opt_state, batches):
        def one(carry, batch):
            params, opt_state = carry
            value, grads = jax.value_and_grad(loss)(params, *batch)
            changes, opt_state = optimizer.update(grads, opt_state, params)
            return (optax.apply_updates(params, changes), opt_state), value
        (params, opt_state), values = jax.lax.scan(one, (params, opt_state), batches)
        return params, opt_state, values[-1]

    def batches():
        k, size = config.updates_per_dispatch, agent_config.batch_size
        s, g = random_pairs(board, rng, k * size)
        return (board.observe(s, config.encoding).reshape(k, size, -1), board.observe(g, config.encoding).reshape(k, size, -1),
                (board.distance(s, g) if successor is None else successor[s ^ g]).astype(np.float32).reshape(k, size))

    opt_state, start = optimizer.init(params), time.perf_counter()
    dispatches = config.steps // config.updates_per_dispatch
    for i in range(dispatches):
        params, opt_state, value = updates(params, opt_state, batches())
        if (i + 1) % max(1, dispatches // 4) == 0:
            log.info("step %d: squared error %.4f steps^2", (i + 1) * config.updates_per_dispatch, float(value))
    jax.block_until_ready(params)
    return params, time.perf_counter() - start


def psi_lookahead_policy(board: LightsOut, config: LightsOutConfig, distance):
    """The press whose next pattern is nearest the goal by `distance(obs, goal_obs)` (psi to psi): the greedy
    read-out of a critic whose phi(s, a) was not trained."""

    def act(obs: np.ndarray, goal_obs: np.ndarray) -> np.ndarray:
        patterns = board.patterns(obs, config.encoding)
        after = [board.observe(patterns ^ mask, config.encoding) for mask in board.masks]
        nearness = np.stack([np.asarray(distance(a, goal_obs)) for a in after], -1)
        return board.button_actions[nearness.argmin(-1)]

    return act


def train_and_evaluate(config: LightsOutConfig) -> LightsOutResult:
    """Train on random presses (or fit the presses, `target`), then compare d(s, g) with the fewest presses
    and roll out far goals."""
    from scipy.stats import spearmanr

    board = LightsOut(config.side)
    rng = np.random.default_rng(config.seed)

    def observe(states: np.ndarray) -> np.ndarray:
        return board.observe(states, config.encoding)

    if config.target != "backup":
        critic_params, train_seconds = fit_distance(board, config, rng)
        distance = jax.jit(lambda s, g: mqe.state_goal_distance(critic_params, config.agent_config(), s, g))
        greedy, actor = psi_lookahead_policy(board, config, distance), None
    else:
        data = random_press_dataset(board, rng, config.episodes, config.episode_length, config.encoding,
                                    config.presses)
        agent, train_seconds = train_agent(config.agent, data, config.agent_config(), config.steps,
                                           config.updates_per_dispatch, config.seed, rng)
        distance = functools.partial(distance_steps, agent)
        greedy, actor = critic_greedy_policy(agent, board.button_actions), actor_policy(agent, config.seed)

    starts, goals = random_pairs(board, rng, config.pairs)
    presses = board.distance(starts, goals)

    def ranked(steps: np.ndarray) -> tuple[float, dict[int, float]]:
        by_presses = {int(p): float(steps[presses == p].mean()) for p in np.unique(presses)}
        return float(spearmanr(steps, presses).statistic), by_presses

    spearman, by_presses = ranked(np.asarray(distance(observe(starts), observe(goals))))
    action_spearman, action_by_presses = None, None
    if config.target == "backup":
        through_actions = action_distance_steps(agent, board.button_actions)
        action_spearman, action_by_presses = ranked(through_actions(observe(starts), observe(goals)))
    behaviour_spearman, behaviour_by_presses = ranked(board.successor_distance(config.gamma)[starts ^ goals])

    far = presses >= config.far
    budget = int(np.ceil(config.budget_factor * presses.max()))

    def success(policy) -> float:
        return rollout_success(board.step, observe, policy, starts[far], goals[far], budget)

    def random_presses(obs: np.ndarray, goal_obs: np.ndarray) -> np.ndarray:
        return rng.uniform(-1.0, 1.0, size=(len(obs), 2))

    return LightsOutResult(
        spearman=spearman,
        mean_distance_by_presses=by_presses,
        action_spearman=action_spearman,
        action_distance_by_presses=action_by_presses,
        behaviour_spearman=behaviour_spearman,
        behaviour_distance_by_presses=behaviour_by_presses,
        critic_greedy_success_far=success(greedy),
        policy_success_far=None if actor is None else success(actor),
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
    if result.action_spearman is not None:
        print(f"through the best button (phi): Spearman {result.action_spearman:.3f}; by presses "
              + ", ".join(f"{p}: {d:.2f}" for p, d in result.action_distance_by_presses.items()))
    print(f"the data's own successor distance (exact): Spearman {result.behaviour_spearman:.3f}; by presses "
          + ", ".join(f"{p}: {d:.1f}" for p, d in result.behaviour_distance_by_presses.items()))
    actor = "none trained" if result.policy_success_far is None else f"{result.policy_success_far:.2f}"
    print(f"far goals (>= {config.far} presses, {result.num_far_pairs} pairs), success within "
          f"{config.budget_factor:g}x the most presses: critic greedy {result.critic_greedy_success_far:.2f}, "
          f"actor {actor}, random presses {result.random_success_far:.2f}")
    print(json.dumps(dataclasses.asdict(result)))


if __name__ == "__main__":
    main()
