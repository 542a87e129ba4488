"""History: the store a face opens once, caught up with the data folder's old files (said in
one line, once), unavailable in one line naming it (events then kept in the file, and moved in
when the store opens again), and a run deleted from it never brought back by the files."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.baseline.diff import versions_from_dict
from console.core.events import Event
from console.services.events import EventLog
from console.services.history import History
from console.services.results import StoreError
from tests.services.store.file_store import build_file_store

ROOT = Path(__file__).resolve().parents[2]


def test_first_opening_moves_the_files_in_once_and_says_so_in_one_line(tmp_path):
    data = tmp_path / "data"
    build_file_store(data)
    said: list[str] = []
    history = History(None, data, say=said.append)
    assert history.runs.count() == 29
    assert said == [
        f"store: moved 29 runs, 2 baselines, 68 events, 2 node-versions records, from {data} into "
        f"{data / 'store.sqlite3'} (the files are left in place)"
    ]
    assert (data / "results").is_dir() and len(list((data / "results").glob("*.json"))) == 29
    history.close()
    again: list[str] = []
    second = History(None, data, say=again.append)
    assert second.runs.count() == 29 and len(second.events.read()) == 68
    assert again == []  # nothing new in the files: not read again, nothing said


def test_events_written_while_the_store_is_unavailable_reach_it_later(tmp_path):
    data = tmp_path / "data"
    blocker = data / "store.sqlite3"
    blocker.mkdir(parents=True)  # a folder where the database file should be
    history = History(None, data)
    with pytest.raises(StoreError) as err:
        history.runs.count()
    assert str(err.value) == f"cannot open the store {blocker}: it is not a file"
    assert history.problem == str(err.value)
    event = Event(time.time(), "partition.switched", "n1", gpu=0, message="SPX -> CPX")
    assert history.events.append(event) == 1  # never lost: the file keeps it
    assert [e.message for e in EventLog(data / "events.jsonl").read()] == ["SPX -> CPX"]
    assert history.events.unavailable == history.problem
    blocker.rmdir()
    said: list[str] = []
    later = History(None, data, say=said.append)
    assert [e.message for e in later.events.read()] == ["SPX -> CPX"]
    assert said and "1 events" in said[0]


def test_a_failed_opening_is_not_retried_on_every_call(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "store.sqlite3").mkdir(parents=True)
    history = History(None, data)
    assert history.try_open() is None
    (data / "store.sqlite3").rmdir()
    assert history.try_open() is None  # within RETRY_AFTER_S: the same answer, no new attempt
    monkeypatch.setattr("console.services.history.RETRY_AFTER_S", 0.0)
    assert history.try_open() is not None and history.problem is None


def test_a_deleted_run_does_not_come_back_from_its_old_file(tmp_path):
    data = tmp_path / "data"
    build_file_store(data)
    history = History(None, data)
    victim = history.runs.list()[0].id
    assert history.delete_run(victim) == victim
    assert not (data / "results" / f"{victim}.json").exists()
    history.close()
    later = History(None, data)  # the results folder changed: the files are read again
    assert later.runs.count() == 28
    with pytest.raises(KeyError):
        later.runs.get(victim)


def test_node_versions_book_over_the_store(tmp_path):
    history = History(None, tmp_path / "data")
    book = history.versions_book()
    doc = json.loads((ROOT / "profiles" / "demo-baselines" / "mi300x-spx" / "demo.json").read_text())
    before = versions_from_dict(doc["versions"])
    assert book.observe(before) == ()  # the first reading: silent
    [change] = book.observe(replace(before, rocm="7.1.0-21"))
    assert "7.1.0-21" in change.line()
    assert set(history.versions_book().marked()) == {before.node}  # in the store: a new book sees it
    assert book.acknowledge(before.node) == 1 and history.versions_book().marked() == {}
    assert not (tmp_path / "data" / "node-versions").exists()  # no files written


def test_events_go_to_the_file_when_the_open_store_fails_and_the_store_is_tried_again(tmp_path, monkeypatch):
    data = tmp_path / "data"
    history = History(None, data)
    history.events.append(Event(time.time(), "partition.switched", "n1", message="first"))
    store = history.open()

    def gone(*_a, **_k):
        raise StoreError(f"cannot use the store {store.where}: server closed the connection unexpectedly")

    monkeypatch.setattr(store.events, "append", gone)
    assert history.events.append(Event(time.time(), "partition.switched", "n1", message="second")) == 1
    assert history.problem == f"cannot use the store {store.where}: server closed the connection unexpectedly"
    assert not history.is_open  # dropped: the next opening is tried after RETRY_AFTER_S
    assert [e.message for e in EventLog(data / "events.jsonl").read()] == ["second"]
    monkeypatch.setattr("console.services.history.RETRY_AFTER_S", 0.0)
    assert [e.message for e in history.events.read()] == ["second", "first"]  # moved in at reopening
