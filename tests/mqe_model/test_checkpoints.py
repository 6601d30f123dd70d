"""Checkpoint layout and metadata: the contract the server builds on."""

from __future__ import annotations

import json

import pytest
from train_helpers import TMP, tiny_run

from mqe_model import checkpoints
from mqe_model.agents import gciql
from mqe_model.agents.configs import config_from_json
from mqe_model.checkpoints import CheckpointError


def test_layout_and_metadata_fields():
    step_dir = checkpoints.resolve_step_dir(tiny_run("gciql"))
    assert step_dir.name == "30"
    assert {"params", "train_state", "metadata"} <= {p.name for p in step_dir.iterdir()}
    meta = json.loads((step_dir / "metadata" / "metadata").read_text())
    assert meta["schema_version"] == 1 and meta["agent"] == "gciql" and meta["step"] == 30
    assert config_from_json("gciql", meta["config"]) == gciql.get_config("tiny")
    stats = meta["action_stats"]
    assert stats["scheme"] == "minmax" and all(len(stats[k]) == 3 for k in ("mean", "std", "low", "high"))
    assert meta["image"] is None and meta["observation"] == {"shape": [6], "dtype": "float32"}
    assert len(meta["dataset"]["fingerprint"]) == 64 and meta["dataset"]["num_transitions"] == 320
    assert meta["train"]["steps"] == 30 and "package_version" in meta and "created" in meta


def test_corrupt_metadata_is_named(tmp_path):
    step = tmp_path / "checkpoints" / "7" / "metadata"
    step.mkdir(parents=True)
    (step / "metadata").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        checkpoints.read_metadata(checkpoints.resolve_step_dir(tmp_path))


def test_metadata_of_a_future_schema_is_refused():
    src = checkpoints.resolve_step_dir(tiny_run("gcbc"))
    meta = json.loads((src / "metadata" / "metadata").read_text())
    fake = TMP / "future" / "5" / "metadata"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "metadata").write_text(json.dumps({**meta, "schema_version": 2}))
    with pytest.raises(CheckpointError, match="schema_version 2"):
        checkpoints.read_metadata(fake.parent)
