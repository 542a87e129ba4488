"""InstanceService against the simulated node (fake amdsmi + fake vllm) over LocalTransport."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from console.core.model import ServePreset
from console.services.instances import InstanceError, InstanceService, InstanceState, place_unmanaged
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.helpers import free_port

TINY = ServePreset(name="tiny", model="tiny-llama", tp=1, args=("--dtype", "float32", "--max-model-len", "2048"))


async def test_start_ready_stop_and_adopt(sim_node, service):
    svc, started = service
    node = sim_node("n1")
    snap = await sample_node(svc.pool, node, probe=False)
    port = free_port()
    view = await svc.start(node, TINY, gpus=[2], snapshot=snap, port=port, name="tiny-a")
    started.append((node, "tiny-a"))
    assert view.state == InstanceState.STARTING and view.pid and view.gpus == (2,)
    stages = []
    ready = await svc.wait_ready(node, "tiny-a", timeout=60, on_update=lambda v: stages.append(v.stage))
    assert ready.state == InstanceState.READY, ready.reason
    assert ready.served_models == ("tiny-llama",)
    assert "weights-loaded" in stages and "kv-cache" in stages  # stages read from the log
    # the simulated GPU now shows the server's process
    snap = await sample_node(svc.pool, node, probe=False)
    gpu2 = next(g for g in snap.latest.gpus if g.index == 2)
    assert any(p.pid == ready.pid for p in gpu2.processes)

    # a fresh service (a restarted console) finds the instance again
    fresh = InstanceService(TransportPool())
    [adopted] = [v for v in await fresh.list_checked(node) if v.name == "tiny-a"]
    assert adopted.state == InstanceState.READY and adopted.port == port and adopted.gpus == (2,)
    await fresh.pool.close()

    stopped = await svc.stop(node, "tiny-a")
    assert stopped.state == InstanceState.STOPPED and "SIGINT" in stopped.reason
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    snap = await sample_node(svc.pool, node, probe=False)
    assert not next(g for g in snap.latest.gpus if g.index == 2).processes


async def test_failed_start_reports_vllms_own_line(sim_node, service):
    svc, started = service
    node = sim_node("n2")
    await svc.start(node, TINY, gpus=[0], port=free_port(), name="too-long", overrides={"max_model_len": "999999"})
    started.append((node, "too-long"))
    failed = await svc.wait_ready(node, "too-long", timeout=60)
    assert failed.state == InstanceState.FAILED
    assert failed.reason.startswith("max_model_len too large: ")
    assert "999999" in failed.reason and failed.exit_code == 1


async def test_rules_refuse_before_anything_starts(sim_node, service, tmp_path):
    svc, started = service
    cpx = sim_node("cpx", compute="CPX")
    snap = await sample_node(svc.pool, cpx, probe=False)
    tp2 = ServePreset(name="tp2", model="m", tp=2)
    with pytest.raises(InstanceError, match="TP 2 needs 2 GPUs, 1 given"):
        await svc.start(cpx, tp2, gpus=[0], snapshot=snap)
    with pytest.raises(InstanceError, match="CPX"):
        await svc.start(cpx, tp2, gpus=[0, 1], snapshot=snap)
    with pytest.raises(InstanceError, match="no GPU 99"):
        await svc.start(cpx, TINY, gpus=[99], snapshot=snap)
    port = free_port()
    await svc.start(cpx, TINY, gpus=[5], snapshot=snap, port=port, name="first")
    started.append((cpx, "first"))
    with pytest.raises(InstanceError, match="GPU 5"):
        await svc.start(cpx, TINY, gpus=[5], snapshot=snap, name="second")
    with pytest.raises(InstanceError, match=str(port)):
        await svc.start(cpx, TINY, gpus=[6], snapshot=snap, port=port, name="third")
    with socket.socket() as busy:  # a port taken by someone else on the simulated node: the next free one
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        held = busy.getsockname()[1]
        fourth = await svc.start(cpx, TINY, gpus=[7], snapshot=snap, port=held, name="fourth")
        started.append((cpx, "fourth"))
    assert (
        fourth.port != held and f"cpx: port {held} was taken; the instance listens on {fourth.port}" in fourth.warnings
    )
    assert {v.name for v in await svc.list(cpx) if v.state != InstanceState.UNMANAGED} == {"first", "fourth"}


async def test_hf_token_comes_from_the_environment_and_is_never_stored(sim_node, service, tmp_path):
    svc, started = service
    node = sim_node("n3")
    await svc.start(node, TINY, gpus=[1], port=free_port(), name="tok", environ={"HF_TOKEN": "hf_topsecret"})
    started.append((node, "tok"))
    folder = tmp_path / "state" / "instances" / "tok"
    spec = json.loads((folder / "spec.json").read_text())
    assert spec["env"]["HF_TOKEN"] == "***"
    assert "hf_topsecret" not in json.dumps(spec)
    [view] = [v for v in await svc.list(node) if v.name == "tok"]
    assert "hf_topsecret" not in json.dumps(view.as_dict())


async def test_unmanaged_servers_are_placed_on_their_gpus(sim_node, service, tmp_path):
    svc, started = service
    node = sim_node("n4")
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    import subprocess

    proc = subprocess.Popen([str(fake), "serve", "someone/elses-model"])
    # a vLLM of another program on this host, on none of the simulated node's GPUs: not on that node
    elsewhere = subprocess.Popen([str(fake), "serve", "another/hosts-model"])
    try:
        sim_dir = tmp_path / "state" / "sim" / "n4"
        await sample_node(svc.pool, node, probe=False)  # creates the simulated node
        (sim_dir / "processes.json").write_text(
            json.dumps([{"pid": proc.pid, "name": "python3", "gpu": 6, "vram_bytes": 2**34}])
        )
        views = await svc.list(node)
        mine = [v for v in views if v.state == InstanceState.UNMANAGED and v.pid == proc.pid]
        assert mine and mine[0].model == "someone/elses-model"
        assert not [v for v in views if v.pid == elsewhere.pid]
        placed = place_unmanaged(views, await sample_node(svc.pool, node, probe=False))
        [v] = [v for v in placed if v.pid == proc.pid]
        assert v.gpus == (6,)
    finally:
        for p in (proc, elsewhere):
            p.kill()
            p.wait()
