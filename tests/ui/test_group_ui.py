"""A replica group in the instances panel: one row with ready/total above its replicas, and
x on that row stops the whole group (simulated node, real agent and instance service)."""

from __future__ import annotations

from console.core.model import BenchPreset, Profile
from console.services.groups import GroupService
from console.services.history import History
from console.services.instances import InstanceState
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.app import ConsoleApp
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.group_bench import GroupBenchScreen
from console.ui.screens.instances import InstancesScreen

from .conftest import screen_text, wait_for
from .test_instances_ui import TINY, fast_sim_vllm, free_port, make_app, node, stop_all, until_live

__all__ = ["fast_sim_vllm", "node", "stop_all"]  # fixtures, imported for pytest

BENCH = BenchPreset(name="tiny", input_len=32, output_len=16, num_prompts=8, ignore_eos=True)


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


async def test_benchmark_of_a_group_shows_total_and_replica_lines(node, stop_all, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    pool = TransportPool()
    try:
        groups = GroupService(pool)
        snap = await sample_node(pool, node, probe=False)
        plan = await groups.plan([node], TINY, 2, gpus=[6, 7], snapshots={node.name: snap}, base_port=free_port())
        started = await groups.start(plan, [node], TINY, snapshots={node.name: snap})
        assert (await groups.wait_ready([node], started, timeout=60, poll_every=0.3)).ready == 2
        app = ConsoleApp(
            Profile(nodes=(node,), serve_presets=(TINY,), bench_presets=(BENCH,)),
            interval=0.2,
            notify_health=False,
            cursor_blink=False,
            redraw_interval=0.05,
            instance_poll_interval=0.3,
        )
        async with app.run_test(size=(140, 45), notifications=True) as pilot:
            await until_live(pilot, app)
            await pilot.press("i")
            panel = app.screen
            assert await wait_for(pilot, lambda: panel.select("", "tiny-x2"), timeout=30)
            await wait_for(pilot, lambda: panel.selected_group is not None and panel.selected_group.ready == 2)
            await pilot.press("b")
            assert isinstance(app.screen, GroupBenchScreen)
            app.screen.query_one("#group-bench-concurrency").value = "4"
            app.screen.start()
            assert await wait_for(pilot, lambda: "group tiny-x2: ok" in screen_text(app), timeout=60), screen_text(app)
            text = screen_text(app)
            assert "completed 8  failed 0" in text and "(sum of 2 clients)" in text
            assert "r0    ████████████████████ 4/4" in text and "r1    ████████████████████ 4/4" in text
            assert "tiny-x2-r0" in text and "tiny-x2-r1" in text  # each replica's own result below
            assert await wait_for(pilot, lambda: "stored as " in screen_text(app), timeout=20)
            assert History(data_dir=tmp_path / "data").runs.count() == 3  # the data dir's store
    finally:
        await pool.close()
