"""mqe-ogbench table: rows in, one Markdown line per dataset out."""

from __future__ import annotations

import json

from mqe_model.ogbench import cli


def main(args: list[str]) -> int:
    """`mqe-ogbench table ARGS`; its exit code."""
    return cli.main(["table", *args])


def write_row(root, dataset, agent, mean, sem, steps=110_000, seeds=(0, 1, 2, 3), overrides=None):
    path = root / dataset / f"{agent}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"dataset": dataset, "agent": agent, "success_mean": mean, "success_sem": sem, "steps": steps,
           "seeds": list(seeds)}
    path.write_text(json.dumps(row if overrides is None else {**row, "overrides": overrides}))


def test_table_puts_ours_beside_the_paper(tmp_path, capsys):
    write_row(tmp_path, "pointmaze-giant-navigate-v0", "mqe", 57.333, 4.04)
    write_row(tmp_path, "pointmaze-giant-navigate-v0", "gcbc", 0.0, 0.0)
    write_row(tmp_path, "scene-play-v0", "gciql", 50.0, None, steps=90_000, seeds=(0,))
    write_row(tmp_path, "scene-play-v0", "mqe", 70.0, 2.0, steps=1_000_000, seeds=(0,))
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| dataset | updates | seeds | MQE (paper) | MQE (ours) | GCIQL (paper)")
    assert lines[2] == ("| pointmaze-giant-navigate | 110k | 4 | 72.8 ± 2.5 | 57.3 ± 4.0 | 0.0 ± 0.0 | — | — "
                        "| 0.0 ± 0.0 |")
    assert lines[3] == "| scene-play | 90k-1000k | 1 | 76.8 ± 2.1 | 70.0 ± 2.0 | 51.3 ± 1.5 | 50.0 | — | — |"
    assert len(lines) == 4


def test_table_to_a_file(tmp_path):
    write_row(tmp_path / "rows", "puzzle-4x4-play-v0", "gcbc", 0.0667, 0.0667, steps=90_000)
    assert main([str(tmp_path / "rows"), "--out", str(tmp_path / "t.md")]) == 0
    assert "| puzzle-4x4-play | 90k | 4 | 18.7 ± 2.3 | — | 25.7 ± 1.1 | — | — | 0.1 ± 0.1 |" in (
        tmp_path / "t.md").read_text()


def test_no_rows_and_bad_rows_are_one_line(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no rows" in capsys.readouterr().err
    (tmp_path / "scene-play-v0").mkdir()
    (tmp_path / "scene-play-v0" / "mqe.json").write_text("{not json")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mqe.json: not a row" in err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err


def write_metrics(run_dir, rows):
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_unfinished_runs_are_scored_from_their_evaluations_and_marked(tmp_path, capsys):
    dataset = "scene-play-v0"
    train_rows = [{"step": s, "perf/steps_per_s": 300.0} for s in (1000, 2000, 90_000)]
    # a vmapped run of seeds 0-1 that logged two of its evaluations before the machine went back
    write_metrics(tmp_path / dataset / "mqe" / "seeds0-1", train_rows + [
        {"step": 72_000, "eval/success": 0.5, "eval/seed0_success": 0.4, "eval/seed1_success": 0.6},
        {"step": 81_000, "eval/success": 0.7, "eval/seed0_success": 0.6, "eval/seed1_success": 0.8}])
    write_metrics(tmp_path / dataset / "gciql" / "seed0", train_rows[:2])  # no evaluation yet: no score
    (tmp_path / dataset / "gciql" / "seed0.log").write_text("a run's output under --gpus\n")
    (tmp_path / dataset / "gciql" / "seed0-old").mkdir()  # not a run directory: left alone
    write_row(tmp_path, dataset, "gcbc", 1.0, 0.5, steps=90_000)
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # seed 0: mean(0.4, 0.6) = 50 %, seed 1: mean(0.6, 0.8) = 70 %; mean 60, s.e. 10
    assert lines[2] == "| scene-play | 90k | 2/4 | 76.8 ± 2.1 | 60.0 ± 10.0* | 51.3 ± 1.5 | — | — | 1.0 ± 0.5 |"
    assert lines[-1] == ("\\* scene-play mqe: unfinished (trained to 90000 updates), scored from the evaluations "
                         "at 72000, 81000")


def test_rows_trained_beyond_the_protocol_are_marked_with_what_they_changed(tmp_path, capsys):
    write_row(tmp_path, "pointmaze-giant-stitch-v0", "mqe", 60.067, 5.83, steps=80_000,
              overrides=["matmul_precision=tensorfloat32", "lam=0.99"])
    write_row(tmp_path, "pointmaze-giant-stitch-v0", "gcbc", 0.0, 0.0, overrides=[])  # none: unmarked
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == ("| pointmaze-giant-stitch | 80k-110k | 4 | 59.2 ± 3.2 | 60.1 ± 5.8† | 0.0 ± 0.0 | — | — "
                        "| 0.0 ± 0.0 |")
    assert lines[-1] == ("† pointmaze-giant-stitch mqe: trained with `--set matmul_precision=tensorfloat32 lam=0.99` "
                         "beyond the protocol")
