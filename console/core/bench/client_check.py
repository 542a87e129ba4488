"""Was the benchmark client the bottleneck? Both sides of a serving run, compared.

A serving run has two accounts of the same requests: the client's (``vllm bench
serve``'s result JSON: per-request TTFT, ITL, TPOT, end-to-end latency, the
completed count, the rate asked and achieved, output throughput) and the server's
own ``/metrics`` histograms and counters, scraped just before and just after the
run (``server_window``: the delta of ``vllm:time_to_first_token_seconds``,
``vllm:inter_token_latency_seconds`` / ``vllm:time_per_output_token_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:request_queue_time_seconds``,
``vllm:request_time_per_output_token_seconds``,
``vllm:request_success_total``, ``vllm:generation_tokens_total``; the histogram
math is ``console.core.bench.histograms``).  ``check`` puts them side by side and
decides ``client_bound``:

**Not judged (None)** when the server side is missing (no TTFT and no E2E
histogram in the scrapes) or the two sides did not see the same requests: the
server finished more than ``extra_requests`` (the client's own test or warm-up
requests, by default at most 1) plus 1 % requests more than the client
completed, or fewer than it completed less 1 %.  Another client on the same
server, or scrapes that do not bracket the run, make any comparison meaningless.

**Client-bound (True)** when either holds:

1. *Latency*: the client's **mean** TTFT or mean end-to-end latency exceeds the
   server's mean of the same requests by more than ``max(50 % of the server's
   mean, 50 ms)``.  Means, because the server's histogram gives its mean exactly
   (sum / count) while its percentiles are interpolated inside buckets that are
   20-150 ms wide around typical TTFTs and 0.2-0.5 s wide around typical
   end-to-end times; both sides' percentiles are shown, with the width of the
   server bucket the p99 falls in, but do not decide.  The margin: in real
   vLLM-CPU runs on this project's build host a client alone on its CPU measured
   TTFT 10-11 ms (25-32 %) and E2E 10-11 ms (2-3 %) above the server, and one
   sharing its CPU with two busy loops (a run not kept) 29 ms (26 %) and 30 ms (2 %): HTTP, and
   the API server's work before it stamps a request's arrival (prompt rendering
   and tokenization, which grows with long prompts).  A client held to 2 % of a
   CPU (``tests/fixtures/vllm-0.32-cpu/client-check``) measured TTFT 380 ms
   against the server's 33 ms and E2E 729 against 403 ms.  50 % and 50 ms sit
   well above the first and well below the second.
2. *Rate*: a finite rate was asked, the rate the client actually sent at fell
   short of it by more than ``max(10 %, 3 / sqrt(burstiness × completed))`` (the
   arrival schedule is a Poisson / gamma process whose total time has a
   coefficient of variation of ``1 / sqrt(burstiness × n)``: three of those), and
   the server was not queueing (its mean queue time at most 10 % of its mean
   end-to-end latency), so the server was not what held the rate back.  The rate
   sent is estimated as ``completed / (duration − mean E2E)``: the client's
   duration ends with the last request's completion, about one mean latency
   after it was sent.

ITL and TPOT are shown, not judged: a client that is late to read every token by
the same delay leaves the gaps between tokens as the server made them; what it
adds shows in TTFT and end-to-end latency.

**Not client-bound (False)** otherwise.  The time a client adds sits outside the
engine: in the client, the network, or the server's HTTP front end before it
stamps the request (a front end saturated by tokenization looks the same from
here; ``reasons`` says what differed, not who).

Known client pitfalls (``recognise_pitfalls``), one line each, from the client's
log (and, for the long-context one, the result and the check):

- aiohttp's ``ValueError: Chunk too big`` (aiohttp's ``StreamReader.readuntil``
  when one streamed line exceeds its buffer; aiohttp 3.14 raises ``LineTooLong``:
  "Got more than N bytes when reading") in a client that reads the stream line by
  line (vLLM's client before PR #24373; sglang, TensorRT-LLM and FastDeploy's
  benchmark clients hit it too);
- ``Never received a valid chunk to calculate TTFT.``: vLLM's client got a stream
  without a token;
- the long-context read-buffer collapse of vllm-project/vllm#39963: at 50 000+
  input tokens per request and high concurrency, ``vllm bench serve``'s aiohttp
  session with the default 64 KiB read buffer throttles the client (the issue
  shows TTFT 134 s against 1.3 s and a tenth of the throughput at 50K, none of it
  at 32K); no message is printed, so it is recognised by the mean input length
  together with a client-bound check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from console.core.bench import histograms as h
from console.core.bench.output_parser import parse_result_blocks
from console.core.bench.progress import strip_ansi
from console.core.bench.result import BenchResult

__all__ = [
    "ABS_EXCESS_MS",
    "LONG_CONTEXT_TOKENS",
    "REL_EXCESS",
    "ClientCheck",
    "Figure",
    "Pitfall",
    "RateFigure",
    "ServerWindow",
    "check",
    "recognise_pitfalls",
    "server_window",
]

REL_EXCESS = 0.5  # the client's mean may exceed the server's by 50 % ...
ABS_EXCESS_MS = 50.0  # ... or 50 ms, whichever is larger
RATE_FLOOR = 0.10  # a rate shortfall below 10 % is never judged
QUEUE_SHARE_MAX = 0.10  # a server whose mean queue time is under 10 % of its E2E is not queueing
COUNT_SLACK = 0.01  # requests the two sides may differ by, besides the client's extra ones
LONG_CONTEXT_TOKENS = 50_000  # vllm-project/vllm#39963: collapse from 50K input tokens, none at 32K

Sample = tuple
# The server's per-request mean TPOT (0.11+); the client's TPOT is the same quantity.
TPOT = ("vllm:request_time_per_output_token_seconds",)


# ---------------------------------------------------------------- the server's side


@dataclass(frozen=True)
class ServerWindow:
    """The server's own figures over the run: deltas between two scrapes."""

    ttft: h.HistogramSnapshot | None
    itl: h.HistogramSnapshot | None
    e2e: h.HistogramSnapshot | None
    queue: h.HistogramSnapshot | None
    requests: float | None  # vllm:request_success_total, every finished reason
    generation_tokens: float | None
    tpot: h.HistogramSnapshot | None = None  # one mean TPOT per finished request (0.11+)
    itl_name: str | None = None  # which ITL family the server has
    seconds: float | None = None  # between the scrapes


def _hist(
    before: list[Sample] | None, after: list[Sample], names: Sequence[str], labels: h.LabelsFilter
) -> tuple[str | None, h.HistogramSnapshot | None]:
    found = h.first_histogram(after, names, labels)
    if found is None:
        return None, None
    name, newer = found
    older = h.histogram_from_samples(before, name, labels) if before is not None else None
    return name, h.delta(newer, older)


def _counter(
    before: list[Sample] | None, after: list[Sample], names: Sequence[str], labels: h.LabelsFilter
) -> float | None:
    now = h.counter_value(after, names, labels)
    if now is None:
        return None
    then = h.counter_value(before, names, labels) if before is not None else 0.0
    if then is None:
        then = 0.0
    return now - then if now >= then else now  # a counter that went down: the server restarted


def server_window(
    before: Iterable[Sample] | None,
    after: Iterable[Sample],
    *,
    seconds: float | None = None,
    labels_filter: h.LabelsFilter = None,
) -> ServerWindow:
    """The server's side of a run from its parsed scrapes (``before`` None: counted from the server's start)."""
    b = list(before) if before is not None else None
    a = list(after)
    itl_name, itl = _hist(b, a, h.ITL, labels_filter)
    return ServerWindow(
        ttft=_hist(b, a, h.TTFT, labels_filter)[1],
        itl=itl,
        e2e=_hist(b, a, h.E2E, labels_filter)[1],
        queue=_hist(b, a, ("vllm:request_queue_time_seconds",), labels_filter)[1],
        tpot=_hist(b, a, TPOT, labels_filter)[1],
        requests=_counter(b, a, h.REQUEST_SUCCESS, labels_filter),
        generation_tokens=_counter(b, a, h.GENERATION_TOKENS, labels_filter),
        itl_name=itl_name,
        seconds=seconds,
    )


# ---------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class Figure:
    """One latency, both sides (ms). ``over``: the client exceeded the server beyond ``allowed_ms``;
    None where not judged (ITL, TPOT, or a side missing)."""

    metric: str  # ttft | e2el | itl | tpot
    client_mean_ms: float | None
    server_mean_ms: float | None
    client_p50_ms: float | None
    server_p50_ms: float | None
    client_p99_ms: float | None
    server_p99_ms: float | None
    server_p99_bucket_ms: float | None  # width of the server bucket its p99 lies in: how coarse it is
    excess_ms: float | None  # client mean - server mean
    allowed_ms: float | None
    over: bool | None


@dataclass(frozen=True)
class RateFigure:
    asked: float | None  # req/s; inf = as fast as possible; None = not recorded
    achieved: float | None  # completed / duration
    sent: float | None  # completed / (duration - mean E2E): the rate the client sent at
    allowed_shortfall: float | None  # fraction
    server_queue_share: float | None  # server mean queue time / its mean E2E
    over: bool | None


@dataclass(frozen=True)
class ClientCheck:
    client_bound: bool | None
    reasons: tuple[str, ...]  # one line each: why flagged, or why not judged
    figures: tuple[Figure, ...]
    rate: RateFigure
    client_requests: int | None
    server_requests: float | None
    client_output_tokens: int | None
    server_output_tokens: float | None

    def figure(self, metric: str) -> Figure | None:
        return next((f for f in self.figures if f.metric == metric), None)

    def to_json(self) -> dict[str, Any]:
        """What a stored run keeps (``client_bound`` and the compared figures)."""
        return {
            "client_bound": self.client_bound,
            "reasons": list(self.reasons),
            "requests": {"client": self.client_requests, "server": self.server_requests},
            "output_tokens": {"client": self.client_output_tokens, "server": self.server_output_tokens},
            "latency_ms": {
                f.metric: {
                    "client": {"mean": f.client_mean_ms, "p50": f.client_p50_ms, "p99": f.client_p99_ms},
                    "server": {"mean": f.server_mean_ms, "p50": f.server_p50_ms, "p99": f.server_p99_ms},
                    "server_p99_bucket_ms": f.server_p99_bucket_ms,
                    "excess_ms": f.excess_ms,
                    "allowed_ms": f.allowed_ms,
                    "over": f.over,
                }
                for f in self.figures
            },
            "rate": {
                "asked": None if self.rate.asked is None or math.isinf(self.rate.asked) else self.rate.asked,
                "asked_unlimited": self.rate.asked is not None and math.isinf(self.rate.asked),
                "achieved": self.rate.achieved,
                "sent": self.rate.sent,
                "allowed_shortfall": self.rate.allowed_shortfall,
                "server_queue_share": self.rate.server_queue_share,
                "over": self.rate.over,
            },
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _bucket_width_ms(hist: h.HistogramSnapshot | None, value_s: float | None) -> float | None:
    """Width (ms) of the finite bucket that holds value_s."""
    if hist is None or value_s is None:
        return None
    lower = 0.0
    for le, _ in hist.buckets:
        if math.isinf(le):
            return None
        if value_s <= le:
            return (le - lower) * 1000.0
        lower = le
    return None


def _client_mean(client: BenchResult, metric: str) -> float | None:
    mean = client.latency(metric, "mean")
    if mean is None and metric == "e2el":
        # e2el is not among the default --percentile-metrics; the per-request latencies may be
        lat = client.arrays.get("latencies")
        values = [float(v) for v in lat or () if isinstance(v, (int, float)) and not isinstance(v, bool)]
        mean = 1000.0 * sum(values) / len(values) if values else None
    return mean


def _figure(client: BenchResult, metric: str, hist: h.HistogramSnapshot | None, judged: bool) -> Figure:
    c_mean = _client_mean(client, metric)
    has = hist is not None and hist.count > 0
    s_mean = _ms(hist.mean) if has and hist is not None else None
    s_p99_s = h.quantile(hist, 0.99) if has else None
    excess = allowed = None
    over: bool | None = None
    if c_mean is not None and s_mean is not None:
        excess = c_mean - s_mean
        if judged:
            allowed = max(REL_EXCESS * s_mean, ABS_EXCESS_MS)
            over = excess > allowed
    return Figure(
        metric=metric,
        client_mean_ms=c_mean,
        server_mean_ms=s_mean,
        client_p50_ms=client.latency(metric, "median"),
        server_p50_ms=_ms(h.quantile(hist, 0.5)) if has else None,
        client_p99_ms=client.latency(metric, "p99"),
        server_p99_ms=_ms(s_p99_s),
        server_p99_bucket_ms=_bucket_width_ms(hist, s_p99_s),
        excess_ms=excess,
        allowed_ms=allowed,
        over=over,
    )


def _rate(client: BenchResult, server: ServerWindow, e2e_ms: float | None) -> RateFigure:
    asked = client.request_rate
    n, duration = client.completed, client.duration
    achieved = n / duration if n and duration and duration > 0 else None
    sent = achieved
    if achieved is not None and e2e_ms is not None and duration is not None and duration > e2e_ms / 1000.0:
        sent = (n or 0) / (duration - e2e_ms / 1000.0)
    queue_share = None
    if server.queue is not None and server.e2e is not None and server.queue.mean is not None and server.e2e.mean:
        queue_share = server.queue.mean / server.e2e.mean
    if asked is None or math.isinf(asked) or asked <= 0 or sent is None or not n:
        return RateFigure(asked, achieved, sent, None, queue_share, None)
    burst = client.burstiness if client.burstiness and client.burstiness > 0 else 1.0
    allowed = max(RATE_FLOOR, 3.0 / math.sqrt(burst * n))
    short = sent < asked * (1.0 - allowed)
    if not short:
        over: bool | None = False
    elif queue_share is None:
        over = None  # short, but whether the server queued is unknown
    else:
        over = queue_share <= QUEUE_SHARE_MAX
    return RateFigure(asked, achieved, sent, allowed, queue_share, over)


def check(client: BenchResult, server: ServerWindow, *, extra_requests: int = 1) -> ClientCheck:
    """Compare the client's result with the server's window; ``extra_requests``: requests the client
    sent outside its result (the initial test prompt, ``--num-warmups``), at most."""
    figures = (
        _figure(client, "ttft", server.ttft, judged=True),
        _figure(client, "e2el", server.e2e, judged=True),
        _figure(client, "itl", server.itl, judged=False),
        _figure(client, "tpot", server.tpot, judged=False),
    )
    e2e = figures[1]
    rate = _rate(client, server, e2e.client_mean_ms)

    def verdict(bound: bool | None, *reasons: str) -> ClientCheck:
        return ClientCheck(
            client_bound=bound,
            reasons=reasons,
            figures=figures,
            rate=rate,
            client_requests=client.completed,
            server_requests=server.requests,
            client_output_tokens=client.total_output_tokens,
            server_output_tokens=server.generation_tokens,
        )

    if not client.completed:
        return verdict(None, "the client completed no request: nothing to compare")
    if server.ttft is None and server.e2e is None:
        return verdict(None, "the server's scrapes have no TTFT or E2E histogram")
    if server.requests is not None:
        slack = max(1.0, COUNT_SLACK * client.completed)
        low = client.completed - slack
        high = client.completed + (client.failed or 0) + max(0, extra_requests) + slack
        if not low <= server.requests <= high:
            return verdict(
                None,
                f"the server finished {server.requests:.0f} requests over the window and the client "
                f"{client.completed}: other traffic, or scrapes that do not bracket the run; not judged",
            )
    reasons = []
    for f in figures:
        if f.over:
            reasons.append(
                f"client {f.metric.upper()} mean {f.client_mean_ms:.1f} ms is {f.excess_ms:.1f} ms above the "
                f"server's {f.server_mean_ms:.1f} ms (allowed {f.allowed_ms:.1f} ms)"
            )
    if rate.over:
        reasons.append(
            f"asked {rate.asked:g} req/s, the client sent about {rate.sent:.2f} req/s "
            f"(short by more than {100 * (rate.allowed_shortfall or 0):.0f} %) while the server was not queueing"
        )
    judged = [f.over for f in figures if f.over is not None] + ([rate.over] if rate.over is not None else [])
    if reasons:
        return verdict(True, *reasons)
    if not judged:
        return verdict(None, "no latency both sides measured")
    return verdict(False)


# ---------------------------------------------------------------- known pitfalls


@dataclass(frozen=True)
class Pitfall:
    key: str
    line: str  # the explanation, one line
    evidence: str  # the log line or figures it was recognised by


_CHUNK_TOO_BIG = re.compile(r"ValueError: Chunk too big|Got more than \d+ bytes when reading")
_NO_VALID_CHUNK = re.compile(r"Never received a valid chunk to calculate TTFT")


def _first_line(text: str, pattern: re.Pattern[str]) -> str | None:
    for line in text.splitlines():
        if pattern.search(line):
            return line.strip()[:200]
    return None


def _mean_input(log: str, result: BenchResult | None) -> float | None:
    total, done = (result.total_input_tokens, result.completed) if result is not None else (None, None)
    if total is None or not done:
        blocks = parse_result_blocks(log) if log else []
        if blocks:
            m = blocks[-1].metrics
            total, done = m.get("total_input_tokens"), m.get("completed")  # type: ignore[assignment]
    if total is None or not done:
        return None
    return float(total) / float(done)


def recognise_pitfalls(
    log: str | bytes = "", result: BenchResult | None = None, check_result: ClientCheck | None = None
) -> tuple[Pitfall, ...]:
    """Known client pitfalls in a client's log (stdout and stderr), one line each."""
    text = log.decode(errors="replace") if isinstance(log, bytes) else log
    text = strip_ansi(text)
    found = []
    line = _first_line(text, _CHUNK_TOO_BIG)
    if line is not None:
        found.append(
            Pitfall(
                "aiohttp-chunk-too-big",
                "the client's aiohttp read buffer was smaller than one streamed line, so it failed these "
                "requests itself (not the server): use a client that reads the stream in pieces "
                "(vLLM's since PR #24373) or a larger read_bufsize",
                line,
            )
        )
    line = _first_line(text, _NO_VALID_CHUNK)
    if line is not None:
        found.append(
            Pitfall(
                "no-valid-chunk",
                "the client got a stream with no token for some requests (an error answer, or an endpoint that "
                "does not match --backend): they count as failed and are left out of its latencies",
                line,
            )
        )
    # the client's own count of requests it left out of its figures (GuideLLM's window: its parser's line)
    warning = result.extra.get("client_warning") if result is not None else None
    if isinstance(warning, str) and warning and result is not None:
        made, done = result.metrics.get("requests_made"), result.metrics.get("completed")
        counts = (
            f"requests_made {'-' if made is None else f'{made:g}'}, completed {'-' if done is None else f'{done:g}'}"
        )
        found.append(Pitfall("guidellm-measure-window", warning, counts))
    mean_in = _mean_input(text, result)
    if mean_in is not None and mean_in >= LONG_CONTEXT_TOKENS:
        bound = check_result.client_bound if check_result is not None else None
        ttft = check_result.figure("ttft") if check_result is not None else None
        if bound:
            evidence = f"mean input {mean_in:.0f} tokens per request"
            if ttft is not None and ttft.client_mean_ms is not None and ttft.server_mean_ms is not None:
                evidence += f"; TTFT client {ttft.client_mean_ms:.0f} ms, server {ttft.server_mean_ms:.0f} ms"
            found.append(
                Pitfall(
                    "long-context-read-buffer",
                    "at 50K+ input tokens vllm bench serve's 64 KiB aiohttp read buffer throttles the client "
                    "(vllm-project/vllm#39963): its TTFT and throughput are the client's, not the server's",
                    evidence,
                )
            )
        elif bound is None:
            found.append(
                Pitfall(
                    "long-context-read-buffer",
                    "at 50K+ input tokens vllm bench serve's 64 KiB aiohttp read buffer can throttle the client "
                    "(vllm-project/vllm#39963); without the server's figures this run cannot show whether it did",
                    f"mean input {mean_in:.0f} tokens per request",
                )
            )
    return tuple(found)
