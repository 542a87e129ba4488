"""`?`: every key binding, with the id to remap it in the [keys] table of a profile."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from console.ui.widgets.key_bar import KeyBar


@dataclass(frozen=True, slots=True)
class KeyHelp:
    """One row of the help: where a key works, the keys (remapped), what it does, its [keys] id."""

    where: str
    keys: str
    action: str
    binding_id: str = ""


_INTRO = ' [b]Keys[/b]  ·  remap any key with an id in a profile:  [i]\\[keys] pause = "f9"[/i]  ·  Esc closes'


class HelpScreen(Screen):
    BINDINGS = [
        Binding("escape,question_mark", "close", "Close", id="close-help"),
    ]

    def __init__(self, rows: list[KeyHelp]) -> None:
        super().__init__(id="help-screen")
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield Static(_INTRO, id="help-intro")
        yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        # the id before the action: long actions never push it off a narrow terminal
        table.add_columns("Where", "Keys", Text("Id for [keys]"), "Action")
        for row in self.rows:
            # Text, not str: DataTable would read '[' in a key name as markup.
            table.add_row(*(Text(cell) for cell in (row.where, row.keys, row.binding_id, row.action)))
        table.focus()

    def action_close(self) -> None:
        self.app.pop_screen()
