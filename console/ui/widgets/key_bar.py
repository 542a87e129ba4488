"""KeyBar: the bottom line of key hints, drawn as one line of text.

Textual's Footer builds one widget per key and builds them all again whenever the
screen's bindings change (focus moves, a screen opens, an action becomes
available): ~25 ms of style work each time on a small machine, right when the
console starts and on every screen switch. This bar only renders text from the
screen's active bindings (the same ones the Footer shows: `show=True`, disabled
ones dimmed, the command palette key on the right) and repaints itself when they
change; a click on a key presses that key.

A screen with a `key_hints()` method (the fleet) puts the keys of the row under its cursor
first: [(action, description)], each drawn with the key bound to that action now (a [keys]
remap shows), or as a label when the action is "" (e.g. how many GPUs are marked). The
screen calls refresh() when they change.

A dialog's bar (dialog=True, docked over the screen under it) shows only the dialog's own
keys: its hints (action key, Esc, field moves) and the bindings the dialog itself defines,
never the app's or the screen's below it (issue U2: the start dialog showed the fleet's keys).
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import ActiveBinding
from textual.widget import Widget


class KeyBar(Widget):
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--disabled"}

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-description-foreground;
    }
    KeyBar > .key-bar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .key-bar--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    KeyBar > .key-bar--disabled {
        color: $footer-description-foreground 40%;
    }
    """

    def __init__(self, *, id: str | None = None, dialog: bool = False) -> None:
        super().__init__(id=id)
        self.dialog = dialog
        self._hits: list[tuple[int, int, str]] = []  # (from x, to x, key) of what was drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def _bindings_changed(self, _screen) -> None:
        self.refresh()  # text only: no widgets to build, no layout to redo

    def _entries(self) -> tuple[list[tuple[str, str, str, bool]], tuple[str, str, str, bool] | None]:
        """(key, key as shown, description, enabled) for the left side, and the palette key."""
        app = self.app
        palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE and not self.dialog else None
        # Textual works the active bindings out anew at each ask (every binding's action checked)
        bindings = self.screen.active_bindings
        hints = self._hints()
        left, palette = self._hint_entries(hints, bindings), None
        seen_actions = {action for action, _ in hints} if self.dialog else set()
        for key, active in bindings.items():
            binding = active.binding
            if self.dialog and active.node is not self.screen:
                continue  # the app's keys and the focused field's are not the dialog's
            if key == palette_key:
                palette = (key, app.get_key_display(binding), binding.description, active.enabled)
                continue
            if not binding.show or binding.action in seen_actions:
                continue  # one entry per action, as the Footer shows them
            seen_actions.add(binding.action)
            left.append((key, app.get_key_display(binding), binding.description, active.enabled))
        return left, palette

    def _hints(self) -> list[tuple[str, str]]:
        hints = getattr(self.screen, "key_hints", None)
        return list(hints()) if hints is not None else []

    def _hint_entries(
        self, hints: list[tuple[str, str]], bindings: dict[str, ActiveBinding]
    ) -> list[tuple[str, str, str, bool]]:
        if not hints:
            return []
        by_action: dict[str, tuple[str, ActiveBinding]] = {}
        for key, active in bindings.items():
            if self.dialog and active.node is not self.screen:
                continue  # an Input's own enter is bound to "submit" too: the dialog's key is meant
            by_action.setdefault(active.binding.action, (key, active))
        out = []
        for action, description in hints:
            if not action:
                out.append(("", description, "", True))
                continue
            found = by_action.get(action)
            if found is not None:
                key, active = found
                out.append((key, self.app.get_key_display(active.binding), description, active.enabled))
        return out

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key", partial=True)
        desc_style = self.get_component_rich_style("key-bar--description", partial=True)
        off_style = self.get_component_rich_style("key-bar--disabled", partial=True)
        left, palette = self._entries()
        text = Text(no_wrap=True, overflow="crop", end="")
        hits = []

        def add(key: str, shown: str, description: str, enabled: bool) -> None:
            start = text.cell_len
            text.append(f" {shown} ", key_style if enabled else off_style)
            if description:
                text.append(f"{description} ", desc_style if enabled else off_style)
            if key:
                hits.append((start, text.cell_len, key))

        for entry in left:
            add(*entry)
        if palette is not None:
            width = self.size.width
            label = f" {palette[1]} {palette[2]} "
            gap = width - text.cell_len - len(label)
            if gap > 0:
                text.append(" " * gap)
                add(*palette)
        self._hits = hits
        return text

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._hits:
            if start <= event.x < end:
                event.stop()
                self.app.simulate_key(key)
                return
