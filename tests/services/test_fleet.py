"""FleetTelemetry over LocalTransport with the simulated node; failure injection via a wrapper transport."""

import asyncio

from console.core.model import NodeHealth
from console.services.fleet import FleetTelemetry, NodeStateChanged, TelemetryReceived, TopologyChanged
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport
from tests.helpers import wait_for


async def test_streams_frames_into_bounded_history(sim_node):
    events = []
    fleet = FleetTelemetry([sim_node("a"), sim_node("b", compute="CPX")], interval=0.1, history_s=1.0)
    fleet.subscribe(events.append)
    await fleet.start()
    try:
        assert await wait_for(lambda: all(fleet.frames_received(n) >= 15 for n in ("a", "b")))
        assert fleet.snapshot("a").health == NodeHealth.LIVE
        assert len(fleet.snapshot("b").static) == 64
        series = fleet.series("b", 63, "vram_used_mib")
        assert series is not None and len(series) <= series.capacity == 11
        assert fleet.snapshot("a").probe is not None and fleet.snapshot("a").probe.hostname
    finally:
        await fleet.stop()
    kinds = {type(e) for e in events}
    assert {NodeStateChanged, TelemetryReceived, TopologyChanged} <= kinds


class FlakyTransport(LocalTransport):
    """A LocalTransport whose link can be cut or frozen by the test."""

    def __init__(self, name):
        super().__init__(name)
        self.cut = False
        self.frozen = asyncio.Event()
        self.frozen.set()

    async def run(self, argv, **kw):
        if self.cut:
            raise TransportError(f"{self.node_name}: connection refused", "unreachable")
        return await super().run(argv, **kw)

    async def stream_lines(self, argv, **kw):
        async for line in super().stream_lines(argv, **kw):
            await self.frozen.wait()
            if self.cut:
                raise TransportError(f"{self.node_name}: link dropped", "closed")
            yield line


async def test_node_goes_stale_down_and_recovers(sim_node):
    flaky = {}

    def factory(node):
        flaky[node.name] = FlakyTransport(node.name)
        return flaky[node.name]

    fleet = FleetTelemetry([sim_node("x")], TransportPool(factory), interval=0.1, stale_after=0.6, backoff_cap=0.5)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.snapshot("x").health == NodeHealth.LIVE)
        flaky["x"].frozen.clear()  # agent silent: stale, with the age in the reason
        assert await wait_for(lambda: fleet.snapshot("x").health == NodeHealth.STALE, timeout=5)
        assert "no sample" in fleet.snapshot("x").error
        assert fleet.snapshot("x").latest is not None  # last values kept
        flaky["x"].cut = True
        flaky["x"].frozen.set()
        assert await wait_for(lambda: fleet.snapshot("x").health == NodeHealth.DOWN, timeout=5)
        assert fleet.snapshot("x").error.startswith("x: ")
        flaky["x"].cut = False
        assert await wait_for(lambda: fleet.snapshot("x").health == NodeHealth.LIVE, timeout=10)
        assert fleet.snapshot("x").error is None
    finally:
        await fleet.stop()


async def test_set_interval_restarts_streams(sim_node):
    fleet = FleetTelemetry([sim_node("a")], interval=1.0)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("a") >= 1)
        await fleet.set_interval(0.1)
        before = fleet.frames_received("a")
        assert await wait_for(lambda: fleet.frames_received("a") >= before + 8, timeout=10)
        assert fleet.snapshot("a").interval == 0.1
    finally:
        await fleet.stop()
