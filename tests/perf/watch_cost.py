"""The headless watcher's own cost on the demo fleet (`rocm-console watch --demo`).

    python tests/perf/watch_cost.py [--seconds 60] [--settle 10]

Prints one JSON object; asserts nothing (the budget is printed beside the figures).

The real watcher (`python -m console watch --demo`: four simulated nodes, their agents) runs
in a data folder of its own. Once its stderr says every node is live, and --settle seconds
more, the watcher process's own CPU time (utime + stime in /proc/PID/stat) is read over
--seconds of wall time; CPU % = that / wall time. The agents' CPU (the processes carrying
its lifeline) is read over the same window and printed apart: they run on the nodes. RSS is
read at the end (VmRSS; VmHWM the peak). Then the watcher gets SIGTERM and its exit is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET_CPU_PERCENT = 0.5  # issue 37: the demo fleet


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def bound(pid: int) -> list[int]:
    """The processes carrying the watcher's lifeline (its agents)."""
    out = []
    needle = f"ROCM_CONSOLE_LIFELINE={pid}:".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            try:
                if needle in Path(f"/proc/{entry}/environ").read_bytes():
                    out.append(int(entry))
            except OSError:
                continue
    return out


def agents_cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_s(pid)
        except OSError:
            continue
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=10.0)
    args = parser.parse_args()
    from console.core.profiles import demo_profile_path, load_profile

    nodes = len(load_profile([demo_profile_path()]).nodes)
    data = tempfile.mkdtemp(prefix="watch-cost-")
    env = dict(os.environ, ROCM_CONSOLE_DATA_DIR=data)
    env.pop("ROCM_CONSOLE_DEMO_DATA_DIR", None)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "watch", "--demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    live: set[str] = set()
    lines: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip())
            words = line.split()
            if len(words) >= 5 and words[2] == "node" and words[4] == "live":
                live.add(words[3])

    threading.Thread(target=read, daemon=True).start()
    try:
        while len(live) < nodes:
            if proc.poll() is not None or time.monotonic() - started > 120:
                print(json.dumps({"error": "the watcher did not see every node live", "stderr": lines[-5:]}))
                return 1
            time.sleep(0.2)
        all_live_s = time.monotonic() - started
        time.sleep(args.settle)
        agents = bound(proc.pid)
        cpu0, agents0, t0 = cpu_s(proc.pid), agents_cpu_s(agents), time.monotonic()
        time.sleep(args.seconds)
        cpu1, agents1, t1 = cpu_s(proc.pid), agents_cpu_s(agents), time.monotonic()
        rss, hwm = status_kb(proc.pid, "VmRSS"), status_kb(proc.pid, "VmHWM")
    finally:
        ended = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        stop_s = time.monotonic() - ended
    wall = t1 - t0
    print(
        json.dumps(
            {
                "what": "rocm-console watch --demo: the watcher process's own CPU over the window",
                "nodes": nodes,
                "all_live_s": round(all_live_s, 2),
                "window_s": round(wall, 1),
                "watcher_cpu_percent": round(100 * (cpu1 - cpu0) / wall, 3),
                "budget_cpu_percent": BUDGET_CPU_PERCENT,
                "agents": len(agents),
                "agents_cpu_percent": round(100 * (agents1 - agents0) / wall, 3),
                "rss_mb": round(rss / 1024, 1),
                "peak_rss_mb": round(hwm / 1024, 1),
                "sigterm_exit_s": round(stop_s, 2),
                "exit_code": code,
                "agents_left": [p for p in agents if Path(f"/proc/{p}").exists()],
                "cores": os.cpu_count(),
                "load_before": round(load_before, 2),
                "load_after": round(os.getloadavg()[0], 2),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
