"""Stored and imported result files hold text from elsewhere: `results list|show|import` show it
as visible escapes, never pass an escape sequence to the terminal, and a file the console
cannot read (nested a hundred thousand deep, a number of a hundred thousand digits) is one line
naming it, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from console.cli import main

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json"
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EVIL = "\x1b[2J\x07\r\x1b]52;c;SGVsbG8=\x07[red]boom[/]\u202e\x9b31m"
SHOWN = "\\x1b[2J\\x07\\r\\x1b]52;c;SGVsbG8=\\x07[red]boom[/]\\u202e\\x9b31m"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["results", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_imported_text_is_shown_as_visible_escapes(capsys, tmp_path):
    doc = json.loads(RESULT.read_text())
    doc["model_id"] = f"org/evil{EVIL}"
    doc[f"evil_key{EVIL}"] = 1.5  # a key of the file is shown too (show)
    path = tmp_path / f"result{EVIL[:4]}.json"  # a file name with an escape, named in messages
    path.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "import", str(path), "--label", f"lab{EVIL}", "--node", f"node{EVIL}", "--json")
    assert code == 0, err
    [run_id] = [r["id"] for r in json.loads(out)["imported"]]

    code, out, err = cli(capsys, "list")
    assert code == 0 and not RAW_CONTROL.search(out + err), repr(out + err)
    assert f"node{SHOWN}" in out and "\\u202e\\x9b31m" in out  # the node; the model's last "/" part

    code, out, err = cli(capsys, "show", run_id)
    assert code == 0 and not RAW_CONTROL.search(out + err), repr(out + err)
    assert f"org/evil{SHOWN}" in out and f"lab{SHOWN}" in out and f"evil_key{SHOWN}" in out


@pytest.mark.parametrize(
    "content",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"completed": 1' + "0" * 100_000 + ', "duration": 1}',
    ],
    ids=["deep nesting", "huge number"],
)
def test_unreadable_import_and_stored_file_are_one_line(capsys, data_dir, tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = cli(capsys, "import", str(path))
    assert "Traceback" not in err and code != 0
    assert "bad.json" in out + err and ("nested deeper" in out + err or "over 64 digits" in out + err), out + err

    # the same in the store itself (a row damaged, or written by hand): one line naming the run
    ids = [r["id"] for r in json.loads(cli(capsys, "import", str(RESULT), "--json")[1])["imported"]]
    from console.services.store import open_store

    with open_store(data_dir / "store.sqlite3") as store, store.db.transaction():
        store.db.execute("UPDATE runs SET doc = ? WHERE id = ?", (content, ids[0]))
    code, out, err = cli(capsys, "list")
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert ids[0] in line and "unreadable stored run" in line, err
    code, out, err = cli(capsys, "show", ids[0])
    assert code == 1 and ids[0] in one_line(err) and "unreadable stored run" in err

    # a file put by hand in the old results folder: left there, counted in the catch-up's line
    (data_dir / "results").mkdir(parents=True, exist_ok=True)
    (data_dir / "results" / "20260101-000000-deadbeef.json").write_text(content)
    code, out, err = cli(capsys, "list")
    assert "Traceback" not in err and code == 0
    assert [ln for ln in err.splitlines() if "store:" in ln and "1 unreadable files left in place" in ln], err
