"""Small helpers shared by the tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on right now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
