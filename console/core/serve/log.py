"""`vllm serve` log lines -> startup stages and fatal lines.

Covers the formats of vLLM 0.6.3 (V0), 0.8.5 / 0.9.1, 0.10-0.12 and 0.32 / 0.33
(reference/vllm-formats.md §4). Lines are matched on substrings, never on their
start, because the prefix changes between versions:

    INFO 10-14 21:03:12 api_server.py:528] ...                  (0.6.3)
    INFO 10-14 21:03:12 [api_server.py:528] ...                 (0.8-0.11)
    (APIServer pid=26212) INFO 11-21 07:44:58 [api_utils.py:347] ...  (0.33)
    (EngineCore_DP0 pid=26261) ...                              (engine process)
    INFO:     Application startup complete.                     (uvicorn)

ANSI colour codes are dropped, and a line holding tqdm redraws (`\\r`) is read
segment by segment.

`parse_serve_line` reads one line; `ServeLogState` folds a whole log into what
the console shows: the stage reached, its detail, the vLLM version, the KV-cache
size and the first fatal line (the specific root cause wins over the generic
"Engine core initialization failed" that vLLM prints after it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from console.core.serve.stage import ServeStage
from console.core.text import printable

__all__ = [
    "FatalLine",
    "ServeLogState",
    "ServeStage",
    "ServerStopping",
    "StageReached",
    "clean_line",
    "parse_serve_line",
]


@dataclass(frozen=True, slots=True)
class StageReached:
    stage: ServeStage
    detail: str  # "14.2 GiB in 31.5 s", "KV cache 1,234,567 tokens, ...", "vLLM 0.32.0"
    line: str  # the cleaned line
    version: str | None = None  # vLLM version, when the line names it
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    url: str | None = None  # "http://0.0.0.0:8000" from "Starting vLLM ... server on"
    model: str | None = None  # from the banner/logo "model M" or the parsed args
    concurrency_tokens: int | None = None  # the "for L tokens per request" of the concurrency line


@dataclass(frozen=True, slots=True)
class FatalLine:
    reason: str  # short: "address already in use", "out of GPU memory", ...
    line: str
    specific: bool = True  # False for generic wrappers ("engine failed to start")

    @property
    def message(self) -> str:
        """The line without process tag, level, timestamp and [file:line]: what a person reads."""
        return _message(self.line).strip()


@dataclass(frozen=True, slots=True)
class ServerStopping:
    """The server began a shutdown (SIGINT/SIGTERM); errors after it are teardown noise."""

    line: str


# ---------------------------------------------------------------- cleaning

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]")
# "(APIServer pid=1) INFO 11-21 07:44:58 [file.py:1] " / "INFO 10-14 21:03:12 file.py:1] "
_PREFIX_RE = re.compile(
    r"^\s*(?:\([^()]*pid=\d+\)\s*)?"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?\s+"
    r"\[?[\w./<>-]+:\d+\]\s?)?"
)


def clean_line(line: str) -> str:
    """Drop ANSI codes and the line ending; keep the last tqdm redraw of a line."""
    text = _ANSI_RE.sub("", line).rstrip("\n")
    segments = [s for s in text.split("\r") if s.strip()]
    return segments[-1] if segments else text.replace("\r", "")


def _message(line: str) -> str:
    """The text after the process tag, level, timestamp and [file:line]."""
    return _PREFIX_RE.sub("", line, count=1)


# ---------------------------------------------------------------- numbers


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def _num(value: float) -> str:
    """31.500000 -> '31.5', 14.2091 -> '14.21', 12.0 -> '12'."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _grouped(value: int) -> str:
    return f"{value:,}"


# ---------------------------------------------------------------- stage rules

_VERSION = r"v?(\d+\.\d+(?:\.\d+)?[\w.+-]*)"

# 0.33: "vLLM server version 0.33.0, serving model M"; 0.6.3-0.11: "vLLM API server version X"
_BANNER_RE = re.compile(r"vLLM (?:API )?server version " + _VERSION + r"(?:,? serving model (\S+))?")
# 0.32/0.33 ASCII logo: "  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"
_LOGO_VERSION_RE = re.compile(r"[\u2580-\u259f]\s+version\s+" + _VERSION + r"\s*$")
_LOGO_MODEL_RE = re.compile(r"[\u2580-\u259f]\s+model\s+(\S+)\s*$")
# non-default args: {'model': 'M', ...} (0.9.1+) / args: Namespace(..., model='M', ...) (0.6.3)
_ARGS_MODEL_RE = re.compile(r"(?:'model': |\bmodel=)'([^']+)'")
_ARGS_RE = re.compile(r"(?:^|\s)(?:non-default args: \{|args: Namespace\()")
_ENGINE_RE = re.compile(r"Initializing an? (V1 )?LLM engine \(v([^)\s]+)\) with config")
_LOAD_START_RE = re.compile(r"Starting to load model (.+?)(?:\.\.\.)?\s*$")
_SHARDS_RE = re.compile(r"Loading (?:safetensors|pt|npcache|bin)?\s*checkpoint shards:\s*(\d+)%[^|]*\|\s*(\d+)/(\d+)")
_V0_WEIGHTS_RE = re.compile(r"Loading model weights took ([\d.]+) GB")
_V1_WEIGHTS_RE = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
_WEIGHTS_TIME_RE = re.compile(r"Loading weights took ([\d.]+) seconds")
_KV_TOKENS_RE = re.compile(r"(?:GPU |CPU |XPU |TPU )?KV cache size: ([\d,_]+) tokens")
_CONCURRENCY_RE = re.compile(r"Maximum concurrency for ([\d,_]+) tokens per request: ([\d.]+)x")
_V0_BLOCKS_RE = re.compile(r"# (?:GPU|CPU|XPU) blocks: (\d+), # CPU blocks: (\d+)")
_GRAPH_START_RE = re.compile(
    r"Capturing (?:the model for )?(?:CUDA|cuda|HIP) ?graphs?(?: shapes)?(?: \(([^)]*)\))?",
)
_GRAPH_PROGRESS_RE = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")
_GRAPH_DONE_RE = re.compile(r"Graph capturing finished in ([\d.]+) secs?(?:, took ([\d.]+) GiB)?")
_ENGINE_DONE_RE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")
_SERVER_URL_RE = re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (\S+)")
_SERVER_MISC_RE = re.compile(r"Available routes are:|Started server process \[\d+\]|Waiting for application startup\.")
_UVICORN_RE = re.compile(r"Uvicorn running on (?:socket )?(.+?)(?: \(Press CTRL\+C to quit\))?\s*$")
_READY_RE = re.compile(r"Application startup complete\.")
_STOPPING_RE = re.compile(
    r"\[shutdown\] API server: shutdown triggered|Shutting down FastAPI HTTP server"
    r"|INFO:\s+Shutting down\s*$",
    re.IGNORECASE,
)


def _stage(line: str) -> StageReached | ServerStopping | None:
    msg = _message(line)

    if _READY_RE.search(line):
        return StageReached(ServeStage.READY, "application startup complete", line)
    if _STOPPING_RE.search(line):
        return ServerStopping(line)
    if m := _SERVER_URL_RE.search(msg):
        url = m.group(1).rstrip(".,")
        return StageReached(ServeStage.SERVER_STARTING, url, line, url=url)
    if m := _UVICORN_RE.search(msg):
        return StageReached(ServeStage.SERVER_STARTING, m.group(1), line)
    if _SERVER_MISC_RE.search(line):
        return StageReached(ServeStage.SERVER_STARTING, "", line)

    if m := _ENGINE_DONE_RE.search(msg):
        return StageReached(ServeStage.ENGINE_READY, f"engine ready in {_num(float(m.group(1)))} s", line)
    if m := _GRAPH_DONE_RE.search(msg):
        detail = f"graphs captured in {_num(float(m.group(1)))} s"
        if m.group(2):
            detail += f", {_num(float(m.group(2)))} GiB"
        return StageReached(ServeStage.GRAPH_CAPTURE, detail, line)
    if m := _GRAPH_START_RE.search(msg):
        detail = "capturing graphs"
        if m.group(1):
            detail += f" ({m.group(1)})"
        if p := _GRAPH_PROGRESS_RE.search(msg):
            detail += f" {p.group(1)}/{p.group(2)}"
        return StageReached(ServeStage.GRAPH_CAPTURE, detail, line)

    kv = _KV_TOKENS_RE.search(msg)
    conc = _CONCURRENCY_RE.search(msg)
    if kv or conc:
        tokens = _int(kv.group(1)) if kv else None
        factor = float(conc.group(2)) if conc else None
        parts = []
        if tokens is not None:
            parts.append(f"KV cache {_grouped(tokens)} tokens")
        if factor is not None:
            parts.append(f"max concurrency {conc.group(2)}x")  # type: ignore[union-attr]
            if tokens is None:
                parts[-1] += f" at {_grouped(_int(conc.group(1)))} tokens"  # type: ignore[union-attr]
        return StageReached(
            ServeStage.KV_CACHE,
            ", ".join(parts),
            line,
            kv_tokens=tokens,
            max_concurrency=factor,
            concurrency_tokens=_int(conc.group(1)) if conc else None,
        )
    if m := _V0_BLOCKS_RE.search(msg):
        return StageReached(ServeStage.KV_CACHE, f"{_grouped(int(m.group(1)))} GPU blocks", line)

    if m := _V1_WEIGHTS_RE.search(msg):
        detail = f"{_num(float(m.group(1)))} GiB in {_num(float(m.group(2)))} s"
        return StageReached(ServeStage.WEIGHTS_LOADED, detail, line)
    if m := _V0_WEIGHTS_RE.search(msg):
        return StageReached(ServeStage.WEIGHTS_LOADED, f"{_num(float(m.group(1)))} GB", line)
    if m := _WEIGHTS_TIME_RE.search(msg):
        return StageReached(ServeStage.WEIGHTS_LOADED, f"in {_num(float(m.group(1)))} s", line)
    if m := _SHARDS_RE.search(msg):
        return StageReached(ServeStage.LOADING_WEIGHTS, f"shards {m.group(2)}/{m.group(3)}", line)
    if m := _LOAD_START_RE.search(msg):
        return StageReached(ServeStage.LOADING_WEIGHTS, m.group(1), line)

    if m := _ENGINE_RE.search(msg):
        version = m.group(2).lstrip("v")
        kind = "V1 engine" if m.group(1) else "engine"
        return StageReached(ServeStage.ENGINE_INIT, f"{kind}, vLLM {version}", line, version=version)

    if m := _BANNER_RE.search(msg):
        version, model = m.group(1).rstrip(".,"), m.group(2)
        detail = f"vLLM {version}" + (f", model {model.rstrip(',')}" if model else "")
        return StageReached(
            ServeStage.STARTING,
            detail,
            line,
            version=version,
            model=model.rstrip(",") if model else None,
        )
    if m := _LOGO_VERSION_RE.search(msg):
        return StageReached(ServeStage.STARTING, f"vLLM {m.group(1)}", line, version=m.group(1))
    if m := _LOGO_MODEL_RE.search(msg):
        return StageReached(ServeStage.STARTING, "", line, model=m.group(1))
    if _ARGS_RE.search(msg):
        m = _ARGS_MODEL_RE.search(msg)
        return StageReached(ServeStage.STARTING, "", line, model=m.group(1) if m else None)
    return None


# ---------------------------------------------------------------- fatal rules

# (reason, pattern, specific). Checked in order; substrings anywhere in the line.
_FATAL_RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    (
        "address already in use",
        re.compile(r"\[Errno 98\]|Address already in use", re.IGNORECASE),
        True,
    ),
    (
        "out of GPU memory",
        re.compile(r"OutOfMemoryError|\b(?:HIP|CUDA) out of memory", re.IGNORECASE),
        True,
    ),
    (
        "KV cache too small for max_model_len",
        re.compile(
            r"max seq len \(\d+\).*(?:larger than the maximum number of tokens that can be"
            r" stored in KV cache|larger than the available KV cache memory)"
        ),
        True,
    ),
    (
        # vLLM V1 checks free memory at worker start: another process holds the GPU.
        "not enough free GPU memory",
        re.compile(r"Free memory on device .* is less than desired GPU memory utilization"),
        True,
    ),
    (
        "no memory left for the KV cache",
        re.compile(r"No available memory for the cache blocks|No available memory for KV cache"),
        True,
    ),
    (
        "max_model_len too large",
        re.compile(r"User-specified max_model_len \(\d+\) is greater than"),
        True,
    ),
    (
        "unrecognized arguments",
        re.compile(r"\berror: unrecognized arguments"),
        True,
    ),
    (
        "invalid argument",
        re.compile(r"\berror: (?:argument \S+|the following arguments are required)"),
        True,
    ),
    (
        "not enough GPUs for the tensor-parallel size",
        re.compile(
            r"larger than the number of available GPUs|exceeds the total number of available"
            r" GPUs|to less than max local gpu count"
        ),
        True,
    ),
    (
        "model not found",
        re.compile(
            r"RepositoryNotFoundError|is not a local folder and is not a valid model identifier"
            r"|Repo id must be in the form|No such file or directory: '[^']*config\.json'"
        ),
        True,
    ),
    (
        "gated model: no access (HF_TOKEN?)",
        re.compile(r"GatedRepoError|Access to model \S+ is restricted|401 Client Error"),
        True,
    ),
    (
        "engine failed to start",
        re.compile(r"EngineCore failed to start|Engine core initialization failed"),
        False,
    ),
    ("engine died", re.compile(r"EngineDeadError"), False),
)
# An uncaught exception's last traceback line: at the raw line start, no log prefix.
_UNCAUGHT_RE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception))(?::\s*(.*))?$")
_NOT_FATAL_EXC = ("CancelledError",)


def _fatal(line: str) -> FatalLine | None:
    for reason, pattern, specific in _FATAL_RULES:
        if pattern.search(line):
            return FatalLine(reason, line, specific)
    m = _UNCAUGHT_RE.match(line)
    if m and m.group(1) not in _NOT_FATAL_EXC:
        name = m.group(1)
        reason = "invalid configuration" if name == "ValidationError" else f"uncaught {name}"
        return FatalLine(reason, line, False)
    return None


# ---------------------------------------------------------------- public parse


def parse_serve_line(line: str) -> StageReached | FatalLine | ServerStopping | None:
    """What one `vllm serve` log line says, or None for everything else.

    A fatal line wins over a stage on the same physical line (tqdm redraws).
    """
    text = _ANSI_RE.sub("", line).rstrip("\n")
    segments = [s for s in text.split("\r") if s.strip()] or [text]
    found: StageReached | ServerStopping | None = None
    for segment in segments:
        segment = printable(segment)  # its words end up on screens: no control may act
        fatal = _fatal(segment)
        if fatal is not None:
            return fatal
        stage = _stage(segment)
        if stage is not None:
            found = stage
    return found


# ---------------------------------------------------------------- accumulator


@dataclass(frozen=True, slots=True)
class ServeLogState:
    """Everything the startup log has said so far. Immutable: `feed` returns a new one."""

    stage: ServeStage | None = None
    stage_detail: str = ""
    version: str | None = None
    fatal: FatalLine | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    url: str | None = None
    model: str | None = None
    stopping: bool = False  # a shutdown began (errors after it are not fatal)

    @property
    def ready(self) -> bool:
        return self.stage is ServeStage.READY and self.fatal is None

    @property
    def failed(self) -> bool:
        return self.fatal is not None

    def feed(self, line: str) -> ServeLogState:
        event = parse_serve_line(line)
        if event is None:
            return self
        if isinstance(event, ServerStopping):
            return self if self.stopping else replace(self, stopping=True)
        if isinstance(event, FatalLine):
            if self.stopping:
                return self  # SIGTERM makes vLLM log EngineDeadError: teardown, not a failure
            if self.fatal is None or (event.specific and not self.fatal.specific):
                return replace(self, fatal=event)
            return self
        return self._advance(event)

    def feed_lines(self, lines: Iterable[str]) -> ServeLogState:
        state = self
        for line in lines:
            state = state.feed(line)
        return state

    def _advance(self, event: StageReached) -> ServeLogState:
        changes: dict = {}
        if event.version and not self.version:
            changes["version"] = event.version
        if event.model and not self.model:
            changes["model"] = event.model
        if event.url:
            changes["url"] = event.url
        if event.kv_tokens is not None:
            changes["kv_tokens"] = event.kv_tokens
        if event.max_concurrency is not None:
            changes["max_concurrency"] = event.max_concurrency
        if self.stage is None or event.stage > self.stage:
            changes["stage"] = event.stage
            version = changes.get("version", self.version)
            if not event.detail and event.stage is ServeStage.STARTING and version:
                changes["stage_detail"] = f"vLLM {version}"
            else:
                changes["stage_detail"] = event.detail
        elif event.stage == self.stage and event.detail:
            changes["stage_detail"] = event.detail
        if changes.get("stage", self.stage) is ServeStage.KV_CACHE and (
            "kv_tokens" in changes or "max_concurrency" in changes
        ):
            tokens = changes.get("kv_tokens", self.kv_tokens)
            factor = changes.get("max_concurrency", self.max_concurrency)
            parts = []
            if tokens is not None:
                parts.append(f"KV cache {_grouped(tokens)} tokens")
            if factor is not None:
                parts.append(f"max concurrency {factor:.2f}x")
            changes["stage_detail"] = ", ".join(parts)
        return replace(self, **changes) if changes else self
