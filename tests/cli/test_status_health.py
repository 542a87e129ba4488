"""GPU health in the CLI, as a user runs it, on a simulated node that developed faults
(`python -m console.sim.faults`): `status` (table and --json), `doctor`, and the serve
preflight. Skips until the agent reads health (issue O's agent side)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.services.fleet import agent_reads_health
from tests.cli.cli_helpers import ROOT, one_line_error, run

pytestmark = pytest.mark.skipif(
    not (ROOT / "console" / "sim" / "faults.py").exists() or not agent_reads_health(),
    reason="needs the agent's health reader and the simulated faults (console/sim/faults.py)",
)


@pytest.fixture
def sick_node(tmp_path) -> tuple[Path, dict]:
    """A node whose GPU 2 has a bad page pending and GPU 5 a PCIe link trained down."""
    state = tmp_path / "state"
    profile = tmp_path / "lab.toml"
    profile.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{state}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    for gpu, kind in ((2, "page_pending"), (5, "pcie_degraded")):
        subprocess.run(
            [sys.executable, "-m", "console.sim.faults", str(state / "sim" / "sim"), "add", str(gpu), kind],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=30,
        )
    env = {"HOME": str(tmp_path / "home"), "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    return profile, env


def test_status_shows_each_gpus_health(sick_node):
    profile, env = sick_node
    proc = run("status", "--profile", str(profile), "--json", "--no-probe", env=env)
    assert proc.returncode == 0, proc.stderr
    gpus = {g["index"]: g for g in json.loads(proc.stdout)["nodes"][0]["gpus"]}
    assert gpus[2]["health"]["state"] == "fail"
    # a pending page comes from an uncorrectable error: the simulator counts both, as a real GPU does
    assert gpus[2]["health"]["reasons"] == ["1 uncorrectable ECC error", "1 bad page pending retirement"]
    assert gpus[5]["health"]["state"] == "warn" and gpus[5]["health"]["rules"] == ["pcie_degraded"]
    assert {gpus[i]["health"]["state"] for i in (0, 1, 3, 4, 6, 7)} == {"ok"}
    table = run("status", "--profile", str(profile), "--no-probe", env=env)
    row2 = next(line for line in table.stdout.splitlines() if line.split()[:2] == ["2", "2"])
    assert row2.endswith("fail: 1 uncorrectable ECC error; 1 bad page pending retirement")


def test_doctor_lists_health_with_the_next_step_and_fails(sick_node):
    profile, env = sick_node
    proc = run("doctor", "--profile", str(profile), "--json", env=env, timeout=180)
    assert proc.returncode == 1, proc.stderr  # a GPU in fail health is a fail line
    [node] = json.loads(proc.stdout)["nodes"]
    checks = {c["id"]: c for c in node["checks"]}
    assert checks["health.gpu2"]["level"] == "fail"
    assert "reboot" in checks["health.gpu2"]["fix"] and "RMA" in checks["health.gpu2"]["fix"]
    assert checks["health.gpu5"]["level"] == "warn" and "reseat" in checks["health.gpu5"]["fix"]
    assert checks["health.gpu0"]["level"] == "ok"


def test_serve_start_refuses_a_gpu_in_fail_health_in_one_line(sick_node):
    profile, env = sick_node
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "2", env=env)
    assert proc.returncode == 1
    assert one_line_error(proc) == (
        "rocm-console: sim: GPU 2 is in fail health: 1 uncorrectable ECC error; 1 bad page pending retirement"
        " (--force to start anyway)"
    )
    listing = run("serve", "list", "--profile", str(profile), "--json", env=env)
    assert json.loads(listing.stdout)["instances"] == []
