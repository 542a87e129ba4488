"""Parse the output of a vLLM serving benchmark client, vLLM 0.6.3 -> 0.33.

Clients: `vllm bench serve` and benchmarks/benchmark_serving.py. Their stdout
carries the setup lines (`Namespace(...)`, `Traffic request rate: ...`), the
result block between `==== Serving Benchmark Result ====` and a line of 50 `=`,
and failure lines; stderr carries tqdm progress redrawn with `\\r`. The two
streams may arrive merged (a PTY, `2>&1`), with ANSI colour codes, CRLF line
ends, and a progress redraw glued to the front of a stdout line.

- `parse_progress(text)`: the last tqdm progress state in a piece of text.
- `BenchStreamParser`: fed raw chunks (bytes or str) as they arrive; returns
  typed events: BenchProgress, SetupLine, BenchResultBlock, BenchError.
- `parse_result_blocks(text)`: every result block of a whole captured file,
  each with the setup it ran with (nearest preceding Namespace / command line /
  pre-run lines) and its line span.

Block values use the keys of the `--save-result` JSON (`completed`,
`total_output_tokens`, `p99.9_itl_ms`, ...), see vllm-formats.md §2.
"""

from __future__ import annotations

import ast
import codecs
import math
import re
import shlex
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "BenchError",
    "BenchProgress",
    "BenchResultBlock",
    "BenchStreamParser",
    "OtherLine",
    "ParsedBlock",
    "SetupLine",
    "block_key",
    "iter_events",
    "parse_namespace",
    "parse_progress",
    "parse_result_blocks",
    "strip_ansi",
]

_EMPTY: Mapping = MappingProxyType({})


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """One tqdm redraw: ` 45%|████▌     | 450/1000 [00:12<00:15, 36.20it/s]`."""

    n: int
    total: int
    pct: float  # as printed (tqdm rounds it to an integer)
    elapsed_s: float | None
    remaining_s: float | None  # None while tqdm prints `?`
    rate: float | None  # items per second; `s/it` is converted; None for `?it/s`
    raw: str
    desc: str = ""  # tqdm's description, if any (vLLM's bars have none)
    phase: str = "main"  # stream parser: "warmup" between the warm-up lines

    @property
    def fraction(self) -> float:
        return self.n / self.total if self.total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class SetupLine:
    """A line that says how the run is set up or where it is.

    kind: namespace, command, request_rate, burstiness, max_concurrency,
    ramp_up_strategy, ramp_up, probe_request_rate, initial_test_start,
    initial_test_done, ready_check_wait, ready_check_skipped, warmup_start,
    warmup_done, main_start. value: the parsed value (a dict for namespace and
    command, a float/int/None for the numbers, else None).
    """

    kind: str
    text: str
    value: object = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class BenchError:
    """kind: initial_test_failed | all_failed | failed_requests | request_error | exception.

    For request_error (`Error N: ...`), index is N, message the line's text or,
    for a traceback, its last exception line, and detail the whole text (capped).
    """

    kind: str
    message: str
    index: int | None = None
    detail: str = ""
    line: int = 0


@dataclass(frozen=True, slots=True)
class OtherLine:
    """Any other line (only emitted with BenchStreamParser(emit_other=True))."""

    text: str
    line: int = 0


@dataclass(frozen=True, slots=True)
class BenchResultBlock:
    """One `Serving Benchmark Result` block.

    metrics: result-JSON key -> value; printed: the same keys -> the text as
    printed (so a comparison can use the printed precision); unknown: labels this
    parser has no key for -> value; setup: what the run was set up with (keys
    model, backend, endpoint, base_url, dataset_name, dataset_path, num_prompts,
    request_rate (inf when unlimited), burstiness, max_concurrency (None = no
    limit), input_len, output_len, seed, ..., only those that were found);
    args: the full Namespace / command-line arguments it came from; start_line /
    end_line: 1-based line numbers (counting `\\n`) of the two `=` rulers;
    complete: False when the stream ended (or another block began) before the
    closing ruler.
    """

    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    printed: Mapping[str, str] = field(default_factory=dict, hash=False)
    unknown: Mapping[str, float] = field(default_factory=dict, hash=False)
    setup: Mapping[str, object] = field(default_factory=dict, hash=False)
    args: Mapping[str, object] = field(default_factory=dict, hash=False)
    start_line: int = 0
    end_line: int = 0
    complete: bool = True

    @property
    def span(self) -> tuple[int, int]:
        return (self.start_line, self.end_line)


# parse_result_blocks returns the same record: metrics, setup and line span.
ParsedBlock = BenchResultBlock

Event = BenchProgress | SetupLine | BenchError | BenchResultBlock | OtherLine


# ---------------------------------------------------------------- ANSI and tqdm

_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase line
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (titles, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS/SOS/PM/APC strings
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\x1b"  # a lone ESC
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"  # other control characters
)


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences and control characters (tabs are kept)."""
    return _ANSI_RE.sub("", text)


_SI = r"[kMGTPEZY]?"
_NUM = r"\d+(?:\.\d+)?"
_TQDM_RE = re.compile(
    r"(?:(?P<desc>[^|\r\n%:]{0,80}?):\s*)?"
    r"(?P<pct>\d{1,3}(?:\.\d+)?)%\|(?P<bar>[^|\r\n]*)\|\s*"
    rf"(?P<n>{_NUM}{_SI})/(?P<total>{_NUM}{_SI})\s*"
    r"\[\s*(?P<elapsed>\d+(?::\d\d)+)\s*<\s*(?P<remaining>\d+(?::\d\d)+|\?)\s*,\s*"
    rf"(?P<rate>{_NUM}{_SI}|\?)\s*(?P<unit>[A-Za-z_]+/[A-Za-z_]+)"
    r"(?P<postfix>[^\]\r\n]*)\]"
)
_SI_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


def _si(text: str) -> float:
    if text and text[-1] in _SI_SCALE and text[-1] != "":
        return float(text[:-1]) * _SI_SCALE[text[-1]]
    return float(text)


def _interval(text: str) -> float | None:
    """tqdm's format_interval: `MM:SS` or `H:MM:SS`; `?` = unknown."""
    if text == "?":
        return None
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _progress_from_match(match: re.Match) -> BenchProgress | None:
    try:
        n = round(_si(match["n"]))
        total = round(_si(match["total"]))
        pct = float(match["pct"])
        rate: float | None = None
        if match["rate"] != "?":
            value = _si(match["rate"])
            if match["unit"].startswith("s/"):  # tqdm prints s/it below 1 it/s
                rate = 1.0 / value if value > 0 else None
            else:
                rate = value
        return BenchProgress(
            n=n,
            total=total,
            pct=pct,
            elapsed_s=_interval(match["elapsed"]),
            remaining_s=_interval(match["remaining"]),
            rate=rate,
            raw=match.group(0).strip(),
            desc=(match["desc"] or "").strip(),
        )
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def parse_progress(text: str) -> BenchProgress | None:
    """The last tqdm state in text (a line, a chunk with `\\r` redraws, or ANSI)."""
    last = None
    for match in _TQDM_RE.finditer(strip_ansi(text)):
        last = match
    return _progress_from_match(last) if last else None


# ---------------------------------------------------------------- Namespace

_PAIR_OPEN = {"(": ")", "[": "]", "{": "}", "<": ">"}


def _split_top(text: str) -> list[str]:
    """Split `a=1, b=(1, 2), c='x, y'` on top-level commas."""
    parts: list[str] = []
    stack: list[str] = []
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _PAIR_OPEN:
            # `<` only opens a repr like <function f at 0x..>, not a comparison
            if ch != "<" or text[i + 1 : i + 2].isalpha():
                stack.append(_PAIR_OPEN[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch in ")]}" and not stack:
            pass  # unbalanced: ignore
        elif ch == "," and not stack:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_SPECIAL_VALUES = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "None": None, "True": True, "False": False}


def _value(text: str) -> object:
    text = text.strip()
    if text in _SPECIAL_VALUES:
        return _SPECIAL_VALUES[text]
    if len(text) > 20000:
        return text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning on reprs like 0x7f…>
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_namespace(text: str) -> dict[str, object]:
    """`Namespace(a=1, b='x', f=<function …>)` (or `{…}` / the inside) -> dict.

    Values are Python literals where they parse (`inf` is float inf), else the
    text as printed (functions, nested objects).
    """
    text = text.strip()
    found = re.search(r"Namespace\((.*)\)\s*$", text, re.DOTALL)
    if found:
        inner = found.group(1)
    elif text.startswith("{"):
        value = _value(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        inner = text.strip("{}")
    elif text.startswith("Namespace("):  # cut short: take what is there
        inner = text[len("Namespace(") :]
    else:
        inner = text
    out: dict[str, object] = {}
    for part in _split_top(inner):
        if "=" in part and re.match(r"[A-Za-z_][A-Za-z0-9_]*\s*=", part):
            key, raw = part.split("=", 1)
            out[key.strip()] = _value(raw)
        elif ":" in part:  # a dict item 'key': value
            key, raw = part.split(":", 1)
            key_value = _value(key)
            if isinstance(key_value, str):
                out[key_value] = _value(raw)
    return out


# Flags of the clients (both spellings) -> setup keys.
_SETUP_FROM_ARGS = {
    "model": "model",
    "served_model_name": "served_model_name",
    "tokenizer": "tokenizer",
    "backend": "backend",
    "endpoint_type": "endpoint_type",
    "label": "label",
    "endpoint": "endpoint",
    "base_url": "base_url",
    "host": "host",
    "port": "port",
    "dataset_name": "dataset_name",
    "dataset": "dataset_path",  # 0.6.3's deprecated --dataset
    "dataset_path": "dataset_path",
    "num_prompts": "num_prompts",
    "request_rate": "request_rate",
    "burstiness": "burstiness",
    "max_concurrency": "max_concurrency",
    "seed": "seed",
    "ignore_eos": "ignore_eos",
    "percentile_metrics": "percentile_metrics",
    "metric_percentiles": "metric_percentiles",
    "random_range_ratio": "range_ratio",
    "num_warmups": "num_warmups",
}
_LEN_FLAGS = {
    "random": ("random_input_len", "random_output_len"),
    "sonnet": ("sonnet_input_len", "sonnet_output_len"),
    "sharegpt": (None, "sharegpt_output_len"),
    "hf": (None, "hf_output_len"),
    "custom": (None, "custom_output_len"),
}


def _setup_from_args(args: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, name in _SETUP_FROM_ARGS.items():
        value = args.get(key)
        # None means "not given", except for max_concurrency (None = no limit)
        if key in args and (value is not None or name == "max_concurrency"):
            out[name] = value
    for name in ("request_rate", "range_ratio", "burstiness"):
        if name in out:
            out[name] = _rate_value(out[name])
    dataset = str(args.get("dataset_name") or "")
    in_key, out_key = _LEN_FLAGS.get(dataset, (None, None))
    for name, flag, generic in (("input_len", in_key, "input_len"), ("output_len", out_key, "output_len")):
        value = args.get(generic)  # 0.33's generic --input-len/--output-len win
        if value is None and flag:
            value = args.get(flag)
        if value is not None:
            out[name] = value
    return out


def _rate_value(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value)  # "inf" -> inf
        except ValueError:
            return value
    return value


# a shown command: the client followed directly by its flags
_COMMAND_RE = re.compile(r"(?:\bvllm\s+bench\s+serve|\bbenchmark_serving\.py)(?P<rest>(?:\s+\\)?\s+--[A-Za-z].*)")
_BOOL_FLAGS = {
    "ignore_eos",
    "save_result",
    "save_detailed",
    "append_result",
    "disable_tqdm",
    "trust_remote_code",
    "use_beam_search",
    "profile",
    "disable_shuffle",
    "skip_chat_template",
    "no_stream",
    "no_oversample",
    "insecure",
    "plot_timeline",
    "plot_dataset_stats",
    "skip_tokenizer_init",
    "enable_multimodal_chat",
    "self_timed",
}


def _parse_command(rest: str) -> dict[str, object]:
    """Flags of a shown command line (`... benchmark_serving.py --backend x ...`)."""
    for stop in ('"', ";", "&&", "||", " | ", " > ", " 2>", " <"):
        cut = rest.find(stop)
        if cut >= 0:
            rest = rest[:cut]
    rest = rest.replace("\\\n", " ")
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    out: dict[str, object] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--") or len(word) < 3:
            i += 1
            continue
        name, eq, inline = word[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            out[key] = _value(inline) if _looks_number(inline) else inline
            i += 1
        elif key in _BOOL_FLAGS or i + 1 >= len(words) or words[i + 1].startswith("--"):
            out[key] = True
            i += 1
        else:
            value = words[i + 1]
            out[key] = _value(value) if _looks_number(value) else value
            i += 2
    return out


def _looks_number(text: str) -> bool:
    return bool(re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf", text))


# ---------------------------------------------------------------- result block labels

_RESULT_HEADER_RE = re.compile(r"=+\s*Serving Benchmark Result\s*=+")
_RULER_RE = re.compile(r"^={10,}$")
_SECTION_RE = re.compile(r"^-{2,}.*-{2,}$|^-+$")
_VALUE = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)|None"
_METRIC_LINE_RE = re.compile(rf"^\s*(?P<label>\S.*?):\s+(?P<value>{_VALUE})\s*$", re.IGNORECASE)

# Fixed labels (case-insensitive, spaces collapsed, no colon) -> JSON key.
_LABELS = {
    "successful requests": "completed",
    "failed requests": "failed",
    "maximum request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "input throughput (inputs/s)": "input_sequence_throughput",
    "request goodput (req/s)": "request_goodput",
    "input token throughput (tok/s)": "input_throughput",  # pre-0.6 scripts
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "rtfx (inverse real-time factor)": "rtfx",
    "total token throughput (tok/s)": "total_token_throughput",
    # 0.33 probe requests
    "probe requests completed": "probe_completed",
    "probe requests failed": "probe_failed",
    "median probe e2el (ms)": "probe_median_e2el_ms",
    "p99 probe e2el (ms)": "probe_p99_e2el_ms",
    "max probe e2el (ms)": "probe_max_e2el_ms",
    # 0.33 speculative decoding
    "acceptance rate (%)": "spec_decode_acceptance_rate",
    "acceptance length": "spec_decode_acceptance_length",
    "drafts": "spec_decode_num_drafts",
    "draft tokens": "spec_decode_draft_tokens",
    "accepted tokens": "spec_decode_accepted_tokens",
    # diffusion decoding
    "committed throughput (tok/s)": "diffusion_committed_throughput",
    "denoising steps per canvas": "diffusion_steps_per_canvas",
    "committed per denoising step": "diffusion_committed_per_step",
    "committed tokens": "diffusion_committed_tokens",
    "denoising steps": "diffusion_denoising_steps",
    "canvas positions evaluated": "diffusion_canvas_positions",
}
# `Mean TTFT (ms)`, `P99.9 ITL (ms)`, ... metric names -> JSON attribute names.
_STAT_RE = re.compile(r"^(?P<stat>mean|median|std|p(?P<p>\d+(?:\.\d+)?))\s+(?P<name>.+?)\s+\(ms\)$")
_STAT_NAMES = {
    "ttft": "ttft",
    "tpot": "tpot",
    "itl": "itl",
    "e2el": "e2el",
    "client queue time": "client_queue_time",
    "e2el incl. client queue": "e2el_including_client_queue",
}


def _norm_label(label: str) -> str:
    return " ".join(label.strip().rstrip(":").split()).casefold()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "_", text.casefold()).strip("_")


def block_key(label: str) -> str | None:
    """The result-JSON key for a result-block label, e.g. `P99.9 ITL (ms)` -> `p99.9_itl_ms`.

    None for labels that carry no single value (e.g. `  Position 0`).
    """
    norm = _norm_label(label)
    if norm in _LABELS:
        return _LABELS[norm]
    stat = _STAT_RE.match(norm)
    if stat:
        name = _STAT_NAMES.get(stat["name"], _slug(stat["name"]))
        if stat["p"] is not None:
            p = stat["p"]
            if "." in p:
                number = float(p)
                p = str(int(number)) if number == int(number) else repr(number)
            return f"p{p}_{name}_ms"
        return f"{stat['stat']}_{name}_ms"
    return None


def _number(text: str) -> float | None:
    if text.casefold() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        return None


# ---------------------------------------------------------------- setup lines

_SETUP_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("initial_test_start", re.compile(r"Starting initial single prompt test run")),
    ("initial_test_done", re.compile(r"Initial test run completed")),
    ("ready_check_skipped", re.compile(r"Skipping endpoint ready check")),
    ("ready_check_wait", re.compile(r"Waiting for endpoint to become up in (?P<v>\d+) seconds")),
    ("warmup_start", re.compile(r"Warming up with (?P<v>\d+) requests")),
    ("warmup_done", re.compile(r"Warmup run completed")),
    ("main_start", re.compile(r"\bStarting main benchmark run")),
    ("request_rate", re.compile(r"\bTraffic request rate:\s*(?P<v>\S+)")),
    ("ramp_up_strategy", re.compile(r"\bTraffic ramp-up strategy:\s*(?P<v>[\w-]+)")),
    ("ramp_up", re.compile(r"\bWill increase RPS from (?P<a>\S+) to (?P<b>\S+) RPS")),
    ("burstiness", re.compile(r"\bBurstiness factor:\s*(?P<v>\S+)")),
    ("max_concurrency", re.compile(r"\bMaximum request concurrency:\s*(?P<v>\S+)\s*$")),
    ("probe_request_rate", re.compile(r"\bProbe request rate:\s*(?P<v>\S+)")),
)


def _setup_value(kind: str, match: re.Match) -> object:
    if kind == "ramp_up":
        return (_number(match["a"]), _number(match["b"]))
    groups = match.groupdict()
    if "v" not in groups:
        return None
    text = groups["v"]
    if kind == "ramp_up_strategy":
        return text
    number = _number(text)
    if (
        kind in ("max_concurrency", "ready_check_wait", "warmup_start")
        and number is not None
        and math.isfinite(number)
        and number == int(number)
    ):
        return int(number)
    return number


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
        matches = list(_TQDM_RE.finditer(clean))
        # report only once the newest redraw is whole (nothing but spaces after it)
        if not matches or clean[matches[-1].end() :].strip():
            return
        done = self._shown_len(tail)
        fresh = [m for m in matches if m.end() > done]
        if not fresh:
            return
        for match in fresh:
            progress = _progress_from_match(match)
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
            for match in _TQDM_RE.finditer(text):
                pieces.append(text[pos : match.start()])
                pos = match.end()
                if match.end() > done:
                    progress = _progress_from_match(match)
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
        if _RESULT_HEADER_RE.search(stripped):
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
        if _RULER_RE.match(stripped):
            self._finish_block(events, complete=True)
            return True
        if _RESULT_HEADER_RE.search(stripped):
            return False  # a new block: the caller closes this one
        if _SECTION_RE.match(stripped) or stripped.endswith(":") and ":" not in stripped[:-1]:
            return True  # `----Time to First Token----`, `Per-position acceptance (%):`
        match = _METRIC_LINE_RE.match(stripped)
        if not match:
            return False  # noise inside the block (a warning, an error line)
        label, text = match["label"], match["value"]
        value = _number(text)
        key = block_key(label)
        if key is None:
            if _norm_label(label).startswith("position "):
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
            or any(p.search(stripped) for _, p in _SETUP_PATTERNS)
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
        found = _COMMAND_RE.search(stripped)
        if found:
            args = _parse_command(found["rest"])
            self._set_context(args)
            events.append(SetupLine("command", stripped, args, self._line))
            return True
        for kind, pattern in _SETUP_PATTERNS:
            match = pattern.search(stripped)
            if not match:
                continue
            value = _setup_value(kind, match)
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
        self._context = _setup_from_args(args)
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
