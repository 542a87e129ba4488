"""services/tether.py: the lifeline a console command gives the instances it owns (W2). On a
local node it is the command's own pid; elsewhere it is the node's `tether` process, alive while
the command holds its channel, ended when the block ends, and a tether that ends on its own
(the link dropped) is reported, naming the node. The node here is this machine reached through
the local transport under an SSH node's spec, so the real agent runs the tether."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from console.core.model import NodeSpec
from console.services.demo import ENV, lifeline_token
from console.services.tether import tethered
from console.services.transports import TransportPool
from console.transport.local import LocalTransport
from tests.agent.test_supervisor import alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def far_node(tmp_path: Path) -> NodeSpec:
    return NodeSpec(name="far", host="far.example", state_dir=str(tmp_path / "state"), python=sys.executable)


def pool_here() -> TransportPool:
    return TransportPool(lambda node: LocalTransport(node.name))


async def gone(pid: int, timeout: float) -> bool:
    for _ in range(int(timeout / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not alive(pid)


async def test_a_local_node_is_tied_to_this_process(tmp_path):
    node = NodeSpec(name="here", host="localhost", transport="local", state_dir=str(tmp_path / "state"))
    async with tethered(pool_here(), node) as tie:
        assert tie.env == {ENV: lifeline_token()}


async def test_the_nodes_tether_lives_for_the_block_and_ends_with_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    pool = pool_here()
    try:
        async with tethered(pool, far_node(tmp_path)) as tie:
            pid = int(tie.env[ENV].split(":")[0])
            assert pid != os.getpid() and b"tether" in Path(f"/proc/{pid}/cmdline").read_bytes()
            await asyncio.sleep(1.5)
            assert alive(pid) and tie.lost is None
        assert await gone(pid, 5), "the tether outlived the command's block"
        assert tie.lost is None  # we ended it: nothing was lost
    finally:
        await pool.close()


async def test_a_tether_that_ends_on_its_own_is_reported_naming_the_node(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    pool = pool_here()
    try:
        async with tethered(pool, far_node(tmp_path)) as tie:
            os.kill(int(tie.env[ENV].split(":")[0]), signal.SIGKILL)  # as if the link had dropped
            for _ in range(100):
                if tie.lost:
                    break
                await asyncio.sleep(0.05)
            assert tie.lost is not None and tie.lost.startswith("far: the link to the node was lost")
            assert "the node stopped what this command started" in tie.lost
    finally:
        await pool.close()
