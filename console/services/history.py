"""The history a face reads and writes: runs, events, baselines and node-versions records in
the store (issue Y; docs/store.md), opened on first use, once per process.

Every face (CLI command, TUI, watcher, web) makes one `History` from its profile and hands it
down; nothing below a face opens the store itself. Opening it:

- picks the engine (`[store] url`, else `<data>/store.sqlite3`) and brings its schema up to date;
- catches up with the file store of the data folder: when the files differ from what the store
  last took from them (a first start on an existing folder, an older console still writing
  files, events written to the file while the store was unavailable), they are moved in
  (`migrate_file_store`: same ids, nothing doubled) and the counts are said in one line;
- when the store cannot be opened, `problem` holds the one line naming it and the reason: runs
  cannot be stored (a run's result stays on the node, as the run recorder does on any store
  error), the history is shown as unavailable, and events go to the data folder's
  `events.jsonl` so none is lost (the next opening that works moves them in)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.events import Event
from console.services.data_dir import default_root
from console.services.results import StoreError

if TYPE_CHECKING:
    from console.core.model import Profile
    from console.services.events import EventLog
    from console.services.node_versions import VersionsBook
    from console.services.store.baselines import BaselineTable
    from console.services.store.pulls import PullTable
    from console.services.store.runs import RunTable
    from console.services.store.store import Store

__all__ = ["RETRY_AFTER_S", "History", "HistoryEvents", "face_origin", "files_signature"]

RETRY_AFTER_S = 30.0  # a store that failed to open is tried again after this (a server back up)
_FOLDERS = ("results", "baselines", "node-versions")

Say = Callable[[str], None]


def face_origin(face: str) -> str:
    """An event's origin for a face of this machine: "watch@host", "tui@host", "cli@host"."""
    return f"{face}@{socket.gethostname()}"


def files_signature(data_dir: Path) -> str | None:
    """What the file store of `data_dir` looks like, cheaply (stats, no reads): the folders'
    modification times (a run file written or removed changes its folder's) and each events
    file's size and time. None when there is no file store there."""
    from console.services.events import EVENTS_FILE
    from console.services.store.migrate import event_files

    parts: list[str] = []
    for name in _FOLDERS:
        folder = data_dir / name
        with contextlib.suppress(OSError):
            parts.append(f"{name}:{folder.stat().st_mtime_ns}")
            if name == "baselines":  # a baseline saved for a known node changes its node's folder only
                parts += [f"b/{p.name}:{p.stat().st_mtime_ns}" for p in sorted(folder.iterdir()) if p.is_dir()]
    for path in event_files(data_dir / EVENTS_FILE):
        with contextlib.suppress(OSError):
            st = path.stat()
            parts.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts) or None


class History:
    """The store of one face, opened on first use (thread-safe: the TUI opens it from a worker)."""

    def __init__(
        self,
        url: str | None = None,
        data_dir: Path | str | None = None,
        *,
        say: Say | None = None,
        origin: str | None = None,
    ) -> None:
        self.url = url or None
        self.origin = origin  # what the events appended here say wrote them (face_origin), on a shared timeline
        self.data_dir = Path(data_dir).expanduser() if data_dir is not None else default_root().parent
        self.say = say  # where the migration's one line goes (stderr, a toast, the watcher's log)
        self.problem: str | None = None  # why the store cannot be used: the history is unavailable
        self._store: Store | None = None
        self._failed_at = 0.0
        self._lock = threading.Lock()
        self.events = HistoryEvents(self)

    @classmethod
    def of(
        cls,
        profile: Profile | None,
        data_dir: Path | str | None = None,
        *,
        say: Say | None = None,
        origin: str | None = None,
    ) -> History:
        return cls(profile.store_url if profile is not None else None, data_dir, say=say, origin=origin)

    @property
    def where(self) -> str:
        """What messages name: the open store, or where it would be."""
        if self._store is not None:
            return self._store.where
        if self.url:
            from console.core.store.target import shown_url

            return shown_url(self.url)
        from console.core.store.target import DB_FILE

        return str(self.data_dir / DB_FILE)

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def open(self) -> Store:
        """The store, opened (and caught up with the files) on the first call. StoreError (one
        line naming the store and the reason) when it cannot be; asked again, a failed opening
        is retried after RETRY_AFTER_S, not on every call."""
        with self._lock:
            if self._store is not None:
                return self._store
            if self.problem is not None and time.monotonic() - self._failed_at < RETRY_AFTER_S:
                raise StoreError(self.problem)
            from console.services.store.store import open_store

            try:
                store = open_store(self.url, self.data_dir)
                self._catch_up(store)
            except StoreError as exc:
                self.problem = str(exc)
                self._failed_at = time.monotonic()
                raise
            self.problem = None
            self._store = store
            return store

    def lost(self, exc: StoreError) -> None:
        """An open store failed under us (a PostgreSQL server gone, a disk error): drop it, so
        that `problem` says why and the next opening is tried after RETRY_AFTER_S."""
        with self._lock:
            self.problem = str(exc)
            self._failed_at = time.monotonic()
            store, self._store = self._store, None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()

    def try_open(self) -> Store | None:
        """open(), or None with `problem` set."""
        try:
            return self.open()
        except StoreError:
            return None

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def _meta_key(self) -> str:
        # Keyed by machine and folder: operators sharing one PostgreSQL each bring their own files.
        return f"files:{socket.gethostname()}:{self.data_dir}"

    def _catch_up(self, store: Store) -> None:
        signature = files_signature(self.data_dir)
        if signature is None:
            return
        key = self._meta_key()
        row = store.db.one("SELECT value FROM store_meta WHERE key = ?", (key,))
        if row is not None and row[0] == signature:
            return
        from console.services.store.migrate import migrate_file_store

        counts = migrate_file_store(self.data_dir, store)  # the signature taken before: a file
        with store.db.transaction():  # written meanwhile is taken at the next opening
            store.db.execute(
                "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, signature),
            )
        moved = counts.runs + counts.baselines + counts.events + counts.versions
        if self.say is not None and (moved or counts.unreadable):
            self.say(f"store: {counts.line()}, from {self.data_dir} into {store.where} (the files are left in place)")

    # ---------------------------------------------------------- the tables

    @property
    def runs(self) -> RunTable:
        """The stored runs (StoreError when the store cannot be opened)."""
        return self.open().runs

    @property
    def baselines(self) -> BaselineTable:
        return self.open().baselines

    @property
    def pulls(self) -> PullTable:
        """The model pulls (StoreError when the store cannot be opened)."""
        return self.open().pulls

    def versions_book(self) -> VersionsBook:
        """The node-versions book over the store (StoreError when it cannot be opened)."""
        from console.services.node_versions import VersionsBook

        return VersionsBook(table=self.open().versions)

    def delete_run(self, ref: str) -> str:
        """Remove a stored run, and its file from the file store if one is left there (else the
        next catch-up would bring it back); its id. KeyError as RunTable.delete."""
        run_id = self.runs.delete(ref)
        with contextlib.suppress(OSError):
            (self.data_dir / "results" / f"{run_id}.json").unlink()
        return run_id

    def remove_baseline(self, node: str, name: str) -> bool:
        """Remove a stored baseline (and its old file, for the same reason as delete_run)."""
        from console.core.baseline.names import BASELINE_NAME
        from console.core.node_files import node_file_stem

        removed = self.baselines.remove(node, name)
        if removed and BASELINE_NAME.match(name):  # a name that is a file's, never a path
            with contextlib.suppress(OSError, ValueError):
                (self.data_dir / "baselines" / node_file_stem(node) / f"{name}.json").unlink()
        return removed

    def meta(self, key: str) -> Any:
        """A store_meta value (JSON), or None."""
        row = self.open().db.one("SELECT value FROM store_meta WHERE key = ?", (key,))
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except ValueError:
            return row[0]


class HistoryEvents:
    """EventLog's methods over the history's store; while the store cannot be opened, over the
    data folder's events.jsonl (an event is never lost: the next opening that works moves the
    file's new lines in)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._file: EventLog | None = None
        self.bad_lines = 0

    def _target(self) -> Any:
        store = self.history.try_open()
        return store.events if store is not None else self._fallback()

    def _fallback(self) -> EventLog:
        if self._file is None:
            from console.services.events import EVENTS_FILE, EventLog

            self._file = EventLog(self.history.data_dir / EVENTS_FILE)
        return self._file

    @property
    def data_dir(self) -> Path:
        return self.history.data_dir

    @property
    def where(self) -> str:
        return self.history.where

    @property
    def unavailable(self) -> str | None:
        return self.history.problem

    def append(self, events: Event | Iterable[Event]) -> int:
        batch = [events] if isinstance(events, Event) else list(events)
        origin = self.history.origin
        if origin:  # stamped here, once for every face: an event that names its writer keeps it
            batch = [e if e.origin else dataclasses.replace(e, origin=origin) for e in batch]
        target, fallback = self._target(), self._file
        if fallback is not None and target is fallback:
            return int(fallback.append(batch))
        try:
            return int(target.append(batch))
        except StoreError as exc:  # the store went away after it opened: the file keeps them
            self.history.lost(exc)
            return int(self._fallback().append(batch))

    async def append_async(self, events: Event | Iterable[Event]) -> int:
        import asyncio  # on use: a command that only reads events does not import it (start-up)

        return await asyncio.to_thread(self.append, events)

    def read(
        self,
        *,
        since: float | None = None,
        node: str | None = None,
        kind: str | None = None,
        gpu: int | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        target = self._target()
        out = target.read(since=since, node=node, kind=kind, gpu=gpu, limit=limit)
        self.bad_lines = target.bad_lines
        return list(out)

    def read_with_position(self, *, since: float | None = None, limit: int | None = None) -> tuple[list[Event], Any]:
        """The newest events (at most `limit`, oldest first) and where a follower starts."""
        target = self._target()
        if self._file is not None and target is self._file:
            events, position = target.read_with_position()
            events = [e for e in events if since is None or e.time >= since]
            out = events[-limit:] if limit is not None else events
        else:
            out, position = target.read_with_position(since=since, limit=limit)
        self.bad_lines = target.bad_lines
        return out, position

    def follow(self, position: Any = None) -> Any:
        """A follower (its `poll()` returns new events) from `position` (default: now)."""
        return self._target().follow(position)
