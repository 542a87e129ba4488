"""`serve stop` and `bench cancel` over a real OpenSSH sshd: a name the node does not know is a
failure (exit 1, one line), a real one is stopped, and stopping it again says it already ended."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import free_port
from tests.integration.test_status_over_ssh import write_profile

ROOT = Path(__file__).resolve().parents[2]


def cli(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"),
    }
    return subprocess.run(
        [sys.executable, "-m", "console", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _run_state(tmp_path: Path, profile: Path, name: str) -> dict:
    runs = cli(tmp_path, "bench", "runs", "--profile", str(profile), "--json")
    assert runs.returncode == 0, runs.stderr
    return next(r for r in json.loads(runs.stdout)["runs"] if r["name"] == name)


@pytest.mark.timeout(400)
def test_serve_stop_and_bench_cancel_over_real_sshd(sshd, tmp_path):
    profile = str(write_profile(tmp_path / "lab.toml", sshd))
    unknown = cli(tmp_path, "serve", "stop", "no-such-instance", "--profile", profile)
    assert unknown.returncode == 1
    assert one_line(unknown) == "rocm-console: ssh-node: no instance named no-such-instance"
    unknown = cli(tmp_path, "bench", "cancel", "no-such-run", "--profile", profile)
    assert unknown.returncode == 1
    assert one_line(unknown) == "rocm-console: ssh-node: no benchmark run named no-such-run (bench runs lists them)"

    start = cli(
        tmp_path, "serve", "start", "--profile", profile, "--preset", "tiny", "--gpus", "1", "--name", "t",
        "--port", str(free_port()), "--wait", "--timeout", "120",
    )  # fmt: skip
    assert start.returncode == 0, start.stderr
    stop = cli(tmp_path, "serve", "stop", "t", "--profile", profile)
    assert stop.returncode == 0 and stop.stdout.startswith("t: stopped"), stop.stdout + stop.stderr
    again = cli(tmp_path, "serve", "stop", "t", "--profile", profile)
    assert again.returncode == 0 and again.stdout.startswith("t: already "), again.stdout

    # a long offline run on the node, detached: cancelled by name, and nothing of it is left
    started = cli(
        tmp_path, "bench", "latency", "--profile", profile, "--gpus", "2", "--set", "model=/m/tiny-llama",
        "--set", "num_iters=100000", "--detach",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    name = re.search(r"started (\S+) on ssh-node", started.stdout).group(1)
    deadline = time.monotonic() + 60
    while _run_state(tmp_path, Path(profile), name)["state"] != "running":
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.5)
    cancel = cli(tmp_path, "bench", "cancel", name, "--profile", profile)
    assert cancel.returncode == 0 and cancel.stdout == f"{name}: cancelled\n", cancel.stdout + cancel.stderr
    rec = _run_state(tmp_path, Path(profile), name)
    assert rec["state"] == "exited"
    assert not Path(f"/proc/{rec['pid']}").exists() or "Z" in Path(f"/proc/{rec['pid']}/stat").read_text().split()[2]
    again = cli(tmp_path, "bench", "cancel", name, "--profile", profile)
    assert again.returncode == 0 and again.stdout.startswith(f"{name}: already exited"), again.stdout
