"""The node-side instance supervisor, driven through the agent's CLI as the console does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "console" / "agent" / "node_agent.py"
PY = sys.executable

# A "server" that starts a child in its own group (like vLLM's engine core) and
# logs; it ignores nothing, so SIGINT ends both.
SERVER = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.1)"])
open(os.environ["CHILD_PID_FILE"], "w").write(str(child.pid))
print("server up", os.environ.get("GREETING", ""), flush=True)
while True:
    time.sleep(0.1)
"""


def agent(state: Path, *args: str, input: str | None = None, timeout: float = 60) -> list[dict]:
    proc = subprocess.run(
        [PY, str(AGENT), "instance", "--state-dir", str(state), *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def start(state: Path, name: str, argv: list[str], env: dict | None = None, **extra) -> dict:
    spec = {"name": name, "argv": argv, "env": env or {}, **extra}
    [rec] = agent(state, "start", input=json.dumps(spec))
    return rec


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(pred, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def state(tmp_path):
    yield tmp_path / "state"
    # Never leave anything running: stop every instance we started, by its group.
    for rec in agent(tmp_path / "state", "list"):
        if rec.get("kind") == "instance" and rec["state"] == "running":
            try:
                os.killpg(rec["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_start_list_logs_stop_leaves_no_process(state, tmp_path):
    child_file = tmp_path / "child.pid"
    rec = start(
        state,
        "srv",
        [PY, "-c", SERVER],
        env={"CHILD_PID_FILE": str(child_file), "GREETING": "hi there"},
        port=None,
        gpus=[0, 1],
    )
    assert rec["state"] == "running" and rec["pid"] > 0
    assert wait_until(lambda: child_file.exists() and child_file.read_text())
    child = int(child_file.read_text())
    assert wait_until(lambda: b"server up hi there" in (state / "instances" / "srv" / "log").read_bytes())
    [listed] = [r for r in agent(state, "list") if r.get("kind") == "instance"]
    assert listed["name"] == "srv" and listed["state"] == "running" and listed["spec"]["gpus"] == [0, 1]
    out = subprocess.run(
        [PY, str(AGENT), "instance", "--state-dir", str(state), "logs", "srv"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "server up hi there" in out
    [stopped] = agent(state, "stop", "srv", "--int-timeout", "5")
    assert stopped["state"] == "exited" and stopped["stopped_by"] == "SIGINT"
    assert not alive(rec["pid"]) and not alive(child)  # the whole group is gone: no orphans


def test_stop_escalates_to_sigkill_when_ignored(state):
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('up', flush=True)\nwhile True: time.sleep(0.1)"
    rec = start(state, "stubborn", [PY, "-c", stubborn])
    assert wait_until(lambda: b"up" in (state / "instances" / "stubborn" / "log").read_bytes())
    t0 = time.time()
    [stopped] = agent(state, "stop", "stubborn", "--int-timeout", "0.5", "--term-timeout", "0.5")
    assert stopped["stopped_by"] == "SIGKILL" and stopped["exit_signal"] == 9
    assert time.time() - t0 < 15 and not alive(rec["pid"])


def test_crash_records_exit_code_and_log(state):
    start(state, "crash", [PY, "-c", "import sys; print('ValueError: boom', flush=True); sys.exit(3)"])
    assert wait_until(lambda: (state / "instances" / "crash" / "exit.json").exists())
    [rec] = [r for r in agent(state, "list") if r.get("kind") == "instance"]
    assert rec["state"] == "exited" and rec["exit_code"] == 3
    tail = subprocess.run(
        [PY, str(AGENT), "instance", "--state-dir", str(state), "logs", "crash", "--lines", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert tail.strip() == "ValueError: boom"


def test_secrets_never_stored_and_metacharacters_literal(state, tmp_path):
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}); `id` 'q' \"d\""
    start(
        state,
        "lit",
        [PY, "-c", "import os,sys; print(repr(sys.argv[1]), os.environ['HF_TOKEN'][:2], flush=True)", evil],
        env={"HF_TOKEN": "hf_secretvalue", "VLLM_ROCM_USE_AITER": "1"},
    )
    log = state / "instances" / "lit" / "log"
    assert wait_until(lambda: (state / "instances" / "lit" / "exit.json").exists())
    assert repr(evil) in log.read_text() and "hf" in log.read_text()
    assert not marker.exists()
    spec_text = (state / "instances" / "lit" / "spec.json").read_text()
    assert "hf_secretvalue" not in spec_text and '"HF_TOKEN": "***"' in spec_text
    assert not (state / "instances" / "lit" / ".env.json").exists()


def test_refusals_are_one_line_errors(state):
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen()
    port = sock.getsockname()[1]
    try:
        [err] = agent(state, "start", input=json.dumps({"name": "p", "argv": [PY, "-c", "pass"], "port": port}))
        assert err["kind"] == "error" and f"port {port} is already in use" in err["message"]
    finally:
        sock.close()
    [err] = agent(state, "start", input=json.dumps({"name": "../etc", "argv": ["true"]}))
    assert "bad instance name" in err["message"]
    [err] = agent(state, "start", input=json.dumps({"name": "x", "argv": "vllm serve"}))
    assert "argv must be a non-empty list" in err["message"]
    start(state, "dup", [PY, "-c", "import time; time.sleep(30)"])
    [err] = agent(state, "start", input=json.dumps({"name": "dup", "argv": ["true"]}))
    assert "already running" in err["message"]
    agent(state, "stop", "dup", "--int-timeout", "2")
    [err] = agent(state, "logs", "nope")
    assert "no instance named nope" in err["message"]


def test_follow_ends_when_instance_exits(state):
    start(
        state, "short", [PY, "-c", "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.2)"]
    )
    t0 = time.time()
    out = subprocess.run(
        [PY, str(AGENT), "instance", "--state-dir", str(state), "logs", "short", "--follow"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert out.splitlines() == ["line 0", "line 1", "line 2"]
    assert time.time() - t0 < 10


def test_foreign_vllm_serve_is_listed_as_unmanaged(state, tmp_path):
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(f"#!{PY}\nimport time\ntime.sleep(30)\n")
    fake.chmod(0o755)
    proc = subprocess.Popen([str(fake), "serve", "some/model", "--port", "8123"])
    try:
        assert wait_until(
            lambda: any(r.get("kind") == "foreign" and r["pid"] == proc.pid for r in agent(state, "list")), timeout=10
        )
    finally:
        proc.kill()
        proc.wait()
