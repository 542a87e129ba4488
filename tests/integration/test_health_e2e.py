"""GPU health end to end over a real OpenSSH sshd on 127.0.0.1, on a simulated node.

An uncorrectable ECC error injected into the simulated amdsmi (faults.json, written by
`python -m console.sim.faults`) while the console's fleet streams the node's telemetry:

- the GPU turns fail within one health interval (the profile's [health] interval = 1 s);
- the event is written to the store (store.sqlite3) in the console's data dir;
- the [[alert]] rule runs its command (the test reads the JSON it got on stdin) and POSTs
  to a webhook receiver on 127.0.0.1 (the test reads the body and the bearer token, which
  comes from an environment variable and is written nowhere);
- `rocm-console serve start` on that GPU is refused in one line naming the GPU and reason.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.events import event_to_dict
from console.core.health import FAIL
from console.core.health_profile import health_settings
from console.core.profiles import load_profile
from console.services.fleet import FleetTelemetry, agent_reads_health
from console.services.health_watch import HealthWatch
from console.services.history import History
from tests.helpers import wait_for
from tests.services.webhook_receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "e2e-webhook-token-7f3a91"
HEALTH_INTERVAL = 1.0
SAMPLE_INTERVAL = 0.5

pytestmark = pytest.mark.skipif(
    not (ROOT / "console" / "sim" / "faults.py").exists() or not agent_reads_health(),
    reason="needs the agent's health reader and the simulated faults (console/sim/faults.py, issue O's agent side)",
)


def write_profile(path: Path, sshd, recorder: list[str], webhook: str) -> Path:
    path.write_text(
        f"""
[nodes.ssh-node]
host = "{sshd.host}"
port = {sshd.port}
user = "{sshd.user}"
identity_file = "{sshd.identity_file}"
known_hosts = "{sshd.known_hosts}"
python = "/usr/bin/python3"
state_dir = "{path.parent / "node-state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", memory_partition = "NPS1", seed = 5 }}

[health]
interval = {HEALTH_INTERVAL:g}

[[alert]]
name = "gpu-fail"
when = "health == fail"
command = {json.dumps(recorder)}
webhook = "{webhook}"
token_env = "E2E_ALERT_TOKEN"
"""
    )
    return path


def recorder_command(tmp_path: Path) -> tuple[list[str], Path]:
    out = tmp_path / "alert-stdin.jsonl"
    script = tmp_path / "record_alert.py"
    script.write_text(
        f"import json, sys\nwith open({str(out)!r}, 'a') as fh:\n    fh.write(json.dumps(json.load(sys.stdin)) + '\\n')\n"
    )
    return [sys.executable, str(script)], out


@pytest.mark.timeout(240)
async def test_injected_uncorrectable_ecc_goes_from_node_to_event_alert_and_refusal(
    sshd, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    env = {"HOME": str(home), "ROCM_CONSOLE_DATA_DIR": str(data), "E2E_ALERT_TOKEN": TOKEN}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    recorder, stdin_log = recorder_command(tmp_path)
    with Receiver() as receiver:
        path = write_profile(tmp_path / "lab.toml", sshd, recorder, receiver.url)
        profile = load_profile([path])
        settings = health_settings(profile)
        assert settings.rules.interval == HEALTH_INTERVAL
        [node] = profile.nodes
        fleet = FleetTelemetry(profile.nodes, interval=SAMPLE_INTERVAL)
        history = History.of(profile)  # the console's timeline: the data dir's store, as a face opens it
        watch = HealthWatch(fleet, settings, events=history.events)
        assert history.where == str(data / "store.sqlite3")
        await watch.start()
        await fleet.start()
        try:
            assert await wait_for(lambda: len(fleet.snapshot("ssh-node").gpu_health) == 8, timeout=60)
            assert fleet.snapshot("ssh-node").health_of(3).verdict.state != FAIL
            sim_dir = Path(node.state_dir) / "sim" / node.name
            before = time.time()
            subprocess.run(
                [sys.executable, "-m", "console.sim.faults", str(sim_dir), "add", "3", "ecc_uncorrectable"],
                cwd=ROOT,
                check=True,
                capture_output=True,
                timeout=30,
            )
            injected = time.time()  # the fault is on the node's disk by now (a Python start-up after `before`)
            assert await wait_for(lambda: fleet.snapshot("ssh-node").health_of(3).verdict.state == FAIL, timeout=15)
            sick = fleet.snapshot("ssh-node").health_of(3)
            # read on the node within one health interval (and the tick it fell in) of the fault, with a
            # second's slack for an agent tick that runs late on a loaded machine
            assert sick.since is not None and before <= sick.since <= injected + HEALTH_INTERVAL + SAMPLE_INTERVAL + 1.0
            assert re.fullmatch(r"\d+ uncorrectable ECC errors?", sick.verdict.reasons), sick.verdict.reasons
            assert all(h.verdict.state != FAIL for h in fleet.snapshot("ssh-node").gpu_health if h.physical != 3)
            assert await wait_for(lambda: stdin_log.exists() and stdin_log.read_text().strip(), timeout=20)
            assert await wait_for(lambda: len(receiver.received) >= 1, timeout=20)
        finally:
            await fleet.stop()
            await watch.stop()
        [got] = receiver.received

    # the alert command read the alert as JSON on stdin
    [alert] = [json.loads(line) for line in stdin_log.read_text().splitlines()]
    assert (alert["alert"], alert["state"], alert["node"], alert["gpu"]) == ("gpu-fail", "fired", "ssh-node", 3)
    assert alert["text"] == "[rocm-console] FIRED gpu-fail: ssh-node GPU 3: health == fail"
    # the webhook got the same alert, with the token from the environment
    assert got.path == "/hooks/alerts" and got.headers["authorization"] == f"Bearer {TOKEN}"
    body = got.json()
    assert body["text"] == alert["text"] and body["gpu"] == 3 and body["state"] == "fired"
    # the timeline in the data dir's store: the ECC increment, the health change, the alert
    events = history.events.read(node="ssh-node")
    ecc = [e for e in events if e.kind == "gpu.ecc" and e.gpu == 3]
    assert ecc and ecc[0].severity == "fail" and "uncorrectable ECC" in ecc[0].message
    health = [e for e in events if e.kind == "gpu.health" and e.gpu == 3]
    assert health and health[0].details["to"] == FAIL
    assert any(e.kind == "alert.fired" and e.gpu == 3 for e in events)
    assert any(e.kind == "node.up" for e in events)
    # the token is written nowhere: not in the log, not in what the command read, not in our logs
    assert TOKEN not in "\n".join(json.dumps(event_to_dict(e)) for e in history.events.read())
    assert not (data / "events.jsonl").exists()  # every event went to the store
    history.close()
    assert TOKEN not in stdin_log.read_text() and TOKEN not in caplog.text

    # serve start on the sick GPU: refused in one line naming the GPU and the reason, nothing started
    cli_env = dict(os.environ, **env)
    start = subprocess.run(
        [sys.executable, "-m", "console", "serve", "start", "--profile", str(path), "--preset", "tiny", "--gpus", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env,
    )
    assert start.returncode == 1, start.stdout + start.stderr
    lines = start.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in start.stderr, start.stderr
    assert re.search(r"ssh-node: GPU 3 is in fail health: \d+ uncorrectable ECC errors? \(--force", lines[0]), lines[0]
    assert TOKEN not in start.stdout + start.stderr
    listing = subprocess.run(
        [sys.executable, "-m", "console", "serve", "list", "--profile", str(path), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env,
    )
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout)["instances"] == []
