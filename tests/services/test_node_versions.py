"""Each node's versions at every contact: the first reading is recorded silently; a later
console that finds the simulated ROCm upgraded writes a `node.changed` event and marks the
node until the change is acknowledged. The simulated node's real agent answers the probe."""

from __future__ import annotations

import json
from dataclasses import replace

from console.core.baseline.diff import versions_to_dict
from console.core.model import GpuStatic, NodeHealth, NodeSnapshot, ProbeInfo
from console.services.agent_bundle import install_local_agent
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry, TelemetryReceived
from console.services.health_watch import HealthWatch
from console.services.history import HistoryEvents
from console.services.node_versions import VersionsBook, versions_of
from console.sim.host import upgrade_rocm
from tests.helpers import wait_for


async def contact(node, log: EventLog | HistoryEvents) -> HealthWatch:
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


class _Fleet:
    """What HealthWatch reads of a fleet: the node's snapshot, which the test sets."""

    node_names: tuple[str, ...] = ()  # no nodes to look for a watcher of

    def __init__(self) -> None:
        self.snap: NodeSnapshot | None = None

    def configure_health(self, rules) -> None:
        pass

    def subscribe(self, listener) -> None:
        pass

    def snapshot(self, node: str) -> NodeSnapshot:
        assert self.snap is not None
        return self.snap


def _mi300x(modes: list[str]) -> NodeSnapshot:
    """8 MI300X, physical GPU i in modes[i] (CPX: 8 logical GPUs, SPX: 1), as a sample says them."""
    static, index = [], 0
    for physical, mode in enumerate(modes):
        for part in range(8 if mode == "CPX" else 1):
            memory = "NPS4" if mode == "CPX" else "NPS1"
            static.append(
                GpuStatic(
                    index,
                    physical,
                    part,
                    model="AMD Instinct MI300X",
                    vbios="113-1",
                    compute_partition=mode,
                    memory_partition=memory,
                )
            )
            index += 1
    probe = ProbeInfo(rocm="7.0.2-56", vllm="0.32.0")
    return NodeSnapshot(name="cpx", health=NodeHealth.LIVE, static=tuple(static), probe=probe)


def test_a_partition_switch_is_one_partition_event_and_no_node_change_even_after_a_restart(tmp_path):
    """CPX -> SPX on 8 MI300X, the samples taken while the switch goes GPU by GPU (64, 57, ...
    logical GPUs): the node did not change (8x MI300X throughout), the dialog's one
    `partition.switched` is the timeline's only line, and a restarted console marks nothing."""
    log = EventLog(tmp_path / "data" / "events.jsonl")
    fleet = _Fleet()
    watch = HealthWatch(fleet, events=log)  # type: ignore[arg-type]
    for spx in range(9):  # 0: all CPX, then one more GPU in SPX per sample
        fleet.snap = _mi300x(["SPX"] * spx + ["CPX"] * (8 - spx))
        watch.on_fleet_event(TelemetryReceived("cpx", None, 0.0))  # type: ignore[arg-type]
    watch.partition_switched("cpx", list(range(8)), "SPX", "NPS1")
    assert [e.kind for e in log.read()] == ["partition.switched"]
    assert watch.changes == {}
    recorded = json.loads((tmp_path / "data" / "node-versions" / "cpx.json").read_text())
    assert recorded["versions"]["gpus"] == {"models": "8x AMD Instinct MI300X"} and recorded["pending"] == []

    restarted = HealthWatch(fleet, events=log)  # type: ignore[arg-type]
    restarted.on_fleet_event(TelemetryReceived("cpx", None, 0.0))  # type: ignore[arg-type]
    assert restarted.changes == {} and [e.kind for e in log.read()] == ["partition.switched"]


def test_a_record_of_an_older_console_loses_its_misread_partition_switch(tmp_path):
    """An older console counted logical GPUs and marked `64x -> 57x`: the mark goes, the ROCm
    change it holds stays, and the node's next reading is not a change."""
    book = VersionsBook(tmp_path)
    old = versions_of("cpx", ProbeInfo(rocm="7.0.2-56"), _mi300x(["SPX"] * 8))
    pending = ["GPUs models: 64x AMD Instinct MI300X -> 57x AMD Instinct MI300X", "ROCm: 6.4 -> 7.0.2-56"]
    doc = {"versions": {**versions_to_dict(old), "gpus": {"models": "64x AMD Instinct MI300X"}}}
    (tmp_path / "cpx.json").write_text(json.dumps({**doc, "pending": pending}))
    assert book.marked() == {"cpx": "ROCm: 6.4 -> 7.0.2-56"}
    assert book.observe(old) == () and book.pending("cpx") == ["ROCm: 6.4 -> 7.0.2-56"]


async def test_a_second_demo_start_logs_no_change_again(sim_node, tmp_path, monkeypatch):
    """Two demo starts in one data dir (services/baseline_demo.py prepare_demo, then a console):
    the simulated ROCm upgrade is one `node.changed`, written by the first."""
    from console.core.model import Profile
    from console.services.baseline_demo import prepare_demo
    from console.services.history import History

    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    node = sim_node("mi300x-spx", seed=1, state_dir=str(tmp_path / "spx"))
    for _start in range(2):
        assert prepare_demo(Profile(nodes=(node,))) is not None  # into a History of the data folder
        console = History()  # the console's own, on the same data folder: the same store
        watch = await contact(node, console.events)
        assert watch.changes == {"mi300x-spx": "ROCm: 7.0.2-56 -> 7.1.0-21"}  # marked until acknowledged
        console.close()
    history = History()
    [event] = [e for e in history.events.read() if e.kind == "node.changed"]
    assert "ROCm: 7.0.2-56 -> 7.1.0-21" in event.message
    assert not (tmp_path / "data" / "node-versions").exists()  # the store holds the records
    history.close()
