"""bench_result: the --save-result JSON across versions, and text block == JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.core.bench.output_parser import parse_result_blocks
from console.core.bench.result import (
    SUMMARY_KEYS,
    BenchResult,
    agrees,
    block_disagreements,
    load_result_file,
    normalize_result,
    result_metric_keys,
)

CPU = Path(__file__).resolve().parents[2] / "fixtures" / "vllm-0.32-cpu"

# (stdout capture, the JSON the same run saved)
PAIRS = [
    ("bench_serve_stdout.raw", "bench_result.json"),
    ("bench_tiny_stdout.raw", "bench_tiny_result.json"),
]


# ---------------------------------------------------------------- text block vs JSON


@pytest.mark.parametrize("stdout, result", PAIRS)
def test_block_agrees_with_json_for_every_metric(stdout, result):
    (block,) = parse_result_blocks((CPU / stdout).read_bytes())
    data = json.loads((CPU / result).read_text())
    printed = dict(block.printed)
    assert len(printed) == 23
    # every printed metric has its JSON key, and agrees at the printed precision
    assert set(printed) <= set(data), set(printed) - set(data)
    for key, text in printed.items():
        assert agrees(text, data[key]), (key, text, data[key])
    assert block_disagreements(block, data) == {}
    assert block_disagreements(block, normalize_result(data)) == {}


def test_a_changed_value_disagrees():
    (block,) = parse_result_blocks((CPU / "bench_serve_stdout.raw").read_bytes())
    data = json.loads((CPU / "bench_result.json").read_text())
    data["p99_itl_ms"] += 0.01
    data["completed"] = 49
    assert block_disagreements(block, data) == {"p99_itl_ms": ("13.05", data["p99_itl_ms"]), "completed": ("50", 49)}


@pytest.mark.parametrize(
    "block, value, expected",
    [
        ("4.20", 4.204118398412744, True),
        ("4.20", 4.2051, False),  # rounds to 4.21
        ("4.20", 4.16, False),
        ("0.00", 0.0033053888908773565, True),
        ("0.00", -0.001, True),  # -0.00 prints as 0.00
        ("50", 50, True),
        ("50", 50.4, True),
        ("50", 51, False),
        ("34.00", 34, True),
        ("1600.00", 1600.0, True),
        ("2.04", 2.0406744939999726, True),
        ("101320.40", 101320.4049, True),
        ("nan", float("nan"), True),
        ("inf", "inf", True),
        ("1.00", None, False),
        ("1.00", "x", False),
    ],
)
def test_agrees(block, value, expected):
    assert agrees(block, value) is expected


def test_agrees_with_numbers():
    assert agrees(4.2, 4.204, decimals=2)
    assert not agrees(4.2, 4.21, decimals=2)
    assert agrees(4.2, 4.24)  # no decimals given: 4.2 has one
    assert agrees(50.0, 50.2)  # integral: whole number


# ---------------------------------------------------------------- normalize across versions


def test_032_result():
    result = normalize_result(json.loads((CPU / "bench_result.json").read_text()))
    assert result.backend == "vllm" and result.endpoint_type == "vllm" and result.label is None
    assert result.request_rate == math.inf and result.unlimited_rate
    assert (result.num_prompts, result.max_concurrency, result.completed, result.failed) == (50, 8, 50, 0)
    assert result.request_goodput is None
    assert result.max_concurrent_requests == 34
    assert result.latency("ttft", "p99") == pytest.approx(57.412864949967556)
    assert result.latency("e2el", "mean") == pytest.approx(303.9639964800108)
    # per-request arrays are kept, out of the summary
    assert set(result.arrays) == {"latencies", "queue_times"}
    assert "latencies" not in result.metrics and "latencies" not in result.summary()
    assert list(result.summary())[:3] == ["completed", "failed", "duration"]
    assert "request_rate" not in result.summary() and "max_concurrency" not in result.summary()


LEGACY_063 = {
    "date": "20241014-210312",
    "backend": "vllm",
    "model_id": "amd/Llama-3.1-70B-Instruct-FP8-KV",
    "tokenizer_id": "amd/Llama-3.1-70B-Instruct-FP8-KV",
    "best_of": 1,
    "num_prompts": 500,
    "request_rate": 1.0,
    "max_concurrency": None,
    "duration": 510.4,
    "completed": 500,
    "total_input_tokens": 2048000,
    "total_output_tokens": 256000,
    "request_throughput": 0.98,
    "request_goodput:": 0.5,
    "output_throughput": 501.5,
    "total_token_throughput": 4513.7,
    "input_lens": [4096, 4096],
    "output_lens": [512, 512],
    "ttfts": [0.1, 0.2],
    "itls": [[0.01, 0.02], [0.03]],
    "generated_texts": ["a", "b"],
    "errors": ["", ""],
    "mean_ttft_ms": 150.0,
    "median_ttft_ms": 150.0,
    "std_ttft_ms": 50.0,
    "p99_ttft_ms": 199.0,
    "mean_e2el_ms": 9000.0,
    "p99.9_e2el_ms": 9999.0,
}


def test_063_result_legacy_goodput_and_arrays():
    result = normalize_result(LEGACY_063)
    assert result.request_goodput == 0.5 and "request_goodput" in result.raw
    assert "request_goodput:" not in result.raw
    assert result.failed is None  # not written before 0.12, never derived
    assert result.max_concurrency is None and result.request_rate == 1.0 and not result.unlimited_rate
    assert set(result.arrays) == {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"}
    assert result.arrays["itls"] == [[0.01, 0.02], [0.03]]
    assert result.latency("e2el", "p99.9") == 9999.0
    assert "best_of" not in result.metrics and "best_of" not in result.extra


def test_both_goodput_spellings_prefer_the_new_one():
    result = normalize_result({"request_goodput:": 1.0, "request_goodput": 2.0})
    assert result.request_goodput == 2.0


def test_091_to_0102_endpoint_type_and_label_instead_of_backend():
    result = normalize_result({"endpoint_type": "openai-chat", "label": "run-a", "request_rate": "inf", "completed": 3})
    assert result.backend == "openai-chat" and result.label == "run-a"
    assert result.request_rate == math.inf
    assert normalize_result({"label": "only-label"}).backend == "only-label"


def test_metadata_keys_are_kept_as_extra():
    result = normalize_result({"completed": 1, "node": "mi300-a", "gpus": "0,1", "spec_decode_num_drafts": 7})
    assert result.extra == {"node": "mi300-a", "gpus": "0,1"}
    assert result.metrics["spec_decode_num_drafts"] == 7


def test_missing_values_stay_none():
    result = normalize_result({})
    assert result == BenchResult()
    assert result.completed is None and result.failed is None and result.request_rate is None


def test_not_an_object():
    with pytest.raises(ValueError):
        normalize_result([1, 2])  # type: ignore[arg-type]


# ---------------------------------------------------------------- files


def test_load_single_pretty_object():
    (result,) = load_result_file((CPU / "bench_result.json").read_text())
    assert result.completed == 50


def test_load_append_result_file():
    one = json.loads((CPU / "bench_result.json").read_text())
    two = json.loads((CPU / "bench_tiny_result.json").read_text())
    # --append-result: json.dump of each run, separated by a newline
    text = json.dumps(one) + "\n" + json.dumps(two) + "\n"
    results = load_result_file(text)
    assert [r.num_prompts for r in results] == [50, 20]
    pretty = json.dumps(one, indent=4) + "\n" + json.dumps(two, indent=2)
    assert [r.num_prompts for r in load_result_file(pretty.encode())] == [50, 20]
    assert [r.num_prompts for r in load_result_file(json.dumps([one, two]))] == [50, 20]
    assert load_result_file("  \n") == []


def test_load_nan_and_infinity():
    (result,) = load_result_file('{"request_rate": Infinity, "mean_itl_ms": NaN}')
    assert result.request_rate == math.inf and math.isnan(result.metrics["mean_itl_ms"])


@pytest.mark.parametrize("text, line", [('{"a": 1}\n{"b": ', 2), ('{"a": 1}\n[1]', 2), ("garbage", 1)])
def test_load_malformed(text, line):
    with pytest.raises(ValueError, match=f"line {line}"):
        load_result_file(text)


# ---------------------------------------------------------------- keys


def test_result_metric_keys_order():
    keys = result_metric_keys(json.loads((CPU / "bench_result.json").read_text()))
    assert keys[:12] == [k for k in SUMMARY_KEYS if k != "request_goodput"]
    assert keys[12:16] == ["mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms"]
    assert keys[-1] == "rtfx"
    (block,) = parse_result_blocks((CPU / "bench_serve_stdout_pty.raw").read_bytes())
    keys = result_metric_keys(block.metrics)
    assert keys[keys.index("mean_itl_ms") :][:5] == [
        "mean_itl_ms",
        "median_itl_ms",
        "p50_itl_ms",
        "p90_itl_ms",
        "p99_itl_ms",
    ]
    assert result_metric_keys({"p99.9_itl_ms": 1.0, "p99_itl_ms": 1.0, "p50_itl_ms": 1.0}) == [
        "p50_itl_ms",
        "p99_itl_ms",
        "p99.9_itl_ms",
    ]


# ---------------------------------------------------------------- fuzzing

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "request_rate",
        "completed",
        "failed",
        "backend",
        "date",
        "request_goodput:",
        "num_prompts",
        "max_concurrency",
        "p99_ttft_ms",
        "itls",
        "label",
        "endpoint_type",
    ]
) | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_keys, _json, max_size=12))
def test_fuzz_normalize_never_raises(obj):
    result = normalize_result(obj)
    assert isinstance(result, BenchResult)
    result_metric_keys(result)
    result.summary()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_load_raises_only_value_error(text):
    try:
        load_result_file(text)
    except ValueError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), _json | st.integers(min_value=10**300, max_value=10**400))
def test_fuzz_agrees_never_raises(printed, value):
    assert agrees(printed, value) in (True, False)
