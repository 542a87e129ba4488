"""The bottom key line: the screen's keys as text, repainted when they change, clickable."""

from __future__ import annotations

from textual.widgets import Footer, Input

from console.ui.widgets.gpu_table import GpuTable
from console.ui.widgets.key_bar import KeyBar

from .conftest import screen_text, wait_for


async def test_the_fleet_screen_lists_its_keys_on_the_last_line(live_app):
    app = live_app(("mi300x-spx",))
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: len(app.screen.query_one(GpuTable).rows) == 9)
        assert not app.screen.query(Footer)  # one line of text instead of a widget per key
        last = screen_text(app).splitlines()[-1]
        for words in ("/ Filter", "s Start vLLM", "? Help", "q Quit"):
            assert words in last, last
        assert last.rstrip().endswith("palette")  # the command palette key sits on the right


async def test_a_click_on_a_key_presses_it(live_app):
    app = live_app(("mi300x-spx",))
    async with app.run_test(size=(120, 36)) as pilot:
        bar = app.screen.query_one(KeyBar)
        assert await wait_for(pilot, lambda: bool(bar._hits))
        start, _, key = next(hit for hit in bar._hits if hit[2] == "slash")
        box = app.screen.query_one("#filter-input", Input)
        assert not box.has_focus
        await pilot.click(KeyBar, offset=(start + 1, 0))
        assert await wait_for(pilot, lambda: box.has_focus)  # `/` opened the filter


async def test_the_keys_follow_the_screen(live_app):
    app = live_app(("mi300x-spx",))
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: len(app.screen.query_one(GpuTable).rows) == 9)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: "Keys" in type(app.screen).__name__ or "Help" in type(app.screen).__name__)
        # the help screen's own keys, once its key bar has drawn
        assert await wait_for(pilot, lambda: "Filter" not in screen_text(app).splitlines()[-1])
        last = screen_text(app).splitlines()[-1]
        assert "s Start vLLM" not in last and last.strip()


async def test_the_fleet_settles_after_the_first_full_frame(live_app):
    app = live_app(("mi300x-spx", "mi300x-cpx"))
    async with app.run_test(size=(120, 36)) as pilot:
        assert not app.fleet_settled.is_set() or all(s.latest for s in app.fleet.snapshots())
        assert await wait_for(pilot, app.fleet_settled.is_set, timeout=5)
        assert all(s.latest is not None for s in app.fleet.snapshots())  # set once every node answered
