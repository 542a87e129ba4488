"""The database store: runs, baselines, events, node-versions records and model pulls in one
database.

`open_store(profile_or_url, data_dir)` opens (making and migrating) the profile's PostgreSQL
(`[store] url`) or the SQLite file in the data folder; `Store` holds one table
object per record kind with the method names of today's file classes (`runs` ~ ResultStore,
`events` ~ EventLog, `baselines` ~ BaselineStore, `versions` ~ VersionsBook's file,
`pulls` the model pulls),
`migrate_file_store` moves a file store in, `dump` writes one back out. Faces reach it only
through console/services/history.py (one History per face): docs/store.md."""

from console.services.store.db import Database, IntegrityError, open_sqlite
from console.services.store.dump import dump
from console.services.store.migrate import MigrationCounts, migrate_file_store
from console.services.store.store import DB_FILE, Store, default_store_path, open_store

__all__ = [
    "DB_FILE",
    "Database",
    "IntegrityError",
    "MigrationCounts",
    "Store",
    "default_store_path",
    "dump",
    "migrate_file_store",
    "open_sqlite",
    "open_store",
]
