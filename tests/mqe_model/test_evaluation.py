"""OGBench evaluation hook: worker processes, 5 tasks, deterministic actions (needs `ogbench`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from train_helpers import TMP, run_args, write_state_npz

from mqe_model import train

pytest.importorskip("ogbench", reason="the evaluation hook needs `pip install ogbench` (and MuJoCo)")


MAZE = "pointmaze-medium-navigate-v0"


def maze_eval_run(name: str, workers: int = 1) -> tuple[Path, list[str]]:
    """Workdir and command line of a 10-update GCBC run evaluated once (1 episode a task) on MAZE."""
    # pointmaze-medium: 2-d positions and 2-d actions, so a tiny policy trained on random walks fits.
    data = write_state_npz(TMP / f"{name}.npz", episodes=4, length=20, obs_dim=2, action_dim=2)
    workdir = TMP / name
    return workdir, run_args(workdir, data, "gcbc", 10, "--eval-env", MAZE, "--eval-every", "10",
                             "--eval-episodes", "1", "--eval-workers", str(workers))


def test_training_with_evaluation_logs_success_rates():
    import json

    workdir, args = maze_eval_run("eval-run", workers=2)
    assert train.main(args) == 0
    lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    evals = [x for x in lines if "eval/success" in x]
    assert len(evals) == 1 and evals[0]["step"] == 10
    assert all(0 <= evals[0][f"eval/task{i}_success"] <= 1 for i in range(1, 6))


def test_each_vmapped_seed_is_evaluated():
    import json

    data = write_state_npz(TMP / "maze2.npz", episodes=4, length=20, obs_dim=2, action_dim=2)
    workdir = TMP / "eval-run-seeds"
    args = run_args(workdir, data, "gcbc", 10, "--num-seeds", "2", "--eval-env", "pointmaze-medium-navigate-v0",
                    "--eval-every", "10", "--eval-episodes", "2", "--eval-workers", "2")
    assert train.main(args) == 0
    (row,) = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines() if "eval/success" in x]
    seeds = [row["eval/seed0_success"], row["eval/seed1_success"]]
    assert all(0 <= s <= 1 for s in seeds) and row["eval/success"] == pytest.approx(sum(seeds) / 2)
    tasks = [row[f"eval/task{i}_success"] for i in range(1, 6)]
    assert row["eval/success"] == pytest.approx(sum(tasks) / 5)


def test_eval_start_skips_the_early_evaluations():
    import json

    data = write_state_npz(TMP / "maze3.npz", episodes=4, length=20, obs_dim=2, action_dim=2)
    workdir = TMP / "eval-run-start"
    args = run_args(workdir, data, "gcbc", 40, "--eval-env", "pointmaze-medium-navigate-v0", "--eval-every", "10",
                    "--eval-start", "25", "--save-every", "10", "--eval-episodes", "1", "--eval-workers", "1")
    assert train.main(args) == 0
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in rows if "eval/success" in x] == [30, 40]


def test_resuming_a_finished_run_completes_its_missing_final_evaluation():
    import json

    workdir, args = maze_eval_run("eval-run-resume")
    assert train.main(args) == 0
    metrics = workdir / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    (evaluation,) = [x for x in rows if "eval/success" in x]
    # As if the process had died during its final evaluation: trained and saved, not evaluated.
    metrics.write_text("".join(json.dumps(x) + "\n" for x in rows if "eval/success" not in x))

    def evaluations() -> list[dict]:
        return [json.loads(x) for x in metrics.read_text().splitlines() if "eval/success" in x]

    assert train.main([*args, "--resume"]) == 0
    assert evaluations() == [evaluation]  # the same checkpoint, episodes and seeds: the same result
    assert train.main([*args, "--resume"]) == 0
    assert evaluations() == [evaluation]  # evaluated once, not again


def kill_evaluation_workers() -> None:
    """SIGKILL this process's children (the evaluation pool's workers), once they exist."""
    import multiprocessing
    import signal
    import time

    deadline = time.monotonic() + 60
    while not multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGKILL)


def test_a_broken_worker_pool_fails_its_evaluations_and_later_ones_get_fresh_workers():
    import time

    from mqe_model import checkpoints
    from mqe_model.evaluation import OGBenchEvaluator

    data = write_state_npz(TMP / "maze5.npz", episodes=4, length=20, obs_dim=2, action_dim=2)
    workdir = TMP / "eval-run-broken"
    assert train.main(run_args(workdir, data, "gcbc", 10)) == 0
    step_dir = checkpoints.step_dirs(workdir / "checkpoints")[10]
    metadata, params = checkpoints.read_metadata(step_dir), checkpoints.restore_params(step_dir)

    evaluator = OGBenchEvaluator(MAZE, 1, 1)
    evaluator.submit(10, "gcbc", metadata, params)
    kill_evaluation_workers()
    deadline = time.monotonic() + 60
    while not evaluator.failed and time.monotonic() < deadline:
        assert evaluator.poll() == []
        time.sleep(0.1)
    assert evaluator.failed == [10]
    evaluator.submit(20, "gcbc", metadata, params)
    (result,) = list(evaluator.finish())
    assert result[0] == 20 and 0 <= result[1]["eval/success"] <= 1


def test_a_run_whose_final_evaluation_broke_says_so_and_resume_completes_it(monkeypatch, capsys):
    import json

    from mqe_model import evaluation

    class WorkersKilledOnce(evaluation.OGBenchEvaluator):
        killed = False

        def submit(self, *args, **kwargs):
            super().submit(*args, **kwargs)
            if not WorkersKilledOnce.killed:
                WorkersKilledOnce.killed = True
                kill_evaluation_workers()

    monkeypatch.setattr(evaluation, "OGBenchEvaluator", WorkersKilledOnce)
    workdir, args = maze_eval_run("eval-run-final-broken")
    assert train.main(args) == 1
    error = capsys.readouterr().err
    assert "trained and saved to step 10, but its evaluation failed" in error and "--resume" in error
    assert "Traceback" not in error
    metrics = workdir / "metrics.jsonl"
    assert not [x for x in metrics.read_text().splitlines() if "eval/success" in x]
    assert train.main([*args, "--resume"]) == 0
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines() if "eval/success" in x] == [10]


def test_evaluation_workers_run_jax_on_one_cpu_thread(monkeypatch):
    from mqe_model.evaluation import (
        SINGLE_THREAD_XLA,
        WORKER_NICENESS,
        WORKER_THREAD_ENV,
        evaluation_pool,
    )

    for key in WORKER_THREAD_ENV:
        monkeypatch.setenv(key, "8")
    with evaluation_pool(1) as pool:
        env = {key: pool.submit(os.getenv, key).result() for key in ("JAX_PLATFORMS", "XLA_FLAGS", *WORKER_THREAD_ENV)}
        niceness = pool.submit(os.nice, 0).result()
    assert env.pop("JAX_PLATFORMS") == "cpu" and SINGLE_THREAD_XLA in env.pop("XLA_FLAGS")
    assert set(env.values()) == {"1"}
    # Only the workers: this process's later children (GNU nproc reads OMP_NUM_THREADS) are unaffected.
    assert all(os.environ[key] == "8" for key in WORKER_THREAD_ENV)
    assert niceness == min(19, os.nice(0) + WORKER_NICENESS)  # below the training process


WORKER_THREADS = """
import os, sys
os.sched_setaffinity(0, set(range(int(sys.argv[1]))))
import jax
from mqe_model.evaluation import evaluation_pool
with evaluation_pool(1) as pool:
    pool.submit(jax.device_count).result()  # the worker's JAX backend exists
    print(len(pool.submit(os.listdir, "/proc/self/task").result()))
"""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and at least 2 cores")
def test_a_worker_holds_as_many_threads_on_many_cores_as_on_one():
    # Seven runs evaluating at once on a 64-core machine (399 workers) hit the thread limit when
    # each worker's XLA and OpenBLAS pools had a thread per core.
    import subprocess
    import sys

    def threads(cores: int) -> int:
        out = subprocess.run([sys.executable, "-c", WORKER_THREADS, str(cores)], capture_output=True,
                             text=True, timeout=120, check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
        return int(out.stdout.split()[-1])

    assert threads(len(os.sched_getaffinity(0))) == threads(1)


def worker_thread_cores() -> dict[str, int]:
    """In an evaluation worker, after a computation: how many threads may run on which cores."""
    import collections
    import glob

    import jax

    jax.jit(lambda x: (x @ x.T).sum())(jax.numpy.ones((64, 64))).block_until_ready()
    cores = collections.Counter()
    for task in glob.glob("/proc/self/task/*/status"):
        with open(task) as status:
            cores.update(line.split(":")[1].strip() for line in status if line.startswith("Cpus_allowed_list"))
    return dict(cores)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and at least 2 cores")
def test_every_worker_thread_runs_on_all_the_workers_cores():
    # The threads XLA starts while the backend is created on one core must not stay on that core:
    # XLA computes on them, and every worker of a machine would share its first core.
    from mqe_model.evaluation import evaluation_pool

    with evaluation_pool(1) as pool:
        cores = pool.submit(worker_thread_cores).result()
        allowed = pool.submit(os.sched_getaffinity, 0).result()
    assert allowed == os.sched_getaffinity(0)
    assert len(cores) == 1 and sum(cores.values()) > 1, cores  # several threads, all on the same cores
    (listed,) = cores  # e.g. "0-3,6"
    spans = [span.partition("-") for span in listed.split(",")]
    assert {core for first, _, last in spans for core in range(int(first), int(last or first) + 1)} == allowed


def test_finish_hands_over_each_evaluation_as_it_completes():
    import concurrent.futures
    import threading

    from mqe_model.evaluation import NUM_TASKS, OGBenchEvaluator

    release = threading.Event()
    result = {"success": 1.0, "length": 10.0, "episodes": 1}
    evaluator = OGBenchEvaluator.__new__(OGBenchEvaluator)  # the real bookkeeping, threads for workers
    evaluator.env_name = "pointmaze-medium-navigate-v0"
    evaluator._pool = pool = concurrent.futures.ThreadPoolExecutor(2)
    evaluator._pending = [
        (10, pool, [[[pool.submit(lambda: result)] for _ in range(NUM_TASKS)]]),
        (20, pool, [[[pool.submit(lambda: release.wait(30) and result)] for _ in range(NUM_TASKS)]]),
    ]
    evaluator.failed = []
    results = evaluator.finish()
    step, first = next(results)  # while the evaluation at step 20 is still running
    assert step == 10 and first["eval/success"] == 1.0 and not release.is_set()
    release.set()
    assert [step for step, _ in results] == [20]
    assert evaluator._pending == [] and pool._shutdown


@pytest.mark.parametrize("episodes, jobs, workers, chunks", [
    (50, 20, 5, [(0, 50)]),  # fewer workers than jobs: one job per task
    (50, 20, 20, [(0, 50)]),
    (50, 20, 58, [(0, 17), (17, 16), (33, 17)]),  # 3 x 20 = 60 jobs for 58 workers
    (2, 5, 64, [(0, 1), (1, 1)]),  # never an empty job
])
def test_episode_chunks(episodes, jobs, workers, chunks):
    from mqe_model.evaluation import episode_chunks

    assert episode_chunks(episodes, jobs, workers) == chunks


def test_a_task_split_into_jobs_runs_the_same_episodes(tmp_path, monkeypatch):
    """Each episode is seeded by its index, so three jobs of a task run the episodes (and reset
    seeds) of one job of all its episodes, and their results combine to its results."""
    from mqe_model import checkpoints, evaluation
    from mqe_model.policy import load_policy
    from server.random_checkpoint import write_random_checkpoint

    seeds = []
    make_env = evaluation.make_env

    def recording_env(name):
        env = make_env(name)
        reset = env.reset
        env.reset = lambda seed, **kw: (seeds.append(seed), reset(seed=seed, **kw))[1]
        return env

    monkeypatch.setattr(evaluation, "make_env", recording_env)
    evaluation.compiled_policy.cache_clear()
    step_dir = write_random_checkpoint(tmp_path, "gcbc", "tiny", (), None, state_dim=2, action_dim=2)
    metadata, params = checkpoints.read_metadata(step_dir), load_policy(step_dir).params
    env = "pointmaze-medium-navigate-v0"
    whole = evaluation.evaluate_task(env, 2, 5, "gcbc", metadata, params, seed=3)
    assert whole["episodes"] == 5 and sorted(seeds) == [3 + 2000 + i for i in range(5)]
    seeds.clear()
    parts = [evaluation.evaluate_task(env, 2, count, "gcbc", metadata, params, seed=3, first_episode=first)
             for first, count in [(0, 2), (2, 1), (3, 2)]]
    assert sorted(seeds) == [3 + 2000 + i for i in range(5)]
    combined = evaluation.combine(parts)
    assert {k: combined[k] for k in ("success", "length")} == pytest.approx({k: whole[k] for k in ("success", "length")})
    assert combined["episode_success"] == whole["episode_success"]  # episode order kept
    assert len(whole["episode_end_distance"]) == 5 and np.isnan(whole["episode_end_distance"]).all()  # GCBC
    # the worker compiled the policy once for the four jobs
    assert evaluation.compiled_policy.cache_info().misses == 1 and evaluation.compiled_policy.cache_info().hits >= 3


def test_combine_weights_jobs_by_their_episodes():
    from mqe_model.evaluation import combine

    parts = [{"success": 1.0, "length": 100.0, "episodes": 1}, {"success": 0.25, "length": 400.0, "episodes": 4}]
    assert combine(parts) == pytest.approx({"success": 0.4, "length": 340.0})


def test_end_distances_split_by_outcome_and_are_left_out_without_a_critic():
    from mqe_model.evaluation import end_distance_metrics

    jobs = [{"episode_success": [1.0, 0.0], "episode_end_distance": [2.0, 40.0]},
            {"episode_success": [0.0, 1.0, 0.0], "episode_end_distance": [60.0, 4.0, 80.0]}]
    assert end_distance_metrics(jobs) == pytest.approx({"eval/end_distance_success": 3.0,
                                                        "eval/end_distance_failure": 60.0})
    assert end_distance_metrics(jobs[:1] + [{"episode_success": [0.0], "episode_end_distance": [float("nan")]}]
                                ) == {"eval/end_distance_success": 2.0}  # no distance, no mean
    assert end_distance_metrics([{"episode_success": [0.0]}]) == {}


def test_resume_evaluates_every_lost_evaluation_from_its_checkpoint():
    """A run killed while evaluations queued behind its training: resumed, it evaluates the missing
    scheduled steps whose checkpoints exist, oldest first, and the results equal the lost ones."""
    import json

    data = write_state_npz(TMP / "maze6.npz", episodes=4, length=20, obs_dim=2, action_dim=2)
    workdir = TMP / "eval-run-lost"
    args = run_args(workdir, data, "gcbc", 30, "--eval-env", MAZE, "--eval-every", "10", "--save-every", "10",
                    "--keep", "3", "--eval-episodes", "1", "--eval-workers", "1")
    assert train.main(args) == 0
    metrics = workdir / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    evaluations = [x for x in rows if "eval/success" in x]
    assert [x["step"] for x in evaluations] == [10, 20, 30]
    metrics.write_text("".join(json.dumps(x) + "\n" for x in rows if x.get("step") != 20 and x.get("step") != 30
                               or "eval/success" not in x))
    assert train.main([*args, "--resume"]) == 0
    again = [json.loads(x) for x in metrics.read_text().splitlines() if "eval/success" in x]
    assert again == evaluations  # 20 from its checkpoint, 30 from the restored agent: same results, in order
    assert train.main([*args, "--resume"]) == 0
    assert [json.loads(x) for x in metrics.read_text().splitlines() if "eval/success" in x] == evaluations


def test_missing_evaluation_steps_follow_the_schedule():
    cfg = train.TrainConfig(agent="gcbc", preset="tiny", data=Path("d.npz"), workdir=Path("w"), steps=100,
                            eval_env=MAZE, eval_every=20, eval_start=40)
    saved = [30, 40, 50, 60, 80, 100]
    assert train.missing_evaluation_steps(cfg, saved, {60}, 100) == [40, 80, 100]
    assert train.missing_evaluation_steps(cfg, saved, {40, 60, 80}, 60) == []  # 80 and 100 lie ahead


@pytest.mark.parametrize("env_name", ["scene-play-v0", "pointmaze-medium-navigate-v0"])
def test_reset_gives_the_same_start_for_the_same_seed(env_name):
    """The mazes' start and goal noise comes from numpy's global state, seeded per episode; the
    scenes' goal observation takes unseeded random steps inside OGBench, so only its start repeats."""
    from mqe_model.evaluation import make_env, reset_episode

    first, second = ([reset_episode(make_env(env_name), 2, 2005) for _ in range(2)])
    np.testing.assert_array_equal(first[0], second[0])
    other = reset_episode(make_env(env_name), 2, 2006)
    assert not np.array_equal(other[0], first[0])
    if env_name.startswith("pointmaze"):
        np.testing.assert_array_equal(first[1]["goal"], second[1]["goal"])


def test_an_episode_seed_gives_the_same_episode_on_every_call(tmp_path):
    """The same episodes come back (the critic's distances, not only the outcomes, agree) and the
    caller's global numpy state is left as it was."""
    from mqe_model import checkpoints, evaluation
    from mqe_model.policy import load_policy
    from server.random_checkpoint import write_random_checkpoint

    step_dir = write_random_checkpoint(tmp_path, "mqe", "tiny", (), None, state_dim=2, action_dim=2)
    metadata, params = checkpoints.read_metadata(step_dir), load_policy(step_dir).params
    np.random.seed(123)  # noqa: NPY002 - the global state is what is checked
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    runs = [evaluation.evaluate_task("pointmaze-medium-navigate-v0", 1, 2, "mqe", metadata, params, seed=0)
            for _ in range(2)]
    assert runs[0]["episode_end_distance"] == runs[1]["episode_end_distance"]
    assert np.isfinite(runs[0]["episode_end_distance"]).all()
    assert (np.random.get_state()[1] == before).all()  # noqa: NPY002


def test_sampled_episodes_do_not_depend_on_how_a_task_is_split(tmp_path):
    """Each episode draws its action noise from its own seed: one job of three episodes and three jobs
    of one give the same episodes (the critic's last distances agree, up to the float rounding of a
    batch of 3 against 3 of 1), and they differ from the mean's."""
    from mqe_model import checkpoints, evaluation
    from mqe_model.policy import ActionSampling, load_policy
    from server.random_checkpoint import write_random_checkpoint

    step_dir = write_random_checkpoint(tmp_path, "mqe", "tiny", (), None, state_dim=2, action_dim=2)
    metadata, params = checkpoints.read_metadata(step_dir), load_policy(step_dir).params
    env, sampling = "pointmaze-medium-navigate-v0", ActionSampling(1.0)
    whole = evaluation.evaluate_task(env, 1, 3, "mqe", metadata, params, seed=0, sampling=sampling)
    parts = [evaluation.evaluate_task(env, 1, 1, "mqe", metadata, params, seed=0, first_episode=first,
                                      sampling=sampling) for first in range(3)]
    assert evaluation.combine(parts)["episode_end_distance"] == pytest.approx(whole["episode_end_distance"], rel=1e-4)
    mean = evaluation.evaluate_task(env, 1, 3, "mqe", metadata, params, seed=0)
    assert np.isfinite(whole["episode_end_distance"]).all()
    assert not np.allclose(whole["episode_end_distance"], mean["episode_end_distance"], rtol=1e-2)
