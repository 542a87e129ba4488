"""A terminal driver whose input thread sleeps while nobody types.

Textual's Linux driver wakes its input thread ten times a second, whatever happens, so that
its parser can time out a lone Escape (ESCDELAY, 100 ms). On a console left open all day a
wake-up of an idle Python thread is what costs: the ten a second were 0.18 % of a core on a
2-core VM, a sixth of the whole console's budget (tests/perf/idle_cpu.py). This driver polls
at that pace only for a moment after input, when a key sequence may still be incomplete,
and otherwise blocks until a byte comes; quitting wakes it through a pipe (the exit event
writes to it), so it never waits for a timeout to end.
"""

from __future__ import annotations

import os
import selectors
import threading
import time
from codecs import getincrementaldecoder

from textual import constants
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

# After input, poll as Textual does for this long: an incomplete sequence (a lone Escape)
# is timed out by the parser's tick within ESCDELAY.
POLL_S = 0.1
POLL_AFTER_INPUT_S = max(1.0, 3 * constants.ESCAPE_DELAY)


class _WakingEvent(threading.Event):
    """The driver's exit event: setting it also wakes the input thread's select."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd: int | None = wake_fd  # None once the driver closed it

    def set(self) -> None:
        super().set()
        if self.wake_fd is not None:
            try:
                os.write(self.wake_fd, b"\0")
            except OSError:  # full: the thread is awake anyway
                pass


class QuietLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread blocks while there is no input (see the module's text)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.exit_event = _WakingEvent(self._wake_w)

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        now = time.monotonic
        last_input = now()

        def handle(ready: list, final: bool = False) -> bool:
            got = False
            for key, _mask in ready:
                if key.fd == self._wake_r:
                    try:
                        os.read(self._wake_r, 512)
                    except OSError:
                        pass
                    continue
                data = decode(os.read(self.fileno, 4096), final=final)
                if data:
                    got = True
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return got

        try:
            while not self.exit_event.is_set():
                recent = now() - last_input < POLL_AFTER_INPUT_S
                if handle(selector.select(POLL_S if recent else None)):
                    last_input = now()
            selector.unregister(self.fileno)
            handle(selector.select(POLL_S), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):  # the parser's end of input, as Textual's driver takes it
                pass

    def close(self) -> None:
        super().close()
        if isinstance(self.exit_event, _WakingEvent):
            self.exit_event.wake_fd = None  # never a write to a number the process reuses
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
