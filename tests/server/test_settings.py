"""mqe-serve settings: environment, repeatable --policy, bad combinations rejected with exit 2."""

from __future__ import annotations

import pytest

from mqe_model import demo
from server.cli import main
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
    ("MQE_SERVE_KEEP_WARM_AHEAD_MS", "MQE_SERVE_KEEP_WARM_AHEAD_MS is not a setting of mqe-serve; did you mean MQE_SERVE_KEEP_WARM_MS"),
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
    ({"stack_encoders": "yes"}, "choose auto, on, off or twin"),
    ({"conv": "fft"}, "--conv 'fft': choose auto, xla or matmul"),
    ({"io": "pinned"}, "--io 'pinned': choose device or host"),
    ({"keep_warm_ms": 0.5}, "--keep-warm-ms 0.5: use 0 .off. or a period of at least 1 ms"),
    ({"keep_warm_ms": -1}, "--keep-warm-ms -1"),
    ({"keep_warm_ms": float("nan")}, "--keep-warm-ms nan"),
    ({"keep_warm_for_s": 0}, "--keep-warm-for-s 0 must be a positive number of seconds"),
    ({"keep_warm_for_s": float("inf")}, "--keep-warm-for-s inf"),
    ({"cuda_graph_min_size": -1}, "--cuda-graph-min-size -1: use 0 .XLA's default. or a number of kernels"),
])
def test_bad_combinations_are_rejected(kwargs, match):
    with pytest.raises(SettingsError, match=match):
        ServeSettings(**kwargs)


def test_encoders_are_twins_off_the_cpu_unless_told():
    auto, on, off, twin = (ServeSettings(stack_encoders=v) for v in ("auto", "on", "off", "twin"))
    assert ServeSettings().stack_encoders == "auto"
    assert auto.encoders_on("gpu") == "twin" and auto.encoders_on("cpu") == "separate"
    assert on.encoders_on("cpu") == "stacked" and off.encoders_on("gpu") == "separate"
    assert twin.encoders_on("cpu") == twin.encoders_on("gpu") == "twin"
    assert parse(["--stack-encoders", "twin"], {}).stack_encoders == "twin"


def test_convolutions_are_matmuls_on_gpus_only_unless_told():
    auto, xla, matmul = (ServeSettings(conv=v) for v in ("auto", "xla", "matmul"))
    assert ServeSettings().conv == "auto"
    assert auto.conv_on("gpu") == "matmul" and auto.conv_on("cpu") == auto.conv_on("tpu") == "xla"
    assert xla.conv_on("gpu") == "xla" and matmul.conv_on("cpu") == "matmul"
    assert parse(["--conv", "matmul"], {}).conv == "matmul"
    assert parse([], {"MQE_SERVE_CONV": "matmul"}).conv == "matmul"


def test_lone_requests_act_inline_unless_told():
    assert ServeSettings().inline_lone_requests and parse([], {}).inline_lone_requests
    assert not parse(["--no-inline-lone-requests"], {}).inline_lone_requests
    assert not parse([], {"MQE_SERVE_INLINE_LONE_REQUESTS": "false"}).inline_lone_requests
    assert parse(["--inline-lone-requests"], {"MQE_SERVE_INLINE_LONE_REQUESTS": "0"}).inline_lone_requests


def test_frames_go_through_device_memory_unless_told(capsys):
    assert ServeSettings().io == "device" and not ServeSettings().host_io and ServeSettings(io="host").host_io
    assert parse(["--io", "host"], {}).io == "host"
    assert parse([], {"MQE_SERVE_IO": "host"}).io == "host"
    with pytest.raises(SystemExit):  # tyro reports the settings' error in one box, no traceback
        parse([], {"MQE_SERVE_IO": "gpu"})
    assert "--io 'gpu': choose device or host" in capsys.readouterr().err


def test_the_keeper_is_off_unless_told():
    assert ServeSettings().keep_warm_ms == 0 and ServeSettings().keep_warm_for_s == 5
    told = parse(["--keep-warm-ms", "5", "--keep-warm-for-s", "2.5"], {})
    assert (told.keep_warm_ms, told.keep_warm_for_s) == (5, 2.5)
    assert parse([], {"MQE_SERVE_KEEP_WARM_MS": "2"}).keep_warm_ms == 2


def test_cuda_graphs_take_runs_of_any_size_unless_the_environment_or_the_command_line_says_otherwise():
    assert ServeSettings().cuda_graph_min_size == 1
    assert ServeSettings().xla_flags("") == "--xla_gpu_graph_min_graph_size=1"
    assert ServeSettings().xla_flags("--xla_dump_to=/tmp/d") == "--xla_dump_to=/tmp/d --xla_gpu_graph_min_graph_size=1"
    mine = "--xla_gpu_graph_min_graph_size=7 --xla_dump_to=/tmp/d"
    assert ServeSettings().xla_flags(mine) == mine  # a size the operator put in XLA_FLAGS wins
    assert ServeSettings(cuda_graph_min_size=0).xla_flags("--xla_dump_to=/tmp/d") == "--xla_dump_to=/tmp/d"
    assert parse(["--cuda-graph-min-size", "3"], {}).xla_flags("") == "--xla_gpu_graph_min_graph_size=3"
    assert parse([], {"MQE_SERVE_CUDA_GRAPH_MIN_SIZE": "0"}).cuda_graph_min_size == 0


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
