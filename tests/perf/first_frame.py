"""First-frame time of `rocm-console --demo` against a bare Textual hello-world app.

    python tests/perf/first_frame.py [--runs 5]

Prints one JSON object. Each run is a fresh Python process on a pseudo-terminal
(120x36), timed from just before the process is spawned:

- first_frame_s: until Textual's Ready event (the first frame is on the terminal);
- all_live_s (console only): until the fleet screen shows every demo node live,
  with the real agent sampling the simulated nodes through the local transport.

"cold" runs start from an empty HOME (agent bundle uploaded, simulator state
created); "warm" runs reuse it, as a second start on the same machine does.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HELLO = r"""
import json, os, sys, time
from textual.app import App
from textual.widgets import Static

class Hello(App):
    def compose(self):
        yield Static("Hello, world")
    def on_ready(self):
        json.dump({"first_frame_s": time.time() - float(os.environ["FF_T0"])}, open(os.environ["FF_OUT"], "w"))
        self.exit()

Hello().run()
"""

CONSOLE = r"""
import json, os, sys, time
from console.cli import build_parser, load_selected_profile
from console.core.model import NodeHealth
from console.ui.app import ConsoleApp

out = {}

class Timed(ConsoleApp):
    def on_ready(self):
        out["first_frame_s"] = time.time() - float(os.environ["FF_T0"])
        self.set_interval(0.01, self._check)

    def _check(self):
        table = self.screen.query_one("GpuTable")
        shown = table._snapshots.values()
        if len(shown) == len(self.fleet.node_names) and all(s.health == NodeHealth.LIVE for s in shown):
            out["all_live_s"] = time.time() - float(os.environ["FF_T0"])
            json.dump(out, open(os.environ["FF_OUT"], "w"))
            self.exit()

args = build_parser().parse_args(["--demo"])
Timed(load_selected_profile(args)).run()
"""


def _run(code: str, home: Path, timeout: float = 60.0) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as tmp:
        out_path = tmp.name
    master, slave = pty.openpty()
    import fcntl
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = {**os.environ, "HOME": str(home), "FF_OUT": out_path, "TERM": "xterm-256color",
           "PYTHONPATH": str(ROOT)}
    drained = threading.Event()

    def drain() -> None:  # a terminal that is never read would block the app's writes
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass
        drained.set()

    threading.Thread(target=drain, daemon=True).start()
    env["FF_T0"] = repr(time.time())
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=slave, stdout=slave, stderr=slave,
                            cwd=ROOT, env=env, start_new_session=True)
    os.close(slave)
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    try:
        return json.loads(Path(out_path).read_text() or "{}")
    finally:
        os.unlink(out_path)


def _stats(runs: list[dict], key: str) -> dict | None:
    values = [r[key] for r in runs if key in r]
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "runs": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hello = [_run(HELLO, Path(tmp)) for _ in range(args.runs)]
        cold, warm = [], []
        for i in range(args.runs):
            home = Path(tmp) / f"home{i}"
            home.mkdir()
            cold.append(_run(CONSOLE, home))
            warm.append(_run(CONSOLE, home))
    result = {
        "terminal": "120x36 (pty)",
        "python": sys.version.split()[0],
        "hello_world": {"first_frame_s": _stats(hello, "first_frame_s")},
        "console_demo_cold": {"first_frame_s": _stats(cold, "first_frame_s"), "all_live_s": _stats(cold, "all_live_s")},
        "console_demo_warm": {"first_frame_s": _stats(warm, "first_frame_s"), "all_live_s": _stats(warm, "all_live_s")},
    }
    hello_ff = result["hello_world"]["first_frame_s"]
    warm_ff = result["console_demo_warm"]["first_frame_s"]
    if hello_ff and warm_ff:
        result["first_frame_overhead_vs_hello_s"] = round(warm_ff["median"] - hello_ff["median"], 3)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
