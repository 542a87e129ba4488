"""The event log's reading side is bounded (W2): a FIFO where the log should be never blocks a
reader or a follower, an overlong line is skipped and counted, a log grown past what rotation
allows is read from its tail."""

from __future__ import annotations

import json
import os
import threading
import time

from console.core.events import Event
from console.services.events import MAX_LINE_BYTES, READ_LIMIT, EventLog


def test_a_fifo_in_place_of_the_log_never_blocks_a_follower(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.append(Event(time.time(), "node.down", "a"))
    follower = log.follow()
    os.unlink(log.path)
    os.mkfifo(log.path)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(follower.poll()), daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive() and got == [[]]
    assert log.read() == []


def test_an_overlong_line_is_skipped_and_counted_without_decoding(tmp_path):
    path = tmp_path / "events.jsonl"
    huge = json.dumps({"time": time.time(), "kind": "node.up", "message": "x" * MAX_LINE_BYTES})
    good = json.dumps({"time": time.time(), "kind": "node.down", "node": "a"})
    path.write_text(huge + "\n" + good + "\n")
    log = EventLog(path)
    assert [e.kind for e in log.read()] == ["node.down"] and log.bad_lines == 1


def test_a_log_grown_past_the_read_limit_is_read_from_its_tail(tmp_path):
    path = tmp_path / "events.jsonl"
    line = json.dumps({"time": time.time(), "kind": "node.down", "node": "a"}) + "\n"
    count = READ_LIMIT // len(line) + 1000
    path.write_text(line * count)
    log = EventLog(path)
    events, position = log.read_with_position()
    assert 0 < len(events) <= READ_LIMIT // len(line) and log.bad_lines == 0  # no line read cut in two
    assert position.offset == path.stat().st_size
    with open(path, "a") as fh:
        fh.write(line)
    assert len(log.follow(position).poll()) == 1
