"""What the outside clients' parsers share: vLLM's result shape, built from a client's figures.

Every client's result becomes the object `vllm bench serve --save-result` writes (the keys
console.core.bench.result normalises): the summary (completed, failed, duration, token totals,
throughputs), `<stat>_<metric>_ms` for ttft, tpot, itl and e2el, and per-request arrays in
vLLM's units (seconds) where the client gives them, so goodput, the client check, compare and
baselines read a GuideLLM or AIPerf run exactly as a vLLM one. `client` and `client_version`
say who measured it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["STAT_NAMES", "num", "put_stats", "throughputs"]

# A client's percentile name -> vLLM's stat prefix (p99.9 as vLLM writes it).
STAT_NAMES = {
    "mean": "mean",
    "avg": "mean",
    "median": "median",
    "std_dev": "std",
    "std": "std",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}


def num(value: object) -> float | None:
    """A finite number, else None (bools, strings, NaN are no figure)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def put_stats(out: dict, metric: str, stats: object, scale: float = 1.0) -> None:
    """`<stat>_<metric>_ms` keys from a client's {mean/avg, median, std, pNN} mapping (scale: to ms)."""
    if not isinstance(stats, Mapping):
        return
    flat = dict(stats)
    pct = stats.get("percentiles")
    if isinstance(pct, Mapping):
        flat.update(pct)
    for key, name in STAT_NAMES.items():
        value = num(flat.get(key))
        if value is not None:
            out[f"{name}_{metric}_ms"] = value * scale
    if "median" not in flat and "p50" in flat and num(flat["p50"]) is not None:
        out[f"median_{metric}_ms"] = float(flat["p50"]) * scale


def throughputs(out: dict) -> None:
    """vLLM's definitions (completed / duration, tokens / duration) from the counts and duration,
    so every client's throughput is the same quantity; the client's own figures stay beside them."""
    duration = num(out.get("duration"))
    if not duration or duration <= 0:
        return
    if num(out.get("completed")) is not None:
        out["request_throughput"] = out["completed"] / duration
    tin, tout = num(out.get("total_input_tokens")), num(out.get("total_output_tokens"))
    if tout is not None:
        out["output_throughput"] = tout / duration
    if tin is not None and tout is not None:
        out["total_token_throughput"] = (tin + tout) / duration
