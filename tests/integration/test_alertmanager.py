"""`rocm-console watch` posting to a real Alertmanager (Debian's prometheus-alertmanager) whose
webhook receiver is a server in this process (tests/integration/alertmanager_server.py).

A fault written to a simulated node's fault file reaches the receiver within the health
interval + 10 s, once, and resolves when cleared; with Alertmanager stopped the watcher says so
once, keeps the alert and delivers it when Alertmanager starts; two watchers of one profile
(an HA pair: two data folders, as on two machines) make one notification. Each test has its own
alertname, so they share the one Alertmanager."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.cli_helpers import ROOT
from tests.helpers import free_port, wait_until
from tests.integration.alertmanager_server import AlertmanagerServer

HEALTH_INTERVAL = 1.0


def _profile(tmp_path: Path, name: str, url: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}

[health]
interval = {HEALTH_INTERVAL:g}

[[alert]]
name = "{name}"
when = "health == fail"
severity = "fail"

[alertmanager]
url = "{url}"
resend_interval = 1
""")
    return path


class _Watch:
    """One `rocm-console watch` with its own data folder (its own machine) and stderr file."""

    def __init__(self, profile: Path, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.stderr = folder / "stderr.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1", ROCM_CONSOLE_DATA_DIR=str(folder / "data"))
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "console", "watch", "--profile", str(profile)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def said(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _fault(tmp_path: Path, *args: str) -> None:
    sim_dir = tmp_path / "state" / "sim" / "sim"
    subprocess.run([sys.executable, "-m", "console.sim.faults", str(sim_dir), *args], check=True, cwd=ROOT)


def _started(*watches: _Watch) -> bool:
    return wait_until(lambda: all("node sim live" in w.said() for w in watches), timeout=60)


def test_a_fault_reaches_the_receiver_once_and_resolves_when_cleared(tmp_path, alertmanager):
    receiver = alertmanager.receiver
    watch = _Watch(_profile(tmp_path, "am-fault", alertmanager.url), tmp_path / "w")
    try:
        assert _started(watch), watch.said()
        _fault(tmp_path, "add", "3", "ecc_uncorrectable")
        injected = time.monotonic()
        assert wait_until(lambda: receiver.alerts("firing", alertname="am-fault"), timeout=HEALTH_INTERVAL + 10), (
            watch.said()
        )
        assert time.monotonic() - injected <= HEALTH_INTERVAL + 10
        (alert,) = receiver.alerts("firing", alertname="am-fault")
        assert alert["labels"] == {"alertname": "am-fault", "node": "sim", "gpu": "3", "severity": "critical"}
        assert alert["annotations"]["summary"].startswith("FIRED am-fault: sim GPU 3")
        time.sleep(4)  # four re-sends and group intervals later: still one notification
        assert len(receiver.alerts("firing", alertname="am-fault")) == 1
        _fault(tmp_path, "clear")
        assert wait_until(lambda: receiver.alerts("resolved", alertname="am-fault"), timeout=HEALTH_INTERVAL + 10)
        time.sleep(2)
        assert len(receiver.alerts("resolved", alertname="am-fault")) == 1
        assert len(receiver.alerts("firing", alertname="am-fault")) == 1
    finally:
        watch.stop()
    assert watch.proc.returncode == 0, watch.said()


def test_with_alertmanager_stopped_the_watcher_retries_and_loses_no_alert(tmp_path, alertmanager):
    receiver = alertmanager.receiver
    late = AlertmanagerServer(tmp_path / "late-am", receiver, port=free_port())  # not started yet
    watch = _Watch(_profile(tmp_path, "am-late", late.url), tmp_path / "w")
    try:
        assert _started(watch), watch.said()
        _fault(tmp_path, "add", "5", "ecc_uncorrectable")
        assert wait_until(lambda: "cannot post" in watch.said(), timeout=HEALTH_INTERVAL + 10), watch.said()
        time.sleep(4)  # several retries with backoff, all while Alertmanager is down
        late.start()
        assert wait_until(lambda: receiver.alerts("firing", alertname="am-late"), timeout=40), watch.said()
        (alert,) = receiver.alerts("firing", alertname="am-late")
        assert (alert["labels"]["node"], alert["labels"]["gpu"]) == ("sim", "5")
        assert wait_until(lambda: "works again" in watch.said(), timeout=5)
        said = watch.said()
        assert said.count("cannot post") == 1, said  # said once, not once per retry
        assert said.count("works again") == 1, said
    finally:
        watch.stop()
        late.stop()
    assert watch.proc.returncode == 0, watch.said()


def test_two_watchers_of_one_profile_make_one_notification(tmp_path, alertmanager):
    receiver = alertmanager.receiver
    profile = _profile(tmp_path, "am-pair", alertmanager.url)
    first, second = _Watch(profile, tmp_path / "machine-a"), _Watch(profile, tmp_path / "machine-b")
    try:
        assert _started(first, second), first.said() + second.said()
        _fault(tmp_path, "add", "1", "ecc_uncorrectable")
        # both watchers see it and post it (each says so on its stderr) ...
        assert wait_until(lambda: all("FIRED am-pair" in w.said() for w in (first, second)), timeout=20)
        assert wait_until(lambda: receiver.alerts("firing", alertname="am-pair"), timeout=10)
        time.sleep(4)  # both keep re-sending it every second
        # ... and the receiver hears of it once
        assert len(receiver.alerts("firing", alertname="am-pair")) == 1
        held = [a for a in alertmanager.alerts() if a["labels"]["alertname"] == "am-pair"]
        assert len(held) == 1 and held[0]["status"]["state"] == "active"
    finally:
        first.stop()
        second.stop()
