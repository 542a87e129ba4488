"""The database store's tables answer as today's file classes do (ResultStore, EventLog,
BaselineStore), and its new queries page with indexes: on SQLite and on a real PostgreSQL
(`store_engine`, tests/services/store/conftest.py)."""

from __future__ import annotations

import dataclasses

import pytest

from console.core.events import Event, event_to_dict
from console.services.baseline import BaselineError, BaselineStore
from console.services.results import ResultStore, StoreError
from console.services.store import open_store
from tests.services.store.file_store import CPU, NOW, SEEDS, build_baselines, console_run


@pytest.fixture
def store(store_engine):
    with open_store(store_engine.location()) as s:
        yield s


def test_runs_answer_as_the_file_store(store, tmp_path):
    files = ResultStore(tmp_path / "files")
    runs = [console_run(i, node=f"n{i % 2}", label="x'; DROP TABLE runs; --" if i == 1 else None) for i in range(5)]
    for run in runs:
        assert store.runs.save(run) == files.save(run) == run.id
    assert store.runs.ids() == files.ids()
    assert store.runs.list() == files.list()
    for kw in ({"node": "n1"}, {"label": runs[1].label}, {"model": "TINY-llama"}, {"since": NOW + 2}, {"model": "%"}):
        assert store.runs.list(**kw) == files.list(**kw), kw
    assert store.runs.get(runs[3].id[:22]) == files.get(runs[3].id[:22]) == runs[3]
    with pytest.raises(KeyError) as db_err:
        store.runs.get("2026")
    with pytest.raises(KeyError) as file_err:
        files.get("2026")
    assert str(db_err.value) == str(file_err.value)  # "ambiguous id prefix '2026': 5 runs match (...)"
    assert "5 runs match" in str(db_err.value)
    assert store.runs.find_by_fingerprint(runs[2].fingerprint) == runs[2]
    relabelled = dataclasses.replace(runs[0], label="kept")
    assert store.runs.update(relabelled) == runs[0].id and store.runs.get(runs[0].id).label == "kept"
    assert store.runs.delete(runs[4].id[:24]) == runs[4].id and store.runs.count() == 4
    with pytest.raises(KeyError, match="no stored run"):
        store.runs.get(runs[4].id)


def test_add_folds_equal_results_and_gives_a_taken_id_new_hex(store):
    run = console_run(0)
    assert store.runs.add(run).new
    again = store.runs.add(dataclasses.replace(run, id="20261118-000000-other-abcdef", label="again"))
    assert (again.id, again.new) == (run.id, False)  # the same result: stored once, under its first id
    other = console_run(1)
    taken = store.runs.add(dataclasses.replace(other, id=run.id))  # another result, the same id
    assert taken.new and taken.id != run.id and taken.id.rsplit("-", 1)[0] == run.id.rsplit("-", 1)[0]
    assert store.runs.get(taken.id).fingerprint == other.fingerprint


def test_list_runs_pages_newest_first_with_filters(store):
    for i in range(120):
        run = console_run(i, node=f"n{i % 3}", label="nightly" if i % 4 == 0 else None)
        if i % 5 == 0:
            run = dataclasses.replace(run, context={**run.context, "bench_preset": "long-ctx"})
        store.runs.save(run)
    seen, before = [], None
    while True:
        page = store.runs.list_runs(limit=50, before=before)
        seen += page
        if len(page) < 50:
            break
        before = page[-1].id
    assert [r.created for r in seen] == sorted((r.created for r in seen), reverse=True) and len(seen) == 120
    assert [r.id for r in store.runs.iter_runs(page=7)] == [r.id for r in seen]
    picked = store.runs.list_runs(node="n1", since=NOW + 60, limit=500)
    assert [r.created - NOW for r in picked] == [i for i in range(119, 59, -1) if i % 3 == 1]
    assert len(store.runs.list_runs(label="nightly", limit=500)) == 30 == store.runs.count_runs(label="nightly")
    assert {r.context["bench_preset"] for r in store.runs.list_runs(preset="long-ctx", limit=500)} == {"long-ctx"}
    assert store.runs.count_runs(preset="long-ctx") == 24 and store.runs.count_runs(preset="llama-8b") == 120
    with pytest.raises(KeyError, match="no stored run 'gone' to page from"):
        store.runs.list_runs(before="gone")


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "runs_created"),
        ({"node": "n1", "since": NOW}, "runs_node"),
        ({"label": "nightly"}, "runs_label"),
    ],
)
def test_list_queries_use_their_index(store, store_engine, filters, index):
    from console.core.store.queries import run_where

    where = run_where(**filters)
    query = f"SELECT id, doc FROM runs{where.sql()} ORDER BY created DESC, seq DESC LIMIT 50"
    if store_engine.postgresql:
        for i in range(300):  # 30 nodes, a label on 1 run in 30: the planner's statistics pick the index
            store.runs.save(console_run(i, node=f"n{i % 30}", label="nightly" if i % 30 == 0 else None))
        store.db.execute("ANALYZE runs")
        with store.db.transaction():  # the plan for a big table: a small one is read whole and sorted
            store.db.execute("SET LOCAL enable_seqscan = off")
            store.db.execute("SET LOCAL enable_bitmapscan = off")
            plan = store.db.rows("EXPLAIN " + query, where.params)
        text = " ".join(str(row[0]) for row in plan)
        assert f"Index Scan Backward using {index} " in text and "Sort" not in text, text
        return
    plan = store.db.rows("EXPLAIN QUERY PLAN " + query, where.params)
    text = " ".join(str(row[-1]) for row in plan)
    assert f"INDEX {index}" in text and "TEMP B-TREE" not in text, text


def test_import_paths_as_the_file_store(store, tmp_path):
    files = ResultStore(tmp_path / "files")
    paths = [CPU / "bench_result.json", SEEDS / "004_040c923192cb04a5.txt", tmp_path / "missing.json"]
    db_report = store.runs.import_paths(paths, label="imp", now=NOW)
    file_report = files.import_paths(paths, label="imp", now=NOW)
    assert db_report.as_dict() == file_report.as_dict() and db_report.exit_code == 2
    assert store.runs.list() == files.list()
    again = store.runs.import_paths(paths[:2], now=NOW + 5)
    assert again.imported == [] and len(again.duplicates) == len(db_report.imported)


def test_events_read_and_follow_as_the_event_log(store, tmp_path):
    events = [
        Event(NOW + i, "gpu.health" if i % 2 else "node.up", f"n{i % 3}", gpu=i % 4 if i % 2 else None)
        for i in range(30)
    ]
    assert store.events.append(events) == 30
    newest = store.events.read(limit=5)
    assert [e.time - NOW for e in newest] == [29, 28, 27, 26, 25]
    picked = store.events.read(since=NOW + 10, node="n1", kind="gpu", gpu=3)
    assert [event_to_dict(e) for e in picked] == [
        event_to_dict(e)
        for e in sorted(events, key=lambda e: -e.time)
        if e.time >= NOW + 10 and e.node == "n1" and e.kind.startswith("gpu.") and e.gpu == 3
    ] and picked
    follower = store.events.follow()
    assert follower.poll() == []
    with open_store(store.where) as other:  # another console appends (store.where: the file or url)
        other.events.append(Event(NOW + 100, "node.down", "n9", severity="fail"))
    assert [e.node for e in follower.poll()] == ["n9"] and follower.poll() == []


def test_baselines_answer_as_the_baseline_store(store, tmp_path):
    files = build_baselines(tmp_path / "baselines")
    for b in files.list():
        store.baselines.save(b)
    assert store.baselines.list() == files.list() and store.baselines.list("gpu node/7") == files.list("gpu node/7")
    assert store.baselines.get("mi300x-spx", "demo") == files.get("mi300x-spx", "demo")
    with pytest.raises(BaselineError, match=r"no baseline 'nope' for node mi300x-spx \(known: demo\)"):
        store.baselines.get("mi300x-spx", "nope")
    with pytest.raises(BaselineError, match="baseline name '../x'"):
        store.baselines.get("mi300x-spx", "../x")
    assert store.baselines.remove("mi300x-spx", "demo") and not store.baselines.remove("mi300x-spx", "demo")
    assert BaselineStore(tmp_path / "baselines").get("mi300x-spx", "demo")  # the files: untouched


def test_a_store_that_cannot_be_opened_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as err:
        open_store(bad)
    assert str(err.value) == f"cannot open the store {bad}: file is not a database"
    (tmp_path / "dir.sqlite3").mkdir()
    with pytest.raises(StoreError, match=r"dir.sqlite3: it is not a file"):
        open_store(tmp_path / "dir.sqlite3")
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match=r"cannot open the store .*file/store.sqlite3: "):
        open_store(tmp_path / "file" / "store.sqlite3")


def test_schema_is_versioned_and_a_newer_one_is_refused(store_engine):
    where = store_engine.location()
    with open_store(where) as store:
        assert store.db.schema_version() == 3
    with open_store(where) as store:  # opened again: nothing applied twice
        assert store.db.rows("SELECT version, name FROM schema_version ORDER BY version") == [
            (1, "runs, events, baselines, node versions"),
            (2, "watchers, events' origin"),
            (3, "model pulls"),
        ]
        if not store_engine.postgresql:
            assert store.db.rows("PRAGMA journal_mode") == [("wal",)]
        with store.db.transaction():  # a newer console's migration
            store.db.execute("INSERT INTO schema_version VALUES (4, 'from the future', 0)")
    with pytest.raises(StoreError) as err:
        open_store(where)
    assert str(err.value) == (
        f"the store {where} is at schema version 4, newer than this console's (3): update rocm-console"
    )


def test_backup_is_a_store_of_its_own(store, store_engine, tmp_path):
    if store_engine.postgresql:
        with pytest.raises(StoreError, match=r"use pg_dump for a PostgreSQL store"):
            store.backup(tmp_path / "copy.sqlite3")
        return
    store.runs.save(console_run(0))
    store.events.append(Event(NOW, "node.up", "n"))
    copy = store.backup(tmp_path / "backup" / "copy.sqlite3")
    with open_store(copy) as restored:
        assert restored.runs.list() == store.runs.list() and restored.events.count() == 1
