"""Baselines: every stored baseline (node, name, when, suite, ROCm then and now), the nodes
whose versions changed since they were last seen (the fleet's change mark), and for the
selected baseline what it holds or the report of a check run from here.

`c` runs the baseline's suite again on its node (the same service as `rocm-console baseline
check`: its own instance, started and stopped), showing its progress and then the report;
`a` acknowledges the node's changed versions (clears the mark). The commands do the same
from a shell, for cron and CI.

The baselines and node versions are the history's (the store, console/services/history.py),
read in a thread: while the store cannot be opened the title says so (history unavailable).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.baseline.report import CheckReport, render_markdown
from console.core.baseline.stats import REGRESSED
from console.core.text import one_line
from console.services.baseline import BaselineError, BaselineRunner, StoredBaseline, check_report
from console.services.node_versions import VersionsBook
from console.services.results import StoreError
from console.transport.base import TransportError
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.titled_table import titled_table
from console.ui.workers import run_named

COLUMNS = ("Node", "Baseline", "Saved", "Suite", "Points", "ROCm then", "Last check")
MAX_PROGRESS = 12  # progress lines kept on screen while a check runs


def row_texts(b: StoredBaseline, verdict: str | None) -> tuple[str, ...]:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(b.created))
    rocm = b.versions.rocm if b.versions is not None and b.versions.rocm else "?"
    points = ", ".join(r.point for r in b.runs)
    suite = b.suite_file.rsplit("/", 1)[-1]
    return (b.node, b.name, when, suite, points, rocm, verdict or "-")


def baseline_text(b: StoredBaseline, pending: list[str]) -> str:
    """What a baseline holds, and what moved on its node since the fleet last saw it."""
    lines = [f"[b]{escape(b.name)}[/b] on {escape(b.node)} · {escape(b.path)}"]
    for r in b.runs:
        ok = sum(1 for x in r.repeats if x is not None)
        lines.append(f"{escape(r.point)} ({r.kind}): {ok} of {len(r.repeats)} repeats")
    if pending:
        lines.append(f"[$text-warning]Δ {escape(b.node)} changed since it was last seen:[/]")
        lines += [f"  {escape(line)}" for line in pending[:8]]
        lines.append("[dim]a: acknowledge · c: check this baseline now[/dim]")
    else:
        lines.append("[dim]c: run the suite again and compare (its own instance, a few minutes)[/dim]")
    return "\n".join(lines)


def report_text(report: CheckReport) -> str:
    """The check's Markdown, as plain text (the table reads fine in a terminal)."""
    return render_markdown(report)


class BaselineScreen(Screen):
    CSS_PATH = Path(__file__).with_name("baseline.tcss")
    # no ids: not in the [keys] table (the help screen lists the keys of the main screens)
    BINDINGS = [
        Binding("escape,backspace", "back", "Back"),
        Binding("c", "check", "Check now"),
        Binding("a", "acknowledge", "Acknowledge change"),
    ]

    def __init__(
        self,
        store: Any = None,
        book: VersionsBook | None = None,
        *,
        runner: Callable[[], BaselineRunner] = BaselineRunner,
    ) -> None:
        """store: where the baselines are (list(); default: the app's history's); book: the
        node versions (default: the console's HealthWatch's, else the history's)."""
        super().__init__(id="baseline-screen")
        self.store = store
        self.book = book
        self.runner = runner
        self.loaded = False
        self.unavailable: str | None = None  # "history unavailable: ..." when the store cannot be opened
        self._marked: dict[str, str] = {}
        self._pending: dict[str, list[str]] = {}  # node -> its unacknowledged changes, as last read
        self._baselines: list[StoredBaseline] = []
        self._reports: dict[tuple[str, str], CheckReport] = {}
        self._progress: dict[tuple[str, str], list[str]] = {}
        self._checking: tuple[str, str] | None = None

    def compose(self) -> ComposeResult:
        yield from titled_table("baseline", COLUMNS)
        yield KeyBar()

    def _book(self) -> VersionsBook:
        """(In a thread: the history's book opens the store.)"""
        if self.book is not None:
            return self.book
        watch = getattr(self.app, "health_watch", None)
        return watch.versions if watch is not None else self._history().versions_book()

    def _history(self) -> Any:
        from console.ui.results_store import history_of

        return history_of(self.app)

    @property
    def where(self) -> str:
        root = getattr(self.store, "root", None)
        return str(root) if root is not None else self._history().where

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.reload()

    def reload(self) -> None:
        """Read the baselines and the nodes' changes again (a thread), then show them."""
        run_named(self, self._read, "baseline-read", thread=True, exclusive=True)

    def _read(self) -> None:
        try:
            store = self.store if self.store is not None else self._history().baselines
            baselines = store.list()
            book = self._book()
            marked = book.marked()
            pending = {b.node: book.pending(b.node) for b in baselines}
        except StoreError as exc:
            self.app.call_from_thread(self._show, [], {}, {}, f"history unavailable: {one_line(exc)}")
            return
        self.app.call_from_thread(self._show, baselines, marked, pending, None)

    def _show(
        self,
        baselines: list[StoredBaseline],
        marked: dict[str, str],
        pending: dict[str, list[str]],
        problem: str | None,
    ) -> None:
        self._baselines, self._marked, self._pending, self.unavailable = baselines, marked, pending, problem
        self.loaded = True
        self._draw()

    def _draw(self) -> None:
        marked = self._marked
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        for b in self._baselines:
            report = self._reports.get((b.node, b.name))
            verdict = "running…" if self._checking == (b.node, b.name) else (report.verdict if report else None)
            cells = [Text(t) for t in row_texts(b, verdict)]
            if b.node in marked:
                cells[0] = Text(f"Δ {b.node}", style="yellow")
            if report is not None:
                cells[-1].stylize("red" if report.verdict == REGRESSED else "green")
            table.add_row(*cells)
        if self._baselines and row is not None:
            table.move_cursor(row=min(row, len(self._baselines) - 1), animate=False)
        changed = f" · [$text-warning]Δ versions changed on {escape(', '.join(sorted(marked)))}[/]" if marked else ""
        if self.unavailable is not None:
            title = f" [b]Baselines[/b]: [$text-error]{escape(self.unavailable)}[/]"
        elif self._baselines:
            title = f" [b]Baselines[/b] {len(self._baselines)} in {escape(self.where)}{changed}"
        else:
            title = (
                f" [b]Baselines[/b]: none yet in {escape(self.where)}. Save one with "
                "`rocm-console baseline save NAME --node N --suite FILE`." + changed
            )
        self.query_one("#baseline-title", Static).update(title)
        self._show_detail()

    def selected(self) -> StoredBaseline | None:
        row = self.query_one(DataTable).cursor_row
        if not self._baselines or row is None or not 0 <= row < len(self._baselines):
            return None
        return self._baselines[row]

    def _show_detail(self) -> None:
        detail = self.query_one("#baseline-detail", Static)
        b = self.selected()
        if b is None:
            detail.update("")
            return
        key = (b.node, b.name)
        if key in self._progress and self._checking == key:
            detail.update("\n".join(escape(x) for x in self._progress[key][-MAX_PROGRESS:]))
        elif key in self._reports:
            detail.update(Text(report_text(self._reports[key])))
        else:
            detail.update(baseline_text(b, self._pending.get(b.node, [])))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_acknowledge(self) -> None:
        b = self.selected()
        if b is None:
            return
        watch = getattr(self.app, "health_watch", None)

        def acknowledge() -> None:
            try:
                count = (
                    watch.acknowledge(b.node)
                    if watch is not None and self.book is None
                    else self._book().acknowledge(b.node)
                )
            except (OSError, StoreError) as exc:
                self.app.call_from_thread(self.notify, one_line(exc), severity="error", markup=False)
                return
            note = f"{b.node}: {count} change{'s' if count != 1 else ''} acknowledged"
            self.app.call_from_thread(self.notify, note, markup=False)
            self._read()

        run_named(self, acknowledge, "baseline-acknowledge", thread=True)

    def action_check(self) -> None:
        b = self.selected()
        if b is None:
            return
        if self._checking is not None:
            self.notify(f"a check of {self._checking[1]} on {self._checking[0]} is running", markup=False)
            return
        self._checking = (b.node, b.name)
        self._progress[self._checking] = [f"checking {b.name} on {b.node}…"]
        self._draw()
        run_named(self, self._check(b), f"baseline-check:{b.node}:{b.name}", group="baseline-check")

    async def _check(self, b: StoredBaseline) -> None:
        key = (b.node, b.name)
        host = console_host(self.app)

        def say(line: str) -> None:
            self._progress[key].append(line)
            self._show_detail()

        runner = self.runner()
        try:
            node = host.fleet.spec(b.node)
            run = await runner.run(node, b.suite(), host.profile, suite_text=b.suite_text, say=say)
            self._reports[key] = check_report(b, run)
        except (BaselineError, TransportError, KeyError, ValueError) as exc:
            say(f"check failed: {' '.join(str(exc).split())}")
            self.notify(f"{b.name} on {b.node}: {exc}", title="baseline check", severity="error", markup=False)
        finally:
            self._checking = None
            await runner.pool.close()
            self._draw()
