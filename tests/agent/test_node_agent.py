"""The node agent, run as a subprocess exactly as the console runs it.

amdsmi path: against the simulator (console/sim/amdsmi/ copied into a temp
dir as the package amdsmi, like the console uploads it).  Fallbacks: fake ``amd-smi``
and ``rocm-smi`` executables first on PATH that print recorded JSON.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import wait_until
from tests.sim.simulators import AMDSMI_DIR, copy_amdsmi, load_amdsmi

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
SIM = AMDSMI_DIR

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------ helpers


def run_agent(*args, env=None, timeout=30):
    if args and args[0] == "telemetry" and "--health-interval" not in args:
        args += ("--health-interval", "0")  # these tests count the other lines (health: test_health_agent.py)
    proc = subprocess.run(
        [sys.executable, str(AGENT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc


def json_lines(stdout):
    """Every stdout line must be a JSON object: nothing else may reach the console."""
    lines = stdout.splitlines()
    out = []
    for line in lines:
        obj = json.loads(line)
        assert isinstance(obj, dict) and "kind" in obj, line
        out.append(obj)
    return out


def kinds(lines):
    return [o["kind"] for o in lines]


def base_env(path_dirs=()):
    """An environment whose PATH holds only the given dirs (no real amd-smi/rocm-smi)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env["PATH"] = os.pathsep.join([str(d) for d in path_dirs] + ["/nonexistent"])
    return env


def load_agent_module(name="node_agent"):
    """node_agent.py (a fresh copy), or another module of its folder imported as the agent
    imports it: by file name, the folder on sys.path."""
    if name != "node_agent":
        if str(AGENT.parent) not in sys.path:
            sys.path.insert(0, str(AGENT.parent))
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location("node_agent_under_test", AGENT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def broken_amdsmi(tmp_path):
    """A module that behaves like the real one without libamd_smi.so."""
    d = tmp_path / "broken"
    d.mkdir()
    (d / "amdsmi.py").write_text(
        textwrap.dedent("""\
        print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory")
        print("Unable to find libamd_smi.so library try installing amd-smi-lib from your package manager")
        raise KeyError("libamd_smi.so")
    """)
    )
    return d


# --------------------------------------------------------- fake vendor CLIs

FAKE_CLI = """\
#!{python}
# Prints recorded JSON: <dir>/<key>.<n>.json for the n-th call of a key, else <key>.json.
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
data = os.path.join(here, "data")
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
if name == "rocm-smi":
    key = "rocm-static" if "--showbus" in args else "rocm-tick"
else:
    key = args[0] if args else "none"
with open(os.path.join(data, "calls.log"), "a") as log:
    log.write(name + " " + " ".join(args) + "\\n")
counter = os.path.join(data, key + ".count")
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
for candidate in ("%s.%d.json" % (key, n), key + ".json"):
    path = os.path.join(data, candidate)
    if os.path.exists(path):
        pre = os.path.join(data, key + ".preamble")
        if os.path.exists(pre):
            sys.stdout.write(open(pre).read())
        sys.stdout.write(open(path).read())
        sys.exit(0)
sys.stderr.write("%s: error: argument command: invalid choice: %r\\n" % (name, key))
sys.exit(2)
"""


def leaf(value, unit):
    return {"value": value, "unit": unit}


def amd_metric(gpu, gfx=37, power=512, used=150000, total=196592):
    return {
        "gpu": gpu,
        "usage": {"gfx_activity": leaf(gfx, "%"), "umc_activity": leaf(12, "%"), "mm_activity": "N/A"},
        "power": {
            "socket_power": leaf(power, "W"),
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "throttle_status": "UNTHROTTLED",
            "power_management": "ENABLED",
        },
        "clock": {
            "gfx_0": {
                "clk": leaf(1420, "MHz"),
                "min_clk": leaf(500, "MHz"),
                "max_clk": leaf(2100, "MHz"),
                "clk_locked": "N/A",
                "deep_sleep": "DISABLED",
            },
            "mem_0": {
                "clk": leaf(1300, "MHz"),
                "min_clk": leaf(900, "MHz"),
                "max_clk": leaf(1300, "MHz"),
                "clk_locked": "N/A",
                "deep_sleep": "DISABLED",
            },
        },
        "temperature": {"edge": "N/A", "hotspot": leaf(61, "C"), "mem": leaf(48, "C")},
        "mem_usage": {
            "total_vram": leaf(total, "MB"),
            "used_vram": leaf(used, "MB"),
            "free_vram": leaf(total - used, "MB"),
        },
    }


def amd_static(gpu, bdf, new_layout=True):
    rec = {
        "gpu": gpu,
        "asic": {
            "market_name": "AMD Instinct MI300X",
            "asic_serial": "0x5E4F%04X" % gpu,
            "target_graphics_version": "gfx942",
        },
        "bus": {"bdf": bdf, "max_pcie_width": 16},
        "board": {"product_serial": "692451%04d" % gpu, "product_name": "N/A"},
        "vram": {"type": "HBM", "size": leaf(196592, "MB")},
    }
    if new_layout:  # ROCm 7.x: ifwi + per-PPT limits, partition not in static
        rec["ifwi"] = {"name": "AMD MI300X", "version": "113-M3000100-102"}
        rec["limit"] = {
            "ppt0": {
                "max_power_limit": leaf(750, "W"),
                "min_power_limit": leaf(0, "W"),
                "socket_power_limit": leaf(700, "W"),
            }
        }
    else:  # ROCm 6.x: vbios + flat limits + partition section
        rec["vbios"] = {"name": "AMD MI300X", "version": "113-M3000100-101"}
        rec["limit"] = {"max_power": leaf(750, "W"), "min_power": leaf(0, "W"), "socket_power": leaf(750, "W")}
        rec["partition"] = {"compute_partition": "SPX", "memory_partition": "NPS1", "partition_id": 0}
    return rec


BDFS = ["0000:0c:00.0", "0000:22:00.0"]


def make_fake_cli(tmp_path, name, files):
    bindir = tmp_path / "bin"
    data = bindir / "data"
    data.mkdir(parents=True, exist_ok=True)
    exe = bindir / name
    exe.write_text(FAKE_CLI.format(python=sys.executable))
    exe.chmod(0o755)
    for fname, content in files.items():
        (data / fname).write_text(content if isinstance(content, str) else json.dumps(content))
    return bindir


def calls(bindir):
    log = bindir / "data" / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


# ------------------------------------------------------------ static checks


# node_agent.py and the modules it imports by file name (its telemetry sources)
AGENT_MODULES = ("node_agent.py", "sampling.py", "amdsmi_sampler.py", "smi_cli.py")


@pytest.mark.parametrize("name", AGENT_MODULES)
def test_agent_parses_as_python_38(name):
    src = (AGENT.parent / name).read_text()
    ast.parse(src, feature_version=(3, 8))
    assert "from console" not in src and "import console" not in src


def test_agent_runs_on_python_38_when_available(broken_amdsmi):
    # A real interpreter, not a pyenv shim (a shell script that needs PATH).
    found = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    which = shutil.which("python3.8")
    py38 = found[0] if found else (which if which and "shims" not in which else None)
    if not py38:
        pytest.skip("no Python 3.8 here")
    proc = subprocess.run(
        [str(py38), str(AGENT), "telemetry", "--count", "1", "--amdsmi-path", str(broken_amdsmi)],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 3, proc.stderr
    assert kinds(json_lines(proc.stdout)) == ["error"]


# ------------------------------------------------------------ CLI handling


@pytest.mark.parametrize("value", ["0.05", "10.5", "0", "-1", "nan", "abc"])
def test_interval_outside_range_is_an_error_line_and_exit_2(value):
    proc = run_agent("telemetry", "--interval", value, "--count", "1")
    assert proc.returncode == 2
    (line,) = json_lines(proc.stdout)
    assert line["kind"] == "error" and "interval" in line["message"]


def test_count_must_be_positive():
    proc = run_agent("telemetry", "--count", "0")
    assert proc.returncode == 2
    assert kinds(json_lines(proc.stdout)) == ["error"]


def test_next_deadline_skips_missed_ticks_instead_of_bursting():
    agent = load_agent_module()
    assert agent.next_deadline(10.0, 1.0, 10.2) == pytest.approx(11.0)  # on time
    assert agent.next_deadline(10.0, 1.0, 11.0) == pytest.approx(12.0)  # exactly late
    assert agent.next_deadline(10.0, 1.0, 13.4) == pytest.approx(14.0)  # overran 3 ticks: skip


def test_normaliser_maps_na_and_sentinels_to_none():
    agent = load_agent_module("sampling")
    for bad in ("N/A", None, 0xFFFF, 0xFFFFFFFF, 2**64 - 1, "junk", float("nan"), True, [1], "N/A "):
        assert agent.num(bad) is None, bad
    assert agent.num(42) == 42 and agent.num("35.0") == 35.0
    assert agent.num({"value": 61, "unit": "C"}) == 61
    assert agent.num({"value": "N/A", "unit": "C"}) is None
    assert agent.mib({"value": 2, "unit": "GB"}) == 2048
    assert agent.mib("1048576", "B") == 1.0


# ------------------------------------------------------------ no source


def test_no_source_at_all_is_an_error_line_and_exit_3(broken_amdsmi):
    proc = run_agent("telemetry", "--count", "2", "--amdsmi-path", str(broken_amdsmi), env=base_env())
    assert proc.returncode == 3
    (line,) = json_lines(proc.stdout)  # the module's garbage went to stderr
    assert line["kind"] == "error"
    msg = line["message"]
    assert msg.startswith("no telemetry source: amdsmi")
    assert "KeyError: 'libamd_smi.so'" in msg
    assert "amd-smi not found" in msg and "rocm-smi not found" in msg
    assert "cannot open shared object file" in proc.stderr


# ------------------------------------------------------------ amd-smi fallback


def test_amd_smi_fallback_new_object_shape(tmp_path, broken_amdsmi):
    bindir = make_fake_cli(
        tmp_path,
        "amd-smi",
        {
            "metric.json": {"gpu_data": [amd_metric(0), amd_metric(1, gfx=0, power="N/A")]},
            "static.json": {"gpu_data": [amd_static(0, BDFS[0]), amd_static(1, BDFS[1])]},
            "partition.json": {
                "current_partition": [
                    {
                        "gpu_id": 0,
                        "memory": "NPS1",
                        "accelerator_type": "SPX",
                        "accelerator_profile_index": 0,
                        "partition_id": "0",
                    },
                    {
                        "gpu_id": 1,
                        "memory": "NPS1",
                        "accelerator_type": "SPX",
                        "accelerator_profile_index": 0,
                        "partition_id": "0",
                    },
                ],
                "memory_partition": [
                    {"gpu_id": 0, "memory_partition_caps": "NPS1,NPS4", "current_memory_partition": "NPS1"},
                    {"gpu_id": 1, "memory_partition_caps": "NPS1,NPS4", "current_memory_partition": "NPS1"},
                ],
                "partition_profiles": [],
                "partition_resources": [],
            },
            # real amd-smi may warn on stdout before the JSON
            "metric.preamble": "WARNING: User is missing the following required groups: render\n",
        },
    )
    proc = run_agent(
        "telemetry", "--count", "3", "--interval", "0.1", "--amdsmi-path", str(broken_amdsmi), env=base_env([bindir])
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert kinds(lines) == ["hello", "static", "sample", "sample", "sample"]
    hello = lines[0]
    assert hello["source"] == "amd-smi" and hello["simulated"] is False
    assert hello["note"] == ("amdsmi module unavailable (KeyError: 'libamd_smi.so'); using amd-smi metric --json")
    static = lines[1]["gpus"]
    assert [(g["index"], g["physical"], g["partition_id"]) for g in static] == [(0, 0, 0), (1, 1, 0)]
    g0 = static[0]
    assert g0["bdf"] == BDFS[0] and g0["model"] == "AMD Instinct MI300X"
    assert g0["serial"] == "0x5E4F0000" and g0["vbios"] == "113-M3000100-102"
    assert g0["vram_total_mib"] == 196592
    assert (g0["compute_partition"], g0["memory_partition"], g0["memory_caps"]) == ("SPX", "NPS1", ["NPS1", "NPS4"])
    s0, s1 = lines[2]["gpus"]
    assert s0 == {
        "index": 0,
        "util_pct": 37,
        "umc_pct": 12,
        "vram_used_mib": 150000,
        "vram_total_mib": 196592,
        "power_w": 512,
        "power_cap_w": 700,
        "temp_junction_c": 61,
        "temp_mem_c": 48,
        "gfx_clock_mhz": 1420,
        "mem_clock_mhz": 1300,
        "processes": None,
        "energy_j": None,
        "throttled": None,
    }
    assert s1["power_w"] is None and s1["util_pct"] == 0
    assert [line["seq"] for line in lines[2:]] == [0, 1, 2]
    # static facts once, one metric call per tick
    log = calls(bindir)
    assert log.count("amd-smi static --json") == 1
    assert log.count("amd-smi metric --json") == 3
    assert "amd-smi partition --current --memory --json" in log


def test_amd_smi_fallback_old_list_shape(tmp_path, broken_amdsmi):
    # <26: top-level lists, vbios + flat limits + partition inside static; no `partition` command.
    bindir = make_fake_cli(
        tmp_path,
        "amd-smi",
        {
            "metric.json": [amd_metric(0, used=1024)],
            "static.json": [amd_static(0, BDFS[0], new_layout=False)],
        },
    )
    proc = run_agent(
        "telemetry", "--count", "2", "--interval", "0.1", "--amdsmi-path", str(broken_amdsmi), env=base_env([bindir])
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert kinds(lines) == ["hello", "static", "sample", "sample"]
    (g0,) = lines[1]["gpus"]
    assert g0["vbios"] == "113-M3000100-101"
    assert (g0["compute_partition"], g0["memory_partition"]) == ("SPX", "NPS1")
    (s0,) = lines[2]["gpus"]
    assert s0["power_cap_w"] == 750 and s0["vram_used_mib"] == 1024


def test_amd_smi_reenumerates_when_the_gpu_count_changes(tmp_path, broken_amdsmi):
    cpx = [amd_metric(i, used=100, total=24574) for i in range(8)]
    cpx_static = [amd_static(i, "0000:0c:00.%d" % i) for i in range(8)]
    bindir = make_fake_cli(
        tmp_path,
        "amd-smi",
        {
            "metric.1.json": {"gpu_data": [amd_metric(0)]},
            "metric.2.json": {"gpu_data": [amd_metric(0)]},
            "metric.json": {"gpu_data": cpx},
            "static.1.json": {"gpu_data": [amd_static(0, BDFS[0])]},
            "static.json": {"gpu_data": cpx_static},
        },
    )
    proc = run_agent(
        "telemetry", "--count", "4", "--interval", "0.1", "--amdsmi-path", str(broken_amdsmi), env=base_env([bindir])
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert kinds(lines) == ["hello", "static", "sample", "sample", "static", "sample", "sample"]
    new = lines[4]["gpus"]
    assert [(g["physical"], g["partition_id"]) for g in new] == [(0, i) for i in range(8)]
    assert len(lines[5]["gpus"]) == 8


def test_amd_smi_that_fails_falls_through_to_rocm_smi(tmp_path, broken_amdsmi):
    bindir = make_fake_cli(tmp_path, "amd-smi", {})  # every command fails
    make_fake_cli(
        tmp_path,
        "rocm-smi",
        {
            "rocm-tick.json": {
                "card0": {
                    "GPU use (%)": "55",
                    "GPU Memory Allocated (VRAM%)": "20",
                    "GPU Memory Read/Write Activity (%)": "7",
                    "Current Socket Graphics Package Power (W)": "401.0",
                    "Temperature (Sensor edge) (C)": "N/A",
                    "Temperature (Sensor junction) (C)": "58.0",
                    "Temperature (Sensor memory) (C)": "44.0",
                    "VRAM Total Memory (B)": str(196592 * 2**20),
                    "VRAM Total Used Memory (B)": str(2 * 2**30),
                    "Compute Partition": "SPX",
                    "Memory Partition": "NPS1",
                },
                "system": {"Driver version": "6.8.5"},
            },
            "rocm-static.json": {
                "card0": {
                    "PCI Bus": "0000:0C:00.0",
                    "Card Series": "AMD Instinct MI300X",
                    "Serial Number": "692451000",
                    "VBIOS version": "113-M3000100-102",
                }
            },
        },
    )
    proc = run_agent(
        "telemetry", "--count", "2", "--interval", "0.1", "--amdsmi-path", str(broken_amdsmi), env=base_env([bindir])
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert kinds(lines) == ["hello", "static", "sample", "sample"]
    hello = lines[0]
    assert hello["source"] == "rocm-smi"
    assert "amd-smi failed" in hello["note"] and hello["note"].endswith("using rocm-smi --json")
    (g0,) = lines[1]["gpus"]
    assert g0["bdf"] == "0000:0c:00.0" and g0["model"] == "AMD Instinct MI300X"
    assert g0["vram_total_mib"] == 196592 and g0["compute_partition"] == "SPX"
    (s0,) = lines[2]["gpus"]
    assert s0["util_pct"] == 55 and s0["umc_pct"] == 7 and s0["power_w"] == 401
    assert s0["temp_junction_c"] == 58 and s0["vram_used_mib"] == 2048
    assert s0["power_cap_w"] is None and s0["gfx_clock_mhz"] is None  # not asked for: null, not invented


# ------------------------------------------------------------ probe


def test_probe_prints_one_line_with_all_keys(broken_amdsmi):
    proc = run_agent("probe", "--amdsmi-path", str(broken_amdsmi), env=base_env())
    assert proc.returncode == 0
    (line,) = json_lines(proc.stdout)
    assert set(line) == {"kind", "hostname", "python", "rocm", "amdsmi", "vllm", "numa_balancing", "source", "uid"}
    assert line["uid"] == os.geteuid()
    assert line["kind"] == "probe"
    assert line["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert line["amdsmi"] is None and line["source"] is None


def test_probe_reads_rocm_version_from_rocm_path(tmp_path, broken_amdsmi):
    (tmp_path / "rocm" / ".info").mkdir(parents=True)
    (tmp_path / "rocm" / ".info" / "version").write_text("7.0.2-56\n")
    env = base_env()
    env["ROCM_PATH"] = str(tmp_path / "rocm")
    (line,) = json_lines(run_agent("probe", "--amdsmi-path", str(broken_amdsmi), env=env).stdout)
    assert line["rocm"] == "7.0.2-56"


# ------------------------------------------------------------ broken pipe


def test_broken_pipe_exits_quietly_with_status_0(tmp_path, broken_amdsmi):
    bindir = make_fake_cli(
        tmp_path,
        "amd-smi",
        {
            "metric.json": {"gpu_data": [amd_metric(0)]},
            "static.json": {"gpu_data": [amd_static(0, BDFS[0])]},
        },
    )
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), "telemetry", "--interval", "0.1", "--amdsmi-path", str(broken_amdsmi)],
        cwd=ROOT,
        env=base_env([bindir]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    first = proc.stdout.readline()
    assert json.loads(first)["kind"] == "hello"
    proc.stdout.close()  # the console went away
    rc = proc.wait(timeout=20)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert rc == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


# ------------------------------------------------------------ amdsmi (simulator)

SIM_SPEC = {"gpu": "MI300X", "count": 8, "compute_partition": "CPX", "memory_partition": "NPS1", "seed": 0}


class SimNode:
    """A simulated node: the fake amdsmi package in its own dir plus a state folder."""

    def __init__(self, tmp_path):
        self.module_dir = copy_amdsmi(tmp_path / "upload")  # as the console uploads it
        self.state_dir = tmp_path / "sim-state"

    def env(self, **spec):
        env = base_env()
        env["ROCM_CONSOLE_SIM_DIR"] = str(self.state_dir)
        env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps(dict(SIM_SPEC, **spec))
        return env

    def argv(self, *args):
        # health lines off unless a test asks for them: these tests count the other lines
        health = () if "--health-interval" in args else ("--health-interval", "0")
        return [sys.executable, str(AGENT), "telemetry", *args, *health, "--amdsmi-path", str(self.module_dir)]

    def run(self, *args, spec=None, python=sys.executable):
        argv = self.argv(*args)
        argv[0] = str(python)
        return subprocess.run(argv, cwd=ROOT, env=self.env(**(spec or {})), capture_output=True, text=True, timeout=60)

    def library(self, monkeypatch):
        """The simulator loaded in this process, pointed at the same state folder."""
        monkeypatch.setenv("ROCM_CONSOLE_SIM_DIR", str(self.state_dir))
        return load_amdsmi("amdsmi_sim_for_test", self.module_dir / "amdsmi")

    def edit_state(self, change):
        path = self.state_dir / "state.json"
        state = json.loads(path.read_text())
        change(state)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)


@pytest.fixture
def sim(tmp_path):
    assert (SIM / "__init__.py").exists(), "console/sim/amdsmi/ is missing"
    return SimNode(tmp_path)


def ok_lines(proc):
    assert proc.returncode == 0, proc.stderr
    return json_lines(proc.stdout)


def test_sim_spx_has_8_rows_and_a_simulated_amdsmi_hello(sim):
    lines = ok_lines(sim.run("--count", "2", "--interval", "0.1", spec={"compute_partition": "SPX"}))
    assert kinds(lines) == ["hello", "static", "sample", "sample"]
    hello = lines[0]
    assert hello["source"] == "amdsmi" and hello["simulated"] is True and hello["note"] is None
    assert hello["agent_version"] == "1" and hello["interval"] == 0.1 and isinstance(hello["pid"], int)
    assert set(hello) == {
        "kind",
        "agent_version",
        "source",
        "simulated",
        "note",
        "hostname",
        "interval",
        "pid",
        "control",
    }
    static = lines[1]["gpus"]
    assert [(g["index"], g["physical"], g["partition_id"]) for g in static] == [(i, i, 0) for i in range(8)]
    g0 = static[0]
    assert set(g0) == {
        "index",
        "physical",
        "partition_id",
        "bdf",
        "model",
        "serial",
        "vbios",
        "vram_total_mib",
        "compute_partition",
        "memory_partition",
        "memory_caps",
    }
    assert g0["model"] == "AMD Instinct MI300X" and g0["bdf"] == "0000:0c:00.0"
    assert g0["serial"] and g0["vbios"] and g0["vram_total_mib"] == 196592
    assert (g0["compute_partition"], g0["memory_partition"]) == ("SPX", "NPS1")
    assert g0["memory_caps"] == ["NPS1", "NPS4"]
    for sample in lines[2:]:
        assert len(sample["gpus"]) == 8 and isinstance(sample["ts"], float)
        for i, g in enumerate(sample["gpus"]):
            assert g["index"] == i
            assert set(g) == {
                "index",
                "util_pct",
                "umc_pct",
                "vram_used_mib",
                "vram_total_mib",
                "power_w",
                "power_cap_w",
                "temp_junction_c",
                "temp_mem_c",
                "gfx_clock_mhz",
                "mem_clock_mhz",
                "processes",
                "energy_j",
                "throttled",
            }
            assert g["power_cap_w"] == 750  # W, not µW
            assert g["energy_j"] > 0  # J: the gpu_metrics accumulator x 15.259 µJ
            assert 100 < g["power_w"] <= 750
            assert 30 < g["temp_junction_c"] < 100 and g["temp_mem_c"] is not None
            assert g["util_pct"] is not None and g["gfx_clock_mhz"] is not None and g["mem_clock_mhz"] == 1300
            assert g["vram_total_mib"] == 196592 and g["processes"] == []
    # throttled needs two readings of the residency counters: unknown on the first tick
    assert [s["gpus"][0]["throttled"] for s in lines[2:]] == [None, False]
    assert [s["seq"] for s in lines[2:]] == [0, 1]


def test_sim_cpx_has_64_rows_grouped_by_physical_gpu(sim):
    lines = ok_lines(sim.run("--count", "2", "--interval", "0.1"))
    assert kinds(lines) == ["hello", "static", "sample", "sample"]
    static = lines[1]["gpus"]
    assert len(static) == 64
    assert [(g["physical"], g["partition_id"]) for g in static] == [(i // 8, i % 8) for i in range(64)]
    assert static[9]["bdf"] == "0000:22:00.1"
    assert all(g["compute_partition"] == "CPX" and g["memory_partition"] == "NPS1" for g in static)
    assert all(g["vram_total_mib"] == 196592 // 8 for g in static)  # VRAM per partition
    assert static[1]["serial"] == static[0]["serial"] != static[8]["serial"]  # one device
    sample = lines[2]["gpus"]
    assert len(sample) == 64
    for g in sample:
        assert g["vram_total_mib"] == 24574 and g["vram_used_mib"] is not None
        if g["index"] % 8 == 0:  # primary partition carries the physical GPU's metrics
            assert g["power_w"] is not None and g["power_cap_w"] == 750
            assert g["temp_junction_c"] is not None and g["gfx_clock_mhz"] is not None
        else:  # secondaries report N/A: null, never the primary's values
            for key in (
                "power_w",
                "power_cap_w",
                "temp_junction_c",
                "temp_mem_c",
                "umc_pct",
                "gfx_clock_mhz",
                "mem_clock_mhz",
            ):
                assert g[key] is None, (g["index"], key)
            # ...except their own gfx load, read from the primary's xcp_stats
            assert 0 <= g["util_pct"] <= 100


def test_sim_processes_and_per_call_faults(sim, monkeypatch):
    lib = sim.library(monkeypatch)
    monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps(dict(SIM_SPEC, compute_partition="SPX")))
    lib.amdsmi_init()  # creates state.json
    lib.amdsmi_shut_down()
    sim.edit_state(lambda s: s["faults"].update({"amdsmi_get_gpu_metrics_info": 9}))  # RETRY on one call
    (sim.state_dir / "processes.json").write_text(
        json.dumps([{"pid": 4242, "name": "vllm serve", "gpu": 3, "vram_bytes": 3 * 2**30, "sticky": True}])
    )
    lines = ok_lines(sim.run("--count", "1", "--interval", "0.1"))
    gpus = lines[2]["gpus"]
    assert gpus[3]["processes"] == [{"pid": 4242, "name": "vllm serve", "vram_mib": 3072.0}]
    assert gpus[3]["vram_used_mib"] >= 3072 and gpus[2]["processes"] == []
    # one failing call makes only the fields it feeds null
    for key in ("util_pct", "umc_pct", "power_w", "temp_junction_c", "temp_mem_c", "gfx_clock_mhz"):
        assert all(g[key] is None for g in gpus), key
    assert all(g["power_cap_w"] == 750 and g["vram_total_mib"] == 196592 for g in gpus)


def test_sim_static_is_emitted_once_without_changes(sim):
    lines = ok_lines(sim.run("--count", "3", "--interval", "0.1"))
    assert kinds(lines) == ["hello", "static", "sample", "sample", "sample"]


def test_sim_partition_switch_mid_run_reemits_static(sim, monkeypatch):
    spec = {"compute_partition": "SPX", "root": True, "switch_seconds": 0}
    proc = subprocess.Popen(
        sim.argv("--count", "40", "--interval", "0.1"),
        cwd=ROOT,
        env=sim.env(**spec),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Lines with the time they arrived: "the next tick" is judged against when the switch
    # finished, not a line count that a loaded machine stretches.
    received: list[tuple[float, dict]] = []
    reader = threading.Thread(
        target=lambda: received.extend((time.monotonic(), json.loads(line)) for line in proc.stdout if line.strip()),
        daemon=True,
    )
    try:
        reader.start()
        assert wait_until(lambda: len(received) >= 3, timeout=30)
        assert kinds([o for _, o in received[:3]]) == ["hello", "static", "sample"]
        assert len(received[1][1]["gpus"]) == 8
        # Another process (the console's partition service) switches every GPU to CPX.
        lib = sim.library(monkeypatch)
        lib.amdsmi_init()
        for handle in lib.amdsmi_get_processor_handles():
            lib.amdsmi_set_gpu_compute_partition(handle, lib.AmdSmiComputePartitionType.CPX)
        lib.amdsmi_shut_down()
        switched = time.monotonic()
        proc.wait(timeout=60)
        reader.join(timeout=30)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = [o for _, o in received]
    # One more static per partition layout the agent saw: a tick that lands while the
    # switch is half done (a loaded machine) adds an intermediate one; the last is CPX.
    statics = [o for o in lines if o["kind"] == "static"]
    assert 2 <= len(statics) <= 1 + 8
    new = statics[-1]["gpus"]
    assert len(new) == 64 and all(g["compute_partition"] == "CPX" for g in new)
    assert [(g["physical"], g["partition_id"]) for g in new] == [(i // 8, i % 8) for i in range(64)]
    after = lines[lines.index(statics[-1]) + 1 :]
    assert after and all(o["kind"] == "sample" and len(o["gpus"]) == 64 for o in after)
    samples = [o for o in lines if o["kind"] == "sample"]
    assert len(samples) == 40
    # detected from gpu_metrics' partition count at the next tick, not after the run:
    # at most two samples arrive after the switch before the new static
    later = [o for t, o in received if t >= switched]
    assert later.index(statics[-1]) <= 2, [o["kind"] for o in later[:5]]


def test_sim_stdout_only_json_even_with_a_noisy_import(sim, tmp_path):
    # A noisy module that works: prints on import, then re-exports the simulator.
    noisy = tmp_path / "noisy"
    noisy.mkdir()
    shutil.copytree(SIM, noisy / "amdsmi_sim_impl")
    (noisy / "amdsmi.py").write_text(
        "print('garbage from a vendor module')\nfrom amdsmi_sim_impl import *\n"
        "from amdsmi_sim_impl import __simulated__\n"
    )
    argv = [sys.executable, str(AGENT), "telemetry", "--count", "1", "--interval", "0.1", "--health-interval", "0"]
    argv += ["--amdsmi-path", str(noisy)]
    proc = subprocess.run(argv, cwd=ROOT, env=sim.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert kinds(json_lines(proc.stdout)) == ["hello", "static", "sample"]
    assert "garbage from a vendor module" in proc.stderr


def test_sim_release_without_some_functions(sim, tmp_path):
    # An older amdsmi lacking calls: their fields are null, the rest still flows.
    old = tmp_path / "old"
    old.mkdir()
    shutil.copytree(SIM, old / "amdsmi_sim_impl")
    (old / "amdsmi.py").write_text(
        "from amdsmi_sim_impl import *\ndel amdsmi_get_gpu_kfd_info, amdsmi_get_gpu_process_list\n"
    )
    argv = [sys.executable, str(AGENT), "telemetry", "--count", "1", "--interval", "0.1", "--health-interval", "0"]
    argv += ["--amdsmi-path", str(old)]
    lines = ok_lines(subprocess.run(argv, cwd=ROOT, env=sim.env(), capture_output=True, text=True, timeout=60))
    assert lines[0]["simulated"] is False  # this wrapper does not re-export __simulated__
    static = lines[1]["gpus"]
    assert [g["partition_id"] for g in static[:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]  # from the BDF function
    gpus = lines[2]["gpus"]
    assert all(g["processes"] is None for g in gpus)
    assert gpus[0]["power_w"] is not None


def test_the_library_path_never_loads_the_cli_fallbacks(sim):
    # The console starts an agent per node and its start-up is budgeted: a node whose amdsmi
    # module works never reads the amd-smi / rocm-smi parsers (smi_cli.py) nor subprocess.
    argv = sim.argv("--count", "1")
    argv[1:1] = ["-X", "importtime"]
    proc = subprocess.run(argv, cwd=ROOT, env=sim.env(), capture_output=True, text=True, timeout=60)
    assert kinds(ok_lines(proc)) == ["hello", "static", "sample"]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    assert {"sampling", "amdsmi_sampler"} <= imported
    assert "smi_cli" not in imported and "subprocess" not in imported


def test_sim_probe(sim):
    argv = [sys.executable, str(AGENT), "probe", "--amdsmi-path", str(sim.module_dir)]
    proc = subprocess.run(argv, cwd=ROOT, env=sim.env(), capture_output=True, text=True, timeout=60)
    (line,) = ok_lines(proc)
    assert line["source"] == "amdsmi" and line["amdsmi"] == "7.0.2+sim"


def test_sim_amdsmi_init_failure_is_an_error_line_and_exit_3(sim):
    proc = sim.run("--count", "1", spec={"gpu": "MI999X"})
    assert proc.returncode == 3
    (line,) = json_lines(proc.stdout)
    assert line["kind"] == "error" and line["message"].startswith("amdsmi_init failed")


def test_sim_runs_on_python_38(sim):
    found = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    if not found:
        pytest.skip("no Python 3.8 here")
    lines = ok_lines(sim.run("--count", "2", "--interval", "0.1", python=found[0]))
    assert kinds(lines) == ["hello", "static", "sample", "sample"] and len(lines[2]["gpus"]) == 64


def test_sim_ticks_keep_their_schedule(sim):
    lines = ok_lines(sim.run("--count", "6", "--interval", "0.2", spec={"compute_partition": "SPX"}))
    ts = [o["ts"] for o in lines if o["kind"] == "sample"]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    # never a burst (missed ticks are skipped, not sent back to back); one tick made late by a
    # busy machine (CI: two pytest processes and a vLLM server) shortens the gap after it
    # (fresh-clone run: a 1.15 s stall, then the next tick 52 ms later, on its grid point)
    assert all(g > 0.02 for g in gaps), gaps
    # the ticks sit on the 0.2 s grid of the first one, one late tick aside: no drift accumulates
    offsets = [(t - ts[0]) / 0.2 for t in ts]
    assert sum(abs(o - round(o)) < 0.25 for o in offsets) >= len(offsets) - 1, offsets


# ------------------------------------------------- amdsmi path: cost and freshness


class CountingAmdsmi:
    """The simulator as the agent sees it, with every amdsmi_* call recorded by name;
    ``overrides`` replace single functions (a driver or release that differs)."""

    def __init__(self, lib, overrides=None):
        self._lib = lib
        self._overrides = overrides or {}
        self.calls = []

    def __getattr__(self, name):
        target = self._overrides.get(name) or getattr(self._lib, name)
        if not name.startswith("amdsmi_") or not callable(target):
            return target

        def counted(*args, **kwargs):
            self.calls.append(name)
            return target(*args, **kwargs)

        return counted


def in_process(sim, monkeypatch, overrides=None, **spec):
    """(agent module, AmdsmiSampler on a counting simulator, the counter, the simulator);
    ``overrides``: {amdsmi function name: make(simulator) -> replacement}."""
    monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps(dict(SIM_SPEC, **spec)))
    lib = sim.library(monkeypatch)
    counting = CountingAmdsmi(lib, dict((name, make(lib)) for name, make in (overrides or {}).items()))
    agent = load_agent_module()
    return agent, agent.AmdsmiSampler(counting), counting, lib


def tick(sampler, n):
    changed = sampler.refresh(n)
    return changed, sampler.sample()


STATIC_CALLS = {
    "amdsmi_get_gpu_asic_info",
    "amdsmi_get_gpu_board_info",
    "amdsmi_get_gpu_vbios_info",
    "amdsmi_get_gpu_kfd_info",
    "amdsmi_get_gpu_device_bdf",
    "amdsmi_get_gpu_memory_partition_config",
}


@pytest.mark.parametrize("mode,logical", [("SPX", 8), ("DPX", 16), ("QPX", 32), ("CPX", 64)])
def test_amdsmi_tick_costs_at_most_3_library_calls_per_physical_gpu(sim, monkeypatch, mode, logical):
    memory = "NPS4" if mode in ("QPX", "CPX") else "NPS1"
    _, sampler, counting, _ = in_process(sim, monkeypatch, compute_partition=mode, memory_partition=memory)
    assert len(sampler.static()) == logical
    per_tick = []
    for n in range(3 * 8 + 2):
        counting.calls.clear()
        changed, gpus = tick(sampler, n)
        assert changed is None and len(gpus) == logical
        per_tick.append(len(counting.calls))
        assert counting.calls.count("amdsmi_get_gpu_metrics_info") == 8  # one per physical GPU
        assert not STATIC_CALLS & set(counting.calls)  # static facts are not read again
    assert max(per_tick) <= 3 * 8, per_tick


def test_amdsmi_cpx_partition_load_is_its_own_not_the_gpu_average(sim, monkeypatch):
    # GPU 1's partitions 1-7 (logical 9-15) run work, its partition 0 (logical 8) is idle.
    _, sampler, _, _ = in_process(sim, monkeypatch, busy=list(range(9, 16)))
    _, gpus = tick(sampler, 0)
    assert all(g["util_pct"] >= 35 for g in gpus[9:16]), [g["util_pct"] for g in gpus[9:16]]
    # Before, partition 0 showed amdsmi_get_gpu_activity: the whole GPU's average (~35 %).
    assert gpus[8]["util_pct"] < 10
    assert all(g["util_pct"] < 10 for g in gpus[16:24])  # an idle GPU
    assert gpus[8]["power_w"] > gpus[16]["power_w"]  # the physical GPU's power, on its primary row


def test_amdsmi_cpx_new_process_and_its_vram_show_within_the_stated_staleness(sim, monkeypatch):
    _, sampler, _, _ = in_process(sim, monkeypatch)
    n = 0
    for n in range(5):
        _, gpus = tick(sampler, n)
    before = gpus[13]["vram_used_mib"]
    assert gpus[13]["processes"] == []
    (sim.state_dir / "processes.json").write_text(
        json.dumps([{"pid": 5151, "name": "vllm serve", "gpu": 13, "vram_bytes": 10 * 2**30, "sticky": True}])
    )
    seen_vram = seen_proc = None
    for k in range(1, 12):
        _, gpus = tick(sampler, n + k)
        if seen_vram is None and gpus[13]["vram_used_mib"] >= before + 10240:
            seen_vram = k
        if seen_proc is None and gpus[13]["processes"]:
            seen_proc = k
    # docs/hardware.md: VRAM at most 8 ticks old in CPX, processes at most 10
    assert seen_vram is not None and seen_vram <= 8, seen_vram
    assert seen_proc is not None and seen_proc <= 10, seen_proc
    assert gpus[13]["processes"] == [{"pid": 5151, "name": "vllm serve", "vram_mib": 10240.0}]


def test_amdsmi_spx_vram_of_65535_mib_is_a_reading_not_a_sentinel(sim, monkeypatch):
    # 0xFFFF is "unsupported" only in 16-bit fields; vram_used is a uint32 in MB.
    _, sampler, _, lib = in_process(sim, monkeypatch, compute_partition="SPX")
    baseline_mib = 283 + 8  # the simulator's driver reservation on an SPX GPU
    (sim.state_dir / "processes.json").write_text(
        json.dumps(
            [{"pid": 6161, "name": "big", "gpu": 2, "vram_bytes": (65535 - baseline_mib) * 2**20, "sticky": True}]
        )
    )
    _, gpus = tick(sampler, 0)
    assert gpus[2]["vram_used_mib"] == 65535


def switch_all(sim, monkeypatch, compute=None, memory=None):
    """Another process (the console's partition service) switches every GPU."""
    lib = sim.library(monkeypatch)
    lib.amdsmi_init()
    handles = lib.amdsmi_get_processor_handles()
    if memory:
        lib.amdsmi_set_gpu_memory_partition(handles[0], lib.AmdSmiMemoryPartitionType[memory])
        lib.amdsmi_gpu_driver_reload()
    if compute:
        for h in handles:
            if lib.amdsmi_get_gpu_kfd_info(h)["current_partition_id"] == 0:
                lib.amdsmi_set_gpu_compute_partition(h, lib.AmdSmiComputePartitionType[compute])
    lib.amdsmi_shut_down()


def test_amdsmi_compute_switch_is_seen_at_the_next_tick(sim, monkeypatch):
    _, sampler, _, _ = in_process(sim, monkeypatch, compute_partition="SPX", root=True, switch_seconds=0)
    tick(sampler, 0)
    switch_all(sim, monkeypatch, compute="CPX")
    changed, gpus = tick(sampler, 1)  # gpu_metrics' num_partition says 8 now
    assert changed is not None and len(changed) == 64 and all(r["compute_partition"] == "CPX" for r in changed)
    assert len(gpus) == 64 and all(g["util_pct"] is not None for g in gpus)


def test_amdsmi_memory_switch_is_seen_within_a_few_ticks(sim, monkeypatch):
    _, sampler, _, _ = in_process(sim, monkeypatch, root=True, switch_seconds=0)  # CPX, NPS1
    tick(sampler, 0)
    switch_all(sim, monkeypatch, memory="NPS4")  # the partition count stays 8: only the check lane sees it
    for n in range(1, 4):
        changed, _ = tick(sampler, n)
        if changed is not None:
            break
    assert changed is not None, "memory mode change not seen in 3 ticks"
    assert all(r["memory_partition"] == "NPS4" for r in changed)


def test_amdsmi_without_num_partition_a_compute_switch_is_still_seen(sim, monkeypatch):
    # gpu_metrics before 1.6 (older drivers): no partition count, no xcp_stats.
    def old_metrics(lib):
        def read(h):
            raw = lib.amdsmi_get_gpu_metrics_info(h)
            return dict((k, v) for k, v in raw.items() if k != "num_partition" and not k.startswith("xcp_stats"))

        return read

    _, sampler, counting, _ = in_process(
        sim,
        monkeypatch,
        {"amdsmi_get_gpu_metrics_info": old_metrics},
        compute_partition="SPX",
        root=True,
        switch_seconds=0,
    )
    _, gpus = tick(sampler, 0)
    assert all(g["util_pct"] is not None for g in gpus)  # SPX: average_gfx_activity
    switch_all(sim, monkeypatch, compute="CPX")
    for n in range(1, 3 * 8 + 1):
        counting.calls.clear()
        changed, gpus = tick(sampler, n)
        if changed is not None:
            break
        assert len(counting.calls) <= 3 * 8
    assert changed is not None and len(changed) == 64, "compute switch not seen in %d ticks" % n
    # without xcp_stats a partition's own load is unknown: null, not the GPU's average
    assert gpus[1]["util_pct"] is None and gpus[0]["util_pct"] is None


def test_amdsmi_a_device_count_that_never_matches_re_enumerates_once(sim, monkeypatch):
    # 8 x CPX = 64 DRM nodes; with the 64-node limit one partition can be missing (ROCm 6.4.0 notes).
    _, sampler, counting, _ = in_process(
        sim, monkeypatch, {"amdsmi_get_processor_handles": lambda lib: lambda: lib.amdsmi_get_processor_handles()[:63]}
    )
    assert len(sampler.static()) == 63
    inits = []
    for n in range(10):
        counting.calls.clear()
        tick(sampler, n)
        inits.append(counting.calls.count("amdsmi_init"))
    assert sum(inits) <= 1, inits  # one re-enumeration at most, then the driver's count is the baseline
    assert len(counting.calls) <= 3 * 8
