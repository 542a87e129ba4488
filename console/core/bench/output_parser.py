"""The benchmark client's output as it arrives: `BenchStreamParser` (chunks in, typed events
out), `parse_result_blocks` (every result block of a whole captured file) and `iter_events`.
The parts it reads: tqdm progress (progress.py), the run's setup (client_setup.py), the
result table (result_table.py); the records (output_events.py)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from console.core.bench.client_setup import (
    COMMAND_RE,
    SETUP_PATTERNS,
    parse_command,
    parse_namespace,
    setup_from_args,
    setup_value,
)
from console.core.bench.output_events import (
    BenchError,
    BenchProgress,
    BenchResultBlock,
    Event,
    OtherLine,
    ParsedBlock,
    SetupLine,
)
from console.core.bench.progress import TQDM_RE, progress_from_match, strip_ansi
from console.core.bench.result_table import (
    METRIC_LINE_RE,
    RESULT_HEADER_RE,
    RULER_RE,
    SECTION_RE,
    block_key,
    norm_label,
    printed_number,
)

# ---------------------------------------------------------------- error lines

_INITIAL_FAIL_RE = re.compile(r"Initial test run failed\b.*")
_ALL_FAILED_RE = re.compile(r"All requests failed\b.*")
_FAILED_HEADER_RE = re.compile(r"^Failed requests during benchmark run detected.*")
_ERROR_N_RE = re.compile(r"^Error (?P<n>\d+): ?(?P<text>.*)$")
_EXCEPTION_RE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)(?::\s.*)?$")
_TRACEBACK_START = "Traceback (most recent call last):"
_SEP_RE = re.compile(r"\r\n|\r|\n")
_MAX_DETAIL_LINES = 200
_MAX_BLOCK_KEYS = 500  # a block has ~60 values at most; bound garbage
_MAX_TEXT = 4000


# ---------------------------------------------------------------- stream parser


class BenchStreamParser:
    """Incremental parser: `feed(chunk) -> events`, then `close() -> events`.

    Splits on `\\n`, `\\r\\n` and `\\r`; an unterminated tail that already is a
    whole tqdm redraw is reported at once (tqdm writes `\\r` before each state, so
    the newest state never ends with a line break). Bytes are decoded as UTF-8
    incrementally (a character split across chunks is fine; bad bytes become
    U+FFFD). Everything is bounded: at most `max_errors` BenchErrors of kind
    request_error, capped detail text, a capped partial line.

    The parser also keeps state for callers that poll: `progress` (last
    BenchProgress), `setup` (what the current run is set up with), `blocks`,
    `errors`.
    """

    max_line = 1 << 20  # a partial line longer than this is cut

    def __init__(self, *, max_errors: int = 10, emit_other: bool = False) -> None:
        self.max_errors = max_errors
        self.emit_other = emit_other
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []  # the unterminated line so far
        self._parts_len = 0
        self._pending_cr = False  # last chunk ended in \r: a following \n belongs to it
        self._line = 1  # 1-based number of the line being read (counts \n)
        self._tail_shown: str | None = None  # tail already reported as progress
        self._phase = "main"
        self._context: dict[str, object] = {}  # from Namespace / command line
        self._context_args: dict[str, object] = {}
        self._prerun: dict[str, object] = {}  # pre-run lines of the current run
        self._block: dict | None = None
        self._error: dict | None = None  # Error N: being collected
        self._request_errors = 0
        self.progress: BenchProgress | None = None
        self.blocks: list[BenchResultBlock] = []
        self.errors: list[BenchError] = []
        self.closed = False

    # ---------------------------------------------------------- public

    @property
    def setup(self) -> dict[str, object]:
        """The setup of the run in progress (or of the last one)."""
        return {**self._context, **self._prerun}

    def feed(self, chunk: bytes | bytearray | str) -> list[Event]:
        if self.closed:
            raise ValueError("feed() after close()")
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            text = self._decoder.decode(bytes(chunk))
        else:
            text = str(chunk)
        if not text:
            return []
        events: list[Event] = []
        if self._pending_cr:
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
                self._line += 1
        if not _SEP_RE.search(text):
            # no line end: just collect (cheap even for a very long line fed in bits)
            self._parts.append(text)
            self._parts_len += len(text)
            if self._parts_len > 2 * self.max_line:
                self._set_buf("".join(self._parts)[-self.max_line :])
            self._maybe_tail_progress(events)
            return events
        data = "".join(self._parts) + text
        start = 0
        for found in _SEP_RE.finditer(data):
            sep = found.group(0)
            end = found.end()
            if sep == "\r" and end == len(data):
                # could be the first half of \r\n split across chunks
                self._handle_segment(data[start : found.start()], events)
                self._pending_cr = True
                start = end
                break
            self._handle_segment(data[start : found.start()], events)
            if sep != "\r":
                self._line += 1
            start = end
        self._set_buf(data[start:][-self.max_line :])
        self._maybe_tail_progress(events)
        return events

    @property
    def _buf(self) -> str:
        if len(self._parts) > 1:
            self._set_buf("".join(self._parts))
        return self._parts[0] if self._parts else ""

    def _set_buf(self, text: str) -> None:
        self._parts = [text] if text else []
        self._parts_len = len(text)

    def _tail_end(self, size: int = 64) -> str:
        out: list[str] = []
        got = 0
        for part in reversed(self._parts):
            out.append(part)
            got += len(part)
            if got >= size:
                break
        return "".join(reversed(out))[-size:]

    def close(self) -> list[Event]:
        """Flush: the last partial line, an open error, an unclosed block."""
        if self.closed:
            return []
        events: list[Event] = []
        rest = self._decoder.decode(b"", final=True)
        tail = self._buf + rest
        self._set_buf("")
        if tail:
            self._handle_segment(tail, events)
        self._finish_error(events)
        if self._block is not None:
            self._finish_block(events, complete=False)
        self.closed = True
        return events

    # ---------------------------------------------------------- segments

    def _shown_len(self, raw: str) -> int:
        """How much of raw's cleaned text was already reported as progress."""
        shown = self._tail_shown
        if shown and raw.startswith(shown):
            return len(strip_ansi(shown))
        return -1

    def _maybe_tail_progress(self, events: list[Event]) -> None:
        if not self._parts or self._parts_len > 8192:
            return  # a redraw is one short line; long ones wait for their line end
        if not strip_ansi(self._tail_end()).rstrip().endswith("]"):
            return  # a whole redraw ends with `…it/s]`
        tail = self._buf
        if "|" not in tail or "%" not in tail:
            return
        clean = strip_ansi(tail)
        matches = list(TQDM_RE.finditer(clean))
        # report only once the newest redraw is whole (nothing but spaces after it)
        if not matches or clean[matches[-1].end() :].strip():
            return
        done = self._shown_len(tail)
        fresh = [m for m in matches if m.end() > done]
        if not fresh:
            return
        for match in fresh:
            progress = progress_from_match(match)
            if progress is not None:
                self._emit_progress(progress, events)
        self._tail_shown = tail

    def _emit_progress(self, progress: BenchProgress, events: list[Event]) -> None:
        if self._phase != "main":
            progress = _replace_phase(progress, self._phase)
        self.progress = progress
        events.append(progress)

    def _handle_segment(self, raw: str, events: list[Event]) -> None:
        done = self._shown_len(raw)
        self._tail_shown = None
        if not raw:
            return
        text = strip_ansi(raw)
        if "|" in text and "%" in text:
            pieces = []
            pos = 0
            for match in TQDM_RE.finditer(text):
                pieces.append(text[pos : match.start()])
                pos = match.end()
                if match.end() > done:
                    progress = progress_from_match(match)
                    if progress is not None:
                        self._emit_progress(progress, events)
            if pos:
                pieces.append(text[pos:])
                text = "".join(p for p in pieces if p.strip())
        text = text.rstrip()
        if text.strip():
            self._handle_line(text, events)

    def _handle_line(self, line: str, events: list[Event]) -> None:
        stripped = line.strip()
        if self._block is not None and self._block_line(stripped, events):
            return
        if RESULT_HEADER_RE.search(stripped):
            self._finish_error(events)
            if self._block is not None:
                self._finish_block(events, complete=False)
            self._block = {
                "metrics": {},
                "printed": {},
                "unknown": {},
                "start": self._line,
                "setup": self.setup,
                "args": dict(self._context_args),
            }
            return
        if self._error is not None and self._error_line(line, events):
            return
        if self._error_check(line, stripped, events):
            return
        if self._setup_check(stripped, events):
            return
        if self.emit_other:
            events.append(OtherLine(line, self._line))

    # ---------------------------------------------------------- block

    def _block_line(self, stripped: str, events: list[Event]) -> bool:
        """Handle a line inside a block; False = not block content (handle it normally)."""
        block = self._block
        assert block is not None
        if RULER_RE.match(stripped):
            self._finish_block(events, complete=True)
            return True
        if RESULT_HEADER_RE.search(stripped):
            return False  # a new block: the caller closes this one
        if SECTION_RE.match(stripped) or stripped.endswith(":") and ":" not in stripped[:-1]:
            return True  # `----Time to First Token----`, `Per-position acceptance (%):`
        match = METRIC_LINE_RE.match(stripped)
        if not match:
            return False  # noise inside the block (a warning, an error line)
        label, text = match["label"], match["value"]
        value = printed_number(text)
        key = block_key(label)
        if key is None:
            if norm_label(label).startswith("position "):
                return True  # per-position acceptance: kept in the JSON as a list
            if value is not None and len(block["unknown"]) < _MAX_BLOCK_KEYS:
                block["unknown"][" ".join(label.split())] = value
            return True
        if value is None:  # `Maximum request concurrency: None`
            return True
        if len(block["metrics"]) < _MAX_BLOCK_KEYS:
            block["metrics"].setdefault(key, value)
            block["printed"].setdefault(key, text)
        return True

    def _finish_block(self, events: list[Event], *, complete: bool) -> None:
        block = self._block
        assert block is not None
        self._block = None
        result = BenchResultBlock(
            metrics=block["metrics"],
            printed=block["printed"],
            unknown=block["unknown"],
            setup=block["setup"],
            args=block["args"],
            start_line=block["start"],
            end_line=self._line,
            complete=complete,
        )
        self.blocks.append(result)
        events.append(result)
        self._prerun = {}  # pre-run lines belong to the run that just ended
        self._phase = "main"

    # ---------------------------------------------------------- errors

    def _add_error(self, error: BenchError, events: list[Event]) -> None:
        if error.kind == "request_error":
            self._request_errors += 1
            if self._request_errors > self.max_errors:
                return
        elif len(self.errors) >= 4 * self.max_errors + 10:
            return
        self.errors.append(error)
        events.append(error)

    def _error_check(self, line: str, stripped: str, events: list[Event]) -> bool:
        found = _ERROR_N_RE.match(stripped)
        if found:
            self._finish_error(events)
            self._error = {
                "index": int(found["n"]),
                "first": found["text"][:_MAX_TEXT],
                "lines": [found["text"][:_MAX_TEXT]],
                "line": self._line,
            }
            return True
        found = _INITIAL_FAIL_RE.search(stripped)
        if found:
            self._add_error(BenchError("initial_test_failed", stripped[:_MAX_TEXT], line=self._line), events)
            return True
        found = _ALL_FAILED_RE.search(stripped)
        if found:
            self._add_error(BenchError("all_failed", found.group(0)[:_MAX_TEXT], line=self._line), events)
            return True
        if _FAILED_HEADER_RE.match(stripped):
            self._add_error(BenchError("failed_requests", stripped[:_MAX_TEXT], line=self._line), events)
            return True
        if line[:1] not in (" ", "\t") and _EXCEPTION_RE.match(stripped):
            self._add_error(BenchError("exception", stripped[:_MAX_TEXT], line=self._line), events)
            return True
        return False

    def _error_line(self, line: str, events: list[Event]) -> bool:
        """A line after `Error N:`; False = the error text ended before it."""
        error = self._error
        assert error is not None
        stripped = line.strip()
        if (
            _ERROR_N_RE.match(stripped)
            or _FAILED_HEADER_RE.match(stripped)
            or any(p.search(stripped) for _, p in SETUP_PATTERNS)
            or stripped.startswith("Namespace(")
        ):
            self._finish_error(events)
            return False
        if len(error["lines"]) < _MAX_DETAIL_LINES:
            error["lines"].append(line[:_MAX_TEXT])
        return True

    def _finish_error(self, events: list[Event]) -> None:
        error = self._error
        if error is None:
            return
        self._error = None
        lines = error["lines"]
        message = error["first"]
        if not message or message.startswith(_TRACEBACK_START):
            # the last exception line of the (chained) traceback says what happened
            candidates = [ln.strip() for ln in lines[1:] if ln[:1] not in (" ", "\t") and ln.strip()]
            exceptions = [c for c in candidates if _EXCEPTION_RE.match(c)]
            pick = exceptions or candidates
            if pick:
                message = pick[-1]
        detail = "\n".join(lines).strip()
        self._add_error(
            BenchError("request_error", message[:_MAX_TEXT], error["index"], detail[: 8 * _MAX_TEXT], error["line"]),
            events,
        )

    # ---------------------------------------------------------- setup

    def _setup_check(self, stripped: str, events: list[Event]) -> bool:
        if "Namespace(" in stripped:
            args = parse_namespace(stripped[stripped.index("Namespace(") :])
            self._set_context(args)
            events.append(SetupLine("namespace", stripped, args, self._line))
            return True
        found = re.search(r"non-default args:\s*(\{.*\})\s*$", stripped)
        if found:
            args = parse_namespace(found.group(1))
            self._set_context({**self._context_args, **args})
            events.append(SetupLine("namespace", stripped, args, self._line))
            return True
        found = COMMAND_RE.search(stripped)
        if found:
            args = parse_command(found["rest"])
            self._set_context(args)
            events.append(SetupLine("command", stripped, args, self._line))
            return True
        for kind, pattern in SETUP_PATTERNS:
            match = pattern.search(stripped)
            if not match:
                continue
            value = setup_value(kind, match)
            if kind in ("request_rate", "burstiness", "max_concurrency", "ramp_up_strategy"):
                self._prerun[kind] = value
            elif kind == "warmup_start":
                self._phase = "warmup"
            elif kind == "warmup_done":
                self._phase = "main"
            elif kind == "initial_test_done" and "Starting main benchmark run" in stripped:
                events.append(SetupLine(kind, stripped, value, self._line))
                kind = "main_start"
            if kind == "main_start":
                self._phase = "main"
            events.append(SetupLine(kind, stripped, value, self._line))
            return True
        return False

    def _set_context(self, args: dict[str, object]) -> None:
        self._context_args = args
        self._context = setup_from_args(args)
        self._prerun = {}


def _replace_phase(progress: BenchProgress, phase: str) -> BenchProgress:
    return BenchProgress(
        progress.n,
        progress.total,
        progress.pct,
        progress.elapsed_s,
        progress.remaining_s,
        progress.rate,
        progress.raw,
        progress.desc,
        phase,
    )


def parse_result_blocks(text: str | bytes) -> list[ParsedBlock]:
    """Every result block of a whole captured output, in order (incomplete ones too)."""
    parser = BenchStreamParser()
    parser.feed(text)
    parser.close()
    return list(parser.blocks)


def iter_events(chunks: Iterable[bytes | str], **kwargs) -> list[Event]:
    """All events of a sequence of chunks (a convenience for tests and replays)."""
    parser = BenchStreamParser(**kwargs)
    out: list[Event] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    out += parser.close()
    return out
