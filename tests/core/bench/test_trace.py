"""Issue B2 trace replay: the kept Azure trace slice, its conversion to vLLM 0.32's timed_trace
JSONL (console/core/bench/trace.py), the shipped `trace-replay` preset and its client argv."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from console.core.bench.argv import apply_bench_overrides, build_bench_argv, check_bench_argv
from console.core.bench.trace import (
    load_trace_jsonl,
    read_azure_trace,
    resolve_trace_path,
    scaled_requests,
    timed_trace_jsonl,
)
from console.core.profiles import load_profile

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT / "profiles" / "traces"
SLICE = TRACES / "azure-llm-conv-2023-11-16-slice.csv"

SMALL = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:15:51.2224670,879,55\n"
    "2023-11-16 18:15:51.3910170,91,16\n"
)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_the_kept_slice_is_the_documented_one():
    """300 requests over 84 s of the conversation trace, as the README says; small enough to ship."""
    assert SLICE.stat().st_size < 100_000
    rows = read_azure_trace(SLICE.read_text(encoding="utf-8"), str(SLICE))
    assert len(rows) == 300
    assert rows[0].at == 0.0 and rows[-1].at == pytest.approx(84.0291, abs=1e-4)
    assert max(r.input_tokens for r in rows) == 4107 and max(r.output_tokens for r in rows) == 649
    readme = (TRACES / "README.md").read_text(encoding="utf-8")
    for needed in ("CC BY 4.0", "AzureLLMInferenceTrace_conv.csv", "head -301", "ContextTokens"):
        assert needed in readme


def test_conversion_keeps_times_and_lengths_with_their_own_chunks():
    rows = read_azure_trace(SMALL)
    assert [r.at for r in rows] == pytest.approx([0.0, 4.314579, 4.541877, 4.710427])
    out = _lines(timed_trace_jsonl(scaled_requests(rows)))
    assert [o["input_length"] for o in out] == [374, 396, 879, 91]
    assert [o["output_length"] for o in out] == [44, 109, 55, 16]
    assert [o["timestamp"] for o in out] == pytest.approx([0.0, 4.314579, 4.541877, 4.710427])
    # vLLM builds a prompt from 16-token chunks: enough ids to cover it, never shared (a cold replay)
    assert [len(o["hash_ids"]) for o in out] == [math.ceil(n / 16) for n in (374, 396, 879, 91)]
    ids = [h for o in out for h in o["hash_ids"]]
    assert len(ids) == len(set(ids))


def test_scaling_to_a_small_context_and_a_speedup():
    """trace_max_input: the longest prompt becomes at most that, every length by the same factor;
    trace_speedup divides the arrival times; count keeps the first requests, same sizes."""
    rows = read_azure_trace(SMALL)
    reqs = scaled_requests(rows, max_input=100, speedup=4, count=3)
    assert len(reqs) == 3
    assert [r.input_tokens for r in reqs] == [43, 45, 100]  # x 100/879
    assert [r.output_tokens for r in reqs] == [5, 12, 6]
    assert [r.at for r in reqs] == pytest.approx([0.0, 4.314579 / 4, 4.541877 / 4])
    # a trace that already fits is left as recorded; a 1-token floor both ways
    assert [r.input_tokens for r in scaled_requests(rows, max_input=5000)] == [374, 396, 879, 91]
    tiny = scaled_requests(read_azure_trace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 1:0:0,2,1\n"))
    assert (tiny[0].input_tokens, tiny[0].output_tokens) == (2, 1)
    assert scaled_requests(rows, max_input=1)[3].input_tokens == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "t.csv: empty file"),
        ("TIMESTAMP,Tokens\n", "t.csv: line 1: no ContextTokens, GeneratedTokens column"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n", "t.csv: no requests after the header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n", "t.csv: line 2: TIMESTAMP 'yesterday'"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,2\n", "t.csv: line 2: ContextTokens 'x'"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,-2\n",
            "t.csv: line 2: GeneratedTokens -2 is negative",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1\n", "t.csv: line 2: 2 fields, expected 3"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n2023-11-16 18:15:45,1,1\n",
            "t.csv: line 3: TIMESTAMP goes back in time",
        ),
    ],
)
def test_a_bad_trace_is_one_line_naming_file_and_line(text, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")) as info:
        read_azure_trace(text, "t.csv")
    assert "\n" not in str(info.value)


def test_bad_keys_and_missing_file(tmp_path):
    rows = read_azure_trace(SMALL)
    with pytest.raises(ValueError, match="trace_speedup must be a positive number"):
        scaled_requests(rows, speedup=0)
    with pytest.raises(ValueError, match="trace_max_input must be a positive whole number"):
        scaled_requests(rows, max_input=0)
    with pytest.raises(ValueError, match=r"^trace file .*nope\.csv: cannot read \(No such file"):
        load_trace_jsonl("nope.csv", tmp_path)
    assert resolve_trace_path("a.csv", tmp_path) == tmp_path / "a.csv"
    assert resolve_trace_path(str(tmp_path / "b.csv"), Path("/x")) == tmp_path / "b.csv"


# ---------------------------------------------------------------- the preset and its argv


@pytest.fixture(scope="module")
def preset():
    presets = {p.name: p for p in load_profile([ROOT / "profiles" / "presets.toml"]).bench_presets}
    return presets["trace-replay"]


def test_trace_replay_preset_loads(preset):
    assert preset.dataset == "timed_trace" and preset.cold is True
    assert preset.trace == SLICE.name and resolve_trace_path(preset.trace, TRACES) == SLICE
    assert (preset.trace_max_input, preset.trace_speedup, preset.num_prompts) == (4096, 1.0, 300)
    check_bench_argv(preset, None)  # what the start would run is valid before anything is uploaded
    text = load_trace_jsonl(preset.trace, TRACES, max_input=preset.trace_max_input, count=preset.num_prompts)
    assert len(_lines(text)) == 300 and max(o["input_length"] for o in _lines(text)) == 4096


def test_trace_replay_argv_and_overrides(preset):
    small = apply_bench_overrides(preset, {"trace_max_input": "256", "trace_speedup": "20", "num_prompts": "30"})
    assert (small.trace_max_input, small.trace_speedup, small.num_prompts) == (256, 20.0, 30)
    argv = build_bench_argv(
        dataclasses.replace(small, dataset_path="/state/datasets/trace-ab.jsonl"),
        client_cmd=("vllm",),
        base_url="http://127.0.0.1:8000",
        model="m",
        result_dir="/r",
        result_filename="result.json",
        max_concurrency=None,
    )
    i = argv.index("--dataset-name")
    assert argv[i : i + 4] == ("--dataset-name", "timed_trace", "--dataset-path", "/state/datasets/trace-ab.jsonl")
    assert "--input-len" not in argv and "--timed-trace-sec-multiplier" not in argv


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"input_len": 64}, "brings its own lengths; scale them with trace_max_input"),
        ({"dataset": "random", "input_len": 8, "output_len": 8}, "trace, trace_max_input, trace_speedup applies to"),
        ({"trace": None, "trace_max_input": None, "trace_speedup": None}, "needs a trace \\(or a dataset_path\\)"),
        ({"backend": "openai-chat", "endpoint": "/v1/chat/completions"}, "vllm or openai backend"),
        ({"extra_args": ("--timed-trace-sec-multiplier", "0.5")}, "set the preset's trace_speedup instead"),
    ],
)
def test_what_timed_trace_cannot_run_is_refused(preset, changes, message):
    with pytest.raises(ValueError, match=message):
        check_bench_argv(dataclasses.replace(preset, **changes), None)
