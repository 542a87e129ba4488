"""Start-up of `rocm-console --demo` (first paint, every node live) vs a bare Textual hello-world app.

    python tests/perf/startup.py [--pairs 10] [--cold 3] [--quick] [--instructions]

Prints one JSON object; asserts nothing (the budget is printed beside the figures).

Each run is a fresh process on a pseudo-terminal (120x36, TERM=xterm-256color),
timed from just before it is spawned until a marker shows up in the bytes it
writes to the terminal, i.e. what the user sees:

- hello world: a Textual app with one Static("Hello, world"); marker "Hello, world";
- console: `python -m console --demo` (what the rocm-console entry point runs).
  first_paint_s: until the name of the demo's last node (its row is the last
  one): the first frame draws every node's row (connecting…) before any node
  answers. frame_s (every node live): until "● N live" in the status bar (N:
  the demo's nodes), the first
  frame in which every demo node is live with its GPUs drawn (the status bar
  and the table are redrawn in one batch). The real agent samples the
  simulated nodes through the local transport.

Budgets (median of the per-pair ratios console / hello world): first paint
<= 1.5x, every node live <= 2x.

--instructions (needs valgrind) adds what a busy machine cannot blur: the CPU
instructions each program runs from its start to its first paint (callgrind's
count of the process, the agents it spawns not included; the program leaves at
the first write of its marker), hello world and a warm console, and their ratio.
A shared machine moves the times from run to run, never these counts.

Then each app is quit with its key (q / ctrl+q), as a user would; a run that
does not exit is killed with its process group (the session it was started in).

Warm runs reuse one HOME (agent bundle installed, simulator state created, the
compiled dataclass methods in ~/.cache: console/ui/start_up.py), as a second start
on the same machine does; hello world and console runs
alternate (the order flips every pair) and the budgeted figure is the median of
the per-pair ratios console / hello. Cold runs (a fresh HOME each: the agent
bundle is installed, the simulator state created, the dataclass methods compiled)
are reported beside it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's console (the demo profile), as the runs use it
BUDGET_FIRST_PAINT = 1.5
BUDGET_LIVE = 2.0
ROWS, COLS = 36, 120

HELLO = r"""
from textual.app import App
from textual.widgets import Static

class Hello(App):
    def compose(self):
        yield Static("Hello, world")

Hello().run()
"""


def _demo_nodes() -> int:
    """How many nodes the shipped demo profile has: the marker is "● N live"."""
    from console.core.profiles import demo_profile_path, load_profile

    return len(load_profile([demo_profile_path()]).nodes)


def _last_demo_node() -> str:
    """The demo's last node: its row is the last the first frame draws (first paint)."""
    from console.core.profiles import demo_profile_path, load_profile

    return load_profile([demo_profile_path()]).nodes[-1].name


HELLO_RUN = {"argv": [sys.executable, "-c", HELLO], "markers": {"frame": b"Hello, world"}, "quit": b"\x11"}
CONSOLE_RUN = {
    "argv": [sys.executable, "-m", "console", "--demo"],
    "markers": {"first_paint": _last_demo_node().encode(), "frame": f"● {_demo_nodes()} live".encode()},
    "quit": b"q",
}


# Runs the hello world or the console (argv[1]) and leaves at once when the marker (argv[2])
# is handed to Textual's terminal driver: the count stops at the first paint. The hook loads
# with the driver module (nothing is imported ahead of the program).
EXIT_AT_MARKER = r"""
import importlib.abc, importlib.machinery, os, sys
which, marker = sys.argv[1], bytes.fromhex(sys.argv[2]).decode()  # not on the command line as it is shown
class AtMarker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "textual.drivers.linux_driver":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module
        def exec_module(module):
            load(module)
            write = module.LinuxDriver.write
            def write_then_leave(self, data):
                write(self, data)
                if marker in data:
                    os.write(sys.__stdout__.fileno(), marker.encode())  # for the runner: seen
                    os._exit(0)
            module.LinuxDriver.write = write_then_leave
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, AtMarker())
if which == "hello":
    exec(HELLO)
else:
    sys.argv = ["rocm-console", "--demo"]
    from console.cli import main
    main()
"""


def instructions_to_paint(spec: dict, which: str, marker: str, home: Path, out: Path) -> float | None:
    """Millions of instructions (callgrind's Ir) from the program's start to its first paint."""
    code = f"HELLO = {HELLO!r}\n{EXIT_AT_MARKER}"
    run = {
        "argv": ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code]
        + [which, marker.encode().hex()],
        "markers": {"frame": marker.encode()},
        "quit": spec["quit"],
    }
    result = run_once(run, home, timeout=300)
    try:
        text = out.read_text()
    except OSError:
        return None
    found = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
    return round(int(found.group(1)) / 1e6, 1) if found and "error" not in result else None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_once(spec: dict, home: Path, timeout: float = 60.0) -> dict:
    """Seconds from spawn to each marker on the terminal; then quit the app."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = {**os.environ, "HOME": str(home), "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    env.pop("TEXTUAL", None)
    env.pop("XDG_CACHE_HOME", None)  # the start-up cache is the run's HOME's (warm or cold as the HOME)
    # As after `pip install` / `pipx install`: compiled modules are cached and reused (a shell
    # with PYTHONDONTWRITEBYTECODE would compile the console on every start, the installed
    # Textual of the hello world never).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    seen: dict[str, float] = {}
    all_seen = threading.Event()
    buf = bytearray()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        spec["argv"], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:  # read everything: a terminal nobody reads would block the app's writes
        try:
            while True:
                data = os.read(master, 65536)
                if not data:
                    break
                now = time.monotonic()
                # Only the tail can hold a marker split across reads.
                tail_start = max(0, len(buf) - 64)
                buf.extend(data)
                window = bytes(buf[tail_start:])
                for name, marker in spec["markers"].items():
                    if name not in seen and marker in window:
                        seen[name] = now - t0
                # The full frame comes last; a first-paint marker not seen by then never will be.
                if "frame" in seen:
                    all_seen.set()
                del buf[:-64]
        except OSError:
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        all_seen.wait(timeout)
        os.write(master, spec["quit"])
        try:
            proc.wait(timeout=15)
            exit_s = None
        except subprocess.TimeoutExpired:
            exit_s = "killed"
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this run created, nothing else
            except ProcessLookupError:
                pass
            proc.wait()
        os.close(master)
        reader.join(timeout=2)
    out = {f"{name}_s": round(seen[name], 3) for name in spec["markers"] if name in seen}
    if exit_s:
        out["quit"] = exit_s
    if "frame" not in seen:
        out["error"] = f"marker not seen within {timeout:.0f} s (exit code {proc.returncode})"
    return out


def stats(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "runs": len(values),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10, help="alternating hello/console warm pairs")
    parser.add_argument("--cold", type=int, default=3, help="console runs with a fresh HOME each")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 pairs, 1 cold run")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions to the first paint (valgrind)"
    )
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        print("startup.py: --instructions needs valgrind (callgrind) on PATH", file=sys.stderr)
        return 2
    if args.quick:
        args.pairs, args.cold = min(args.pairs, 3), min(args.cold, 1)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rc-startup-") as tmp:
        cold = []
        for i in range(max(1, args.cold)):
            home = Path(tmp) / f"cold{i}"
            home.mkdir()
            cold.append(run_once(CONSOLE_RUN, home))
        warm_home = Path(tmp) / "cold0"  # installed by the first cold run
        hello, console, ratios, paint_ratios = [], [], [], []
        for i in range(args.pairs):
            if i % 2 == 0:
                h, c = run_once(HELLO_RUN, warm_home), run_once(CONSOLE_RUN, warm_home)
            else:
                c, h = run_once(CONSOLE_RUN, warm_home), run_once(HELLO_RUN, warm_home)
            hello.append(h)
            console.append(c)
            if "frame_s" in h and "frame_s" in c:
                ratios.append(c["frame_s"] / h["frame_s"])
            if "frame_s" in h and "first_paint_s" in c:
                paint_ratios.append(c["first_paint_s"] / h["frame_s"])
        counted = None
        if args.instructions:  # in the warm HOME, as the pairs ran
            h_ir = instructions_to_paint(HELLO_RUN, "hello", "Hello, world", warm_home, Path(tmp) / "hello.cg")
            paint = CONSOLE_RUN["markers"]["first_paint"].decode()
            c_ir = instructions_to_paint(CONSOLE_RUN, "console", paint, warm_home, Path(tmp) / "console.cg")
            counted = {
                "hello_world_M": h_ir,
                "console_first_paint_M": c_ir,
                "ratio": round(c_ir / h_ir, 3) if h_ir and c_ir else None,
            }
    errors = [r["error"] for r in cold + hello + console if "error" in r]
    ratio = round(statistics.median(ratios), 3) if ratios else None
    paint_ratio = round(statistics.median(paint_ratios), 3) if paint_ratios else None
    hello_frame = stats([r["frame_s"] for r in hello if "frame_s" in r])
    console_frame = stats([r["frame_s"] for r in console if "frame_s" in r])
    result = {
        "script": "startup",
        "quick": args.quick,
        "terminal": f"{COLS}x{ROWS} (pty)",
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "pairs": args.pairs,
        "console_argv": "python -m console --demo",
        "hello_world_first_frame_s": hello_frame,
        "console_full_fleet_frame_s": console_frame,
        "console_first_paint_s": stats([r["first_paint_s"] for r in console if "first_paint_s" in r]),
        "console_cold_full_fleet_frame_s": stats([r["frame_s"] for r in cold if "frame_s" in r]),
        "first_paint_ratio_per_pair": [round(r, 3) for r in paint_ratios],
        "first_paint_ratio_median": paint_ratio,
        "ratio_per_pair": [round(r, 3) for r in ratios],
        "ratio_median": ratio,
        "ratio_of_medians": (
            round(console_frame["median"] / hello_frame["median"], 3) if hello_frame and console_frame else None
        ),
        "budget": f"<= {BUDGET_LIVE:g}",
        "met": ratio is not None and ratio <= BUDGET_LIVE,
        "errors": errors,
    }
    paint_met = paint_ratio is not None and paint_ratio <= BUDGET_FIRST_PAINT
    result["budgets"] = {
        "first_paint_vs_hello": {"figure": paint_ratio, "budget": f"<= {BUDGET_FIRST_PAINT:g}", "met": paint_met},
        "full_fleet_frame_vs_hello": {"figure": ratio, "budget": result["budget"], "met": result["met"]},
    }
    result["budgets_met"] = result["met"] and paint_met
    if counted is not None:
        result["instructions_to_first_paint"] = counted
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
