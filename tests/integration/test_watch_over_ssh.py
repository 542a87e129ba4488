"""The headless watcher over a real OpenSSH sshd on 127.0.0.1: the node's sshd dies (the link
drops), the watcher says so in one line and keeps running; sshd comes back and the watcher
reconnects by itself; its end leaves no agent running on the node."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path

import pytest

from console.core.health_profile import HealthSettings
from console.core.model import NodeHealth, Profile, SimulateSpec
from console.services.events import EventLog
from console.services.watcher import Watcher
from tests.helpers import wait_for

pytestmark = pytest.mark.integration


def _agents(marker: str) -> list[int]:
    """The node's agent processes: their command line names the node's state folder."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                line = Path(f"/proc/{entry}/cmdline").read_bytes()
                if marker.encode() in line and b"telemetry" in line:
                    out.append(int(entry))
    return out


@pytest.mark.timeout(180)
async def test_the_watcher_reconnects_a_node_whose_sshd_came_back(sshd, tmp_path, caplog):
    state = str(tmp_path / "node-state")
    node = sshd.node_spec(python="/usr/bin/python3", state_dir=state, simulate=SimulateSpec(gpu="MI300X", count=8))
    watcher = Watcher(
        Profile(nodes=(node,)), HealthSettings(), events=EventLog(tmp_path / "data" / "events.jsonl"), heartbeat_s=0.5
    )
    caplog.set_level(logging.INFO, logger="console.watch")
    task = asyncio.create_task(watcher.run())
    try:
        assert await wait_for(lambda: watcher.fleet.snapshot("ssh-node").health == NodeHealth.LIVE, timeout=60)
        sshd.stop()  # the link drops
        assert await wait_for(lambda: watcher.fleet.snapshot("ssh-node").health != NodeHealth.LIVE, timeout=30)
        assert await wait_for(lambda: watcher.fleet.snapshot("ssh-node").health == NodeHealth.DOWN, timeout=30)
        assert not task.done()  # a node's fault never ends the watcher
        sshd.start()
        assert await wait_for(lambda: watcher.fleet.snapshot("ssh-node").health == NodeHealth.LIVE, timeout=60)
        assert await wait_for(lambda: _agents(state), timeout=10)
    finally:
        watcher.stop()
        await asyncio.wait_for(task, 30)
    said = [r.getMessage() for r in caplog.records if r.name == "console.watch"]
    assert any(m.startswith("node ssh-node down") for m in said), said
    assert said.count("node ssh-node live") >= 2, said
    assert await wait_for(lambda: not _agents(state), timeout=15), _agents(state)
