"""The TUI's one history (console/services/history.py): runs, events, baselines and node
versions in the store, made once per app and handed to every screen that reads or writes them.

Made the first time it is asked for (`history_of`: for the app's profile and the data folder
of the environment, the demo's included), or handed to the app (`app.history`: tests, scenes).
The console of ui/launch.py keeps its timeline in it (ConsoleEvents); such an app's store is
opened in a thread once the first frame is on screen (`open_history`), never on the event
loop: a first start on an old data folder moves its files in, which takes a while, and the
first frame does not wait for the store's modules either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
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
    "open_history",
    "result_store",
    "toast",
    "unavailable_line",
]


_MAKING = threading.Lock()  # the opening worker and a screen's reader may ask at once


def history_of(app: object) -> History:
    """`app`'s one History, made the first time it is asked for (for the app's profile's store,
    in the data folder of the environment); its migration line is a notification."""
    history = getattr(app, "history", None)
    if history is not None:
        return history
    with _MAKING:
        history = getattr(app, "history", None)
        if history is None:
            from console.services.history import History, face_origin

            history = History.of(
                getattr(app, "profile", None), say=lambda line: toast(app, line), origin=face_origin("tui")
            )
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


async def open_history(app: object, events: object = None) -> None:
    """Open the store of an app that keeps its timeline there (`events`: ConsoleEvents) or was
    handed a History, in a thread (ConsoleApp awaits it once its first frame is on screen,
    before its health watch takes the store's events and versions book): its migration line,
    or why it cannot be opened, comes as a notification; the console goes on either way."""
    console_events = events if isinstance(events, ConsoleEvents) else None
    if getattr(app, "history", None) is None and console_events is None:
        return  # an app without a timeline (tests): its store opens when a screen needs it
    import asyncio

    def work() -> None:
        history = history_of(app)
        history.try_open()
        if console_events is not None:
            console_events.flush()  # anything written while the store was opening
        line = unavailable_line(history)
        if line is not None:
            toast(app, line, severity="warning")

    await asyncio.to_thread(work)


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

    `history`: the History, or what makes it when first needed (ui/launch.py: the app's, made
    after the first frame). Until the store is open (it opens in a thread after the first
    frame; a first start moves the old files in, which can take a while) appends wait here in
    memory, in order, and go in with the next append once it is open, or when the opening
    worker calls flush(). An append the store refuses goes to events.jsonl, which the next
    opening moves in: none is lost."""

    def __init__(self, history: History | Callable[[], History], data_dir: Path | None = None) -> None:
        from console.services.data_dir import default_root

        self._history: History | None = None if callable(history) else history
        self._make = history if callable(history) else None
        if data_dir is None:
            data_dir = self._history.data_dir if self._history is not None else default_root().parent
        self.path = Path(data_dir) / "events.jsonl"  # services/events.py EVENTS_FILE
        self._pending: list[Event] = []
        self._lock = threading.Lock()
        self._file: EventLog | None = None

    @property
    def history(self) -> History:
        if self._history is None:
            assert self._make is not None
            self._history = self._make()
        return self._history

    def append(self, events: Event | Iterable[Event]) -> int:
        batch = [events] if isinstance(events, Event) else list(events)
        with self._lock:
            made = self._history
            if made is None or (not made.is_open and made.problem is None):  # not opened yet
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

    @property
    def data_dir(self) -> Path:
        return self.path.parent

    def __getattr__(self, name: str) -> Any:  # read, read_with_position, follow, bad_lines, where
        return getattr(self.history.events, name)
