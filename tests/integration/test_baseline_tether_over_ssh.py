"""W2 item 11 over a real OpenSSH sshd: a `baseline save` killed with SIGKILL leaves no instance
holding the node's GPUs. The suite's instance carries the lifeline of the command's tether (a
`node_agent.py tether` the console keeps open over its SSH connection): the console dies, its TCP
connection closes, sshd closes the channel, the tether reads EOF and ends, and the node's
supervisor ends the instance within seconds. The node's processes are found by pid in its state
folder; nothing is killed by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_named_things_over_ssh import ROOT
from tests.integration.test_status_over_ssh import write_profile

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]

SUITE = ROOT / "profiles" / "suites" / "demo.toml"  # serve preset `tiny`: the simulated vLLM
ENDS_WITHIN = 20.0  # seconds: sshd's EOF at once, the supervisor's look each second, SIGTERM, 3 s, SIGKILL


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def wait_for(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


@pytest.mark.timeout(300)
def test_a_save_killed_with_sigkill_leaves_no_instance_on_the_ssh_node(sshd, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", sshd)
    folder = tmp_path / "node-state" / "instances" / "baseline-demo"
    out = tmp_path / "save.out"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"),
    }
    with out.open("wb") as sink:
        save = subprocess.Popen(
            [sys.executable, "-m", "console", "baseline", "save", "tethered", "--profile", str(profile),
             "--node", "ssh-node", "--suite", str(SUITE)],
            cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    instance = tether = None
    try:
        # up: the console said the suite's instance is ready (its serving repeats run now)
        assert wait_for(lambda: b"baseline-demo ready" in out.read_bytes() or save.poll() is not None, 180)
        assert save.poll() is None, out.read_text()
        instance = int((folder / "pid").read_text())
        lifeline = json.loads((folder / "spec.json").read_text())["env"].get("ROCM_CONSOLE_LIFELINE", "")
        tether = int(lifeline.split(":")[0]) if lifeline else None
        if tether is not None:  # the node's own process, not one of this machine's console
            assert alive(tether) and "tether" in cmdline(tether) and "baseline" not in " ".join(cmdline(tether))
        time.sleep(2)  # the supervisor has looked at its lifeline: nothing ends while the console runs
        assert alive(instance)

        save.send_signal(signal.SIGKILL)  # nothing of the console runs any clean-up
        save.wait(10)
        assert wait_for(lambda: not alive(instance), ENDS_WITHIN), f"the instance {instance} outlived its command"
        assert wait_for((folder / "exit.json").exists, 5), "the instance's end was not recorded"
        assert tether is not None and not alive(tether), "the tether outlived the console's SSH connection"
    finally:
        if save.poll() is None:
            save.kill()
        save.wait(10)
        for pid in (instance, tether):  # leave nothing behind even when the test fails: by pid
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)
