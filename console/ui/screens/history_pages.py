"""The history screen's reading: its filter as a store query, and the pages it reads (a thread).

The store does the filtering it can (`node:NAME`, `model:TEXT`, `label:NAME`, `preset:NAME`,
`since:7d`: indexed columns) and returns a page at a time, newest first; the filter's other
words (the list's own text: `c128`, a partition, a dataset) are matched against each page read,
so a filter never loads every run either: reading stops once a page of matches is found."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from console.core.results.display import FIND_MAX_KIND, is_reference
from console.core.results.record import StoredRun
from console.core.text import one_line
from console.services.results import StoreError
from console.ui.model.history_view import run_cells, run_haystack

if TYPE_CHECKING:
    from console.services.history import History

__all__ = ["AHEAD", "PAGE", "SCAN", "HistoryQuery", "Page", "answer_points", "only_added", "read_pages"]

PAGE = 200  # rows read at a time (a screen shows 20-50)
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
    cells: tuple[dict[str, str], ...] = ()  # their list cells (run_cells), made in the reading thread
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
            cells = tuple(run_cells(r) for r in hits)  # here, not on the event loop between keys
            yield Page(hits, cells, before, exhausted, last, total, matching, len(runs), errors)
            total = matching = None
            if last:
                return
    except StoreError as exc:
        yield Page(exhausted=True, unavailable=f"history unavailable: {one_line(exc)}")


def answer_points(runs: Sequence[StoredRun]) -> set[str]:
    """The runs that the find-max answers among `runs` report (their rows carry the answer)."""
    return {str(r.context.get("find_max_run")) for r in runs if r.context.get("run_kind") == FIND_MAX_KIND}


def only_added(new: Sequence[StoredRun], points: set[str]) -> bool:
    """Whether a page's runs go under the rows shown and leave those as they are: no find-max
    answer (folded onto its point's row), no point of one read before, no reference row (those
    go last); the screen then adds their rows, not every row again."""
    return not any(r.id in points or r.context.get("run_kind") == FIND_MAX_KIND or is_reference(r) for r in new)
