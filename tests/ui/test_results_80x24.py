"""Issue U: the results screens in an 80x24 terminal. The history keeps its key metric columns
(the least important go first), the comparison says when workloads differ, the sweep's Pareto
charts keep a readable height or say they are too small. SVG snapshots over frozen data: seed
004 imported at a fixed time, one failed run, one reference row, in UTC."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from textual.app import App

from console.core.results.build import run_from_console
from console.core.results.reference import load_reference_numbers
from console.services.demo import REFERENCE_PATH, reference_run
from console.services.history import History
from console.ui.screens.compare import CompareScreen
from console.ui.screens.history import HistoryScreen
from console.ui.widgets.bench_plots import ParetoPlot
from tests.ui.scenes.bench import SCENES, BenchSceneApp, prepare

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seeds" / "004_040c923192cb04a5.txt"
CPU_RESULT = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json"
T0 = 1767225600.0  # 2026-01-01 00:00 UTC
SMALL = (80, 24)


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class Host(App):
    def __init__(self, make_screen) -> None:
        super().__init__()
        self.cursor_blink = False
        self._make = make_screen

    def on_mount(self) -> None:
        self.push_screen(self._make())


@pytest.fixture
def store(tmp_path):
    history = History(data_dir=tmp_path)
    store = history.runs
    assert len(store.import_paths([SEED], now=T0).imported) == 9
    data = json.loads(CPU_RESULT.read_text())
    failed = {**data, "completed": 0, "failed": 50, "output_throughput": 0.0, "median_ttft_ms": 0.0}
    store.save(run_from_console({"node": "cpu-1"}, failed, created=T0 + 60))
    row = next(r for r in load_reference_numbers(REFERENCE_PATH) if r.kind == "serving")
    ref = reference_run(row, REFERENCE_PATH.name)
    store.save(dataclasses.replace(ref, id="20260101-000200-ref-seed004", created=T0 + 120))
    return history


async def _history_loaded(pilot) -> None:
    screen = pilot.app.screen
    assert await wait_for(pilot, lambda: isinstance(screen, HistoryScreen) and screen.loaded)
    await pilot.pause()


async def test_history_80x24_keeps_the_key_metrics(store):
    async with Host(lambda: HistoryScreen(store)).run_test(size=SMALL) as pilot:
        await _history_loaded(pilot)
        screen = pilot.app.screen
        keys = [k for k, _ in screen.columns]
        assert {"done", "tput", "ttft", "itl", "model", "setup"} <= set(keys)
        assert "partition" not in keys  # given way first
        table = screen.table
        widths = sum(table.column_widths)
        assert widths <= 80 - 2  # no sideways scrolling to reach a number


def test_history_80x24(snap_compare, store):
    async def run_before(pilot) -> None:
        await _history_loaded(pilot)

    assert snap_compare(Host(lambda: HistoryScreen(store)), terminal_size=SMALL, run_before=run_before)


def test_compare_80x24(snap_compare, store):
    """Two runs of seed 004 whose concurrency differs: the one-line warning names it."""
    runs = store.runs.list(model="70B")
    c128 = next(r for r in runs if r.setup.get("max_concurrency") == 128)
    c256 = next(r for r in runs if r.setup.get("max_concurrency") == 256)

    async def run_before(pilot) -> None:
        await pilot.pause()

    app = Host(lambda: CompareScreen([c128, c256]))
    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_pareto_80x24(snap_compare):
    """The sweep's Pareto charts at 80x24: drawn when they have the rows, else 'too small'."""
    assert snap_compare(BenchSceneApp(SCENES["bench-sweep"]), terminal_size=SMALL, run_before=prepare)


async def test_pareto_says_too_small_instead_of_a_squeezed_chart():
    app = BenchSceneApp(SCENES["bench-sweep"])
    async with app.run_test(size=(80, 24)) as pilot:
        await prepare(pilot)
        plot = app.bench.query_one("#pareto-ttft", ParetoPlot)
        assert plot.points
        if plot.size.height < ParetoPlot.MIN_HEIGHT:
            assert plot.too_small and "too small — enlarge the terminal" in str(plot.render())
        else:
            assert not plot.too_small
    app = BenchSceneApp(SCENES["bench-sweep"])
    async with app.run_test(size=(160, 50)) as pilot:
        await prepare(pilot)
        plot = app.bench.query_one("#pareto-ttft", ParetoPlot)
        assert not plot.too_small and plot.size.height >= ParetoPlot.MIN_HEIGHT
