"""MultiNodeService on two simulated nodes (simulated ray and vllm, LocalTransport).

The real Ray over real sshd is tests/integration/test_ray_multinode.py; this covers
what the UI relies on: stop and logs from a worker node reach the whole instance,
and vLLM restarts on a cluster that is still up.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from console.core.model import ServePreset
from console.services.instances import InstanceError, InstanceService, InstanceState
from console.services.multinode import MultiNodeService
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.ui.model.instance_source import ServiceInstances
from tests.helpers import free_port


@pytest.fixture(autouse=True)
def fast_sim_vllm(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


def sim_ray_pids(tmp_path: Path) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"ray" in args and b"start" in args and any(str(tmp_path).encode() in a for a in args):
                out.append(int(entry))
    return out


async def test_stop_and_logs_from_the_worker_node_and_restart(sim_node, tmp_path):
    a = sim_node("mn-a", seed=1, state_dir=str(tmp_path / "a"))
    b = sim_node("mn-b", seed=2, state_dir=str(tmp_path / "b"))
    preset = ServePreset(name="big", model="meta-llama/Llama-3.1-405B-Instruct", tp=8, pp=2, ray_port=free_port())
    pool = TransportPool()
    service = MultiNodeService(InstanceService(pool))
    ui = ServiceInstances(pool)
    try:
        snaps = {n.name: await sample_node(pool, n, probe=False) for n in (a, b)}
        view = await service.start([a, b], preset, snapshots=snaps, name="big", port=free_port())
        assert view.nodes == ("mn-a", "mn-b")
        assert (view.stage, view.stage_detail) == ("ray-cluster-up", "Ray cluster up (2 nodes)")
        ready = await service.instances.wait_ready(a, "big", timeout=60)
        assert ready.state == InstanceState.READY, ready.reason
        assert len(sim_ray_pids(tmp_path)) == 2
        # a one-node start of a PP preset would drop --pipeline-parallel-size: refused
        with pytest.raises(InstanceError, match="spans several nodes"):
            await service.instances.start(a, preset, gpus=range(8), snapshot=snaps["mn-a"])
        # vLLM again on the same cluster: refused while it runs
        with pytest.raises(InstanceError, match="still running"):
            await service.restart([a, b], "big", preset)
        # the worker's rows name the instance; its log is the head's
        await ui.poll(a, snaps["mn-a"])  # the UI polls every node, so it knows them all
        [row] = [v for v in await ui.poll(b, snaps["mn-b"]) if v.name == "big"]
        assert row.nodes == ("mn-a", "mn-b") and row.gpus == tuple(range(8))
        lines = [line async for line in ui.log_lines(b, "big", lines=400)]
        assert any("Ray cluster at localhost:" in line and ": 2 nodes" in line for line in lines)
        # stop from the worker: vLLM, then Ray on both nodes
        stopped = await ui.stop(b, "big")
        assert stopped.state == InstanceState.STOPPED and stopped.node == "mn-b"
        assert sim_ray_pids(tmp_path) == []
        with pytest.raises(InstanceError, match="Ray of big is not running"):
            await service.restart([a, b], "big", preset)
        # forgotten from the worker's row: gone from both nodes
        await ui.remove(b, "big")
        assert [v.name for v in await ui.poll(a, snaps["mn-a"]) if v.name.startswith("big")] == []
        assert [v.name for v in await ui.poll(b, snaps["mn-b"]) if v.name.startswith("big")] == []
    finally:
        try:
            await service.stop([a, b], "big", int_timeout=5)
        except InstanceError:
            pass
        await pool.close()


async def test_a_lost_head_ray_fails_the_worker_row_with_rays_line(sim_node, tmp_path):
    a = sim_node("mn-a", seed=1, state_dir=str(tmp_path / "a"))
    b = sim_node("mn-b", seed=2, state_dir=str(tmp_path / "b"))
    preset = ServePreset(name="big", model="meta-llama/Llama-3.1-405B-Instruct", tp=8, pp=2, ray_port=free_port())
    pool = TransportPool()
    service = MultiNodeService(InstanceService(pool))
    ui = ServiceInstances(pool)
    try:
        snaps = {n.name: await sample_node(pool, n, probe=False) for n in (a, b)}
        await service.start([a, b], preset, snapshots=snaps, name="big", port=free_port())
        head_ray = int((tmp_path / "a" / "instances" / "big.ray" / "pid").read_text())
        os.kill(head_ray, 9)
        row = None
        for _ in range(50):
            [row] = [v for v in await ui.poll(b, snaps["mn-b"]) if v.name == "big"]
            if row.state == InstanceState.FAILED:
                break
            await asyncio.sleep(0.2)
        assert row is not None and row.state == InstanceState.FAILED
        assert row.reason is not None and row.reason.startswith(
            "node mn-b: Ray exited: Some Ray subprocesses exited unexpectedly: raylet [exit code=1] (GCS at localhost:"
        ), row.reason
    finally:
        try:
            await service.stop([a, b], "big", int_timeout=5)
        except InstanceError:
            pass
        await pool.close()
    assert sim_ray_pids(tmp_path) == []


def test_long_instance_names_fit_rays_socket_paths():
    from console.core.multinode import MAX_TEMP_DIR
    from console.services.multinode import TEMP_ROOT, _short

    for name in ("llama-3.1-405b-tp8-pp2", "x" * 64, "tiny"):
        assert len(f"{TEMP_ROOT}/{_short(name)}-9") <= MAX_TEMP_DIR
    assert _short("tiny") == "tiny" and _short("a" * 30) != _short("a" * 29 + "b")
