"""histograms: Prometheus histogram math against hand-computed values and a real
vLLM 0.32 /metrics scrape taken during a benchmark."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from console.core.bench.histograms import (
    E2E,
    GENERATION_TOKENS,
    ITL,
    KV_CACHE,
    NUM_RUNNING,
    NUM_WAITING,
    TTFT,
    HistogramSnapshot,
    WindowedPercentiles,
    counter_value,
    delta,
    first_histogram,
    gauge_value,
    histogram_from_samples,
    quantile,
    rate,
)

SCRAPE = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu" / "metrics_during_load.txt"
INF = math.inf


def scrape_samples(text: str):
    """What the services layer hands over: prometheus_client's parsed samples."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def hist_samples(name, buckets, total, labels=None, created=1.7e9):
    labels = dict(labels or {})
    out = [(f"{name}_bucket", {**labels, "le": le}, count) for le, count in buckets]
    count = dict(buckets)["+Inf"]
    out += [(f"{name}_count", labels, count), (f"{name}_sum", labels, total)]
    out += [(f"{name}_created", labels, created)]
    return out


def snap(*pairs, total=0.0):
    return HistogramSnapshot(tuple(pairs), total, pairs[-1][1])


H = snap((0.1, 10), (0.5, 30), (1.0, 40), (INF, 40), total=12.0)


# ---------------------------------------------------------------- quantile by hand


@pytest.mark.parametrize(
    "q, expected",
    [
        # rank 20 lies in (0.1, 0.5] holding 20 observations, 10 below: 0.1 + 0.4 * 10/20
        (0.5, 0.3),
        # rank 10: the whole first bucket, which starts at 0
        (0.25, 0.1),
        # rank 5: half of the first bucket
        (0.125, 0.05),
        # rank 36 in (0.5, 1]: 0.5 + 0.5 * 6/10
        (0.9, 0.8),
        (1.0, 1.0),
        (0.0, 0.0),
    ],
)
def test_quantile_hand_computed(q, expected):
    assert quantile(H, q) == pytest.approx(expected)


def test_quantile_in_the_inf_bucket_is_the_highest_finite_bound():
    h = snap((0.1, 10), (0.5, 30), (1.0, 40), (INF, 50))
    assert quantile(h, 0.99) == 1.0  # rank 49.5 lies beyond 1.0
    assert quantile(h, 0.8) == pytest.approx(1.0)  # rank 40: the top of (0.5, 1]


def test_quantile_skips_empty_leading_buckets():
    h = snap((0.01, 0), (0.02, 0), (0.04, 4), (INF, 4))
    # rank 2 of 4 in (0.02, 0.04]: 0.02 + 0.02 * 2/4
    assert quantile(h, 0.5) == pytest.approx(0.03)
    assert quantile(h, 0.0) == pytest.approx(0.02)


def test_quantile_none_without_observations():
    assert quantile(snap((0.1, 0), (INF, 0)), 0.5) is None
    assert quantile(None, 0.5) is None
    assert quantile(snap((INF, 5)), 0.5) is None  # no finite bound at all


def test_quantile_repairs_non_monotonic_buckets():
    h = snap((0.1, 10), (0.5, 9), (1.0, 20), (INF, 20))  # a scrape race
    assert quantile(h, 0.5) == pytest.approx(0.1)


@pytest.mark.parametrize("q", [-0.1, 1.5, float("nan")])
def test_quantile_out_of_range(q):
    with pytest.raises(ValueError):
        quantile(H, q)


def test_bounds_come_from_the_data():
    # a server started with --custom-histogram-buckets
    samples = hist_samples("vllm:time_to_first_token_seconds", [("0.3", 2), ("0.7", 6), ("+Inf", 8)], 3.0)
    h = histogram_from_samples(samples, TTFT[0])
    assert h.bounds() == (0.3, 0.7, INF)
    # rank 4 in (0.3, 0.7]: 0.3 + 0.4 * 2/4
    assert quantile(h, 0.5) == pytest.approx(0.5)


# ---------------------------------------------------------------- samples


def test_sum_over_engines_and_filter():
    a = hist_samples(
        "vllm:e2e_request_latency_seconds",
        [("1.0", 1), ("2.5", 3), ("+Inf", 4)],
        6.0,
        {"engine": "0", "model_name": "m"},
    )
    b = hist_samples(
        "vllm:e2e_request_latency_seconds",
        [("1.0", 2), ("2.5", 2), ("+Inf", 2)],
        1.5,
        {"engine": "1", "model_name": "m"},
    )
    other = hist_samples(
        "vllm:e2e_request_latency_seconds",
        [("1.0", 50), ("2.5", 50), ("+Inf", 50)],
        9.0,
        {"engine": "0", "model_name": "other"},
    )
    samples = a + b + other
    h = histogram_from_samples(samples, E2E[0], {"model_name": "m"})
    assert h == HistogramSnapshot(((1.0, 3.0), (2.5, 5.0), (INF, 6.0)), 7.5, 6.0)
    assert h.mean == pytest.approx(1.25)
    only_1 = histogram_from_samples(samples, E2E[0], lambda labels: labels.get("engine") == "1")
    assert only_1.count == 2  # engine 1 (of model m; the other model runs on engine 0)
    assert histogram_from_samples(samples, "vllm:nothing") is None
    assert histogram_from_samples(samples, E2E[0] + "_bucket", {"model_name": "m"}) == h


def test_created_samples_and_junk_are_ignored():
    samples = hist_samples("x", [("1", 1), ("+Inf", 1)], 0.5, created=1.79e9)
    samples += [("x_bucket", {"le": "nan"}, 5), ("x_bucket", {}, 5), ("x_bucket", "labels", 1), (1, {}, 2), ("short",)]
    samples += [("x_sum", {}, "not a number")]
    h = histogram_from_samples(samples, "x")
    assert h == HistogramSnapshot(((1.0, 1.0), (INF, 1.0)), 0.5, 1.0)


def test_real_scrape_hand_computed():
    samples = scrape_samples(SCRAPE.read_text())
    ttft = histogram_from_samples(samples, TTFT[0])
    assert ttft.count == 165 and ttft.bounds()[:4] == (0.001, 0.005, 0.01, 0.02)
    assert ttft.bounds()[-3:] == (640.0, 2560.0, INF)  # the post-#15202 TTFT bounds
    # cumulative 0.02: 35, 0.04: 151, 0.06: 154, 0.08: 158, 0.1: 165
    assert quantile(ttft, 0.5) == pytest.approx(0.02 + 0.02 * (82.5 - 35) / 116)
    assert quantile(ttft, 0.9) == pytest.approx(0.02 + 0.02 * (148.5 - 35) / 116)
    assert quantile(ttft, 0.99) == pytest.approx(0.08 + 0.02 * (163.35 - 158) / 7)
    name, itl = first_histogram(samples, ITL)
    assert name == "vllm:inter_token_latency_seconds" and itl.count == 9492
    # 9409 of 9492 gaps within 10 ms: the median is 0.01 * 4746 / 9409
    assert quantile(itl, 0.5) == pytest.approx(0.01 * 4746 / 9409)
    assert gauge_value(samples, KV_CACHE, agg="max") == pytest.approx(0.008302808302808273)
    assert gauge_value(samples, NUM_RUNNING) == 14 and gauge_value(samples, NUM_WAITING) == 3
    assert counter_value(samples, GENERATION_TOKENS) == 9657
    assert counter_value(samples, "vllm:generation_tokens") == 9657  # the V1 declared name
    assert counter_value(samples, "vllm:generation_tokens_created") is None


def test_itl_and_kv_fallbacks_for_older_versions():
    old = hist_samples("vllm:time_per_output_token_seconds", [("0.01", 3), ("+Inf", 4)], 0.1)
    old += [("vllm:gpu_cache_usage_perc", {"model_name": "m"}, 0.25)]
    name, h = first_histogram(old, ITL)
    assert name == "vllm:time_per_output_token_seconds" and h.count == 4
    assert gauge_value(old, KV_CACHE) == 0.25
    both = old + hist_samples("vllm:inter_token_latency_seconds", [("0.01", 1), ("+Inf", 1)], 0.0)
    both += [("vllm:kv_cache_usage_perc", {"model_name": "m"}, 0.5)]
    assert first_histogram(both, ITL)[0] == "vllm:inter_token_latency_seconds"
    assert gauge_value(both, KV_CACHE) == 0.5
    assert first_histogram([], ITL) is None and gauge_value([], KV_CACHE) is None


def test_gauge_aggregations():
    samples = [("g", {"engine": "0"}, 0.2), ("g", {"engine": "1"}, 0.6)]
    assert gauge_value(samples, "g") == pytest.approx(0.8)
    assert gauge_value(samples, "g", agg="max") == 0.6
    assert gauge_value(samples, "g", agg="mean") == pytest.approx(0.4)


# ---------------------------------------------------------------- deltas and rates


def test_delta():
    older = snap((0.1, 10), (0.5, 30), (INF, 40), total=10.0)
    newer = snap((0.1, 15), (0.5, 50), (INF, 70), total=25.0)
    d = delta(newer, older)
    assert d == HistogramSnapshot(((0.1, 5), (0.5, 20), (INF, 30)), 15.0, 30)
    # rank 15 of 30 in (0.1, 0.5], which holds 15 with 5 below: 0.1 + 0.4 * 10/15
    assert quantile(d, 0.5) == pytest.approx(0.1 + 0.4 * 10 / 15)
    assert delta(newer, None) is newer


def test_delta_counter_reset_and_new_bounds_give_the_newer():
    older = snap((0.1, 10), (INF, 40), total=10.0)
    restarted = snap((0.1, 1), (INF, 2), total=0.1)
    assert delta(restarted, older) is restarted
    rebucketed = snap((0.2, 50), (INF, 60), total=20.0)
    assert delta(rebucketed, older) is rebucketed


def test_rate():
    assert rate(9657.0, 8657.0, 2.0) == 500.0
    assert rate(100.0, 9657.0, 2.0) == 50.0  # reset: counts from zero
    assert rate(1.0, 0.0, 0) is None and rate(None, 1.0, 1.0) is None and rate(1.0, None, 1.0) is None


# ---------------------------------------------------------------- window


def cumulative(t: int) -> HistogramSnapshot:
    """Each second: 10 observations <= 0.1 s and 10 in (0.1, 0.5]."""
    return snap((0.1, 10 * t), (0.5, 20 * t), (INF, 20 * t), total=3.0 * t)


def test_windowed_percentiles():
    w = WindowedPercentiles(window_s=5)
    assert w.stats().p50 is None and w.quantile(0.5) is None
    w.add(0.0, cumulative(0))
    assert w.stats().count == 0
    for t in range(1, 11):
        w.add(float(t), cumulative(t))
    stats = w.stats()
    assert stats.span_s == 5 and stats.count == 100  # seconds 5..10
    assert stats.p50 == pytest.approx(0.1)  # rank 50 = the top of the first bucket
    assert stats.p90 == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert stats.p99 == pytest.approx(0.1 + 0.4 * 49 / 50)
    assert stats.mean == pytest.approx(0.15)
    assert len(w) == 6  # bounded by the window: one baseline + 5 newer


def test_window_changes_with_the_load():
    w = WindowedPercentiles(window_s=2)

    def slow(n):
        return snap((0.1, 0), (0.5, 0), (2.0, n), (INF, n), total=n * 1.0)

    w.add(0, slow(0))
    w.add(1, slow(10))
    assert w.stats().p50 == pytest.approx(0.5 + 1.5 * 0.5)

    def fast(n, base):
        return snap((0.1, n), (0.5, n), (2.0, base + n), (INF, base + n), total=base + n * 0.05)

    for t in range(2, 6):
        w.add(t, fast(10 * (t - 1), 10))
    assert w.stats().p50 == pytest.approx(0.05)  # only fast requests in the last 2 s


def test_window_restarts_on_reset_or_clock_going_back():
    w = WindowedPercentiles(window_s=10)
    w.add(0, cumulative(5))
    w.add(1, cumulative(6))
    w.add(2, cumulative(1))  # the server restarted
    assert len(w) == 1 and w.stats().p50 is None
    w.add(3, cumulative(2))
    w.add(1, cumulative(3))  # clock went back
    assert len(w) == 1
    w.add(5, None)
    assert len(w) == 1
    with pytest.raises(ValueError):
        WindowedPercentiles(window_s=0)


def test_window_is_bounded():
    w = WindowedPercentiles(window_s=1e9, max_snapshots=10)
    for t in range(100):
        w.add(float(t), cumulative(t))
    assert len(w) == 10


# ---------------------------------------------------------------- properties

_bounds = st.lists(st.floats(min_value=1e-4, max_value=1e4), min_size=1, max_size=12, unique=True).map(sorted)


@st.composite
def histograms(draw):
    bounds = draw(_bounds)
    increments = draw(st.lists(st.integers(0, 1000), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    counts, running = [], 0
    for inc in increments:
        running += inc
        counts.append(float(running))
    buckets = tuple(zip([*bounds, INF], counts))
    return HistogramSnapshot(buckets, 0.0, counts[-1])


@settings(max_examples=300, deadline=None)
@given(histograms(), st.lists(st.floats(min_value=0, max_value=1), min_size=2, max_size=6))
def test_quantile_is_monotonic_and_within_the_bounds(hist, qs):
    values = [quantile(hist, q) for q in sorted(qs)]
    if hist.count == 0:
        assert values == [None] * len(values)
        return
    finite_max = max(b for b in hist.bounds() if b != INF)
    for v in values:
        assert 0.0 <= v <= finite_max + 1e-12
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(values))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=30),
            st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
            st.one_of(st.floats(), st.integers(), st.text(max_size=5)),
        ),
        max_size=30,
    )
)
def test_fuzz_samples_never_raise(samples):
    for name in ("x", "", "vllm:time_to_first_token_seconds"):
        h = histogram_from_samples(samples, name)
        if h is not None:
            for q in (0.0, 0.5, 0.99, 1.0):
                quantile(h, q)
    gauge_value(samples, ["x", "y"])
    counter_value(samples, "x")
