"""`rocm-console events` and `rocm-console alerts list|test` as a user runs them
(`python -m console ...`), each test with its own HOME and data dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.events import Event
from tests.cli.cli_helpers import ROOT, StoreEvents, one_line_error, run
from tests.services.webhook_receiver import Receiver

TOKEN = "tok-9f8e7d6c5b4a-secret"


@pytest.fixture
def env(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


@pytest.fixture
def log(env) -> StoreEvents:
    """The timeline every command reads: the data folder's store."""
    return StoreEvents(Path(env["ROCM_CONSOLE_DATA_DIR"]))


def seed(log: StoreEvents) -> float:
    now = time.time()
    log.append(
        [
            Event(now - 7200, "node.down", "mi300-a", severity="fail", message="node down (was live)"),
            Event(
                now - 600,
                "gpu.throttle_start",
                "mi300-a",
                3,
                severity="warn",
                message="throttle episode started (power cap)",
            ),
            Event(now - 300, "instance.failed", "mi300-b", 0, "llama", "fail", "exit 1: CUDA out of memory"),
            Event(now - 60, "gpu.throttle_end", "mi300-a", 3, message="throttle episode ended after 540 s (power cap)"),
        ]
    )
    return now


# ---------------------------------------------------------------- events


def test_events_newest_first(env, log):
    seed(log)
    proc = run("events", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["TIME", "SEVERITY", "KIND", "NODE", "GPU", "INSTANCE", "MESSAGE"]
    kinds = [line.split()[3] for line in lines[1:]]
    assert kinds == ["gpu.throttle_end", "instance.failed", "gpu.throttle_start", "node.down"]
    assert lines[2].endswith("exit 1: CUDA out of memory") and " llama " in lines[2]


def test_events_filters_and_json(env, log):
    now = seed(log)
    proc = run("events", "--since", "1h", "--node", "mi300-a", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [e["kind"] for e in got] == ["gpu.throttle_end", "gpu.throttle_start"]
    assert got[0]["gpu"] == 3 and abs(got[0]["time"] - (now - 60)) < 0.01
    proc = run("events", "--kind", "instance", "--json", env=env)
    assert [e["instance"] for e in json.loads(proc.stdout)] == ["llama"]
    proc = run("events", "--kind", "gpu", "--limit", "1", env=env)
    assert len(proc.stdout.splitlines()) == 2 and "throttle_end" in proc.stdout
    assert one_line_error(proc) == "rocm-console: the newest 1 event shown; --limit N or --since narrow or widen it"
    proc = run("events", "--kind", "alert", env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("no events matching the filters in ")
    # A node neither the profile nor the log knows is a typo, as in every other command.
    proc = run("events", "--node", "nowhere", env=env)
    assert proc.returncode == 2 and "--node 'nowhere': no such node" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_events_bad_input_is_one_line_exit_2(env):
    for args, expected in (
        (("--since", "5x"), "rocm-console: --since '5x': expected a duration (30s, 15m, 1h, 7d)"),
        (("--kind", "gpux"), "rocm-console: --kind 'gpux': unknown kind"),
        (("--limit", "0"), "rocm-console: --limit 0: must be at least 1"),
        (("--timeout", "3"), "rocm-console: --timeout only applies with --follow"),
    ):
        proc = run("events", *args, env=env)
        assert proc.returncode == 2
        assert one_line_error(proc).startswith(expected)


def test_events_follow_prints_new_events_until_the_timeout(env, log):
    seed(log)
    cmd = [sys.executable, "-m", "console", "events", "--follow", "--json", "--kind", "gpu", "--timeout", "6"]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        first = [json.loads(proc.stdout.readline()) for _ in range(2)]  # the backlog, oldest first
        assert [e["kind"] for e in first] == ["gpu.throttle_start", "gpu.throttle_end"]
        log.append(Event(time.time(), "node.up", "mi300-a", message="filtered out"))
        log.append(Event(time.time(), "gpu.xid", "mi300-a", 5, severity="warn", message="XID 79"))
        fresh = json.loads(proc.stdout.readline())
        assert (fresh["kind"], fresh["gpu"], fresh["message"]) == ("gpu.xid", 5, "XID 79")
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and err == "" and out == ""
    assert 5.5 < time.monotonic() - started < 25


def test_events_follow_ends_quietly_on_ctrl_c(env, log):
    seed(log)
    cmd = [sys.executable, "-m", "console", "events", "--follow", "--kind", "node"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().split()[0] == "TIME"
        assert "node.down" in proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and err == "" and out == ""


# ---------------------------------------------------------------- alerts


def alert_profile(tmp_path: Path, receiver_url: str, out: Path, statuses_ok: bool = True) -> Path:
    pager = tmp_path / "pager.py"
    pager.write_text(f"import sys\nopen({str(out)!r}, 'w').write(sys.stdin.read())\n")
    path = tmp_path / "alerts.toml"
    path.write_text(
        f"""
[[alert]]
name = "gpu-sick"
when = "health == fail"
command = [{json.dumps(sys.executable)}, {json.dumps(str(pager))}]

[[alert]]
name = "node-down"
when = "node down for 60s"
webhook = "{receiver_url}"
token_env = "ALERTS_TOKEN"
"""
    )
    return path


def test_alerts_test_fires_through_every_action(tmp_path, env, log):
    out = tmp_path / "pager.json"
    with Receiver() as receiver:
        profile = alert_profile(tmp_path, receiver.url, out)
        proc = run("alerts", "test", "--profile", str(profile), env={**env, "ALERTS_TOKEN": TOKEN})
        got = receiver.wait_for(1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"ok    gpu-sick  command: {sys.executable} exited with 0",
        f"ok    node-down  webhook: {receiver.url.rsplit('/hooks', 1)[0]}: HTTP 200",
    ]
    assert json.loads(out.read_text())["state"] == "test"
    assert len(got) == 1 and got[0].headers["authorization"] == f"Bearer {TOKEN}"
    body = got[0].json()
    assert body["state"] == "test" and body["text"].startswith("[rocm-console] TEST node-down: ")
    assert TOKEN not in proc.stdout + proc.stderr
    # Each test firing is on the timeline.
    assert sorted(e.details["rule"] for e in log.read(kind="alert.fired")) == ["gpu-sick", "node-down"]


def test_alerts_test_one_rule_and_failures(tmp_path, env):
    out = tmp_path / "pager.json"
    with Receiver(statuses=[500] * 10) as receiver:
        profile = alert_profile(tmp_path, receiver.url, out)
        proc = run(
            "alerts", "test", "--profile", str(profile), "--rule", "node-down", env={**env, "ALERTS_TOKEN": TOKEN}
        )
        assert len(receiver.received) == 3  # the first try and two retries
    assert proc.returncode == 1
    assert one_line_error(proc) == (
        f"FAIL  node-down  webhook: {receiver.url.rsplit('/hooks', 1)[0]}: HTTP 500 (after 3 attempts)"
    )
    assert not out.exists()  # the other rule was not fired
    proc = run("alerts", "test", "--profile", str(profile), "--rule", "node-down", env=env)  # no token set
    assert proc.returncode == 1 and one_line_error(proc).endswith("token_env ALERTS_TOKEN is not set")


def test_alerts_bad_input(tmp_path, env):
    with Receiver() as receiver:
        profile = alert_profile(tmp_path, receiver.url, tmp_path / "x.json")
    proc = run("alerts", "test", "--profile", str(profile), "--rule", "nope", env=env)
    assert proc.returncode == 2
    assert one_line_error(proc) == "rocm-console: --rule 'nope': no such rule (known: gpu-sick, node-down)"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[alert]]\nname = "x"\nwhen = "temp_junction_c > 95 for 30x"\n')
    proc = run("alerts", "test", "--profile", str(bad), env=env)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"rocm-console: {bad}:3: [[alert]] key 'when': rule 'x': '30x' is not a duration (e.g. 30s, 5m, 1h)"
        " (in 'temp_junction_c > 95 for 30x')"
    )
    empty = tmp_path / "empty.toml"
    empty.write_text('[nodes.a]\nhost = "a"\n')
    proc = run("alerts", "test", "--profile", str(empty), env=env)
    assert proc.returncode == 2 and one_line_error(proc).startswith("rocm-console: no [[alert]] rules in the profile")


def test_alerts_list(tmp_path, env):
    with Receiver() as receiver:
        profile = alert_profile(tmp_path, receiver.url, tmp_path / "x.json")
    proc = run("alerts", "list", "--profile", str(profile), env=env)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu-sick   health == fail  -> command ")
    assert lines[1] == f"node-down  node down for 60s  -> webhook {receiver.url.rsplit('/hooks', 1)[0]}"
    data = json.loads(run("alerts", "list", "--json", "--profile", str(profile), env=env).stdout)
    assert [(r["name"], r["actions"]) for r in data] == [("gpu-sick", ["command"]), ("node-down", ["webhook"])]
