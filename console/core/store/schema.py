"""The store's schema: ordered migrations, each a list of statements per SQL dialect.

A database records the migrations applied in `schema_version` (one row each); opening one
applies the missing ones in order, in one transaction. A migration is never edited once
released: a change is a new migration appended here. The statements are the same for both
engines but for the few type names rendered by `statements()` (SQLite's REAL is 8 bytes,
PostgreSQL's is 4; an identity column is spelt differently; ids compare byte-wise in both so
that a prefix is a range)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DIALECTS", "MIGRATIONS", "SCHEMA_VERSION", "VERSION_TABLE", "Migration", "statements"]

DIALECTS = ("sqlite", "postgresql")
VERSION_TABLE = "schema_version"

_TYPES = {
    "sqlite": {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL", "key": "TEXT", "int8": "INTEGER"},
    "postgresql": {
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "float": "DOUBLE PRECISION",
        "key": 'TEXT COLLATE "C"',
        "int8": "BIGINT",  # a pull's bytes pass 2**31; SQLite's INTEGER is 8 bytes already
    },
}

VERSION_TABLE_DDL = f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied {{float}} NOT NULL)"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: tuple[str, ...]  # templates: {serial}, {float}, {key}, {int8} are rendered per dialect


_V1 = (
    # One row per stored run: the columns queries filter and sort on, and `doc`, the run's whole
    # dict (run_to_dict, as the file store wrote it) so nothing is lost. `seq` orders runs with
    # the same `created` (an import of one file) in the order they were stored.
    """CREATE TABLE runs (
        seq {serial},
        id {key} NOT NULL UNIQUE,
        created {float} NOT NULL,
        node TEXT,
        model TEXT,
        model_fold TEXT NOT NULL,
        label TEXT,
        serve_preset TEXT,
        bench_preset TEXT,
        run_kind TEXT,
        origin TEXT NOT NULL,
        fingerprint TEXT UNIQUE,
        doc TEXT NOT NULL
    )""",
    "CREATE INDEX runs_created ON runs (created, seq)",
    "CREATE INDEX runs_node ON runs (node, created, seq)",
    "CREATE INDEX runs_model ON runs (model_fold, created, seq)",
    "CREATE INDEX runs_label ON runs (label, created, seq)",
    "CREATE INDEX runs_serve_preset ON runs (serve_preset, created, seq)",
    "CREATE INDEX runs_bench_preset ON runs (bench_preset, created, seq)",
    # The timeline. `uid` makes a write idempotent: a migrated line's is derived from its content
    # and its occurrence, an appended event's is random.
    """CREATE TABLE events (
        seq {serial},
        uid {key} NOT NULL UNIQUE,
        time {float} NOT NULL,
        kind TEXT NOT NULL,
        node TEXT,
        gpu INTEGER,
        instance TEXT,
        severity TEXT NOT NULL,
        doc TEXT NOT NULL
    )""",
    "CREATE INDEX events_time ON events (time, seq)",
    "CREATE INDEX events_node ON events (node, time, seq)",
    "CREATE INDEX events_kind ON events (kind, time, seq)",
    # A baseline per (node, name): its file's document as written (StoredBaseline.to_dict).
    """CREATE TABLE baselines (
        node {key} NOT NULL,
        name {key} NOT NULL,
        created {float} NOT NULL,
        doc TEXT NOT NULL,
        PRIMARY KEY (node, name)
    )""",
    # The last versions seen of each node and its unacknowledged changes (VersionsBook's file).
    """CREATE TABLE node_versions (
        node {key} PRIMARY KEY,
        doc TEXT NOT NULL
    )""",
    # Facts about the store itself: when a file store was moved in (migrate_file_store), ...
    """CREATE TABLE store_meta (
        key {key} PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)

_V2 = (
    # A watcher's row (`rocm-console watch`, docs/watch.md), rewritten at each heartbeat: a
    # console on any machine sharing the store sees that the fleet is watched, since when and
    # by whom, and the watcher's open alerts. `fleet`: the profile's fleet key (a hash of its
    # nodes, services/watcher_presence.py fleet_key); `alerts`: the open alert states (JSON).
    """CREATE TABLE watchers (
        fleet {key} NOT NULL,
        host {key} NOT NULL,
        pid INTEGER NOT NULL,
        started {float} NOT NULL,
        heartbeat {float} NOT NULL,
        period {float} NOT NULL,
        profile TEXT NOT NULL,
        alerts TEXT NOT NULL,
        PRIMARY KEY (fleet, host, pid)
    )""",
    "CREATE INDEX watchers_heartbeat ON watchers (fleet, heartbeat)",
    # Which console or watcher wrote an event ("watch@host", "tui@host", "cli@host"): the team's
    # one timeline says where each came from. Also in `doc` (event_to_dict), so a dump keeps it.
    "ALTER TABLE events ADD COLUMN origin TEXT",
)

_V3 = (
    # One row per model pull on a node (`models pull`, console/services/models.py): written when
    # it starts, updated when it ends. `id` is a hash of (node, model, the supervisor's start
    # time), so every console that sees one pull writes the same row. `state`: running, ok,
    # failed, cancelled; `message`: one line (where it went, or why it failed); `origin`: who
    # recorded it first ("cli@host"), as for events.
    """CREATE TABLE pulls (
        id {key} PRIMARY KEY,
        node {key} NOT NULL,
        model {key} NOT NULL,
        revision TEXT,
        target TEXT,
        started {float} NOT NULL,
        ended {float},
        state TEXT NOT NULL,
        bytes {int8} NOT NULL,
        total_bytes {int8} NOT NULL,
        files INTEGER,
        message TEXT,
        origin TEXT
    )""",
    # newest first is ORDER BY started DESC, id DESC: with id in each index, no sort
    "CREATE INDEX pulls_started ON pulls (started, id)",
    "CREATE INDEX pulls_node ON pulls (node, started, id)",
    "CREATE INDEX pulls_model ON pulls (model, started, id)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "runs, events, baselines, node versions", _V1),
    Migration(2, "watchers, events' origin", _V2),
    Migration(3, "model pulls", _V3),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def statements(migration: Migration, dialect: str) -> list[str]:
    """The migration's statements in `dialect` (one of DIALECTS); ValueError for another."""
    if dialect not in _TYPES:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    return [sql.format(**_TYPES[dialect]) for sql in migration.sql]


def version_table(dialect: str) -> str:
    if dialect not in _TYPES:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    return VERSION_TABLE_DDL.format(**_TYPES[dialect])
