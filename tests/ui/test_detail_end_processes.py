"""U: the GPU detail's process list has an "end process" action (K), as nvitop has: it opens
the confirmed end-process dialog for that GPU's processes; a GPU with none says so."""

from __future__ import annotations

from console.core.model import Profile, SimulateSpec
from console.ui.app import ConsoleApp
from console.ui.screens.detail import DetailScreen
from console.ui.screens.process_end import ProcessEndScreen

from .conftest import wait_for


async def test_k_in_a_gpu_detail_ends_its_processes(sim_node, tmp_path):
    # GPU 3 runs a simulated foreign workload; GPU 5 runs nothing
    node = sim_node("n", simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 2, busy=(3,)))
    app = ConsoleApp(Profile(nodes=(node,)), interval=0.2, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(140, 40), notifications=True) as pilot:
        snap = lambda: app.fleet.snapshot("n")  # noqa: E731
        assert await wait_for(pilot, lambda: snap().latest is not None and snap().latest.gpus[3].processes, 30)
        app.open_detail("n", 5)
        await pilot.pause()
        await pilot.press("K")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)  # nothing to end: no dialog
        assert any("no process on GPU 5" in str(n.message) for n in app._notifications)

        await pilot.press("escape")
        app.open_detail("n", 3)
        await pilot.pause()
        await pilot.press("K")
        await pilot.pause()
        ender = app.screen
        assert isinstance(ender, ProcessEndScreen)
        assert [(p.pid, p.gpus) for p in ender.processes] == [(p.pid, (3,)) for p in snap().latest.gpus[3].processes]
        await pilot.press("y")
        assert await wait_for(pilot, lambda: not snap().latest.gpus[3].processes, timeout=60)
