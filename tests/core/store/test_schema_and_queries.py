"""The store's pure parts: ordered migrations rendered per dialect, filters whose values are
only ever parameters, rows that keep a record whole."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.core.events import Event, event_to_dict
from console.core.store.queries import event_where, run_where
from console.core.store.rows import event_from_doc, event_row, migrated_event_uid, run_from_doc, run_row
from console.core.store.schema import MIGRATIONS, SCHEMA_VERSION, statements, version_table
from tests.core.results.results_helpers import make_run

HOSTILE = "n'); DROP TABLE runs; --%_\\"


def test_migrations_are_ordered_and_render_for_both_dialects():
    versions = [m.version for m in MIGRATIONS]
    assert versions == list(range(1, len(versions) + 1)) and SCHEMA_VERSION == versions[-1]
    lite, pg = statements(MIGRATIONS[0], "sqlite"), statements(MIGRATIONS[0], "postgresql")
    assert "INTEGER PRIMARY KEY AUTOINCREMENT" in lite[0] and "GENERATED ALWAYS AS IDENTITY" in pg[0]
    assert "DOUBLE PRECISION" in pg[0] and "REAL" not in pg[0]  # PostgreSQL's REAL is 4 bytes
    with pytest.raises(ValueError, match="unknown SQL dialect 'oracle'"):
        statements(MIGRATIONS[0], "oracle")
    conn = sqlite3.connect(":memory:")  # the SQLite text is valid SQLite
    conn.execute(version_table("sqlite"))
    for sql in lite:
        conn.execute(sql)


def test_filter_values_are_parameters_never_text():
    where = run_where(node=HOSTILE, model=HOSTILE, label=HOSTILE, preset=HOSTILE, since=5.0, before=(7.0, 3))
    assert HOSTILE not in where.sql() and "DROP" not in where.sql()
    assert where.params[0] == HOSTILE and where.params[1] == HOSTILE  # node, label
    assert where.params[2] == "%n'); drop table runs; --\\%\\_\\\\%"  # LIKE wildcards escaped, folded
    events = event_where(node=HOSTILE, kind="gpu", since=1.0, gpu=2)
    assert HOSTILE not in events.sql() and "gpu.health" in events.params and "node.up" not in events.params
    assert event_where(kind="gpu.xid").params == ["gpu.xid"]


def test_a_run_row_keeps_the_whole_run():
    run = make_run("20261118-000000-n-abcdef", {"output_throughput": 10.0}, label="l", fingerprint="f" * 64)
    row = run_row(run)
    assert row["fingerprint"] == "f" * 64 and row["model_fold"] == "org/m" and row["node"] is None
    assert run_from_doc(row["doc"]) == run
    assert run_row(run, {"id": run.id, "extra": 1})["doc"] == json.dumps(
        {"id": run.id, "extra": 1}, separators=(",", ":")
    )
    assert run_row(make_run("x", {}))["fingerprint"] is None  # never a duplicate of anything


def test_event_rows_and_migrated_uids():
    event = Event(1.23456, "gpu.ecc", "n", gpu=1, details={"count": 3})
    row = event_row(event, "u1")
    assert row["time"] == 1.235 and event_to_dict(event_from_doc(row["doc"])) == event_to_dict(event)
    doc = event_to_dict(event)
    assert migrated_event_uid(doc, 1) == migrated_event_uid(dict(reversed(doc.items())), 1)
    assert migrated_event_uid(doc, 1) != migrated_event_uid(doc, 2)  # equal events twice: two rows
