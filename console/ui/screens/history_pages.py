"""The history screen's reading: its filter as a store query, and the pages it reads (a thread).

The store does the filtering it can (`node:NAME`, `model:TEXT`, `label:NAME`, `preset:NAME`,
`since:7d`: indexed columns) and returns a page at a time, newest first; the filter's other
words (the list's own text: `c128`, a partition, a dataset) are matched against each page read,
so a filter never loads every run either: reading stops once a page of matches is found."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.coordinate import Coordinate
from textual.widgets import DataTable

from console.core.results.record import StoredRun
from console.core.text import one_line
from console.services.results import StoreError
from console.ui.model.history_view import run_haystack

if TYPE_CHECKING:
    from console.services.history import History

__all__ = ["AHEAD", "PAGE", "SCAN", "HistoryQuery", "Page", "RunsTable", "read_pages"]

PAGE = 200  # rows read at a time (a screen shows 20-50; adding rows re-renders those in view)
AHEAD = 150  # the next page is read when the cursor comes this close to the last row read (3 page keys)
SCAN = 500  # runs read at a time while the filter's words are matched against them
KEYS = ("node", "model", "label", "preset", "since")


@dataclass(frozen=True)
class HistoryQuery:
    """A filter's words: the store's part (`sql`, list_runs' keywords) and the rest (`words`)."""

    sql: dict[str, Any] = field(default_factory=dict)
    words: tuple[str, ...] = ()
    error: str | None = None  # a `since:` the console cannot read

    @classmethod
    def parse(cls, text: str, now: float | None = None) -> HistoryQuery:
        from console.core.events import parse_since

        sql: dict[str, Any] = {}
        words: list[str] = []
        for word in text.split():
            key, sep, value = word.partition(":")
            key = key.casefold()
            if not sep or key not in KEYS:
                words.append(word.casefold())
            elif not value:
                continue  # still being typed
            elif key == "since":
                try:
                    sql["since"] = parse_since(value, now)
                except ValueError as exc:
                    return cls(error=f"since:{one_line(exc)}")
            else:
                sql[key] = value
        return cls(sql, tuple(words))

    def matches(self, run: StoredRun) -> bool:
        if not self.words:
            return True
        hay = run_haystack(run)
        return all(word in hay for word in self.words)


@dataclass(frozen=True)
class Page:
    runs: tuple[StoredRun, ...] = ()  # matching runs, newest first
    before: str | None = None  # the last run read: the next page starts after it
    exhausted: bool = False  # nothing older matches
    last: bool = True  # the last page of this reading (more come when the cursor nears the end)
    total: int | None = None  # stored runs (the first page of a reading only)
    matching: int | None = None  # of them, those the store's part of the filter matches
    scanned: int = 0  # runs read for this page
    errors: tuple[str, ...] = ()  # stored runs that could not be read
    unavailable: str | None = None  # "history unavailable: ..." (the store cannot be opened)


def read_pages(history: History, query: HistoryQuery, before: str | None, *, first: bool) -> Iterator[Page]:
    """The pages of one reading (run in a thread): one of PAGE runs, or, while the filter has
    words of its own, pages of SCAN runs read until PAGE of them matched or none is left."""
    try:
        table = history.runs
        total = matching = None
        if first:
            total = table.count_runs()
            matching = table.count_runs(**query.sql) if query.sql else total
        found = 0
        while True:
            limit = SCAN if query.words else PAGE
            try:
                runs = table.list_runs(**query.sql, limit=limit, before=before)
            except KeyError:  # the run to page from was deleted meanwhile: start again
                yield Page(exhausted=True, total=total, matching=matching)
                return
            errors = tuple(table.errors)
            exhausted = len(runs) + len(errors) < limit or not runs
            if runs:
                before = runs[-1].id
            hits = tuple(r for r in runs if query.matches(r))
            found += len(hits)
            last = exhausted or found >= PAGE or not query.words
            yield Page(hits, before, exhausted, last, total, matching, len(runs), errors)
            total = matching = None
            if last:
                return
    except StoreError as exc:
        yield Page(exhausted=True, unavailable=f"history unavailable: {one_line(exc)}")


_AWAY = Coordinate(-1, -1)


class RunsTable(DataTable):
    """The history's table: a row cursor whose moves redraw two rows, not every row in view.

    DataTable keys a row's cached rendering by where the cursor and the mouse are, so after
    each move of the cursor a scroll (the cursor at the bottom, going down) renders every
    cell in view again. With a row cursor, a row is drawn the same wherever the cursor is
    unless it is on that row: rows away from it are rendered (and cached) as if it were
    nowhere, and a scrolling key renders the one new row and the cursor's. Rows not yet in
    view are rendered ahead between keys (warm_ahead), so a page key finds most of them."""

    WARM_ROWS = 4  # rows rendered ahead per step (a few ms: a key waits for one step at most)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._warm_generation = 0

    def warm_ahead(self) -> None:
        """Render the screenful below the view, and the one above, a few rows per step while
        nobody types: a page key then draws rows already rendered. A key (a new call) stops it."""
        self._warm_generation += 1
        generation = self._warm_generation
        height = max(1, self.size.height)
        top = int(self.scroll_y)
        rows = [*range(top + height, top + 2 * height), *range(max(0, top - height), top)]
        rows = [r for r in rows if r < self.row_count]

        def step() -> None:
            if generation != self._warm_generation or not self.is_attached:
                return
            style = self.rich_style
            for row in rows[: self.WARM_ROWS]:
                if row < self.row_count:  # (cleared meanwhile: a new reading)
                    key = self._row_locations.get_key(row)
                    self._render_line_in_row(key, 0, style, self.cursor_coordinate, self.hover_coordinate)
            del rows[: self.WARM_ROWS]
            if rows:
                self.set_timer(0.005, step)

        self.set_timer(0.05, step)

    def _render_line_in_row(self, row_key, line_no, base_style, cursor_location, hover_location):  # noqa: ANN001, ANN202 - DataTable's
        if self.cursor_type == "row" and row_key in self._row_locations:
            row = self._row_locations.get(row_key)
            if cursor_location.row != row:
                cursor_location = _AWAY
            if hover_location.row != row:
                hover_location = _AWAY
        return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
