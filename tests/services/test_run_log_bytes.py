"""A run's log with bytes that are not UTF-8 (a client printing binary), followed across a
dropped link: every line arrives once, in order, none lost or read twice. The node's agent
turns each bad byte into one "?" (same byte count), so the console's byte offset stays true."""

from __future__ import annotations

import json
import sys

from console.core.model import NodeSpec
from console.services.agent_bundle import install_agent
from console.services.runs.run import follow_log as follow_run_log
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.local import LocalTransport

# Lines with invalid UTF-8 (a lone continuation byte, a cut 3-byte character, 0xff), a valid
# multi-byte character, and a tqdm-style redraw.
WRITER = r"""
import sys, time
out = sys.stdout.buffer
for i in range(12):
    out.write(b"line %d \x80\xe2\x82 \xff ok \xe2\x82\xac\rredraw %d\n" % (i, i))
    out.flush()
    time.sleep(0.02)
"""


class DropOnce(LocalTransport):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.dropped = False

    async def stream_lines(self, argv, **kw):
        count = 0
        async for line in super().stream_lines(argv, **kw):
            yield line
            count += 1
            if "logs" in argv and not self.dropped and count >= 7:
                self.dropped = True
                raise TransportError(f"{self.node_name}: link dropped", "closed")


async def test_bad_bytes_in_a_followed_log_keep_offsets_true(tmp_path):
    node = NodeSpec(name="n1", host="localhost", transport="local", python=sys.executable, state_dir=str(tmp_path))
    transport = DropOnce("n1")
    pool = TransportPool(lambda n: transport)
    cmd = await install_agent(transport, node)
    spec = {"name": "run-bytes", "argv": [sys.executable, "-c", WRITER], "env": {}}
    started = await transport.run(
        cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", "runs", "start"),
        input=json.dumps(spec),
        timeout=30,
    )
    assert started.ok, started.stderr
    lines = [
        line
        async for line in follow_run_log(
            pool, node, cmd, "run-bytes", reconnect_attempts=3, lost=lambda why: AssertionError(why)
        )
    ]
    assert transport.dropped
    expected = []
    for i in range(12):
        expected += [f"line {i} ??? ? ok €", f"redraw {i}"]
    assert [ln for ln in lines if ln.strip()] == expected
