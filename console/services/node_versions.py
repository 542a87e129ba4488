"""Each node's versions and settings over time: `versions_of` builds the record from what the
agent's probe and telemetry say; `VersionsBook` keeps the last record of each node in the
data dir (`node-versions/<node>.json`) with the changes not yet acknowledged, which the
fleet shows as a mark on the node's header; `node_changed_event` is the timeline's line.
Light on purpose: the running console's HealthWatch imports it."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.baseline.diff import (
    Change,
    NodeVersions,
    change_summary,
    diff_versions,
    versions_from_dict,
    versions_from_facts,
    versions_to_dict,
)
from console.core.bounded_file import read_bounded_text
from console.core.events import INFO, Event
from console.core.model import NodeSnapshot, ProbeInfo
from console.core.node_files import node_file_stem
from console.core.node_json import loads_document
from console.services.data_dir import default_root

if TYPE_CHECKING:
    from console.services.store.versions import VersionsTable

RECORD_LIMIT = 1 << 20  # a node's versions record is a few kB: anything past this is not one

__all__ = ["VersionsBook", "data_dir", "node_changed_event", "versions_of", "write_json"]

# Flags the console sets itself for every instance: where it listens, never a setting that
# moves speed; a diff naming them would be noise.
CONSOLE_FLAGS = ("--port", "--host", "--served-model-name")


def versions_of(
    node: str,
    probe: ProbeInfo | None,
    snapshot: NodeSnapshot | None = None,
    *,
    preset_env: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    serve_args: Sequence[str] = (),
    captured: float | None = None,
    simulated: bool = False,
) -> NodeVersions:
    """The node's versions and settings from what the agent's probe and telemetry say (ROCm,
    amdsmi, vLLM, NUMA balancing, GPU models and modes, VBIOS), with the settings of the
    instance a suite ran on (its environment and flags, without the console's own)."""
    facts: dict[str, Any] = {"simulated": simulated}
    if probe is not None:
        facts.update(rocm=probe.rocm, amdsmi=probe.amdsmi, vllm=probe.vllm)
        if probe.numa_balancing is not None:
            facts["numa_balancing"] = probe.numa_balancing
    statics = list(snapshot.static) if snapshot is not None else []
    if statics:
        # Counted per physical GPU (its first row), as the doctor counts them: a partition mode
        # multiplies the logical GPUs (8 MI300X in CPX are 64), and a sample taken while a
        # switch is half done mixes both modes (57); neither is a change of the node's hardware.
        first: dict[int, Any] = {}
        for g in statics:
            first.setdefault(g.physical, g)
        facts["gpus"] = [
            {"model": g.model, "compute_partition": g.compute_partition, "memory_partition": g.memory_partition}
            for _, g in sorted(first.items())
        ]
    rows = [{"physical": g.physical, "vbios": g.vbios} for g in statics]
    args = _without_console_flags(serve_args)
    return versions_from_facts(
        node, facts, static_gpus=rows, preset_env=preset_env, preset_args=args, captured=captured
    )


def _without_console_flags(argv: Sequence[str]) -> list[str]:
    """The engine flags of a serve argv: from the first flag on (the program and model before
    it are not settings), without the console's own (port, host)."""
    items = [str(a) for a in argv]
    start = next((i for i, a in enumerate(items) if a.startswith("--")), len(items))
    out: list[str] = []
    i = start
    while i < len(items):
        item = items[i]
        flag = item.split("=", 1)[0]
        if flag in CONSOLE_FLAGS:
            i += 1 if "=" in item else 2
            continue
        out.append(item)
        i += 1
    return out


def data_dir() -> Path:
    return default_root().parent


def write_json(path: Path, doc: Any) -> None:
    """Write through a temporary file and a rename: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def node_changed_event(node: str, changes: Sequence[Change], now: float) -> Event:
    """The `node.changed` event: what moved on the node since its last reading."""
    return Event(
        now,
        "node.changed",
        node,
        severity=INFO,
        message=f"versions or settings changed: {change_summary(changes)}",
        details={"changes": [c.line() for c in changes[:40]]},
    )


# The mark a record carries once its GPUs are counted per physical GPU and its partition mode
# left out. A record without it (an older console's) counted logical GPUs: its GPU lines are
# not compared, and its pending GPU lines (a partition switch misread as a change) are dropped.
_GPUS_COUNTED = "physical"
_PARTITION = "partition"


def _legacy_gpu_line(line: str) -> bool:
    return line.startswith(("GPUs ", "added GPUs ", "removed GPUs "))


class VersionsBook:
    """The last versions seen of each node, and its changes not yet acknowledged.

    `observe` at every contact: the first reading of a node is recorded silently; a
    later one that differs returns the changes (the caller writes the event) and marks
    the node until `acknowledge`."""

    def __init__(self, folder: Path | None = None, *, table: VersionsTable | None = None) -> None:
        self.folder = folder if folder is not None else data_dir() / "node-versions"
        self.table = table  # the store's node_versions table (the history); None: the folder's files

    def _path(self, node: str) -> Path:
        return self.folder / f"{node_file_stem(node)}.json"

    def _write(self, node: str, doc: dict) -> None:
        if self.table is not None:
            self.table.write(doc)
        else:
            write_json(self._path(node), doc)

    def _read(self, node: str) -> dict:
        if self.table is not None:
            return self.table.read(node)
        try:
            doc = loads_document(read_bounded_text(self._path(node), RECORD_LIMIT, "node versions record"))
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def last(self, node: str) -> NodeVersions | None:
        raw = self._read(node).get("versions")
        try:
            return versions_from_dict(raw) if isinstance(raw, dict) else None
        except ValueError:
            return None

    def pending(self, node: str) -> list[str]:
        """The change lines not yet acknowledged ([] when none)."""
        return _pending_of(self._read(node))

    def observe(self, versions: NodeVersions, *, settings_too: bool = False) -> tuple[Change, ...]:
        """Record a reading; the changes since the last one (() for the first reading).
        Only versions and node-wide facts count unless settings_too (an instance's flags
        and environment belong to the instance, not to the node). The partition mode never
        counts: a switch is a `partition.switched` event of its own (the dialog and the CLI
        write it once, when verified), not a change of what the node is."""
        gpus = tuple(p for p in versions.gpus if p[0] != _PARTITION)
        mine = versions if settings_too else replace(versions, preset_env=(), flags=(), simulated=False, gpus=gpus)
        doc = self._read(versions.node)
        before = self.last(versions.node)
        legacy = before is not None and doc.get("gpus_counted") != _GPUS_COUNTED
        if before is not None and legacy:
            before = replace(before, gpus=mine.gpus)
        changes = diff_versions(before, mine) if before is not None else ()
        pending = self.pending(versions.node) + [c.line() for c in changes]
        if before is None or changes or legacy:
            doc = {
                "versions": versions_to_dict(mine),
                "gpus_counted": _GPUS_COUNTED,
                "pending": pending[-40:],
                "changed_at": time.time() if changes else doc.get("changed_at"),
            }
            self._write(versions.node, doc)
        return changes

    def forget(self, node: str) -> None:
        """Drop the node's record: its next reading is a first one."""
        if self.table is not None:
            self.table.forget(node)
        with contextlib.suppress(OSError):  # with a store: the old file too (a catch-up would bring it back)
            self._path(node).unlink()

    def acknowledge(self, node: str) -> int:
        """Clear the node's change mark; how many changes it held."""
        doc = self._read(node)
        pending = self.pending(node)
        if pending:
            doc["pending"] = []
            self._write(node, doc)
        return len(pending)

    def marked(self) -> dict[str, str]:
        """node -> one line of its unacknowledged changes, for every marked node."""
        out: dict[str, str] = {}
        for doc in self._documents():
            try:
                node = doc["versions"]["node"]
            except (KeyError, TypeError):
                continue
            pending = _pending_of(doc)
            if pending and isinstance(node, str):
                shown = "; ".join(str(x) for x in pending[:3])
                more = len(pending) - 3
                out[node] = shown + (f"; and {more} more" if more > 0 else "")
        return out

    def _documents(self) -> list[dict]:
        if self.table is not None:
            return list(self.table.documents().values())
        try:
            files = sorted(self.folder.glob("*.json"))
        except OSError:
            return []
        out = []
        for path in files:
            try:
                doc = loads_document(read_bounded_text(path, RECORD_LIMIT, "node versions record"))
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict):
                out.append(doc)
        return out


def _pending_of(doc: dict) -> list[str]:
    lines = doc.get("pending")
    out = [str(x) for x in lines] if isinstance(lines, list) else []
    if doc.get("gpus_counted") != _GPUS_COUNTED:
        out = [line for line in out if not _legacy_gpu_line(line)]
    return out
