"""SshTransport: the Transport protocol over one asyncssh connection per node.

One connection per node, opened lazily and shared by every command, stream,
upload and port forward. A dead link is noticed by keepalives (every 5 s, given
up after 3 unanswered: ~20 s after the last data) and the next call opens a new
connection; ``connect(retries=N)`` retries with capped exponential backoff
(:func:`retry_schedule`). Port forwards die with their connection: forward again
after a reconnect. At most ``max_sessions`` commands/streams/uploads run at once
on the connection (sshd's MaxSessions is 10 by default); more wait their turn.

Uploads go over SFTP. A hardened sshd that serves no SFTP subsystem refuses
that request; then the file goes over a plain command channel instead: ``sh``
writes stdin to a temporary file beside the target, checks its SHA-256 against
what was sent and only then renames it over the target, so a cut-short upload
never leaves half a file under the final name (``upload_channel`` says which
way the last upload went).

Security: host keys are always checked against ``node.known_hosts`` or the
user's ``~/.ssh/known_hosts`` (or ``UserKnownHostsFile`` from ~/.ssh/config);
there is no way to turn that off from here.

Commands are argv lists quoted with ``shlex.join``. Every command runs under a
tiny ``sh`` wrapper (ssh_wrapper.py, with the other scripts run on the node) that reports its process id on stderr (the line is
removed from what callers see), so a timed-out ``run``, a cancelled one or an
early-closed ``stream_lines`` can end the remote command's whole process group
(SIGTERM, then SIGKILL what is left): OpenSSH refuses "signal" channel requests
for root logins (no post-auth privilege separation), and closing a channel alone
does not stop a remote process that does not write. ``close()`` waits for those
kills, so a console that gives up on a node and exits leaves nothing behind.

Login banners: a node whose login shell prints something on stdout before the
command runs (an ``echo`` in ~/.bashrc, a ForceCommand wrapper) would prefix the
output of every command. The wrapper therefore prints a begin marker (unique to
this transport) before the command; what comes before it is the banner: cut
off, kept in ``login_banner`` (``rocm-console doctor`` shows it with the fix) and
reported once as a warning naming the node. No marker at all means the login
never ran the command: a TransportError of kind ``shell``.

Output is read in chunks, never a line at a time: a line over MAX_LINE_BYTES
ends a stream (nothing past the cap is held), ``run`` keeps at most
RUN_OUTPUT_LIMIT bytes of stdout and the last STDERR_TAIL bytes of stderr, and
bytes that are not UTF-8 become U+FFFD.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import posixpath
import re
import secrets
import shlex
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import asyncssh

from console.core.backoff import backoff_delay
from console.core.model import NodeSpec
from console.core.text import clip, one_line, printable
from console.transport.base import (
    MAX_LINE_BYTES,
    READ_CHUNK,
    CommandResult,
    LineSplitter,
    RunOptions,
    StreamControl,
    TransportError,
    decode,
    env_argv,
    mib,
    output_limit,
)
from console.transport.ssh_wrapper import (
    BANNER_LIMIT,
    BEGIN_MARK,
    EXEC_UPLOAD_SCRIPT,
    KILL_SCRIPT,
    SPAWN_SCRIPT,
    BannerTooLong,
    BeginReader,
    StderrReader,
    first_line,
    wrapper_script,
)

if TYPE_CHECKING:
    from typing import Unpack

log = logging.getLogger("console.transport")

_T = TypeVar("_T")

KEEPALIVE_INTERVAL = 5.0
KEEPALIVE_COUNT_MAX = 3
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0
RETRYABLE_KINDS = frozenset({"unreachable", "timeout", "closed"})
# OpenSSH's MaxSessions (default 10) caps session channels per connection; more
# concurrent commands wait for a free slot (at most SESSION_WAIT s) instead of failing.
# The default leaves headroom: sshd frees a session a moment after the client
# sees it closed, and the kill of a timed-out command needs a session of its own.
MAX_SESSIONS = 8
SESSION_WAIT = 60.0
OPEN_RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4)  # a refused session open is retried this often
UPLOAD_TIMEOUT = 300.0  # an upload over a command channel; the agent bundle is ~200 KB

KILL_TIMEOUT = 10.0  # the remote kill (SIGTERM, up to 3 s for the group to go, SIGKILL)
CLOSE_WAIT = 12.0  # close() waits this long for remote kills still under way


# Login banners already reported in this process, by node: each is said once.
_BANNERS_SAID: set[str] = set()


def retry_schedule(retries: int, *, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> list[float]:
    """Delays to sleep between ``retries + 1`` connection attempts: 0.5, 1, 2, … capped at 30 s."""
    if retries < 0:
        raise ValueError("retries must be >= 0")
    return [backoff_delay(i, base=base, cap=cap) for i in range(retries)]


def parse_jump(jump: str) -> tuple[str | None, str, int | None]:
    """Split a ProxyJump spec ``[user@]host[:port]`` (``[v6addr]:port`` too)."""
    user: str | None = None
    rest = jump.strip()
    if not rest:
        raise ValueError("empty jump host")
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        user = user or None
    port: int | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep:
            raise ValueError(f"bad jump host {jump!r}")
        if tail.startswith(":"):
            port = int(tail[1:])
        elif tail:
            raise ValueError(f"bad jump host {jump!r}")
    elif rest.count(":") == 1:
        host, port_s = rest.split(":")
        port = int(port_s)
    else:
        host = rest
    if not host or (port is not None and not 0 < port < 65536):
        raise ValueError(f"bad jump host {jump!r}")
    return user, host, port


def _oserror_text(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host name ({exc.strerror or exc})"
    codes = {exc.errno}
    text = str(exc)
    # asyncio's create_connection reports several addresses as one OSError without errno.
    if exc.errno is None and "Connect call failed" in text and "[Errno 111]" in text:
        codes = {errno.ECONNREFUSED}
    if errno.ECONNREFUSED in codes or isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "no route to host"
    return one_line(exc.strerror or text or type(exc).__name__)


def _returncode_text(proc: asyncssh.SSHClientProcess) -> str:
    sig = proc.exit_signal
    if sig:
        return f"was killed by signal {sig[0]}"
    return f"exited with status {proc.exit_status}"


class _PortForward:
    """A local listener on 127.0.0.1:local_port tunnelled to the node."""

    def __init__(self, listener: asyncssh.SSHListener, remote: str) -> None:
        self._listener = listener
        self.local_port: int = listener.get_port()
        self.remote = remote

    async def close(self) -> None:
        self._listener.close()
        try:
            await asyncio.wait_for(self._listener.wait_closed(), 5)
        except (asyncio.TimeoutError, asyncssh.Error, OSError):
            pass

    def __repr__(self) -> str:
        return f"<PortForward 127.0.0.1:{self.local_port} -> {self.remote}>"


class _OutputTooLarge(Exception):
    pass


@dataclass(eq=False)
class _Running:
    """A command started under the wrapper: what reading it and ending it need."""

    conn: asyncssh.SSHClientConnection
    proc: asyncssh.SSHClientProcess
    err: StderrReader  # its stderr: the pid line (for the kill), the last lines
    drain: asyncio.Task[None]  # reads stderr into err; runs until the command is ended
    begin: BeginReader  # finds the begin marker in its stdout


class SshTransport:
    """Transport for one node over SSH; see the module docstring."""

    accepts_control = True  # stream_lines(control=...): the channel's stdin

    def __init__(self, node: NodeSpec, *, connect_timeout: float = 10.0, max_sessions: int = MAX_SESSIONS) -> None:
        self.node = node
        self.node_name = node.name
        self.connect_timeout = connect_timeout
        self.max_sessions = max_sessions
        self._slots: asyncio.Semaphore | None = None
        self._conn: asyncssh.SSHClientConnection | None = None
        self._jump: asyncssh.SSHClientConnection | None = None
        self._lock: asyncio.Lock | None = None
        self._sleep = asyncio.sleep  # replaced in tests
        self._bg: set[asyncio.Task] = set()
        # Why this connection's sshd gave no SFTP: (connection, reason); asked once per connection.
        self._no_sftp: tuple[asyncssh.SSHClientConnection, str] | None = None
        self.upload_channel: str | None = None  # "sftp" or "exec": how the last upload went
        # Printed by the wrapper before each command; unique, so no banner can fake it.
        self._begin_mark = f"{BEGIN_MARK} {secrets.token_hex(8)}"
        # What the node's login printed on stdout before a command (printable), once seen.
        self.login_banner: str | None = None

    def __repr__(self) -> str:
        state = "connected" if self.connected else "idle"
        return f"<SshTransport {self.node_name} {self._where()} {state}>"

    async def __aenter__(self) -> SshTransport:  # noqa: PYI034
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- connection

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    def _where(self, host: str | None = None, port: int | None = None) -> str:
        return f"{host or self.node.host}:{port or self.node.port}"

    def _err(self, kind: str, text: str) -> TransportError:
        return TransportError(one_line(f"{self.node_name}: {text}"), kind=kind)

    async def connect(self, *, retries: int = 0) -> None:
        """Open the connection unless it is up; retry retryable failures with backoff."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.connected:
                return
            delays = retry_schedule(retries)
            for attempt in range(retries + 1):
                try:
                    await self._open()
                    return
                except TransportError as err:
                    if err.kind not in RETRYABLE_KINDS or attempt >= retries:
                        raise
                    await self._sleep(delays[attempt])

    async def _connection(self) -> asyncssh.SSHClientConnection:
        if not self.connected:
            await self.connect()
        assert self._conn is not None
        return self._conn

    async def _open(self) -> None:
        await self._drop()
        node = self.node
        known_hosts = self._known_hosts_arg()
        client_keys: object = [os.path.expanduser(node.identity_file)] if node.identity_file else ()
        tunnel: object = ()
        if node.jump:
            try:
                juser, jhost, jport = parse_jump(node.jump)
            except ValueError as exc:
                raise self._err("unreachable", f"jump host: {exc}") from None
            self._jump = await self._connect_one(
                jhost, jport, juser, client_keys, known_hosts, tunnel=(), label="jump host ", via=""
            )
            tunnel = self._jump
        try:
            self._conn = await self._connect_one(
                node.host,
                node.port,
                node.user,
                client_keys,
                known_hosts,
                tunnel=tunnel,
                label="",
                via=f" via jump host {node.jump}" if node.jump else "",
            )
        except BaseException:
            await self._drop()
            raise

    def _known_hosts_arg(self) -> object:
        if self.node.known_hosts:
            path = os.path.expanduser(self.node.known_hosts)
            if not os.path.isfile(path):
                raise self._err("host_key", f"known_hosts file {path} does not exist")
            return path
        return ()  # asyncssh: UserKnownHostsFile from ~/.ssh/config, else ~/.ssh/known_hosts

    async def _connect_one(
        self,
        host: str,
        port: int | None,
        user: str | None,
        client_keys: object,
        known_hosts: object,
        *,
        tunnel: object,
        label: str,
        via: str,
    ) -> asyncssh.SSHClientConnection:
        # Port 22 and no user: leave them to ~/.ssh/config (Port, User), as ssh does.
        port_arg: object = port if port and port != 22 else ()
        where = f"{label}{self._where(host, port or 22)}{via}"
        kwargs: dict[str, object] = {
            "host": host,
            "port": port_arg,
            "tunnel": tunnel,
            "username": user if user else (),
            "client_keys": client_keys,
            "known_hosts": known_hosts,
            "keepalive_interval": KEEPALIVE_INTERVAL,
            "keepalive_count_max": KEEPALIVE_COUNT_MAX,
            "connect_timeout": self.connect_timeout,
        }
        try:
            # What asyncssh.connect() will resolve from ~/.ssh/config (config=() loads it;
            # the options class alone defaults to no config): port, user, known_hosts.
            options = await asyncssh.SSHClientConnectionOptions.construct(config=(), **kwargs)
            if options.known_hosts is None:  # "UserKnownHostsFile none" must not disable checking
                kwargs["known_hosts"] = os.path.expanduser("~/.ssh/known_hosts")
                options = await asyncssh.SSHClientConnectionOptions.construct(config=(), **kwargs)
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            raise self._err("auth", f"cannot use identity file {self.node.identity_file}: {exc}") from None
        except OSError as exc:
            raise self._err("auth", f"cannot read SSH key or config: {_oserror_text(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - ConfigParseError, ValueError, ...
            raise self._err("unreachable", f"bad SSH settings for {where}: {exc}") from None
        host = options.host or host  # after HostName from ~/.ssh/config: what known_hosts lists
        where = f"{label}{self._where(host, options.port)}{via}"
        try:
            return await asyncssh.connect(**kwargs)
        except asyncssh.HostKeyNotVerifiable:
            raise self._err("host_key", self._host_key_text(label, host, via, options)) from None
        except asyncssh.PermissionDenied:
            keys = f"key {self.node.identity_file}" if self.node.identity_file else "default keys"
            raise self._err(
                "auth",
                f"permission denied for user {options.username} on {where} (tried {keys} and the SSH agent)",
            ) from None
        except (asyncio.TimeoutError, TimeoutError):
            raise self._err(
                "timeout", f"{where} did not complete the SSH login within {self.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise self._err("unreachable", f"cannot reach {where}: {_oserror_text(exc)}") from None
        except asyncssh.ChannelOpenError as exc:  # the jump host could not open the tunnel
            raise self._err("unreachable", f"cannot reach {where}: {exc.reason}") from None
        except asyncssh.DisconnectError as exc:
            raise self._err(
                "unreachable", f"SSH handshake with {where} failed: {exc.reason or type(exc).__name__}"
            ) from None
        except asyncssh.Error as exc:
            raise self._err("unreachable", f"SSH error with {where}: {exc.reason}") from None

    def _host_key_text(self, label: str, host: str, via: str, options: object) -> str:
        port = getattr(options, "port", self.node.port)
        known = self.node.known_hosts and os.path.expanduser(self.node.known_hosts)
        files = [known] if known else [os.path.expanduser("~/.ssh/known_hosts")]
        kh = getattr(options, "known_hosts", None)
        if not known and isinstance(kh, (list, tuple)) and kh and all(isinstance(p, str) for p in kh):
            files = [os.path.expanduser(p) for p in kh]
        mismatch = False
        try:
            existing = [p for p in files if os.path.isfile(p)]
            if existing:
                trusted = asyncssh.read_known_hosts(existing).match(host, host, port)
                mismatch = bool(trusted[0] or trusted[1])
        except Exception:  # noqa: BLE001, S110 - only the wording depends on it
            pass
        where = f"{label}{host}:{port}{via}"
        if mismatch:
            return (
                f"host key for {where} does not match the one in {', '.join(files)} "
                "(host reinstalled, or someone in the middle?)"
            )
        return f"host key for {where} not trusted (not in {', '.join(files)})"

    async def _drop(self) -> None:
        conns, self._conn, self._jump = (self._conn, self._jump), None, None
        for conn in conns:
            if conn is None:
                continue
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 5)
            except (asyncio.TimeoutError, asyncssh.Error, OSError):
                pass

    async def close(self) -> None:
        """Close the connection (a later call opens a new one).

        Remote kills still under way (of commands given up on) are waited for first, at
        most CLOSE_WAIT s: dropping the connection under them would leave those commands
        running on the node."""
        pending = list(self._bg)
        if pending:
            _done, late = await asyncio.wait(pending, timeout=CLOSE_WAIT)
            for task in late:
                task.cancel()
        await self._drop()

    # ---------------------------------------------------------------- commands

    @contextlib.asynccontextmanager
    async def _session(self, what: str) -> AsyncIterator[None]:
        """Hold one of max_sessions session slots (run, stream, spawn, sftp)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_sessions)
        try:
            await asyncio.wait_for(self._slots.acquire(), SESSION_WAIT)
        except asyncio.TimeoutError:
            raise self._err(
                "command",
                f"cannot start {what}: all {self.max_sessions} SSH sessions of the connection "
                f"stayed busy for {SESSION_WAIT:g} s",
            ) from None
        try:
            yield
        finally:
            self._slots.release()

    async def _open_channel(self, conn: asyncssh.SSHClientConnection, opener: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``opener()`` (opens a session channel); retry briefly if sshd refuses it.

        A refused open ran nothing on the node, so retrying it is safe.
        """
        for delay in (*OPEN_RETRY_DELAYS, None):
            try:
                return await opener()
            except asyncssh.ChannelOpenError as exc:
                # A refused request (exec, subsystem) on an opened session is sshd's
                # answer, not a full session table: asking again gets the same answer.
                if delay is None or conn.is_closed() or exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _io_error(self, exc: BaseException, what: str) -> TransportError:
        conn_closed = self._conn is None or self._conn.is_closed()
        if isinstance(exc, asyncssh.ChannelOpenError) and not conn_closed:
            if exc.code == asyncssh.OPEN_REQUEST_SESSION_FAILED:
                return self._err(
                    "command",
                    f"cannot start {what}: the node's sshd opened a session but refused to run it "
                    "(ForceCommand or a restricted account in sshd_config?)",
                )
            return self._err(
                "command",
                f"cannot start {what}: the node refused a new SSH session ({exc.reason}; "
                f"is sshd's MaxSessions lower than the console's max_sessions {self.max_sessions}?)",
            )
        reason = getattr(exc, "reason", "") or str(exc) or type(exc).__name__
        return self._err("closed", f"SSH connection to {self._where()} lost during {what} ({reason})")

    async def _start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        input: str | None,
        *,
        keep_stderr: bool,
        stdin_pipe: bool = False,
    ) -> _Running:
        args = env_argv(argv, env)
        if not args:
            raise ValueError("empty argv")
        command = shlex.join(["sh", "-c", wrapper_script(self._begin_mark), "sh", *args])
        conn = await self._connection()
        try:
            # Bytes, decoded here line by line: a node's invalid UTF-8 never raises.
            if input:
                data = input.encode()
                proc = await self._open_channel(conn, lambda: conn.create_process(command, input=data, encoding=None))
            elif stdin_pipe:  # the channel's stdin stays open: StreamControl writes to it
                proc = await self._open_channel(conn, lambda: conn.create_process(command, encoding=None))
            else:
                proc = await self._open_channel(
                    conn, lambda: conn.create_process(command, stdin=asyncssh.DEVNULL, encoding=None)
                )
        except (asyncssh.Error, OSError) as exc:
            raise self._io_error(exc, _name(argv)) from None
        err = StderrReader(keep_all=keep_stderr)
        drain = asyncio.get_running_loop().create_task(err.drain(proc))
        return _Running(conn, proc, err, drain, BeginReader(self._begin_mark))

    async def _kill(self, cmd: _Running) -> None:
        """End the command's process group if it still runs (see KILL_SCRIPT), then close the channel.

        ``drain`` (the stderr reader) must still run here: it is what finds the
        pid line, which may be buffered but not yet read.
        """
        conn, proc, err, drain = cmd.conn, cmd.proc, cmd.err, cmd.drain
        try:
            if proc.returncode is None and not conn.is_closed():
                try:
                    pid = await asyncio.wait_for(asyncio.shield(err.pgid), 2)
                except asyncio.TimeoutError:
                    pid = None
                if pid and proc.returncode is None and not conn.is_closed():
                    await asyncio.wait_for(
                        conn.run(
                            shlex.join(["sh", "-c", KILL_SCRIPT, "sh", str(pid)]), stdin=asyncssh.DEVNULL, encoding=None
                        ),
                        KILL_TIMEOUT,
                    )
        except (asyncio.TimeoutError, asyncssh.Error, OSError):
            pass
        finally:
            proc.close()
            drain.cancel()

    def _kill_later(self, cmd: _Running) -> None:
        task = asyncio.get_running_loop().create_task(self._kill(cmd))
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        async with self._session(_name(argv)):
            env, input, timeout = options.get("env"), options.get("input"), options.get("timeout")
            return await self._run(argv, env, input, timeout, output_limit(options))

    async def _run(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        input: str | None,
        timeout: float | None,
        limit: int,
    ) -> CommandResult:
        cmd = await self._start(argv, env, input, keep_stderr=True)
        proc, err, drain, begin = cmd.proc, cmd.err, cmd.drain, cmd.begin

        async def collect() -> bytes:
            out = bytearray()
            while True:
                chunk = await proc.stdout.read(READ_CHUNK)
                if not chunk:
                    break
                chunk = begin.feed(chunk)
                if len(out) + len(chunk) > limit:
                    raise _OutputTooLarge
                out += chunk
            await asyncio.shield(drain)  # a timeout must not stop the stderr reader
            await proc.wait_closed()
            return bytes(out)

        try:
            stdout = await asyncio.wait_for(collect(), timeout)
        except asyncio.TimeoutError:
            await self._kill(cmd)
            raise self._err("timeout", f"{_name(argv)} timed out after {timeout:g} s") from None
        except _OutputTooLarge:
            await self._kill(cmd)
            raise self._err(
                "command", f"{_name(argv)} wrote over {mib(limit)} of output: stopped, its output discarded"
            ) from None
        except BannerTooLong as exc:
            await self._kill(cmd)
            raise self._no_begin(argv, exc.head, too_long=True) from None
        except asyncio.CancelledError:
            self._kill_later(cmd)
            raise
        except (asyncssh.Error, OSError) as exc:
            proc.close()
            drain.cancel()
            raise self._io_error(exc, _name(argv)) from None
        if proc.returncode is None:
            raise self._io_error(ConnectionError("no exit status"), _name(argv))
        if not begin.found:
            raise self._no_begin(argv, begin.head())
        self._saw_banner(begin.banner)
        return CommandResult(exit_status=proc.returncode, stdout=decode(stdout), stderr=err.text())

    def _saw_banner(self, banner: bytes) -> None:
        """Keep the login's banner (cut off the command's output) and say so once per node."""
        if not banner.strip() or self.login_banner is not None:
            return
        text = decode(banner).strip()
        self.login_banner = printable(clip(text, 2000), keep_newlines=True)
        if self.node_name in _BANNERS_SAID:
            return
        _BANNERS_SAID.add(self.node_name)
        lines = len(text.splitlines())
        log.warning(
            "warning: %s: its login prints %d line%s on stdout before every command (%r); the console "
            "skips it. Make the shell quiet for non-interactive sessions (`rocm-console doctor` says how)",
            self.node_name,
            lines,
            "" if lines == 1 else "s",
            first_line(banner),
        )

    def _no_begin(self, argv: Sequence[str], head: bytes, *, too_long: bool = False) -> TransportError:
        """The wrapper's begin marker never came: the login did not run the console's command."""
        said = first_line(head)
        what = (
            f"printed over {BANNER_LIMIT // 1024} KiB without running it"
            if too_long
            else ("printed " + repr(said) + " and did not run it")
            if said
            else "did not run it"
        )
        return self._err(
            "shell",
            f"the SSH login did not run the console's command ({_name(argv)}): it {what}. "
            "Is there a ForceCommand for this account, or a login shell that does not run commands?",
        )

    async def stream_lines(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        async with self._session(_name(argv)), contextlib.aclosing(self._stream(argv, env, control)) as lines:
            async for line in lines:
                yield line

    async def _stream(
        self, argv: Sequence[str], env: Mapping[str, str] | None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        cmd = await self._start(argv, env, None, keep_stderr=False, stdin_pipe=control is not None)
        proc, err, drain, begin = cmd.proc, cmd.err, cmd.drain, cmd.begin
        if control is not None:
            control.bind(proc.stdin.write)
        lines = LineSplitter(MAX_LINE_BYTES)
        finished = False
        try:
            while True:
                try:
                    chunk = await proc.stdout.read(READ_CHUNK)
                except (asyncssh.Error, OSError) as exc:
                    raise self._io_error(exc, _name(argv)) from None
                if not chunk:
                    break
                try:
                    data = begin.feed(chunk)
                except BannerTooLong as exc:
                    raise self._no_begin(argv, exc.head, too_long=True) from None
                if data:
                    self._saw_banner(begin.banner)
                for raw, cut in lines.feed(data):
                    if cut:
                        raise self._line_too_long(argv)
                    yield decode(raw).removesuffix("\r")
                if lines.cutting:  # no need to wait for the end of that line
                    raise self._line_too_long(argv)
            for raw, cut in lines.close():
                if cut:
                    raise self._line_too_long(argv)
                yield decode(raw).removesuffix("\r")
            await drain
            try:
                await proc.wait_closed()
            except (asyncssh.Error, OSError) as exc:
                raise self._io_error(exc, _name(argv)) from None
            finished = True
            code = proc.returncode
            if code is None:
                raise self._io_error(ConnectionError("no exit status"), _name(argv))
            if not begin.found:
                raise self._no_begin(argv, begin.head())
            self._saw_banner(begin.banner)
            if code != 0:
                last = err.last_line()
                raise self._err("command", f"{_name(argv)} {_returncode_text(proc)}" + (f": {last}" if last else ""))
        finally:
            if control is not None:
                control.bind(None)
            if not finished:
                try:
                    await self._kill(cmd)
                except asyncio.CancelledError:
                    proc.close()
                    drain.cancel()
                    raise

    def _line_too_long(self, argv: Sequence[str]) -> TransportError:
        return self._err(
            "command", f"{_name(argv)} wrote a line over {mib(MAX_LINE_BYTES)}: stopped, the line discarded"
        )

    async def spawn_detached(
        self,
        argv: Sequence[str],
        *,
        log_path: str,
        env: Mapping[str, str] | None = None,
    ) -> int:
        async with self._session(f"start of {_name(argv)}"):
            return await self._spawn_detached(argv, log_path, env)

    async def _spawn_detached(self, argv: Sequence[str], log_path: str, env: Mapping[str, str] | None) -> int:
        args = env_argv(argv, env)
        if not args:
            raise ValueError("empty argv")
        conn = await self._connection()
        command = shlex.join(["sh", "-c", SPAWN_SCRIPT, "sh", self._begin_mark, log_path, *args])
        try:
            result = await asyncio.wait_for(
                self._open_channel(conn, lambda: conn.run(command, stdin=asyncssh.DEVNULL, encoding=None)), 30
            )
        except asyncio.TimeoutError:
            raise self._err("timeout", f"starting {_name(argv)} timed out") from None
        except (asyncssh.Error, OSError) as exc:
            raise self._io_error(exc, f"start of {_name(argv)}") from None
        # The pid follows the begin marker on its line: a login banner may come before it.
        out = _as_text(result.stdout)
        m = re.search(rf"{re.escape(self._begin_mark)} (\d+)$", out, re.MULTILINE)
        if result.exit_status != 0 or m is None:
            lines = [ln.strip() for ln in _as_text(result.stderr).splitlines() if ln.strip()]
            detail = lines[-1] if lines else f"exit status {result.exit_status}"
            raise self._err("command", f"cannot start {_name(argv)} (log {log_path}): {detail}")
        return int(m.group(1))

    async def upload(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        async with self._session(f"upload to {remote_path}"):
            await self._upload(data, remote_path, mode)

    async def _upload(self, data: bytes, remote_path: str, mode: int) -> None:
        conn = await self._connection()
        sftp = await self._start_sftp(conn, f"upload to {remote_path}")
        if sftp is None:
            self.upload_channel = "exec"
            await self._exec_upload(conn, data, remote_path, mode)
            return
        self.upload_channel = "sftp"
        await self._sftp_upload(sftp, data, remote_path, mode)

    async def sftp_refusal(self) -> str | None:
        """None when the node's sshd serves SFTP, else why not (one line); asked once per connection."""
        async with self._session("SFTP check"):
            conn = await self._connection()
            sftp = await self._start_sftp(conn, "SFTP check")
            if sftp is None:
                return self._no_sftp[1] if self._no_sftp else "SFTP unavailable"
            sftp.exit()
            return None

    async def _start_sftp(self, conn: asyncssh.SSHClientConnection, what: str) -> asyncssh.SFTPClient | None:
        """An SFTP client, or None when this connection's sshd serves no SFTP."""
        if self._no_sftp is not None and self._no_sftp[0] is conn:
            return None
        try:
            return await self._open_channel(conn, conn.start_sftp_client)
        except asyncssh.ChannelOpenError as exc:
            if conn.is_closed() or exc.code != asyncssh.OPEN_REQUEST_SESSION_FAILED:
                raise self._io_error(exc, what) from None
            reason = "sshd refused the sftp subsystem request (no Subsystem sftp in sshd_config)"
        except (asyncssh.SFTPError, asyncssh.ConnectionLost) as exc:
            if conn.is_closed():
                raise self._io_error(exc, what) from None
            # The subsystem started but never spoke SFTP (a wrong Subsystem path, ...).
            reason = f"the sftp subsystem did not start ({one_line(exc.reason or type(exc).__name__)})"
        except (asyncssh.Error, OSError) as exc:
            raise self._io_error(exc, what) from None
        self._no_sftp = (conn, reason)
        return None

    async def _sftp_upload(self, sftp: asyncssh.SFTPClient, data: bytes, remote_path: str, mode: int) -> None:
        path = remote_path
        try:
            async with sftp:
                if path == "~" or path.startswith("~/"):
                    home = await sftp.realpath(".")
                    path = posixpath.join(home, path[2:])
                parent, base = posixpath.split(path)
                if not base:
                    raise self._err("command", f"upload target {remote_path} is a directory")
                if parent:
                    await sftp.makedirs(parent, exist_ok=True)
                tmp = posixpath.join(parent, f".{base}.{secrets.token_hex(4)}.tmp")
                try:
                    async with sftp.open(tmp, "wb", attrs=asyncssh.SFTPAttrs(permissions=mode)) as f:
                        await f.write(data)
                    await sftp.chmod(tmp, mode)  # the create mode went through the umask
                    try:
                        await sftp.posix_rename(tmp, path)
                    except asyncssh.SFTPOpUnsupported:
                        if await sftp.exists(path):
                            await sftp.remove(path)
                        await sftp.rename(tmp, path)
                except BaseException:
                    try:
                        await asyncio.wait_for(sftp.remove(tmp), 5)
                    except (asyncio.TimeoutError, asyncssh.Error, OSError):
                        pass
                    raise
        except TransportError:
            raise
        except asyncssh.SFTPError as exc:
            raise self._err("command", f"upload to {remote_path} failed: {exc.reason}") from None
        except (asyncssh.Error, OSError) as exc:
            raise self._io_error(exc, f"upload to {remote_path}") from None

    async def _exec_upload(self, conn: asyncssh.SSHClientConnection, data: bytes, remote_path: str, mode: int) -> None:
        """The upload over a command channel (see EXEC_UPLOAD_SCRIPT): for nodes without SFTP."""
        if not remote_path or remote_path.endswith("/"):
            raise self._err("command", f"upload target {remote_path} is a directory")
        why = self._no_sftp[1] if self._no_sftp else "no SFTP"
        command = shlex.join(
            [
                "sh",
                "-c",
                EXEC_UPLOAD_SCRIPT,
                "sh",
                remote_path,
                format(mode & 0o7777, "o"),
                hashlib.sha256(data).hexdigest(),
                self.node.python or "python3",
            ]
        )
        proc: asyncssh.SSHClientProcess | None = None
        done = False
        try:
            proc = await self._open_channel(conn, lambda: conn.create_process(command, encoding=None))
            proc.stdin.write(data)
            proc.stdin.write_eof()  # explicit: communicate() sends no EOF for an empty file
            _, stderr = await asyncio.wait_for(proc.communicate(), UPLOAD_TIMEOUT)
            done = True
        except asyncio.TimeoutError:
            raise self._err(
                "timeout", f"upload to {remote_path} ({why}; sent through sh) timed out after {UPLOAD_TIMEOUT:g} s"
            ) from None
        except (asyncssh.Error, OSError) as exc:
            raise self._io_error(exc, f"upload to {remote_path}") from None
        finally:
            if proc is not None and not done:
                # Cut short (timeout, cancel): drop the unsent rest instead of flushing it;
                # the node's sh then sees a short file, its check fails, nothing is renamed.
                proc.channel.abort()
            elif proc is not None:
                proc.close()
        if proc.returncode is None:
            raise self._io_error(ConnectionError("no exit status"), f"upload to {remote_path}")
        if proc.returncode != 0:
            lines = [ln.strip() for ln in bytes(stderr or b"").decode("utf-8", "replace").splitlines() if ln.strip()]
            detail = lines[-1] if lines else _returncode_text(proc)
            raise self._err("command", f"upload to {remote_path} failed ({why}; sent through sh): {detail}")

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> _PortForward:
        conn = await self._connection()
        try:
            listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
        except (asyncssh.Error, OSError) as exc:
            if isinstance(exc, OSError) and self.connected:
                raise self._err("command", f"cannot listen on 127.0.0.1: {_oserror_text(exc)}") from None
            raise self._io_error(exc, f"port forward to {remote_host}:{remote_port}") from None
        return _PortForward(listener, f"{remote_host}:{remote_port}")


def _as_text(data: bytes | str | None) -> str:
    return decode(data) if isinstance(data, bytes) else str(data or "")


def _name(argv: Sequence[str]) -> str:
    return posixpath.basename(argv[0]) if argv else "command"
