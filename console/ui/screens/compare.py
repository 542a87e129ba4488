"""Stored runs side by side (compare_table), deltas against the first run coloured
better / worse, and on `r` the seeds' published numbers for the same configuration.

The reference file (profiles/reference_numbers.toml) is read in a thread worker
the first time `r` is pressed; the result comes back as a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.core.errors import ProfileError
from console.core.results.compare import compare_table, workload_warning
from console.core.results.display import failed_note
from console.core.results.record import StoredRun
from console.core.results.reference import (
    ReferenceMatch,
    reference_as_run,
)
from console.ui.model.compare_view import REFERENCE_PATH, compare_cell, pick_references
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named


class CompareScreen(Screen):
    """runs: in column order (deltas against the first); show_reference: the seeds' numbers at once."""

    CSS_PATH = Path(__file__).with_name("compare.tcss")

    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="compare-back"),
        Binding("r", "toggle_reference", "Reference numbers", id="compare-reference"),
    ]

    @dataclass
    class ReferencesLoaded(Message):
        matches: list[ReferenceMatch] | None
        error: str | None = None

    def __init__(
        self,
        runs: Sequence[StoredRun],
        *,
        reference_path: Path | None = None,
        show_reference: bool = False,
        left_out: Sequence[StoredRun] = (),
    ) -> None:
        super().__init__(id="compare-screen")
        self.runs = list(runs)
        self.left_out = list(left_out)  # failed runs, not compared (their zeros are no data)
        self.workload_warning = workload_warning(self.runs)
        self.reference_path = reference_path or REFERENCE_PATH
        self.show_reference = show_reference
        self.matches: list[ReferenceMatch] | None = None  # None: not read yet
        self.reference_error: str | None = None
        self.rows: list[dict] = []

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title")
        yield Static(id="compare-warning", markup=False)
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True, fixed_columns=1)
        yield Static(id="compare-notes")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self._fill()
        if self.show_reference:
            self._load_references()

    # ------------------------------------------------------------ references

    def _load_references(self) -> None:
        runs, path = list(self.runs), self.reference_path

        def read() -> None:
            try:
                matches = pick_references(runs, path)
            except (ProfileError, OSError) as exc:
                self.post_message(self.ReferencesLoaded(None, " ".join(str(exc).split())))
            else:
                self.post_message(self.ReferencesLoaded(matches))

        run_named(self, read, "compare-references", exclusive=True, thread=True)

    def on_compare_screen_references_loaded(self, message: ReferencesLoaded) -> None:
        self.matches = message.matches if message.matches is not None else []
        self.reference_error = message.error
        if message.error:
            self.notify(message.error, title="reference numbers", severity="error", markup=False)
        self._fill()

    def action_toggle_reference(self) -> None:
        self.show_reference = not self.show_reference
        if self.show_reference and self.matches is None:
            self._load_references()
        self._fill()

    # ------------------------------------------------------------ drawing

    @property
    def columns(self) -> list[StoredRun]:
        refs = [reference_as_run(m.row) for m in self.matches or ()] if self.show_reference else []
        return self.runs + refs

    def _styles(self) -> dict[str, str]:
        variables = self.app.get_css_variables()
        return {
            "better": f"bold {variables.get('text-success', 'green')}",
            "worse": f"bold {variables.get('text-error', 'red')}",
            "same": "dim",
        }

    def _fill(self) -> None:
        columns = self.columns
        self.rows = compare_table(columns)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column(Text("Run"), key="label")
        for i, run in enumerate(columns):
            table.add_column(Text(run.id), key=f"col{i}")
        styles = self._styles()
        previous = None
        first_metric = None
        for n, row in enumerate(self.rows):
            if row["key"] == "id":
                continue
            if previous is not None and row["section"] != previous:
                table.add_row(*([Text("")] * (len(columns) + 1)), key=f"gap{n}")
            previous = row["section"]
            label = Text(row["label"], style="bold" if row["section"] == "metric" else "")
            table.add_row(label, *(compare_cell(row, i, styles) for i in range(len(columns))), key=f"row{n}")
            if first_metric is None and row["section"] == "metric":
                first_metric = table.row_count - 1
        if first_metric is not None:
            table.move_cursor(row=first_metric, animate=False)
        self.query_one("#compare-title", Static).update(self._title())
        warning = self.query_one("#compare-warning", Static)
        lines = [f"⚠ {self.workload_warning}"] if self.workload_warning else []
        if self.left_out:
            lines.append(failed_note(self.left_out))
        warning.update("\n".join(lines))
        warning.display = bool(lines)
        self.query_one("#compare-notes", Static).update(self._notes())

    def _title(self) -> Text:
        title = Text.assemble((" Compare ", "bold"), f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}")
        if len(self.runs) > 1 or self.show_reference:
            title.append(", deltas against the first: ")
            styles = self._styles()
            title.append("better", style=styles["better"])
            title.append(" or ")
            title.append("worse", style=styles["worse"])
        if self.show_reference:
            title.append(" · with the seeds' reference numbers (r hides them)")
        else:
            title.append(" · r adds the seeds' reference numbers")
        return title

    def _notes(self) -> Text:
        if not self.show_reference:
            return Text("")
        if self.matches is None:
            return Text("reading the reference numbers…")
        if self.reference_error:
            return Text(self.reference_error)
        if not self.matches:
            return Text(
                f"no reference numbers for this configuration in {self.reference_path.name} "
                "(a row needs the same model and concurrency or rate)"
            )
        lines = []
        for m in self.matches:
            note = f" (not verified: {', '.join(m.unverified)})" if m.unverified else ""
            lines.append(f"ref:{m.row.id} = seed {m.row.seed}, {m.row.section}{note}")
        return Text("\n".join(lines))

    def action_back(self) -> None:
        self.app.pop_screen()
