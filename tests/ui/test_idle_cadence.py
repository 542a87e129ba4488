"""The redraw clock slows down when nobody is at the keyboard, and comes back at a key:
new samples at every tick while in use, once a second after IDLE_AFTER_S, every
UNATTENDED_EVERY_S seconds after UNATTENDED_AFTER_S (a console open all day, like top)."""

from __future__ import annotations

import time

from console.ui import app as app_module


async def test_unattended_console_redraws_every_few_seconds_and_a_key_brings_it_back(live_app):
    app = live_app(pace=0.2)
    asked: list = []  # what the fleet is told: nodes on screen sampled as often as they are drawn
    real_unattended = app.fleet.unattended
    app.fleet.unattended = lambda every_s: (asked.append(every_s), real_unattended(every_s))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause(1.0)
        busy = app.redraws
        await pilot.pause(3.0)
        in_use = app.redraws - busy  # new samples every 0.2 s on a 0.05 s clock: ~15
        app._input_at = time.monotonic() - app_module.IDLE_AFTER_S - 1  # nobody for a while
        idle0 = app.redraws
        await pilot.pause(3.0)
        idle = app.redraws - idle0
        app._input_at = time.monotonic() - app_module.UNATTENDED_AFTER_S - 1  # nobody for long
        await pilot.pause(0.1)
        away0 = app.redraws
        await pilot.pause(6.5)
        away = app.redraws - away0
        assert asked == [app_module.UNATTENDED_EVERY_S]
        await pilot.press("down")
        back0 = app.redraws
        await pilot.pause(4.0)
        back = app.redraws - back0
        assert asked == [app_module.UNATTENDED_EVERY_S, None]
    # Bounds with room for a loaded machine (CI: two pytest processes and a vLLM server made
    # samples arrive late, and a starved loop fires a clock late): the upper bounds say the clock
    # slowed down, the lower ones that it still draws, well above what the slow clocks would draw.
    assert in_use >= 6, in_use
    assert 1 <= idle <= 4, idle  # once a second
    assert 1 <= away <= 3, away  # every 3 s over 6.5 s
    assert back >= 6, back  # the 1 s clock would draw 4 in 4 s
