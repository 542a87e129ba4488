"""Drive `rocm-console --demo` as a person would: a real terminal (tmux), keys, the pane's text.

Runs the real agent against the simulated nodes (no replay). Skipped without tmux.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, tmp_path: Path) -> None:
        # A private server socket in the test's folder: never touches the user's tmux.
        self.socket = str(tmp_path / "tmux.sock")
        self.session = "demo"
        self.home = tmp_path / "home"
        self.home.mkdir()

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=10).stdout

    def start(self, width: int, height: int) -> None:
        # HOME keeps the agent bundle and the simulator state out of the real home.
        command = f"cd {ROOT} && HOME={self.home} {sys.executable} -m console --demo"
        self.tmux("new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), command)

    def keys(self, *keys: str) -> None:
        # One key per call. An Escape is always followed by a wait for what it did (the
        # next key then cannot reach the terminal soon enough to read as Alt+key).
        for key in keys:
            self.tmux("send-keys", "-t", self.session, key)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session)

    def wait_for(self, text: str, timeout: float = 10.0) -> str:
        seen = [""]

        def shows() -> bool:
            seen[0] = self.screen()
            return text in seen[0]

        if not wait_until(shows, timeout, step=0.1):
            raise AssertionError(f"{text!r} never appeared; the pane shows:\n{seen[0]}")
        return seen[0]

    def wait_gone(self, text: str, timeout: float = 10.0) -> None:
        if not wait_until(lambda: text not in self.screen(), timeout, step=0.1):
            raise AssertionError(f"{text!r} never went away; the pane shows:\n{self.screen()}")

    def alive(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "-S", self.socket, "has-session", "-t", self.session], capture_output=True
            ).returncode
            == 0
        )

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def term(tmp_path):
    t = Tmux(tmp_path)
    yield t
    t.kill()


def test_demo_in_a_real_terminal(term):
    term.start(120, 36)
    # how fast it opens is a figure of tests/perf/, not a bound here (this may run beside a full suite)
    screen = term.wait_for("4 live", timeout=40)  # three Instinct nodes and the H100
    assert "mi300x-cpx  live" in screen and "8×MI300X = 64 GPUs" in screen
    assert "Detail" in screen and "Filter" in screen and "Quit" in screen  # the footer

    term.keys("j", "Enter")
    screen = term.wait_for("Utilization %")
    assert "0000:0c:00.0" in screen  # GPU 0's BDF
    term.keys("Escape")
    term.wait_gone("Utilization %")  # the detail closed: the Escape is read, alone
    term.wait_for("GPU HEALTH  UTIL")

    term.keys("?")
    term.wait_for("Id for [keys]")
    term.keys("Escape")
    term.wait_gone("Id for [keys]")
    term.wait_for("GPU HEALTH  UTIL")

    term.keys("/")
    term.wait_for("filter: node, model")  # the filter box is open (has the focus): type into it
    term.keys("c", "p", "x", "Enter")
    screen = term.wait_for("filter: cpx")
    assert "mi300x-spx" not in screen and "mi300x-cpx" in screen
    term.keys("Escape")
    term.wait_for("mi300x-spx")

    term.keys("p")
    term.wait_for("PAUSED")
    term.keys("p", "+")
    term.wait_for("every 0.5 s")

    term.tmux("resize-window", "-t", term.session, "-x", "80", "-y", "24")
    screen = term.wait_for("TJ")
    assert "Quit" in screen and "mi300x-spx" in screen

    term.keys("q")
    assert wait_until(lambda: not term.alive(), timeout=5, step=0.1), "q did not quit"
