"""Finding things on the fleet screen: sort keys, the free/busy/hot filter words, the key bar
that follows the cursor, and b / l on a GPU without an instance."""

from __future__ import annotations

from textual import events
from textual.widgets import Input

from console.ui.model import format as fmt
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.help import HelpScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for


def _tj(app, node: str, gpu: int) -> float | None:
    snap = app.fleet.snapshot(node)
    return next(m.temp_junction_c for m in snap.latest.gpus if m.index == gpu)


def _lines(app) -> list[str]:
    return screen_text(app).splitlines()


async def test_one_key_sorts_by_temperature_and_the_same_key_reverses():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        default = list(table.rows)
        await pilot.press("T")
        # per node: headers kept, each node's physical GPUs hottest first
        assert [r.node for r in table.rows if r.is_header] == ["mi300x-spx", "mi300x-cpx", "mi355x"]
        spx = [r.gpu for r in table.rows if r.node == "mi300x-spx" and r.gpu is not None]
        temps = [_tj(app, "mi300x-spx", g) for g in spx]
        assert temps == sorted(temps, reverse=True) and spx != sorted(spx)
        # the cursor is on the hottest GPU of the first node; the header and status say the order
        assert table.cursor_row.key == ("mi300x-spx", spx[0])
        assert "TJ▼" in _lines(app)[1] and "sort TJ ▼ per node" in _lines(app)[0]
        # CPX: the partitions stay under their physical GPU, in order
        cpx = [r for r in table.rows if r.node == "mi300x-cpx" and r.gpu is not None]
        for start in range(0, 64, 8):
            group = cpx[start : start + 8]
            assert len({r.physical for r in group}) == 1
            assert [r.tree for r in group] == ["┬"] + ["├"] * 6 + ["└"]
        await pilot.press("T")
        spx_up = [r.gpu for r in table.rows if r.node == "mi300x-spx" and r.gpu is not None]
        assert [_tj(app, "mi300x-spx", g) for g in spx_up] == sorted(temps)
        assert "TJ▲" in _lines(app)[1]
        await pilot.press("N")  # back to the default order
        assert table.rows == default and "sort" not in _lines(app)[0]


async def test_across_the_fleet_the_hottest_gpu_is_the_first_row_and_the_status_says_it_flattened():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        await pilot.press("F", "T")
        assert not any(r.is_header for r in table.rows)
        hottest = max(
            (
                (m.temp_junction_c, s.name, m.index)
                for s in app.fleet.snapshots()
                for m in s.latest.gpus
                if m.temp_junction_c
            ),
        )
        assert table.cursor_row.key == (hottest[1], hottest[2]) == table.rows[0].key
        lines = _lines(app)
        assert "sort TJ ▼ across the fleet, no node headers" in lines[0]
        assert lines[1].startswith("NODE") and lines[2].startswith(hottest[1])
        # every GPU is still there, once
        assert len(table.rows) == 8 + 64 + 8 == len({r.key for r in table.rows})
        await pilot.press("U")
        utils = []
        for row in table.rows:
            if row.tree in ("", "┬"):
                metrics = list(app.fleet.snapshot(row.node).latest.gpus)
                members = [r.gpu for r in table.rows if r.node == row.node and r.physical == row.physical]
                utils.append(sum(m.util_pct for m in metrics if m.index in members) / len(members))
        assert utils == sorted(utils, reverse=True)
        await pilot.press("F")  # per node again
        assert table.rows[0].is_header and "per node" in _lines(app)[0]


async def test_sort_keys_are_in_the_help():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(140, 80)) as pilot:
        await prepare(pilot)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = {(r.keys, r.binding_id) for r in app.screen.rows}
        for key, binding_id in (("U", "sort-util"), ("M", "sort-vram"), ("W", "sort-power"), ("T", "sort-temp")):
            assert (key, binding_id) in rows
        assert ("C", "sort-clock") in rows and ("N", "sort-name") in rows and ("F", "sort-scope") in rows
        assert any("free, busy, hot" in r.keys for r in app.screen.rows)


async def test_free_busy_and_hot_filter_words():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        everything = {r.key for r in table.rows if r.gpu is not None}
        await pilot.press("slash", *"free", "enter")
        free = {r.key for r in table.rows if r.gpu is not None}
        # the ready instances' GPUs and the loading one on CPX 12 are never free; the ended one (SPX 5) leaves it free
        assert not free & {("mi300x-spx", g) for g in range(5)} and ("mi300x-cpx", 12) not in free
        assert ("mi300x-spx", 5) in free and ("mi300x-spx", 7) in free
        assert not any(k[0] == "mi355x" for k in free)  # an unmanaged vLLM holds all eight
        await pilot.press("escape", "slash", *"busy", "enter")
        busy = {r.key for r in table.rows if r.gpu is not None}
        assert busy | free == everything and not busy & free
        await pilot.press("escape", "slash", *"hot", "enter")
        warn = fmt.TEMP_JUNCTION[0]
        hot = {r.key for r in table.rows if r.gpu is not None}
        expected = {
            (s.name, m.index)
            for s in app.fleet.snapshots()
            for m in s.latest.gpus
            if (m.temp_junction_c or 0) >= warn or (m.temp_mem_c or 0) >= fmt.TEMP_MEM[0]
        }
        assert hot == expected
        assert "filter: hot" in _lines(app)[0]


async def test_a_filtered_cpx_tree_names_each_physical_gpu_on_screen():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        await pilot.press("slash", *"cpx free", "enter")
        rows = [r for r in table.rows if r.gpu is not None]
        assert rows and all(r.node == "mi300x-cpx" for r in rows)
        previous = None
        for row in rows:
            if row.physical != previous:
                assert row.tree in ("┬", "─"), row  # the first row of each physical GPU names it
            previous = row.physical
        text = screen_text(app)
        # the CPX node's first free GPUs: 10 and 11 on physical 1 (8, 9 busy, 12 holds an instance)
        assert " 1┬ 10 " in text and "1─ 11" not in text
        # the first row kept of physical GPU 1 shows its device-wide numbers (partition 8's)
        first = next(line for line in text.splitlines() if " 1┬ 10 " in line)
        assert "°" in first and "N/A" not in first


async def test_the_key_bar_follows_the_row_under_the_cursor():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)

        def bar() -> str:
            return _lines(app)[-1]

        table.select(("mi300x-spx", 4))  # a ready instance
        assert await wait_for(pilot, lambda: bar().lstrip().startswith("l Log  x Stop  b Bench"))
        table.select(("mi300x-spx", None))  # a node header
        assert await wait_for(pilot, lambda: bar().lstrip().startswith("P Partition  r Reconnect"))
        table.select(("mi300x-spx", 6))  # a GPU without an instance: the screen's keys only
        assert await wait_for(pilot, lambda: bar().lstrip().startswith("⏎ Detail"))
        table.select(("mi300x-cpx", 13))  # a failed instance: its log only
        assert await wait_for(pilot, lambda: bar().lstrip().startswith("l Log  ⏎"))
        table.select(("mi300x-spx", 5))
        await pilot.press("space", "space")
        assert await wait_for(pilot, lambda: bar().lstrip().startswith("✓ 2 marked  P Partition  esc Unmark"))
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: "marked" not in bar())


async def test_b_and_l_on_a_gpu_without_a_ready_instance_say_so_and_open_nothing():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)

        def said(text: str) -> bool:
            return any(text in str(n.message) for n in app._notifications)

        table.select(("mi300x-spx", 6))
        await pilot.press("b")
        assert await wait_for(pilot, lambda: said("no vLLM instance on mi300x-spx GPU 6 to benchmark"))
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("l")
        assert await wait_for(pilot, lambda: said("no vLLM instance on mi300x-spx GPU 6"))
        assert isinstance(app.screen, FleetScreen)
        # a loading instance: the dialog would have preselected another GPU's ready instance
        table.select(("mi300x-cpx", 12))
        await pilot.press("b")
        assert await wait_for(pilot, lambda: said("cpx-g12 on mi300x-cpx GPU 12 is loading"))
        assert isinstance(app.screen, FleetScreen)
        # a failed instance (CPX GPU 13): not ready either
        table.select(("mi300x-cpx", 13))
        await pilot.press("b")
        assert await wait_for(pilot, lambda: said("cpx-g13 on mi300x-cpx GPU 13 is failed"))
        assert isinstance(app.screen, FleetScreen)


async def test_keys_typed_right_after_slash_never_act_on_the_table():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await prepare(pilot)
        box = app.screen.query_one("#filter-input", Input)
        # as a terminal delivers "/free" pasted or typed fast: every key queued before any is handled
        for key in ("slash", "f", "r", "e", "e"):
            event = events.Key(key, "/" if key == "slash" else key)
            event.set_sender(app)
            app._driver.send_message(event)
        assert await wait_for(pilot, lambda: box.has_focus)
        await pilot.pause(0.2)
        # `e` did not open the events, `r` did not reconnect a node: the filter box had the keys
        assert isinstance(app.screen, FleetScreen)
        assert not any("reconnecting" in str(n.message) for n in app._notifications)
        assert await wait_for(pilot, lambda: box.value == "free"), box.value  # and none was lost


async def test_a_sorted_fleet_follows_the_live_numbers(live_app):
    app = live_app(("mi300x-spx",), pace=0.05)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) == 9)
        await pilot.press("W")

        def in_power_order() -> bool:
            power = {m.index: m.power_w for m in app.fleet.snapshot("mi300x-spx").latest.gpus}
            shown = [power[r.gpu] for r in table.rows if r.gpu is not None]
            return shown == sorted(shown, reverse=True)

        link = app.transports["mi300x-spx"]
        for wait in (7, 13, 23):  # the replay's numbers move: the order is taken again (at most once a second)
            link.flowing.set()
            start = app.fleet.frames_received("mi300x-spx")
            assert await wait_for(
                pilot, lambda start=start, wait=wait: app.fleet.frames_received("mi300x-spx") > start + wait
            )
            link.flowing.clear()  # hold still: the table must show this frame's order
            await pilot.pause(0.2)
            assert await wait_for(pilot, in_power_order, timeout=3)
        assert "POWER W▼" in screen_text(app)
