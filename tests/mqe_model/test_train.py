"""mqe-train end to end: exact resume, the workdir rules and one clear line for each bad input."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from train_helpers import TMP, run_args, state_npz, tiny_run, write_state_npz

from mqe_model import checkpoints, train
from mqe_model.policy import load_policy


def _params(workdir):
    return jax.tree_util.tree_leaves(load_policy(workdir / "checkpoints").params)


@pytest.mark.parametrize("overrides", [(), ("--set", "flat_optimizer=true")], ids=["adam", "flat-adam"])
def test_resume_is_exact(tmp_path, overrides):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert train.main(run_args(straight, state_npz(), "mqe", 100, *overrides)) == 0
    assert train.main(run_args(resumed, state_npz(), "mqe", 50, *overrides)) == 0
    assert train.main(run_args(resumed, state_npz(), "mqe", 100, *overrides, "--resume")) == 0
    for a, b in zip(_params(straight), _params(resumed), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)
    # The metrics of the resumed run continue without duplicated steps.
    steps = [json.loads(line)["step"] for line in (resumed / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 100


@pytest.mark.parametrize("agent", ["mqe", "gcbc", "gciql"])
def test_each_agent_trains_to_a_checkpoint(agent):
    workdir = tiny_run(agent)
    meta = checkpoints.read_metadata(checkpoints.resolve_step_dir(workdir))
    assert meta["agent"] == agent and meta["step"] == 30
    assert json.loads((workdir / "trained.json").read_text()) == {"step": 30}
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    assert all(np.isfinite(v) for line in lines for k, v in json.loads(line).items() if k != "step")


def test_existing_workdir_is_refused_unless_resume_or_overwrite(capsys):
    workdir = tiny_run("gcbc")
    before = sorted(p.name for p in (workdir / "checkpoints").iterdir())
    assert train.main(run_args(workdir, state_npz(), "gcbc")) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == before


def test_overwrite_replaces_the_run(tmp_path):
    workdir = tmp_path / "run"
    assert train.main(run_args(workdir, state_npz(), "gcbc", 20)) == 0
    assert train.main(run_args(workdir, state_npz(), "gcbc", 10, "--overwrite")) == 0
    assert sorted(checkpoints.step_dirs(workdir / "checkpoints")) == [10]


def test_resume_with_another_agent_is_refused(capsys):
    workdir = tiny_run("mqe")
    assert train.main(run_args(workdir, state_npz(), "gcbc", 40, "--resume")) == 2
    err = capsys.readouterr().err
    assert "trains 'mqe'" in err and str(workdir) in err and "Traceback" not in err


def _rewrite_saved_config(workdir, edit):
    path = checkpoints.resolve_step_dir(workdir) / checkpoints.METADATA_FILE
    metadata = json.loads(path.read_text())
    edit(metadata["config"])
    path.write_text(json.dumps(metadata))


def test_a_run_from_before_a_new_config_field_resumes_and_other_settings_are_refused(tmp_path, capsys):
    workdir = tmp_path / "run"
    assert train.main(run_args(workdir, state_npz(), "mqe", 20)) == 0
    # An older mqe_model wrote no flat_optimizer field; its default is what that code did.
    _rewrite_saved_config(workdir, lambda config: config.pop("flat_optimizer"))
    assert train.main(run_args(workdir, state_npz(), "mqe", 30, "--resume")) == 0
    assert checkpoints.read_metadata(checkpoints.resolve_step_dir(workdir))["step"] == 30
    assert train.main(run_args(workdir, state_npz(), "mqe", 40, "--resume", "--set", "lam=0.5")) == 2
    assert "other settings for ['lam']" in capsys.readouterr().err
    _rewrite_saved_config(workdir, lambda config: config.update(a_field_from_the_future=1))
    assert train.main(run_args(workdir, state_npz(), "mqe", 40, "--resume")) == 2
    err = capsys.readouterr().err
    assert "a_field_from_the_future" in err and "newer mqe_model" in err and "Traceback" not in err


def _bad(path, kind):
    rng = np.random.default_rng(0)
    good = dict(observations=rng.normal(size=(20, 4)).astype(np.float32),
                actions=rng.normal(size=(20, 2)).astype(np.float32),
                terminals=np.repeat([[0] * 9 + [1]], 2, 0).reshape(-1).astype(np.float32))
    if kind == "corrupt":
        path.write_bytes(b"PK\x03\x04 not really a zip")
        return
    if kind == "missing_key":
        good.pop("terminals")
    if kind == "wrong_dtype":
        good["actions"] = good["actions"].astype(np.int32)
    if kind == "empty_trajectory":
        good["terminals"][:] = 0
        good["terminals"][[0, 9, 19]] = 1  # the first trajectory has one step
    np.savez(path, **good)


@pytest.mark.parametrize(
    "kind, message",
    [("missing_file", "no such file"), ("corrupt", "not a readable .npz"),
     ("missing_key", "missing key"), ("wrong_dtype", "dtype int32"),
     ("empty_trajectory", "trajectory 0 has 1 step"), ("action_dim", "3-d but the run expects 5-d")],
)
def test_bad_data_gives_one_line_and_writes_nothing(tmp_path, capsys, kind, message):
    data = tmp_path / "data.npz"
    extra = ()
    if kind == "action_dim":
        write_state_npz(data, episodes=2, length=10)
        extra = ("--action-dim", "5")
    elif kind != "missing_file":
        _bad(data, kind)
    workdir = tmp_path / "run"
    assert train.main(run_args(workdir, data, "mqe", 10, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and str(data) in err, err
    assert not workdir.exists()


def test_unknown_override_suggests_the_field(tmp_path, capsys):
    assert train.main(run_args(tmp_path / "run", state_npz(), "mqe", 10, "--set", "alhpa=3")) == 2
    assert "did you mean alpha" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_state_data_with_an_image_preset_is_refused(tmp_path, capsys):
    args = run_args(tmp_path / "run", state_npz(), "gcbc", 10)
    args[args.index("tiny")] = "bridge"
    assert train.main(args) == 2
    assert "expects images" in capsys.readouterr().err


def test_several_seeds_at_once():
    workdir = TMP / "seeds"
    assert train.main(run_args(workdir, state_npz(), "gcbc", 20, "--num-seeds", "2")) == 0
    first, second = (load_policy(workdir, seed_index=i) for i in (0, 1))
    a = jax.tree_util.tree_leaves(first.params)[0]
    b = jax.tree_util.tree_leaves(second.params)[0]
    assert a.shape == b.shape and not np.allclose(a, b)


def test_eval_start_beyond_the_run_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train.main(run_args(tmp_path / "run", state_npz(), "gcbc", 10, "--eval-start", "20"))
    assert exit_info.value.code == 2
    assert "--eval-start 20: must be within [0, --steps 10]" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
