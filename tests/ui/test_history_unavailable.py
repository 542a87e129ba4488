"""Issue Y: a store that cannot be opened (here a folder where the SQLite file should be) is
one line naming it and the reason: the console still starts and shows the fleet, the history,
events and baselines screens say "history unavailable: …", and nothing raises."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Static

from console.cli.web import open_history
from console.core.model import Profile
from console.core.results.build import run_from_console
from console.services.history import History
from console.services.results import ResultStore
from console.ui.screens.baseline import BaselineScreen
from console.ui.screens.events import EventsScreen
from console.ui.screens.history import HistoryScreen
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
RESULT = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())


async def test_a_store_that_cannot_be_opened_leaves_the_console_working(tmp_path):
    (tmp_path / "store.sqlite3").mkdir()  # where the database file should be
    history = History(data_dir=tmp_path)
    app, prepare = SCENES["fleet"].make()
    app.history = history
    failed: list[str] = []
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await prepare(pilot)
        assert "mi300x-spx" in screen_text(app)  # the fleet, as always
        # opened in a thread once the fleet settled: the reason comes as a toast
        assert await wait_for(pilot, lambda: history.problem is not None, timeout=10)
        where = str(tmp_path / "store.sqlite3")
        assert where in history.problem
        toasts = lambda: [n.message for n in app._notifications]  # noqa: E731
        assert await wait_for(pilot, lambda: any(m.startswith("history unavailable: ") for m in toasts()))

        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert await wait_for(pilot, lambda: screen.loaded)
        await pilot.pause()
        title = str(screen.query_one("#history-title", Static).render())
        assert f"history unavailable: {history.problem}" in title and where in title
        assert screen.table.row_count == 0
        await pilot.press("escape")

        await pilot.press("e")
        events = app.screen
        assert isinstance(events, EventsScreen)
        assert await wait_for(pilot, lambda: events.loaded)
        head = lambda: str(events.query_one("#events-title", Static).render())  # noqa: E731
        assert await wait_for(pilot, lambda: f"history unavailable: {history.problem}" in head())
        assert where in head()
        await pilot.press("escape")

        await pilot.press("B")
        baselines = app.screen
        assert isinstance(baselines, BaselineScreen)
        assert await wait_for(pilot, lambda: baselines.loaded)
        assert await wait_for(pilot, lambda: "history unavailable: " in screen_text(app))
        failed = [m for m in toasts() if "failed" in m or "Traceback" in m or "Error:" in m]
    assert not failed  # no worker ended with an exception


async def test_events_written_while_the_store_is_unavailable_are_kept_for_it(tmp_path):
    """The console's events go to events.jsonl meanwhile; the next opening that works moves them in."""
    from console.core.events import Event
    from console.ui.results_store import ConsoleEvents

    blocker = tmp_path / "store.sqlite3"
    blocker.mkdir()
    history = History(data_dir=tmp_path)
    assert history.try_open() is None and history.problem
    events = ConsoleEvents(history)
    events.append(Event(1000.0, "node.up", "n1", message="n1 is live"))
    assert (tmp_path / "events.jsonl").read_text().count("node.up") == 1
    blocker.rmdir()
    again = History(data_dir=tmp_path)
    assert [e.message for e in again.events.read()] == ["n1 is live"]
    again.close()


def test_the_web_face_opens_the_store_once_before_serving(tmp_path, monkeypatch, capsys):
    """`rocm-console web` serves one console per browser tab: the store is opened (and an old
    data folder moved in) once at start; a store that cannot be opened is one warning line."""
    data = tmp_path / "data"
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(data))
    ResultStore(data / "results").save(run_from_console({"node": "n1"}, RESULT))
    open_history(Profile(nodes=()))
    assert "rocm-console web: store: moved 1 runs" in capsys.readouterr().out
    assert History(data_dir=data).runs.count() == 1
    (tmp_path / "bad" / "store.sqlite3").mkdir(parents=True)
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "bad"))
    open_history(Profile(nodes=()))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "web: warning: history unavailable: cannot open the store" in err
