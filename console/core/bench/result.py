"""The `--save-result` JSON of vLLM's serving benchmark, normalized across versions.

Differences handled (vllm-formats.md §2):
- goodput is `"request_goodput:"` (with a colon) in 0.6.3+rocm-0.9.1, `request_goodput` later;
- `request_rate` is a number or the string "inf" (-> math.inf here);
- `vllm bench serve` 0.9.1-0.10.2 writes `endpoint_type` + `label` instead of
  `backend`; 0.11+ writes all three;
- `failed` exists from 0.12 only: missing stays None (never derived);
- per-request arrays (`input_lens`, `ttfts`, `itls`, `errors`, `latencies`, ...)
  are always written by 0.6.3 and with --save-detailed later: kept apart in
  `BenchResult.arrays`, out of the summary;
- `--append-result` files hold several objects separated by newlines.

`agrees()` compares a value printed in the result block with the JSON's at the
printed precision.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from console.core.node_json import documents

__all__ = [
    "SUMMARY_KEYS",
    "BenchResult",
    "agrees",
    "block_disagreements",
    "load_result_file",
    "normalize_result",
    "result_metric_keys",
]

# Summary values in the order the result block prints them.
SUMMARY_KEYS: tuple[str, ...] = (
    "completed",
    "failed",
    "max_concurrency",
    "request_rate",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "total_token_throughput",
)
LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")

# Keys that describe the run rather than measure it.
_SETUP_KEYS = frozenset(
    {
        "date",
        "backend",
        "endpoint_type",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "best_of",
        "use_beam_search",
        "ramp_up_strategy",
        "ramp_up_start_rps",
        "ramp_up_end_rps",
    }
)
_RENAMED = {"request_goodput:": "request_goodput"}
_STAT_KEY_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(.+)_ms$")
_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One benchmark result. Missing values are None, never guessed.

    metrics holds every numeric scalar measurement by its JSON key (the summary
    keys and `mean_ttft_ms`, `p99.9_itl_ms`, `spec_decode_*`, ...); extra the
    other scalar keys (e.g. `--metadata K=V`); arrays the per-request lists;
    raw the object as read (with the legacy goodput key renamed).
    """

    date: str | None = None
    backend: str | None = None  # backend, else endpoint_type, else label
    endpoint_type: str | None = None
    label: str | None = None
    model_id: str | None = None
    tokenizer_id: str | None = None
    num_prompts: int | None = None
    request_rate: float | None = None  # math.inf = unlimited ("inf"); None = not recorded
    burstiness: float | None = None
    max_concurrency: int | None = None
    duration: float | None = None
    completed: int | None = None
    failed: int | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict, hash=False)
    extra: Mapping[str, object] = field(default_factory=dict, hash=False)
    arrays: Mapping[str, list] = field(default_factory=dict, hash=False, compare=False, repr=False)
    raw: Mapping[str, object] = field(default_factory=dict, hash=False, compare=False, repr=False)

    @property
    def unlimited_rate(self) -> bool:
        return self.request_rate is not None and math.isinf(self.request_rate)

    @property
    def all_failed(self) -> bool:
        """True when nothing completed (vLLM still exits 0 then)."""
        return self.completed == 0

    def latency(self, metric: str, stat: str = "median") -> float | None:
        """latency("ttft", "p99") -> p99_ttft_ms (ms); None if not recorded."""
        return self.metrics.get(f"{stat}_{metric}_ms")

    def summary(self) -> dict[str, float]:
        """The measured values (no setup, no arrays), in display order."""
        return {k: self.metrics[k] for k in result_metric_keys(self.metrics) if k not in _SETUP_KEYS}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())  # "inf", "1.5"
    except (ValueError, OverflowError):
        return None
    return None


def _int(value: object) -> int | None:
    number = _number(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def normalize_result(obj: Mapping[str, object]) -> BenchResult:
    """A result object of any version -> BenchResult. Raises ValueError if obj is not a mapping."""
    if not isinstance(obj, Mapping):
        # bad data read from a file, like the other load errors: ValueError
        raise ValueError(f"a benchmark result is a JSON object, not {type(obj).__name__}")  # noqa: TRY004
    data: dict[str, object] = {}
    for key, value in obj.items():
        key = str(key)
        new = _RENAMED.get(key, key)
        if new != key and new in obj:
            continue  # both spellings: the new one wins
        data[new] = value
    metrics: dict[str, float] = {}
    extra: dict[str, object] = {}
    arrays: dict[str, list] = {}
    for key, value in data.items():
        if isinstance(value, (list, tuple)):
            arrays[key] = list(value)
        elif key in _SETUP_KEYS:
            continue
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and _number(value) is not None:
            metrics[key] = float(value)
        elif value is not None:
            extra[key] = value
    rate = data.get("request_rate")
    backend = _text(data.get("backend")) or _text(data.get("endpoint_type")) or _text(data.get("label"))

    def num(key: str) -> float | None:
        return _number(data.get(key)) if key not in arrays else None

    def integer(key: str) -> int | None:
        return _int(data.get(key)) if key not in arrays else None

    return BenchResult(
        date=_text(data.get("date")),
        backend=backend,
        endpoint_type=_text(data.get("endpoint_type")),
        label=_text(data.get("label")),
        model_id=_text(data.get("model_id")),
        tokenizer_id=_text(data.get("tokenizer_id")),
        num_prompts=integer("num_prompts"),
        request_rate=_number(rate),
        burstiness=num("burstiness"),
        max_concurrency=integer("max_concurrency"),
        duration=num("duration"),
        completed=integer("completed"),
        failed=integer("failed"),
        total_input_tokens=integer("total_input_tokens"),
        total_output_tokens=integer("total_output_tokens"),
        request_throughput=num("request_throughput"),
        request_goodput=num("request_goodput"),
        output_throughput=num("output_throughput"),
        total_token_throughput=num("total_token_throughput"),
        max_output_tokens_per_s=num("max_output_tokens_per_s"),
        max_concurrent_requests=num("max_concurrent_requests"),
        metrics=MappingProxyType(metrics),
        extra=MappingProxyType(extra),
        arrays=MappingProxyType(arrays),
        raw=MappingProxyType(data),
    )


def load_result_file(text: str | bytes) -> list[BenchResult]:
    """A result file -> its results: one object, newline-separated objects
    (`--append-result`), or a JSON array of objects. Raises ValueError naming
    the line of the first malformed object."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = text.lstrip("\ufeff")
    out: list[BenchResult] = []
    for value, pos in documents(text, bad_json="line {line}: not a JSON result object ({msg})"):
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, dict):
                line = text.count("\n", 0, pos) + 1
                raise ValueError(f"line {line}: expected a JSON object, got {type(item).__name__}")  # noqa: TRY004
            out.append(normalize_result(item))
    return out


def _p_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf


def result_metric_keys(obj: Mapping[str, object] | BenchResult) -> list[str]:
    """The measurement keys present in a result (dict, BenchResult, or block
    metrics), in display order: the summary, then per latency metric mean,
    median, std, p-values ascending, then any other numeric keys sorted."""
    if not isinstance(obj, BenchResult):
        if all(isinstance(v, (int, float)) for v in obj.values()):
            keys = {_RENAMED.get(str(k), str(k)) for k in obj}  # block metrics
        else:
            obj = normalize_result(obj)
    if isinstance(obj, BenchResult):
        keys = set(obj.metrics)
        for name in SUMMARY_KEYS:
            if getattr(obj, name, None) is not None:
                keys.add(name)
    ordered = [k for k in SUMMARY_KEYS if k in keys]
    stats: dict[str, list[str]] = {}
    for key in keys:
        match = _STAT_KEY_RE.match(key)
        if match:
            stats.setdefault(match.group(3), []).append(key)
    names = [m for m in LATENCY_METRICS if m in stats] + sorted(m for m in stats if m not in LATENCY_METRICS)

    def stat_order(key: str) -> tuple[int, float]:
        match = _STAT_KEY_RE.match(key)
        assert match
        stat = match.group(1)
        if stat in ("mean", "median", "std"):
            return (("mean", "median", "std").index(stat), 0.0)
        return (3, _p_number(match.group(2)))

    for name in names:
        ordered += sorted(stats[name], key=stat_order)
    placed = set(ordered)
    ordered += sorted(k for k in keys if k not in placed)
    return ordered


# ---------------------------------------------------------------- text vs JSON


def _decimals(text: str) -> int:
    text = text.strip()
    if "e" in text.lower():
        return 10  # exponent notation: compare closely
    return len(text.split(".", 1)[1]) if "." in text else 0


def _fmt(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]  # -0.00 prints as 0.00
    return text


def agrees(block_value: str | float, json_value: object, decimals: int | None = None) -> bool:
    """Whether a value from a result block equals the JSON's to the printed precision.

    block_value is best given as printed (a str, e.g. "4.20"): its decimals set
    the precision. For a number, pass decimals, else the shortest repr is used
    (4.2 -> 1 decimal, a weaker check). The JSON value is rounded to that
    precision the way the client formats it (`{:.2f}`).
    """
    if isinstance(block_value, str):
        printed = block_value.strip()
        block = _number(printed)
        if decimals is None:
            decimals = _decimals(printed)
    else:
        block = _number(block_value)
        if decimals is None:
            decimals = _decimals(repr(float(block))) if block is not None else 0
            if block is not None and float(block).is_integer():
                decimals = 0
    other = _number(json_value)
    if block is None or other is None:
        return False
    if math.isnan(block) or math.isnan(other):
        return math.isnan(block) and math.isnan(other)
    if math.isinf(block) or math.isinf(other):
        return block == other
    return _fmt(block, decimals) == _fmt(other, decimals)


def block_disagreements(block, result: Mapping[str, object] | BenchResult) -> dict[str, tuple[str, object]]:
    """Keys printed in a result block (a BenchResultBlock, or a mapping key ->
    printed text) whose value differs from the JSON's: key -> (printed, json value).
    Keys the JSON lacks are not compared."""
    printed = getattr(block, "printed", block)
    raw = (
        result.raw if isinstance(result, BenchResult) else {_RENAMED.get(str(k), str(k)): v for k, v in result.items()}
    )
    out: dict[str, tuple[str, object]] = {}
    for key, text in printed.items():
        if key not in raw or raw[key] is None:
            continue
        if not agrees(text, raw[key]):
            out[key] = (text, raw[key])
    return out
