"""The demo's lifecycle: what `rocm-console --demo` starts is the console's own.

The demo's nodes are this machine. Everything started for them (node agents, the
instance monitors, the simulated `vllm serve` and benchmark clients) carries the
console's lifeline in its environment (``ROCM_CONSOLE_LIFELINE=<pid>:<start time>``,
see console/agent/lifeline.py) and ends by itself within a second or two once the
console is gone, however it went. On a clean quit the console does not wait for
that: it stops them itself (``stop_bound``). Real nodes never see the variable
(nothing of the console's environment crosses SSH), so their instances outlive the
console as before.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ENV = "ROCM_CONSOLE_LIFELINE"
PROC = Path("/proc")


def _start_time(pid: int) -> str | None:
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def claim_lifeline() -> str:
    """Put this process's lifeline into the environment every local child inherits."""
    pid = os.getpid()
    token = f"{pid}:{_start_time(pid) or ''}"
    os.environ[ENV] = token
    return token


def bound_processes(token: str) -> list[int]:
    """Live processes (other than this one) whose environment carries the lifeline `token`."""
    needle = b"\0" + f"{ENV}={token}".encode() + b"\0"
    me = os.getpid()
    found = []
    try:
        entries = [e for e in os.listdir(PROC) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        try:
            environ = (PROC / entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or another user's
            continue
        if needle in b"\0" + environ + b"\0" and _start_time(pid) is not None:
            found.append(pid)
    return found


def stop_bound(token: str, grace: float = 3.0) -> list[int]:
    """SIGTERM every process carrying `token`, SIGKILL what is left after `grace` seconds.

    Only processes with this console's lifeline are signalled, each by its pid (the
    monitors end their instance group on SIGTERM and record its exit). Returns the pids
    that had to be killed."""
    pids = bound_processes(token)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        pids = [p for p in pids if _start_time(p) is not None]
        if not pids:
            return []
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    return pids


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
