"""server.random_checkpoint: untrained checkpoints for latency work, and its bad input."""

from __future__ import annotations

import pytest

from mqe_model.policy import load_policy
from server import random_checkpoint


def test_writes_a_loadable_state_checkpoint(tmp_path):
    step_dir = random_checkpoint.write_random_checkpoint(tmp_path, "mqe", "tiny", (), None, state_dim=4,
                                                         action_dim=3)
    policy = load_policy(step_dir)
    assert policy.observation_shape == (4,) and policy.action_dim == 3 and policy.metadata["image"] is None


def test_an_image_size_for_a_preset_without_an_encoder_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(ValueError, match="no image encoder"):
        random_checkpoint.write_random_checkpoint(tmp_path, "mqe", "tiny", (), 32)
    assert random_checkpoint.main(["--out", str(tmp_path / "x"), "--preset", "tiny", "--image-size", "32"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("random_checkpoint: error:") and "encoder=impala_tiny" in err and "\n" not in err
    assert not (tmp_path / "x").exists()  # nothing written
