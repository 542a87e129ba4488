"""`partition set` through the console over a real sshd, against a simulated node."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_status_over_ssh import run_cli, write_profile


@pytest.mark.timeout(180)
def test_partition_switch_over_real_sshd(sshd, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", sshd)
    proc = run_cli(
        "partition",
        "set",
        "--profile",
        str(profile),
        "--node",
        "ssh-node",
        "--gpus",
        "0,1",
        "--compute",
        "CPX",
        "--yes",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["logical_gpus"] == 22  # 6 SPX + 2 x 8 CPX
    assert [g["compute_partition"] for g in doc["gpus"]][:3] == ["CPX", "CPX", "SPX"]
    status = json.loads(run_cli("status", "--profile", str(profile), "--json", "--no-probe").stdout)
    assert len(status["nodes"][0]["gpus"]) == 22
    shown = run_cli("partition", "show", "--profile", str(profile))
    assert "GPU 0  CPX/NPS1  8 logical" in shown.stdout
    refused = run_cli(
        "partition",
        "set",
        "--profile",
        str(profile),
        "--node",
        "ssh-node",
        "--gpus",
        "0",
        "--compute",
        "SPX",
        "--memory",
        "NPS4",
        "--yes",
        "--reload-driver",
    )
    assert refused.returncode == 1 and "refused: GPU 0: SPX needs NPS1" in refused.stderr
