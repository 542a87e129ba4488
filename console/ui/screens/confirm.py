"""A yes/no question over the current screen (stop an instance, forget one)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True (y, or the confirm button) or False (n, Esc, Cancel)."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
        Binding("left,right", "switch_button", "Switch button", show=False, id="confirm-switch"),
    ]

    def __init__(self, title: str, question: str, confirm: str = "OK") -> None:
        super().__init__(id="confirm-screen")
        self.title_text = title
        self.question = question
        self.confirm_label = confirm

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self.title_text
            yield Static(self.question, id="confirm-question", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.confirm_label} (y)", variant="error", id="confirm-yes")
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def action_switch_button(self) -> None:
        self.focus_next(Button)
