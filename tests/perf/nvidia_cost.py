#!/usr/bin/env python3
"""Per-tick cost of the NVIDIA sampler (console/agent/nvidia.py): NVML calls and CPU.

Prints one JSON object; asserts nothing (the budget is printed beside the figures).

- "sim": NvmlSampler over the simulated NVML (console/sim/pynvml.py), 8 x H100 with
  GPU 7 in MIG mode (11 logical GPUs), every nvml* call counted.
- "real_nvml": the same over the real pynvml when this machine has an NVIDIA driver
  (else "skipped" says why).
- "nvidia_smi": the fallback (one nvidia-smi process per tick, its CPU counted as the
  agent's children) when nvidia-smi is on PATH.

Budget: at most 7 NVML calls per physical GPU per tick, plus one slow-lane check.

``--device-run OUT`` is the procedure behind tests/fixtures/hardware/h100-*-2026-11-25
and docs/nvidia.md's figures, for a machine with a real GPU, torch and nvidia-ml-py:
GPU list and versions, the cost idle, the agent's telemetry for 62 s (idle 20 s, then
a torch bf16 matmul loop on GPU 0 started and stopped by this script, by PID) into
OUT/capture.jsonl, the cost under load, the nvidia-smi fallback's lines under load
(OUT/capture-smi.jsonl) and the raw nvidia-smi outputs it reads; OUT/figures.txt.
Run it from a folder holding the agent's modules (node_agent.py, nvidia.py, sampling.py, ...) or the repo root.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] if (HERE.parents[1] / "console").is_dir() else HERE
AGENT_DIR = ROOT / "console" / "agent" if (ROOT / "console").is_dir() else HERE
SIM = ROOT / "console" / "sim" / "pynvml.py"
CALLS_PER_GPU = 8  # U2: the clock event reasons per tick; the costly counters are off the tick

LOAD = """\
import sys, time
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + float(sys.argv[1])  # bounded: stops by itself
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print("load: %d matmuls" % n, flush=True)
"""


def load_agent():
    """(node_agent, nvidia) modules; nvidia.py is importable as the agent imports it."""
    sys.path.insert(0, str(AGENT_DIR))
    spec = importlib.util.spec_from_file_location("node_agent", AGENT_DIR / "node_agent.py")
    agent = importlib.util.module_from_spec(spec)
    sys.modules["node_agent"] = agent
    spec.loader.exec_module(agent)
    import nvidia  # noqa: PLC0415

    return agent, nvidia


class Counting:
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


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def nvml_cost(agent, nvidia, module, ticks):
    counting = Counting(module)
    t0 = time.process_time()
    sampler = nvidia.NvmlSampler(agent, counting)
    init_cpu = time.process_time() - t0
    init_calls = len(counting.calls)
    calls, cpu = [], []
    for n in range(ticks):
        counting.calls = []
        t0 = time.process_time()
        sampler.refresh(n)
        sampler.sample()
        cpu.append(time.process_time() - t0)
        calls.append(len(counting.calls))
    last = dict(collections.Counter(counting.calls))
    physical = len(sampler.gpus)
    logical = len(sampler.rows)
    sampler.close()
    return {
        "physical_gpus": physical,
        "logical_gpus": logical,
        "ticks": ticks,
        "init_calls": init_calls,
        "init_cpu_ms": round(1e3 * init_cpu, 2),
        "calls_per_tick": {"min": min(calls), "max": max(calls), "mean": round(sum(calls) / ticks, 2)},
        "calls_per_physical_gpu_max": round(max(calls) / physical, 2),
        "cpu_ms_per_tick": {
            "mean": round(1e3 * sum(cpu) / ticks, 3),
            "p50": round(1e3 * pct(cpu, 0.5), 3),
            "p99": round(1e3 * pct(cpu, 0.99), 3),
        },
        "calls_last_tick": last,
    }


def smi_cost(agent, nvidia, exe, ticks):
    real_run, spawned = subprocess.run, [0]

    def counted(*args, **kwargs):
        spawned[0] += 1
        return real_run(*args, **kwargs)

    nvidia.subprocess.run = counted
    try:
        sampler = nvidia.SmiSampler(agent, exe)
        spawned[0] = 0
        r0, t0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.process_time(), time.perf_counter()
        for n in range(1, ticks + 1):
            sampler.refresh(n)
            sampler.sample()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        own, wall = time.process_time() - t0, time.perf_counter() - w0
    finally:
        nvidia.subprocess.run = real_run
    child = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "ticks": ticks,
        "processes_per_tick": round(spawned[0] / ticks, 2),
        "agent_cpu_ms_per_tick": round(1e3 * own / ticks, 2),
        "nvidia_smi_cpu_ms_per_tick": round(1e3 * child / ticks, 1),
        "wall_ms_per_tick": round(1e3 * wall / ticks, 1),
    }


def sim_module(folder):
    os.environ["ROCM_CONSOLE_SIM_DIR"] = str(folder)
    os.environ["ROCM_CONSOLE_SIM_SPEC"] = json.dumps({"gpu": "H100", "count": 8, "seed": 4, "busy": [0, 1], "mig": [7]})
    spec = importlib.util.spec_from_file_location("pynvml_sim", SIM)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SIM.parent))  # its `import statefiles` finds the file beside it
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SIM.parent))
    return mod


def real_pynvml():
    """(module, None) when NVML initialises here, else (None, why)."""
    try:
        import pynvml  # noqa: PLC0415
    except ImportError as exc:
        return None, f"pynvml not installed ({exc})"
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:
        return None, f"NVML does not initialise here: {exc} ({type(exc).__name__})"
    return pynvml, None


def figures(args) -> dict:
    agent, nvidia = load_agent()
    ticks = 30 if args.quick else args.ticks
    load0 = os.getloadavg()
    result: dict = {
        "script": "nvidia_cost",
        "quick": args.quick,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        result["sim"] = nvml_cost(agent, nvidia, sim_module(tmp), ticks)
    module, why = real_pynvml()
    result["real_nvml"] = nvml_cost(agent, nvidia, module, ticks) if module else {"skipped": why}
    exe = shutil.which("nvidia-smi")
    result["nvidia_smi"] = (
        smi_cost(agent, nvidia, exe, 5 if args.quick else 10) if exe else {"skipped": "no nvidia-smi"}
    )
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    budgets = {}
    for name in ("sim", "real_nvml"):
        case = result[name]
        if "calls_per_tick" in case:
            limit = CALLS_PER_GPU * case["physical_gpus"] + 1
            budgets[f"{name}_calls_per_tick"] = {
                "figure": case["calls_per_tick"]["max"],
                "budget": f"<= {limit} ({CALLS_PER_GPU} per physical GPU + 1)",
                "met": case["calls_per_tick"]["max"] <= limit,
            }
    result["budgets"] = budgets
    result["budgets_met"] = all(b["met"] for b in budgets.values())
    return result


# ------------------------------------------------------------------ device run


def device_run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fig = open(out / "figures.txt", "w")

    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        fig.write(line + "\n")
        fig.flush()

    def sh(argv, name=None):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"failed: {exc!r}"
        if name:
            (out / name).write_text(proc.stdout)
        return proc.stdout + (f"\n[stderr] {proc.stderr}" if proc.stderr.strip() else "") + f"\n[rc {proc.returncode}]"

    agent, nvidia = load_agent()
    say("== nvidia-smi -L")
    say(sh(["nvidia-smi", "-L"], "nvidia-smi_L.txt"))
    say(sh(["nvidia-smi", "--query-gpu=index,name,driver_version,mig.mode.current,mig.mode.pending", "--format=csv"]))
    module, why = real_pynvml()
    if module is None:
        say("no NVML:", why)
        return
    module.nvmlInit()
    say("NVML driver", module.nvmlSystemGetDriverVersion(), "NVML", module.nvmlSystemGetNVMLVersion())
    say("nvmlDeviceGetMigMode", module.nvmlDeviceGetMigMode(module.nvmlDeviceGetHandleByIndex(0)))
    module.nvmlShutdown()
    ticks = 200
    say("== idle", json.dumps(nvml_cost(agent, nvidia, module, ticks)))
    exe = shutil.which("nvidia-smi")
    if exe:
        say("== idle nvidia-smi", json.dumps(smi_cost(agent, nvidia, exe, 10)))
    agent_py = str(AGENT_DIR / "node_agent.py")
    with open(out / "capture.jsonl", "w") as cap, open(out / "agent-stderr.txt", "w") as err:
        telemetry = subprocess.Popen(
            [sys.executable, agent_py, "telemetry", "--interval", "1", "--count", "62"], stdout=cap, stderr=err
        )
        time.sleep(20)
        (out / "load.py").write_text(LOAD)
        load = subprocess.Popen([sys.executable, str(out / "load.py"), "150"])
        say("load pid", load.pid)
        try:
            telemetry.wait(timeout=90)
        except subprocess.TimeoutExpired:
            telemetry.kill()
            telemetry.wait()
    try:
        say("== loaded", json.dumps(nvml_cost(agent, nvidia, module, ticks)))
        if exe:
            say("== loaded nvidia-smi", json.dumps(smi_cost(agent, nvidia, exe, 10)))
            hide = out / "nopynvml"
            hide.mkdir(exist_ok=True)
            (hide / "pynvml.py").write_text("raise ImportError('pynvml hidden for the nvidia-smi fallback run')\n")
            with open(out / "capture-smi.jsonl", "w") as f:
                subprocess.run(
                    [
                        sys.executable,
                        agent_py,
                        "telemetry",
                        "--interval",
                        "1",
                        "--count",
                        "6",
                        "--amdsmi-path",
                        str(hide),
                    ],
                    stdout=f,
                    timeout=120,
                )
            query = "--query-gpu=" + ",".join(nvidia.SMI_FIELDS)
            sh(["nvidia-smi", query, "--format=csv,noheader,nounits"], "smi-query-gpu-loaded.csv")
            apps = "--query-compute-apps=" + ",".join(nvidia.SMI_APP_FIELDS)
            sh(["nvidia-smi", apps, "--format=csv,noheader,nounits"], "smi-query-apps-loaded.csv")
    finally:
        if load.poll() is None:
            os.kill(load.pid, signal.SIGTERM)  # the load this script started, by its PID
            try:
                load.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(load.pid, signal.SIGKILL)
                load.wait()
        say("load stopped", load.returncode)
        fig.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--device-run", metavar="OUT", type=Path, help="the capture procedure on a real GPU")
    args = parser.parse_args()
    if args.device_run:
        device_run(args.device_run)
        return 0
    print(json.dumps(figures(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
