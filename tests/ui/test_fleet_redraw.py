"""The fleet's table after a filter at 160×50: no chart glyph outside the rows' own chart cells
(the scrollbar beside the table draws whole cells, never the ▁..▇ ends that read as stray
sparkline cells), and nothing below the last row."""

from __future__ import annotations

from console.ui.widgets.gpu_table import GpuTable

from .conftest import screen_text, wait_for

SPARK = set("▁▂▃▄▅▆▇█")


def _strays(app) -> list[str]:
    """Lines of the table with a chart glyph past the rows' width or below the last row."""
    table = app.screen.query_one(GpuTable)
    lines = screen_text(app).splitlines()
    right = table.scrollable_content_region.right  # the rows end here; the scrollbar follows
    last = table.region.y + len(table.rows)  # the column titles' line, then one line per row
    out = []
    for y in range(table.region.y, table.region.bottom):
        line = lines[y]
        cells = line if y > last else line[right : table.region.right]
        if SPARK & set(cells):
            out.append(f"{y}: {line[-24:]!r}")
    return out


async def test_a_filter_leaves_no_chart_cells_beside_or_below_the_rows(live_app):
    app = live_app()
    async with app.run_test(size=(160, 50)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) > 60 and "▁" in screen_text(app), timeout=20)
        for words in ("free", "mi355x", "cpx busy", "hot", "spx"):
            await pilot.press("escape", "slash", *words, "enter")
            assert await wait_for(pilot, lambda w=words: table.filter_text == w)
            await pilot.pause(0.3)
            assert _strays(app) == [], (words, _strays(app), screen_text(app))
            await pilot.press("end")  # scrolled to the bottom: the thumb moves
            await pilot.pause(0.2)
            assert _strays(app) == [], (words, _strays(app), screen_text(app))
