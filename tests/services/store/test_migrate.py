"""migrate_file_store: a file store written by today's code moves into the database with every
record, every id and every value; the files stay; a second run, or a run restarted after a
SIGKILL, stores what is missing and nothing twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console.core.events import event_to_dict
from console.services.baseline import BaselineStore
from console.services.events import EventLog
from console.services.results import ResultStore
from console.services.store import migrate_file_store, open_store
from tests.services.store.file_store import build_file_store, tree

ROOT = Path(__file__).resolve().parents[3]


def assert_same_as_files(store, data: Path) -> None:
    """Every record of the file store in `data`, read by today's code, equals the database's."""
    files = ResultStore(data / "results")
    ids = files.ids()
    assert sorted(store.runs.ids()) == ids
    for run_id in ids:
        on_disk = json.loads((files.root / f"{run_id}.json").read_text())
        assert store.runs.document(run_id) == on_disk, run_id  # the whole dict, every key
        assert store.runs.get(run_id) == files.get(run_id), run_id  # and the record read from it
    # the fingerprint column holds the run's own fingerprint (the file store's dedupe key)
    assert store.runs.fingerprints() == {r.fingerprint: r.id for r in files.list()}
    assert store.runs.list() == files.list()  # oldest first, an import's runs in file order
    baselines = BaselineStore(data / "baselines")
    assert [(b.node, b.name) for b in store.baselines.list()] == [(b.node, b.name) for b in baselines.list()]
    for b in baselines.list():
        assert store.baselines.get(b.node, b.name) == b
        assert json.loads(Path(b.path).read_text()) in store.baselines.documents()
    for path in sorted((data / "node-versions").glob("*.json")):
        doc = json.loads(path.read_text())
        assert store.versions.read(doc["versions"]["node"]) == doc
    log = EventLog(data / "events.jsonl", keep=10)
    assert [event_to_dict(e) for e in store.events.read()] == [event_to_dict(e) for e in log.read()]


def test_migration_moves_every_record_with_every_value_and_leaves_the_files(tmp_path, store_engine):
    data = tmp_path / "data"
    build_file_store(data)
    before = tree(data)
    with open_store(store_engine.location()) as store:
        counts = migrate_file_store(data, store)
        assert counts.line() == "moved 29 runs, 2 baselines, 68 events, 2 node-versions records"
        assert counts.unreadable == [] and counts.bad_event_lines == 0
        assert_same_as_files(store, data)
        energy = [r for r in store.runs.list() if r.energy is not None and r.telemetry is not None]
        assert energy and all(r.energy_j is not None for r in energy)  # the demo's runs keep their energy
        assert {r.context["run_kind"] for r in store.runs.list()} >= {None, "latency", "throughput", "accuracy"}
        assert len(store.events.read(node="node-9", kind="node.down")) == 2  # equal events: both kept

        again = migrate_file_store(data, store)
        assert again.line() == "moved 0 runs, 0 baselines, 0 events, 0 node-versions records (101 already in the store)"
        assert_same_as_files(store, data)
    assert tree(data) == before  # the way back: the old files as they were


def test_unreadable_files_are_named_and_left_in_place(tmp_path, store_engine):
    data = tmp_path / "data"
    build_file_store(data)
    (data / "results" / "broken-run.json").write_text("{not json")
    (data / "results" / "20261118-000000-x-abcdef.json").write_text(
        '{"id": "x", "created": "soon", "origin": "import"}'
    )
    (data / "baselines" / "n").mkdir()
    (data / "baselines" / "n" / "b.json").write_text('{"format": "other"}')
    with (data / "events.jsonl").open("a") as fh:
        fh.write('{"time": 1e300, "kind": "node.up"}\nnot an event\n')
    with open_store(store_engine.location()) as store:
        counts = migrate_file_store(data, store)
        assert counts.runs == 29 and counts.events == 68 and counts.bad_event_lines == 2
        shown = "\n".join(counts.unreadable)
        assert "broken-run.json" in shown and "20261118-000000-x-abcdef.json: unreadable stored run" in shown
        assert "'created' is a string, not a number" in shown and "b.json: not a baseline file" in shown
        assert counts.line().endswith("; 3 unreadable files left in place; 2 event lines that are not events skipped")
    assert (data / "results" / "broken-run.json").exists()


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from console.services.store import migrate_file_store, open_store
    from console.services.store.db import Database

    data, db, table, after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    real = Database.execute
    calls = [0]

    def counting(self, sql, params=()):
        if sql.startswith(f"INSERT INTO {table} "):
            calls[0] += 1
            if calls[0] > after:  # in the middle of a batch's transaction: killed, no cleanup
                os.kill(os.getpid(), signal.SIGKILL)
        return real(self, sql, params)

    real_many = Database.executemany

    def counting_many(self, sql, rows):  # events are written a batch per statement
        if sql.startswith(f"INSERT INTO {table} "):
            calls[0] += len(rows)
            if calls[0] > after:  # this batch's transaction is open: killed, no cleanup
                os.kill(os.getpid(), signal.SIGKILL)
        return real_many(self, sql, rows)

    Database.execute = counting
    Database.executemany = counting_many
    migrate_file_store(data, open_store(db), batch=7)
    """
)


@pytest.mark.parametrize("table", ["runs", "events"])
def test_a_migration_killed_midway_finishes_on_restart_with_nothing_lost_or_doubled(tmp_path, table, store_engine):
    data = tmp_path / "data"
    build_file_store(data, extra_console_runs=60, n_events=300, event_bytes=1 << 20)
    db = store_engine.location()  # the child inherits PGPASSWORD
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), str(db), table, "30"], cwd=ROOT, capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    with open_store(db) as store:
        half = (store.runs.count(), store.events.count())
        # killed at the 31st insert: 4 batches of 7 committed, the 5th's 3 rows rolled back
        assert half == ((28, 0) if table == "runs" else (89, 28))
        counts = migrate_file_store(data, store)
        assert counts.present["runs"] == half[0] and counts.present["events"] == half[1]
        assert store.runs.count() == 89 and store.events.count() == 300 + 30 + 2  # every line of the log
        assert_same_as_files(store, data)
