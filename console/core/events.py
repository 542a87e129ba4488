"""The fleet's timeline: one event record, its kinds, and a pure detector that turns
successive health readings and node states into events.

Events are stored by console/services/events.py (one bounded JSON-lines log per data
dir) and shown by `rocm-console events`.  The detector keeps per-GPU state (a
HealthTracker, the last counters, the throttle episode) and returns the events each
new reading causes:

- ``gpu.health``: the verdict changed (ok -> warn, warn -> fail, ...);
- ``gpu.ecc``: an ECC count (or the pending bad pages) went up;
- ``gpu.throttle_start`` / ``gpu.throttle_end``: a throttle episode, with
  hysteresis: it starts after ``start_readings`` readings in a row throttled for at
  least ``on_share`` of their interval and ends after ``end_readings`` readings at or
  below ``off_share``; its times are those the counters say, not those of detection;
- ``gpu.reset`` / ``gpu.xid`` / ``gpu.fault``: what the driver reported;
- ``node.up`` / ``node.stale`` / ``node.down`` on a change of a node's state.

What the console itself does to a node is an event too, written by the service that does
it (console/services/timeline.py): a start refused, an instance stopped, a process ended,
a partition switched (or put back by an experiment).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from console.core.health import (
    OK,
    THROTTLE_LABELS,
    UNKNOWN,
    HealthReading,
    HealthRules,
    HealthTracker,
    HealthVerdict,
    carried,
    interval_throttle,
)

__all__ = [
    "KINDS",
    "SEVERITIES",
    "Event",
    "EventDetector",
    "event_from_dict",
    "event_to_dict",
    "gpu_events_near",
    "failure_note",
    "matches",
    "parse_since",
]

INFO, WARN, FAIL = "info", "warn", "fail"
SEVERITIES = (INFO, WARN, FAIL)

KINDS = (
    "node.up",
    "node.stale",
    "node.down",
    "node.changed",  # versions or settings moved since the last contact (services/baseline.py)
    "instance.started",
    "instance.ready",
    "instance.failed",
    "instance.stopped",
    "instance.refused",  # a start the console refused (a rule, a busy or failing GPU): services/instances.py
    "process.ended",  # a GPU process ended from the console: services/processes.py
    "process.end_failed",  # ... or not: the node refused or could not end it
    "partition.switched",
    "benchmark.started",
    "benchmark.finished",
    "findmax.point",  # a find-max point stored and judged: services/runs/find_max.py
    "findmax.answer",  # ... and the search's answer
    "gpu.health",
    "gpu.ecc",
    "gpu.throttle_start",
    "gpu.throttle_end",
    "gpu.reset",
    "gpu.xid",
    "gpu.fault",
    "alert.fired",
    "alert.cleared",
)

MAX_MESSAGE = 500  # characters: a message is one line in a table
MAX_DETAILS = 8192  # bytes of JSON: an event is a line in a bounded log


@dataclass(frozen=True)
class Event:
    """One thing that happened, at ``time`` (unix seconds)."""

    time: float
    kind: str
    node: str | None = None
    gpu: int | None = None
    instance: str | None = None
    severity: str = INFO
    message: str = ""
    details: Mapping[str, Any] = field(default_factory=dict, compare=False)
    # who wrote it, on a shared store's timeline: "watch@host", "tui@host", "cli@host"; None: not said
    origin: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown event kind {self.kind!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        if not math.isfinite(self.time):
            raise ValueError("event time is not a finite number")
        # One line, bounded: the log and the table both rely on it.
        text = " ".join(self.message.split())
        if len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 3] + "..."
        object.__setattr__(self, "message", text)


def event_to_dict(event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"time": round(event.time, 3), "kind": event.kind, "severity": event.severity}
    for key in ("node", "gpu", "instance"):
        value = getattr(event, key)
        if value is not None:
            out[key] = value
    out["message"] = event.message
    if event.details:
        details = dict(event.details)
        if len(json.dumps(details, default=str)) > MAX_DETAILS:
            details = {"truncated": True}
        out["details"] = details
    if event.origin:
        out["origin"] = event.origin
    return out


def event_from_dict(data: object) -> Event:
    """An event from its stored form; ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        when = float(data["time"])
        kind = str(data["kind"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("no time or kind") from None
    gpu = data.get("gpu")
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int)):
        raise ValueError("gpu is not an integer")
    details = data.get("details") or {}
    if not isinstance(details, dict):
        raise ValueError("details is not an object")
    return Event(
        time=when,
        kind=kind,
        node=_opt_str(data.get("node")),
        gpu=gpu,
        instance=_opt_str(data.get("instance")),
        severity=str(data.get("severity", INFO)),
        message=str(data.get("message", "")),
        details=details,
        origin=_opt_str(data.get("origin")),
    )


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def matches(
    event: Event,
    *,
    since: float | None = None,
    node: str | None = None,
    kind: str | None = None,
    gpu: int | None = None,
) -> bool:
    """The filters of `rocm-console events`: ``kind`` is a kind or its group (``gpu``, ``node``, ...)."""
    if since is not None and event.time < since:
        return False
    if node is not None and event.node != node:
        return False
    if gpu is not None and event.gpu != gpu:
        return False
    if kind is not None and event.kind != kind and not event.kind.startswith(kind.rstrip(".") + "."):
        return False
    return True


def known_kind(text: str) -> bool:
    group = text.rstrip(".")
    return text in KINDS or any(k.startswith(group + ".") for k in KINDS)


_SINCE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d)\s*\Z")
_SINCE_SCALE = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_since(text: str, now: float | None = None) -> float:
    """'30s', '15m', '1h', '7d' back from now, or a date / date-time; ValueError with the reason."""
    now = time.time() if now is None else now
    found = _SINCE_RE.match(text)
    if found:
        return now - float(found.group(1)) * _SINCE_SCALE[found.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise ValueError(
            f"{text!r}: expected a duration (30s, 15m, 1h, 7d), a date (2026-11-21) or a time (2026-11-21T08:00)"
        ) from None


FAILURE_WINDOW = 600.0  # seconds before an instance's failure whose GPU events its reason names


def gpu_events_near(
    events: Iterable[Event], node: str, physical: Iterable[int], when: float, window: float = FAILURE_WINDOW
) -> list[Event]:
    """The warn / fail GPU events of ``node``'s physical GPUs from ``window`` seconds before
    ``when`` to a minute after (the agent may report a reset after the process it killed ended)."""
    gpus = set(physical)
    return [
        e
        for e in events
        if e.node == node
        and e.gpu in gpus
        and e.kind.startswith("gpu.")
        and e.severity != INFO
        and when - window <= e.time <= when + 60
    ]


def failure_note(events: Iterable[Event], limit: int = 3) -> str | None:
    """'GPU events: GPU 3 12:03:10 uncorrectable ECC +1; ...' for an instance's failure reason."""
    found = sorted(events, key=lambda e: e.time)
    if not found:
        return None
    shown = found[-limit:]
    parts = [f"GPU {e.gpu} {time.strftime('%H:%M:%S', time.localtime(e.time))} {e.message}" for e in shown]
    more = f" (+{len(found) - len(shown)} more: rocm-console events)" if len(found) > len(shown) else ""
    return "GPU events: " + "; ".join(parts) + more


# ---------------------------------------------------------------- detector


@dataclass
class _GpuState:
    tracker: HealthTracker
    last: HealthReading | None = None
    counts: dict[str, int] = field(default_factory=dict)
    # throttle episode: the run of readings that may start or end one
    throttled: bool = False
    run: int = 0
    run_start: float | None = None
    run_reason: str | None = None
    episode_start: float | None = None
    episode_seconds: float = 0.0  # throttled seconds within the episode
    last_throttled: float | None = None  # when the GPU was last seen throttled
    episode_reasons: dict[str, float] = field(default_factory=dict)


def _quiet(last: HealthReading, reading: HealthReading) -> bool:
    """``reading`` (carried) moves no ECC counter and no throttle episode from ``last``."""
    if (
        reading.ecc_uncorrectable != last.ecc_uncorrectable
        or reading.ecc_deferred != last.ecc_deferred
        or reading.ecc_correctable != last.ecc_correctable
        or reading.pages_pending != last.pages_pending
    ):
        return False
    if reading.t <= last.t:
        return True  # _throttle looks at no such interval
    part = interval_throttle(last, reading)
    return part is None or part[0] == 0


class EventDetector:
    """Turns readings and node states into events; pure (no clock, no I/O)."""

    def __init__(
        self,
        rules: HealthRules | None = None,
        *,
        on_share: float = 0.5,
        off_share: float = 0.1,
        start_readings: int = 2,
        end_readings: int = 2,
    ) -> None:
        self.rules = rules if rules is not None else HealthRules()
        self.on_share = on_share
        self.off_share = off_share
        self.start_readings = start_readings
        self.end_readings = end_readings
        self._gpus: dict[tuple[str, int], _GpuState] = {}
        self._nodes: dict[str, str] = {}

    def tracker(self, node: str, gpu: int) -> HealthTracker | None:
        """The GPU's tracker (its bounded reading history), None before its first reading."""
        state = self._gpus.get((node, gpu))
        return state.tracker if state else None

    def verdict(self, node: str, gpu: int) -> HealthVerdict:
        state = self._gpus.get((node, gpu))
        return state.tracker.verdict if state else HealthVerdict(UNKNOWN)

    def health(self, node: str, reading: HealthReading) -> list[Event]:
        """The events one new reading of one GPU causes (the verdict: ``verdict(node, gpu)``)."""
        key = (node, reading.gpu)
        state = self._gpus.get(key)
        if state is None:
            state = self._gpus[key] = _GpuState(HealthTracker(self.rules))
        if state.last is not None and reading.t < state.last.t:
            return []  # a stale or replayed reading: the timeline only moves forward
        before = state.tracker.verdict
        return self._judged(node, state, reading, before, state.tracker.add(reading))

    def quiet(self, node: str, gpu: int) -> bool:
        """Carrying the GPU's last reading forward moves nothing but its time (a well GPU, out
        of any throttle run, in a run of equal readings): carrying it to t1 and then to t2
        ends as carrying it to t2 alone, so a line's earlier ``same`` times may be skipped."""
        state = self._gpus.get((node, gpu))
        return state is not None and not state.throttled and state.run == 0 and state.tracker.steady()

    def carry(self, node: str, gpu: int, t: float) -> tuple[list[Event], HealthTracker] | None:
        """health(node, carried(last reading, t)): the agent read the GPU at ``t`` and found it
        unchanged (its health line's ``same``); its events and its tracker. None: no reading
        of the GPU to carry."""
        state = self._gpus.get((node, gpu))
        if state is None:
            return None
        tracker = state.tracker
        last = tracker.last
        if last is None:
            return None
        if state.last is not None and t < state.last.t:
            return [], tracker
        before = tracker.verdict
        reading = tracker.carry(t)
        if reading is None:
            reading = carried(last, t)
            return self._judged(node, state, reading, before, tracker.add(reading)), tracker
        if not state.throttled and state.run == 0:
            # tracker.carry kept a well GPU well on the values of the last reading (so of
            # state.last): no counter grew, no interval was throttled (what _quiet checks)
            state.last = reading
            return [], tracker
        return self._judged(node, state, reading, before, tracker.verdict), tracker

    def _judged(
        self, node: str, state: _GpuState, reading: HealthReading, before: HealthVerdict, after: HealthVerdict
    ) -> list[Event]:
        """The events of ``reading``, added to the GPU's tracker (its verdict ``before`` -> ``after``)."""
        last = state.last
        if (
            reading.carried_from is not None
            and last is not None
            and after.state == before.state
            and not reading.faults
            and not state.throttled
            and state.run == 0
            and _quiet(last, reading)
        ):
            # Most readings of a fleet: a GPU said unchanged, out of any throttle run. No counter
            # grew, no interval was throttled, no state moved: _ecc, _throttle, _faults would
            # each find nothing and change nothing.
            state.last = reading
            return []
        events: list[Event] = []
        events += self._ecc(node, state, reading)
        events += self._throttle(node, state, reading)
        events += self._faults(node, reading)
        if after.state != before.state and not (before.state == UNKNOWN and after.state == OK):
            severity = {OK: INFO}.get(after.state, after.state)
            text = f"health {before.state} -> {after.state}"
            if after.reasons:
                text += f": {after.reasons}"
            events.append(
                Event(
                    reading.t,
                    "gpu.health",
                    node,
                    reading.gpu,
                    severity=severity,
                    message=text,
                    details={"from": before.state, "to": after.state, "reasons": [f.text for f in after.findings]},
                )
            )
        state.last = reading
        return events

    def _ecc(self, node: str, state: _GpuState, reading: HealthReading) -> list[Event]:
        events = []
        for attr, label, severity in (
            ("ecc_uncorrectable", "uncorrectable ECC", FAIL),
            ("ecc_deferred", "deferred ECC", WARN),
            ("ecc_correctable", "correctable ECC", WARN),
            ("pages_pending", "bad pages pending", FAIL),
        ):
            value = getattr(reading, attr)
            if value is None:
                continue
            before = state.counts.get(attr)
            state.counts[attr] = value
            if before is not None and value > before:
                events.append(
                    Event(
                        reading.t,
                        "gpu.ecc",
                        node,
                        reading.gpu,
                        severity=severity,
                        message=f"{label} +{value - before} (now {value})",
                        details={"counter": attr, "before": before, "now": value},
                    )
                )
        return events

    def _throttle(self, node: str, state: _GpuState, reading: HealthReading) -> list[Event]:
        if state.last is not None and reading.t <= state.last.t:
            return []
        part = interval_throttle(state.last, reading)
        if part is None:
            return []
        share, reason = part
        dt = reading.t - state.last.t if state.last is not None else 0.0
        events: list[Event] = []
        if share > 0 and state.last is not None:
            # Throttled through a busy interval's end; a partly throttled one is taken to end early.
            state.last_throttled = reading.t if share >= self.on_share else state.last.t + share * dt
        if state.throttled:
            state.episode_seconds += share * dt
            if reason is not None:
                state.episode_reasons[reason] = state.episode_reasons.get(reason, 0.0) + share * dt
        if not state.throttled:
            if share >= self.on_share:
                if state.run == 0:
                    # The throttled part of the interval is its latest part.
                    state.run_start = reading.t - share * dt
                    state.run_reason = reason
                    state.episode_seconds = 0.0
                    state.episode_reasons = {}
                state.run += 1
                state.episode_seconds += share * dt
                if reason is not None:
                    state.episode_reasons[reason] = state.episode_reasons.get(reason, 0.0) + share * dt
                if state.run >= self.start_readings:
                    state.throttled, state.run = True, 0
                    state.episode_start = state.run_start
                    label = THROTTLE_LABELS.get(state.run_reason or "", state.run_reason or "unknown reason")
                    events.append(
                        Event(
                            state.run_start or reading.t,
                            "gpu.throttle_start",
                            node,
                            reading.gpu,
                            severity=WARN,
                            message=f"throttle episode started ({label})",
                            details={"reason": state.run_reason, "detected_at": reading.t},
                        )
                    )
            else:
                state.run = 0
        else:
            if share <= self.off_share:
                state.run += 1
                if state.run >= self.end_readings:
                    state.throttled, state.run = False, 0
                    end = state.last_throttled or reading.t
                    begin = state.episode_start or end
                    main = max(state.episode_reasons, key=lambda r: state.episode_reasons[r], default=None)
                    label = THROTTLE_LABELS.get(main or "", main or "unknown reason")
                    seconds = end - begin
                    events.append(
                        Event(
                            end,
                            "gpu.throttle_end",
                            node,
                            reading.gpu,
                            severity=INFO,
                            message=f"throttle episode ended after {seconds:.0f} s ({label})",
                            details={
                                "reason": main,
                                "started": round(begin, 3),
                                "duration_s": round(seconds, 3),
                                "throttled_s": round(state.episode_seconds, 3),
                                "detected_at": reading.t,
                            },
                        )
                    )
            else:
                state.run = 0
        return events

    @staticmethod
    def _faults(node: str, reading: HealthReading) -> list[Event]:
        events = []
        for fault in reading.faults:
            kind = {"reset": "gpu.reset", "xid": "gpu.xid"}.get(fault.kind, "gpu.fault")
            text = fault.describe() + (
                f": {fault.message}" if fault.message and fault.message != fault.describe() else ""
            )
            details: dict[str, Any] = {"fault": fault.kind}
            if fault.code is not None:
                details["code"] = fault.code
            events.append(Event(fault.t, kind, node, reading.gpu, severity=WARN, message=text, details=details))
        return events

    def node_state(self, node: str, state: str, t: float, reason: str | None = None) -> list[Event]:
        """node.up / node.stale / node.down when a node's state (live, stale, down) changes."""
        kind = {"live": "node.up", "stale": "node.stale", "down": "node.down"}.get(state)
        if kind is None:
            return []  # connecting: nothing known yet
        if self._nodes.get(node) == state:
            return []
        before = self._nodes.get(node)
        self._nodes[node] = state
        severity = {"node.up": INFO, "node.stale": WARN, "node.down": FAIL}[kind]
        text = f"node {state}" + (f" (was {before})" if before else "") + (f": {reason}" if reason else "")
        return [Event(t, kind, node, severity=severity, message=text, details={"from": before, "to": state})]


def partition_event(t: float, node: str, gpus: Sequence[int], compute: str | None, memory: str | None) -> Event:
    """A verified partition switch of `gpus` (physical) on `node`, from the TUI or the CLI."""
    modes = "/".join(m for m in (compute, memory) if m)
    text = f"partition switched to {modes} on GPUs {','.join(map(str, gpus)) or 'all'}"
    details = {"gpus": list(gpus), "compute": compute, "memory": memory}
    return Event(t, "partition.switched", node, severity=INFO, message=text, details=details)


def events_of(detector: EventDetector, node: str, readings: Iterable[HealthReading]) -> list[Event]:
    """Every event a series of readings causes, in order (replays and tests)."""
    out: list[Event] = []
    for reading in readings:
        out += detector.health(node, reading)
    return out
