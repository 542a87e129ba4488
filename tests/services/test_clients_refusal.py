"""Issue B2: the simulated node's vLLM has no AIPerf beside it (its GuideLLM is the simulator's,
tests/services/runs/test_demo_multi_turn.py): a run of such a preset there is refused before
anything starts, in one line naming the node and the client."""

from __future__ import annotations

import pytest

from console.core.instance_view import InstanceState, InstanceView
from console.core.model import BenchPreset
from console.services.runs.serving import BenchRunError, BenchRunner
from console.services.transports import TransportPool


@pytest.mark.parametrize("client", ["aiperf"])
async def test_an_outside_client_is_refused_on_a_simulated_node(client, sim_node):
    node = sim_node("demo")
    view = InstanceView(node="demo", name="i", state=InstanceState.READY, port=8000, model="m", served_models=("m",))
    preset = BenchPreset(name="p", client=client, input_len=8, output_len=8, max_concurrency=(1,))
    pool = TransportPool()
    try:
        with pytest.raises(BenchRunError) as err:
            await BenchRunner(pool, record_telemetry=False).start(node, view, preset, max_concurrency=1)
    finally:
        await pool.close()
    assert str(err.value) == f'demo: client {client} does not run on a simulated node (use client = "vllm-bench")'
