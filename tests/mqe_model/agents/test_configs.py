"""Agent configs through JSON (checkpoints) and `--set` (the command line), removed fields included."""

from __future__ import annotations

import json

import pytest

from mqe_model.agents import mqe, registry
from mqe_model.agents.configs import apply_overrides, config_from_json, config_to_json


@pytest.mark.parametrize("name", ["mqe", "gcbc", "gciql"])
@pytest.mark.parametrize("preset", ["tiny", "bridge"])
def test_every_config_round_trips_through_json(name, preset):
    config = registry.get(name).get_config(preset)
    text = json.dumps(config_to_json(config))
    assert config_from_json(name, json.loads(text)) == config


def test_a_removed_field_at_the_value_that_remains_is_dropped():
    """Checkpoints written before an ablation flag left MQE carry it at its default; they still load."""
    stored = {**config_to_json(mqe.get_config("sim")), "actor_heads": "nearest", "invariance_actions": 1,
              "actor_goal_samples": 16, "max_goal_offset": 0}
    assert config_from_json("mqe", stored) == mqe.get_config("sim")


@pytest.mark.parametrize(("field", "value"), [("actor_heads", "farthest"), ("invariance_form", "squared"),
                                              ("actor_goal_pairs", "all"), ("max_waypoint_offset", 200)])
def test_a_removed_variant_is_refused_with_what_remains(field, value):
    stored = {**config_to_json(mqe.get_config("tiny")), field: value}
    with pytest.raises(ValueError, match=f"{field}={value!r}, a variant this agent no longer implements "
                                         f"\\(only {field}=.* remains\\)"):
        config_from_json("mqe", stored)


def test_an_unknown_field_is_refused():
    with pytest.raises(ValueError, match="gcbc config has unknown field 'actor_heads'"):
        config_from_json("gcbc", {**config_to_json(registry.get("gcbc").get_config("tiny")), "actor_heads": "nearest"})


def test_overrides_parse_each_fields_type_and_name_the_closest_field():
    config = apply_overrides(mqe.get_config("tiny"), ("alpha=0.03", "critic_hidden_dims=(32,16)", "encoder=none",
                                                      "flat-optimizer=true"))
    assert (config.alpha, config.critic_hidden_dims, config.encoder, config.flat_optimizer) == (
        0.03, (32, 16), None, True)
    with pytest.raises(ValueError, match="mqe_model.agents.mqe.Config has no field 'alpa'; did you mean alpha"):
        apply_overrides(config, ("alpa=1",))
    with pytest.raises(ValueError, match="expected key=value"):
        apply_overrides(config, ("alpha",))
    with pytest.raises(ValueError, match="--set layer_norm=maybe: expected true or false"):
        apply_overrides(config, ("layer_norm=maybe",))
