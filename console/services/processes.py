"""End a GPU process on a node: the agent's `process end` (console/agent/processes.py).

The agent decides what may be ended (a process its telemetry lists on a GPU; another
user's only when the node allows it); the console asks and reports. A node whose profile
sets allow_kill_foreign = true and sudo = true runs the agent through `sudo -n`, which
signalling another user's process needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from console.core.events import INFO, WARN, Event
from console.core.model import NodeSpec
from console.core.node_json import NodeJsonError, object_lines
from console.core.text import printable
from console.services.agent_bundle import install_agent
from console.services.timeline import Timeline, note
from console.services.transports import TransportPool
from console.transport.base import TransportError, env_argv

DEFAULT_GRACE = 5.0  # seconds from SIGTERM to SIGKILL


class ProcessEndFailed(Exception):
    """The node refused or could not end the process. reason: not_gpu, foreign, no_perm,
    invalid or failed (the agent's classes)."""

    def __init__(self, message: str, reason: str = "failed") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ProcessEnded:
    """What the agent did: how (a signal, or "simulated": a simulated load removed)."""

    node: str
    pid: int
    name: str
    gpus: tuple[int, ...]
    user: str | None
    how: str
    signal: str | None
    ended: bool
    seconds: float

    def line(self) -> str:
        """One line for a person: 'ended pid 4000 (python3) on GPU 0 with SIGTERM in 0.2 s'."""
        on = f" on GPU {', '.join(map(str, self.gpus))}" if self.gpus else ""
        what = f"pid {self.pid} ({self.name or '?'}){on}"
        if not self.ended:
            return f"{what} is still running after {self.signal or 'the signals'}"
        if self.how == "simulated":
            return f"ended {what}: a simulated load, removed"
        return f"ended {what} with {self.signal} in {self.seconds:.1f} s"


def end_argv(
    command_argv: list[str], amdsmi_paths: tuple[str, ...], pid: int, gpu: int | None, grace: float, allow: bool
) -> list[str]:
    argv = [*command_argv, "end", "--pid", str(pid), "--grace", f"{grace:g}"]
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    if allow:
        argv.append("--allow-foreign")
    for path in amdsmi_paths:  # the agent lists processes through its telemetry source
        argv += ["--amdsmi-path", path]
    return argv


class ProcessService:
    def __init__(self, pool: TransportPool | None = None, *, timeline: Timeline | None = None) -> None:
        self.pool = pool or TransportPool()
        self.timeline = timeline  # every end, done or refused, is written there (services/timeline.py)

    async def end(
        self, node: NodeSpec, pid: int, *, gpu: int | None = None, grace: float = DEFAULT_GRACE
    ) -> ProcessEnded:
        """SIGTERM, SIGKILL after `grace` seconds; ProcessEndFailed with the node's reason.
        Either way it is an event on the timeline (process.ended / process.end_failed)."""
        try:
            ended = await self._end(node, pid, gpu, grace)
        except (ProcessEndFailed, TransportError) as exc:
            where = "" if gpu is None else f" on GPU {gpu}"
            text = f"pid {pid}{where} not ended: {str(exc).removeprefix(node.name + ': ')}"
            details = {"pid": pid, "reason": exc.reason if isinstance(exc, ProcessEndFailed) else exc.kind}
            note(self.timeline, Event(time.time(), "process.end_failed", node.name, gpu, None, WARN, text, details))
            raise
        details = {"pid": ended.pid, "name": ended.name, "gpus": list(ended.gpus), "signal": ended.signal}
        kind, severity = ("process.ended", INFO) if ended.ended else ("process.end_failed", WARN)
        first = ended.gpus[0] if ended.gpus else gpu
        note(self.timeline, Event(time.time(), kind, node.name, first, None, severity, ended.line(), details))
        return ended

    async def _end(self, node: NodeSpec, pid: int, gpu: int | None, grace: float) -> ProcessEnded:
        transport = self.pool.get(node)
        cmd = await install_agent(transport, node)
        argv = end_argv(cmd.argv("process"), cmd.amdsmi_paths, pid, gpu, grace, node.allow_kill_foreign)
        env = cmd.env_dict()
        if node.allow_kill_foreign and node.sudo:
            # another user's process needs root; `sudo -n` never prompts, the environment goes inside
            argv = ["sudo", "-n", *env_argv(argv, env)]
            env = {}
        result = await transport.run(argv, env=env, timeout=grace + 60.0)
        try:
            records = object_lines(result.stdout)
        except NodeJsonError as exc:
            raise ProcessEndFailed(f"{node.name}: agent process end: {exc}") from None
        for rec in records:
            if rec.get("kind") == "error":
                reason = rec.get("reason")
                raise ProcessEndFailed(
                    f"{node.name}: {printable(rec.get('message'))}", reason if isinstance(reason, str) else "failed"
                )
            if rec.get("kind") == "process_end":
                return _ended(node.name, pid, rec)
        last = (result.stderr.strip().splitlines() or [f"exit {result.exit_status}"])[-1]
        if "password is required" in last or "sudo:" in last:
            raise ProcessEndFailed(
                f"{node.name}: sudo refused ({printable(last.strip())}): allow passwordless sudo or log in as root",
                "no_perm",
            )
        raise ProcessEndFailed(f"{node.name}: process end failed: {printable(last.strip())}")


def _ended(node: str, pid: int, rec: dict) -> ProcessEnded:
    gpus = rec.get("gpus")
    seconds = rec.get("seconds")
    signal = rec.get("signal")
    user = rec.get("user")
    return ProcessEnded(
        node=node,
        pid=rec["pid"] if isinstance(rec.get("pid"), int) else pid,
        name=printable(rec.get("name") or ""),
        gpus=tuple(g for g in gpus if isinstance(g, int)) if isinstance(gpus, list) else (),
        user=printable(user) if isinstance(user, str) else None,
        how=str(rec.get("how") or "signal"),
        signal=signal if isinstance(signal, str) else None,
        ended=rec.get("ended") is True,
        seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
    )
