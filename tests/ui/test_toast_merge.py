"""Issue U2: identical toasts merge into one with a count. A four-replica group whose preset
draws the same version warning shows it once, `(x4)`, not four stacked toasts; different
messages stay apart."""

from __future__ import annotations

from .conftest import wait_for

WARNING = "env X_OLD is gone in vLLM 0.32.0+sim (last in 0.11): it has no effect"


def toasts(app) -> list[tuple[str, str]]:
    """(title, message) of each toast the app shows now."""
    return [(n.title, n.message) for n in app._notifications]


async def test_four_identical_warnings_are_one_toast_with_a_count(live_app):
    app = live_app()
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: app.screen is not None)
        for replica in ("g-r1", "g-r2", "g-r3", "g-r4"):  # as follow_start raises each replica's warnings
            app.notify(WARNING, title=f"{replica}: vLLM version", severity="warning", timeout=10, markup=False)
        app.notify("g-r1 on node-a: GPU 0, port 8000", title="vLLM starting", markup=False)
        assert await wait_for(pilot, lambda: any("port 8000" in m for _, m in toasts(app)))
        shown = toasts(app)
    merged = [(title, m) for title, m in shown if "X_OLD" in m]
    assert merged == [("vLLM version", WARNING + " (x4)")], shown  # once, counted, the shared title
    assert len(shown) == 2  # a different message stays its own toast
