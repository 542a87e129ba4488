"""LocalTransport: the node is this machine (the demo, tests, a console run on a GPU node)."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, AsyncGenerator, Mapping, Sequence

from console.transport.base import (
    MAX_LINE_BYTES,
    READ_CHUNK,
    CommandResult,
    LineSplitter,
    RunOptions,
    StreamControl,
    TailBuffer,
    TransportError,
    decode,
    last_line,
    mib,
    output_limit,
)

if TYPE_CHECKING:
    from typing import Unpack

# The pipe readers' buffer mark (they are read in chunks, never a line at a time).
_STREAM_LIMIT = 1024 * 1024
KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL of a command given up on


@dataclass
class _SamePort:
    """A 'forward' to a port that is already local."""

    local_port: int

    async def close(self) -> None:
        return None


def _merged_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    if not env:
        return None
    merged = dict(os.environ)
    merged.update(env)
    return merged


class LocalTransport:
    accepts_control = True  # stream_lines(control=...)

    def __init__(self, node_name: str = "local") -> None:
        self.node_name = node_name

    async def _start(self, argv: Sequence[str], env, *, stdin=asyncio.subprocess.DEVNULL):
        if not argv:
            raise TransportError(f"{self.node_name}: empty command", "command")
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_merged_env(env),
                limit=_STREAM_LIMIT,
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"{self.node_name}: cannot run {argv[0]}: {exc.strerror}", "command") from None

    async def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        input, timeout = options.get("input"), options.get("timeout")
        stdin = asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL
        proc = await self._start(argv, options.get("env"), stdin=stdin)
        limit = output_limit(options)
        try:
            out, err = await asyncio.wait_for(_communicate(proc, input, limit), timeout)
        except asyncio.TimeoutError:
            await _end(proc)
            raise TransportError(f"{self.node_name}: {argv[0]} timed out after {timeout:g} s", "timeout") from None
        except _OutputTooLarge:
            await _end(proc)
            raise TransportError(
                f"{self.node_name}: {Path(argv[0]).name} wrote over {mib(limit)} of output: "
                "stopped, its output discarded",
                "command",
            ) from None
        except BaseException:  # cancelled: the caller gave up, the command goes too
            _kill_group(proc.pid)
            try:  # reap it, so no zombie or closed-loop warning is left behind
                await asyncio.wait_for(asyncio.shield(_end(proc)), 2 * KILL_GRACE + 1)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            raise
        return CommandResult(proc.returncode or 0, decode(out), decode(err))

    async def stream_lines(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        # An adopted early agent (the demo's) has no stdin of ours: its control stays unbound.
        proc = await _adopt_early(argv, env) or await self._start(
            argv, env, stdin=asyncio.subprocess.PIPE if control is not None else asyncio.subprocess.DEVNULL
        )
        assert proc.stdout is not None and proc.stderr is not None
        stdin = getattr(proc, "stdin", None)  # an adopted process has none
        if control is not None and stdin is not None:
            control.bind(stdin.write)
        err = TailBuffer()
        stderr_task = asyncio.ensure_future(_drain(proc.stderr, err))
        lines = LineSplitter(MAX_LINE_BYTES)
        finished = False
        try:
            while True:
                chunk = await proc.stdout.read(READ_CHUNK)
                if not chunk:
                    break
                for raw, cut in lines.feed(chunk):
                    if cut:
                        raise _line_too_long(self.node_name, argv)
                    yield decode(raw).rstrip("\r")
                if lines.cutting:  # no need to wait for the end of that line
                    raise _line_too_long(self.node_name, argv)
            for raw, _cut in lines.close():
                yield decode(raw).rstrip("\r")
            code = await proc.wait()
            finished = True
            if code != 0:
                try:
                    await asyncio.wait_for(asyncio.shield(stderr_task), 2)
                except asyncio.TimeoutError:
                    pass
                raise TransportError(
                    f"{self.node_name}: {Path(argv[0]).name} exited {code}: "
                    f"{last_line(decode(err.getvalue()), '(no error output)')}",
                    "command",
                )
        finally:
            if control is not None:
                control.bind(None)
            if not finished and proc.returncode is None:
                await _end(proc)
            stderr_task.cancel()

    async def spawn_detached(self, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None) -> int:
        path = Path(log_path).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as log, open(os.devnull, "rb") as devnull:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=devnull,
                    stdout=log,
                    stderr=log,
                    env=_merged_env(env),
                    start_new_session=True,
                )
            except OSError as exc:
                raise TransportError(f"{self.node_name}: cannot run {argv[0]}: {exc.strerror}", "command") from None
        # Reap it in the background so it never lingers as a zombie of ours.
        asyncio.ensure_future(proc.wait())
        return proc.pid

    async def upload(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        write_file_atomic(data, remote_path, mode=mode)

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> _SamePort:
        if remote_host not in ("127.0.0.1", "localhost", "::1"):
            raise TransportError(f"{self.node_name}: local transport cannot reach {remote_host}", "command")
        return _SamePort(remote_port)

    async def close(self) -> None:
        return None


def write_file_atomic(data: bytes, path_text: str, *, mode: int = 0o644) -> None:
    """Write via a temporary file and a rename: a reader never sees half a file."""
    path = Path(path_text).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------- started before the event loop
#
# A console whose nodes are this machine (the demo) starts their agents before it loads its UI:
# each agent's start (~50 ms of CPU) then overlaps the console's own imports instead of
# following its first frame. stream_lines() adopts a process started here for the same command
# and environment; whatever nobody adopts is stopped by discard_early().

_EARLY: dict[tuple, subprocess.Popen] = {}
# Python 3.10 has no process_group: setpgrp in the child (no threads run yet at that point).
_OWN_GROUP: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
_EARLY_MAX = 64  # bounded: one per local node


def _early_key(argv: Sequence[str], env: Mapping[str, str] | None) -> tuple:
    return (tuple(argv), tuple(sorted((env or {}).items())))


def start_early(argv: Sequence[str], env: Mapping[str, str] | None = None, *, nice: int = 0) -> bool:
    """Start `argv` now (no event loop needed); False if it could not be started or is already.

    The process leads its own process group (stopped as a group, like every command of this
    transport) but stays in the console's session: with the kernel's autogroup scheduling a
    new session would be a scheduling group of its own, and `nice` would not make it yield
    to the console."""
    key = _early_key(argv, env)
    if key in _EARLY or len(_EARLY) >= _EARLY_MAX or not argv:
        return False
    if nice:
        import shutil

        nice_path = shutil.which("nice")  # coreutils; without it the process runs at normal priority
        argv = [nice_path, "-n", str(nice), *argv] if nice_path else argv
    try:
        _EARLY[key] = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_merged_env(env),
            **_OWN_GROUP,
        )
    except OSError:
        return False  # stream_lines will start it and report why
    return True


def discard_early() -> list[int]:
    """Stop every early process nobody adopted (by its own process group); returns their pids."""
    pids = []
    while _EARLY:
        _, proc = _EARLY.popitem()
        pids.append(proc.pid)
        if proc.poll() is None:
            _kill_group(proc.pid)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return pids


class _AdoptedProcess:
    """An early process seen through asyncio: the parts of asyncio.subprocess.Process stream_lines uses."""

    def __init__(self, popen: subprocess.Popen, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader, pipes):
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        self._pipes = pipes

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        # Not a child of asyncio's watcher: polled, briefly (it has closed its output or been
        # signalled when this is awaited); a process that lingers past 10 s is killed.
        deadline = time.monotonic() + 10.0
        delay = 0.005
        try:
            while self._popen.poll() is None:
                if time.monotonic() > deadline:
                    _kill_group(self.pid, signal.SIGKILL)
                    deadline = float("inf")
                await asyncio.sleep(delay)
                delay = min(0.1, delay * 2)
        finally:  # also when the caller gives up waiting: no pipe is left open
            for pipe in self._pipes:
                pipe.close()
        code = self._popen.returncode
        assert code is not None
        return code


async def _adopt_early(argv: Sequence[str], env: Mapping[str, str] | None) -> _AdoptedProcess | None:
    popen = _EARLY.pop(_early_key(argv, env), None)
    if popen is None:
        return None
    loop = asyncio.get_running_loop()
    readers = []
    pipes = []
    for pipe in (popen.stdout, popen.stderr):
        reader = asyncio.StreamReader(limit=_STREAM_LIMIT, loop=loop)
        transport, _ = await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), pipe)
        readers.append(reader)
        pipes.append(transport)
    return _AdoptedProcess(popen, readers[0], readers[1], pipes)


class _OutputTooLarge(Exception):
    pass


def _line_too_long(node_name: str, argv: Sequence[str]) -> TransportError:
    return TransportError(
        f"{node_name}: {Path(argv[0]).name} wrote a line over {mib(MAX_LINE_BYTES)}: stopped, the line discarded",
        "command",
    )


async def _drain(reader: asyncio.StreamReader, into: TailBuffer) -> None:
    """Read a pipe to its end, keeping its tail: a chatty stderr never fills the pipe."""
    while True:
        chunk = await reader.read(READ_CHUNK)
        if not chunk:
            return
        into.write(chunk)


async def _communicate(proc, input: str | None, limit: int) -> tuple[bytes, bytes]:
    """communicate() that keeps at most `limit` bytes of stdout (then _OutputTooLarge)."""
    err = TailBuffer()
    drain = asyncio.ensure_future(_drain(proc.stderr, err))
    feeder = None
    if input is not None:

        async def feed() -> None:
            try:
                proc.stdin.write(input.encode())
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the command did not read it all: its exit status says the rest
            finally:
                proc.stdin.close()

        feeder = asyncio.ensure_future(feed())
    out = bytearray()
    try:
        while True:
            chunk = await proc.stdout.read(READ_CHUNK)
            if not chunk:
                break
            if len(out) + len(chunk) > limit:
                raise _OutputTooLarge
            out += chunk
        await drain
        await proc.wait()
    finally:
        drain.cancel()
        if feeder is not None:
            feeder.cancel()
    return bytes(out), err.getvalue()


async def _end(proc) -> None:
    """SIGTERM the command's process group, SIGKILL what is left of it after KILL_GRACE; reap.

    The group outlives its leader while any member lives (and its id is not reused
    meanwhile), so the final SIGKILL also ends children the leader left behind."""
    if proc.returncode is None:
        _kill_group(proc.pid)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except asyncio.TimeoutError:
            pass
    _kill_group(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except asyncio.TimeoutError:
            pass


def _kill_group(pid: int, sig: int = signal.SIGTERM) -> None:
    # The child leads its own process group, so its group id is its pid: we only
    # ever signal the group we created.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
