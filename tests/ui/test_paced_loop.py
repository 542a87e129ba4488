"""The console's paced loop (console/ui/paced_loop.py): lines that arrive spread over time are
read in a few wake-ups instead of one each, a first event after a quiet spell is not held back,
and neither are timers, work that is already ready or a large answer coming in. A long pace (0.5 s) makes each behaviour
plain on a loaded machine."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

import pytest

from console.ui.paced_loop import PacedSelector, run_on, run_paced


def test_lines_spread_over_time_are_read_in_few_wake_ups_and_none_is_lost():
    # as a fleet's agents: each pipe gets a line a round (~90 ms), longer than the pace, so no
    # pipe is ready at two wake-ups running (that would be a stream, read without a hold)
    pace, pipes, rounds = 0.04, 30, 3
    fds = [os.pipe() for _ in range(pipes)]
    selector = PacedSelector(pace)

    def writer() -> None:  # one byte per pipe, 3 ms apart: ~90 ms a round
        for _ in range(rounds):
            for _, w in fds:
                os.write(w, b"x")
                time.sleep(0.003)

    async def main() -> tuple[int, float, int]:
        loop = asyncio.get_running_loop()
        got = [0]
        done = asyncio.Event()

        def readable(fd: int) -> None:
            got[0] += len(os.read(fd, 64))
            if got[0] == pipes * rounds:
                done.set()

        for r, _ in fds:
            loop.add_reader(r, readable, r)
        await asyncio.sleep(0.2)  # quiet: the first byte is read at once
        wakes0, t0 = selector.wakes, time.monotonic()
        thread = threading.Thread(target=writer)
        thread.start()
        await asyncio.wait_for(done.wait(), 30)
        span = time.monotonic() - t0
        thread.join()
        for r, _ in fds:
            loop.remove_reader(r)
        return selector.wakes - wakes0, span, got[0]

    try:
        wakes, span, got = run_on(selector, main())
    finally:
        for r, w in fds:
            os.close(r)
            os.close(w)
    assert got == pipes * rounds  # every byte read
    # 90 bytes over ~0.3 s: at most one wake-up per pace (and the first), not one per byte
    assert wakes <= span / pace + 2, (wakes, span)


def test_a_first_event_timers_and_ready_work_are_not_held_back():
    pace = 0.5
    selector = PacedSelector(pace)

    async def main() -> dict[str, float]:
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        arrived = asyncio.Event()
        loop.add_reader(r, lambda: (os.read(r, 64), arrived.set()))
        out = {}
        try:
            await asyncio.sleep(0.7)  # longer than the pace since the last wake-up
            t = time.monotonic()
            os.write(w, b"k")  # a key after a quiet spell
            await arrived.wait()
            out["first"] = time.monotonic() - t
            arrived.clear()
            # right after a wake-up: a timer 0.1 s away fires on time, not at the pace
            t = time.monotonic()
            await asyncio.sleep(0.1)
            out["timer"] = time.monotonic() - t
            # work already ready (a chain of 200 call_soon hops) never waits for the pace
            t = time.monotonic()
            for _ in range(200):
                await asyncio.sleep(0)
            out["ready"] = time.monotonic() - t
            # a byte right after a wake-up waits for the pace: what makes the lines of many
            # nodes arrive together
            t = time.monotonic()
            os.write(w, b"k")
            await arrived.wait()
            out["held"] = time.monotonic() - t
        finally:
            loop.remove_reader(r)
            os.close(r)
            os.close(w)
        return out

    out = run_on(selector, main())
    # held, each would take the pace (0.5 s); the bounds leave room for a loaded machine
    assert out["first"] < 0.4, out
    assert out["timer"] < 0.4, out
    assert out["ready"] < 0.4, out
    assert 0.3 < out["held"] < 2.0, out


def test_a_large_answer_is_read_at_full_speed_not_a_chunk_per_pace():
    pace, size = 0.5, 16 * 1024 * 1024
    selector = PacedSelector(pace)
    near, far = socket.socketpair()

    def send() -> None:
        block = b"x" * 65536
        for _ in range(size // len(block)):
            far.sendall(block)
        far.close()

    async def main() -> tuple[int, float]:
        reader, writer = await asyncio.open_connection(sock=near)
        thread = threading.Thread(target=send)
        t = time.monotonic()
        thread.start()
        got = 0
        while chunk := await reader.read(1 << 20):
            got += len(chunk)
        elapsed = time.monotonic() - t
        writer.close()
        thread.join()
        return got, elapsed

    got, elapsed = run_on(selector, main())
    assert got == size
    # held at every read it would take over 30 s (a socket read brings at most 256 KB); once the
    # socket is ready at two wake-ups running it is a stream, read without a hold
    assert elapsed < 3 * pace, elapsed


def test_run_paced_runs_a_coroutine_to_its_end_and_closes_its_loop():
    seen = {}

    async def main() -> str:
        loop = asyncio.get_running_loop()
        seen["loop"] = loop
        await asyncio.sleep(0.01)
        return "done"

    assert run_paced(main()) == "done"
    assert seen["loop"].is_closed()


def test_the_pace_comes_from_the_environment_and_zero_turns_it_off(monkeypatch):
    from console.ui.paced_loop import PACE_S, pace_from_env

    monkeypatch.delenv("ROCM_CONSOLE_LOOP_PACE_MS", raising=False)
    assert pace_from_env() == PACE_S
    for text, pace in (("0", 0.0), ("50", 0.05), (" 5 ", 0.005)):
        monkeypatch.setenv("ROCM_CONSOLE_LOOP_PACE_MS", text)
        assert pace_from_env() == pace
    for bad in ("fast", "-1", "5000", "nan"):  # not a pace: one line naming the variable
        monkeypatch.setenv("ROCM_CONSOLE_LOOP_PACE_MS", bad)
        with pytest.raises(ValueError, match=f"^ROCM_CONSOLE_LOOP_PACE_MS='{bad}': expected milliseconds"):
            pace_from_env()

    monkeypatch.setenv("ROCM_CONSOLE_LOOP_PACE_MS", "0")
    seen = {}

    async def main() -> None:
        seen["selector"] = type(asyncio.get_running_loop()._selector)  # type: ignore[attr-defined]

    run_paced(main())
    assert seen["selector"] is not PacedSelector  # off: the plain loop, as before
