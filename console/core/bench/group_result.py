"""One benchmark result for a replica group, from every replica's client result.

Each replica is driven by its own `vllm bench serve --save-detailed`; its JSON
holds the per-request data (`ttfts`, `itls`, `latencies`, `output_lens`,
`errors`). The group's latency percentiles are computed again over the union
of every client's requests, the way vLLM computes them for one client
(vllm/benchmarks/serve.py calculate_metrics: successful requests only;
TPOT = (latency - TTFT) / (output_len - 1) when output_len > 1; ITL = every
inter-token gap; percentiles with linear interpolation like numpy). Averaging
the replicas' percentiles would be wrong (a p99 of p99s is no p99), so a replica
without per-request data is refused. Throughputs and counts add up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from console.core.bench.result import BenchResult, normalize_result

__all__ = [
    "GroupResult",
    "GroupResultError",
    "LatencyStats",
    "ReplicaResult",
    "merge_results",
    "percentile",
]

METRICS = ("ttft", "tpot", "itl", "e2el")
ALWAYS_PERCENTILES = (50.0, 90.0, 99.0)
_SUMMED = (
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
)


class GroupResultError(ValueError):
    """A replica's result cannot be merged: one line naming the replica."""


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """numpy.percentile's default (linear) on already sorted values."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    pos = (n - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """One latency metric over all requests, in ms (as vLLM prints them)."""

    count: int
    mean: float
    median: float
    std: float
    percentiles: Mapping[float, float] = field(default_factory=dict)

    @classmethod
    def of(cls, seconds: Sequence[float], percentiles: Sequence[float]) -> LatencyStats | None:
        if not seconds:
            return None
        xs = sorted(float(x) for x in seconds)
        n = len(xs)
        mean = math.fsum(xs) / n
        var = math.fsum((x - mean) ** 2 for x in xs) / n  # population std, like np.std
        return cls(
            count=n,
            mean=mean * 1000,
            median=percentile(xs, 50) * 1000,
            std=math.sqrt(var) * 1000,
            percentiles={p: percentile(xs, p) * 1000 for p in percentiles},
        )


@dataclass(frozen=True, slots=True)
class ReplicaResult:
    name: str  # the replica (instance) name, or the client's label
    node: str
    result: BenchResult


@dataclass(frozen=True, slots=True)
class GroupResult:
    group: str
    replicas: tuple[ReplicaResult, ...]
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    duration: float | None  # the longest client's
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    latency: Mapping[str, LatencyStats] = field(default_factory=dict)

    def stat(self, metric: str, stat: str = "median") -> float | None:
        """stat("ttft", "p99") -> ms; None when the metric was not measured."""
        s = self.latency.get(metric)
        if s is None:
            return None
        if stat in ("mean", "median", "std"):
            return float(getattr(s, stat))
        if stat.startswith("p"):
            return s.percentiles.get(float(stat[1:]))
        raise KeyError(stat)

    def as_result_json(self) -> dict:
        """The group as one vLLM-style result object (keys as `--save-result` writes them)."""
        first = self.replicas[0].result if self.replicas else None
        out: dict[str, object] = {
            "date": first.date if first else None,
            "backend": first.backend if first else None,
            "model_id": first.model_id if first else None,
            "tokenizer_id": first.tokenizer_id if first else None,
            "num_prompts": sum(r.result.num_prompts or 0 for r in self.replicas),
            "request_rate": _sum_rate(self.replicas),
            "max_concurrency": _sum_opt([r.result.max_concurrency for r in self.replicas]),
            "duration": self.duration,
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
            "group": self.group,
            "replicas": len(self.replicas),
        }
        for metric, s in self.latency.items():
            out[f"mean_{metric}_ms"] = s.mean
            out[f"median_{metric}_ms"] = s.median
            out[f"std_{metric}_ms"] = s.std
            for p, v in s.percentiles.items():
                out[f"p{_pct(p)}_{metric}_ms"] = v
        return out


def _pct(p: float) -> str:
    return str(int(p)) if float(p).is_integer() else str(p)


def _sum_opt(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _sum_rate(replicas: Sequence[ReplicaResult]) -> float | str | None:
    rates = [r.result.request_rate for r in replicas]
    if any(r is None for r in rates):
        return None
    if any(math.isinf(r) for r in rates if r is not None):
        return "inf"
    return math.fsum(r for r in rates if r is not None)


def _asked_percentiles(results: Sequence[BenchResult]) -> tuple[float, ...]:
    asked = set(ALWAYS_PERCENTILES)
    for r in results:
        for key in r.metrics:
            if key.startswith("p") and key.endswith("_ms"):
                head = key[1:].split("_", 1)[0]
                try:
                    asked.add(float(head))
                except ValueError:
                    continue
    return tuple(sorted(asked))


def _requests(name: str, r: BenchResult) -> dict[str, list[float]]:
    """The successful requests' samples of one client, per metric (seconds)."""
    a = r.arrays
    if "ttfts" not in a or "itls" not in a:
        raise GroupResultError(
            f"replica {name}: its result has no per-request data (ttfts, itls): run the client with --save-detailed"
        )
    ttfts, itls = a["ttfts"], a["itls"]
    n = len(ttfts)
    latencies = a.get("latencies")
    output_lens = a.get("output_lens")
    errors = a.get("errors")
    for key, arr in (("itls", itls), ("latencies", latencies), ("output_lens", output_lens), ("errors", errors)):
        if arr is not None and len(arr) != n:
            raise GroupResultError(f"replica {name}: {key} has {len(arr)} entries, ttfts {n}")
    if errors is not None:
        ok = [not e for e in errors]
    elif output_lens is not None:
        ok = [bool(x) for x in output_lens]
    else:
        ok = [True] * n
    if r.completed is not None and sum(ok) != r.completed:
        raise GroupResultError(
            f"replica {name}: {sum(ok)} successful requests in its per-request data, completed says {r.completed}"
        )
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for i in range(n):
        if not ok[i]:
            continue
        ttft = float(ttfts[i])
        out["ttft"].append(ttft)
        out["itl"].extend(float(x) for x in (itls[i] or ()))
        if latencies is not None:
            latency = float(latencies[i])
            out["e2el"].append(latency)
            if output_lens is not None and int(output_lens[i]) > 1:
                out["tpot"].append((latency - ttft) / (int(output_lens[i]) - 1))
    return out


def merge_results(
    group: str,
    replicas: Sequence[tuple[str, str, Mapping[str, object] | BenchResult]],
    *,
    percentiles: Sequence[float] | None = None,
) -> GroupResult:
    """replicas: (name, node, the client's result JSON or BenchResult) each -> the group's result."""
    if not replicas:
        raise GroupResultError(f"group {group}: no replica result to merge")
    parsed: list[ReplicaResult] = []
    for name, node, res in replicas:
        try:
            result = res if isinstance(res, BenchResult) else normalize_result(res)
        except ValueError as exc:
            raise GroupResultError(f"replica {name}: {exc}") from None
        parsed.append(ReplicaResult(name, node, result))
    samples: dict[str, list[float]] = {m: [] for m in METRICS}
    for rep in parsed:
        for metric, values in _requests(rep.name, rep.result).items():
            samples[metric].extend(values)
    asked = tuple(percentiles) if percentiles is not None else _asked_percentiles([p.result for p in parsed])
    latency = {}
    for metric in METRICS:
        stats = LatencyStats.of(samples[metric], asked)
        if stats is not None:
            latency[metric] = stats
    sums: dict[str, float] = {}
    for key in _SUMMED:
        sums[key] = math.fsum(float(getattr(p.result, key) or 0) for p in parsed)
    durations = [p.result.duration for p in parsed if p.result.duration is not None]
    return GroupResult(
        group=group,
        replicas=tuple(parsed),
        completed=int(sums["completed"]),
        failed=int(sums["failed"]),
        total_input_tokens=int(sums["total_input_tokens"]),
        total_output_tokens=int(sums["total_output_tokens"]),
        duration=max(durations) if durations else None,
        request_throughput=sums["request_throughput"],
        output_throughput=sums["output_throughput"],
        total_token_throughput=sums["total_token_throughput"],
        latency=latency,
    )
