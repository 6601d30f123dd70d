"""benchmarks.idle_latency on the CPU with the bundled demo policy: every table row; the spinners."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import idle_latency

DEMO = Path(__file__).resolve().parents[2] / "mqe_model" / "demo" / "checkpoint"


def test_prints_each_keeper_and_gap_with_its_ratio_and_leaves_no_spinner(capsys):
    args = ["--checkpoint", str(DEMO), "--hz", "50", "--calls", "5", "--kinds", "act", "tiny",
            "--periods-ms", "5", "--gaps-ms", "0", "1", "--gap-calls", "3", "--spinners", "1"]
    assert idle_latency.main(args) == 0
    out = capsys.readouterr().out
    assert ", encoders separate, on " in out  # auto on the CPU, as mqe-serve
    keepers = keeper_rows(out)
    assert [(k, int(p)) for k, p, *_ in keepers] == [("none", 0), ("act", 5), ("tiny", 5)]
    assert float(keepers[0][4]) == 1.0 and float(keepers[0][5]) == 0.0  # no keeper: ratio 1, no duty
    assert all(float(duty) > 0 for *_, duty in keepers[1:])
    gaps = re.findall(r"gap\s+([\d.]+) ms:\s+([\d.]+)\s+\(([\d.]+)x the first gap\)\s+spinners\s+([\d.]+)", out)
    assert [float(g) for g, *_ in gaps] == [0.0, 1.0] and float(gaps[0][2]) == 1.0


def keeper_rows(out: str) -> list[tuple[str, ...]]:
    return re.findall(r"^\s*(none|act|tiny|wide|poll|self-tiny|spin)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%",
                      out, re.M)


def test_keepers_in_the_acting_thread_replace_its_sleep_and_spin_has_no_period(capsys):
    # 10 Hz: 100 ms waits keep spin's share above half even when a loaded CI core takes 20-50 ms per act
    args = ["--checkpoint", str(DEMO), "--hz", "10", "--calls", "5", "--kinds", "wide", "poll", "self-tiny", "spin",
            "--periods-ms", "5", "2", "--gaps-ms"]
    assert idle_latency.main(args) == 0
    rows = {(k, int(p)): float(duty) for k, p, *_, duty in keeper_rows(capsys.readouterr().out)}
    assert list(rows) == [("none", 0), ("wide", 5), ("wide", 2), ("poll", 5), ("poll", 2),
                          ("self-tiny", 5), ("self-tiny", 2), ("spin", 0)]
    assert rows[("poll", 2)] == 0.0  # waking up is not work
    assert rows[("wide", 2)] > 0 and rows[("self-tiny", 2)] > 0
    assert rows[("spin", 0)] > 50.0  # the acting thread busy-waits for the whole ~100 ms between acts
    assert rows[("spin", 0)] > max(duty for key, duty in rows.items() if key != ("spin", 0))


def test_a_larger_wide_array_keeps_the_device_busy_longer(capsys):
    duties = {}
    for mb in ("0.0625", "8"):
        args = ["--checkpoint", str(DEMO), "--hz", "20", "--calls", "5", "--kinds", "wide", "--periods-ms", "2",
                "--wide-mb", mb, "--gaps-ms"]
        assert idle_latency.main(args) == 0
        out = capsys.readouterr().out
        assert f"the wide keeper's array {float(mb):g} MB" in out
        duties[mb] = float(keeper_rows(out)[1][5])
    assert duties["8"] > duties["0.0625"] > 0


def test_evicting_the_caches_times_each_gap_again_and_writes_every_byte(capsys):
    args = ["--checkpoint", str(DEMO), "--hz", "50", "--calls", "5", "--kinds", "poll", "--periods-ms", "5",
            "--gaps-ms", "0", "1", "--gap-calls", "3", "--evict-mb", "4"]
    assert idle_latency.main(args) == 0
    out = capsys.readouterr().out
    assert "with 4 MB written before each act:" in out
    gaps = re.findall(r"gap\s+([\d.]+) ms:\s+([\d.]+)\s+\(([\d.]+)x the first gap\)\s+evicted\s+([\d.]+)\s+\(([\d.]+)x\)",
                      out)
    assert [float(gap) for gap, *_ in gaps] == [0.0, 1.0]
    assert all(float(ratio) == pytest.approx(float(cold) / float(warm), abs=0.01) for _, warm, _, cold, ratio in gaps)
    evict = idle_latency.cache_evictor(1)
    first = evict()
    assert first.size == 1 << 20 and (first == 1).all()
    assert (evict() == 2).all()  # every byte, every call


def test_spinners_run_inside_the_block_at_the_lowest_priority_and_are_gone_after_it():
    with idle_latency.spinning(2) as procs:
        assert len(procs) == 2 and all(proc.poll() is None for proc in procs)
        assert all(int(Path(f"/proc/{proc.pid}/stat").read_text().split()[18]) == 19 for proc in procs)  # nice
    assert all(proc.poll() is not None for proc in procs)


@pytest.mark.parametrize("args, message", [
    (["--hz", "0"], "--hz and --periods-ms must be > 0"),
    (["--gap-calls", "1"], "--gap-calls must be >= 3"),
    (["--evict-mb", "-1"], "--spinners, --evict-mb and --gaps-ms >= 0"),
    (["--wide-mb", "0"], "--wide-mb must be > 0 (got 0.0); leave it out for the device's default"),
    (["--kinds", "jog"], "unknown --kinds ['jog']; choose from act, tiny, wide, poll, self-tiny, spin"),
])
def test_bad_arguments_are_one_line_and_exit_2(capsys, args, message):
    assert idle_latency.main(["--checkpoint", str(DEMO), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
