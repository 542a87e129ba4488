"""Which database a console uses: the profile's `[store] url` (PostgreSQL, a team's shared
history), else the SQLite file in the data folder. Pure: services/store/ opens what this names.

The url never holds a password (a profile is a file people share and paste): libpq's own
environment supplies it, PGPASSWORD or ~/.pgpass (PGPASSFILE)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DB_FILE",
    "POSTGRES_SCHEMES",
    "StoreTarget",
    "check_store_url",
    "is_postgres_url",
    "shown_url",
    "store_target",
]

DB_FILE = "store.sqlite3"
POSTGRES_SCHEMES = ("postgresql", "postgres")  # the two spellings libpq accepts
_SECRET_PARAMS = ("password", "passfile")


@dataclass(frozen=True)
class StoreTarget:
    engine: str  # "sqlite" or "postgresql"
    location: str  # the SQLite file, or the PostgreSQL url (never with a password)


def is_postgres_url(text: str) -> bool:
    return urllib.parse.urlsplit(text.strip()).scheme.lower() in POSTGRES_SCHEMES


def check_store_url(text: str) -> str:
    """`text` as a store url, or ValueError with a one-line reason: postgresql://user@host:port/db,
    no password in it (neither `user:secret@` nor `?password=`), a database named."""
    text = text.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError as exc:
        raise ValueError(f"not a PostgreSQL url ({exc})") from None
    if parts.scheme.lower() not in POSTGRES_SCHEMES:
        raise ValueError("expected postgresql://user@host:port/database (a PostgreSQL server)")
    params = [key.lower() for key, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    if parts.password is not None or any(key in _SECRET_PARAMS for key in params):
        raise ValueError(
            "a password in the url: secrets do not belong in profiles; "
            "export PGPASSWORD or put it in ~/.pgpass (libpq reads both)"
        )
    if not parts.hostname and "host" not in params:  # ?host=/run/postgresql: libpq's unix socket
        raise ValueError("the url names no host (postgresql://user@host:port/database)")
    if not parts.path.strip("/"):
        raise ValueError("the url names no database (postgresql://user@host:port/database)")
    if parts.fragment:
        raise ValueError("a #fragment has no meaning in a PostgreSQL url")
    return text


def store_target(url: str | None, data_dir: Path | str) -> StoreTarget:
    """The profile's [store] url when it has one (checked: ValueError), else the SQLite file
    `store.sqlite3` in the data folder."""
    if url:
        return StoreTarget("postgresql", check_store_url(url))
    return StoreTarget("sqlite", str(Path(data_dir) / DB_FILE))


def shown_url(text: str) -> str:
    """The url as messages show it: a password (which check_store_url refuses) replaced by ***,
    and so is a `password=` parameter."""
    try:
        parts = urllib.parse.urlsplit(text.strip())
    except ValueError:
        return "the PostgreSQL url"
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(
        f"{key}=***" if key.lower() in _SECRET_PARAMS else f"{key}={value}"
        for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
