"""LocalTransport: the node is this machine (the demo, tests, a console run on a GPU node)."""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Mapping, Sequence

from console.transport.base import CommandResult, TransportError

# Long JSON lines (64 logical GPUs) must fit in one read.
_STREAM_LIMIT = 4 * 1024 * 1024


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

    async def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        stdin = asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL
        proc = await self._start(argv, env, stdin=stdin)
        data = input.encode() if input is not None else None
        try:
            out, err = await asyncio.wait_for(proc.communicate(data), timeout)
        except asyncio.TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise TransportError(f"{self.node_name}: {argv[0]} timed out after {timeout:g} s", "timeout") from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            try:  # reap it, so no zombie or closed-loop warning is left behind
                await asyncio.wait_for(proc.wait(), 2)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            raise
        return CommandResult(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))

    async def stream_lines(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        proc = await self._start(argv, env)
        assert proc.stdout is not None and proc.stderr is not None
        stderr_task = asyncio.ensure_future(proc.stderr.read(64 * 1024))
        finished = False
        try:
            while True:
                try:
                    raw = await proc.stdout.readline()
                except ValueError:  # a line longer than the limit
                    raise TransportError(f"{self.node_name}: output line too long", "command") from None
                if not raw:
                    break
                yield raw.decode(errors="replace").rstrip("\r\n")
            code = await proc.wait()
            finished = True
            if code != 0:
                err = (await stderr_task).decode(errors="replace")
                raise TransportError(
                    f"{self.node_name}: {Path(argv[0]).name} exited {code}: {_last_line(err)}", "command"
                )
        finally:
            if not finished and proc.returncode is None:
                _kill_group(proc.pid)
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except asyncio.TimeoutError:
                    pass
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
        path = Path(remote_path).expanduser()
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

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1") -> _SamePort:
        if remote_host not in ("127.0.0.1", "localhost", "::1"):
            raise TransportError(f"{self.node_name}: local transport cannot reach {remote_host}", "command")
        return _SamePort(remote_port)

    async def close(self) -> None:
        return None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no error output)"


def _kill_group(pid: int) -> None:
    # The child leads its own session, so its group id is its pid: we only
    # ever signal the group we created.
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
