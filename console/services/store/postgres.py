"""The PostgreSQL engine: one psycopg 3 connection behind the same Database as SQLite.

The url comes from the profile (`[store] url`, console/core/store/target.py checks it: no
password in it); libpq supplies the password from its own environment (PGPASSWORD, ~/.pgpass).
psycopg is an optional extra (`pip install 'rocm-console[postgres]'`), imported only here.
The connection is in autocommit mode and Database issues BEGIN/COMMIT itself, as it does on
SQLite; every value is a bound parameter (psycopg 3 sends them apart from the text)."""

from __future__ import annotations

import re

from console.core.store.target import check_store_url, shown_url
from console.services.results import StoreError
from console.services.store.db import Database

__all__ = ["CONNECT_TIMEOUT_S", "connect_reason", "open_postgresql"]

CONNECT_TIMEOUT_S = 10  # a server that does not answer: one line after this, not a hang


def connect_reason(message: str) -> str:
    """libpq's message made one short line: 'connection failed: connection to server at "h",
    port 5432 failed: FATAL:  password authentication failed ...' -> 'password authentication
    failed ...' (the url, which names the server, is already in the line)."""
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    reason = first.rsplit(" failed: ", 1)[-1] if " failed: " in first else first
    reason = re.sub(r"^(FATAL|ERROR):\s+", "", reason).strip()
    if reason.lower() == "connection refused":
        return "connection refused (is PostgreSQL running there and listening on TCP/IP?)"
    if "no password supplied" in reason:
        return "no password supplied (export PGPASSWORD or put it in ~/.pgpass)"
    if reason.startswith("password authentication failed"):
        return reason + " (PGPASSWORD or ~/.pgpass)"
    return reason


def open_postgresql(url: str) -> Database:
    """Connect to the store at `url` and bring its schema up to date. StoreError, one line
    naming the url (never a password) and the reason, when it cannot be opened."""
    shown = shown_url(url)
    try:
        url = check_store_url(url)
    except ValueError as exc:
        raise StoreError(f"cannot open the store {shown}: {exc}") from None
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        raise StoreError(
            f"cannot open the store {shown}: psycopg is not installed (pip install 'rocm-console[postgres]')"
        ) from None
    try:
        options = conninfo_to_dict(url)
        options.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        options.setdefault("application_name", "rocm-console")
        conn = psycopg.connect(make_conninfo("", **options), autocommit=True)
    except psycopg.Error as exc:
        raise StoreError(f"cannot open the store {shown}: {connect_reason(str(exc))}") from None
    db = Database(conn, "postgresql", shown)
    try:
        db.migrate()
    except StoreError:
        db.close()
        raise
    return db
