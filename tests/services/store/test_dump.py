"""dump: the database written back out in today's file layout; today's file classes read the
dump as they read their own files, and a new database built from it holds the same rows."""

from __future__ import annotations

from console.core.events import Event, event_to_dict
from console.services.events import EventLog
from console.services.store import dump, migrate_file_store, open_store
from tests.services.store.file_store import NOW, build_file_store, tree
from tests.services.store.test_migrate import assert_same_as_files


def rows(store) -> dict:
    return {
        table: store.db.rows(f"SELECT * FROM {table} ORDER BY 1")
        for table in ("baselines", "node_versions")  # keyed by content: equal row for row
    } | {
        "runs": store.db.rows(
            "SELECT id, created, node, model, model_fold, label, serve_preset, bench_preset, run_kind, origin, fingerprint, doc FROM runs ORDER BY seq"
        ),
        "events": store.db.rows("SELECT time, kind, node, gpu, instance, severity, doc FROM events ORDER BY seq"),
    }


def test_dump_writes_today_layout_byte_for_byte_and_a_new_store_is_built_from_it(tmp_path, store_engine):
    data = tmp_path / "data"
    build_file_store(data)
    with open_store(store_engine.location("one")) as one:
        migrate_file_store(data, one)
        out = tmp_path / "dump"
        counts = dump(one, out)
        assert counts.line(out) == f"wrote 29 runs, 2 baselines, 68 events, 2 node-versions records to {out}"
        # the files the file store wrote, byte for byte (results, baselines, node versions)
        original, dumped = tree(data), tree(out)
        for name, content in original.items():
            if name.startswith(("results/2", "baselines/", "node-versions/")):
                assert dumped[name] == content, name
        assert_same_as_files(one, out)  # today's classes read the dump as the database holds it
        with open_store(store_engine.location("two")) as two:
            again = migrate_file_store(out, two)
            assert (again.runs, again.baselines, again.events, again.versions) == (29, 2, 68, 2)
            assert rows(two) == rows(one)


def test_a_dump_of_more_events_than_one_log_file_holds_loses_none_on_the_way_back(tmp_path, store_engine):
    with open_store(store_engine.location("one")) as one:
        one.events.append(
            Event(NOW + i, "gpu.health", f"n{i % 7}", gpu=i % 8, message="x" * 200) for i in range(80_000)
        )
        dump(one, tmp_path / "dump")
        files = EventLog(tmp_path / "dump" / "events.jsonl").files()
        assert (
            len(files) == 4 and (tmp_path / "dump" / "events.jsonl.5").is_file()
        )  # 6 files; today's reader: the newest 4
        newest = EventLog(tmp_path / "dump" / "events.jsonl").read(limit=3)
        assert [event_to_dict(e) for e in newest] == [event_to_dict(e) for e in one.events.read(limit=3)]
        with open_store(store_engine.location("two")) as two:
            assert migrate_file_store(tmp_path / "dump", two).events == 80_000
            assert rows(two)["events"] == rows(one)["events"]
