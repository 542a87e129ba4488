"""No worker failure vanishes: a surprise inside any worker (the app's or a screen's) is one
notification naming the worker, and the console goes on."""

from __future__ import annotations

import ast
from pathlib import Path

from console.services.instances import InstanceState, InstanceView
from console.ui.model.instance_source import StaticInstances
from console.ui.screens.log_viewer import LogScreen

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODE = "mi300x-spx"
READY = InstanceView(node=NODE, name="tiny-g0", state=InstanceState.READY, gpus=(0,), port=8000, model="tiny")


class Surprising(StaticInstances):
    """Instances whose stop and log fail with what no worker expects (not an InstanceError)."""

    async def stop(self, node, name):
        raise RuntimeError(f"{name}: the agent answered nonsense")

    async def log_lines(self, node, name, *, follow=False, lines=None):
        yield "the first line"
        raise ValueError("a log line that is not text")


def failures(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications if n.severity == "error"]


async def test_an_app_worker_that_raises_is_a_notification_naming_it(live_app):
    app = live_app(nodes=(NODE,), instances=Surprising([READY]))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        assert await wait_for(pilot, lambda: app.board.find(NODE, "tiny-g0") is not None)
        app.stop_instance(NODE, "tiny-g0")
        assert await wait_for(pilot, lambda: failures(app))
        assert failures(app) == [f"stop:{NODE}:tiny-g0 failed: RuntimeError: tiny-g0: the agent answered nonsense"]
        drawn = app.redraws
        assert await wait_for(pilot, lambda: app.redraws > drawn)  # still drawing: the app lives on
        assert app.is_running and app.return_code is None


async def test_a_screen_worker_that_raises_is_a_notification_naming_it(live_app):
    app = live_app(nodes=(NODE,), instances=Surprising([READY]))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        assert await wait_for(pilot, lambda: app.board.find(NODE, "tiny-g0") is not None)
        app.open_log(NODE, "tiny-g0")
        assert await wait_for(pilot, lambda: failures(app))
        assert failures(app) == [f"log:{NODE}:tiny-g0 failed: ValueError: a log line that is not text"]
        assert isinstance(app.screen, LogScreen) and app.screen.received == 1  # the screen stays, as it was
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, LogScreen))
        assert app.is_running


def test_every_worker_of_the_ui_is_named_and_never_ends_the_app():
    """Workers start through run_named (a name, which the notification names; exit_on_error=False,
    which leaves the report to the app): no other call of run_worker in console/ui."""
    named = []
    for path in sorted((ROOT / "console" / "ui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if getattr(node.func, "attr", None) == "run_worker":
                assert path.name == "workers.py", f"{where}: run_worker outside run_named"
                keywords = {k.arg: k.value for k in node.keywords}
                exit_on_error = keywords.get("exit_on_error")
                assert isinstance(exit_on_error, ast.Constant) and exit_on_error.value is False, where
            elif getattr(node.func, "id", None) == "run_named":
                assert len(node.args) == 3, f"{where}: run_named(node, work, name)"
                named.append(where)
    assert len(named) >= 20  # the walk sees them
