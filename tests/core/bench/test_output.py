"""bench_output: tqdm progress, setup lines, result blocks and errors of the
benchmark clients, against real outputs (vLLM 0.32 on CPU, seeds 002 and 004)
and the per-version lines of reference §2."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.core.bench.client_setup import parse_namespace
from console.core.bench.output_events import BenchError, BenchProgress, BenchResultBlock, SetupLine
from console.core.bench.output_parser import BenchStreamParser, parse_result_blocks
from console.core.bench.progress import parse_progress, strip_ansi
from console.core.bench.result_table import block_key

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CPU = FIXTURES / "vllm-0.32-cpu"
SEEDS = FIXTURES / "seeds"
SEED_002 = SEEDS / "002_55bd4ff5afc03ea6.txt"
SEED_004 = SEEDS / "004_040c923192cb04a5.txt"


def raw(name: str) -> bytes:
    return (CPU / name).read_bytes()


def feed_all(chunks, **kwargs) -> tuple[BenchStreamParser, list]:
    parser = BenchStreamParser(**kwargs)
    events = []
    for chunk in chunks:
        events += parser.feed(chunk)
    events += parser.close()
    return parser, events


def of(events, kind):
    return [e for e in events if isinstance(e, kind)]


# ---------------------------------------------------------------- progress


@pytest.mark.parametrize(
    "text, n, total, pct, elapsed, remaining, rate",
    [
        (" 45%|████▌     | 450/1000 [00:12<00:15, 36.20it/s]", 450, 1000, 45, 12, 15, 36.20),
        ("  0%|          | 0/50 [00:00<?, ?it/s]", 0, 50, 0, 0, None, None),
        ("100%|██████████| 50/50 [00:02<00:00, 24.50it/s]", 50, 50, 100, 2, 0, 24.50),
        # slower than 1 it/s tqdm prints s/it: converted to it/s
        (" 10%|█         | 1/10 [00:04<00:36,  4.00s/it]", 1, 10, 10, 4, 36, 0.25),
        # hours in elapsed/remaining
        (" 50%|█████     | 500/1000 [1:02:03<1:02:03,  0.13it/s]", 500, 1000, 50, 3723, 3723, 0.13),
        # unit_scale suffixes
        (" 12%|█▏        | 1.20k/10.0k [00:10<01:13, 120.00it/s]", 1200, 10000, 12, 10, 73, 120.0),
        (" 12%|#2        | 12/100 [00:01<00:08, 1.2kit/s]", 12, 100, 12, 1, 8, 1200.0),
        # ascii bar
        (" 30%|###       | 3/10 [00:03<00:07,  1.00it/s]", 3, 10, 30, 3, 7, 1.0),
    ],
)
def test_parse_progress_formats(text, n, total, pct, elapsed, remaining, rate):
    p = parse_progress(text)
    assert p is not None
    assert (p.n, p.total, p.pct, p.elapsed_s, p.remaining_s) == (n, total, pct, elapsed, remaining)
    assert p.rate == (None if rate is None else pytest.approx(rate))
    assert p.raw == text.strip()


def test_parse_progress_takes_the_last_redraw_and_strips_ansi():
    text = (
        "\r  0%|          | 0/20 [00:00<?, ?it/s]"
        "\r\x1b[32m 25%|██▌       | 5/20 [00:00<00:01, 10.95it/s]\x1b[0m"
        "\r\x1b[2K 45%|████▌     | 9/20 [00:01<00:01,  7.56it/s]"
    )
    p = parse_progress(text)
    assert (p.n, p.total, p.rate) == (9, 20, 7.56)
    assert p.fraction == pytest.approx(0.45)


def test_parse_progress_with_desc_and_postfix():
    p = parse_progress("Warmup: 50%|█████     | 2/4 [00:01<00:01, 2.00it/s, loss=1]")
    assert (p.desc, p.n, p.total) == ("Warmup", 2, 4)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Maximum request concurrency: 64",
        "37it [00:01, 36.20it/s]",  # no total: not request progress
        "Waiting for endpoint |██████| 00:05 elapsed, 09:55 remaining",  # 0.10.2 ready-check bar
        " 45%|████▌     | 450/1000 [00:12<00:15, 36.2",  # cut off mid-redraw
        "Mean TTFT (ms):                          9626.13",
    ],
)
def test_parse_progress_none(text):
    assert parse_progress(text) is None


def test_strip_ansi():
    line = "\x1b[0;36m(MainProcess pid=1)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b]0;title\x07done\x1b[K"
    assert strip_ansi(line) == "(MainProcess pid=1) INFO done"


# ---------------------------------------------------------------- real 0.32 output

SAMPLE_032_METRICS = {
    "completed": 50,
    "failed": 0,
    "max_concurrency": 8,
    "duration": 2.04,
    "total_input_tokens": 3207,
    "total_output_tokens": 3200,
    "request_throughput": 24.50,
    "output_throughput": 1568.11,
    "max_output_tokens_per_s": 1657.00,
    "max_concurrent_requests": 34.00,
    "total_token_throughput": 3139.65,
    "mean_ttft_ms": 39.10,
    "median_ttft_ms": 37.89,
    "p99_ttft_ms": 57.41,
    "mean_tpot_ms": 4.20,
    "median_tpot_ms": 4.05,
    "p99_tpot_ms": 5.22,
    "mean_itl_ms": 4.21,
    "median_itl_ms": 3.91,
    "p99_itl_ms": 13.05,
    "mean_e2el_ms": 303.96,
    "median_e2el_ms": 295.76,
    "p99_e2el_ms": 370.98,
}


def test_032_stdout_events_in_order():
    parser, events = feed_all([raw("bench_serve_stdout.raw")])
    setup = [(e.kind, e.value) for e in of(events, SetupLine)]
    kinds = [k for k, _ in setup]
    assert kinds == [
        "namespace",
        "initial_test_start",
        "ready_check_skipped",
        "main_start",
        "request_rate",
        "burstiness",
        "max_concurrency",
    ]
    assert setup[4][1] == math.inf and setup[5][1] == 1.0 and setup[6][1] == 8
    progress = of(events, BenchProgress)
    assert [p.n for p in progress] == sorted(p.n for p in progress)
    assert progress[0].n == 0 and progress[-1].n == 50 and progress[-1].total == 50
    assert progress[-1].rate == pytest.approx(24.50)
    assert parser.progress == progress[-1]
    (block,) = of(events, BenchResultBlock)
    assert block.complete and block.metrics == SAMPLE_032_METRICS
    assert block.printed["duration"] == "2.04" and block.printed["mean_tpot_ms"] == "4.20"
    assert block.unknown == {}
    # the events come in the order the lines were printed
    order = [type(e).__name__ for e in events]
    assert order.index("BenchResultBlock") > max(i for i, k in enumerate(order) if k == "BenchProgress")
    assert of(events, BenchError) == []


def test_032_setup_from_namespace_and_prerun_lines():
    (block,) = parse_result_blocks(raw("bench_serve_stdout.raw"))
    assert block.setup == {
        "model": "/srv/models/tiny-llama",
        "backend": "vllm",
        "endpoint": "/v1/completions",
        "base_url": "http://127.0.0.1:8011",
        "host": "127.0.0.1",
        "port": 8000,
        "dataset_name": "random",
        "num_prompts": 50,
        "request_rate": math.inf,
        "burstiness": 1.0,
        "max_concurrency": 8,
        "seed": 0,
        "ignore_eos": True,
        "percentile_metrics": "ttft,tpot,itl,e2el",
        "metric_percentiles": "99",
        "range_ratio": 0.0,
        "num_warmups": 0,
        "input_len": 64,
        "output_len": 64,
    }
    assert block.args["dispatch_function"].startswith("<function BenchmarkServingSubcommand.cmd")
    assert block.args["random_mm_bucket_config"] == {(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}
    assert block.args["logging_config"].startswith("LoggingConfig(log_level='INFO'")
    assert block.span == (14, 42)


def test_032_pty_capture_crlf_and_ansi():
    data = raw("bench_serve_stdout_pty.raw")
    assert b"\r\n" in data and b"\x1b[" in data
    _, events = feed_all([data])
    (block,) = of(events, BenchResultBlock)
    assert block.metrics["p50_ttft_ms"] == 33.36 and block.metrics["median_ttft_ms"] == 33.36
    assert block.metrics["p90_e2el_ms"] == 641.94 and block.metrics["p99_itl_ms"] == 12.35
    assert len(block.metrics) == 31
    assert block.setup["metric_percentiles"] == "50,90,99"
    assert block.span == (15, 51)
    progress = of(events, BenchProgress)
    assert progress[-1].n == 50 and progress[-1].rate == pytest.approx(22.74)
    # `script` put the command in its header line: parsed, then replaced by the Namespace
    commands = [e for e in of(events, SetupLine) if e.kind == "command"]
    assert commands and commands[0].value["result_filename"] == "bench_detailed_pty.json"
    assert block.args["subparser"] == "bench"


def test_032_separate_stdout_and_stderr_captures():
    _, events = feed_all([raw("bench_tiny_stdout.raw")])
    (block,) = of(events, BenchResultBlock)
    assert block.metrics["completed"] == 20 and block.metrics["max_concurrency"] == 4
    assert block.metrics["median_tpot_ms"] == 0.0
    assert of(events, BenchProgress) == []
    _, events = feed_all([raw("bench_tiny_stderr.raw")])
    progress = of(events, BenchProgress)
    assert [p.n for p in progress] == [0, 1, 5, 9, 13, 16, 18, 20, 20]
    assert progress[-1].rate == pytest.approx(7.97)
    assert of(events, BenchResultBlock) == []


def test_032_all_requests_failed():
    parser, events = feed_all([raw("bench_fail_no_server.raw")])
    errors = of(events, BenchError)
    assert [e.kind for e in errors] == ["all_failed", "failed_requests"] + ["request_error"] * 5
    assert errors[0].message.startswith("All requests failed.")
    requests = errors[2:]
    assert [e.index for e in requests] == [0, 1, 2, 3, 4]
    for e in requests:
        assert e.message == (
            "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host "
            "127.0.0.1:8011 ssl:default [Connect call failed ('127.0.0.1', 8011)]"
        )
        assert "ConnectionRefusedError: [Errno 111]" in e.detail
    (block,) = of(events, BenchResultBlock)
    assert block.metrics["completed"] == 0 and block.metrics["failed"] == 5
    assert "max_concurrency" not in block.metrics
    assert block.setup["max_concurrency"] is None
    assert parser.errors == errors


@pytest.mark.parametrize("name", ["bench_serve_stdout.raw", "bench_serve_stdout_pty.raw", "bench_fail_no_server.raw"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_chunking_gives_the_same_events(name, seed):
    data = raw(name)
    _, whole = feed_all([data])
    rng = random.Random(seed)
    chunks, pos = [], 0
    while pos < len(data):
        step = rng.choice([1, 2, 3, 7, 64, 500])
        chunks.append(data[pos : pos + step])
        pos += step
    _, pieces = feed_all(chunks)
    assert pieces == whole
    _, as_text = feed_all([data.decode("utf-8")])
    assert as_text == whole


def test_unterminated_redraw_is_reported_at_once():
    parser = BenchStreamParser()
    events = parser.feed(b"Maximum request concurrency: 8\n\r  0%|          | 0/50 [00:00<?, ?it/s]")
    assert [type(e) for e in events] == [SetupLine, BenchProgress]
    events = parser.feed("\r 18%|█▊        | 9/50 [00:00<00:02, 16.05it/s]")
    assert [(e.n, e.total) for e in events] == [(9, 50)]
    assert parser.feed("\r 20%|██        | 10/5") == []  # half a redraw: wait
    events = parser.feed("0 [00:00<00:02, 17.00it/s]")
    assert [(e.n, e.total) for e in events] == [(10, 50)]
    assert parser.feed("\n") == []  # the line end does not repeat it
    assert parser.progress.n == 10


def test_progress_glued_to_a_stdout_line():
    text = "\r100%|██████████| 50/50 [00:02<00:00, 24.50it/s]Traffic request rate: 2.5\n"
    _, events = feed_all([text])
    assert isinstance(events[0], BenchProgress) and events[0].n == 50
    assert isinstance(events[1], SetupLine) and events[1].value == 2.5


def test_multibyte_characters_split_across_chunks():
    data = "\r 10%|█         | 1/10 [00:00<00:01, 9.00it/s]\n".encode()
    cut = data.index("█".encode()) + 1  # inside the 3-byte block character
    _, events = feed_all([data[:cut], data[cut:]])
    (p,) = events
    assert p.raw == "10%|█         | 1/10 [00:00<00:01, 9.00it/s]"


def test_invalid_utf8_does_not_break_parsing():
    _, events = feed_all([b"\xff\xfeTraffic request rate: 4.0\n"])
    assert [(e.kind, e.value) for e in of(events, SetupLine)] == [("request_rate", 4.0)]


# ---------------------------------------------------------------- seeds


def test_seed_002_two_blocks():
    blocks = parse_result_blocks(SEED_002.read_text(encoding="utf-8"))
    assert len(blocks) == 2 and all(b.complete for b in blocks)
    fp8, fp4 = blocks
    assert fp8.metrics == {
        "completed": 128,
        "failed": 0,
        "max_concurrency": 64,
        "duration": 149.97,
        "total_input_tokens": 1048448,
        "total_output_tokens": 131072,
        "request_throughput": 0.85,
        "output_throughput": 873.98,
        "max_output_tokens_per_s": 1600.00,
        "max_concurrent_requests": 70.00,
        "total_token_throughput": 7864.95,
        "mean_ttft_ms": 11639.66,
        "median_ttft_ms": 7543.86,
        "p99_ttft_ms": 31797.74,
        "mean_tpot_ms": 61.81,
        "median_tpot_ms": 66.91,
        "p99_tpot_ms": 72.17,
        "mean_itl_ms": 61.81,
        "median_itl_ms": 42.31,
        "p99_itl_ms": 1068.18,
        "mean_e2el_ms": 74875.13,
        "median_e2el_ms": 74736.83,
        "p99_e2el_ms": 101320.40,
    }
    assert fp4.metrics["duration"] == 131.16 and fp4.metrics["total_token_throughput"] == 8992.71
    assert fp4.metrics["p99_e2el_ms"] == 84989.10
    assert fp8.span == (270, 298) and fp4.span == (303, 331)


def test_seed_004_every_block_with_its_concurrency():
    text = SEED_004.read_text(encoding="utf-8")
    blocks = parse_result_blocks(text)
    # The brief speaks of twelve blocks; the seed file holds nine result blocks.
    assert text.count("Serving Benchmark Result") == len(blocks) == 9
    assert all(b.complete and len(b.metrics) == 16 for b in blocks)
    assert [b.setup["max_concurrency"] for b in blocks] == [128, 256, 512, 128, 256, 512, 512, 512, 512]
    assert [b.metrics["total_output_tokens"] for b in blocks] == [
        191594,
        191585,
        191574,
        192022,
        191426,
        192098,
        191650,
        191551,
        191232,
    ]
    assert [b.metrics["duration"] for b in blocks] == [95.88, 84.43, 84.19, 96.39, 84.40, 75.04, 59.90, 95.24, 122.65]
    first = blocks[0]
    assert "failed" not in first.metrics  # before 0.12
    assert first.metrics["total_token_throughput"] == 4302.41  # "Total Token throughput"
    assert first.metrics["p99_itl_ms"] == 560.38
    # setup from the shown client command line (the log has no Namespace)
    assert {k: first.setup[k] for k in ("backend", "model", "dataset_name", "num_prompts", "endpoint")} == {
        "backend": "openai-chat",
        "model": "meta-llama/Llama-3.1-70B-Instruct",
        "dataset_name": "sharegpt",
        "num_prompts": 1024,
        "endpoint": "/v1/chat/completions",
    }
    assert first.setup["dataset_path"] == "./ShareGPT_V3_unfiltered_cleaned_split.json"
    assert first.span == (13, 33)
    lines = text.split("\n")
    for b in blocks:
        assert "Serving Benchmark Result" in lines[b.start_line - 1]
        assert lines[b.end_line - 1].strip() == "=" * 50
    progress = parse_progress(lines[239])
    assert (progress.n, progress.total, progress.rate) == (1024, 1024, 8.35)


# ---------------------------------------------------------------- labels of every version


@pytest.mark.parametrize(
    "label, key",
    [
        ("Successful requests:", "completed"),
        ("Failed requests:", "failed"),
        ("Maximum request concurrency:", "max_concurrency"),
        ("Request rate configured (RPS):", "request_rate"),
        ("Benchmark duration (s):", "duration"),
        ("Total input tokens:", "total_input_tokens"),
        ("Total generated tokens:", "total_output_tokens"),
        ("Request throughput (req/s):", "request_throughput"),
        ("Request goodput (req/s):", "request_goodput"),
        ("Output token throughput (tok/s):", "output_throughput"),
        ("Peak output token throughput (tok/s):", "max_output_tokens_per_s"),
        ("Peak concurrent requests:", "max_concurrent_requests"),
        ("Total Token throughput (tok/s):", "total_token_throughput"),
        ("Total token throughput (tok/s):", "total_token_throughput"),
        ("TOTAL TOKEN THROUGHPUT (TOK/S):", "total_token_throughput"),
        ("Input throughput (inputs/s):", "input_sequence_throughput"),
        ("RTFx (Inverse Real-Time Factor):", "rtfx"),
        ("Mean TTFT (ms):", "mean_ttft_ms"),
        ("Median TPOT (ms):", "median_tpot_ms"),
        ("P99 ITL (ms):", "p99_itl_ms"),
        ("P99.9 ITL (ms):", "p99.9_itl_ms"),
        ("P50 E2EL (ms):", "p50_e2el_ms"),
        ("p90 e2el (ms):", "p90_e2el_ms"),
        ("Mean Client Queue Time (ms):", "mean_client_queue_time_ms"),
        ("P99 E2EL incl. Client Queue (ms):", "p99_e2el_including_client_queue_ms"),
        ("Probe requests completed:", "probe_completed"),
        ("Probe requests failed:", "probe_failed"),
        ("Median probe E2EL (ms):", "probe_median_e2el_ms"),
        ("P99 probe E2EL (ms):", "probe_p99_e2el_ms"),
        ("Max probe E2EL (ms):", "probe_max_e2el_ms"),
        ("Acceptance rate (%):", "spec_decode_acceptance_rate"),
        ("Acceptance length:", "spec_decode_acceptance_length"),
        ("Drafts:", "spec_decode_num_drafts"),
        ("Draft tokens:", "spec_decode_draft_tokens"),
        ("Accepted tokens:", "spec_decode_accepted_tokens"),
        ("Mean Foo Bar (ms):", "mean_foo_bar_ms"),  # a future metric keeps a usable key
        ("  Position 0:", None),
    ],
)
def test_block_labels(label, key):
    assert block_key(label) == key


def _block(*lines: str) -> str:
    head = "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")
    return (
        "\n".join([head, *("{:<40} {:<10}".format(*ln) if isinstance(ln, tuple) else ln for ln in lines), "=" * 50])
        + "\n"
    )


def test_063_style_run():
    text = (
        "Namespace(backend='vllm', base_url=None, host='localhost', port=8000, endpoint='/v1/completions', "
        "dataset=None, dataset_name='sonnet', dataset_path='benchmarks/sonnet.txt', model='m', tokenizer=None, "
        "best_of=1, use_beam_search=False, num_prompts=10, logprobs=None, request_rate=inf, seed=0, "
        "trust_remote_code=False, disable_tqdm=False, profile=False, save_result=False, metadata=None, "
        "result_dir=None, result_filename=None, ignore_eos=False, percentile_metrics='ttft,tpot,itl', "
        "metric_percentiles='99', sonnet_input_len=550, sonnet_output_len=150, sonnet_prefix_len=200, "
        "sharegpt_output_len=None, random_input_len=1024, random_output_len=128, random_range_ratio=1.0, "
        "random_prefix_len=0, hf_subset=None, hf_split=None, hf_output_len=None)\n"
        "Starting initial single prompt test run...\n"
        "Initial test run completed. Starting main benchmark run...\n"
        "Traffic request rate: inf\n"
        "Maximum request concurrency: None\n"
        "100%|██████████| 10/10 [00:01<00:00,  6.24it/s]\n"
        + _block(
            ("Successful requests:", 10),
            ("Benchmark duration (s):", "1.60"),
            ("Total input tokens:", 5497),
            ("Total generated tokens:", 1500),
            ("Request throughput (req/s):", "6.24"),
            ("Output token throughput (tok/s):", "936.55"),
            ("Total Token throughput (tok/s):", "4368.77"),
            "{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"),
            ("Mean TTFT (ms):", "51.49"),
            ("Median TTFT (ms):", "48.06"),
            ("P99 TTFT (ms):", "81.98"),
        )
    )
    _, events = feed_all([text])
    kinds = [e.kind for e in of(events, SetupLine)]
    assert kinds == [
        "namespace",
        "initial_test_start",
        "initial_test_done",
        "main_start",
        "request_rate",
        "max_concurrency",
    ]
    (block,) = of(events, BenchResultBlock)
    assert block.metrics["total_token_throughput"] == 4368.77 and "failed" not in block.metrics
    assert block.setup["dataset_name"] == "sonnet"
    assert (block.setup["input_len"], block.setup["output_len"]) == (550, 150)
    assert block.setup["max_concurrency"] is None and block.setup["request_rate"] == math.inf
    assert block.setup["range_ratio"] == 1.0


def test_012_warmup_phase_and_rate_line_in_block():
    text = (
        "Starting initial single prompt test run...\n"
        "Waiting for endpoint to become up in 600 seconds\n"
        "Initial test run completed.\n"
        "Warming up with 4 requests...\n"
        "\r 50%|█████     | 2/4 [00:00<00:00,  9.00it/s]\r100%|██████████| 4/4 [00:00<00:00,  9.00it/s]\n"
        "Warmup run completed.\n"
        "Starting main benchmark run...\n"
        "Traffic ramp-up strategy: linear.\n"
        "Will increase RPS from 1.0 to 20.0 RPS over the duration of the benchmark.\n"
        "Traffic request rate: 20.0\n"
        "Burstiness factor: 0.5 (Gamma distribution)\n"
        "Maximum request concurrency: 64\n"
        "\r 10%|█         | 100/1000 [00:05<00:45, 20.00it/s]\n"
        + _block(
            ("Successful requests:", 1000),
            ("Failed requests:", 0),
            ("Maximum request concurrency:", 64),
            ("Request rate configured (RPS):", "20.00"),
            ("Request goodput (req/s):", "30.12"),
            "{s:{c}^{n}}".format(s="Inter-token Latency", n=50, c="-"),
            ("P99.9 ITL (ms):", "214.35"),
        )
    )
    _, events = feed_all([text])
    setup = {e.kind: e.value for e in of(events, SetupLine)}
    assert setup["ready_check_wait"] == 600 and setup["warmup_start"] == 4
    assert setup["ramp_up_strategy"] == "linear" and setup["ramp_up"] == (1.0, 20.0)
    assert setup["burstiness"] == 0.5 and setup["max_concurrency"] == 64
    progress = of(events, BenchProgress)
    assert [(p.phase, p.n, p.total) for p in progress] == [("warmup", 2, 4), ("warmup", 4, 4), ("main", 100, 1000)]
    (block,) = of(events, BenchResultBlock)
    assert block.metrics["request_rate"] == 20.0 and block.metrics["request_goodput"] == 30.12
    assert block.metrics["p99.9_itl_ms"] == 214.35
    assert block.setup == {"request_rate": 20.0, "burstiness": 0.5, "max_concurrency": 64, "ramp_up_strategy": "linear"}


def test_033_extra_sections():
    text = _block(
        ("Successful requests:", 10),
        ("Failed requests:", 2),
        "{s:{c}^{n}}".format(s="Client-side Queueing", n=50, c="-"),
        ("Mean Client Queue Time (ms):", "1.00"),
        ("P99 Client Queue Time (ms):", "2.00"),
        "{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-"),
        ("Probe requests completed:", 5),
        ("P99 probe E2EL (ms):", "12.50"),
        "{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-"),
        ("Acceptance rate (%):", "71.20"),
        ("Drafts:", 300),
        "Per-position acceptance (%):",
        ("  Position 0:", "90.00"),
        ("Some New Counter:", "3"),
    )
    (block,) = parse_result_blocks(text)
    assert block.metrics == {
        "completed": 10,
        "failed": 2,
        "mean_client_queue_time_ms": 1.0,
        "p99_client_queue_time_ms": 2.0,
        "probe_completed": 5,
        "probe_p99_e2el_ms": 12.5,
        "spec_decode_acceptance_rate": 71.2,
        "spec_decode_num_drafts": 300,
    }
    assert block.unknown == {"Some New Counter": 3.0}


def test_initial_test_failure_is_an_error_without_block():
    text = (
        "Starting initial single prompt test run...\n"
        "Traceback (most recent call last):\n"
        '  File "benchmarks/benchmark_serving.py", line 1032, in <module>\n'
        "    main(args)\n"
        "ValueError: Initial test run failed - Please make sure benchmark arguments are correctly "
        "specified. Error: Bad Request\n"
    )
    parser, events = feed_all([text])
    (error,) = of(events, BenchError)
    assert error.kind == "initial_test_failed" and error.message.endswith("Error: Bad Request")
    assert error.line == 5
    assert parser.blocks == []


def test_a_crash_traceback_is_an_exception_error():
    _, events = feed_all(
        [
            (
                'Traceback (most recent call last):\n  File "x", line 1\n'
                "FileNotFoundError: [Errno 2] No such file or directory: 'ShareGPT.json'\n"
            )
        ]
    )
    (error,) = of(events, BenchError)
    assert error.kind == "exception" and "ShareGPT.json" in error.message


def test_request_errors_are_capped():
    lines = ["Failed requests during benchmark run detected (capping to 10):"]
    lines += [f"Error {i}: Bad Request {i}" for i in range(30)]
    _, events = feed_all(["\n".join(lines) + "\n"], max_errors=3)
    errors = [e for e in of(events, BenchError) if e.kind == "request_error"]
    assert [(e.index, e.message) for e in errors] == [(0, "Bad Request 0"), (1, "Bad Request 1"), (2, "Bad Request 2")]


def test_truncated_block_is_reported_incomplete():
    text = _block(("Successful requests:", 3), ("Benchmark duration (s):", "1.00")).rsplit("=" * 50, 1)[0]
    _, events = feed_all([text])
    (block,) = of(events, BenchResultBlock)
    assert not block.complete and block.metrics == {"completed": 3, "duration": 1.0}


def test_a_new_header_closes_an_unfinished_block():
    first = _block(("Successful requests:", 1)).rsplit("=" * 50, 1)[0]
    blocks = parse_result_blocks(first + _block(("Successful requests:", 2)))
    assert [(b.complete, b.metrics["completed"]) for b in blocks] == [(False, 1), (True, 2)]


def test_prerun_lines_belong_to_one_run():
    text = (
        "Maximum request concurrency: 8\n" + _block(("Successful requests:", 1)) + _block(("Successful requests:", 2))
    )
    first, second = parse_result_blocks(text)
    assert first.setup == {"max_concurrency": 8} and second.setup == {}


def test_noise_inside_a_block_is_skipped():
    text = _block(
        ("Successful requests:", 4),
        "\x1b[33mWARNING\x1b[0m something happened",
        "\r 10%|█         | 1/10 [00:00<00:01, 9.00it/s]",
        ("Benchmark duration (s):", "2.50"),
    ).replace("\n", "\r\n")
    (block,) = parse_result_blocks(text)
    assert block.metrics == {"completed": 4, "duration": 2.5}


def test_emit_other_lines():
    _, events = feed_all(["hello\nTraffic request rate: 1.0\n"], emit_other=True)
    assert [type(e).__name__ for e in events] == ["OtherLine", "SetupLine"]
    assert events[0].text == "hello" and events[0].line == 1


def test_non_default_args_line():
    _, events = feed_all(
        [
            "INFO 07-01 [cli.py:1] non-default args: {'model': 'm', 'num_prompts': 5, 'request_rate': 2.0}\n"
            + _block(("Successful requests:", 5))
        ]
    )
    (block,) = of(events, BenchResultBlock)
    assert block.setup == {"model": "m", "num_prompts": 5, "request_rate": 2.0}


def test_parse_namespace():
    assert parse_namespace("Namespace(a=1, b='x, y', c=[1, 2], d=inf, e=<function f at 0x1>, f=None)") == {
        "a": 1,
        "b": "x, y",
        "c": [1, 2],
        "d": math.inf,
        "e": "<function f at 0x1>",
        "f": None,
    }
    assert parse_namespace("Namespace(a=1, b=(2") == {"a": 1, "b": "(2"}  # cut short
    assert parse_namespace("{'a': 1, 'b': 'x'}") == {"a": 1, "b": "x"}


def test_feed_after_close_is_refused():
    parser = BenchStreamParser()
    parser.close()
    with pytest.raises(ValueError):
        parser.feed("x")
    assert parser.close() == []


# ---------------------------------------------------------------- fuzzing

_REAL_LINES = [
    ln
    for name in ("bench_serve_stdout_pty.raw", "bench_fail_no_server.raw")
    for ln in (CPU / name).read_text(encoding="utf-8").splitlines()[:80]
] + SEED_004.read_text(encoding="utf-8").splitlines()[:60]

_fragments = st.one_of(
    st.sampled_from(_REAL_LINES),
    st.text(max_size=40),
    st.sampled_from(["\r", "\n", "\r\n", "\x1b[", "|", "%|", "====", "Error 1: ", "Namespace(", "[00:", "<", "]"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_fuzz_parse_progress_never_raises(text):
    result = parse_progress(text)
    assert result is None or isinstance(result, BenchProgress)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_fuzz_stream_bytes_never_raises(chunks):
    _, events = feed_all(chunks)
    assert all(isinstance(e, (BenchProgress, SetupLine, BenchError, BenchResultBlock)) for e in events)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_fragments, max_size=40), st.integers(min_value=1, max_value=50))
def test_fuzz_real_fragments_any_chunking(parts, step):
    text = "".join(parts)
    _, whole = feed_all([text])
    data = text.encode()
    _, chunked = feed_all([data[i : i + step] for i in range(0, len(data), step)])
    assert chunked == whole
    for block in parse_result_blocks(text):
        assert all(isinstance(v, float) for v in block.metrics.values())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_namespace_never_raises(text):
    assert isinstance(parse_namespace("Namespace(" + text + ")"), dict)
    assert isinstance(parse_namespace(text), dict)
