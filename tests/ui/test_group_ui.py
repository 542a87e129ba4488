"""A replica group in the instances panel: one row with ready/total above its replicas, and
x on that row stops the whole group (simulated node, real agent and instance service)."""

from __future__ import annotations

from console.services.groups import GroupService
from console.services.instances import InstanceState
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.instances import InstancesScreen

from .conftest import screen_text, wait_for
from .test_instances_ui import TINY, fast_sim_vllm, free_port, make_app, node, stop_all, until_live

__all__ = ["fast_sim_vllm", "node", "stop_all"]  # fixtures, imported for pytest


async def test_group_row_and_one_key_stops_the_group(node, stop_all):
    pool = TransportPool()
    try:
        groups = GroupService(pool)
        snap = await sample_node(pool, node, probe=False)
        plan = await groups.plan([node], TINY, 2, gpus=[4, 5], snapshots={node.name: snap}, base_port=free_port())
        started = await groups.start(plan, [node], TINY, snapshots={node.name: snap})
        assert not started.failed, started
        app = make_app(node)
        async with app.run_test(size=(140, 40), notifications=True) as pilot:
            await until_live(pilot, app)
            await pilot.press("i")
            panel = app.screen
            assert isinstance(panel, InstancesScreen)

            def group_row() -> str:
                return next((line for line in screen_text(app).splitlines() if "▣ tiny-x2" in line), "")

            assert await wait_for(pilot, lambda: "2/2 ready" in group_row(), timeout=30), screen_text(app)
            lines = screen_text(app).splitlines()
            at = lines.index(group_row())
            assert "tiny-x2-r0" in lines[at + 1] and "tiny-x2-r1" in lines[at + 2]  # its replicas below it
            assert "4-5" in group_row() or "4,5" in group_row()
            assert panel.select("", "tiny-x2")
            await pilot.pause()
            assert "group tiny-x2: 2 of 2 replicas ready" in screen_text(app)
            await pilot.press("x")
            assert isinstance(app.screen, ConfirmScreen)
            assert "Stop group tiny-x2?" in screen_text(app) and "2 of 2 replicas run on n1" in screen_text(app)
            await pilot.press("y")
            assert await wait_for(
                pilot,
                lambda: all(
                    (v := app.board.find("n1", n)) is not None
                    and v.state in (InstanceState.STOPPED, InstanceState.EXITED)
                    for n in ("tiny-x2-r0", "tiny-x2-r1")
                ),
                timeout=40,
            )
            assert await wait_for(pilot, lambda: "0/2 ready" in group_row(), timeout=20), group_row()
    finally:
        await pool.close()
