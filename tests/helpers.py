"""Small helpers shared by the tests."""

from __future__ import annotations

import asyncio
import socket


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def wait_for(predicate, timeout: float = 20.0, step: float = 0.05) -> bool:
    """Poll `predicate` on the running event loop until it holds or `timeout` passes."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():
            return True
        await asyncio.sleep(step)
    return False
