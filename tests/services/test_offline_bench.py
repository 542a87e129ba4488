"""OfflineRunner on the simulated node (LocalTransport): a dropped link mid-run
loses nothing, a cancelled run says so, and the preflight names what holds a GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest

from console.core.bench.offline import OfflinePreset
from console.services.runs.offline import (
    OfflineFinished,
    OfflineProgressed,
    OfflineRunError,
    OfflineRunner,
    busy_gpus,
)
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport
from tests.helpers import followed_run_log

LATENCY = OfflinePreset(
    name="t",
    kind="latency",
    model="amd/Llama-3.1-70B-Instruct-FP8-KV",
    tp=2,
    batch_size=4,
    input_len=128,
    output_len=256,
    num_iters_warmup=5,
    num_iters=30,
)


class DroppingTransport(LocalTransport):
    """Cuts the first run-log stream after a few lines, like a dropped SSH link."""

    def __init__(self, name):
        super().__init__(name)
        self.drops = 0

    async def stream_lines(self, argv, **kw):
        count = 0
        async for line in super().stream_lines(argv, **kw):
            yield line
            count += 1
            if followed_run_log(argv) and self.drops == 0 and count >= 3:
                self.drops += 1
                raise TransportError(f"{self.node_name}: link dropped", "closed")


async def test_dropped_link_mid_run_still_collects_vllms_json(sim_node):
    node = sim_node("o1")
    transport = DroppingTransport("o1")
    pool = TransportPool(lambda n: transport)
    events = []
    try:
        runner = OfflineRunner(pool)
        check = await runner.preflight(node, [0, 1], 2)
        outcome = await runner.run(node, LATENCY, [0, 1], version=check.version, on_event=events.append)
    finally:
        await pool.close()
    assert transport.drops == 1
    assert outcome.ok, outcome.reason
    bench = [e.progress.progress for e in events if isinstance(e, OfflineProgressed) and e.progress.phase == "bench"]
    assert bench and bench[-1].n == bench[-1].total == 30  # the re-attached stream went on at its byte offset
    assert outcome.printed["avg_latency"] == outcome.result_json["avg_latency"]
    assert isinstance(events[-1], OfflineFinished)


async def test_preflight_refuses_busy_gpus_and_a_bad_tp(sim_node):
    plain = sim_node("o2")
    node = dataclasses.replace(plain, simulate=dataclasses.replace(plain.simulate, busy=(3,)))
    pool = TransportPool()
    try:
        runner = OfflineRunner(pool)
        with pytest.raises(OfflineRunError, match=r"^o2: GPU 3 is busy: process \d+ \("):
            await runner.preflight(node, [2, 3], 2)
        with pytest.raises(OfflineRunError, match="^o2: TP 4 needs 4 GPUs, 2 given$"):
            await runner.preflight(node, [0, 1], 4)
        with pytest.raises(OfflineRunError, match=r"^o2: no GPU 9 \(the node has 8\)$"):
            await runner.preflight(node, [9], 1)
        assert (await runner.preflight(node, [0, 1, 2], 1, per_gpu=True)).snapshot.static
    finally:
        await pool.close()


def test_busy_gpus_names_instances_first_then_runs():
    assert busy_gpus([1, 2], None, {2: "llama"}, {1: "latency-x"}) == "GPU 2 already serves instance llama"
    assert busy_gpus([1], None, {}, {1: "latency-x"}) == "GPU 1 is running benchmark latency-x"
    assert busy_gpus([1], None, {}, {}) is None


async def test_cancelled_run_is_reported_cancelled(sim_node):
    node = sim_node("o3")
    pool = TransportPool()
    slow = dataclasses.replace(LATENCY, num_iters=200)
    try:
        runner = OfflineRunner(pool)
        name, _ = await runner.start(node, slow, [0, 1], version=None)
        await runner.cancel(node, name)
        outcome = await runner.follow(node, name, "latency")
    finally:
        await pool.close()
    assert not outcome.ok and outcome.reason == "cancelled"


async def test_hf_token_reaches_the_node_redacted_in_the_runs_spec(sim_node, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    node = sim_node("o4")
    pool = TransportPool()
    try:
        runner = OfflineRunner(pool)
        name, _ = await runner.start(node, dataclasses.replace(LATENCY, num_iters=2), [0, 1], version=None)
        await runner.follow(node, name, "latency")
        [rec] = [r for r in await runner.records(node) if r.name == name]
    finally:
        await pool.close()
    assert "HF_TOKEN" in rec.spec["env"] and "hf_secret_value_123" not in json.dumps(rec.as_dict())
    assert rec.spec["env"]["HIP_VISIBLE_DEVICES"] == "0,1"
