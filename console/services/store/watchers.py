"""Watchers in the database (schema version 2): each running `rocm-console watch` rewrites its
row at every heartbeat (when, who, its open alerts), so a console on any machine sharing the
store learns that the fleet is watched, and a restarted watcher resumes the open alerts.

A row is the watcher's alone (fleet, host, pid): two watchers never write the same row. A
clean end removes it; a killed watcher's row goes stale (its heartbeat ages) and the next
watcher of the fleet on that host removes it, or any watcher once it is older than FORGET_S.

Clocks: machines sharing a store need not agree on the time. A row's times are kept in the
database server's clock (the writer shifts its own by how far it is from the server's, in
whole seconds) and shifted into the reader's clock when read, so a watcher whose machine runs
a minute behind is neither taken for gone nor for alive too long."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from console.core.store.rows import read_doc
from console.services.store.db import Database
from console.services.watcher_presence import AlertState, WatcherInfo, alert_state_from_dict

__all__ = ["FORGET_S", "WatcherRow", "WatcherTable"]

FORGET_S = 7 * 86400.0  # a row whose heartbeat is older than this is no watcher's any more
MAX_ALERTS = 10_000  # as alert-states.json: a row is read whole

_COLUMNS = ("fleet", "host", "pid", "started", "heartbeat", "period", "profile", "alerts")
# The server's time now, in seconds since the epoch (a constant text per engine, no value in it).
_SERVER_NOW = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS double precision)",
}
# started and heartbeat: the writer's time + ROUND(server now - writer now), the writer's now bound last
_VALUES = "?, ?, ?, ? + ROUND({now} - ?), ? + ROUND({now} - ?), ?, ?, ?"
_UPSERT = (
    f"INSERT INTO watchers ({', '.join(_COLUMNS)}) VALUES ({_VALUES}) "
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

    def beat(self, info: WatcherInfo, alerts: Sequence[AlertState], now: float | None = None) -> None:
        """Write the watcher's row: its heartbeat and its open alerts now (`now`: this
        machine's clock, which the row's times are shifted from)."""
        mine = time.time() if now is None else now
        row = (
            info.key,
            info.host,
            info.pid,
            info.started,
            mine,
            info.heartbeat,
            mine,
            info.period,
            json.dumps(list(info.profile)),
            json.dumps([a.to_dict() for a in alerts], separators=(",", ":")),
        )
        with self.db.transaction():
            self.db.execute(_UPSERT.format(now=_SERVER_NOW[self.db.dialect]), row)

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
        """The rows of `fleet`, the freshest heartbeat first (live or not: the reader judges),
        their times in this machine's clock."""
        rows = self.db.rows(
            f"SELECT host, pid, started, heartbeat, period, profile, alerts, {_SERVER_NOW[self.db.dialect]} "
            "FROM watchers WHERE fleet = ? ORDER BY heartbeat DESC",
            (fleet,),
        )
        out: list[WatcherRow] = []
        for host, pid, started, heartbeat, period, profile, alerts, server_now in rows:
            shift = float(round(time.time() - float(server_now)))
            info = WatcherInfo(
                int(pid),
                str(host),
                float(started) + shift,
                float(heartbeat) + shift,
                float(period),
                _profile(profile),
                fleet,
            )
            out.append((info, _alerts(alerts)))
        return out
