"""GPU health of Prometheus-fed nodes: DME's health families -> HealthReading per physical GPU.

The mapping (console/core/dme.py ``health_queries`` / ``parse_health`` / ``from_dme``) on its
own, then the whole path with the real Prometheus scraping the simulated DME: an
uncorrectable ECC error injected into a node's faults.json turns that GPU fail in the
console's fleet (snapshot.gpu_health, GpuHealthChanged, the timeline events).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path

import pytest

from console.cli.entry import main
from console.core import dme
from console.core.health import HealthRules, evaluate
from console.core.model import GpuStatic, NodeSpec, PrometheusSpec
from console.services.fleet import FleetTelemetry, GpuEventsSeen, GpuHealthChanged
from console.sim import faults
from tests.integration.prometheus_server import PROMETHEUS, DmeExporter, PrometheusServer


def _answer(*series: tuple[str, str, str, object]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"__name__": name, "hostname": host, "gpu_id": gpu}, "value": [1.0, str(value)]}
                for name, host, gpu, value in series
            ],
        },
    }


def test_every_health_family_the_mapper_reads_is_a_dme_metric():
    from tests.core.test_dme_contract import NAMES

    read = {dme.PCIE_SPEED, dme.PCIE_MAX_SPEED, dme.PCIE_REPLAY, dme.PCIE_RECOVERY, dme.VIOLATION_CLOCK, dme.ENERGY}
    read |= {family for family, _ in dme.VIOLATION_RESIDENCY}
    read |= {f"gpu_ecc_{kind}_total" for kind in dme.ECC_KINDS}
    assert not read - NAMES, sorted(read - NAMES)
    # the query's pattern matches exactly DME's health families among all its names
    pattern = re.compile(dme.HEALTH_FAMILIES_RE)
    matched = {n for n in NAMES if pattern.fullmatch(n)}
    assert read <= matched
    assert all(n.startswith(("gpu_ecc_", "pcie_", "gpu_violation_", "gpu_energy")) for n in matched)
    assert len([n for n in matched if n.startswith("gpu_ecc_")]) == 60  # 20 blocks x (correct, uncorrect, deferred)


def test_health_query_asks_every_family_once_on_first_partitions_only():
    queries = dme.health_queries("hostname", ["gpu-1.example"], ("", "amd_"))
    assert set(queries) == {"h", "b"}
    for query in queries.values():
        assert query.startswith("max by (__name__, hostname, gpu_id) (")
        assert 'gpu_partition_id=~"0|NA|4294967295"' in query  # device values: the first partition's
        assert 'hostname=~"gpu\\\\-1(\\\\..*)?"' in query
    assert "amd_(?:gpu_ecc_(correct|uncorrect|deferred)_total" in queries["h"] and "pcie_(speed" in queries["h"]
    assert queries["b"].endswith(" > 0)")  # the per-block ECC counts only where not zero


def test_dme_families_map_to_a_reading_and_what_dme_lacks_stays_none():
    payload = _answer(
        ("amd_gpu_ecc_uncorrect_total", "n1", "8", 3),
        ("amd_gpu_ecc_correct_total", "n1", "8", 5),
        ("amd_gpu_ecc_deferred_total", "n1", "8", 0),
        ("amd_gpu_ecc_uncorrect_umc", "n1", "8", 3),
        ("amd_gpu_ecc_correct_umc", "n1", "8", 5),
        ("amd_pcie_speed", "n1", "8", 16),
        ("amd_pcie_max_speed", "n1", "8", 32),
        ("amd_pcie_replay_count", "n1", "8", 7),
        ("amd_gpu_violation_current_accumulated_counter", "n1", "8", 1000),
        ("amd_gpu_violation_ppt_residency_accumulated", "n1", "8", 400),
        ("amd_gpu_energy_consumed", "n1", "8", 2.5e9),
        ("amd_gpu_ecc_uncorrect_total", "n1", "0", "NaN"),  # DME's "not available"
        ("amd_gpu_nodes_total", "n1", "0", 2),  # not a health family
    )
    parsed = dme.parse_health({"h": payload}, "hostname", ("amd_",))
    assert set(parsed["n1"]) == {8}  # a NaN-only GPU brings nothing
    static = tuple(GpuStatic(index=i, physical=i // 8, partition_id=i % 8) for i in range(16))
    (reading,) = dme.health_readings(static, parsed["n1"], 50.0)
    assert (reading.gpu, reading.t, reading.vendor) == (1, 50.0, "amd")  # gpu_id 8 = physical GPU 1
    assert (reading.ecc_uncorrectable, reading.ecc_correctable, reading.ecc_deferred) == (3, 5, 0)
    assert [(b.block, b.correctable, b.uncorrectable, b.deferred) for b in reading.ecc_blocks or ()] == [
        ("UMC", 5, 3, None)
    ]
    assert (reading.pcie_gen, reading.pcie_gen_max, reading.pcie_replay, reading.pcie_recovery) == (4, 5, 7, None)
    assert reading.residency == (("power", 400.0),) and reading.residency_clock == 1000.0
    assert reading.energy_j == 2500.0  # µJ -> J
    # DME exports none of these: never invented
    for field in ("pages_pending", "pages_retired", "pcie_width", "pcie_width_max", "throttle_reasons", "links"):
        assert getattr(reading, field) is None, field
    assert reading.faults == () and reading.cper_records is None
    verdict = evaluate([reading])
    assert verdict.state == "fail" and "3 uncorrectable ECC errors" in verdict.reasons
    assert "PCIe gen 4 (max gen 5)" in verdict.reasons


def test_a_bad_health_answer_is_one_line():
    with pytest.raises(dme.DmeResponseError, match="bad_data: parse error"):
        dme.parse_health({"h": {"status": "error", "errorType": "bad_data", "error": "parse error"}})


# ---------------------------------------------------------------- the real Prometheus


@pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs Debian's package)",
)
@pytest.mark.timeout(120)
def test_an_uncorrectable_ecc_on_a_prometheus_fed_node_turns_that_gpu_fail(tmp_path: Path, capsys):
    nodes = [
        {"hostname": "dme-a", "gpu": "MI300X", "count": 2, "seed": 3},
        {"hostname": "dme-b", "gpu": "MI300X", "count": 2, "compute_partition": "CPX", "seed": 4},
    ]
    exporter = DmeExporter.start(tmp_path / "dme", nodes, period=0.5)
    server = PrometheusServer(tmp_path / "prometheus", exporter.targets(), scrape_interval=0.5)
    try:
        server.start()
        server.wait_for_series(2 + 16)

        async def scenario():
            spec = PrometheusSpec(url=server.url, scrape_interval=0.5)
            specs = [NodeSpec(name=n, host=f"{n}.cluster.example", telemetry="prometheus") for n in ("dme-a", "dme-b")]
            fleet = FleetTelemetry(specs, interval=0.5, prometheus=spec, health=HealthRules(interval=1.0))
            changes: list[GpuHealthChanged] = []
            seen: list[GpuEventsSeen] = []
            fleet.subscribe(lambda e: changes.append(e) if isinstance(e, GpuHealthChanged) else None)
            fleet.subscribe(lambda e: seen.append(e) if isinstance(e, GpuEventsSeen) else None)
            await fleet.start()
            try:
                await until(lambda: all(len(fleet.snapshot(n).gpu_health) == 2 for n in ("dme-a", "dme-b")), 30)
                healthy = {n: [g.verdict.state for g in fleet.snapshot(n).gpu_health] for n in ("dme-a", "dme-b")}
                first = fleet.snapshot("dme-b").gpu_health[1].reading
                faults.add_fault(str(tmp_path / "dme" / "state" / "dme-b"), 1, "ecc_uncorrectable")
                faults.add_fault(str(tmp_path / "dme" / "state" / "dme-a"), 0, "power_throttle")
                injected = time.monotonic()
                await until(lambda: fleet.snapshot("dme-b").gpu_health[1].verdict.state == "fail", 20)
                took = time.monotonic() - injected
                await until(lambda: _residency_grew(fleet.health_readings("dme-a", 0)), 20)
                return fleet, healthy, first, took, changes, seen
            finally:
                await fleet.stop()

        fleet, healthy, first, took, changes, seen = asyncio.run(scenario())
        # `status --json` over Prometheus: each GPU's health from the same families
        profile = tmp_path / "site.toml"
        profile.write_text(
            f'telemetry = "prometheus"\n\n[prometheus]\nurl = "{server.url}"\nscrape_interval = 0.5\n'
            '\n[nodes.dme-b]\nhost = "dme-b.cluster.example"\n'
        )
        assert main(["status", "--profile", str(profile), "--json"]) == 0
        (node,) = json.loads(capsys.readouterr().out)["nodes"]
        states = [(g["index"], (g["health"] or {}).get("state")) for g in node["gpus"]]
    finally:
        server.stop()
        exporter.stop()
    assert healthy == {"dme-a": ["ok", "ok"], "dme-b": ["ok", "ok"]}
    assert first is not None and first.pcie_gen == first.pcie_gen_max == 5 and first.pages_pending is None
    sick = fleet.snapshot("dme-b").gpu_health
    assert [g.physical for g in sick] == [0, 1] and sick[0].verdict.state == "ok"
    assert sick[1].verdict.reasons == "1 uncorrectable ECC error"
    # the per-block counts come where they are not zero (the second query keeps the family name)
    blocks = sick[1].reading.ecc_blocks if sick[1].reading else None
    assert [(b.block, b.uncorrectable) for b in blocks or ()] == [("UMC", 1)]
    assert first.ecc_blocks is None and first.ecc_uncorrectable == 0
    assert took < 1.0 + 0.5 + 0.5 + 5  # a health interval, a scrape, a render, and slack
    assert any(e.node == "dme-b" and [g.verdict.state for g in e.gpus] == ["ok", "fail"] for e in changes)
    events = [ev for e in seen for ev in e.events if ev.node == "dme-b" and ev.gpu == 1]
    assert any(ev.kind == "gpu.health" and "uncorrectable" in ev.message for ev in events), events
    assert not server.alive()
    # 2 CPX GPUs: logical 0-7 on physical 0 (ok), 8-15 on physical 1 (fail)
    assert states == [(i, "ok" if i < 8 else "fail") for i in range(16)]


def _residency_grew(readings) -> bool:
    values = [r.residency_of("power") for r in readings if r.residency is not None]
    return len(values) >= 2 and values[-1] > values[0]


async def until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout:g} s")


def test_a_failed_health_query_is_one_line_and_costs_that_reading_only():
    from console.services.prometheus import PrometheusError, PrometheusSource

    class Refusing:
        url = "http://127.0.0.1:9"

        async def query_all(self, exprs):
            raise PrometheusError("prometheus http://127.0.0.1:9: connection refused")

        def redact(self, text: str) -> str:
            return text

        def describe(self) -> str:
            return self.url

    specs = [NodeSpec(name="n1", host="n1", telemetry="prometheus")]
    spec = PrometheusSpec(url="http://127.0.0.1:9")
    fleet = FleetTelemetry(specs, interval=0.5, prometheus=spec)
    source = PrometheusSource(fleet, spec, specs, client=Refusing())  # type: ignore[arg-type]
    source.matched, source.layout = {"n1": "n1"}, {"n1": (GpuStatic(index=0, physical=0, partition_id=0),)}
    asyncio.run(source.refresh_health(1.0))
    assert source.health_error == "health: prometheus http://127.0.0.1:9: connection refused"
    assert source.health_reads == 0 and fleet.snapshot("n1").gpu_health == ()
