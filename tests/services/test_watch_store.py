"""`rocm-console watch` and the store (issue Y): the watcher writes the timeline to the
store (a file store found in the data folder is moved in first, said in one line); a store
that cannot be opened is one line and the watch goes on, its events in the data folder's
file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from console.core.events import Event
from console.services.events import EventLog
from console.services.store.store import open_store
from tests.cli.cli_helpers import ROOT
from tests.cli.test_watch import _stop
from tests.helpers import wait_until


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 2, compute_partition = "SPX", seed = 11 }}
[health]
interval = 1
""")
    return path


def _start(tmp_path: Path, data: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1", ROCM_CONSOLE_DATA_DIR=str(data))
    return subprocess.Popen(
        [sys.executable, "-m", "console", "watch", "--profile", str(_profile(tmp_path))],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored_kinds(path: Path) -> list[str]:
    with open_store(path) as store:
        return [e.kind for e in store.events.read()]


def _origins(path: Path) -> dict[str, str | None]:
    with open_store(path) as store:
        return {e.kind: e.origin for e in store.events.read()}


def test_the_watcher_moves_the_file_store_in_and_writes_its_events_to_the_store(tmp_path):
    data = tmp_path / "data"
    EventLog(data / "events.jsonl").append(Event(1000.0, "node.down", "sim", message="before the store"))
    proc = _start(tmp_path, data)
    try:
        assert wait_until(lambda: "node.up" in _stored_kinds(data / "store.sqlite3"), timeout=60)
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    origins = _origins(data / "store.sqlite3")
    assert origins["node.up"] == f"watch@{socket.gethostname()}"  # the team's timeline says who wrote it
    assert origins["node.down"] is None  # the file's event, moved in: nobody said who wrote it
    assert [e.kind for e in EventLog(data / "events.jsonl").read()] == ["node.down"]  # nothing new in the file
    moved = [x for x in err.splitlines() if x.startswith("rocm-console watch: store: moved")]
    assert len(moved) == 1 and "1 events" in moved[0] and str(data / "store.sqlite3") in moved[0], err


def test_a_store_that_cannot_be_opened_is_one_line_and_the_watch_goes_on(tmp_path):
    data = tmp_path / "data"
    (data / "store.sqlite3").mkdir(parents=True)  # a folder where the database would be
    proc = _start(tmp_path, data)
    try:
        assert wait_until(lambda: "node.up" in [e.kind for e in EventLog(data / "events.jsonl").read()], timeout=60)
        assert proc.poll() is None  # still watching
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    assert "Traceback" not in err
    store_lines = [x for x in err.splitlines() if "the store" in x]
    assert store_lines == [
        f"rocm-console watch: cannot open the store {data / 'store.sqlite3'}: it is not a file; "
        f"events go to {data / 'events.jsonl'} until it can be opened"
    ], err
    assert f"events to {data / 'events.jsonl'}" in err
