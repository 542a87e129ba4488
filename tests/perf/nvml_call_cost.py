#!/usr/bin/env python3
"""What each NVML call of the agent's tick costs on this machine's GPU, and the whole tick.

Prints one JSON object; asserts nothing (the budget is printed beside the figures).

- ``library``: the real pynvml (nvidia-ml-py) where a driver answers, else the simulated
  NVML (console/sim/pynvml.py, one H200), and the string says which: the simulator's
  calls cost what Python does, not what the driver does (they are no figure for a GPU).
- ``calls``: CPU (process time, all threads) and wall time per call, median of repeated
  calls on GPU 0: every call a tick makes, each throttle residency field and the energy
  counter on their own, and the field-values call the agent made before (U2).
- ``tick``: the agent's own loop (node_agent.run_ticks, its JSON lines written to
  /dev/null) for ``--ticks`` ticks of ``--interval`` s, health off and at
  ``--health-interval``: CPU per GPU per tick, the energy counter reads made.
- ``before`` (``--before DIR``): the same loop of the agent modules in DIR (an earlier
  version, e.g. ``git show HEAD~:console/agent/...``), in a process of its own.
- ``energy`` (``--load S``, real GPU with torch): a bf16 matmul load of S seconds runs
  inside the health-off loop; the agent's energy figure over the load (a run) and over
  every 10 / 20 / 30 s window is compared with the counter, read beside each tick
  outside the CPU measured.

Budget: <= 1 ms of CPU per GPU per tick at 1 Hz (health off, and health at 10 s).
Run from the repository root: ``python3 tests/perf/nvml_call_cost.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.perf.nvidia_cost import LOAD, real_pynvml  # noqa: E402 - the torch load and the NVML check
from tests.sim.simulators import load_pynvml  # noqa: E402

AGENT_DIR = ROOT / "console" / "agent"
BUDGET_MS = 1.0
OLD_FIELDS = (82, 191, 74, 75, 77, 79, 269, 270, 271)  # the tick's field-values call before U2
RESIDENCY_IDS = (74, 75, 76, 77, 78, 79, 269, 270, 271)


def cpu_s():
    return time.process_time()  # the process's CPU, every thread (CLOCK_PROCESS_CPUTIME_ID)


def sim_module(folder):
    """The simulated NVML (one H200) as the agent finds it on a simulated node."""
    os.environ["ROCM_CONSOLE_SIM_DIR"] = str(folder)
    os.environ["ROCM_CONSOLE_SIM_SPEC"] = json.dumps({"gpu": "H200", "count": 1, "seed": 4, "busy": [0]})
    return load_pynvml("pynvml_sim_call_cost")  # a name of its own: the real pynvml may be imported


def library():
    """(module, description)."""
    module, why = real_pynvml()
    if module is not None:
        module.nvmlInit()
        try:
            handle = module.nvmlDeviceGetHandleByIndex(0)
            name = module.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            driver = module.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
            count = module.nvmlDeviceGetCount()
        finally:
            module.nvmlShutdown()
        version = getattr(module, "__version__", None) or _dist_version("nvidia-ml-py")
        return module, f"real NVML: {count} x {name}, driver {driver}, nvidia-ml-py {version}"
    folder = tempfile.mkdtemp(prefix="nvml-call-cost-")
    return sim_module(folder), f"simulated NVML (console/sim/pynvml.py, 1 x H200; no driver here: {why})"


def _dist_version(name):
    try:
        from importlib import metadata  # noqa: PLC0415

        return metadata.version(name)
    except Exception:
        return None


def timed(fn, reps):
    """(cpu us, wall us) medians of ``reps`` calls; None when the call fails."""
    cpus, walls = [], []
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            fn()
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return {"cpu_us": round(1e6 * statistics.median(cpus), 1), "wall_us": round(1e6 * statistics.median(walls), 1)}


def call_costs(m, reps):
    m.nvmlInit()
    try:
        h = m.nvmlDeviceGetHandleByIndex(0)
        calls = {
            "nvmlDeviceGetUtilizationRates": lambda: m.nvmlDeviceGetUtilizationRates(h),
            "nvmlDeviceGetPowerUsage": lambda: m.nvmlDeviceGetPowerUsage(h),
            "nvmlDeviceGetTemperature": lambda: m.nvmlDeviceGetTemperature(h, m.NVML_TEMPERATURE_GPU),
            "nvmlDeviceGetClockInfo(SM)": lambda: m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_SM),
            "nvmlDeviceGetClockInfo(MEM)": lambda: m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_MEM),
            "nvmlDeviceGetFieldValues([82]) (tick)": lambda: m.nvmlDeviceGetFieldValues(h, [82]),
            "nvmlDeviceGetCurrentClocksEventReasons": lambda: m.nvmlDeviceGetCurrentClocksEventReasons(h),
            "nvmlDeviceGetMemoryInfo": lambda: m.nvmlDeviceGetMemoryInfo(h),
            "nvmlDeviceGetComputeRunningProcesses": lambda: m.nvmlDeviceGetComputeRunningProcesses(h),
            "nvmlDeviceGetEnforcedPowerLimit": lambda: m.nvmlDeviceGetEnforcedPowerLimit(h),
            "nvmlDeviceGetMigMode": lambda: m.nvmlDeviceGetMigMode(h),
            "nvmlDeviceGetTotalEnergyConsumption": lambda: m.nvmlDeviceGetTotalEnergyConsumption(h),
            "nvmlDeviceGetFieldValues(before U2: 82,191,74,75,77,79,269,270,271)": lambda: m.nvmlDeviceGetFieldValues(
                h, list(OLD_FIELDS)
            ),
            "nvmlDeviceGetFieldValues(residency 74-79,269-271) (health)": lambda: m.nvmlDeviceGetFieldValues(
                h, list(RESIDENCY_IDS)
            ),
        }
        for fid in (191,) + RESIDENCY_IDS:
            calls[f"nvmlDeviceGetFieldValues([{fid}])"] = lambda fid=fid: m.nvmlDeviceGetFieldValues(h, [fid])
        slow = {"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetComputeRunningProcesses"}
        out = {}
        for name, fn in calls.items():
            out[name] = timed(fn, max(5, reps // 10) if name in slow or "FieldValues(" in name else reps)
        return out
    finally:
        m.nvmlShutdown()


class Lines:
    """The agent's writer: JSON lines to /dev/null (their encoding is part of a tick's cost);
    beside each sample, the energy counter read for reference, its CPU kept apart."""

    def __init__(self, module, reference):
        self.m = module
        self.reference = reference
        self.handles = None
        self.sink = open(os.devnull, "w")
        self.ref_cpu = 0.0
        self.samples = []  # (monotonic t, [(agent energy_j, counter mJ, power_w) per physical GPU])

    def write(self, *objs):
        for obj in objs:
            self.sink.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.sink.flush()
        if not self.reference:
            return
        c0 = cpu_s()
        t = time.monotonic()
        for obj in objs:
            if obj.get("kind") == "sample":
                heads = [g for g in obj["gpus"] if g.get("energy_j") is not None or g.get("power_w") is not None]
                if self.handles is None:
                    self.handles = [self.m.nvmlDeviceGetHandleByIndex(i) for i in range(len(heads))]
                refs = [self.m.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles]
                self.samples.append((t, [(g.get("energy_j"), r, g.get("power_w")) for g, r in zip(heads, refs)]))
        self.ref_cpu += cpu_s() - c0


def tick_cost(agent_dir, module, ticks, interval, health_interval, load_s=0.0, reference=False):
    """The agent's loop over ``ticks`` ticks: CPU per GPU per tick, by NVML function, the samples."""
    sys.path.insert(0, str(agent_dir))
    import node_agent  # noqa: PLC0415 - the agent under measurement, from agent_dir
    import nvidia  # noqa: PLC0415

    sampler = nvidia.NvmlSampler(node_agent, module)
    gpus = len(sampler.gpus)
    timing = Timing(module)
    sampler.m = timing  # every call of the loop timed (the health reader is made with it too)
    lines = Lines(module, reference=reference)
    load = None
    if load_s > 0:
        script = Path(tempfile.mkdtemp()) / "load.py"
        script.write_text(LOAD)
        load = subprocess.Popen([sys.executable, str(script), str(load_s)], stdout=subprocess.DEVNULL)
    c0 = cpu_s()
    try:
        node_agent.run_ticks(sampler, lines, interval, ticks, health_interval=health_interval)
    finally:
        if load is not None and load.poll() is None:
            os.kill(load.pid, signal.SIGTERM)  # the load this script started, by its PID
            load.wait()
    cpu = cpu_s() - c0 - lines.ref_cpu - timing.overhead()
    sampler.close()
    result = {
        "agent": str(agent_dir.relative_to(ROOT)) if agent_dir.is_relative_to(ROOT) else str(agent_dir),
        "gpus": gpus,
        "ticks": ticks,
        "interval_s": interval,
        "health_interval_s": health_interval,
        "under_load": load_s > 0,
        "cpu_ms_total": round(1e3 * cpu, 1),
        "cpu_ms_per_gpu_per_tick": round(1e3 * cpu / ticks / gpus, 3),
        "by_function": timing.table(),
    }
    if timing.energy_reads:
        result["energy_counter_reads"] = len(timing.energy_reads)
        result["energy_read_cpu_ms"] = [round(1e3 * c, 2) for c in timing.energy_reads]
    return result, lines.samples


class Timing:
    """The module with every nvml* call timed (process CPU), by function name."""

    def __init__(self, module):
        self._m = module
        self.cpu = {}
        self.calls = {}
        self.energy_reads = []

    def __getattr__(self, name):
        value = getattr(self._m, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def call(*args, **kwargs):
            c0 = time.process_time()
            try:
                return value(*args, **kwargs)
            finally:
                spent = time.process_time() - c0
                self.cpu[name] = self.cpu.get(name, 0.0) + spent
                self.calls[name] = self.calls.get(name, 0) + 1
                if name == "nvmlDeviceGetTotalEnergyConsumption":
                    self.energy_reads.append(spent)

        return call

    def overhead(self):
        """This proxy's own cost: two clock reads and a lookup per call, about 2 us."""
        return 2e-6 * sum(self.calls.values())

    def table(self):
        rows = sorted(self.cpu.items(), key=lambda kv: -kv[1])
        return {name: {"calls": self.calls[name], "cpu_ms": round(1e3 * spent, 2)} for name, spent in rows}


def energy_after_pause(m, pauses=(0.0, 1.0, 5.0, 10.0)):
    """CPU of one energy counter read after each pause since the previous read (does it depend on it?)."""
    m.nvmlInit()
    try:
        h = m.nvmlDeviceGetHandleByIndex(0)
        m.nvmlDeviceGetTotalEnergyConsumption(h)
        out = {}
        for pause in pauses:
            time.sleep(pause)
            c0 = time.process_time()
            m.nvmlDeviceGetTotalEnergyConsumption(h)
            out[f"after {pause:g} s"] = round(1e3 * (time.process_time() - c0), 2)
        c0 = time.process_time()
        time.sleep(5.0)
        out["idle process, 5 s of sleep (background CPU)"] = round(1e3 * (time.process_time() - c0), 2)
        return out
    finally:
        m.nvmlShutdown()


def energy_check(samples, loaded):
    """The agent's energy over the load and over sliding windows, against the counter."""
    out = {"ticks": len(samples)}
    if len(samples) < 3:
        return out
    worst = {}
    for width in (10, 20, 30):
        errs = []
        for i in range(len(samples) - width):
            a, b = samples[i], samples[i + width]
            for (ea, ra, _), (eb, rb, _) in zip(a[1], b[1]):
                if ea is None or eb is None or rb <= ra:
                    continue
                counter_j = (rb - ra) / 1000.0
                errs.append(100.0 * ((eb - ea) - counter_j) / counter_j)
        if errs:
            worst[f"{width}s"] = {"windows": len(errs), "max_abs_error_pct": round(max(abs(e) for e in errs), 3)}
    out["windows"] = worst
    if loaded:
        # the run: from the tick before the power rose to the tick after it fell (GPU 0)
        powers = [row[1][0][2] or 0.0 for row in samples]
        idle = min(powers)
        busy = [k for k, w in enumerate(powers) if w > idle + 100.0]
        if busy:
            i0, i1 = max(0, busy[0] - 1), min(len(samples) - 1, busy[-1] + 1)
            (ea, ra, _), (eb, rb, _) = samples[i0][1][0], samples[i1][1][0]
            if ea is not None and eb is not None and rb > ra:
                counter_j = (rb - ra) / 1000.0
                out["run"] = {
                    "seconds": round(samples[i1][0] - samples[i0][0], 1),
                    "counter_j": round(counter_j, 1),
                    "agent_j": round(eb - ea, 1),
                    "error_pct": round(100.0 * ((eb - ea) - counter_j) / counter_j, 3),
                }
    return out


def one_process(args):
    """A loop of its own (``--before``): the agent modules of another version, a fresh process."""
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__)),
            "--only-tick",
            "--agent-dir",
            str(args.before),
            "--ticks",
            str(args.ticks),
            "--interval",
            str(args.interval),
        ],
        capture_output=True,
        text=True,
        timeout=60 + 3 * args.ticks * args.interval,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["exit %d" % proc.returncode]}
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few ticks, short interval")
    parser.add_argument("--ticks", type=int, default=60)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--health-interval", type=float, default=10.0)
    parser.add_argument("--reps", type=int, default=200, help="calls per cheap call timed")
    parser.add_argument("--agent-dir", type=Path, default=AGENT_DIR)
    parser.add_argument("--before", type=Path, help="agent modules of an earlier version, measured alike")
    parser.add_argument("--load", type=float, default=0.0, help="seconds of torch matmul load in the health-off loop")
    parser.add_argument(
        "--samples", type=Path, help="write the health-off loop's ticks here (JSON): t, energy_j, counter mJ, power_w"
    )
    parser.add_argument("--only-tick", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.ticks, args.interval, args.reps, args.health_interval = 6, 0.05, 20, 0.1
    module, what = library()
    if args.only_tick:
        print(json.dumps(tick_cost(args.agent_dir.resolve(), module, args.ticks, args.interval, 0.0)[0]))
        return 0
    result: dict = {
        "script": "nvml_call_cost",
        "quick": args.quick,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "library": what,
        "calls": call_costs(module, args.reps),
    }
    if not args.quick:
        result["energy_read_ms_after_pause"] = energy_after_pause(module)
    if args.before:
        result["before"] = one_process(args)
    agent_dir = args.agent_dir.resolve()
    result["tick"] = tick_cost(agent_dir, module, args.ticks, args.interval, 0.0)[0]
    result["tick_with_health"] = tick_cost(agent_dir, module, args.ticks, args.interval, args.health_interval)[0]
    if args.load:
        ticks = max(args.ticks, int(args.load / args.interval) + 30)
        loaded, samples = tick_cost(agent_dir, module, ticks, args.interval, 0.0, args.load, reference=True)
        result["tick_under_load"] = loaded
        result["energy"] = energy_check(samples, True)
        if args.samples:
            rows = [[round(t - samples[0][0], 4), *gpus[0]] for t, gpus in samples] if samples else []
            cols = ["t_s", "energy_j", "counter_mj", "power_w"]
            args.samples.write_text(json.dumps({"columns": cols, "gpu0": rows}) + "\n")
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    budgets = {}
    for name in ("tick", "tick_with_health"):
        figure = result[name]["cpu_ms_per_gpu_per_tick"]
        budgets[f"{name}_cpu_ms_per_gpu"] = {
            "figure": figure,
            "budget": f"<= {BUDGET_MS} ms of CPU per GPU per tick at 1 Hz",
            "met": figure <= BUDGET_MS,
        }
    result["budgets"] = budgets
    result["budgets_met"] = all(b["met"] for b in budgets.values())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
