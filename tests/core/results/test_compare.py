"""compare_table: deltas against the first run."""

from __future__ import annotations

from console.core.results.compare import compare_table
from tests.core.results.results_helpers import make_run


def test_compare_deltas_hand_checked():
    a = make_run("a", {"completed": 1024.0, "output_throughput": 2000.0, "median_ttft_ms": 800.0, "failed": 0.0})
    b = make_run("b", {"completed": 1024.0, "output_throughput": 2500.0, "median_ttft_ms": 600.0, "failed": 2.0})
    c = make_run("c", {"completed": 512.0, "output_throughput": 1500.0})
    rows = compare_table([a, b, c])
    assert rows[0]["values"] == ["a", "b", "c"]
    by_key = {r["key"]: r for r in rows if r["section"] == "metric"}
    assert list(by_key) == ["completed", "failed", "output_throughput", "median_ttft_ms"]
    tput = by_key["output_throughput"]
    assert tput["values"] == [2000.0, 2500.0, 1500.0]
    assert tput["delta"] == [None, 500.0, -500.0]
    assert tput["delta_pct"] == [None, 25.0, -25.0]
    assert tput["better"] == "higher" and tput["label"] == "Output token throughput (tok/s)"
    ttft = by_key["median_ttft_ms"]
    assert ttft["delta"] == [None, -200.0, None] and ttft["delta_pct"] == [None, -25.0, None]
    assert ttft["better"] == "lower"
    failed = by_key["failed"]
    assert failed["delta"] == [None, 2.0, None] and failed["delta_pct"] == [None, None, None]  # first is 0
    assert by_key["completed"]["delta_pct"] == [None, 0.0, -50.0]
    setup = {r["key"]: r for r in rows if r["section"] == "setup"}
    assert setup["max_concurrency"]["values"] == [64, 64, 64]
    assert compare_table([]) == []
