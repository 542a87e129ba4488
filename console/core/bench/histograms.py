"""Prometheus histogram math for vLLM's /metrics, on already-parsed samples.

The services layer parses a scrape (prometheus_client) and hands over plain
samples: `(name, labels, value)` triples (prometheus_client's Sample namedtuple
works as is). Here: histograms summed over label sets (several engines),
deltas between two scrapes (a counter reset = the server restarted), quantiles
interpolated inside a bucket like PromQL's histogram_quantile, windowed
p50/p90/p99, counter rates, and vLLM's metric-name fallbacks across versions
(vllm-formats.md §1). Bucket bounds always come from the data: vLLM changed
them (PR #15202) and 0.33 lets the server override them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "E2E",
    "GENERATION_TOKENS",
    "ITL",
    "KV_CACHE",
    "NUM_RUNNING",
    "NUM_WAITING",
    "PROMPT_TOKENS",
    "REQUEST_SUCCESS",
    "TTFT",
    "HistogramSnapshot",
    "WindowStats",
    "WindowedPercentiles",
    "counter_value",
    "delta",
    "first_histogram",
    "gauge_value",
    "histogram_from_samples",
    "quantile",
    "rate",
]

# Metric names, with fallbacks in order of preference (newest first).
TTFT = ("vllm:time_to_first_token_seconds",)
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
E2E = ("vllm:e2e_request_latency_seconds",)
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # fraction 0-1
NUM_RUNNING = ("vllm:num_requests_running",)
NUM_WAITING = ("vllm:num_requests_waiting",)
GENERATION_TOKENS = ("vllm:generation_tokens_total",)
PROMPT_TOKENS = ("vllm:prompt_tokens_total",)
REQUEST_SUCCESS = ("vllm:request_success_total",)

Sample = tuple  # (name, labels, value, ...)
LabelsFilter = Mapping[str, str] | Callable[[Mapping[str, str]], bool] | None


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    """Cumulative buckets sorted by bound; the last bound is +Inf when the scrape had it."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count)
    sum: float
    count: float

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def bounds(self) -> tuple[float, ...]:
        return tuple(le for le, _ in self.buckets)


# ---------------------------------------------------------------- samples


def _parts(sample) -> tuple[str, Mapping[str, str], float] | None:
    try:
        name, labels, value = sample[0], sample[1], sample[2]
    except (TypeError, IndexError, KeyError):
        return None
    if not isinstance(name, str) or not isinstance(labels, Mapping):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return name, labels, number


def _matches(labels: Mapping[str, str], labels_filter: LabelsFilter) -> bool:
    if labels_filter is None:
        return True
    if callable(labels_filter):
        return bool(labels_filter(labels))
    return all(labels.get(k) == v for k, v in labels_filter.items())


def _le(text: object) -> float | None:
    try:
        value = float(str(text).strip())  # "+Inf", "0.5", "1e3"
    except ValueError:
        return None
    return None if math.isnan(value) else value


def histogram_from_samples(
    samples: Iterable[Sample], name: str, labels_filter: LabelsFilter = None
) -> HistogramSnapshot | None:
    """The histogram `name` (without _bucket/_sum/_count), summed over the label
    sets that pass labels_filter (a mapping of required label values, or a
    predicate). `*_created` samples are ignored. None if no bucket was found."""
    name = name.removesuffix("_bucket")
    bucket_name, sum_name, count_name = name + "_bucket", name + "_sum", name + "_count"
    buckets: dict[float, float] = {}
    total_sum = 0.0
    total_count = 0.0
    saw_count = False
    for sample in samples:
        parts = _parts(sample)
        if parts is None:
            continue
        sample_name, labels, value = parts
        if sample_name not in (bucket_name, sum_name, count_name):
            continue
        if sample_name == bucket_name:
            le = _le(labels.get("le"))
            if le is None:
                continue
            rest = {k: v for k, v in labels.items() if k != "le"}
            if not _matches(rest, labels_filter):
                continue
            buckets[le] = buckets.get(le, 0.0) + value
        elif _matches(labels, labels_filter):
            if sample_name == sum_name:
                total_sum += value
            else:
                total_count += value
                saw_count = True
    if not buckets:
        return None
    ordered = tuple(sorted(buckets.items()))
    if not saw_count:
        total_count = ordered[-1][1] if math.isinf(ordered[-1][0]) else 0.0
    return HistogramSnapshot(ordered, total_sum, total_count)


def first_histogram(
    samples: Iterable[Sample], names: Sequence[str], labels_filter: LabelsFilter = None
) -> tuple[str, HistogramSnapshot] | None:
    """The first of names (e.g. ITL) that the scrape has, with its histogram."""
    samples = list(samples)
    for name in names:
        found = histogram_from_samples(samples, name, labels_filter)
        if found is not None:
            return name, found
    return None


def _values(samples: Iterable[Sample], name: str, labels_filter: LabelsFilter) -> list[float]:
    out = []
    for sample in samples:
        parts = _parts(sample)
        if parts and parts[0] == name and _matches(parts[1], labels_filter):
            out.append(parts[2])
    return out


def gauge_value(
    samples: Iterable[Sample],
    names: Sequence[str] | str,
    labels_filter: LabelsFilter = None,
    agg: str = "sum",
) -> float | None:
    """A gauge over label sets: agg "sum" (requests running), "max" or "mean"
    (KV-cache use of several engines). names: a name or fallbacks in order."""
    samples = list(samples)
    for name in (names,) if isinstance(names, str) else names:
        values = _values(samples, name, labels_filter)
        if values:
            if agg == "max":
                return max(values)
            if agg == "mean":
                return sum(values) / len(values)
            return sum(values)
    return None


def counter_value(
    samples: Iterable[Sample], names: Sequence[str] | str, labels_filter: LabelsFilter = None
) -> float | None:
    """A counter summed over label sets; `x` and `x_total` both accepted, `x_created` never."""
    samples = list(samples)
    for name in (names,) if isinstance(names, str) else names:
        if name.endswith("_created"):
            continue
        candidates = [name] if name.endswith("_total") else [name + "_total", name]
        for candidate in candidates:
            values = _values(samples, candidate, labels_filter)
            if values:
                return sum(values)
    return None


# ---------------------------------------------------------------- math


def delta(newer: HistogramSnapshot, older: HistogramSnapshot | None) -> HistogramSnapshot:
    """newer - older, bucket by bucket. A counter reset (any count went down) or
    changed bucket bounds mean the server restarted: newer is the delta then."""
    if older is None or newer.bounds() != older.bounds():
        return newer
    if newer.count < older.count or any(n < o for (_, n), (_, o) in zip(newer.buckets, older.buckets)):
        return newer
    buckets = tuple((le, n - o) for (le, n), (_, o) in zip(newer.buckets, older.buckets))
    return HistogramSnapshot(buckets, newer.sum - older.sum, newer.count - older.count)


def quantile(hist: HistogramSnapshot | None, q: float) -> float | None:
    """The q-quantile (0 <= q <= 1) like PromQL histogram_quantile: linear inside
    the bucket that holds the rank (the lowest bucket starts at 0 when its bound
    is positive); in the +Inf bucket, the highest finite bound. None without
    observations or without any finite bucket."""
    if not 0.0 <= q <= 1.0 or math.isnan(q):
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    if hist is None or not hist.buckets:
        return None
    bounds = [le for le, _ in hist.buckets]
    counts: list[float] = []
    running = 0.0
    for _, count in hist.buckets:  # make it monotonic (scrape races, float noise)
        running = max(running, count)
        counts.append(running)
    total = counts[-1] if math.isinf(bounds[-1]) else max(counts[-1], hist.count)
    if total <= 0:
        return None
    finite = [b for b in bounds if not math.isinf(b)]
    if not finite:
        return None
    rank = q * total
    index = next((i for i, c in enumerate(counts) if c >= rank and c > 0), len(counts))
    if index >= len(counts) or math.isinf(bounds[index]):
        return max(finite)  # beyond the last finite bound
    upper = bounds[index]
    if index == 0:
        lower, below = (0.0 if upper > 0 else upper), 0.0
    else:
        lower, below = bounds[index - 1], counts[index - 1]
    if math.isinf(lower):  # a -Inf bucket bound
        return upper
    in_bucket = counts[index] - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * ((rank - below) / in_bucket)


def rate(counter_now: float | None, counter_before: float | None, dt: float) -> float | None:
    """Per-second increase of a counter (e.g. vllm:generation_tokens_total ->
    tokens/s). A decrease is a reset: the new value counts from zero."""
    if counter_now is None or counter_before is None or not dt or dt <= 0 or math.isnan(dt):
        return None
    increase = counter_now - counter_before
    if increase < 0:
        increase = counter_now
    return increase / dt


# ---------------------------------------------------------------- window


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Percentiles (seconds, like the histograms) over the last window."""

    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None
    count: float  # observations in the window
    span_s: float  # time between the two snapshots compared


class WindowedPercentiles:
    """Snapshots of one histogram over time -> p50/p90/p99 of the last `window_s`.

    `add(ts, snapshot)` each scrape; `stats()` compares the newest snapshot with
    the newest one at least window_s older (or the oldest kept), so the result
    covers the observations made during about the window. A timestamp going
    backwards or a counter reset starts over from the new snapshot. At most
    `max_snapshots` are kept.
    """

    def __init__(self, window_s: float = 30.0, max_snapshots: int = 4096) -> None:
        if not window_s > 0:
            raise ValueError(f"window must be > 0 seconds, got {window_s}")
        self.window_s = float(window_s)
        self._snaps: deque[tuple[float, HistogramSnapshot]] = deque(maxlen=max(2, int(max_snapshots)))

    def __len__(self) -> int:
        return len(self._snaps)

    def clear(self) -> None:
        self._snaps.clear()

    def add(self, ts: float, snapshot: HistogramSnapshot | None) -> None:
        if snapshot is None:
            return
        if self._snaps:
            last_ts, last = self._snaps[-1]
            if ts < last_ts or delta(snapshot, last) is snapshot:
                self._snaps.clear()  # clock went back, or the server restarted
        self._snaps.append((ts, snapshot))
        # drop what is older than needed: keep one snapshot at/before the window start
        start = ts - self.window_s
        while len(self._snaps) >= 2 and self._snaps[1][0] <= start:
            self._snaps.popleft()

    def window_delta(self) -> tuple[HistogramSnapshot, float] | None:
        """(newest - baseline, seconds between them), or None with fewer than two snapshots."""
        if len(self._snaps) < 2:
            return None
        newest_ts, newest = self._snaps[-1]
        base_ts, base = self._snaps[0]
        return delta(newest, base), newest_ts - base_ts

    def quantile(self, q: float) -> float | None:
        found = self.window_delta()
        return quantile(found[0], q) if found else None

    def stats(self) -> WindowStats:
        found = self.window_delta()
        if found is None:
            return WindowStats(None, None, None, None, 0.0, 0.0)
        hist, span = found
        return WindowStats(
            p50=quantile(hist, 0.5),
            p90=quantile(hist, 0.9),
            p99=quantile(hist, 0.99),
            mean=hist.mean,
            count=hist.count,
            span_s=span,
        )
