"""`rocm-console results ... --demo` reads the demo's own history, never the user's (and back)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from console.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO_RUNS = sorted(p.stem for p in (ROOT / "profiles" / "demo-results").glob("*.json"))
SEED_004 = ROOT / "tests" / "fixtures" / "seeds" / "004_040c923192cb04a5.txt"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("ROCM_CONSOLE_DEMO_DATA_DIR", raising=False)
    return tmp_path / "data"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    before = dict(os.environ)  # each command as its own process: --demo's folder choice ends with it
    try:
        code = main(["results", *args])
    finally:
        os.environ.clear()
        os.environ.update(before)
    out, err = capsys.readouterr()
    return code, out, err


def test_results_demo_reads_the_demos_runs_not_the_users(capsys, monkeypatch, data_dir):
    assert len(DEMO_RUNS) >= 2
    code, out, err = cli(capsys, "import", str(SEED_004), "--label", "mine", "--json")
    assert code == 0, err
    mine = [r["id"] for r in json.loads(out)["imported"]]
    assert mine

    code, out, err = cli(capsys, "list", "--demo", "--json")
    assert code == 0, err
    demo_ids = {r["id"] for r in json.loads(out)["runs"]}
    assert set(DEMO_RUNS) <= demo_ids  # the demo's recorded runs, as the demo TUI shows them
    assert not demo_ids & set(mine)  # never the user's

    code, out, err = cli(capsys, "list", "--json")
    assert code == 0, err
    assert {r["id"] for r in json.loads(out)["runs"]} == set(mine)  # the user's history got nothing of the demo

    code, out, err = cli(capsys, "show", DEMO_RUNS[0], "--demo")
    assert code == 0, err
    assert DEMO_RUNS[0] in out
    code, out, err = cli(capsys, "show", DEMO_RUNS[0])
    assert code == 2 and DEMO_RUNS[0] in err  # not in the user's store

    code, out, err = cli(capsys, "compare", DEMO_RUNS[0], DEMO_RUNS[1], "--demo")
    assert code == 0, err
    code, out, err = cli(capsys, "export", "--all", "--format", "json", "--demo")
    assert code == 0, err
    assert {r["id"] for r in json.loads(out)["runs"]} == demo_ids
    # the demo's folder sits beside the user's results, and a second --demo command reuses it
    assert (data_dir / "demo" / "store.sqlite3").is_file() and not (data_dir / "demo" / "demo").exists()


def test_every_command_with_demo_uses_the_demos_data_folder(capsys, data_dir):
    # what the demo TUI logged (its events live in the demo's folder), and one of the user's own
    from console.core.events import partition_event
    from console.services.events import EventLog

    EventLog(data_dir / "demo" / "events.jsonl").append(partition_event(1.0, "mi300x-cpx", [0], "SPX", None))
    EventLog(data_dir / "events.jsonl").append(partition_event(2.0, "gpu-a", [3], "CPX", None))
    before = dict(os.environ)
    try:
        assert main(["events", "--demo", "--json"]) == 0
        demo = capsys.readouterr().out
        os.environ.clear()
        os.environ.update(before)
        assert main(["events", "--json"]) == 0
        mine = capsys.readouterr().out
    finally:
        os.environ.clear()
        os.environ.update(before)
    assert "mi300x-cpx" in demo and "gpu-a" not in demo
    assert "gpu-a" in mine and "mi300x-cpx" not in mine
