"""Layout experiments, live: every state file in the experiments folder, its progress over the
whole plan, the step running now, failed layouts, and for the selected one the best layout so
far per latency budget and its last events.

The runs themselves are `rocm-console experiment run` processes (unattended, resumable); this
screen only reads the state files they write after every step, once a second.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.experiment.report import build_report
from console.core.experiment.spec import ExperimentState, load_experiment
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.titled_table import titled_table

COLUMNS = ("Experiment", "Node", "Progress", "Now", "Failed layouts", "Updated")
MAX_FILES = 50


@dataclass(frozen=True, slots=True)
class Entry:
    path: Path
    state: ExperimentState
    mtime: float


def read_states(folder: Path) -> list[Entry]:
    """The readable state files of the folder, newest first (others are skipped: not ours)."""
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:MAX_FILES]
    except OSError:
        return []
    out = []
    for path in files:
        try:
            state = ExperimentState.from_dict(json.loads(path.read_text(encoding="utf-8")))
            out.append(Entry(path, state, path.stat().st_mtime))
        except (OSError, ValueError):
            continue
    return out


def progress_bar(done: int, planned: int, width: int = 12) -> str:
    if planned <= 0:
        return f"{done} done"
    filled = round(width * min(done, planned) / planned)
    return f"{'█' * filled}{'░' * (width - filled)} {done}/{planned}"


def row_texts(entry: Entry, now: float) -> tuple[str, ...]:
    s = entry.state
    ago = max(0, int(now - entry.mtime))
    current = "finished" if s.finished else (s.current or "waiting")
    return (
        s.experiment,
        s.node,
        progress_bar(len(s.done), s.planned),
        current,
        ", ".join(s.failed_layouts) or "",
        f"{ago // 60}m{ago % 60:02d}s ago" if ago < 3600 else f"{ago // 3600}h ago",
    )


def _energy(row) -> str:
    """' · 1.23 tokens/J · throttled 4.0 %' where the point recorded them (issue P)."""
    out = f" · {row.tokens_per_joule:.3g} tokens/J" if row.tokens_per_joule is not None else ""
    if row.throttled_pct is not None:
        out += f" · throttled {row.throttled_pct:.1f} %"
    return out


def detail_text(entry: Entry) -> str:
    s = entry.state
    lines = [f"[b]{escape(s.experiment)}[/b] on {escape(s.node)} · {escape(str(entry.path))}"]
    for key, reason in s.failed_layouts.items():
        lines.append(f"[red]{escape(key)}: {escape(reason)}[/red]")
    if s.file:
        try:
            report = build_report(load_experiment(s.file), s)
        except Exception as exc:  # the file moved or changed: the state still shows
            lines.append(f"[dim]{escape(s.file)}: {escape(' '.join(str(exc).split())[:200])}[/dim]")
        else:
            for w in report.winners:
                best = (
                    f"{w.row.layout} at {w.row.load_kind} {w.row.load:g}: {w.row.tok_s_per_node:.1f} tok/s per node"
                    + _energy(w.row)
                    if w.row
                    else "none meets it yet"
                )
                if w.efficient is not None and w.efficient is not w.row:
                    e = w.efficient
                    best += f"; most efficient {e.layout} at {e.load_kind} {e.load:g}{_energy(e)}"
                lines.append(f"budget {escape(w.budget.name)} ({escape(w.budget.describe())}): {escape(best)}")
            if report.pareto:
                front = ", ".join(f"{r.layout} @{r.load:g}{_energy(r)}" for r in report.pareto[:5])
                lines.append(f"Pareto front: {escape(front)}")
            bound = [r for r in report.rows if r.client_bound]
            if bound:
                lines.append(
                    "[red]client-bound: "
                    + escape(", ".join(f"{r.layout} @{r.load:g}" for r in bound[:5]))
                    + " (the benchmark client, not the server, set those numbers)[/red]"
                )
    for event in s.events[-6:]:
        lines.append(f"[dim]{escape(event)}[/dim]")
    return "\n".join(lines)


class ExperimentsScreen(Screen):
    # no id: not in the [keys] table (the help screen lists the keys of the main screens)
    BINDINGS = [Binding("escape,backspace", "back", "Back")]

    def __init__(self, folder: Path | None = None, *, refresh_every: float = 1.0) -> None:
        super().__init__(id="experiments-screen")
        if folder is None:
            from console.services.experiments import experiments_folder

            folder = experiments_folder()
        self.folder = folder
        self.refresh_every = refresh_every
        self._entries: list[Entry] = []
        self._drawn: tuple | None = None

    def compose(self) -> ComposeResult:
        yield from titled_table("experiments", COLUMNS)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.reload()
        self.set_interval(self.refresh_every, self.reload)

    def reload(self) -> None:
        self._entries = read_states(self.folder)
        now = time.time()
        rows = tuple(row_texts(e, now) for e in self._entries)
        running = sum(1 for e in self._entries if not e.state.finished)
        title = (
            f" [b]Layout experiments[/b] {len(self._entries)} in {escape(str(self.folder))}"
            + (f" · [$text-warning]{running} not finished[/]" if running else "")
            if self._entries
            else f" [b]Layout experiments[/b]: none yet in {escape(str(self.folder))}. "
            "Run one with `rocm-console experiment run FILE --node NODE`."
        )
        if (rows, title) != self._drawn:
            self._drawn = (rows, title)
            table = self.query_one(DataTable)
            row = table.cursor_row
            table.clear()
            for entry, texts in zip(self._entries, rows):
                cells = [Text(t) for t in texts]
                if entry.state.failed_layouts:
                    cells[4].stylize("red")
                cells[2].stylize("green" if entry.state.finished else "yellow")
                table.add_row(*cells)
            if rows and row is not None:
                table.move_cursor(row=min(row, len(rows) - 1), animate=False)
            self.query_one("#experiments-title", Static).update(title)
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        detail = self.query_one("#experiments-detail", Static)
        if not self._entries or row is None or not 0 <= row < len(self._entries):
            detail.update("")
            return
        detail.update(detail_text(self._entries[row]))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def action_back(self) -> None:
        self.app.pop_screen()
