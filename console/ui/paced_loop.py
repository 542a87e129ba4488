"""The console's event loop, paced: after a wake-up it waits a few milliseconds before it
looks for input and output again, so that what arrives meanwhile is handled in one turn.

Why: every wake-up of the loop costs this VM about 80 µs before any work is done (the
epoll call, the loop's own turn, the task that resumes). A 1,024-node fleet's agents
write about 1,000 lines a second, each at its own moment, and one wake-up per line cost
8-12 % of a core by itself (tests/perf/README.md, 2026-11-27). Looking at most 50 times a second
reads the same lines in a twentieth of the wake-ups; a key or a line then waits at most
20 ms more, where the screen draws at most a few frames a second anyway.

Only a wait is delayed, and only after a wake-up that brought input or output: when the loop
has work ready (a zero timeout) it is never held back, a timer fires on time, the first input
after a quiet spell is read at once, and a file that is ready at two wake-ups running (a large
answer coming in) is read at full speed.
"""

from __future__ import annotations

import asyncio
import math
import os
import selectors
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

# 20 ms: 50 looks a second at most; the key-to-repaint budget is 100 ms (p95)
PACE_S = 0.02

T = TypeVar("T")


class PacedSelector(selectors.DefaultSelector):  # DefaultSelector: the platform's best (epoll here)
    """A selector that never waits again within `pace` seconds of a wake-up that brought
    input or output."""

    def __init__(self, pace: float = PACE_S) -> None:
        super().__init__()
        self.pace = pace
        self.woke_at = float("-inf")
        self.wakes = 0  # wake-ups that returned events (for tests and tests/perf)
        self._last_fds: frozenset[int] = frozenset()
        self._streaming = False

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if not self._streaming and (timeout is None or timeout > 0):
            hold = self.woke_at + self.pace - time.monotonic()
            if hold > 0:
                if timeout is not None:
                    hold = min(hold, timeout)
                    timeout -= hold
                time.sleep(hold)
        ready = super().select(timeout)
        if ready:  # a timer's wake-up starts no hold: only input and output bunch up
            self.woke_at = time.monotonic()
            self.wakes += 1
            fds = frozenset(key.fd for key, _ in ready)
            # A file ready at two wake-ups running is a stream (a large answer, a file copy): it
            # is read at full speed. Held, a socket gave 13 MB/s instead of over 1 GB/s. The
            # lines of many nodes come each from a different pipe or socket.
            self._streaming = not fds.isdisjoint(self._last_fds)
            self._last_fds = fds
        return ready


def run_on(selector: selectors.BaseSelector, main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a loop of `selector` (Python 3.11's Runner)."""
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
        return runner.run(main)


def pace_from_env(default: float = PACE_S) -> float:
    """ROCM_CONSOLE_LOOP_PACE_MS in seconds (0: a wake-up for every line, as before); `default`
    when unset. ValueError, one line naming the variable, for anything but 0 to 1000 ms."""
    text = os.environ.get("ROCM_CONSOLE_LOOP_PACE_MS", "").strip()
    if not text:
        return default
    try:
        value = float(text) / 1000
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # NaN fails this too
        raise ValueError(f"ROCM_CONSOLE_LOOP_PACE_MS={text!r}: expected milliseconds from 0 to 1000 (0: no pacing)")
    return value


def run_paced(main: Coroutine[Any, Any, T], pace: float | None = None) -> T:
    """`asyncio.run(main)` on a paced loop (Python 3.11's Runner); plain `asyncio.run` before."""
    pace = pace_from_env() if pace is None else pace
    if sys.version_info < (3, 11) or pace <= 0:  # no loop_factory (3.10), or asked for none
        return asyncio.run(main)
    return run_on(PacedSelector(pace), main)
