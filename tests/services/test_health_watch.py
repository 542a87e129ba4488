"""GPU health while the console runs: the fleet's health trackers, HealthWatch writing the
timeline to events.jsonl and driving the alert rules (a real command reads the alert on
stdin), and the serve preflight refusing a GPU in fail health.

The simulated node's agent streams its real sample lines over LocalTransport; the health
lines are added by the transport below (built per the contract, the agent's own health
lines dropped), so the test decides when a GPU develops an uncorrectable error."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from console.core.alerts import AlertRule, parse_condition
from console.core.events import Event
from console.core.health import FAIL, OK, HealthRules
from console.core.health_profile import HealthSettings
from console.core.instance_view import InstanceState, InstanceView
from console.core.model import NodeHealth, ServePreset
from console.core.telemetry import parse_agent_line
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry, GpuHealthChanged, NodeStateChanged
from console.services.health_watch import HealthWatch
from console.services.instances import InstanceError, InstancePoller
from console.services.status import judge, sample_node
from console.services.transports import TransportPool
from console.transport.local import LocalTransport
from tests.helpers import free_port, wait_for
from tests.services.health_lines import amd_entry, health_line

TINY = ServePreset(name="tiny", model="tiny-llama", tp=1, args=("--dtype", "float32", "--max-model-len", "2048"))


class HealthTransport(LocalTransport):
    """The node's real stream, with a health line of every GPU after each sample line."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.uncorrectable: dict[int, int] = {}
        self.bad_entry = False

    async def stream_lines(self, argv, **kw):
        async for line in super().stream_lines(argv, **kw):
            if '"kind": "health"' in line or '"kind":"health"' in line:
                continue  # the agent's own reader (once it has one): this test decides the health
            yield line
            if '"kind": "sample"' in line or '"kind":"sample"' in line:
                ts = json.loads(line)["ts"]
                entries: list = [amd_entry(g, uncorrectable=self.uncorrectable.get(g, 0)) for g in range(8)]
                if self.bad_entry:
                    entries.append({"physical": 9, "vendor": "amd", "results": ["not", "an", "object"]})
                yield health_line(ts, entries)


def stdin_recorder(tmp_path: Path) -> tuple[list[str], Path]:
    """A real command that appends the JSON it reads on stdin to a file, one line per alert."""
    out = tmp_path / "alerts.jsonl"
    script = tmp_path / "record_alert.py"
    script.write_text(
        "import json, sys\n"
        f"with open({str(out)!r}, 'a') as fh:\n"
        "    fh.write(json.dumps(json.load(sys.stdin)) + '\\n')\n"
    )
    return [sys.executable, str(script)], out


async def test_uncorrectable_ecc_turns_the_gpu_fail_writes_events_and_runs_the_alert(sim_node, tmp_path):
    transports: dict[str, HealthTransport] = {}

    def factory(node):
        transports[node.name] = HealthTransport(node.name)
        return transports[node.name]

    command, alert_out = stdin_recorder(tmp_path)
    rule = AlertRule(name="gpu-sick", condition=parse_condition("health == fail"), command=command, repeat_after=0)
    log = EventLog(tmp_path / "data" / "events.jsonl")
    fleet = FleetTelemetry([sim_node("a")], TransportPool(factory), interval=0.2)
    watch = HealthWatch(fleet, HealthSettings(HealthRules(interval=1.0), (rule,)), events=log)
    changes: list[GpuHealthChanged] = []
    fleet.subscribe(lambda e: changes.append(e) if isinstance(e, GpuHealthChanged) else None)
    await watch.start()
    await fleet.start()
    try:
        assert await wait_for(lambda: len(fleet.snapshot("a").gpu_health) == 8, timeout=30)
        assert all(h.verdict.state == OK for h in fleet.snapshot("a").gpu_health)
        transports["a"].uncorrectable[3] = 1
        assert await wait_for(lambda: fleet.snapshot("a").health_of(3).verdict.state == FAIL, timeout=10)
        sick = fleet.snapshot("a").health_of(3)
        assert sick.verdict.reasons == "1 uncorrectable ECC error"
        assert sick.since == sick.reading.t  # the state began with the reading that showed it
        assert fleet.snapshot("a").health_of(2).verdict.state == OK
        assert any(e.node == "a" and e.gpus[3].verdict.state == FAIL for e in changes)
        assert len(fleet.health_readings("a", 3)) >= 2 and fleet.health_readings("a", 9) == ()
        assert await wait_for(lambda: alert_out.exists() and alert_out.read_text().strip(), timeout=15)
        [alert] = [json.loads(x) for x in alert_out.read_text().splitlines()]
        assert (alert["alert"], alert["state"], alert["node"], alert["gpu"]) == ("gpu-sick", "fired", "a", 3)
        assert alert["text"] == "[rocm-console] FIRED gpu-sick: a GPU 3: health == fail"

        transports["a"].uncorrectable[3] = 0  # a driver reload resets the count: the GPU is well again
        assert await wait_for(lambda: fleet.snapshot("a").health_of(3).verdict.state == OK, timeout=10)
        assert await wait_for(lambda: any(e.kind == "alert.cleared" for e in log.read()), timeout=5)
    finally:
        await fleet.stop()
        await watch.stop()
    events = log.read()
    kinds = [(e.kind, e.gpu) for e in reversed(events)]  # oldest first
    assert kinds[0] == ("node.up", None)
    ecc = next(e for e in events if e.kind == "gpu.ecc")
    assert ecc.gpu == 3 and ecc.severity == "fail" and ecc.message == "uncorrectable ECC +1 (now 1)"
    to_fail = next(e for e in events if e.kind == "gpu.health" and e.details["to"] == FAIL)
    assert to_fail.gpu == 3 and to_fail.message == "health ok -> fail: 1 uncorrectable ECC error"
    fired = next(e for e in events if e.kind == "alert.fired")
    assert fired.gpu == 3 and fired.details["rule"] == "gpu-sick"
    assert kinds.index(("gpu.health", 3)) < kinds.index(("alert.fired", 3)) < kinds.index(("alert.cleared", 3))
    # the log is the console's own store: one JSON object per line, each an event
    lines = (tmp_path / "data" / "events.jsonl").read_text().splitlines()
    assert len(lines) == len(events) and all(json.loads(x)["kind"] for x in lines)


async def test_one_bad_gpu_entry_does_not_take_the_stream_down(sim_node):
    transports: dict[str, HealthTransport] = {}

    def factory(node):
        transports[node.name] = transport = HealthTransport(node.name)
        transport.bad_entry = True
        return transport

    fleet = FleetTelemetry([sim_node("b")], TransportPool(factory), interval=0.2)
    await fleet.start()
    try:
        assert await wait_for(lambda: fleet.frames_received("b") >= 5, timeout=30)
        snap = fleet.snapshot("b")
        assert snap.health == NodeHealth.LIVE and snap.error is None
        assert [h.physical for h in snap.gpu_health] == list(range(8))
        [note] = fleet.health_notes("b")
        assert note.startswith("health of GPU 9 skipped: GPU 9: results is not an object")
    finally:
        await fleet.stop()


def view(name: str, state: InstanceState, pid: int = 10, gpus=(1,), reason=None) -> InstanceView:
    return InstanceView("n1", name, state, pid=pid, gpus=gpus, reason=reason)


def test_instance_states_become_events_after_the_first_look(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    fleet = FleetTelemetry([])
    ticks = iter(range(500, 600))
    watch = HealthWatch(fleet, events=log, clock=lambda: float(next(ticks)))
    # what the console finds at its first look is no news
    assert watch.observe_instances("n1", [view("old", InstanceState.READY)]) == []
    got = watch.observe_instances(
        "n1", [view("old", InstanceState.READY), view("new", InstanceState.LOADING, pid=11, gpus=(2, 3))]
    )
    assert [(e.kind, e.instance, e.message) for e in got] == [("instance.started", "new", "new starting on GPUs 2,3")]
    got = watch.observe_instances(
        "n1",
        [view("old", InstanceState.FAILED, reason="exited with code 1"), view("new", InstanceState.READY, pid=11)],
    )
    assert [(e.kind, e.instance, e.severity) for e in got] == [
        ("instance.failed", "old", "fail"),
        ("instance.ready", "new", "info"),
    ]
    assert got[0].message == "old failed on GPUs 1: exited with code 1"
    assert watch.observe_instances("n1", [view("new", InstanceState.READY, pid=11)]) == []  # no change, no event
    switched = watch.partition_switched("n1", [0, 1], "CPX", "NPS4")
    assert switched.message == "partition switched to CPX/NPS4 on GPUs 0,1"
    watch.benchmark_started("n1", "sweep-1", "new")
    watch.benchmark_finished("n1", "sweep-1", "new", ok=False)
    stored = [(e.kind, e.instance) for e in reversed(log.read())]
    assert stored[0] == ("instance.started", "new")
    assert set(stored[1:3]) == {("instance.failed", "old"), ("instance.ready", "new")}  # one poll, one time
    assert stored[3:] == [("partition.switched", None), ("benchmark.started", "new"), ("benchmark.finished", "new")]


def test_an_unwritable_log_is_said_once_and_the_console_goes_on(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    watch = HealthWatch(FleetTelemetry([]), events=EventLog(blocker / "events.jsonl"))
    for _ in range(3):
        watch.partition_switched("n1", [0], "SPX", None)
    warnings = [r for r in caplog.records if r.name == "console.health"]
    assert len(warnings) == 1 and "cannot write" in warnings[0].getMessage()


async def test_serve_preflight_refuses_a_gpu_in_fail_health_unless_forced(sim_node, service):
    svc, started = service
    node = sim_node("n1")
    snap = await sample_node(svc.pool, node, probe=False)
    frame = parse_agent_line(health_line(100.0, [amd_entry(0), amd_entry(1, pending=1)]))
    snap = dataclasses.replace(snap, gpu_health=judge(frame.readings, HealthRules()))
    with pytest.raises(InstanceError) as refused:
        await svc.start(node, TINY, gpus=[1], snapshot=snap, port=free_port(), name="on-sick")
    assert str(refused.value) == "n1: GPU 1 is in fail health: 1 bad page pending retirement (--force to start anyway)"
    assert not [v for v in await svc.list(node) if v.name == "on-sick"]  # nothing started
    view = await svc.start(node, TINY, gpus=[1], snapshot=snap, port=free_port(), name="on-sick", force=True)
    started.append((node, "on-sick"))
    assert view.state == InstanceState.STARTING
    assert view.warnings[0] == "GPU 1 is in fail health: 1 bad page pending retirement (forced)"


async def test_a_failure_reason_names_the_gpu_events_around_it(sim_node, service, tmp_path):
    svc, started = service
    node = sim_node("n2")
    log = EventLog(tmp_path / "events.jsonl")
    fleet = FleetTelemetry([])
    watch = HealthWatch(fleet, events=log)
    snap = await sample_node(svc.pool, node, probe=False)
    await svc.start(node, TINY, gpus=[0], port=free_port(), name="dies", overrides={"max_model_len": "999999"})
    started.append((node, "dies"))
    failed = await svc.wait_ready(node, "dies", timeout=60)
    assert failed.state == InstanceState.FAILED
    # the GPU events the fleet saw meanwhile (a reset of GPU 0; GPU 1's ECC is not this instance's)
    now = time.time()
    watch.record(
        [
            Event(now - 5, "gpu.reset", "n2", 0, severity="warn", message="GPU reset"),
            Event(now - 4, "gpu.ecc", "n2", 1, severity="fail", message="uncorrectable ECC +1 (now 1)"),
        ]
    )
    poller = InstancePoller(svc, events=log)
    [polled] = [v for v in await poller.poll(node, snap) if v.name == "dies"]
    assert polled.reason.startswith("max_model_len too large: ")
    assert "GPU events: GPU 0 " in polled.reason and "GPU reset" in polled.reason
    assert "GPU 1" not in polled.reason


async def test_a_node_down_rule_fires_from_the_tick_without_a_new_observation(tmp_path):
    command, alert_out = stdin_recorder(tmp_path)
    rule = AlertRule(name="node-gone", condition=parse_condition("node down for 2s"), command=command)
    log = EventLog(tmp_path / "events.jsonl")
    watch = HealthWatch(FleetTelemetry([]), HealthSettings(alerts=(rule,)), events=log)
    await watch.start()
    try:
        watch.on_fleet_event(NodeStateChanged("n9", NodeHealth.DOWN, "n9: connection refused"))
        assert [e.kind for e in log.read()] == ["node.down"]
        assert not alert_out.exists()  # not yet: the rule wants 2 s
        assert await wait_for(lambda: alert_out.exists() and alert_out.read_text().strip(), timeout=10)
    finally:
        await watch.stop()
    [alert] = [json.loads(x) for x in alert_out.read_text().splitlines()]
    assert (alert["alert"], alert["node"], alert["value"]) == ("node-gone", "n9", "down")
    down = next(e for e in log.read() if e.kind == "node.down")
    assert down.message == "node down: n9: connection refused" and down.severity == "fail"
    fired = next(e for e in log.read() if e.kind == "alert.fired")
    assert fired.time - down.time >= 2.0


def test_with_a_history_the_timeline_and_node_versions_go_to_its_store(tmp_path):
    from console.core.baseline.diff import NodeVersions
    from console.services.history import History

    history = History(None, tmp_path / "data")
    watch = HealthWatch(FleetTelemetry([]), events=history.events)
    watch.partition_switched("n1", [0], "CPX", None)
    watch.versions.observe(NodeVersions("n1", rocm="7.0.2"))
    assert watch.versions.observe(NodeVersions("n1", rocm="7.1.0"))  # a change, seen in the store's record
    assert [e.kind for e in history.open().events.read()] == ["partition.switched"]
    assert history.versions_book().marked() == {"n1": watch.versions.marked()["n1"]}
    assert not (tmp_path / "data" / "events.jsonl").exists() and not (tmp_path / "data" / "node-versions").exists()
    history.close()


def test_a_store_that_cannot_be_opened_keeps_events_and_versions_in_the_data_folder(tmp_path, caplog):
    from console.core.baseline.diff import NodeVersions
    from console.services.history import History

    data = tmp_path / "data"
    (data / "store.sqlite3").mkdir(parents=True)  # not a database: the store cannot be opened
    history = History(None, data)
    watch = HealthWatch(FleetTelemetry([]), events=history.events)
    watch.partition_switched("n1", [0], "CPX", None)
    watch.versions.observe(NodeVersions("n1", rocm="7.0.2"))
    assert [e.kind for e in EventLog(data / "events.jsonl").read()] == ["partition.switched"]
    assert (data / "node-versions").is_dir()
    assert not [r for r in caplog.records if r.name == "console.health"]  # the face says the store's problem
