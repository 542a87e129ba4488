"""Each node's versions at every contact: the first reading is recorded silently; a later
console that finds the simulated ROCm upgraded writes a `node.changed` event and marks the
node until the change is acknowledged. The simulated node's real agent answers the probe."""

from __future__ import annotations

import json
from dataclasses import replace

from console.core.model import GpuStatic, NodeHealth, NodeSnapshot, ProbeInfo
from console.services.agent_bundle import install_local_agent
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry
from console.services.health_watch import HealthWatch
from console.services.node_versions import VersionsBook, versions_of
from console.sim.host import upgrade_rocm
from tests.helpers import wait_for


async def contact(node, log: EventLog) -> HealthWatch:
    """One console session: connect, wait for the probe's versions to be recorded, stop."""
    fleet = FleetTelemetry([node], interval=0.2)
    watch = HealthWatch(fleet, events=log)
    await watch.start()
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.snapshot(node.name).probe is not None, timeout=30)
        assert await wait_for(lambda: node.name in watch._versions_seen, timeout=10)
    finally:
        await fleet.stop()
        await watch.stop()
    return watch


async def test_an_upgraded_rocm_is_an_event_and_a_mark_until_acknowledged(sim_node, tmp_path):
    node = sim_node("a")
    log = EventLog(tmp_path / "data" / "events.jsonl")
    first = await contact(node, log)
    assert [e.kind for e in log.read() if e.kind == "node.changed"] == []
    assert first.changes == {}
    recorded = json.loads((tmp_path / "data" / "node-versions" / "a.json").read_text())
    assert recorded["versions"]["rocm"] == "7.0.2-56"  # the simulated host's ROCm

    sim_dir = install_local_agent(node).env_dict()["ROCM_CONSOLE_SIM_DIR"]
    upgrade_rocm(sim_dir, "7.1.0-21")
    second = await contact(node, log)
    [event] = [e for e in log.read() if e.kind == "node.changed"]
    assert event.node == "a" and "ROCm: 7.0.2-56 -> 7.1.0-21" in event.message
    assert second.changes == {"a": "ROCm: 7.0.2-56 -> 7.1.0-21"}

    # a third console sees the same versions: no new event, the mark stays until acknowledged
    third = await contact(node, log)
    assert len([e for e in log.read() if e.kind == "node.changed"]) == 1
    assert third.changes == {"a": "ROCm: 7.0.2-56 -> 7.1.0-21"}
    assert third.acknowledge("a") == 1 and third.changes == {}
    assert VersionsBook(tmp_path / "data" / "node-versions").marked() == {}


def test_settings_of_an_instance_are_not_node_changes_and_console_flags_are_left_out(tmp_path):
    snap = NodeSnapshot(
        name="n",
        health=NodeHealth.LIVE,
        static=(GpuStatic(index=0, physical=0, partition_id=0, model="AMD Instinct MI300X", vbios="113-1"),),
    )
    probe = ProbeInfo(rocm="7.0.2", vllm="0.32.0", numa_balancing="0")
    argv = ["vllm", "serve", "m", "--port", "8001", "--host", "0.0.0.0", "--max-num-seqs", "1", "--enforce-eager"]
    v = versions_of("n", probe, snap, serve_args=argv, preset_env={"VLLM_ROCM_USE_AITER": "1", "HF_TOKEN": "x"})
    assert v.flags == (("--enforce-eager", "true"), ("--max-num-seqs", "1"))
    assert dict(v.preset_env) == {"HF_TOKEN": "<redacted>", "VLLM_ROCM_USE_AITER": "1"}
    assert dict(v.firmware) == {"gpu 0 vbios": "113-1"} and v.rocm == "7.0.2"
    book = VersionsBook(tmp_path)
    assert book.observe(v) == ()  # the first reading
    other = replace(v, flags=(("--max-num-seqs", "8"),))
    assert book.observe(other) == () and book.pending("n") == []
    newer = replace(v, vllm="0.33.0")
    [change] = book.observe(newer)
    assert change.line() == "vLLM: 0.32.0 -> 0.33.0" and book.marked() == {"n": "vLLM: 0.32.0 -> 0.33.0"}
