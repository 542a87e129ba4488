"""A kept LLM-inference arrival trace -> the JSONL that `vllm bench serve --dataset-name timed_trace` replays.

The kept trace is a CSV in Azure's public LLM inference trace format (TIMESTAMP, ContextTokens,
GeneratedTokens; profiles/traces/README.md says where it comes from). vLLM 0.32's timed_trace dataset
reads one JSON object a line: `timestamp` (seconds from the run's start: it sleeps until then),
`input_length`, `output_length` and `hash_ids`, the ids of the prompt's 16-token chunks (a prompt is
only as long as its chunks cover, so every request gets ceil(input/16) ids). Ids are never shared
between requests: the trace says nothing about shared prefixes, so the replay is a cold workload.

Two preset keys fit it to a test bench: `trace_max_input` scales every request's prompt and output by
one factor so that the longest prompt has at most that many tokens (the shape of the trace is kept,
a small model's context is respected), and `trace_speedup` divides the arrival times. Pure, stdlib.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CHUNK_TOKENS",
    "TraceRequest",
    "TraceRow",
    "load_trace_jsonl",
    "read_azure_trace",
    "resolve_trace_path",
    "scaled_requests",
    "timed_trace_jsonl",
]

CHUNK_TOKENS = 16  # vLLM's --timed-trace-chunk-hash-size default (0.32)
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One recorded request: seconds after the trace's first arrival, its token counts."""

    at: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request as replayed: seconds after the run's start, scaled token counts."""

    at: float
    input_tokens: int
    output_tokens: int


def _timestamp(text: str) -> datetime.datetime:
    # Azure writes 7 fractional digits (100 ns ticks); strptime's %f takes at most 6.
    text = text.strip()
    head, dot, frac = text.partition(".")
    if dot:
        text = f"{head}.{frac[:6]}"
    for fmt in _TIME_FORMATS:
        try:
            return datetime.datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise ValueError(f"TIMESTAMP {text!r} is not 'YYYY-MM-DD HH:MM:SS[.fraction]'")


def _count(text: str, column: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{column} {text!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{column} {value} is negative")
    return value


def read_azure_trace(text: str, source: str = "trace") -> tuple[TraceRow, ...]:
    """The rows of an Azure LLM inference trace CSV, times made relative to the first arrival.

    Rows must be in time order (the published files are). ValueError naming `source`, the line and
    the column at fault."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise ValueError(f"{source}: empty file (expected the header {','.join(COLUMNS)})")
    names = [h.strip().lstrip("\ufeff") for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise ValueError(f"{source}: line 1: no {', '.join(missing)} column (expected {','.join(COLUMNS)})")
    where = {c: names.index(c) for c in COLUMNS}
    rows: list[TraceRow] = []
    first: datetime.datetime | None = None
    last = 0.0
    for line, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) < len(names):
            raise ValueError(f"{source}: line {line}: {len(fields)} fields, expected {len(names)}")
        try:
            stamp = _timestamp(fields[where["TIMESTAMP"]])
            inp = _count(fields[where["ContextTokens"]], "ContextTokens")
            out = _count(fields[where["GeneratedTokens"]], "GeneratedTokens")
        except ValueError as exc:
            raise ValueError(f"{source}: line {line}: {exc}") from None
        first = first or stamp
        at = (stamp - first).total_seconds()
        if at < last:
            raise ValueError(f"{source}: line {line}: TIMESTAMP goes back in time (rows must be in time order)")
        last = at
        rows.append(TraceRow(at, inp, out))
    if not rows:
        raise ValueError(f"{source}: no requests after the header")
    return tuple(rows)


def scaled_requests(
    rows: Sequence[TraceRow], *, max_input: int | None = None, speedup: float | None = None, count: int | None = None
) -> tuple[TraceRequest, ...]:
    """The first `count` rows (all when None) as replayed.

    Token counts are multiplied by min(1, max_input / the whole trace's longest prompt), so a
    request has the same size whatever `count` is; every request keeps at least 1 token each
    way. Arrival times are divided by `speedup`. ValueError on a bad key."""
    if max_input is not None and (isinstance(max_input, bool) or max_input < 1):
        raise ValueError(f"trace_max_input must be a positive whole number, got {max_input!r}")
    if speedup is not None and not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(f"trace_speedup must be a positive number, got {speedup!r}")
    if count is not None and count < 1:
        raise ValueError(f"the number of requests must be positive, got {count!r}")
    longest = max((r.input_tokens for r in rows), default=0)
    factor = 1.0 if max_input is None or longest <= max_input else max_input / longest
    pace = speedup or 1.0
    chosen = rows if count is None else rows[:count]
    return tuple(
        TraceRequest(
            r.at / pace,
            max(1, min(max_input or r.input_tokens, math.floor(r.input_tokens * factor + 0.5))),
            max(1, math.floor(r.output_tokens * factor + 0.5)),
        )
        for r in chosen
    )


def timed_trace_jsonl(requests: Sequence[TraceRequest], chunk: int = CHUNK_TOKENS) -> str:
    """vLLM timed_trace input: one JSON object a line, each request with hash ids of its own."""
    lines = []
    next_id = 0
    for req in requests:
        n = math.ceil(req.input_tokens / chunk)
        item = {
            "timestamp": round(req.at, 6),
            "input_length": req.input_tokens,
            "output_length": req.output_tokens,
            "hash_ids": list(range(next_id, next_id + n)),
        }
        next_id += n
        lines.append(json.dumps(item, separators=(",", ":")))
    return "\n".join(lines) + "\n" if lines else ""


def resolve_trace_path(trace: str, traces_dir: Path) -> Path:
    """A preset's `trace`: a path (absolute or with `~`), else a file name under traces_dir."""
    path = Path(trace).expanduser()
    return path if path.is_absolute() else traces_dir / path


def load_trace_jsonl(
    trace: str,
    traces_dir: Path,
    *,
    max_input: int | None = None,
    speedup: float | None = None,
    count: int | None = None,
) -> str:
    """A preset's trace file read and converted (the file the run uploads). ValueError naming the file."""
    path = resolve_trace_path(trace, traces_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"trace file {path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"trace file {path}: not UTF-8 text") from None
    rows = read_azure_trace(text, f"trace file {path}")
    return timed_trace_jsonl(scaled_requests(rows, max_input=max_input, speedup=speedup, count=count))
