"""Watchers in the database (schema version 2): each running `rocm-console watch` rewrites its
row at every heartbeat (when, who, its open alerts), so a console on any machine sharing the
store learns that the fleet is watched, and a restarted watcher resumes the open alerts.

A row is the watcher's alone (fleet, host, pid): two watchers never write the same row. A
clean end removes it; a killed watcher's row goes stale (its heartbeat ages) and the next
watcher of the fleet on that host removes it, or any watcher once it is older than FORGET_S."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from console.core.store.rows import read_doc
from console.services.store.db import Database
from console.services.watcher_presence import AlertState, WatcherInfo, alert_state_from_dict

__all__ = ["FORGET_S", "WatcherRow", "WatcherTable"]

FORGET_S = 7 * 86400.0  # a row whose heartbeat is older than this is no watcher's any more
MAX_ALERTS = 10_000  # as alert-states.json: a row is read whole

_COLUMNS = ("fleet", "host", "pid", "started", "heartbeat", "period", "profile", "alerts")
_UPSERT = (
    f"INSERT INTO watchers ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
    "ON CONFLICT (fleet, host, pid) DO UPDATE SET started = excluded.started, heartbeat = excluded.heartbeat, "
    "period = excluded.period, profile = excluded.profile, alerts = excluded.alerts"
)

WatcherRow = tuple[WatcherInfo, list[AlertState]]


def _alerts(text: Any) -> list[AlertState]:
    try:
        items = read_doc(text)
    except (ValueError, TypeError):
        return []
    if not isinstance(items, list):
        return []
    return [s for s in (alert_state_from_dict(x) for x in items[:MAX_ALERTS]) if s is not None]


def _profile(text: Any) -> tuple[str, ...]:
    try:
        files = read_doc(text)
    except (ValueError, TypeError):
        return ()
    return tuple(f for f in files if isinstance(f, str)) if isinstance(files, list) else ()


class WatcherTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def beat(self, info: WatcherInfo, alerts: Sequence[AlertState]) -> None:
        """Write the watcher's row: its heartbeat and its open alerts now."""
        row = (
            info.key,
            info.host,
            info.pid,
            info.started,
            info.heartbeat,
            info.period,
            json.dumps(list(info.profile)),
            json.dumps([a.to_dict() for a in alerts], separators=(",", ":")),
        )
        with self.db.transaction():
            self.db.execute(_UPSERT, row)

    def end(self, info: WatcherInfo) -> None:
        """The watcher ended cleanly: its row goes (consoles take over at once)."""
        with self.db.transaction():
            self.db.execute(
                "DELETE FROM watchers WHERE fleet = ? AND host = ? AND pid = ?", (info.key, info.host, info.pid)
            )

    def forget(self, fleet: str, host: str, pids: Sequence[int], now: float) -> int:
        """Remove the rows of `fleet` on `host` whose pid is in `pids` (watchers that ended
        without a clean end), and every row older than FORGET_S; how many."""
        with self.db.transaction():
            gone = 0
            for pid in pids:
                cursor = self.db.execute(
                    "DELETE FROM watchers WHERE fleet = ? AND host = ? AND pid = ?", (fleet, host, int(pid))
                )
                gone += max(0, cursor.rowcount)
            cursor = self.db.execute("DELETE FROM watchers WHERE heartbeat < ?", (now - FORGET_S,))
            return gone + max(0, cursor.rowcount)

    def of(self, fleet: str) -> list[WatcherRow]:
        """The rows of `fleet`, the freshest heartbeat first (live or not: the reader judges)."""
        rows = self.db.rows(
            "SELECT host, pid, started, heartbeat, period, profile, alerts FROM watchers "
            "WHERE fleet = ? ORDER BY heartbeat DESC",
            (fleet,),
        )
        out: list[WatcherRow] = []
        for host, pid, started, heartbeat, period, profile, alerts in rows:
            info = WatcherInfo(
                int(pid), str(host), float(started), float(heartbeat), float(period), _profile(profile), fleet
            )
            out.append((info, _alerts(alerts)))
        return out
