"""One connection to the store's database, its transactions, and its migrations.

The SQL the tables run is written once with `?` placeholders and every value bound; an engine
is a DB-API connection and its dialect: `sqlite` (the standard library) or `postgresql`
(psycopg 3, console/services/store/postgres.py), for which `_sql` spells the same text with
`%s`, in this one place. SQLite runs in WAL mode (readers never wait for a writer) with a busy
timeout (writers from other processes queue instead of failing) and `synchronous=FULL` (a
committed run is on disk, as the file store's fsync made it)."""

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

__all__ = ["BUSY_TIMEOUT_MS", "LOCK_EVENTS", "LOCK_SCHEMA", "Database", "IntegrityError", "open_sqlite"]

BUSY_TIMEOUT_MS = 60_000  # eight writers at once wait for each other well within this
# PostgreSQL advisory locks (serialize()): any two numbers of our own, one per purpose.
LOCK_SCHEMA = 0x52435F01  # two consoles opening a new database: one makes the tables
LOCK_EVENTS = 0x52435F02  # event rows get their seq in commit order (a follower misses none)


class IntegrityError(Exception):
    """A write broke a UNIQUE constraint: either engine's error, as one class."""


def _engine_errors(dialect: str) -> tuple[type[Exception], tuple[type[Exception], ...]]:
    """(the engine's integrity error, the errors that mean "the store failed")."""
    if dialect == "sqlite":
        return sqlite3.IntegrityError, (sqlite3.Error, OSError)
    import psycopg

    return psycopg.IntegrityError, (psycopg.Error, OSError)


class Database:
    """A connection and its dialect. Thread-safe (one lock), so `asyncio.to_thread` may use it.

    `transaction()` is the only way to write: BEGIN IMMEDIATE on SQLite (the write lock is
    taken at once, so a check-then-insert inside it holds across processes); BEGIN on
    PostgreSQL, where the UNIQUE indexes decide a race (an insert waits for the other
    transaction's row, then finds it) and `serialize()` takes a lock where order matters."""

    def __init__(self, conn: Any, dialect: str, where: str) -> None:
        self.conn = conn
        self.dialect = dialect
        self.where = where  # what error lines name: the file, or the server without password
        self._lock = threading.RLock()
        self._depth = 0
        self._integrity, self._errors = _engine_errors(dialect)

    def _sql(self, sql: str) -> str:
        """The one place the two parameter styles meet: `?` in the source, `%s` for psycopg
        (and a literal % doubled). Values never enter the text, on either engine."""
        return sql if self.dialect == "sqlite" else sql.replace("%", "%%").replace("?", "%s")

    def failed(self, exc: Exception, doing: str = "use") -> StoreError:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return StoreError(f"cannot {doing} the store {self.where}: {reason}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            try:
                return self.conn.execute(self._sql(sql), tuple(params))
            except self._integrity as exc:
                raise IntegrityError(str(exc).splitlines()[0] if str(exc) else "not unique") from None
            except self._errors as exc:
                raise self.failed(exc) from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return list(self.execute(sql, params).fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        with self._lock:
            return self.execute(sql, params).fetchone()

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> int:
        """One statement over many rows (psycopg pipelines them: one round trip, not one per
        row); how many rows it changed in all."""
        with self._lock:
            try:
                cursor = self.conn.cursor()
                cursor.executemany(self._sql(sql), [tuple(p) for p in seq])
                return max(0, int(cursor.rowcount))
            except self._integrity as exc:
                raise IntegrityError(str(exc).splitlines()[0] if str(exc) else "not unique") from None
            except self._errors as exc:
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

    @contextlib.contextmanager
    def savepoint(self, name: str = "attempt") -> Iterator[None]:
        """A part of a transaction that can fail alone: on PostgreSQL an error (a UNIQUE
        conflict) aborts the whole transaction unless it is rolled back to a savepoint."""
        with self.transaction():
            self.execute(f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception):
                    self.conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    self.conn.execute(f"RELEASE SAVEPOINT {name}")
                raise
            self.execute(f"RELEASE SAVEPOINT {name}")

    def serialize(self, lock: int) -> None:
        """Inside a transaction: wait for, then hold until it ends, the lock `lock` (one of
        LOCK_*). PostgreSQL's advisory lock; on SQLite BEGIN IMMEDIATE holds the whole
        database already."""
        if self.dialect == "postgresql":
            self.execute("SELECT pg_advisory_xact_lock(?)", (int(lock),))

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
        try:  # the usual opening: one query, no transaction or lock (a round trip on PostgreSQL)
            if self.schema_version() == SCHEMA_VERSION:
                return SCHEMA_VERSION
        except StoreError:
            pass  # a new database: no version table yet
        with self.transaction():
            self.serialize(LOCK_SCHEMA)  # PostgreSQL: two first openings would race on CREATE TABLE
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


def _wal_mode(conn: sqlite3.Connection) -> tuple | None:
    """The file's journal mode, switched to WAL if it is not yet. The switch takes the file
    whole, and SQLite answers "database is locked" at once (no busy wait) when another process
    opens a new store at the same moment: asked again until BUSY_TIMEOUT_MS has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode and str(mode[0]).lower() == "wal":
                return mode  # persistent in the file: a store made before needs no lock for it
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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
        mode = _wal_mode(conn)
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
