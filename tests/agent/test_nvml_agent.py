"""The node agent on NVIDIA nodes: NVML (pynvml) and the nvidia-smi fallback.

- The simulated NVML (console/sim/pynvml.py) as a whole node: the agent as a
  subprocess, and the sampler in-process with every NVML call counted.
- The real pynvml wrapper (nvidia-ml-py, installed by the test extra) over a tiny
  libnvidia-ml.so.1 built here that answers nvmlInit like a node whose driver does
  not match its library, or like a node with no GPU: the agent's line is NVML's
  own text from the real wrapper.
- The nvidia-smi fallback with a fake nvidia-smi on PATH printing what a real one
  printed on an H100 (tests/fixtures/hardware/nvidia-smi_*).
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
from pathlib import Path

import pytest

from tests.sim.simulators import copy_pynvml, load_pynvml

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
NVIDIA = ROOT / "console" / "agent" / "nvidia.py"
SIM = ROOT / "console" / "sim" / "pynvml.py"
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"
SPEC = {"gpu": "H100", "count": 8, "seed": 4, "busy": [0, 1], "mig": [7]}

pytestmark = pytest.mark.timeout(60)


def json_lines(stdout):
    out = []
    for line in stdout.splitlines():
        obj = json.loads(line)  # nothing but JSON objects may reach the console
        assert isinstance(obj, dict) and "kind" in obj, line
        out.append(obj)
    return out


def env_for(tmp_path, path_dirs=(), **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env["FAKE_SMI_LOG"] = str(tmp_path / "nvidia-smi-calls.log")
    env["PATH"] = os.pathsep.join([str(d) for d in path_dirs] + ["/nonexistent"])
    env.update(extra)
    return env


def run_agent(args, env, timeout=40):
    if args and args[0] == "telemetry" and "--health-interval" not in args:
        args = [*args, "--health-interval", "0"]  # these tests count lines and processes (health: test_health_agent.py)
    return subprocess.run(
        [sys.executable, str(AGENT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def simdir(tmp_path):
    """A folder holding the simulated pynvml and its statefiles.py (as the bundle ships them to an NVIDIA sim node)."""
    return copy_pynvml(tmp_path / "nvsim")


def sim_env(tmp_path, spec=None, **extra):
    return env_for(
        tmp_path,
        ROCM_CONSOLE_SIM_DIR=str(tmp_path / "state"),
        ROCM_CONSOLE_SIM_SPEC=json.dumps(spec or SPEC),
        **extra,
    )


def edit_state(tmp_path, change):
    path = tmp_path / "state" / "nvml-state.json"
    state = json.loads(path.read_text())
    change(state)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Counting:
    """The module, with every nvml* function call recorded by name."""

    def __init__(self, module):
        self._m = module
        self.calls: list[str] = []

    def __getattr__(self, name):
        value = getattr(self._m, name)
        if name.startswith("nvml") and callable(value):

            def call(*args, **kwargs):
                self.calls.append(name)
                return value(*args, **kwargs)

            return call
        return value


@pytest.fixture
def inproc(tmp_path, monkeypatch):
    """make(**spec) -> (agent module, nvidia module, NvmlSampler over a counting sim, counter, sim)."""

    def make(**spec):
        monkeypatch.setenv("ROCM_CONSOLE_SIM_DIR", str(tmp_path / "state"))
        monkeypatch.setenv("ROCM_CONSOLE_SIM_SPEC", json.dumps(dict(SPEC, **spec)))
        monkeypatch.delenv("ROCM_CONSOLE_SIM_TIME", raising=False)
        sim = load_pynvml("pynvml_sim_under_test")
        agent = load(AGENT, "node_agent_under_test")
        nvidia = load(NVIDIA, "nvidia_under_test")
        counting = Counting(sim)
        return agent, nvidia, nvidia.NvmlSampler(agent, counting), counting, sim

    return make


# ------------------------------------------------------------------ node side rules


@pytest.mark.parametrize("path", [NVIDIA, SIM], ids=["agent/nvidia.py", "sim/pynvml.py"])
def test_node_side_files_parse_as_python_38_and_import_no_console(path):
    src = path.read_text()
    ast.parse(src, feature_version=(3, 8))
    assert "from console" not in src and "import console" not in src


def test_agent_and_simulated_nvml_run_on_python_38_when_available(tmp_path, simdir):
    found = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    which = shutil.which("python3.8")
    py38 = found[0] if found else (which if which and "shims" not in which else None)
    if not py38:
        pytest.skip("no Python 3.8 here")
    proc = subprocess.run(
        [str(py38), str(AGENT), "telemetry", "--count", "2", "--interval", "0.1", "--health-interval", "0"]
        + ["--amdsmi-path", str(simdir)],
        env=sim_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert [o["kind"] for o in lines] == ["hello", "static", "sample", "sample"] and lines[0]["source"] == "nvml"


# ------------------------------------------------------------------ the simulated node


def test_sim_h100_node_rows_units_and_an_nvidia_hello(tmp_path, simdir):
    proc = run_agent(
        ["telemetry", "--count", "2", "--interval", "0.1", "--health-interval", "0", "--amdsmi-path", str(simdir)],
        sim_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    lines = json_lines(proc.stdout)
    assert [o["kind"] for o in lines] == ["hello", "static", "sample", "sample"]
    hello, static, sample = lines[0], lines[1]["gpus"], lines[3]["gpus"]
    assert hello["source"] == "nvml" and hello["vendor"] == "nvidia" and hello["simulated"] is True
    # 7 whole GPUs and GPU 7's four MIG instances as logical GPUs under physical 7
    assert len(static) == 11
    assert [(g["physical"], g["partition_id"]) for g in static[6:]] == [(6, 0), (7, 0), (7, 1), (7, 2), (7, 3)]
    assert static[0]["model"] == "NVIDIA H100 80GB HBM3" and static[0]["vram_total_mib"] == 81559
    assert static[0]["bdf"] == "00000000:18:00.0" and static[0]["compute_partition"] is None
    assert [(g["compute_partition"], g["memory_partition"]) for g in static[7:]] == [
        ("MIG", "3g.40gb"),
        ("MIG", "2g.20gb"),
        ("MIG", "1g.10gb"),
        ("MIG", "1g.10gb"),
    ]
    busy, idle = sample[0], sample[3]
    assert 55 <= busy["util_pct"] <= 100 and idle["util_pct"] == 0
    assert 70 < busy["power_w"] < busy["power_cap_w"] == 700  # mW -> W
    assert busy["vram_used_mib"] > 18 * 1024 and busy["processes"][0]["name"] == "python3 (sim workload)"
    assert idle["vram_used_mib"] == 480 and idle["processes"] == []
    assert busy["temp_mem_c"] > busy["temp_junction_c"] and busy["mem_clock_mhz"] == 2619
    mig0, mig1 = sample[7], sample[8]
    assert mig0["util_pct"] is None  # NVML has no per-instance activity: never invented
    assert mig0["power_w"] is not None and mig1["power_w"] is None  # the GPU's values once, on instance 0
    assert mig1["vram_total_mib"] == 19968


def test_sampler_costs_at_most_8_calls_per_gpu_and_never_rereads_static_facts(inproc):
    _, _, sampler, counting, _ = inproc()
    assert len(sampler.static()) == 11
    static_calls = {"nvmlDeviceGetName", "nvmlDeviceGetSerial", "nvmlDeviceGetPciInfo", "nvmlDeviceGetVbiosVersion"}
    per_tick = []
    for n in range(40):
        counting.calls.clear()
        assert sampler.refresh(n) is None
        assert len(sampler.sample()) == 11
        per_tick.append(len(counting.calls))
        assert not static_calls & set(counting.calls)
        assert counting.calls.count("nvmlDeviceGetPowerUsage") == 8  # every GPU, every tick
    assert max(per_tick) <= 8 * 8 + 1, per_tick  # microseconds each; the energy counter's read: nvml_energy.py


def test_a_new_process_shows_within_the_lane_period(tmp_path, inproc):
    _, _, sampler, _, _ = inproc(busy=[])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        entry = {"pid": child.pid, "name": "vllm", "gpu": 9, "vram_bytes": 5 * 2**30}
        (tmp_path / "state" / "processes.json").write_text(json.dumps([entry]))
        seen = None
        for n in range(11):  # 11 logical GPUs, 8 lane slots per tick
            sampler.refresh(n)
            gpus = sampler.sample()
            if gpus[9]["processes"]:
                seen = n
                break
        assert seen is not None and seen <= 2
        assert gpus[9]["processes"] == [{"pid": child.pid, "name": "vllm", "vram_mib": 5120.0}]
    finally:
        child.kill()
        child.wait()


def test_mig_layout_change_reemits_static(tmp_path, inproc):
    _, _, sampler, _, _ = inproc()

    def two_big(state):
        state["gpus"][7]["instances"] = [
            {"gi": 1, "ci": 0, "profile": "3g.40gb"},
            {"gi": 2, "ci": 0, "profile": "4g.40gb"},
        ]

    edit_state(tmp_path, two_big)
    changed = None
    for n in range(4 * 8 + 2):  # one slow check per tick, four per GPU
        changed = sampler.refresh(n)
        gpus = sampler.sample()
        if changed is not None:
            break
    assert changed is not None, "a new MIG layout was never noticed"
    assert [g["memory_partition"] for g in changed if g["physical"] == 7] == ["3g.40gb", "4g.40gb"]
    assert len(gpus) == 9


def test_mig_mode_as_the_gpu_reports_it_and_a_pending_change(tmp_path, inproc):
    _, _, sampler, _, _ = inproc()
    assert [g["mig_mode"] for g in sampler.static()] == ["off"] * 7 + ["on"] * 4
    edit_state(tmp_path, lambda s: s["gpus"][2].update(mig=[0, 1]))  # nvidia-smi -i 2 -mig 1, no reset yet
    changed = None
    for n in range(4 * 8 + 2):
        changed = sampler.refresh(n)
        sampler.sample()
        if changed is not None:
            break
    assert changed is not None and changed[2]["mig_mode"] == "off (on after a GPU reset)"
    assert changed[2]["compute_partition"] is None  # still a whole GPU until the reset


def test_mig_reconfiguring_for_long_is_one_node_reason_not_a_crash(tmp_path, simdir):
    """Instances vanish and handles stop answering while an admin runs `nvidia-smi mig -dci/-dgi`."""
    env = sim_env(tmp_path)
    proc = run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(simdir)], env)
    assert proc.returncode == 0, proc.stderr
    edit_state(tmp_path, lambda s: s["faults"].update({"nvmlDeviceGetMigDeviceHandleByIndex": 6}))  # NOT_FOUND
    edit_state(tmp_path, lambda s: s["faults"].update({"nvmlDeviceGetMaxMigDeviceCount": 29}))  # INVALID_STATE
    proc = run_agent(["telemetry", "--count", "3", "--amdsmi-path", str(simdir)], env)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    (line,) = json_lines(proc.stdout)
    assert line == {
        "kind": "error",
        "message": "NVML cannot read the MIG instances of GPU 7: Invalid state (NVMLError_InvalidState)",
    }


def test_mig_reconfigured_mid_run_retries_then_names_the_gpu(tmp_path, inproc):
    agent, _, sampler, _, _ = inproc()
    edit_state(tmp_path, lambda s: s["gpus"][7].update(instances=[]))  # destroyed: handles go stale
    edit_state(tmp_path, lambda s: s["faults"].update({"nvmlDeviceGetMaxMigDeviceCount": 29}))
    with pytest.raises(agent.AgentError) as err:
        for n in range(50):
            sampler.refresh(n)
            sampler.sample()
    assert str(err.value) == (
        "NVML cannot read the MIG instances of GPU 7: Invalid state (NVMLError_InvalidState)"
        " (5 ticks in a row; are MIG instances being reconfigured?)"
    )


def test_sim_no_gpu_is_one_node_reason(tmp_path, simdir):
    proc = run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(simdir)], sim_env(tmp_path, {"count": 0}))
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    (line,) = json_lines(proc.stdout)
    assert line["message"] == "NVML found no NVIDIA GPU on this node (nvmlDeviceGetCount() = 0)"


def test_sim_driver_library_mismatch_is_nvml_own_text(tmp_path, simdir):
    env = sim_env(tmp_path)
    run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(simdir)], env)
    edit_state(tmp_path, lambda s: s.update(init_error=18))
    proc = run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(simdir)], env)
    assert proc.returncode == 3
    (line,) = json_lines(proc.stdout)
    assert line["message"] == (
        "NVML init failed: RM has detected an NVML/RM version mismatch. (NVMLError_LibRmVersionMismatch)"
    )


def test_a_failing_call_is_a_null_field_and_not_supported_is_not_asked_again(tmp_path, inproc):
    _, _, sampler, counting, _ = inproc()
    edit_state(tmp_path, lambda s: s["faults"].update({"nvmlDeviceGetFieldValues": 3}))  # NOT_SUPPORTED
    for n in range(3):
        counting.calls.clear()
        sampler.refresh(n)
        gpus = sampler.sample()
        assert gpus[0]["temp_mem_c"] is None and gpus[0]["temp_junction_c"] is not None
    assert "nvmlDeviceGetFieldValues" not in counting.calls


# ------------------------------------------------------------------ the real wrapper, a fake driver

FAKE_LIB = r"""
#include <stdlib.h>
static int mode(void) { const char *e = getenv("FAKE_NVML"); return e ? atoi(e) : 0; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return mode() == 18 ? 18 : 0; }
int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *count) { *count = 0; return 0; }
const char *nvmlErrorString(int r) { (void)r; return "fake libnvidia-ml"; }
"""


@pytest.fixture
def fake_driver(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake libnvidia-ml.so.1")
    pytest.importorskip("pynvml")  # the real wrapper (nvidia-ml-py, in the test extra)
    d = tmp_path / "lib"
    d.mkdir()
    (d / "fake.c").write_text(FAKE_LIB)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libnvidia-ml.so.1"), str(d / "fake.c")], check=True)
    return d


def test_real_pynvml_driver_library_mismatch(tmp_path, fake_driver):
    env = env_for(tmp_path, LD_LIBRARY_PATH=str(fake_driver), FAKE_NVML="18")
    proc = run_agent(["telemetry", "--count", "1"], env)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    (line,) = json_lines(proc.stdout)
    assert line == {
        "kind": "error",
        "message": "NVML init failed: RM has detected an NVML/RM version mismatch. (NVMLError_LibRmVersionMismatch)",
    }


def test_real_pynvml_no_gpu(tmp_path, fake_driver):
    proc = run_agent(["telemetry", "--count", "1"], env_for(tmp_path, LD_LIBRARY_PATH=str(fake_driver)))
    assert proc.returncode == 3
    (line,) = json_lines(proc.stdout)
    assert line["message"] == "NVML found no NVIDIA GPU on this node (nvmlDeviceGetCount() = 0)"


def test_real_pynvml_without_a_driver_falls_through_and_names_every_source(tmp_path):
    pytest.importorskip("pynvml")
    proc = run_agent(["telemetry", "--count", "1"], env_for(tmp_path, LD_LIBRARY_PATH=str(tmp_path)))
    assert proc.returncode == 3
    (line,) = json_lines(proc.stdout)
    message = line["message"]
    assert message.startswith("no telemetry source: amdsmi module unavailable")
    assert "pynvml present but no NVIDIA driver (libnvidia-ml.so.1 not found); nvidia-smi not found" in message


# ------------------------------------------------------------------ nvidia-smi fallback

FAKE_SMI = """\
#!{python}
import os, sys
data = {data!r}
args = sys.argv[1:]
with open(os.environ["FAKE_SMI_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
mode = os.environ.get("FAKE_SMI_MODE")
if mode == "mismatch":  # what nvidia-smi prints when the kernel module and the library differ
    sys.stdout.write("Failed to initialize NVML: Driver/library version mismatch\\nNVML library version: 580.159\\n")
    sys.exit(18)
if args == ["-L"]:
    name = "nvidia-smi_L_h100-2026-11-25.txt"
elif args and args[0].startswith("--query-gpu="):
    name = "nvidia-smi_query-gpu_h100_idle-2026-11-25.csv"
elif args and args[0].startswith("--query-compute-apps="):
    name = "nvidia-smi_query-compute-apps_h100_loaded-2026-11-25.csv"
else:
    sys.stderr.write("unknown arguments\\n")
    sys.exit(2)
sys.stdout.write(open(os.path.join(data, name)).read())
"""


@pytest.fixture
def fake_smi(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text(FAKE_SMI.format(python=sys.executable, data=str(HARDWARE)))
    exe.chmod(0o755)
    hide = tmp_path / "nopynvml"
    hide.mkdir()
    (hide / "pynvml.py").write_text("raise ImportError('no nvidia-ml-py on this node')\n")
    return bindir, hide


def test_nvidia_smi_fallback_reads_real_h100_output(tmp_path, fake_smi):
    bindir, hide = fake_smi
    proc = run_agent(
        ["telemetry", "--count", "2", "--interval", "0.1", "--amdsmi-path", str(hide)], env_for(tmp_path, [bindir])
    )
    assert proc.returncode == 0, proc.stderr
    hello, static, first, _ = json_lines(proc.stdout)
    assert hello["source"] == "nvidia-smi" and hello["vendor"] == "nvidia"
    assert "pynvml unavailable (ImportError: no nvidia-ml-py on this node)" in hello["note"]
    assert static["gpus"] == [
        {
            "index": 0,
            "physical": 0,
            "partition_id": 0,
            "bdf": "00000000:00:06.0",
            "model": "NVIDIA H100 80GB HBM3",
            "serial": "1752824026994",
            "vbios": "96.00.DA.00.0C",
            "vram_total_mib": 81559,
            "compute_partition": None,
            "memory_partition": None,
            "memory_caps": [],
            "uuid": "GPU-85602056-8123-609a-9b5f-ca747c2931de",  # from nvidia-smi -L
            "mig_mode": "off",  # mig.mode.current, mig.mode.pending: Disabled, Disabled
        }
    ]
    (gpu,) = first["gpus"]
    # "0, NVIDIA H100 80GB HBM3, ..., 81559, 0, 3, 0, 600.39, 700.00, 58, 58, 1965, 2619, Disabled, Disabled"
    assert gpu == {
        "index": 0,
        "util_pct": 3,
        "umc_pct": 0,
        "vram_used_mib": 0,
        "vram_total_mib": 81559,
        "power_w": 600.39,
        "power_cap_w": 700.0,
        "temp_junction_c": 58,
        "temp_mem_c": 58,
        "gfx_clock_mhz": 1965,
        "mem_clock_mhz": 2619,
        "processes": [{"pid": 499, "name": "python3", "vram_mib": 1130}],
        "energy_j": None,  # nvidia-smi's CSV has no energy counter (power.draw integrated is not one)
        "throttled": None,
    }


def test_nvidia_smi_cost_is_one_process_per_tick(tmp_path, fake_smi):
    bindir, hide = fake_smi
    proc = run_agent(
        ["telemetry", "--count", "6", "--interval", "0.1", "--amdsmi-path", str(hide)], env_for(tmp_path, [bindir])
    )
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "nvidia-smi-calls.log").read_text().splitlines()
    queries = [c for c in calls if c.startswith("--query-gpu=")]
    apps = [c for c in calls if c.startswith("--query-compute-apps=")]
    assert len(queries) == 6 and len(apps) == 2  # ticks 0 and 5
    assert queries[0] == "--query-gpu=" + ",".join(load(NVIDIA, "nv").SMI_FIELDS) + " --format=csv,noheader,nounits"


def test_nvidia_smi_driver_mismatch_is_its_own_line(tmp_path, fake_smi):
    bindir, hide = fake_smi
    env = env_for(tmp_path, [bindir], FAKE_SMI_MODE="mismatch")
    proc = run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(hide)], env)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    (line,) = json_lines(proc.stdout)
    assert line["message"].endswith(
        "nvidia-smi failed (nvidia-smi: Failed to initialize NVML: Driver/library version mismatch)"
    )


def test_nvidia_smi_mig_rows_from_the_listing(tmp_path):
    agent = load(AGENT, "node_agent_mig")
    nvidia = load(NVIDIA, "nvidia_mig")
    listing = textwrap.dedent("""\
        GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)
          MIG 3g.40gb     Device  0: (UUID: MIG-a)
          MIG 1g.10gb     Device  1: (UUID: MIG-b)
        GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)
        """)
    line = "{}, NVIDIA H100 80GB HBM3, 1, 00000000:{}:00.0, 96, 81559, 10, [N/A], [N/A], 80.5, 700.00, 30, 32, 345, 2619, {}, {}"

    class Fake(nvidia.SmiSampler):
        def _run(self, args):
            if args == ["-L"]:
                return listing
            if args[0].startswith("--query-gpu"):
                return line.format(0, "18", "Enabled", "Enabled") + "\n" + line.format(1, "2A", "Disabled", "Disabled")
            return ""

    sampler = Fake(agent, "nvidia-smi")
    rows = sampler.static()
    assert [(r["physical"], r["partition_id"], r["memory_partition"], r["uuid"]) for r in rows] == [
        (0, 0, "3g.40gb", "MIG-a"),
        (0, 1, "1g.10gb", "MIG-b"),
        (1, 0, None, "GPU-2"),
    ]
    sampler.refresh(0)
    gpus = sampler.sample()
    assert gpus[0]["util_pct"] is None and gpus[0]["power_w"] == 80.5 and gpus[1]["power_w"] is None
    assert gpus[2]["util_pct"] is None and gpus[2]["vram_used_mib"] == 10  # "[N/A]" is null, never 0


def test_doctor_on_an_nvidia_host_without_rocm_fails_nothing_amd_only(tmp_path, simdir):
    """An NVIDIA host has no ROCm, amdgpu, /dev/kfd or render nodes: the doctor says they
    are not used there instead of failing the node."""
    sysroot = tmp_path / "root"
    (sysroot / "proc" / "sys" / "kernel").mkdir(parents=True)
    (sysroot / "proc" / "sys" / "kernel" / "numa_balancing").write_text("0\n")
    proc = run_agent(["doctor", "--amdsmi-path", str(simdir), "--sysroot", str(sysroot)], sim_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (record,) = json_lines(proc.stdout)
    checks = {c["id"]: c for c in record["checks"]}
    assert checks["source.nvidia"]["level"] == "ok" and record["facts"]["source"] == "nvml"
    assert not [c["id"] for c in record["checks"] if c["level"] == "fail"]
    for cid in ("rocm", "driver", "kfd", "render", "source.amdsmi"):
        assert checks[cid]["detail"].startswith("not used on an NVIDIA node ("), checks[cid]


def test_probe_names_the_source_the_agent_streams_from(tmp_path, simdir, fake_smi):
    """On a node with NVML and nvidia-smi both, the agent streams from NVML: probe says nvml
    (it said nvidia-smi on a real H200); without pynvml it says nvidia-smi, as the agent uses."""
    bindir, hide = fake_smi
    env = sim_env(tmp_path, path_dirs=[bindir])
    probe = json_lines(run_agent(["probe", "--amdsmi-path", str(simdir)], env).stdout)[-1]
    hello = json_lines(run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(simdir)], env).stdout)[0]
    assert probe["source"] == hello["source"] == "nvml"
    probe = json_lines(run_agent(["probe", "--amdsmi-path", str(hide)], env).stdout)[-1]
    hello = json_lines(run_agent(["telemetry", "--count", "1", "--amdsmi-path", str(hide)], env).stdout)[0]
    assert probe["source"] == hello["source"] == "nvidia-smi"
