"""The scenes outside the package: the screenshot command and the live app for `textual run --dev`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from console.ui.app import ConsoleApp
from tests.ui.scenes import registry
from tests.ui.scenes.fleet import DEMO_NODES

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_carries_no_scene():
    """Scenes read tests/fixtures/traces: an installed console has no such folder."""
    readers = [
        p.relative_to(ROOT)
        for p in (ROOT / "console").rglob("*.py")
        # (profiles/traces, the kept arrival trace of the trace-replay preset, is shipped data)
        if any(s in p.read_text(encoding="utf-8") for s in ('"fixtures"', "fixtures/traces", "tests.ui.scenes"))
    ]
    assert readers == []
    assert not list((ROOT / "console").rglob("*screenshots*")) and not list((ROOT / "console").rglob("*scenes*"))


def test_one_registry_holds_the_readme_set():
    readme = [name for name, shot in registry.SCENES.items() if shot.readme]
    assert "fleet" in readme and "bench-running" in readme and "bench-sweep" in readme
    for name in readme:  # the command writes each into screenshots/, where the README takes them from
        assert (ROOT / "screenshots" / f"{name}.svg").is_file(), name


def test_the_screenshot_command_names_a_wrong_scene(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "tests.ui.scenes", "no-such-scene", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "unknown scene 'no-such-scene'" in run.stderr
    assert list(tmp_path.iterdir()) == []


async def test_the_dev_app_is_the_console_over_looping_traces():
    from tests.ui.scenes.dev_app import app

    assert isinstance(app, ConsoleApp)
    app.notify_health = False
    async with app.run_test(size=(120, 36)) as pilot:
        fleet = app.fleet
        assert await wait_for(pilot, lambda: all(fleet.frames_received(n) > 0 for n in DEMO_NODES), timeout=20)
        first = fleet.frames_received("mi300x-spx")
        # A living console: a frame a second from each node, for as long as it runs (the traces loop).
        assert await wait_for(pilot, lambda: fleet.frames_received("mi300x-spx") > first + 2, timeout=20)
