"""First contact with any node, over a real OpenSSH sshd on 127.0.0.1.

A hardened sshd without ``Subsystem sftp`` refuses SFTP: the agent still gets
there (an upload through ``sh`` on a command channel, checked by SHA-256,
renamed into place) and the node goes live. The normal sshd still uses SFTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import pytest_asyncio

from console.transport.base import TransportError
from console.transport.ssh import SshTransport
from tests.integration.sshd import SSHD, SshServer
from tests.integration.test_status_over_ssh import run_cli, write_profile

pytestmark = pytest.mark.timeout(180)

# What sshd logs (LogLevel VERBOSE) for an SFTP session it starts, and for one it refuses.
SFTP_STARTED = "Starting session: subsystem 'sftp'"
SFTP_REFUSED = "subsystem request for sftp by user"  # "... failed, subsystem not found"


@pytest.fixture
def sshd_no_sftp(tmp_path_factory):
    """A running sshd whose config has no `Subsystem sftp` (a hardened node)."""
    if not os.path.exists(SSHD):
        if os.environ.get("CI"):
            pytest.fail(f"{SSHD} not found but CI is set: install openssh-server", pytrace=False)
        pytest.skip(f"{SSHD} not found (install openssh-server)")
    server = SshServer.create(tmp_path_factory.mktemp("sshd-nosftp"), sftp=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest_asyncio.fixture
async def hardened(sshd_no_sftp):
    t = SshTransport(sshd_no_sftp.node_spec(python="/usr/bin/python3"))
    try:
        yield t
    finally:
        await t.close()


def sshd_log(server: SshServer, needle: str) -> list[str]:
    return [ln for ln in server.log_file.read_text(errors="replace").splitlines() if needle in ln]


# ------------------------------------------------------------------ transport


@pytest.mark.asyncio
async def test_upload_without_sftp_is_atomic_with_mode_and_parents(hardened, sshd_no_sftp, tmp_path):
    target = tmp_path / "a" / "b c" / "file.bin"
    data = bytes(range(256)) * 1024  # 256 KiB, every byte value
    await hardened.upload(data, str(target), mode=0o640)
    assert hardened.upload_channel == "exec"
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == 0o640

    await hardened.upload(b"", str(target.parent / "empty"))  # nothing to send is still a whole file
    assert (target.parent / "empty").read_bytes() == b""
    (target.parent / "empty").unlink()

    inode = target.stat().st_ino
    await hardened.upload(b"#!/bin/sh\necho replaced\n", str(target), mode=0o755)
    assert target.read_bytes() == b"#!/bin/sh\necho replaced\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert target.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]  # no temp left
    assert (await hardened.run([str(target)])).stdout == "replaced\n"
    # SFTP was asked for once on this connection, refused, and not asked again
    refused = sshd_log(sshd_no_sftp, SFTP_REFUSED)
    assert len(refused) == 1 and "failed" in refused[0], refused
    assert await hardened.sftp_refusal() == (
        "sshd refused the sftp subsystem request (no Subsystem sftp in sshd_config)"
    )


@pytest.mark.asyncio
async def test_upload_without_sftp_takes_paths_literally(hardened, tmp_path):
    marker = tmp_path / "pwned"
    weird = tmp_path / f"d $(touch {marker}) `touch {marker}` ; '\"" / "f;rm -rf ~.txt"
    await hardened.upload(b"data", str(weird))
    assert weird.read_bytes() == b"data"
    assert not marker.exists()

    name = f".rocm-console-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        await hardened.upload(b"hi", f"~/{name}/sub/f.txt")
        assert (Path.home() / name / "sub" / "f.txt").read_bytes() == b"hi"
    finally:
        shutil.rmtree(Path.home() / name, ignore_errors=True)


@pytest.mark.asyncio
async def test_upload_without_sftp_failure_names_the_cause(hardened, tmp_path):
    with pytest.raises(TransportError) as info:
        await hardened.upload(b"x", "/proc/nope/f.txt")
    text = str(info.value)
    assert info.value.kind == "command" and "\n" not in text and text.startswith("ssh-node: ")
    assert "no Subsystem sftp" in text and "/proc/nope" in text
    assert "MaxSessions" not in text  # the old message blamed the session limit

    (tmp_path / "dir").mkdir()
    with pytest.raises(TransportError, match="is a directory"):
        await hardened.upload(b"x", str(tmp_path / "dir"))


@pytest.mark.asyncio
async def test_upload_cut_short_never_leaves_a_file(hardened, tmp_path):
    target = tmp_path / "big.bin"
    task = asyncio.ensure_future(hardened.upload(os.urandom(1 << 20) * 96, str(target)))  # 96 MiB
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob(".big.bin.*.tmp")) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert list(tmp_path.glob(".big.bin.*.tmp")), "the upload never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # the node's sh removed its temporary file


@pytest.mark.asyncio
async def test_normal_sshd_still_uses_sftp(sshd, tmp_path):
    async with SshTransport(sshd.node_spec()) as t:
        await t.upload(b"abc", str(tmp_path / "f"))
        assert t.upload_channel == "sftp"
        assert await t.sftp_refusal() is None
    assert (tmp_path / "f").read_bytes() == b"abc"
    assert len(sshd_log(sshd, SFTP_STARTED)) == 2  # the upload, the check
    assert sshd_log(sshd, SFTP_REFUSED) == []


# ------------------------------------------------------------------ first contact


def test_node_without_sftp_goes_live_on_first_contact(sshd_no_sftp, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", sshd_no_sftp)
    proc = run_cli("status", "--profile", str(profile), "--json")
    assert proc.returncode == 0, proc.stderr
    [node] = json.loads(proc.stdout)["nodes"]
    assert node["state"] == "live" and node["error"] is None
    assert node["source"] == "amdsmi (simulated)" and len(node["gpus"]) == 8
    assert all(g["util_pct"] is not None and g["vram_total_mib"] for g in node["gpus"])
    # the bundle went through sh, whole: every file as the console has it
    [bundle] = list((tmp_path / "node-state" / "agent").iterdir())
    here = Path(__file__).resolve().parents[2] / "console"
    assert (bundle / "node_agent.py").read_bytes() == (here / "agent" / "node_agent.py").read_bytes()
    modules = sorted((here / "sim" / "amdsmi").glob("*.py"))  # statefiles.py: a link here, a file there
    assert [p.name for p in modules] == sorted(p.name for p in (bundle / "sim" / "amdsmi").glob("*.py"))
    assert all((bundle / "sim" / "amdsmi" / p.name).read_bytes() == p.read_bytes() for p in modules)
    assert not list(bundle.rglob("*.tmp"))
    assert sshd_log(sshd_no_sftp, SFTP_REFUSED) and sshd_log(sshd_no_sftp, SFTP_STARTED) == []


# ------------------------------------------------------------------ doctor over ssh


def doctor_json(profile: Path, *args: str) -> tuple[int, dict]:
    proc = run_cli("doctor", "--profile", str(profile), "--json", *args)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_doctor_over_real_sshd(sshd, tmp_path):
    code, doc = doctor_json(write_profile(tmp_path / "lab.toml", sshd, compute="CPX"))
    assert code == 0, doc
    [node] = doc["nodes"]
    checks = {c["id"]: c for c in node["checks"]}
    assert checks["link"]["detail"] == f"SSH to {sshd.user}@127.0.0.1:{sshd.port}"
    assert checks["source.amdsmi"]["level"] == "ok"
    assert checks["gpus"]["detail"] == "8 x AMD Instinct MI300X, CPX/NPS1, 64 logical GPUs"
    assert checks["vllm"]["detail"].startswith("vLLM 0.32.0+sim")
    assert node["facts"]["python_path"] == "/usr/bin/python3"  # the node's python ran it, over SSH
    assert all(c["level"] != "fail" for c in node["checks"])


def test_doctor_on_a_node_without_sftp(sshd_no_sftp, tmp_path):
    code, doc = doctor_json(write_profile(tmp_path / "lab.toml", sshd_no_sftp))
    assert code == 0, doc
    [node] = doc["nodes"]
    link = node["checks"][0]
    assert link["id"] == "link" and link["level"] == "ok"
    assert "sshd serves no SFTP (sshd refused the sftp subsystem request" in link["detail"]
    assert "files go through sh" in link["detail"]
    assert {c["id"]: c for c in node["checks"]}["gpus"]["level"] == "ok"


def test_doctor_names_a_missing_python_on_the_node(sshd, tmp_path):
    profile = write_profile(tmp_path / "lab.toml", sshd)
    profile.write_text(profile.read_text().replace('python = "/usr/bin/python3"', 'python = "/opt/none/python3"'))
    code, doc = doctor_json(profile)
    assert code == 1
    [check] = doc["nodes"][0]["checks"]
    assert check["level"] == "fail" and check["title"] == "agent"
    assert check["detail"].startswith("ssh-node: /opt/none/python3 not found on the node")
    assert 'set python = "/path/to/python3" for ssh-node' in check["fix"]
