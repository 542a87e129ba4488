"""One connection to the store's database, its transactions, and its migrations.

The SQL the tables run is written once with `?` placeholders and every value bound; an engine
is a DB-API connection and its dialect (`sqlite` here; PostgreSQL through psycopg 3 adds a
`%s` spelling of the same text). SQLite runs in WAL mode (readers never wait for a writer)
with a busy timeout (writers from other processes queue instead of failing) and
`synchronous=FULL` (a committed run is on disk, as the file store's fsync made it)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from console.core.store.schema import MIGRATIONS, SCHEMA_VERSION, VERSION_TABLE, statements, version_table
from console.services.results import StoreError

__all__ = ["BUSY_TIMEOUT_MS", "Database", "IntegrityError", "open_sqlite"]

BUSY_TIMEOUT_MS = 60_000  # eight writers at once wait for each other well within this
IntegrityError = sqlite3.IntegrityError


class Database:
    """A connection and its dialect. Thread-safe (one lock), so `asyncio.to_thread` may use it.

    `transaction()` is the only way to write: BEGIN IMMEDIATE on SQLite (the write lock is
    taken at once, so a check-then-insert inside it holds across processes)."""

    def __init__(self, conn: Any, dialect: str, where: str) -> None:
        self.conn = conn
        self.dialect = dialect
        self.where = where  # what error lines name: the file, or the server without password
        self._lock = threading.RLock()
        self._depth = 0

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else sql.replace("?", "%s")

    def failed(self, exc: Exception, doing: str = "use") -> StoreError:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StoreError(f"cannot {doing} the store {self.where}: {reason}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            try:
                return self.conn.execute(self._sql(sql), tuple(params))
            except sqlite3.IntegrityError:
                raise
            except (sqlite3.Error, OSError) as exc:
                raise self.failed(exc) from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return list(self.execute(sql, params).fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        with self._lock:
            return self.execute(sql, params).fetchone()

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        with self._lock:
            try:
                self.conn.executemany(self._sql(sql), [tuple(p) for p in seq])
            except sqlite3.IntegrityError:
                raise
            except (sqlite3.Error, OSError) as exc:
                raise self.failed(exc) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """A write transaction (re-entrant: an inner one joins the outer)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            self.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
            self._depth = 1
            try:
                yield self
            except BaseException:
                self._depth = 0
                with contextlib.suppress(Exception):
                    self.conn.execute("ROLLBACK")
                raise
            self._depth = 0
            self.execute("COMMIT")

    def backup(self, target: Path) -> Path:
        """A consistent copy of a SQLite store while it is in use (the online backup API)."""
        if self.dialect != "sqlite":
            raise StoreError(f"backup of {self.where}: use pg_dump for a PostgreSQL store")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = sqlite3.connect(str(target))
            try:
                with self._lock:
                    self.conn.backup(out)
            finally:
                out.close()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot back up the store to {target}: {exc}") from None
        return target

    def close(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self.conn.close()

    # ---------------------------------------------------------- migrations

    def schema_version(self) -> int:
        row = self.one(f"SELECT MAX(version) FROM {VERSION_TABLE}")
        return int(row[0]) if row and row[0] is not None else 0

    def migrate(self) -> int:
        """Apply the migrations this database lacks, in order, in one transaction; the version
        it is at. StoreError when it was made by a newer console (a version we do not know)."""
        with self.transaction():
            self.execute(version_table(self.dialect))
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.where} is at schema version {current}, newer than this console's "
                    f"({SCHEMA_VERSION}): update rocm-console"
                )
            for migration in MIGRATIONS:
                if migration.version <= current:
                    continue
                for sql in statements(migration, self.dialect):
                    self.execute(sql)
                self.execute(
                    f"INSERT INTO {VERSION_TABLE} (version, name, applied) VALUES (?, ?, ?)",
                    (migration.version, migration.name, time.time()),
                )
            return self.schema_version()


def open_sqlite(path: Path | str) -> Database:
    """Open (make) the SQLite store at `path` and bring its schema up to date. StoreError, one
    line naming the file and the reason, when it cannot be opened, written or read."""
    path = Path(path).expanduser()
    shown = str(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            raise StoreError(f"cannot open the store {shown}: it is not a file")
        fresh = not path.exists()
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
    except StoreError:
        raise
    except (sqlite3.Error, OSError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise StoreError(f"cannot open the store {shown}: {reason}") from None
    db = Database(conn, "sqlite", shown)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode and str(mode[0]).lower() != "wal":
            raise StoreError(f"cannot open the store {shown}: the folder does not allow WAL mode ({mode[0]})")
        conn.execute("PRAGMA synchronous = FULL")
        if fresh:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)  # the team's history: the owner's, as the files were
        db.migrate()
    except StoreError:
        db.close()
        raise
    except (sqlite3.Error, OSError) as exc:
        db.close()
        raise db.failed(exc, "open") from None
    return db
