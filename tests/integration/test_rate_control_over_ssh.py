"""Rate control through a real OpenSSH sshd on 127.0.0.1: the console's control line reaches the
agent's stdin over the SSH channel (through the wrapper's exec), the off-screen node sends `tick`
lines and its samples every N ticks, and on screen again it sends every sample."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.core.model import NodeHealth, SimulateSpec
from console.services.fleet import FleetTelemetry

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
async def test_off_screen_over_ssh_sends_less_and_comes_back(sshd, tmp_path):
    node = sshd.node_spec(
        python="/usr/bin/python3",
        state_dir=str(tmp_path / "node-state"),
        simulate=SimulateSpec(gpu="MI300X", count=8, seed=5),
    )
    # stale after 3 s: below the off-screen node's 5 s between samples, so only its tick lines keep it live
    fleet = FleetTelemetry([node], interval=0.2, stale_after=3.0)

    async def until(predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and not predicate():
            await asyncio.sleep(0.05)
        return predicate()

    await fleet.start()
    try:
        assert await until(lambda: fleet.frames_received("ssh-node") >= 2, 60), fleet.snapshot("ssh-node").error
        fleet.watch([])  # the node is off screen
        assert await until(lambda: fleet.sample_every("ssh-node") == 25, 5)
        # the control line reaches the agent through sshd: wait for the first second without a frame
        quiet_from, seen = time.monotonic(), fleet.frames_received("ssh-node")
        for _ in range(200):  # bounded: 20 s
            if fleet.frames_received("ssh-node") != seen:
                quiet_from, seen = time.monotonic(), fleet.frames_received("ssh-node")
            elif time.monotonic() - quiet_from >= 1.0:
                break
            await asyncio.sleep(0.1)
        before, states = fleet.frames_received("ssh-node"), set()
        for _ in range(70):  # 7 s: one or two samples (every 5 s), and tick lines in between
            states.add(fleet.snapshot("ssh-node").health)
            await asyncio.sleep(0.1)
        assert fleet.frames_received("ssh-node") - before <= 2
        assert states == {NodeHealth.LIVE}  # tick lines: alive, never stale
        fleet.watch(["ssh-node"])
        before = fleet.frames_received("ssh-node")
        assert await until(lambda: fleet.frames_received("ssh-node") >= before + 5, 5)
    finally:
        await fleet.stop()
