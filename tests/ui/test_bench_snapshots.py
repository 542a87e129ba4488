"""SVG snapshots of the benchmark screen (running, finished, failed, a sweep) and its start dialog.

Deterministic: no runner; tests/ui/scenes/bench.py feeds synthetic events to
BenchScreen.feed under a frozen clock, with a fake fleet for the GPU charts,
and the screen's own redraw clock is parked. No cursor blinks.
Update after an intended UI change: pytest tests/ui/test_bench_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.ui.scenes.bench import SCENES as BENCH
from tests.ui.scenes.bench import BenchSceneApp, StartDialogSceneApp, prepare
from tests.ui.scenes.registry import SCENES, of_kind


@pytest.mark.parametrize("name", of_kind("bench"))
def test_bench_scene(name, snap_compare):
    shot = SCENES[name]
    app, prepare_scene = shot.make()
    assert snap_compare(app, terminal_size=shot.size, run_before=prepare_scene)


def test_bench_screen_80x24(snap_compare):
    assert snap_compare(BenchSceneApp(BENCH["bench-finished"]), terminal_size=(80, 24), run_before=prepare)


def test_start_dialog(snap_compare):
    app = StartDialogSceneApp()
    assert snap_compare(app, terminal_size=(120, 36), run_before=app.fill)


def test_start_dialog_refusal(snap_compare):
    app = StartDialogSceneApp(overrides="num_prompts=lots")

    async def refuse(pilot) -> None:
        await app.fill(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 36), run_before=refuse)
