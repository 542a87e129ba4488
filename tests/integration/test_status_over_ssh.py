"""`rocm-console status` and the fleet service over a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.core.model import NodeHealth, SimulateSpec
from console.services.fleet import FleetTelemetry

ROOT = Path(__file__).resolve().parents[2]


def write_profile(path: Path, sshd, *, name="ssh-node", known_hosts=None, identity=None, compute="SPX") -> Path:
    path.write_text(
        f"""
[nodes.{name}]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{identity or sshd.identity_file}"
known_hosts = "{known_hosts or sshd.known_hosts}"
python = "/usr/bin/python3"
state_dir = "{path.parent / "node-state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "{compute}", memory_partition = "NPS1", seed = 4 }}
"""
    )
    return path


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(180)
def test_status_json_over_real_sshd(sshd, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", sshd, compute="CPX")
    proc = run_cli("status", "--profile", str(profile), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    [node] = doc["nodes"]
    assert node["name"] == "ssh-node" and node["state"] == "live" and node["error"] is None
    assert node["source"] == "amdsmi (simulated)"
    assert len(node["gpus"]) == 64
    required = {
        "index",
        "physical",
        "partition_id",
        "model",
        "compute_partition",
        "memory_partition",
        "util_pct",
        "vram_used_mib",
        "vram_total_mib",
        "power_w",
        "power_cap_w",
        "temp_junction_c",
        "temp_mem_c",
        "processes",
    }
    for gpu in node["gpus"]:
        assert required <= set(gpu)
        assert gpu["compute_partition"] == "CPX" and gpu["memory_partition"] == "NPS1"
    assert [g["index"] for g in node["gpus"]] == list(range(64))
    # the agent really ran on the node side: it was uploaded under the node's state dir
    assert list((tmp_path / "node-state" / "agent").glob("*/node_agent.py"))


@pytest.mark.timeout(120)
def test_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    profile = write_profile(tmp_path / "lab.toml", sshd, known_hosts=str(empty))
    proc = run_cli("status", "--profile", str(profile), "--json")
    assert proc.returncode == 1
    [node] = json.loads(proc.stdout)["nodes"]
    assert node["state"] == "down" and "host key" in node["error"]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "node-state").exists()  # nothing ran on an untrusted host


@pytest.mark.timeout(120)
def test_wrong_client_key_is_refused(sshd, tmp_path):
    stranger = sshd.make_client_key("stranger")
    profile = write_profile(tmp_path / "lab.toml", sshd, identity=stranger)
    proc = run_cli("status", "--profile", str(profile))
    assert proc.returncode == 1
    assert "DOWN" in proc.stdout and "permission denied for user" in proc.stdout
    assert "Traceback" not in proc.stderr


async def _wait(predicate, timeout):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.timeout(180)
async def test_sshd_killed_mid_stream_then_back(sshd, tmp_path):
    node = sshd.node_spec(
        python="/usr/bin/python3",
        state_dir=str(tmp_path / "node-state"),
        simulate=SimulateSpec(gpu="MI300X", count=8, seed=5),
    )
    fleet = FleetTelemetry([node], interval=0.5, backoff_cap=1.0)
    await fleet.start()
    try:
        assert await _wait(lambda: fleet.frames_received("ssh-node") >= 2, 60), fleet.snapshot("ssh-node").error
        sshd.stop()  # kills the daemon's process group: live sessions drop too
        assert await _wait(lambda: fleet.snapshot("ssh-node").health == NodeHealth.DOWN, 30)
        down = fleet.snapshot("ssh-node")
        assert down.error and down.error.startswith("ssh-node:")
        assert down.latest is not None  # last values kept for the screen
        frames_before = fleet.frames_received("ssh-node")
        sshd.start()
        assert await _wait(
            lambda: (
                fleet.snapshot("ssh-node").health == NodeHealth.LIVE
                and fleet.frames_received("ssh-node") > frames_before
            ),
            60,
        )
        assert fleet.snapshot("ssh-node").error is None
    finally:
        await fleet.stop()
