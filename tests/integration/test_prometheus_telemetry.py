"""Telemetry through a real Prometheus (Debian's package) scraping simulated DME exporters.

Every test here talks to a real `prometheus` process on 127.0.0.1 that scrapes
console/sim/dme_exporter.py every second; the exporters run with a frozen
simulator clock so the values they export are fixed and can be compared with
what the console shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from console.cli.entry import main
from console.core.model import NodeHealth, NodeSpec, PrometheusSpec
from console.core.profiles import load_profile
from console.services.fleet import FleetTelemetry
from tests.integration.prometheus_server import PROMETHEUS, AuthProxy, DmeExporter, PrometheusServer

FROZEN = "1764000000"
ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
SIM = ROOT / "console" / "sim"
NODES = [
    {"hostname": "spx-a", "gpu": "MI300X", "count": 2, "seed": 4},
    {"hostname": "cpx-b", "gpu": "MI300X", "count": 2, "compute_partition": "CPX", "seed": 5},
    {"hostname": "stray-c", "gpu": "MI355X", "count": 1, "seed": 6},  # not in the profile
]
GPU_SERIES = 2 + 16 + 1
LINE_RE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")

pytestmark = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS) and not os.environ.get("CI"),
    reason="prometheus not installed (scripts/test-all installs Debian's package)",
)


@pytest.fixture(scope="module")
def exporter(tmp_path_factory):
    exp = DmeExporter.start(tmp_path_factory.mktemp("dme"), NODES, env={"ROCM_CONSOLE_SIM_TIME": FROZEN})
    try:
        yield exp
    finally:
        exp.stop()


@pytest.fixture(scope="module")
def prometheus(exporter, tmp_path_factory):
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), exporter.targets())
    server.start()
    try:
        server.wait_for_series(GPU_SERIES)
        yield server
    finally:
        server.stop()
        assert not server.alive()


def profile_file(tmp_path: Path, url: str, extra: str = "", nodes: tuple[str, ...] = ("spx-a", "cpx-b")) -> Path:
    text = f'telemetry = "prometheus"\n\n[prometheus]\nurl = "{url}"\nscrape_interval = 1\n{extra}\n'
    for node in nodes:
        text += f'\n[nodes.{node}]\nhost = "{node}.cluster.example"\n'
    path = tmp_path / "site.toml"
    path.write_text(textwrap.dedent(text))
    return path


def exported(exporter: DmeExporter, host: str) -> dict[tuple[str, int, str | None], float]:
    """What the simulated DME serves for a host: (metric, gpu_id, clock_type) -> value; the
    system clocks (one per XCD) by their highest, the per-XCC busy by their mean."""
    url = f"http://127.0.0.1:{exporter.port}/nodes/{host}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    many: dict[tuple[str, int, str | None], list[float]] = {}
    for line in text.splitlines():
        found = LINE_RE.match(line)
        if found and found["name"] != "gpu_nodes_total":
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found["labels"]))
            key = (found["name"], int(labels["gpu_id"]), labels.get("clock_type"))
            many.setdefault(key, []).append(float(found["value"]))
    return {k: (sum(v) / len(v) if k[0] == "gpu_gfx_busy_instantaneous" else max(v)) for k, v in many.items()}


def util_of(want: dict, static) -> float:
    """What the console shows as utilization: a partition's own busy, else the device's activity."""
    if static.compute_partition not in ("SPX", None):
        return want[("gpu_gfx_busy_instantaneous", static.index, None)]
    return want[("gpu_gfx_activity", static.index, None)]


async def wait_for(predicate, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        await asyncio.sleep(step)
    raise AssertionError(f"condition not met within {timeout:g} s")


@contextlib.contextmanager
def own_stack(tmp_path: Path, nodes: list[dict], series: int, env: dict | None = None):
    """An exporter and a Prometheus of the test's own (for tests that change or stop them)."""
    exp = DmeExporter.start(tmp_path / "dme", nodes, env=env)
    server = PrometheusServer(tmp_path / "prometheus", exp.targets())
    try:
        server.start()
        server.wait_for_series(series)
        yield exp, server
    finally:
        server.stop()
        exp.stop()


def prom_nodes(*names: str) -> list[NodeSpec]:
    return [NodeSpec(name=n, host=f"{n}.cluster.example", telemetry="prometheus") for n in names]


def test_fleet_shows_the_values_the_simulated_exporter_exported(exporter, prometheus):
    async def scenario():
        spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
        fleet = FleetTelemetry(prom_nodes("spx-a", "cpx-b", "ghost"), interval=0.5, prometheus=spec)
        await fleet.start()
        try:
            await wait_for(lambda: all(fleet.snapshot(n).health == NodeHealth.LIVE for n in ("spx-a", "cpx-b")), 20)
            await wait_for(lambda: fleet.snapshot("ghost").health == NodeHealth.DOWN, 10)
            return {n: fleet.snapshot(n) for n in ("spx-a", "cpx-b", "ghost")}, time.time()
        finally:
            await fleet.stop()

    snaps, now = asyncio.run(scenario())
    ghost = snaps["ghost"]
    assert ghost.error == 'ghost: no DME series with hostname="ghost.cluster.example" in Prometheus'
    for host in ("spx-a", "cpx-b"):
        snap = snaps[host]
        assert snap.source == f"prometheus {prometheus.url}, scrape 1s"
        assert 0 <= now - snap.last_sample_ts < 3.5  # the sample age the header shows
        want = exported(exporter, host)
        assert snap.latest is not None
        for static, m in zip(snap.static, snap.latest.gpus):
            i = m.index
            assert static.index == i
            assert m.util_pct == util_of(want, static)
            assert m.vram_used_mib == want[("gpu_used_vram", i, None)]
            assert m.vram_total_mib == want[("gpu_total_vram", i, None)]
            if static.partition_id == 0:  # device values on the first partition, as the agent shows them
                assert m.power_w == want[("gpu_package_power", i, None)]
                assert m.umc_pct == want[("gpu_umc_activity", i, None)]
                assert m.temp_junction_c == want[("gpu_junction_temperature", i, None)]
                assert m.temp_mem_c == want[("gpu_memory_temperature", i, None)]
                assert m.gfx_clock_mhz == want[("gpu_clock", i, "system")]
                assert m.mem_clock_mhz == want[("gpu_clock", i, "memory")]
            else:  # DME: power 0 and no temperature there; not the device's value again
                assert want[("gpu_package_power", i, None)] == 0
                assert m.power_w is None and m.temp_junction_c is None and m.gfx_clock_mhz is None
    cpx = snaps["cpx-b"].static
    assert len(cpx) == 16 and [g.physical for g in cpx] == [0] * 8 + [1] * 8
    assert [g.partition_id for g in cpx] == list(range(8)) * 2
    assert {(g.compute_partition, g.memory_partition, g.model) for g in cpx} == {("CPX", "NPS1", "AMD Instinct MI300X")}


def test_nodes_on_screen_refresh_every_time_the_rest_at_each_sweep_and_all_stay_live(exporter, prometheus):
    async def scenario():
        spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
        fleet = FleetTelemetry(prom_nodes("spx-a", "cpx-b"), interval=0.25, prometheus=spec)
        fleet.watch(["spx-a"])  # what the fleet screen shows: given before the source exists, kept
        await fleet.start()
        try:
            await wait_for(lambda: all(fleet.snapshot(n).health == NodeHealth.LIVE for n in ("spx-a", "cpx-b")), 20)
            source = fleet.prometheus
            assert source is not None and source.watched == ("spx-a.cluster.example",)
            frames0 = {n: fleet.frames_received(n) for n in ("spx-a", "cpx-b")}
            refreshes0, sweeps0 = source.refreshes, source.sweeps
            healths = set()

            def counts() -> dict[str, int]:
                return {n: fleet.frames_received(n) - frames0[n] for n in frames0}

            # 6 s at least: six scrapes, ~24 refreshes; up to 30 s where a loaded machine scrapes late
            for step in range(300):
                healths |= {fleet.snapshot(n).health for n in ("spx-a", "cpx-b")}
                if step >= 60 and counts()["spx-a"] >= 4 and counts()["cpx-b"] >= 1 and source.sweeps > sweeps0:
                    break
                await asyncio.sleep(0.1)
            got = counts()
            return got, source.refreshes - refreshes0, source.sweeps - sweeps0, healths
        finally:
            await fleet.stop()

    got, refreshes, sweeps, healths = asyncio.run(scenario())
    assert healths == {NodeHealth.LIVE}  # off screen is not stale: its scrape time still comes every refresh
    assert 0 < sweeps < refreshes  # most refreshes asked the values of the node on screen only
    assert got["spx-a"] >= 4  # a frame per new scrape
    assert 1 <= got["cpx-b"] <= sweeps  # only the sweeps brought its values


def test_a_partition_switch_on_a_prometheus_fed_node_re_enumerates_its_gpus(tmp_path):
    # Its own exporter and Prometheus: the switch changes the node for good.
    node = {"hostname": "switch-a", "gpu": "MI300X", "count": 2, "seed": 7}
    with own_stack(tmp_path, [node], 2) as (_, server):

        async def scenario():
            spec = PrometheusSpec(url=server.url, scrape_interval=1.0)
            fleet = FleetTelemetry(prom_nodes("switch-a"), interval=0.5, prometheus=spec)
            await fleet.start()
            try:
                await wait_for(lambda: len(fleet.snapshot("switch-a").static) == 2, 20)
                # What `partition set` does on the node: the node's agent against its amdsmi.
                env = {
                    **os.environ,
                    "ROCM_CONSOLE_SIM_DIR": str(tmp_path / "dme" / "state" / "switch-a"),
                    "ROCM_CONSOLE_SIM_SPEC": json.dumps({k: v for k, v in node.items() if k != "hostname"}),
                }
                argv = [sys.executable, str(AGENT), "partition", "set", "--compute", "CPX", "--amdsmi-path", str(SIM)]
                done = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE)
                out, _ = await done.communicate()
                assert done.returncode == 0, out
                await wait_for(lambda: len(fleet.snapshot("switch-a").static) == 16, 20)
                await wait_for(lambda: len(fleet.snapshot("switch-a").latest.gpus) == 16, 10)
                return fleet.snapshot("switch-a")
            finally:
                await fleet.stop()

        snap = asyncio.run(scenario())
    assert [g.compute_partition for g in snap.static] == ["CPX"] * 16
    assert [g.physical for g in snap.static] == [0] * 8 + [1] * 8
    assert snap.health == NodeHealth.LIVE


def test_detail_charts_get_their_past_from_query_range(prometheus):
    # at least 5 scrapes in Prometheus before the console starts watching
    prometheus.wait_for_series(5, expr='count_over_time(gpu_total_vram{hostname="spx-a", gpu_id="0"}[1m])')

    async def scenario():
        spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
        fleet = FleetTelemetry(prom_nodes("spx-a"), interval=1.0, prometheus=spec)
        await fleet.start()
        try:
            await wait_for(lambda: fleet.snapshot("spx-a").health == NodeHealth.LIVE, 20)
            live = fleet.series("spx-a", 0, "util_pct")
            first_live = live.times()[0]
            task = fleet.load_history("spx-a")
            assert task is not None
            added = await asyncio.wait_for(task, 20)
            assert fleet.prometheus is not None and fleet.prometheus.history_error is None, (
                fleet.prometheus.history_error
            )
            series = fleet.series("spx-a", 0, "util_pct")
            return added, first_live, series.times(), series.values()
        finally:
            await fleet.stop()

    added, first_live, times, values = asyncio.run(scenario())
    assert added >= 4  # 2 GPUs x at least 2 scrapes before the first live sample
    assert times[0] < first_live and times == sorted(times)
    assert all(v is not None for v in values)


def test_status_json_and_table_read_prometheus(exporter, prometheus, tmp_path, capsys):
    path = profile_file(tmp_path, prometheus.url)
    assert main(["status", "--profile", str(path), "--json"]) == 0
    nodes = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert set(nodes) == {"spx-a", "cpx-b"}
    want = exported(exporter, "cpx-b")
    gpus = nodes["cpx-b"]["gpus"]
    assert [g["index"] for g in gpus] == list(range(16))
    assert [g["util_pct"] for g in gpus] == [want[("gpu_gfx_busy_instantaneous", i, None)] for i in range(16)]
    assert gpus[8]["power_w"] == want[("gpu_package_power", 8, None)]
    assert [g["power_w"] is None for g in gpus] == [i % 8 != 0 for i in range(16)]
    assert nodes["spx-a"]["state"] == "live" and nodes["spx-a"]["source"].startswith("prometheus http://127.0.0.1:")

    assert main(["status", "--profile", str(path)]) == 0
    table = capsys.readouterr().out
    assert "cpx-b  LIVE  prometheus http://127.0.0.1:" in table
    assert "CPX/NPS1" in table


def test_discover_lists_hosts_missing_from_the_profile(prometheus, tmp_path, capsys):
    path = profile_file(tmp_path, prometheus.url)
    assert main(["status", "--profile", str(path), "--discover"]) == 0
    out = capsys.readouterr().out
    assert "stray-c" in out and "spx-a" not in out and "cpx-b" not in out
    assert main(["status", "--profile", str(path), "--discover", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hosts_not_in_profile"] == ["stray-c"]


def test_source_flag_needs_a_prometheus_table(tmp_path, capsys):
    path = tmp_path / "lab.toml"
    path.write_text('[nodes.a]\nhost = "a"\n')
    assert main(["status", "--profile", str(path), "--source", "prometheus"]) == 2
    assert "no [prometheus] table" in capsys.readouterr().err
    assert main(["status", "--profile", str(path), "--discover"]) == 2


def test_bearer_token_is_sent_and_never_shown(prometheus, tmp_path, capsys, monkeypatch):
    token = "s3cret-bearer-7f4e"
    proxy = AuthProxy(prometheus.url, token)
    proxy.start()
    try:
        path = profile_file(tmp_path, proxy.url, 'token_env = "K_PROM_TOKEN"')
        monkeypatch.setenv("K_PROM_TOKEN", token)
        assert main(["status", "--profile", str(path), "--json"]) == 0
        captured = capsys.readouterr()
        assert token not in captured.out + captured.err
        assert {n["state"] for n in json.loads(captured.out)["nodes"]} == {"live"}
        assert proxy.seen and set(proxy.seen) == {f"Bearer {token}"}

        assert main(["status", "--profile", str(path), "--discover"]) == 0
        assert "stray-c" in capsys.readouterr().out

        # The wrong token: refused, said in one line, and no token in any output.
        monkeypatch.setenv("K_PROM_TOKEN", "wrong-" + token)
        assert main(["status", "--profile", str(path), "--json"]) == 1
        captured = capsys.readouterr()
        nodes = json.loads(captured.out)["nodes"]
        assert {n["state"] for n in nodes} == {"down"}
        assert all("HTTP 401 Unauthorized (check $K_PROM_TOKEN)" in n["error"] for n in nodes)
        assert token not in captured.out + captured.err

        monkeypatch.delenv("K_PROM_TOKEN")
        assert main(["status", "--profile", str(path), "--json"]) == 1
        nodes = json.loads(capsys.readouterr().out)["nodes"]
        assert all("$K_PROM_TOKEN (token_env in " in n["error"] and "is not set" in n["error"] for n in nodes)
    finally:
        proxy.stop()


def test_prometheus_down_marks_nodes_stale_then_down_and_they_recover(exporter, tmp_path):
    server = PrometheusServer(tmp_path / "prom", exporter.targets())
    server.start()
    try:
        server.wait_for_series(GPU_SERIES)

        async def scenario():
            spec = PrometheusSpec(url=server.url, scrape_interval=1.0)
            fleet = FleetTelemetry(prom_nodes("spx-a", "cpx-b"), interval=0.5, prometheus=spec)
            await fleet.start()
            seen = []
            try:
                await wait_for(lambda: fleet.snapshot("spx-a").health == NodeHealth.LIVE, 20)
                killed = time.monotonic()

                async def stop() -> float:  # by its PID; in a thread, as it waits for the TSDB to close
                    await asyncio.to_thread(server.stop)
                    return time.monotonic() - killed

                stopping = asyncio.ensure_future(stop())  # the console goes on meanwhile
                stale = await wait_for(
                    lambda: fleet.snapshot("spx-a") if fleet.snapshot("spx-a").health == NodeHealth.STALE else None, 20
                )
                seen.append(("stale", round(time.monotonic() - killed, 1), stale.error))
                down = await wait_for(
                    lambda: fleet.snapshot("cpx-b") if fleet.snapshot("cpx-b").health == NodeHealth.DOWN else None, 30
                )
                seen.append(("down", round(time.monotonic() - killed, 1), down.error))
                seen.append(("stopped", round(await stopping, 1), None))
                server.start()
                await wait_for(lambda: all(fleet.snapshot(n).health == NodeHealth.LIVE for n in ("spx-a", "cpx-b")), 30)
                seen.append(("live", None, fleet.snapshot("spx-a").error))
            finally:
                await fleet.stop()
            return seen

        seen = asyncio.run(scenario())
    finally:
        server.stop()
    (stale, after_s, why), (down, down_s, down_why), (_, stop_s, _), (live, _, live_error) = seen
    assert why == f"spx-a: prometheus {server.url}: connection refused"
    # stale when the last scrape is 3 intervals old (it was up to 1 s old at the kill; Prometheus
    # may answer until it has exited, stop_s after the kill on a loaded machine)
    assert 1.5 <= after_s <= 6 + stop_s, seen
    assert down_why == f"cpx-b: prometheus {server.url}: connection refused"
    assert 8 <= down_s <= 16 + stop_s, seen  # down when it is 10 intervals old
    assert live_error is None


def test_prometheus_server_helper_keeps_to_loopback(prometheus):
    if not shutil.which("ss"):
        pytest.skip("ss not installed")
    import subprocess

    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False).stdout
    mine = [line for line in out.splitlines() if f"pid={prometheus.pid}," in line]
    assert mine and all(line.split()[3] == f"127.0.0.1:{prometheus.port}" for line in mine)


def test_profile_file_round_trip(tmp_path):
    profile = load_profile([profile_file(tmp_path, "http://127.0.0.1:9")])
    assert profile.prometheus is not None and {n.telemetry for n in profile.nodes} == {"prometheus"}


async def test_fleet_screen_and_detail_over_prometheus(prometheus):
    from console.core.model import Profile
    from console.ui.app import ConsoleApp
    from console.ui.screens.detail import DetailScreen
    from console.ui.widgets.gpu_table import GpuTable
    from tests.ui.conftest import screen_text
    from tests.ui.conftest import wait_for as ui_wait_for

    prometheus.wait_for_series(5, expr='count_over_time(gpu_total_vram{hostname="cpx-b", gpu_id="9"}[1m])')
    spec = PrometheusSpec(url=prometheus.url, scrape_interval=1.0)
    nodes = tuple(
        NodeSpec(name=n, host=n, transport="local", telemetry="prometheus", vllm="/nonexistent/vllm")
        for n in ("spx-a", "cpx-b")
    )
    app = ConsoleApp(Profile(nodes=nodes, prometheus=spec), interval=1.0, notify_health=False, cursor_blink=False)
    started = time.time()
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await ui_wait_for(pilot, lambda: "cpx-b  live" in screen_text(app), timeout=20)
        text = screen_text(app)
        assert f"prometheus {prometheus.url}, scrape 1s" in text  # the header names the source
        assert len([r for r in table.rows if r.node == "cpx-b" and r.gpu is not None]) == 16
        assert table.select(("cpx-b", 9))
        await pilot.press("enter")
        assert isinstance(app.screen, DetailScreen)
        # the charts' past comes from query_range at open: samples from before the console started

        def first_ts() -> float:
            series = app.fleet.series("cpx-b", 9, "util_pct")
            return series.times()[0] if series is not None and len(series) else float("inf")

        assert await ui_wait_for(pilot, lambda: first_ts() < started - 2, timeout=10)
        assert "Utilization %" in screen_text(app)


def test_exporter_down_marks_its_node_stale_then_down(tmp_path):
    with own_stack(tmp_path, [{"hostname": "solo", "count": 1, "seed": 9}], 1) as (exp, server):

        async def scenario():
            spec = PrometheusSpec(url=server.url, scrape_interval=1.0)
            fleet = FleetTelemetry(prom_nodes("solo"), interval=0.5, prometheus=spec)
            await fleet.start()
            try:
                await wait_for(lambda: fleet.snapshot("solo").health == NodeHealth.LIVE, 20)
                exp.stop()  # the node's exporter dies; Prometheus stays up
                stale = await wait_for(
                    lambda: fleet.snapshot("solo") if fleet.snapshot("solo").health == NodeHealth.STALE else None, 10
                )
                down = await wait_for(
                    lambda: fleet.snapshot("solo") if fleet.snapshot("solo").health == NodeHealth.DOWN else None, 20
                )
                return stale.error, down.error
            finally:
                await fleet.stop()

        stale_error, down_error = asyncio.run(scenario())
    assert re.fullmatch(r"solo: no new DME sample in Prometheus for [3-6] s", stale_error or ""), stale_error
    assert re.fullmatch(r"solo: no new DME sample in Prometheus for 1\d s", down_error or ""), down_error


def test_mi2xx_families_na_partitions_and_a_mixed_prefix_fleet(tmp_path, capsys):
    """An MI2xx node (edge temperature, average package power, NA partition) whose DME
    prefixes its names amd_, beside an MI300X node without a prefix, in one Prometheus."""
    nodes = [
        {"hostname": "mi2-a", "count": 2, "seed": 11, "dme_platform": "mi2xx", "card_series": "AMD Instinct MI210"},
        {"hostname": "spx-c", "count": 1, "seed": 12},
    ]
    nodes[0]["metric_prefix"] = "amd_"
    with own_stack(tmp_path, nodes, 0, env={"ROCM_CONSOLE_SIM_TIME": FROZEN}) as (exp, server):
        server.wait_for_series(2, expr="count(amd_gpu_total_vram)")
        server.wait_for_series(1, expr="count(gpu_total_vram)")
        path = profile_file(tmp_path, server.url, nodes=("mi2-a", "spx-c"))
        assert main(["status", "--profile", str(path), "--json"]) == 0
        got = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
        url = f"http://127.0.0.1:{exp.port}/nodes/mi2-a/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            page = reply.read().decode()
    want: dict[tuple[str, int], float] = {}
    for line in page.splitlines():
        found = re.match(r'^amd_(\w+)\{.*gpu_id="(\d+)".*\} (\S+)$', line)
        if found and "clock_type" not in line:
            want[(found[1], int(found[2]))] = float(found[3])
    gpus = got["mi2-a"]["gpus"]
    assert [(g["index"], g["physical"], g["partition_id"]) for g in gpus] == [(0, 0, 0), (1, 1, 0)]
    for g in gpus:
        i = g["index"]
        assert (g["model"], g["compute_partition"], g["memory_partition"]) == ("AMD Instinct MI210", None, None)
        assert g["power_w"] == want[("gpu_average_package_power", i)]  # MI2xx: no gpu_package_power
        assert g["temp_junction_c"] == want[("gpu_edge_temperature", i)]  # the edge sensor stands in
        assert g["util_pct"] == want[("gpu_gfx_activity", i)]
        assert g["vram_total_mib"] == want[("gpu_total_vram", i)]
    (spx,) = got["spx-c"]["gpus"]
    assert spx["compute_partition"] == "SPX" and spx["power_w"] is not None and spx["temp_junction_c"] is not None
