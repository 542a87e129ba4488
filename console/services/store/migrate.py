"""Moving a file store (today's data folder) into the database, in one pass.

Every run (`results/<id>.json`), baseline (`baselines/<node>/<name>.json`), node-versions
record (`node-versions/<node>.json`) and event (`events.jsonl` and its rotated files) is
stored with the same ids and its document exactly as the file held it. The files are left
where they are (the way back). Writes are committed in batches and keyed (a run by its id,
a baseline by node and name, a record by node, an event by its content and occurrence), so a
migration killed half way and started again stores what is missing and nothing twice.
A file that cannot be read is left in place and named in the counts.

Model pulls were never kept in files (each node's agent knows its own); a dump's `pulls.jsonl`
is read back here too, so `store load` of a dump brings them, keyed by their ids."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from console.core import node_json
from console.core.events import Event, event_from_dict, event_to_dict
from console.core.node_json import loads_document
from console.core.results.ids import run_order
from console.core.results.record import run_from_dict
from console.core.store.pulls import PULLS_FILE
from console.core.store.rows import doc_text, event_row, migrated_event_uid
from console.services.events import EVENTS_FILE, MAX_EVENT_TIME, MAX_LINE_BYTES
from console.services.store.store import Store

__all__ = ["BATCH", "MigrationCounts", "migrate_file_store"]

BATCH = 200  # records per transaction: a kill loses at most one batch's work, never a record


@dataclass
class MigrationCounts:
    """What a migration moved (new in the store now) and found there already, per kind."""

    runs: int = 0
    baselines: int = 0
    events: int = 0
    versions: int = 0
    pulls: int = 0  # from a dump's pulls.jsonl only (a data folder has none)
    present: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("runs", "baselines", "events", "versions", "pulls"), 0)
    )
    unreadable: list[str] = field(default_factory=list)  # one line per file left out (left in place)
    bad_event_lines: int = 0

    def line(self) -> str:
        moved = f"moved {self.runs} runs, {self.baselines} baselines, {self.events} events, {self.versions} node-versions records"
        if self.pulls:
            moved += f", {self.pulls} pulls"
        there = sum(self.present.values())
        out = moved + (f" ({there} already in the store)" if there else "")
        if self.unreadable:
            out += f"; {len(self.unreadable)} unreadable files left in place"
        if self.bad_event_lines:
            out += f"; {self.bad_event_lines} event lines that are not events skipped"
        return out

    def as_dict(self) -> dict:
        return {
            "runs": self.runs,
            "baselines": self.baselines,
            "events": self.events,
            "versions": self.versions,
            "pulls": self.pulls,
            "present": dict(self.present),
            "unreadable": list(self.unreadable),
            "bad_event_lines": self.bad_event_lines,
        }


Say = Callable[[str], None]


def migrate_file_store(data_dir: Path | str, store: Store, *, batch: int = BATCH) -> MigrationCounts:
    """Move the file store in `data_dir` into `store`; the counts (`.line()` says them in one line)."""
    data = Path(data_dir).expanduser()
    counts = MigrationCounts()
    _runs(data / "results", store, counts, batch)
    _baselines(data / "baselines", store, counts)
    _versions(data / "node-versions", store, counts)
    _events(data / EVENTS_FILE, store, counts, batch)
    _pulls(data / PULLS_FILE, store, counts, batch)
    with store.db.transaction():
        store.db.execute(
            "INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            ("migrated_from_files", json.dumps({"data_dir": str(data), "at": time.time(), **counts.as_dict()})),
        )
    return counts


def _read_json(path: Path, counts: MigrationCounts) -> object | None:
    try:
        return loads_document(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        counts.unreadable.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
        return None


def _run_files(root: Path) -> list[Path]:
    # the file store's ids: <id>.json for an id of letters, digits, . _ - (ResultStore.ids)
    from console.services.results import ResultStore

    return [root / f"{run_id}.json" for run_id in ResultStore(root).ids()]


def _runs(root: Path, store: Store, counts: MigrationCounts, batch: int) -> None:
    if not root.is_dir():
        return
    # First the order (the file store's: oldest first, an import's runs in their file's
    # order), so runs of one time keep it in the database; then the runs, a batch at a time.
    order = []
    for path in _run_files(root):
        doc = _read_json(path, counts)
        if not isinstance(doc, dict):
            if doc is not None:
                counts.unreadable.append(f"{path}: unreadable stored run (not a JSON object)")
            continue
        try:
            run = run_from_dict(doc)
        except ValueError as exc:
            counts.unreadable.append(f"{path}: unreadable stored run ({exc})")
            continue
        order.append((run_order(run), path))
    order.sort(key=lambda item: item[0])
    paths = [path for _, path in order]
    for start in range(0, len(paths), batch):
        with store.db.transaction():
            for path in paths[start : start + batch]:
                doc = _read_json(path, counts)
                if not isinstance(doc, dict):
                    continue  # gone since the first pass: named, left out
                try:
                    run = run_from_dict(doc)
                except ValueError as exc:
                    counts.unreadable.append(f"{path}: unreadable stored run ({exc})")
                    continue
                saved = store.runs.insert(run, doc, keep_id=True)
                if saved.new:
                    counts.runs += 1
                else:
                    counts.present["runs"] += 1


def _baselines(root: Path, store: Store, counts: MigrationCounts) -> None:
    if not root.is_dir():
        return
    from console.services.baseline_record import BaselineError, baseline_from_dict

    for path in sorted(root.glob("*/*.json")):
        doc = _read_json(path, counts)
        if doc is None:
            continue
        try:
            baseline_from_dict(doc, str(path))  # the file store's own check: what it would show
        except BaselineError as exc:
            counts.unreadable.append(str(exc))
            continue
        if store.baselines.put_doc(doc, replace=False):  # type: ignore[arg-type]
            counts.baselines += 1
        else:
            counts.present["baselines"] += 1


def _versions(folder: Path, store: Store, counts: MigrationCounts) -> None:
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        doc = _read_json(path, counts)
        if doc is None:
            continue
        try:
            wrote = store.versions.write(doc, replace=False)  # type: ignore[arg-type]
        except (ValueError, AttributeError) as exc:
            counts.unreadable.append(f"{path}: {exc}")
            continue
        if wrote:
            counts.versions += 1
        else:
            counts.present["versions"] += 1


def event_files(path: Path) -> list[Path]:
    """The log's files, oldest first: `events.jsonl.N` ... `.1`, then `events.jsonl`, every
    numbered file there is (a dump writes as many as its events need)."""
    numbered = []
    for candidate in path.parent.glob(f"{path.name}.*"):
        suffix = candidate.name[len(path.name) + 1 :]
        if suffix.isdigit() and candidate.is_file():
            numbered.append((int(suffix), candidate))
    files = [p for _, p in sorted(numbered, reverse=True)]
    return files + ([path] if path.is_file() else [])


def _read_events(files: list[Path], counts: MigrationCounts) -> Iterator[Event]:
    """Every event of the files, in order, streamed; a line that is not an event is counted
    (EventLog's rules: too long, not an event, a time no clock shows)."""
    for path in files:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below, read line by line
        except OSError as exc:
            counts.unreadable.append(f"{path}: {exc.strerror or exc}")
            continue
        with fh:
            for raw in _bounded_lines(fh, MAX_LINE_BYTES):
                if raw is None:  # longer than any event: skipped without holding it
                    counts.bad_event_lines += 1
                    continue
                if not raw.strip():
                    continue
                try:
                    event = event_from_dict(node_json.loads(raw, max_chars=MAX_LINE_BYTES))
                except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
                    counts.bad_event_lines += 1
                    continue
                if not (math.isfinite(event.time) and 0 <= event.time <= MAX_EVENT_TIME):
                    counts.bad_event_lines += 1
                    continue
                yield event


def _bounded_lines(fh: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """The file's lines, each read at most `limit` bytes at a time: a longer line is None (a
    3 GB line of one event log must not be read whole into memory)."""
    while True:
        raw = fh.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit:
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):  # the rest of the long line, a chunk at a time
            raw = fh.readline(1 << 20)
        yield None


@contextlib.contextmanager
def _shared_lock(path: Path) -> Iterator[None]:
    """EventLog's lock, shared: no console rotates the log while it is read (a file renamed
    mid-read would be read twice). Nothing is created in the old folder."""
    try:
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _events(path: Path, store: Store, counts: MigrationCounts, batch: int) -> None:
    seen: dict[str, int] = {}
    rows: list[dict] = []

    def flush() -> None:
        new = store.events.insert_rows(rows)
        counts.events += new
        counts.present["events"] += len(rows) - new
        rows.clear()

    with _shared_lock(path):
        for event in _read_events(event_files(path), counts):
            doc = event_to_dict(event)
            key = hashlib.sha256(doc_text(doc).encode("utf-8")).hexdigest()
            seen[key] = seen.get(key, 0) + 1
            rows.append(event_row(event, migrated_event_uid(doc, seen[key])))
            if len(rows) >= batch:
                flush()
        if rows:
            flush()


def _pulls(path: Path, store: Store, counts: MigrationCounts, batch: int) -> None:
    """A dump's pulls, a batch a transaction; a line that is not a pull is named (file:line)."""
    from console.core.store.pulls import PullRecord, pull_from_dict

    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, read line by line
    except FileNotFoundError:
        return
    except OSError as exc:
        counts.unreadable.append(f"{path}: {exc.strerror or exc}")
        return
    pending: list[PullRecord] = []

    def flush() -> None:
        with store.db.transaction():
            for pull in pending:
                if store.pulls.insert(pull):
                    counts.pulls += 1
                else:
                    counts.present["pulls"] += 1
        pending.clear()

    with fh:
        for number, raw in enumerate(_bounded_lines(fh, MAX_LINE_BYTES), 1):
            if raw is not None and not raw.strip():
                continue
            try:
                if raw is None:
                    raise ValueError("longer than any pull")
                pending.append(pull_from_dict(node_json.loads(raw, max_chars=MAX_LINE_BYTES)))
            except (ValueError, TypeError, UnicodeDecodeError, RecursionError) as exc:
                counts.unreadable.append(f"{path}:{number}: not a pull ({exc})")
                continue
            if len(pending) >= batch:
                flush()
    if pending:
        flush()
