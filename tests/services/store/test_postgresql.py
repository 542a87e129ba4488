"""The PostgreSQL engine itself: the profile picks it, libpq's environment gives the password,
a store that cannot be opened is one line naming the url (never a password) and the reason,
and two consoles (two processes, their own data folders, one url) see each other's runs and
baselines within 5 s. The parity of every table with SQLite: test_store.py and the others,
over `store_engine`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from console.core.profiles import load_profile
from console.services.results import StoreError
from console.services.store import open_store
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def pg(store_engine):
    if not store_engine.postgresql:
        pytest.skip("PostgreSQL only")
    return store_engine


def profile(folder: Path, url: str | None) -> Path:
    path = folder / "profile.toml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text('[nodes.a]\nhost = "a"\n' + (f'[store]\nurl = "{url}"\n' if url else ""))
    return path


@pytest.mark.parametrize("store_engine", ["postgresql"], indirect=True)
def test_the_profile_picks_the_engine(pg, tmp_path):
    url = pg.location()
    with open_store(load_profile([profile(tmp_path / "team", url)]), tmp_path / "data") as store:
        assert store.db.dialect == "postgresql" and store.where == url
    with open_store(load_profile([profile(tmp_path / "solo", None)]), tmp_path / "data") as store:
        assert store.db.dialect == "sqlite" and store.where == str(tmp_path / "data" / "store.sqlite3")


@pytest.mark.parametrize("store_engine", ["postgresql"], indirect=True)
def test_the_password_comes_from_pgpass_in_home(pg, tmp_path, monkeypatch):
    url = pg.location()
    home = tmp_path / "home"
    home.mkdir()
    (home / ".pgpass").write_text(f"127.0.0.1:{pg.server.port}:*:console:{pg.server.password}\n")
    (home / ".pgpass").chmod(0o600)  # libpq ignores a file others can read
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.delenv("PGPASSFILE", raising=False)
    monkeypatch.setenv("HOME", str(home))
    with open_store(url) as store:
        store.events.count()


@pytest.mark.parametrize("store_engine", ["postgresql"], indirect=True)
def test_a_store_that_cannot_be_opened_is_one_line_naming_the_url(pg, tmp_path, monkeypatch):
    url = pg.location()
    server = pg.server

    def refused(target: str) -> str:
        with pytest.raises(StoreError) as err:
            open_store(target)
        assert "\n" not in str(err.value)
        return str(err.value)

    down = f"postgresql://console@127.0.0.1:{free_port()}/db"
    assert (
        refused(down)
        == f"cannot open the store {down}: connection refused (is PostgreSQL running there and listening on TCP/IP?)"
    )
    nodb = server.url("nope")
    assert refused(nodb) == f'cannot open the store {nodb}: database "nope" does not exist'
    with_password = f"postgresql://console:{server.password}@127.0.0.1:{server.port}/postgres"
    line = refused(with_password)
    assert server.password not in line and line.startswith(
        f"cannot open the store postgresql://console:***@127.0.0.1:{server.port}/postgres: a password in the url"
    )
    monkeypatch.setenv("PGPASSWORD", "wrong")
    assert refused(url) == (
        f'cannot open the store {url}: password authentication failed for user "console" (PGPASSWORD or ~/.pgpass)'
    )
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-such-pgpass"))
    assert (
        refused(url) == f"cannot open the store {url}: no password supplied (export PGPASSWORD or put it in ~/.pgpass)"
    )


@pytest.mark.parametrize("store_engine", ["postgresql"], indirect=True)
def test_a_server_stopped_under_an_open_store_is_one_line(pg):
    with open_store(pg.location()) as store:
        database = store.db.one("SELECT current_database()")[0]
        pg.server.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
        with pytest.raises(StoreError) as err:
            store.runs.count()
    assert str(err.value).startswith(f"cannot use the store {store.where}: ") and "\n" not in str(err.value)


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from console.core.profiles import load_profile
    from console.services.baseline import BaselineStore
    from console.services.baseline_demo import seed_baselines
    from console.services.store import open_store
    from tests.services.store.file_store import console_run

    profile, data = load_profile([sys.argv[1]]), sys.argv[2]
    with open_store(profile, data) as store:
        seed_baselines(Path(data) / "demo-baselines")
        baseline = BaselineStore(Path(data) / "demo-baselines").get("mi300x-spx", "demo")
        time.sleep(1.0)  # the reader is polling already
        store.baselines.save(baseline)
        run = console_run(7, node="mi300x-spx", label="from-console-a")
        saved = store.runs.add(run)
        print(json.dumps({"id": saved.id, "saved_at": time.time()}), flush=True)
    """
)

READER = textwrap.dedent(
    """
    import json, sys, time
    from console.core.profiles import load_profile
    from console.services.baseline import BaselineError
    from console.services.store import open_store

    profile, data = load_profile([sys.argv[1]]), sys.argv[2]
    with open_store(profile, data) as store:
        print("ready", flush=True)
        end = time.time() + 30
        while time.time() < end:
            page = store.runs.list_runs(label="from-console-a", limit=5)
            if page:
                seen_at = time.time()
                try:
                    baseline = store.baselines.get("mi300x-spx", "demo")
                except BaselineError as exc:
                    baseline = None
                print(json.dumps({"id": page[0].id, "seen_at": seen_at, "node": page[0].context["node"],
                                  "baseline": baseline and [baseline.node, baseline.name, baseline.created]}))
                break
            time.sleep(0.2)
    """
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("store_engine", ["postgresql"], indirect=True)
def test_two_consoles_on_one_postgresql_see_each_others_run_and_baseline_within_5s(pg, tmp_path):
    url = pg.location()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    consoles = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        consoles.append((profile(folder, url), folder / "data"))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(consoles[1][0]), str(consoles[1][1])],
        cwd=ROOT, env={**env, "ROCM_CONSOLE_DATA_DIR": str(consoles[1][1])}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        writer = subprocess.run(
            [sys.executable, "-c", WRITER, str(consoles[0][0]), str(consoles[0][1])],
            cwd=ROOT, env={**env, "ROCM_CONSOLE_DATA_DIR": str(consoles[0][1])}, capture_output=True, text=True,
            timeout=90,
        )  # fmt: skip
        assert writer.returncode == 0, writer.stderr[-2000:]
        wrote = json.loads(writer.stdout)
        out, _ = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    seen = json.loads(out)
    assert seen["id"] == wrote["id"] and seen["node"] == "mi300x-spx"
    assert seen["seen_at"] - wrote["saved_at"] <= 5.0
    assert seen["baseline"] is not None and seen["baseline"][:2] == ["mi300x-spx", "demo"]
    # neither console wrote a SQLite file of its own: the team's history is the server's
    assert not any(data.joinpath("store.sqlite3").exists() for _, data in consoles)
    with open_store(url) as store:
        assert [r.id for r in store.runs.list_runs()] == [wrote["id"]]
