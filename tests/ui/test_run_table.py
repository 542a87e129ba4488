"""Issue Y: the history's table spans every run the store counted, draws the rows read and a
placeholder for each row whose page has not come yet, and its keys reach any row at once."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from console.ui.widgets.run_table import PLACEHOLDER, Column, RunTable

from .conftest import screen_text, wait_for

SIZE = (60, 10)  # 9 rows in view under the header


class TableHost(App):
    def __init__(self) -> None:
        super().__init__()
        self.moves: list[tuple[int, str | None]] = []
        self.wanted: list[int] = []

    def compose(self) -> ComposeResult:
        yield RunTable(id="runs")

    def on_mount(self) -> None:
        table = self.query_one(RunTable)
        table.set_columns([Column("mark", "", width=3), Column("name", "Name"), Column("tput", "tok/s", right=True)])
        table.add_rows(rows(0, 20))
        table.set_total(1000)
        table.focus()

    def on_run_table_cursor_moved(self, event: RunTable.CursorMoved) -> None:
        self.moves.append((event.row, event.key))

    def on_run_table_view_moved(self, event: RunTable.ViewMoved) -> None:
        self.wanted.append(event.bottom)


def rows(start: int, stop: int) -> list[tuple[str, list[str | Text], str]]:
    return [(f"run-{i}", ["", f"run {i}", f"{i * 10.5:.1f}"], "") for i in range(start, stop)]


def body(app: App) -> list[str]:
    """The rows in view, the scrollbar (the last two columns) left out."""
    lines = [line[: SIZE[0] - 2].rstrip() for line in screen_text(app).splitlines()[1 : SIZE[1]]]
    return [line for line in lines if line.strip()]


async def test_rows_read_then_placeholders_until_their_page_comes():
    app = TableHost()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.pause()
        assert (table.row_count, table.total) == (20, 1000)
        assert body(app)[0].split() == ["run", "0", "0.0"]
        await pilot.press("pagedown", "pagedown")  # rows 18..26 in view: 20..26 not read
        await pilot.pause()
        assert table.cursor_row == 18 and app.moves[-1] == (18, "run-18")
        shown = body(app)
        assert [line.split()[-1] for line in shown[:2]] == ["189.0", "199.5"]
        assert all(line.strip() == PLACEHOLDER for line in shown[2:]) and len(shown) == 9
        assert app.wanted[-1] == 26  # the owner is told which rows are in view
        table.add_rows(rows(20, 40))  # their page came: drawn in place of the placeholders
        await pilot.pause()
        assert body(app)[2].split() == ["run", "20", "210.0"]


async def test_end_and_home_reach_every_counted_row_at_once():
    app = TableHost()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 999 and app.moves[-1] == (999, None)  # not read yet
        assert body(app)[-1].strip() == PLACEHOLDER and app.wanted[-1] == 999
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and body(app)[0].split() == ["run", "0", "0.0"]


async def test_a_mark_redraws_its_row_and_a_click_moves_the_cursor():
    app = TableHost()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.pause()
        table.update_cell("run-2", "mark", Text("✓1", style="bold"))
        await pilot.click(RunTable, offset=(5, 4))  # the header, then rows 0..2: row 3
        assert await wait_for(pilot, lambda: table.cursor_row == 3)
        assert body(app)[2].split()[:2] == ["✓1", "run"] and str(table.get_row("run-2")[0]) == "✓1"
