"""Pointmaze episodes as OGBench's `generate_locomaze.py` collects them (navigate and stitch datasets).

The behaviour policy is the maze's BFS oracle: each step moves along the unit vector towards
`get_oracle_subgoal` plus N(0, 0.5) noise, clipped to [-1, 1]. Navigate episodes start in a random
free cell, head for a random junction cell and get a new junction goal whenever they reach one;
stitch episodes are short and their goal is a cell exactly 4 BFS steps from the start.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

ACTION_NOISE_STD = 0.5  # std of the Gaussian added to the oracle's unit direction (OGBench pointmaze)
STITCH_GOAL_STEPS = 4  # BFS distance in cells between a stitch episode's start and its goal
Cell = tuple[int, int]


def free_cells(maze_map: np.ndarray) -> list[Cell]:
    """All free (0) cells of the maze, row by row."""
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(maze_map == 0), strict=True)]


def junction_cells(maze_map: np.ndarray) -> list[Cell]:
    """Free cells that are not the middle of a straight corridor: navigate goals are drawn here."""
    cells = []
    for i, j in free_cells(maze_map):
        # The maze has a wall border, so the neighbours of a free cell are always inside the map.
        up, down, left, right = maze_map[i - 1, j], maze_map[i + 1, j], maze_map[i, j - 1], maze_map[i, j + 1]
        vertical_corridor = up == 0 and down == 0 and left == 1 and right == 1
        horizontal_corridor = left == 0 and right == 0 and up == 1 and down == 1
        if not (vertical_corridor or horizontal_corridor):
            cells.append((i, j))
    return cells


def bfs_distances(maze_map: np.ndarray, start: Cell) -> np.ndarray:
    """Steps from `start` to every cell through free cells (4-connected); -1 where unreachable."""
    distances = np.full(maze_map.shape, -1, dtype=np.int64)
    distances[start] = 0
    queue = deque([start])
    while queue:
        i, j = queue.popleft()
        for di, dj in ((-1, 0), (0, -1), (1, 0), (0, 1)):
            ni, nj = i + di, j + dj
            if (0 <= ni < maze_map.shape[0] and 0 <= nj < maze_map.shape[1]
                    and maze_map[ni, nj] == 0 and distances[ni, nj] == -1):
                distances[ni, nj] = distances[i, j] + 1
                queue.append((ni, nj))
    return distances


def cells_at_distance(maze_map: np.ndarray, start: Cell, steps: int) -> list[Cell]:
    """Free cells exactly `steps` BFS steps from `start`."""
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(bfs_distances(maze_map, start) == steps), strict=True)]


class MazeCollector:
    """Collects pointmaze episodes in one process; one environment, reused across episodes."""

    def __init__(self, env_id: str, dataset_type: str, length: int):
        import gymnasium
        import ogbench  # noqa: F401  (registers the environments)

        self.dataset_type = dataset_type
        self.env = gymnasium.make(env_id, terminate_at_goal=False, max_episode_steps=length,
                                  disable_env_checker=True)
        maze_map = self.env.unwrapped.maze_map
        self.maze_map = maze_map
        self.all_cells = free_cells(maze_map)
        self.goal_cells = junction_cells(maze_map)

    def sample_task(self, rng: np.random.Generator) -> tuple[Cell, Cell]:
        """Start and goal cells of a new episode."""
        init_ij = self.all_cells[rng.integers(len(self.all_cells))]
        if self.dataset_type == "navigate":
            return init_ij, self.goal_cells[rng.integers(len(self.goal_cells))]
        near = cells_at_distance(self.maze_map, init_ij, STITCH_GOAL_STEPS)
        # A start with no cell 4 steps away (a tiny dead end) keeps its own cell, as OGBench does.
        return init_ij, near[rng.integers(len(near))] if near else init_ij

    def collect(self, seed: int) -> dict[str, Any]:
        """One episode: observations, actions, terminals, qpos, qvel (and the start and goal cells)."""
        # The maze draws its start and goal noise from the global np.random: seed it too.
        np.random.seed(seed)  # noqa: NPY002
        self.env.action_space.seed(seed)
        rng = np.random.default_rng(seed)
        init_ij, goal_ij = self.sample_task(rng)
        ob, _ = self.env.reset(seed=seed, options={"task_info": {"init_ij": init_ij, "goal_ij": goal_ij}})
        maze = self.env.unwrapped
        keys = ("observations", "actions", "terminals", "qpos", "qvel")
        episode: dict[str, list] = {k: [] for k in keys}
        done = False
        while not done:
            xy = maze.get_xy()
            subgoal_xy, _ = maze.get_oracle_subgoal(xy, maze.cur_goal_xy)
            direction = np.asarray(subgoal_xy) - xy
            direction = direction / (np.linalg.norm(direction) + 1e-6)
            action = np.clip(direction + rng.normal(0.0, ACTION_NOISE_STD, direction.shape), -1, 1)
            next_ob, _, terminated, truncated, info = self.env.step(action)
            done = terminated or truncated
            if info["success"] and self.dataset_type == "navigate":
                maze.set_goal(goal_ij=self.goal_cells[rng.integers(len(self.goal_cells))])
            for key, value in zip(keys, (ob, action, done, info["prev_qpos"], info["prev_qvel"]), strict=True):
                episode[key].append(value)
            ob = next_ob
        arrays = {k: np.asarray(v, dtype=bool if k == "terminals" else np.float32) for k, v in episode.items()}
        return {"arrays": arrays, "init_ij": init_ij, "goal_ij": goal_ij, "retries": 0}
