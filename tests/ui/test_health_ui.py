"""GPU health in the running console: the health column and filter, the detail's health
section, the events screen following the log, the start dialog's warnings, the failed
instance's GPU events, the demo's fault commands."""

from __future__ import annotations

import time

import pytest
from textual.widgets import DataTable

from console.core.events import Event
from console.services.history import History
from console.ui.screens.events import EventsScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for


def gpu_rows(table: GpuTable, node: str) -> list[int]:
    return [r.gpu for r in table.rows if r.node == node and r.gpu is not None]


async def test_health_column_header_summary_and_sick_filter():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        text = screen_text(app)
        assert "HEALTH" in text
        assert "mi300x-spx  live 0s  health 2 warn · 1 fail" in text
        assert "✖ fail" in text and "▲ warn" in text and "✓ ok" in text
        table = app.screen.query_one(GpuTable)
        await pilot.press("slash", *"sick", "enter")
        assert gpu_rows(table, "mi300x-spx") == [2, 5, 6]
        assert gpu_rows(table, "mi300x-cpx") == list(range(24, 32))  # physical GPU 3's partitions
        assert gpu_rows(table, "mi355x") == [1]
        await pilot.press("escape", "slash", *"throttled", "enter")
        assert [r.gpu for r in table.rows if r.gpu is not None] == [2]
        await pilot.press("escape", "slash", *"fail", "enter")
        assert [(r.node, r.gpu) for r in table.rows if r.gpu is not None] == [("mi300x-spx", 5)]


async def test_gpu_detail_shows_health_counters():
    app, prepare = SCENES["gpu-health-fail"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        health = app.screen.query_one("#detail-health", DataTable)
        labels = [str(health.get_row_at(i)[0]).strip() for i in range(health.row_count)]
        assert labels[:2] == ["ECC uncorrectable", "ECC correctable"]
        assert {"Pages pending", "Throttle now", "PCIe link", "XGMI links", "Energy"} <= set(labels)
        box, why = app.screen.query_one("#detail-health-box"), app.screen.query_one("#detail-health-why")
        assert "Health ✖ fail" in str(box.border_title) and "uncorrectable" in str(why.render())
        await pilot.press("right")  # the next GPU: its own counters
        await pilot.pause()
        assert "Health ▲ warn" in str(box.border_title)  # GPU 6: PCIe trained down
        assert "PCIe gen 5 x8" in str(why.render())


async def test_events_screen_follows_the_log_and_filters(tmp_path):
    app, prepare = SCENES["fleet"].make()
    history = History(data_dir=tmp_path)
    history.events.append(Event(time.time() - 60, "node.up", "mi300x-spx", message="mi300x-spx is live"))
    app.history = history
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        await pilot.press("e")
        screen = app.screen
        assert isinstance(screen, EventsScreen)
        table = screen.query_one("#events-table", DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 1)
        # Written by another process (the CLI, another console): shown within about a second.
        log = History(data_dir=tmp_path).events
        log.append(Event(time.time(), "gpu.ecc", "mi300x-spx", 5, severity="fail", message="GPU 5: uncorrectable +2"))
        log.append(Event(time.time(), "gpu.throttle_start", "mi355x", 1, severity="warn", message="GPU 1: power"))
        assert await wait_for(pilot, lambda: table.row_count == 3, timeout=5)
        assert "GPU 1: power" in str(table.get_row_at(0)[5])  # newest first
        await pilot.press("slash", *"kind:gpu fail", "enter")
        assert await wait_for(pilot, lambda: table.row_count == 1)
        assert "uncorrectable" in str(table.get_row_at(0)[5])
        await pilot.press("escape")  # clears the filter
        assert await wait_for(pilot, lambda: table.row_count == 3)
        await pilot.press("slash", *"kind:nonsense", "enter")
        assert await wait_for(pilot, lambda: "no such event kind" in screen_text(app))
        await pilot.press("escape", "escape")
        assert not isinstance(app.screen, EventsScreen)


async def test_palette_opens_events_of_one_node():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        app.open_events("node:mi300x-cpx")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EventsScreen)
        table = screen.query_one("#events-table", DataTable)
        assert await wait_for(pilot, lambda: screen.loaded and table.row_count > 0)
        assert {str(table.get_row_at(i)[2]) for i in range(table.row_count)} == {"mi300x-cpx"}


async def test_start_dialog_warns_of_sick_gpus():
    app, prepare = SCENES["start-dialog-sick"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        text = screen_text(app)
        assert "GPU 5 ✖ fail: 2 uncorrectable ECC errors" in text
        assert "refused unless forced" in text


async def test_failed_instance_log_shows_gpu_events_around_the_failure():
    app, prepare = SCENES["instance-log-failed"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        assert await wait_for(pilot, lambda: "GPU reset (ring hang on gfx)" in screen_text(app))
        text = screen_text(app)
        assert "GPU events around the failure" in text
        assert "XGMI link 3 down" not in text  # another GPU's, later: not this failure's


async def test_demo_fault_dialog_writes_the_fault(tmp_path, monkeypatch):
    faults = pytest.importorskip("console.sim.faults")
    from console.services import demo_faults
    from console.ui.commands import FleetCommands
    from console.ui.screens.fault_dialog import FaultDialog

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ROCM_CONSOLE_DEMO_STATE", raising=False)
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await prepare(pilot)
        names = [name for name, _, _ in FleetCommands(app.screen).commands(app)]
        assert "Inject GPU fault… (demo)" in names and "Clear GPU faults (demo)" in names
        app.push_screen(FaultDialog([app.fleet.spec(n) for n in app.fleet.node_names], "mi300x-spx", 4))
        await pilot.pause()
        await pilot.press("0", "ctrl+s")  # a count of 0: said in one line, the dialog stays
        assert await wait_for(pilot, lambda: "count: '0' is not a whole number" in screen_text(app))
        assert isinstance(app.screen, FaultDialog)
        await pilot.press("backspace", "ctrl+s")  # the first kind: ecc_uncorrectable on GPU 4
        assert await wait_for(pilot, lambda: not isinstance(app.screen, FaultDialog), timeout=10)
        folder = demo_faults.sim_dir(app.fleet.spec("mi300x-spx"))
        assert [(f["gpu"], f["kind"]) for f in faults.read_faults(str(folder))] == [(4, "ecc_uncorrectable")]
        commands = {name: run for name, run, _ in FleetCommands(app.screen).commands(app)}
        commands["Clear GPU faults (demo)"]()
        assert await wait_for(pilot, lambda: faults.read_faults(str(folder)) == [], timeout=10)
