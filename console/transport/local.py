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
from typing import TYPE_CHECKING, AsyncGenerator, Awaitable, Mapping, Sequence

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

    async def _start(self, argv: Sequence[str], env, *, stdin: bool = False) -> _Command:
        if not argv:
            raise TransportError(f"{self.node_name}: empty command", "command")
        # The child runs before its start returns. A caller's cancel landing in between would
        # leave a group nobody ends: the start is shielded, and on a cancel it finishes, then
        # the group is ended.
        starting = asyncio.ensure_future(self._spawn(argv, env, stdin))
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            await _unless_slow(_end_once_started(starting))
            raise

    async def _spawn(self, argv: Sequence[str], env, want_stdin: bool) -> _Command:
        # The pipes are ours, not asyncio's: in 3.11 its wait(), and its clean-up of a start
        # cancelled midway, wait until its pipes close, which a grandchild that outlives the
        # leader can put off for as long as it runs (the cancel test hung 300 s in CI).
        pipes = [os.pipe() for _ in range(3 if want_stdin else 2)]
        ours = [os.fdopen(fd, "rb" if i < 2 else "wb", buffering=0) for i, fd in enumerate(_ends(pipes))]
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=pipes[2][0] if want_stdin else asyncio.subprocess.DEVNULL,
                    stdout=pipes[0][1],
                    stderr=pipes[1][1],
                    env=_merged_env(env),
                    start_new_session=True,
                )
            finally:  # the child's ends: only the child keeps them
                for fd in _child_ends(pipes):
                    os.close(fd)
        except BaseException as exc:
            for fh in ours:
                fh.close()
            if isinstance(exc, OSError):
                raise TransportError(f"{self.node_name}: cannot run {argv[0]}: {exc.strerror}", "command") from None
            raise
        try:
            readers, transports = await _connect_readers(ours[:2])
            writer = await _connect_writer(ours[2], transports) if want_stdin else None
        except BaseException:  # the loop is going away: end the group at once
            _kill_group(proc.pid, signal.SIGKILL)
            for fh in ours:
                fh.close()
            raise
        return _Command(proc, readers[0], readers[1], writer, transports)

    async def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        input, timeout = options.get("input"), options.get("timeout")
        proc = await self._start(argv, options.get("env"), stdin=input is not None)
        limit = output_limit(options)
        try:
            out, err = await asyncio.wait_for(_communicate(proc, input, limit), timeout)
        except asyncio.TimeoutError:
            await _unless_slow(_end(proc))
            raise TransportError(f"{self.node_name}: {argv[0]} timed out after {timeout:g} s", "timeout") from None
        except _OutputTooLarge:
            await _unless_slow(_end(proc))
            raise TransportError(
                f"{self.node_name}: {Path(argv[0]).name} wrote over {mib(limit)} of output: "
                "stopped, its output discarded",
                "command",
            ) from None
        except BaseException:  # cancelled: the caller gave up, the command goes too
            _kill_group(proc.pid)
            try:  # reap it, so no zombie or closed-loop warning is left behind
                await _unless_slow(_end(proc))
            except asyncio.CancelledError:
                pass
            raise
        finally:
            proc.close()
        return CommandResult(proc.returncode or 0, decode(out), decode(err))

    async def stream_lines(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        # An adopted early agent (the demo's) was started with a stdin pipe of ours: controlled alike.
        proc: _Command | _AdoptedProcess = await _adopt_early(argv, env) or await self._start(
            argv, env, stdin=control is not None
        )
        assert proc.stdout is not None and proc.stderr is not None
        stdin = proc.stdin
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
            stderr_task.cancel()
            try:
                if not finished and proc.returncode is None:
                    await _unless_slow(_end(proc))
            finally:
                proc.close()

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
            # a pipe, not /dev/null: the fleet that adopts it writes its control lines there
            # (rate control); until then nothing is written, and the agent waits for none
            stdin=subprocess.PIPE,
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
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return pids


class _AdoptedProcess:
    """An early process seen through asyncio: the parts of asyncio.subprocess.Process stream_lines uses."""

    def __init__(
        self,
        popen: subprocess.Popen,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        stdin: asyncio.StreamWriter | None,
        pipes,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = stdin
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

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.close()


class _Command:
    """A command of ours: asyncio watches its process; its pipes are read and written through
    transports of ours (see LocalTransport._spawn)."""

    def __init__(self, proc, stdout: asyncio.StreamReader, stderr: asyncio.StreamReader, stdin, transports):
        self._proc = proc
        self.pid: int = proc.pid
        self.stdout = stdout
        self.stderr = stderr
        self.stdin: asyncio.StreamWriter | None = stdin
        self._transports = transports

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    def close(self) -> None:
        for transport in self._transports:
            transport.close()


def _ends(pipes: list[tuple[int, int]]) -> list[int]:
    """Our ends: the read ends of stdout and stderr, the write end of stdin."""
    return [pipes[0][0], pipes[1][0], *([pipes[2][1]] if len(pipes) > 2 else [])]


def _child_ends(pipes: list[tuple[int, int]]) -> list[int]:
    return [pipes[0][1], pipes[1][1], *([pipes[2][0]] if len(pipes) > 2 else [])]


async def _connect_readers(files) -> tuple[list[asyncio.StreamReader], list]:
    loop = asyncio.get_running_loop()
    readers = []
    transports = []
    try:
        for fh in files:
            reader = asyncio.StreamReader(limit=_STREAM_LIMIT, loop=loop)
            transport, _ = await loop.connect_read_pipe(functools.partial(asyncio.StreamReaderProtocol, reader), fh)
            readers.append(reader)
            transports.append(transport)
    except BaseException:
        for transport in transports:
            transport.close()
        raise
    return readers, transports


async def _connect_writer(fh, transports: list) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop)), fh
        )
    except BaseException:
        for other in transports:
            other.close()
        raise
    transports.append(transport)
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _adopt_early(argv: Sequence[str], env: Mapping[str, str] | None) -> _AdoptedProcess | None:
    popen = _EARLY.pop(_early_key(argv, env), None)
    if popen is None:
        return None
    try:
        readers, pipes = await _connect_readers([popen.stdout, popen.stderr])
        stdin = await _connect_writer(popen.stdin, pipes) if popen.stdin is not None else None
    except BaseException:  # cancelled: out of _EARLY and not yet stream_lines', nobody else would stop it
        _kill_group(popen.pid, signal.SIGKILL)
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                pipe.close()
        try:
            popen.wait(timeout=1)  # a SIGKILLed process is gone at once: no zombie left
        except subprocess.TimeoutExpired:
            pass
        raise
    return _AdoptedProcess(popen, readers[0], readers[1], stdin, pipes)


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
    meanwhile), so the final SIGKILL also ends children the leader left behind. Only the
    processes are waited for, never the pipes (a process outside the group may hold them)."""
    if proc.returncode is None:
        _kill_group(proc.pid)
        deadline = time.monotonic() + KILL_GRACE
        while _group_lives(proc) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    _kill_group(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except asyncio.TimeoutError:
            pass


def _group_lives(proc) -> bool:
    if proc.returncode is None:
        return True
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


# Ends of groups still running after their caller was cancelled again (a task the loop holds
# only weakly must be referenced until it is done).
_ENDING: set[asyncio.Future] = set()


async def _unless_slow(ending: Awaitable[None]) -> None:
    """Await `ending` (an end of a group) for at most 2 * KILL_GRACE + 1 s, shielded: a caller
    cancelled meanwhile gets its CancelledError at once, the end still runs to its SIGKILL."""
    task = asyncio.ensure_future(ending)
    _ENDING.add(task)
    task.add_done_callback(_ENDING.discard)
    try:
        await asyncio.wait_for(asyncio.shield(task), 2 * KILL_GRACE + 1)
    except asyncio.TimeoutError:
        pass


async def _end_once_started(starting: asyncio.Future) -> None:
    try:
        proc = await starting
    except Exception:
        return  # it could not start: nothing runs
    try:
        await _end(proc)
    finally:
        proc.close()


def _kill_group(pid: int, sig: int = signal.SIGTERM) -> None:
    # The child leads its own process group, so its group id is its pid: we only
    # ever signal the group we created.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
