"""Model pulls in the store (schema version 3): a version 2 store is brought to version 3
keeping what it held; a pull started through the models service leaves its row (running, then
ok with its bytes); a store that cannot be opened never stops a pull; a dump keeps the pulls
and `store load` brings them back, nothing doubled. Every case on both engines."""

from __future__ import annotations

import json

import pytest

from console.core.events import Event
from console.core.store.pulls import PullRecord, pull_from_dict, pull_id
from console.core.store.schema import MIGRATIONS
from console.services.history import History
from console.services.store import db as db_module
from console.services.store import dump, migrate_file_store, open_store
from tests.services.store.file_store import NOW

HOSTILE = "n'); DROP TABLE pulls; --%_\\"
BIG = 410_200_000_000  # a 405B model's bytes: past 2**31 (PostgreSQL's INTEGER would refuse it)


def pull(node: str = "n1", model: str = "org/m", started: float = NOW, state: str = "ok", **more) -> PullRecord:
    fields = dict(
        bytes=BIG, total_bytes=BIG, files=3, origin="cli@a", ended=started + 60 if state != "running" else None
    )
    fields.update(more)
    return PullRecord(pull_id(node, model, started), node, model, started, state, **fields)


def indexes(store) -> set[str]:
    if store.db.dialect == "sqlite":
        return {r[1] for r in store.db.rows("PRAGMA index_list(pulls)")}
    return {r[0] for r in store.db.rows("SELECT indexname FROM pg_indexes WHERE tablename = 'pulls'")}


def test_a_version_2_store_is_brought_to_version_3_keeping_what_it_held(store_engine, monkeypatch):
    where = store_engine.location()
    with monkeypatch.context() as old_console:  # the console before pulls: migrations 1 and 2 only
        old_console.setattr(db_module, "MIGRATIONS", MIGRATIONS[:2])
        old_console.setattr(db_module, "SCHEMA_VERSION", 2)
        with open_store(where) as old:
            assert old.db.schema_version() == 2
            old.events.append(Event(NOW, "node.up", "n1", message="from version 2", origin="watch@a"))
            with pytest.raises(Exception, match="pulls"):  # no such table yet
                old.db.rows("SELECT * FROM pulls")
    with open_store(where) as store:
        assert store.db.schema_version() == 3
        assert store.db.rows("SELECT version, name FROM schema_version ORDER BY version")[-1] == (3, "model pulls")
        [event] = store.events.read()
        assert (event.message, event.origin) == ("from version 2", "watch@a")
        assert {"pulls_started", "pulls_node", "pulls_model"} <= indexes(store)
        assert store.pulls.list() == []
        assert store.pulls.record(pull())
        assert store.pulls.list()[0].bytes == BIG


def test_a_pull_row_is_updated_while_running_and_final_once_ended(store_engine):
    with open_store(store_engine.location()) as store:
        running = pull(state="running", bytes=10, files=None)
        assert store.pulls.record(running)
        done = pull(state="ok", origin="tui@b", message="into /hub")
        assert store.pulls.record(done)
        got = store.pulls.get(running.id)
        assert (got.state, got.bytes, got.files, got.message) == ("ok", BIG, 3, "into /hub")
        assert got.origin == "cli@a"  # who started it stays
        assert not store.pulls.record(running)  # a late follower's "running" never turns it back
        assert store.pulls.get(running.id).state == "ok"
        assert store.pulls.count() == 1


def test_pulls_list_newest_first_with_filters_that_are_only_parameters(store_engine):
    with open_store(store_engine.location()) as store:
        for i in range(6):
            store.pulls.record(pull(node=f"n{i % 2}", model=f"org/m{i % 3}", started=NOW + i))
        store.pulls.record(pull(node=HOSTILE, model=HOSTILE, started=NOW + 10, state="failed", message="gated"))
        assert [p.started for p in store.pulls.list()] == [NOW + 10, *(NOW + i for i in range(5, -1, -1))]
        assert [p.started for p in store.pulls.list(node="n1")] == [NOW + 5, NOW + 3, NOW + 1]
        assert [p.started for p in store.pulls.list(node=["n0", "n1"], limit=2)] == [NOW + 5, NOW + 4]
        assert [p.started for p in store.pulls.list(model="org/m0", since=NOW + 1)] == [NOW + 3]
        [hostile] = store.pulls.list(node=HOSTILE)
        assert (hostile.model, hostile.state, hostile.message) == (HOSTILE, "failed", "gated")
        assert store.pulls.list(node="n%") == [] and store.pulls.count(node=[]) == 0
        assert store.pulls.count() == 7


@pytest.mark.parametrize(
    ("filters", "index"),
    [({}, "pulls_started"), ({"node": "n1", "since": NOW}, "pulls_node"), ({"model": "org/m3"}, "pulls_model")],
)
def test_the_newest_pulls_are_read_from_their_index_without_a_sort(store_engine, filters, index):
    from console.core.store.pulls import pull_where

    where = pull_where(**filters)
    query = f"SELECT id FROM pulls{where.sql()} ORDER BY started DESC, id DESC LIMIT 50"
    with open_store(store_engine.location()) as store:
        if not store_engine.postgresql:
            plan = store.db.rows("EXPLAIN QUERY PLAN " + query, where.params)
            text = " ".join(str(row[-1]) for row in plan)
            assert f"INDEX {index}" in text and "TEMP B-TREE" not in text, text
            return
        for i in range(300):  # the planner's statistics pick the index on a table this size
            store.pulls.record(pull(node=f"n{i % 30}", model=f"org/m{i % 30}", started=NOW + i))
        store.db.execute("ANALYZE pulls")
        with store.db.transaction():
            store.db.execute("SET LOCAL enable_seqscan = off")
            store.db.execute("SET LOCAL enable_bitmapscan = off")
            plan = store.db.rows("EXPLAIN " + query, where.params)
        text = " ".join(str(row[0]) for row in plan)
        assert f"Index Only Scan Backward using {index} " in text or f"Index Scan Backward using {index} " in text
        assert "Sort" not in text, text


def test_a_dump_keeps_the_pulls_and_load_brings_them_back_nothing_doubled(tmp_path, store_engine):
    with open_store(store_engine.location("one")) as one:
        one.events.append(Event(NOW, "node.up", "n1"))
        records = [pull(started=NOW + i, state=("ok", "failed", "cancelled", "running")[i % 4]) for i in range(7)]
        for r in records:
            one.pulls.record(r)
        out = tmp_path / "dump"
        counts = dump(one, out, page=3)  # pages smaller than the pulls: the keyset paging loses none
        assert counts.pulls == 7 and counts.line(out).endswith(f"0 node-versions records, 7 pulls to {out}")
        lines = (out / "pulls.jsonl").read_text().splitlines()
        assert [pull_from_dict(json.loads(line)) for line in lines] == records  # oldest first, whole
        with open_store(store_engine.location("two")) as two:
            moved = migrate_file_store(out, two)
            assert (moved.pulls, moved.events) == (7, 1) and moved.line().endswith(", 7 pulls")
            assert two.pulls.list() == one.pulls.list()
            again = migrate_file_store(out, two)
            assert again.pulls == 0 and again.present["pulls"] == 7 and two.pulls.count() == 7


def test_a_dump_line_that_is_not_a_pull_is_named_and_the_rest_load(tmp_path, store_engine):
    good = pull()
    (tmp_path / "pulls.jsonl").write_text(
        json.dumps(good.to_dict())
        + "\n"
        + json.dumps({**good.to_dict(), "id": "x", "state": "maybe"})
        + "\nnot json\n"
        + json.dumps({**good.to_dict(), "id": "y", "bytes": -1})
        + "\n"
    )
    with open_store(store_engine.location()) as store:
        counts = migrate_file_store(tmp_path, store)
    assert counts.pulls == 1
    where = tmp_path / "pulls.jsonl"
    bad, garbled, negative = counts.unreadable
    assert bad == f"{where}:2: not a pull (state: 'maybe' is not one of running, ok, failed, cancelled)"
    assert garbled.startswith(f"{where}:3: not a pull (")
    assert negative == f"{where}:4: not a pull (bytes: not a time or a count)"


# ---------------------------------------------------------------- through the models service


def _history(store_engine, data_dir) -> History:
    url = store_engine.location() if store_engine.postgresql else None
    return History(url, data_dir, origin="cli@test")


async def test_a_pull_through_the_service_leaves_its_row_running_then_ok(store_engine, sim_node, tmp_path, monkeypatch):
    from console.services.models import follow_pull, node_pulls, record_pull, start_pull
    from console.services.transports import TransportPool

    monkeypatch.setenv("ROCM_CONSOLE_SIM_PULL_RATE", "2e10")  # 9.1 GB: under a second
    model = "amd/Llama-3.1-8B-Instruct-FP8-KV"
    node = sim_node("n1")
    history = _history(store_engine, tmp_path / "data")
    pool = TransportPool()
    try:
        status = await start_pull(pool, node, model, history=history)
        assert status.state == "running" and status.started is not None
        [row] = history.pulls.list()
        assert (row.node, row.model, row.state, row.origin, row.ended) == ("n1", model, "running", "cli@test", None)
        assert 9.08e9 < row.total_bytes < 9.1e9  # two shards and the small files, on the hub
        final = await follow_pull(pool, node, model, lambda s: None, interval=0.2, timeout=60, history=history)
    finally:
        await pool.close()
    assert final.state == "done"
    [row] = history.pulls.list()
    assert row.id == pull_id("n1", model, status.started)  # the same row, updated at the end
    assert (row.state, row.bytes, row.total_bytes) == ("ok", final.total_bytes, final.total_bytes)
    assert row.files and row.files > 1 and row.ended is not None and row.ended >= row.started
    assert row.message == f"into {final.path}"
    # read again (the TUI's models screen reads every 2 s): no second write of an unchanged pull
    writes = []
    real = history.pulls.record
    monkeypatch.setattr(history.pulls, "record", lambda rec: writes.append(rec) or real(rec))
    pool = TransportPool()
    try:
        [seen] = await node_pulls(pool, node, history=history)
    finally:
        await pool.close()
    assert seen.state == "done" and writes == [] and not record_pull(history, final)
    history.close()


async def test_a_store_that_cannot_be_opened_never_stops_a_pull(sim_node, tmp_path, monkeypatch):
    from console.services.models import follow_pull, start_pull
    from console.services.transports import TransportPool

    monkeypatch.setenv("ROCM_CONSOLE_SIM_PULL_RATE", "2e10")
    data = tmp_path / "data"
    (data / "store.sqlite3").mkdir(parents=True)  # a folder where the store's file would be
    history = History(None, data, origin="cli@test")
    node = sim_node("n1")
    pool = TransportPool()
    try:
        status = await start_pull(pool, node, "amd/Llama-3.1-8B-Instruct-FP8-KV", history=history)
        final = await follow_pull(pool, node, status.model, lambda s: None, interval=0.2, timeout=60, history=history)
    finally:
        await pool.close()
    assert final.state == "done" and final.bytes == final.total_bytes
    assert history.problem is not None and "store.sqlite3: it is not a file" in history.problem
