"""A real, private PostgreSQL server for the store's tests and tests/perf/store_scale.py.

Debian's `postgresql` package (scripts/test-all installs it): `initdb` into a new folder, then
`postgres` itself as our child process (no pg_ctl daemon: we hold its PID and stop it by that
PID), listening on 127.0.0.1 on a free port, its unix socket in its own folder. PostgreSQL
refuses to run as root, and the tests run as root here and in CI: as root the folder belongs
to the `postgres` user (made by the package) and both commands run as that user
(subprocess's user=/group=); as anyone else they run as us.

Password authentication over TCP (scram-sha-256), as a team's server has: the store's tests
connect with the password in PGPASSWORD, as a user would. One server per test session; a
database per test (`create_database`/`drop_database`)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgServer", "PgUnavailable", "find_bin"]

USER = "console"


class PgUnavailable(RuntimeError):
    """The server cannot be started here: the reason, in one line (the tests are skipped with it)."""


def find_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    from tests.helpers import free_port

    return free_port()


class PgServer:
    def __init__(self, *, durable: bool = False) -> None:
        # durable=False (the tests): no fsync, a server that dies loses what it held, which no
        # test needs. durable=True (the perf script): PostgreSQL's defaults, as a team runs it.
        self.durable = durable
        self.bin = find_bin()
        self.password = secrets.token_hex(16)
        self.folder: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.host = "127.0.0.1"
        self._as: dict = {}

    # ---------------------------------------------------------- start and stop

    def start(self) -> PgServer:
        if self.bin is None:
            raise PgUnavailable("PostgreSQL is not installed (apt-get install postgresql; scripts/test-all does)")
        # Not pytest's tmp_path: its folders are root's 0700, where the postgres user cannot go.
        self.folder = Path(tempfile.mkdtemp(prefix="rc-pg-"))
        data, pwfile = self.folder / "data", self.folder / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise PgUnavailable("running as root and there is no 'postgres' user to run PostgreSQL as") from None
            self._as = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
            for path in (self.folder, pwfile):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        os.chmod(pwfile, 0o600)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        initdb = subprocess.run(
            [str(self.bin / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}", "--auth-local=trust",
             "--auth-host=scram-sha-256", "--locale=C", "-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True, text=True, env=env, cwd=self.folder, timeout=180, **self._as,
        )  # fmt: skip
        if initdb.returncode != 0:
            self.stop()
            raise PgUnavailable(f"initdb failed: {_last_line(initdb.stderr or initdb.stdout)}")
        fast = [] if self.durable else ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        for _ in range(5):  # a port taken between free_port() and the bind: another port
            self.port = _free_port()
            log = self.folder / "server.log"
            with open(log, "wb") as out:
                self.proc = subprocess.Popen(
                    [str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.folder),
                     "-c", f"listen_addresses={self.host}", "-c", "max_connections=60", *fast],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.folder,
                    start_new_session=True, **self._as,
                )  # fmt: skip
            if self._wait_ready(log):
                return self
            self._stop_proc()
        reason = _last_line(log.read_text(errors="replace")) if log.exists() else "no log"
        self.stop()
        raise PgUnavailable(f"postgres did not start: {reason}")

    def _wait_ready(self, log: Path, timeout: float = 60.0) -> bool:
        assert self.proc is not None and self.bin is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", self.host, "-p", str(self.port), "-t", "2"], capture_output=True
            )
            if ready.returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def _stop_proc(self) -> None:
        """The postmaster, by its PID: a fast shutdown (it ends its backends), then SIGKILL."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the postmaster and its backends
            proc.wait(timeout=10)

    def stop(self) -> None:
        self._stop_proc()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------- databases

    def url(self, database: str = "postgres", user: str = USER) -> str:
        """The store's url: no password (PGPASSWORD or ~/.pgpass supplies it)."""
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    def env(self) -> dict[str, str]:
        """What a process needs to connect: the password, as libpq reads it."""
        return {"PGPASSWORD": self.password}

    def admin(self, sql: str) -> None:
        """One statement as the superuser, outside a transaction (CREATE / DROP DATABASE)."""
        import psycopg

        with psycopg.connect(self.url(), password=self.password, autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self) -> str:
        name = "t_" + secrets.token_hex(6)
        self.admin(f'CREATE DATABASE "{name}"')  # a generated name of hex: nothing from outside
        return name

    def drop_database(self, name: str) -> None:
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
