"""SVG snapshots of every screen and state (the same scenes as screenshots/).

Deterministic: recorded traces replayed, clocks frozen, no cursor blink.
Update after an intended UI change: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from console.ui.screenshots import SCENES, build_app


@pytest.mark.parametrize("name", list(SCENES))
def test_scene(name, snap_compare):
    scene = SCENES[name]
    app, prepare = build_app(scene)
    assert snap_compare(app, terminal_size=scene.size, run_before=prepare)
