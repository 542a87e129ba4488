"""V sorts the fleet by free VRAM, the most free first (no subtracting by hand), per node or
across the fleet; what `hot` means is said where the filter is described: the filter box's
hint and the help."""

from __future__ import annotations

from console.ui.model import format as fmt
from console.ui.screens.help import HelpScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for

HOT = f"TJ ≥ {fmt.TEMP_JUNCTION[0]:g}° or TMEM ≥ {fmt.TEMP_MEM[0]:g}°"


def _free_gib(app, table, row) -> float:
    """What the screen says of the row's physical GPU: total minus used over its partitions."""
    members = {r.gpu for r in table.rows if r.node == row.node and r.physical == row.physical}
    gpus = [m for m in app.fleet.snapshot(row.node).latest.gpus if m.index in members]
    return sum(m.vram_total_mib - m.vram_used_mib for m in gpus) / 1024


async def test_v_sorts_by_free_vram_the_most_free_first_and_again_reverses():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        table = app.screen.query_one(GpuTable)
        await pilot.press("V")
        assert "sort free VRAM ▼ per node" in screen_text(app).splitlines()[0]
        spx = [r for r in table.rows if r.node == "mi300x-spx" and r.gpu is not None]
        free = [_free_gib(app, table, r) for r in spx]
        assert free == sorted(free, reverse=True) and free[0] > free[-1]
        assert table.cursor_row.key == spx[0].key  # the cursor on the GPU with the most free
        await pilot.press("F")  # across the fleet: the freest physical GPU of every node first
        firsts = [r for r in table.rows if r.tree in ("", "┬")]
        fleet_free = [_free_gib(app, table, r) for r in firsts]
        assert fleet_free == sorted(fleet_free, reverse=True)
        await pilot.press("V")  # again: the least free first
        assert "sort free VRAM ▲" in screen_text(app).splitlines()[0]
        firsts = [r for r in table.rows if r.tree in ("", "┬")]
        assert [_free_gib(app, table, r) for r in firsts] == sorted(fleet_free)


async def test_the_hot_threshold_is_in_the_filter_hint_and_the_help():
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36)) as pilot:
        await prepare(pilot)
        await pilot.press("slash")
        assert await wait_for(pilot, lambda: f"hot ({HOT})" in screen_text(app)), screen_text(app)
        await pilot.press("escape", "question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        rows = app.screen.rows
        assert ("V", "sort-free") in {(r.keys, r.binding_id) for r in rows}
        await pilot.press(*["pagedown"] * 6)  # the filter box's words are near the end of the help
        assert await wait_for(pilot, lambda: HOT in screen_text(app)), screen_text(app)
