"""A modal form: fields, an optional error line, Go and Cancel buttons.

Enter in a field or the Go button submits; Esc (each dialog binds it, with its own id
for [keys]) or Cancel closes the form with None. A subclass names its Go button, the
field focused first and its error line, and implements submit(): read the fields,
then dismiss with the answer, or show one line saying what is wrong so that nothing
typed is lost.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from rich.text import Text
from textual import on
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

ResultType = TypeVar("ResultType")


class FormDialog(ModalScreen[ResultType]):
    GO_BUTTON: ClassVar[str] = ""  # id of the button that submits
    FIRST_FIELD: ClassVar[str] = "Input"  # selector of the field focused when the form opens
    ERROR_LINE: ClassVar[str] = ""  # selector of the Static under the fields that says what is wrong
    cursor_blink: bool | None = None  # None: the app's setting

    def on_mount(self) -> None:
        blink = self.cursor_blink if self.cursor_blink is not None else getattr(self.app, "cursor_blink", True)
        for box in self.query(Input):
            box.cursor_blink = blink
        self.query_one(self.FIRST_FIELD, Input).focus()
        self.form_mounted()

    def form_mounted(self) -> None:
        """Called once the first field has the focus: previews, hints."""

    def submit(self) -> None:
        """Read the fields; dismiss with the answer, or show_error() and stay open."""
        raise NotImplementedError

    def show_error(self, message: str, kind: str = "error") -> None:
        """One line under the fields; kind "busy" shows it as work under way, not as an error."""
        box = self.query_one(self.ERROR_LINE, Static)
        box.update(Text(message))
        box.set_class(kind == "error" and bool(message), "-error")
        box.set_class(kind == "busy", "-busy")

    @on(Input.Submitted)
    def _field_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == self.GO_BUTTON:
            self.submit()
        else:
            self.action_cancel()

    def action_submit(self) -> None:
        self.submit()

    def action_cancel(self) -> None:
        self.dismiss(None)
