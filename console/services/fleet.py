"""FleetTelemetry: one resident agent stream per node, bounded history, node health.

Each node has its own task: connect, install the agent, read its JSON lines,
and on any failure mark the node down with a one-line reason and retry with
capped backoff. A slow or dead node never delays another one. Listeners get
events synchronously on the event loop and must not block.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import operator
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from console.core.backoff import backoff_delay
from console.core.events import Event, EventDetector
from console.core.health import UNKNOWN, HealthReading, HealthRules
from console.core.model import (
    AgentFailure,
    AgentHello,
    GpuHealth,
    GpuStatic,
    HealthFrame,
    NodeHealth,
    NodeSnapshot,
    NodeSpec,
    ProbeInfo,
    PrometheusSpec,
    StaticInfo,
    TelemetryFrame,
)
from console.core.series import BlockSeries, NodeHistory, capacity_for
from console.core.telemetry import AgentProtocolError, AgentTick, parse_agent_line
from console.core.text import printable, unexpected
from console.services.agent_bundle import install_agent, run_probe, telemetry_argv
from console.services.transports import TransportPool
from console.transport.base import StreamControl, TransportError

if TYPE_CHECKING:
    from console.services.prometheus import PrometheusSource

log = logging.getLogger("console.fleet")

# Metrics kept as history per logical GPU (field names of GpuMetrics).
HISTORY_METRICS = ("util_pct", "power_w", "temp_junction_c", "temp_mem_c", "vram_used_mib", "gfx_clock_mhz")
_METRIC_COLUMN = {metric: i for i, metric in enumerate(HISTORY_METRICS)}
_history_values = operator.attrgetter(*HISTORY_METRICS)
_read_time = operator.itemgetter(1)  # of a health line's (physical, time read) pair
# A GPU whose last full health entry this console lacks is asked for again at most this often
# (an entry it cannot read would otherwise be asked for at every sample).
ASK_FULL_AGAIN_S = 60.0
# Stored value = reading / scale (NodeHistory keeps half floats, whose largest is 65,504: VRAM in
# MiB goes past it; in 8 MiB units it reaches 512 GiB, a step of 16 units = 128 MiB near 192 GiB).
HISTORY_SCALES = tuple(8.0 if m == "vram_used_mib" else 1.0 for m in HISTORY_METRICS)
# Nodes not on screen get a full sample from their agent every this many seconds (a `tick` line
# the seconds between, health lines as always): the console parses ~1/5 of the lines of a big
# fleet. Used only while a screen says what it shows (watch) and the agent can (hello "control").
OFFSCREEN_SAMPLE_S = 5.0
# ... or less often in a fleet so big that its off-screen samples would pass this many a second:
# each costs the console ~170 µs to decode here (1,024 nodes: one every 10 s, 100 a second).
OFFSCREEN_SAMPLES_PER_S = 100.0
# ... and between them a `tick` line every this many seconds: the node is alive and on time.
# 2 s, not every tick: at 1,024 nodes each line costs the console a read however short it is
# (~1,000 a second were ~5 % of a core), and 2 s stays inside stale_after (3 s at 1 Hz), so a
# silent node off screen is still marked stale as soon as one on screen.
OFFSCREEN_TICK_S = 2.0
MAX_RATE_EVERY = 600  # the most ticks between two samples an agent accepts (agent/sampling.py MAX_EVERY)
_TICK_LINE = '{"kind":"tick",'  # how the agent writes a tick line (json.dumps, compact separators)
PROBE_GATE_TIMEOUT = 5.0  # seconds a node's versions probe waits for probe_gate at most
# Memory the fleet's history may take (every node's NodeHistory): the full window (history_s) for
# fleets up to ~11,000 logical GPUs at 1 Hz; a larger fleet keeps a shorter window per GPU, never
# under MIN_HISTORY_S (that floor wins over the budget: 65,536 GPUs take ~230 MB for it). (Prometheus-fed nodes get a GPU's full window
# back from Prometheus when its detail view opens: FleetTelemetry.load_history.)
HISTORY_BUDGET_MIB = 80.0
MIN_HISTORY_S = 300.0  # the budget never cuts a GPU's window under 5 minutes
_BYTES_PER_SAMPLE = 2 * len(HISTORY_METRICS)  # NodeHistory: half floats (+ one float64 time per node)


@functools.lru_cache(maxsize=1)
def agent_reads_health() -> bool:
    """The agent this console ships knows `telemetry --health-interval` (issue O's agent side).

    Asked once, from the bundled source: an agent without it would refuse the flag and
    every stream would fail, so the console passes it only when the agent has it."""
    spec = importlib.util.find_spec("console.agent.node_agent")
    try:
        return spec is not None and "--health-interval" in Path(str(spec.origin)).read_text(encoding="utf-8")
    except OSError:
        return False


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class NodeStateChanged:
    node: str
    health: NodeHealth
    error: str | None


@dataclass(frozen=True, slots=True)
class TelemetryReceived:
    node: str
    frame: TelemetryFrame
    received_at: float


@dataclass(frozen=True, slots=True)
class TopologyChanged:
    """The node's logical GPUs changed (first contact, partition switch)."""

    node: str
    gpus: tuple[GpuStatic, ...]


@dataclass(frozen=True, slots=True)
class GpuHealthChanged:
    """The health state (ok / warn / fail) of one or more of the node's physical GPUs changed."""

    node: str
    gpus: tuple[GpuHealth, ...]  # every GPU of the node, as snapshot.gpu_health


@dataclass(frozen=True, slots=True)
class GpuEventsSeen:
    """Timeline events a health line caused (health changes, ECC increments, throttle
    episodes, resets, XIDs): console/services/health_watch.py writes them to the event log."""

    node: str
    events: tuple[Event, ...]


FleetEvent = NodeStateChanged | TelemetryReceived | TopologyChanged | GpuHealthChanged | GpuEventsSeen
Listener = Callable[[FleetEvent], None]


class _NodeTrack:
    """Mutable per-node state, owned by the service (the outside sees snapshots)."""

    def __init__(self, spec: NodeSpec, history: int, capacity: Callable[[], int]) -> None:
        self.spec = spec
        self.history = history  # the full window, in samples (a detail view's backfill)
        self.capacity = capacity  # samples a new history gets now (the fleet's memory budget)
        self.snapshot = NodeSnapshot(name=spec.name, health=NodeHealth.CONNECTING)
        self.health_since: dict[int, tuple[str, float]] = {}  # physical GPU -> (state, since)
        self.health_notes: tuple[str, ...] = ()  # the latest health line's skipped entries
        # One block for every logical GPU and HISTORY_METRICS column of the node (NodeHistory).
        self.hist: NodeHistory | None = None
        self.frames = 0
        # Rate control (agents whose hello lists "rate"): the link's stdin, and the `every` asked.
        self.control: StreamControl | None = None
        self.controllable = False
        self.every = 1
        self.heard_at: float | None = None  # the newest line of any kind (a kept-back tick included)
        self.holds = 0  # full_rate() holders (a run recording this node)
        # Health deltas: the agent's number of the full entry the console holds for each GPU,
        # whether the agent takes asks for one again, and when each GPU was last asked for.
        self.health_n: dict[int, int] = {}
        self.asks_health = False
        self.health_asked: dict[int, float] = {}

    def record(self, frame: TelemetryFrame, at: float) -> None:
        gpus = frame.gpus
        indexes = [g.index for g in gpus]
        hist = self.hist
        if hist is None:
            hist = self.hist = NodeHistory(self.capacity(), indexes, HISTORY_SCALES)
        elif not hist.covers(indexes):  # new GPUs (a partition switch before its static line)
            order = list(hist.gpus)
            order += [i for i in indexes if i not in order]
            hist = self.hist = hist.relayout(order)
        values: list = []
        for gpu in gpus:
            values += _history_values(gpu)
        hist.append(frame.ts, indexes, values)
        self.frames += 1

    def lay_out(self, static: tuple[GpuStatic, ...]) -> None:
        """The node's logical GPUs are these now: GPUs gone lose their history, those that stay keep it."""
        order = [g.index for g in static]
        if self.hist is not None and list(self.hist.gpus) != order:
            self.hist = self.hist.relayout(order)

    @property
    def gpu_count(self) -> int:
        return len(self.hist.gpus) if self.hist is not None else 0

    def series(self, gpu_index: int, metric: str) -> BlockSeries | None:
        column = _METRIC_COLUMN.get(metric)
        if self.hist is None or column is None:
            return None
        return self.hist.column(gpu_index, column)


class FleetTelemetry:
    def __init__(
        self,
        nodes: Iterable[NodeSpec],
        pool: TransportPool | None = None,
        *,
        interval: float = 1.0,
        history_s: float = 600.0,
        stale_after: float | None = None,
        clock: Callable[[], float] = time.time,
        backoff_cap: float = 10.0,
        prometheus: PrometheusSpec | None = None,
        history_budget_mib: float = HISTORY_BUDGET_MIB,
        health: HealthRules | None = None,
    ) -> None:
        self.pool = pool or TransportPool()
        # GPU health (docs/health.md): one HealthTracker per (node, physical GPU), inside the detector
        self.health_rules = health if health is not None else HealthRules()
        self.detector = EventDetector(self.health_rules)
        self.interval = interval
        self.history_s = history_s
        self._stale_after = stale_after
        self._clock = clock
        self._backoff_cap = backoff_cap
        self._full_history = capacity_for(history_s, interval)
        self._min_history = min(self._full_history, capacity_for(MIN_HISTORY_S, interval))
        self._history_budget = int(history_budget_mib * 2**20)
        self._topology_moved = False
        self._watched: tuple[str, ...] = ()  # nodes on screen (watch)
        self._watched_set: frozenset[str] = frozenset()
        self._watching = False  # a screen has said what it shows: off-screen agents may send less
        # Nobody at the console (unattended()): the nodes on screen send a sample every this many
        # ticks, as often as the screen is drawn then; 1: every tick.
        self._onscreen_every = 1
        self.drawn_every_s: float | None = None  # unattended(): the screen's cadence (its status bar says it)
        # headless(): no screen at all (the watcher) asks off-screen agents for rarer lines
        self._offscreen_sample_s = OFFSCREEN_SAMPLE_S
        self._offscreen_tick_s = OFFSCREEN_TICK_S
        # headless(): told of every health line (node, physical GPUs read), after it is ingested
        self.health_read: Callable[[str, tuple[int, ...]], None] | None = None
        self._tracks = {n.name: _NodeTrack(n, self._full_history, self.history_capacity) for n in nodes}
        self._listeners: list[Listener] = []
        self._tasks: dict[str, asyncio.Task] = {}
        self._watchdog: asyncio.Task | None = None
        # Nodes with telemetry = "prometheus" are fed by one PrometheusSource for all
        # of them (console/services/prometheus.py), not by an agent stream each.
        self._prometheus_spec = prometheus
        # nodes fed by an agent stream (offscreen_every, asked for every node at every redraw)
        self._streamed = sum(not self._from_prometheus(t) for t in self._tracks.values())
        self.prometheus: PrometheusSource | None = None  # made at start()
        self._prometheus_task: asyncio.Task | None = None
        # The versions probe of each node waits for this (set by the UI once its first frame
        # with every node's samples is drawn): on a small machine a probe's process would
        # compete with that frame. None: probes start at once.
        self.probe_gate: asyncio.Event | None = None

    # ------------------------------------------------------------ public API

    @property
    def node_names(self) -> list[str]:
        return list(self._tracks)

    @property
    def stale_after(self) -> float:
        return self._stale_after if self._stale_after is not None else max(3.0, 3 * self.interval)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def snapshot(self, node: str) -> NodeSnapshot:
        return self._tracks[node].snapshot

    def snapshots(self) -> list[NodeSnapshot]:
        return [t.snapshot for t in self._tracks.values()]

    def spec(self, node: str) -> NodeSpec:
        return self._tracks[node].spec

    def series(self, node: str, gpu_index: int, metric: str) -> BlockSeries | None:
        """The history of one metric of one logical GPU (None before its first sample)."""
        return self._tracks[node].series(gpu_index, metric)

    def configure_health(self, rules: HealthRules) -> None:
        """The profile's [health] rules; call before start() (the streams pass its interval)."""
        self.health_rules = rules
        self.detector = EventDetector(rules)

    def health_interval(self) -> float | None:
        """The --health-interval the agent streams get (None: the agent has no health reader)."""
        return self.health_rules.interval if agent_reads_health() else None

    def health_readings(self, node: str, physical: int) -> tuple[HealthReading, ...]:
        """The bounded history of one physical GPU's health readings, oldest first."""
        tracker = self.detector.tracker(node, physical)
        return tracker.readings if tracker is not None else ()

    def health_notes(self, node: str) -> tuple[str, ...]:
        """The GPU entries the node's latest health line had that could not be read."""
        return self._tracks[node].health_notes

    def frames_received(self, node: str) -> int:
        return self._tracks[node].frames

    def history_capacity(self) -> int:
        """Samples per logical GPU that the history budget allows for the GPUs known now."""
        known = [max(len(t.snapshot.static), t.gpu_count) for t in self._tracks.values()]
        seen = [n for n in known if n]
        gpus: float = sum(seen)
        if seen:  # nodes not contacted yet count as the average one: no ring is sized for a fleet of one
            gpus += (len(known) - len(seen)) * gpus / len(seen)
        fits = int(self._history_budget // (_BYTES_PER_SAMPLE * max(1, gpus)))
        return min(self._full_history, max(self._min_history, fits))

    def history_bytes(self) -> int:
        """Memory the history rings take now (tests/perf/fleet_scale.py prints it)."""
        return sum(t.hist.nbytes for t in self._tracks.values() if t.hist is not None)

    def rebalance_history(self) -> bool:
        """Shrink the rings when the GPUs grew past the budget (first contact of a big fleet, a
        switch to CPX): each keeps its newest samples. True if any was shrunk."""
        if self.history_bytes() <= self._history_budget * 1.1:
            return False
        target = self.history_capacity()
        shrunk = False
        for track in self._tracks.values():
            hist = track.hist
            if hist is not None and hist.capacity > target:
                track.hist = hist.relayout(hist.gpus, target)
                shrunk = True
        return shrunk

    def _from_prometheus(self, track: _NodeTrack) -> bool:
        return track.spec.telemetry == "prometheus" and self._prometheus_spec is not None

    async def start(self) -> None:
        self._start_prometheus()
        for name, track in self._tracks.items():
            if self._from_prometheus(track):
                continue
            if name not in self._tasks:
                self._tasks[name] = asyncio.create_task(self._follow(track), name=f"telemetry:{name}")
        if self._watchdog is None:
            self._watchdog = asyncio.create_task(self._watch_staleness(), name="telemetry:watchdog")

    async def stop(self) -> None:
        tasks = list(self._tasks.values()) + ([self._watchdog] if self._watchdog else [])
        if self._prometheus_task is not None:
            tasks.append(self._prometheus_task)
            self._prometheus_task = None
        self._tasks.clear()
        self._watchdog = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.prometheus is not None:
            await self.prometheus.aclose()
            self.prometheus = None
        await self.pool.close()

    async def set_interval(self, interval: float) -> None:
        """Restart every agent stream at a new sampling interval (0.1–10 s)."""
        interval = min(10.0, max(0.1, interval))
        if interval == self.interval:
            return
        self.interval = interval
        for name, task in list(self._tasks.items()):  # Prometheus nodes follow self.interval
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            track = self._tracks[name]
            self._tasks[name] = asyncio.create_task(self._follow(track), name=f"telemetry:{name}")

    async def restart_node(self, node: str) -> None:
        """Drop the node's stream and connect again now (e.g. after a partition switch)."""
        if self._from_prometheus(self._tracks[node]):
            return  # the next refresh sees the new GPUs (the layout query runs again)
        task = self._tasks.get(node)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._tasks[node] = asyncio.create_task(self._follow(self._tracks[node]), name=f"telemetry:{node}")

    # ------------------------------------------------------------ internals

    def _emit(self, event: FleetEvent) -> None:
        if isinstance(event, TopologyChanged):
            self._topology_moved = True
        for listener in list(self._listeners):
            listener(event)

    def _set_health(self, track: _NodeTrack, health: NodeHealth, error: str | None = None) -> None:
        snap = track.snapshot
        if snap.health == health and snap.error == error:
            return
        track.snapshot = replace(snap, health=health, error=error)
        self._emit(NodeStateChanged(track.spec.name, health, error))

    async def _follow(self, track: _NodeTrack) -> None:
        attempt = 0
        while True:
            try:
                got_frame = await self._stream_once(track)
                if got_frame:
                    attempt = 0
                reason = f"{track.spec.name}: agent stopped unexpectedly"
                self._set_health(track, NodeHealth.DOWN, reason)
            except TransportError as exc:
                self._set_health(track, NodeHealth.DOWN, exc.reason)
            except AgentProtocolError as exc:
                self._set_health(track, NodeHealth.DOWN, f"{track.spec.name}: agent protocol error: {exc}")
            except OSError as exc:  # e.g. the agent bundle could not be read
                self._set_health(track, NodeHealth.DOWN, f"{track.spec.name}: {printable(exc)}")
            except Exception as exc:  # noqa: BLE001 - whatever a node sent, the row says so: never stuck at connecting
                self._set_health(track, NodeHealth.DOWN, unexpected(track.spec.name, exc))
            await asyncio.sleep(backoff_delay(attempt, cap=self._backoff_cap))
            attempt += 1

    async def _stream_once(self, track: _NodeTrack) -> bool:
        """Run one agent session; True if at least one frame arrived."""
        transport = self.pool.get(track.spec)
        command = await install_agent(transport, track.spec)
        # Versions are nice to have: fetched beside the stream once the agent has
        # said something, never before it. Started together, the probe's process
        # competes for the CPU with the agent's start-up and delays the first frame.
        want_probe = track.snapshot.probe is None
        probe_task: asyncio.Task | None = None

        def start_probe() -> None:
            nonlocal probe_task
            if want_probe and probe_task is None:
                probe_task = asyncio.create_task(self._probe(track, transport, command))

        argv = telemetry_argv(command, self.interval, self.health_interval())
        got_frame = False
        cancelled = False
        track.controllable, track.every = False, 1  # until this agent's hello says it reads control lines
        if getattr(transport, "accepts_control", False):
            track.control = control = StreamControl()
            stream = transport.stream_lines(argv, env=command.env_dict(), control=control)
        else:
            track.control = None
            stream = transport.stream_lines(argv, env=command.env_dict())
        try:
            async for line in stream:
                if line.startswith(_TICK_LINE) and len(line) < 96:
                    # An off-screen agent's kept-back sample, the line most of a big fleet sends:
                    # only its arrival matters (alive, on time), so it is not decoded.
                    self._ticked(track)
                    continue
                start_probe()
                if not line.strip():
                    continue
                message = parse_agent_line(line)
                if isinstance(message, TelemetryFrame):
                    got_frame = True
                self._apply(track, message)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            await stream.aclose()
            if not cancelled:
                start_probe()  # the agent ended before its first line: the versions may say why
            if probe_task is not None:
                # Let a probe in flight finish (it is bounded by its own timeout)
                # so a node that drops at once still shows its versions.
                await asyncio.gather(probe_task, return_exceptions=True)
        return got_frame

    async def _probe(self, track: _NodeTrack, transport, command) -> None:
        if self.probe_gate is not None:
            try:
                await asyncio.wait_for(self.probe_gate.wait(), PROBE_GATE_TIMEOUT)
            except asyncio.TimeoutError:
                pass
        probe = await run_probe(transport, command)
        if probe is not None:
            track.snapshot = replace(track.snapshot, probe=probe)

    def _apply(self, track: _NodeTrack, message) -> None:
        snap = track.snapshot
        if isinstance(message, AgentTick):
            self._ticked(track)
        elif isinstance(message, AgentHello):
            track.snapshot = replace(snap, source=message.source, interval=message.interval)
            track.controllable = "rate" in message.control
            track.asks_health = "health" in message.control
            # a new agent numbers its full entries afresh, and has not been asked for any
            track.health_n.clear()
            track.health_asked.clear()
            self._steer(track)
        elif isinstance(message, StaticInfo):
            track.snapshot = replace(snap, static=message.gpus)
            track.lay_out(message.gpus)
            self._emit(TopologyChanged(track.spec.name, message.gpus))
        elif isinstance(message, TelemetryFrame):
            now = track.heard_at = self._clock()
            track.record(message, now)
            track.snapshot = replace(snap, latest=message, last_sample_ts=now)
            self._set_health(track, NodeHealth.LIVE, None)
            self._emit(TelemetryReceived(track.spec.name, message, now))
        elif isinstance(message, HealthFrame):
            self.ingest_health(
                track.spec.name,
                message.readings,
                notes=message.notes,
                same=message.same,
                numbered=message.numbered,
                same_of=message.same_of,
            )
        elif isinstance(message, ProbeInfo):
            track.snapshot = replace(snap, probe=message)
        elif isinstance(message, AgentFailure):
            raise TransportError(f"{track.spec.name}: {message.message}", "command")

    def _ticked(self, track: _NodeTrack) -> None:
        track.heard_at = self._clock()
        snap = track.snapshot
        if snap.health == NodeHealth.STALE and snap.latest is not None:
            self._set_health(track, NodeHealth.LIVE, None)

    async def _watch_staleness(self) -> None:
        while True:
            # a third of the stale age: a node is marked within a third of it late (a second
            # at 1 Hz; every wake-up of an idle console costs)
            await asyncio.sleep(min(1.0, self.stale_after / 3))
            if self._topology_moved:  # GPUs came or went: the history may be over its budget
                self._topology_moved = False
                self.rebalance_history()
            now = self._clock()
            for track in self._tracks.values():
                snap = track.snapshot
                if self._from_prometheus(track):
                    continue  # judged by its source, from the scrape time
                if snap.health == NodeHealth.LIVE and snap.last_sample_ts is not None:
                    # a kept-back sample's tick line says the agent is alive and on time
                    age = now - max(snap.last_sample_ts, track.heard_at or 0.0)
                    if age > self.stale_after:
                        self._set_health(track, NodeHealth.STALE, f"no sample for {age:.0f} s")

    # ------------------------------------------------------------ Prometheus-fed nodes

    def _start_prometheus(self) -> None:
        nodes = [t.spec for t in self._tracks.values() if self._from_prometheus(t)]
        if not nodes or self._prometheus_task is not None or self._prometheus_spec is None:
            return
        from console.services.prometheus import PrometheusSource

        self.prometheus = source = PrometheusSource(self, self._prometheus_spec, nodes, clock=self._clock)
        source.watch(self._watched)
        self._prometheus_task = asyncio.create_task(source.run(), name="telemetry:prometheus")

    def ingest(
        self,
        node: str,
        frame: TelemetryFrame,
        *,
        static: tuple[GpuStatic, ...],
        source: str,
        interval: float,
        sample_at: float,
    ) -> None:
        """A frame from a source other than the node's agent (sample_at: when it was taken)."""
        track = self._tracks[node]
        snap = track.snapshot
        if snap.static != static:
            snap = track.snapshot = replace(snap, static=static)
            track.lay_out(static)
            self._emit(TopologyChanged(node, static))
        track.record(frame, sample_at)
        track.snapshot = replace(snap, latest=frame, last_sample_ts=sample_at, source=source, interval=interval)
        self._emit(TelemetryReceived(node, frame, self._clock()))

    def ingest_health(
        self,
        node: str,
        readings: Iterable[HealthReading],
        *,
        notes: tuple[str, ...] = (),
        same: tuple[tuple[int, float], ...] = (),
        numbered: tuple[tuple[int, int], ...] = (),
        same_of: tuple[tuple[int, int], ...] = (),
    ) -> None:
        """Health readings of some of a node's physical GPUs (an agent's health line, or DME's
        families): verdicts into snapshot.gpu_health, GpuHealthChanged when a state moved, and
        the events they cause as GpuEventsSeen.  ``same``: (physical, time) of GPUs the agent
        read then and found unchanged: their last reading carried forward to that time.
        ``numbered``: (physical, n) of the agent's full entries here; ``same_of``: (physical, n)
        of the full entry each ``same`` GPU repeats: one this console lacks is asked for again."""
        track = self._tracks[node]
        detector = self.detector
        events: list[Event] = []
        changed = False
        by_gpu = {h.physical: h for h in track.snapshot.gpu_health}
        health_since = track.health_since
        read: list[int] = []
        have = track.health_n
        lacking = [gpu for gpu, n in same_of if have.get(gpu) != n]
        judge = detector.carry
        # the carried ones first: the agent read them before the full entries of its line (one
        # GPU may be named twice: each is carried from its last reading when it is judged)
        pairs = sorted(same, key=_read_time)
        newest = dict(pairs)  # each GPU to its newest read time (sorted by time)
        quiet: dict[int, bool] = {}
        for gpu, t in pairs:
            if t < newest[gpu]:
                # A quiet GPU carried to t and then to a later time ends as carried to the later
                # one alone (EventDetector.quiet): a sample line brings ~3 readings of each GPU.
                is_quiet = quiet.get(gpu)
                if is_quiet is None:
                    is_quiet = quiet[gpu] = detector.quiet(node, gpu)
                if is_quiet:
                    continue
            if lacking and gpu in lacking:
                continue
            carried = judge(node, gpu, t)
            if carried is None:  # its full entry was skipped (or never sent): asked for again
                lacking.append(gpu)
                continue
            found, tracker = carried
            if found:
                events += found
            if gpu not in read:
                read.append(gpu)
            verdict = tracker.verdict
            state_since = health_since.get(gpu) or (UNKNOWN, t)
            if verdict.state != state_since[0]:
                state_since = health_since[gpu] = (verdict.state, t)
                changed = True
            by_gpu[gpu] = GpuHealth(gpu, verdict, tracker.last, state_since[1])
        for reading in readings:
            gpu, t = reading.gpu, reading.t
            events += detector.health(node, reading)
            known = detector.tracker(node, gpu)
            if known is None:
                continue
            if gpu not in read:
                read.append(gpu)
            verdict = known.verdict
            state, since = health_since.get(gpu, (UNKNOWN, t))
            if verdict.state != state:
                state, since = verdict.state, t
                health_since[gpu] = (state, since)
                changed = True
            by_gpu[gpu] = GpuHealth(gpu, verdict, known.last, since)
        have.update(numbered)
        if lacking:
            lacking = sorted(set(lacking))
            then = "asked for again" if self._ask_full(track, lacking) else "skipped until its next full reading"
            notes += tuple(
                f"health of GPU {gpu} said unchanged since a reading this console lacks: {then}" for gpu in lacking
            )
        if notes and notes != track.health_notes:
            for note in notes:
                log.warning("%s: %s", node, note)
        track.health_notes = notes
        gpus = tuple(by_gpu[k] for k in sorted(by_gpu))
        track.snapshot = replace(track.snapshot, gpu_health=gpus)
        if changed:
            self._emit(GpuHealthChanged(node, gpus))
        if events:
            self._emit(GpuEventsSeen(node, tuple(events)))
        if self.health_read is not None:
            self.health_read(node, tuple(read))

    def _ask_full(self, track: _NodeTrack, gpus: list[int]) -> bool:
        """Ask the node's agent for these GPUs' next health entries in full (HealthDelta.apply),
        each at most once per ASK_FULL_AGAIN_S; True when the agent takes such asks."""
        control = track.control
        if not track.asks_health or control is None:
            return False
        now = self._clock()
        asked = track.health_asked
        due = [gpu for gpu in gpus if now - asked.get(gpu, -ASK_FULL_AGAIN_S) >= ASK_FULL_AGAIN_S]
        if due and control.send('{"kind":"health","full":[' + ",".join(str(gpu) for gpu in due) + "]}"):
            for gpu in due:
                asked[gpu] = now
        return True

    def watch(self, nodes: Iterable[str]) -> None:
        """The nodes the user has on screen now. A Prometheus-fed fleet refreshes their values
        every interval and the rest of the fleet every few (PrometheusSource.watch); agent-fed
        nodes stream every sample anyway."""
        watched = tuple(sorted(set(nodes)))
        if watched == self._watched and self._watching:
            return  # called at every redraw: nothing to tell the source
        self._watched, self._watched_set, self._watching = watched, frozenset(watched), True
        if self.prometheus is not None:
            self.prometheus.watch(watched)
        for track in self._tracks.values():
            self._steer(track)

    def full_rate(self, node: str) -> Callable[[], None]:
        """Keep the node's agent sending every sample, on screen or not (a run recording it);
        returns the release."""
        track = self._tracks[node]
        track.holds += 1
        self._steer(track)
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                track.holds -= 1
                self._steer(track)

        return release

    def offscreen_every(self) -> int:
        """Ticks between two full samples of an agent whose node is off screen: every 5 s, or
        so that the fleet's off-screen samples stay near 100 a second (1,024 nodes: 10 s)."""
        seconds = max(self._offscreen_sample_s, self._streamed / OFFSCREEN_SAMPLES_PER_S)
        return min(MAX_RATE_EVERY, max(1, round(seconds / self.interval)))

    def offscreen_tick(self) -> int:
        """Ticks between two `tick` lines of an agent whose node is off screen: never so few
        that the node would look stale between them."""
        ticks = max(1, int(min(self._offscreen_tick_s, self.stale_after - self.interval) / self.interval))
        return min(ticks, self.offscreen_every())

    def headless(self, sample_s: float, tick_s: float) -> None:
        """No screen at all (the watcher; call before start()): every agent sends a full sample
        every `sample_s` seconds (or as rarely as the fleet's size calls for) and a `tick` line
        every `tick_s` between (pass a stale_after longer than that); health lines as always."""
        self._offscreen_sample_s, self._offscreen_tick_s = sample_s, tick_s
        self.watch(())
        for track in self._tracks.values():  # agents already streaming get the new rate
            self._steer(track)

    def unattended(self, draw_every_s: float | None) -> None:
        """Nobody is at the console, whose screen is drawn every `draw_every_s` seconds now: the
        agents of the nodes on screen send a full sample that often (a `tick` line between), as
        top samples at its refresh. None: someone is back, every sample again. Nodes a run
        records (full_rate) keep every sample; health lines come as always."""
        self.drawn_every_s = draw_every_s or None
        every = max(1, round(draw_every_s / self.interval)) if draw_every_s else 1
        if every == self._onscreen_every:
            return
        self._onscreen_every = every
        for track in self._tracks.values():
            self._steer(track)

    def sample_every(self, node: str) -> int:
        """The `every` the node's agent was last asked for (1: every tick)."""
        return self._tracks[node].every

    def on_screen(self, node: str) -> bool:
        """The node is on screen (or no screen has said what it shows yet, or a run holds it)."""
        return not self._watching or node in self._watched_set or self._tracks[node].holds > 0

    def _steer(self, track: _NodeTrack) -> None:
        """Ask the node's agent for the rate its visibility calls for (when it can be asked)."""
        control = track.control
        if not track.controllable or control is None:
            return
        if not self.on_screen(track.spec.name):
            want = self.offscreen_every()
            line = f'{{"kind":"rate","every":{want},"tick":{self.offscreen_tick()}}}'
        elif self._onscreen_every > 1 and not track.holds:
            want = self._onscreen_every
            line = f'{{"kind":"rate","every":{want},"tick":{min(self.offscreen_tick(), want)}}}'
        else:
            want, line = 1, '{"kind":"rate","every":1}'
        if want != track.every and control.send(line):
            track.every = want

    def set_node_health(self, node: str, health: NodeHealth, error: str | None) -> None:
        self._set_health(self._tracks[node], health, error)

    def load_history(self, node: str) -> asyncio.Task | None:
        """Fill a Prometheus-fed node's charts from its history (detail view at open)."""
        track = self._tracks.get(node)
        if track is None or not self._from_prometheus(track) or self.prometheus is None:
            return None
        return asyncio.create_task(self.prometheus.load_history(node, self.history_s), name=f"history:{node}")

    def backfill(self, node: str, history: dict[int, list[tuple[float, dict]]], static: tuple[GpuStatic, ...]) -> int:
        """Put samples before the node's live ones into its history; returns how many."""
        track = self._tracks[node]
        old = track.hist
        order = [g.index for g in static]
        if old is not None:
            order += [i for i in old.gpus if i not in order]
        live_times = old.times() if old is not None else []
        first_live = live_times[0] if live_times else float("inf")
        # One row per timestamp before the first live sample: the GPUs Prometheus had then.
        rows: dict[float, dict[int, dict]] = {}
        count = 0
        for gpu in static:
            for ts, fields in history.get(gpu.index) or []:
                if ts < first_live:
                    rows.setdefault(ts, {})[gpu.index] = fields
                    count += 1
        hist = NodeHistory(max(track.history, old.capacity if old else 0), order, HISTORY_SCALES)
        for ts in sorted(rows)[-hist.capacity :]:
            at = rows[ts]
            gpus = [g for g in order if g in at]
            hist.append(ts, gpus, [at[g].get(m) for g in gpus for m in HISTORY_METRICS])
        if old is not None and old.gpus:
            columns = [[old.values(g, k) for k in range(len(HISTORY_METRICS))] for g in old.gpus]
            for n, ts in enumerate(live_times):
                hist.append(
                    ts, old.gpus, [columns[j][k][n] for j in range(len(old.gpus)) for k in range(len(HISTORY_METRICS))]
                )
        track.hist = hist
        return count
