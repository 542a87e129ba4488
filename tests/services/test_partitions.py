"""Partition switches on the simulated node: real agent, fake amdsmi, LocalTransport."""

from __future__ import annotations

import json

import pytest

from console.core.model import ServePreset
from console.services.partitions import PartitionFailed, PartitionRefused, PartitionService
from console.services.status import sample_node
from console.services.transports import TransportPool
from tests.helpers import free_port

TINY = ServePreset(name="tiny", model="tiny-llama", tp=1)


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")


@pytest.fixture
async def svc():
    pool = TransportPool()
    yield PartitionService(pool)
    await pool.close()


def sim_state(tmp_path, name):
    return tmp_path / "state" / "sim" / name / "state.json"


def set_state(tmp_path, name, **changes):
    path = sim_state(tmp_path, name)
    state = json.loads(path.read_text())
    state.update(changes)
    path.write_text(json.dumps(state))


async def test_spx_cpx_spx_round_trip(sim_node, svc, tmp_path):
    node = sim_node("rt")
    snap = await sample_node(svc.pool, node)
    assert len(snap.static) == 8
    set_state(tmp_path, "rt", switch_seconds=0.05)
    result = await svc.switch(node, snap, list(range(8)), compute="CPX", memory=None)
    assert result.logical_gpus == 64 and {g["compute_partition"] for g in result.gpus} == {"CPX"}
    assert "8 → 64 logical GPUs" in result.summary
    snap = await sample_node(svc.pool, node)
    assert len(snap.static) == 64  # the agent re-enumerates: 64 rows
    result = await svc.switch(node, snap, list(range(8)), compute="SPX", memory=None)
    assert result.logical_gpus == 8
    assert len((await sample_node(svc.pool, node)).static) == 8


async def test_refused_while_an_instance_runs(sim_node, svc, tmp_path):
    node = sim_node("busy")
    instances = svc.instances
    snap = await sample_node(svc.pool, node)
    await instances.start(node, TINY, gpus=[2], snapshot=snap, port=free_port(), name="on-two")
    try:
        await instances.wait_ready(node, "on-two", timeout=60)
        snap = await sample_node(svc.pool, node)
        with pytest.raises(PartitionRefused) as refused:
            await svc.switch(node, snap, [2], compute="CPX", memory=None)
        assert "GPU 2 runs instance on-two: stop it first" in refused.value.reasons
        # other GPUs are free to switch
        reasons, _ = await svc.check(node, snap, [3], compute="CPX", memory=None)
        assert reasons == []
    finally:
        await instances.stop(node, "on-two", int_timeout=5)


async def test_refused_without_root_by_the_device(sim_node, svc, tmp_path):
    node = sim_node("noroot")
    snap = await sample_node(svc.pool, node)
    set_state(tmp_path, "noroot", root=False, switch_seconds=0)
    with pytest.raises(PartitionFailed) as failed:
        await svc.switch(node, snap, [0], compute="CPX", memory=None)
    assert failed.value.kind == "no_perm" and "needs root" in str(failed.value)
    assert (await sample_node(svc.pool, node)).static[0].compute_partition == "SPX"


async def test_no_root_and_no_sudo_is_refused_before_running(sim_node, svc):
    node = sim_node("user")
    snap = await sample_node(svc.pool, node)
    from dataclasses import replace

    as_user = replace(snap, probe=replace(snap.probe, uid=1000))
    reasons, _ = await svc.check(node, as_user, [0], compute="CPX", memory=None)
    assert any(r.startswith("no root") for r in reasons)
    reasons, _ = await svc.check(replace(node, sudo=True), as_user, [0], compute="CPX", memory=None)
    assert not any(r.startswith("no root") for r in reasons)


async def test_memory_switch_needs_second_confirmation(sim_node, svc, tmp_path):
    node = sim_node("mem", compute="CPX")
    snap = await sample_node(svc.pool, node)
    set_state(tmp_path, "mem", switch_seconds=0)
    with pytest.raises(PartitionRefused) as refused:
        await svc.switch(node, snap, list(range(8)), compute=None, memory="NPS4")
    assert any("second confirmation" in r for r in refused.value.reasons)
    result = await svc.switch(node, snap, list(range(8)), compute=None, memory="NPS4", reload_confirmed=True)
    assert {g["memory_partition"] for g in result.gpus} == {"NPS4"}
    assert "driver is reloaded" in result.summary


def test_a_switch_is_only_called_verified_when_every_mode_was_read_back():
    from console.services.partitions import SwitchResult

    ok = SwitchResult(node="n", gpus=(), logical_gpus=8, seconds=1.0, summary="")
    assert ok.verification() == "verified"
    blind = SwitchResult(node="n", gpus=(), logical_gpus=8, seconds=1.0, summary="", unverified=(0, 3))
    assert blind.verification().startswith("not verified: the mode of GPU 0, 3 could not be read back")


async def test_the_memory_mode_a_gpu_has_needs_no_reload_and_no_change_is_refused(sim_node, svc, tmp_path):
    node = sim_node("keep", compute="CPX")
    snap = await sample_node(svc.pool, node)
    set_state(tmp_path, "keep", switch_seconds=0)
    # NPS1 is what GPU 1 has: no driver reload, so no second confirmation is asked for
    result = await svc.switch(node, snap, [1], compute="SPX", memory="NPS1")
    assert result.logical_gpus == 57 and "reload" not in result.summary
    assert json.loads(sim_state(tmp_path, "keep").read_text())["gpus"][1]["compute_partition"] == "SPX"
    snap = await sample_node(svc.pool, node)
    with pytest.raises(PartitionRefused) as refused:
        await svc.switch(node, snap, [1], compute="SPX", memory="NPS1")
    assert refused.value.reasons == ["unchanged: 1 physical MI300X already SPX/NPS1: nothing to switch"]


async def test_the_check_lists_blockers_and_renumbering(sim_node, svc, tmp_path):
    from console.core.model import SimulateSpec
    from console.core.partition_rules import Blocker

    node = sim_node("blk", simulate=SimulateSpec("MI300X", 8, "CPX", "NPS1", 0, busy=(9, 10)))
    snap = await sample_node(svc.pool, node)
    checked = await svc.check_detail(node, snap, [1], compute="SPX", memory=None)
    assert checked.blockers == (
        Blocker(4000, "python3 (sim workload)", (9,)),
        Blocker(4017, "python3 (sim workload)", (10,)),
    )
    assert checked.renumbering[1:] == (
        "logical GPU 8-15 → 8 (physical 1, switched)",
        "logical GPU 16-63 → 9-56 (physical 2-7: not switched, renumbered)",
    )
    # processes ended since the snapshot (its lists lag): no longer blockers
    checked = await svc.check_detail(node, snap, [1], compute="SPX", memory=None, ignore_pids={4000, 4017})
    assert checked.blockers == () and checked.reasons == ()
