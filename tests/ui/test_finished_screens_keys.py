"""Finished screens drop their stop key, and a search the user stops says so (issue U2):
after a benchmark ends its screen's key bar no longer offers `x Cancel run`; a find-max
search stopped with x says `stopped by you: the N points measured so far are stored`
(not `failed: ...`), and its bar no longer offers `x Stop search`."""

from __future__ import annotations

from console.services.runs.find_max import FindMaxStopped
from console.ui.model import bench_view as bv
from console.ui.screens.bench import BenchScreen
from console.ui.screens.find_max import FindMaxScreen

from .conftest import screen_text, wait_for
from .test_bench_ui import BENCH_TINY as BENCH_PRESET
from .test_bench_ui import BenchHost
from .test_find_max_ui import BENCH_TINY, NODE, VIEW, FakeService, Host, spec


def bar(app) -> str:
    return screen_text(app).splitlines()[-1]


async def test_the_bench_screen_hides_cancel_once_the_run_has_ended():
    screen = BenchScreen(None, NODE, VIEW, BENCH_PRESET, runner=None, points=[4])
    app = BenchHost(screen)
    async with app.run_test(size=(120, 36)) as pilot:
        screen.feed(bv.PointBegan(0, 4))
        screen.draw_now()
        await pilot.pause()
        assert "x Cancel run" in bar(app)  # a run going: x cancels it
        screen.feed(bv.PointFailed(0, "the client wrote no result"))
        screen.feed(bv.SweepEnded())
        screen.draw_now()
        await pilot.pause()
        assert "Cancel run" not in bar(app) and "esc Back" in bar(app)
        await pilot.press("x")  # nothing to ask about
        await pilot.pause()
        assert app.screen is screen


class StopsAfter(FakeService):
    """Holds the search at its third point, as a person pressing x mid-search finds it."""

    async def search_instance(self, node, view, preset, spec, *, on_event, **kw):
        def relay(event) -> None:
            on_event(event)
            if type(event).__name__ == "FindMaxPointMeasured" and event.run_id == "run-2":
                self.gate.clear()

        return await super().search_instance(node, view, preset, spec, on_event=relay, **kw)


async def test_a_search_stopped_with_x_says_stopped_by_you_and_drops_the_key():
    service = StopsAfter()
    screen = FindMaxScreen(NODE, VIEW, BENCH_TINY, spec(), service=service, redraw_interval=0.02)  # type: ignore[arg-type]
    app = Host(screen)
    async with app.run_test(size=(130, 36)) as pilot:
        assert await wait_for(pilot, lambda: "running concurrency 4" in screen_text(app))
        assert "x Stop search" in bar(app)
        await pilot.press("x")
        assert await wait_for(pilot, lambda: "stopped by you" in screen_text(app))
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "stopped by you: the 2 points measured so far are stored" in text
        assert "failed" not in text
        assert "Stop search" not in bar(app) and "esc Back" in bar(app)
        assert not screen.query_one("#find-max-state").has_class("-failed")


class CancelledElsewhere(FakeService):
    """`bench cancel` on the point's run (from a shell): the service says the user stopped it."""

    async def search_instance(self, node, view, preset, spec, *, on_event, **kw):
        self.fail_at = 4.0
        try:
            return await super().search_instance(node, view, preset, spec, on_event=on_event, **kw)
        except Exception:
            raise FindMaxStopped(
                "find-max stopped by you: the 2 points measured so far are stored (run-1, run-2)"
            ) from None


async def test_a_search_cancelled_from_a_shell_is_a_stop_not_a_failure():
    screen = FindMaxScreen(NODE, VIEW, BENCH_TINY, spec(), service=CancelledElsewhere(), redraw_interval=0.02)  # type: ignore[arg-type]
    app = Host(screen)
    async with app.run_test(size=(130, 36)) as pilot:
        assert await wait_for(pilot, lambda: not screen.view.running)
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "stopped by you: the 2 points measured so far are stored" in text and "failed" not in text
        assert "Stop search" not in bar(app)
