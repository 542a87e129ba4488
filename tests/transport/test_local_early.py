"""Processes started before the event loop (the demo's agents) and adopted by stream_lines."""

from __future__ import annotations

import os
import sys
import time

import pytest

from console.transport import local
from console.transport.base import TransportError
from console.transport.local import LocalTransport, discard_early, start_early

PY = sys.executable
TALK = "import os, sys, time\nprint(os.getpid(), flush=True)\nprint('second', flush=True)\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


@pytest.fixture(autouse=True)
def _nothing_left():
    yield
    discard_early()


async def test_stream_lines_adopts_the_process_started_early():
    argv = [PY, "-c", TALK + "time.sleep(0.2)"]
    assert start_early(argv, {"X_EARLY": "1"})
    early_pid = next(iter(local._EARLY.values())).pid
    lines = [line async for line in LocalTransport("n").stream_lines(argv, env={"X_EARLY": "1"})]
    assert lines == [str(early_pid), "second"]  # its output, from the start: nothing was lost
    assert local._EARLY == {}
    assert not _alive(early_pid)


async def test_another_command_or_environment_is_started_afresh():
    argv = [PY, "-c", TALK]
    assert start_early(argv, {"X_EARLY": "1"})
    early_pid = next(iter(local._EARLY.values())).pid
    lines = [line async for line in LocalTransport("n").stream_lines(argv, env={"X_EARLY": "2"})]
    assert lines[0] != str(early_pid)
    assert len(local._EARLY) == 1  # still waiting for its own command
    assert discard_early() == [early_pid]
    assert not _alive(early_pid)


async def test_an_adopted_process_that_fails_says_why_in_one_line():
    argv = [PY, "-c", "import sys; print('no GPU here', file=sys.stderr); sys.exit(3)"]
    assert start_early(argv)
    with pytest.raises(TransportError, match=r"^n: python\S* exited 3: no GPU here$"):
        async for _ in LocalTransport("n").stream_lines(argv):
            pass


async def test_a_reader_that_stops_early_ends_the_adopted_process():
    argv = [PY, "-c", "import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.05)"]
    assert start_early(argv)
    pid = next(iter(local._EARLY.values())).pid
    stream = LocalTransport("n").stream_lines(argv)
    assert await stream.__anext__() == "0"
    await stream.aclose()
    for _ in range(100):  # bounded: the group was signalled, it ends at once
        if not _alive(pid):
            break
        time.sleep(0.02)
    assert not _alive(pid)


def test_early_processes_yield_to_the_console_and_stop_as_a_group():
    argv = [PY, "-c", "import time; time.sleep(30)"]
    assert start_early(argv, nice=19)
    assert not start_early(argv, nice=19)  # the same command is not started twice
    pid = next(iter(local._EARLY.values())).pid
    for _ in range(100):  # `nice` lowers its priority, then becomes the command (bounded wait)
        stat = _stat(pid)
        if int(stat[16]) == 19:
            break
        time.sleep(0.01)
    pgid, sid, nice = int(stat[2]), int(stat[3]), int(stat[16])
    assert pgid == pid  # its own group: stopped with everything it starts
    assert sid == os.getsid(0)  # but in the console's session, where nice counts against the console
    assert nice == 19
    assert discard_early() == [pid]
    assert not _alive(pid)


def test_a_program_that_cannot_start_is_left_to_stream_lines():
    assert not start_early(["/no/such/agent"])
    assert local._EARLY == {}
