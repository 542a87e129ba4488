"""The store: one database and a table object per kind of record.

`<data>/store.sqlite3` by default (`<data>` as for the file store: $ROCM_CONSOLE_DATA_DIR, else
the platformdirs data folder), so the demo's own data folder keeps its own store; the
profile's `[store] url` names a PostgreSQL server instead (a team's shared history)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from console.core.store.target import DB_FILE, is_postgres_url, store_target
from console.services.data_dir import default_root
from console.services.store.baselines import BaselineTable
from console.services.store.db import Database, open_sqlite
from console.services.store.events import EventTable
from console.services.store.pulls import PullTable
from console.services.store.runs import RunTable
from console.services.store.versions import VersionsTable
from console.services.store.watchers import WatcherTable

if TYPE_CHECKING:
    from console.core.model import Profile

__all__ = ["DB_FILE", "Store", "default_data_dir", "default_store_path", "open_store"]


def default_data_dir() -> Path:
    return default_root().parent


def default_store_path() -> Path:
    return default_data_dir() / DB_FILE


class Store:
    """runs (~ ResultStore), events (~ EventLog), baselines (~ BaselineStore), versions
    (~ VersionsBook's files), watchers (the running watchers' heartbeats), pulls (the model
    pulls onto the nodes), over one Database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.runs = RunTable(db)
        self.events = EventTable(db)
        self.baselines = BaselineTable(db)
        self.versions = VersionsTable(db)
        self.watchers = WatcherTable(db)
        self.pulls = PullTable(db)

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


def open_store(target: Profile | str | Path | None = None, data_dir: Path | str | None = None) -> Store:
    """The store a console uses. `target`: a Profile (its `[store] url`, else the SQLite file in
    `data_dir`), a postgresql:// url, or a SQLite file's path; None: the SQLite file in
    `data_dir` (default: the data folder). StoreError, one line naming the file or the url
    (never a password) and the reason, when it cannot be opened."""
    if isinstance(target, Path) or (isinstance(target, str) and not is_postgres_url(target)):
        return Store(open_sqlite(target))
    url = target if isinstance(target, str) else (target.store_url if target is not None else None)
    chosen = store_target(None, data_dir if data_dir is not None else default_data_dir())
    if url:
        from console.services.store.postgres import open_postgresql

        return Store(open_postgresql(url))  # checks the url itself: its StoreError names it
    return Store(open_sqlite(chosen.location))
