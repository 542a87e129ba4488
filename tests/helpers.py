"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from pathlib import Path

_given: set[int] = set()
# Its own generator: a test that seeds the global one must not make two test processes pick their
# ports in step.
_ports = random.Random()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1), below the kernel's ephemeral range:
    a port the kernel hands out (bind to 0) may be taken, before the test's server binds it, by
    an outgoing connection of anything running beside (CI runs two halves of the suite at
    once). Never the same port twice in one test process."""
    top = max(_ephemeral_start(), 20_001)
    for _ in range(200):
        port = _ports.randrange(20_000, top)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    with socket.socket() as s:  # a crowded range: the kernel's choice, as before
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_for(predicate, timeout: float = 20.0, step: float = 0.05, pause=asyncio.sleep) -> bool:
    """Poll `predicate` on the running event loop until it holds or `timeout` passes.

    pause: what waits between two looks (a Textual pilot's pause lets the app draw too).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():
            return True
        await pause(step)
    return bool(predicate())


def wait_until(predicate, timeout: float = 20.0, step: float = 0.05) -> bool:
    """wait_for without an event loop: for a process or a terminal the test watches from outside."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def loopback_buffer_bytes() -> int:
    """The most one loopback connection can hold in flight, in the kernel, between the server's
    write and the console's read: the send buffer's and the receive buffer's maximum (tcp_wmem,
    tcp_rmem: the receive side may grow to 32 MiB on some machines, 6 MiB on others)."""
    total = 0
    for name in ("tcp_wmem", "tcp_rmem"):
        try:
            total += int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
        except (OSError, ValueError, IndexError):
            total += 32 * 2**20
    return total


def followed_run_log(argv: list[str]) -> str | None:
    """The run whose log a node agent command line follows (`instance --group=G logs ... -- RUN`:
    services/agent_bundle.py sends options as --key=value and positionals after `--`), else None."""
    if "logs" not in argv or not any(a == "--group" or a.startswith("--group=") for a in argv):
        return None
    return argv[argv.index("--") + 1] if "--" in argv else argv[argv.index("logs") + 1]
