"""SshTransport against a real OpenSSH server on 127.0.0.1 (fixture: sshd).

The "remote" node is this machine, so files and pids the tests check are
local ones. Every process the tests start on the node is killed by pid at the
end of the test that started it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
import pytest_asyncio

from console.core.model import NodeSpec
from console.transport.base import TransportError
from console.transport.ssh import SshTransport
from tests.integration.sshd import free_port, pid_alive

PY = "/usr/bin/python3"
ECHO_ARGV = [PY, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


async def wait_until(predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(step)
    return predicate()


def kill_quietly(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def assert_one_line(err: TransportError) -> None:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text
    assert text.startswith("ssh-node: "), text


@pytest_asyncio.fixture
async def transport(sshd):
    t = SshTransport(sshd.node_spec())
    try:
        yield t
    finally:
        await t.close()


# ------------------------------------------------------------------ run


async def test_run_passes_arguments_literally(transport, tmp_path):
    marker = tmp_path / "pwned"
    victim = tmp_path / "victim"
    victim.mkdir()
    args = [
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"; rm -rf {victim}",
        f"&& rm -rf {victim} ||",
        "it's",
        'say "hi"',
        "line1\nline2",
        "tab\there",
        "back\\slash",
        "*",
        "~",
        "$HOME",
        "",
        "--",
        "-n",
        "a | cat > /dev/null",
        "ünïcødé",
    ]
    result = await transport.run([*ECHO_ARGV, *args])
    assert result.ok, result
    assert json.loads(result.stdout) == args
    assert not marker.exists()
    assert victim.is_dir()


async def test_run_with_env_status_stderr_and_input(transport, tmp_path):
    marker = tmp_path / "pwned"
    value = f"a b $(touch {marker}) 'q' \"d\" ;x"
    result = await transport.run(["printenv", "FOO"], env={"FOO": value})
    assert result.ok and result.stdout == value + "\n"
    assert not marker.exists()

    result = await transport.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok

    assert (await transport.run(["cat"], input="hello\nworld\n")).stdout == "hello\nworld\n"
    # no input: stdin is at EOF, cat must not hang
    assert (await transport.run(["cat"], timeout=10)).stdout == ""


async def test_one_connection_reused_by_concurrent_calls(transport, sshd):
    results = await asyncio.gather(*(transport.run(["sh", "-c", 'echo "$SSH_CLIENT"']) for _ in range(6)))
    clients = {r.stdout.strip() for r in results}
    assert len(clients) == 1, clients  # same client port: one TCP connection
    await transport.upload(b"x", str(Path(sshd.root) / "reuse.txt"))
    fwd = await transport.forward_port(sshd.port)
    await fwd.close()
    again = await transport.run(["sh", "-c", 'echo "$SSH_CLIENT"'])
    assert again.stdout.strip() in clients
    accepted = [ln for ln in sshd.log_file.read_text().splitlines() if "Accepted publickey" in ln]
    assert len(accepted) == 1, accepted


async def test_run_timeout_kills_remote_process(transport, tmp_path):
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        await transport.run(["sh", "-c", 'echo $$ >"$1"; exec sleep 60', "sh", str(pidfile)], timeout=1.5)
    assert info.value.kind == "timeout"
    assert "timed out after 1.5 s" in str(info.value)
    assert_one_line(info.value)
    assert time.monotonic() - started < 15  # bounded, with room for a loaded machine
    pid = int(pidfile.read_text())
    try:
        assert await wait_until(lambda: not pid_alive(pid), 15), "remote sleep survived the timeout"
    finally:
        kill_quietly(pid)
    assert (await transport.run(["echo", "still usable"])).stdout == "still usable\n"


async def test_cancelled_run_kills_remote_process(transport, tmp_path):
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(transport.run(["sh", "-c", 'echo $$ >"$1"; exec sleep 60', "sh", str(pidfile)]))
    assert await wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 10)
    pid = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    try:
        assert await wait_until(lambda: not pid_alive(pid), 15)
    finally:
        kill_quietly(pid)


# ------------------------------------------------------------------ stream_lines


async def test_stream_lines_yields_every_line(transport):
    lines = [
        line
        async for line in transport.stream_lines(
            ["sh", "-c", 'for i in 1 2 3 4 5; do echo "line $i"; done; printf "no newline"']
        )
    ]
    assert lines == [f"line {i}" for i in range(1, 6)] + ["no newline"]

    env_lines = [line async for line in transport.stream_lines(["printenv", "A"], env={"A": "$(x) y"})]
    assert env_lines == ["$(x) y"]


@pytest.mark.parametrize(
    "script",
    [
        "echo $$; while :; do echo tick; sleep 0.05; done",  # keeps writing
        "echo $$; echo tick; exec sleep 60",  # silent: only a kill stops it
    ],
)
async def test_stream_early_close_kills_remote_process(transport, script):
    agen = transport.stream_lines(["sh", "-c", script])
    pid = int(await agen.__anext__())
    try:
        assert await agen.__anext__() == "tick"
        await agen.aclose()
        assert await wait_until(lambda: not pid_alive(pid), 15), "remote command survived aclose()"
    finally:
        kill_quietly(pid)
    assert (await transport.run(["true"])).ok


async def test_stream_nonzero_exit_reports_last_stderr_line(transport):
    got = []
    with pytest.raises(TransportError) as info:
        async for line in transport.stream_lines(
            ["sh", "-c", "echo a; echo early >&2; echo 'fatal: boom' >&2; echo >&2; exit 4"]
        ):
            got.append(line)
    assert got == ["a"]
    assert info.value.kind == "command"
    assert "status 4" in str(info.value) and str(info.value).endswith("fatal: boom")
    assert_one_line(info.value)


# ------------------------------------------------------------------ spawn_detached


async def test_spawn_detached_survives_transport_close(sshd, tmp_path):
    marker = tmp_path / "pwned"
    log = tmp_path / "logs dir" / f"$(touch {marker})" / "out 'x'.log"
    t = SshTransport(sshd.node_spec())
    pid = None
    try:
        pid = await t.spawn_detached(
            ["sh", "-c", 'echo "hello $GREETING"; echo "to stderr" >&2; exec sleep 60'],
            log_path=str(log),
            env={"GREETING": "world $(nope)"},
        )
        assert isinstance(pid, int) and pid > 1
        await t.close()
        assert await wait_until(lambda: log.exists() and "to stderr" in log.read_text(), 10)
        assert log.read_text().splitlines() == ["hello world $(nope)", "to stderr"]
        assert not marker.exists()
        await asyncio.sleep(0.5)  # the ssh session is gone; the process must still run
        assert pid_alive(pid)
        assert os.getsid(pid) == pid  # setsid: its own session
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        # a new transport (new connection) still sees it
        async with SshTransport(sshd.node_spec()) as t2:
            assert (await t2.run(["kill", "-0", str(pid)])).ok
            # appends, never truncates
            pid2 = await t2.spawn_detached(["echo", "second"], log_path=str(log))
            assert await wait_until(lambda: "second" in log.read_text(), 10)
            assert log.read_text().splitlines()[0] == "hello world $(nope)"
            await wait_until(lambda: not pid_alive(pid2), 5)
    finally:
        kill_quietly(pid)
        await t.close()


async def test_spawn_detached_home_relative_log_and_bad_log(transport):
    name = f".rocm-console-test-{os.getpid()}-{time.monotonic_ns()}"
    home_dir = Path.home() / name
    try:
        pid = await transport.spawn_detached(["echo", "in home"], log_path=f"~/{name}/x.log")
        assert await wait_until(
            lambda: (home_dir / "x.log").exists() and "in home" in (home_dir / "x.log").read_text(), 10
        )
        kill_quietly(pid)
    finally:
        shutil.rmtree(home_dir, ignore_errors=True)
    with pytest.raises(TransportError) as info:
        await transport.spawn_detached(["echo", "x"], log_path="/proc/forbidden/x.log")
    assert info.value.kind == "command"
    assert_one_line(info.value)


# ------------------------------------------------------------------ upload


async def test_upload_atomic_with_mode_and_parents(transport, tmp_path):
    target = tmp_path / "a" / "b c" / "file.bin"
    data = bytes(range(256)) * 1024  # 256 KiB, binary
    await transport.upload(data, str(target), mode=0o640)
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == 0o640

    inode = target.stat().st_ino
    await transport.upload(b"#!/bin/sh\necho replaced\n", str(target), mode=0o755)
    assert target.read_bytes() == b"#!/bin/sh\necho replaced\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert target.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]  # no temp left
    assert (await transport.run([str(target)])).stdout == "replaced\n"


async def test_upload_home_relative(transport):
    name = f".rocm-console-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        await transport.upload(b"hi", f"~/{name}/sub/f.txt")
        assert (Path.home() / name / "sub" / "f.txt").read_bytes() == b"hi"
    finally:
        shutil.rmtree(Path.home() / name, ignore_errors=True)


async def test_upload_failure_is_one_line(transport):
    with pytest.raises(TransportError) as info:
        await transport.upload(b"x", "/proc/nope/f.txt")
    assert info.value.kind == "command"
    assert_one_line(info.value)


# ------------------------------------------------------------------ forward_port


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=3) as resp:  # 127.0.0.1 only
        return resp.read()


async def test_forward_port_reaches_remote_http_server(transport, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("hello through the tunnel")
    port = free_port()
    pid = await transport.spawn_detached(
        [PY, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(www), str(port)],
        log_path=str(tmp_path / "http.log"),
    )
    fwd = None
    try:
        fwd = await transport.forward_port(port)
        assert fwd.local_port > 0 and fwd.local_port != port
        url = f"http://127.0.0.1:{fwd.local_port}/hello.txt"
        body = None
        deadline = time.monotonic() + 15
        while body is None and time.monotonic() < deadline:
            try:
                body = await asyncio.to_thread(http_get, url)
            except OSError:
                await asyncio.sleep(0.2)
        assert body == b"hello through the tunnel"
        await fwd.close()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", fwd.local_port), timeout=2).close()
    finally:
        if fwd is not None:
            await fwd.close()
        kill_quietly(pid)


# ------------------------------------------------------------------ failures


async def test_unknown_host_key_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SshTransport(sshd.node_spec(known_hosts=str(empty)))
    with pytest.raises(TransportError) as info:
        await t.run(["true"])
    err = info.value
    assert err.kind == "host_key"
    assert str(err) == (f"ssh-node: host key for 127.0.0.1:{sshd.port} not trusted (not in {empty})")
    await t.close()


async def test_changed_host_key_refused(sshd, tmp_path):
    other = sshd.make_client_key("other_host_key")
    pub = Path(other + ".pub").read_text().split()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {pub[0]} {pub[1]}\n")
    t = SshTransport(sshd.node_spec(known_hosts=str(kh)))
    with pytest.raises(TransportError) as info:
        await t.connect()
    assert info.value.kind == "host_key"
    assert "does not match" in str(info.value) and str(kh) in str(info.value)
    assert_one_line(info.value)

    missing = SshTransport(sshd.node_spec(known_hosts=str(tmp_path / "nope")))
    with pytest.raises(TransportError) as info:
        await missing.connect()
    assert info.value.kind == "host_key" and "does not exist" in str(info.value)


async def test_wrong_client_key_is_auth_error(sshd, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    t = SshTransport(sshd.node_spec(identity_file=sshd.make_client_key("stranger")))
    with pytest.raises(TransportError) as info:
        await t.run(["true"])
    assert info.value.kind == "auth"
    assert f"permission denied for user {sshd.user} on 127.0.0.1:{sshd.port}" in str(info.value)
    assert_one_line(info.value)

    bad = SshTransport(sshd.node_spec(identity_file=str(sshd.root / "no-such-key")))
    with pytest.raises(TransportError) as info:
        await bad.connect()
    assert info.value.kind == "auth"
    assert_one_line(info.value)


async def test_closed_port_is_unreachable(sshd):
    port = free_port()
    t = SshTransport(sshd.node_spec(port=port))
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        await t.run(["true"])
    assert info.value.kind == "unreachable"
    assert str(info.value) == f"ssh-node: cannot reach 127.0.0.1:{port}: connection refused"
    assert time.monotonic() - started < 5


async def test_silent_server_times_out():
    with socket.socket() as srv:  # accepts TCP, never speaks SSH
        srv.bind(("127.0.0.1", 0))
        srv.listen(5)
        port = srv.getsockname()[1]
        t = SshTransport(NodeSpec(name="ssh-node", host="127.0.0.1", port=port), connect_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(TransportError) as info:
            await t.connect()
        assert info.value.kind == "timeout"
        assert_one_line(info.value)
        assert 0.9 < time.monotonic() - started < 5


# ------------------------------------------------------------------ link loss and reconnect


async def test_sshd_stop_mid_stream_then_reconnect(sshd, transport):
    agen = transport.stream_lines(["sh", "-c", "echo $$; while :; do echo tick; sleep 0.1; done"])
    pid = int(await agen.__anext__())
    try:
        assert await agen.__anext__() == "tick"
        sshd.stop()
        started = time.monotonic()
        with pytest.raises(TransportError) as info:
            while True:
                await asyncio.wait_for(agen.__anext__(), 25)
        assert info.value.kind == "closed"
        assert_one_line(info.value)
        assert time.monotonic() - started < 20  # keepalive window (5 s x 3, + slack)
        assert not transport.connected

        with pytest.raises(TransportError) as info:  # server still down
            await transport.run(["true"])
        assert info.value.kind == "unreachable"

        sshd.start()
        result = await transport.run(["echo", "back"])  # same object, new connection
        assert result.stdout == "back\n"
    finally:
        await agen.aclose()
        kill_quietly(pid)


async def test_frozen_link_detected_by_keepalive(sshd, transport):
    agen = transport.stream_lines(["sh", "-c", "echo $$; while :; do echo tick; sleep 0.5; done"])
    pid = int(await agen.__anext__())
    frozen: list[int] = []
    try:
        assert await agen.__anext__() == "tick"
        frozen = sshd.freeze()  # TCP stays up, nothing answers
        assert frozen
        started = time.monotonic()
        with pytest.raises(TransportError) as info:
            while True:
                await asyncio.wait_for(agen.__anext__(), 40)
        elapsed = time.monotonic() - started
        assert info.value.kind == "closed"
        assert elapsed < 30, elapsed
    finally:
        sshd.thaw(frozen)
        await agen.aclose()
        kill_quietly(pid)
    assert (await transport.run(["echo", "ok"])).stdout == "ok\n"


async def test_connect_retries_until_server_is_back(sshd):
    t = SshTransport(sshd.node_spec())
    try:
        sshd.stop()
        with pytest.raises(TransportError) as info:
            await t.connect()  # no retries: fails at once
        assert info.value.kind == "unreachable"

        async def restart_later():
            await asyncio.sleep(1.2)
            await asyncio.to_thread(sshd.start)

        restarter = asyncio.create_task(restart_later())
        started = time.monotonic()
        await t.connect(retries=6)  # sleeps 0.5, 1, 2, ... between attempts
        await restarter
        assert t.connected
        assert 1.0 < time.monotonic() - started < 20  # the retry after the restart (0.5, 1, 2, 4, 8 s apart)
        assert (await t.run(["echo", "hi"])).stdout == "hi\n"
    finally:
        await t.close()


async def test_jump_host(sshd):
    # sshd is its own jump host: connect to it, then tunnel to 127.0.0.1:port.
    spec = sshd.node_spec(jump=f"{sshd.user}@127.0.0.1:{sshd.port}")
    async with SshTransport(spec) as t:
        result = await t.run(["sh", "-c", 'echo "$SSH_CLIENT"'])
        assert result.ok and result.stdout.startswith("127.0.0.1 ")
    accepted = [ln for ln in sshd.log_file.read_text().splitlines() if "Accepted publickey" in ln]
    assert len(accepted) == 2  # the jump login and the tunnelled login

    closed = free_port()
    bad = SshTransport(sshd.node_spec(port=closed, jump=f"127.0.0.1:{sshd.port}"))
    with pytest.raises(TransportError) as info:
        await bad.connect()
    assert info.value.kind == "unreachable"
    assert re.search(rf"127\.0\.0\.1:{closed} via jump host 127\.0\.0\.1:{sshd.port}", str(info.value))
    assert_one_line(info.value)


# ------------------------------------------------------------------ ~/.ssh/config


async def test_ssh_config_alias_and_known_hosts_never_disabled(sshd, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(sshd.known_hosts, home / ".ssh" / "known_hosts")
    block = (
        "Host mi300-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {sshd.port}\n"
        f"  User {sshd.user}\n"
        f"  IdentityFile {sshd.identity_file}\n"
    )
    (home / ".ssh" / "config").write_text(block)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    spec = NodeSpec(name="ssh-node", host="mi300-alias")  # port 22, no user/key/known_hosts
    async with SshTransport(spec) as t:
        assert (await t.run(["echo", "via alias"])).stdout == "via alias\n"

    # `UserKnownHostsFile none` would make asyncssh skip host-key checks: it must not.
    (home / ".ssh" / "known_hosts").write_text("")
    (home / ".ssh" / "config").write_text(block + "  UserKnownHostsFile none\n  StrictHostKeyChecking no\n")
    async with SshTransport(spec) as t:
        with pytest.raises(TransportError) as info:
            await t.connect()
    assert info.value.kind == "host_key"
    assert f"127.0.0.1:{sshd.port}" in str(info.value)
    assert str(home / ".ssh" / "known_hosts") in str(info.value)


async def test_more_concurrent_commands_than_sshd_max_sessions(transport):
    # sshd allows 10 sessions per connection (MaxSessions); the transport queues the rest.
    assert transport.max_sessions < 10
    started = time.monotonic()
    results = await asyncio.gather(*(transport.run(["sleep", "0.5"]) for _ in range(25)))
    assert all(r.ok for r in results)
    assert time.monotonic() - started < 20

    squeezed = SshTransport(transport.node, max_sessions=14)  # more than the server allows
    try:
        outcomes = await asyncio.gather(*(squeezed.run(["sleep", "3"]) for _ in range(14)), return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, TransportError)]
        assert errors and all(e.kind == "command" and "MaxSessions" in str(e) for e in errors)
    finally:
        await squeezed.close()
