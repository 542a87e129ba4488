"""The history screen's reading: its filter as a store query, and the pages it reads (a thread).

The store does the filtering it can (`node:NAME`, `model:TEXT`, `label:NAME`, `preset:NAME`,
`since:7d`: indexed columns) and returns any page directly (row N is in page N // PAGE, read by
its position), newest first; the filter's other words (the list's own text: `c128`, a
partition, a dataset) are matched against the runs read from a page's start, so a filter never
loads every run either: reading stops once a page of matches is found. The screen holds at
most CAP pages; a page dropped is read again when the view comes back to it."""

from __future__ import annotations

from collections import OrderedDict
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

__all__ = ["AHEAD", "CAP", "PAGE", "SCAN", "HistoryQuery", "Layout", "Page", "PageCache", "read_pages", "wanted_pages"]

PAGE = 200  # rows read at a time (a screen shows 20-50)
AHEAD = 150  # the next page is read when the cursor comes this close to the last row read (3 page keys)
SCAN = 500  # runs read at a time while the filter's words are matched against them
CAP = 16  # pages of runs the screen holds at most (3,200 runs, ~15 KB each): those around the view first
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
class Layout:
    """A reading's rows: the runs the store's part of the filter matches, newest first, less the
    find-max answers shown on their point's row, then the published reference rows (last).
    Both are few: the store finds them by its own columns (RunTable.side_runs)."""

    total: int = 0  # stored runs
    matching: int = 0  # of them, those the store's part of the filter matches
    made: int = 0  # rows before the reference rows
    references: tuple[str, ...] = ()  # their ids, newest first
    folded: tuple[str, ...] = ()  # answers shown on their point's row (no row of their own)
    answers: dict[str, StoredRun] = field(default_factory=dict)  # those answers, by their point's id

    @property
    def rows(self) -> int:
        return self.made + len(self.references)

    @property
    def pages(self) -> int:
        return -(-self.rows // PAGE)


@dataclass(frozen=True)
class Page:
    number: int = 0  # rows number*PAGE on
    runs: tuple[StoredRun, ...] = ()  # its rows' runs, in order
    cells: tuple[dict[str, str], ...] = ()  # their list cells (run_cells), made in the reading thread
    next: int = 0  # with the filter's own words: the position in the store the next page starts from
    exhausted: bool = False  # with the filter's own words: nothing older matches
    layout: Layout | None = None  # the first page of a reading
    scanned: int = 0  # runs read for this page
    errors: tuple[str, ...] = ()  # stored runs that could not be read
    unavailable: str | None = None  # "history unavailable: ..." (the store cannot be opened)


class PageCache:
    """The pages a screen holds: at most `cap`, the least recently wanted dropped first, never
    one the view wants now; and their runs by id, with their rows."""

    def __init__(self, cap: int = CAP, *, words: bool = False) -> None:
        self.cap = cap
        self.words = words  # the filter has words of its own: pages of matches, known one after another
        self.pages: OrderedDict[int, Page] = OrderedDict()
        self.by_id: dict[str, StoredRun] = {}
        self.rows: dict[str, int] = {}
        self.layout: Layout | None = None  # the reading's rows (counted by the store)
        self.seen: set[int] = set()  # pages read in this reading
        self.starts: list[int] = [0]  # with words: where each page starts in the layout
        self.found = 0  # rows known (with words: the matches found)
        self.scanned = 0  # runs read for the pages seen
        self.done = False  # every page was read (with words: nothing older matches)

    @property
    def known(self) -> int:
        """Pages that can be read now."""
        return self.layout.pages if self.layout is not None and not self.words else len(self.starts)

    @property
    def total(self) -> int:
        """Rows the table spans: every row counted (with words: the matches found)."""
        return self.found if self.words or self.layout is None else self.layout.rows

    def start(self, number: int) -> tuple[int, int, str | None]:
        """(number, where the page starts, the run of the row above it when that page is held whole)."""
        if self.words:
            return number, self.starts[number], None
        above = self.pages.get(number - 1)
        whole = above is not None and len(above.runs) == PAGE and not above.errors
        return number, number * PAGE, above.runs[-1].id if whole and above is not None else None

    def took(self, page: Page) -> None:
        """What a page read tells: the layout, the next page's start, whether all is read."""
        k = page.number
        self.layout = page.layout or self.layout
        if k not in self.seen:
            self.seen.add(k)
            self.scanned += page.scanned
        if self.words:
            if k == len(self.starts) - 1 and not page.exhausted:
                self.starts.append(page.next)
            self.done = self.done or (page.exhausted and k == len(self.starts) - 1)
        else:
            self.done = len(self.seen) >= (self.layout.pages if self.layout else 0)
        self.found = max(self.found, k * PAGE + len(page.runs))

    def runs(self) -> list[StoredRun]:
        """The runs held, in row order."""
        return [r for k in sorted(self.pages) for r in self.pages[k].runs]

    def ordered(self) -> list[Page]:
        return [self.pages[k] for k in sorted(self.pages)]

    def __contains__(self, number: int) -> bool:
        return number in self.pages

    def touch(self, numbers: Sequence[int]) -> None:
        for k in numbers:
            if k in self.pages:
                self.pages.move_to_end(k)  # kept before the pages out of view

    def hold(self, page: Page, wanted: Sequence[int]) -> list[Page]:
        """Keep `page` (instead of the one of its number held before); the pages dropped."""
        old = self.pages.pop(page.number, None)
        if old is not None:
            self._forget(old)
        self.pages[page.number] = page
        for n, run in enumerate(page.runs, page.number * PAGE):
            self.by_id[run.id], self.rows[run.id] = run, n
        keep = {*wanted, page.number}
        dropped = [k for k in self.pages if k not in keep][: max(0, len(self.pages) - self.cap)]
        out = [self.pages.pop(k) for k in dropped]
        for gone in out:
            self._forget(gone)
        return out

    def _forget(self, page: Page) -> None:
        for run in page.runs:
            if self.by_id.get(run.id) is run:
                del self.by_id[run.id], self.rows[run.id]


def wanted_pages(cursor: int, top: int, bottom: int, known: int) -> list[int]:
    """The pages of rows the cursor and the view need (AHEAD rows each way; `known`: pages
    that can be read), the cursor's first."""
    lo, hi = max(0, min(cursor, top) - AHEAD), max(cursor, bottom) + AHEAD
    return sorted(range(lo // PAGE, min(hi // PAGE, known - 1) + 1), key=lambda k: abs(k - cursor // PAGE))


def layout_of(history: History, query: HistoryQuery) -> Layout:
    """Counts and the runs shown apart (a few queries over indexed columns, no run read but those)."""
    table = history.runs
    total = table.count_runs()
    matching = table.count_runs(**query.sql) if query.sql else total
    side = table.side_runs(**query.sql)
    references = tuple(r.id for r in side if is_reference(r))
    found = [r for r in side if r.context.get("run_kind") == FIND_MAX_KIND and not is_reference(r)]
    points = sorted({p for r in found if isinstance(p := r.context.get("find_max_run"), str)})
    present = {r.id for r in table.list_runs(**query.sql, only=points, limit=len(points))} if points else set()
    answers: dict[str, StoredRun] = {}
    for run in found:  # newest first: the newest answer of a point is its mark (fold_find_max_answers)
        point = run.context.get("find_max_run")
        if isinstance(point, str) and point in present and point not in references:
            answers.setdefault(point, run)
    folded = tuple(a.id for a in answers.values())
    return Layout(total, matching, max(0, matching - len(references) - len(folded)), references, folded, answers)


def _span(
    history: History, query: HistoryQuery, layout: Layout, start: int, n: int, after: str | None = None
) -> tuple[list[StoredRun], list]:
    """Rows start..start+n-1 of the layout: the runs made here by position (OFFSET over the
    index; after the run `after`, row start-1, when the page above is held: PostgreSQL walks
    the rows an OFFSET skips), then the reference rows."""
    table = history.runs
    runs: list[StoredRun] = []
    errors: list[str] = []
    if start < layout.made:
        apart, limit = (*layout.references, *layout.folded), min(n, layout.made - start)
        tail = layout.made - start - limit  # rows under the page: fewer than above it near the end
        try:
            if after is None and tail < start:  # End: read from the oldest (an OFFSET walks what it skips)
                found = table.list_runs(**query.sql, limit=limit, offset=tail, without=apart, oldest_first=True)
                runs += found[::-1]
            else:
                runs += table.list_runs(
                    **query.sql, limit=limit, before=after, offset=0 if after else start, without=apart
                )
        except KeyError:  # that run was deleted meanwhile: by position
            runs += table.list_runs(**query.sql, limit=limit, offset=start, without=apart)
        errors += table.errors
    end = start + n
    if end > layout.made and layout.references:
        first = max(start, layout.made)
        runs += table.list_runs(**query.sql, limit=end - first, offset=first - layout.made, only=layout.references)
        errors += table.errors
    return runs, errors


def read_pages(
    history: History, query: HistoryQuery, layout: Layout | None, pages: Sequence[tuple[int, int, str | None]]
) -> Iterator[Page]:
    """Pages (number, where it starts in the layout, the run of the row above it if known) of one
    reading, in a thread: PAGE rows each;
    with the filter's own words, PAGE of those that match, read SCAN at a time from its start."""
    try:
        for number, start, after in pages:
            first = layout is None
            if layout is None:
                layout = layout_of(history, query)
            if not query.words:
                runs, errors = _span(history, query, layout, start, PAGE, after)
                cells = tuple(run_cells(r) for r in runs)  # here, not on the event loop between keys
                yield Page(
                    number,
                    tuple(runs),
                    cells,
                    start + PAGE,
                    start + PAGE >= layout.rows,
                    layout if first else None,
                    len(runs),
                    tuple(errors),
                )
                continue
            hits: list[StoredRun] = []
            errors, at, done = [], start, False
            while len(hits) < PAGE and not done:
                runs, errs = _span(history, query, layout, at, SCAN)
                errors += errs
                done = at + SCAN >= layout.rows
                for i, run in enumerate(runs):
                    if query.matches(run):
                        hits.append(run)
                        if len(hits) == PAGE:  # the next page starts after this one's last match
                            done, at = at + i + 1 >= layout.rows, at + i + 1 - SCAN
                            break
                at += SCAN
            cells = tuple(run_cells(r) for r in hits)
            yield Page(
                number,
                tuple(hits),
                cells,
                min(at, layout.rows),
                done,
                layout if first else None,
                min(at, layout.rows) - start,
                tuple(errors),
            )
    except StoreError as exc:
        yield Page(exhausted=True, unavailable=f"history unavailable: {one_line(exc)}")
