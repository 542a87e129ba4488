"""How runs read: metric labels."""

from __future__ import annotations

from console.core.results.display import metric_label


def test_metric_labels():
    assert metric_label("median_ttft_ms") == "Median TTFT (ms)"
    assert metric_label("p99.9_itl_ms") == "P99.9 ITL (ms)"
    assert metric_label("total_token_throughput") == "Total token throughput (tok/s)"
