"""The headless watcher (console/services/watcher.py) over simulated local nodes: a fault fires
its alert once, into the event log, alert-states.json and the sinks; a restarted watcher resumes
it without firing it again and clears it when the fault goes; a second watcher of the fleet is
refused naming the first; a node whose agent dies is reconnected."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys

import pytest

from console.core.alerts import AlertRule, parse_condition
from console.core.health import FAIL, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import NodeHealth, Profile
from console.services import demo_faults
from console.services.demo import bound_processes, claim_lifeline
from console.services.events import EventLog
from console.services.watcher import Watcher, WatcherAlerts, WatcherBusy, acquire_lock
from console.services.watcher_presence import ALERTS_FILE, AlertState, read_alert_states, read_watcher
from tests.helpers import wait_for


def _recorder(tmp_path):
    out = tmp_path / "alerts.jsonl"
    script = tmp_path / "record.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'a').write(sys.stdin.read())\n")
    return (sys.executable, str(script)), out


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


async def _run(watcher: Watcher) -> asyncio.Task:
    task = asyncio.create_task(watcher.run())
    assert await wait_for(lambda: watcher.heartbeat_at is not None, timeout=10)
    return task


async def _end(watcher: Watcher, task: asyncio.Task) -> None:
    watcher.stop()
    await asyncio.wait_for(task, 20)


async def test_a_fault_fires_once_and_a_restarted_watcher_resumes_it_without_firing_again(sim_node, tmp_path):
    node = sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))
    command, out = _recorder(tmp_path)
    rule = AlertRule(name="sick", condition=parse_condition("health == fail"), command=command, repeat_after=0)
    settings = HealthSettings(HealthRules(interval=0.5), (rule,))
    log = EventLog(tmp_path / "data" / "events.jsonl")
    seen: list[str] = []

    first = Watcher(Profile(nodes=(node,)), settings, events=log, heartbeat_s=0.5)
    first.sinks.append(lambda notice: seen.append(notice.state))
    task = await _run(first)
    assert read_watcher(first.folder) is not None  # consoles see it
    assert await wait_for(lambda: first.fleet.snapshot("n1").health == NodeHealth.LIVE, timeout=30)
    demo_faults.inject(node, 2, "ecc_uncorrectable")
    assert await wait_for(lambda: len(_lines(out)) == 1, timeout=30)
    assert seen == ["fired"]
    states = read_alert_states(first.folder)
    assert [(s.rule, s.node, s.gpu) for s in states] == [("sick", "n1", 2)]
    assert first.state().alerts[0].gpu == 2  # what an exporter reads
    await _end(first, task)
    assert read_watcher(first.folder) is None  # a clean end: consoles take over at once

    # The fault is still there: the next watcher sees it hold and says nothing new.
    second = Watcher(Profile(nodes=(node,)), settings, events=log, heartbeat_s=0.5)
    task = await _run(second)
    assert await wait_for(lambda: second.fleet.snapshot("n1").health_of(2) is not None, timeout=30)
    assert await wait_for(lambda: second.fleet.snapshot("n1").health_of(2).verdict.state == FAIL, timeout=15)
    await asyncio.sleep(6)  # past an off-screen sample, when the rules are judged
    assert len(_lines(out)) == 1
    assert [e.kind for e in log.read(kind="alert.fired")] == ["alert.fired"]
    # ... and when it goes, the resumed alert clears.
    demo_faults.clear(node)
    assert await wait_for(lambda: len(_lines(out)) == 2, timeout=30)
    assert _lines(out)[1]["state"] == "cleared"
    assert read_alert_states(second.folder) == []
    await _end(second, task)


async def test_a_second_watcher_of_the_fleet_is_refused_naming_the_first(sim_node, tmp_path):
    node = sim_node("n1", state_dir=str(tmp_path / "n1"))
    log = EventLog(tmp_path / "data" / "events.jsonl")
    first = Watcher(Profile(nodes=(node,)), HealthSettings(), events=log, heartbeat_s=0.5)
    task = await _run(first)
    second = Watcher(Profile(nodes=(node,)), HealthSettings(), events=log)
    with pytest.raises(WatcherBusy, match=f"watched already by .*:{os.getpid()}"):
        second.lock()
    await _end(first, task)
    os.close(acquire_lock(first.folder))  # released at the end


def test_a_resumed_alert_not_seen_again_is_cleared_after_its_grace(tmp_path):
    now = [1000.0]
    rule = AlertRule(name="hot", condition=parse_condition("temp_junction_c > 95 for 30s"))
    log = EventLog(tmp_path / "events.jsonl")
    old = AlertState("hot", "n1", 3, None, since=900.0, fired=930.0, text="FIRED hot")
    gone = AlertState("removed-rule", "n1", 1, None, since=900.0, fired=930.0)
    alerts = WatcherAlerts(
        [rule], events=log, states_path=tmp_path / ALERTS_FILE, resumed=[old, gone], clock=lambda: now[0]
    )
    assert list(alerts.open) == [old.key]  # a state of a rule no longer in the profile is dropped
    alerts.observe_gpu(1001.0, "n1", 3, {"temp_junction_c": 99.0}, None)
    assert alerts.tick(1040.0) == []  # held 30 s again: still the same alert, not fired anew
    assert log.read() == []
    alerts.observe_gpu(1050.0, "n1", 3, {"temp_junction_c": 50.0}, None)
    assert [e.kind for e in log.read()] == ["alert.cleared"]

    other = WatcherAlerts([rule], events=log, states_path=tmp_path / ALERTS_FILE, resumed=[old], clock=lambda: now[0])
    assert other.tick(1080.0) == []  # within its duration + grace
    cleared = other.tick(1000.0 + 30 + 61)
    assert [e.kind for e in cleared] == ["alert.cleared"]
    assert json.loads((tmp_path / ALERTS_FILE).read_text())["alerts"] == []


def _agent_pids(token: str) -> list[int]:
    return [p for p in bound_processes(token) if b"telemetry" in open(f"/proc/{p}/cmdline", "rb").read()]


async def test_a_node_whose_agent_dies_is_reconnected_and_said_on_stderr(sim_node, tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_LIFELINE", "")
    token = claim_lifeline()
    node = sim_node("n1", state_dir=str(tmp_path / "n1"))
    watcher = Watcher(
        Profile(nodes=(node,)), HealthSettings(), events=EventLog(tmp_path / "d" / "events.jsonl"), heartbeat_s=0.5
    )
    caplog.set_level(logging.INFO, logger="console.watch")
    task = await _run(watcher)
    try:
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").health == NodeHealth.LIVE, timeout=30)
        first = _agent_pids(token)
        assert first
        for pid in first:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").health != NodeHealth.LIVE, timeout=15)
        assert await wait_for(lambda: watcher.fleet.snapshot("n1").health == NodeHealth.LIVE, timeout=30)
        assert set(_agent_pids(token)).isdisjoint(first)
    finally:
        await _end(watcher, task)
    said = [r.getMessage() for r in caplog.records if r.name == "console.watch"]
    assert any(m.startswith("node n1 down") for m in said), said
    assert [m for m in said if m == "node n1 live"][-1:] == ["node n1 live"]
    assert len([m for m in said if m == "node n1 live"]) >= 2
    assert await wait_for(lambda: not _agent_pids(token), timeout=10)  # the end ends its agent
