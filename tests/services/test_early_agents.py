"""The simulated nodes' agents start before the UI; the fleet adopts them; probes wait for the gate."""

from __future__ import annotations

import asyncio
import os
import time

from console.core.model import NodeHealth, NodeSpec, Profile
from console.services.agent_bundle import install_local_agent
from console.services.early_agents import discard_early, start_local_agents
from console.services.fleet import FleetTelemetry
from console.transport import local
from tests.helpers import wait_for


def agent_pids(bundle_dir: str, expect: int | None = None) -> list[int]:
    """Running telemetry agents of one installed bundle (this test's own, by their command line).

    A process in the middle of exec (`nice` becoming python) shows an empty command line for
    a moment: with `expect`, look again a few times until that many are seen."""
    for _ in range(50 if expect is not None else 1):
        pids = _scan(bundle_dir)
        if expect is None or len(pids) == expect:
            break
        time.sleep(0.02)
    return pids


def _scan(bundle_dir: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if bundle_dir.encode() in argv and b"telemetry" in argv:
            pids.append(int(entry))
    return pids


async def test_only_simulated_local_nodes_start_early_and_the_fleet_adopts_them(sim_node, tmp_path):
    sim = sim_node("sim-a", compute="CPX")
    real_local = NodeSpec(name="gpu-box", host="localhost", transport="local", state_dir=str(tmp_path / "real"))
    remote = NodeSpec(name="far", host="10.0.0.9")
    profile = Profile(nodes=(sim, real_local, remote))
    try:
        assert start_local_agents(profile, 0.5) == ["sim-a"]  # a real agent is never started niced
        bundle = install_local_agent(sim).bundle_dir
        assert len(agent_pids(bundle, expect=1)) == 1
        fleet = FleetTelemetry([sim], interval=0.5)
        await fleet.start()
        try:
            assert await wait_for(lambda: fleet.snapshot("sim-a").health == NodeHealth.LIVE)
            assert len(fleet.snapshot("sim-a").static) == 64
            assert local._EARLY == {}  # adopted, not left waiting
            assert len(agent_pids(bundle, expect=1)) == 1  # the early one is the node's agent: none started beside it
        finally:
            await fleet.stop()
        assert await wait_for(lambda: not agent_pids(bundle), timeout=10)
    finally:
        discard_early()


async def test_an_adopted_early_agent_is_rate_controlled_as_one_the_fleet_started(sim_node):
    """The demo's agents are all adopted early ones: off screen, each must send less, as any
    other agent does (they once got /dev/null for stdin, and every sample came, on screen or not)."""
    sim = sim_node("sim-r")
    try:
        assert start_local_agents(Profile(nodes=(sim,)), 0.2) == ["sim-r"]
        fleet = FleetTelemetry([sim], interval=0.2, stale_after=1.0)
        await fleet.start()
        try:
            assert await wait_for(lambda: fleet.frames_received("sim-r") >= 2, timeout=30)
            assert local._EARLY == {}  # the early one was adopted
            fleet.watch([])  # off screen: a sample every 5 s
            assert await wait_for(lambda: fleet.sample_every("sim-r") == 25, timeout=5)
            await asyncio.sleep(1.0)  # lines already on their way
            before = fleet.frames_received("sim-r")
            await asyncio.sleep(2.0)
            assert fleet.frames_received("sim-r") - before <= 1  # every sample would be ~10
            assert fleet.snapshot("sim-r").health == NodeHealth.LIVE  # its tick lines came
        finally:
            await fleet.stop()
    finally:
        discard_early()


async def test_a_node_the_fleet_never_follows_is_stopped_at_exit(sim_node):
    sim = sim_node("sim-b")
    assert start_local_agents(Profile(nodes=(sim,)), 1.0) == ["sim-b"]
    bundle = install_local_agent(sim).bundle_dir
    assert len(agent_pids(bundle, expect=1)) == 1
    assert len(discard_early()) == 1
    assert agent_pids(bundle) == []


async def test_the_versions_probe_waits_for_the_gate(sim_node):
    fleet = FleetTelemetry([sim_node("sim-c")], interval=0.2)
    gate = asyncio.Event()
    fleet.probe_gate = gate
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("sim-c") >= 3)
        assert fleet.snapshot("sim-c").probe is None  # no probe process while the UI draws its first frames
        gate.set()
        assert await wait_for(lambda: fleet.snapshot("sim-c").probe is not None)
        assert fleet.snapshot("sim-c").probe.hostname
    finally:
        await fleet.stop()


async def test_the_health_settings_read_at_start_are_the_early_agents_and_the_fleet_adopts_it(sim_node):
    """cli/tui.py reads the profile's health settings once and hands them to the early start:
    the agent runs with their health interval, so the fleet following those rules adopts it
    (a different interval would be a second agent beside it)."""
    from console.core.health import HealthRules
    from console.core.health_profile import HealthSettings

    sim = sim_node("sim-h")
    rules = HealthRules(interval=7.0)
    try:
        assert start_local_agents(Profile(nodes=(sim,)), 0.5, HealthSettings(rules)) == ["sim-h"]
        bundle = install_local_agent(sim).bundle_dir
        assert len(agent_pids(bundle, expect=1)) == 1
        fleet = FleetTelemetry([sim], interval=0.5, health=rules)
        await fleet.start()
        try:
            assert await wait_for(lambda: fleet.snapshot("sim-h").health == NodeHealth.LIVE)
            assert local._EARLY == {}  # adopted
            assert len(agent_pids(bundle, expect=1)) == 1
        finally:
            await fleet.stop()
    finally:
        discard_early()
