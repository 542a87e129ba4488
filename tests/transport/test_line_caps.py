"""Reading a node's output in bounded pieces: a line over the cap ends a stream without being
held, `run` keeps at most its limit, stderr never fills its pipe, bytes that are not UTF-8 never
raise, and a command given up on is ended with everything in its process group."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from console.transport.base import MAX_LINE_BYTES, LineSplitter, TailBuffer, TransportError
from console.transport.local import LocalTransport

PY = sys.executable


def test_line_splitter_keeps_at_most_the_limit():
    lines = LineSplitter(limit=4)
    assert lines.feed(b"ab\ncd") == [(b"ab", False)]
    assert lines.feed(b"efgh") == [] and lines.cutting  # over the limit: cut from here on
    assert lines.feed(b"ijkl\nmn\n") == [(b"cdef", True), (b"mn", False)]
    assert not lines.cutting
    assert lines.feed(b"tail") == [] and lines.close() == [(b"tail", False)]


def test_tail_buffer_keeps_the_end():
    tail = TailBuffer(limit=10)
    for i in range(100):
        tail.write(f"line {i}\n".encode())
    assert tail.getvalue().endswith(b"line 99\n") and len(tail.getvalue()) <= 10


async def test_a_line_over_the_cap_ends_the_stream_in_one_line():
    t = LocalTransport("n1")
    code = f"import sys; print('first', flush=True); sys.stdout.write('a' * {MAX_LINE_BYTES + 10}); print()"
    got = []
    with pytest.raises(TransportError) as caught:
        async for line in t.stream_lines([PY, "-c", code]):
            got.append(line)
    assert got == ["first"]
    assert str(caught.value).startswith("n1: ") and "wrote a line over 4 MiB" in str(caught.value)


async def test_run_keeps_at_most_max_output():
    t = LocalTransport("n1")
    with pytest.raises(TransportError, match="wrote over 1 MiB of output"):
        await t.run([PY, "-c", "import sys; sys.stdout.write('x' * (8 << 20))"], max_output=1 << 20, timeout=30)
    ok = await t.run([PY, "-c", "print('x' * 1000)"], max_output=1 << 20, timeout=30)
    assert ok.stdout.strip() == "x" * 1000


async def test_chatty_stderr_never_blocks_and_its_tail_is_kept():
    t = LocalTransport("n1")
    code = "import sys\nfor i in range(200000): sys.stderr.write('noise %d\\n' % i)\nprint('done')\nsys.exit(3)"
    lines = []
    with pytest.raises(TransportError, match="exited 3: noise 199999"):
        async for line in t.stream_lines([PY, "-c", code]):
            lines.append(line)
    assert lines == ["done"]
    result = await asyncio.wait_for(t.run([PY, "-c", code]), 30)
    assert result.exit_status == 3 and result.stderr.endswith("noise 199999\n") and len(result.stderr) < 300_000


async def test_bytes_that_are_not_utf8_never_raise():
    t = LocalTransport("n1")
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe\\n'); sys.stderr.buffer.write(b'\\xc3\\n')"
    assert [line async for line in t.stream_lines([PY, "-c", code])] == ["ok \ufffd\ufffd"]
    assert (await t.run([PY, "-c", code])).stdout == "ok \ufffd\ufffd\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def stubborn_pair(pids) -> str:
    """A command that ignores SIGTERM, with a child that does too; writes both pids to `pids`."""
    return (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])\n"
        f"open({str(pids)!r}, 'w').write('%d %d' % (os.getpid(), c.pid))\n"
        "time.sleep(300)\n"
    )


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_a_command_given_up_on_goes_with_its_children(tmp_path, how):
    """A child that ignores SIGTERM is SIGKILLed with its group (no orphan)."""
    pids = tmp_path / "pids"
    code = stubborn_pair(pids)
    t = LocalTransport("n1")
    task = asyncio.ensure_future(t.run([PY, "-c", code], timeout=2 if how == "timeout" else None))
    deadline = time.monotonic() + 20
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if how == "cancel":
        task.cancel()
    with pytest.raises((TransportError, asyncio.CancelledError)):
        await task
    parent, child = map(int, pids.read_text().split())
    await asyncio.sleep(0.2)
    assert not _alive(parent) and not _alive(child), os.popen(f"ps -o pid,stat,cmd -p {parent},{child}").read()


@pytest.mark.parametrize("call", ["run", "stream_lines"])
async def test_a_cancel_during_start_up_still_ends_the_group(tmp_path, monkeypatch, call):
    """A cancel that lands after the child started but before asyncio connected its pipes (a
    stalled event loop on a busy machine) returns within seconds and leaves no process alive.

    asyncio's own clean-up there SIGKILLs only the leader, then waits for pipes the
    grandchild holds: the caller hung until the grandchild's 300 s sleep ended."""
    pids = tmp_path / "pids"
    code = stubborn_pair(pids)
    started = []

    class Spy(subprocess.Popen):  # asyncio starts the child with subprocess.Popen, synchronously
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    t = LocalTransport("n1")
    argv = [PY, "-c", code]
    task = asyncio.ensure_future(t.run(argv) if call == "run" else t.stream_lines(argv).__anext__())
    for _ in range(100):  # this task stays queued: it runs before the steps that connect the pipes
        await asyncio.sleep(0)
        if started:
            break
    assert started and not task.done()
    # Block the loop (as a starved one is) until the child runs with its grandchild.
    deadline = time.monotonic() + 20
    while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    parent, child = map(int, pids.read_text().split())
    try:
        task.cancel()
        cancelled_at = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 15)
        assert time.monotonic() - cancelled_at < 10
        await asyncio.sleep(0.2)
        assert not _alive(parent) and not _alive(child), os.popen(f"ps -o pid,stat,cmd -p {parent},{child}").read()
    finally:  # the unfixed code leaves the grandchild: end it (ours, by pid)
        for pid in (parent, child):
            if _alive(pid):
                os.kill(pid, 9)


async def test_a_cancel_while_an_early_process_is_adopted_stops_it():
    from console.transport import local

    argv = [PY, "-c", "import time; time.sleep(300)"]
    assert local.start_early(argv)
    pid = next(iter(local._EARLY.values())).pid
    try:
        task = asyncio.ensure_future(LocalTransport("n1").stream_lines(argv).__anext__())
        await asyncio.sleep(0)  # stream_lines took it out of the early ones; its pipes are connecting
        assert local._EARLY == {}
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 15)
        assert not _alive(pid)
    finally:
        local.discard_early()
        if _alive(pid):
            os.kill(pid, 9)
