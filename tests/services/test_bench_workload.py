"""Issue B2: a serving run over the simulated node stores its prefix-cache share (with the cold
warning) and its goodput against the preset's SLO; a cold start falls back to a fresh cache salt
where the server has no prefix-cache reset, and says so."""

from __future__ import annotations

import dataclasses

import pytest

from console.core.model import BenchPreset
from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.services.runs.serving import BenchRunner, LiveMetricsSampled, check_lines, store_kwargs
from console.services.transports import TransportPool
from tests.helpers import free_port
from tests.services.test_bench import TINY_BENCH, start_instance

# prefix_repetition as the preset ships it, smaller; marked cold to draw the warning
PREFIX = BenchPreset(
    name="prefix-heavy",
    dataset="prefix_repetition",
    output_len=8,
    num_prompts=20,
    max_concurrency=(2,),
    cold=True,
    cold_start="reset",
    slo_ttft_ms=5000,
    slo_e2e_ms=20000,
    extra_args=(
        "--prefix-repetition-prefix-len", "256", "--prefix-repetition-suffix-len", "16",
        "--prefix-repetition-num-prefixes", "2",
    ),
)  # fmt: skip


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)


async def test_prefix_heavy_marked_cold_is_warned_and_random_is_not(sim_node):
    node = sim_node("w1")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "w1")
    try:
        runner = BenchRunner(pool, metrics_interval=0.2, record_telemetry=False)
        events = []
        heavy = await runner.run(node, view, PREFIX, max_concurrency=2, on_event=events.append)
        cold = await runner.run(node, view, dataclasses.replace(TINY_BENCH, cold=True), max_concurrency=4)
    finally:
        await svc.stop(node, "w1", int_timeout=5)
        await pool.close()
    assert heavy.ok and cold.ok
    doc = run_to_dict(run_from_console({"node": node.name}, heavy.result_json, None, **store_kwargs(heavy)))
    # 18 of 20 requests find their 256-token prefix: about 85 % of prompt tokens
    assert doc["prefix_cache_hit_pct"] >= 50
    assert doc["prefix_cache_warning"].endswith(
        "% of prompt tokens came from the prefix cache: TTFT and throughput are not cold figures"
    )
    # the simulated server (like vLLM without VLLM_SERVER_DEV_MODE=1) has no reset: vLLM 0.32's
    # client salts every request instead (nothing cached before the run matches), seed unchanged
    pc = doc["prefix_cache"]
    assert pc["cold_start"] == "reset" and pc["cold_start_done"] == "salt"
    assert "VLLM_SERVER_DEV_MODE=1" in pc["cold_start_note"] and "cache_salt" in pc["cold_start_note"]
    assert any("cache_salt" in a for a in heavy.argv) and "seed" not in heavy.overrides
    # goodput against the SLO: every request within these loose limits, from per-request data
    assert doc["goodput"]["source"] == "per-request" and doc["goodput_pct"] == 100.0
    assert doc["good_rps"] == pytest.approx(heavy.result.request_goodput)  # vLLM's --goodput agrees
    # what `bench run` prints and the live panel shows after the run: the warning, and the share live
    lines = check_lines(heavy)
    assert any(line.startswith("WARNING: ") and "not cold figures" in line for line in lines)
    assert any(line.startswith("goodput 100.0% of requests") for line in lines)
    live = [e.sample.prefix_hit_pct for e in events if isinstance(e, LiveMetricsSampled)]
    assert live and live[-1] is not None and live[-1] >= 50
    plain = run_to_dict(run_from_console({"node": node.name}, cold.result_json, None, **store_kwargs(cold)))
    assert plain["prefix_cache_hit_pct"] <= 5 and plain["prefix_cache_warning"] is None
    assert plain["goodput"] is None and plain["goodput_pct"] is None  # no SLO, no goodput
    assert not any(line.startswith("WARNING") for line in check_lines(cold))


def test_find_max_points_carry_goodput():
    """A find-max point's figures include its goodput (the points table's `good %`)."""
    from console.core.results.record import StoredRun
    from console.services.runs.find_max import run_values

    run = StoredRun(
        id="p1", created=0.0, origin="console", metrics={"output_throughput": 10.0}, goodput={"goodput_pct": 92.5}
    )
    assert run_values(run).values["goodput_pct"] == 92.5
    assert run_values(dataclasses.replace(run, goodput=None)).values["goodput_pct"] is None
