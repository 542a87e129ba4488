"""The timeline in the database, with EventLog's method names: append (one transaction),
read (SQL filters on indexed columns, newest first, LIMIT), follow (new rows by sequence)."""

from __future__ import annotations

from collections.abc import Iterable

from console.core.events import Event
from console.core.store.queries import event_where
from console.core.store.rows import EVENT_COLUMNS, event_from_doc, event_row, new_event_uid
from console.services.store.db import LOCK_EVENTS, Database

__all__ = ["EventFollower", "EventTable"]

_INSERT = (
    f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({', '.join('?' for _ in EVENT_COLUMNS)}) "
    "ON CONFLICT DO NOTHING"
)


class EventTable:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.bad_lines = 0  # rows skipped by the last read (EventLog's name)

    def append(self, events: Event | Iterable[Event]) -> int:
        """Append events in one transaction; how many."""
        batch = [events] if isinstance(events, Event) else list(events)
        if batch:
            self.insert_rows([event_row(e, new_event_uid()) for e in batch])
        return len(batch)

    def insert_rows(self, rows: list[dict]) -> int:
        """Rows made by event_row; those whose uid is stored already are left out. How many were new."""
        if not rows:
            return 0
        with self.db.transaction():
            self.db.serialize(LOCK_EVENTS)  # sequence numbers in commit order: see EventFollower
            new = self.db.executemany(_INSERT, [[row[c] for c in EVENT_COLUMNS] for row in rows])
        return new

    async def append_async(self, events: Event | Iterable[Event]) -> int:
        """append() off the event loop: a slow disk never stalls the UI."""
        import asyncio  # on use: a command that only reads events does not import it (start-up)

        return await asyncio.to_thread(self.append, events)

    def count(self) -> int:
        row = self.db.one("SELECT COUNT(*) FROM events")
        return int(row[0]) if row else 0

    def read(
        self,
        *,
        since: float | None = None,
        node: str | None = None,
        kind: str | None = None,
        gpu: int | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Stored events that pass the filters, newest first (at most ``limit``); events of the
        same time in the order they were stored, as EventLog.read gives them."""
        where = event_where(since=since, node=node, kind=kind, gpu=gpu)
        sql = f"SELECT doc FROM events{where.sql()} ORDER BY time DESC, seq"
        params = list(where.params)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        return self._events(self.db.rows(sql, params))

    def read_with_position(self, *, since: float | None = None, limit: int | None = None) -> tuple[list[Event], int]:
        """The newest stored events (at most ``limit``) oldest first, and the sequence number a
        follower starts from so that it misses none (EventLog's method, paged by the database)."""
        position = self.last_seq()  # read up to it: the events and the position agree
        where = event_where(since=since, until_seq=position)
        sql = f"SELECT doc FROM events{where.sql()} ORDER BY time DESC, seq DESC"
        params = list(where.params)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        rows = self.db.rows(sql, params)
        return list(reversed(self._events(rows))), position

    def _events(self, rows: list[tuple]) -> list[Event]:
        self.bad_lines = 0
        out = []
        for (doc,) in rows:
            try:
                out.append(event_from_doc(doc))
            except (ValueError, TypeError):
                self.bad_lines += 1
        return out

    def last_seq(self) -> int:
        row = self.db.one("SELECT MAX(seq) FROM events")
        return int(row[0]) if row and row[0] is not None else 0

    def follow(self, position: int | None = None) -> EventFollower:
        """An EventFollower from ``position`` (a sequence number; default: now)."""
        return EventFollower(self, self.last_seq() if position is None else position)


class EventFollower:
    """New events as they are stored, by any process: call ``poll()`` now and then.

    Sequence numbers are handed out in commit order, so none is skipped: SQLite has one
    writer at a time; on PostgreSQL (where an identity value can commit after a larger one)
    every event write holds one advisory lock until it commits (EventTable.insert_rows)."""

    def __init__(self, table: EventTable, seq: int) -> None:
        self.table = table
        self.seq = seq

    def poll(self, limit: int = 10_000) -> list[Event]:
        where = event_where(after_seq=self.seq)
        rows = self.table.db.rows(
            f"SELECT seq, doc FROM events{where.sql()} ORDER BY seq LIMIT ?", [*where.params, limit]
        )
        if rows:
            self.seq = int(rows[-1][0])
        return self.table._events([(doc,) for _, doc in rows])
