"""Nodes whose SSH login prints something before the command runs, over the real sshd.

A banner on stdout (an `echo` in the shell's rc file, a ForceCommand wrapper that greets and
then runs the command) would prefix the output of every command the console runs. The console
works through it (its command wrapper prints a begin marker; what comes before is cut off),
says so once as a warning naming the node, and `doctor` reports it as a warning with the fix.
A login that never runs the command at all (a ForceCommand that ignores it) is a node the
console cannot read: status marks it down and doctor fails, both saying why.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from tests.integration.sshd import SSHD, SshServer
from tests.integration.test_status_over_ssh import run_cli, write_profile

pytestmark = pytest.mark.timeout(240)

SFTP_SERVER = "/usr/lib/openssh/sftp-server"
BANNER = "Welcome to gpu-lab-7 (managed by Ansible)"


def start_sshd(root: Path, *extra: str, sftp: bool = False) -> SshServer:
    if not os.path.exists(SSHD):
        if os.environ.get("CI"):
            pytest.fail(f"{SSHD} not found but CI is set: install openssh-server", pytrace=False)
        pytest.skip(f"{SSHD} not found (install openssh-server)")
    server = SshServer.create(root, sftp=sftp)
    with open(server.config, "a") as fh:
        fh.write("\n".join(extra) + "\n")
    server.start()
    return server


@pytest.fixture
def banner_sshd(tmp_path_factory):
    """sshd whose users get a HOME of the test's own, whose ~/.bashrc greets on stdout for every
    session, commands included (bash reads ~/.bashrc when sshd runs it, interactive or not).
    Its SFTP is an sftp-server started through that shell, as on a stock Debian sshd: the
    greeting breaks it."""
    if not pwd.getpwuid(os.getuid()).pw_shell.endswith("/bash"):
        pytest.skip("the test user's login shell is not bash")
    if not os.path.exists(SFTP_SERVER):
        pytest.skip(f"{SFTP_SERVER} not found")
    root = tmp_path_factory.mktemp("sshd-banner")
    home = root / "home"
    home.mkdir()
    # the second line has no newline: the next output starts right after it
    (home / ".bashrc").write_text(f'echo "{BANNER}"\nprintf "Last login: never"\necho "a greeting on stderr" >&2\n')
    server = start_sshd(root, f"SetEnv HOME={home}", f"Subsystem sftp {SFTP_SERVER}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def force_command_sshd(tmp_path_factory):
    """sshd with a ForceCommand wrapper that greets, then runs the command it was given."""
    root = tmp_path_factory.mktemp("sshd-force")
    wrapper = root / "greet-then-run"
    wrapper.write_text(f'#!/bin/sh\necho "*** {BANNER} ***"\nexec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n')
    wrapper.chmod(0o755)
    server = start_sshd(root, f"ForceCommand {wrapper}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def backup_only_sshd(tmp_path_factory):
    """sshd whose ForceCommand ignores the command: the login never runs what the console sends."""
    root = tmp_path_factory.mktemp("sshd-backup-only")
    server = start_sshd(root, 'ForceCommand echo "This account only runs the nightly backup."')
    try:
        yield server
    finally:
        server.stop()


def status(profile: Path) -> tuple[int, dict, str]:
    proc = run_cli("status", "--profile", str(profile), "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def doctor(profile: Path) -> tuple[int, dict]:
    proc = run_cli("doctor", "--profile", str(profile), "--json")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def warning_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


@pytest.mark.parametrize("server", ["banner_sshd", "force_command_sshd"])
def test_console_works_through_a_login_banner(server, request, tmp_path):
    sshd = request.getfixturevalue(server)
    code, doc, stderr = status(write_profile(tmp_path / "lab.toml", sshd))
    assert code == 0, (doc, stderr)
    [node] = doc["nodes"]
    assert node["state"] == "live" and node["error"] is None
    assert node["source"] == "amdsmi (simulated)" and len(node["gpus"]) == 8
    assert node["probe"]["hostname"]  # the probe's line was read too, past the banner
    # said once, naming the node, though status ran several commands
    [warning] = warning_lines(stderr)
    assert warning.startswith("warning: ssh-node: its login prints") and BANNER in warning, stderr
    assert "the console skips it" in warning and "rocm-console doctor" in warning
    # the agent went to the state dir the profile names, not to a path made of the banner
    assert list((tmp_path / "node-state" / "agent").glob("*/node_agent.py"))


@pytest.mark.parametrize("server", ["banner_sshd", "force_command_sshd"])
def test_doctor_warns_about_a_login_banner_with_the_fix(server, request, tmp_path):
    sshd = request.getfixturevalue(server)
    code, doc = doctor(write_profile(tmp_path / "lab.toml", sshd))
    [node] = doc["nodes"]
    checks = {c["id"]: c for c in node["checks"]}
    banner = checks["link.banner"]
    assert banner["level"] == "warn" and node["level"] in ("warn", "fail")
    assert BANNER in banner["detail"] and "the console skips it" in banner["detail"]
    assert "interactive" in banner["fix"] and "SSH_ORIGINAL_COMMAND" in banner["fix"]
    assert checks["gpus"]["level"] == "ok"  # the agent's report was read past the banner
    assert all(c["level"] != "fail" for c in node["checks"]) and code == 0


def test_banner_breaks_sftp_and_files_still_arrive(banner_sshd, tmp_path):
    code, doc = doctor(write_profile(tmp_path / "lab.toml", banner_sshd))
    link = {c["id"]: c for c in doc["nodes"][0]["checks"]}["link"]
    assert "files go through sh" in link["detail"], link  # the greeting broke the sftp-server
    [bundle] = list((tmp_path / "node-state" / "agent").iterdir())
    here = Path(__file__).resolve().parents[2] / "console"
    assert (bundle / "node_agent.py").read_bytes() == (here / "agent" / "node_agent.py").read_bytes()


def test_a_login_that_never_runs_the_command_is_down_and_doctor_fails(backup_only_sshd, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", backup_only_sshd)
    code, doc, stderr = status(profile)
    assert code == 1
    [node] = doc["nodes"]
    assert node["state"] == "down"
    assert node["error"].startswith("ssh-node: the SSH login did not run the console's command (sh)"), node
    assert "This account only runs the nightly backup." in node["error"] and "ForceCommand" in node["error"]

    code, doc = doctor(profile)
    assert code == 1
    [check] = doc["nodes"][0]["checks"]
    assert check["level"] == "fail" and check["title"] == "login shell"
    assert "did not run the console's command" in check["detail"]
    assert "ForceCommand" in check["fix"] and "ssh NODE echo ok" in check["fix"]
