"""The partition dialog's key bar (issue U2, seen in tmux at 80x24): under the dialog the
bar showed the fleet's keys (Detail, Filter, Start vLLM), and at 80x24 the blockers' list
pushed the dialog's own `k` hint and buttons out of sight, so `k` was found nowhere. The
bar under the dialog, and under its end-processes question, shows their own keys."""

from __future__ import annotations

from console.core.model import Profile, SimulateSpec
from console.services.fleet import FleetTelemetry
from console.ui.screens.process_end import ProcessEndScreen

from .conftest import screen_text, wait_for
from .test_partition_ui import PRESETS, Host, open_dialog


def last_line(app) -> str:
    return screen_text(app).rstrip("\n").splitlines()[-1]


async def test_the_partition_dialog_and_its_question_show_their_own_keys(sim_node, tmp_path):
    node = sim_node("keys", simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 0, busy=(1,)))
    fleet = FleetTelemetry([node], interval=0.2)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(
            pilot,
            lambda: (
                fleet.snapshot("keys").latest is not None
                and any(g.processes for g in fleet.snapshot("keys").latest.gpus)
            ),
            timeout=30,
        )
        screen = await open_dialog(pilot, app, tmp_path, "keys", compute="CPX")
        assert await wait_for(pilot, lambda: not screen.checking and screen.reasons, timeout=30)
        await pilot.pause()
        bar = last_line(app)
        assert "k End blocking processes" in bar and "esc Cancel" in bar, bar
        for fleet_words in ("Detail", "Filter", "Start vLLM", "palette"):
            assert fleet_words not in bar, bar

        await pilot.press("k")  # what the bar says: the question opens
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProcessEndScreen))
        await pilot.pause()
        bar = last_line(app)
        assert "y End processes" in bar and "Cancel" in bar, bar
        await pilot.press("n")
        assert await wait_for(pilot, lambda: app.screen is screen)
