"""mqe_model.demo: where the bundled demo checkpoint is, and one line when it is not."""

from __future__ import annotations

import pytest

from mqe_model import demo


def test_demo_step_dir_is_the_latest_finished_step(tmp_path):
    for step, finished in ((10, True), (30, True), (50, False)):
        (tmp_path / str(step) / "metadata").mkdir(parents=True)
        if finished:
            (tmp_path / str(step) / "metadata" / "metadata").write_text("{}")
    assert demo.demo_step_dir(tmp_path) == tmp_path / "30"


@pytest.mark.parametrize("make", [lambda p: p / "absent", lambda p: p])
def test_missing_demo_is_one_line_saying_how_to_get_one(tmp_path, make):
    with pytest.raises(demo.DemoCheckpointMissing) as e:
        demo.demo_step_dir(make(tmp_path))
    assert "bash scripts/build_demo_policy.sh" in str(e.value) and "git checkout" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_bundled_demo_checkpoint_is_there():
    step_dir = demo.demo_step_dir()
    assert step_dir.parent == demo.DEMO_CHECKPOINT
    assert (step_dir / "params").is_dir() and not (step_dir / "train_state").exists()  # weights only
