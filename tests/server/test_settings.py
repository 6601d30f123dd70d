"""mqe-serve settings: environment, repeatable --policy, bad combinations rejected with exit 2."""

from __future__ import annotations

import dataclasses

import pytest

from mqe_model import demo
from server.cli import main, xla_flags
from server.settings import ServeSettings, SettingsError, is_loopback, parse


def test_environment_and_command_line():
    env = {"MQE_SERVE_PORT": "9001", "MQE_SERVE_MAX_WAIT_MS": "1.5", "MQE_SERVE_BATCH_BUCKETS": "1,4",
           "MQE_SERVER_TOKEN": "a-long-token"}
    s = parse(["--policy", "a=/x", "--policy", "b=/y", "--port", "9002"], env)
    assert s.port == 9002 and s.max_wait_ms == 1.5 and s.batch_buckets == (1, 4)
    assert s.token == "a-long-token" and "a-long-token" not in repr(s)
    assert list(s.policies) == ["a", "b"] and str(s.policies["b"]) == "/y"


def test_env_never_names_checkpoints():
    assert parse([], {"MQE_SERVE_POLICY": "evil=/tmp"}).policy == ()


@pytest.mark.parametrize("name, match", [
    ("MQE_SERVE_MAX_WAIT_S", "MQE_SERVE_MAX_WAIT_S is not a setting of mqe-serve; did you mean MQE_SERVE_MAX_WAIT_MS"),
    ("MQE_SERVE_PROT", "did you mean MQE_SERVE_PORT"),
    ("MQE_SERVE_ZZZZZZZZ", r"MQE_SERVE_ZZZZZZZZ is not a setting of mqe-serve; unset it or rename it"),
])
def test_an_unknown_environment_setting_is_refused_with_the_nearest_name(name, match):
    with pytest.raises(SettingsError, match=match):
        parse([], {name: "2", "MQE_SERVE_PORT": "9000"})
    assert parse([], {"MQE_SERVER_TOKEN_FILE": "x", "MQE_SERVE_PORT": "9000"}).port == 9000  # other prefixes: not ours


@pytest.mark.parametrize("kwargs, match", [
    ({"host": "0.0.0.0"}, "not a loopback address"),
    ({"host": "192.168.1.5", "token": "short"}, "at least 8"),
    ({"policy": ("a=/x", "a=/y")}, "repeated"),
    ({"policy": ("a=/x",), "default_policy": "b"}, "not one of"),
    ({"policy": ("nodir",)}, "NAME=CHECKPOINT_DIR"),
    ({"port": 0}, "not a TCP port"),
    ({"batch_buckets": (0,)}, "positive"),
])
def test_bad_combinations_are_rejected(kwargs, match):
    with pytest.raises(SettingsError, match=match):
        ServeSettings(**kwargs)


def test_only_what_an_operator_sets_is_a_setting():
    assert [f.name for f in dataclasses.fields(ServeSettings)] == [
        "policy", "default_policy", "host", "port", "token", "insecure", "max_body_bytes", "batch_buckets",
        "max_wait_ms", "goal_cache_size", "compilation_cache", "episode_idle_s", "log_level"]


@pytest.mark.parametrize("name", ["MQE_SERVE_KEEP_WARM_MS", "MQE_SERVE_INLINE_LONE_REQUESTS", "MQE_SERVE_STACK_ENCODERS",
                                  "MQE_SERVE_CONV", "MQE_SERVE_IO", "MQE_SERVE_CUDA_GRAPH_MIN_SIZE",
                                  "MQE_SERVE_MAX_IMAGE_PIXELS"])
def test_the_fixed_choices_are_no_settings_and_stop_the_server_when_set(name, capsys):
    with pytest.raises(SettingsError, match=f"{name} is not a setting of mqe-serve"):
        parse([], {name: "1"})
    flag = "--" + name.removeprefix("MQE_SERVE_").lower().replace("_", "-")
    with pytest.raises(SystemExit):  # tyro: an unknown flag, exit 2
        parse([flag, "1"], {})
    assert flag in capsys.readouterr().err


def test_cuda_graphs_take_runs_of_any_size_unless_xla_flags_sets_a_size():
    assert xla_flags("") == "--xla_gpu_graph_min_graph_size=1"
    assert xla_flags("--xla_dump_to=/tmp/d") == "--xla_dump_to=/tmp/d --xla_gpu_graph_min_graph_size=1"
    mine = "--xla_gpu_graph_min_graph_size=7 --xla_dump_to=/tmp/d"
    assert xla_flags(mine) == mine  # a size the operator put in XLA_FLAGS wins


def test_non_loopback_is_allowed_with_a_token_or_insecure():
    assert ServeSettings(host="0.0.0.0", token="long-enough").host == "0.0.0.0"
    assert ServeSettings(host="0.0.0.0", insecure=True).insecure
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_cli_exits_2_with_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "DEMO_CHECKPOINT", tmp_path / "no-demo")  # no --policy and no demo either
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "no --policy given" in err and "bundled demo checkpoint is missing" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["--policy", f"a={tmp_path}"]) == 2
    assert "no checkpoint found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["--policy", f"a={tmp_path}", "--host", "0.0.0.0"])
    assert exit_info.value.code == 2
