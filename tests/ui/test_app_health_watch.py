"""The running console writes the fleet's timeline: a GPU that develops a fault on a node the
TUI watches shows fail in its row and lands in the data dir's events.jsonl (what the events
screen and `rocm-console events` read), with the [[alert]] rule's command run."""

from __future__ import annotations

import json
import sys

from console.core.alerts import AlertRule, parse_condition
from console.core.health import FAIL, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import Profile
from console.services import demo_faults
from console.services.events import EventLog
from console.ui.app import ConsoleApp
from tests.helpers import wait_for


async def test_a_fault_on_a_watched_node_is_shown_logged_and_alerted(sim_node, tmp_path):
    node = sim_node("n1", seed=3, state_dir=str(tmp_path / "n1"))
    out = tmp_path / "alert.json"
    script = tmp_path / "alert.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    rule = AlertRule(name="sick", condition=parse_condition("health == fail"), command=(sys.executable, str(script)))
    log = EventLog(tmp_path / "data" / "events.jsonl")
    app = ConsoleApp(
        Profile(nodes=(node,)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        events=log,
        health=HealthSettings(HealthRules(interval=0.5), (rule,)),
    )
    async with app.run_test(size=(140, 40)) as pilot:
        assert await wait_for(lambda: len(app.fleet.snapshot("n1").gpu_health) == 8, timeout=30)
        demo_faults.inject(node, 4, "ecc_uncorrectable")
        assert await wait_for(lambda: app.fleet.snapshot("n1").health_of(4).verdict.state == FAIL, timeout=15)
        assert await wait_for(lambda: out.exists() and out.read_text(), timeout=15)
        await pilot.pause()
    kinds = {(e.kind, e.gpu) for e in log.read()}
    assert {("node.up", None), ("gpu.ecc", 4), ("gpu.health", 4), ("alert.fired", 4)} <= kinds
    alert = json.loads(out.read_text())
    assert (alert["alert"], alert["node"], alert["gpu"]) == ("sick", "n1", 4)
