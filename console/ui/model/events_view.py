"""The events screen's view model: a bounded buffer of the log's events, newest first,
the filter words, and the cells of a row.  Pure (no Textual), tested without the UI.

Filter words (all must match): ``node:NAME``, ``kind:KIND`` (a kind or its group:
``gpu``, ``instance``, ...), ``gpu:N``, ``info`` / ``warn`` / ``fail`` (that severity or
worse), or any other text found in the node, instance, kind or message.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from console.core.events import SEVERITIES, Event, known_kind, matches

__all__ = [
    "BUFFER_LIMIT",
    "EventBuffer",
    "EventFilter",
    "EventRow",
    "event_row",
    "events_around",
    "failure_lines",
    "failure_time",
    "Subject",
    "pick_run",
    "subject_of",
    "timeline_of",
]

BUFFER_LIMIT = 5000  # events kept on screen (the log itself is bounded on disk)
SEVERITY_GLYPHS = {"info": "·", "warn": "▲", "fail": "✖"}
_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# How a time is turned into a calendar time: local, as `rocm-console events` prints; the
# screenshot scenes set UTC so that their SVGs are the same on every machine.
localtime = time.localtime


class EventFilter:
    def __init__(self, text: str = "") -> None:
        self.text = text.strip()
        self.node: str | None = None
        self.kind: str | None = None
        self.gpu: int | None = None
        self.severity: str | None = None
        self.words: list[str] = []
        self.error: str | None = None  # a word that cannot match anything, said in one line
        for word in self.text.split():
            key, sep, value = word.partition(":")
            key = key.lower()
            if sep and key == "node":
                self.node = value
            elif sep and key == "kind":
                self.kind = value.lower()
                if not known_kind(self.kind):
                    self.error = f"kind:{value}: no such event kind (gpu, node, instance, alert, gpu.ecc, ...)"
            elif sep and key == "gpu":
                if value.isdigit():
                    self.gpu = int(value)
                else:
                    self.error = f"gpu:{value}: a GPU is a number"
            elif word.lower() in SEVERITIES:
                self.severity = word.lower()
            else:
                self.words.append(word.lower())

    def __bool__(self) -> bool:
        return bool(self.text)

    def matches(self, event: Event) -> bool:
        if not matches(event, node=self.node, kind=self.kind, gpu=self.gpu):
            return False
        if self.severity is not None and _RANK.get(event.severity, 0) < _RANK[self.severity]:
            return False
        if self.words:
            hay = " ".join(str(x) for x in (event.node, event.instance, event.kind, event.message) if x).lower()
            return all(w in hay for w in self.words)
        return True


class EventBuffer:
    """The newest ``limit`` events, newest first; ``generation`` moves with each change."""

    def __init__(self, limit: int = BUFFER_LIMIT) -> None:
        self._events: deque[Event] = deque(maxlen=limit)
        self.generation = 0

    def __len__(self) -> int:
        return len(self._events)

    def load(self, events: Iterable[Event]) -> None:
        """Replace the buffer with a read of the log (any order)."""
        ordered = sorted(events, key=lambda e: e.time, reverse=True)
        self._events.clear()
        self._events.extend(ordered[: self._events.maxlen])
        self.generation += 1

    def add(self, events: Sequence[Event]) -> int:
        """Events appended to the log since the last poll (file order: oldest first)."""
        for event in events:
            self._events.appendleft(event)
        if events:
            self.generation += 1
        return len(events)

    def view(self, flt: EventFilter, limit: int | None = None) -> list[Event]:
        out = []
        for event in self._events:
            if flt.matches(event):
                out.append(event)
                if limit is not None and len(out) >= limit:
                    break
        return out


@dataclass(frozen=True, slots=True)
class EventRow:
    when: str  # '08:14:03' today, '11-25 23:02' before
    severity: str  # info | warn | fail
    mark: str  # the severity's glyph
    node: str
    gpu: str
    kind: str
    message: str


def _when(t: float, now: float) -> str:
    at, today = localtime(t), localtime(now)
    if (at.tm_year, at.tm_yday) == (today.tm_year, today.tm_yday):
        return time.strftime("%H:%M:%S", at)
    return time.strftime("%m-%d %H:%M", at)


RUN_KINDS = ("benchmark.", "findmax.", "find_max.")  # events about a run: Enter opens it in history
RUN_ID_KEYS = ("run", "run_id", "stored", "answer", "result")  # where an event's details name the stored run


@dataclass(frozen=True, slots=True)
class Subject:
    """What an event is about, as Enter on its row opens it: a run in history, an instance's
    log, a GPU's detail (``gpu`` is physical, as events name GPUs) or a node's."""

    what: str  # "run" | "instance" | "gpu" | "node"
    node: str | None
    gpu: int | None = None
    instance: str | None = None
    run_id: str | None = None
    time: float = 0.0

    def describe(self) -> str:
        if self.what == "run":
            return f"run {self.run_id}" if self.run_id else f"the run on {self.node} at this time"
        if self.what == "instance":
            return f"instance {self.instance} on {self.node}"
        if self.what == "gpu":
            return f"GPU {self.gpu} of {self.node}"
        return f"node {self.node}"


def subject_of(event: Event) -> Subject | None:
    """The most specific thing the event names (a run, then an instance, a GPU, a node); None
    for an event about no node (an alert of the whole fleet)."""
    run_id = next((v for k in RUN_ID_KEYS if isinstance(v := event.details.get(k), str) and v), None)
    if run_id is not None or event.kind.startswith(RUN_KINDS):
        return Subject("run", event.node, event.gpu, event.instance, run_id, event.time)
    if event.node is None:
        return None
    if event.instance:
        return Subject("instance", event.node, event.gpu, event.instance, time=event.time)
    if event.gpu is not None:
        return Subject("gpu", event.node, event.gpu, time=event.time)
    return Subject("node", event.node, time=event.time)


def pick_run(subject: Subject, runs: Sequence[Any]) -> int | None:
    """Which of ``runs`` (StoredRun-like: id, created, node) the subject is: the one its id
    names, else the run of its node stored closest to the event's time (within an hour)."""
    if subject.run_id:
        return next((i for i, r in enumerate(runs) if r.id == subject.run_id), None)
    near = [(abs(r.created - subject.time), i) for i, r in enumerate(runs) if r.node == subject.node]
    near = [(gap, i) for gap, i in near if gap <= 3600]
    return min(near)[1] if near else None


def timeline_of(app: object) -> Callable[[Event], object] | None:
    """Where a screen's services write what the console does to a node: the app's HealthWatch
    (its event log and alert rules); None for an app that keeps no timeline (tests, scenes)."""
    return getattr(getattr(app, "health_watch", None), "record", None)


def event_row(event: Event, now: float) -> EventRow:
    where = event.instance or ""
    return EventRow(
        when=_when(event.time, now),
        severity=event.severity,
        mark=SEVERITY_GLYPHS.get(event.severity, "?"),
        node=event.node or "",
        gpu="" if event.gpu is None else str(event.gpu),
        kind=event.kind,
        message=event.message if not where or where in event.message else f"{where}: {event.message}",
    )


def events_around(
    events: Iterable[Event], node: str, gpus: Sequence[int], at: float, window: float = 300.0
) -> list[Event]:
    """The GPU events on ``gpus`` of ``node`` within ``window`` seconds of ``at``, oldest first
    (what an instance's failure may owe to its GPUs)."""
    wanted = set(gpus)
    picked = [
        e
        for e in events
        if e.node == node
        and e.kind.startswith("gpu.")
        and (e.gpu in wanted or e.gpu is None)
        and abs(e.time - at) <= window
    ]
    return sorted(picked, key=lambda e: e.time)


def failure_time(events: Iterable[Event], node: str, instance: str) -> float | None:
    """When the log says the instance failed last (None: it does not say)."""
    times = [e.time for e in events if e.kind == "instance.failed" and e.node == node and e.instance == instance]
    return max(times) if times else None


def failure_lines(
    events: Sequence[Event], node: str, instance: str, gpus: Sequence[int], fallback: float, window: float = 300.0
) -> list[str]:
    """The log view's lines for a failed instance: its GPUs' events within ``window`` s of the
    failure (the log's instance.failed, else ``fallback``), oldest first; [] when there are none."""
    at = failure_time(events, node, instance)
    around = events_around(events, node, gpus, fallback if at is None else at, window)
    lines = []
    for event in around:
        row = event_row(event, at if at is not None else fallback)
        lines.append(f"{row.when} {row.mark} GPU {row.gpu or '-'} {row.kind}: {row.message}")
    return lines
