"""`results export --all` streams: the stored runs are read a page at a time (never the store's
whole list) and written as they come, to stdout or a new file, byte for byte what the
whole-list export wrote for the same runs (oldest first, in run_order)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import console.cli.results as results_cli
import console.core.results.export as export
from console.core.bench.result import result_metric_keys
from console.core.results.compare import compare_table
from console.core.results.display import format_value, run_date, run_summary
from console.core.results.ids import run_order
from console.core.results.record import CONTEXT_KEYS, FORMAT, SETUP_KEYS, StoredRun, run_from_dict, run_to_dict
from console.core.text import json_safe, printable
from console.services.store import open_store
from console.services.store.runs import RunTable
from tests.core.results.results_helpers import ROOT, make_run

from .test_results import cli

DEMO = [run_from_dict(json.loads(p.read_text())) for p in sorted((ROOT / "profiles/demo-results").glob("*.json"))]

# ---------------------------------------------------------------- the whole-list export, as it was
# (console/core/results/export.py before it streamed): the oracle the streamed bytes must equal.


def old_json(runs: Sequence[StoredRun]) -> str:
    doc = {"format": FORMAT, "runs": [run_to_dict(r) for r in runs]}
    return json_safe(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


def old_csv(runs: Sequence[StoredRun]) -> str:
    setup_keys: list[str] = list(SETUP_KEYS)
    for run in runs:
        for key in run.setup:
            if key not in setup_keys:
                setup_keys.append(key)
    union: dict[str, float] = {}
    for run in runs:
        for key in run.metrics:
            union.setdefault(key, 1.0)
    metric_keys = result_metric_keys(union)
    context = tuple(CONTEXT_KEYS)
    taken = set(export._CSV_HEAD) | set(context)
    setup_cols = [(k, f"setup_{k}" if k in taken else k) for k in setup_keys]
    taken |= {c for _, c in setup_cols}
    metric_cols = [(k, f"metric_{k}" if k in taken else k) for k in metric_keys]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    head = [*export._CSV_HEAD, *context, *(c for _, c in setup_cols), *(c for _, c in metric_cols), *export._CSV_TRUTH]
    writer.writerow(head)
    cell = export._csv_cell
    for run in runs:
        created = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(run.created))
        first = [run.id, run_date(run), created, run.origin, run.label, run.source, run.context.get("source_part")]
        row = [cell(v) for v in first] + [cell(run.context.get(k)) for k in context]
        row += [cell(run.setup.get(k)) for k, _ in setup_cols] + [cell(run.metrics.get(k)) for k, _ in metric_cols]
        writer.writerow(row + [cell(v) for v in export.truth_cells(run)])
    return buf.getvalue()


def _old_table(head, rows, align_right_from=1) -> list[str]:
    md = export._md_cell
    lines = ["| " + " | ".join(md(h) for h in head) + " |"]
    lines.append("|" + "|".join("---:" if i >= align_right_from else "---" for i in range(len(head))) + "|")
    return lines + ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]


def old_markdown(runs: Sequence[StoredRun], title: str | None = "Benchmark results") -> str:
    lines: list[str] = [f"# {title}", ""] if title else []
    if not runs:
        return "\n".join(lines + ["No runs."]) + "\n"
    head = ["Run", "Date", "Node", "GPU", "Partition", "Model", "Setup", "Label", "Source"]
    body = []
    for run in runs:
        s = run_summary(run)
        body.append([run.id, s["date"], s["node"] or "-", run.context.get("gpu_model") or "-", s["partition"] or "-",
                     run.setup.get("model") or "-", s["setup"], run.label or "-", run.source or "-"])  # fmt: skip
    lines += _old_table(head, body, align_right_from=len(head)) + [""]
    rows = [r for r in compare_table(runs) if r["section"] in ("metric", "energy")]
    head = ["Metric", runs[0].id]
    for run in runs[1:]:
        head += [run.id, "Δ vs first"]
    body = []
    for row in rows:
        cells = [row["label"], format_value(row["key"], row["values"][0])]
        for i in range(1, len(runs)):
            delta = export._delta_text(row["key"], row["delta"][i], row["delta_pct"][i]) or "-"
            cells += [format_value(row["key"], row["values"][i]), delta]
        body.append(cells)
    return "\n".join(lines + _old_table(head, body)) + "\n"


OLD = {"json": old_json, "csv": old_csv, "md": old_markdown}
NEW = {"json": export.export_json, "csv": export.export_csv, "md": export.export_markdown}

# ---------------------------------------------------------------- runs


def varied_runs() -> list[StoredRun]:
    """Runs that differ in every way the columns depend on: metric keys (one only late), setup
    keys, energy and client checks (the demo's), a cold/warm prefix cache, NaN and infinity,
    hostile text (escapes, a colour code, bidi, a pipe, a newline); four stored at the same
    second from one file whose parts' stored order is not run_order's."""
    t0 = 1_795_000_000.0
    runs = [dataclasses.replace(r, created=t0 + 10 * i) for i, r in enumerate(DEMO)]
    for i in range(8):
        metrics = {"completed": 10.0 + i, "output_throughput": 100.0 * (i + 1), "mean_ttft_ms": 50.0 - i}
        if i == 3:
            metrics["mean_ttft_ms"] = math.nan
        if i == 6:
            metrics["p99.9_itl_ms"] = math.inf  # a metric only a late run has: a column for every row
        setup = {"model": f"org/M-{i}", "dataset": "random"} | ({"extra_knob": i} if i % 3 == 0 else {})
        label = ["plain", "with | pipe", "\x1b[31mred\x1b[0m \x1b]52;c;x\x07", "bidi \u202e txt\nnext", None][i % 5]
        run = make_run(f"r{i:02d}", metrics, setup=setup, label=label)
        runs.append(dataclasses.replace(run, created=t0 + 100 + i, source=f"/runs/f{i}.json"))
    runs[-1] = dataclasses.replace(runs[-1], prefix_cache={"hit_pct": 42.0, "cold": True})
    runs[-2] = dataclasses.replace(runs[-2], prefix_cache={"hit_pct": 0.0, "cold": True})
    for part in (3, 10, 1, 2):  # stored in this order; run_order: part 1, 2, 3, 10
        run = make_run(f"same-{part}", {"completed": float(part), "output_throughput": 7.0 * part})
        runs.append(
            dataclasses.replace(run, created=t0 + 500, source="/runs/all.json", context={"source_part": f"#{part}"})
        )
    return runs


def store_runs(folder: Path, runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The runs stored (in the given order); the same runs as the export reads them, oldest first."""
    with open_store(None, data_dir=folder) as store:
        for run in runs:
            assert store.runs.add(run).new
        return sorted(store.runs.list(), key=run_order)


@pytest.fixture
def small_pages(monkeypatch):
    """Three runs a page, so that the tie group (four runs) and every table spans pages."""
    monkeypatch.setattr(results_cli, "STREAM_PAGE", 3)
    monkeypatch.setattr(export, "_SPOOL_READ", 7)  # the metrics rows read back in small blocks too
    return 3


# ---------------------------------------------------------------- tests


@pytest.fixture(autouse=True)
def stored(tmp_path, monkeypatch) -> Path:
    """This test's data folder (its store)."""
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.mark.parametrize("fmt", ["json", "csv", "md"])
def test_all_streamed_in_pages_is_byte_identical_to_the_whole_list_export(capsys, stored, tmp_path, small_pages, fmt):
    runs = store_runs(stored, varied_runs())
    assert [r.id for r in runs[-4:]] == ["same-1", "same-2", "same-3", "same-10"]  # run_order, not stored order
    code, out, err = cli(capsys, "export", "--all", "--format", fmt)
    whole = OLD[fmt](runs)
    assert code == 0 and err == ""
    assert out == (whole if fmt == "json" else printable(whole, keep_newlines=True))
    target = tmp_path / f"runs.{fmt}"
    code, _, err = cli(capsys, "export", "--all", "--format", fmt, "--output", str(target))
    assert code == 0 and err.strip() == f"{len(runs)} run(s) written to {target}"
    assert target.read_bytes() == whole.encode()  # the file gets the data as it is


def test_the_core_exports_write_what_they_wrote_before():
    runs = sorted(varied_runs(), key=run_order)
    for fmt in ("json", "csv", "md"):
        for some in (runs, runs[:1], runs[4:9], []):
            assert NEW[fmt](some) == OLD[fmt](some), (fmt, len(some))
    assert export.export_markdown(runs, title=None) == old_markdown(runs, title=None)


def test_markdown_chunks_can_be_filtered_one_at_a_time(monkeypatch):
    """A terminal's filter applied chunk by chunk (the CLI's stdout) gives what it gives the
    whole text: no chunk ends inside a colour code or an escape."""
    monkeypatch.setattr(export, "_SPOOL_READ", 5)
    runs = sorted(varied_runs(), key=run_order)
    chunks = list(export.markdown_chunks(runs, export.markdown_plan(runs)))
    assert len(chunks) > 4 * len(runs)
    assert all(c.endswith(("\n", "|")) for c in chunks)
    whole = old_markdown(runs)
    assert "".join(printable(c, keep_newlines=True) for c in chunks) == printable(whole, keep_newlines=True)


def test_export_all_reads_pages_never_the_whole_list(capsys, stored, monkeypatch, small_pages):
    """A big history exports without running out of memory: the store is read a page at a
    time, and its every-run list (all of them decoded at once) is never asked for."""
    runs = store_runs(stored, varied_runs())

    def whole_list(self, **_):
        raise AssertionError("results export --all read every stored run at once")

    limits: list[int] = []
    real_page = RunTable.list_runs

    def page(self, **kw):
        limits.append(kw["limit"])
        return real_page(self, **kw)

    monkeypatch.setattr(RunTable, "list", whole_list)
    monkeypatch.setattr(RunTable, "list_runs", page)
    for fmt in ("json", "csv", "md"):
        limits.clear()
        code, out, err = cli(capsys, "export", "--all", "--format", fmt)
        assert code == 0 and "Traceback" not in err, err
        passes = 1 if fmt == "json" else 2  # CSV and Markdown: one pass for the columns, one for the rows
        assert limits == [small_pages] * (passes * math.ceil(len(runs) / small_pages))


def test_output_to_a_new_file_and_beside_an_existing_one(capsys, stored, tmp_path, small_pages):
    runs = store_runs(stored, varied_runs()[:7])
    target = tmp_path / "all.csv"
    code, out, err = cli(capsys, "export", "--all", "--format", "csv", "-o", str(target))
    assert code == 0 and out == "" and err.strip() == f"7 run(s) written to {target}"
    assert target.read_text() == old_csv(runs)
    target.write_text("kept by hand\n")
    code, out, err = cli(capsys, "export", "--all", "--format", "csv", "-o", str(target))
    second = tmp_path / "all-1.csv"
    assert code == 0 and err.strip() == f"7 run(s) written to {second} ({target} exists: kept)"
    assert target.read_text() == "kept by hand\n" and second.read_text() == old_csv(runs)


def test_an_export_that_fails_midway_leaves_no_part_written_file(capsys, stored, tmp_path, monkeypatch, small_pages):
    store_runs(stored, varied_runs())
    real_page = RunTable.list_runs

    def page(self, **kw):
        if kw.get("offset"):  # the second page: a row that cannot be read
            raise ValueError(f"{self.db.where}: run r05: unreadable stored run (bad JSON)")
        return real_page(self, **kw)

    monkeypatch.setattr(RunTable, "list_runs", page)
    target = tmp_path / "runs.json"
    code, out, err = cli(capsys, "export", "--all", "--format", "json", "-o", str(target))
    assert code == 1 and "unreadable stored run" in err and len(err.strip().splitlines()) == 1
    assert not target.exists() and list(tmp_path.glob("runs*")) == []


@pytest.mark.parametrize("fmt", ["json", "csv", "md"])
def test_an_empty_store_exports_as_before(capsys, tmp_path, fmt):
    code, out, _ = cli(capsys, "export", "--all", "--format", fmt)
    assert code == 0 and out == OLD[fmt]([])
