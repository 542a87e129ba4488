"""BenchRunner against the simulated node: fake vllm serve + fake vllm bench serve, LocalTransport."""

from __future__ import annotations

import asyncio

import pytest

from console.core.model import BenchPreset, ServePreset
from console.core.results.build import run_from_console
from console.services.instances import InstanceService
from console.services.results import ResultStore
from console.services.runs.serving import (
    BenchFinished,
    BenchProgressed,
    BenchRunner,
    LiveMetricsSampled,
    live_summary,
)
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport
from tests.helpers import followed_run_log, free_port

TINY_SERVE = ServePreset(name="tiny", model="tiny-llama")
TINY_BENCH = BenchPreset(
    name="tiny",
    dataset="random",
    input_len=64,
    output_len=64,
    num_prompts=40,
    max_concurrency=(4,),
    ignore_eos=True,
    percentile_metrics="ttft,tpot,itl,e2el",
)


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


class DroppingTransport(LocalTransport):
    """Cuts the first benchmark log stream after a few lines, like a dropped SSH link."""

    def __init__(self, name):
        super().__init__(name)
        self.drops = 0

    async def stream_lines(self, argv, **kw):
        count = 0
        async for line in super().stream_lines(argv, **kw):
            yield line
            count += 1
            if followed_run_log(argv) and self.drops == 0 and count >= 5:
                self.drops += 1
                raise TransportError(f"{self.node_name}: link dropped", "closed")


async def start_instance(pool, node, port, name):
    svc = InstanceService(pool)
    snap = await sample_node(pool, node, probe=False)
    await svc.start(node, TINY_SERVE, gpus=[1], snapshot=snap, port=port, name=name)
    return svc, await svc.wait_ready(node, name, timeout=60)


async def test_run_with_progress_live_metrics_and_stored_result(sim_node, tmp_path):
    node = sim_node("b1")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "b1")
    events = []
    try:
        outcome = await BenchRunner(pool).run(node, view, TINY_BENCH, max_concurrency=4, on_event=events.append)
    finally:
        await svc.stop(node, "b1", int_timeout=5)
        await pool.close()
    progress = [e.progress for e in events if isinstance(e, BenchProgressed)]
    assert progress and progress[-1].n == progress[-1].total == 40
    assert [p.n for p in progress] == sorted(p.n for p in progress)  # arrives while it runs, in order
    live = [e.sample for e in events if isinstance(e, LiveMetricsSampled)]
    assert any(s.ttft_p50 is not None and s.itl_p50 is not None and s.output_tok_s for s in live)
    assert isinstance(events[-1], BenchFinished)
    assert outcome.ok and outcome.result.completed == 40 and outcome.result.failed == 0
    # the printed block and vLLM's JSON agree
    assert outcome.block.metrics["output_throughput"] == pytest.approx(
        outcome.result_json["output_throughput"], abs=0.01
    )

    store = ResultStore(tmp_path / "results")
    run_id = store.save(
        run_from_console(
            {"node": node.name, "instance": "b1"},
            outcome.result_json,
            live_summary(outcome.live),
            setup=TINY_BENCH,
            block=outcome.block,
        )
    )
    stored = store.get(run_id)
    assert stored.result == outcome.result_json  # vLLM's own numbers, as written
    assert stored.live["samples"] == len(outcome.live) > 0


async def test_dropped_link_mid_run_still_collects_the_result(sim_node):
    node = sim_node("b2")
    transport = DroppingTransport("b2")
    pool = TransportPool(lambda n: transport)
    svc, view = await start_instance(pool, node, free_port(), "b2")
    try:
        outcome = await BenchRunner(pool).run(node, view, TINY_BENCH, max_concurrency=4)
    finally:
        await svc.stop(node, "b2", int_timeout=5)
        await pool.close()
    assert transport.drops == 1
    assert outcome.ok and outcome.result.completed == 40
    assert outcome.block is not None  # the re-attached stream still delivered the result block


async def test_requests_failing_is_a_failed_run(sim_node):
    node = sim_node("b3")
    pool = TransportPool()
    svc, view = await start_instance(pool, node, free_port(), "b3")
    runner = BenchRunner(pool)
    slow = BenchPreset(
        name="slow",
        dataset="random",
        input_len=64,
        output_len=512,
        num_prompts=60,
        max_concurrency=(2,),
        ignore_eos=True,
    )
    try:
        run, argv = await runner.start(node, view, slow, max_concurrency=2)
        follow = asyncio.create_task(runner.follow(node, view, run, argv=argv))
        await asyncio.sleep(1.5)
        await svc.stop(node, "b3", int_timeout=5)  # the server goes away mid-run
        outcome = await asyncio.wait_for(follow, 60)
    finally:
        await pool.close()
    assert not outcome.ok
    assert outcome.exit_code == 0  # like vLLM: exit 0 even though requests failed
    assert outcome.result.failed > 0 and "requests failed" in outcome.reason
