"""The console's terminal driver (console/ui/quiet_driver.py) on a real pseudo-terminal: its input
thread sleeps while nobody types, yet a key after a long quiet spell arrives at once, a lone
Escape is still told from the start of a sequence, and quitting never waits for a timeout."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

APP = textwrap.dedent(
    """
    import sys, time
    from textual.app import App
    from textual.widgets import Static
    from console.ui.quiet_driver import QuietLinuxDriver

    class Keys(App):
        def get_driver_class(self):
            return QuietLinuxDriver

        def compose(self):
            yield Static("ready")

        def on_mount(self):
            self.log_file = open(sys.argv[1], "a", buffering=1)
            self.log_file.write("mounted\\n")

        def on_key(self, event):
            self.log_file.write("%s %.3f\\n" % (event.key, time.monotonic()))
            if event.key == "q":
                self.exit()

    Keys().run()
    """
)


def _thread_wakeups(pid: int) -> int:
    """Voluntary context switches of the process's threads other than the main one (each wake-up
    from a wait is one; a thread preempted on a loaded machine is not counted)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) == pid:
            continue
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                total += int(line.split()[1])
    return total


def _wait_for(path: Path, text: str, master: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        while select.select([master], [], [], 0)[0]:  # drain the screen, as a terminal does
            try:
                os.read(master, 65536)
            except OSError:
                break
        if path.exists() and text in path.read_text():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.timeout(60)
def test_keys_after_quiet_spells_escape_and_a_prompt_quit(tmp_path):
    script = tmp_path / "keys_app.py"
    script.write_text(APP)
    log = tmp_path / "keys.log"
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(log)], stdin=slave, stdout=slave, stderr=slave, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    try:
        assert _wait_for(log, "mounted", master), "the app never started"
        time.sleep(0.5)
        os.write(master, b"a")
        assert _wait_for(log, "a ", master, timeout=5)
        # A quiet spell well past the polling window: the input thread must not wake ten
        # times a second as Textual's own does (~30 wake-ups in these 3 s).
        _wait_for(log, "never", master, timeout=1.5)
        before = _thread_wakeups(proc.pid)
        _wait_for(log, "never", master, timeout=3.0)
        woke = _thread_wakeups(proc.pid) - before
        assert woke <= 5, woke
        sent = time.monotonic()
        os.write(master, b"b")
        assert _wait_for(log, "b ", master, timeout=5)
        got = float(next(line for line in log.read_text().splitlines() if line.startswith("b ")).split()[1])
        assert got - sent < 1.0  # at once, not at a poll (room for a loaded machine)
        time.sleep(1.5)
        os.write(master, b"\x1b")  # a lone Escape after a quiet spell: the escape key, in time
        assert _wait_for(log, "escape ", master, timeout=5)
        time.sleep(1.5)
        quit_at = time.monotonic()
        os.write(master, b"q")
        proc.wait(timeout=10)
        assert time.monotonic() - quit_at < 6.0
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        os.close(master)
