"""The event log (console/services/events.py): bounded, rotated, safe across processes."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from console.core.events import Event
from console.services.events import EventLog, default_events_path


def ev(t: float, kind: str = "gpu.ecc", node: str = "n1", gpu: int | None = 0, message: str = "") -> Event:
    return Event(
        t, kind, node, gpu, severity="warn" if kind.startswith("gpu") else "info", message=message or f"at {t}"
    )


def test_lives_beside_the_results_store(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    assert default_events_path() == tmp_path / "data" / "events.jsonl"
    log = EventLog()
    assert log.read() == []  # nothing written yet, and reading creates nothing
    assert not (tmp_path / "data").exists()
    log.append(ev(1.0))
    assert [e.time for e in log.read()] == [1.0]


def test_newest_first_and_filters(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.append([ev(1.0), ev(3.0, "node.down", node="n2", gpu=None), ev(2.0, "gpu.throttle_start", gpu=4)])
    log.append(ev(4.0, "alert.fired", gpu=None))
    assert [e.time for e in log.read()] == [4.0, 3.0, 2.0, 1.0]
    assert [e.time for e in log.read(kind="gpu")] == [2.0, 1.0]
    assert [e.time for e in log.read(node="n2")] == [3.0]
    assert [e.time for e in log.read(since=2.5)] == [4.0, 3.0]
    assert [e.time for e in log.read(gpu=4)] == [2.0]
    assert [e.time for e in log.read(limit=2)] == [4.0, 3.0]
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["kind"] for line in lines)


def test_rotation_keeps_the_log_bounded(tmp_path):
    log = EventLog(tmp_path / "events.jsonl", max_bytes=4096, keep=2)
    for i in range(400):
        log.append(ev(float(i), message="x" * 60))
    files = sorted(p.name for p in tmp_path.glob("events.jsonl*") if not p.name.endswith(".lock"))
    assert files == ["events.jsonl", "events.jsonl.1", "events.jsonl.2"]
    assert all((tmp_path / f).stat().st_size <= 4096 for f in files)
    kept = log.read()
    # The newest survive, in order, without a gap; the oldest were dropped.
    times = [e.time for e in kept]
    assert times[0] == 399.0 and times == sorted(times, reverse=True)
    assert times == [float(t) for t in range(399, 399 - len(times), -1)]
    assert 3 * 4096 // 200 < len(times) < 400


def test_bad_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.append(ev(1.0))
    with path.open("a") as fh:
        fh.write('{"time": 2, "kind": "gpu.melted"}\nnot json\n\n{"time": 3, "kind": "gpu.ecc", "gpu": 1}\n')
    assert [e.time for e in log.read()] == [3.0, 1.0]
    assert log.bad_lines == 2


def _append_many(path: str, writer: int, count: int) -> None:
    log = EventLog(Path(path), max_bytes=64 * 1024, keep=50)
    for i in range(count):
        log.append([ev(writer * 1000 + i, node=f"w{writer}", message="y" * (50 + writer * 37 % 200))])


def test_appends_from_many_processes_stay_whole(tmp_path):
    path = tmp_path / "events.jsonl"
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_append_many, args=(str(path), w, 150)) for w in range(4)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(60)
        assert p.exitcode == 0
    log = EventLog(path, max_bytes=64 * 1024, keep=50)
    events = log.read()
    assert log.bad_lines == 0
    assert len(events) == 600  # every line whole, none lost, across rotations
    for w in range(4):
        mine = sorted(e.time for e in events if e.node == f"w{w}")
        assert mine == [float(w * 1000 + i) for i in range(150)]
    assert len(log.files()) > 1  # the writers rotated the log while racing


def test_follower_sees_new_events_across_a_rotation(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventLog(path, max_bytes=2048, keep=3)
    log.append(ev(0.0))
    follower = log.follow()
    assert follower.poll() == []
    log.append([ev(1.0), ev(2.0)])
    assert [e.time for e in follower.poll()] == [1.0, 2.0]
    # Enough to rotate, twice over: the follower finishes the old file, then reads the new.
    batch = [ev(float(t), message="z" * 100) for t in range(3, 40)]
    for e in batch:
        log.append(e)
    seen = follower.poll()
    assert [e.time for e in seen] == [e.time for e in batch][-len(seen) :]
    assert len(log.files()) >= 2


def test_a_half_written_line_waits_for_its_end(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    follower = log.follow()
    line = json.dumps({"time": 5, "kind": "gpu.ecc", "message": "half"})
    with path.open("a") as fh:
        fh.write(line[:10])
    assert follower.poll() == []
    with path.open("a") as fh:
        fh.write(line[10:] + "\n")
    assert [e.message for e in follower.poll()] == ["half"]
