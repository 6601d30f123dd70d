"""A deterministic gridworld maze where the true temporal distances are known.

Used to check that MQE learns what the paper claims: trained offline on random-walk data, the
learned d(s, g) ranks states like the shortest-path distance, and the greedy goal-reaching policy
reaches goals far beyond what the random walk reaches in the same number of steps.

States are one-hot cell indices; actions are 2-d vectors in [-1, 1]^2 and move one cell along the
axis of the larger component (a move into a wall stays put), so a continuous policy acts here.
"""

from __future__ import annotations

import collections
import dataclasses
import logging

import numpy as np
import tyro

from mqe_model.data.dataset import Dataset
from mqe_model.toy.training import (
    actor_policy,
    agent_config_of,
    critic_greedy_policy,
    rollout_success,
    train_agent,
)

MAZE = (
    "###########",
    "#...#.....#",
    "#.#.#.###.#",
    "#.#...#...#",
    "#.#####.#.#",
    "#...#...#.#",
    "###.#.###.#",
    "#.....#...#",
    "###########",
)
MOVES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]])  # unit actions: +x, -x, +y, -y


class GridMaze:
    """Free cells of a character maze, their moves and all-pairs shortest-path distances."""

    def __init__(self, layout: tuple[str, ...] = MAZE):
        self.cells = [(x, y) for y, row in enumerate(layout) for x, ch in enumerate(row) if ch == "."]
        self.index = {cell: i for i, cell in enumerate(self.cells)}
        self.num_states = len(self.cells)
        # next_state[s, m]: the cell reached from s by unit move m (s itself when blocked).
        self.next_state = np.array(
            [
                [self.index.get((x + dx, y + dy), s) for dx, dy in MOVES]
                for s, (x, y) in enumerate(self.cells)
            ]
        )
        self.distances = self._all_pairs_shortest_paths()

    def _all_pairs_shortest_paths(self) -> np.ndarray:
        dist = np.full((self.num_states, self.num_states), -1, dtype=np.int64)
        for source in range(self.num_states):
            dist[source, source] = 0
            queue = collections.deque([source])
            while queue:
                s = queue.popleft()
                for t in self.next_state[s]:
                    if dist[source, t] < 0:
                        dist[source, t] = dist[source, s] + 1
                        queue.append(t)
        return dist

    def observe(self, states: np.ndarray) -> np.ndarray:
        """One-hot float32 observations of state indices."""
        return np.eye(self.num_states, dtype=np.float32)[states]

    def step(self, states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Next states for continuous actions: the move along the larger component's axis."""
        actions = np.asarray(actions)
        axis = np.argmax(np.abs(actions), axis=-1)
        sign = np.take_along_axis(actions, axis[..., None], axis=-1)[..., 0] >= 0
        move = 2 * axis + np.where(sign, 0, 1)
        return self.next_state[states, move]


def random_walk_dataset(
    maze: GridMaze, rng: np.random.Generator, episodes: int, length: int
) -> Dataset:
    """Offline data: uniform random actions in [-1, 1]^2 from uniformly random start cells.

    Continuous actions (each picks one of the four moves with equal probability) let the critic
    see the whole action space the actor will query.
    """
    states = np.empty((episodes, length), dtype=np.int64)
    actions = rng.uniform(-1.0, 1.0, size=(episodes, length, 2)).astype(np.float32)
    states[:, 0] = rng.integers(0, maze.num_states, size=episodes)
    for t in range(1, length):
        states[:, t] = maze.step(states[:, t - 1], actions[:, t - 1])
    terminals = np.zeros((episodes, length), dtype=bool)
    terminals[:, -1] = True
    return Dataset(
        observations=maze.observe(states.reshape(-1)),
        actions=actions.reshape(-1, 2),
        terminals=terminals.reshape(-1),
        source="gridworld random walk",
    )


def random_walk_success(
    maze: GridMaze, rng: np.random.Generator, starts: np.ndarray, goals: np.ndarray, budget: int, repeats: int
) -> float:
    """Fraction of random walks (the behaviour policy) from `starts` that hit `goals` within `budget` steps."""
    s = np.repeat(starts, repeats)
    g = np.repeat(goals, repeats)
    reached = s == g
    for _ in range(budget):
        s = maze.next_state[s, rng.integers(0, len(MOVES), size=s.shape)]
        reached |= s == g
    return float(reached.mean())


@dataclasses.dataclass(frozen=True)
class GridworldConfig:
    """Train MQE on random-walk data in the bundled maze and report what it learned."""

    steps: int = 20000  # gradient updates
    seed: int = 0  # seed for data, initialisation and evaluation
    episodes: int = 400  # random-walk episodes in the offline dataset
    episode_length: int = 100  # steps per random-walk episode
    preset: str = "tiny"  # MQE preset (see mqe_model.agents.mqe.get_config)
    gamma: float = 0.95  # discount; the maze's longest shortest path is 22 steps
    alpha: float = 0.03  # behaviour-cloning weight (the paper's value for pointmaze)
    lr: float = 1e-3  # Adam learning rate (higher than the paper's 3e-4 to train fast on a CPU)
    updates_per_dispatch: int = 50  # updates run in one jitted lax.scan call
    far: int = 12  # goals at least this many steps away count as far
    near: int = 3  # goals at most this many steps away (and not the start) count as near
    budget_factor: float = 2.0  # the policy gets budget_factor x the set's longest shortest path
    set: tuple[str, ...] = ()  # MQE config overrides, key=value (e.g. --set actor_goal_pairs=all)

    def __post_init__(self) -> None:
        if not 1 <= self.near < self.far:
            raise ValueError(f"need 1 <= near ({self.near}) < far ({self.far})")
        self.agent_config()  # a bad --set or step count is refused here, before any training

    def agent_config(self):
        """The preset with this run's gamma, alpha, lr and --set overrides."""
        return agent_config_of(self)


@dataclasses.dataclass(frozen=True)
class GridworldResult:
    """What the trained agent learned about the maze."""

    spearman: float  # rank correlation of learned d(s, g) with the shortest-path distance, all pairs s != g
    policy_success_far: float  # actor success on far goals within the budget
    critic_greedy_success_far: float  # success of argmin_a d(phi(s, a), psi(g)) over the four moves
    policy_success_near: float  # actor success on near goals within their budget
    critic_greedy_success_near: float  # the critic's greedy moves on near goals
    random_walk_success_far: float  # behaviour (random walk) success on the same goals and budget
    num_far_pairs: int  # number of far (start, goal) pairs evaluated
    train_seconds: float  # wall time of the training updates


def train_and_evaluate(config: GridworldConfig) -> GridworldResult:
    """Train the agent on random-walk data and measure distance ranking and goal reaching."""
    from scipy.stats import spearmanr

    maze = GridMaze()
    rng = np.random.default_rng(config.seed)
    data = random_walk_dataset(maze, rng, config.episodes, config.episode_length)
    agent, train_seconds = train_agent("mqe", data, config.agent_config(), config.steps, config.updates_per_dispatch,
                                     config.seed, rng)

    n = maze.num_states
    s_idx, g_idx = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    pairs = s_idx != g_idx
    learned = np.asarray(
        agent.distance(maze.observe(s_idx[pairs]), maze.observe(g_idx[pairs]))
    )
    spearman = float(spearmanr(learned, maze.distances[pairs]).statistic)

    far = maze.distances >= config.far
    near = (maze.distances >= 1) & (maze.distances <= config.near)
    act = actor_policy(agent, config.seed)
    critic_greedy = critic_greedy_policy(agent, MOVES)

    def budget(pairs: np.ndarray) -> int:
        return int(np.ceil(config.budget_factor * maze.distances[pairs].max()))

    def success(policy, pairs: np.ndarray) -> float:
        return rollout_success(maze.step, maze.observe, policy, *np.nonzero(pairs), budget(pairs))

    return GridworldResult(
        spearman=spearman,
        policy_success_far=success(act, far),
        critic_greedy_success_far=success(critic_greedy, far),
        policy_success_near=success(act, near),
        critic_greedy_success_near=success(critic_greedy, near),
        random_walk_success_far=random_walk_success(maze, rng, *np.nonzero(far), budget(far), repeats=20),
        num_far_pairs=int(far.sum()),
        train_seconds=train_seconds,
    )


def main() -> None:
    """CLI: train on the bundled maze and print what was learned."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = tyro.cli(GridworldConfig)
    result = train_and_evaluate(config)
    print(f"trained {config.steps} updates in {result.train_seconds:.1f} s")
    print(f"Spearman(learned distance, shortest path), all pairs: {result.spearman:.3f}")
    print(
        f"far goals (>= {config.far} steps, {result.num_far_pairs} pairs), success within "
        f"{config.budget_factor:g}x the longest shortest path:"
    )
    print(f"  MQE actor            {result.policy_success_far:.2f}")
    print(f"  MQE critic, greedy   {result.critic_greedy_success_far:.2f}")
    print(f"  random walk (data)   {result.random_walk_success_far:.2f}")
    print(f"near goals (1-{config.near} steps): MQE actor {result.policy_success_near:.2f}, "
          f"critic greedy {result.critic_greedy_success_near:.2f}")


if __name__ == "__main__":
    main()
