"""The headless watcher (`rocm-console watch`): the console's collection, health rules, events
and alerts with no screen, for as long as it runs (docs/watch.md).

- collection: FleetTelemetry over the profile's nodes (agents over SSH or locally, or the
  site's Prometheus); it reconnects a node that drops by itself (capped backoff);
- judging and writing: HealthWatch, the console's own, writing the timeline to the history's
  store (events.jsonl while it cannot be opened) and driving the [[alert]] rules through
  ``WatcherAlerts``;
- presence: its row in the store's ``watchers`` table rewritten every HEARTBEAT_S seconds with
  its open alerts, for consoles on any machine; on this one, ``watcher.lock`` flocked for the
  watcher's life, ``watcher.json`` at each heartbeat and ``alert-states.json`` at each alert
  change (console/services/watcher_presence.py), so consoles of the fleet step aside;
- one line per notable thing on stderr (journald reads it): node states, GPU health changes,
  alerts fired and cleared, an alert receiver failing and working again.

Alert state changes go to ``sinks`` (callables taking the AlertNotice, after the notice is
written and its actions are queued): the stderr line is one; Alertmanager is meant to be
another. ``Watcher.state()`` is what a metrics exporter reads.

A restarted watcher (SIGKILL, a crash, systemd's restart) resumes the alerts left open (the
store's freshest row of the fleet, or alert-states.json when it is newer): while their
condition still holds they are not fired again; one whose condition is not seen again within
its duration + RESUME_GRACE_S is cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import operator
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.alerts import GPU_METRICS, HEALTH_METRICS, AlertNotice, AlertRule, gpu_values
from console.core.health_profile import HealthSettings
from console.core.model import GpuMetrics, NodeHealth, Profile
from console.services.alerts import AlertService
from console.services.events import EventLog
from console.services.fleet import (
    OFFSCREEN_SAMPLE_S,
    FleetEvent,
    FleetTelemetry,
    GpuHealthChanged,
    NodeStateChanged,
)
from console.services.health_watch import HealthWatch
from console.services.results import StoreError
from console.services.transports import TransportPool
from console.services.watcher_presence import (
    ALERTS_FILE,
    HEARTBEAT_FILE,
    HEARTBEAT_S,
    LOCK_FILE,
    AlertState,
    WatcherInfo,
    events_data_dir,
    events_where,
    fleet_key,
    pid_alive,
    read_alert_file,
    watch_dir,
    watcher_from_dict,
    write_json_atomic,
)

if TYPE_CHECKING:  # imported when the profile has [alertmanager]
    from console.services.alertmanager import AlertmanagerPoster
    from console.services.history import History, HistoryEvents

__all__ = [
    "RESUME_GRACE_S",
    "WATCH_SAMPLE_S",
    "WATCH_TICK_S",
    "AlertSink",
    "WatcherAlerts",
    "Watcher",
    "WatcherBusy",
    "acquire_lock",
    "sample_period",
]

log = logging.getLogger("console.watch")
RESUME_GRACE_S = 60.0  # a resumed alert not seen firing again within its duration + this is cleared
STOP_TIMEOUT = 10.0  # seconds the end waits for the node streams to close
LAG_PROBE_S = 1.0  # how often the loop's lag is measured (one timer, no work)
# No screen draws a sample: each agent sends a full one this often at most (the rules over sample
# metrics and the versions read it), a `tick` line every WATCH_TICK_S between (the node is alive),
# its health lines as always (the GPU rules are judged on each: _health_read). At 1,024 nodes this
# is ~1/3 of the lines a console's off-screen nodes send (issue 37: <= 5 % of a core).
WATCH_SAMPLE_S = 30.0
WATCH_TICK_S = 5.0
WATCH_STALE_S = 3 * WATCH_TICK_S  # a node silent this long is stale (a console: 3 s at 1 Hz)
# No chart reads the history rings here: a minute of them, not a console's 10 (1,024 x 8: ~60 MB less)
WATCH_HISTORY_S = 60.0

AlertSink = Callable[[AlertNotice], None]
# what of a health reading the GPU rules can name (throttle_pct comes from the verdict)
_health_figures = operator.attrgetter(*(m for m in HEALTH_METRICS if m != "throttle_pct"))


def sample_period(rules: Sequence[AlertRule]) -> float:
    """Seconds between two full samples the watcher asks each agent for: WATCH_SAMPLE_S, or the
    shortest `for` of a rule over a sample metric (such a rule fires at most its own duration
    late), never under a console's off-screen period (OFFSCREEN_SAMPLE_S)."""
    durations = [
        r.condition.duration for r in rules if r.condition.subject == "metric" and r.condition.name in GPU_METRICS
    ]
    return max(OFFSCREEN_SAMPLE_S, min([WATCH_SAMPLE_S, *durations]))


class WatcherBusy(Exception):
    """Another watcher holds this fleet's lock on this machine (the message names it)."""


def acquire_lock(folder: Path) -> int:
    """The descriptor holding ``watcher.lock`` exclusively; WatcherBusy when another holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = _holder(folder)
        raise WatcherBusy(f"this fleet is watched already{holder} (lock {folder / LOCK_FILE})") from None
    return fd


def _holder(folder: Path) -> str:
    import json

    try:
        info = watcher_from_dict(json.loads((folder / HEARTBEAT_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        info = None
    return f" by {info.label} (since {info.since_text()})" if info is not None else ""


def _notice_key(notice: AlertNotice) -> tuple:
    return (notice.rule.name, notice.node, notice.gpu, notice.instance)


class WatcherAlerts(AlertService):
    """AlertService that keeps the open alerts (alert-states.json), resumes those of an earlier
    watcher without firing them again, and tells its sinks of every state change."""

    def __init__(
        self,
        rules: Sequence[AlertRule],
        *,
        events: EventLog | HistoryEvents | None = None,
        states_path: Path | None = None,
        resumed: Sequence[AlertState] = (),
        sinks: Sequence[AlertSink] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(rules, events=events)
        self.states_path = states_path
        self.sinks: list[AlertSink] = list(sinks)
        self._clock = clock
        self.open: dict[tuple, AlertState] = {}
        self._resumed: dict[tuple, float] = {}  # key -> the time it is cleared if not seen again
        self.save_failed = False
        self.on_change: Callable[[], None] | None = None  # the watcher publishes its row at once
        self.resume(resumed)

    def resume(self, states: Sequence[AlertState]) -> int:
        """Take the open alerts of an earlier watcher: those of rules that still exist and can
        clear (an event alert cannot). Returns how many."""
        by_name = {r.name: r for r in self.engine.rules}
        start = self._clock()
        for state in states:
            rule = by_name.get(state.rule)
            if rule is None or rule.condition.scope == "event":
                continue
            self.open[state.key] = state
            self._resumed[state.key] = start + rule.condition.duration + RESUME_GRACE_S
        return len(self._resumed)

    def handle(self, notices: Sequence[AlertNotice]) -> list:
        kept: list[AlertNotice] = []
        changed = False
        for notice in notices:
            key = _notice_key(notice)
            if notice.state == "fired" and key in self._resumed:
                del self._resumed[key]  # still holding: fired by the watcher before this one
                continue
            self._resumed.pop(key, None)
            kept.append(notice)
            if notice.rule.condition.scope == "event" or notice.state not in ("fired", "cleared"):
                continue
            if notice.state == "fired":
                self.open[key] = AlertState(
                    notice.rule.name,
                    notice.node,
                    notice.gpu,
                    notice.instance,
                    notice.since,
                    notice.time,
                    notice.rule.severity,
                    notice.text.removeprefix("[rocm-console] "),
                )
            else:
                self.open.pop(key, None)
            changed = True
        events = super().handle(kept) if kept else []
        if changed:
            self.save()
            if self.on_change is not None:
                self.on_change()
        for notice in kept:
            for sink in self.sinks:
                try:
                    sink(notice)
                except Exception as exc:  # a sink's bug never stops the watcher
                    log.error("alert sink %s failed: %s", getattr(sink, "__name__", sink), type(exc).__name__)
        return events

    def tick(self, now: float) -> list:
        out = super().tick(now)
        due = [k for k, at in self._resumed.items() if now >= at]
        if due:
            by_name = {r.name: r for r in self.engine.rules}
            clears = []
            for key in due:
                del self._resumed[key]
                state = self.open.get(key)
                if state is None:
                    continue
                rule, node, gpu, instance = key
                clears.append(AlertNotice(by_name[rule], "cleared", now, node, gpu, instance, since=state.since))
            out += self.handle(clears)
        return out

    def save(self) -> None:
        if self.states_path is None:
            return
        data = {
            "written": round(self._clock(), 3),
            "pid": os.getpid(),
            "alerts": [s.to_dict() for s in self.open.values()],
        }
        try:
            write_json_atomic(self.states_path, data)
            self.save_failed = False
        except OSError as exc:
            if not self.save_failed:
                self.save_failed = True
                log.warning("%s: cannot write: %s", self.states_path, exc.strerror or type(exc).__name__)


def _am_states(alerts: WatcherAlerts) -> list:
    """The open alerts as AlertmanagerPoster.resume takes them."""
    conditions = {r.name: r.condition.text for r in alerts.engine.rules}
    return [
        (
            s.rule,
            s.node,
            s.gpu,
            s.instance,
            s.severity,
            s.since or s.fired,
            s.text,
            f"{s.rule} on {s.subject}: {conditions.get(s.rule, '')}",
        )
        for s in alerts.open.values()
    ]


def alert_line(notice: AlertNotice) -> None:
    """The stderr sink: one line per alert fired or cleared."""
    log.info("alert %s", notice.text.removeprefix("[rocm-console] "))


@dataclass(frozen=True)
class WatcherState:
    """What the watcher knows now, for a metrics exporter (issue 37, section 3)."""

    started: float
    heartbeat: float | None
    nodes: dict[str, str]  # node -> live | stale | down | connecting
    alerts: tuple[AlertState, ...]
    events_written: int
    # (node, physical GPU, health state, reasons count): the GPUs with a health verdict
    gpus: tuple[tuple[str, int, str, int], ...] = ()
    loop_lag: float | None = None  # seconds the event loop last woke late (a busy watcher)


class Watcher:
    def __init__(
        self,
        profile: Profile,
        settings: HealthSettings,
        *,
        history: History | None = None,
        events: EventLog | HistoryEvents | None = None,
        interval: float = 1.0,
        heartbeat_s: float = HEARTBEAT_S,
        pool: TransportPool | None = None,
        clock: Callable[[], float] = time.time,
        profile_files: Sequence[str] = (),
    ) -> None:
        self.profile = profile
        self.history = history  # the store: events, and the watchers row consoles read
        if events is None:
            events = history.events if history is not None else EventLog()
        self.events = events
        self.key = fleet_key(profile.nodes)
        self.data_dir = events_data_dir(self.events)
        self.folder = watch_dir(self.data_dir, self.key)
        self.heartbeat_s = heartbeat_s
        self.profile_files = tuple(profile_files)
        self._clock = clock
        self.started = clock()
        self.heartbeat_at: float | None = None
        self._lock_fd: int | None = None
        self._stop = asyncio.Event()
        self._gpu_states: dict[tuple[str, int], str] = {}
        self.loop_lag: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.metrics: Any = None  # the /metrics server (console/services/metrics_export.py), when asked for
        self.fleet = FleetTelemetry(
            profile.nodes,
            pool,
            interval=interval,
            clock=clock,
            prometheus=profile.prometheus,
            stale_after=max(WATCH_STALE_S, 3 * interval),
            history_s=WATCH_HISTORY_S,
        )
        self.fleet.headless(sample_period(settings.alerts), WATCH_TICK_S)
        self.fleet.health_read = self._health_read
        self._write_failed = False
        self._row_failed = False  # the store's watchers row could not be written (said once)
        self._judged: dict[tuple[str, int], tuple] = {}  # (node, physical) -> its health as its rules last saw it
        self.alerts = WatcherAlerts(
            settings.alerts,
            events=self.events,
            states_path=self.folder / ALERTS_FILE,
            sinks=[alert_line],
            clock=clock,
        )
        # an alert fired or cleared is in the store's row at once, not at the next heartbeat:
        # a console elsewhere (or `status`) shows it as the file's readers do
        self._alerts_changed = asyncio.Event()
        self.alerts.on_change = self._alerts_changed_soon
        # [alertmanager]: every alert posted there too, re-sent while active
        self.alertmanager: AlertmanagerPoster | None = None
        if profile.alertmanager is not None:
            from console.services.alertmanager import AlertmanagerPoster

            self.alertmanager = AlertmanagerPoster(profile.alertmanager, clock=clock)
            self.sinks.append(self.alertmanager)
        self.health = HealthWatch(
            self.fleet, settings, events=self.events, alerts=self.alerts, clock=clock, watch_for_watcher=False
        )
        self.fleet.subscribe(self._said)

    @property
    def sinks(self) -> list[AlertSink]:
        """Where alert state changes go (append Alertmanager's here)."""
        return self.alerts.sinks

    # ------------------------------------------------------------ lifecycle

    def lock(self) -> None:
        """Take the fleet's lock and resume the open alerts (WatcherBusy if another watcher runs)."""
        self._lock_fd = acquire_lock(self.folder)
        count = self.alerts.resume(self._last_states())
        if self.alertmanager is not None:  # still firing: Alertmanager hears of them again
            self.alertmanager.resume(_am_states(self.alerts))
        if count:
            log.info("resumed %d open alert%s of the last watcher (not fired again)", count, "s"[: count != 1])

    def _last_states(self) -> list[AlertState]:
        """The open alerts of the watcher before this one: the store's freshest row of the
        fleet (this machine's or another's), or alert-states.json when it was written later
        (a watcher whose store was down). Rows of this host's dead watchers are removed."""
        written, from_file = read_alert_file(self.folder)
        store = self.history.try_open() if self.history is not None else None
        if store is None:
            return from_file
        here, me = socket.gethostname(), os.getpid()
        try:
            rows = [(i, a) for i, a in store.watchers.of(self.key) if (i.host, i.pid) != (here, me)]
            dead = [i.pid for i, _ in rows if i.host == here and not pid_alive(i.pid)]
            store.watchers.forget(self.key, here, dead, self._clock())
        except StoreError as exc:
            log.warning("%s", exc)
            return from_file
        if rows and (written is None or rows[0][0].heartbeat >= written):
            return rows[0][1]
        return from_file

    def stop(self) -> None:
        """End run() (a signal handler calls it)."""
        self._stop.set()

    def serve_metrics(self, port: int, address: str = "127.0.0.1") -> None:
        """Serve /metrics from now on (OSError when the port cannot be bound); run() ends it."""
        from console.services.metrics_export import MetricsServer

        self.metrics = MetricsServer(self.state_from_thread, events=self.events, history=self.history)
        self.metrics.start(port, address)

    def state_from_thread(self) -> WatcherState:
        """state() as read on the loop's thread (a scrape runs on the server's thread; the
        watcher's dicts change on the loop's)."""
        import concurrent.futures

        loop = self._loop
        if loop is None or not loop.is_running():
            return self.state()
        done: concurrent.futures.Future[WatcherState] = concurrent.futures.Future()

        def read() -> None:
            try:
                done.set_result(self.state())
            except Exception as exc:  # given to the scrape: an error answer, never a dead loop
                done.set_exception(exc)

        loop.call_soon_threadsafe(read)
        return done.result(timeout=STOP_TIMEOUT)

    async def _probe_lag(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(LAG_PROBE_S)
            self.loop_lag = max(0.0, loop.time() - asked - LAG_PROBE_S)

    async def run(self) -> None:
        if self._lock_fd is None:
            self.lock()
        self._loop = asyncio.get_running_loop()
        lag = asyncio.ensure_future(self._probe_lag())
        try:
            self.alerts.save()  # the file says whose states these are from the start
            await self._publish(self._beat())
            await self.health.start()
            if self.alertmanager is not None:
                self.alertmanager.start()
            await self.fleet.start()
            names = ", ".join(self.fleet.node_names)
            log.info(
                "watching %d node%s (%s); events to %s",
                len(self.fleet.node_names),
                "s"[: len(self.fleet.node_names) != 1],
                names,
                events_where(self.events),
            )
            while not self._stop.is_set():
                waits = [asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._alerts_changed.wait())]
                try:
                    await asyncio.wait(waits, timeout=self.heartbeat_s, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                self._alerts_changed.clear()
                if not self._stop.is_set():
                    await self._publish(self._beat())
        finally:
            lag.cancel()
            await self._end()

    async def _end(self) -> None:
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(self.fleet.stop(), STOP_TIMEOUT)
        with contextlib.suppress(Exception):
            await self.health.stop(drain=2.0)
        if self.alertmanager is not None:  # open alerts stay open there: a restart re-sends them
            await self.alertmanager.close(drain=2.0)
        with contextlib.suppress(OSError):
            (self.folder / HEARTBEAT_FILE).unlink()  # consoles take over at once
        if self.history is not None and self.history.is_open:
            with contextlib.suppress(StoreError, asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.to_thread(self.history.open().watchers.end, self._info()), STOP_TIMEOUT)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _alerts_changed_soon(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._alerts_changed.set)

    def _info(self, now: float | None = None) -> WatcherInfo:
        beat = now if now is not None else (self.heartbeat_at or self.started)
        return WatcherInfo(
            os.getpid(), socket.gethostname(), self.started, beat, self.heartbeat_s, self.profile_files, self.key
        )

    async def _publish(self, info: WatcherInfo) -> None:
        """The heartbeat and the open alerts in the store's watchers row (off the loop: a
        remote store's round trip never delays a node's stream). A failure is said once, and
        the store working again; a store that never opened is the face's line already."""
        if self.history is None:
            return
        alerts = list(self.alerts.open.values())  # read on the loop, which changes them
        was_open = self.history.is_open

        def write() -> None:
            store = self.history.try_open() if self.history is not None else None
            if store is None:
                raise StoreError(self.history.problem if self.history is not None else "no store")
            store.watchers.beat(info, alerts)

        try:
            await asyncio.to_thread(write)
        except StoreError as exc:
            if was_open and not self._row_failed:
                log.warning("%s", exc)
            self._row_failed = True
            return
        if self._row_failed or not was_open:
            log.info("store %s: events and the heartbeat are written there", self.history.where)
        self._row_failed = False

    def _beat(self) -> WatcherInfo:
        now = self._clock()
        info = self._info(now)
        try:
            write_json_atomic(self.folder / HEARTBEAT_FILE, info.to_dict())
            self.heartbeat_at = now
        except OSError as exc:
            log.warning(
                "%s: cannot write the heartbeat: %s", self.folder / HEARTBEAT_FILE, exc.strerror or type(exc).__name__
            )
        return info

    # ------------------------------------------------------------ what is said

    def _said(self, event: FleetEvent) -> None:
        if isinstance(event, NodeStateChanged):
            if event.health == NodeHealth.CONNECTING:
                return
            why = f": {event.error}" if event.error else ""
            log.info("node %s %s%s", event.node, event.health.value, why)
        elif isinstance(event, GpuHealthChanged):
            for gpu in event.gpus:
                key = (event.node, gpu.physical)
                state = gpu.verdict.state
                before = self._gpu_states.get(key)
                self._gpu_states[key] = state
                if before is None and state in ("ok", "unknown"):
                    continue  # the first reading of a healthy GPU is not news
                if state != before:
                    log.info("node %s GPU %d health %s", event.node, gpu.physical, gpu.verdict.line())

    def _health_read(self, node: str, physicals: tuple[int, ...]) -> None:
        """A health line: the GPU rules judged for the GPUs it read, at the health cadence (a
        sample, which judges every GPU of the node, comes only every sample_period())."""
        if not self.alerts.engine.rules:
            return
        snap = self.fleet.snapshot(node)
        healths = {h.physical: h for h in snap.gpu_health}
        judged = self._judged
        changed = []
        for physical in physicals:
            health = healths.get(physical)
            if health is None:
                continue
            # The same health again moves no rule (tick() fires what has held its duration):
            # most health lines of a big fleet end at this comparison. A reading carried from
            # the one judged last has its figures: state and share say the rest.
            key = (node, physical)
            verdict, reading = health.verdict, health.reading
            if reading is None:
                continue  # no reading: no figure for a rule
            source = reading.carried_from if reading.carried_from is not None else reading.t
            before = judged.get(key)
            if (
                before is not None
                and reading.carried_from is not None
                and before[3] == source
                and before[0] == verdict.state
                and before[1] == verdict.throttle_share
            ):
                continue
            seen = (verdict.state, verdict.throttle_share, _health_figures(reading), source)
            if before is None or before[:3] != seen[:3]:
                changed.append(health)
            judged[key] = seen
        if not changed:
            return
        rows: dict[int, GpuMetrics] = {}  # physical -> its first partition's row (as HealthWatch)
        if snap.latest is not None:
            partitions = {g.index: (g.physical, g.partition_id) for g in snap.static}
            for metrics in snap.latest.gpus:
                physical, partition = partitions.get(metrics.index, (metrics.index, 0))
                if partition == 0 or physical not in rows:
                    rows[physical] = metrics
        now = self._clock()
        try:
            for health in changed:
                verdict = health.verdict
                values = gpu_values(rows.get(health.physical), health.reading, verdict)
                state = verdict.state if verdict.state != "unknown" else None
                self.alerts.observe_gpu(now, node, health.physical, values, state)
            self._write_failed = False
        except (OSError, StoreError) as exc:  # the event log: said once, the node's stream goes on
            if not self._write_failed:
                self._write_failed = True
                why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                log.warning("event log %s: cannot write: %s", events_where(self.events), why)

    def state(self) -> WatcherState:
        return WatcherState(
            started=self.started,
            heartbeat=self.heartbeat_at,
            nodes={s.name: s.health.value for s in self.fleet.snapshots()},
            alerts=tuple(self.alerts.open.values()),
            events_written=self.health.written,
            gpus=tuple(
                (s.name, g.physical, g.verdict.state, len(g.verdict.findings))
                for s in self.fleet.snapshots()
                for g in s.gpu_health
            ),
            loop_lag=self.loop_lag,
        )


def install_signals(watcher: Watcher) -> None:
    """SIGTERM and SIGINT end the watcher cleanly (its streams closed, its processes ended)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, watcher.stop)
