"""The node doctor (console/agent/doctor.py): what a person debugging a node reads.

Telemetry sources are checked by running the real agent (`node_agent.py doctor`)
as on a node: the real `amdsmi` package without libamd_smi.so, a module that
fails like it, the simulator, fake `amd-smi` printing recorded output. Host
rules run in-process against a fake sysroot, environment, user and commands.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.agent import doctor
from tests.agent.test_node_agent import (
    AGENT,
    BDFS,
    amd_metric,
    amd_static,
    base_env,
    make_fake_cli,
)

ROOT = Path(__file__).resolve().parents[2]
DOCTOR = ROOT / "console" / "agent" / "doctor.py"
SIM_DIR = ROOT / "console" / "sim"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broken_amdsmi(tmp_path):
    """A module that fails like the real one without libamd_smi.so: prints, then KeyError."""
    d = tmp_path / "broken"
    d.mkdir()
    (d / "amdsmi.py").write_text(
        'print("/opt/rocm/lib/libamd_smi.so: cannot open shared object file: No such file or directory")\n'
        'print("Unable to find libamd_smi.so library try installing amd-smi-lib from your package manager")\n'
        'raise KeyError("libamd_smi.so")\n'
    )
    return d


def run_doctor(*args, env=None, cwd=ROOT):
    proc = subprocess.run(
        [sys.executable, str(AGENT), "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["kind"] for line in lines] == ["doctor"], proc.stdout  # one line, nothing else on stdout
    return lines[0]


def by_id(record):
    return {c["id"]: c for c in record["checks"]}


def make_sysroot(root: Path, *, numa="0", amdgpu="6.12.12", rocm="7.0.2-56", kfd=True, render=2) -> Path:
    files = {
        "proc/sys/kernel/numa_balancing": numa,
        "sys/module/amdgpu/version": amdgpu,
        "opt/rocm/.info/version": rocm,
    }
    for rel, text in files.items():
        if text is not None:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text + "\n")
    if amdgpu is None:
        (root / "sys/module/amdgpu").mkdir(parents=True, exist_ok=True)  # loaded, no version: in-box
    (root / "dev/dri").mkdir(parents=True, exist_ok=True)
    if kfd:
        (root / "dev/kfd").write_text("")
    for i in range(render):
        (root / f"dev/dri/renderD{128 + i}").write_text("")
    return root


def host(sysroot, *, environ=None, euid=1000, run=None, which=None, denied=()):
    """A Host where nothing on this machine leaks in: only what the test gives."""
    return doctor.Host(
        sysroot=str(sysroot),
        environ=environ or {"PATH": "/nonexistent"},
        euid=euid,
        user="alice",
        which=which or (lambda name: None),
        run=run or (lambda argv, timeout: (None, "", "not run")),
        access=lambda path: os.path.basename(path) not in denied,
    )


# ------------------------------------------------------------------ static


def test_doctor_parses_as_python_38_and_is_standalone():
    src = DOCTOR.read_text()
    ast.parse(src, feature_version=(3, 8))
    assert "from console" not in src and "import console" not in src


def test_doctor_runs_on_python_38_when_available(tmp_path):
    found = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    if not found:
        pytest.skip("no Python 3.8 here")
    proc = subprocess.run(
        [
            str(found[0]),
            str(AGENT),
            "doctor",
            "--amdsmi-path",
            str(SIM_DIR),
            "--sysroot",
            str(make_sysroot(tmp_path / "root")),
        ],
        env=sim_env(tmp_path, {"gpu": "MI300X", "count": 2}),
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    checks = by_id(json.loads(proc.stdout))
    assert checks["python"]["detail"].startswith("Python 3.8.")
    assert checks["gpus"]["detail"] == "2 x AMD Instinct MI300X, SPX/NPS1, 2 logical GPUs"


# ------------------------------------------------------------------ telemetry sources


def test_real_amdsmi_without_its_library_is_reported_verbatim(tmp_path):
    # The real PyPI package, as on a node where libamd_smi.so is missing.
    if doctor_dist("amdsmi") is None:
        pytest.skip("the amdsmi package is not installed for this Python")
    record = run_doctor("--sysroot", str(make_sysroot(tmp_path)), env=base_env())
    checks = by_id(record)
    amdsmi = checks["source.amdsmi"]
    assert amdsmi["level"] == "fail"
    assert "cannot import amdsmi: KeyError: 'libamd_smi.so'" in amdsmi["detail"]
    # ... with what the library itself printed while failing
    assert "Unable to find libamd_smi.so library try installing amd-smi-lib" in amdsmi["detail"]
    assert "amd-smi-lib" in amdsmi["fix"]
    assert checks["source.amd-smi"]["level"] == "fail" and "not found on PATH" in checks["source.amd-smi"]["detail"]
    assert checks["source.rocm-smi"]["level"] == "fail"
    assert checks["telemetry"]["level"] == "fail"
    assert record["facts"]["amdsmi_error"] == "KeyError: 'libamd_smi.so'"
    assert record["facts"]["amdsmi_package"] == doctor_dist("amdsmi")
    assert "gpus" not in checks  # nothing to list without a source


def doctor_dist(name):
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


def test_missing_module_says_how_to_install_it(tmp_path):
    empty = tmp_path / "no-amdsmi"
    empty.mkdir()
    env = base_env()
    env["PYTHONNOUSERSITE"] = "1"
    record = subprocess.run(
        [sys.executable, "-S", str(AGENT), "doctor", "--sysroot", str(make_sysroot(tmp_path / "root"))],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    # -S: no site-packages, so no amdsmi package at all
    amdsmi = by_id(json.loads(record.stdout))["source.amdsmi"]
    assert amdsmi["detail"] == "cannot import amdsmi: ModuleNotFoundError: No module named 'amdsmi'"
    assert "-m pip install /opt/rocm/share/amd_smi" in amdsmi["fix"]


def test_fallback_to_amd_smi_names_why_amdsmi_did_not_load(tmp_path, broken_amdsmi):
    bindir = make_fake_cli(
        tmp_path,
        "amd-smi",
        {
            "metric.json": {"gpu_data": [amd_metric(0), amd_metric(1)]},
            "static.json": {
                "gpu_data": [amd_static(0, BDFS[0], new_layout=False), amd_static(1, BDFS[1], new_layout=False)]
            },
            "version.json": "AMDSMI Tool: 26.0.2+39589fda | AMDSMI Library version: 26.0.2 | ROCm version: 7.0.2 "
            "| amdgpu version: 6.14.14 | amd_hsmp version: N/A\n",
        },
    )
    record = run_doctor(
        "--amdsmi-path", str(broken_amdsmi), "--sysroot", str(make_sysroot(tmp_path / "root")), env=base_env([bindir])
    )
    checks = by_id(record)
    # amdsmi failed but a fallback works: a warning, with the verbatim reason and its fix
    assert checks["source.amdsmi"]["level"] == "warn"
    assert "KeyError: 'libamd_smi.so'" in checks["source.amdsmi"]["detail"]
    assert "cannot open shared object file" in checks["source.amdsmi"]["detail"]
    assert checks["source.amd-smi"]["level"] == "ok"
    assert "amd-smi metric --json" in checks["source.amd-smi"]["detail"]
    assert checks["source.rocm-smi"]["detail"].startswith("not tried, amd-smi CLI works")
    assert "telemetry" not in checks
    assert checks["gpus"]["detail"] == "2 x AMD Instinct MI300X, SPX/NPS1, 2 logical GPUs"
    assert checks["sample"]["level"] == "ok"
    assert checks["amd-smi"]["level"] == "ok" and "AMDSMI Tool: 26.0.2+39589fda" in checks["amd-smi"]["detail"]
    facts = record["facts"]
    assert facts["source"] == "amd-smi" and facts["amd_smi"] == "26.0.2+39589fda"
    assert [g["model"] for g in facts["gpus"]] == ["AMD Instinct MI300X"] * 2


def test_amd_smi_that_fails_is_a_failed_source_with_its_reason(tmp_path, broken_amdsmi):
    bindir = make_fake_cli(tmp_path, "amd-smi", {})  # every call: "invalid choice", exit 2
    record = run_doctor("--amdsmi-path", str(broken_amdsmi), env=base_env([bindir]))
    amd = by_id(record)["source.amd-smi"]
    assert amd["level"] == "fail" and amd["detail"].startswith("amd-smi metric --json failed: ")
    assert "invalid choice" in amd["detail"]
    assert by_id(record)["telemetry"]["level"] == "fail"


def sim_env(tmp_path, spec):
    env = base_env()
    env["ROCM_CONSOLE_SIM_DIR"] = str(tmp_path / "simstate")
    env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps(spec)
    return env


def test_simulated_node_lists_models_and_partition_modes(tmp_path):
    env = sim_env(tmp_path, {"gpu": "MI300X", "count": 8, "compute_partition": "CPX"})
    record = run_doctor(
        "--amdsmi-path",
        str(SIM_DIR),
        "--sysroot",
        str(make_sysroot(tmp_path / "root")),
        "--vllm",
        f"{sys.executable} {SIM_DIR / 'vllm'}",
        env=env,
    )
    checks = by_id(record)
    assert checks["source.amdsmi"]["level"] == "ok" and "(simulated)" in checks["source.amdsmi"]["detail"]
    assert checks["gpus"]["detail"] == "8 x AMD Instinct MI300X, CPX/NPS1, 64 logical GPUs"
    assert checks["sample"]["detail"] == "64 of 64 GPUs report utilisation or VRAM"
    assert checks["vllm"]["level"] == "ok" and checks["vllm"]["detail"].startswith("vLLM 0.32.0+sim (")
    facts = record["facts"]
    assert facts["simulated"] is True and facts["vllm"] == "0.32.0+sim"
    assert facts["gpus"][0] == {
        "physical": 0,
        "model": "AMD Instinct MI300X",
        "compute_partition": "CPX",
        "memory_partition": "NPS1",
        "logical_gpus": 8,
    }


def test_amdsmi_that_imports_but_cannot_initialise_is_final(tmp_path):
    # The simulator without its state folder fails amdsmi_init like a node without the driver.
    bindir = make_fake_cli(tmp_path, "amd-smi", {"metric.json": {"gpu_data": [amd_metric(0)]}})
    record = run_doctor("--amdsmi-path", str(SIM_DIR), env=base_env([bindir]))
    checks = by_id(record)
    assert checks["source.amdsmi"]["level"] == "fail"
    assert "imports, but amdsmi_init failed" in checks["source.amdsmi"]["detail"]
    # as in telemetry: no fallback to the CLIs (they use the same library)
    assert checks["source.amd-smi"]["level"] == "ok"
    assert checks["source.amd-smi"]["detail"].startswith("not tried, the agent does not fall back")
    assert checks["telemetry"]["level"] == "fail"


def test_gpus_in_mixed_modes_are_grouped_by_mode():
    rows = [
        {"physical": p, "model": "AMD Instinct MI300X", "compute_partition": c, "memory_partition": "NPS1"}
        for p, c in [(0, "CPX")] * 8 + [(1, "CPX")] * 8 + [(2, "SPX"), (3, "SPX"), (4, "CPX")] * 1
    ]
    rows[-1:] = [dict(rows[-1]) for _ in range(8)]

    class Fake:
        source = "amdsmi"

        def static(self):
            return rows

        def refresh(self, tick):
            return None

        def sample(self):
            return [{"util_pct": 1.0, "vram_used_mib": 1.0}] * len(rows)

    checks, gpus = doctor.check_gpus(Fake())
    assert checks[0]["detail"] == ("5 x AMD Instinct MI300X, GPU 0-1,4 CPX/NPS1, GPU 2-3 SPX/NPS1, 26 logical GPUs")
    assert [g["logical_gpus"] for g in gpus] == [8, 8, 1, 1, 8]


# ------------------------------------------------------------------ versions


def test_versions_from_the_node(tmp_path):
    root = make_sysroot(tmp_path)
    vllm = tmp_path / "bin" / "vllm"
    vllm.parent.mkdir()
    vllm.write_text(
        "#!/bin/sh\necho 'INFO 05-01 12:00:00 [__init__.py:244] Automatically detected platform rocm.'\n"
        "echo 0.9.2.dev364+gb432b7a28.rocm700\n"
    )
    vllm.chmod(0o755)
    h = doctor.Host(sysroot=str(root), environ={"PATH": str(vllm.parent)}, euid=0)
    facts = {}
    checks = {c["id"]: c for c in doctor.check_versions(NoAgent(), h, ["vllm"], facts)}
    assert checks["rocm"]["detail"] == "ROCm 7.0.2-56 (/opt/rocm/.info/version)"
    assert checks["driver"]["detail"] == "amdgpu 6.12.12 loaded (/sys/module/amdgpu/version)"
    assert checks["vllm"]["level"] == "ok" and checks["vllm"]["detail"].startswith(
        "vLLM 0.9.2.dev364+gb432b7a28.rocm700"
    )
    assert facts["vllm"] == "0.9.2.dev364+gb432b7a28.rocm700" and facts["amdgpu"] == "6.12.12"


class NoAgent:
    """The agent functions check_versions uses, with no package installed."""

    @staticmethod
    def dist_version(name):
        return None


def test_missing_versions_say_what_to_do(tmp_path):
    root = make_sysroot(tmp_path, rocm=None, amdgpu=None)
    runs = []

    def run(argv, timeout):
        runs.append(argv)
        return (0, "6.12.12\n", "") if argv[0] == "modinfo" else (1, "", "Traceback ...\nImportError: libamdhip64.so")

    h = host(root, run=run, which=lambda name: "/usr/sbin/modinfo" if name == "modinfo" else "/usr/bin/" + name)
    checks = {c["id"]: c for c in doctor.check_versions(NoAgent(), h, ["vllm"], {})}
    assert checks["rocm"]["level"] == "warn" and "ROCM_PATH" in checks["rocm"]["fix"]
    assert checks["driver"]["level"] == "warn" and "in-box driver" in checks["driver"]["detail"]
    assert "amdgpu-dkms 6.12.12 installed" in checks["driver"]["detail"]
    assert checks["vllm"]["level"] == "warn"
    assert checks["vllm"]["detail"] == "`vllm --version` failed: ImportError: libamdhip64.so"
    assert ["modinfo", "-F", "version", "amdgpu"] in runs

    gone = make_sysroot(tmp_path / "gone", amdgpu=None)
    (gone / "sys/module/amdgpu").rmdir()
    driver = doctor._driver_check(host(gone), {})
    assert driver["level"] == "fail" and "not loaded" in driver["detail"] and "modprobe amdgpu" in driver["fix"]


# ------------------------------------------------------------------ host settings


@pytest.mark.parametrize("value,level", [("0", "ok"), ("1", "warn"), (None, "warn")])
def test_numa_balancing(tmp_path, value, level):
    facts = {}
    result = doctor.check_numa(host(make_sysroot(tmp_path, numa=value)), facts)
    assert result["level"] == level and facts["numa_balancing"] == value
    if value == "1":
        assert "kernel.numa_balancing = 1" in result["detail"]
        assert "sysctl -w kernel.numa_balancing=0" in result["fix"]


def test_device_access(tmp_path):
    root = make_sysroot(tmp_path, render=3)
    facts = {}
    kfd, render = doctor.check_devices(host(root), facts)
    assert (kfd["level"], render["level"]) == ("ok", "ok")
    assert render["detail"].startswith("3 render nodes, read-write for alice")

    kfd, render = doctor.check_devices(host(root, denied=("kfd", "renderD129")), facts)
    assert kfd["level"] == "fail" and "alice cannot open /dev/kfd read-write" in kfd["detail"]
    assert "usermod -aG render,video alice" in kfd["fix"]
    assert render["level"] == "fail" and "1 of 3 render nodes (renderD129" in render["detail"]
    assert facts["render_nodes"]["denied"] == ["renderD129"]

    bare = make_sysroot(tmp_path / "bare", kfd=False, render=0)
    kfd, render = doctor.check_devices(host(bare), {})
    assert kfd["level"] == render["level"] == "fail" and "does not exist" in kfd["detail"]


def sudo_run(code, err=""):
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        return code, "", err

    return run, calls


def test_root_for_partition_switches(tmp_path):
    root = make_sysroot(tmp_path)
    assert doctor.check_root(host(root, euid=0), False, {})["level"] == "ok"

    which = {"sudo": "/usr/bin/sudo"}.get
    run, calls = sudo_run(0)
    ok = doctor.check_root(host(root, run=run, which=which), True, {})
    assert ok["level"] == "ok" and calls == [["sudo", "-n", "true"]]
    unused = doctor.check_root(host(root, run=run, which=which), False, {})
    assert unused["level"] == "warn" and "set sudo = true" in unused["fix"]

    run, _ = sudo_run(1, "sudo: a password is required\n")
    refused = doctor.check_root(host(root, run=run, which=which), True, {})
    assert refused["level"] == "fail" and "`sudo -n` refused: sudo: a password is required" in refused["detail"]
    assert "NOPASSWD" in refused["fix"]
    assert doctor.check_root(host(root, run=run, which=which), False, {})["level"] == "warn"

    facts = {}
    nosudo = doctor.check_root(host(root), True, facts)
    assert nosudo["level"] == "fail" and "sudo is not installed" in nosudo["detail"] and facts["sudo"] is False


def test_environment_against_the_guides(tmp_path):
    mi300 = [{"model": "AMD Instinct MI300X"}] * 8
    environ = {
        "PATH": "/x",
        "HIP_FORCE_DEV_KERNARG": "1",
        "VLLM_ROCM_USE_AITER": "0",
        "HIP_VISIBLE_DEVICES": "0,1",
        "VLLM_API_KEY": "sk-secret",
        "HF_TOKEN": "hf_secret",
        "VLLM_USE_TRITON_FLASH_ATTN": "0",
    }
    facts = {}
    checks = {c["id"]: c for c in doctor.check_env(host(tmp_path, environ=environ), mi300, facts)}
    assert checks["env.HIP_FORCE_DEV_KERNARG"]["level"] == "ok"
    assert checks["env.TORCH_BLAS_PREFER_HIPBLASLT"]["level"] == "warn"
    assert "not set" in checks["env.TORCH_BLAS_PREFER_HIPBLASLT"]["detail"]
    assert checks["env.TORCH_BLAS_PREFER_HIPBLASLT"]["fix"].startswith("set TORCH_BLAS_PREFER_HIPBLASLT=1")
    assert checks["env.VLLM_ROCM_USE_AITER"]["detail"].startswith("VLLM_ROCM_USE_AITER=0, recommended 1")
    assert checks["env.NCCL_MIN_NCHANNELS"]["level"] == "warn"  # several MI300X: RCCL channels matter
    assert checks["env.HIP_VISIBLE_DEVICES"]["level"] == "warn"
    # facts keep the GPU-related environment, secrets redacted, unrelated names left out
    assert facts["env"]["VLLM_API_KEY"] == "<redacted>" and "HF_TOKEN" not in facts["env"]
    assert facts["env"]["VLLM_USE_TRITON_FLASH_ATTN"] == "0"
    assert "sk-secret" not in json.dumps(checks) + json.dumps(facts)

    one_mi355 = {c["id"] for c in doctor.check_env(host(tmp_path), [{"model": "AMD Instinct MI355X"}], {})}
    assert "env.NCCL_MIN_NCHANNELS" not in one_mi355


# ------------------------------------------------------------------ whole record


def test_sim_host_files_give_a_healthy_node(tmp_path):
    # The files simulated nodes get (console/sim/host.py) pass every host check.
    from console.sim.host import FILES

    for rel, data in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    facts = {}
    checks = [
        doctor.check_numa(host(tmp_path), facts),
        *doctor.check_devices(host(tmp_path), facts),
        doctor._driver_check(host(tmp_path), facts),
    ]
    assert [c["level"] for c in checks] == ["ok"] * 4
    assert doctor.rocm_version(host(tmp_path))[0] == "7.0.2-56"


def test_usage_error_is_an_error_line():
    proc = subprocess.run(
        [sys.executable, str(AGENT), "doctor", "--bogus"], capture_output=True, check=False, text=True, timeout=30
    )
    assert proc.returncode == 2
    [line] = [json.loads(x) for x in proc.stdout.splitlines()]
    assert line["kind"] == "error" and "--bogus" in line["message"]


def test_simulated_facts_are_named_and_a_real_node_gets_no_such_line(tmp_path):
    # simulate.root = false: the simulated amdsmi refuses partition switches, whoever runs it
    env = sim_env(tmp_path, {"gpu": "MI300X", "count": 2, "root": False})
    sysroot = str(make_sysroot(tmp_path / "root"))
    record = run_doctor("--amdsmi-path", str(SIM_DIR), "--sysroot", sysroot, env=env)
    checks = by_id(record)
    assert record["checks"][0]["id"] == "simulated"
    assert checks["simulated"]["detail"].startswith("amdsmi: simulated (console/sim/amdsmi); ")
    assert "root: simulated (simulate.root = false in the profile)" in checks["simulated"]["detail"]
    assert checks["root"]["level"] == "warn" and checks["root"]["detail"].startswith("simulated non-root")
    assert checks["rocm"]["detail"].endswith("(simulated)")
    assert record["facts"]["simulated_parts"][0] == "amdsmi: simulated (console/sim/amdsmi)"

    # the same files and CLIs without a simulator's spec: a real node's lines, none marked simulated
    bindir = make_fake_cli(tmp_path, "amd-smi", {"metric.json": {"gpu_data": [amd_metric(0)]}})
    record = run_doctor("--amdsmi-path", str(tmp_path / "none"), "--sysroot", sysroot, env=base_env([bindir]))
    assert "simulated" not in by_id(record) and "simulated_parts" not in record["facts"]
    assert not [c for c in record["checks"] if "(simulated)" in c["detail"]]
