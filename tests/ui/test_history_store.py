"""Issue Y, the TUI on the store: a first start on an old data folder moves its files in and
says so in a notification; the store is opened in a thread once the fleet is on screen, never
on the event loop; the console's timeline goes to the store (what it writes before the store
is open waits, then goes in)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from console.core.events import Event
from console.core.results.build import run_from_console
from console.services.events import EventLog
from console.services.history import History
from console.services.results import ResultStore
from console.ui.results_store import ConsoleEvents, history_of, toast
from console.ui.screens.events import EventsScreen
from console.ui.screens.history import HistoryScreen
from tests.ui.scenes.registry import SCENES

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
RESULT = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())


def watch_openings(history: History) -> list[bool]:
    """Whether each opening of the store ran on the main (event loop) thread."""
    on_main: list[bool] = []
    opener = history.open

    def open_and_note():  # noqa: ANN202 - History.open's
        on_main.append(threading.current_thread() is threading.main_thread())
        return opener()

    history.open = open_and_note  # type: ignore[method-assign]
    return on_main


async def test_a_first_start_on_an_old_data_folder_moves_it_in_and_says_so(tmp_path):
    files = ResultStore(tmp_path / "results")
    ids = [files.save(run_from_console({"node": "mi300x-spx"}, {**RESULT, "max_concurrency": c})) for c in (2, 8)]
    EventLog(tmp_path / "events.jsonl").append(
        Event(1000.0, "gpu.ecc", "mi300x-spx", 3, severity="fail", message="ECC +1")
    )
    app, prepare = SCENES["fleet"].make()
    history = History(data_dir=tmp_path, say=lambda line: toast(app, line))
    on_main = watch_openings(history)
    app.history = history
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        await prepare(pilot)
        toasts = lambda: [n.message for n in app._notifications]  # noqa: E731
        assert await wait_for(pilot, lambda: any(m.startswith("store: moved 2 runs") for m in toasts()))
        line = next(m for m in toasts() if m.startswith("store: "))
        assert "1 events" in line and str(tmp_path / "store.sqlite3") in line and "files are left in place" in line
        await pilot.press("h")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        assert await wait_for(pilot, lambda: screen.loaded)
        assert sorted(r.id for r in screen.runs) == sorted(ids)
        await pilot.press("escape", "e")
        events = app.screen
        assert isinstance(events, EventsScreen)
        assert await wait_for(pilot, lambda: [e.message for e in events.shown] == ["ECC +1"])
    assert on_main and not any(on_main)  # opened in a thread, never on the event loop
    assert (tmp_path / "results" / f"{ids[0]}.json").is_file()  # the old files stay: the way back
    history.close()


async def test_the_consoles_timeline_goes_to_the_store_which_opens_after_the_first_frame(
    live_app, tmp_path, monkeypatch
):
    """As ui/launch.py makes the console: events written before the store is open wait in
    memory; the History is made and opened in a thread; then everything is in the store."""
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path))
    on_main: list[bool] = []
    opener = History.open

    def open_and_note(self):  # noqa: ANN001, ANN202 - History.open's
        on_main.append(threading.current_thread() is threading.main_thread())
        return opener(self)

    monkeypatch.setattr(History, "open", open_and_note)
    app = None
    events = ConsoleEvents(lambda: history_of(app))
    app = live_app(events=events)
    assert events.path == tmp_path / "events.jsonl" and app.history is None  # nothing made yet
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.health_watch is not None and app.history is not None)
        assert app.history.is_open  # before the health watch took its events and versions
        reader = History(data_dir=tmp_path)  # another console, a CLI command
        assert await wait_for(pilot, lambda: {e.node for e in reader.events.read(kind="node.up")} >= {"mi300x-spx"})
    assert on_main and on_main[0] is False  # the console's opening: in a thread (the reader's is the test's)
    assert not (tmp_path / "events.jsonl").exists()  # nothing went to the file
    reader.close()
