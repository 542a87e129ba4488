"""The `rocm-console` CLI as a user runs it: exit codes, one-line errors, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, ROCM_CONSOLE_SIM_VLLM_SPEEDUP="20", **(env or {}))
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


@pytest.fixture
def profile(tmp_path) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / 'state'}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
""")
    return path




def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_status_demo_json_schema():
    proc = run("status", "--demo", "--json", "--no-probe")
    assert proc.returncode == 0, proc.stderr
    nodes = json.loads(proc.stdout)["nodes"]
    assert [n["name"] for n in nodes] == ["mi300x-spx", "mi300x-cpx", "mi355x"]
    assert [len(n["gpus"]) for n in nodes] == [8, 64, 8]


def test_bad_profile_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[nodes.a]\nhost = "h"\nprot = 22\n')
    proc = run("status", "--profile", str(bad))
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "bad.toml" in line and "[nodes.a]" in line and "'prot'" in line


def test_no_nodes_says_what_to_do(tmp_path):
    proc = run("status", cwd=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert proc.returncode == 2
    assert "--demo" in one_line_error(proc)


def test_unknown_node_and_bad_flags(profile):
    proc = run("status", "--profile", str(profile), "--node", "nope")
    assert proc.returncode == 2 and "unknown node 'nope'" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "nope")
    assert proc.returncode == 2 and "unknown serve preset 'nope'" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "a,b")
    assert proc.returncode == 2 and "--gpus 'a,b'" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--set", "oops")
    assert proc.returncode == 2 and "expected KEY=VALUE" in one_line_error(proc)
    proc = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "0",
               "--set", "port=1234")
    assert proc.returncode == 1 and "port" in one_line_error(proc)


def test_serve_lifecycle_on_the_simulator(profile):
    port = str(free_port())
    start = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "3", "--port", port,
                "--name", "t", "--wait", "--timeout", "60")
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert "t: ready" in start.stdout
        listing = run("serve", "list", "--profile", str(profile), "--json")
        [inst] = [i for i in json.loads(listing.stdout)["instances"] if i["name"] == "t"]
        assert inst["state"] == "ready" and inst["gpus"] == [3] and inst["port"] == int(port)
        logs = run("serve", "logs", "t", "--profile", str(profile), "--lines", "50")
        assert "Application startup complete." in logs.stdout
        status = json.loads(run("status", "--profile", str(profile), "--json", "--no-probe").stdout)
        gpu3 = status["nodes"][0]["gpus"][3]
        assert [p["pid"] for p in gpu3["processes"]] == [inst["pid"]]
    finally:
        stop = run("serve", "stop", "t", "--profile", str(profile))
    assert stop.returncode == 0 and "t: stopped" in stop.stdout
    proc = run("serve", "stop", "t", "--profile", str(profile))
    assert proc.returncode == 0  # stopping a stopped instance is not an error
    proc = run("serve", "logs", "ghost", "--profile", str(profile))
    assert proc.returncode == 1 and "no instance named ghost" in one_line_error(proc)


def test_bench_run_and_sweep_store_results(profile, tmp_path):
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data")}
    start = run("serve", "start", "--profile", str(profile), "--preset", "tiny", "--gpus", "2", "--port", str(free_port()),
                "--name", "b", "--wait", "--timeout", "60")
    assert start.returncode == 0, start.stderr
    try:
        one = run("bench", "run", "--profile", str(profile), "--instance", "b", "--preset", "tiny", "--json", env=env)
        assert one.returncode == 0, one.stderr
        doc = json.loads(one.stdout)
        assert doc["metrics"]["completed"] == 20 and doc["context"]["instance"] == "b"
        assert doc["context"]["compute_partition"] == "SPX" and doc["context"]["gpu_model"] == "AMD Instinct MI300X"
        sweep = run("bench", "sweep", "--profile", str(profile), "--instance", "b", "--preset", "tiny",
                    "--concurrency", "1,2", "--set", "num_prompts=6", env=env)
        assert sweep.returncode == 0, sweep.stderr
        assert "concurrency  output tok/s" in sweep.stdout
        listed = run("results", "list", "--json", env=env)
        assert len(json.loads(listed.stdout)["runs"]) == 3
        bad = run("bench", "run", "--profile", str(profile), "--instance", "nope", "--preset", "tiny", env=env)
        assert bad.returncode == 2 and "no instance named nope" in one_line_error(bad)
        bad = run("bench", "sweep", "--profile", str(profile), "--instance", "b", "--preset", "tiny", env=env)
        assert bad.returncode == 2 and "--concurrency" in one_line_error(bad)
    finally:
        run("serve", "stop", "b", "--profile", str(profile))
