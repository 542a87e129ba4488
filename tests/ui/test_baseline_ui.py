"""A node whose versions changed since the console last saw it: the fleet marks its header
(Δ and what changed), `B` opens the baselines with the node marked and its stored baseline
listed, `a` acknowledges the change and the mark goes. The simulated node's real agent
answers the probe; its ROCm is upgraded between two consoles."""

from __future__ import annotations

import json

from console.core.model import Profile
from console.services.agent_bundle import install_local_agent
from console.services.baseline import BaselineStore, baseline_from_dict
from console.services.baseline_demo import SEED_BASELINES_DIR
from console.services.events import EventLog
from console.services.history import History
from console.sim.host import upgrade_rocm
from console.ui.app import ConsoleApp
from console.ui.results_store import ConsoleEvents
from console.ui.screens.baseline import BaselineScreen
from tests.services.test_node_versions import contact

from .conftest import screen_text, wait_for


async def test_changed_rocm_marks_the_node_and_the_baseline_screen_acknowledges_it(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    node = sim_node("n1", seed=3, state_dir=str(tmp_path / "n1"))
    log = EventLog(tmp_path / "data" / "events.jsonl")
    await contact(node, log)  # an earlier console recorded ROCm 7.0.2-56
    upgrade_rocm(install_local_agent(node).env_dict()["ROCM_CONSOLE_SIM_DIR"], "7.1.0-21")
    seed = json.loads((SEED_BASELINES_DIR / "mi300x-spx" / "demo.json").read_text())
    BaselineStore().save(baseline_from_dict({**seed, "node": "n1"}, "seed"))

    app = ConsoleApp(Profile(nodes=(node,)), interval=0.2, notify_health=False, cursor_blink=False, events=log)
    async with app.run_test(size=(160, 40)) as pilot:
        mark = "Δ ROCm: 7.0.2-56 -> 7.1.0-21"
        assert await wait_for(pilot, lambda: mark in screen_text(app), timeout=30), screen_text(app)
        await pilot.press("B")
        assert await wait_for(pilot, lambda: isinstance(app.screen, BaselineScreen))
        assert await wait_for(pilot, lambda: "Δ n1" in screen_text(app))
        text = screen_text(app)
        assert "demo" in text and "7.0.2-56" in text and "changed since it was last seen" in text
        await pilot.press("a")
        assert await wait_for(pilot, lambda: "Δ n1" not in screen_text(app))
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: mark not in screen_text(app), timeout=5)
    changed = [e for e in log.read() if e.kind == "node.changed"]
    assert len(changed) == 1 and changed[0].node == "n1" and "7.1.0-21" in changed[0].message


async def test_the_demo_node_shows_its_upgrade_since_the_seeded_baseline(sim_node, tmp_path, monkeypatch):
    """What `rocm-console --demo` prepares (services/baseline_demo.py): mi300x-spx as it was at
    its seeded baseline, its simulated ROCm upgraded since; the fleet marks it at once."""
    from console.services.baseline_demo import prepare_demo

    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    node = sim_node("mi300x-spx", seed=1, state_dir=str(tmp_path / "spx"))
    profile = Profile(nodes=(node,))
    line = prepare_demo(profile)
    assert line == "mi300x-spx: simulated ROCm upgraded 7.0.2-56 -> 7.1.0-21 since its baseline 'demo'"
    assert [b.name for b in History().baselines.list("mi300x-spx")] == ["demo"]  # the data dir's store
    events = ConsoleEvents(History())  # as ui/launch.py makes the console: its timeline and versions in the store
    app = ConsoleApp(profile, interval=0.2, notify_health=False, cursor_blink=False, events=events)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 40)) as pilot:
        mark = "Δ ROCm: 7.0.2-56 -> 7.1.0-21"
        assert await wait_for(pilot, lambda: mark in screen_text(app), timeout=30), screen_text(app)
        assert app.node_changes == {"mi300x-spx": "ROCm: 7.0.2-56 -> 7.1.0-21"}


SMALL_SUITE = """
[suite]
repeats = 3
[serve]
preset = "tiny"
[[point]]
name = "c2"
preset = "tiny"
concurrency = 2
num_prompts = 4
"""


async def test_check_now_runs_the_suite_again_and_shows_the_report(sim_node, tmp_path, monkeypatch):
    """`c` on the baseline screen: the same runner as `baseline check` (its own instance on the
    simulated node, started and stopped), then the report with a verdict per metric."""
    import dataclasses

    from console.cli.common import PRESETS_PATH
    from console.core.baseline.suite import parse_suite
    from console.core.profiles import load_profile
    from console.services.baseline import BaselineRunner, baseline_of

    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    node = sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))
    profile = dataclasses.replace(load_profile([PRESETS_PATH]), nodes=(node,))
    runner = BaselineRunner()
    try:
        run = await runner.run(node, parse_suite(SMALL_SUITE, "small.toml"), profile, suite_text=SMALL_SUITE)
    finally:
        await runner.pool.close()
    BaselineStore().save(baseline_of("small", run))

    app = ConsoleApp(profile, interval=0.5, notify_health=False, cursor_blink=False, events=EventLog(tmp_path / "e"))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("B")
        assert await wait_for(pilot, lambda: "small" in screen_text(app))
        await pilot.press("c")
        assert await wait_for(pilot, lambda: "running…" in screen_text(app))
        done = "# Baseline check: small on n1:"
        assert await wait_for(pilot, lambda: done in screen_text(app), timeout=120), screen_text(app)
        text = screen_text(app)
        assert "| c2 | Output token throughput (tok/s) |" in text and "What changed on the node" in text
    from console.services.instances import InstanceService
    from console.services.transports import TransportPool

    pool = TransportPool()
    try:
        views = await InstanceService(pool).list(node)
    finally:
        await pool.close()
    assert not [v for v in views if v.name.startswith("baseline-")]  # the suite's instance is gone
