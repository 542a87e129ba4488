"""The store's tests run on both engines: `store_engine` is "sqlite" or "postgresql".

PostgreSQL is a real private server (pg_server.py), started once per test session on
127.0.0.1 and stopped at its end; each test gets databases of its own (CREATE DATABASE,
dropped after), and the password in PGPASSWORD, as libpq reads it. When the server cannot
start here the PostgreSQL cases are skipped with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.services.store.pg_server import PgServer, PgUnavailable

ENGINES = ("sqlite", "postgresql")


class _Session:
    server: PgServer | None = None
    reason: str | None = None


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL server (started at its first use), or pytest.skip(reason)."""
    session = _Session()
    try:
        import psycopg  # noqa: F401 - the engine's driver: the test extra installs it
    except ImportError:
        session.reason = "psycopg is not installed (pip install -e '.[test]')"
    else:
        try:
            session.server = PgServer().start()
        except PgUnavailable as exc:
            session.reason = str(exc)
    yield session
    if session.server is not None:
        session.server.stop()


class Engine:
    """Where a test's stores live on one engine: `location(name)` is a SQLite file in the
    test's folder, or the url of a new database on the session's server."""

    def __init__(self, name: str, tmp_path: Path, server: PgServer | None) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.server = server
        self.databases: list[str] = []

    @property
    def postgresql(self) -> bool:
        return self.name == "postgresql"

    def location(self, name: str = "store") -> str:
        if self.server is None:
            return str(self.tmp_path / "db" / f"{name}.sqlite3")
        database = self.server.create_database()
        self.databases.append(database)
        return self.server.url(database)

    def drop(self) -> None:
        for database in self.databases:
            if self.server is not None:
                self.server.drop_database(database)


@pytest.fixture(params=ENGINES)
def store_engine(request, tmp_path, monkeypatch):
    if request.param == "sqlite":
        yield Engine("sqlite", tmp_path, None)
        return
    session = request.getfixturevalue("pg_server")
    if session.server is None:
        pytest.skip(f"PostgreSQL: {session.reason}")
    for name, value in session.server.env().items():
        monkeypatch.setenv(name, value)  # libpq reads it; processes the test starts inherit it
    engine = Engine("postgresql", tmp_path, session.server)
    yield engine
    engine.drop()
