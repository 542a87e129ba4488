"""Poll an instance's /metrics and turn histogram deltas into windowed percentiles.

Parsing is prometheus_client's; the bucket math is console.core.bench.histograms.
Bucket bounds come from the scrape, never from a table.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable

from console.core.bench import histograms as H
from console.core.bench.prefix_cache import prefix_cache_window
from console.services.http_body import BodyTooLarge, read_capped


@dataclass(frozen=True, slots=True)
class LiveSample:
    """One scrape, summarised. Latencies in milliseconds; None when not (yet) known."""

    ts: float
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None
    e2e_p50: float | None
    e2e_p99: float | None
    queue_p50: float | None
    queue_p99: float | None
    output_tok_s: float | None
    running: float | None
    waiting: float | None
    kv_cache_pct: float | None
    itl_metric: str | None  # which name the server had (version fallback)
    # Issue B2: prompt tokens served from the prefix cache since the first scrape of the run, in %
    prefix_hit_pct: float | None = None


def scrape_samples(text: str) -> list[tuple[str, dict, float]]:
    # Imported on first use: building the CLI or opening the fleet never needs it.
    from prometheus_client.parser import text_string_to_metric_families

    samples = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.append((s.name, dict(s.labels), float(s.value)))
    return samples


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


class LiveMetrics:
    """Feed scrapes in; read LiveSample out. Bounded: windows keep at most a few thousand snapshots."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.ttft = H.WindowedPercentiles(window_s)
        self.itl = H.WindowedPercentiles(window_s)
        self.e2e = H.WindowedPercentiles(window_s)
        self.queue = H.WindowedPercentiles(window_s)
        self._tokens: tuple[float, float] | None = None  # (ts, generation tokens counter)
        self.itl_metric: str | None = None
        self._prefix_base: list | None = None  # the first scrape's prefix-cache counters

    def feed(self, ts: float, text: str) -> LiveSample:
        samples = scrape_samples(text)
        self.ttft.add(ts, H.histogram_from_samples(samples, H.TTFT[0]))
        found = H.first_histogram(samples, H.ITL)
        if found is not None:
            self.itl_metric, hist = found
            self.itl.add(ts, hist)
        self.e2e.add(ts, H.histogram_from_samples(samples, "vllm:e2e_request_latency_seconds"))
        self.queue.add(ts, H.histogram_from_samples(samples, "vllm:request_queue_time_seconds"))
        tokens = H.counter_value(samples, H.GENERATION_TOKENS)
        tok_s = None
        if tokens is not None:
            if self._tokens is not None:
                tok_s = H.rate(tokens, self._tokens[1], ts - self._tokens[0])
            self._tokens = (ts, tokens)
        kv = H.gauge_value(samples, H.KV_CACHE, agg="max")
        counters = [x for x in samples if x[0].startswith(("vllm:prefix_cache_", "vllm:gpu_prefix_cache_"))]
        if self._prefix_base is None:
            self._prefix_base = counters
        window = prefix_cache_window(self._prefix_base, counters)
        t, i, e, q = self.ttft.stats(), self.itl.stats(), self.e2e.stats(), self.queue.stats()
        return LiveSample(
            ts=ts,
            ttft_p50=_ms(t.p50),
            ttft_p90=_ms(t.p90),
            ttft_p99=_ms(t.p99),
            itl_p50=_ms(i.p50),
            itl_p90=_ms(i.p90),
            itl_p99=_ms(i.p99),
            e2e_p50=_ms(e.p50),
            e2e_p99=_ms(e.p99),
            queue_p50=_ms(q.p50),
            queue_p99=_ms(q.p99),
            output_tok_s=tok_s,
            running=H.gauge_value(samples, H.NUM_RUNNING),
            waiting=H.gauge_value(samples, H.NUM_WAITING),
            kv_cache_pct=None if kv is None else kv * 100.0,
            itl_metric=self.itl_metric,
            prefix_hit_pct=window.hit_pct if window is not None else None,
        )


MAX_SCRAPE_BYTES = 16 * 1024 * 1024  # vLLM's /metrics is well under 1 MiB; a larger answer is not its


async def _read_capped(client, url: str) -> str | None:
    """The body of a 200 answer, or None: another status, or a body over MAX_SCRAPE_BYTES, which
    is dropped as it streams in (never held whole), so a hostile or broken server costs a skipped
    sample, not the console's memory."""
    async with client.stream("GET", url) as reply:
        if reply.status_code != 200:
            return None
        try:
            body = await read_capped(reply, MAX_SCRAPE_BYTES)
        except BodyTooLarge:
            return None
    return body.decode("utf-8", errors="replace")


async def poll_metrics(
    base_url: str,
    on_sample: Callable[[LiveSample], None],
    *,
    interval: float = 1.0,
    window_s: float = 10.0,
    stop: asyncio.Event,
    clock: Callable[[], float] = time.time,
    timeout: float = 3.0,
) -> LiveMetrics:
    """Scrape every interval until stop is set. A failed scrape is skipped, not fatal."""
    import httpx  # on first use, like prometheus_client above

    live = LiveMetrics(window_s)
    async with httpx.AsyncClient(timeout=timeout) as client:
        while not stop.is_set():
            started = clock()
            try:
                text = await _read_capped(client, base_url + "/metrics")
                if text is not None:
                    on_sample(live.feed(clock(), text))
            except (httpx.HTTPError, ValueError):
                pass
            try:
                await asyncio.wait_for(stop.wait(), max(0.05, interval - (clock() - started)))
            except asyncio.TimeoutError:
                pass
    return live


async def scrape_once(base_url: str, *, timeout: float = 10.0) -> str | None:
    """One /metrics body (the client check's scrapes just before and after a run); None when
    the server did not answer 200 within the timeout or its body was over the cap."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            return await _read_capped(client, base_url + "/metrics")
    except (httpx.HTTPError, ValueError, OSError):
        return None


async def reset_prefix_cache(base_url: str, *, timeout: float = 30.0) -> tuple[bool, str]:
    """POST /reset_prefix_cache (vLLM's dev endpoint): (done, what the server said). vLLM serves
    it only with VLLM_SERVER_DEV_MODE=1 (404 otherwise), and answers {"success": false} while
    requests still hold cache blocks."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            reply = await client.post(base_url + "/reset_prefix_cache")
    except (httpx.HTTPError, OSError) as exc:
        return False, f"POST /reset_prefix_cache failed ({type(exc).__name__})"
    if reply.status_code == 404:
        return False, "the server has no /reset_prefix_cache (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)"
    if reply.status_code != 200:
        return False, f"POST /reset_prefix_cache answered HTTP {reply.status_code}"
    try:
        success = reply.json().get("success", True) if reply.content else True
    except (ValueError, AttributeError):
        success = True  # older servers answer 200 with no body
    if success is False:
        return False, "the server refused the reset (requests still hold cache blocks)"
    return True, "the server emptied its prefix cache"
