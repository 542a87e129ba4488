"""The simulated DME exporter: DME's names and labels, the simulated amdsmi's values, 127.0.0.1 only."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from console.sim import faults
from tests.sim.simulators import load_amdsmi

EXPORTER = Path(__file__).resolve().parents[2] / "console" / "sim" / "dme_exporter.py"
FROZEN = "1764000000"
LINE_RE = re.compile(r"^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def test_python38_syntax():
    ast.parse(EXPORTER.read_text(), feature_version=(3, 8))
    assert "import console" not in EXPORTER.read_text() and "from console" not in EXPORTER.read_text()


@pytest.fixture
def exporter(tmp_path):
    nodes = tmp_path / "nodes.json"
    nodes.write_text(
        json.dumps(
            [
                {"hostname": "spx-a", "gpu": "MI300X", "count": 2, "seed": 4},
                {"hostname": "cpx-b", "gpu": "MI300X", "count": 2, "compute_partition": "CPX", "seed": 5},
            ]
        )
    )
    env = {**os.environ, "ROCM_CONSOLE_SIM_TIME": FROZEN}
    proc = subprocess.Popen(
        [sys.executable, str(EXPORTER), "--nodes", str(nodes), "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        hello = json.loads(proc.stdout.readline())
        yield hello, tmp_path / "state"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def fetch(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return reply.read().decode()


def parse(text: str) -> list[tuple[str, dict, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        found = LINE_RE.match(line)
        assert found, line
        labels = dict(re.findall(r'(\w+)="([^"]*)"', found["labels"]))
        out.append((found["name"], labels, float(found["value"])))
    return out


def load_sim(state: Path, tag: str):
    module = load_amdsmi(f"_test_sim_{tag}")
    os.environ[module.ENV_DIR] = str(state)
    try:
        module.amdsmi_init()
    finally:
        os.environ.pop(module.ENV_DIR)
    return module


def test_serves_dme_families_and_labels_with_the_simulators_values(exporter, monkeypatch):
    hello, state = exporter
    assert hello["nodes"] == ["spx-a", "cpx-b"]
    series = parse(fetch(hello["port"], "/nodes/cpx-b/metrics"))
    names = {name for name, _, _ in series}
    assert {"gpu_gfx_activity", "gpu_gfx_busy_instantaneous", "gpu_used_vram", "gpu_total_vram"} <= names
    assert {"gpu_package_power", "gpu_junction_temperature", "gpu_clock"} <= names
    assert not names & {"gpu_edge_temperature", "gpu_average_package_power"}  # MI2xx families
    gpu_series = [(n, lab, v) for n, lab, v in series if n != "gpu_nodes_total"]
    for _, labels, _ in gpu_series:
        assert labels["hostname"] == "cpx-b"
        assert labels["gpu_compute_partition_type"] == "cpx" and labels["gpu_memory_partition_type"] == "nps1"
        assert labels["card_series"] == "AMD Instinct MI300X" and labels["card_model"].startswith("102-")
        assert labels["deployment_mode"] == "baremetal"
        assert all(labels[k] == "" for k in ("pod", "namespace", "container", "job_id", "job_user", "job_partition"))
    # 2 physical MI300X in CPX: 16 logical GPUs, partition ids 0-7, one serial per device
    ids = {(int(lab["gpu_id"]), int(lab["gpu_partition_id"]), lab["serial_number"]) for _, lab, _ in gpu_series}
    assert sorted(i for i, _, _ in ids) == list(range(16))
    assert len({s for _, _, s in ids}) == 2
    assert all(p == i % 8 for i, p, _ in ids)

    # The values are the simulated amdsmi's for the same state and frozen clock.
    monkeypatch.setenv("ROCM_CONSOLE_SIM_TIME", FROZEN)
    sim = load_sim(state / "cpx-b", "cpx")
    handles = sim.amdsmi_get_processor_handles()
    raw = sim.amdsmi_get_gpu_metrics_info(handles[8])  # physical 1's primary partition
    value = {(n, int(lab["gpu_id"]), lab.get("clock_index") or lab.get("xcc_index")): v for n, lab, v in gpu_series}
    clocks = {
        (int(lab["gpu_id"]), lab["clock_index"]): lab["clock_type"] for n, lab, _ in gpu_series if n == "gpu_clock"
    }
    # device values on partition 0 only; the other partitions: power 0, no temperature, no clock
    assert value[("gpu_package_power", 8, None)] == raw["current_socket_power"]
    assert value[("gpu_package_power", 9, None)] == 0 and value[("gpu_power_usage", 9, None)] == 0
    assert value[("gpu_junction_temperature", 8, None)] == raw["temperature_hotspot"]
    assert ("gpu_junction_temperature", 9, None) not in value and ("gpu_clock", 9, "0") not in value
    assert value[("gpu_gfx_activity", 8, None)] == raw["average_gfx_activity"]
    assert ("gpu_gfx_activity", 11, None) not in value  # activity: partition 0 only, as DME
    # one system clock per XCD (lower-case clock_type), then memory at the next index
    assert [clocks[(8, str(i))] for i in range(9)] == ["system"] * 8 + ["memory"]
    assert [value[("gpu_clock", 8, str(i))] for i in range(8)] == raw["current_gfxclks"]
    assert value[("gpu_clock", 8, "8")] == raw["current_uclk"]
    # each partition's own load: one busy series per XCC it has (one in CPX)
    busy = raw["xcp_stats.gfx_busy_inst"][3]  # partition 3 of that device = gpu_id 11
    row = [b for b in busy if isinstance(b, int) and b < 0xFFFF]
    assert [value[("gpu_gfx_busy_instantaneous", 11, str(i))] for i in range(len(row))] == row
    usage = sim.amdsmi_get_gpu_vram_usage(handles[11])
    assert value[("gpu_used_vram", 11, None)] == usage["vram_used"]
    assert value[("gpu_total_vram", 11, None)] == usage["vram_total"]


def test_prefix_and_mi2xx_platform(tmp_path):
    nodes = tmp_path / "nodes.json"
    nodes.write_text(
        json.dumps([{"hostname": "old", "count": 1, "dme_platform": "mi2xx", "card_series": "AMD Instinct MI210"}])
    )
    argv = [sys.executable, str(EXPORTER), "--nodes", str(nodes), "--state-dir", str(tmp_path / "s")]
    proc = subprocess.Popen([*argv, "--metric-prefix", "amd_"], stdout=subprocess.PIPE, text=True)
    try:
        hello = json.loads(proc.stdout.readline())
        series = parse(fetch(hello["port"], "/metrics"))
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    names = {name for name, _, _ in series}
    assert all(name.startswith(("amd_gpu_", "amd_pcie_")) for name in names)
    assert {"amd_gpu_edge_temperature", "amd_gpu_average_package_power"} <= names
    # MI2xx: ECC and PCIe speed, no replay / recovery or violation counters (DME lists them MI3xx)
    assert {"amd_gpu_ecc_uncorrect_total", "amd_pcie_speed", "amd_pcie_max_speed"} <= names
    assert not any("violation" in n or "replay" in n for n in names)
    assert not names & {"amd_gpu_junction_temperature", "amd_gpu_package_power", "amd_gpu_gfx_busy_instantaneous"}
    labels = [lab for name, lab, _ in series if name != "amd_gpu_nodes_total"]
    assert {(lab["gpu_partition_id"], lab["gpu_compute_partition_type"], lab["card_series"]) for lab in labels} == {
        ("NA", "none", "AMD Instinct MI210")
    }


def test_health_families_on_partition_0_develop_the_faults_of_faults_json(exporter):
    hello, state = exporter

    def health(host: str) -> dict[tuple[str, int], float]:
        names = ("gpu_ecc_", "pcie_", "gpu_violation_", "gpu_energy_consumed")
        series = parse(fetch(hello["port"], f"/nodes/{host}/metrics"))
        return {(n, int(lab["gpu_id"])): v for n, lab, v in series if n.startswith(names)}

    healthy = health("cpx-b")
    # one set per physical GPU, on its first partition (gpu_id 0 and 8 of 16 logical GPUs)
    assert {gpu for _, gpu in healthy} == {0, 8}
    assert healthy[("gpu_ecc_uncorrect_total", 8)] == 0 and healthy[("gpu_ecc_correct_umc", 8)] == 0
    assert healthy[("pcie_speed", 8)] == healthy[("pcie_max_speed", 8)] == 32  # GT/s: gen 5
    assert healthy[("gpu_violation_ppt_residency_accumulated", 8)] == 0
    assert healthy[("gpu_violation_current_accumulated_counter", 8)] > 0
    assert healthy[("gpu_energy_consumed", 8)] > 0  # µJ
    faults.add_fault(str(state / "cpx-b"), 1, "ecc_uncorrectable", 2)
    faults.add_fault(str(state / "cpx-b"), 1, "ecc_correctable")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and health("cpx-b")[("gpu_ecc_uncorrect_total", 8)] == 0:
        time.sleep(0.2)  # the exporter renders once a second
    sick = health("cpx-b")
    assert sick[("gpu_ecc_uncorrect_total", 8)] == 2 and sick[("gpu_ecc_uncorrect_umc", 8)] == 2
    assert sick[("gpu_ecc_correct_total", 8)] == 1 and sick[("gpu_ecc_uncorrect_total", 0)] == 0
    assert health("spx-a")[("gpu_ecc_uncorrect_total", 1)] == 0  # another node's folder: its own faults


def test_every_node_on_metrics_and_unknown_node_is_404(exporter):
    hello, _ = exporter
    hosts = {lab["hostname"] for _, lab, _ in parse(fetch(hello["port"], "/metrics"))}
    assert hosts == {"spx-a", "cpx-b"}
    with pytest.raises(urllib.error.HTTPError) as info:
        fetch(hello["port"], "/nodes/nope/metrics")
    assert info.value.code == 404


def test_listens_on_loopback_only(exporter):
    hello, _ = exporter
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=False).stdout
    listeners = [line.split()[3] for line in out.splitlines() if line.split()[3].endswith(f":{hello['port']}")]
    assert listeners == [f"127.0.0.1:{hello['port']}"]
