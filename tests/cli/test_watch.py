"""`rocm-console watch` as a service manager runs it: in a subprocess, on the demo or a profile
of simulated nodes. A fault injected through the simulator's fault file reaches `rocm-console
events` and alert-states.json; SIGTERM ends the watcher and every process it started (checked
by pid); SIGKILL and a restart do not fire the open alert again; a second watcher is refused in
one line; --install-systemd writes the unit and prints how to enable it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from console.services.watcher_presence import read_alert_states
from tests.cli.cli_helpers import ROOT, one_line_error, run
from tests.helpers import wait_until


def _profile(tmp_path: Path, extra: str = "") -> Path:
    alerts = tmp_path / "alerts.jsonl"
    path = tmp_path / "lab.toml"
    path.write_text(f"""
[nodes.sim]
transport = "local"
state_dir = "{tmp_path / "state"}"
simulate = {{ gpu = "MI300X", count = 8, compute_partition = "SPX", seed = 11 }}
{extra}
[health]
interval = 1

[[alert]]
name = "sick"
when = "health == fail"
command = ["{sys.executable}", "-c", "import sys; open({str(alerts)!r}, 'a').write(sys.stdin.read())"]
""")
    return path


def _start(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "console", "watch", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _descendants_and_bound(pid: int) -> set[int]:
    """Processes the watcher started: its descendants, and any carrying its lifeline."""
    found: set[int] = set()
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if f"ROCM_CONSOLE_LIFELINE={pid}:".encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.add(int(entry))
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found.update(children)
        frontier += children
    found.discard(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _sim_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sim" / "sim"


def _inject(sim_dir: Path, gpu: int, kind: str = "ecc_uncorrectable") -> None:
    subprocess.run(
        [sys.executable, "-m", "console.sim.faults", str(sim_dir), "add", str(gpu), kind], check=True, cwd=ROOT
    )


def _events(profile_args: list[str], kind: str) -> list[dict]:
    proc = run("events", *profile_args, "--kind", kind, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def _alert_lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "alerts.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _watch_folder(data: Path) -> Path:
    folders = list((data / "watch").glob("*"))
    assert len(folders) == 1, folders
    return folders[0]


def test_a_fault_reaches_events_and_alert_states_and_sigterm_ends_every_process(tmp_path):
    profile = _profile(tmp_path)
    data = Path(os.environ["ROCM_CONSOLE_DATA_DIR"])
    proc = _start("--profile", str(profile))
    try:
        assert wait_until(lambda: _events(["--profile", str(profile)], "node.up"), timeout=30)
        _inject(_sim_dir(tmp_path), 3)
        assert wait_until(lambda: _events(["--profile", str(profile)], "alert"), timeout=30)
        fired = _events(["--profile", str(profile)], "alert")[0]
        assert (fired["kind"], fired["node"], fired["gpu"]) == ("alert.fired", "sim", 3)
        assert [(s.rule, s.node, s.gpu) for s in read_alert_states(_watch_folder(data))] == [("sick", "sim", 3)]
        # status, another console of the fleet, says it is watched and shows the alert
        status = run("status", "--profile", str(profile), "--no-probe")
        assert f":{proc.pid} · 1 alert firing" in status.stdout and "alert sick" in status.stdout
        started = _descendants_and_bound(proc.pid)
        assert started  # the node's agent at least
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert "rocm-console watch: node sim live" in lines
    assert any(x.startswith("rocm-console watch: node sim GPU 3 health fail") for x in lines), err
    assert "rocm-console watch: alert FIRED sick: sim GPU 3: health == fail" in lines
    assert wait_until(lambda: not [p for p in started if _alive(p)], timeout=5), [p for p in started if _alive(p)]
    assert not (_watch_folder(data) / "watcher.json").exists()


def test_sigkill_and_restart_does_not_fire_again_and_a_second_watcher_is_refused(tmp_path):
    profile = _profile(tmp_path)
    data = Path(os.environ["ROCM_CONSOLE_DATA_DIR"])
    first = _start("--profile", str(profile))
    try:
        assert wait_until(lambda: _events(["--profile", str(profile)], "node.up"), timeout=30)
        second = run("watch", "--profile", str(profile), timeout=60)
        assert second.returncode == 2
        assert f"watched already by {os.uname().nodename}:{first.pid}" in one_line_error(second)
        _inject(_sim_dir(tmp_path), 5)
        assert wait_until(lambda: len(_alert_lines(tmp_path)) == 1, timeout=30)
    finally:
        _stop(first, signal.SIGKILL)
    restarted = _start("--profile", str(profile))
    try:
        assert wait_until(lambda: len(_events(["--profile", str(profile)], "node.up")) == 2, timeout=30)
        time.sleep(8)  # health read (1 s) and an off-screen sample (5 s), when the rules are judged
        assert len(_alert_lines(tmp_path)) == 1
        assert len(_events(["--profile", str(profile)], "alert.fired")) == 1
        assert [s.gpu for s in read_alert_states(_watch_folder(data))] == [5]
    finally:
        code, err = _stop(restarted)
    assert code == 0
    assert "resumed 1 open alert of the last watcher (not fired again)" in err


def test_install_systemd_writes_the_unit_and_refuses_to_replace_another(tmp_path):
    profile = _profile(tmp_path)
    unit = tmp_path / "units" / "rocm-console-watch.service"
    proc = run("watch", "--install-systemd", "--user", "--output", str(unit), "--profile", str(profile))
    assert proc.returncode == 0, proc.stderr
    text = unit.read_text()
    assert "Restart=on-failure" in text
    exec_start = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    words = exec_start.removeprefix("ExecStart=").split()
    assert Path(words[0]).is_absolute() and words[-3:] == ["watch", "--profile", str(profile.resolve())]
    assert "EnvironmentFile=-%h/.config/rocm-console/watch.env" in text
    assert "WantedBy=default.target" in text
    assert "systemctl --user daemon-reload" in proc.stdout
    assert "systemctl --user enable --now rocm-console-watch.service" in proc.stdout
    # the same unit again: fine; another profile's: refused in one line, --force replaces it
    assert run("watch", "--install-systemd", "--user", "--output", str(unit), "--profile", str(profile)).returncode == 0
    other = tmp_path / "other.toml"
    other.write_text(profile.read_text())
    refused = run("watch", "--install-systemd", "--user", "--output", str(unit), "--profile", str(other))
    assert refused.returncode == 2
    assert str(unit) in one_line_error(refused) and "--force" in one_line_error(refused)
    assert str(profile.resolve()) in unit.read_text()
    forced = run("watch", "--install-systemd", "--user", "--output", str(unit), "--profile", str(other), "--force")
    assert forced.returncode == 0 and str(other.resolve()) in unit.read_text()
    system = run("watch", "--install-systemd", "--output", str(tmp_path / "sys.service"), "--profile", str(profile))
    assert system.returncode == 0
    assert "WantedBy=multi-user.target" in (tmp_path / "sys.service").read_text()
    assert "systemctl daemon-reload" in system.stdout


def test_watch_options_and_a_bad_profile_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[nodes.x]\nhost = 3\n")
    proc = run("watch", "--profile", str(bad))
    assert proc.returncode == 2 and "bad.toml" in one_line_error(proc)
    proc = run("watch", "--user", "--demo")
    assert proc.returncode == 2 and "--install-systemd" in one_line_error(proc)


def test_watch_demo_uses_the_demos_data_and_its_own_nodes(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[health]\ninterval = 1\n\n[[alert]]\nname = "sick"\nwhen = "health == fail"\n')
    demo_data = Path(os.environ["ROCM_CONSOLE_DATA_DIR"]) / "demo"
    proc = _start("--demo", "--profile", str(rules))
    args = ["--demo", "--profile", str(rules)]
    try:
        assert wait_until(lambda: len(_events(args, "node.up")) == 4, timeout=60)
        # the demo's nodes keep their state in this watch's own folder (two demos never share it)
        private = [p for p in Path(tempfile.gettempdir()).glob(f"rocm-console-demo-{proc.pid}-*") if p.is_dir()]
        assert len(private) == 1
        _inject(private[0] / "mi300x-spx" / "sim" / "mi300x-spx", 2)
        assert wait_until(lambda: _events(args, "alert"), timeout=30)
        fired = _events(args, "alert")[0]
        assert (fired["kind"], fired["node"], fired["gpu"]) == ("alert.fired", "mi300x-spx", 2)
        assert (demo_data / "store.sqlite3").is_file()  # the demo's own store, not the user's
        assert not (demo_data.parent / "store.sqlite3").exists()
        started = _descendants_and_bound(proc.pid)
    finally:
        code, err = _stop(proc)
    assert code == 0, err
    assert wait_until(lambda: not [p for p in started if _alive(p)], timeout=5)
    assert not private[0].exists()
