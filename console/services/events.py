"""The event log: the fleet's timeline, persisted and bounded, in the local data folder.

Layout: ``<data>/events.jsonl`` beside the results store (``<data>/results``; ``<data>``
is ``$ROCM_CONSOLE_DATA_DIR`` when set, else the platformdirs data folder), one JSON
object per line (console/core/events.py ``event_to_dict``).  When an append would take
the file past ``max_bytes`` it is rotated first: ``events.jsonl`` -> ``events.jsonl.1``
-> ... -> ``events.jsonl.<keep>``, the oldest dropped; so the log never holds more
than ``(keep + 1) * max_bytes``.

Appends are whole lines written by one ``write`` on an ``O_APPEND`` descriptor while
an exclusive ``fcntl.flock`` is held on ``events.jsonl.lock``; readers hold it shared.
Several consoles (and `rocm-console events --follow`) can use one log at once; a
line that is not an event (a crash mid-write on another system, a hand edit) is
skipped and counted, never fatal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from console.core import node_json
from console.core.events import Event, event_from_dict, event_to_dict, matches
from console.services.data_dir import default_root

__all__ = ["EVENTS_FILE", "EventLog", "Follower", "default_events_path"]

EVENTS_FILE = "events.jsonl"
MAX_BYTES = 4 << 20  # a few ten thousand events per file
KEEP = 3  # rotated files kept
# Reading is bounded, not refused: the log is the user's timeline, and a file grown past what
# rotation allows (a hand edit, another tool appending) should still show its newest events, as
# `tail` would. So each file is read from at most its last READ_LIMIT bytes (twice what rotation
# lets a file hold), and a line longer than MAX_LINE_BYTES (an event is a few hundred bytes) is
# skipped and counted like any other bad line, without being decoded.
READ_LIMIT = 2 * MAX_BYTES
MAX_LINE_BYTES = 64 << 10
# An event's time: epoch seconds between 1970 and 9999 (time.localtime and strftime take them).
MAX_EVENT_TIME = 253402300799.0


def default_events_path() -> Path:
    return default_root().parent / EVENTS_FILE


def _line(event: Event) -> bytes:
    text = json.dumps(event_to_dict(event), separators=(",", ":"), ensure_ascii=False, default=str)
    return (text + "\n").encode("utf-8")


@dataclass(frozen=True)
class Position:
    """Where a follower stands: the current file's inode and the bytes read of it."""

    inode: int | None
    offset: int


class EventLog:
    def __init__(self, path: Path | str | None = None, *, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = Path(path) if path is not None else default_events_path()
        self.max_bytes = max(1024, int(max_bytes))
        self.keep = max(0, int(keep))
        self.bad_lines = 0  # lines skipped by the last read

    # -- locking

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[bool]:
        """Hold the log's lock; yields False (and locks nothing) when the folder does not exist yet."""
        if not exclusive and not self.path.parent.is_dir():
            yield False
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield True
        finally:
            os.close(fd)  # closing the descriptor drops the lock

    def files(self) -> list[Path]:
        """The log's files, oldest first."""
        rotated = [self.path.with_name(f"{self.path.name}.{i}") for i in range(self.keep, 0, -1)]
        return [p for p in [*rotated, self.path] if p.is_file()]

    # -- writing

    def append(self, events: Event | Iterable[Event]) -> int:
        """Append events (one write under the lock); returns how many."""
        batch = [events] if isinstance(events, Event) else list(events)
        if not batch:
            return 0
        data = b"".join(_line(e) for e in batch)
        with self._locked(exclusive=True):
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(data) > self.max_bytes:
                self._rotate()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            finally:
                os.close(fd)
        return len(batch)

    async def append_async(self, events: Event | Iterable[Event]) -> int:
        """append() off the event loop: a slow disk never stalls the UI."""
        import asyncio  # on use: a command that only reads events does not import it (start-up)

        return await asyncio.to_thread(self.append, events)

    def _rotate(self) -> None:
        if self.keep == 0:
            self.path.unlink(missing_ok=True)
            return
        for i in range(self.keep, 0, -1):
            source = self.path if i == 1 else self.path.with_name(f"{self.path.name}.{i - 1}")
            if source.exists():
                os.replace(source, self.path.with_name(f"{self.path.name}.{i}"))

    # -- reading

    def _parse(self, data: bytes) -> list[Event]:
        out = []
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE_BYTES:
                self.bad_lines += 1
                continue
            try:  # the safe decoder: a line nested 100000 deep is a bad line, not a RecursionError
                event = event_from_dict(node_json.loads(raw, max_chars=MAX_LINE_BYTES))
            except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
                self.bad_lines += 1
                continue
            if not (math.isfinite(event.time) and 0 <= event.time <= MAX_EVENT_TIME):
                self.bad_lines += 1  # a time no clock shows (1e300, NaN, -1e18)
                continue
            out.append(event)
        return out

    def read(
        self,
        *,
        since: float | None = None,
        node: str | None = None,
        kind: str | None = None,
        gpu: int | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Stored events that pass the filters, newest first (at most ``limit``)."""
        events, _ = self.read_with_position()
        picked = [e for e in events if matches(e, since=since, node=node, kind=kind, gpu=gpu)]
        picked.sort(key=lambda e: e.time, reverse=True)
        return picked[:limit] if limit is not None else picked

    def read_with_position(self) -> tuple[list[Event], Position]:
        """Every stored event in file order, and where a Follower starts so it misses none."""
        self.bad_lines = 0
        events: list[Event] = []
        position = Position(None, 0)
        with self._locked(exclusive=False) as ready:
            if not ready:
                return [], position
            for path in self.files():
                try:
                    read = _read_from(path, 0)
                except OSError:  # rotated away since files() listed it
                    read = None
                if read is None:
                    continue
                data, inode, end = read
                if path == self.path:
                    position = Position(inode, end)
                events += self._parse(data)
        return events, position

    def follow(self, position: Position | None = None) -> Follower:
        """A Follower from ``position`` (default: the end of the log now)."""
        if position is None:
            _, position = self.read_with_position()
        return Follower(self, position)


class Follower:
    """New events as they are appended, across rotations: call ``poll()`` now and then."""

    def __init__(self, log: EventLog, position: Position) -> None:
        self.log = log
        self.inode = position.inode
        self.offset = position.offset

    def poll(self) -> list[Event]:
        log = self.log
        chunks: list[bytes] = []
        with log._locked(exclusive=False) as ready:
            if not ready:
                return []
            try:
                current = log.path.stat()
            except FileNotFoundError:
                return []
            if self.inode is not None and current.st_ino != self.inode:
                # Rotated: finish the file we were reading (now events.jsonl.N), read the
                # rotated files newer than it whole, then start the new one from its beginning.
                rotated = [p for p in log.files() if p != log.path]  # oldest first
                start, offset = 0, 0
                for i, path in enumerate(rotated):
                    with contextlib.suppress(OSError):
                        if path.stat().st_ino == self.inode:
                            start, offset = i, self.offset
                for path in rotated[start:]:
                    with contextlib.suppress(OSError):
                        read = _read_from(path, offset)
                        if read is not None:
                            chunks.append(self._complete(read[0], whole=True))
                    offset = 0
                self.inode, self.offset = current.st_ino, 0
            elif current.st_size < self.offset:
                self.offset = 0  # truncated by hand
            self.inode = current.st_ino
            read = _read_from(log.path, self.offset)
            if read is None:  # not a regular file (a FIFO put there): nothing to follow
                return []
            data, _, end = read
            used = self._complete(data)
            self.offset = end - len(data) + len(used)
            chunks.append(used)
        return log._parse(b"".join(chunks))

    @staticmethod
    def _complete(data: bytes, whole: bool = False) -> bytes:
        """Only whole lines: a line being written elsewhere is read on the next poll."""
        if whole or data.endswith(b"\n"):
            return data
        end = data.rfind(b"\n")
        return data[: end + 1] if end >= 0 else b""


def _read_from(path: Path, offset: int) -> tuple[bytes, int, int] | None:
    """(bytes of `path` from `offset` to its end, its inode, the offset of that end); None
    when it is not a regular file. At most READ_LIMIT bytes: when more were written, only
    the newest are read, from the first line that starts within them (a tail, as `tail` reads).
    Opened with O_NONBLOCK and checked through the descriptor: a FIFO never blocks a reader."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        start = offset
        cut = st.st_size - offset > READ_LIMIT
        if cut:
            start = st.st_size - READ_LIMIT
        os.lseek(fd, start, os.SEEK_SET)
        chunks: list[bytes] = []
        total = 0
        while total < READ_LIMIT:  # a file still growing stops at the limit too
            chunk = os.read(fd, min(1 << 20, READ_LIMIT - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
        if cut:  # the first line was cut in the middle: it starts before what is read
            data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
        return data, st.st_ino, start + total
    finally:
        os.close(fd)
