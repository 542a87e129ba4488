"""Is this fleet watched? What a console learns of a running `rocm-console watch` (docs/watch.md).

A watcher rewrites, every ``HEARTBEAT_S`` seconds, its row in the store's ``watchers`` table
(schema version 2, console/services/store/watchers.py): its fleet key, host, pid, start and
heartbeat times and its open alerts. A console of any machine sharing the store reads it there
first (``WatcherPresence`` with the console's History, once the history is open).

On the watcher's own machine it also keeps, in ``<data>/watch/<fleet key>/`` (``<data>``:
the console's data folder), what needs no store and what a console uses while the store
cannot be opened:

- ``watcher.lock``: flocked exclusively for the watcher's life (a second watcher of the
  fleet on this machine is refused: console/services/watcher.py);
- ``watcher.json``: its pid, host, profile files, start and heartbeat times and heartbeat
  period, rewritten atomically at each heartbeat;
- ``alert-states.json``: the alerts it has fired and not cleared, rewritten atomically at
  each change (a restarted watcher resumes them, or those of the store's newer row).

The fleet key is a hash of the profile's nodes (name, transport, host, port, user): two
profile files naming the same nodes are one fleet, a demo and a lab are not.

A console counts the watcher as present while its heartbeat is younger than
``STALE_PERIODS`` periods and, on the same host, its pid is alive (watchers and consoles on
different machines rely on their clocks agreeing within a few seconds: NTP). Light on
purpose: the console's HealthWatch and `rocm-console status` import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: a fresh `results list` loads the store, not the records' module
    from console.core.model import NodeSpec

__all__ = [
    "ALERTS_FILE",
    "HEARTBEAT_FILE",
    "HEARTBEAT_S",
    "LOCK_FILE",
    "AlertState",
    "WatcherInfo",
    "events_data_dir",
    "events_where",
    "WatcherPresence",
    "fleet_key",
    "is_alive",
    "pid_alive",
    "read_alert_file",
    "read_alert_states",
    "read_watcher",
    "watch_dir",
    "write_json_atomic",
]

HEARTBEAT_FILE = "watcher.json"
LOCK_FILE = "watcher.lock"
ALERTS_FILE = "alert-states.json"
HEARTBEAT_S = 5.0  # the watcher rewrites its heartbeat this often
STALE_PERIODS = 3  # a heartbeat older than this many periods is a watcher gone
CHECK_S = 3.0  # a console looks at the files at most this often
MAX_FILE_BYTES = 1 << 20  # a state file larger than this is not the watcher's: ignored


def fleet_key(nodes: Iterable[NodeSpec]) -> str:
    """The fleet's identity: its nodes, however many files name them."""
    parts = sorted(f"{n.name}\0{n.transport}\0{n.host}\0{n.port}\0{n.user or ''}" for n in nodes)
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def watch_dir(data_dir: Path, key: str) -> Path:
    return Path(data_dir) / "watch" / key


def events_data_dir(events: Any) -> Path:
    """The data folder of a console's event log: the history's (HistoryEvents.data_dir), else
    the folder of an EventLog's file (tests hand one in)."""
    folder = getattr(events, "data_dir", None)
    return Path(folder) if folder is not None else Path(events.path).parent


def events_where(events: Any) -> str:
    """What a line about the event log names: the store (HistoryEvents.where), its data
    folder's file while the store cannot be opened, else the EventLog's file."""
    if getattr(events, "unavailable", None):
        from console.services.events import EVENTS_FILE

        return str(events_data_dir(events) / EVENTS_FILE)
    where = getattr(events, "where", None)
    return str(where) if where else str(events.path)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temp file and a rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def with_suppressed_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _read_json(path: Path) -> Any:
    """The file's JSON, or None when absent, too large or not JSON (never raises)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class WatcherInfo:
    """What watcher.json says of the watcher."""

    pid: int
    host: str
    started: float
    heartbeat: float
    period: float
    profile: tuple[str, ...] = ()
    key: str = ""

    @property
    def label(self) -> str:
        return f"{self.host}:{self.pid}"

    def since_text(self) -> str:
        """When it started: the time of day today, the date before that."""
        started = time.localtime(self.started)
        if time.strftime("%Y-%m-%d", started) == time.strftime("%Y-%m-%d"):
            return time.strftime("%H:%M", started)
        return time.strftime("%Y-%m-%d %H:%M", started)

    def line(self) -> str:
        return f"watched since {self.since_text()} by {self.label}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "host": self.host,
            "started": round(self.started, 3),
            "heartbeat": round(self.heartbeat, 3),
            "period": self.period,
            "profile": list(self.profile),
            "key": self.key,
        }


def watcher_from_dict(data: Any) -> WatcherInfo | None:
    if not isinstance(data, dict):
        return None
    pid, host = data.get("pid"), _text(data.get("host"))
    started, beat, period = _num(data.get("started")), _num(data.get("heartbeat")), _num(data.get("period"))
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not host:
        return None
    if started is None or beat is None or period is None or period <= 0:
        return None
    profile = data.get("profile")
    files = tuple(p for p in profile if isinstance(p, str)) if isinstance(profile, list) else ()
    return WatcherInfo(pid, host, started, beat, period, files, _text(data.get("key")) or "")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    except OSError:
        return False
    return True


def is_alive(info: WatcherInfo, now: float) -> bool:
    """A fresh heartbeat and, on this host, a live pid."""
    if now - info.heartbeat > STALE_PERIODS * info.period:
        return False
    return not (info.host == socket.gethostname() and not pid_alive(info.pid))


def read_watcher(folder: Path, now: float | None = None) -> WatcherInfo | None:
    """The watcher of this folder when it is alive (fresh heartbeat; on this host, its pid)."""
    info = watcher_from_dict(_read_json(Path(folder) / HEARTBEAT_FILE))
    if info is None:
        return None
    return info if is_alive(info, time.time() if now is None else now) else None


@dataclass(frozen=True)
class AlertState:
    """One alert a watcher has fired and not cleared."""

    rule: str
    node: str | None
    gpu: int | None
    instance: str | None
    since: float | None  # when its condition began to hold
    fired: float  # when it fired
    severity: str = "warn"
    text: str = ""

    @property
    def key(self) -> tuple[str, str | None, int | None, str | None]:
        return (self.rule, self.node, self.gpu, self.instance)

    @property
    def subject(self) -> str:
        parts = [p for p in (self.node, None if self.gpu is None else f"GPU {self.gpu}") if p]
        if self.instance:
            parts.append(f"instance {self.instance}")
        return " ".join(parts) or "fleet"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "node": self.node,
            "gpu": self.gpu,
            "instance": self.instance,
            "since": None if self.since is None else round(self.since, 3),
            "fired": round(self.fired, 3),
            "severity": self.severity,
            "text": self.text,
        }


def alert_state_from_dict(data: Any) -> AlertState | None:
    if not isinstance(data, dict) or not _text(data.get("rule")):
        return None
    gpu = data.get("gpu")
    if gpu is not None and (not isinstance(gpu, int) or isinstance(gpu, bool)):
        return None
    fired = _num(data.get("fired"))
    if fired is None:
        return None
    return AlertState(
        rule=data["rule"],
        node=_text(data.get("node")),
        gpu=gpu,
        instance=_text(data.get("instance")),
        since=_num(data.get("since")),
        fired=fired,
        severity=_text(data.get("severity")) or "warn",
        text=_text(data.get("text")) or "",
    )


def read_alert_file(folder: Path) -> tuple[float | None, list[AlertState]]:
    """(when the watcher wrote the file, the open alerts in it); (None, []) when the file is
    absent or not the watcher's."""
    data = _read_json(Path(folder) / ALERTS_FILE)
    items = data.get("alerts") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(items, list):
        return None, []
    return _num(data.get("written")), [s for s in (alert_state_from_dict(x) for x in items[:10000]) if s is not None]


def read_alert_states(folder: Path) -> list[AlertState]:
    """The open alerts a watcher wrote (none when the file is absent or not the watcher's)."""
    return read_alert_file(folder)[1]


class WatcherPresence:
    """A console's view of its fleet's watcher, looked at no more than every CHECK_S seconds."""

    def __init__(
        self, data_dir: Path, nodes: Iterable[NodeSpec], *, check_s: float = CHECK_S, history: Any = None
    ) -> None:
        self.history = history  # the console's History: its store's watchers table (another machine's watcher)
        self.key = fleet_key(nodes)
        self.folder = watch_dir(data_dir, self.key)
        self.check_s = check_s
        self.watcher: WatcherInfo | None = None
        self.alerts: list[AlertState] = []
        self._checked_at: float | None = None

    def _due(self, now: float, force: bool) -> bool:
        return force or self._checked_at is None or not 0 <= now - self._checked_at < self.check_s

    def check(self, now: float | None = None, *, force: bool = False) -> WatcherInfo | None:
        now = time.time() if now is None else now
        if self._due(now, force):
            self._checked_at = now
            self.watcher, self.alerts = self._read(now)
        return self.watcher

    async def check_async(self, now: float | None = None) -> WatcherInfo | None:
        """check() for an event loop: the store's query (a server's round trip, or a wait for
        another thread's query on the same connection) runs on a worker thread."""
        import asyncio

        now = time.time() if now is None else now
        if self._due(now, False):
            self._checked_at = now
            self.watcher, self.alerts = await asyncio.to_thread(self._read, now)
        return self.watcher

    def _read(self, now: float) -> tuple[WatcherInfo | None, list[AlertState]]:
        found = self._from_store(now)
        if found is not None:
            return found
        # no store, or no live watcher there: one of this machine whose store is down
        watcher = read_watcher(self.folder, now)
        return watcher, read_alert_states(self.folder) if watcher is not None else []

    def _from_store(self, now: float) -> tuple[WatcherInfo, list[AlertState]] | None:
        """The freshest live watcher of the fleet in the history's store. Only once the face
        has opened the history (never an opening on the caller's loop); None on any error."""
        history = self.history
        if history is None or not history.is_open:
            return None
        from console.services.results import StoreError

        try:
            rows = history.open().watchers.of(self.key)
        except StoreError:
            return None
        for info, alerts in rows:
            if is_alive(info, now):
                return info, alerts
        return None

    def header(self) -> str:
        """The status bar's words: '' when nobody watches."""
        if self.watcher is None:
            return ""
        firing = len(self.alerts)
        alerts = f" · {firing} alert{'s' if firing != 1 else ''} firing" if firing else ""
        return self.watcher.line() + alerts
