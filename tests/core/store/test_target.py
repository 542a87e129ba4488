"""Which store a console opens: the profile's `[store] url` (a PostgreSQL server, never with
a password in it) or the SQLite file in the data folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.errors import ProfileError
from console.core.profiles import load_profile
from console.core.store.profile_table import store_url_in
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


def test_the_store_table_alone_is_read_as_the_whole_profile_reads_it(tmp_path):
    """What `results list` takes from the profiles it finds: the same url as load_profile, and the
    same one-line errors for [store], with the rest of the files unread (a node table the profile
    reader would refuse does not stop a command that reads runs)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    nodes = write(tmp_path / "a", '[nodes.a]\nhost = "a"\ngpus = "all of them"\n')  # the profile reader refuses it
    team = write(tmp_path / "b", '[store]\nurl = "postgresql://console@db.lab:5432/rocm"\n')
    assert store_url_in([nodes, team]) == "postgresql://console@db.lab:5432/rocm"
    assert store_url_in([nodes]) is None and store_url_in([]) is None
    with pytest.raises(ProfileError):
        load_profile([nodes, team])
    with pytest.raises(ProfileError, match=r"\[store\] is also defined in "):
        store_url_in([team, write(tmp_path, '[store]\nurl = "postgresql://x@db/rocm"\n')])
    with pytest.raises(ProfileError, match=r"team\.toml:1: \[store\]: expected a table, got string"):
        store_url_in([write(tmp_path, 'store = "postgresql://x@db/rocm"\n')])
    with pytest.raises(ProfileError, match=r"team\.toml:1"):
        store_url_in([write(tmp_path, "[store\nurl = 1\n")])  # not TOML: the file and its line


@pytest.mark.parametrize(
    ("body", "key", "fragment"),
    [
        ('url = "postgresql://console:s3cret@db/rocm"', "url", "a password in the url: secrets do not belong"),
        ('password = "s3cret"', "password", "a password belongs in PGPASSWORD or ~/.pgpass"),
    ],
)
def test_the_store_table_alone_refuses_what_the_profile_refuses(tmp_path, body, key, fragment):
    path = write(tmp_path, f'[nodes.a]\nhost = "a"\n\n[store]\n{body}\n')
    with pytest.raises(ProfileError) as alone:
        store_url_in([path])
    with pytest.raises(ProfileError) as whole:
        load_profile([path])
    assert str(alone.value) == str(whole.value) and f"[store] key '{key}': " in str(alone.value)
    assert fragment in str(alone.value) and "s3cret" not in str(alone.value)
