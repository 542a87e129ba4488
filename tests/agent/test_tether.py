"""`node_agent.py tether`: the lifeline a console command leaves on an SSH node (W2). It says its
own lifeline, lives while its stdin is open and ends at EOF (the console's SSH channel closed,
however the console ended) or at an `end` line; an instance bound to it ends with it, even one
that knows nothing about lifelines (a real vLLM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.agent.test_lifeline import load, monitor_pid, start_instance
from tests.agent.test_supervisor import AGENT, PY, alive, wait_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def start_tether() -> tuple[subprocess.Popen, dict]:
    env = {k: v for k, v in os.environ.items() if k != "ROCM_CONSOLE_LIFELINE"}
    proc = subprocess.Popen(
        [PY, str(AGENT), "tether"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, json.loads(line)


def test_the_tether_says_its_lifeline_and_ends_at_stdin_eof():
    proc, said = start_tether()
    try:
        assert said == {"kind": "tether", "pid": proc.pid, "lifeline": load().token_of(proc.pid)}
        assert proc.stdin is not None
        proc.stdin.write(b"anything else\n")  # not its goodbye: it stays
        proc.stdin.flush()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1.5)
        proc.stdin.close()  # what sshd does when the console's connection goes
        assert proc.wait(5) == 0
        assert not alive(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_tether_ends_at_the_consoles_end_line():
    proc, _ = start_tether()
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"en")  # a line may arrive in pieces
        proc.stdin.flush()
        proc.stdin.write(b"d\n")
        proc.stdin.flush()
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_an_instance_bound_to_a_tether_ends_when_its_stdin_closes(tmp_path):
    """The supervisor's path: the instance (a plain loop, deaf to lifelines like a real vLLM)
    carries the tether's lifeline; EOF on the tether's stdin and the instance ends within
    seconds by SIGTERM, its exit recorded, its monitor gone."""
    state = tmp_path / "state"
    tether, said = start_tether()
    env = dict(os.environ, ROCM_CONSOLE_LIFELINE=said["lifeline"])
    rec = start_instance(state, "tied", env)
    try:
        assert wait_until(lambda: not alive(rec["pid"]), timeout=2.5) is False, "it ended while the tether lived"
        assert tether.stdin is not None
        tether.stdin.close()
        assert tether.wait(5) == 0
        assert wait_until(lambda: not alive(rec["pid"]), timeout=8), "the instance outlived its tether"
        exit_file = state / "instances" / "tied" / "exit.json"
        assert wait_until(exit_file.exists, timeout=5)
        assert json.loads(exit_file.read_text())["signal"] == signal.SIGTERM
        assert wait_until(lambda: monitor_pid(state, "tied") is None, timeout=5), "the monitor stayed"
    finally:
        if tether.poll() is None:
            tether.kill()
        tether.wait()
        if alive(rec["pid"]):
            os.killpg(rec["pid"], signal.SIGKILL)
