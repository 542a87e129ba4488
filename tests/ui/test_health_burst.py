"""A link that drops many nodes at once: one redraw and one toast naming the first few,
not a frame and a toast per node (a console that falls behind would see more nodes go
stale, and redraw more)."""

from __future__ import annotations

from console.core.model import NodeHealth, Profile
from console.ui.app import HEALTH_TOAST_NAMES, ConsoleApp
from console.ui.messages import NodeHealthChanged


def app_with_toasts(sim_node, tmp_path) -> tuple[ConsoleApp, list[tuple[str, str]]]:
    """An app over one simulated node, and the list its toasts go to once it runs."""
    node = sim_node("n1", state_dir=str(tmp_path / "n1"))
    return ConsoleApp(Profile(nodes=(node,)), interval=0.5, cursor_blink=False), []


async def test_forty_nodes_down_at_once_make_one_frame_and_one_toast(sim_node, tmp_path):
    app, toasts = app_with_toasts(sim_node, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.notify = lambda message, *, title="", **_: toasts.append((title, message))  # type: ignore[method-assign]
        before = app.redraws
        for i in range(40):
            app.post_message(NodeHealthChanged(f"far-{i:02d}", NodeHealth.DOWN, f"link lost {i}"))
        await pilot.pause()
        down_frames = app.redraws - before
        down = [t for t in toasts if "down" in t[0]]
        for i in range(40):
            app.post_message(NodeHealthChanged(f"far-{i:02d}", NodeHealth.LIVE, None))
        app.post_message(NodeHealthChanged("far-00", NodeHealth.DOWN, "link lost again"))
        await pilot.pause()
    assert 1 <= down_frames <= 2, down_frames  # the burst, and at most one clock tick beside it
    assert len(down) == 1, down
    title, text = down[0]
    assert title == "40 nodes are down"
    assert text.startswith("far-00: link lost 0; far-01: link lost 1")
    assert f"and {40 - HEALTH_TOAST_NAMES} more" in text and "far-05" not in text
    # back up: one toast for the 39 that stayed up (far-00 dropped again in the same burst)
    back = [t for t in toasts if "live again" in t[0]]
    assert back == [
        ("39 nodes are live again", f"far-01, far-02, far-03, far-04, far-05 and {39 - HEALTH_TOAST_NAMES} more")
    ]
    assert ("far-00 is down", "link lost again") in toasts


async def test_one_node_down_keeps_its_own_toast(sim_node, tmp_path):
    app, toasts = app_with_toasts(sim_node, tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.notify = lambda message, *, title="", **_: toasts.append((title, message))  # type: ignore[method-assign]
        app.post_message(NodeHealthChanged("far", NodeHealth.DOWN, "ssh: connection refused"))
        await pilot.pause()
        app.post_message(NodeHealthChanged("far", NodeHealth.LIVE, None))
        await pilot.pause()
    assert toasts == [("far is down", "ssh: connection refused"), ("", "far is live again")]
