#!/usr/bin/env python3
"""Capture NVIDIA health and energy on a real GPU: idle, a power-capped bf16 load, after.

The procedure behind tests/fixtures/hardware/h100-nvml-health-*.json (INDEX.toml
says how each was taken) and docs/nvidia.md's "Health and energy" figures.  Needs a
machine with an NVIDIA driver, pynvml (nvidia-ml-py) and, for the load, torch.

1. provenance (driver, NVML, CUDA, pynvml, torch, GPU name, UUID, VBIOS, date, command);
2. the health reading at idle (console/agent/nvidia_health.py), the calls that failed
   and why, and the cost of a reading (calls, CPU) over ``--cost-reads`` readings;
3. 1 Hz run samples (``HealthReader.run_sample``): ``--idle`` s idle, then a torch
   bf16 matmul loop that this script starts (and ends, by its PID) for ``--load`` s,
   then ``--after`` s; each sample also carries NVML's older violation call for the
   power policy (a cross-check of the residency unit);
4. the health reading after; ``nvidia-smi -q`` (performance, ECC, row remapper, power,
   clocks) idle and under load as text, the matmul count and window of the load.

Everything goes into one JSON file, OUT/<name>.json.  It imports the agent module by
path: from ``--agent-dir`` (default: console/agent of this repository, or the
folder of this script when nvidia_health.py lies beside it).

    python3 scripts/capture-nvml-health.py --out OUT [--idle 15] [--load 80] [--after 10]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_AGENT_DIR = HERE if (HERE / "nvidia_health.py").is_file() else HERE.parent / "console" / "agent"
MATMUL_FLOP = 2 * 8192**3  # one 8192 x 8192 x 8192 product

# The load: bounded by its own clock; prints one JSON line when warm and one at the end.
LOAD = """\
import json, sys, time
import torch
seconds = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(10):
    c = a @ b
torch.cuda.synchronize()
start = time.time()
print(json.dumps({"event": "warm", "t": start, "torch": torch.__version__}), flush=True)
end = start + seconds
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(json.dumps({"event": "done", "t_start": start, "t_end": time.time(), "matmuls": n}), flush=True)
"""


class Timed:
    """pynvml with every nvml* function's CPU time summed per name (the cost figures' breakdown)."""

    def __init__(self, module):
        self._m = module
        self._cpu: dict[str, list[float]] = {}

    def __getattr__(self, name):
        value = getattr(self._m, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def timed(*args):
            c0 = time.process_time()
            try:
                return value(*args)
            finally:
                self._cpu.setdefault(name, []).append((time.process_time() - c0) * 1000)

        return timed

    def summary(self) -> dict:
        return {
            name: {"calls": len(ms), "cpu_ms_total": round(sum(ms), 3), "cpu_ms_mean": round(sum(ms) / len(ms), 4)}
            for name, ms in sorted(self._cpu.items())
        }


def load_health(agent_dir: Path):
    spec = importlib.util.spec_from_file_location("nvidia_health", agent_dir / "nvidia_health.py")
    assert spec and spec.loader, agent_dir
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def guarded(fn, *args):
    """(value, None) or (None, 'error text') of one NVML call, for the provenance and cross-checks."""
    if fn is None:
        return None, "not in this pynvml"
    try:
        return fn(*args), None
    except Exception as exc:
        return None, f"{exc} ({type(exc).__name__})"


def smi(args: list[str]) -> str:
    try:
        proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed: {exc!r}"
    return proc.stdout + (f"\n[stderr] {proc.stderr}" if proc.stderr.strip() else "") + f"\n[rc {proc.returncode}]"


def provenance(pynvml, handle, argv: list[str]) -> dict:
    out: dict = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": os.environ.get("CAPTURE_COMMAND") or shlex.join([sys.executable, *argv]),
        "argv": argv,
        "python": sys.version.split()[0],
        "kernel": platform.release(),
        "machine": platform.machine(),
    }
    for key, fn, args in (
        ("driver", "nvmlSystemGetDriverVersion", ()),
        ("nvml", "nvmlSystemGetNVMLVersion", ()),
        ("cuda_driver", "nvmlSystemGetCudaDriverVersion", ()),
        ("gpu_name", "nvmlDeviceGetName", (handle,)),
        ("uuid", "nvmlDeviceGetUUID", (handle,)),
        ("serial", "nvmlDeviceGetSerial", (handle,)),
        ("vbios", "nvmlDeviceGetVbiosVersion", (handle,)),
        ("power_limit_mw", "nvmlDeviceGetEnforcedPowerLimit", (handle,)),
        ("power_limit_constraints_mw", "nvmlDeviceGetPowerManagementLimitConstraints", (handle,)),
        ("power_default_limit_mw", "nvmlDeviceGetPowerManagementDefaultLimit", (handle,)),
        ("mig_mode", "nvmlDeviceGetMigMode", (handle,)),
        ("ecc_mode", "nvmlDeviceGetEccMode", (handle,)),
        ("supported_event_types", "nvmlDeviceGetSupportedEventTypes", (handle,)),
        ("gpu_max_pcie_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration", (handle,)),
    ):
        value, err = guarded(getattr(pynvml, fn, None), *args)
        out[key] = text(value) if err is None else None
        if err:
            out[key + "_error"] = err
    pci, err = guarded(getattr(pynvml, "nvmlDeviceGetPciInfo", None), handle)
    out["bus_id"] = text(pci.busId) if pci is not None else None
    for dist in ("nvidia-ml-py", "torch"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def raw_fields(pynvml, handle) -> dict:
    """Field values NVML also exposes for what the reader calls directly (a cross-check), by field id."""
    ids = {
        "ecc_sbe_vol_total": 3,
        "ecc_dbe_vol_total": 4,
        "ecc_sbe_agg_total": 5,
        "ecc_dbe_agg_total": 6,
        "retired_sbe": 29,
        "retired_dbe": 30,
        "retired_pending": 31,
        "nvlink_link_count": 91,
        "pcie_replay_counter": 94,
        "remapped_cor": 142,
        "remapped_unc": 143,
        "remapped_pending": 144,
        "remapped_failure": 145,
        "power_average_mw": 185,
        "power_instant_mw": 186,
        "energy_mj": 191,
    }
    values, err = guarded(getattr(pynvml, "nvmlDeviceGetFieldValues", None), handle, list(ids.values()))
    if err:
        return {"error": err}
    out = {}
    for (name, fid), fv in zip(ids.items(), values):
        out[name] = {"id": fid, "nvmlReturn": fv.nvmlReturn, "valueType": fv.valueType}
        if fv.nvmlReturn == 0:
            attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
            out[name]["value"] = getattr(fv.value, attr.get(fv.valueType, "ullVal"))
    return out


def violation(pynvml, handle, policy) -> dict | None:
    value, err = guarded(getattr(pynvml, "nvmlDeviceGetViolationStatus", None), handle, policy)
    if err:
        return {"error": err}
    return {"referenceTime": value.referenceTime, "violationTime": value.violationTime}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--name", default="nvml-health-capture")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--idle", type=float, default=15.0, help="seconds of idle samples")
    parser.add_argument("--load", type=float, default=80.0, help="seconds of matmul load")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of samples after the load")
    parser.add_argument("--cost-reads", type=int, default=20)
    parser.add_argument("--agent-dir", type=Path, default=DEFAULT_AGENT_DIR)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    health = load_health(args.agent_dir)
    import pynvml  # noqa: PLC0415

    reader = health.HealthReader(pynvml)
    gpu = reader.gpus[args.gpu]
    handle = gpu["handle"]
    cap: dict = {"schema": "rocm-console nvml health capture 1", "provenance": provenance(pynvml, handle, sys.argv)}
    prov = cap["provenance"]
    print("capture:", json.dumps({k: prov.get(k) for k in ("gpu_name", "uuid", "driver", "nvml", "nvidia-ml-py")}))

    cap["health_idle"] = reader.read_all()
    cap["raw_fields_idle"] = raw_fields(pynvml, handle)
    cap["smi_idle"] = smi(["-q", "-i", str(args.gpu), "-d", "PERFORMANCE,ECC,ROW_REMAPPER,PAGE_RETIREMENT,POWER,CLOCK"])

    # Cost of a health reading, back to back (no load yet).
    cpu, wall, calls = [], [], []
    for _ in range(args.cost_reads):
        c0, w0 = time.process_time(), time.perf_counter()
        records = reader.read_all()
        cpu.append((time.process_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
        calls.append(records[args.gpu]["calls"])
    cap["health_cost"] = {"reads": args.cost_reads, "cpu_ms": cpu, "wall_ms": wall, "calls": calls}
    # Which calls the CPU goes to: the same readings through a module whose functions are timed.
    timed = Timed(pynvml)
    reader.m = timed
    for _ in range(args.cost_reads):
        reader.read_all()
    reader.m = pynvml
    cap["health_cost"]["cpu_ms_by_call"] = timed.summary()
    print("health read: calls", sorted(set(calls)), "cpu ms mean %.3f" % (sum(cpu) / max(1, len(cpu))))

    samples: list[dict] = []
    power_policy = getattr(pynvml, "NVML_PERF_POLICY_POWER", 0)

    def sample(phase: str) -> None:
        s = reader.run_sample(gpu)
        s["phase"] = phase
        s["mono"] = round(time.monotonic(), 4)
        s["violation_power"] = violation(pynvml, handle, power_policy)
        samples.append(s)

    def sample_for(phase: str, seconds: float, until=None) -> None:
        """1 Hz samples on a fixed schedule for ``seconds`` (or until ``until()`` is true), bounded."""
        start = time.monotonic()
        n = 0
        while n < seconds + 60:
            sample(phase)
            n += 1
            if (until is not None and until()) or (until is None and n >= seconds):
                break
            time.sleep(max(0.0, start + n - time.monotonic()))

    sample_for("idle", args.idle)
    load_py = args.out / "load.py"
    load_py.write_text(LOAD)
    load_log = args.out / "load.log"
    with open(load_log, "w") as log:
        load = subprocess.Popen([sys.executable, str(load_py), str(args.load)], stdout=log, stderr=subprocess.STDOUT)
    cap["load_pid"] = load.pid
    smi_loaded = {"taken": False}

    def load_over() -> bool:
        if not smi_loaded["taken"] and samples and samples[-1]["phase"] == "load" and len(samples) > args.idle + 30:
            cap["smi_loaded"] = smi(
                ["-q", "-i", str(args.gpu), "-d", "PERFORMANCE,ECC,ROW_REMAPPER,PAGE_RETIREMENT,POWER,CLOCK"]
            )
            smi_loaded["taken"] = True
        return load.poll() is not None

    try:
        sample_for("load", args.load + 60, until=load_over)
    finally:
        if load.poll() is None:
            os.kill(load.pid, signal.SIGTERM)  # the load this script started, by its PID
            try:
                load.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(load.pid, signal.SIGKILL)
                load.wait()
    cap["load_rc"] = load.returncode
    cap["load_log"] = load_log.read_text()
    for line in cap["load_log"].splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            cap["load_" + event.pop("event")] = event
    sample_for("after", args.after)
    cap["health_after"] = reader.read_all()
    cap["raw_fields_after"] = raw_fields(pynvml, handle)
    cap["samples"] = samples
    cap["reader_errors"] = reader.errors
    reader.close()
    out = args.out / (args.name + ".json")
    out.write_text(json.dumps(cap, indent=1, sort_keys=True) + "\n")
    load_py.unlink()
    load_log.unlink()

    loaded = [s for s in samples if s["phase"] == "load" and s["power_w"] is not None]
    print("samples", len(samples), "load samples", len(loaded), "load rc", load.returncode)
    if loaded:
        print("load power W min/max", min(s["power_w"] for s in loaded), max(s["power_w"] for s in loaded))
        print("reasons under load", sorted({n for s in loaded for n in (s["clock_event_names"] or [])}))
    idle = [s for s in samples if s["phase"] == "idle"]
    if idle:
        print("idle power W", [s["power_w"] for s in idle][:5], "reasons", idle[0]["clock_event_names"])
    print("reader errors", json.dumps(reader.errors))
    print("wrote", out, out.stat().st_size, "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
