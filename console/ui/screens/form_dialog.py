"""A modal form: labelled fields, an optional preview, an error line, Go and Cancel buttons.

Enter in a field moves to the next field (after the last one, to the Go button): only the
action key (ctrl+s, or the dialog's own binding of "submit") or the Go button submits, so
Enter typed at the end of a value never starts an instance or a 10-minute run (issue U2).
A form of a single field (a path to import) submits on Enter: there is nowhere to move.
Esc (each dialog binds it, with its own id for [keys]) or Cancel closes the form with None.
The dialog draws its own key bar over the screen's below it: its action key, Esc, the
field moves and its own extra keys, never the fleet's.

A dialog that names MEMORY (its name in the form memory) and MEMORY_FIELDS (ids of Inputs
and Selects) offers the values last run with for the chosen preset and node
(services/form_memory.py, beside the results store) and says where they came from in a dim
line under the fields; it calls remember_values() when it starts something. A subclass names its widgets' prefix
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
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, Static

from console.ui.widgets.key_bar import KeyBar

ResultType = TypeVar("ResultType")


FORM_CSS = Path(__file__).with_name("form_dialog.tcss")


class FormDialog(ModalScreen[ResultType]):
    CSS_PATH: ClassVar[str | PurePath | list[str | PurePath] | None] = FORM_CSS

    PREFIX: ClassVar[str] = ""  # the prefix of the form's widget ids (the default layout)
    TITLE_TEXT: ClassVar[str] = ""  # the box's title (box_title() may say more)
    SUBTITLE_TEXT: ClassVar[str] = ""  # blank: "^s <GO_LABEL> · Esc cancels"
    GO_LABEL: ClassVar[str] = "Run"
    PREVIEW: ClassVar[bool] = False  # a line under the fields saying what will happen
    GO_BUTTON: ClassVar[str] = ""  # id of the button that submits (default: {PREFIX}-go)
    FIRST_FIELD: ClassVar[str] = "Input"  # selector of the field focused when the form opens
    ERROR_LINE: ClassVar[str] = ""  # selector of the Static that says what is wrong (default: #{PREFIX}-error)
    MEMORY: ClassVar[str] = ""  # the dialog's name in the form memory ("" : it remembers nothing)
    MEMORY_FIELDS: ClassVar[tuple[str, ...]] = ()  # ids of the fields it remembers
    cursor_blink: bool | None = None  # None: the app's setting
    # The action key of every form (a dialog may bind "submit" to ctrl+s itself, with its [keys] id).
    BINDINGS = [Binding("ctrl+s", "submit", "Run (the dialog's action)", show=False, id="submit-form")]

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
            box.border_subtitle = self.SUBTITLE_TEXT or f"^s {self.GO_LABEL.lower()} · ↵ next field · Esc cancels"
            self._labels: dict[str, str] = {}
            with Grid(id=f"{p}-fields", classes="form-fields"):
                for label, field in self.fields():
                    if field.id:
                        self._labels[field.id] = label
                    yield Label(label)
                    yield field
            if self.MEMORY:
                yield Static(id=f"{p}-memory", classes="form-memory")
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
            # Typing in a field reached by Tab adds to its value: selecting it all on focus let
            # the first key typed wipe a value the person did not mean to touch (the Budget).
            box.select_on_focus = False
        self.query_one(self.FIRST_FIELD, Input).focus()
        self.mount(KeyBar(dialog=True, id=f"{self.PREFIX or 'form'}-keys"))
        if self.MEMORY:
            self._defaults = {w: self._field_text(w) for w in self.MEMORY_FIELDS}
            self.recall_values()
        self.form_mounted()

    def key_hints(self) -> list[tuple[str, str]]:
        """The key bar's first keys: the action key, Esc, the field moves (KeyBar(dialog=True))."""
        go = self._go_button()  # a prompt with its own buttons (Import, Export) names its action there
        label = str(go.label) if go is not None and self.GO_BUTTON else self.GO_LABEL
        return [("submit", label), ("cancel", "Cancel"), ("app.focus_next", "Next field (↵ too)")]

    def form_mounted(self) -> None:
        """Called once the first field has the focus: previews, hints."""

    # ------------------------------------------------------------ the values last used

    def memory_key(self) -> tuple[str, str] | None:
        """(preset, node) the fields are remembered for now; None: none chosen."""
        return None

    def _memory(self):
        from console.services.form_memory import FormMemory  # read when a dialog opens, not at start-up

        if getattr(self, "_form_memory", None) is None:
            self._form_memory = FormMemory()
            warning = self._form_memory.warning()
            if warning:
                self.app.notify(warning, title="form memory", severity="warning", markup=False)
        return self._form_memory

    def _field_text(self, widget_id: str) -> str:
        widget = self.query_one(f"#{widget_id}")
        if isinstance(widget, Input):
            return widget.value
        value = widget.value if isinstance(widget, Select) else None
        return "" if value is None or value == Select.BLANK else str(value)

    def _set_field(self, widget_id: str, text: str) -> None:
        widget = self.query_one(f"#{widget_id}")
        if isinstance(widget, Input):
            widget.value = text
        elif isinstance(widget, Select):
            for _, value in widget._options:
                if value != Select.BLANK and str(value) == text:
                    widget.value = value
                    break

    def recall_values(self) -> None:
        """Fill the remembered fields for the preset and node chosen now, the fields the person
        has not changed since the last fill only, and say where the values came from."""
        if not self.MEMORY:
            return
        chosen = self.memory_key()
        found = self._memory().recall(self.MEMORY, *chosen) if chosen is not None else None
        filled: dict[str, str] = getattr(self, "_filled", {})
        for widget_id in self.MEMORY_FIELDS:
            now = self._field_text(widget_id)
            if widget_id in filled and now != filled[widget_id]:
                continue  # typed by the person: theirs stays
            if found is not None and widget_id in found.values:
                self._set_field(widget_id, found.values[widget_id])
            elif widget_id in filled:
                self._set_field(widget_id, self._memory_default(widget_id))
            filled[widget_id] = self._field_text(widget_id)
        self._filled = filled
        self._recalled = found
        self.query_one(f"#{self.PREFIX}-memory", Static).update(self.memory_note(chosen, found))

    def _memory_default(self, widget_id: str) -> str:
        """What a field holds when nothing is remembered: its first value (blank for an Input)."""
        return getattr(self, "_defaults", {}).get(widget_id, "")

    def memory_note(self, chosen: tuple[str, str] | None, found) -> Text:
        """The dim line: 'last used 14:02 for tiny on n1 (Overrides)' / 'from preset tiny (none used on n1 yet)'."""
        if chosen is None:
            return Text("")
        preset, node = chosen
        if found is None:
            return Text(f"values: from preset {preset} (none used on {node} yet)", "dim")
        names = [self._label_of(w) for w in self.MEMORY_FIELDS if found.values.get(w)]
        which = f" ({', '.join(names)})" if names else ""
        return Text(f"values: last used {found.when()} for {preset} on {node}{which}", "dim")

    def _label_of(self, widget_id: str) -> str:
        labels = getattr(self, "_labels", {})
        return labels.get(widget_id, widget_id.split("-")[-1])

    def remember_values(self) -> None:
        """Keep the remembered fields' values for the preset and node chosen (a run starts)."""
        chosen = self.memory_key()
        if self.MEMORY and chosen is not None:
            values = {w: self._field_text(w) for w in self.MEMORY_FIELDS}
            self._memory().remember(self.MEMORY, *chosen, values)

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

    def _go_button(self) -> Button | None:
        found = self.query(f"#{self.GO_BUTTON or f'{self.PREFIX}-go'}")
        return found.first(Button) if found else None

    @on(Input.Submitted)
    def _field_submitted(self, event: Input.Submitted) -> None:
        """Enter in a field: the next field, or the Go button after the last (it starts nothing)."""
        event.stop()
        fields = [w for w in self.focus_chain if not isinstance(w, Button)]
        if len(fields) <= 1:
            self.submit()  # nowhere to move: the one value is the whole form
            return
        at = fields.index(event.input) if event.input in fields else -1
        if 0 <= at < len(fields) - 1:
            fields[at + 1].focus()
            return
        go = self._go_button()
        (go if go is not None and not go.disabled else fields[0]).focus()

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
