"""Run `rocm-console` as a user does: `python -m console ...` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def stored_runs(data_dir: Path) -> list:
    """The runs the data folder's store holds (the SQLite file every command opens), oldest first."""
    from console.services.store import open_store

    with open_store(Path(data_dir) / "store.sqlite3") as store:
        return store.runs.list()


def stored_events(data_dir: Path) -> list:
    """The events the data folder's store holds, oldest first."""
    from console.services.store import open_store

    with open_store(Path(data_dir) / "store.sqlite3") as store:
        return list(reversed(store.events.read()))


class StoreEvents:
    """The data folder's store's events, as a console or a watcher writes and reads them."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / "store.sqlite3"

    def append(self, events) -> int:
        from console.services.store import open_store

        with open_store(self.path) as store:
            return store.events.append(events)

    def read(self, **filters) -> list:
        from console.services.store import open_store

        with open_store(self.path) as store:
            return store.events.read(**filters)
