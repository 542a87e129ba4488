"""U2: Enter on an event opens its subject: a GPU's detail (the event's physical GPU, its first
partition on a CPX node), a node's detail, an instance's log, the run in history."""

from __future__ import annotations

import json
import time
from pathlib import Path

from console.core.events import Event
from console.core.results.build import run_from_console
from console.services.history import History
from console.ui.model.events_view import Subject, pick_run, subject_of
from console.ui.screens.detail import DetailScreen
from console.ui.screens.events import EventsScreen
from console.ui.screens.history import HistoryScreen
from console.ui.screens.log_viewer import LogScreen
from tests.ui.scenes.registry import SCENES

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


async def test_enter_on_an_event_opens_its_subject(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    data = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())
    now = time.time()
    history = History(data_dir=tmp_path / "data")
    store = history.runs
    store.save(run_from_console({"node": "mi300x-spx"}, data, created=now - 9000))  # another, older run
    wanted = store.save(run_from_console({"node": "mi300x-spx"}, data, created=now - 15))
    history.events.append(
        [
            Event(now - 40, "gpu.ecc", "mi300x-cpx", 3, severity="fail", message="uncorrectable ECC +1"),
            Event(now - 30, "partition.switched", "mi355x", message="partition switched to SPX on GPUs all"),
            Event(now - 20, "instance.stopped", "mi300x-spx", instance="llama-3.1-8b-fp8-g4", message="stopped"),
            Event(now - 10, "benchmark.finished", "mi300x-spx", message="benchmark serving c=8 finished"),
        ]
    )
    app, prepare = SCENES["fleet"].make()
    app.history = history
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        await pilot.press("e")
        events = app.screen
        assert isinstance(events, EventsScreen)
        assert await wait_for(pilot, lambda: len(events.shown) == 4)

        async def enter_on(row: int) -> None:
            await pilot.press(*["up"] * 4, *["down"] * row, "enter")
            await pilot.pause()

        await enter_on(0)  # the benchmark: its run, the cursor on it
        history = app.screen
        assert isinstance(history, HistoryScreen)
        assert await wait_for(pilot, lambda: history.cursor_run == wanted), history.cursor_run
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is events)

        await enter_on(1)  # the instance: its log
        assert isinstance(app.screen, LogScreen) and app.screen.instance_name == "llama-3.1-8b-fp8-g4"
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is events)

        await enter_on(2)  # the node: its detail
        assert isinstance(app.screen, DetailScreen)
        assert (app.screen.node, app.screen.gpu) == ("mi355x", None)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is events)

        await enter_on(3)  # physical GPU 3 of the CPX node: the detail of its first partition
        assert isinstance(app.screen, DetailScreen)
        assert (app.screen.node, app.screen.gpu) == ("mi300x-cpx", 24)


def test_subject_of_prefers_the_run_then_instance_gpu_node():
    ev = Event(100.0, "benchmark.finished", "n", instance="i", message="x")
    assert subject_of(ev) == Subject("run", "n", None, "i", None, 100.0)
    stored = Event(100.0, "gpu.health", "n", 2, details={"run": "abc"})
    assert subject_of(stored).what == "run" and subject_of(stored).run_id == "abc"
    assert subject_of(Event(1.0, "process.ended", "n", 5)).what == "gpu"
    assert subject_of(Event(1.0, "node.down", "n")).what == "node"
    assert subject_of(Event(1.0, "alert.fired")) is None


def test_pick_run_by_id_else_nearest_of_the_node():
    class Run:
        def __init__(self, id, created, node):  # noqa: A002 - StoredRun's field names
            self.id, self.created, self.node = id, created, node

    runs = [Run("a", 1000.0, "n"), Run("b", 1100.0, "m"), Run("c", 1300.0, "n")]
    assert pick_run(Subject("run", "n", run_id="c"), runs) == 2
    assert pick_run(Subject("run", "n", time=1090.0), runs) == 0  # b is nearer, on another node
    assert pick_run(Subject("run", "n", time=99999.0), runs) is None  # none within an hour
