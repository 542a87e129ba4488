"""What the headless watcher asks of its agents (console/services/watcher.py): no screen draws a
sample, so each agent sends a full one every WATCH_SAMPLE_S (or as often as the shortest rule
over a sample metric needs), a `tick` line between that keeps the node live, and its health
lines as always; the GPU rules are judged on every health line, not only on the rare samples."""

from __future__ import annotations

import asyncio
import time

from console.core.alerts import AlertRule, parse_condition
from console.core.health import HealthReading, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import NodeHealth, NodeSpec, Profile
from console.services.events import EventLog
from console.services.fleet import OFFSCREEN_SAMPLE_S
from console.services.watcher import WATCH_SAMPLE_S, Watcher, sample_period
from tests.helpers import wait_for


def _rule(name: str, condition: str) -> AlertRule:
    return AlertRule(name=name, condition=parse_condition(condition))


def test_the_watcher_samples_as_rarely_as_its_rules_allow():
    assert sample_period(()) == WATCH_SAMPLE_S == 30.0
    assert sample_period([_rule("sick", "health == fail"), _rule("ecc", "ecc_uncorrectable > 0")]) == 30.0
    assert sample_period([_rule("hot", "temp_junction_c > 95 for 20s")]) == 20.0  # at most 20 s late
    assert sample_period([_rule("hot", "temp_junction_c > 95")]) == OFFSCREEN_SAMPLE_S  # as a console's off screen
    assert sample_period([_rule("down", "node down for 10s")]) == 30.0  # a node's state needs no sample


async def test_the_watcher_asks_every_agent_for_a_sample_every_30_s_and_its_nodes_stay_live(sim_node, tmp_path):
    node = sim_node("n1", state_dir=str(tmp_path / "n1"))
    watcher = Watcher(
        Profile(nodes=(node,)),
        HealthSettings(HealthRules(interval=0.5)),
        events=EventLog(tmp_path / "data" / "events.jsonl"),
        interval=0.2,
        heartbeat_s=0.5,
    )
    fleet = watcher.fleet
    task = asyncio.create_task(watcher.run())
    try:
        assert await wait_for(lambda: fleet.snapshot("n1").health == NodeHealth.LIVE, timeout=30)
        assert await wait_for(lambda: fleet.sample_every("n1") == 150, timeout=5)  # 30 s at 0.2 s
        await asyncio.sleep(0.5)  # lines already on their way
        frames, readings = fleet.frames_received("n1"), len(fleet.health_readings("n1", 0))
        await asyncio.sleep(4.0)  # 20 ticks: a screen's console decodes 20 samples, an off-screen one 1
        assert fleet.frames_received("n1") - frames <= 1
        assert fleet.snapshot("n1").health == NodeHealth.LIVE  # its tick lines say it is alive
        assert len(fleet.health_readings("n1", 0)) > readings  # health as always
        # bounded: at most 2 samples decoded per node and minute, whatever the interval
        assert 60.0 / (fleet.sample_every("n1") * fleet.interval) <= 2
    finally:
        watcher.stop()
        await asyncio.wait_for(task, 20)


def test_a_health_line_fires_a_gpu_rule_without_waiting_for_a_sample(tmp_path):
    node = NodeSpec(name="n1", host="localhost", transport="local")
    settings = HealthSettings(HealthRules(), (_rule("sick", "health == fail"),))
    watcher = Watcher(Profile(nodes=(node,)), settings, events=EventLog(tmp_path / "events.jsonl"))
    seen: list[tuple] = []
    watcher.sinks.append(lambda notice: seen.append((notice.state, notice.node, notice.gpu)))
    now = time.time()
    watcher.fleet.ingest_health("n1", [HealthReading(now, 2, "amd", ecc_correctable=0, ecc_uncorrectable=0)])
    assert seen == []
    watcher.fleet.ingest_health("n1", [HealthReading(now + 10, 2, "amd", ecc_correctable=0, ecc_uncorrectable=3)])
    assert watcher.fleet.snapshot("n1").latest is None  # no sample has come
    assert seen == [("fired", "n1", 2)]
    assert [e.kind for e in watcher.events.read(kind="alert.fired")] == ["alert.fired"]
