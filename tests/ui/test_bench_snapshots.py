"""SVG snapshots of the benchmark screen (running, finished, failed, a sweep) and its start dialog.

Deterministic: no runner; console/ui/bench_scenes.py feeds synthetic events to
BenchScreen.feed under a frozen clock, with a fake fleet for the GPU charts,
and the screen's own redraw clock is parked. No cursor blinks.
Update after an intended UI change: pytest tests/ui/test_bench_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from console.ui.bench_scenes import SCENES, BenchSceneApp, StartDialogSceneApp, prepare


@pytest.mark.parametrize("name", list(SCENES))
def test_bench_scene(name, snap_compare):
    scene = SCENES[name]
    assert snap_compare(BenchSceneApp(scene), terminal_size=scene.size, run_before=prepare)


def test_bench_screen_80x24(snap_compare):
    scene = SCENES["bench-finished"]
    assert snap_compare(BenchSceneApp(scene), terminal_size=(80, 24), run_before=prepare)


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
