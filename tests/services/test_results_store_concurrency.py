"""Several processes writing one results store at once (two consoles importing the same files,
benchmarks finishing together): the same result is stored once, distinct results all are.

Real processes, started together behind a barrier, each with its own ResultStore object on the
same folder: nothing is shared but the folder, as between two consoles."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.results.build import run_from_console
from console.services.results import ResultStore
from tests.cli.cli_helpers import stored_runs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RESULT = FIXTURES / "vllm-0.32-cpu" / "bench_result.json"
SEEDS = FIXTURES / "seeds"
ROOT = Path(__file__).resolve().parents[2]
WORKERS = 8
NOW = 1_795_000_000.0


def _run(duration: float, created: float):
    data = json.loads(RESULT.read_text())
    data["duration"] = duration  # a different measurement: a different result
    return run_from_console({"node": "n"}, data, None, created=created)


def _import(root: str, paths: list[str], barrier, out) -> None:
    barrier.wait()
    report = ResultStore(root).import_paths(paths)
    out.put((len(report.imported), len(report.duplicates)))


def _save(root: str, duration: float, created: float, barrier, out) -> None:
    barrier.wait()
    saved = ResultStore(root).add(_run(duration, created))
    out.put((saved.id, saved.new))


def _together(target, args_of) -> list:
    ctx = multiprocessing.get_context("spawn")  # nothing inherited but what is passed
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(i), barrier, out)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def _stored(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.glob("*.json"))]


@pytest.mark.timeout(300)
def test_importing_the_same_files_at_once_stores_each_run_once(tmp_path):
    root = tmp_path / "results"
    files = [str(RESULT), str(SEEDS)]
    expected = len(ResultStore(tmp_path / "alone").import_paths(files).imported)
    assert expected >= 2
    results = _together(_import, lambda i: (str(root), files))
    stored = _stored(root)
    assert len(stored) == expected
    assert len({run["fingerprint"] for run in stored}) == expected  # no run twice
    assert sum(n for n, _ in results) == expected  # each stored by exactly one process
    assert all(n + d == expected for n, d in results)  # and every process accounts for every run


@pytest.mark.timeout(300)
def test_the_same_run_stored_by_several_consoles_is_one_run(tmp_path):
    # one benchmark, finished once, stored by eight consoles a second apart (different ids)
    results = _together(_save, lambda i: (str(tmp_path / "r"), 1.5, NOW + i))
    stored = _stored(tmp_path / "r")
    assert len(stored) == 1
    assert [new for _, new in results].count(True) == 1
    assert {run_id for run_id, _ in results} == {stored[0]["id"]}


@pytest.mark.timeout(300)
def test_distinct_runs_finishing_together_are_all_stored(tmp_path):
    # eight different results in the same second on the same node: ids clash, none is lost
    results = _together(_save, lambda i: (str(tmp_path / "r"), 1.0 + i, NOW))
    stored = _stored(tmp_path / "r")
    assert len(stored) == WORKERS and all(new for _, new in results)
    assert sorted(run["metrics"]["duration"] for run in stored) == [1.0 + i for i in range(WORKERS)]
    assert sorted(r["id"] for r in stored) == sorted(run_id for run_id, _ in results)


@pytest.mark.timeout(300)
def test_two_cli_imports_at_once(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "console", "results", "import", str(SEEDS), "--json"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert b"Traceback" not in err, err
        docs.append(json.loads(out))
    stored = stored_runs(tmp_path / "data")  # the CLI stores into the data folder's store
    imported = sum(len(d["imported"]) for d in docs)
    assert imported == len(stored) > 0
    assert len({run.fingerprint for run in stored}) == len(stored)
