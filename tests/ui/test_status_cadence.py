"""The status bar says how often the screen shows new numbers: the sampling interval in use,
and UNATTENDED_EVERY_S while nobody is at the console (it draws, and the nodes on screen
sample, that often then); a key brings the interval back."""

from __future__ import annotations

import time

from console.ui import app as app_module

from .conftest import screen_text, wait_for


async def test_the_status_bar_says_the_unattended_cadence(live_app):
    app = live_app(pace=0.2)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: "every 1 s" in screen_text(app))
        app._input_at = time.monotonic() - app_module.UNATTENDED_AFTER_S - 1  # nobody for long
        unattended = f"every {app_module.UNATTENDED_EVERY_S:g} s (unattended)"
        assert await wait_for(pilot, lambda: unattended in screen_text(app), timeout=10), screen_text(app)
        assert "every 1 s" not in screen_text(app)
        await pilot.press("down")  # someone is back
        assert await wait_for(pilot, lambda: "every 1 s" in screen_text(app)), screen_text(app)
        assert "unattended" not in screen_text(app)
