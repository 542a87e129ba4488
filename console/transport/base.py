"""The Transport protocol every node connection implements.

Commands are argv lists, never shell strings: implementations that need a
shell (SSH) quote them with ``shlex.join`` so arguments stay literal.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncGenerator, Callable, Mapping, Protocol, Sequence, TypedDict

if TYPE_CHECKING:
    from typing import Unpack  # Python >= 3.11; annotations only

from console.core.node_json import MAX_LINE_CHARS
from console.core.text import printable

# A line of a streamed command (the agent's telemetry, a run's log) is at most this many
# bytes: a longer one is not held, its rest is dropped and the stream ends with an error.
MAX_LINE_BYTES = MAX_LINE_CHARS
# What `run` keeps of a command's stdout (a result file with per-request arrays fits); past
# it the command is stopped and the call fails, nothing more is read into memory.
RUN_OUTPUT_LIMIT = 64 * 1024 * 1024
# What a one-shot agent command (a probe, one sample, a listing) may write: a few lines.
AGENT_OUTPUT_LIMIT = 16 * 1024 * 1024
# A result file read back from a node (vLLM's JSON with per-request arrays).
RESULT_FILE_LIMIT = 1024 * 1024 * 1024
# What is kept of a command's stderr: its last bytes (where the error is).
STDERR_TAIL = 256 * 1024
READ_CHUNK = 64 * 1024


class TransportError(Exception):
    """A one-line, user-facing reason why a node could not be reached or used.

    ``kind`` is one of: unreachable, auth, host_key, timeout, closed, command, shell
    (the node's login did not run the console's command: a ForceCommand, a shell that
    ignores it). The reason often quotes the node's own words (its last stderr line):
    it is made printable, so it can be shown on a terminal as it is.
    """

    def __init__(self, reason: str, kind: str = "unreachable") -> None:
        reason = printable(reason)
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


class RunOptions(TypedDict, total=False):
    """The keyword arguments of ``Transport.run``, one place for every implementation."""

    env: Mapping[str, str] | None  # added to the command's environment
    input: str | None  # written to the command's stdin
    timeout: float | None  # seconds; past it the command is stopped (TransportError, kind timeout)
    max_output: int | None  # bytes of stdout kept; RUN_OUTPUT_LIMIT when None or not given


def output_limit(options: RunOptions) -> int:
    """The bytes of stdout ``run`` keeps before it stops the command."""
    limit = options.get("max_output")
    return RUN_OUTPUT_LIMIT if limit is None else limit


class StreamControl:
    """Lines the console writes to a streamed command's stdin while it runs (the agent's rate
    control, console/agent/sampling.py ControlReader).

    The transport binds it to the command's stdin when it starts and unbinds it when the
    command ends; ``send`` is best effort (False: no command, or its stdin is gone), so a
    command that never reads its stdin (an older agent) costs nothing but the unread bytes.
    Transports that take one say so with ``accepts_control = True``.
    """

    __slots__ = ("_write", "sent")

    def __init__(self) -> None:
        self._write: Callable[[bytes], object] | None = None
        self.sent = 0

    def bind(self, write: Callable[[bytes], object] | None) -> None:
        self._write = write

    @property
    def bound(self) -> bool:
        return self._write is not None

    def send(self, line: str) -> bool:
        write = self._write
        if write is None:
            return False
        try:
            write(line.encode() + b"\n")
        except Exception:  # noqa: BLE001 - a closed pipe or channel: the stream itself reports the end
            self._write = None
            return False
        self.sent += 1
        return True


class PortForward(Protocol):
    local_port: int

    async def close(self) -> None: ...


class Transport(Protocol):
    """One node. Implementations reuse a single connection for everything."""

    node_name: str

    async def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        """Run to completion (``options``: env, input, timeout, max_output; see RunOptions).
        Raises TransportError (kind timeout) past ``timeout``, and (kind command) when stdout
        grows past ``max_output`` bytes (RUN_OUTPUT_LIMIT by default): the command is then
        stopped. Either way nothing is left running."""
        ...

    def stream_lines(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        """Yield stdout lines (without newline) of a long-running command.

        Ends when the command exits. Raises TransportError when the link
        drops, the command exits non-zero (the reason carries its last
        stderr line) or writes a line over MAX_LINE_BYTES (the line is not
        kept). Closing the generator (``aclose()``) stops the remote command.
        Transports with ``accepts_control`` also take ``control=StreamControl()``: the
        command's stdin is then a pipe the console can write lines to.
        """
        ...

    async def spawn_detached(self, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None) -> int:
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


class LineSplitter:
    """Bytes in, lines out, never holding more than ``limit`` bytes of one line.

    A line over the limit keeps its first ``limit`` bytes; the rest is dropped as it
    arrives, and the line comes out marked as cut (``cutting`` is true from the moment
    the limit is passed, so a reader can give up at once instead of waiting for its end).
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buf = bytearray()
        self.cutting = False
        self.dropped = 0  # bytes dropped of the line being cut

    def feed(self, data: bytes) -> list[tuple[bytes, bool]]:
        """The lines `data` completes: (line without its newline, cut)."""
        out: list[tuple[bytes, bool]] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            if self.cutting:
                self.dropped += end - start
            else:
                room = self.limit - len(self._buf)
                if end - start > room:
                    self._buf += data[start : start + room]
                    self.dropped = end - start - room
                    self.cutting = True
                else:
                    self._buf += data[start:end]
            if nl < 0:
                return out
            out.append((bytes(self._buf), self.cutting))
            self._buf.clear()
            self.cutting = False
            self.dropped = 0
            start = nl + 1

    def close(self) -> list[tuple[bytes, bool]]:
        """The last line, if the stream did not end with a newline."""
        if not self._buf and not self.cutting:
            return []
        out = [(bytes(self._buf), self.cutting)]
        self._buf.clear()
        self.cutting = False
        return out


class TailBuffer:
    """The last ``limit`` bytes written to it (a command's stderr: the error is at its end)."""

    def __init__(self, limit: int = STDERR_TAIL) -> None:
        self.limit = limit
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self.dropped = 0

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._chunks.append(bytes(data))
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= self.limit:
            gone = self._chunks.popleft()
            self._size -= len(gone)
            self.dropped += len(gone)

    def getvalue(self) -> bytes:
        data = b"".join(self._chunks)
        return data[-self.limit :] if len(data) > self.limit else data


def decode(data: bytes) -> str:
    """A node's bytes as text: invalid UTF-8 becomes U+FFFD, never an exception."""
    return data.decode("utf-8", "replace")


def last_line(text: str, default: str = "") -> str:
    """The last non-blank line of a command's output, stripped (an error's one line)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return default


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"
