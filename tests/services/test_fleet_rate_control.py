"""Off-screen nodes' agents send less (FleetTelemetry.watch -> StreamControl -> the agent's stdin),
nodes on screen and nodes a run records get every sample, health keeps flowing, and an agent that
does not read control lines (an older one) streams as it always did."""

from __future__ import annotations

import asyncio
import json

from console.core.health import HealthRules
from console.core.model import NodeHealth, NodeSpec
from console.services.fleet import FleetTelemetry
from console.services.transports import TransportPool
from console.transport.local import LocalTransport
from tests.helpers import wait_for


async def test_off_screen_agents_send_every_fifth_sample_and_stay_live_with_health(sim_node):
    nodes = [sim_node("on"), sim_node("off"), sim_node("rec")]
    fleet = FleetTelemetry(nodes, interval=0.2, stale_after=0.7, health=HealthRules(interval=0.4))
    await fleet.start()
    try:
        assert await wait_for(lambda: all(fleet.frames_received(n.name) >= 2 for n in nodes), timeout=30)
        release = fleet.full_rate("rec")  # a run records it: every sample, on screen or not
        fleet.watch(["on"])
        assert fleet.offscreen_every() == 25  # 5 s at 0.2 s
        assert await wait_for(lambda: fleet.sample_every("off") == 25, timeout=5)
        assert fleet.sample_every("on") == fleet.sample_every("rec") == 1
        await asyncio.sleep(0.5)  # lines already on their way
        counts = {n.name: fleet.frames_received(n.name) for n in nodes}
        readings = len(fleet.health_readings("off", 0))
        await asyncio.sleep(2.0)
        got = {n: fleet.frames_received(n) - counts[n] for n in counts}
        assert got["on"] >= 6 and got["rec"] >= 6, got
        assert got["off"] <= 1, got  # a sample every 5 s
        snap = fleet.snapshot("off")
        assert snap.health == NodeHealth.LIVE, snap.error  # its tick lines keep it live (stale after 0.7 s)
        assert len(fleet.health_readings("off", 0)) > readings  # health lines as before
        # back on screen: the newest sample at once, then every one
        fleet.watch(["on", "off"])
        before = fleet.frames_received("off")
        assert await wait_for(lambda: fleet.frames_received("off") >= before + 5, timeout=5)
        release()
        assert await wait_for(lambda: fleet.sample_every("rec") == 25, timeout=5)
    finally:
        await fleet.stop()


class OldAgent(LocalTransport):
    """An agent from before rate control: its hello lists no control, it never reads stdin."""

    def __init__(self, name):
        super().__init__(name)
        self.controls = []

    async def stream_lines(self, argv, *, env=None, control=None):
        self.controls.append(control)
        async for line in super().stream_lines(argv, env=env, control=control):
            obj = json.loads(line)
            if obj.get("kind") == "hello":
                obj.pop("control", None)
                line = json.dumps(obj)
            yield line


async def test_an_agent_without_rate_control_is_never_asked_and_streams_every_sample(sim_node):
    transports = {}

    def factory(spec):
        transports[spec.name] = OldAgent(spec.name)
        return transports[spec.name]

    fleet = FleetTelemetry([sim_node("old")], TransportPool(factory), interval=0.2)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("old") >= 2, timeout=30)
        fleet.watch([])  # off screen
        before = fleet.frames_received("old")
        await asyncio.sleep(1.5)
        assert fleet.frames_received("old") - before >= 4
        assert fleet.sample_every("old") == 1
        assert transports["old"].controls[0].sent == 0  # nothing written to its stdin
    finally:
        await fleet.stop()


async def test_without_a_screen_every_agent_sends_every_sample(sim_node):
    """No screen has said what it shows (the CLI's status, a run without the UI): no node is off screen."""
    fleet = FleetTelemetry([sim_node("a")], interval=0.2)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("a") >= 2, timeout=30)
        before = fleet.frames_received("a")
        await asyncio.sleep(1.0)
        assert fleet.frames_received("a") - before >= 3 and fleet.sample_every("a") == 1
    finally:
        await fleet.stop()


def test_a_big_fleet_asks_its_off_screen_agents_for_fewer_samples_and_ticks_within_stale_after():
    def fleet_of(count: int, interval: float = 1.0, stale_after: float | None = None) -> FleetTelemetry:
        specs = [NodeSpec(name=f"n{i}", host=f"h{i}") for i in range(count)]
        return FleetTelemetry(specs, interval=interval, stale_after=stale_after)

    small, big = fleet_of(8), fleet_of(1024)
    # every 5 s off screen; at 1,024 nodes every 10 s (the console decodes ~100 such samples a second)
    assert small.offscreen_every() == 5 and big.offscreen_every() == 10
    # a tick line every 2 s between: inside the 3 s after which a silent node is marked stale
    assert small.offscreen_tick() == big.offscreen_tick() == 2 and big.stale_after == 3.0
    # a tick never so rare that a node looks stale between two of them, nor rarer than the samples
    assert fleet_of(8, interval=0.2, stale_after=0.7).offscreen_tick() == 2  # 0.4 s < 0.7 s
    assert fleet_of(8, interval=5.0).offscreen_tick() == 1
    assert fleet_of(8, interval=2.0).offscreen_every() == 2  # (5 s at 2 s: rounded)
    assert fleet_of(8, interval=2.0).offscreen_tick() == 1


async def test_an_unattended_console_gets_its_nodes_on_screen_as_often_as_it_draws_them(sim_node):
    """Nobody at the console (its screen drawn every 3 s): the nodes on screen send a sample every
    3 s, tick lines between keep them live; a node a run records keeps every sample; someone back
    at the keyboard gets every sample again."""
    nodes = [sim_node("on"), sim_node("rec")]
    fleet = FleetTelemetry(nodes, interval=0.2, stale_after=1.0)
    await fleet.start()
    try:
        assert await wait_for(lambda: all(fleet.frames_received(n.name) >= 2 for n in nodes), timeout=30)
        fleet.watch(["on", "rec"])
        release = fleet.full_rate("rec")
        fleet.unattended(3.0)
        assert fleet.sample_every("on") == 15 and fleet.sample_every("rec") == 1
        await asyncio.sleep(0.5)  # lines already on their way
        counts = {n.name: fleet.frames_received(n.name) for n in nodes}
        states = set()
        for _ in range(30):  # 3 s
            states.add(fleet.snapshot("on").health)
            await asyncio.sleep(0.1)
        got = {n: fleet.frames_received(n) - counts[n] for n in counts}
        assert got["on"] <= 2 and got["rec"] >= 6, got
        assert states == {NodeHealth.LIVE}  # tick lines between its samples (stale after 1 s)
        fleet.unattended(None)  # a key
        assert fleet.sample_every("on") == 1
        before = fleet.frames_received("on")
        assert await wait_for(lambda: fleet.frames_received("on") >= before + 5, timeout=10)
        release()
    finally:
        await fleet.stop()
