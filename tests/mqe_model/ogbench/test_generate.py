"""mqe-ogbench data: OGBench-format files, loadable by our loader and OGBench's, deterministic per seed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mqe_model.data.dataset import load_dataset
from mqe_model.ogbench import cli, generate, manip_data, maze_data

ogbench = pytest.importorskip("ogbench", reason="dataset generation needs `pip install ogbench` (and MuJoCo)")

MAZE = "pointmaze-medium-navigate-v0"
EPISODES, LENGTH = 3, 50


def main(args: list[str]) -> int:
    """`mqe-ogbench data ARGS`; its exit code."""
    return cli.main(["data", *args])


def _generate(out_dir, name=MAZE, episodes=EPISODES, length=LENGTH, *extra: str) -> list[str]:
    return [name, "--out-dir", str(out_dir), "--episodes", str(episodes), "--length", str(length),
            "--no-progress", *extra]


@pytest.fixture(scope="module")
def maze_dir(tmp_path_factory):
    """A tiny pointmaze dataset written by two worker processes."""
    out = tmp_path_factory.mktemp("maze")
    assert main(_generate(out, MAZE, EPISODES, LENGTH, "--workers", "2")) == 0
    return out


def test_maze_file_has_official_keys_dtypes_and_episode_ends(maze_dir):
    with np.load(maze_dir / f"{MAZE}.npz") as f:
        assert set(f.files) == {"observations", "actions", "terminals", "qpos", "qvel"}
        assert f["observations"].dtype == np.float32 and f["actions"].dtype == np.float32
        terminals = f["terminals"].reshape(EPISODES, LENGTH)
        actions = f["actions"]
    assert terminals[:, -1].all() and not terminals[:, :-1].any()
    assert np.abs(actions).max() <= 1.0 and actions.shape == (EPISODES * LENGTH, 2)
    with np.load(maze_dir / f"{MAZE}-val.npz") as f:
        assert len(f["terminals"]) == LENGTH  # at least one validation episode


def test_maze_file_loads_with_our_loader_and_ogbench(maze_dir):
    dataset = load_dataset(maze_dir / f"{MAZE}.npz")
    assert dataset.size == EPISODES * LENGTH and list(dataset.trajectory_lengths) == [LENGTH] * EPISODES
    env, train, val = ogbench.make_env_and_datasets(MAZE, dataset_path=str(maze_dir / f"{MAZE}.npz"))
    assert train["observations"].shape[1] == env.observation_space.shape[0] == 2
    assert len(val["observations"]) > 0
    env.close()


def test_settings_record_seed_sizes_and_mujoco_version(maze_dir):
    import mujoco

    record = json.loads((maze_dir / f"{MAZE}.json").read_text())
    assert record["seed"] == 0 and record["episodes"] == EPISODES and record["length"] == LENGTH
    assert record["mujoco_version"] == mujoco.__version__
    assert record["policy"]["action_noise_std"] == 0.5 and record["official_size"] is False


def test_same_seed_same_bytes_for_any_worker_count(maze_dir, tmp_path):
    assert main(_generate(tmp_path / "one", MAZE, EPISODES, LENGTH, "--workers", "1")) == 0
    for suffix in (".npz", "-val.npz"):
        assert (tmp_path / "one" / f"{MAZE}{suffix}").read_bytes() == (maze_dir / f"{MAZE}{suffix}").read_bytes()
    assert main(_generate(tmp_path / "other", MAZE, EPISODES, LENGTH, "--seed", "1", "--workers", "1")) == 0
    assert (tmp_path / "other" / f"{MAZE}.npz").read_bytes() != (maze_dir / f"{MAZE}.npz").read_bytes()


def test_refuses_to_overwrite_without_flag(maze_dir, capsys):
    before = (maze_dir / f"{MAZE}.npz").read_bytes()
    assert main(_generate(maze_dir, MAZE, EPISODES, LENGTH, "--workers", "1")) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (maze_dir / f"{MAZE}.npz").read_bytes() == before
    assert main(_generate(maze_dir, MAZE, EPISODES, LENGTH, "--workers", "1", "--overwrite")) == 0
    assert (maze_dir / f"{MAZE}.npz").read_bytes() == before  # same seed, same bytes
    assert not list(maze_dir.glob(".*tmp*"))


def test_cube_single_play_tiny(tmp_path):
    name = "cube-single-play-v0"
    assert main(_generate(tmp_path, name, 2, 60, "--workers", "1")) == 0
    dataset = load_dataset(tmp_path / f"{name}.npz")
    assert dataset.observations.shape == (120, 28) and dataset.actions.shape == (120, 5)
    assert np.abs(dataset.actions).max() <= 1.0 and list(dataset.trajectory_lengths) == [60, 60]
    with np.load(tmp_path / f"{name}.npz") as f:
        assert f["qpos"].shape[0] == 120 and f["qvel"].shape[0] == 120
    env, train, _ = ogbench.make_env_and_datasets(name, dataset_path=str(tmp_path / f"{name}.npz"))
    assert train["observations"].shape[1] == env.observation_space.shape[0]
    env.close()
    record = json.loads((tmp_path / f"{name}.json").read_text())
    assert record["policy"]["noise"] == 0.1 and record["policy"]["noise_smoothing"] == 0.5
    assert record["val_episodes"] == 1


def test_noisy_dataset_uses_markov_oracles_with_random_actions(tmp_path):
    name = "cube-single-noisy-v0"
    assert main(_generate(tmp_path, name, 1, 40, "--workers", "1")) == 0
    dataset = load_dataset(tmp_path / f"{name}.npz")
    assert dataset.actions.shape == (40, 5) and np.abs(dataset.actions).max() <= 1.0
    record = json.loads((tmp_path / f"{name}.json").read_text())
    assert record["policy"]["oracle"] == "markov" and record["policy"]["p_random_action"] == 0.1
    assert manip_data.random_action_probability("puzzle-4x4-v0", "noisy") == 0.2
    assert manip_data.random_action_probability("scene-v0", "play") == 0.0


def test_stitch_goals_are_four_cells_away():
    collector = maze_data.MazeCollector("pointmaze-medium-v0", "stitch", 201)
    rng = np.random.default_rng(0)
    for _ in range(20):
        start, goal = collector.sample_task(rng)
        assert maze_data.bfs_distances(collector.maze_map, start)[goal] == maze_data.STITCH_GOAL_STEPS
    collector.env.close()


def test_maze_helpers_on_a_small_map():
    # 1 = wall. A corridor (1,1)-(1,3) turning down to (3,3).
    maze_map = np.array([[1, 1, 1, 1, 1],
                         [1, 0, 0, 0, 1],
                         [1, 1, 1, 0, 1],
                         [1, 1, 1, 0, 1],
                         [1, 1, 1, 1, 1]])
    assert maze_data.cells_at_distance(maze_map, (1, 1), 4) == [(3, 3)]
    assert maze_data.bfs_distances(maze_map, (1, 1))[0, 0] == -1
    # Corridor middles (1,2) and (2,3) are not junctions; the ends and the corner are.
    assert set(maze_data.junction_cells(maze_map)) == {(1, 1), (1, 3), (3, 3)}


def test_scene_health_check_rejects_a_cube_out_of_view():
    qpos = np.zeros((5, 25))
    qpos[:, 14:17] = [0.4, 0.0, 0.02]
    assert manip_data.scene_episode_healthy(qpos)
    right = qpos.copy()
    right[3, 15] = 0.29
    assert not manip_data.scene_episode_healthy(right)
    left = qpos.copy()
    left[3, 15] = -0.31
    assert not manip_data.scene_episode_healthy(left)
    left[3, 16] = 0.07  # inside the drawer: allowed
    assert manip_data.scene_episode_healthy(left)


def test_stack_probability_per_environment():
    rng = np.random.default_rng(0)
    assert manip_data.stack_probability("cube-single-v0", rng) == 0.0
    assert all(0.0 <= manip_data.stack_probability("cube-double-v0", rng) <= 0.25 for _ in range(50))
    assert all(0.05 <= manip_data.stack_probability("cube-triple-v0", rng) <= 0.35 for _ in range(50))
    assert manip_data.stack_probability("scene-v0", rng) == 0.5


def test_official_sizes():
    assert (generate.dataset_spec("pointmaze-giant-navigate").episodes, generate.dataset_spec("pointmaze-giant-navigate").length) == (500, 2001)
    stitch = generate.dataset_spec("pointmaze-large-stitch-v0")
    assert (stitch.episodes, stitch.length, stitch.env_id) == (5000, 201, "pointmaze-large-v0")
    play = generate.dataset_spec("scene-play-v0")
    assert (play.episodes, play.length, play.val_episodes, play.env_id) == (1000, 1001, 100, "scene-v0")
    assert generate.dataset_spec("cube-triple-noisy-v0").episodes == 3000
    assert generate.dataset_spec("puzzle-4x6-play").episodes == 5000


@pytest.mark.parametrize(("name", "reason"), [
    ("pointmaze-tiny-navigate-v0", "unknown dataset"),
    ("antmaze-large-navigate-v0", "expert"),
    ("humanoidmaze-giant-stitch-v0", "expert"),
    ("visual-cube-single-play-v0", "render"),
    ("cube-octuple-play-v0", "unknown dataset"),
    ("pointmaze-medium-explore-v0", "unknown dataset"),
])
def test_bad_dataset_is_one_line_and_exit_2(name, reason, tmp_path, capsys):
    assert main([name, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and reason in err and err.startswith("mqe-ogbench data: error:")
    assert not any(tmp_path.iterdir())


def test_bad_sizes_exit_2(tmp_path):
    assert main([MAZE, "--out-dir", str(tmp_path), "--length", "1"]) == 2
    assert main([MAZE, "--out-dir", str(tmp_path), "--episodes", "0"]) == 2
    with pytest.raises(SystemExit) as exit_info:  # tyro reports __post_init__ errors and exits 2
        main([MAZE, "--out-dir", str(tmp_path), "--workers", "0"])
    assert exit_info.value.code == 2
