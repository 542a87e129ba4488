"""The store: one database and a table object per kind of record.

`<data>/store.sqlite3` by default (`<data>` as for the file store: $ROCM_CONSOLE_DATA_DIR, else
the platformdirs data folder), so the demo's own data folder keeps its own store."""

from __future__ import annotations

from pathlib import Path

from console.services.results import default_root
from console.services.store.baselines import BaselineTable
from console.services.store.db import Database, open_sqlite
from console.services.store.events import EventTable
from console.services.store.runs import RunTable
from console.services.store.versions import VersionsTable

__all__ = ["DB_FILE", "Store", "default_store_path", "open_store"]

DB_FILE = "store.sqlite3"


def default_store_path() -> Path:
    return default_root().parent / DB_FILE


class Store:
    """runs (~ ResultStore), events (~ EventLog), baselines (~ BaselineStore), versions
    (~ VersionsBook's files), over one Database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.runs = RunTable(db)
        self.events = EventTable(db)
        self.baselines = BaselineTable(db)
        self.versions = VersionsTable(db)

    @property
    def where(self) -> str:
        return self.db.where

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def backup(self, target: Path | str) -> Path:
        """A consistent copy of a SQLite store while it is in use (SQLite's online backup API,
        what `sqlite3 store.sqlite3 ".backup copy.sqlite3"` runs). StoreError naming the target."""
        return self.db.backup(Path(target).expanduser())


def open_store(path: Path | str | None = None) -> Store:
    """The SQLite store at `path` (default: store.sqlite3 in the data folder). StoreError, one
    line naming the file and the reason, when it cannot be opened."""
    return Store(open_sqlite(path if path is not None else default_store_path()))
