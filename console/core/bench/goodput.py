"""Goodput against an SLO: the share of a run's requests within every limit, from per-request data.

One rule for every client, vLLM's (benchmarks/serve.py, DistServe's goodput): a request is good
when it completed and its TTFT, its TPOT ((latency - TTFT) / (output tokens - 1), 0 for a
single token) and its end-to-end latency are each within their limit. The console adds an ITL
limit vLLM has not: every gap between two of the request's tokens within it (a stall-free
stream; the mean gap is TPOT). Failed requests are never good. goodput_pct is over all the
run's requests; good_rps is the good ones over the run's duration, vLLM's request_goodput.
Where a result has no per-request figures, vLLM's own request_goodput (its --goodput) is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.core.bench.result import BenchResult

__all__ = [
    "SLO_KEYS",
    "Goodput",
    "Slo",
    "combined_goodput",
    "goodput_json",
    "goodput_of",
    "slo_of",
]

SLO_KEYS = ("slo_ttft_ms", "slo_tpot_ms", "slo_itl_ms", "slo_e2e_ms")


@dataclass(frozen=True, slots=True)
class Slo:
    """Limits in milliseconds; None: no limit on that figure."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    def limits(self) -> dict[str, float]:
        pairs = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("itl", self.itl_ms), ("e2el", self.e2e_ms))
        return {k: float(v) for k, v in pairs if v is not None}

    def vllm_goodput(self) -> list[str]:
        """`vllm bench serve --goodput` values (vLLM knows ttft, tpot and e2el, not itl)."""
        return [f"{k}:{_num(v)}" for k, v in self.limits().items() if k != "itl"]

    def text(self) -> str:
        """'TTFT ≤ 200 ms, TPOT ≤ 50 ms' for people."""
        names = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E"}
        return ", ".join(f"{names[k]} ≤ {_num(v)} ms" for k, v in self.limits().items())


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def slo_of(preset: object) -> Slo | None:
    """A bench preset's SLO (its slo_*_ms keys); None when it sets none."""
    values = {k: getattr(preset, k, None) for k in SLO_KEYS}
    if all(v is None for v in values.values()):
        return None
    return Slo(
        ttft_ms=values["slo_ttft_ms"],
        tpot_ms=values["slo_tpot_ms"],
        itl_ms=values["slo_itl_ms"],
        e2e_ms=values["slo_e2e_ms"],
    )


@dataclass(frozen=True, slots=True)
class Goodput:
    good: int | None  # requests within every limit (None: only vLLM's rate was known)
    total: int  # the run's requests, failed ones included
    goodput_pct: float | None
    good_rps: float | None
    source: str  # "per-request": counted here; "client": the client's request_goodput


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _at(items: Sequence | None, i: int) -> object:
    return items[i] if items is not None and i < len(items) else None


def _is_good(
    limits: Mapping[str, float], ttft: float, latency: float, out_len: int, gaps: Sequence[float] | None
) -> bool | None:
    """One completed request against the limits (seconds in, ms limits); None when a figure a
    limit needs is missing."""
    figures: dict[str, float | None] = {
        "ttft": ttft,
        "e2el": latency,
        "tpot": (latency - ttft) / (out_len - 1) if out_len > 1 else 0.0,
        "itl": max(gaps) if gaps else (0.0 if gaps is not None else None),
    }
    for key, limit in limits.items():
        value = figures[key]
        if value is None:
            return None
        if value * 1000.0 > limit:
            return False
    return True


def _per_request(result: BenchResult, limits: Mapping[str, float]) -> tuple[int, int] | None:
    """(good, total) from the result's per-request arrays; None when they do not carry what the
    limits need (a result saved without --save-detailed has latencies but no ttfts)."""
    arrays = result.arrays
    latencies = arrays.get("latencies")
    ttfts = arrays.get("ttfts")
    if not latencies:
        return None
    if ttfts is None or len(ttfts) != len(latencies):
        if "ttft" in limits or "tpot" in limits:
            return None
        ttfts = [0.0] * len(latencies)  # an E2E/ITL-only SLO needs no first-token times
    errors, out_lens, itls = arrays.get("errors"), arrays.get("output_lens"), arrays.get("itls")
    if "itl" in limits and itls is None:
        return None
    good = 0
    for i, raw_latency in enumerate(latencies):
        error = _at(errors, i)
        ttft, latency = _finite(ttfts[i]), _finite(raw_latency)
        if error or ttft is None or latency is None or latency <= 0:
            continue  # failed: never good
        gaps_raw = _at(itls, i)
        gaps = [g for g in (_finite(x) for x in gaps_raw) if g is not None] if isinstance(gaps_raw, list) else None
        out = _finite(_at(out_lens, i))
        out_len = int(out) if out is not None else (len(gaps) + 1 if gaps is not None else 0)
        if out_len == 0 and "tpot" in limits:
            return None  # nothing to count TPOT from
        verdict = _is_good(limits, ttft, latency, out_len, gaps)
        if verdict is None:
            return None
        good += int(verdict)
    return good, len(latencies)


def goodput_of(result: BenchResult | None, slo: Slo | None) -> Goodput | None:
    """The run's goodput against the SLO; None without an SLO, a result, or figures to judge by."""
    if result is None or slo is None or not slo.limits():
        return None
    limits = slo.limits()
    total_known = (result.completed or 0) + (result.failed or 0)
    counted = _per_request(result, limits)
    duration = result.duration if result.duration and result.duration > 0 else None
    if counted is not None:
        good, total = counted
        return Goodput(
            good=good,
            total=total,
            goodput_pct=100.0 * good / total if total else None,
            good_rps=good / duration if duration else None,
            source="per-request",
        )
    rate = result.request_goodput
    if rate is None or "itl" in limits or not total_known:
        return None
    pct = 100.0 * rate * duration / total_known if duration else None
    return Goodput(
        good=None,
        total=total_known,
        goodput_pct=min(100.0, pct) if pct is not None else None,
        good_rps=rate,
        source="client",
    )


def combined_goodput(parts: Sequence[Goodput | None], duration: float | None) -> Goodput | None:
    """A replica group's goodput from its clients' (each counted from its own per-request data):
    good requests and requests add up, good_rps is over the longest client's duration. None
    when any client's is unknown or only a rate (the group's share must count every request)."""
    if not parts or any(p is None or p.good is None for p in parts):
        return None
    known = [p for p in parts if p is not None]
    good = sum(p.good or 0 for p in known)
    total = sum(p.total for p in known)
    return Goodput(
        good=good,
        total=total,
        goodput_pct=100.0 * good / total if total else None,
        good_rps=good / duration if duration and duration > 0 else None,
        source="per-request",
    )


def goodput_json(slo: Slo | None, goodput: Goodput | None) -> dict | None:
    """What a stored run keeps (StoredRun.goodput): the SLO and what met it; None without an SLO."""
    if slo is None:
        return None
    return {
        "slo": {f"{k}_ms": v for k, v in slo.limits().items()},
        "goodput_pct": goodput.goodput_pct if goodput is not None else None,
        "good_rps": goodput.good_rps if goodput is not None else None,
        "good": goodput.good if goodput is not None else None,
        "total": goodput.total if goodput is not None else None,
        "source": goodput.source if goodput is not None else None,
    }
