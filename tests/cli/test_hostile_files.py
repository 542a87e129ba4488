"""Files from outside, as an attacker or a careless operator hands them to the console (issue W2):
devices, FIFOs and huge files named on the command line, an events log edited by hand, imported
runs with impossible numbers, wrong types or terminal escapes. Each is one line naming the file
(and field), the right exit code, memory bounded, never a traceback; nothing raw reaches the terminal.

The commands run as a user runs them (`python -m console ...`) under an address-space limit, so
a reader that reads without bound fails here instead of taking the machine."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.results.record import StoredRun, run_to_dict
from tests.cli.cli_helpers import ROOT

MEMORY_LIMIT = 2 << 30  # the console starts well within it; /dev/zero read whole does not
RESULT = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_tiny_result.json"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        cwd=ROOT,
        env={**os.environ, "MALLOC_ARENA_MAX": "2", **env},  # reserved address space: not per thread
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_bounded_memory,
    )


@pytest.fixture
def env(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


@pytest.fixture
def hostile(tmp_path) -> dict[str, str]:
    """A FIFO, a character device, a 300 MB sparse regular file."""
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as fh:
        fh.truncate(300 << 20)
    return {"fifo": str(fifo), "device": "/dev/zero", "sparse": str(sparse)}


def _one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rocm-console: ")]
    assert lines, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- 1. unbounded reads


@pytest.mark.parametrize("kind", ["device", "fifo", "sparse"])
def test_results_import_of_a_device_fifo_or_huge_file_is_one_line_exit_2(env, hostile, kind):
    path = hostile[kind]
    started = time.monotonic()
    proc = run("results", "import", path, env=env)
    assert time.monotonic() - started < 20  # the CLI's start on a busy machine; the read itself is instant
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = _one_line(proc, path, "256 MiB")
    assert ("not a regular file" in line) == (kind != "sparse")


def test_a_fifo_inside_an_imported_folder_never_blocks_the_import(env, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    os.mkfifo(folder / "a-pipe.json")
    (folder / "run.json").write_bytes(RESULT.read_bytes())
    proc = run("results", "import", str(folder), env=env)
    assert proc.returncode == 2 and "1 imported" in proc.stdout, proc.stdout + proc.stderr
    _one_line(proc, "a-pipe.json", "FIFO")


@pytest.mark.parametrize("kind", ["device", "fifo", "sparse"])
@pytest.mark.parametrize(
    "argv",
    [
        ("status", "--profile", "{path}"),
        ("experiment", "check", "{path}", "--demo"),
        ("baseline", "save", "b1", "--suite", "{path}", "--demo"),
        ("web", "--demo", "--token-file", "{path}"),
        ("experiment", "report", "profiles/experiments/demo-layouts.toml", "--demo", "--state", "{path}"),
    ],
    ids=["profile", "experiment", "suite", "token-file", "state"],
)
def test_every_user_named_file_is_read_bounded(env, hostile, kind, argv):
    path = hostile[kind]
    proc = run(*(a.format(path=path) for a in argv), env=env)
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-2000:]
    line = _one_line(proc, path)
    assert re.search(r"\d+ (MiB|KiB)", line), line  # the limit is named


# ---------------------------------------------------------------- 7. events: deep nesting, huge log


def _event(message: str = "node down (was live)", **extra) -> str:
    return json.dumps({"time": time.time(), "kind": "node.down", "node": "mi300-a", "message": message, **extra})


@pytest.mark.parametrize("mode", [(), ("--json",), ("--follow", "--timeout", "0.5")], ids=["table", "json", "follow"])
def test_a_deeply_nested_event_line_is_skipped_and_counted(env, mode):
    data = Path(env["ROCM_CONSOLE_DATA_DIR"])
    data.mkdir(parents=True)
    deep = "[" * 100_000 + "]" * 100_000
    deep_details = json.dumps({"time": 1, "kind": "node.up"})[:-1] + ', "details": ' + '{"a":' * 5000 + "1" + "}" * 5001
    (data / "events.jsonl").write_text("\n".join([deep, _event(), deep_details]) + "\n")
    proc = run("events", *mode, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "node down (was live)" in proc.stdout
    # moved into the store, the lines that are not events skipped and counted (the catch-up's one line)
    assert "2 event lines that are not events skipped" in proc.stderr


def test_events_with_times_no_clock_shows_are_skipped(env):
    data = Path(env["ROCM_CONSOLE_DATA_DIR"])
    data.mkdir(parents=True)
    lines = [_event()]
    for t in ("1e300", "NaN", "-1e18", "Infinity"):
        lines.append(json.dumps({"time": 0, "kind": "node.up"}).replace('"time": 0', f'"time": {t}'))
    (data / "events.jsonl").write_text("\n".join(lines) + "\n")
    proc = run("events", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "4 event lines that are not events skipped" in proc.stderr


def test_a_huge_events_log_shows_its_newest_events_with_memory_flat(env):
    data = Path(env["ROCM_CONSOLE_DATA_DIR"])
    data.mkdir(parents=True)
    log = data / "events.jsonl"
    with open(log, "wb") as fh:
        fh.truncate(3 << 30)  # 3 GB of one line (sparse), more than the process may map
        fh.seek(0, os.SEEK_END)
        fh.write(("\n" + _event("the newest") + "\n").encode())
    proc = run("events", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "the newest" in proc.stdout


# ---------------------------------------------------------------- 8, 14. numbers and types of an imported run


def _stored_doc(**fields) -> dict:
    run = StoredRun(
        id="20260101-000000-import-abcdef",
        created=1_767_225_600.0,
        origin="import",
        setup={"model": "org/m", "max_concurrency": 4},
        metrics={"completed": 20.0, "output_throughput": 500.0},
    )
    return {**run_to_dict(run), **fields}


@pytest.mark.parametrize("value", ["1e300", "NaN", "-1e18", "Infinity"])
def test_an_imported_run_with_an_impossible_time_is_one_line_naming_file_and_field(env, tmp_path, value):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_stored_doc(created=123.5)).replace('"created": 123.5', f'"created": {value}'))
    proc = run("results", "import", str(path), env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    [skipped] = [ln for ln in proc.stdout.splitlines() if ln.startswith("skipped")]
    assert str(path) in skipped and "'created'" in skipped and "not a time" in skipped


@pytest.mark.parametrize("label", [{"a": 1}, [1, 2], 7, True])
def test_a_run_whose_label_is_not_text_is_refused_or_shown_never_a_traceback(env, tmp_path, label):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_stored_doc(label=label)))
    proc = run("results", "import", str(path), env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "'label' is" in proc.stdout and "not a string" in proc.stdout

    # the same run in the store (a row written by hand, or by an older console): list and show
    # say it in one line naming the run
    from console.core.store.rows import doc_text
    from console.services.store import open_store

    good = run("results", "import", str(RESULT), "--json", env=env)
    [run_id] = [r["id"] for r in json.loads(good.stdout)["imported"]]
    with open_store(Path(env["ROCM_CONSOLE_DATA_DIR"]) / "store.sqlite3") as store, store.db.transaction():
        store.db.execute("UPDATE runs SET doc = ? WHERE id = ?", (doc_text(_stored_doc(label=label)), run_id))
    for argv in (("results", "list"), ("results", "show", run_id)):
        proc = run(*argv, env=env)
        assert proc.returncode != 0 or "label" in proc.stdout, proc.stdout + proc.stderr
        _one_line(proc, run_id)

    # a file put by hand in the old results folder: left there, counted in the catch-up's one line
    store = Path(env["ROCM_CONSOLE_DATA_DIR"]) / "results"
    store.mkdir(parents=True, exist_ok=True)
    (store / "20260101-000000-import-abcdef.json").write_text(json.dumps(_stored_doc(label=label)))
    proc = run("results", "list", env=env)
    assert proc.returncode == 0 and "1 unreadable files left in place" in _one_line(proc, "store: moved 0 runs")


# ---------------------------------------------------------------- 9. nothing raw reaches the terminal


def test_import_summary_and_export_to_stdout_show_escapes_never_raw(env, tmp_path):
    doc = json.loads(RESULT.read_text())
    doc["model_id"] = f"org/evil{EVIL}"
    good = tmp_path / f"r{EVIL[:8]}.json"
    good.write_text(json.dumps(doc))
    failed = tmp_path / "failed.log"  # a captured output whose reason is shown
    failed.write_text(f"Traceback ...\nValueError: Initial test run failed - {EVIL}\n")
    proc = run("results", "import", str(good), str(failed), "--label", f"lab{EVIL}", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not RAW_CONTROL.search(proc.stdout + proc.stderr), repr(proc.stdout + proc.stderr)
    assert "\\x1b]0;pwned\\x07" in proc.stdout and "Initial test run failed" in proc.stdout

    for fmt in ("csv", "md"):
        proc = run("results", "export", "--all", "--format", fmt, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert not RAW_CONTROL.search(proc.stdout), repr(proc.stdout)
        assert "\\x1b]0;pwned\\x07" in proc.stdout
    proc = run("results", "export", "--all", "--format", "json", env=env)
    assert not RAW_CONTROL.search(proc.stdout), repr(proc.stdout)
    [exported] = json.loads(proc.stdout)["runs"]
    assert exported["label"] == f"lab{EVIL}" and exported["setup"]["model"] == f"org/evil{EVIL}"  # same data


def test_hand_edited_events_never_set_the_terminal_title(env):
    data = Path(env["ROCM_CONSOLE_DATA_DIR"])
    data.mkdir(parents=True)
    (data / "events.jsonl").write_text(_event(f"msg{EVIL}", node=f"n{EVIL}", instance=f"i{EVIL}") + "\n")
    for mode in ((), ("--json",), ("--follow", "--timeout", "0.5"), ("--follow", "--json", "--timeout", "0.5")):
        proc = run("events", *mode, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert not RAW_CONTROL.search(proc.stdout + proc.stderr), repr(proc.stdout)
        assert "pwned" in proc.stdout


def test_a_bounded_read_refused_anywhere_in_a_command_is_one_line_exit_2(monkeypatch, capsys):
    """A command that reads a user-named file through read_bounded and lets the refusal go
    (models, baseline: other helpers' callers) still ends in one line, exit 2."""
    from console.cli import entry
    from console.core.bounded_file import read_bounded

    monkeypatch.setattr(entry.group_module("doctor"), "run", lambda args: read_bounded("/dev/zero", 10, "file"))
    assert entry.main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rocm-console: /dev/zero: a character device")
