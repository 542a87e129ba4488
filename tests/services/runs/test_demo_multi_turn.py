"""Issue B2 in the demo: the multi-turn-chat preset (client = "guidellm") runs on a simulated node
through the simulator's GuideLLM, its progress in the live panel's events, its figures stored
as GuideLLM's, the conversations' history found in the prefix cache (warm by design, no
warning), goodput against an SLO counted from its per-request figures. AIPerf, which the
simulator does not have, is refused in one line (tests/services/test_clients_refusal.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from console.core.profiles import load_profile
from console.core.results.build import run_from_console
from console.services.runs.serving import BenchProgressed, BenchRunner, check_lines, store_kwargs
from console.services.transports import TransportPool
from tests.helpers import free_port
from tests.services.test_bench import start_instance

PRESETS = Path(__file__).resolve().parents[3] / "profiles" / "presets.toml"


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


async def test_multi_turn_chat_runs_on_the_demo_through_its_guidellm(sim_node):
    preset = {p.name: p for p in load_profile([PRESETS]).bench_presets}["multi-turn-chat"]
    preset = dataclasses.replace(preset, input_len=64, output_len=16, num_prompts=12, slo_e2e_ms=60_000)
    node = sim_node("mt")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "mt")
    events = []
    try:
        outcome = await BenchRunner(pool, metrics_interval=0.2, record_telemetry=False).run(
            node, view, preset, max_concurrency=2, on_event=events.append
        )
    finally:
        await svc.stop(node, "mt", int_timeout=5)
        await pool.close()
    assert outcome.ok, outcome.failure()
    assert "guidellm" in outcome.argv and "turns=4" in " ".join(outcome.argv)
    progress = [e.progress for e in events if isinstance(e, BenchProgressed)]
    assert progress and progress[-1].n == 12 and progress[-1].total == 12
    run = run_from_console({"node": node.name}, outcome.result_json, None, setup=preset, **store_kwargs(outcome))
    assert (run.client, run.metrics["completed"]) == ("guidellm", 12)
    # 3 conversations of 4 turns: turns 2-4 find the conversation so far in the cache
    assert run.prefix_cache_hit_pct is not None and run.prefix_cache_hit_pct >= 30
    assert run.prefix_cache_warning is None  # warm by design (cold = false)
    assert run.goodput_pct == 100.0 and run.goodput["source"] == "per-request"
    assert any(line.startswith("prefix cache: ") and "warm by design" in line for line in check_lines(outcome))
