"""The Transport protocol every node connection implements.

Commands are argv lists, never shell strings: implementations that need a
shell (SSH) quote them with ``shlex.join`` so arguments stay literal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Mapping, Protocol, Sequence


class TransportError(Exception):
    """A one-line, user-facing reason why a node could not be reached or used.

    ``kind`` is one of: unreachable, auth, host_key, timeout, closed, command.
    """

    def __init__(self, reason: str, kind: str = "unreachable") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class PortForward(Protocol):
    local_port: int

    async def close(self) -> None: ...


class Transport(Protocol):
    """One node. Implementations reuse a single connection for everything."""

    node_name: str

    async def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        """Run to completion. Raises TransportError (kind timeout) past ``timeout``."""
        ...

    def stream_lines(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        """Yield stdout lines (without newline) of a long-running command.

        Ends when the command exits. Raises TransportError when the link
        drops or the command exits non-zero (the reason carries its last
        stderr line). Closing the iterator stops the remote command.
        """
        ...

    async def spawn_detached(
        self,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
    ) -> int:
        """Start a process in its own session (setsid), output to log_path; return its pid."""
        ...

    async def upload(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        """Write data to remote_path (parents created), atomically."""
        ...

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> PortForward:
        """Make remote_host:remote_port reachable on 127.0.0.1:<local_port>."""
        ...

    async def close(self) -> None: ...


def env_argv(argv: Sequence[str], env: Mapping[str, str] | None) -> list[str]:
    """Prefix argv with ``env K=V`` so the environment travels without a shell."""
    if not env:
        return list(argv)
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
