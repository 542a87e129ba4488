"""The store written back out as files in today's layout, so a file store (or a new database,
through migrate_file_store) can be made from it: the data never gets locked in.

`<dir>/results/<id>.json` (each run's document as kept, in the file store's formatting),
`<dir>/baselines/<node>/<name>.json`, `<dir>/node-versions/<node>.json`, `<dir>/events.jsonl`
(every event, oldest first, in files of EventLog's size) and `<dir>/pulls.jsonl` (every model
pull, oldest first, a JSON object a line: no file store ever kept pulls, so this file is the
dump's own; migrate_file_store reads it back)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from console.core.node_files import node_file_stem
from console.core.store.pulls import PULLS_FILE
from console.core.store.rows import read_doc, run_file_text
from console.services.events import EVENTS_FILE, MAX_BYTES
from console.services.results import StoreError
from console.services.store.db import Database
from console.services.store.store import Store

__all__ = ["DumpCounts", "dump"]


@dataclass(frozen=True)
class DumpCounts:
    runs: int
    baselines: int
    events: int
    versions: int
    pulls: int = 0

    def line(self, folder: Path) -> str:
        pulls = f", {self.pulls} pulls" if self.pulls else ""
        return (
            f"wrote {self.runs} runs, {self.baselines} baselines, {self.events} events, "
            f"{self.versions} node-versions records{pulls} to {folder}"
        )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def dump(store: Store, folder: Path | str, *, page: int = 500) -> DumpCounts:
    """Write everything in `store` to `folder` (made if missing; files of the same names are
    replaced). StoreError naming the folder when it cannot be written."""
    out = Path(folder).expanduser()
    try:
        return _dump(store, out, page)
    except OSError as exc:
        raise StoreError(f"cannot dump the store to {out}: {exc.strerror or exc}") from None


def _dump(store: Store, out: Path, page: int) -> DumpCounts:
    db = store.db
    runs = 0
    last = -1
    while True:  # by sequence, a page at a time: never every run in memory
        rows = db.rows("SELECT seq, id, doc FROM runs WHERE seq > ? ORDER BY seq LIMIT ?", (last, page))
        for seq, run_id, doc in rows:
            _write(out / "results" / f"{run_id}.json", run_file_text(read_doc(doc)))
            runs += 1
            last = int(seq)
        if len(rows) < page:
            break
    baselines = 0
    for doc in store.baselines.documents():
        _write(out / "baselines" / node_file_stem(doc["node"]) / f"{doc['name']}.json", _json_file(doc))
        baselines += 1
    versions = 0
    for node, doc in store.versions.documents().items():
        _write(out / "node-versions" / f"{node_file_stem(node)}.json", _json_file(doc))
        versions += 1
    events = _dump_events(db, out, page)
    pulls = _dump_pulls(store, out, page)
    return DumpCounts(runs, baselines, events, versions, pulls)


def _dump_pulls(store: Store, out: Path, page: int) -> int:
    """Every pull, oldest first, one compact JSON object a line (no file when there is none:
    a store without pulls dumps what it always did)."""
    pulls = 0
    tmp = out / f".{PULLS_FILE}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for pull in store.pulls.iter_all(page=page):
            fh.write(json.dumps(pull.to_dict(), separators=(",", ":"), allow_nan=False) + "\n")
            pulls += 1
    if pulls:
        os.replace(tmp, out / PULLS_FILE)
    else:
        tmp.unlink()
    return pulls


def _dump_events(db: Database, out: Path, page: int) -> int:
    """Every event, oldest first, in files of at most EventLog's size: the newest in
    events.jsonl, older ones in events.jsonl.1, .2, ... (a file store reads the newest few,
    as it always has; migrate_file_store reads them all)."""
    out.mkdir(parents=True, exist_ok=True)
    chunks: list[Path] = []
    events, size, last = 0, 0, -1
    fh = None
    try:
        while True:
            rows = db.rows("SELECT seq, doc FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (last, page))
            for seq, doc in rows:
                line = (doc + "\n").encode("utf-8")  # the line EventLog wrote (event_to_dict, compact)
                if fh is None or size + len(line) > MAX_BYTES:
                    if fh is not None:
                        fh.close()
                    chunks.append(out / f".{EVENTS_FILE}.dump-{len(chunks)}")
                    fh = open(chunks[-1], "wb")  # noqa: SIM115 - closed when the next opens or below
                    size = 0
                fh.write(line)
                size += len(line)
                events += 1
                last = int(seq)
            if len(rows) < page:
                break
    finally:
        if fh is not None:
            fh.close()
    for i, chunk in enumerate(chunks):
        age = len(chunks) - 1 - i  # 0: the newest
        os.replace(chunk, out / (EVENTS_FILE if age == 0 else f"{EVENTS_FILE}.{age}"))
    if not chunks:
        (out / EVENTS_FILE).write_bytes(b"")
    return events


def _json_file(doc: object) -> str:
    """As services/node_versions.py write_json writes a baseline or a node's record."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
