"""Stored benchmark runs (issue D's history, G's import): list, filter, mark, compare, export, import.

Newest first: date, node, model, partition, setup (dataset in/out, concurrency or
rate, prompts), completed/failed, output tok/s, median TTFT and ITL. `/` filters
(every word must match), space marks runs (the first marked is the baseline of
a comparison), `c` compares the marked runs (CompareScreen), `e` exports them
(JSON, CSV or Markdown), `i` imports result files or captured client output,
Enter opens a run's detail.

The runs are read from the store (console/services/history.py) a page at a time as the
cursor goes down (history_pages.py): opening it never reads every run. Every store call and
every file write runs in a thread worker; the results come back as this screen's messages
(workers never touch widgets).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import (
    Button,
    Input,
    RadioButton,
    RadioSet,
    Static,
)

from console.core.results.display import (
    energy_text,
    failed_note,
    failure_of,
    find_max_mark,
    format_value,
    is_reference,
    metric_label,
    reference_source,
    run_date,
    split_failed,
    title_of,
)
from console.core.results.offline import ACCURACY, accuracy_for, accuracy_text, run_kind, with_accuracy
from console.core.results.record import StoredRun
from console.services.results import ImportReport, StoreError
from console.ui.model.compare_view import REFERENCE_PATH
from console.ui.model.history_view import (
    COLUMNS,
    MARK_WIDTH,
    RIGHT,
    columns_for,
    default_export_name,
    expand_paths,
    export_folder,
    export_note,
    export_target,
    fit_table,
    import_summary,
    run_cells,
    stored_power_chart,
    target_note,
    write_export,
)
from console.ui.results_store import HistoryRuns, history_of
from console.ui.screens.compare import CompareScreen
from console.ui.screens.form_dialog import FORM_CSS, FormDialog
from console.ui.screens.history_pages import CAP, PAGE, HistoryQuery, Page, PageCache, read_pages, wanted_pages
from console.ui.widgets.bench_plots import LivePlot
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.run_table import Column, RunTable
from console.ui.workers import run_named

if TYPE_CHECKING:
    from console.services.history import History

# ---------------------------------------------------------------- prompts


HISTORY_CSS = Path(__file__).with_name("history.tcss")
# The store's words first (its indexed query), then any text the list shows (matched as read).
FILTER_HINT = "filter: node:NAME model:TEXT label:L preset:P since:7d, or any text: c64, a partition… (Esc clears)"
PROMPT_CSS: list[str | PurePath] = [FORM_CSS, HISTORY_CSS]  # the form's look, then the prompts' own


def _prompt_footer(help_text: str, go_label: str, prefix: str) -> Iterator[Widget]:
    """A prompt's help line, then its buttons (`#{prefix}-go`, `#{prefix}-cancel`)."""
    yield Static(help_text, classes="prompt-help", markup=False)
    yield Horizontal(
        Button(go_label, variant="primary", id=f"{prefix}-go"),
        Button("Cancel", id=f"{prefix}-cancel"),
        classes="prompt-buttons",
    )


class ImportPrompt(FormDialog["str | None"]):
    """Dismisses with the typed paths (files, folders, globs), or None."""

    GO_BUTTON = "import-go"
    CSS_PATH = PROMPT_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="import-cancel")]

    def __init__(self, value: str = "") -> None:
        super().__init__(id="history-import-prompt")
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Import results"
            box.border_subtitle = "Enter imports · Esc cancels"
            yield Input(
                self.value,
                placeholder="path(s): result JSON, captured bench output, folders, globs",
                id="import-path",
                compact=True,
            )
            yield from _prompt_footer(
                "vLLM --save-result JSON (any version, --append-result lines too) or the text "
                "output of vllm bench serve / benchmark_serving.py. Runs already stored are "
                "skipped as duplicates.",
                "Import",
                "import",
            )

    def submit(self) -> None:
        value = self.query_one(Input).value.strip()
        if value:
            self.dismiss(value)


class ExportPrompt(FormDialog["tuple[str, str] | None"]):
    """Dismisses with (format, absolute path) or None. The file name follows the format
    chosen, a relative name is taken in `folder` (the results folder), and the full path
    is shown before anything is written; the focus starts on the format."""

    GO_BUTTON = "export-go"
    CSS_PATH = PROMPT_CSS
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="export-cancel"),
        # Enter writes from the format choice too (a RadioSet would take it to toggle).
        Binding("enter", "submit", "Export", show=False, priority=True, id="export-go"),
    ]

    def __init__(self, count: int, fmt: str = "csv", path: str | None = None, *, folder: Path | None = None) -> None:
        super().__init__(id="history-export-prompt")
        self.count = count
        self.fmt = fmt
        self.folder = Path(folder) if folder is not None else Path.cwd()
        self.path = str(export_target(path or default_export_name(fmt), fmt, self.folder))

    @property
    def target(self) -> Path | None:
        """The file Enter would write (None while the name is empty)."""
        text = self.query_one("#export-path", Input).value.strip()
        return export_target(text, self.fmt, self.folder) if text else None

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = f"Export {self.count} run{'s' if self.count != 1 else ''}"
            box.border_subtitle = "Enter writes · Esc cancels"
            with RadioSet(id="export-format", compact=True):
                for fmt, label in (("json", "JSON"), ("csv", "CSV"), ("md", "Markdown")):
                    yield RadioButton(label, value=fmt == self.fmt, id=f"export-{fmt}")
            yield Input(
                self.path,
                placeholder=f"file to write (a bare name goes in {self.folder})",
                id="export-path",
                compact=True,
            )
            yield Static(id="export-target", classes="prompt-target", markup=False)
            yield from _prompt_footer(
                "JSON: every stored field. CSV: one row per run. Markdown: the runs and their "
                "metrics side by side with deltas against the first.",
                "Export",
                "export",
            )

    def form_mounted(self) -> None:
        self.query_one(RadioSet).focus()  # the choice made first; the name follows it
        self._show_target()

    def _show_target(self) -> None:
        target = self.target
        self.query_one("#export-target", Static).update(
            target_note(target) if target is not None else "type a file name"  # a taken name: the new one
        )

    @on(Input.Changed, "#export-path")
    def _path_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._show_target()

    @on(RadioSet.Changed)
    def _format_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        fmt = (event.pressed.id or "export-csv").removeprefix("export-")
        box = self.query_one("#export-path", Input)
        text = box.value.strip() or default_export_name(fmt)
        self.fmt = fmt
        followed = export_target(text, fmt, self.folder)
        if followed.name != Path(text).expanduser().name:  # the extension changed with the format
            box.value = str(Path(text).expanduser().with_name(followed.name))
        self._show_target()

    def action_submit(self) -> None:
        focused = self.focused
        if isinstance(focused, Button):
            focused.press()
        else:
            self.submit()

    def submit(self) -> None:
        target = self.target
        if target is not None:
            self.dismiss((self.fmt, str(target)))


# ---------------------------------------------------------------- run detail


def _facts(title: str, items: Sequence[tuple[str, str]]) -> Table:
    table = Table(
        title=title, title_justify="left", title_style="bold", show_header=False, box=None, padding=(0, 1), expand=False
    )
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in items:
        table.add_row(key, value)
    return table


class RunDetailScreen(Screen):
    """One stored run: every metric, the context, the setup, the live summary."""

    CSS_PATH = HISTORY_CSS
    BINDINGS = [Binding("escape,backspace", "back", "Back", id="run-detail-back")]

    def __init__(self, run: StoredRun) -> None:
        super().__init__(id="run-detail-screen")
        self.run = run
        self._telemetry_plot: LivePlot | None = None

    def compose(self) -> ComposeResult:
        run = self.run
        yield Static(
            Text.assemble(
                (" Run ", "bold"),
                run.id,
                f" · {run_date(run)} · {run.origin}",
                f" · label {run.label}" if run.label else "",
            ),
            id="run-title",
        )
        with VerticalScroll(id="run-body"):
            head = [("id", run.id), ("date", run_date(run)), ("origin", run.origin)]
            if run.label:
                head.append(("label", run.label))
            if run.source:
                part = run.context.get("source_part")
                head.append(("source", run.source + (f" ({part})" if part else "")))
            yield Static(_facts("Run", head), id="run-head")
            if run.metrics:
                yield Static(
                    _facts("Metrics", [(metric_label(k), format_value(k, v)) for k, v in run.metrics.items()]),
                    id="run-metrics",
                )
            setup = [(k, format_value(k, v)) for k, v in run.setup.items() if v is not None]
            if setup:
                yield Static(_facts("Setup", setup), id="run-setup")
            context = [
                (k, format_value(k, v)) for k, v in run.context.items() if v is not None and k not in ("source_part",)
            ]
            yield Static(
                _facts("Context", context)
                if context
                else Text(
                    "Context: not recorded (an imported file says nothing about the node, partition or serve flags)",
                    style="dim",
                ),
                id="run-context",
            )
            truth = energy_text(run)
            if truth:
                yield Static(Text("\n".join(truth)), id="run-energy")
            if run.telemetry is not None:
                self._telemetry_plot = LivePlot("GPU power W over the run", id="run-power")
                yield self._telemetry_plot
            if run.live:
                yield Static(
                    _facts(
                        "Live (from /metrics during the run)", [(k, format_value(k, v)) for k, v in run.live.items()]
                    ),
                    id="run-live",
                )
            if run.result is not None:
                arrays = [k for k, v in run.result.items() if isinstance(v, list)]
                if arrays:
                    yield Static(
                        Text(
                            f"Per-request arrays kept: {', '.join(arrays)} (rocm-console results show {run.id} --json)",
                            style="dim",
                        )
                    )
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#run-body").focus()
        if self._telemetry_plot is not None:
            traces, spans, title = stored_power_chart(self.run)
            self._telemetry_plot.replot(traces, 0.0, title, spans=spans)

    def action_back(self) -> None:
        self.app.pop_screen()


# ---------------------------------------------------------------- the list


class HistoryScreen(Screen):
    """The stored runs of `history` (default: the app's, ui/results_store.py history_of), read a
    page at a time, newest first: the first page when it opens, the next as the cursor nears
    the end of what is read. Filter words `node:`, `model:`, `label:`, `preset:` and `since:`
    are the store's query; other words are matched against each page read."""

    CSS_PATH = HISTORY_CSS

    BINDINGS = [
        Binding("escape", "back", "Back", id="history-back"),
        Binding("enter", "open_run", "Detail", id="history-open", priority=True),
        Binding("space", "mark", "Mark", id="history-mark"),
        Binding("c", "compare", "Compare", id="history-compare"),
        Binding("e", "export", "Export", id="history-export"),
        Binding("i", "import", "Import", id="history-import"),
        Binding("slash", "filter", "Filter", id="history-filter"),
        Binding("ctrl+r", "reload", "Reload", show=False, id="history-reload"),
    ]

    class PageLoaded(Message):
        """A page read for load `generation` (`last`: the last page that reading was asked for)."""

        def __init__(self, generation: int, page: Page, *, last: bool = True) -> None:
            super().__init__()
            self.generation = generation
            self.page = page
            self.last = last

    class ImportFinished(Message):
        def __init__(self, report: ImportReport | None, error: str | None = None) -> None:
            super().__init__()
            self.report = report
            self.error = error

    class ExportFinished(Message):
        def __init__(self, path: Path | None, count: int, error: str | None = None, asked: Path | None = None) -> None:
            super().__init__()
            self.path = path
            self.count = count
            self.error = error
            self.asked = asked  # the file asked for (path differs when that one existed)

    def __init__(
        self, history: History | HistoryRuns | None = None, *, reference_path: Path | None = None, page_cap: int = CAP
    ) -> None:
        super().__init__(id="history-screen")
        self._history = history.history if isinstance(history, HistoryRuns) else history
        self.reference_path = reference_path or REFERENCE_PATH
        self.page_cap = max(4, page_cap)  # at least the pages around the view (AHEAD each way)
        self.answers: dict[str, StoredRun] = {}  # find-max answers, by the id of the point they report
        self.marked: list[str] = []  # run ids, in the order they were marked
        self.loaded = False  # the first page is in
        self.exhausted = False  # every matching run is read
        self.total: int | None = None  # stored runs (the store's count)
        self.matching: int | None = None  # of them, those the store's part of the filter matches
        self.scanned = 0  # runs read for the filter's other words
        self.unavailable: str | None = None  # "history unavailable: ..." when the store cannot be opened
        self.load_errors: list[str] = []
        self.status = ""
        self.last_export: Path | None = None
        self.last_import: ImportReport | None = None
        self._export_choice: tuple[str, str] | None = None
        self.columns: tuple[tuple[str, str], ...] = ()  # shown (those that fit)
        self._data_columns: tuple[tuple[str, str], ...] = ()  # those the runs read have values for
        self._pages = PageCache(self.page_cap)  # the pages held, and what the reading knows
        self._marked_runs: dict[str, StoredRun] = {}  # marked runs stay when their page is dropped
        self._accuracy: list[StoredRun] = []  # the accuracy runs among the rows held (scores beside speeds)
        self._generation = 0
        self._loading = False
        self._query: HistoryQuery = HistoryQuery.parse("")

    @property
    def history(self) -> History:
        if self._history is None:
            self._history = history_of(self.app)
        return self._history

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        # titled_table's three widgets, with a table that draws only the rows in view (run_table.py)
        yield Static(id="history-title")
        yield RunTable(id="history-table")
        yield Static(id="history-detail")
        yield Static(id="history-status")
        yield Input(placeholder=FILTER_HINT, id="history-filter", compact=True)
        yield KeyBar()

    def _set_columns(self, table: RunTable, columns: tuple[tuple[str, str], ...]) -> None:
        self.columns = columns
        table.set_columns(
            [
                Column(key, label, right=key in RIGHT, width=MARK_WIDTH if key == "mark" else None)
                for key, label in columns
            ]
        )

    def on_mount(self) -> None:
        table = self.table
        self._set_columns(table, columns_for(()))
        self.query_one("#history-filter", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        table.focus()
        self._show_title()
        self.action_reload()

    @property
    def table(self) -> RunTable:
        return self.query_one("#history-table", RunTable)

    @property
    def filter_text(self) -> str:
        return self.query_one("#history-filter", Input).value.strip()

    # ------------------------------------------------------------ loading (a page at a time)

    def action_reload(self) -> None:
        """Read again from the newest run (the filter's query, the first page)."""
        self._generation += 1
        self._query = HistoryQuery.parse(self.filter_text)
        self._pages, self._accuracy = PageCache(self.page_cap, words=bool(self._query.words)), []
        self.exhausted = False
        self.scanned = 0
        self.load_errors = []
        self._loading = False
        self._data_columns = ()
        if self._query.error is not None:
            self.loaded, self.exhausted, self.answers = True, True, {}
            self._fill()
            return
        self._load_more(extra=0)

    @property
    def runs(self) -> list[StoredRun]:
        """The runs of the rows held, in row order (at most page_cap pages of them)."""
        return self._pages.runs()

    shown = runs  # the table's rows (the filter is applied as they are read)

    def runs_held(self) -> list[StoredRun]:
        """Every run record the screen holds: its pages', the marked and the find-max answers."""
        return list({id(r): r for r in (*self.runs, *self._marked_runs.values(), *self.answers.values())}.values())

    def _wanted(self, bottom: int = -1) -> list[int]:
        top, last = self.table.view_rows
        return wanted_pages(self.table.cursor_row, top, max(last, bottom), self._pages.known)

    def _load_more(self, bottom: int = -1, extra: int | None = None) -> None:
        """Read the pages wanted that are not held (in a thread worker), `extra` too."""
        if self._loading or (self.unavailable is not None and self.loaded):
            return
        wanted = self._wanted(bottom) if self._pages.layout is not None else []
        self._pages.touch(wanted)
        missing = [k for k in wanted if k not in self._pages]
        if extra is not None and extra not in self._pages and extra not in missing:
            missing.append(extra)
        missing = [k for k in missing if k < self._pages.known or self._pages.layout is None]
        if not missing:
            return
        self._loading = True
        generation, query, layout = self._generation, self._query, self._pages.layout
        pages = [self._pages.start(k) for k in missing]
        history, post = self.history, self.post_message

        def load() -> None:
            for n, page in enumerate(read_pages(history, query, layout, pages)):
                post(self.PageLoaded(generation, page, last=n == len(pages) - 1 or page.unavailable is not None))

        run_named(self, load, "history-load", exclusive=True, thread=True)

    def on_history_screen_page_loaded(self, message: PageLoaded) -> None:
        if message.generation != self._generation:
            return  # read for a filter since changed
        page = message.page
        if message.last:
            self._loading = False
        if page.unavailable is not None:
            self.unavailable = page.unavailable
            self.loaded = self.exhausted = True
            self._set_status(page.unavailable, error=True)
            self._fill()
            return
        self.unavailable = None
        if page.layout is not None:
            self.answers = page.layout.answers
            self.total, self.matching = page.layout.total, page.layout.matching
        if page.errors:
            self.load_errors += page.errors
            self._set_status(
                f"{len(self.load_errors)} stored run(s) could not be read: {self.load_errors[0]}", error=True
            )
        self._pages.took(page)
        self.exhausted, self.scanned = self._pages.done, self._pages.scanned
        first = not self.loaded or page.layout is not None
        self.loaded = True
        self._hold(page)
        if first:  # a new reading: its rows replace the last one's (the cursor stays on its run if there)
            self._fill(run=self.table.key_at(self.table.cursor_row) or "")
        else:
            self._append(page)
        if not self._loading:
            self._load_more()

    def _hold(self, page: Page) -> None:
        """Keep the page; the rows of those dropped (past page_cap) are placeholders again."""
        for gone in self._pages.hold(page, self._wanted()):
            self.table.drop_rows(gone.number * PAGE, gone.number * PAGE + len(gone.runs))
        self._accuracy = [r for r in self._pages.by_id.values() if run_kind(r) == ACCURACY]

    # ------------------------------------------------------------ drawing

    def _cells(self, runs: Sequence[StoredRun], texts: Sequence[dict[str, str]]) -> list[dict[str, str]]:
        all_cells = [dict(c) for c in texts] if len(texts) == len(runs) else [run_cells(r) for r in runs]
        for cell, acc in zip(all_cells, accuracy_for(runs, self._accuracy)):  # the instance's score beside its speed
            if accuracy_text(acc):
                cell["setup"] += f" [{accuracy_text(acc)}]"
        for run, cell in zip(runs, all_cells):
            if run.id in self.answers:
                cell["setup"] = f"{find_max_mark(self.answers[run.id])} · {cell['setup']}"
        return all_cells

    def _fill(self, run: str | None = None) -> None:
        """Every row held again (new columns, marks dropped, the width changed); the cursor on
        `run`'s row (the first row when it is not held), by default on the row it was."""
        table = self.table
        row = table.cursor_row if run is None else self._pages.rows.get(run, 0)
        # energy / client columns come with the first run that has them; a narrow terminal drops
        # the least important columns first (fit_table), never the key metrics
        pages = self._pages.ordered()
        keys = {key for key, _ in (*self._data_columns, *columns_for(self.runs))}
        self._data_columns = tuple(c for c in COLUMNS if c[0] in keys)
        cells = [self._cells(p.runs, p.cells) for p in pages]
        columns, _ = fit_table([c for page in cells for c in page], self.size.width or 120, self._data_columns)
        if columns != self.columns:
            self._set_columns(table, columns)
        else:
            table.clear()
        for page, page_cells in zip(pages, cells):
            self._add_rows(page, fit_table(page_cells, self.size.width or 120, self._data_columns)[1])
        self.table.set_total(self._pages.total)  # every row counted (with words: those found)
        table.move_cursor(row=row, animate=False)
        self._show_title()
        self._show_detail()

    def _append(self, page: Page) -> None:
        """A page's rows in their place; all again when they need other columns."""
        if page.runs:
            # the columns of the rows shown, and those these runs add (not every row looked at again)
            keys = {key for key, _ in (*self._data_columns, *columns_for(page.runs))}
            self._data_columns = tuple(c for c in COLUMNS if c[0] in keys)
            cells = self._cells(page.runs, page.cells)
            columns, fitted = fit_table(cells, self.size.width or 120, self._data_columns)
            if columns != self.columns:
                self._fill()
                return
            self._add_rows(page, fitted)
        self.table.set_total(self._pages.total)  # every row counted (with words: those found)
        self._show_title()
        self._show_detail()

    def _add_rows(self, page: Page, fitted: list[dict[str, str]]) -> None:
        keys, error = [key for key, _ in self.columns[1:]], self.app.get_css_variables().get("text-error", "red")
        rows = [
            (r.id, [self._mark_cell(r.id), *[c[k] for k in keys]], self._row_style(r, error))
            for r, c in zip(page.runs, fitted)
        ]
        self.table.add_rows(rows, start=page.number * PAGE)

    def _row_style(self, run: StoredRun, error: str) -> str:
        """Failed runs in the error colour; reference rows dim (published numbers, not runs here)."""
        return error if failure_of(run) is not None else "dim italic" if is_reference(run) else ""

    def _mark_cell(self, run_id: str) -> str | Text:
        return Text(f"✓{self.marked.index(run_id) + 1}", style="bold") if run_id in self.marked else ""

    def _show_title(self) -> None:
        self.query_one("#history-title", Static).update(self._title(), layout=False)  # one line high

    def _title(self) -> Text:
        title = Text.assemble((" Results ", "bold"))
        if self.unavailable is not None:
            title.append(self.unavailable, "bold red")
            return title
        if not self.loaded:
            title.append("reading…")
            return title
        total = self.total or 0
        if self._query.error is not None:
            title.append(self._query.error, "bold red")
            return title
        runs = f"run{'s' if total != 1 else ''}"
        if self.filter_text and self._query.words and not self.exhausted:  # matched as runs are read
            title.append(f"{self._pages.found} found in the newest {self.scanned} of {self.matching or 0} {runs}")
        else:
            if not self.filter_text:
                title.append(f"{total} {runs}, newest first")
            else:  # the store counted its part; the other words are matched in every run now read
                title.append(f"{self._pages.found if self._query.words else self.matching or 0} of {total} {runs}")
            if not self.exhausted:
                read = sum(min(PAGE, self._pages.found - k * PAGE) for k in self._pages.seen)
                title.append(f" · {read} read")
        if self._pages.layout is not None and self._pages.layout.references:  # (they go last: Layout)
            title.append(" · published reference rows last (dim)")
        if self.marked:
            title.append(f" · {len(self.marked)} marked")
        if self.filter_text:
            title.append(f" · filter {self.filter_text!r}")
        return title

    def _show_detail(self) -> None:
        # one line high (history.tcss): no layout pass for it at each cursor move
        self.query_one("#history-detail", Static).update(self._detail_text(), layout=False)

    def _detail_text(self) -> Text:
        run = self._run(self.cursor_run)
        if run is None:
            if self.unavailable is not None:
                return Text(self.unavailable)
            empty = self.loaded and self.exhausted and not self._pages.found and not self.filter_text
            if self.loaded and self.table.cursor_row < self.table.total:
                return Text("reading…", style="dim")  # a placeholder row: its page is on its way
            return Text("no stored results yet: i imports result files or bench output" if empty else "")
        parts = [run.id]
        if is_reference(run):  # where the numbers come from, not when they were imported
            return Text(" · ".join([run.id, reference_source(run)]))
        failure = failure_of(run)
        if failure is not None:
            parts.append(f"FAILED: {failure}")
        if run.label:
            parts.append(f"label {run.label}")
        if run.source:
            part = run.context.get("source_part")
            parts.append(f"from {os.path.basename(run.source)}" + (f" ({part})" if part else ""))
        elif run.origin == "console":
            title = title_of(run)  # the preset and what was overridden
            parts.append("run by the console" + (f": {title}" if title else ""))
        return Text(" · ".join(parts))

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status = text
        box = self.query_one("#history-status", Static)
        box.update(Text(text))
        box.set_class(error, "-error")

    def on_resize(self) -> None:
        if self.loaded:
            self._fill()

    def on_run_table_cursor_moved(self, event: RunTable.CursorMoved) -> None:
        self._show_detail()
        if self.loaded and not self._loading:
            self._load_more()

    def on_run_table_view_moved(self, event: RunTable.ViewMoved) -> None:
        if self.loaded and not self._loading:
            self._load_more(event.bottom)

    # ------------------------------------------------------------ selection

    @property
    def cursor_run(self) -> str | None:
        return self.table.key_at(self.table.cursor_row)

    def _run(self, run_id: str | None) -> StoredRun | None:
        if run_id is None:
            return None
        return self._pages.by_id.get(run_id) or self._marked_runs.get(run_id)

    def action_mark(self) -> None:
        run_id = self.cursor_run
        run = self._run(run_id)
        if run_id is None or run is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
            self._marked_runs.pop(run_id, None)
        else:
            self.marked.append(run_id)
            self._marked_runs[run_id] = run
        table = self.table
        for other in self.marked + [run_id]:  # numbers shift when one is unmarked
            if table.row_index(other) is not None:
                table.update_cell(other, "mark", self._mark_cell(other))
        if table.cursor_row + 1 < table.total:
            table.move_cursor(row=table.cursor_row + 1, animate=False)
        self._show_title()

    def _chosen(self) -> list[StoredRun]:
        """The marked runs in marking order, else the cursor's run."""
        runs = [r for r in (self._run(i) for i in self.marked) if r is not None]
        if not runs:
            run = self._run(self.cursor_run)
            runs = [run] if run is not None else []
        return runs

    def select_run(
        self,
        pick: Callable[[Sequence[StoredRun]], int | None],
        *,
        not_found: str = "not in the results store",
        pages: int = 20,
    ) -> None:
        """Move the cursor to the row `pick` chooses once it is read (reading up to `pages` more
        pages for it); a notification when it is not found."""

        def look(tries: int = 200) -> None:
            if not self.is_attached:
                return
            held = self.shown if self.loaded else []
            index = pick(held) if held else None
            if index is not None:
                self.table.move_cursor(row=self._pages.rows[held[index].id], animate=False)
                return
            if self.exhausted or not tries or len(self._pages.seen) > pages:
                if self.loaded:
                    self.app.notify(not_found, markup=False)
                return
            if self.loaded and not self._loading:
                unseen = next(k for k in range(len(self._pages.seen) + 1) if k not in self._pages.seen)
                self._load_more(extra=unseen)
            self.set_timer(0.05, lambda: look(tries - 1))

        look()

    # ------------------------------------------------------------ actions

    def action_open_run(self) -> None:
        box = self.query_one("#history-filter", Input)
        if box.has_focus:  # Enter in the filter keeps it and goes back to the list
            box.set_class(bool(box.value.strip()), "-open")
            self.table.focus()
            return
        run = self._run(self.cursor_run)
        if run is not None:
            self.app.push_screen(RunDetailScreen(run))

    def action_compare(self) -> None:
        runs = [r for r in (self._run(i) for i in self.marked) if r is not None]
        if not runs:
            self.notify(
                "mark runs with space, then c compares them (one marked run: with the seeds' reference numbers)",
                markup=False,
            )
            return
        runs, failed = split_failed(runs)
        if failed:  # a failed run's zeros would read as the best latency
            self.notify(failed_note(failed), title="compare", severity="warning", markup=False)
            if not runs:
                return
        runs = [with_accuracy(r, acc) for r, acc in zip(runs, accuracy_for(runs, self.runs))]
        self.app.push_screen(
            CompareScreen(runs, reference_path=self.reference_path, show_reference=len(runs) == 1, left_out=failed)
        )

    def action_export(self) -> None:
        runs = self._chosen()
        if not runs:
            self.notify("nothing to export: no stored runs", markup=False)
            return
        fmt, path = self._export_choice or ("csv", None)

        def chosen(answer: tuple[str, str] | None) -> None:
            if answer is not None:
                self._export_choice = answer
                self.export(runs, *answer)

        folder = export_folder(self._results_folder)
        self.app.push_screen(ExportPrompt(len(runs), fmt, path, folder=folder), chosen)

    @property
    def _results_folder(self) -> Path:
        return self.history.data_dir / "results"

    def export(self, runs: Sequence[StoredRun], fmt: str, path: str) -> None:
        """Write runs in a thread worker; ExportFinished reports the path."""
        runs = list(runs)
        folder = export_folder(self._results_folder)

        def write() -> None:
            try:
                target = write_export(runs, fmt, path, folder)
            except (OSError, ValueError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                self.post_message(self.ExportFinished(None, len(runs), f"{path}: {reason}"))
            else:
                self.post_message(self.ExportFinished(target, len(runs), asked=export_target(path, fmt, folder)))

        run_named(self, write, "history-export", thread=True)

    def on_history_screen_export_finished(self, message: ExportFinished) -> None:
        if message.error or message.path is None:
            self._set_status(f"export failed: {message.error}", error=True)
            self.notify(str(message.error), title="export failed", severity="error", markup=False)
            return
        self.last_export = message.path
        text = export_note(message.count, message.asked or message.path, message.path)
        self._set_status(text)
        self.notify(text, title="exported", markup=False)

    def action_import(self) -> None:
        def chosen(text: str | None) -> None:
            if text:
                self.import_paths(text)

        self.app.push_screen(ImportPrompt(), chosen)

    def import_paths(self, text: str) -> None:
        """Import what the text names (files, folders, globs) into the store, in a thread worker."""
        history = self.history
        self._set_status(f"importing {text}…")

        def run() -> None:
            try:
                report = history.runs.import_paths(expand_paths(text))
            except (OSError, ValueError, StoreError) as exc:
                self.post_message(self.ImportFinished(None, " ".join(str(exc).split())))
            else:
                self.post_message(self.ImportFinished(report))

        run_named(self, run, "history-import", thread=True)

    def on_history_screen_import_finished(self, message: ImportFinished) -> None:
        if message.report is None:
            self._set_status(f"import failed: {message.error}", error=True)
            self.notify(message.error or "import failed", title="import failed", severity="error", markup=False)
            return
        report = message.report
        self.last_import = report
        text = import_summary(report)
        failed = not report.imported and not report.duplicates
        self._set_status(text, error=failed)
        self.notify(text, title="import", severity="warning" if failed else "information", markup=False)
        self.action_reload()

    # ------------------------------------------------------------ filter and leaving

    def action_filter(self) -> None:
        box = self.query_one("#history-filter", Input)
        box.add_class("-open")
        box.focus()

    @on(Input.Changed, "#history-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.action_reload()  # the store is asked again: the filter's query, from the newest

    @on(Input.Submitted, "#history-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.set_class(bool(event.value.strip()), "-open")
        self.table.focus()

    def set_filter(self, text: str) -> None:
        box = self.query_one("#history-filter", Input)
        box.set_class(bool(text), "-open")
        if box.value != text:
            box.value = text  # its Changed reads again

    def action_back(self) -> None:
        """Esc: close the filter first, then drop the marks, then leave."""
        box = self.query_one("#history-filter", Input)
        if box.value or box.has_class("-open"):
            self.set_filter("")
            self.table.focus()
            return
        if self.marked:
            self.marked, self._marked_runs = [], {}
            self._fill()
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
