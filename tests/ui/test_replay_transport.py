"""ReplayTransport: recorded agent traces drive the real fleet service."""

from __future__ import annotations

from console.core.model import NodeHealth, NodeSpec, SimulateSpec
from console.services.fleet import FleetTelemetry
from console.services.transports import TransportPool
from console.transport.replay import ReplayTransport, load_traces, replay_factory
from tests.helpers import wait_for
from tests.ui.scenes.fleet import TRACES


def node(name):
    return NodeSpec(name=name, host="localhost", transport="local", simulate=SimulateSpec())


def test_traces_are_small_and_complete():
    traces = load_traces(TRACES)
    assert set(traces) == {"mi300x-spx", "mi300x-cpx", "mi355x"}
    for name, trace in traces.items():
        assert trace.probe is not None and trace.samples() == 30
        assert (TRACES / f"{name}.jsonl").stat().st_size < 256 * 1024


async def test_fleet_over_replay_reaches_live_with_probe_and_history():
    traces = load_traces(TRACES, ["mi300x-cpx"])
    fleet = FleetTelemetry([node("mi300x-cpx")], TransportPool(replay_factory(traces)))
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("mi300x-cpx") == 30, timeout=10)
        snap = fleet.snapshot("mi300x-cpx")
        assert snap.health == NodeHealth.LIVE and len(snap.static) == 64
        assert snap.probe.hostname == "mi300x-cpx" and snap.source == "amdsmi (simulated)"
        assert len(fleet.series("mi300x-cpx", 0, "util_pct")) == 30
    finally:
        await fleet.stop()


class CountingReplay(ReplayTransport):
    """Counts the console's tries to reach the node (each one looks at the link first)."""

    tries = 0

    def _check_link(self) -> None:
        self.tries += 1
        super()._check_link()


async def test_fail_end_keeps_the_node_down():
    traces = load_traces(TRACES, ["mi355x"])
    replay = CountingReplay("mi355x", traces["mi355x"], end="fail", fail_reason="x: gone")
    fleet = FleetTelemetry([node("mi355x")], TransportPool(lambda spec: replay), backoff_cap=0.05)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.snapshot("mi355x").health == NodeHealth.DOWN, timeout=10)
        tried = replay.tries
        assert await wait_for(lambda: replay.tries >= tried + 2, timeout=10)  # retries fail the same way
        snap = fleet.snapshot("mi355x")
        assert snap.health == NodeHealth.DOWN and snap.error == "x: gone" and snap.latest is not None
    finally:
        await fleet.stop()


async def test_loop_end_restamps_samples():
    trace = load_traces(TRACES, ["mi300x-spx"])["mi300x-spx"]
    transport = ReplayTransport("mi300x-spx", trace, end="loop", pace=0)
    lines = []
    async for line in transport.stream_lines(["python3", "agent.py", "telemetry"]):
        lines.append(line)
        if len(lines) == 2 + 30 + 30:
            break
    first, again = lines[2], lines[2 + 30]
    assert '"seq":30' in again and first != again


async def test_commands_get_plausible_answers():
    trace = load_traces(TRACES, ["mi300x-spx"])["mi300x-spx"]
    t = ReplayTransport("mi300x-spx", trace)
    assert (await t.run(["sh", "-c", 'printf %s "$HOME"'])).stdout == "/home/demo\n"
    check = await t.run(
        ["sh", "-c", 'printf "%s\\n" "$HOME"; for f; do [ -f "$f" ] || exit 1; done; echo present', "sh", "/x"]
    )
    assert check.ok and check.stdout.splitlines() == ["/home/demo", "present"]
    assert '"kind":"probe"' in (await t.run(["python3", "/a/node_agent.py", "probe"])).stdout
    assert (await t.run(["rm", "-rf", "/"])).exit_status == 127
