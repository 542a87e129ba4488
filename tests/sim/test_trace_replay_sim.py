"""Issue B2 trace replay on the demo: the simulated `vllm bench serve` replays vLLM 0.32's
timed_trace dataset (the kept Azure slice converted by console/core/bench/trace.py): each request
leaves at its trace time, with the trace's lengths, and the report says it is self-timed."""

import json
from pathlib import Path

import pytest

from console.core.bench.trace import load_trace_jsonl
from tests.sim.test_sim_vllm_bench import bench, finished, procs, server  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "profiles" / "traces"
SLICE = "azure-llm-conv-2023-11-16-slice.csv"


def test_timed_trace_requests_leave_at_the_trace_times(procs, server, tmp_path):  # noqa: F811
    srv = server()
    data = tmp_path / "trace.jsonl"
    # 24 requests of the kept slice, 10x faster: 8.2 s of arrivals become 0.82 s
    data.write_text(load_trace_jsonl(SLICE, TRACES, max_input=128, speedup=10, count=24))
    want = [json.loads(line) for line in data.read_text().splitlines()]
    out_file = tmp_path / "result.json"
    proc = bench(
        procs, "--base-url", srv.url, "--model", "/srv/models/tiny-llama", "--dataset-name", "timed_trace",
        "--dataset-path", data, "--num-prompts", 100, "--save-result", "--save-detailed",
        "--result-filename", out_file, name="trace",
    )  # fmt: skip
    rc, out, err = finished(proc)
    assert rc == 0, err[-3000:]
    assert "Self timing is set, using the timestamps from the trace file." in out
    assert "Traffic request rate" not in out and "Burstiness factor" not in out
    result = json.loads(out_file.read_text())
    assert result["completed"] == 24  # the file's requests, no oversampling to --num-prompts
    assert result["input_lens"] == [w["input_length"] for w in want]
    assert result["output_lens"] == [w["output_length"] for w in want]  # EOS ignored: the trace's lengths
    starts = result["start_times"]
    sent = [s - starts[0] for s in starts]
    # the first request leaves at 0 and each one at its (sped-up) trace time
    for got, w in zip(sent, want):
        assert got == pytest.approx(w["timestamp"], abs=0.15)
    assert sent[-1] == pytest.approx(want[-1]["timestamp"], abs=0.15) and want[-1]["timestamp"] > 0.5


def test_timed_trace_needs_a_completions_backend(procs, server, tmp_path):  # noqa: F811
    srv = server()
    data = tmp_path / "trace.jsonl"
    data.write_text(load_trace_jsonl(SLICE, TRACES, max_input=64, speedup=100, count=2))
    proc = bench(
        procs, "--base-url", srv.url, "--model", "/srv/models/tiny-llama", "--dataset-name", "timed_trace",
        "--dataset-path", data, "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", name="chat",
    )  # fmt: skip
    rc, _, err = finished(proc)
    assert rc == 1
    assert err.rstrip().endswith("requires a completions backend ('vllm' or 'openai').")
