"""Pilot tests of the fleet screen: rows, filter, navigation, pause, node health, keys."""

from __future__ import annotations

from console.core.model import NodeHealth
from console.ui.messages import TelemetryUpdated
from console.ui.screens.detail import DetailScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.help import HelpScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for


def gpu_rows(table: GpuTable, node: str) -> list[int]:
    return [r.gpu for r in table.rows if r.node == node and r.gpu is not None]


async def test_a_row_for_every_simulated_gpu():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        assert gpu_rows(table, "mi300x-spx") == list(range(8))
        assert gpu_rows(table, "mi300x-cpx") == list(range(64))  # 8 physical x CPX
        assert gpu_rows(table, "mi355x") == list(range(8))
        headers = [r.node for r in table.rows if r.is_header]
        assert headers == ["mi300x-spx", "mi300x-cpx", "mi355x"]
        # Logical GPUs are grouped under their physical GPU.
        cpx = [r for r in table.rows if r.node == "mi300x-cpx" and r.gpu is not None]
        assert [r.tree for r in cpx[:8]] == ["┬", "├", "├", "├", "├", "├", "├", "└"]
        assert {r.physical for r in cpx[8:16]} == {1}
        text = screen_text(app)
        assert "mi300x-cpx  live 0s" in text and "8×MI300X = 64 GPUs" in text and "CPX/NPS1" in text


async def test_filter_by_partition_busy_and_node():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        await pilot.press("slash", *"cpx busy")
        # The traces put processes on CPX logical GPUs 0-9 and 17; the loading instance holds 12.
        assert gpu_rows(table, "mi300x-cpx") == [*range(10), 12, 17]
        assert [r.node for r in table.rows if r.is_header] == ["mi300x-cpx"]
        await pilot.press("enter")
        assert app.screen.focused is table
        assert "filter: cpx busy" in screen_text(app)
        await pilot.press("escape")  # clears the filter
        assert len(table.rows) == 3 + 8 + 64 + 8
        await pilot.press("slash", *"mi355x idle", "enter")
        assert table.rows == []  # all eight GPUs serve a TP=8 model
        assert "nothing matches the filter 'mi355x idle'" in screen_text(app)
        await pilot.press("escape", "slash", *"spx idle", "enter")
        assert gpu_rows(table, "mi300x-spx") == [5, 6, 7]
        assert gpu_rows(table, "mi355x") == []  # busy


async def test_enter_opens_gpu_detail_and_escape_returns():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        assert table.select(("mi300x-spx", 0))
        await pilot.press("down", "enter")
        assert isinstance(app.screen, DetailScreen)
        assert (app.screen.node, app.screen.gpu) == ("mi300x-spx", 1)
        assert await wait_for(pilot, lambda: "Utilization %" in screen_text(app))
        text = screen_text(app)
        assert "0000:22:00.0" in text and "python3" in text and "41231" in text
        await pilot.press("right")
        assert app.screen.gpu == 2
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        assert table.cursor_row.key == ("mi300x-spx", 1)
        # Enter on a node header: the node's detail.
        await pilot.press("right_square_bracket", "enter")
        assert isinstance(app.screen, DetailScreen)
        assert (app.screen.node, app.screen.gpu) == ("mi300x-cpx", None)
        assert await wait_for(pilot, lambda: "all 64 GPUs" in screen_text(app))
        await pilot.press("backspace")
        assert isinstance(app.screen, FleetScreen)


async def test_secondary_partition_detail_uses_its_physical_gpu():
    app, prepare = SCENES["cpx-partition-detail"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        assert (app.screen.node, app.screen.gpu) == ("mi300x-cpx", 9)
        text = screen_text(app)
        assert "Power W (physical GPU 1)" in text
        assert "partition 1" in text


async def test_pause_stops_drawing_but_not_collecting(live_app):
    app = live_app(("mi300x-spx",), pace=0.05)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: app.fleet.frames_received("mi300x-spx") >= 3)
        await pilot.press("p")
        assert app.paused and app.screen.has_class("-paused")
        assert app.screen.query_one("#paused-marker").display
        assert "PAUSED" in screen_text(app)
        drawn, frames, table_redraws = app.redraws, app.fleet.frames_received("mi300x-spx"), table.redraws
        assert await wait_for(pilot, lambda: app.fleet.frames_received("mi300x-spx") >= frames + 5)  # collecting
        assert app.redraws == drawn and table.redraws == table_redraws  # not drawing
        await pilot.press("p")
        assert await wait_for(pilot, lambda: table.redraws > table_redraws)
        assert not app.screen.query_one("#paused-marker").display


async def test_node_goes_stale_down_and_live_again(live_app):
    app = live_app(("mi300x-spx", "mi355x"), stale_after=0.5)
    async with app.run_test(size=(120, 36)) as pilot:
        fleet, link = app.fleet, app.transports
        assert await wait_for(pilot, lambda: all(s.health == NodeHealth.LIVE for s in fleet.snapshots()))
        assert await wait_for(pilot, lambda: "mi355x  live" in screen_text(app))

        link["mi355x"].flowing.clear()  # the agent goes silent
        assert await wait_for(pilot, lambda: "mi355x  stale" in screen_text(app), timeout=5)
        link["mi355x"].cut = True  # then the link drops
        link["mi355x"].flowing.set()
        assert await wait_for(pilot, lambda: "mi355x  down, last sample" in screen_text(app), timeout=5)
        assert "connection refused" in screen_text(app)
        # the other node never noticed (live again at once should a loaded machine have held it past 0.5 s)
        assert "mi300x-spx  down" not in screen_text(app)
        assert await wait_for(pilot, lambda: "mi300x-spx  live" in screen_text(app), timeout=5)
        assert gpu_rows(app.screen.query_one(GpuTable), "mi355x") == list(range(8))  # last values kept

        link["mi355x"].cut = False
        assert await wait_for(pilot, lambda: "mi355x  live" in screen_text(app), timeout=10)


async def test_telemetry_coalesces_into_clock_redraws_without_a_message_per_sample(live_app):
    seen = []
    app = live_app(pace=0.005)
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        redraws = app.redraws
        assert await wait_for(pilot, lambda: app.view.events > 300)
        assert await wait_for(pilot, lambda: app.redraws > redraws)  # the clock still draws them
        assert app.redraws - redraws < app.view.events / 2  # fewer redraws than samples
    # the fleet sets the app's dirty flag: no message through the pump per sample
    assert sum(isinstance(m, TelemetryUpdated) for m in seen) == 0


async def test_sampling_interval_keys(live_app):
    app = live_app(("mi300x-spx",))
    async with app.run_test(size=(120, 36)) as pilot:
        assert app.fleet.interval == 1.0
        await pilot.press("plus")
        assert await wait_for(pilot, lambda: app.fleet.interval == 0.5)
        await pilot.press("minus", "minus")
        assert await wait_for(pilot, lambda: app.fleet.interval == 2.0)
        assert "every 2 s" in screen_text(app)
        frames = app.fleet.frames_received("mi300x-spx")  # the stream restarted at the new interval goes on
        assert await wait_for(pilot, lambda: app.fleet.frames_received("mi300x-spx") > frames, timeout=10)
        assert app.fleet.snapshot("mi300x-spx").health == NodeHealth.LIVE


async def test_keys_remapped_from_profile(live_app):
    # (space marks GPUs on the fleet table: a key taken there would not reach the app)
    app = live_app(("mi300x-spx",), keys=(("pause", "f9"), ("filter", "f")))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("p")
        assert not app.paused
        await pilot.press("f9")
        assert app.paused
        await pilot.press("f")
        assert app.screen.query_one("#filter-input").has_focus
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert await wait_for(pilot, lambda: "f9" in screen_text(app))


async def test_mouse_selects_and_double_click_opens(live_app):
    app = live_app(("mi300x-spx",))
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) == 9)
        await pilot.click(GpuTable, offset=(10, 3))  # line 0 is the column header
        assert table.cursor_row.key == ("mi300x-spx", 1)
        await pilot.click(GpuTable, offset=(10, 4), times=2)
        assert isinstance(app.screen, DetailScreen) and app.screen.gpu == 2


async def test_palette_has_per_node_commands(live_app):
    app = live_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"mi300x-cpx: open node")
        assert await wait_for(pilot, lambda: "mi300x-cpx: open node detail" in screen_text(app))
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        assert (app.screen.node, app.screen.gpu) == ("mi300x-cpx", None)
        await pilot.press("escape", "ctrl+p", *"mi355x: show only")
        assert await wait_for(pilot, lambda: "mi355x: show only this node" in screen_text(app))
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: table.filter_text == "mi355x")


async def test_theme_toggle_and_small_terminal(live_app):
    app = live_app(size=None)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(pilot, lambda: "mi300x-cpx  live" in screen_text(app))
        text = screen_text(app)
        assert "TJ" in text and "PART" in text and "Detail" in text
        dark = app.current_theme.dark
        await pilot.press("t")
        assert app.current_theme.dark is not dark
