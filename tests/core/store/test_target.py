"""Which store a console opens: the profile's `[store] url` (a PostgreSQL server, never with
a password in it) or the SQLite file in the data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.profiles import load_profile
from console.core.store.target import StoreTarget, check_store_url, shown_url, store_target


def test_the_engine_follows_the_profile(tmp_path):
    assert store_target(None, tmp_path) == StoreTarget("sqlite", str(tmp_path / "store.sqlite3"))
    assert store_target("", tmp_path).engine == "sqlite"
    url = "postgresql://console@db.lab:5432/rocm"
    assert store_target(url, tmp_path) == StoreTarget("postgresql", url)
    assert store_target("postgres://console@db.lab/rocm?sslmode=require", tmp_path).engine == "postgresql"


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("postgresql://console:s3cret@db:5432/rocm", "a password in the url"),
        ("postgresql://console@db/rocm?password=s3cret", "a password in the url"),
        ("mysql://console@db/rocm", "expected postgresql://"),
        ("postgresql://console@db:99999/rocm", "not a PostgreSQL url"),
        ("postgresql://console@db:5432/", "names no database"),
        ("postgresql:///rocm", "names no host"),
    ],
)
def test_bad_urls_are_refused_with_a_reason(url, fragment):
    with pytest.raises(ValueError, match=fragment):
        check_store_url(url)


def test_a_url_is_shown_without_its_password():
    assert shown_url("postgresql://console:s3cret@db:5432/rocm") == "postgresql://console:***@db:5432/rocm"
    assert shown_url("postgresql://console@db/rocm?password=s3cret&sslmode=require") == (
        "postgresql://console@db/rocm?password=***&sslmode=require"
    )


def write(folder: Path, text: str) -> Path:
    path = folder / "team.toml"
    path.write_text(text)
    return path


def test_the_profile_store_table(tmp_path):
    path = write(tmp_path, '[nodes.a]\nhost = "a"\n\n[store]\nurl = "postgresql://console@db.lab:5432/rocm"\n')
    assert load_profile([path]).store_url == "postgresql://console@db.lab:5432/rocm"
    assert load_profile([write(tmp_path, '[nodes.a]\nhost = "a"\n')]).store_url is None


@pytest.mark.parametrize(
    ("body", "line", "key", "fragment"),
    [
        ('url = "postgresql://console:s3cret@db/rocm"', 5, "url", "a password in the url: secrets do not belong"),
        ('url = "http://db/rocm"', 5, "url", "expected postgresql://user@host:port/database"),
        ("url = 5432", 5, "url", "expected a string"),
        ('password = "s3cret"', 5, "password", "a password belongs in PGPASSWORD or ~/.pgpass"),
    ],
)
def test_a_bad_store_table_names_the_profile_and_key(tmp_path, body, line, key, fragment):
    path = write(tmp_path, f'[nodes.a]\nhost = "a"\n\n[store]\n{body}\n')
    with pytest.raises(ProfileError) as err:
        load_profile([path])
    text = str(err.value)
    assert text.startswith(f"{path}:{line}: [store] key '{key}': ") and fragment in text and "\n" not in text
    assert "s3cret" not in text  # the refused password is never repeated
