"""The app over the real agent and the simulated amdsmi (LocalTransport), no replay."""

from __future__ import annotations

from console.core.model import Profile
from console.ui.app import ConsoleApp
from console.ui.widgets.gpu_table import GpuTable

from .conftest import screen_text, wait_for


async def test_cpx_node_shows_64_rows_from_the_real_agent(sim_node):
    profile = Profile(nodes=(sim_node("spx", seed=1), sim_node("cpx", compute="CPX", seed=2)))
    app = ConsoleApp(profile, interval=0.2, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)

        def rows(node):
            return [r.gpu for r in table.rows if r.node == node and r.gpu is not None]

        assert await wait_for(pilot, lambda: len(rows("cpx")) == 64 and len(rows("spx")) == 8, timeout=20)
        assert await wait_for(pilot, lambda: "cpx  live" in screen_text(app) and "spx  live" in screen_text(app))
        assert "amdsmi (simulated)" in screen_text(app)
