"""File contents to StoredRuns: result JSON objects or captured `vllm bench serve` output."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

from console.core.bench.clients import aiperf, outside_results
from console.core.bench.output_events import BenchError
from console.core.bench.output_parser import BenchStreamParser
from console.core.bounded_file import RESULT_FILE_LIMIT, read_bounded
from console.core.node_json import documents
from console.core.results.build import run_from_block, run_from_result
from console.core.results.record import FORMAT, StoredRun, as_number, fingerprint_of, new_run_id, run_from_dict
from console.core.text import one_line

_MAX_REASON = 300
_SAFE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")  # a file name in the store, nothing more
# A file beside the one imported, read by name: its bytes; None: none there; a str: why not read.
Beside = Callable[[str], "bytes | str | None"]


@dataclass
class FileParse:
    """What one file holds: kind ("json" | "text" | None), runs found (not yet
    deduplicated) and parts skipped with their reason (part, reason); part is
    None for the whole file."""

    kind: str | None = None
    runs: list[StoredRun] = field(default_factory=list)
    skipped: list[tuple[str | None, str]] = field(default_factory=list)


def _json_objects(text: str) -> list[object]:
    """One object, a JSON array, or newline-separated objects (`--append-result`)."""
    out: list[object] = []
    for value, _ in documents(text, bad_json="invalid JSON at line {line}: {msg}"):
        out += value if isinstance(value, list) else [value]
    return out


def _is_result_object(obj: object) -> TypeGuard[Mapping]:
    return isinstance(obj, Mapping) and ("completed" in obj or "duration" in obj)


def _first_error_text(errors: object) -> str | None:
    if not isinstance(errors, list):
        return None
    for item in errors:
        if isinstance(item, str) and item.strip():
            lines = [ln.strip() for ln in item.strip().splitlines() if ln.strip()]
            return lines[-1] if lines else None
    return None


def _decode(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray)) else str(data)
    return text.lstrip("\ufeff")


def runs_from_file(
    data: bytes | str,
    *,
    source: str | None,
    label: str | None = None,
    node: str | None = None,
    created: float | None = None,
    beside: Beside | None = None,
) -> FileParse:
    """Every run in a file's content: a result JSON (one object, an array, or
    `--append-result` lines) or a captured text output with result blocks
    (stdout, stdout+stderr, a terminal capture with CRLF, `\\r` progress and ANSI).

    beside: reads a file next to the imported one by name (AIPerf's per-request export beside
    its summary); None: the files beside `source` when it is an absolute path to a file.

    A failed run is skipped with the reason it shows: `Initial test run failed - …`,
    `All requests failed …` (a block or object with nothing completed), or
    `no result block`.
    """
    created = time.time() if created is None else created
    text = _decode(data)
    out = FileParse()
    head = text.lstrip()[:1]
    json_error: str | None = None
    if head in ("{", "["):
        try:
            objects = _json_objects(text)
        except ValueError as exc:
            json_error = str(exc)
        else:
            out.kind = "json"
            if objects and all(aiperf.is_record(o) for o in objects):
                out.skipped.append((None, _RECORDS_ALONE.format(n=len(objects))))
                return out
            reader = beside if beside is not None else _beside_source(source)
            objects = _outside(_stored_runs(objects, out, label), source, reader, out)
            many = len(objects) > 1
            for i, obj in enumerate(objects, 1):
                part = f"object {i}" if many else None
                if not _is_result_object(obj):
                    what = "a JSON object" if isinstance(obj, Mapping) else f"JSON {type(obj).__name__}"
                    out.skipped.append((part, f"not a vLLM benchmark result ({what} without 'completed'/'duration')"))
                    continue
                completed = as_number(obj.get("completed"))
                if completed == 0:
                    first = _first_error_text(obj.get("errors"))
                    reason = "All requests failed (completed = 0)" + (f": {first}" if first else "")
                    out.skipped.append((part, one_line(reason, _MAX_REASON)))
                    continue
                out.runs.append(run_from_result(obj, source=source, label=label, node=node, created=created, part=part))
            if not objects and not out.runs and not out.skipped:
                out.skipped.append((None, "empty JSON file"))
            return out
    parser = BenchStreamParser()
    parser.feed(text)
    parser.close()
    blocks = parser.blocks
    errors = parser.errors
    if blocks:
        out.kind = "text"
    for i, block in enumerate(blocks, 1):
        part = f"block {i} (lines {block.start_line}-{block.end_line})"
        if not block.complete:
            out.skipped.append((part, "result block cut short (the output ends inside it)"))
            continue
        if block.metrics.get("completed") == 0:
            out.skipped.append((part, _failed_reason(errors, block.start_line)))
            continue
        if not block.metrics:
            out.skipped.append((part, "result block without values"))
            continue
        out.runs.append(run_from_block(block, source=source, label=label, node=node, created=created))
    if not blocks:
        out.skipped.append((None, _no_block_reason(errors, json_error)))
    return out


def _stored_runs(objects: list[object], out: FileParse, label: str | None) -> list[object]:
    """The console's own files (a stored run, `results export --format json`, a run kept on a
    node when the store was full) become runs as they were; the other objects are returned."""
    rest: list[object] = []
    for i, obj in enumerate(objects, 1):
        if not (isinstance(obj, Mapping) and obj.get("format") == FORMAT):
            rest.append(obj)
            continue
        items = obj.get("runs") if "runs" in obj else [obj]
        for j, item in enumerate(items if isinstance(items, list) else [], 1):
            part = f"run {j}" if "runs" in obj else (f"object {i}" if len(objects) > 1 else None)
            try:
                run = run_from_dict(item)
            except (ValueError, KeyError, TypeError) as exc:
                out.skipped.append((part, one_line(f"not a stored run ({exc})", _MAX_REASON)))
                continue
            fingerprint = run.fingerprint or fingerprint_of(run.result, run.metrics, run.setup)
            run_id = run.id if _SAFE_ID_RE.match(run.id) else new_run_id(run.created, run.node, fingerprint)
            run = dataclasses.replace(run, id=run_id, fingerprint=fingerprint)
            out.runs.append(dataclasses.replace(run, label=label) if label is not None else run)
    return rest


_RECORDS_ALONE = (
    "AIPerf's per-request records ({n} requests): they are read with the summary export beside them "
    "(import profile_export_aiperf.json or the folder)"
)


def _outside(objects: list[object], source: str | None, beside: Beside | None, out: FileParse) -> list[object]:
    """GuideLLM's and AIPerf's result files become the result objects vLLM's client writes (one
    per GuideLLM benchmark), carrying `client` and `client_version` (issue B2). An AIPerf summary
    takes its per-request records from the export beside it; without them its figures are
    imported and one line in `out.skipped` says the per-request data (so goodput) is absent."""
    found_any: list[object] = []
    for obj in objects:
        if isinstance(obj, Mapping) and aiperf.is_result(obj):
            found_any += _aiperf_results(obj, source, beside, out)
            continue
        found = outside_results(obj)
        found_any += found if found is not None else [obj]
    return found_any


def _aiperf_results(obj: Mapping, source: str | None, beside: Beside | None, out: FileParse) -> list[dict]:
    name = Path(source).name if source else "profile_export_aiperf.json"
    names = aiperf.records_names(name)
    for candidate in names if beside is not None else ():
        data = beside(candidate) if beside is not None else None
        if data is None:
            continue
        if isinstance(data, str):  # there, but not readable (too large, not a regular file)
            out.skipped.append(("per-request data", f"{candidate} beside it cannot be read ({data}): {_ABSENT}"))
            return aiperf.results(obj)
        records = aiperf.per_request(_decode(data))
        if records:
            return aiperf.results(obj, records)
        out.skipped.append(("per-request data", f"{candidate} beside it holds no AIPerf request record: {_ABSENT}"))
        return aiperf.results(obj)
    out.skipped.append(("per-request data", f"no AIPerf per-request export beside it ({names[0]}): {_ABSENT}"))
    return aiperf.results(obj)


_ABSENT = "the summary's figures are imported; per-request figures, and so goodput against an SLO, are absent"


def _beside_source(source: str | None) -> Beside | None:
    """A reader of the files next to `source` (an absolute path to a regular file), bounded like
    every result file (core/bounded_file.py: never a FIFO or a device, never past the limit)."""
    if not source:
        return None
    path = Path(source)
    try:
        if not path.is_absolute() or not path.is_file():
            return None
    except OSError:
        return None

    def read(name: str) -> bytes | str | None:
        other = path.parent / name
        try:
            if not other.exists():
                return None
            return read_bounded(other, RESULT_FILE_LIMIT, "per-request export")
        except OSError as exc:
            return exc.strerror or type(exc).__name__

    return read


def _failed_reason(errors: Sequence[BenchError], before_line: float) -> str:
    found = [e for e in errors if e.line <= before_line]
    all_failed = next((e for e in reversed(found) if e.kind == "all_failed"), None)
    reason = all_failed.message if all_failed else "All requests failed (0 successful requests)"
    first = next((e for e in found if e.kind == "request_error"), None)
    if first is not None:
        reason += f"; first error: {first.message}"
    return one_line(reason, _MAX_REASON)


def _no_block_reason(errors: Sequence[BenchError], json_error: str | None) -> str:
    initial = next((e for e in errors if e.kind == "initial_test_failed"), None)
    if initial is not None:
        message = initial.message
        at = message.find("Initial test run failed")
        return one_line(message[at:] if at >= 0 else message, _MAX_REASON)
    all_failed = next((e for e in errors if e.kind == "all_failed"), None)
    if all_failed is not None:
        return one_line(_failed_reason(errors, math.inf), _MAX_REASON)
    if json_error is not None:
        return one_line(f"no result block ({json_error})", _MAX_REASON)
    exceptions = [e for e in errors if e.kind in ("exception", "request_error")]
    if exceptions:
        return one_line(f"no result block ({exceptions[-1].message})", _MAX_REASON)
    return "no result block"
