"""Reading a node's output in bounded pieces: a line over the cap ends a stream without being
held, `run` keeps at most its limit, stderr never fills its pipe, bytes that are not UTF-8 never
raise, and a command given up on is ended with everything in its process group."""

from __future__ import annotations

import asyncio
import os
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


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_a_command_given_up_on_goes_with_its_children(tmp_path, how):
    """A child that ignores SIGTERM is SIGKILLed with its group (no orphan)."""
    pids = tmp_path / "pids"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])\n"
        f"open({str(pids)!r}, 'w').write('%d %d' % (os.getpid(), c.pid))\n"
        "time.sleep(300)\n"
    )
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
