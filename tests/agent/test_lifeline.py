"""The lifeline: what a demo console starts on its local nodes ends when the console is gone;
without one (real nodes) an instance outlives whoever started it."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.agent.test_supervisor import AGENT, PY, ROOT, alive, wait_until

LIFELINE = ROOT / "console" / "agent" / "lifeline.py"
SIM_COPY = ROOT / "console" / "sim" / "vllm" / "lifeline.py"
SERVER = "import time\nprint('up', flush=True)\nwhile True: time.sleep(0.1)"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def load():
    spec = importlib.util.spec_from_file_location("lifeline_under_test", LIFELINE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_simulator_ships_the_same_lifeline():
    # sim/vllm imports nothing outside its folder, so it carries its own copy.
    assert SIM_COPY.read_bytes() == LIFELINE.read_bytes()


def test_owner_alive_until_it_ends_and_a_reused_pid_is_not_the_owner():
    lifeline = load()
    owner = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    try:
        token = lifeline.parse(lifeline.token_of(owner.pid))
        assert token is not None and lifeline.owner_alive(token)
        # Same pid, another start time: a process that merely reused the number.
        assert not lifeline.owner_alive((owner.pid, str(int(token[1]) + 1)))
    finally:
        owner.kill()
        owner.wait()
    assert not lifeline.owner_alive(token)
    assert lifeline.parse("") is None and lifeline.parse("x:1") is None and lifeline.parse("1:5") is None


def start_instance(state: Path, name: str, env: dict) -> dict:
    spec = {"name": name, "argv": [PY, "-c", SERVER], "env": {}}
    out = subprocess.run(
        [PY, str(AGENT), "instance", "--state-dir", str(state), "start"],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    [rec] = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert rec["state"] == "running", rec
    return rec


def monitor_pid(state: Path, name: str) -> int | None:
    """The instance's monitor: the live process whose command line names its folder."""
    folder = str(state / "instances" / name)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"instance-monitor" in cmd and folder.encode() in cmd and alive(int(entry)):
                return int(entry)
    return None


def test_an_instance_ends_with_its_console_and_its_exit_is_recorded(tmp_path):
    state = tmp_path / "state"
    console = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    env = dict(os.environ, ROCM_CONSOLE_LIFELINE=load().token_of(console.pid))
    rec = start_instance(state, "demo", env)
    try:
        time.sleep(1.5)
        assert alive(rec["pid"]), "the instance ended while its console ran"
        console.kill()  # SIGKILL: nothing of the console runs any clean-up
        console.wait()
        assert wait_until(lambda: not alive(rec["pid"]), timeout=8), "the instance outlived its console"
        exit_file = state / "instances" / "demo" / "exit.json"
        assert wait_until(exit_file.exists, timeout=5)
        assert json.loads(exit_file.read_text())["signal"] == signal.SIGTERM
        assert wait_until(lambda: monitor_pid(state, "demo") is None, timeout=5), "the monitor stayed"
    finally:
        if alive(rec["pid"]):
            os.killpg(rec["pid"], signal.SIGKILL)


def test_sigterm_to_the_monitor_ends_the_instance_under_a_lifeline(tmp_path):
    # What the console does on a clean quit: SIGTERM to each process it owns, by pid.
    state = tmp_path / "state"
    env = dict(os.environ, ROCM_CONSOLE_LIFELINE=load().token_of(os.getpid()))
    rec = start_instance(state, "quit", env)
    try:
        monitor = monitor_pid(state, "quit")
        assert monitor is not None
        os.kill(monitor, signal.SIGTERM)
        assert wait_until(lambda: not alive(rec["pid"]), timeout=8)
        assert wait_until((state / "instances" / "quit" / "exit.json").exists, timeout=5)
    finally:
        if alive(rec["pid"]):
            os.killpg(rec["pid"], signal.SIGKILL)


def test_without_a_lifeline_an_instance_outlives_its_starter(tmp_path):
    # Real nodes: the console (here a process that ends at once) may go; the instance stays.
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "ROCM_CONSOLE_LIFELINE"}
    starter = subprocess.Popen([PY, "-c", "pass"])
    starter.wait()
    rec = start_instance(state, "real", env)
    try:
        time.sleep(2.5)  # longer than a lifeline's look
        assert alive(rec["pid"])
    finally:
        os.killpg(rec["pid"], signal.SIGKILL)


def test_the_simulated_server_ends_with_its_console_and_binds_loopback(tmp_path):
    console = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    env = dict(
        os.environ,
        ROCM_CONSOLE_LIFELINE=load().token_of(console.pid),
        ROCM_CONSOLE_SIM_DIR=str(tmp_path / "sim"),
    )
    server = subprocess.Popen(
        [PY, "-m", "console.sim.vllm", "serve", "tiny", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        end = time.time() + 20
        while time.time() < end:
            line = server.stdout.readline()
            lines.append(line)
            if "Starting vLLM server" in line or not line:
                break
        assert any("listening on 127.0.0.1 instead of 0.0.0.0" in ln for ln in lines), "".join(lines)
        console.kill()
        console.wait()
        assert server.wait(timeout=10) is not None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if console.poll() is None:
            console.kill()
            console.wait()
