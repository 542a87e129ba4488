"""Model pulls in the database (schema version 3): a row per pull of a model onto a node,
written when the pull starts and updated when it ends (console/services/models.py).

A row that has ended is final: a late writer (a console that followed the same pull and
still says "running") never turns it back. A pull resumed after it stopped is a new start
on the node, so a new row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from console.core.store.pulls import PULL_COLUMNS, PullRecord, pull_where
from console.services.store.db import Database

__all__ = ["PullTable"]

_INSERT = f"INSERT INTO pulls ({', '.join(PULL_COLUMNS)}) VALUES ({', '.join('?' for _ in PULL_COLUMNS)})"
_KEPT = ("id", "node", "model", "started", "origin")  # who started it, where and when: never rewritten
_UPSERT = (
    f"{_INSERT} ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in PULL_COLUMNS if c not in _KEPT)
    + " WHERE pulls.state = 'running'"
)
_SELECT = f"SELECT {', '.join(PULL_COLUMNS)} FROM pulls"


def _record(row: tuple[Any, ...]) -> PullRecord:
    doc = dict(zip(PULL_COLUMNS, row))
    for key in ("bytes", "total_bytes"):
        doc[key] = int(doc[key] or 0)
    if doc["files"] is not None:
        doc["files"] = int(doc["files"])
    return PullRecord(**doc)


class PullTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, pull: PullRecord) -> bool:
        """Store the pull, or update its row while that still says running; whether it wrote."""
        with self.db.transaction():
            return self.db.execute(_UPSERT, pull.row()).rowcount == 1

    def insert(self, pull: PullRecord) -> bool:
        """Store the pull unless its id is stored (a dump loaded again); whether it wrote."""
        with self.db.transaction():
            return self.db.execute(_INSERT + " ON CONFLICT DO NOTHING", pull.row()).rowcount == 1

    def get(self, pull_id: str) -> PullRecord | None:
        row = self.db.one(f"{_SELECT} WHERE id = ?", (pull_id,))
        return _record(row) if row is not None else None

    def list(
        self,
        *,
        node: str | Sequence[str] | None = None,
        model: str | None = None,
        since: float | None = None,
        limit: int | None = 50,
        before: tuple[float, str] | None = None,
    ) -> list[PullRecord]:
        """One page, newest first (started, then id: a stable order for paging)."""
        where = pull_where(node=node, model=model, since=since, before=before)
        sql = f"{_SELECT}{where.sql()} ORDER BY started DESC, id DESC"
        params = list(where.params)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_record(r) for r in self.db.rows(sql, params)]

    def count(
        self, *, node: str | Sequence[str] | None = None, model: str | None = None, since: float | None = None
    ) -> int:
        where = pull_where(node=node, model=model, since=since)
        row = self.db.one(f"SELECT COUNT(*) FROM pulls{where.sql()}", where.params)
        return int(row[0]) if row else 0

    def iter_all(self, *, page: int = 500) -> Iterator[PullRecord]:
        """Every pull, oldest first, a page at a time (the dump)."""
        last: tuple[float, str] | None = None
        while True:
            if last is None:
                rows = self.db.rows(f"{_SELECT} ORDER BY started, id LIMIT ?", (page,))
            else:
                rows = self.db.rows(
                    f"{_SELECT} WHERE started > ? OR (started = ? AND id > ?) ORDER BY started, id LIMIT ?",
                    (last[0], last[0], last[1], page),
                )
            for row in rows:
                pull = _record(row)
                last = (pull.started, pull.id)
                yield pull
            if len(rows) < page:
                return
