"""Issue Y: the history screen reads the store a page at a time (never every run to show a
page), reads the next page as the cursor nears the end, and filters in the store: `node:`,
`model:`, `label:`, `preset:`, `since:` are the store's query; other words are matched as pages
are read."""

from __future__ import annotations

import random

from textual.widgets import Static

from console.services.history import History
from console.ui.screens.history import HistoryScreen
from console.ui.screens.history_pages import AHEAD, PAGE, HistoryQuery
from tests.perf.store_scale import synthetic_run

from .conftest import wait_for
from .test_history_ui import Host

RUNS = 450


def stored(tmp_path, runs: int = RUNS, seed: int = 3) -> History:
    """A History over `runs` synthetic runs (store_scale.py's), in one transaction."""
    history = History(data_dir=tmp_path)
    store = history.open()
    rng = random.Random(seed)
    with store.db.transaction():
        for i in range(runs):
            store.runs.insert(synthetic_run(i, rng))
    return history


async def test_a_page_at_a_time_newest_first_and_the_next_as_the_cursor_nears_the_end(tmp_path):
    history = stored(tmp_path)
    app = Host(lambda: HistoryScreen(history))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        title = lambda: str(screen.query_one("#history-title", Static).render())  # noqa: E731
        assert await wait_for(pilot, lambda: screen.loaded)
        await pilot.pause()
        assert len(screen.runs) == PAGE == screen.table.row_count  # one page read, of 450
        assert screen.table.total == RUNS  # the rest: placeholders until their page is read
        assert f"{RUNS} runs, newest first" in title() and f"{PAGE} read" in title()
        created = [r.created for r in screen.runs]
        assert created == sorted(created, reverse=True)
        screen.table.move_cursor(row=PAGE - AHEAD)  # near the end of what is read: the next page
        assert await wait_for(pilot, lambda: len(screen.runs) == 2 * PAGE)
        assert screen.table.get_row_at(0) and screen.cursor_run == screen.runs[PAGE - AHEAD].id  # cursor kept
        await pilot.press("ctrl+end")  # the last of every run counted: the rest is read
        assert await wait_for(pilot, lambda: screen.exhausted and len(screen.runs) == RUNS)
        assert screen.table.cursor_row == RUNS - 1 and screen.cursor_run == screen.runs[-1].id
        created = [r.created for r in screen.runs]
        assert created == sorted(created, reverse=True) and len(set(r.id for r in screen.runs)) == RUNS
    history.close()


async def test_filters_go_to_the_store_and_other_words_are_matched_as_read(tmp_path):
    history = stored(tmp_path)
    node = history.runs.list_runs(limit=1)[0].context["node"]
    of_node = history.runs.count_runs(node=node)
    app = Host(lambda: HistoryScreen(history))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        title = lambda: str(screen.query_one("#history-title", Static).render())  # noqa: E731
        assert await wait_for(pilot, lambda: screen.loaded)
        screen.set_filter(f"node:{node}")
        assert await wait_for(pilot, lambda: f"{of_node} of {RUNS} runs" in title())
        assert len(screen.runs) == of_node and {r.context["node"] for r in screen.runs} == {node}
        screen.set_filter("since:100000d")  # every run: its first page replaces the rows of node:
        assert await wait_for(pilot, lambda: f"{RUNS} of {RUNS} runs" in title())
        assert [r.id for r in screen.runs] == [r.id for r in history.runs.list_runs(limit=PAGE)]
        screen.set_filter(f"node:{node} c256")  # the list's own text: matched in the pages read
        wanted = [r.id for r in history.runs.iter_runs(node=node) if r.setup.get("max_concurrency") == 256]
        assert await wait_for(pilot, lambda: screen.exhausted and [r.id for r in screen.runs] == wanted)
        assert f"{len(wanted)} of" in title()
        screen.set_filter("since:someday")
        assert await wait_for(pilot, lambda: "since:'someday': expected a duration" in title())
        assert screen.table.row_count == 0
    history.close()


def test_the_filter_words_the_store_takes():
    query = HistoryQuery.parse("node:mi300x-01 MODEL:llama c64 since:1h label: tp8", now=10_000.0)
    assert query.sql == {"node": "mi300x-01", "model": "llama", "since": 10_000.0 - 3600}
    assert query.words == ("c64", "tp8") and query.error is None  # `label:` still being typed: no filter
