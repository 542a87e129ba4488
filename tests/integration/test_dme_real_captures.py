"""Real DME output (tests/fixtures/dme, published by others) through a real Prometheus.

Each capture is one scrape target of Debian's `prometheus` on 127.0.0.1, served as it
was published. The console reads them as a user would: `rocm-console status --json`
and the fleet source behind the TUI; every value is compared with what INDEX.toml
reads off the capture by hand, every field it does not name must be null. A second
Prometheus renames every series to amd_<name> (a site's MetricsFieldPrefix): the
console finds the prefix by itself, or takes it from `[prometheus] metric_prefix`.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import tomllib

from console.cli.entry import main
from console.core.model import NodeHealth, NodeSpec, PrometheusSpec
from console.services.fleet import FleetTelemetry
from console.services.prometheus import collect_prometheus_status
from tests.helpers import wait_for
from tests.integration.prometheus_server import PROMETHEUS, PrometheusServer, StaticMetrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dme"
INDEX = tomllib.loads((FIXTURES / "INDEX.toml").read_text())
CAPTURES = INDEX["capture"]
EXPECT = [row for capture in CAPTURES for row in capture.get("expect", ())]
HOSTS = sorted({host for capture in CAPTURES for host in capture["hosts"]})
# status --json fields of a GPU, and what each is when the capture does not say
JSON_FIELDS = (
    "physical",
    "partition_id",
    "model",
    "bdf",
    "compute_partition",
    "memory_partition",
    "util_pct",
    "vram_used_mib",
    "vram_total_mib",
    "power_w",
    "power_cap_w",
    "temp_junction_c",
    "temp_mem_c",
    "gfx_clock_mhz",
)
SNAPSHOT_ONLY = ("serial", "umc_pct", "mem_clock_mhz")  # not in the JSON: checked on the snapshot
AMD_PREFIX = [{"source_labels": ["__name__"], "regex": "(.+)", "target_label": "__name__", "replacement": "amd_$1"}]

pytestmark = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs Debian's package)",
)


def test_index_names_real_files_with_sources():
    for capture in CAPTURES:
        text = (FIXTURES / capture["file"]).read_text(encoding="utf-8")
        assert capture["source"].startswith("https://github.com/"), capture["id"]
        assert all(f'hostname="{host}"' in text for host in capture["hosts"]), capture["id"]
    assert {row["node"] for row in EXPECT} == set(HOSTS)
    assert INDEX["missing"]  # what was looked for and not found is said


@pytest.fixture(scope="module")
def captures():
    server = StaticMetrics(FIXTURES, [c["file"] for c in CAPTURES])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _prometheus(workdir: Path, captures: StaticMetrics, relabel=None):
    server = PrometheusServer(workdir, captures.targets(), metric_relabel=relabel)
    server.start()
    name = "amd_gpu_total_vram" if relabel else "gpu_total_vram"
    up = len(captures.targets())
    # every target scraped at least once (its up series), and the captures' series present
    server.wait_for_series(up, expr='count(up == 1) and on() count({__name__=~".+"}) > 0')
    server.wait_for_series(1, expr=f"count({name}) or count({{__name__=~'(amd_)?gpu_gfx_activity'}})")
    return server


@pytest.fixture(scope="module")
def prometheus(captures, tmp_path_factory):
    server = _prometheus(tmp_path_factory.mktemp("prom-captures"), captures)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def prometheus_amd(captures, tmp_path_factory):
    server = _prometheus(tmp_path_factory.mktemp("prom-amd"), captures, AMD_PREFIX)
    try:
        yield server
    finally:
        server.stop()


def profile(tmp_path: Path, url: str, extra: str = "") -> Path:
    text = f'telemetry = "prometheus"\n\n[prometheus]\nurl = "{url}"\nscrape_interval = 1\n{extra}\n'
    for host in HOSTS:
        text += f'\n[nodes."{host}"]\nhost = "{host}"\n'
    path = tmp_path / "site.toml"
    path.write_text(text)
    return path


def status_json(capsys, path: Path) -> dict[str, dict]:
    code = main(["status", "--profile", str(path), "--json"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    nodes = {n["name"]: n for n in json.loads(out.out)["nodes"]}
    assert set(nodes) == set(HOSTS)
    return {"code": code, **nodes}


def check_json(nodes: dict[str, dict]) -> None:
    for host in HOSTS:
        node = nodes[host]
        assert node["state"] == "live", (host, node["error"])
        rows = [row for row in EXPECT if row["node"] == host]
        assert [g["index"] for g in node["gpus"]] == [row["index"] for row in rows], host
        for gpu, row in zip(node["gpus"], rows):
            for key in JSON_FIELDS:
                assert gpu[key] == row.get(key), (host, gpu["index"], key)
            assert gpu["processes"] == []


def test_status_json_reads_every_capture(prometheus, tmp_path, capsys):
    nodes = status_json(capsys, profile(tmp_path, prometheus.url))
    assert nodes.pop("code") == 0, {name: node["error"] for name, node in nodes.items()}
    check_json(nodes)


def test_serial_memory_activity_and_memory_clock_as_captured(prometheus):
    spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
    nodes = [NodeSpec(name=h, host=h, telemetry="prometheus") for h in HOSTS]
    snaps = {s.name: s for s in asyncio.run(collect_prometheus_status(spec, nodes, timeout=20))}
    for row in EXPECT:
        snap = snaps[row["node"]]
        static = next(g for g in snap.static if g.index == row["index"])
        metrics = next(g for g in snap.latest.gpus if g.index == row["index"])
        assert static.serial == row.get("serial"), row
        assert (metrics.umc_pct, metrics.mem_clock_mhz) == (row.get("umc_pct"), row.get("mem_clock_mhz")), row


def test_the_fleet_source_shows_the_same_rows(prometheus):
    async def scenario():
        spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
        nodes = [NodeSpec(name=h, host=h, telemetry="prometheus") for h in HOSTS]
        fleet = FleetTelemetry(nodes, interval=0.5, prometheus=spec)
        await fleet.start()
        try:
            live = await wait_for(lambda: all(fleet.snapshot(h).health == NodeHealth.LIVE for h in HOSTS), 20)
            assert live, {h: (fleet.snapshot(h).health, fleet.snapshot(h).error) for h in HOSTS}
            await wait_for(lambda: all(fleet.snapshot(h).latest is not None for h in HOSTS), 10)
            return {h: fleet.snapshot(h) for h in HOSTS}
        finally:
            await fleet.stop()

    snaps = asyncio.run(scenario())
    for row in EXPECT:
        snap = snaps[row["node"]]
        assert [g.index for g in snap.static] == [r["index"] for r in EXPECT if r["node"] == row["node"]]
        static = next(g for g in snap.static if g.index == row["index"])
        metrics = next(g for g in snap.latest.gpus if g.index == row["index"])
        for key in ("physical", "partition_id", "model", "serial", "compute_partition", "memory_partition"):
            assert getattr(static, key) == row.get(key), (row["node"], row["index"], key)
        for key in ("util_pct", "vram_used_mib", "power_w", "temp_junction_c", "temp_mem_c", "gfx_clock_mhz"):
            assert getattr(metrics, key) == row.get(key), (row["node"], row["index"], key)


def test_an_amd_prefixed_site_is_read_with_the_prefix_detected_or_set(prometheus_amd, tmp_path, capsys):
    check_json(status_json(capsys, profile(tmp_path, prometheus_amd.url)))  # detected
    check_json(status_json(capsys, profile(tmp_path, prometheus_amd.url, 'metric_prefix = "amd_"')))
    # told "no prefix" on a prefixed site: every node down, saying what was looked for
    nodes = status_json(capsys, profile(tmp_path, prometheus_amd.url, 'metric_prefix = ""'))
    assert nodes.pop("code") == 1
    for host, node in nodes.items():
        assert node["state"] == "down"
        assert node["error"] == f'{host}: no DME series with hostname="{host}" in Prometheus'
