"""CPU time per telemetry tick of the node agent against the simulated amdsmi.

    python tests/perf/agent_tick_cost.py [--ticks 50] [--interval 0.1] [--repeat 3]

Runs the agent as a child process exactly as the console does (the simulator
copied into a temp dir as amdsmi.py), reads the child's user+system CPU time
with resource.getrusage(RUSAGE_CHILDREN), subtracts a --count 1 run (interpreter
start, import, amdsmi_init, enumeration, first tick) and divides by the extra
ticks.  Prints one JSON object; asserts nothing.  The simulator computes its
synthetic values in Python, so these figures include its cost too: they bound
what the agent's own loop costs, they are not a real-GPU figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
SIM = ROOT / "console" / "sim" / "amdsmi.py"

CASES = {
    "spx_8_gpus": {"gpu": "MI300X", "count": 8, "compute_partition": "SPX", "memory_partition": "NPS1", "seed": 0},
    "cpx_64_partitions": {"gpu": "MI300X", "count": 8, "compute_partition": "CPX", "memory_partition": "NPS1",
                          "seed": 0},
}


def child_cpu(argv, env):
    """CPU seconds (user + system) used by one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(spec, ticks, interval, repeat, workdir):
    upload = Path(workdir) / "upload"
    upload.mkdir(exist_ok=True)
    shutil.copy(SIM, upload / "amdsmi.py")
    env = dict(os.environ)
    env["ROCM_CONSOLE_SIM_DIR"] = str(Path(workdir) / "state")
    env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps(spec)

    def argv(count):
        return [sys.executable, str(AGENT), "telemetry", "--count", str(count), "--interval", str(interval),
                "--amdsmi-path", str(upload)]

    child_cpu(argv(1), env)  # warm-up: creates the simulator state, fills caches
    startup = [child_cpu(argv(1), env) for _ in range(repeat)]
    full = [child_cpu(argv(ticks), env) for _ in range(repeat)]
    base = statistics.median(startup)
    per_tick = [(f - base) / (ticks - 1) for f in full]
    return {
        "startup_cpu_ms": round(base * 1e3, 2),
        "cpu_ms_per_tick": round(statistics.median(per_tick) * 1e3, 3),
        "cpu_ms_per_tick_runs": [round(x * 1e3, 3) for x in per_tick],
        "cpu_pct_at_1s_interval": round(statistics.median(per_tick) * 100, 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    result = {"python": platform.python_version(), "ticks": args.ticks, "interval": args.interval,
              "repeat": args.repeat}
    for name, spec in CASES.items():
        with tempfile.TemporaryDirectory(prefix="agent-perf-") as workdir:
            result[name] = measure(spec, args.ticks, args.interval, args.repeat, workdir)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
