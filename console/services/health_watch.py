"""The running console's timeline and alerts: fleet events -> events.jsonl + the alert rules.

``HealthWatch`` subscribes to a FleetTelemetry (console/services/fleet.py) and, while the
console runs:

- writes the timeline (console/core/events.py) to the event log of the console's data dir
  (console/services/events.py): node up / stale / down, the GPU events a health line causes
  (health changed, ECC increment, throttle episode start / end, reset, XID), and what the
  screens report through ``observe_instances``, ``partition_switched``, ``benchmark_started``
  and ``benchmark_finished``;
- records each node's versions (its probe and GPU facts) at every contact and writes a
  ``node.changed`` event when they differ from the last ones recorded
  (console/services/node_versions.py VersionsBook; ``changes`` holds the marked nodes);
- drives the profile's ``[[alert]]`` rules (console/services/alerts.py): every sample of
  every physical GPU (its metrics and health), node states, and every event written; fired
  and cleared alerts are events too; ``tick`` (once a second, ``start()`` runs it) fires
  conditions that held their duration without a new observation.
- steps aside while a watcher of the same fleet runs (`rocm-console watch`, docs/watch.md;
  ``presence``, looked at from the tick): the rules are still judged (health is shown as
  always) but no alert is sent or written, and the fleet's own events (node states, GPU
  events) are left to the watcher, which writes them to the same log; what the screens
  report (instances, partitions, benchmarks) is still written here.

Nothing here blocks the event loop for long: an append is one locked ``write`` of a few
hundred bytes, alert deliveries run on the dispatcher's tasks. A log that cannot be written
(disk full, read-only) is said once in the log (``console.health``) and the console goes on.

GPU conditions are judged per physical GPU, with the metrics of its first partition's row
(temperatures, power and energy are the physical GPU's; in SPX the row is the GPU): a
``health == fail`` rule fires once for a GPU in CPX, not once per partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from console.core.alerts import gpu_values
from console.core.events import FAIL, INFO, WARN, Event, EventDetector, partition_event
from console.core.health_profile import HealthSettings
from console.core.instance_view import InstanceState, InstanceView
from console.core.model import AlertmanagerSpec, GpuMetrics, NodeSnapshot
from console.services.alerts import AlertService
from console.services.events import EventLog
from console.services.fleet import (
    FleetEvent,
    FleetTelemetry,
    GpuEventsSeen,
    NodeStateChanged,
    TelemetryReceived,
)
from console.services.node_versions import VersionsBook, node_changed_event, versions_of
from console.services.results import StoreError
from console.services.watcher_presence import WatcherInfo, WatcherPresence, events_data_dir, events_where

if TYPE_CHECKING:  # imported when the profile has [alertmanager]
    from console.services.alertmanager import AlertmanagerPoster
    from console.services.history import History, HistoryEvents

__all__ = ["HealthWatch"]

log = logging.getLogger("console.health")

# instance states -> the event written when an instance enters it
_INSTANCE_EVENTS = {
    InstanceState.STARTING: ("instance.started", INFO),
    InstanceState.READY: ("instance.ready", INFO),
    InstanceState.FAILED: ("instance.failed", FAIL),
    InstanceState.STOPPED: ("instance.stopped", INFO),
}


def _versions_book(history: History | None, data_dir: Path) -> VersionsBook:
    """The history's book (the store's table), else the data folder's files: a store that
    cannot be opened loses no record (its next opening moves the files in). Not said here:
    the face says the store's problem once (History.problem)."""
    if history is not None:
        with contextlib.suppress(StoreError):
            return history.versions_book()
    return VersionsBook(data_dir / "node-versions")


def _why(exc: Exception) -> str:
    """An OSError's reason, or a StoreError's own line."""
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


class HealthWatch:
    def __init__(
        self,
        fleet: FleetTelemetry,
        settings: HealthSettings | None = None,
        *,
        events: EventLog | HistoryEvents | None = None,
        alerts: AlertService | None = None,
        clock: Callable[[], float] = time.time,
        versions: VersionsBook | None = None,
        presence: WatcherPresence | None = None,
        watch_for_watcher: bool = True,
        alertmanager: AlertmanagerSpec | None = None,
    ) -> None:
        self.fleet = fleet
        self.settings = settings if settings is not None else HealthSettings()
        fleet.configure_health(self.settings.rules)
        self.events: EventLog | HistoryEvents = events if events is not None else EventLog()
        self.alerts = alerts if alerts is not None else AlertService(self.settings.alerts, events=self.events)
        self.alerts.events = self.events  # fired / cleared alerts go to the same log
        self._clock = clock
        self._nodes = EventDetector(self.settings.rules)  # node up / stale / down
        self._instances: dict[tuple[str, str], tuple[InstanceState, int | None]] = {}
        self._polled: set[str] = set()  # nodes whose instances were listed before
        self._task: asyncio.Task | None = None
        self._write_failed = False
        self.written = 0  # events appended since start (tests, the status line)
        data_dir = events_data_dir(self.events)  # the console's (the demo's own, a test's tmp)
        history = getattr(self.events, "history", None)  # HistoryEvents: the face's History
        self.versions = versions if versions is not None else _versions_book(history, data_dir)
        self._versions_seen: dict[str, tuple] = {}  # node -> the facts last recorded
        try:
            self.changes: dict[str, str] = self.versions.marked()  # node -> its unacknowledged changes
        except StoreError as exc:
            log.warning("node versions: %s", exc)
            self.changes = {}
        # A watcher of this fleet (the watcher itself passes watch_for_watcher=False)
        if presence is None and watch_for_watcher:
            presence = WatcherPresence(data_dir, (fleet.spec(n) for n in fleet.node_names), history=history)
        self.presence = presence
        self.alertmanager: AlertmanagerPoster | None = None
        if alertmanager is not None:  # posted by this console while no watcher runs
            from console.services.alertmanager import AlertmanagerPoster

            self.alertmanager = self.alerts.alertmanager = AlertmanagerPoster(alertmanager)
        fleet.subscribe(self.on_fleet_event)

    @property
    def watched(self) -> WatcherInfo | None:
        """The watcher that sends this fleet's alerts now (None: this console sends them)."""
        return self.presence.watcher if self.presence is not None else None

    def _check_watcher(self, now: float) -> None:
        if self.presence is not None:
            self.presence.check(now)
            self._watcher_seen()

    def _watcher_seen(self) -> None:
        if self.presence is not None and self.presence.watcher is not None and self.alertmanager is not None:
            self.alertmanager.forget()  # the watcher posts (and resolves) them now

    def _alert(self, name: str, *args) -> None:
        """One observation for the rules: judged always, sent only when no watcher sends it."""
        if self.watched is not None:
            getattr(self.alerts.engine, name)(*args)  # the engine's state moves; nothing goes out
        else:
            getattr(self.alerts, name)(*args)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the alert dispatcher and the once-a-second tick on the running loop."""
        self.alerts.dispatcher.start()
        self._check_watcher(self._clock())
        if self._task is None:
            self._task = asyncio.create_task(self._ticking(), name="health-watch")

    async def stop(self, drain: float = 2.0) -> None:
        """Stop ticking; give queued alert deliveries ``drain`` seconds, then stop them."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.alerts.dispatcher.drain(drain)
        await self.alerts.dispatcher.close()
        if self.alertmanager is not None:
            await self.alertmanager.close(drain)

    async def _ticking(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                now = self._clock()
                if self.presence is not None:  # the store's row read off the loop
                    await self.presence.check_async(now)
                    self._watcher_seen()
                self._alert("tick", now)
            except (OSError, StoreError) as exc:  # noqa: PERF203 - the log could not be written: said once
                self._failed_write(exc)

    # ------------------------------------------------------------ writing

    def record(self, events: Event | Iterable[Event]) -> list[Event]:
        """Append events to the log and show them to the event rules; never raises for the log."""
        batch = [events] if isinstance(events, Event) else list(events)
        if not batch:
            return []
        try:
            self.written += self.events.append(batch)
            self._write_failed = False
        except (OSError, StoreError) as exc:
            self._failed_write(exc)
        for event in batch:
            if event.kind.startswith("alert."):
                continue  # an alert's own event never feeds the rules (no loops)
            try:
                self._alert("observe_event", event)
            except (OSError, StoreError) as exc:
                self._failed_write(exc)
        return batch

    def _failed_write(self, exc: Exception) -> None:
        if not self._write_failed:
            self._write_failed = True
            if isinstance(exc, StoreError):  # the line names the store already
                log.warning("events: %s", exc)
            else:
                log.warning("event log %s: cannot write: %s", events_where(self.events), _why(exc))

    # ------------------------------------------------------------ fleet events

    def on_fleet_event(self, event: FleetEvent) -> None:
        now = self._clock()
        try:
            if isinstance(event, NodeStateChanged):
                happened = self._nodes.node_state(event.node, event.health.value, now, event.error)
                if self.watched is None:  # else the watcher writes them
                    self.record(happened)
                self._alert("observe_node", now, event.node, event.health.value)
            elif isinstance(event, GpuEventsSeen):
                if self.watched is None:
                    self.record(event.events)
            elif isinstance(event, TelemetryReceived):
                snap = self.fleet.snapshot(event.node)
                self._observe_sample(now, snap)
                self._observe_versions(now, snap)
        except (OSError, StoreError) as exc:
            self._failed_write(exc)

    def _observe_versions(self, now: float, snap: NodeSnapshot) -> None:
        """The node's versions once its probe has answered, again whenever they move."""
        if snap.probe is None:
            return
        key = (
            snap.probe,
            tuple((g.physical, g.model, g.vbios, g.compute_partition, g.memory_partition) for g in snap.static),
        )
        if self._versions_seen.get(snap.name) == key:
            return
        self._versions_seen[snap.name] = key
        changes = self.versions.observe(versions_of(snap.name, snap.probe, snap, captured=now))
        if changes:
            self.record(node_changed_event(snap.name, changes, now))
            self.changes = self.versions.marked()

    def acknowledge(self, node: str) -> int:
        """Clear a node's change mark."""
        count = self.versions.acknowledge(node)
        self.changes = self.versions.marked()
        return count

    def _observe_sample(self, now: float, snap: NodeSnapshot) -> None:
        if not self.alerts.engine.rules or snap.latest is None:
            return
        rows: dict[int, GpuMetrics] = {}
        partitions = {g.index: (g.physical, g.partition_id) for g in snap.static}
        for metrics in snap.latest.gpus:
            physical, partition = partitions.get(metrics.index, (metrics.index, 0))
            if partition == 0 or physical not in rows:
                rows[physical] = metrics
        for known in snap.gpu_health:
            rows.setdefault(known.physical, GpuMetrics(index=known.physical))
        for physical, metrics in sorted(rows.items()):
            health = snap.health_of(physical)
            verdict = health.verdict if health else None
            values = gpu_values(metrics, health.reading if health else None, verdict)
            state = verdict.state if verdict is not None and verdict.state != "unknown" else None
            self._alert("observe_gpu", now, snap.name, physical, values, state)

    # ------------------------------------------------------------ what the screens report

    def observe_instances(self, node: str, views: Sequence[InstanceView]) -> list[Event]:
        """An instance list of one node (a poll): events for the instances whose state moved.

        The first list of a node is what the console found, not something that happened
        now: it writes no events (an instance seen later for the first time does)."""
        now = self._clock()
        first = node not in self._polled
        self._polled.add(node)
        out: list[Event] = []
        seen = set()
        for v in views:
            key = (node, v.name)
            seen.add(key)
            state = InstanceState.STARTING if v.state == InstanceState.LOADING else v.state
            before = self._instances.get(key)
            self._instances[key] = (state, v.pid)
            if first or state not in _INSTANCE_EVENTS or (before is not None and before == (state, v.pid)):
                continue
            if before is not None and before[0] == state:
                continue
            kind, severity = _INSTANCE_EVENTS[state]
            gpus = ",".join(map(str, v.gpus)) or "-"
            text = f"{v.name} {state.value} on GPUs {gpus}" + (f": {v.reason}" if v.reason else "")
            details = {"gpus": list(v.gpus), "pid": v.pid, "model": v.model}
            out.append(Event(now, kind, node, instance=v.name, severity=severity, message=text, details=details))
        for key in [k for k in self._instances if k[0] == node and k not in seen]:
            del self._instances[key]
        return self.record(out)

    def partition_switched(self, node: str, gpus: Sequence[int], compute: str | None, memory: str | None) -> Event:
        event = partition_event(self._clock(), node, gpus, compute, memory)
        self.record(event)
        return event

    def benchmark_started(self, node: str, name: str, instance: str | None = None) -> Event:
        event = Event(self._clock(), "benchmark.started", node, instance=instance, message=f"benchmark {name} started")
        self.record(event)
        return event

    def benchmark_finished(self, node: str, name: str, instance: str | None = None, *, ok: bool = True) -> Event:
        text = f"benchmark {name} " + ("finished" if ok else "failed")
        event = Event(
            self._clock(),
            "benchmark.finished",
            node,
            instance=instance,
            severity=INFO if ok else WARN,
            message=text,
            details={"ok": ok},
        )
        self.record(event)
        return event
