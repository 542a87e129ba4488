"""The find-max points table as a person reads it (issue U2, seen in tmux on the demo): every
figure stands under its own heading. The goodput cell was drawn last, so under "good %" stood
the p99 TTFT, under "tok/J" the run id and under "run" a dash. And an empty budget says
"budget: empty" once, not "budget: budget: empty"."""

from __future__ import annotations

import re

from textual.widgets import Input

from console.ui.screens.find_max import FindMaxDialog, FindMaxScreen

from .conftest import screen_text, wait_for
from .test_find_max_ui import BENCH_TINY, NODE, VIEW, FakeService, Host, spec


def cell_under(header: str, row: str, heading: str) -> str:
    """The word of `row` that starts in the column where `heading` starts in `header`."""
    at = re.search(rf"(?<!\S){re.escape(heading)}(?!\S)", header).start()  # "run", not "runs"
    return row[at:].split()[0] if row[at:].strip() and row[at] != " " else "(blank)"


async def test_every_point_figure_stands_under_its_heading():
    screen = FindMaxScreen(NODE, VIEW, BENCH_TINY, spec(), service=FakeService(), redraw_interval=0.02)  # type: ignore[arg-type]
    app = Host(screen)
    async with app.run_test(size=(130, 36)) as pilot:
        assert await wait_for(pilot, lambda: screen.view.answer is not None)
        await pilot.pause(0.1)
        lines = screen_text(app).splitlines()
    header = next(line for line in lines if "p99 TTFT ms" in line and "tok/J" in line)
    first = next(line for line in lines if "run-1" in line)
    assert cell_under(header, first, "load") == "1"
    assert cell_under(header, first, "out tok/s") == "100.0"
    assert cell_under(header, first, "good %") == "-"  # no SLO in the budget: no goodput
    assert cell_under(header, first, "p99 TTFT ms") == "40.0"
    assert cell_under(header, first, "tok/J") == "unknown"
    assert cell_under(header, first, "run") == "run-1"


async def test_an_empty_budget_is_named_once():
    app = Host(FindMaxDialog(BENCH_TINY, VIEW, cursor_blink=False))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#find-max-budget", Input).value == ""  # the example is a placeholder
        await pilot.press("ctrl+s")
        await pilot.pause()
        text = screen_text(app)
    assert "budget: empty" in text and "budget: budget" not in text
