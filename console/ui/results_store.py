"""The TUI's one history (console/services/history.py): runs, events, baselines and node
versions in the store, made once per app and handed to every screen that reads or writes them.

The console app gets it from ui/launch.py (`app.history`); a screen hosted by another app (a
test's bare host) gets one made once for that app, over the data folder of the environment.
The store itself opens in a thread after the first frame (`open_history_soon`), never on the
event loop: a first start on an old data folder moves its files in, which takes a while.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.events import Event
from console.core.text import one_line

if TYPE_CHECKING:
    from console.services.events import EventLog
    from console.services.history import History

__all__ = [
    "ConsoleEvents",
    "HistoryRuns",
    "history_of",
    "open_history_soon",
    "result_store",
    "toast",
    "unavailable_line",
]


def history_of(app: object) -> History:
    """`app`'s one History, made the first time it is asked for (for the app's profile's store)."""
    history = getattr(app, "history", None)
    if history is None:
        from console.services.history import History

        history = History.of(getattr(app, "profile", None), say=lambda line: toast(app, line))
        try:
            app.history = history  # type: ignore[attr-defined]
        except AttributeError:  # an app that takes no attribute: a history for this call only
            pass
    return history


def unavailable_line(history: History) -> str | None:
    """What the history and events screens say while the store cannot be opened."""
    return f"history unavailable: {one_line(history.problem)}" if history.problem else None


def toast(app: object, text: str, *, severity: str = "information") -> None:
    """A notification from the app's thread or any other (the store opens in a worker)."""
    notify = getattr(app, "notify", None)
    if notify is None:
        return
    call = getattr(app, "call_from_thread", None)
    try:
        if call is not None:
            call(notify, text, severity=severity, timeout=15, markup=False)
            return
    except RuntimeError:  # on the app's own thread already
        pass
    notify(text, severity=severity, timeout=15, markup=False)


def open_history_soon(app: object) -> None:
    """Open the app's store in a thread worker (once the first frame is on screen): its
    migration line, or why it cannot be opened, comes as a notification."""
    history = getattr(app, "history", None)
    if history is None or history.is_open:
        return
    from console.ui.workers import run_named

    def work() -> None:
        history.try_open()
        watch = getattr(app, "health_watch", None)
        events = getattr(watch, "events", None)
        if isinstance(events, ConsoleEvents):
            events.flush()  # what the console wrote while the store was opening
        line = unavailable_line(history)
        if line is not None:
            toast(app, line, severity="warning")

    run_named(app, work, "history-open", thread=True)  # type: ignore[arg-type]


class HistoryRuns:
    """The history's runs where a screen or service wants a ResultStore (bench screens, the
    experiment and find-max runners): every call goes to the store's run table, opened on that
    call's thread the first time (the callers store and read in threads)."""

    def __init__(self, history: History) -> None:
        self.history = history

    @property
    def root(self) -> Path:
        """The results folder of the data dir (where exports go by default)."""
        return self.history.data_dir / "results"

    def delete(self, ref: str) -> str:
        return self.history.delete_run(ref)  # the old file too, else a catch-up brings it back

    def __getattr__(self, name: str) -> Any:
        return getattr(self.history.runs, name)


def result_store(app: object) -> Any:
    """`app`'s stored runs (HistoryRuns: ResultStore's methods over the store)."""
    return HistoryRuns(history_of(app))


class ConsoleEvents:
    """The history's events as the services that write on the event loop want them (HealthWatch,
    alerts, the instance poller): EventLog's methods, and `path` (events.jsonl of the data dir,
    which HealthWatch takes its data dir from).

    Until the store is open (it opens in a thread after the first frame; a first start moves
    the old files in, which can take a while) appends wait here in memory, in order, and go in
    with the next append once it is open, or when the opening worker calls flush(). An append
    the store refuses goes to events.jsonl, which the next opening moves in: none is lost."""

    def __init__(self, history: History) -> None:
        from console.services.events import EVENTS_FILE

        self.history = history
        self.path = history.data_dir / EVENTS_FILE
        self._pending: list[Event] = []
        self._lock = threading.Lock()
        self._file: EventLog | None = None

    def append(self, events: Event | Iterable[Event]) -> int:
        batch = [events] if isinstance(events, Event) else list(events)
        with self._lock:
            if not self.history.is_open and self.history.problem is None:  # still opening
                self._pending.extend(batch)
                return len(batch)
            batch, self._pending = self._pending + batch, []
            return self._write(batch)

    async def append_async(self, events: Event | Iterable[Event]) -> int:
        import asyncio

        return await asyncio.to_thread(self.append, events)

    def flush(self) -> int:
        with self._lock:
            batch, self._pending = self._pending, []
            return self._write(batch) if batch else 0

    def _write(self, batch: list[Event]) -> int:
        from console.services.results import StoreError

        if not batch:
            return 0
        try:
            return self.history.events.append(batch)
        except StoreError:  # a store that took events a moment ago and refuses now (disk full)
            if self._file is None:
                from console.services.events import EventLog

                self._file = EventLog(self.path)
            return self._file.append(batch)

    def __getattr__(self, name: str) -> Any:  # read, read_with_position, follow, bad_lines, where
        return getattr(self.history.events, name)
