"""The fleet's timeline: the history's events (the store), newest first, filterable, followed live.

The newest BUFFER_LIMIT events are read once in a thread when the screen opens (the store
pages them: a long timeline is never read whole); after that a timer polls a follower once a
second, in a thread, and marks the screen dirty when events came; the redraw clock rebuilds
the table only then or when the filter changed.  Paused, nothing is polled (what was written
meanwhile is read on resume).  While the store cannot be opened, the title says so (history
unavailable) and what this console writes meanwhile (events.jsonl, moved in later) is shown.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from console.core.events import Event
from console.core.text import one_line, printable
from console.services.results import StoreError
from console.ui.model.events_view import (
    BUFFER_LIMIT,
    EventBuffer,
    EventFilter,
    Subject,
    event_row,
    pick_run,
    subject_of,
)
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.status_bar import StatusBar
from console.ui.workers import run_named

POLL_S = 1.0  # seconds between two looks at the log for new lines
SHOWN = 1000  # rows in the table at most (the buffer keeps more for the filter)
FILTER_HINT = "filter: node:NAME kind:gpu gpu:N warn|fail, or any text (Enter keeps, Esc clears)"
_SEVERITY_STYLE = {"info": "", "warn": "bold yellow", "fail": "bold red"}


def event_log_of(app: object) -> Any:
    """The app's timeline: its history's events (HistoryEvents: EventLog's methods over the store)."""
    from console.ui.results_store import history_of

    return history_of(app).events


def toggle_events(app: App, filter_text: str = "") -> None:
    """e / the palette: open the events screen (with a filter), or close it."""
    screen = app.screen
    if not isinstance(screen, EventsScreen):
        app.push_screen(EventsScreen(event_log_of(app), filter_text))
    elif filter_text:
        screen.set_filter(filter_text)
    else:
        app.pop_screen()


class EventsScreen(Screen):
    BINDINGS = [
        Binding("escape", "back", "Back", id="close-events"),
        Binding("slash", "filter", "Filter", id="filter-events"),
        Binding("f", "toggle_follow", "Follow", id="follow-events"),
        Binding("enter", "open_subject", "Open", id="open-event"),  # the table's own Enter does it when focused
    ]

    def __init__(self, log: Any, filter_text: str = "") -> None:
        super().__init__(id="events-screen")
        self.event_log = log
        self.buffer = EventBuffer()
        self.filter = EventFilter(filter_text)
        self.follow = True
        self.loaded = False
        self.error: str | None = None
        self._follower: Any = None  # the store's follower (or the fallback file's)
        self._polling = False
        self._drawn: tuple | None = None
        self._ready = False
        self.shown: list[Event] = []  # the table's rows, in order

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield Static(id="events-title")
        yield Input(value=self.filter.text, placeholder=FILTER_HINT, id="events-filter", compact=True)
        table: DataTable[Any] = DataTable(id="events-table", cursor_type="row", zebra_stripes=True)
        table.add_column("When", key="when")
        table.add_column("", key="sev")
        table.add_column("Node", key="node")
        table.add_column("GPU", key="gpu")
        table.add_column("Kind", key="kind")
        table.add_column("What", key="what")
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        self._ready = True
        box = self.query_one("#events-filter", Input)
        box.cursor_blink = console_host(self.app).cursor_blink
        box.set_class(bool(self.filter.text), "-open")
        self.query_one("#events-table", DataTable).focus()
        self._load()
        # Its own clock for the log: the redraw clock draws only what changed, and a frozen
        # console clock (tests, scenes) must not stop the follow.
        self.set_interval(POLL_S, self._poll_tick, name="events-follow")
        console_host(self.app).request_redraw()  # the clock draws it once its widgets are all mounted

    def on_screen_resume(self) -> None:
        self.set_class(getattr(self.app, "paused", False), "-paused")

    # ------------------------------------------------------------ reading (thread: no widgets)

    def _load(self) -> None:
        run_named(self, self._read_log, "events-read", thread=True, exclusive=True)

    def _read_log(self) -> None:
        log = self.event_log
        try:
            events, position = log.read_with_position(limit=BUFFER_LIMIT)
            follower = log.follow(position)
        except (OSError, StoreError) as exc:
            self.app.call_from_thread(self._loaded, [], None, f"{self._where}: {one_line(exc)}")
            return
        self.app.call_from_thread(self._loaded, events, follower, None)

    @property
    def _where(self) -> str:
        return str(getattr(self.event_log, "where", None) or getattr(self.event_log, "path", "the event log"))

    @property
    def unavailable(self) -> str | None:
        """ "history unavailable: <the store and why>" while the store cannot be opened."""
        problem = getattr(self.event_log, "unavailable", None)
        return f"history unavailable: {one_line(problem)}" if problem else None

    def _loaded(self, events: list[Event], follower: Any, error: str | None) -> None:
        self.buffer.load(events)
        self.error = error
        self.loaded = True
        self._follower = follower
        console_host(self.app).request_redraw()

    def _poll_tick(self) -> None:
        if getattr(self.app, "paused", False) or self._follower is None or not self.follow or self._polling:
            return
        self._polling = True  # one look at a time: a slow store never piles them up
        run_named(self, self._poll_in_thread, "events-poll", thread=True)

    def _poll_in_thread(self) -> None:
        follower = self._follower
        try:
            events, error = follower.poll(), None
        except (OSError, StoreError) as exc:
            events, error = [], f"{self._where}: {one_line(exc)}"
        self.app.call_from_thread(self._polled, follower, events, error)

    def _polled(self, follower: Any, events: list[Event], error: str | None) -> None:
        self._polling = False
        if follower is not self._follower:
            return
        if error is not None:
            self.error = error
        if self.buffer.add(events) or error is not None:
            console_host(self.app).request_redraw()  # drawn at the next redraw tick, with the rest

    def poll(self) -> int:
        """New events into the buffer, read here (tests; the screen reads them in a thread)."""
        if self._follower is None or not self.follow:
            return 0
        try:
            return self.buffer.add(self._follower.poll())
        except (OSError, StoreError) as exc:
            self.error = f"{self._where}: {one_line(exc)}"
            return 0

    # ------------------------------------------------------------ drawing (the clock)

    def redraw(self, now: float) -> None:
        if not self._ready:
            return
        host = console_host(self.app)
        self.query_one(StatusBar).show(host.fleet.snapshots(), host.sampling_interval)
        key = (self.buffer.generation, self.filter.text, self.loaded, self.error, self.follow, int(now) // 60)
        if key == self._drawn:
            return
        self._drawn = key
        shown = self.shown = self.buffer.view(self.filter, SHOWN)
        table = self.query_one("#events-table", DataTable)
        table.clear()
        for event in shown:
            row = event_row(event, now)
            style = _SEVERITY_STYLE.get(row.severity, "")
            table.add_row(
                Text(row.when, "dim"),
                Text(row.mark, style),
                Text(printable(row.node)),
                Text(row.gpu),
                Text(row.kind, style),
                Text(printable(self._from(event) + row.message), style if row.severity == "fail" else ""),
            )
        self.query_one("#events-title", Static).update(self._title(len(shown)))

    def _from(self, event: Event) -> str:
        """`[watch@db1] ` before an event another console or watcher wrote (a shared store holds
        the team's timeline); nothing for this console's own or an old log's."""
        if not event.origin:
            return ""
        history = getattr(self.app, "history", None)
        return "" if event.origin == getattr(history, "origin", None) else f"[{event.origin}] "

    def _title(self, shown: int) -> Text:
        text = Text(" Events", "bold")
        if not self.loaded:
            text.append(f"  reading {printable(self._where)}…")
            return text
        total = len(self.buffer)
        count = f"{shown} of {total}" if self.filter else f"{total}"
        text.append(f"  {count} · newest first · ")
        text.append("follow on" if self.follow else "follow off (f: on)", "bold" if self.follow else "")
        problem = self.filter.error or self.unavailable or self.error
        if problem:
            text.append(f"  {printable(problem)}", "bold red")
        elif not total:
            text.append(f"  no events yet in {printable(self._where)}", "italic")
        if self.event_log.bad_lines:
            text.append(f"  ({self.event_log.bad_lines} unreadable lines skipped)", "dim")
        return text

    # ------------------------------------------------------------ filter and keys

    def action_filter(self) -> None:
        box = self.query_one("#events-filter", Input)
        box.add_class("-open")
        box.focus()

    def set_filter(self, text: str) -> None:
        self.filter = EventFilter(text)
        box = self.query_one("#events-filter", Input)
        if box.value != text:
            box.value = text
        console_host(self.app).request_redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "events-filter":
            self.filter = EventFilter(event.value)
            console_host(self.app).request_redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "events-filter":
            event.input.set_class(bool(event.value.strip()), "-open")
            self.query_one("#events-table", DataTable).focus()

    def action_back(self) -> None:
        """Esc: leave the filter box, then clear the filter, then close the screen."""
        box = self.query_one("#events-filter", Input)
        table = self.query_one("#events-table", DataTable)
        if box.has_focus:
            box.set_class(bool(box.value.strip()), "-open")
            table.focus()
        elif box.value:
            self.set_filter("")
            box.remove_class("-open")
        else:
            self.app.pop_screen()

    # ------------------------------------------------------------ opening an event's subject

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "events-table":
            event.stop()
            self.open_row(event.cursor_row)

    def key_hints(self) -> list[tuple[str, str]]:
        """The key bar's first key: Enter (the table's own) opens the event's subject."""
        return [("select_cursor", "Open")]

    def action_open_subject(self) -> None:
        table = self.query_one("#events-table", DataTable)
        if table.row_count:
            self.open_row(table.cursor_row)

    def open_row(self, row: int) -> None:
        """Enter: the event's subject (a run in history, an instance's log, a GPU's or a node's detail)."""
        if not 0 <= row < len(self.shown):
            return
        subject = subject_of(self.shown[row])
        host = console_host(self.app)
        if subject is None:
            self.app.notify("this event names no node, GPU, instance or run", markup=False)
        elif subject.what == "run":
            self._open_run(subject)
        elif subject.node not in host.fleet.node_names:
            self.app.notify(
                f"{subject.node} is not in this profile: {subject.describe()} cannot be shown", markup=False
            )
        elif subject.what == "instance" and subject.instance:
            host.open_log(subject.node, subject.instance)
        elif subject.what == "gpu" and subject.gpu is not None:
            # events name physical GPUs; the detail steps through logical ones (its first partition)
            static = host.fleet.snapshot(subject.node).static
            host.open_detail(subject.node, next((g.index for g in static if g.physical == subject.gpu), subject.gpu))
        else:
            host.open_detail(subject.node, None)

    def _open_run(self, subject: Subject) -> None:
        from console.ui.results_store import history_of
        from console.ui.screens.history import HistoryScreen  # loaded on use, as the app does

        history = HistoryScreen(history_of(self.app))
        self.app.push_screen(history)
        # the history reads the store a page at a time: the cursor moves once the run's row is read
        history.select_run(
            lambda runs: pick_run(subject, runs), not_found=f"{subject.describe()}: not in the results store"
        )

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.poll()
        console_host(self.app).request_redraw()
