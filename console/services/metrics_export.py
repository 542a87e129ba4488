"""`rocm-console watch --metrics-port PORT`: what the watcher knows, as Prometheus series
(docs/watch.md, "Prometheus").

A custom collector reads everything at scrape time, never per sample:

- the watcher's state (``Watcher.state()``, read on the watcher's loop): per GPU its health
  state and reasons count, per node its state, the open alerts, the nodes live/stale/down,
  the loop's lag, the start and heartbeat times, the events written;
- the newest benchmark per (preset, instance): from the history's store (``StoreLatestRuns``:
  the newest runs of each preset, asked again only when a run was stored or removed, and then
  only the new ones), or, with no history (tests, a file store), from the results folder next to
  the event log (``LatestRuns``: a file is read again only when its size or mtime changed); at
  most every REFRESH_S seconds;
- the instances' last state from the timeline's newest ``instance.*`` events (the watcher does
  not poll instances: consoles write those events), followed incrementally at the same pace.

prometheus_client is imported when the server starts: the TUI never pays for it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.bounded_file import RESULT_FILE_LIMIT, read_bounded
from console.core.results.record import StoredRun
from console.services.events import EventLog
from console.services.results import StoreError
from console.services.watcher_presence import events_data_dir

if TYPE_CHECKING:
    from console.services.history import History, HistoryEvents

__all__ = [
    "HEALTH_VALUES",
    "METRIC_NAMES",
    "NODE_STATES",
    "REFRESH_S",
    "BenchRow",
    "FleetCollector",
    "InstanceStates",
    "LatestRuns",
    "MetricsServer",
    "StoreLatestRuns",
    "bench_row",
]

REFRESH_S = 30.0  # the results folder and the event log are read at most this often
PRESET_DEPTH = 200  # a preset's newest runs asked for: its instances' newest are among them
INSTANCE_EVENTS = 5000  # the newest instance.* events read at the start (the timeline is not read whole)
HEALTH_VALUES = {"unknown": -1, "ok": 0, "warn": 1, "fail": 2}  # rocm_console_gpu_health_state
NODE_STATES = ("live", "stale", "down", "connecting")
INSTANCE_STATES = ("started", "ready", "failed", "stopped")
P = "rocm_console_"
# Every series name this exporter can write (the dashboard test checks against a real scrape).
METRIC_NAMES = tuple(
    P + n
    for n in (
        "gpu_health_state",
        "gpu_health_reasons",
        "node_state",
        "watcher_nodes",
        "watcher_loop_lag_seconds",
        "watcher_start_time_seconds",
        "watcher_heartbeat_timestamp_seconds",
        "watcher_events_written_total",
        "alerts_firing",
        "alert_firing",
        "instance_state",
        "instance_ready",
        "bench_output_tokens_per_second",
        "bench_ttft_seconds",
        "bench_itl_seconds",
        "bench_tokens_per_joule",
        "bench_run_timestamp_seconds",
    )
)


# ---------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class BenchRow:
    """The figures of one stored run that are exported (seconds, not ms; None: not measured)."""

    preset: str
    instance: str
    node: str
    created: float
    output_tokens_per_second: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p99: float | None
    tokens_per_joule: float | None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def _ms(value: Any) -> float | None:
    number = _num(value)
    return number / 1000.0 if number is not None else None


def _table(doc: dict, key: str) -> dict:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def bench_row(doc: Any) -> BenchRow | None:
    """A stored run's JSON (console/core/results/record.py run_to_dict) -> its row; None for
    a run with no preset (an import) or no instance/node to name."""
    if not isinstance(doc, dict):
        return None
    energy = _table(doc, "energy")
    tpj = energy.get("tokens_per_joule", doc.get("tokens_per_joule"))
    return _row(_table(doc, "context"), _table(doc, "metrics"), tpj, doc.get("created"))


def run_bench_row(run: StoredRun) -> BenchRow | None:
    """bench_row of a run read from the store (no JSON round trip)."""
    energy = run.energy if isinstance(run.energy, dict) else {}
    return _row(run.context, run.metrics, energy.get("tokens_per_joule"), run.created)


def _row(context: dict, metrics: dict, tpj: Any, when: Any) -> BenchRow | None:
    preset = context.get("bench_preset")
    node = context.get("node")
    instance = context.get("instance") or node
    created = _num(when)
    if not isinstance(preset, str) or not preset or not isinstance(instance, str) or created is None:
        return None
    return BenchRow(
        preset=preset,
        instance=instance,
        node=node if isinstance(node, str) else "",
        created=created,
        output_tokens_per_second=_num(metrics.get("output_throughput")),
        ttft_p50=_ms(metrics.get("median_ttft_ms")),
        ttft_p99=_ms(metrics.get("p99_ttft_ms")),
        itl_p50=_ms(metrics.get("median_itl_ms")),
        itl_p99=_ms(metrics.get("p99_itl_ms")),
        tokens_per_joule=_num(tpj),
    )


def _newest(rows: Any) -> dict[tuple[str, str], BenchRow]:
    newest: dict[tuple[str, str], BenchRow] = {}
    for row in rows:
        if row is None:
            continue
        key = (row.preset, row.instance)
        if key not in newest or row.created >= newest[key].created:
            newest[key] = row
    return newest


class LatestRuns:
    """The newest run per (preset, instance) in a results folder, read incrementally: each
    refresh lists the folder (one stat a file) and reads only files new or changed since."""

    def __init__(self, root: Path, *, refresh_s: float = REFRESH_S, clock: Callable[[], float] = time.monotonic):
        self.root = Path(root)
        self.refresh_s = refresh_s
        self._clock = clock
        self._read_at: float | None = None
        self._files: dict[str, tuple[tuple[int, int], BenchRow | None]] = {}
        self.reads = 0  # files parsed so far (tests: a refresh reads only what changed)

    def rows(self) -> list[BenchRow]:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._read_at = now
            self._refresh()
        newest = _newest(row for _, row in self._files.values())
        return sorted(newest.values(), key=lambda r: (r.preset, r.instance))

    def _refresh(self) -> None:
        seen: dict[str, tuple[int, int]] = {}
        try:
            with os.scandir(self.root) as entries:
                for entry in entries:
                    if entry.name.endswith(".json") and not entry.name.startswith("."):
                        try:
                            st = entry.stat()
                        except OSError:
                            continue
                        seen[entry.name] = (st.st_mtime_ns, st.st_size)
        except OSError:  # no results yet, or the folder unreadable: no benchmark series
            seen = {}
        for name in list(self._files):
            if name not in seen:
                del self._files[name]
        for name, mark in seen.items():
            cached = self._files.get(name)
            if cached is not None and cached[0] == mark:
                continue
            self.reads += 1
            try:
                doc = json.loads(read_bounded(self.root / name, RESULT_FILE_LIMIT, "result file"))
            except (OSError, ValueError, RecursionError):
                doc = None  # a half-written or foreign file: left out, read again when it changes
            self._files[name] = (mark, bench_row(doc))


class StoreLatestRuns:
    """The newest run per (preset, instance) in the history's store. A refresh asks first
    whether any run was stored or removed (one indexed query): if only new runs were stored,
    it reads those; otherwise (the first refresh, a removal) it reads each benchmark preset's
    newest PRESET_DEPTH runs, never every run."""

    def __init__(self, history: History, *, refresh_s: float = REFRESH_S, clock: Callable[[], float] = time.monotonic):
        self.history = history
        self.refresh_s = refresh_s
        self._clock = clock
        self._read_at: float | None = None
        self._mark: tuple[int, int] | None = None  # (last seq, count) when last read
        self._newest: dict[tuple[str, str], BenchRow] = {}
        self.reads = 0  # runs parsed so far (tests: a refresh reads only what changed)

    def rows(self) -> list[BenchRow]:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                self._refresh()
            except StoreError:  # the store unavailable: the last answer stands (the watcher says why)
                pass
        return sorted(self._newest.values(), key=lambda r: (r.preset, r.instance))

    def _refresh(self) -> None:
        table = self.history.runs
        mark = table.mark()
        if mark == self._mark:
            return
        before, self._mark = self._mark, mark
        if before is not None and mark[1] - before[1] == mark[0] - before[0] >= 0:
            seq = before[0]  # only stored since: read those
            while seq < mark[0]:
                runs, after = table.stored_after(seq)
                self.reads += len(runs)
                self._newest.update(_newest([*self._newest.values(), *map(run_bench_row, runs)]))
                if after == seq:
                    break
                seq = after
            return
        rows: list[BenchRow | None] = []
        for preset in table.bench_presets():
            runs = table.list_runs(preset=preset, limit=PRESET_DEPTH)
            self.reads += len(runs)
            rows += [r for r in map(run_bench_row, runs) if r is not None and r.preset == preset]
        self._newest = _newest(rows)


# ---------------------------------------------------------------- instances


class InstanceStates:
    """The last ``instance.*`` event per (node, instance) of the timeline, followed
    incrementally (the first refresh reads its newest INSTANCE_EVENTS instance events)."""

    def __init__(
        self,
        events: EventLog | HistoryEvents,
        *,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.events = events
        self.refresh_s = refresh_s
        self._clock = clock
        self._read_at: float | None = None
        self._follower: Any = None
        self.states: dict[tuple[str, str], str] = {}

    def current(self) -> dict[tuple[str, str], str]:
        now = self._clock()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                if self._follower is None:
                    # follow from now, then read back: an event stored between is seen twice
                    # (the same state again), never missed
                    self._follower = self.events.follow()
                    newest = self.events.read(kind="instance", limit=INSTANCE_EVENTS)
                    found = sorted(newest, key=lambda e: e.time)  # oldest first; a tie as stored
                else:
                    found = self._follower.poll()
            except (OSError, StoreError):
                found = []
            for event in found:
                state = event.kind.removeprefix("instance.")
                if event.kind.startswith("instance.") and state in INSTANCE_STATES and event.instance:
                    self.states[(event.node or "", event.instance)] = state
        return dict(self.states)


# ---------------------------------------------------------------- the collector


class FleetCollector:
    """prometheus_client's custom collector: ``collect()`` builds every family from the
    state read at that moment."""

    def __init__(
        self,
        state: Callable[[], Any],
        runs: LatestRuns | StoreLatestRuns | None = None,
        instances: InstanceStates | None = None,
    ):
        self.state = state
        self.runs = runs
        self.instances = instances
        self._lock = threading.Lock()  # two scrapes at once share one refresh of the files

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        def gauge(name: str, doc: str, labels: list[str]) -> Any:
            return GaugeMetricFamily(P + name, doc, labels=labels)

        st = self.state()
        health = gauge("gpu_health_state", "GPU health: -1 unknown, 0 ok, 1 warn, 2 fail", ["node", "gpu"])
        reasons = gauge("gpu_health_reasons", "findings behind the GPU's health state", ["node", "gpu"])
        for node, gpu, state, count in st.gpus:
            health.add_metric([node, str(gpu)], HEALTH_VALUES.get(state, -1))
            reasons.add_metric([node, str(gpu)], count)
        yield health
        yield reasons

        node_state = gauge(
            "node_state", "1 for the node's state now (live, stale, down, connecting)", ["node", "state"]
        )
        counts = dict.fromkeys(NODE_STATES, 0)
        for node, state in sorted(st.nodes.items()):
            counts[state] = counts.get(state, 0) + 1
            for name in NODE_STATES:
                node_state.add_metric([node, name], 1 if state == name else 0)
        yield node_state
        nodes = gauge("watcher_nodes", "the watcher's nodes by state", ["state"])
        for name, count in counts.items():
            nodes.add_metric([name], count)
        yield nodes

        lag = gauge("watcher_loop_lag_seconds", "how late the watcher's event loop last woke", [])
        if st.loop_lag is not None:
            lag.add_metric([], st.loop_lag)
        yield lag
        started = gauge("watcher_start_time_seconds", "when the watcher started (unix seconds)", [])
        started.add_metric([], st.started)
        yield started
        beat = gauge("watcher_heartbeat_timestamp_seconds", "the watcher's last heartbeat (unix seconds)", [])
        if st.heartbeat is not None:
            beat.add_metric([], st.heartbeat)
        yield beat
        written = CounterMetricFamily(P + "watcher_events_written", "events the watcher wrote", labels=[])
        written.add_metric([], st.events_written)
        yield written

        firing = gauge("alerts_firing", "open alerts per rule", ["alertname", "severity"])
        per_rule: dict[tuple[str, str], int] = {}
        one = gauge("alert_firing", "1 per open alert", ["alertname", "severity", "node", "gpu", "vllm_instance"])
        for a in st.alerts:
            per_rule[(a.rule, a.severity)] = per_rule.get((a.rule, a.severity), 0) + 1
            gpu = "" if a.gpu is None else str(a.gpu)
            one.add_metric([a.rule, a.severity, a.node or "", gpu, a.instance or ""], 1)
        for (rule, severity), count in sorted(per_rule.items()):
            firing.add_metric([rule, severity], count)
        yield firing
        yield one

        with self._lock:
            known = self.instances.current() if self.instances is not None else {}
            rows = self.runs.rows() if self.runs is not None else []
        inst = gauge(
            "instance_state", "1 for the instance's last state seen in the events", ["node", "vllm_instance", "state"]
        )
        ready = gauge("instance_ready", "1 when the instance's last event says ready", ["node", "vllm_instance"])
        for (node, name), state in sorted(known.items()):
            for each in INSTANCE_STATES:
                inst.add_metric([node, name, each], 1 if state == each else 0)
            ready.add_metric([node, name], 1 if state == "ready" else 0)
        yield inst
        yield ready

        labels = ["preset", "vllm_instance", "node"]
        tps = gauge("bench_output_tokens_per_second", "the newest run's output tokens/s", labels)
        ttft = gauge("bench_ttft_seconds", "the newest run's time to first token", [*labels, "quantile"])
        itl = gauge("bench_itl_seconds", "the newest run's inter-token latency", [*labels, "quantile"])
        tpj = gauge("bench_tokens_per_joule", "the newest run's output tokens per joule", labels)
        when = gauge("bench_run_timestamp_seconds", "when the newest run was made (unix seconds)", labels)
        for r in rows:
            key = [r.preset, r.instance, r.node]
            when.add_metric(key, r.created)
            for family, value, extra in (
                (tps, r.output_tokens_per_second, []),
                (ttft, r.ttft_p50, ["0.5"]),
                (ttft, r.ttft_p99, ["0.99"]),
                (itl, r.itl_p50, ["0.5"]),
                (itl, r.itl_p99, ["0.99"]),
                (tpj, r.tokens_per_joule, []),
            ):
                if value is not None:
                    family.add_metric(key + extra, value)
        yield from (tps, ttft, itl, tpj, when)


class MetricsServer:
    """/metrics on ``address:port`` (a thread of prometheus_client's own WSGI server)."""

    def __init__(
        self,
        state: Callable[[], Any],
        *,
        events: EventLog | HistoryEvents,
        results: Path | None = None,
        history: History | None = None,
    ) -> None:
        runs: LatestRuns | StoreLatestRuns
        if history is not None and results is None:
            runs = StoreLatestRuns(history)
        else:
            runs = LatestRuns(results if results is not None else events_data_dir(events) / "results")
        self.collector = FleetCollector(state, runs, InstanceStates(events))
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        return self._server.server_port if self._server is not None else None

    def start(self, port: int, address: str = "127.0.0.1") -> None:
        """Bind and serve (OSError when the address cannot be bound: the caller says it)."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector)
        self._server, self._thread = start_http_server(port, address, registry=registry)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
