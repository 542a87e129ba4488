"""A model pull as the store keeps it (schema version 3, the `pulls` table): one frozen record,
its row, its line in a dump (`pulls.jsonl`) and back, and the filters of its queries.

A pull's id is a hash of (node, model, the node's start time of it): each console that sees
the same pull (the one that started it, one that re-attached, `models pulls`) writes one row."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from console.core.store.queries import Where

__all__ = [
    "PULLS_FILE",
    "PULL_COLUMNS",
    "PULL_STATES",
    "PullRecord",
    "pull_from_dict",
    "pull_id",
    "pull_state",
    "pull_where",
]

PULLS_FILE = "pulls.jsonl"  # a dump's pulls (console/services/store/dump.py), read back by `store load`
PULL_STATES = ("running", "ok", "failed", "cancelled")
# the node's words (console/agent/models.py pull_status) in the store's: a stopped pull was
# cancelled (`models pull --cancel`) or killed; either way it ended without the model
_AGENT_STATES = {"running": "running", "done": "ok", "failed": "failed", "stopped": "cancelled"}
MESSAGE_CHARS = 1000  # one line, bounded: a reason longer than any the hub or the disk gives is cut

PULL_COLUMNS = (
    "id",
    "node",
    "model",
    "revision",
    "target",
    "started",
    "ended",
    "state",
    "bytes",
    "total_bytes",
    "files",
    "message",
    "origin",
)


def pull_id(node: str, model: str, started: float) -> str:
    return hashlib.sha256(f"{node}\0{model}\0{float(started)!r}".encode()).hexdigest()[:20]


def pull_state(agent_state: str) -> str | None:
    """The store's state for the node's (running, done, failed, stopped); None for another."""
    return _AGENT_STATES.get(agent_state)


def one_line(text: str | None) -> str | None:
    if not text:
        return None
    line = " ".join(str(text).split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


@dataclass(frozen=True)
class PullRecord:
    id: str
    node: str
    model: str
    started: float
    state: str  # PULL_STATES
    bytes: int = 0
    total_bytes: int = 0
    revision: str | None = None
    target: str | None = None
    ended: float | None = None
    files: int | None = None
    message: str | None = None
    origin: str | None = None

    def row(self) -> tuple[Any, ...]:
        return tuple(getattr(self, c) for c in PULL_COLUMNS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(doc: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key}: {'missing' if value is None else 'not a text'}")
    return value


def _number(doc: Mapping[str, Any], key: str, *, required: bool = False) -> float | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: {'missing' if value is None else 'not a time or a count'}")
    return value


def pull_from_dict(doc: Any) -> PullRecord:
    """A dump's line back into a record; ValueError naming the field at fault."""
    if not isinstance(doc, Mapping):
        raise ValueError("not a JSON object")
    state = _text(doc, "state", required=True)
    if state not in PULL_STATES:
        raise ValueError(f"state: {state!r} is not one of {', '.join(PULL_STATES)}")
    files = _number(doc, "files")
    ended = _number(doc, "ended")
    return PullRecord(
        id=str(_text(doc, "id", required=True)),
        node=str(_text(doc, "node", required=True)),
        model=str(_text(doc, "model", required=True)),
        started=float(_number(doc, "started", required=True) or 0.0),
        state=state,
        bytes=int(_number(doc, "bytes") or 0),
        total_bytes=int(_number(doc, "total_bytes") or 0),
        revision=_text(doc, "revision"),
        target=_text(doc, "target"),
        ended=float(ended) if ended is not None else None,
        files=int(files) if files is not None else None,
        message=one_line(_text(doc, "message")),
        origin=_text(doc, "origin"),
    )


def pull_where(
    *,
    node: str | Sequence[str] | None = None,
    model: str | None = None,
    since: float | None = None,
    before: tuple[float, str] | None = None,
) -> Where:
    """node: one or any of several, exact; model: exact; since: started at or after (epoch
    seconds); before: the (started, id) of the last pull of the previous page."""
    where = Where()
    if isinstance(node, str):
        where.add("node = ?", node)
    elif node is not None:
        nodes = list(node)
        where.add(f"node IN ({', '.join('?' for _ in nodes)})" if nodes else "1 = 0", *nodes)
    if model is not None:
        where.add("model = ?", model)
    if since is not None:
        where.add("started >= ?", float(since))
    if before is not None:
        where.add("(started < ? OR (started = ? AND id < ?))", before[0], before[0], before[1])
    return where
