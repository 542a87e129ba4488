"""Replica groups and group benchmarks on the simulated node (real agent, fake vllm), LocalTransport."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from console.core.model import BenchPreset, ServePreset
from console.services.groups import GroupService
from console.services.instances import InstanceState
from console.services.runs import group as group_bench
from console.services.runs.group import GroupBenchRunner, split_load, summary_of
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport
from tests.helpers import followed_run_log, free_port

TINY = ServePreset(name="tiny", model="tiny-llama", args=("--enforce-eager",))
BENCH = BenchPreset(
    name="tiny", input_len=32, output_len=16, num_prompts=16, ignore_eos=True, percentile_metrics="ttft,tpot,itl,e2el"
)


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture
async def pool():
    p = TransportPool()
    yield p
    await p.close()


@pytest.mark.timeout(180)
async def test_group_of_three_one_fails_the_rest_serve_and_bench_as_one(sim_node, pool, monkeypatch):
    # one client per node streams its output, the others are waited for quietly: both paths run
    monkeypatch.setattr(group_bench, "FOLLOWED_PER_NODE", 1)
    node = sim_node("grp")
    groups = GroupService(pool)
    snap = await sample_node(pool, node, probe=False)
    plan = await groups.plan([node], TINY, 3, base_port=free_port(), snapshots={node.name: snap})
    assert [r.gpus for r in plan.replicas] == [(0,), (1,), (2,)] and plan.group == "tiny-x3"
    # something grabs r1's port between planning and start: r1 moves to the next free port
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", plan.replicas[1].port))
    squatter.listen()
    try:
        started = await groups.start(plan, [node], TINY, snapshots={node.name: snap})
        assert {v.group for v in started.replicas} == {"tiny-x3"}
        assert started.replicas[1].port not in {r.port for r in plan.replicas}
        # r1 crashes while loading: it fails with its own reason, the others go on
        os.kill(started.replicas[1].pid, signal.SIGKILL)
        seen = []
        group = await groups.wait_ready([node], started, timeout=60, on_update=seen.append, poll_every=0.3)
    finally:
        squatter.close()
    try:
        assert (group.ready, group.total) == (2, 3), group
        [failed] = group.failed
        assert failed.name == "tiny-x3-r1" and failed.reason == "killed by signal 9"
        assert seen[-1].summary() == "tiny-x3: 2/3 ready, 1 failed"
        # a restarted console finds the group again from the node
        [found] = await groups.groups([node])
        assert found.name == "tiny-x3" and [v.name for v in found.replicas] == [
            "tiny-x3-r0",
            "tiny-x3-r1",
            "tiny-x3-r2",
        ]

        outcome = await GroupBenchRunner(pool, poll_every=0.2).run([node], group, BENCH, concurrency=4)
        assert outcome.ok, outcome.reason
        result = outcome.result
        assert result is not None and [r.name for r in result.replicas] == ["tiny-x3-r0", "tiny-x3-r2"]
        assert [load.max_concurrency for load in outcome.loads] == [2, 2]
        assert [load.seed for load in outcome.loads] == [0, 1]  # different prompts per replica
        parts = [o.result for o in outcome.outcomes]
        assert result.completed == sum(p.completed for p in parts) == 16
        assert result.output_throughput == pytest.approx(sum(p.output_throughput for p in parts))
        lo, hi = sorted(p.latency("ttft") for p in parts)
        assert lo <= result.stat("ttft", "median") <= hi
        doc = summary_of(outcome)
        assert doc["completed"] == 16 and len(doc["per_replica"]) == 2 and doc["nodes"] == 1
    finally:
        stopped = await groups.stop([node], "tiny-x3", int_timeout=5)
    assert all(v.state in (InstanceState.STOPPED, InstanceState.FAILED, InstanceState.EXITED) for v in stopped.replicas)
    assert (await groups.get([node], "tiny-x3", checked=True)).ready == 0


def test_split_load_refuses_what_cannot_be_split():
    from console.services.instances import InstanceView
    from console.services.runs.serving import BenchRunError

    views = [InstanceView("n", f"g-r{i}", InstanceState.READY) for i in range(4)]
    loads = split_load(views, BENCH, concurrency=10, num_prompts=18)
    assert [x.max_concurrency for x in loads] == [3, 3, 2, 2] and [x.num_prompts for x in loads] == [5, 5, 4, 4]
    assert [x.request_rate for x in split_load(views, BENCH, concurrency=None, rate=8.0)] == [2.0] * 4
    with pytest.raises(BenchRunError, match="concurrency 3 cannot be split over 4 replicas"):
        split_load(views, BENCH, concurrency=3)


class DropsEachClientOnce(LocalTransport):
    """Cuts every benchmark client's first output stream after a few lines, like a dropped SSH link."""

    def __init__(self, name):
        super().__init__(name)
        self.dropped: set[str] = set()

    async def stream_lines(self, argv, **kw):
        run = followed_run_log(argv)
        count = 0
        async for line in super().stream_lines(argv, **kw):
            yield line
            count += 1
            if run and run not in self.dropped and count >= 3:
                self.dropped.add(run)
                raise TransportError(f"{self.node_name}: link dropped", "closed")


@pytest.mark.timeout(120)
async def test_group_benchmark_survives_dropped_links(sim_node):
    node = sim_node("grpdrop")
    transport = DropsEachClientOnce("grpdrop")
    pool = TransportPool(lambda n: transport)
    groups = GroupService(pool)
    try:
        plan = await groups.plan([node], TINY, 2, base_port=free_port())
        group = await groups.wait_ready([node], await groups.start(plan, [node], TINY), timeout=60, poll_every=0.3)
        assert group.ready == 2
        outcome = await GroupBenchRunner(pool, poll_every=0.2).run([node], group, BENCH, concurrency=2)
        assert len(transport.dropped) == 2  # both clients' streams were cut once
        assert outcome.ok, outcome.reason
        assert outcome.result is not None and outcome.result.completed == 16
    finally:
        await groups.stop([node], plan.group, int_timeout=5)
        await pool.close()
