"""Issue Y: the history screen holds a bounded number of pages of runs. Ctrl+End reads the
oldest runs' page directly (by its position in the store), not every page before it; pages
out of view are dropped past the cap and read again when the view comes back; a mark stays on
its run when the run's page is dropped."""

from __future__ import annotations

from textual.widgets import Static

from console.ui.screens.history import HistoryScreen
from console.ui.screens.history_pages import PAGE

from .conftest import wait_for
from .test_history_paging import stored
from .test_history_ui import Host

RUNS = 3_000
CAP = 4  # pages (800 runs)


class Counted(HistoryScreen):
    """The screen, counting the run records it holds after each page it keeps."""

    most = 0
    most_rows = 0

    def _hold(self, page) -> None:
        super()._hold(page)
        Counted.most = max(Counted.most, len(self.runs_held()))
        Counted.most_rows = max(Counted.most_rows, self.table.row_count)


async def test_end_home_end_reach_the_oldest_and_newest_holding_at_most_the_cap(tmp_path):
    history = stored(tmp_path, RUNS, seed=5)
    newest = history.runs.list_runs(limit=1)[0].id
    oldest = [r.id for r in history.runs.iter_runs()][-1]
    app = Host(lambda: Counted(history, page_cap=CAP))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        detail = lambda: str(screen.query_one("#history-detail", Static).render())  # noqa: E731
        assert await wait_for(pilot, lambda: screen.loaded and screen.cursor_run == newest)
        assert screen.table.total == RUNS
        await pilot.press("space")  # the newest marked: its page will be dropped
        for _ in range(2):
            await pilot.press("ctrl+end")
            assert await wait_for(pilot, lambda: screen.cursor_run == oldest and detail().startswith(oldest))
            assert screen.table.cursor_row == RUNS - 1 and "1 marked" in str(
                screen.query_one("#history-title").render()
            )
            for _ in range(24):  # up through 800 rows: more pages than the cap
                await pilot.press("pageup")
                await pilot.pause(0.02)
            await pilot.press("ctrl+home")
            assert await wait_for(pilot, lambda: screen.cursor_run == newest and detail().startswith(newest))
            assert str(screen.table.get_row_at(0)[0]).strip() == "✓1"  # the mark came back with its page
        assert len(screen._pages.seen) < RUNS // PAGE  # the pages between were never read
        await pilot.press("ctrl+end")
        assert await wait_for(pilot, lambda: screen.cursor_run == oldest and detail().startswith(oldest))
        assert len(screen.runs) <= CAP * PAGE
    assert 0 < Counted.most <= CAP * PAGE + 1  # the pages held and the one marked run
    assert Counted.most_rows <= CAP * PAGE  # the table's rows (their cells) too
    history.close()


async def test_reference_rows_go_last_and_an_answer_marks_its_point_pages_away(tmp_path):
    """The layout comes from the store, not from the runs read: a reference row stored newest is
    the last row, and a find-max answer stored newest is no row but a mark on its point's row,
    hundreds of rows and pages below the first page."""
    from dataclasses import replace

    from console.core.results.reference import load_reference_numbers
    from console.services.demo import REFERENCE_PATH, reference_run

    from .test_history_find_max_answer import stored_search

    history = stored(tmp_path, 450, seed=9)
    points, answer_id = stored_search(history.runs)  # the oldest runs stored
    answer = history.runs.get(answer_id)
    history.runs.delete(answer_id)
    history.runs.save(replace(answer, created=2e9))  # now the newest (a search finished late)
    row = next(r for r in load_reference_numbers(REFERENCE_PATH) if r.kind == "serving")
    ref = history.runs.save(reference_run(row, REFERENCE_PATH.name))
    app = Host(lambda: HistoryScreen(history, page_cap=4))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        title = lambda: str(screen.query_one("#history-title", Static).render())  # noqa: E731
        detail = lambda: str(screen.query_one("#history-detail", Static).render())  # noqa: E731
        assert await wait_for(pilot, lambda: screen.loaded)
        assert screen.table.total == 450 + len(points) + 1  # the answer is no row
        assert screen.cursor_run not in (ref, answer_id) and "published reference rows last" in title()
        await pilot.press("ctrl+end")
        assert await wait_for(pilot, lambda: screen.cursor_run == ref and "published numbers" in detail())
        setup = [k for k, _ in screen.columns].index("setup")
        assert await wait_for(pilot, lambda: screen.table.row_index(points[-1]) is not None)
        assert str(screen.table.get_row(points[-1])[setup]).startswith("★ find-max")  # (max c8, as it fits)
        assert screen.table.row_index(points[-1]) == 450  # the newest point, under the 450 runs
        assert answer_id not in [r.id for r in screen.runs]
    history.close()


def test_a_page_read_after_the_page_above_equals_the_page_read_by_position(tmp_path):
    """Paging down reads after the last run of the page above (PostgreSQL walks the rows an
    OFFSET skips); a jump reads by position: both give the same rows."""
    from console.ui.screens.history_pages import HistoryQuery, layout_of, read_pages

    history = stored(tmp_path, 2 * PAGE + 50, seed=11)
    for text in ("", "since:1000d"):
        query = HistoryQuery.parse(text)
        layout = layout_of(history, query)
        by_position = list(read_pages(history, query, layout, [(k, k * PAGE, None) for k in range(3)]))
        chained = [by_position[0]]
        for k in (1, 2):
            [page] = read_pages(history, query, layout, [(k, k * PAGE, chained[-1].runs[-1].id)])
            chained.append(page)
        assert [[r.id for r in p.runs] for p in chained] == [[r.id for r in p.runs] for p in by_position]
        assert sum(len(p.runs) for p in by_position) == layout.rows
    history.close()
