"""A TUI console with [alertmanager] posts its alerts there while no watcher runs, and nothing
while a watcher of its fleet runs (the watcher posts them: one poster per alert)."""

from __future__ import annotations

from console.core.alerts import AlertRule, parse_condition
from console.core.health import FAIL, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import AlertmanagerSpec, Profile
from console.services import demo_faults
from console.services.events import EventLog
from console.ui.app import ConsoleApp
from tests.helpers import wait_for
from tests.services.test_alertmanager import FakeAlertmanager
from tests.ui.test_watched_console import _live_watcher


async def _console_with_fault(sim_node, tmp_path, url: str, *, watched: bool) -> None:
    node = sim_node("n1", seed=3, state_dir=str(tmp_path / "n1"))
    rule = AlertRule(name="sick", condition=parse_condition("health == fail"), severity="fail", repeat_after=0)
    if watched:
        _live_watcher(tmp_path / "data", [node])
    app = ConsoleApp(
        Profile(nodes=(node,), alertmanager=AlertmanagerSpec(url, resend_interval=1)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        events=EventLog(tmp_path / "data" / "events.jsonl"),
        health=HealthSettings(HealthRules(interval=0.5), (rule,)),
    )
    async with app.run_test(size=(160, 40)) as pilot:
        assert await wait_for(lambda: len(app.fleet.snapshot("n1").gpu_health) == 8, timeout=30)
        demo_faults.inject(node, 4, "ecc_uncorrectable")
        assert await wait_for(lambda: app.fleet.snapshot("n1").health_of(4).verdict.state == FAIL, timeout=15)
        await wait_for(lambda: False, timeout=3)  # a tick, a post and two re-sends
        await pilot.pause()


async def test_an_unwatched_console_posts_its_alert_to_alertmanager(sim_node, tmp_path):
    fake = FakeAlertmanager()
    try:
        await _console_with_fault(sim_node, tmp_path, fake.url, watched=False)
        alerts = [a for body in fake.delivered() for a in body]
        assert alerts and alerts[0]["labels"] == {"alertname": "sick", "node": "n1", "gpu": "4", "severity": "critical"}
    finally:
        fake.close()


async def test_a_watched_console_posts_nothing(sim_node, tmp_path):
    fake = FakeAlertmanager()
    try:
        await _console_with_fault(sim_node, tmp_path, fake.url, watched=True)
        assert fake.posts == []
    finally:
        fake.close()
