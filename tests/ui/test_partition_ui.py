"""The partition dialog against a simulated node: real agent, fake amdsmi, LocalTransport.

A minimal host app (not ConsoleApp) carries the fleet service, so these tests only
depend on the dialog and the services.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from textual.app import App
from textual.widgets import Button, Input, Static

from console.core.model import Profile, ServePreset, SimulateSpec
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry
from console.services.health_watch import HealthWatch
from console.services.partitions import PartitionService
from console.ui.screens.partition import (
    PartitionScreen,
    PartitionSwitched,
    ReloadConfirm,
    StartPresetRequested,
)
from console.ui.screens.process_end import ProcessEndScreen
from tests.helpers import free_port

from .conftest import wait_for

CPX_PRESET = ServePreset(name="llama-3.1-8b-fp8-cpx", model="amd/Llama-3.1-8B-Instruct-FP8-KV", tp=1)
PRESETS = (ServePreset(name="llama-3.1-70b-fp8", model="amd/Llama-3.1-70B-Instruct-FP8-KV", tp=8), CPX_PRESET)


class Host(App):
    """Just enough app for the dialog: a started fleet and a profile."""

    def __init__(self, fleet: FleetTelemetry, profile: Profile) -> None:
        super().__init__()
        self.fleet = fleet
        self.profile = profile
        self.cursor_blink = False
        self.health_watch: HealthWatch | None = None  # the fleet's timeline, when a test gives one

    async def on_mount(self) -> None:
        await self.fleet.start()

    async def on_unmount(self) -> None:
        for worker in list(self.workers):
            worker.cancel()
        await self.fleet.stop()


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


def set_sim(tmp_path, name, **changes):
    path = tmp_path / "state" / "sim" / name / "state.json"
    state = json.loads(path.read_text())
    state.update(changes)
    path.write_text(json.dumps(state))


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def open_dialog(pilot, app, tmp_path, node: str, **kwargs) -> PartitionScreen:
    fleet = app.fleet
    assert await wait_for(
        pilot, lambda: len(fleet.snapshot(node).static) > 0 and fleet.snapshot(node).latest is not None, timeout=30
    )
    set_sim(tmp_path, node, switch_seconds=0)
    screen = PartitionScreen(fleet, node, service=PartitionService(fleet.pool), **kwargs)
    await app.push_screen(screen)
    await pilot.pause()
    return screen


async def test_cpx_on_two_gpus_reflows_to_22_logical(sim_node, tmp_path):
    node = sim_node("part")
    fleet = FleetTelemetry([node], interval=0.2)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    messages = []
    async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
        screen = await open_dialog(pilot, app, tmp_path, "part", physical=[0, 1])
        assert screen.query_one("#partition-gpus", Input).value == "0,1"
        assert "GPU 0,1  SPX/NPS1 · 1 logical GPU each" in text_of(screen, "#partition-now")
        # "unchanged" everywhere: nothing to switch yet
        assert await wait_for(pilot, lambda: screen.reasons and "choose a compute" in screen.reasons[0])
        assert screen.query_one("#partition-go", Button).disabled

        await pilot.click("#compute-cpx")
        assert "2 physical MI300X SPX/NPS1 → CPX/NPS1: 8 → 22 logical GPUs, TP 1 per logical GPU only" in text_of(
            screen, "#partition-change"
        )
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons
        assert "✓ preflight passed" in text_of(screen, "#partition-preflight")
        assert not screen.query_one("#partition-go", Button).disabled

        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: screen.state == PartitionScreen.DONE, timeout=60), screen.failure
        result_text = text_of(screen, "#partition-result")
        assert "✓ part: GPU 0,1 now CPX/NPS1 (verified" in result_text
        assert "22 logical GPUs on the node" in result_text
        switched = [m for m in messages if isinstance(m, PartitionSwitched)]
        assert len(switched) == 1 and switched[0].result.logical_gpus == 22

        # the fleet restarts the node's stream: its snapshot has the new rows at once
        assert await wait_for(pilot, lambda: len(fleet.snapshot("part").static) == 22, timeout=30)
        static = fleet.snapshot("part").static
        assert [g.compute_partition for g in static].count("CPX") == 16

        # the CPX preset is offered for the new logical GPUs 0-15
        assert screen.offer == CPX_PRESET and screen.new_gpus == tuple(range(16))
        assert "llama-3.1-8b-fp8-cpx" in text_of(screen, "#partition-offer")
        await pilot.press("s")
        await pilot.pause()
        asked = [m for m in messages if isinstance(m, StartPresetRequested)]
        assert len(asked) == 1
        assert (asked[0].node, asked[0].preset_name, asked[0].gpus) == ("part", "llama-3.1-8b-fp8-cpx", (0,))
        assert asked[0].new_gpus == tuple(range(16))
        assert not isinstance(app.screen, PartitionScreen)


async def test_busy_gpu_is_refused_and_confirm_stays_disabled(sim_node, tmp_path):
    # the demo-style workload: a sticky process on logical GPU 1
    node = sim_node("busy", simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 0, busy=(1,)))
    fleet = FleetTelemetry([node], interval=0.2)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(
            pilot,
            lambda: (
                fleet.snapshot("busy").latest is not None
                and any(g.processes for g in fleet.snapshot("busy").latest.gpus)
            ),
            timeout=30,
        )
        screen = await open_dialog(pilot, app, tmp_path, "busy", physical=[0, 1], compute="CPX")
        assert await wait_for(pilot, lambda: not screen.checking and screen.reasons, timeout=30)
        assert screen.reasons == ["GPU 1: process 4000 (python3 (sim workload)) is using it"]
        assert "✗ GPU 1: process 4000 (python3 (sim workload)) is using it" in text_of(screen, "#partition-preflight")
        go = screen.query_one("#partition-go", Button)
        assert go.disabled
        await pilot.press("ctrl+s")
        await pilot.click("#partition-go")
        await pilot.pause()  # both handled (a switch would have begun at once)
        assert screen.state == PartitionScreen.CHOOSE
        assert fleet.snapshot("busy").static[0].compute_partition == "SPX"

        # GPU 0 alone is free: the preflight passes
        box = screen.query_one("#partition-gpus", Input)
        box.value = "0"
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons
        assert not go.disabled

        # a GPU the node does not have
        box.value = "0,9"
        assert await wait_for(pilot, lambda: screen.reasons and "no physical GPU 9" in screen.reasons[0])
        assert go.disabled


async def test_memory_switch_needs_the_second_confirmation(sim_node, tmp_path):
    node = sim_node("mem", compute="CPX")
    fleet = FleetTelemetry([node], interval=0.5)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_dialog(pilot, app, tmp_path, "mem", memory="NPS4")
        assert "the amdgpu driver is reloaded" in text_of(screen, "#partition-change")
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons

        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ReloadConfirm)
        assert app.screen.focused is not None and app.screen.focused.id == "reload-no"
        await pilot.press("n")  # not now: back to the dialog, nothing switched
        await pilot.pause()
        assert app.screen is screen and screen.state == PartitionScreen.CHOOSE

        await pilot.click("#partition-go")
        await pilot.pause()
        assert isinstance(app.screen, ReloadConfirm)
        await pilot.press("y")
        assert await wait_for(pilot, lambda: screen.state == PartitionScreen.DONE, timeout=60), screen.failure
        assert {g["memory_partition"] for g in screen.result.gpus} == {"NPS4"}
        assert "now CPX/NPS4" in text_of(screen, "#partition-result")


async def test_no_root_failure_names_sudo(sim_node, tmp_path):
    node = sim_node("noroot")
    fleet = FleetTelemetry([node], interval=0.5)
    app = Host(fleet, Profile(nodes=(node,)))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_dialog(pilot, app, tmp_path, "noroot", physical=[0], compute="CPX")
        set_sim(tmp_path, "noroot", root=False)  # the device refuses: needs root
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: screen.failure is not None, timeout=60)
        assert screen.state == PartitionScreen.CHOOSE
        text = text_of(screen, "#partition-result")
        assert "✗ switch failed" in text and "sudo = true" in text


def test_for_selection_maps_logical_to_physical():
    from console.core.model import GpuStatic, NodeHealth, NodeSnapshot

    snap = NodeSnapshot(
        "n", NodeHealth.LIVE, static=tuple(GpuStatic(index=i, physical=i // 8, partition_id=i % 8) for i in range(16))
    )

    class Fleet:
        pool = None

        def snapshot(self, node):
            return snap

    screen = PartitionScreen.for_selection(Fleet(), "n", [9, 12])
    assert screen.initial_physical == [1]
    assert PartitionScreen.for_selection(Fleet(), "n").initial_physical is None


DEMO_CPX_BUSY = (0, 3, 9, 10, 17, 26, 27, 28, 40, 63)  # profiles/demo.toml's mi300x-cpx


async def choose_compute(pilot, screen: PartitionScreen, steps: int) -> None:
    """As a person does: the compute row has the focus, its cursor on "unchanged"; move, then select."""
    assert screen.focused is screen.query_one("#partition-compute")
    for _ in range(steps):
        await pilot.press("right")
    await pilot.press("enter")


async def test_demo_cpx_node_to_spx_and_back_by_keys(sim_node, tmp_path):
    # the demo's CPX node: ten simulated foreign workloads and the demo's instance on GPU 1
    # block the whole-node switch
    node = sim_node("cpx", simulate=SimulateSpec("MI300X", 8, "CPX", "NPS1", 2, busy=DEMO_CPX_BUSY))
    fleet = FleetTelemetry([node], interval=0.2)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(
            pilot, lambda: fleet.snapshot("cpx").latest is not None and len(fleet.snapshot("cpx").static) == 64, 30
        )
        instances = PartitionService(fleet.pool).instances
        # the demo's instance: its preset's max-model-len fits a CPX GPU's KV cache
        demo_preset = dataclasses.replace(CPX_PRESET, args=("--max-model-len", "4608"))
        await instances.start(
            node, demo_preset, gpus=[1], snapshot=fleet.snapshot("cpx"), port=free_port(), name="llama-g1"
        )
        screen = await open_dialog(pilot, app, tmp_path, "cpx")
        await choose_compute(pilot, screen, 1)  # SPX
        assert await wait_for(pilot, lambda: not screen.checking and screen.reasons, timeout=30)
        assert len(screen.preflight.blockers) == 10 and screen.query_one("#partition-go", Button).disabled
        assert screen.preflight.instances == (("llama-g1", (1,)),)
        assert "GPU 1 runs instance llama-g1: stop it first" in screen.reasons
        assert "k: stop the instance and end the 10 blocking processes" in text_of(screen, "#partition-blockers")
        assert "logical GPU 0-63 → 0-7 (physical 0-7, switched)" in text_of(screen, "#partition-renumber")

        await pilot.press("k")
        await pilot.pause()
        ender = app.screen
        assert isinstance(ender, ProcessEndScreen) and ender.focused.id == "process-end-no"
        await pilot.press("y")
        # every one ended: the dialog closes by itself and the preflight runs again
        sticky = {4000 + 17 * n for n in range(10)}
        assert await wait_for(pilot, lambda: app.screen is screen and sticky <= screen.ended_pids, timeout=90)
        assert ender.stopped == ["llama-g1"] and ender.stopped_pids  # its processes: no blockers either
        assert screen.ended_pids == sticky | ender.stopped_pids
        procs = json.loads((tmp_path / "state" / "sim" / "cpx" / "processes.json").read_text())
        assert procs == []
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons

        await pilot.press("ctrl+s")  # no memory change: no driver-reload question
        assert await wait_for(pilot, lambda: screen.state == PartitionScreen.DONE, timeout=60), screen.failure
        assert "✓ cpx: GPU 0-7 now SPX/NPS1 (verified" in text_of(screen, "#partition-result")
        assert await wait_for(pilot, lambda: len(fleet.snapshot("cpx").static) == 8, timeout=30)
        await pilot.press("escape")
        await pilot.pause()

        # and back to CPX: nothing blocks any more
        screen = await open_dialog(pilot, app, tmp_path, "cpx")
        await choose_compute(pilot, screen, 4)  # CPX
        assert await wait_for(pilot, lambda: screen.can_switch, timeout=30), screen.reasons
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: screen.state == PartitionScreen.DONE, timeout=60), screen.failure
        assert await wait_for(pilot, lambda: len(fleet.snapshot("cpx").static) == 64, timeout=30)


async def test_one_cpx_gpu_without_a_false_reload_warning(sim_node, tmp_path):
    node = sim_node("one", compute="CPX")
    fleet = FleetTelemetry([node], interval=0.2)
    app = Host(fleet, Profile(nodes=(node,), serve_presets=PRESETS))
    log = EventLog(tmp_path / "events.jsonl")
    app.health_watch = HealthWatch(fleet, events=log)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_dialog(pilot, app, tmp_path, "one", physical=[1])
        # the mode it has: "unchanged", no refusal, no warning, nothing to switch
        await choose_compute(pilot, screen, 4)  # CPX
        assert await wait_for(pilot, lambda: screen.preflight.note != "", timeout=10)
        assert text_of(screen, "#partition-preflight") == "unchanged: GPU 1 is already CPX/NPS1 (nothing to switch)"
        assert screen.query_one("#partition-go", Button).disabled and not screen.reasons
        # SPX with NPS1 (its memory mode): no driver reload said or asked
        await pilot.press("left", "left", "left", "enter")  # SPX
        screen.query_one("#memory-nps1").value = True
        await pilot.pause()  # its check starts: wait for that one, not the one before
        assert await wait_for(pilot, lambda: screen.can_switch and screen._target[2] is None, timeout=30), (
            screen.reasons
        )
        change = text_of(screen, "#partition-change")
        assert change == "1 physical MI300X CPX/NPS1 → SPX/NPS1: 64 → 57 logical GPUs"
        assert "reload" not in text_of(screen, "#partition-preflight")
        assert "logical GPU 16-63 → 9-56 (physical 2-7: not switched, renumbered)" in text_of(
            screen, "#partition-renumber"
        )
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, ReloadConfirm)
        assert await wait_for(pilot, lambda: screen.state == PartitionScreen.DONE, timeout=60), screen.failure
        assert "57 logical GPUs on the node" in text_of(screen, "#partition-result")
        assert await wait_for(pilot, lambda: len(fleet.snapshot("one").static) == 57, timeout=30)
        await pilot.pause(0.5)  # samples of the new layout reach the timeline's watch
    # the switch is on the fleet's timeline, once: the node itself did not change (8 MI300X
    # still, whatever their logical count), so no node.changed and no change mark
    [switch] = [e for e in log.read() if e.kind == "partition.switched"]
    assert (switch.node, switch.message) == ("one", "partition switched to SPX on GPUs 1")
    assert (tmp_path / "node-versions" / "one.json").exists()  # the node's versions were recorded
    assert [e.kind for e in log.read() if e.kind == "node.changed"] == [] and app.health_watch.changes == {}


async def test_a_refused_end_stays_with_the_nodes_reason(sim_node, tmp_path):
    from textual.widgets import DataTable

    from console.core.partition_rules import Blocker

    node = sim_node("ref", simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 0, busy=(2,)))
    fleet = FleetTelemetry([node], interval=0.5)
    app = Host(fleet, Profile(nodes=(node,)))
    async with app.run_test(size=(120, 36)) as pilot:
        # pid 2 is no GPU process there (the console never decides that, the node's agent does)
        screen = ProcessEndScreen(node, [Blocker(2, "kthreadd", (2,))], pool=fleet.pool, grace=1)
        await app.push_screen(screen)
        await pilot.press("y")
        assert await wait_for(pilot, lambda: screen.done, timeout=60)
        assert app.screen is screen and screen.ended == []
        table = screen.query_one("#process-end-table", DataTable)
        result = str(table.get_cell("2", "result"))
        assert result.startswith("✗ pid 2 is not a GPU process on this node (the agent sees 1: 4000)")
        assert table.columns["result"].content_width >= len(result)  # the reason is shown whole, not cut
        assert "ended 0 of 1; 1 not ended" in str(screen.query_one("#process-end-status", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen
