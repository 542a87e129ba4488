"""A console of a fleet that a watcher watches (`rocm-console watch`, docs/watch.md): its header
says so and shows the watcher's open alerts, and a fault on a node it shows fails the GPU's row
as always but runs no alert action of its own (the watcher sends the alerts)."""

from __future__ import annotations

import os
import socket
import sys
import time

from console.core.alerts import AlertRule, parse_condition
from console.core.health import FAIL, HealthRules
from console.core.health_profile import HealthSettings
from console.core.model import Profile
from console.services import demo_faults
from console.services.events import EventLog
from console.services.watcher_presence import (
    ALERTS_FILE,
    HEARTBEAT_FILE,
    fleet_key,
    watch_dir,
    write_json_atomic,
)
from console.ui.app import ConsoleApp
from tests.helpers import wait_for
from tests.ui.conftest import screen_text


def _live_watcher(data_dir, nodes, *, period: float = 60.0) -> float:
    """The files a running watcher keeps: a fresh heartbeat (this test's pid: alive) and one open
    alert; the time the watcher says it started."""
    folder = watch_dir(data_dir, fleet_key(nodes))
    now = time.time()
    beat = {"pid": os.getpid(), "host": socket.gethostname(), "started": now - 3600, "heartbeat": now}
    write_json_atomic(folder / HEARTBEAT_FILE, {**beat, "period": period, "profile": [], "key": fleet_key(nodes)})
    alert = {"rule": "sick", "node": "n1", "gpu": 2, "instance": None, "since": now - 60, "fired": now - 60}
    write_json_atomic(folder / ALERTS_FILE, {"alerts": [{**alert, "text": "FIRED sick: n1 GPU 2: health == fail"}]})
    return beat["started"]


async def test_a_watched_fleet_says_so_and_the_console_runs_no_alert_action(sim_node, tmp_path):
    node = sim_node("n1", seed=3, state_dir=str(tmp_path / "n1"))
    out = tmp_path / "alert.json"
    script = tmp_path / "alert.py"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    rule = AlertRule(
        name="sick", condition=parse_condition("health == fail"), command=(sys.executable, str(script)), repeat_after=0
    )
    log = EventLog(tmp_path / "data" / "events.jsonl")
    since = _live_watcher(tmp_path / "data", [node])
    app = ConsoleApp(
        Profile(nodes=(node,)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        events=log,
        health=HealthSettings(HealthRules(interval=0.5), (rule,)),
    )
    async with app.run_test(size=(160, 40)) as pilot:
        assert await wait_for(lambda: len(app.fleet.snapshot("n1").gpu_health) == 8, timeout=30)
        await pilot.pause()
        started = time.strftime("%H:%M", time.localtime(since))  # the heartbeat's, not a minute later
        assert await wait_for(lambda: "watched since" in screen_text(app), timeout=5), screen_text(app)
        top = screen_text(app).splitlines()[0]
        assert f"watched since {started} by {socket.gethostname()}:{os.getpid()}" in top
        assert "1 alert firing" in top
        demo_faults.inject(node, 4, "ecc_uncorrectable")
        # health is still judged and shown ...
        assert await wait_for(lambda: app.fleet.snapshot("n1").health_of(4).verdict.state == FAIL, timeout=15)
        await wait_for(lambda: out.exists(), timeout=4)
        await pilot.pause()
    # ... but the alert is the watcher's to send: no action ran, no alert (nor node event) written here
    assert not out.exists()
    kinds = {e.kind for e in log.read()}
    assert "alert.fired" not in kinds and "node.up" not in kinds


async def test_with_no_watcher_the_header_says_nothing_of_one(sim_node, tmp_path):
    node = sim_node("n1", seed=3, state_dir=str(tmp_path / "n1"))
    data = tmp_path / "data"
    _live_watcher(data, [node], period=0.01)  # a heartbeat long stale: its watcher is gone
    app = ConsoleApp(
        Profile(nodes=(node,)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        events=EventLog(data / "events.jsonl"),
        health=HealthSettings(HealthRules(interval=0.5), ()),
    )
    async with app.run_test(size=(160, 40)) as pilot:
        assert await wait_for(lambda: len(app.fleet.snapshot("n1").gpu_health) == 8, timeout=30)
        await pilot.pause()
        assert "watched" not in screen_text(app)
        assert app.health_watch is not None and app.health_watch.watched is None
