"""A serving run over the simulated node records its GPUs and checks its client (issue P)."""

from __future__ import annotations

import pytest

from console.core.results.build import run_from_console
from console.core.results.record import run_to_dict
from console.services.runs.serving import BenchRunner, LiveMetricsSampled, store_kwargs
from console.services.transports import TransportPool
from tests.helpers import free_port
from tests.services.test_bench import TINY_BENCH, start_instance


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


async def test_serving_run_records_telemetry_and_checks_its_client(sim_node):
    node = sim_node("t1")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "t1")
    events = []
    try:
        outcome = await BenchRunner(pool).run(node, view, TINY_BENCH, max_concurrency=4, on_event=events.append)
    finally:
        await svc.stop(node, "t1", int_timeout=5)
        await pool.close()
    assert outcome.ok
    # the instance's GPU (1) over the run, from the run's own agent stream
    assert outcome.telemetry is not None, outcome.telemetry_note
    [gpu] = outcome.telemetry.gpus
    assert gpu.gpu == 1 and len(gpu) >= 1
    live = [e for e in events if isinstance(e, LiveMetricsSampled)]
    assert live and all(e.throttled in (True, False, None) for e in live)
    # both sides compared: the server's /metrics scraped before and after
    check = outcome.client_check
    assert check is not None and check.client_requests == 40
    doc = run_to_dict(run_from_console({"node": node.name}, outcome.result_json, None, **store_kwargs(outcome)))
    assert doc["energy"]["gpus"][0]["gpu"] == 1 and doc["energy_j"] is not None and doc["avg_power_w"] > 0
    assert doc["tokens_per_joule"] == pytest.approx(outcome.result.total_output_tokens / doc["energy_j"], rel=1e-5)
    assert doc["client_check"]["requests"]["client"] == 40
    assert doc["client_bound"] is check.client_bound
    assert check.client_bound is False, check.reasons  # the simulated client keeps up with its server
    # the counter where the agent reports one, else integrated power, marked so
    assert doc["energy"]["energy_source"] in ("counter", "integrated_power")
