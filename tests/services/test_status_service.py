"""`collect_status` against simulated nodes over LocalTransport (real agent, fake amdsmi)."""

from console.core.model import NodeHealth
from console.core.status_view import node_dict
from console.services.status import collect_status


async def test_spx_cpx_and_mi355x_nodes(sim_node):
    nodes = [
        sim_node("spx"),
        sim_node("cpx", compute="CPX", seed=1),
        sim_node("mi355", gpu="MI355X", seed=2),
    ]
    snaps = {s.name: s for s in await collect_status(nodes, timeout=60)}
    assert all(s.health == NodeHealth.LIVE for s in snaps.values()), [s.error for s in snaps.values()]

    spx = node_dict(snaps["spx"])
    assert len(spx["gpus"]) == 8
    assert {g["compute_partition"] for g in spx["gpus"]} == {"SPX"}
    assert all(g["power_cap_w"] == 750 for g in spx["gpus"])  # µW converted to W
    assert all(0 <= g["util_pct"] <= 100 for g in spx["gpus"])
    assert spx["source"] == "amdsmi (simulated)"

    cpx = node_dict(snaps["cpx"])
    assert len(cpx["gpus"]) == 64
    assert sorted({g["physical"] for g in cpx["gpus"]}) == list(range(8))
    secondaries = [g for g in cpx["gpus"] if g["partition_id"] > 0]
    primaries = [g for g in cpx["gpus"] if g["partition_id"] == 0]
    assert len(primaries) == 8 and len(secondaries) == 56
    # Real hardware reports N/A for power/temperature on secondary partitions.
    assert all(g["power_w"] is None and g["temp_junction_c"] is None for g in secondaries)
    assert all(g["power_w"] is not None for g in primaries)
    # VRAM is split per partition: 192 GB / 8.
    assert all(20_000 < g["vram_total_mib"] < 26_000 for g in cpx["gpus"])

    mi355 = node_dict(snaps["mi355"])
    assert {g["model"] for g in mi355["gpus"]} == {"AMD Instinct MI355X"}
    assert all(g["power_cap_w"] == 1400 for g in mi355["gpus"])


async def test_bad_python_on_node_is_down_with_reason(sim_node):
    [snap] = await collect_status([sim_node("broken", python="/no/such/python3")], timeout=30)
    assert snap.health == NodeHealth.DOWN
    assert snap.error.startswith("broken:") and "/no/such/python3" in snap.error


async def test_slow_node_does_not_hold_the_others(sim_node, tmp_path):
    slow_python = tmp_path / "slowpy"
    slow_python.write_text("#!/bin/sh\nsleep 30\n")
    slow_python.chmod(0o755)
    snaps = await collect_status([sim_node("slow", python=str(slow_python)), sim_node("fast")], timeout=3)
    by = {s.name: s for s in snaps}
    assert by["fast"].health == NodeHealth.LIVE
    assert by["slow"].health == NodeHealth.DOWN and "no answer within 3 s" in by["slow"].error


async def test_cpx_partition_load_comes_from_xcp_stats(sim_node, tmp_path):
    """A process on logical GPU 3 (a secondary CPX partition) shows as load on that row only."""
    node = sim_node("cpx", compute="CPX", seed=7)
    sim_dir = tmp_path / "state" / "sim" / "cpx"
    sim_dir.mkdir(parents=True)
    (sim_dir / "processes.json").write_text(
        '[{"pid": 999999, "name": "vllm", "gpu": 3, "vram_bytes": 10737418240, "sticky": true}]'
    )
    [snap] = await collect_status([node], timeout=60)
    gpus = node_dict(snap)["gpus"]
    busy = gpus[3]
    assert busy["partition_id"] == 3 and busy["util_pct"] >= 30
    assert busy["processes"] and busy["processes"][0]["name"] == "vllm"
    assert busy["vram_used_mib"] >= 10240
    idle_secondaries = [g for g in gpus[1:8] if g["index"] != 3]
    assert all(g["util_pct"] is not None and g["util_pct"] < 30 for g in idle_secondaries)
    assert busy["power_w"] is None  # still no per-partition power: not invented
