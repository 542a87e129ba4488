"""SVG snapshots of every screen and state of the console (the same scenes as screenshots/).

Deterministic: recorded traces replayed, clocks frozen, no cursor blink (tests/ui/scenes/).
Update after an intended UI change: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from tests.ui.scenes.registry import SCENES, of_kind


@pytest.mark.parametrize("name", of_kind("fleet"))
def test_scene(name, snap_compare):
    shot = SCENES[name]
    app, prepare = shot.make()
    assert snap_compare(app, terminal_size=shot.size, run_before=prepare)
