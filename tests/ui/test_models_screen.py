"""The models screen (m): per node its models with size, revision, complete, used by and the free
space; a pull started from it with its progress; a removal after a confirmation; start opens the
start dialog on the preset of the selected model. The real app over the demo's simulated nodes."""

from __future__ import annotations

import pytest

from console.cli.common import PRESETS_PATH
from console.core.profiles import demo_profile_path, load_profile
from console.services import demo
from console.services.results import DATA_DIR_ENV
from console.ui.app import ConsoleApp
from console.ui.screens.models import ModelsScreen

from .conftest import screen_text, wait_for


@pytest.fixture
def demo_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv("ROCM_CONSOLE_SIM_PULL_RATE", "5e9")  # the demo's pulls: seconds, not minutes
    monkeypatch.setenv(demo.ENV, "")
    token = demo.claim_lifeline()
    yield tmp_path
    demo.stop_bound(token)


def _rows(app) -> list[tuple[str, ...]]:
    screen = app.screen
    return [r.cells for r in screen.rows] if isinstance(screen, ModelsScreen) else []


def _select(app, pilot, node: str, model: str) -> bool:
    """Put the cursor on a model's row; False while the screen has no such row (a node's list
    is rebuilt a moment after its read comes back: wait_for it)."""
    screen = app.screen
    if not isinstance(screen, ModelsScreen):
        return False
    for i, r in enumerate(screen.rows):
        if r.node == node and r.model == model and r.kind == "model":
            screen.query_one("#models-table").move_cursor(row=i)
            return True
    return False


@pytest.mark.timeout(120)
async def test_models_screen_lists_pulls_and_removes(demo_env):
    profile = load_profile([PRESETS_PATH, demo_profile_path()])
    app = ConsoleApp(profile, interval=0.5, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("m")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ModelsScreen))
        assert await wait_for(pilot, lambda: len(app.screen.reads) == 4, timeout=40)
        text = screen_text(app)
        assert "amd/Llama-3.1-70B-Instruct-FP8-KV" in text and "incomplete (8 of 15 weight files missing" in text
        assert "free of" in text  # each node's free space
        assert ("", "meta-llama/Llama-3.1-70B-Instruct", "141.0 GB", "99a96f6733d9", "complete", "-") in _rows(app)

        # pull: the incomplete 70B FP8 on the CPX node, its repo id offered from the selected row
        assert await wait_for(pilot, lambda: _select(app, pilot, "mi300x-cpx", "amd/Llama-3.1-70B-Instruct-FP8-KV")), (
            _rows(app)
        )
        await pilot.press("a")
        assert app.screen.query_one("#models-pull-input").value == "amd/Llama-3.1-70B-Instruct-FP8-KV"
        await pilot.press("enter")

        def pulled() -> bool:
            return any(
                c[1] == "amd/Llama-3.1-70B-Instruct-FP8-KV" and c[4] == "complete"
                for c in _rows(app)
                if c[0] == "" and "pull" not in c[4]
            ) and not any(c[4].startswith("pulling") for c in _rows(app))

        seen_progress = []

        def progress_or_done() -> bool:
            seen_progress.extend(c[4] for c in _rows(app) if c[4].startswith("pulling"))
            return pulled()

        assert await wait_for(pilot, progress_or_done, timeout=60), _rows(app)
        assert any(" of 73.5 GB (" in s for s in seen_progress) or pulled()

        # remove, after a confirmation
        assert await wait_for(pilot, lambda: _select(app, pilot, "mi300x-spx", "meta-llama/Llama-3.1-70B-Instruct")), (
            _rows(app)
        )
        await pilot.press("d")
        assert await wait_for(pilot, lambda: "Delete meta-llama/Llama-3.1-70B-Instruct (141.0 GB)" in screen_text(app))
        await pilot.press("y")

        def removed() -> bool:
            read = (
                next(r for r in app.screen.reads if r.node == "mi300x-spx")
                if isinstance(app.screen, ModelsScreen)
                else None
            )
            # a read that failed (a loaded machine's slow answer) lists nothing: not a removal
            return (
                read is not None
                and read.error is None
                and all(m.name != "meta-llama/Llama-3.1-70B-Instruct" for m in read.models.models)
            )

        assert await wait_for(pilot, removed, timeout=30)

        # start: the start dialog, on the preset of the selected model
        assert await wait_for(pilot, lambda: _select(app, pilot, "mi300x-spx", "amd/Llama-3.1-8B-Instruct-FP8-KV")), (
            _rows(app)
        )
        await pilot.press("s")
        assert await wait_for(pilot, lambda: app.screen.id == "start-dialog")
        assert app.screen.preset_name == "llama-3.1-8b-fp8"
