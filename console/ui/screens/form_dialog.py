"""A modal form: labelled fields, an optional preview, an error line, Go and Cancel buttons.

Enter in a field or the Go button submits; Esc (each dialog binds it, with its own id
for [keys]) or Cancel closes the form with None. A subclass names its widgets' prefix
(PREFIX: the ids `{PREFIX}-box`, `-fields`, `-preview`, `-error`, `-buttons`, `-go`,
`-cancel`), yields its fields as (label, widget) pairs and implements submit(): read the
fields, then dismiss with the answer, or show one line saying what is wrong so that
nothing typed is lost. The look is form_dialog.tcss, shared by every form.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import ClassVar, Iterable, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static

ResultType = TypeVar("ResultType")


FORM_CSS = Path(__file__).with_name("form_dialog.tcss")


class FormDialog(ModalScreen[ResultType]):
    CSS_PATH: ClassVar[str | PurePath | list[str | PurePath] | None] = FORM_CSS

    PREFIX: ClassVar[str] = ""  # the prefix of the form's widget ids (the default layout)
    TITLE_TEXT: ClassVar[str] = ""  # the box's title (box_title() may say more)
    SUBTITLE_TEXT: ClassVar[str] = "Enter runs · Esc cancels"
    GO_LABEL: ClassVar[str] = "Run"
    PREVIEW: ClassVar[bool] = False  # a line under the fields saying what will happen
    GO_BUTTON: ClassVar[str] = ""  # id of the button that submits (default: {PREFIX}-go)
    FIRST_FIELD: ClassVar[str] = "Input"  # selector of the field focused when the form opens
    ERROR_LINE: ClassVar[str] = ""  # selector of the Static that says what is wrong (default: #{PREFIX}-error)
    cursor_blink: bool | None = None  # None: the app's setting

    # ------------------------------------------------------------ layout

    def box_title(self) -> str:
        return self.TITLE_TEXT

    def fields(self) -> Iterable[tuple[str, Widget]]:
        """(label, field) pairs, top to bottom."""
        return ()

    def compose(self) -> ComposeResult:
        p = self.PREFIX
        with Vertical(id=f"{p}-box", classes="form-box") as box:
            box.border_title = self.box_title()
            box.border_subtitle = self.SUBTITLE_TEXT
            with Grid(id=f"{p}-fields", classes="form-fields"):
                for label, field in self.fields():
                    yield Label(label)
                    yield field
            if self.PREVIEW:
                yield Static(id=f"{p}-preview", classes="form-preview")
            yield Static(id=f"{p}-error", classes="form-error")
            with Horizontal(id=f"{p}-buttons", classes="form-buttons"):
                yield Button(self.GO_LABEL, variant="primary", id=f"{p}-go")
                yield Button("Cancel", id=f"{p}-cancel")

    def on_mount(self) -> None:
        blink = self.cursor_blink if self.cursor_blink is not None else getattr(self.app, "cursor_blink", True)
        for box in self.query(Input):
            box.cursor_blink = blink
        self.query_one(self.FIRST_FIELD, Input).focus()
        self.form_mounted()

    def form_mounted(self) -> None:
        """Called once the first field has the focus: previews, hints."""

    # ------------------------------------------------------------ reading the fields

    def typed(self, widget_id: str) -> str:
        """What is typed in the Input `#widget_id`."""
        return self.query_one(f"#{widget_id}", Input).value

    def choice(self, widget_id: str) -> object:
        """What is chosen in the Select `#widget_id` (Select.BLANK: nothing)."""
        return self.query_one(f"#{widget_id}", Select).value

    def show_preview(self, content: str | Text) -> None:
        self.query_one(f"#{self.PREFIX}-preview", Static).update(content)

    # ------------------------------------------------------------ answering

    def submit(self) -> None:
        """Read the fields; dismiss with the answer, or show_error() and stay open."""
        raise NotImplementedError

    def show_error(self, message: str, kind: str = "error") -> None:
        """One line under the fields; kind "busy" shows it as work under way, not as an error."""
        box = self.query_one(self.ERROR_LINE or f"#{self.PREFIX}-error", Static)
        box.update(Text(message))
        box.set_class(kind == "error" and bool(message), "-error")
        box.set_class(kind == "busy", "-busy")

    @on(Input.Submitted)
    def _field_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == (self.GO_BUTTON or f"{self.PREFIX}-go"):
            self.submit()
        else:
            self.action_cancel()

    def action_submit(self) -> None:
        self.submit()

    def action_cancel(self) -> None:
        self.dismiss(None)
