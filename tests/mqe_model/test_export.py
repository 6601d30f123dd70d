"""mqe-export: a serving-only copy (params + metadata) that loads with the original's fingerprint."""

from __future__ import annotations

import jax
import numpy as np
from train_helpers import tiny_run

from mqe_model import export
from mqe_model.checkpoints import step_dirs
from mqe_model.policy import load_policy


def test_export_leaves_the_optimizer_state_behind_and_acts_the_same(tmp_path, capsys):
    run = tiny_run("mqe")
    assert export.main(["--checkpoint", str(run), "--out", str(tmp_path / "served")]) == 0
    (step,) = step_dirs(tmp_path / "served").values()
    assert step.name == "30" and "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in step.iterdir()) == ["_CHECKPOINT_METADATA", "metadata", "params"]
    original = run / "checkpoints" / "30"
    assert export.directory_bytes(step) < 0.5 * export.directory_bytes(original)
    a, b = load_policy(original), load_policy(tmp_path / "served")
    assert a.fingerprint == b.fingerprint
    obs = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    act_a, dist_a = jax.jit(a.act_fn)(a.params, obs, obs[::-1])
    act_b, dist_b = jax.jit(b.act_fn)(b.params, obs, obs[::-1])
    np.testing.assert_array_equal(act_a, act_b)
    np.testing.assert_array_equal(dist_a, dist_b)


def test_refusals_are_one_line_and_exit_2(tmp_path, capsys):
    run, out = tiny_run("gcbc"), tmp_path / "served"
    assert export.main(["--checkpoint", str(run), "--out", str(out)]) == 0
    capsys.readouterr()
    assert export.main(["--checkpoint", str(run), "--out", str(out)]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert export.main(["--checkpoint", str(run), "--out", str(out), "--overwrite"]) == 0
    assert export.main(["--checkpoint", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "no such directory" in capsys.readouterr().err
    (out / "7" / "metadata").mkdir(parents=True)
    (out / "7" / "metadata" / "metadata").write_text("{}")
    assert export.main(["--checkpoint", str(run), "--out", str(out), "--overwrite"]) == 2
    assert "export into an empty --out" in capsys.readouterr().err
