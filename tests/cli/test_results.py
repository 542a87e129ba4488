"""`rocm-console results list|show|compare|export|import` as a user runs it."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from tests.cli.cli_helpers import stored_runs

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CPU = FIXTURES / "vllm-0.32-cpu"
SEED_004 = FIXTURES / "seeds" / "004_040c923192cb04a5.txt"
SEED_002 = FIXTURES / "seeds" / "002_55bd4ff5afc03ea6.txt"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["results", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def imported_ids(capsys, *paths: str) -> list[str]:
    code, out, _ = cli(capsys, "import", *paths, "--json")
    assert code == 0
    return [r["id"] for r in json.loads(out)["imported"]]


def test_import_then_reimport(capsys, data_dir):
    code, out, err = cli(capsys, "import", str(SEED_004), str(SEED_002), "--label", "seeds")
    assert code == 0, err
    assert out.count("imported  ") == 11
    assert out.strip().splitlines()[-1].startswith("11 imported, 0 already stored, 0 skipped, 0 unreadable")
    assert len(stored_runs(data_dir)) == 11
    code, out, _ = cli(capsys, "import", str(SEED_004), "--json")
    report = json.loads(out)
    assert report["imported"] == [] and len(report["duplicates"]) == 9 and code == 0
    assert len(stored_runs(data_dir)) == 11


def test_import_exit_codes(capsys, tmp_path):
    code, out, err = cli(capsys, "import", str(CPU / "bench_fail_no_server.raw"))
    assert (
        code == 1 and one_line(err) == f"rocm-console: no benchmark result found in {CPU / 'bench_fail_no_server.raw'}"
    )
    assert "skipped" in out and "All requests failed." in out
    code, out, err = cli(capsys, "import", str(tmp_path / "nope.json"))
    assert code == 2
    assert one_line(err) == f"rocm-console: {tmp_path / 'nope.json'}: no such file or folder"
    code, out, err = cli(capsys, "import", str(tmp_path / "nope.json"), str(CPU / "bench_result.json"), "--json")
    assert code == 2 and len(json.loads(out)["imported"]) == 1


def test_list_and_show(capsys):
    ids = imported_ids(capsys, str(SEED_004), "--node", "mi300x-a", "--label", "seed004")
    imported_ids(capsys, str(CPU / "bench_result.json"))
    code, out, _ = cli(capsys, "list")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["ID", "DATE", "NODE", "MODEL"]
    assert len(lines) == 11
    first = next(line for line in lines if line.startswith(ids[0]))
    assert "mi300x-a" in first and "Llama-3.1-70B-Instruct" in first and "sharegpt c128 n1024" in first
    assert "1998.36" in first and "804.28" in first and "33.46" in first
    code, out, _ = cli(capsys, "list", "--node", "mi300x-a", "--json")
    runs = json.loads(out)["runs"]
    assert [r["id"] for r in runs] == ids[::-1]  # newest first (one import: the last part is the newest)
    code, out, _ = cli(capsys, "list", "--label", "nope")
    assert code == 0 and out.startswith("no stored results match")
    code, out, _ = cli(capsys, "show", ids[1])
    assert code == 0
    assert "Output token throughput (tok/s):         2269.09" in out
    assert "max_concurrency  256" in out and "004_040c923192cb04a5.txt (lines 37-57)" in out
    code, out, _ = cli(capsys, "show", ids[1], "--json")
    data = json.loads(out)
    assert data["id"] == ids[1] and data["metrics"]["p99_itl_ms"] == 1180.43 and data["result"] is None


def test_bad_ids_are_one_line_and_exit_2(capsys):
    imported_ids(capsys, str(SEED_004))
    code, _, err = cli(capsys, "show", "2")
    assert code == 2
    assert "ambiguous id prefix '2': 9 runs match" in one_line(err)
    code, _, err = cli(capsys, "compare", "zzz", "yyy")
    assert code == 2 and one_line(err) == "rocm-console: no stored run 'zzz' (results list shows the ids)"


def test_compare_with_deltas_and_reference(capsys):
    ids = imported_ids(capsys, str(SEED_004))
    code, out, _ = cli(capsys, "compare", ids[0], ids[1])
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("Output token throughput"))
    assert "1998.36" in row and "2269.09 (+270.73 +13.5%)" in row
    code, out, _ = cli(capsys, "compare", ids[0], ids[1], "--json")
    rows = {r["key"]: r for r in json.loads(out)["rows"] if r["section"] == "metric"}
    assert rows["median_ttft_ms"]["delta"][1] == pytest.approx(1455.22 - 804.28)
    code, _, err = cli(capsys, "compare", ids[0])
    assert code == 2 and "two or more runs" in one_line(err)
    code, out, _ = cli(capsys, "compare", ids[0], "--reference")
    assert code == 0
    assert "ref:seed004-bf16-tp4-c128" in out and "(not verified: gpu, tp)" in out
    row = next(line for line in out.splitlines() if line.startswith("Output token throughput"))
    assert "1998.36 (+0.00 +0.0%)" in row and "1992.04 (-6.32 -0.3%)" in row
    code, out, _ = cli(capsys, "compare", ids[0], "--reference", "--json")
    doc = json.loads(out)
    assert [r["id"] for r in doc["references"]] == ["seed004-bf16-tp4-c128", "seed004-bf16-tp4-seqs4096-c128"]


def test_export_formats(capsys, tmp_path):
    ids = imported_ids(capsys, str(SEED_004), str(CPU / "bench_result.json"))
    code, out, _ = cli(capsys, "export", ids[0], ids[-1], "--format", "csv")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows) == 3 and len({len(r) for r in rows}) == 1
    assert dict(zip(rows[0], rows[1]))["output_throughput"] == "1998.36"
    target = tmp_path / "out.md"
    code, out, err = cli(capsys, "export", ids[0], ids[1], "--format", "md", "--output", str(target))
    assert code == 0 and out == "" and "2 run(s) written" in err
    assert "| Output token throughput (tok/s) | 1998.36 | 2269.09 | +270.73 (+13.5%) |" in target.read_text()
    code, out, _ = cli(capsys, "export", "--all", "--format", "json")
    assert len(json.loads(out)["runs"]) == 10
    code, _, err = cli(capsys, "export", "--format", "json")
    assert code == 2 and "export needs run ids" in one_line(err)


def test_results_needs_no_profile_end_to_end(tmp_path):
    env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    proc = subprocess.run(
        [sys.executable, "-m", "console", "results", "import", str(SEED_004), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["imported"]) == 9
    proc = subprocess.run(
        [sys.executable, "-m", "console", "results", "import", str(tmp_path / "missing")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr


def stored_failed_run() -> str:
    """The CPU client's result JSON as a run where every request failed (a 400 for each), stored
    as the console stores what it ran (an import skips such a file)."""
    from console.core.results.build import run_from_console
    from console.services.store import open_store

    data = json.loads((CPU / "bench_result.json").read_text())
    data.update(date="20261121-080000", completed=0, failed=50, total_output_tokens=0, output_throughput=0.0)
    for key in list(data):
        if key.endswith("_ms") or key in ("request_throughput", "total_token_throughput"):
            data[key] = [] if isinstance(data[key], list) else 0.0
    with open_store(Path(os.environ["ROCM_CONSOLE_DATA_DIR"]) / "store.sqlite3") as store:
        return store.runs.save(run_from_console({"node": "cpu-1"}, data))


def test_failed_run_is_marked_and_left_out_of_compare(capsys, tmp_path):
    """Issue U: 0 of 50 succeeded is a failed run, never a row of zeros nor the best latency."""
    good = imported_ids(capsys, str(SEED_004))
    bad = stored_failed_run()
    code, out, _ = cli(capsys, "list")
    line = next(x for x in out.splitlines() if x.startswith(bad))
    assert "FAILED 0/50" in line and "—" in line and " 0.00" not in line
    assert "FAILED" not in next(x for x in out.splitlines() if x.startswith(good[0]))
    code, out, _ = cli(capsys, "list", "--json")
    status = {r["id"]: (r["status"], r["failure"]) for r in json.loads(out)["runs"]}
    assert status[bad] == ("failed", "0 of 50 requests succeeded") and status[good[0]] == ("ok", None)

    code, out, err = cli(capsys, "compare", good[0], good[2], bad)
    assert code == 0
    assert f"left out 1 failed run ({bad})" in err and "--include-failed" in err
    assert bad not in out
    code, out, err = cli(capsys, "compare", good[0], bad)
    assert code == 2 and "two or more runs" in err.strip().splitlines()[-1]
    code, out, err = cli(capsys, "compare", good[0], bad, "--include-failed", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["runs"] == [good[0], bad] and doc["left_out_failed"] == []


def test_compare_warns_when_workloads_differ(capsys):
    """Issue U: one line naming the fields that differ (here the concurrency and the prompts)."""
    ids = imported_ids(capsys, str(SEED_004))
    code, out, _ = cli(capsys, "compare", ids[0], ids[1])
    assert code == 0
    warnings = [x for x in out.splitlines() if x.startswith("warning:")]
    assert warnings == ["warning: workloads differ: concurrency 128 vs 256"]
    code, out, _ = cli(capsys, "compare", ids[0], ids[1], "--json")
    assert json.loads(out)["workload_warning"] == "workloads differ: concurrency 128 vs 256"


def test_list_all_streams_page_by_page_with_one_head(capsys, monkeypatch):
    """--all reads and prints a page at a time (here 4 runs): one table, its head once, newest
    first, the same runs as --json and as the newest page."""
    from console.cli import results

    ids = imported_ids(capsys, str(SEED_004), str(SEED_002))
    monkeypatch.setattr(results, "STREAM_PAGE", 4)
    code, out, err = cli(capsys, "list", "--all")
    lines = out.splitlines()
    assert code == 0 and err == "" and len(lines) == 1 + len(ids)
    assert lines[0].startswith("ID ") and sum(ln.startswith("ID ") for ln in lines) == 1
    shown = [ln.split()[0] for ln in lines[1:]]
    assert sorted(shown) == sorted(ids)
    code, out, _ = cli(capsys, "list", "--all", "--json")
    assert [r["id"] for r in json.loads(out)["runs"]] == shown
    code, out, err = cli(capsys, "list", "--limit", "5", "--json")
    assert [r["id"] for r in json.loads(out)["runs"]] == shown[:5]
    assert one_line(err) == "rocm-console: the newest 5 runs shown; --limit N shows more, --all every one"
