"""Whatever goes wrong with a node's stream, its row says so: never stuck at "connecting"."""

from __future__ import annotations

import pytest

from console.core.model import NodeHealth
from console.services.fleet import FleetTelemetry
from console.services.status import collect_status
from console.services.transports import TransportPool
from console.transport.local import LocalTransport
from tests.helpers import wait_for


class Broken(LocalTransport):
    """The agent starts, then the stream fails in a way nothing more specific catches."""

    def __init__(self, name: str, exc: BaseException) -> None:
        super().__init__(name)
        self.exc = exc

    async def stream_lines(self, argv, **kw):
        yield '{"kind":"hello","source":"amdsmi","interval":1}'
        raise self.exc

    async def run(self, argv, **kw):
        if "telemetry" in argv:
            raise self.exc
        return await super().run(argv, **kw)


@pytest.mark.parametrize(
    "exc", [RuntimeError("boom \x1b[2J"), UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), KeyError("gpus")]
)
async def test_an_unexpected_failure_marks_the_node_down_with_its_reason(sim_node, exc):
    node = sim_node("n1")
    fleet = FleetTelemetry([node], TransportPool(lambda n: Broken(n.name, exc)), interval=0.1, backoff_cap=5)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.snapshot("n1").health == NodeHealth.DOWN, timeout=10)
        error = fleet.snapshot("n1").error
        assert error.startswith(f"n1: unexpected {type(exc).__name__}") and "\x1b" not in error, error
    finally:
        await fleet.stop()

    [snap] = await collect_status([node], timeout=10, pool=TransportPool(lambda n: Broken(n.name, exc)), probe=False)
    assert snap.health == NodeHealth.DOWN and snap.error.startswith(f"n1: unexpected {type(exc).__name__}")
