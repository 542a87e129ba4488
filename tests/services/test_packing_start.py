"""Packing on a simulated node: two instances at 0.45 share GPU 0, a third is refused naming the sum."""

from __future__ import annotations

import pytest

from console.core.model import ServePreset
from console.services.instances import InstanceError, InstanceState
from console.services.status import sample_node
from tests.helpers import free_port

SMALL = ServePreset(
    name="small",
    model="tiny-llama",
    tp=1,
    args=("--dtype", "float32", "--max-model-len", "2048", "--gpu-memory-utilization", "0.45"),
)


async def test_two_at_045_share_gpu0_and_a_third_is_refused_naming_the_sum(sim_node, service):
    svc, started = service
    node = sim_node("pack")
    snap = await sample_node(svc.pool, node, probe=False)
    for name in ("llama", "guard"):
        await svc.start(node, SMALL, gpus=[0], snapshot=snap, port=free_port(), name=name)
        started.append((node, name))
    views = {v.name: v for v in await svc.list(node)}
    assert views["llama"].gpus == views["guard"].gpus == (0,)
    for name in ("llama", "guard"):
        ready = await svc.wait_ready(node, name, timeout=60)
        assert ready.state == InstanceState.READY, ready.reason
    with pytest.raises(InstanceError) as refused:
        await svc.start(node, SMALL, gpus=[0], snapshot=snap, port=free_port(), name="third")
    line = str(refused.value)
    assert "\n" not in line
    assert "GPU 0: gpu_memory_utilization would sum to 1.35 > 0.95" in line
    assert "llama (0.45)" in line and "guard (0.45)" in line
    # a smaller share still fits beside them (0.45 + 0.45 + 0.05 = 0.95), a higher limit lets a third in
    await svc.start(
        node,
        SMALL,
        gpus=[0],
        snapshot=snap,
        port=free_port(),
        name="tiny-third",
        overrides={"gpu_memory_utilization": "0.05"},
    )
    started.append((node, "tiny-third"))
    # an instance that sets no utilization is refused on a packed GPU with the usual line
    plain = ServePreset(name="plain", model="tiny-llama", tp=1, args=("--dtype", "float32"))
    with pytest.raises(InstanceError, match="GPU 0 already serves instance"):
        await svc.start(node, plain, gpus=[0], snapshot=snap, port=free_port(), name="plain")
    # and it may not join the share of another GPU's lone holder either way
    await svc.start(node, plain, gpus=[1], snapshot=snap, port=free_port(), name="alone")
    started.append((node, "alone"))
    with pytest.raises(InstanceError, match="GPU 1 already serves instance alone"):
        await svc.start(node, SMALL, gpus=[1], snapshot=snap, port=free_port(), name="joiner")


async def test_a_replica_group_packs_two_per_gpu(sim_node, service):
    from console.services.groups import GroupPlanError, GroupService

    svc, started = service
    node = sim_node("packgroup")
    groups = GroupService(svc.pool, svc)
    view = await groups.launch([node], SMALL, 4, gpus=[0, 1], group="pk", per_gpu=2, ready_timeout=60)
    started.extend((node, v.name) for v in view.replicas)
    assert [v.gpus for v in view.replicas] == [(0,), (0,), (1,), (1,)]
    assert len({v.port for v in view.replicas}) == 4
    assert view.ready == 4, [v.reason for v in view.replicas]
    # replicas that set no share cannot be packed: refused before anything starts, one line
    plain = ServePreset(name="plain", model="tiny-llama", tp=1, args=("--dtype", "float32"))
    with pytest.raises(GroupPlanError, match="--per-gpu 2: each replica must set --gpu-memory-utilization"):
        await groups.launch([node], plain, 2, gpus=[2], group="pl", per_gpu=2)
    with pytest.raises(GroupPlanError, match=r"would sum to 1.35 > 0.95"):
        await groups.launch([node], SMALL, 3, gpus=[2], group="p3", per_gpu=3)
    # nothing else started (a vLLM of another program on this host is listed too, as unmanaged)
    listed = [v for v in await svc.list(node) if v.state != InstanceState.UNMANAGED]
    assert {v.name for v in listed} == {v.name for v in view.replicas}


async def test_the_profiles_packing_limit_applies_to_every_start(sim_node, service, tmp_path):
    from dataclasses import replace

    from console.core.profiles import load_profile

    profile = tmp_path / "lab.toml"
    profile.write_text('[models]\nmax_packing_sum = 0.5\n\n[nodes.gpu-a]\nhost = "gpu-a.lab"\n')
    [loaded] = load_profile([profile]).nodes
    assert loaded.max_packing_sum == 0.5  # each node carries the profile's limit, so the TUI's starts use it too
    svc, started = service
    node = replace(sim_node("tight"), max_packing_sum=loaded.max_packing_sum)
    snap = await sample_node(svc.pool, node, probe=False)
    await svc.start(node, SMALL, gpus=[0], snapshot=snap, port=free_port(), name="first")
    started.append((node, "first"))
    with pytest.raises(InstanceError, match=r"GPU 0: gpu_memory_utilization would sum to 0.9 > 0.5"):
        await svc.start(node, SMALL, gpus=[0], snapshot=snap, port=free_port(), name="second")
