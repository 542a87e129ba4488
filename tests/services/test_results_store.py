"""services/results: the store on disk (ids, atomic files, prefixes, filters) and imports of paths."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.services.results import DATA_DIR_ENV, ResultStore, default_root

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CPU = FIXTURES / "vllm-0.32-cpu"
SEEDS = FIXTURES / "seeds"
NOW = 1_795_000_000.0


@pytest.fixture
def store(tmp_path, monkeypatch) -> ResultStore:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    return ResultStore()


def console_run(node="mi300x-a", created=NOW, label=None, **result):
    data = json.loads((CPU / "bench_result.json").read_text())
    data.update(result)
    return run_from_console(
        {"node": node, "gpu_model": "AMD Instinct MI300X"}, data, {"samples": 2}, label=label, created=created
    )


def test_default_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert default_root() == tmp_path / "results"
    assert ResultStore().root == tmp_path / "results"
    monkeypatch.delenv(DATA_DIR_ENV)
    assert default_root().name == "results" and "rocm-console" in str(default_root())


def test_save_get_list_delete(store):
    run = console_run()
    run_id = store.save(run)
    assert re.fullmatch(r"\d{8}-\d{6}-mi300x-a-[0-9a-f]{6}", run_id) and run_id == run.id
    files = sorted(p.name for p in store.root.iterdir() if p.name not in (".lock", ".index"))
    assert files == [f"{run_id}.json"]  # no temporary file left behind
    assert json.loads((store.root / files[0]).read_text()) == run_to_dict(run)
    assert store.get(run_id) == run
    assert store.get(run_id[:20]) == run  # unique prefix
    assert store.list() == [run]
    assert store.find_by_fingerprint(run.fingerprint) == run
    assert store.find_by_fingerprint("0" * 64) is None
    assert store.save(run) == run_id  # the same run again: one file
    assert len(list(store.root.glob("*.json"))) == 1
    assert store.delete(run_id[:22]) == run_id
    assert store.list() == []
    with pytest.raises(KeyError):
        store.get(run_id)


def test_a_taken_id_gets_new_hex(store):
    first = console_run()
    other = console_run(duration=9.9)
    clash = type(other)(**{**other.__dict__, "id": first.id})
    a = store.save(first)
    b = store.save(clash)
    assert a != b and b.rsplit("-", 1)[0] == a.rsplit("-", 1)[0]
    assert store.get(b).metrics["duration"] == 9.9 and store.get(a).metrics["duration"] != 9.9


def test_ambiguous_and_unknown_ids(store):
    a = store.save(console_run())
    b = store.save(console_run(duration=1.0))
    prefix = os.path.commonprefix([a, b])
    with pytest.raises(KeyError) as err:
        store.get(prefix)
    message = err.value.args[0]
    assert message.startswith(f"ambiguous id prefix {prefix!r}: 2 runs match") and a in message and b in message
    with pytest.raises(KeyError, match="no stored run 'nope'"):
        store.get("nope")
    with pytest.raises(KeyError, match="no stored run"):
        store.get("../etc/passwd")


def test_list_filters(store):
    store.save(console_run(node="a", created=NOW, label="base"))
    store.save(console_run(node="b", created=NOW + 100, label="tuned", duration=3.0))
    store.save(console_run(node="b", created=NOW + 200, model_id="org/Other-Model", duration=4.0))
    assert [r.context["node"] for r in store.list()] == ["a", "b", "b"]
    assert len(store.list(node="b")) == 2
    assert [r.label for r in store.list(label="tuned")] == ["tuned"]
    assert len(store.list(model="other-model")) == 1
    assert len(store.list(model="tiny")) == 2
    assert len(store.list(since=NOW + 50)) == 2


def test_unreadable_stored_file_is_reported_not_fatal(store):
    good = store.save(console_run())
    (store.root / "20260101-000000-x-abcdef.json").write_text("{not json")
    assert [r.id for r in store.list()] == [good]
    assert len(store.errors) == 1 and "20260101-000000-x-abcdef.json" in store.errors[0]
    with pytest.raises(ValueError, match="unreadable stored run"):
        store.get("20260101-000000-x")


# ---------------------------------------------------------------- import


def test_import_seeds_then_reimport_adds_nothing(store, tmp_path):
    report = store.import_paths(
        [SEEDS / "004_040c923192cb04a5.txt", SEEDS / "002_55bd4ff5afc03ea6.txt"],
        label="seeds",
        node="mi300x-a",
        now=NOW,
    )
    assert len(report.imported) == 11 and report.duplicates == [] and report.skipped == []
    assert report.exit_code == 0
    stored = store.list()
    assert len(stored) == 11
    # runs from one file keep their order
    assert [r.setup["max_concurrency"] for r in stored if "004" in r.source] == [
        128,
        256,
        512,
        128,
        256,
        512,
        512,
        512,
        512,
    ]
    assert {r.label for r in stored} == {"seeds"} and {r.context["node"] for r in stored} == {"mi300x-a"}
    assert all(r.source.endswith(".txt") and Path(r.source).is_absolute() for r in stored)
    again = store.import_paths([SEEDS / "004_040c923192cb04a5.txt"], now=NOW + 60)
    assert again.imported == [] and len(again.duplicates) == 9
    assert {d.id for d in again.duplicates} <= {r.id for r in stored}
    assert again.exit_code == 0
    assert len(store.list()) == 11
    # a copy elsewhere is still the same runs
    copy = tmp_path / "elsewhere.log"
    shutil.copy(SEEDS / "004_040c923192cb04a5.txt", copy)
    assert store.import_paths([copy]).imported == []


def test_import_folder_recursively_with_skips(store, tmp_path):
    folder = tmp_path / "runs"
    (folder / "a" / "b").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    shutil.copy(CPU / "bench_result.json", folder / "a" / "b" / "result.json")
    shutil.copy(CPU / "bench_serve_stdout_pty.raw", folder / "a" / "pty.log")
    shutil.copy(CPU / "bench_fail_no_server.raw", folder / "fail.log")
    shutil.copy(CPU / "bench_result.json", folder / ".hidden" / "r.json")
    (folder / "notes.txt").write_text("nothing here\n")
    (folder / "weights.bin").write_bytes(b"\x00\x01" * 100)
    one = json.loads((CPU / "bench_result.json").read_text())
    (folder / "append.jsonl").write_text(
        json.dumps(dict(one, date="20261121-090000")) + "\n" + json.dumps(dict(one, date="20261121-090100")) + "\n"
    )
    report = store.import_paths([folder], now=NOW)
    assert report.files == 6
    assert sorted(Path(r.source).name for r in report.imported) == [
        "append.jsonl",
        "append.jsonl",
        "pty.log",
        "result.json",
    ]
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert reasons["notes.txt"] == "no result block"
    assert reasons["weights.bin"] == "binary file"
    assert reasons["fail.log"].startswith("All requests failed.")
    assert report.exit_code == 0
    assert store.import_paths([folder]).imported == []


def test_nothing_imported_and_unreadable_paths(store, tmp_path):
    report = store.import_paths([CPU / "bench_fail_no_server.raw"])
    assert report.imported == [] and report.exit_code == 1
    (skip,) = report.skipped
    assert skip.part.startswith("block 1") and skip.reason.startswith("All requests failed.")
    report = store.import_paths([tmp_path / "missing.json", CPU / "bench_result.json"])
    assert [u.reason for u in report.unreadable] == ["no such file or folder"]
    assert len(report.imported) == 1  # the import goes on
    assert report.exit_code == 2
    data = report.as_dict()
    assert data["exit_code"] == 2 and data["unreadable"][0]["path"].endswith("missing.json")
    json.dumps(data)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_permission_denied_is_unreadable(store, tmp_path):
    locked = tmp_path / "locked.json"
    shutil.copy(CPU / "bench_result.json", locked)
    locked.chmod(0)
    try:
        report = store.import_paths([locked])
    finally:
        locked.chmod(0o644)
    assert report.unreadable[0].reason == "Permission denied" and report.exit_code == 2


def test_console_run_then_import_of_its_json_is_a_duplicate(store, tmp_path):
    run = console_run()
    store.save(run)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(run.result))
    report = store.import_paths([path])
    assert report.imported == [] and [d.id for d in report.duplicates] == [run.id]
