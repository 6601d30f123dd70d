import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mqe_model.toy.gridworld import GridMaze, GridworldConfig

# The training runs in its own process with XLA's optimizations on: unlike the other tests this one
# is bound by running compiled code (20000 updates), not by compiling it (tests/conftest.py).
TRAIN_AND_EVALUATE = (
    "import dataclasses, json\n"
    "from mqe_model.toy.gridworld import GridworldConfig, train_and_evaluate\n"
    "print(json.dumps(dataclasses.asdict(train_and_evaluate(GridworldConfig()))))\n"
)


def test_maze_distances_are_shortest_paths():
    maze = GridMaze(("#####", "#...#", "#.#.#", "#####"))
    # Cells: (1,1) (2,1) (3,1) (1,2) (3,2); (1,2) to (3,2) goes around the top: 4 moves.
    a, b = maze.index[(1, 2)], maze.index[(3, 2)]
    assert maze.distances[a, b] == 4 == maze.distances[b, a]
    assert np.all(maze.distances >= 0)


def test_actions_move_along_the_larger_component():
    maze = GridMaze(("#####", "#...#", "#.#.#", "#####"))
    start = np.array([maze.index[(2, 1)]] * 3)
    moved = maze.step(start, np.array([[0.9, -0.2], [-0.3, 0.1], [0.1, 0.8]]))
    # +x -> (3,1); -x -> (1,1); +y from (2,1) hits the wall at (2,2) and stays.
    assert [maze.cells[s] for s in moved] == [(3, 1), (1, 1), (2, 1)]


@pytest.mark.slow
def test_mqe_learns_the_maze_and_stitches_far_goals():
    """The paper's claim on a problem with known answers: offline random-walk data in, a distance
    that ranks like the shortest path and a policy that reaches goals the data's walk does not."""
    flags = [flag for flag in os.environ.get("XLA_FLAGS", "").split() if "xla_backend_optimization_level" not in flag]
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", TRAIN_AND_EVALUATE], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["spearman"] >= 0.9
    assert result["random_walk_success_far"] <= 0.05
    assert result["policy_success_far"] >= 0.5
    assert result["critic_greedy_success_far"] >= 0.7


def test_bad_overrides_and_goal_sets_are_refused_before_training():
    with pytest.raises(ValueError, match="has no field 'actor_goal_pair'; did you mean actor_goal_pairs"):
        GridworldConfig(set=("actor_goal_pair=all",))
    with pytest.raises(ValueError, match=r"need 1 <= near \(12\) < far \(12\)"):
        GridworldConfig(near=12)
    assert GridworldConfig(set=("actor_goal_pairs=distances",)).agent_config().actor_goal_pairs == "distances"


def test_sampler_overrides_reach_the_toys_batches(monkeypatch):
    """The toy samples with the trainer's sampler, so --set actor_p_random_goal and its BC switch apply
    (it used to build a sampler of its own that dropped them)."""
    from mqe_model.agents import mqe
    from mqe_model.toy import gridworld

    seen = []
    update_many = mqe.MQEAgent.update_many
    monkeypatch.setattr(mqe.MQEAgent, "update_many",
                        lambda self, batches: (seen.append(sorted(batches)), update_many(self, batches))[1])
    config = GridworldConfig(steps=10, updates_per_dispatch=5, episodes=20, episode_length=6,
                             set=("actor_p_random_goal=0.5", "actor_bc_on_random_goals=false"))
    result = gridworld.train_and_evaluate(config)
    assert seen and all("actor_goal_own" in keys for keys in seen)
    assert 0.0 <= result.policy_success_far <= 1.0
