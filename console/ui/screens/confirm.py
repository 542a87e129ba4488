"""A yes/no question over the current screen (stop an instance, forget one, reload a driver)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from console.ui.widgets.key_bar import KeyBar


class YesNoScreen(ModalScreen[bool]):
    """Dismisses with True (y, or the confirm button) or False (n, Esc, Cancel).

    A subclass gives its bindings (their ids are its [keys] entries), the prefix of its
    widgets' ids and which button has the focus first.
    """

    CSS_PATH = Path(__file__).with_name("confirm.tcss")
    PREFIX: ClassVar[str] = "confirm"
    FOCUS_YES: ClassVar[bool] = True

    def __init__(self, title: str, question: str, confirm: str = "OK", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.question = question
        self.confirm_label = confirm

    def compose(self) -> ComposeResult:
        p = self.PREFIX
        with Vertical(id=f"{p}-box", classes="yes-no-box") as box:
            box.border_title = self.title_text
            yield Static(self.question, id=f"{p}-question", classes="yes-no-question", markup=False)
            with Horizontal(id=f"{p}-buttons", classes="yes-no-buttons"):
                yield Button(f"{self.confirm_label} (y)", variant="error", id=f"{p}-yes")
                yield Button("Cancel (n)", id=f"{p}-no")
        yield KeyBar(dialog=True)  # the question's keys, over the bar of the screen below

    def on_mount(self) -> None:
        self.query_one(f"#{self.PREFIX}-{'yes' if self.FOCUS_YES else 'no'}", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == f"{self.PREFIX}-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def action_switch_button(self) -> None:
        self.focus_next(Button)


class ConfirmScreen(YesNoScreen):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
        Binding("left,right", "switch_button", "Switch button", show=False, id="confirm-switch"),
    ]

    def __init__(self, title: str, question: str, confirm: str = "OK") -> None:
        super().__init__(title, question, confirm, id="confirm-screen")
