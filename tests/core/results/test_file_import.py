"""runs_from_file: the seeds' logs, 0.32 captures vs the result JSON, JSON of every version, failed files, every label."""

from __future__ import annotations

import json
import math

import pytest

from console.core.bench.output_parser import parse_result_blocks
from console.core.bench.result import agrees
from console.core.results.record import CONTEXT_KEYS, fingerprint_of
from tests.core.results.results_helpers import CPU, NOW, SEED_002, SEED_004, parse

# ---------------------------------------------------------------- seeds' own logs


def test_seed_004_imports_every_block_with_every_value():
    data = SEED_004.read_bytes()
    found = parse(data, label="seed", node="mi300x-a")
    assert found.kind == "text" and found.skipped == []
    blocks = parse_result_blocks(data)
    assert len(found.runs) == len(blocks) == 9
    assert [r.setup["max_concurrency"] for r in found.runs] == [128, 256, 512, 128, 256, 512, 512, 512, 512]
    for run, block in zip(found.runs, blocks):
        # every printed value, as printed
        assert run.metrics == {k: float(v) for k, v in block.printed.items()}
        assert len(run.metrics) == 16
        assert run.origin == "import" and run.source == "/x/file" and run.created == NOW
        assert run.label == "seed" and run.context["node"] == "mi300x-a"
        assert run.result is None and run.live is None
        assert run.setup["model"] == "meta-llama/Llama-3.1-70B-Instruct"
        assert run.setup["dataset"] == "sharegpt" and run.setup["backend"] == "openai-chat"
        assert run.setup["num_prompts"] == 1024
        assert run.setup["request_rate"] is None  # not printed by this client: unknown, not guessed
        assert run.context["source_part"] == f"lines {block.start_line}-{block.end_line}"
        # context the file cannot tell stays null
        for key in CONTEXT_KEYS:
            if key != "node":
                assert run.context[key] is None, key
        assert run.context["client_args"]["max_concurrency"] == 256  # the shown command line, as typed
    first = found.runs[0].metrics
    assert first["output_throughput"] == 1998.36 and first["p99_itl_ms"] == 560.38 and first["completed"] == 1024
    assert len({r.fingerprint for r in found.runs}) == 9
    assert len({r.id for r in found.runs}) == 9


def test_seed_002_two_vllm_bench_blocks():
    found = parse(SEED_002.read_bytes())
    assert [r.metrics["output_throughput"] for r in found.runs] == [873.98, 999.30]
    run = found.runs[0]
    assert run.metrics["failed"] == 0 and run.metrics["p99_e2el_ms"] == 101320.40
    assert run.metrics["max_output_tokens_per_s"] == 1600.0 and run.metrics["max_concurrent_requests"] == 70.0
    # the block's "Maximum request concurrency" is setup, not a measurement
    assert "max_concurrency" not in run.metrics and run.setup["max_concurrency"] == 64
    # the seed's command uses ${model}: the model is unknown, not guessed
    assert run.setup["model"] is None
    assert len(run.metrics) == 22


# ---------------------------------------------------------------- 0.32 captures vs the result JSON


@pytest.mark.parametrize(
    "stdout, result",
    [
        ("bench_serve_stdout.raw", "bench_result.json"),
        ("bench_tiny_stdout.raw", "bench_tiny_result.json"),
    ],
)
def test_text_import_agrees_with_the_json_import(stdout, result):
    (text_run,) = parse((CPU / stdout).read_bytes()).runs
    (json_run,) = parse((CPU / result).read_bytes()).runs
    data = json.loads((CPU / result).read_text())
    (block,) = parse_result_blocks((CPU / stdout).read_bytes())
    assert set(text_run.metrics) <= set(json_run.metrics)
    for key, value in text_run.metrics.items():
        printed = block.printed[key]
        assert float(printed) == value
        assert agrees(printed, data[key]), (key, printed, data[key])
        assert agrees(printed, json_run.metrics[key])
    for key in ("model", "num_prompts", "max_concurrency", "request_rate", "burstiness", "backend"):
        assert text_run.setup[key] == json_run.setup[key], key
    assert json_run.setup["request_rate"] == math.inf
    assert json_run.result == data  # as written, per-request arrays kept
    assert text_run.result is None


def _terminal_capture(text: str) -> bytes:
    """What a terminal recorder keeps: CRLF, colour codes, \\r progress redraws."""
    out = []
    for line in text.split("\n"):
        if line.startswith("====="):
            line = f"\x1b[1;32m{line}\x1b[0m"
        elif line.startswith("Mean TTFT"):
            line = "\x1b[33mMean TTFT (ms):\x1b[0m" + line[len("Mean TTFT (ms):") :]
        out.append(line)
    return "\r\n".join(out).encode()


def test_terminal_capture_with_crlf_ansi_and_progress_agrees_with_json():
    plain = (CPU / "bench_serve_stdout.raw").read_bytes().decode()
    assert "\r" in plain  # the real capture has tqdm's \r redraws
    captured = _terminal_capture(plain)
    assert b"\r\n" in captured and b"\x1b[33m" in captured
    (run,) = parse(captured).runs
    (reference,) = parse(plain).runs
    (block,) = parse_result_blocks(captured)
    data = json.loads((CPU / "bench_result.json").read_text())
    assert run.metrics == reference.metrics and len(run.metrics) == 22
    for key, value in run.metrics.items():
        assert float(block.printed[key]) == value and agrees(block.printed[key], data[key]), key
    assert run.fingerprint == reference.fingerprint  # the same run, whatever the line ends


def test_pty_capture_with_carriage_return_progress():
    data = (CPU / "bench_serve_stdout_pty.raw").read_bytes()
    assert b"\r\n" in data and b"\x1b[" in data
    (run,) = parse(data).runs
    (block,) = parse_result_blocks(data)
    # a separate run (its JSON was not captured): every printed value, as printed
    assert run.metrics == {k: float(v) for k, v in block.printed.items() if k != "max_concurrency"}
    assert len(run.metrics) == 30
    assert run.metrics["p90_e2el_ms"] == 641.94 and run.metrics["p50_ttft_ms"] == 33.36
    assert run.setup["metric_percentiles"] == "50,90,99"
    assert run.setup["input_len"] == 64 and run.setup["output_len"] == 64 and run.setup["dataset"] == "random"


# ---------------------------------------------------------------- JSON of every version


LEGACY_063 = {
    "date": "20241014-210312",
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B",
    "tokenizer_id": "meta-llama/Llama-3.1-8B",
    "best_of": 1,
    "num_prompts": 3,
    "request_rate": "inf",
    "max_concurrency": None,
    "duration": 1.5,
    "completed": 3,
    "total_input_tokens": 30,
    "total_output_tokens": 60,
    "request_throughput": 2.0,
    "request_goodput:": 1.5,
    "output_throughput": 40.0,
    "total_token_throughput": 60.0,
    "input_lens": [10, 10, 10],
    "output_lens": [20, 20, 20],
    "ttfts": [0.1, 0.2, 0.3],
    "itls": [[0.01, 0.02], [0.01], [0.03]],
    "generated_texts": ["a", "b", "c"],
    "errors": ["", "", ""],
    "mean_ttft_ms": 200.0,
    "median_ttft_ms": 200.0,
    "std_ttft_ms": 81.6,
    "p99_ttft_ms": 299.0,
}


def test_legacy_063_json_goodput_colon_inf_rate_and_arrays():
    (run,) = parse(json.dumps(LEGACY_063)).runs
    assert run.metrics["request_goodput"] == 1.5 and "request_goodput:" not in run.metrics
    assert run.setup["request_rate"] == math.inf and run.setup["backend"] == "vllm"
    assert run.setup["max_concurrency"] is None and run.setup["date"] == "20241014-210312"
    assert run.result["request_goodput:"] == 1.5  # kept as written
    assert run.result["itls"] == [[0.01, 0.02], [0.01], [0.03]]
    assert "ttfts" not in run.metrics and "best_of" not in run.metrics
    # the renamed spelling is the same content: one fingerprint
    renamed = {("request_goodput" if k == "request_goodput:" else k): v for k, v in LEGACY_063.items()}
    assert fingerprint_of(renamed, {}, {}) == run.fingerprint


def test_091_bench_serve_json_endpoint_type_and_label_instead_of_backend():
    obj = {
        "date": "20250601-101010",
        "endpoint_type": "openai-chat",
        "label": "run-a",
        "model_id": "m",
        "tokenizer_id": "m",
        "num_prompts": 10,
        "request_rate": 4.0,
        "burstiness": 1.0,
        "max_concurrency": 8,
        "duration": 2.0,
        "completed": 10,
        "total_input_tokens": 100,
        "total_output_tokens": 200,
        "request_throughput": 5.0,
        "request_goodput:": None,
        "output_throughput": 100.0,
        "total_token_throughput": 150.0,
        "mean_itl_ms": 3.0,
        "p99.9_itl_ms": 9.5,
    }
    (run,) = parse(json.dumps(obj)).runs
    assert run.setup["backend"] == "openai-chat" and run.setup["request_rate"] == 4.0
    assert run.setup["max_concurrency"] == 8 and run.setup["burstiness"] == 1.0
    assert run.metrics["p99.9_itl_ms"] == 9.5 and "request_goodput" not in run.metrics
    assert "failed" not in run.metrics  # 0.12+ only: missing, not derived


def test_append_result_file_one_run_per_line_and_json_arrays():
    one = json.loads((CPU / "bench_result.json").read_text())
    two = dict(one, date="20261121-080000", duration=3.0)
    text = json.dumps(one) + "\n" + json.dumps(two) + "\n" + json.dumps({"benchmark": {"name": "x"}}) + "\n"
    found = parse(text)
    assert found.kind == "json" and len(found.runs) == 2
    assert [r.context["source_part"] for r in found.runs] == ["object 1", "object 2"]
    assert found.skipped == [("object 3", "not a vLLM benchmark result (a JSON object without 'completed'/'duration')")]
    assert len(parse(json.dumps([one, two])).runs) == 2
    assert found.runs[0].fingerprint != found.runs[1].fingerprint


def test_json_with_nothing_completed_is_skipped_with_the_error():
    obj = dict(LEGACY_063, completed=0, errors=["Traceback ...\nConnectionRefusedError: [Errno 111] refused", ""])
    found = parse(json.dumps(obj))
    assert found.runs == []
    assert found.skipped == [(None, "All requests failed (completed = 0): ConnectionRefusedError: [Errno 111] refused")]


# ---------------------------------------------------------------- failed and unusable files


def test_all_requests_failed_capture_is_skipped_with_its_reason():
    found = parse((CPU / "bench_fail_no_server.raw").read_bytes())
    assert found.runs == []
    ((part, reason),) = found.skipped
    assert part.startswith("block 1 (lines 251-")
    assert reason.startswith("All requests failed. This is likely due to a misconfiguration")
    assert "Cannot connect to host 127.0.0.1:8011" in reason
    assert "\n" not in reason


def test_initial_test_failure_and_files_without_a_block():
    text = (
        "Namespace(backend='vllm', model='m', dataset_name='random', num_prompts=10, request_rate=inf)\n"
        "Starting initial single prompt test run...\n"
        "Traceback (most recent call last):\n"
        '  File "benchmark_serving.py", line 600, in benchmark\n'
        "ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. "
        "Error: Cannot connect to host localhost:8000\n"
    )
    found = parse(text)
    assert found.runs == [] and found.kind is None
    assert found.skipped == [
        (
            None,
            (
                "Initial test run failed - Please make sure benchmark arguments are correctly "
                "specified. Error: Cannot connect to host localhost:8000"
            ),
        )
    ]
    assert parse("just some notes\n").skipped == [(None, "no result block")]
    assert parse('{"broken": ').skipped[0][1].startswith("no result block (invalid JSON at line 1")
    cut = SEED_004.read_text().rsplit("P99 TPOT (ms):", 1)[0]
    found = parse(cut)
    assert len(found.runs) == 8
    assert found.skipped[-1][1] == "result block cut short (the output ends inside it)"


# ---------------------------------------------------------------- every label of every version


def test_every_label_of_every_version_is_kept():
    text = "\n".join(
        [  # noqa: FLY002
            # 0.6.3: pre-run lines, capital-T total, goodput
            (
                "Namespace(backend='vllm', model='org/m-8B', dataset_name='sonnet', sonnet_input_len=550, "
                "sonnet_output_len=150, num_prompts=100, request_rate=inf, seed=0)"
            ),
            "Traffic request rate: inf",
            "============ Serving Benchmark Result ============",
            "Successful requests:                     100       ",
            "Benchmark duration (s):                  10.00     ",
            "Total input tokens:                      55000     ",
            "Total generated tokens:                  15000     ",
            "Request throughput (req/s):              10.00     ",
            "Request goodput (req/s):                 9.50      ",
            "Output token throughput (tok/s):         1500.00   ",
            "Total Token throughput (tok/s):          7000.00   ",
            "---------------Time to First Token----------------",
            "Mean TTFT (ms):                          100.00    ",
            "P99.9 TTFT (ms):                         300.00    ",
            "==================================================",
            # 0.33: rate in the block, peak values, E2EL, spec decode, lowercase total
            (
                "Namespace(backend='openai', model='org/m-8B', dataset_name='random', input_len=1024, output_len=128, "
                "num_prompts=50, request_rate=20.0, max_concurrency=16, burstiness=1.0)"
            ),
            "Traffic request rate: 20.0",
            "Burstiness factor: 1.0 (Poisson process)",
            "Maximum request concurrency: 16",
            "============ Serving Benchmark Result ============",
            "Successful requests:                     50        ",
            "Failed requests:                         0         ",
            "Maximum request concurrency:             16        ",
            "Request rate configured (RPS):           20.00     ",
            "Benchmark duration (s):                  5.00      ",
            "Total input tokens:                      51200     ",
            "Total generated tokens:                  6400      ",
            "Request throughput (req/s):              10.00     ",
            "Output token throughput (tok/s):         1280.00   ",
            "Peak output token throughput (tok/s):    2000.00   ",
            "Peak concurrent requests:                16.00     ",
            "Total token throughput (tok/s):          11520.00  ",
            "----------------End-to-end Latency----------------",
            "Mean E2EL (ms):                          800.00    ",
            "Median E2EL (ms):                        790.00    ",
            "---------------Speculative Decoding---------------",
            "Acceptance rate (%):                     70.00     ",
            "Acceptance length:                       2.40      ",
            "==================================================",
        ]
    )
    old, new = parse(text).runs
    assert old.metrics == {
        "completed": 100.0,
        "duration": 10.0,
        "total_input_tokens": 55000.0,
        "total_output_tokens": 15000.0,
        "request_throughput": 10.0,
        "request_goodput": 9.5,
        "output_throughput": 1500.0,
        "total_token_throughput": 7000.0,
        "mean_ttft_ms": 100.0,
        "p99.9_ttft_ms": 300.0,
    }
    assert old.setup["dataset"] == "sonnet" and old.setup["input_len"] == 550 and old.setup["output_len"] == 150
    assert old.setup["request_rate"] == math.inf and old.setup["seed"] == 0
    assert new.setup["request_rate"] == 20.0 and new.setup["max_concurrency"] == 16
    assert new.setup["input_len"] == 1024 and new.setup["burstiness"] == 1.0
    assert new.metrics["total_token_throughput"] == 11520.0
    assert new.metrics["spec_decode_acceptance_rate"] == 70.0 and new.metrics["spec_decode_acceptance_length"] == 2.4
    assert new.metrics["median_e2el_ms"] == 790.0 and new.metrics["failed"] == 0.0
    assert "request_rate" not in new.metrics and "max_concurrency" not in new.metrics
