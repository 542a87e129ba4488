"""The console left open with nothing pressed: its own CPU and memory (`rocm-console --demo`).

    python tests/perf/idle_cpu.py [--idle-seconds 30] [--seconds 60] [--settle 10] [--quick] [--cprofile OUT]

Prints one JSON object; asserts nothing (the budget is printed beside the figures).

The real console (`python -m console --demo`: four simulated nodes, 91 logical GPUs,
1 Hz, their agents and the demo's vLLM instances) runs on a pseudo-terminal (120x36)
whose output is read and thrown away, as a terminal would. Once the status bar says
every node is live, and --settle seconds more (the demo's instances start), the
console process's own CPU time (utime + stime in /proc/PID/stat: its agents and
instances are other processes) is read over two windows; CPU % = that / wall time:
- idle (--idle-seconds): nothing pressed for a while, new samples drawn once a second;
- unattended (--seconds, from UNATTENDED_AFTER_S after start-up): the console left open
  all day, drawn every few seconds as top is (the budget's figure; --quick skips it).
RSS is read at the end (VmRSS; VmHWM the peak). Then the app is quit with `q`.
--cprofile OUT runs the console under cProfile and writes its profile to OUT (the
CPU figure then includes the profiler's own cost: for finding where time goes only).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLS = 36, 120
BUDGET_CPU_PERCENT = 1.0


def demo_nodes() -> int:
    """The shipped demo profile's nodes: the status bar says "● N live" once all are."""
    from console.core.profiles import demo_profile_path, load_profile

    return len(load_profile([demo_profile_path()]).nodes)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_s(pid: int) -> float:
    """utime + stime of the process's main thread (its event loop)."""
    return _task_cpu_s(pid, pid)


def _task_cpu_s(pid: int, tid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured time left unattended")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="measured time idle, before that")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after every node is live")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 s measured, 3 s settle")
    parser.add_argument("--cprofile", metavar="OUT", help="run the console under cProfile, profile to OUT")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from console.ui.app import UNATTENDED_AFTER_S  # when the console counts as left alone

    if args.quick:
        args.idle_seconds, args.settle = min(args.idle_seconds, 10.0), min(args.settle, 3.0)
    nodes = demo_nodes()
    marker = f"● {nodes} live".encode()
    load0 = os.getloadavg()
    argv = [sys.executable]
    if args.cprofile:
        argv += ["-m", "cProfile", "-o", str(Path(args.cprofile).resolve()), "-m", "console", "--demo"]
    else:
        argv += ["-m", "console", "--demo"]
    result: dict = {
        "script": "idle_cpu",
        "quick": args.quick,
        "console_argv": "python -m console --demo" + (" (under cProfile)" if args.cprofile else ""),
        "nodes": nodes,
        "terminal": f"{COLS}x{ROWS} (pty)",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load0],
    }
    with tempfile.TemporaryDirectory(prefix="rc-idle-") as home:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**os.environ, "HOME": home, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        env.pop("TEXTUAL", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        live = threading.Event()
        written = [0]
        proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, start_new_session=True
        )
        os.close(slave)

        def drain() -> None:  # a terminal nobody reads would block the app's writes
            tail = b""
            try:
                while True:
                    data = os.read(master, 65536)
                    if not data:
                        break
                    written[0] += len(data)
                    if not live.is_set():
                        if marker in tail + data:
                            live.set()
                        tail = data[-64:]
            except OSError:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            if not live.wait(90):
                live_at = 0.0
                result["error"] = "the demo's nodes were not all live within 90 s"
            else:
                live_at = time.monotonic()  # no key is ever pressed: idle since the start

                def window(seconds: float) -> dict:
                    c0, w0, b0, m0 = cpu_s(proc.pid), time.monotonic(), written[0], thread_cpu_s(proc.pid)
                    time.sleep(seconds)
                    c1, w1, b1, m1 = cpu_s(proc.pid), time.monotonic(), written[0], thread_cpu_s(proc.pid)
                    wall = w1 - w0
                    return {
                        "seconds": round(wall, 1),
                        "cpu_percent": round(100 * (c1 - c0) / wall, 2),
                        # the event loop's thread; the rest: Textual's input and writer threads,
                        # asyncio's child watchers, threads that ended in the window
                        "main_thread_cpu_percent": round(100 * (m1 - m0) / wall, 2),
                        "terminal_bytes_per_s": round((b1 - b0) / wall),
                    }

                time.sleep(args.settle)
                # first the idle console (drawn once a second), then, past UNATTENDED_AFTER_S
                # without input, the one left open all day (drawn every few seconds, like top)
                result["idle"] = window(args.idle_seconds)
                if not args.quick:
                    time.sleep(max(0.0, live_at + UNATTENDED_AFTER_S + 3 - time.monotonic()))
                    result["unattended"] = window(args.seconds)
                measured = result.get("unattended") or result["idle"]
                cpu = measured["cpu_percent"]
                result.update(
                    seconds=measured["seconds"],
                    cpu_percent=cpu,
                    terminal_bytes_per_s=measured["terminal_bytes_per_s"],
                    rss_mb=round(status_kb(proc.pid, "VmRSS") / 1024, 1),
                    peak_rss_mb=round(status_kb(proc.pid, "VmHWM") / 1024, 1),
                )
                result["budgets"] = {
                    "cpu_percent": {
                        "figure": result["cpu_percent"],
                        "budget": f"<= {BUDGET_CPU_PERCENT:g}",
                        "met": cpu <= BUDGET_CPU_PERCENT,
                    },  # fmt: skip
                }
                result["budgets_met"] = cpu <= BUDGET_CPU_PERCENT
            os.write(master, b"q")
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                result["quit"] = "killed"
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the session this run created, nothing else
                except ProcessLookupError:
                    pass
                proc.wait()
            os.close(master)
            reader.join(timeout=2)
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
