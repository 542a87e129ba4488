"""Issue U: live TTFT/ITL percentiles from /metrics histograms are bucket estimates: marked ≈,
never more digits than the buckets give, until vLLM's own numbers replace them."""

from __future__ import annotations

from console.services.live_metrics import LiveSample
from console.ui.model import bench_view as bv
from console.ui.model.format import estimate

SAMPLE = LiveSample(
    ts=10.0,
    ttft_p50=2480.3127,
    ttft_p90=None,
    ttft_p99=5213.9,
    itl_p50=3.91159,
    itl_p90=None,
    itl_p99=13.0461,
    e2e_p50=None,
    e2e_p99=None,
    queue_p50=None,
    queue_p99=None,
    output_tok_s=1568.1,
    running=8.0,
    waiting=0.0,
    kv_cache_pct=12.5,
    itl_metric="vllm:inter_token_latency_seconds",
)
TTFT = (("ttft_p50", "p50"), ("ttft_p99", "p99"))


def test_estimate_shows_two_significant_digits_and_the_mark():
    assert [estimate(v) for v in (2480.3, 37.89, 3.9115, 0.4213, 9.96, 0.0)] == [
        "≈2500",
        "≈38",
        "≈3.9",
        "≈0.42",
        "≈10",
        "≈0",
    ]
    assert estimate(None) == "–"


def test_chart_title_and_status_line_mark_estimates_until_vllms_numbers():
    live = bv.live_chart_title("TTFT", TTFT, " ms", SAMPLE)
    assert live == "TTFT p50 ≈2500 · p99 ≈5200 ms · ≈ /metrics bucket estimate"
    assert "2480" not in live and "5213" not in live
    line = bv.live_now_text(SAMPLE)
    assert line.startswith("live: TTFT p50 ≈2500 ms · ITL p50 ≈3.9 ms (≈ bucket estimates) · 1568 tok/s")
    final = {"median_ttft_ms": 2480.31, "p99_ttft_ms": 5213.93, "median_itl_ms": 3.91}
    assert (
        bv.live_chart_title("TTFT", TTFT, " ms", SAMPLE, final) == "TTFT p50 2480.31 · p99 5213.93 ms · vLLM's result"
    )
    done = bv.live_now_text(SAMPLE, final=True, metrics={**final, "output_throughput": 1342.031})
    assert done.startswith("vLLM's result: TTFT p50 2480.31 ms · ITL p50 3.91 ms · output 1342.03 tok/s")
    assert "≈" not in done and "running" not in done and "1568" not in done
    # throughput and counts are no histogram: no mark, but labelled live until vLLM's figure replaces it
    assert bv.live_chart_title("Output", (("output_tok_s", ""),), " tok/s", SAMPLE) == "Output 1568 tok/s · live"
    assert (
        bv.live_chart_title("Output", (("output_tok_s", ""),), " tok/s", SAMPLE, {"output_throughput": 1342.031}, True)
        == "Output 1342.03 tok/s · vLLM"
    )
    counts = (("running", "running"), ("waiting", "waiting"))
    assert bv.live_chart_title("", counts, "", SAMPLE) == "live running 8 · waiting 0"
    assert bv.live_chart_title("", counts, "", SAMPLE, final, ended=True) == "Requests · live, run ended"
