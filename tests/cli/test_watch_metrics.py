"""`rocm-console watch --metrics-port`: bad ports and a port in use are one line, exit 2, with no
watcher left running; the systemd unit carries the flags."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.helpers import free_port


def _watch(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {"ROCM_CONSOLE_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "console", "watch", "--demo", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_bad_metrics_flags_are_one_line_and_exit_2(tmp_path):
    for args, said in (
        (["--metrics-port", "70000"], "--metrics-port 70000: not a port"),
        (["--metrics-port", "0"], "--metrics-port 0: not a port"),
        (["--metrics-address", "0.0.0.0"], "--metrics-address goes with --metrics-port"),
    ):
        out = _watch(tmp_path, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert said in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    port = free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        out = _watch(tmp_path, "--metrics-port", str(port))
    assert out.returncode == 2, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "Traceback" not in out.stderr


def test_the_systemd_unit_carries_the_metrics_flags(tmp_path):
    unit = tmp_path / "w.service"
    out = _watch(tmp_path, "--install-systemd", "--user", "--output", str(unit), "--metrics-port", "9464")
    assert out.returncode == 0, out.stderr
    assert "watch --demo --metrics-port 9464" in unit.read_text()
