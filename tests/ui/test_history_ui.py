"""The results history: import through the prompt, list, filter, mark, compare, export, detail."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input, Static

from console.services.history import History
from console.ui.model.compare_view import verdict
from console.ui.model.history_view import expand_paths
from console.ui.screens.compare import CompareScreen
from console.ui.screens.history import (
    ExportPrompt,
    HistoryScreen,
    ImportPrompt,
    RunDetailScreen,
)

from .conftest import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
SEED_GLOB = str(ROOT / "tests" / "fixtures" / "seeds" / "004_*.txt")


class Host(App):
    def __init__(self, screen_factory) -> None:
        super().__init__()
        self.cursor_blink = False
        self._factory = screen_factory

    def on_mount(self) -> None:
        self.push_screen(self._factory())


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def import_seed(pilot, app) -> HistoryScreen:
    screen = app.screen
    assert isinstance(screen, HistoryScreen)
    assert await wait_for(pilot, lambda: screen.loaded)
    assert screen.runs == []
    await pilot.press("i")
    await pilot.pause()
    assert isinstance(app.screen, ImportPrompt)
    app.screen.query_one(Input).value = SEED_GLOB  # a glob, as typed
    await pilot.press("enter")
    assert await wait_for(pilot, lambda: len(screen.runs) == 9 and screen.last_import is not None)
    await pilot.pause()
    return screen


async def test_import_list_compare_export(data_dir, tmp_path):
    app = Host(HistoryScreen)  # the default store: $ROCM_CONSOLE_DATA_DIR/results
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await import_seed(pilot, app)
        assert app.screen is screen
        assert screen.status == "9 imported, 0 duplicates, 0 skipped"
        assert History(data_dir=data_dir).runs.count() == 9  # in the store of the data dir
        table = screen.table
        assert table.row_count == 9
        assert "9 runs, newest first" in text_of(screen, "#history-title")
        # newest first: the file's last block is the first row
        first = table.get_row_at(0)
        assert str(first[3]) == "Llama-3.1-70B-Instruct" and str(first[7]) == "1559.19"
        assert str(first[5]) == "c512 n1024 sharegpt" and str(first[6]) == "1024/?"  # old blocks print no failed count

        # importing again: all duplicates
        await pilot.press("i")
        await pilot.pause()
        app.screen.query_one(Input).value = SEED_GLOB
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: screen.status.startswith("0 imported, 9 duplicates"))
        assert len(screen.runs) == 9

        # mark the two oldest c128 runs (rows 8 and 5 newest-first), compare
        table.move_cursor(row=8)
        await pilot.press("space")
        table.move_cursor(row=5)
        await pilot.press("space")
        baseline, other = screen.runs[8], screen.runs[5]
        assert screen.marked == [baseline.id, other.id]
        assert str(table.get_row_at(8)[0]) == "✓1" and str(table.get_row_at(5)[0]) == "✓2"
        await pilot.press("c")
        await pilot.pause()
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert [r.id for r in compare.runs] == [baseline.id, other.id]
        row = next(r for r in compare.rows if r["key"] == "output_throughput")
        assert row["values"] == [1998.36, 1992.04]
        assert verdict(row, 1) == "worse"
        ctable = compare.query_one(DataTable)
        cells = [
            str(c)
            for c in ctable.get_row(
                next(k for k in ctable.rows if str(ctable.get_row(k)[0]).startswith("Output token"))
            )
        ]
        assert cells[1] == "1998.36" and cells[2] == "1992.04  -6.32 -0.3%"
        ttft = next(r for r in compare.rows if r["key"] == "median_ttft_ms")
        assert verdict(ttft, 1) in ("better", "worse")

        # r: the seeds' reference row for the same configuration joins as a column
        await pilot.press("r")
        assert await wait_for(pilot, lambda: compare.matches is not None)
        await pilot.pause()
        refs = ["seed004-bf16-tp4-c128", "seed004-bf16-tp4-seqs4096-c128"]  # the two c128 blocks of seed 004
        assert sorted(m.row.id for m in compare.matches) == refs
        assert [c.id for c in compare.columns[2:]] == [f"ref:{m.row.id}" for m in compare.matches]
        assert "ref:seed004-bf16-tp4-c128 = seed 004" in text_of(compare, "#compare-notes")
        await pilot.press("r")
        assert len(compare.columns) == 2
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen

        # export the marked runs as CSV
        out = tmp_path / "out" / "two.csv"
        out.parent.mkdir()
        await pilot.press("e")
        await pilot.pause()
        prompt = app.screen
        assert isinstance(prompt, ExportPrompt)
        await pilot.click("#export-json")
        assert prompt.query_one(Input).value == str(data_dir / "results" / "exports" / "rocm-console-results.json")
        await pilot.click("#export-csv")
        prompt.query_one(Input).value = str(out)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: screen.last_export is not None)
        assert screen.last_export == out
        rows = list(csv.DictReader(io.StringIO(out.read_text())))
        assert [r["id"] for r in rows] == [baseline.id, other.id]
        assert rows[0]["output_throughput"] == "1998.36"
        assert f"2 runs written to {out}" in screen.status


async def test_filter_detail_and_escape(data_dir):
    app = Host(HistoryScreen)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await import_seed(pilot, app)
        await pilot.press("slash")
        for key in "c128":
            await pilot.press(key)
        table = screen.table
        assert await wait_for(
            pilot, lambda: table.row_count == 2 and "2 of 9 runs" in text_of(screen, "#history-title")
        )
        await pilot.press("enter")  # keeps the filter, back to the list
        assert table.has_focus and screen.filter_text == "c128"
        await pilot.press("enter")  # the run's detail
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        assert detail.run.setup["max_concurrency"] == 128
        body = screen_text(app)
        assert "Median TTFT (ms)" in body and "Successful requests" in body
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")  # clears the filter
        assert await wait_for(pilot, lambda: table.row_count == 9) and screen.filter_text == ""
        await pilot.press("c")  # nothing marked: a hint, no screen
        await pilot.pause()
        assert app.screen is screen


async def test_import_reports_skipped_and_unreadable(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("no benchmark here\n")
    store = History(data_dir=tmp_path / "store")
    app = Host(lambda: HistoryScreen(store))
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: screen.loaded)
        screen.import_paths(f"{junk} {tmp_path / 'missing.json'}")
        assert await wait_for(pilot, lambda: screen.last_import is not None)
        assert screen.status == (
            "0 imported, 0 duplicates, 1 skipped (junk.txt: no result block), "
            f"1 unreadable ({tmp_path / 'missing.json'}: no such file or folder)"
        )
        assert screen.query_one("#history-status").has_class("-error")
        assert "no stored results yet" in text_of(screen, "#history-detail")


def test_expand_paths(tmp_path):
    (tmp_path / "a b.json").write_text("{}")
    (tmp_path / "c.json").write_text("{}")
    assert expand_paths(f"'{tmp_path}/a b.json'") == [f"{tmp_path}/a b.json"]
    assert expand_paths(f"{tmp_path}/*.json") == [f"{tmp_path}/a b.json", f"{tmp_path}/c.json"]
    assert expand_paths(f"{tmp_path}/none-*.json") == [f"{tmp_path}/none-*.json"]
    json.dumps(expand_paths(""))


async def test_runs_with_energy_show_its_columns_detail_and_chart(tmp_path):
    """The demo's recorded runs carry telemetry (issue P): the list gains tok/J, Avg W, Thr %
    and CB; the detail says the energy, per-GPU share and client check and draws the power."""
    from console.core.results.record import run_from_dict
    from console.services.demo import SEED_RESULTS_DIR

    store = History(data_dir=tmp_path)
    recorded = []
    for path in sorted(SEED_RESULTS_DIR.glob("*.json")):
        run = run_from_dict(json.loads(path.read_text()))
        store.runs.save(run)
        if run.energy is not None:
            recorded.append(run)
    assert recorded, "the demo ships runs with energy"
    app = Host(lambda: HistoryScreen(store))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: screen.loaded and screen.runs)
        await pilot.pause()
        table = screen.table
        labels = [c.label for c in table.columns]
        assert labels[-4:] == ["tok/J", "Avg W", "Thr %", "CB"]
        run = recorded[0]
        row = table.get_row(run.id)
        assert str(row[-4]) == f"{run.tokens_per_joule:.3g}" and str(row[-3]) == f"{run.avg_power_w:.0f}"
        table.move_cursor(row=[r.id for r in screen.shown].index(run.id))
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        energy = str(detail.query_one("#run-energy", Static).render())
        assert f"{run.tokens_per_joule:.3g} tokens/J" in energy and "throttled 0.00 %" in energy
        # the simulated energy counter was read: no integrated-power mark
        assert "(from integrated power)" not in energy
        assert "Client  ok (client and server agree)" in energy and "TTFT mean client" in energy
        plot = detail.query_one("#run-power")
        assert plot.plotted > 0


async def test_export_dialog_name_follows_format_in_results_folder(data_dir, tmp_path, monkeypatch):
    """Issue U: focus starts on the format, the name follows the format, the default place
    is the data dir's results folder (not the folder the console started in), and the full
    path is on screen before Enter writes it."""
    monkeypatch.chdir(tmp_path)  # the console's start folder: nothing may land here
    app = Host(HistoryScreen)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await import_seed(pilot, app)
        await pilot.press("e")
        await pilot.pause()
        prompt = app.screen
        assert isinstance(prompt, ExportPrompt)
        assert prompt.focused is prompt.query_one("#export-format")
        folder = data_dir / "results" / "exports"
        assert prompt.query_one(Input).value == str(folder / "rocm-console-results.csv")
        assert text_of(prompt, "#export-target") == f"writes {folder / 'rocm-console-results.csv'}"
        await pilot.click("#export-md")
        await pilot.pause()
        assert prompt.query_one(Input).value == str(folder / "rocm-console-results.md")
        assert text_of(prompt, "#export-target") == f"writes {folder / 'rocm-console-results.md'}"
        # a bare name typed without an extension: in the results folder, with the format's
        prompt.query_one(Input).value = "weekly"
        await pilot.pause()
        assert text_of(prompt, "#export-target") == f"writes {folder / 'weekly.md'}"
        await pilot.click("#export-json")
        await pilot.pause()
        assert prompt.query_one(Input).value == "weekly.json"
        await pilot.click("#export-md")
        prompt.query_one("#export-format").focus()
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: screen.last_export is not None)
        assert screen.last_export == folder / "weekly.md"
        assert (folder / "weekly.md").read_text().startswith("|") or "|" in (folder / "weekly.md").read_text()
        assert not list(tmp_path.glob("weekly*")) and not list(tmp_path.glob("rocm-console-results*"))
        # the export never shows up as a stored run
        screen.action_reload()
        assert await wait_for(pilot, lambda: not screen.load_errors and len(screen.runs) == 9)


async def test_failed_and_reference_rows_look_like_what_they_are(tmp_path):
    """Issue U: a run where no request succeeded is marked failed with "—" for its metrics and is
    left out of a comparison (with a note); the seeds' published rows show their source, not the
    import time, sit below today's runs and are dim; compare warns when workloads differ."""
    from console.core.results.build import run_from_console
    from console.core.results.reference import load_reference_numbers
    from console.services.demo import REFERENCE_PATH, reference_run

    data = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())
    store = History(data_dir=tmp_path)
    good = store.runs.save(run_from_console({"node": "cpu-1"}, data, created=1000.0))
    other = store.runs.save(
        run_from_console({"node": "cpu-1"}, {**data, "max_concurrency": 16, "date": "20261121-080000"})
    )
    failed = {**data, "completed": 0, "failed": 50, "output_throughput": 0.0, "median_ttft_ms": 0.0, "date": "x"}
    bad = store.runs.save(run_from_console({"node": "cpu-1"}, failed, created=2000.0))
    row = next(r for r in load_reference_numbers(REFERENCE_PATH) if r.kind == "serving")
    ref = store.runs.save(reference_run(row, REFERENCE_PATH.name))  # stored now, as the demo seeds it
    app = Host(lambda: HistoryScreen(store))
    async with app.run_test(size=(140, 30)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: screen.loaded and len(screen.runs) == 4)
        await pilot.pause()
        table = screen.table
        assert [r.id for r in screen.shown][-1] == ref  # the newest stored, yet listed last
        cells = {key: str(c) for (key, _), c in zip(screen.columns, table.get_row(bad))}
        assert cells["done"] == "✗ 0/50" and cells["tput"] == cells["ttft"] == "—"
        ref_cells = {key: str(c) for (key, _), c in zip(screen.columns, table.get_row(ref))}
        assert ref_cells["date"] == "ref seed 004" and "2026" not in ref_cells["date"]
        assert table.get_row(ref)[1].style == "dim italic"
        table.move_cursor(row=[r.id for r in screen.shown].index(ref))
        await pilot.pause()
        detail = text_of(screen, "#history-detail")
        assert "published numbers, seed 004" in detail and "not run here" in detail
        table.move_cursor(row=[r.id for r in screen.shown].index(bad))
        await pilot.pause()
        assert "FAILED: 0 of 50 requests succeeded" in text_of(screen, "#history-detail")
        for run_id in (good, bad, other):
            table.move_cursor(row=[r.id for r in screen.shown].index(run_id))
            await pilot.press("space")
        await pilot.press("c")
        await pilot.pause()
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert [r.id for r in compare.runs] == [good, other]
        warning = text_of(compare, "#compare-warning")
        assert "workloads differ: concurrency 8 vs 16" in warning
        assert f"left out 1 failed run ({bad})" in warning
