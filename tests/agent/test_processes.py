"""`node_agent.py process end`: only GPU processes the agent sees, SIGTERM then SIGKILL,
other users' processes refused unless allowed, the simulated node's sticky load removed."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent.test_node_agent import AGENT, ROOT, SIM_SPEC, json_lines
from tests.sim.simulators import copy_amdsmi

pytestmark = pytest.mark.timeout(90)

PROCESSES = ROOT / "console" / "agent" / "processes.py"


class Node:
    """A simulated CPX node: the fake amdsmi uploaded beside a state folder, busy on GPU 0 and 9."""

    def __init__(self, tmp_path: Path) -> None:
        self.module_dir = copy_amdsmi(tmp_path / "upload")
        self.state_dir = tmp_path / "sim-state"
        self.procs: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
        env["PATH"] = "/nonexistent"
        env["ROCM_CONSOLE_SIM_DIR"] = str(self.state_dir)
        env["ROCM_CONSOLE_SIM_SPEC"] = json.dumps(dict(SIM_SPEC, busy=[0, 9]))
        return env

    def agent(self, *args: str) -> tuple[int, dict]:
        argv = [sys.executable, str(AGENT), "process", *args, "--amdsmi-path", str(self.module_dir)]
        proc = subprocess.run(argv, cwd=ROOT, env=self.env(), capture_output=True, text=True, timeout=60)
        [line] = json_lines(proc.stdout)  # exactly one JSON line, whatever happened
        return proc.returncode, line

    def entries(self) -> list[dict]:
        return json.loads((self.state_dir / "processes.json").read_text())

    def add(self, entry: dict) -> None:
        entries = self.entries()
        entries.append(entry)
        (self.state_dir / "processes.json").write_text(json.dumps(entries))

    def spawn(self, code: str, argv: list[str] | None = None, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv or [sys.executable, "-c", code], **kwargs)
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:  # only what this test started, by its pid
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    # the first agent run creates the node (state.json and the sticky load of "busy")
    rc, line = n.agent("end", "--pid", "2")
    assert rc == 5 and line["reason"] == "not_gpu"
    yield n
    n.cleanup()


def test_the_module_is_python38():
    ast.parse(PROCESSES.read_text(), feature_version=(3, 8))


def test_sticky_load_is_removed_without_a_signal(node):
    [first, second] = [e["pid"] for e in node.entries()]
    rc, line = node.agent("end", "--pid", str(first), "--gpu", "0")
    assert rc == 0, line
    assert line == {
        "kind": "process_end",
        "pid": first,
        "name": "python3 (sim workload)",
        "gpus": [0],
        "user": None,
        "how": "simulated",
        "signal": None,
        "ended": True,
        "seconds": 0.0,
    }
    assert [e["pid"] for e in node.entries()] == [second]  # the other GPU's load stays
    # ended once: a second try names it as no GPU process any more
    rc, line = node.agent("end", "--pid", str(first))
    assert rc == 5 and line["reason"] == "not_gpu" and f"pid {first} is not a GPU process" in line["message"]


def test_an_arbitrary_pid_is_never_signalled(node):
    # a live process of this user that the node does not list on any GPU
    bystander = node.spawn("import time; time.sleep(60)")
    rc, line = node.agent("end", "--pid", str(bystander.pid))
    assert rc == 5 and line["reason"] == "not_gpu"
    assert "the agent sees 2" in line["message"]
    time.sleep(0.3)
    assert bystander.poll() is None  # untouched
    # a GPU process named on the wrong GPU is refused too
    sticky = node.entries()[1]["pid"]
    rc, line = node.agent("end", "--pid", str(sticky), "--gpu", "3")
    assert rc == 5 and line["message"] == f"pid {sticky} is not on GPU 3 (it uses GPU 9)"
    for pid in ("1", "0", "-5"):
        rc, line = node.agent("end", "--pid", pid)
        assert rc == 5 and line["reason"] == "invalid", line


def test_sigterm_ends_a_real_gpu_process(node):
    worker = node.spawn("import time; time.sleep(60)")
    node.add({"pid": worker.pid, "name": "python3 worker", "gpu": 5, "vram_bytes": 2**30})
    rc, line = node.agent("end", "--pid", str(worker.pid), "--gpu", "5", "--grace", "5")
    assert rc == 0, line
    assert (line["how"], line["signal"], line["ended"], line["gpus"]) == ("signal", "SIGTERM", True, [5])
    assert worker.wait(timeout=5) == -15


def test_sigkill_after_the_grace_period(node):
    # ignores SIGTERM: the agent waits the grace period, then kills it
    stubborn = node.spawn(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n",
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stubborn.stdout.readline().strip() == "ready"
    node.add({"pid": stubborn.pid, "name": "stubborn", "gpus": [1, 2], "vram_bytes": 2**30})
    started = time.monotonic()
    rc, line = node.agent("end", "--pid", str(stubborn.pid), "--grace", "1")
    assert rc == 0, line
    assert (line["signal"], line["ended"], line["gpus"]) == ("SIGKILL", True, [1, 2])
    assert line["seconds"] >= 1.0 and time.monotonic() - started >= 1.0
    assert stubborn.wait(timeout=5) == -9


@pytest.mark.skipif(os.getuid() != 0, reason="a process of another user needs root to start")
def test_another_users_process_is_refused_unless_allowed(node):
    # a GPU process of user nobody (65534): refused without the node's allow_kill_foreign
    # (the system's sleep: this test's Python may sit in a folder that user cannot read)
    foreign = node.spawn("", argv=[shutil.which("sleep") or "/bin/sleep", "60"], user=65534)
    node.add({"pid": foreign.pid, "name": "their-job", "gpu": 7, "vram_bytes": 2**30})
    rc, line = node.agent("end", "--pid", str(foreign.pid))
    assert rc == 5 and line["reason"] == "foreign"
    assert "belongs to user nobody" in line["message"] and "allow_kill_foreign = true" in line["message"]
    time.sleep(0.3)
    assert foreign.poll() is None  # still running
    rc, line = node.agent("end", "--pid", str(foreign.pid), "--allow-foreign")
    assert rc == 0 and line["user"] == "nobody" and line["ended"], line
    assert foreign.wait(timeout=5) == -15


def test_an_nvidia_node_ends_its_sticky_load_through_nvml(tmp_path):
    # the same operation on a simulated H100 node: the processes come from (simulated) NVML
    up = tmp_path / "nvidia"
    up.mkdir()
    for name in ("pynvml.py", "nvml_errors.py", "statefiles.py", "faults.py"):
        shutil.copy(ROOT / "console" / "sim" / name, up / name)  # real copies, as the bundle ships them
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_CONSOLE_SIM")}
    env.update(
        PATH="/nonexistent",
        ROCM_CONSOLE_SIM_DIR=str(tmp_path / "state"),
        ROCM_CONSOLE_SIM_SPEC=json.dumps({"gpu": "H100", "count": 8, "seed": 4, "busy": [0, 1], "mig": [7]}),
    )

    def agent(*args: str) -> tuple[int, dict]:
        argv = [sys.executable, str(AGENT), "process", "end", *args, "--amdsmi-path", str(up)]
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        [line] = json_lines(proc.stdout)
        return proc.returncode, line

    rc, line = agent("--pid", "2")
    assert rc == 5 and line["message"].startswith("pid 2 is not a GPU process on this node (the agent sees 2: ")
    pid = int(line["message"].split(": ")[1].split(",")[0])
    rc, line = agent("--pid", str(pid))
    assert rc == 0 and line["how"] == "simulated" and line["ended"], line
    rc, line = agent("--pid", str(pid))
    assert rc == 5 and "the agent sees 1: " in line["message"]
