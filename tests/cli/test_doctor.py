"""`rocm-console doctor` as a user runs it: the demo, --json, exit codes, down nodes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
IDS = {
    "link",
    "python",
    "source.amdsmi",
    "source.amd-smi",
    "source.rocm-smi",
    "gpus",
    "sample",
    "rocm",
    "driver",
    "amd-smi",
    "vllm",
    "numa_balancing",
    "kfd",
    "render",
    "root",
}

pytestmark = pytest.mark.timeout(120)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", "doctor", *args],
        cwd=ROOT,
        capture_output=True,
        check=False,
        text=True,
        timeout=100,
    )


def test_demo_json_schema():
    proc = run("--demo", "--json")
    assert proc.returncode == 0, proc.stderr  # warnings only
    doc = json.loads(proc.stdout)
    assert doc["level"] in ("ok", "warn")
    assert [n["name"] for n in doc["nodes"]] == ["mi300x-spx", "mi300x-cpx", "mi355x", "h100"]
    h100 = doc["nodes"][3]
    assert h100["counts"]["fail"] == 0 and h100["facts"]["source"] == "nvml" and h100["facts"]["simulated"] is True
    nvml = {c["id"]: c for c in h100["checks"]}["source.nvidia"]
    assert nvml["level"] == "ok" and nvml["detail"] == "telemetry through the pynvml module (simulated)"
    for n in doc["nodes"][:3]:
        assert set(n) == {"name", "level", "counts", "checks", "facts"}
        assert n["counts"]["fail"] == 0 and sum(n["counts"].values()) == len(n["checks"])
        assert IDS <= {c["id"] for c in n["checks"]}, n["name"]
        for c in n["checks"]:
            assert set(c) == {"id", "title", "level", "detail", "fix"} and c["level"] in ("ok", "warn")
            assert c["level"] == "ok" or c["fix"], c  # every problem comes with its fix
        facts = n["facts"]
        assert facts["source"] == "amdsmi" and facts["simulated"] is True
        assert facts["rocm"] and facts["amdgpu"] and facts["vllm"] == "0.32.0+sim"
        assert facts["numa_balancing"] == "0"
    cpx = doc["nodes"][1]["facts"]["gpus"]
    assert len(cpx) == 8 and {(g["compute_partition"], g["logical_gpus"]) for g in cpx} == {("CPX", 8)}
    mi355 = {c["id"]: c for c in doc["nodes"][2]["checks"]}
    assert mi355["gpus"]["detail"] == "8 x AMD Instinct MI355X, SPX/NPS1, 8 logical GPUs"


def test_demo_table_for_one_node():
    proc = run("--demo", "--node", "mi300x-cpx")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("mi300x-cpx  ")
    assert any(ln.split()[:2] == ["ok", "GPUs"] and "CPX/NPS1, 64 logical GPUs" in ln for ln in lines)
    assert lines[-1].startswith("1 node: 0 failing")


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("--demo", "--node", "nope"),
            "rocm-console: unknown node 'nope' (known: mi300x-spx, mi300x-cpx, mi355x, h100)",
        ),
        (
            ("--demo", "--timeout", "0"),
            "rocm-console doctor: argument --timeout: '0': expected a number of seconds > 0 "
            "(see rocm-console doctor --help)",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = run(*args)
    assert proc.returncode == 2 and proc.stderr.strip() == message and proc.stdout == ""


def test_down_node_is_a_fail_line_and_the_others_still_answer(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    profile = tmp_path / "lab.toml"
    profile.write_text(f"""
[nodes.gone]
host = "127.0.0.1"
port = {free_port()}
known_hosts = "{known}"

[nodes.nopython]
transport = "local"
python = "python-nonexistent"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 2 }}

[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI325X", count = 4, compute_partition = "CPX", memory_partition = "NPS4" }}
""")
    proc = run("--profile", str(profile), "--json", "--timeout", "30")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    [gone] = nodes["gone"]["checks"]
    assert gone["level"] == "fail" and gone["detail"].startswith("gone: cannot reach 127.0.0.1:")
    assert "connection refused" in gone["detail"] and gone["fix"]
    [nopy] = nodes["nopython"]["checks"]
    assert nopy["level"] == "fail" and nopy["detail"].startswith("nopython: cannot run python-nonexistent")
    assert 'set python = "/path/to/python3" for nopython' in nopy["fix"]
    sim = {c["id"]: c for c in nodes["sim"]["checks"]}
    assert nodes["sim"]["level"] in ("ok", "warn")
    assert sim["gpus"]["detail"] == "4 x AMD Instinct MI325X, CPX/NPS4, 32 logical GPUs"

    text = run("--profile", str(profile), "--timeout", "30")
    assert text.returncode == 1
    assert text.stdout.splitlines()[-1].startswith("3 nodes: 2 failing (gone, nopython)")


def test_a_python_too_old_for_the_agent_is_named(tmp_path):
    old = sorted(Path.home().glob(".pyenv/versions/3.[67].*/bin/python3.[67]"))
    if not old:
        pytest.skip("no Python older than 3.8 here")
    profile = tmp_path / "lab.toml"
    profile.write_text(f"""
[nodes.old]
transport = "local"
python = "{old[0]}"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 2 }}
""")
    proc = run("--profile", str(profile), "--json")
    assert proc.returncode == 1
    [check] = json.loads(proc.stdout)["nodes"][0]["checks"]
    assert check["level"] == "fail" and "SyntaxError" in check["detail"]
    assert check["fix"].startswith(f"the agent needs Python >= 3.8 ({old[0]} on the node)")


def test_demo_says_which_facts_are_simulated():
    proc = run("--demo", "--node", "mi300x-spx")
    assert proc.returncode == 0, proc.stderr
    rows = [re.match(r"  (ok|warn|fail) +(.+?) {2,}(.*)$", ln) for ln in proc.stdout.splitlines()]
    lines = {m.group(2): m.group(3) for m in rows if m}
    simulated = lines["simulated node"]
    for part in (
        "amdsmi: simulated (console/sim/amdsmi)",
        "vLLM: simulated (console/sim/vllm)",
        "ROCm, amdgpu, NUMA, /dev/kfd and render nodes: simulated files (console/sim/host.py)",
        "root: simulated (simulate.root = true in the profile)",
    ):
        assert part in simulated
    for title in ("ROCm", "amdgpu driver", "vLLM", "NUMA balancing", "/dev/kfd", "/dev/dri render nodes"):
        assert lines[title].endswith("(simulated)"), lines[title]
    assert "simulated root" in lines["root for partition switches"]


def test_a_gpu_without_partition_modes_shows_none(tmp_path):
    """NVIDIA GPUs without MIG have no partition mode: the GPUs line says so (or leaves it out
    when no GPU has one), never `?/?`."""
    profile = tmp_path / "nv.toml"
    profile.write_text(f"""
[nodes.h200]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "H200", count = 2 }}
""")
    proc = run("--profile", str(profile), "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.split()[:2] == ["ok", "GPUs"]]
    assert line.split("GPUs", 1)[1].strip() == "2 x NVIDIA H200, 2 logical GPUs"
    demo = run("--demo", "--node", "h100")
    assert demo.returncode == 0, demo.stderr
    [line] = [ln for ln in demo.stdout.splitlines() if ln.split()[:2] == ["ok", "GPUs"]]
    assert "?/?" not in line and "GPU 0-6 no partition, GPU 7 MIG/3g.40gb" in line
