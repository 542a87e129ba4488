"""The events screen says which other console or watcher wrote an event (a team's shared store
holds every one's timeline); this console's own events and an old log's carry no mark."""

from __future__ import annotations

import time

from console.core.events import Event
from console.services.history import History
from console.ui.screens.events import EventsScreen
from tests.ui.scenes.registry import SCENES

from .conftest import wait_for


async def test_another_writers_events_are_marked_with_its_name(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    now = time.time()
    history = History(data_dir=tmp_path / "data", origin="tui@ws1")
    history.events.append(Event(now - 30, "partition.switched", "mi355x", message="mine"))
    History(data_dir=tmp_path / "data", origin="watch@db1").events.append(
        Event(now - 20, "gpu.ecc", "mi300x-cpx", 3, severity="fail", message="uncorrectable ECC +1")
    )
    History(data_dir=tmp_path / "data").events.append(Event(now - 10, "node.down", "mi355x", message="old"))
    app, prepare = SCENES["fleet"].make()
    app.history = history
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        await pilot.press("e")
        events = app.screen
        assert isinstance(events, EventsScreen)
        assert await wait_for(pilot, lambda: len(events.shown) == 3)
        await pilot.pause()
        table = events.query_one("#events-table")
        messages = {str(table.get_row_at(i)[-1]) for i in range(table.row_count)}
        assert messages == {"mine", "[watch@db1] uncorrectable ECC +1", "old"}
