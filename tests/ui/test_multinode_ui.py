"""The app over two simulated nodes (real agent, simulated amdsmi, simulated ray and vllm):
a TP 8 × PP 2 405B instance on both is one instance, marked on both nodes' GPU rows."""

from __future__ import annotations

from console.core.model import Profile, ServePreset
from console.services.instances import InstanceService, InstanceState
from console.services.multinode import MultiNodeService
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.app import ConsoleApp
from tests.helpers import free_port

from .conftest import screen_text, wait_for

PRESET = ServePreset(name="405b", model="meta-llama/Llama-3.1-405B-Instruct", tp=8, pp=2, ray_port=free_port())


async def test_a_two_node_instance_is_listed_once_and_marked_on_both_nodes(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    a = sim_node("mi300x-a", seed=31, state_dir=str(tmp_path / "a"))
    b = sim_node("mi300x-b", seed=32, state_dir=str(tmp_path / "b"))
    pool = TransportPool()
    service = MultiNodeService(InstanceService(pool))
    app = ConsoleApp(
        Profile(nodes=(a, b), serve_presets=(PRESET,)), interval=0.2, notify_health=False, cursor_blink=False
    )
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            snaps = {n.name: await sample_node(pool, n, probe=False) for n in (a, b)}
            await service.start([a, b], PRESET, snapshots=snaps, name="big", port=free_port())
            ready = await service.instances.wait_ready(a, "big", timeout=60)
            assert ready.state == InstanceState.READY, ready.reason

            def marked(node):
                return sorted(g for g, views in app.board.on_gpus(node).items() if views[0].name == "big")

            assert await wait_for(pilot, lambda: marked("mi300x-a") == list(range(8)), timeout=20)
            assert await wait_for(pilot, lambda: marked("mi300x-b") == list(range(8)), timeout=20)
            assert await wait_for(pilot, lambda: screen_text(app).count("big") >= 16, timeout=10)
            assert await wait_for(
                pilot, lambda: all(v[0].state == InstanceState.READY for v in app.board.on_gpus("mi300x-b").values())
            )
            assert [v.name for v in app.board.views()] == ["big"]  # once, not once per node
            await pilot.press("i")  # the instances screen
            assert await wait_for(pilot, lambda: "mi300x-a" in screen_text(app) and "big" in screen_text(app))
            text = screen_text(app)
            rows = [line for line in text.splitlines() if line.lstrip().startswith("mi300x-")]
            assert len(rows) == 1 and rows[0].split()[:3] == ["mi300x-a+mi300x-b", "big", "●"]  # one row
            assert "1 on 2 nodes" in text and "big on mi300x-a, mi300x-b (head mi300x-a)" in text
    finally:
        try:
            await service.stop([a, b], "big", int_timeout=5)
        finally:
            await pool.close()
