"""mqe-ogbench-table: rows in, one Markdown line per dataset out."""

from __future__ import annotations

import json

from mqe_model.ogbench import table


def write_row(root, dataset, agent, mean, sem, steps=110_000, seeds=(0, 1, 2, 3)):
    path = root / dataset / f"{agent}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"dataset": dataset, "agent": agent, "success_mean": mean, "success_sem": sem,
                                "steps": steps, "seeds": list(seeds)}))


def test_table_puts_ours_beside_the_paper(tmp_path, capsys):
    write_row(tmp_path, "pointmaze-giant-navigate-v0", "mqe", 57.333, 4.04)
    write_row(tmp_path, "pointmaze-giant-navigate-v0", "gcbc", 0.0, 0.0)
    write_row(tmp_path, "scene-play-v0", "gciql", 50.0, None, steps=90_000, seeds=(0,))
    write_row(tmp_path, "scene-play-v0", "mqe", 70.0, 2.0, steps=1_000_000, seeds=(0,))
    assert table.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| dataset | updates | seeds | MQE (paper) | MQE (ours) | GCIQL (paper)")
    assert lines[2] == ("| pointmaze-giant-navigate | 110k | 4 | 72.8 ± 2.5 | 57.3 ± 4.0 | 0.0 ± 0.0 | — | — "
                        "| 0.0 ± 0.0 |")
    assert lines[3] == "| scene-play | 90k-1000k | 1 | 76.8 ± 2.1 | 70.0 ± 2.0 | 51.3 ± 1.5 | 50.0 | — | — |"
    assert len(lines) == 4


def test_table_to_a_file(tmp_path):
    write_row(tmp_path / "rows", "puzzle-4x4-play-v0", "gcbc", 0.0667, 0.0667, steps=90_000)
    assert table.main([str(tmp_path / "rows"), "--out", str(tmp_path / "t.md")]) == 0
    assert "| puzzle-4x4-play | 90k | 4 | 18.7 ± 2.3 | — | 25.7 ± 1.1 | — | — | 0.1 ± 0.1 |" in (
        tmp_path / "t.md").read_text()


def test_no_rows_and_bad_rows_are_one_line(tmp_path, capsys):
    assert table.main([str(tmp_path)]) == 2
    assert "no rows" in capsys.readouterr().err
    (tmp_path / "scene-play-v0").mkdir()
    (tmp_path / "scene-play-v0" / "mqe.json").write_text("{not json")
    assert table.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mqe.json: not a row" in err
    assert table.main([str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
