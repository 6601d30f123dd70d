import json

from benchmarks import act_latency

TINY = ["--preset", "tiny", "--image-size", "16", "--runs", "5", "--paced-runs", "2", "--hz", "50",
        "--profile-calls", "0"]


def test_every_arrangement_of_a_resnet_policy_is_timed_against_the_earlier_ones(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert act_latency.main([*TINY, "--set", "encoder=resnet_tiny", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    for arrangement in ("separate", "stacked", "twin"):
        assert figures[f"{arrangement}: act back to back ms"] > 0
    printed = capsys.readouterr().out
    for ratio in ("stacked / separate", "twin / separate", "twin / stacked"):
        assert f"{ratio}: back to back " in printed


def test_matmul_convolutions_are_timed_against_xlas_for_each_arrangement(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert act_latency.main([*TINY, "--set", "encoder=impala_tiny", "--encoders", "separate", "--convs", "xla",
                             "matmul", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["separate: act back to back ms"] > 0
    assert figures["separate, matmul convolutions: act back to back ms"] > 0
    assert "matmul / xla convolutions (separate): back to back " in capsys.readouterr().out


def test_host_io_is_timed_against_device_transfers_with_its_own_phases(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert act_latency.main([*TINY, "--set", "encoder=impala_tiny", "--encoders", "separate", "--io", "device",
                             "host", "--phases", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    for layout in ("separate", "separate, host io"):
        assert figures[f"{layout}: act back to back ms"] > 0 and figures[f"{layout}: put at 50 Hz ms"] > 0
    assert "host / device io (separate): back to back " in capsys.readouterr().out


def test_an_arrangement_the_policy_lacks_is_refused(capsys):
    assert act_latency.main([*TINY, "--set", "encoder=impala_tiny", "--encoders", "twin"]) == 2
    assert "--encoders twin: this mqe policy has only separate, stacked" in capsys.readouterr().err


def test_phases_split_the_act_into_its_three_steps_back_to_back_and_paced(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert act_latency.main([*TINY, "--set", "encoder=impala_tiny", "--encoders", "separate", "--phases",
                             "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    for step in ("put", "run", "get"):
        assert figures[f"separate: {step} back to back ms"] > 0 and figures[f"separate: {step} at 50 Hz ms"] > 0
    printed = capsys.readouterr().out
    assert [line.split("step")[1].split(":")[0].strip() for line in printed.splitlines() if "] step " in line] == [
        "put", "run", "get"]


def test_the_spaced_traces_print_both_paces_and_say_when_no_kernels_separate(capsys):
    args = act_latency.Args(hz=50.0, profile_calls=3)
    figures = act_latency.spaced_profiles(lambda: None, args, "separate encoders", "separate")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["[separate encoders] kernels 2 ms apart",
                                                       "[separate encoders] kernels at 50 Hz"]
    assert all(line.endswith("device span n/a (the acts' kernels did not separate)") for line in lines)
    assert figures == {"separate: kernels 2 ms apart us": 0.0, "separate: kernels at 50 Hz us": 0.0}
