"""Issue U2: `results export --output FILE` never replaces FILE: a second export goes to
FILE-1 (then -2, …) and the line on stderr names it and says the first was kept."""

from __future__ import annotations

from .test_results import CPU, SEED_004, cli, data_dir, imported_ids  # noqa: F401 (autouse fixture)


def test_a_second_export_to_the_same_file_keeps_the_first(capsys, tmp_path):
    ids = imported_ids(capsys, str(SEED_004), str(CPU / "bench_result.json"))
    target = tmp_path / "runs.csv"
    code, out, err = cli(capsys, "export", ids[0], "--format", "csv", "--output", str(target))
    assert code == 0 and err.strip() == f"1 run(s) written to {target}"
    target.write_text("edited by hand\n")
    code, out, err = cli(capsys, "export", ids[0], ids[1], "--format", "csv", "--output", str(target))
    second = tmp_path / "runs-1.csv"
    assert code == 0 and err.strip() == f"2 run(s) written to {second} ({target} exists: kept)"
    assert target.read_text() == "edited by hand\n" and len(second.read_text().splitlines()) == 3
    code, _, err = cli(capsys, "export", ids[0], "--format", "csv", "--output", str(target))
    assert code == 0 and f"written to {tmp_path / 'runs-2.csv'}" in err
