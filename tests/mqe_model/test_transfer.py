"""mqe-transfer: a run moved in bounded parts resumes as if it had never moved; bad parts are refused."""

from __future__ import annotations

import json

import jax
import ml_dtypes
import numpy as np
from train_helpers import TMP, run_args, state_npz

from mqe_model import checkpoints, train, transfer
from mqe_model.policy import load_policy

PART_MIB = 0.1


def _leaves(workdir):
    return jax.tree_util.tree_leaves(load_policy(workdir / "checkpoints").params)


def _half_run(name):
    workdir = TMP / f"transfer-{name}"
    if not workdir.exists():
        assert train.main(run_args(workdir, state_npz(), "mqe", 50)) == 0
    return workdir


def _pack(tmp_path, source, *extra):
    out = tmp_path / "parts"
    assert transfer.main(["pack", "--checkpoint", str(source), "--out", str(out),
                          "--part-mib", str(PART_MIB), *extra]) == 0
    return out


def test_a_moved_run_resumes_to_the_numbers_of_a_run_that_never_moved(tmp_path):
    straight, moved = tmp_path / "straight", tmp_path / "moved"
    assert train.main(run_args(straight, state_npz(), "mqe", 100)) == 0
    parts = _pack(tmp_path, _half_run("float32"))
    manifest = transfer.read_manifest(parts)
    assert len(manifest["parts"]) > 1 and manifest["step"] == 50
    assert all((parts / p["file"]).stat().st_size <= PART_MIB * 2**20 for p in manifest["parts"])
    assert transfer.main(["unpack", "--parts", str(parts), "--workdir", str(moved)]) == 0
    assert train.main(run_args(moved, state_npz(), "mqe", 100, "--resume")) == 0
    for a, b in zip(_leaves(straight), _leaves(moved), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)
    steps = [json.loads(line)["step"] for line in (moved / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[0] < 50 and steps[-1] == 100


def test_bfloat16_moments_shrink_the_move_by_a_third_and_come_back_as_their_rounding(tmp_path):
    source = _half_run("float32")
    exact = transfer.read_manifest(_pack(tmp_path / "f32", source))
    parts = _pack(tmp_path / "bf16", source, "--optimizer-dtype", "bfloat16")
    rounded = transfer.read_manifest(parts)
    # params P float32 + two moments 2P: 3P as float32, 2P with the moments in bfloat16
    assert abs(rounded["bytes"] / exact["bytes"] - 2 / 3) < 0.02
    workdir = tmp_path / "moved"
    assert transfer.main(["unpack", "--parts", str(parts), "--workdir", str(workdir)]) == 0
    original = transfer._read_item(checkpoints.resolve_step_dir(source), "train_state")["opt_state"]
    back = transfer._read_item(checkpoints.resolve_step_dir(workdir), "train_state")["opt_state"]
    for a, b in zip(jax.tree_util.tree_leaves(original), jax.tree_util.tree_leaves(back), strict=True):
        if np.issubdtype(a.dtype, np.floating):
            assert b.dtype == np.float32
            np.testing.assert_array_equal(b, a.astype(ml_dtypes.bfloat16).astype(np.float32))
        else:
            np.testing.assert_array_equal(a, b)
    assert train.main(run_args(workdir, state_npz(), "mqe", 60, "--resume")) == 0


def test_a_damaged_or_missing_part_is_named_and_nothing_is_written(tmp_path, capsys):
    parts = _pack(tmp_path, _half_run("float32"))
    first = parts / "state.part000"
    first.write_bytes(first.read_bytes()[:-1] + b"\x00")
    workdir = tmp_path / "moved"
    assert transfer.main(["unpack", "--parts", str(parts), "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(first) in err and "copy it again" in err
    first.unlink()
    assert transfer.main(["unpack", "--parts", str(parts), "--workdir", str(workdir)]) == 2
    assert "state.part000: missing" in capsys.readouterr().err
    assert not workdir.exists()


def test_packing_into_a_used_directory_and_unpacking_behind_later_steps_are_refused(tmp_path, capsys):
    source = _half_run("float32")
    parts = _pack(tmp_path, source)
    assert transfer.main(["pack", "--checkpoint", str(source), "--out", str(parts)]) == 2
    assert "not empty" in capsys.readouterr().err
    later = tmp_path / "later"
    assert train.main(run_args(later, state_npz(), "mqe", 60)) == 0
    assert transfer.main(["unpack", "--parts", str(parts), "--workdir", str(later)]) == 2
    assert "later step(s) [60]" in capsys.readouterr().err
    assert transfer.main(["unpack", "--parts", str(tmp_path), "--workdir", str(later)]) == 2
    assert "not a checkpoint written by mqe-transfer pack" in capsys.readouterr().err
