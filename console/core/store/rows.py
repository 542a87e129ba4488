"""Records to table rows and back: a run, an event, a baseline's and a node-versions document.

Every row keeps the record's whole dict as JSON text (`doc`) beside the columns queries use,
so a run read back is exactly the run stored, and a dump writes the file the file store wrote.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

from console.core.events import Event, event_from_dict, event_to_dict
from console.core.node_json import loads_document
from console.core.results.record import StoredRun, run_from_dict, run_to_dict

__all__ = [
    "RUN_COLUMNS",
    "EVENT_COLUMNS",
    "baseline_key",
    "doc_text",
    "event_from_doc",
    "event_row",
    "migrated_event_uid",
    "new_event_uid",
    "read_doc",
    "run_file_text",
    "run_from_doc",
    "run_row",
    "versions_node",
]

RUN_COLUMNS = (
    "id",
    "created",
    "node",
    "model",
    "model_fold",
    "label",
    "serve_preset",
    "bench_preset",
    "run_kind",
    "origin",
    "fingerprint",
    "doc",
)
EVENT_COLUMNS = ("uid", "time", "kind", "node", "gpu", "instance", "severity", "origin", "doc")


def doc_text(doc: Any) -> str:
    """A document as stored in a `doc` column: compact JSON (a value a file held, NaN included,
    comes back as it was)."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def read_doc(text: str | bytes) -> Any:
    """A `doc` column read back (the depth-safe decoder: a hand-edited row is a ValueError)."""
    return loads_document(text)


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------- runs


def run_row(run: StoredRun, doc: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's row. `doc`: the dict to keep (a migrated file's as read), else run_to_dict(run).

    The fingerprint column is StoredRun.fingerprint, made when the run was built
    (console/core/results/record.py fingerprint_of, salted for offline and accuracy runs);
    a run without one (a hand-made file) has NULL there and is never a duplicate, as in the
    file store."""
    model = run.setup.get("model")
    return {
        "id": run.id,
        "created": run.created,
        "node": _text_or_none(run.context.get("node")),
        "model": None if model is None else str(model),
        # the file store's --model test: a case-insensitive substring of str(model or "")
        "model_fold": str(model or "").casefold(),
        "label": run.label,
        "serve_preset": _text_or_none(run.context.get("serve_preset")),
        "bench_preset": _text_or_none(run.context.get("bench_preset")),
        "run_kind": _text_or_none(run.context.get("run_kind")),
        "origin": run.origin,
        "fingerprint": run.fingerprint or None,
        "doc": doc_text(run_to_dict(run) if doc is None else dict(doc)),
    }


def run_from_doc(text: str | bytes) -> StoredRun:
    """A run from its `doc` column; ValueError naming what is wrong."""
    return run_from_dict(read_doc(text))


def run_file_text(doc: Mapping[str, Any]) -> str:
    """A run's file in the file store's layout (ResultStore writes exactly this)."""
    return json.dumps(dict(doc), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


# ---------------------------------------------------------------- events


def new_event_uid() -> str:
    return "e-" + secrets.token_hex(16)


def migrated_event_uid(doc: Mapping[str, Any], occurrence: int) -> str:
    """A migrated event's uid: its content and how many equal events came before it in the
    log, so a migration run twice (or restarted) stores every line once, equal lines included."""
    canonical = json.dumps(dict(doc), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:40]
    return f"f-{digest}-{occurrence}"


def event_row(event: Event, uid: str) -> dict[str, Any]:
    doc = event_to_dict(event)  # what events.jsonl holds (time rounded to the millisecond)
    return {
        "uid": uid,
        "time": doc["time"],
        "kind": event.kind,
        "node": event.node,
        "gpu": event.gpu,
        "instance": event.instance,
        "severity": event.severity,
        "origin": event.origin,
        "doc": json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str),
    }


def event_from_doc(text: str | bytes) -> Event:
    return event_from_dict(read_doc(text))


# ---------------------------------------------------------------- baselines and node versions


def baseline_key(doc: Mapping[str, Any]) -> tuple[str, str, float]:
    """(node, name, created) of a baseline document (StoredBaseline.to_dict); ValueError naming
    the field when one is missing (the full check is services/baseline.py's baseline_from_dict)."""
    node, name, created = doc.get("node"), doc.get("name"), doc.get("created")
    if not isinstance(node, str) or not isinstance(name, str):
        raise ValueError("a baseline without a node or a name")
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise ValueError(f"baseline {name} on {node}: 'created' is not a number")
    return node, name, float(created)


def versions_node(doc: Mapping[str, Any]) -> str:
    """The node a node-versions document is of (its versions' `node`); ValueError when none."""
    versions = doc.get("versions")
    node = versions.get("node") if isinstance(versions, Mapping) else None
    if not isinstance(node, str) or not node:
        raise ValueError("a node-versions record without versions.node")
    return node
