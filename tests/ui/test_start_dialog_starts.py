"""What `serve start` can start, the start dialog starts (issue U): one instance at the TP chosen
in the TP field, a replica group from the replicas field (packed too, under the same rule), a
multi-node instance over the nodes ticked, and the presets whose model is on the node first.
Simulated nodes: the real agent, instance, group and multi-node services over LocalTransport."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select, SelectionList

from console.core.model import Profile, ServePreset
from console.services.groups import per_gpu_refusal
from console.services.instances import InstanceService, InstanceState
from console.services.multinode import MultiNodeService
from console.services.transports import TransportPool
from console.ui.app import ConsoleApp
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.start_dialog import StartDialog
from tests.helpers import free_port

from .conftest import screen_text, wait_for
from .test_instances_ui import TINY, TINY_TP2, make_app, open_dialog, stop_all, submit, toasts, until_live

__all__ = ["stop_all"]  # a fixture, imported for pytest


@pytest.fixture(autouse=True)
def fast_sim_vllm(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture
def node(sim_node, tmp_path):
    return sim_node("n1", seed=5, state_dir=str(tmp_path / "n1"))


def preview(dialog: StartDialog) -> str:
    return str(dialog.query_one("#start-preview").render())


def tp_options(dialog: StartDialog) -> list[int]:
    return [value for _, value in dialog.query_one("#start-tp", Select)._options]


async def test_tp_field_and_a_replica_group_start_as_the_cli_does(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 44), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 0, 1, 2, 3)
        assert tp_options(dialog) == [1, 2, 4]  # what 4 marked GPUs allow
        assert dialog.query_one("#start-tp", Select).value == 1  # the preset's TP
        assert "TP 1 needs 1 GPU, 4 given: set Replicas to 4" in preview(dialog)
        error = dialog.query_one("#start-error")
        await submit(pilot, dialog)
        assert str(error.render()).startswith("TP: one instance of TP 1 runs on 1 GPU, 4 are given: set Replicas to 4")
        await submit(pilot, dialog, overrides="tp=4")
        assert str(error.render()) == "overrides: tp=4: the TP field sets the tensor-parallel size"
        # a group of two TP 2 replicas over the four marked GPUs, as `serve start --replicas per-gpu` with --gpus
        dialog.query_one("#start-tp", Select).value = 2
        await pilot.pause()
        # the summary follows every field as it changes
        assert "TP 2 on n1 · GPUs 0,1,2,3" in preview(
            dialog
        ) and "TP 2 needs 2 GPUs, 4 given: set Replicas to 2" in preview(dialog)
        assert "replica group" not in preview(dialog)
        dialog.query_one("#start-replicas", Input).value = "per GPU"
        await pilot.pause()
        assert "replica group (--replicas per-gpu): replicas of TP 2" in preview(dialog)
        assert "needs 2 GPUs" not in preview(dialog)
        await submit(pilot, dialog, overrides="", replicas="per GPU", port=str(free_port()))
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=30), error.render()
        assert await wait_for(pilot, lambda: any("group tiny-x2: 2 of 2 replicas starting" in t for t in toasts(app)))
        assert await wait_for(
            pilot, lambda: {v.name for v in app.board.views("n1")} >= {"tiny-x2-r0", "tiny-x2-r1"}, timeout=20
        )
        views = {v.name: v for v in app.board.views("n1")}
        assert views["tiny-x2-r0"].gpus == (0, 1) and views["tiny-x2-r1"].gpus == (2, 3)
        assert "--tensor-parallel-size" in views["tiny-x2-r0"].argv
        tp_at = list(views["tiny-x2-r0"].argv).index("--tensor-parallel-size")
        assert views["tiny-x2-r0"].argv[tp_at + 1] == "2"
        assert await wait_for(
            pilot,
            lambda: all(v.state == InstanceState.READY for v in app.board.views("n1") if v.group == "tiny-x2"),
            timeout=40,
        )


async def test_packed_replicas_share_a_gpu_under_the_clis_rule(node, stop_all):
    app = make_app(node)
    async with app.run_test(size=(140, 44), notifications=True) as pilot:
        table = await until_live(pilot, app)
        dialog = await open_dialog(pilot, app, table, 6)
        error = dialog.query_one("#start-error")
        # the sum over the GPU above 0.95: refused in the CLI's own words, before anything starts
        await submit(pilot, dialog, replicas="2 per GPU", overrides="gpu_memory_utilization=0.6")
        want = per_gpu_refusal(2, [*TINY.args, "--gpu-memory-utilization", "0.6"])
        assert want == "--per-gpu 2: gpu_memory_utilization would sum to 1.20 > 0.95 on each GPU (2 x 0.6)"
        assert f"⚠ {want}" in preview(dialog)  # said early too
        assert await wait_for(pilot, lambda: str(error.render()) == want, timeout=15), error.render()
        await submit(pilot, dialog, overrides="gpu_memory_utilization=0.45", port=str(free_port()), name="half")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=30), error.render()
        assert await wait_for(
            pilot, lambda: sorted(v.name for v in managed(app.board.views("n1"))) == ["half-r0", "half-r1"], timeout=20
        )
        assert all(v.gpus == (6,) for v in managed(app.board.views("n1")))  # both on GPU 6


async def test_models_on_the_node_come_first_and_a_missing_one_says_its_size(sim_node, tmp_path):
    mi300 = sim_node("mi300", seed=3, state_dir=str(tmp_path / "a"))
    mi355 = sim_node("mi355", gpu="MI355X", seed=4, state_dir=str(tmp_path / "b"))
    meta = ServePreset(name="meta-70b", model="meta-llama/Llama-3.1-70B-Instruct", tp=8)
    small = ServePreset(name="amd-8b", model="amd/Llama-3.1-8B-Instruct-FP8-KV", tp=1)
    app = ConsoleApp(
        Profile(nodes=(mi300, mi355), serve_presets=(meta, small)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        redraw_interval=0.05,
    )
    async with app.run_test(size=(140, 44)) as pilot:
        assert await wait_for(pilot, lambda: len(app.fleet.snapshot("mi355").static) == 8, timeout=30)
        app.open_start_dialog("mi355", preset="meta-70b")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, StartDialog)
        presets = dialog.query_one("#start-preset", Select)
        # read in a worker: the dialog is up before any node answered
        assert await wait_for(pilot, lambda: "not on the node" in str(presets._options[-1][0]), timeout=60)
        assert await wait_for(pilot, lambda: "141." in str(presets._options[-1][0]), timeout=60)
        assert [value for _, value in presets._options] == ["amd-8b", "meta-70b"]  # the one on mi355 first
        assert "amd/Llama-3.1-8B-Instruct-FP8-KV" in str(presets._options[0][0]) and "on the node" in str(
            presets._options[0][0]
        )
        assert presets.value == "meta-70b"  # the choice stays
        line = next(ln for ln in preview(dialog).splitlines() if "not on mi355" in ln)
        assert line.startswith("⚠ meta-llama/Llama-3.1-70B-Instruct (141.") and "GB) is not on mi355" in line
        presets.value = "amd-8b"
        await pilot.pause()
        assert "not on mi355" not in preview(dialog)
        # its config.json is on the node: the fit line shows (on the GPU a blank field would pick)
        assert await wait_for(pilot, lambda: "fits (" in preview(dialog), timeout=30), preview(dialog)


async def test_multinode_instance_from_the_nodes_ticked(sim_node, tmp_path, monkeypatch):
    a = sim_node("mi300x-a", seed=31, state_dir=str(tmp_path / "a"))
    b = sim_node("mi300x-b", seed=32, state_dir=str(tmp_path / "b"))
    big = ServePreset(name="405b", model="meta-llama/Llama-3.1-405B-Instruct", tp=8, pp=2, ray_port=free_port())
    app = ConsoleApp(
        Profile(nodes=(a, b), serve_presets=(big, TINY, TINY_TP2)),
        interval=0.2,
        notify_health=False,
        cursor_blink=False,
        redraw_interval=0.05,
        instance_poll_interval=0.3,
    )
    pool = TransportPool()
    try:
        async with app.run_test(size=(140, 44), notifications=True) as pilot:
            assert await wait_for(
                pilot, lambda: all(len(app.fleet.snapshot(n).static) == 8 for n in ("mi300x-a", "mi300x-b")), 30
            )
            app.open_start_dialog("mi300x-a", preset="405b")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, StartDialog)
            nodes = dialog.query_one("#start-nodes", SelectionList)
            assert dialog.query_one("#start-nodes-row").display  # a multi-node preset: the nodes to tick
            assert "tick 2 or more in Nodes" in preview(dialog)
            error = dialog.query_one("#start-error")
            await submit(pilot, dialog, gpus="0")
            assert str(error.render()) == "GPUs: a multi-node instance takes the GPUs of each node: leave GPUs blank"
            await submit(pilot, dialog, gpus="")
            assert str(error.render()) == "nodes: preset 405b spans several nodes: tick 2 or more in Nodes"
            nodes.select("mi300x-b")
            await pilot.pause()
            assert "TP 8 × PP 2 on mi300x-a, mi300x-b (head mi300x-a)" in preview(dialog)
            await submit(pilot, dialog, name="big", port=str(free_port()))
            assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), timeout=90), error.render()
            assert await wait_for(
                pilot,
                lambda: (
                    sorted(g for g, v in app.board.on_gpus("mi300x-b").items() if v[0].name == "big") == list(range(8))
                ),
                timeout=30,
            )
            assert await wait_for(
                pilot,
                lambda: (v := app.board.find("mi300x-a", "big")) is not None and v.state == InstanceState.READY,
                60,
            )
            assert "big" in screen_text(app)
    finally:
        try:
            await MultiNodeService(InstanceService(pool)).stop([a, b], "big", int_timeout=5)
        finally:
            await pool.close()


def managed(views):
    """The console's own instances (a vLLM of another program on this host is listed too, as unmanaged)."""
    return [v for v in views if v.state != InstanceState.UNMANAGED]
