"""U2: a timeline without holes. What the console does to a node through its keys is an event
the events screen (e) shows: a start refused (a GPU another instance serves), a process ended
from a GPU's detail (K), an instance stopped by the partition dialog's k. Simulated node: the
real agent, instance and process services over LocalTransport."""

from __future__ import annotations

from textual.widgets import Input

from console.core.model import SimulateSpec
from console.services.history import History
from console.services.instances import InstanceService
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.results_store import ConsoleEvents
from console.ui.screens.detail import DetailScreen
from console.ui.screens.events import EventsScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.partition import PartitionScreen
from console.ui.screens.process_end import ProcessEndScreen
from tests.helpers import free_port

from .conftest import screen_text, wait_for
from .test_instances_ui import TINY, make_app, open_dialog, stop_all, until_live

__all__ = ["stop_all"]  # a fixture, imported for pytest


async def test_refused_start_ended_process_and_dialog_stop_are_on_the_events_screen(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    # GPU 5 runs a simulated foreign workload
    node = sim_node(
        "n1", state_dir=str(tmp_path / "n1"), simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 5, busy=(5,))
    )
    history = History(data_dir=tmp_path / "data")
    service = InstanceService(TransportPool())
    try:
        snap = await sample_node(service.pool, node, probe=False)
        await service.start(node, TINY, gpus=[3], snapshot=snap, port=free_port(), name="outside")
        app = make_app(node, events=ConsoleEvents(history))  # as ui/launch.py makes it
        app.history = history
        async with app.run_test(size=(150, 44), notifications=True) as pilot:
            table = await until_live(pilot, app)
            assert await wait_for(pilot, lambda: app.board.find("n1", "outside") is not None, timeout=30)

            # 1. a start on GPU 3, which instance `outside` serves: refused by the packing rule
            dialog = await open_dialog(pilot, app, table, 3)
            dialog.query_one("#start-port", Input).value = str(free_port())
            dialog.query_one("#start-name", Input).value = "second"
            await pilot.press("ctrl+s")  # the dialog's action key
            error = dialog.query_one("#start-error")
            assert await wait_for(pilot, lambda: "already serves instance outside" in str(error.render()), timeout=15)
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))

            # 2. GPU 5's process ended from its detail: Enter, K, y
            snap_now = lambda: app.fleet.snapshot("n1")  # noqa: E731
            assert await wait_for(pilot, lambda: bool(snap_now().latest.gpus[5].processes), timeout=30)
            assert table.select(("n1", 5))
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
            await pilot.press("K")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ProcessEndScreen))
            await pilot.press("y")
            assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), timeout=60)
            await pilot.press("escape")

            # 3. the partition dialog (P) on GPU 3 (still marked): k stops the instance in the way
            assert table.select(("n1", 3))
            await pilot.press("P")
            assert await wait_for(pilot, lambda: isinstance(app.screen, PartitionScreen))
            part = app.screen
            for _ in range(4):  # the compute row: unchanged -> ... -> CPX
                await pilot.press("right")
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: part.preflight.instances == (("outside", (3,)),), timeout=30), (
                part.reasons
            )
            await pilot.press("k")
            assert await wait_for(pilot, lambda: isinstance(app.screen, ProcessEndScreen))
            await pilot.press("y")
            assert await wait_for(pilot, lambda: app.screen is part, timeout=60)
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))

            # the events screen shows all three, newest first
            await pilot.press("e")
            assert await wait_for(pilot, lambda: isinstance(app.screen, EventsScreen) and app.screen.loaded)

            def shown() -> str:
                return screen_text(app)

            for words in (
                ("instance.stopped", "outside stopped by the console"),
                ("process.ended", "ended pid 4000"),
                ("instance.refused", "start of second on GPUs 3 refused"),
            ):
                assert await wait_for(pilot, lambda w=words: all(x in shown() for x in w), timeout=10), shown()
    finally:
        await service.pool.close()
