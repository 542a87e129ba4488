"""One run API for every kind of benchmark run: a spec, a detached process, a followed
log, a collected result, an exit code, a cancel and one record.

A run is started by the node's supervisor (group "runs") from a `RunSpec`: its
name, argv and environment, kept in the run's folder with the kind's own keys
(spec.json). It outlives the console and the SSH link: its log is followed by
byte offset (`follow_log`, re-opened where it stopped after a dropped link), and
when it ends its `RunRecord` (what the supervisor says: state, exit code, signal,
spec) and its result file (`<state_dir>/runs/<run>/result.json`) are collected.

The kinds (serving.py, offline.py, group.py, accuracy.py) differ only in how they
build their argv and read their log and result: a kind gives a `RunReader` for a
run, and `NodeRuns.follow` does the rest. accuracy.py's lm_eval runs on the
console's machine (it reaches the instance through a forward): `run_local` is the
same process life (own session, followed output, exit code, stopped on timeout or
cancel) for a process here.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from console.core.backoff import backoff_delay
from console.core.bench.output import strip_ansi
from console.core.model import NodeSnapshot, NodeSpec
from console.core.node_json import NodeJsonError, loads_document, loads_object, object_lines
from console.core.serve.argv import redact
from console.core.text import printable
from console.services.agent_bundle import AgentCommand, install_agent
from console.services.transports import TransportPool
from console.transport.base import RESULT_FILE_LIMIT, TransportError

RESULT_FILE = "result.json"  # what every kind's client writes into its run's folder
GROUP = "runs"  # the supervisor's group of benchmark runs (`bench runs` lists it)
_CANCEL = ("--int-timeout", "10", "--term-timeout", "5")  # SIGINT first: vLLM shuts down itself

OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)


@dataclass(frozen=True, slots=True)
class RunLogLine:
    """A line of a run's log, of any kind (`\\r` redraws split into lines)."""

    run: str
    text: str


@dataclass(frozen=True, slots=True)
class RunFinished(Generic[OutcomeT]):
    """A run has ended and been collected: its outcome, as its kind reads it."""

    run: str
    outcome: OutcomeT


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """How a run of any kind ended, as collected: which run, where, its exit, its result file as
    JSON (None when it wrote none) and the argv it ran (redacted). The kinds add what they read."""

    run: str
    node: str
    exit_code: int | None
    result_json: dict | None
    argv: tuple[str, ...] = ()
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.result_json is not None and not self.cancelled

    @property
    def reason(self) -> str | None:
        """None when it went well, else one line: cancelled, or the kind's own reason."""
        if self.ok:
            return None
        if self.cancelled:
            return "cancelled"
        return self.failure()

    def failure(self) -> str:
        return f"exited with code {self.exit_code}" if self.exit_code else "no result was written"


@dataclass(frozen=True)
class RunRecord:
    """What the node's supervisor says about a run of any kind (`instance --group runs list`)."""

    name: str
    state: str  # starting | running | exited
    exit_code: int | None = None
    exit_signal: int | None = None
    started: float | None = None
    ended: float | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # as listed

    @classmethod
    def from_listing(cls, rec: Mapping[str, Any]) -> RunRecord:
        spec = rec.get("spec")
        return cls(
            name=str(rec.get("name")),
            state=str(rec.get("state")),
            exit_code=rec.get("exit_code"),
            exit_signal=rec.get("exit_signal"),
            started=rec.get("started"),
            ended=rec.get("ended"),
            spec=spec if isinstance(spec, Mapping) else {},
            raw=rec,
        )

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def ended_now(self) -> bool:
        """Neither starting nor running: there is nothing left to wait for."""
        return self.state not in ("running", "starting")

    @property
    def cancelled(self) -> bool:
        """Stopped by SIGINT/SIGTERM: as a signal, or as Python's exit codes for them (130, 143)."""
        return self.exit_signal in (2, 15) or self.exit_code in (130, 143)

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.spec.get("argv") or ())

    def as_dict(self) -> dict[str, Any]:
        """The record as the node listed it (`bench runs --json` prints these)."""
        return dict(self.raw)


@dataclass(frozen=True)
class RunSpec:
    """What the supervisor starts: name, argv, environment, and the kind's keys kept in spec.json."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    keys: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps({"name": self.name, "argv": list(self.argv), "env": dict(self.env), **self.keys})


@dataclass(frozen=True)
class Collected:
    """A run that has ended, as collected: its record (None when the node has none) and result file."""

    name: str
    node: str
    record: RunRecord | None
    result_text: str | None  # the result file, when the run wrote a non-empty one
    argv: tuple[str, ...]  # redacted: the argv the console started, else the one in the record

    @property
    def exit_code(self) -> int | None:
        return self.record.exit_code if self.record else None

    @property
    def cancelled(self) -> bool:
        return bool(self.record and self.record.cancelled)

    def result_json(self) -> Any:
        """The result file as JSON, or None when there is none or it does not parse."""
        if self.result_text is None:
            return None
        try:
            return loads_document(self.result_text)
        except ValueError:  # NodeJsonError too: a hostile file is no result
            return None


class RunReader(Protocol[OutcomeT_co]):
    """What a kind reads from one run: events from its log's lines (progress, ...), then its outcome."""

    def line(self, text: str) -> Iterable[object]: ...

    def end(self) -> Iterable[object]:
        """Events once the log has ended."""
        ...

    def outcome(self, collected: Collected) -> OutcomeT_co: ...


def run_stamp(clock: Callable[[], float] = time.time) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(clock()))


def name_part(text: str, size: int, fallback: str) -> str:
    """A piece of a run name from a preset name: the characters the supervisor takes."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:size] or fallback


def gpu_context(node: NodeSpec, snapshot: NodeSnapshot | None, gpus: Sequence[int]) -> dict[str, Any]:
    """The node and its first used GPU's model and modes, for a stored run's context."""
    statics = [g for g in (snapshot.static if snapshot else ()) if g.index in gpus]
    first = statics[0] if statics else None
    return {
        "node": node.name,
        "gpu_model": first.model if first else None,
        "compute_partition": first.compute_partition if first else None,
        "memory_partition": first.memory_partition if first else None,
    }


async def follow_log(
    pool: TransportPool,
    node: NodeSpec,
    cmd: AgentCommand,
    run: str,
    *,
    reconnect_attempts: int,
    lost: Callable[[str], Exception],
) -> AsyncIterator[str]:
    """The run's log lines (`\\r` redraws split into lines) until the run ends; after
    `reconnect_attempts` failed reconnections in a row, raises `lost(one-line reason)`."""
    offset = 0
    attempt = 0
    while True:
        argv = cmd.argv(
            "instance", "--state-dir", cmd.state_dir, "--group", GROUP, "logs", run,
            "--offset", str(offset), "--follow", "--split-cr",
        )  # fmt: skip
        try:
            async for line in pool.get(node).stream_lines(argv, env=cmd.env_dict()):
                offset += len(line.encode()) + 1
                attempt = 0
                yield line
            return
        except TransportError as exc:
            if attempt >= reconnect_attempts:
                raise lost(f"{node.name}: lost the benchmark's output: {exc.reason}") from None
            await asyncio.sleep(backoff_delay(attempt, cap=5.0))
            attempt += 1


class NodeRuns:
    """Runs on nodes, for one kind: start, list, follow, collect, wait for, cancel.

    `error` is the kind's one-line exception; `what` names its process in messages."""

    def __init__(self, pool: TransportPool, *, error: Callable[[str], Exception], what: str = "benchmark") -> None:
        self.pool = pool
        self.error = error
        self.what = what

    async def agent(self, node: NodeSpec) -> AgentCommand:
        return await install_agent(self.pool.get(node), node)

    @staticmethod
    def folder(cmd: AgentCommand, run: str) -> str:
        return f"{cmd.state_dir}/runs/{run}"

    @staticmethod
    def result_path(cmd: AgentCommand, run: str) -> str:
        return f"{cmd.state_dir}/runs/{run}/{RESULT_FILE}"

    def _argv(self, cmd: AgentCommand, *op: str) -> list[str]:
        return cmd.argv("instance", "--state-dir", cmd.state_dir, "--group", GROUP, *op)

    async def start(self, node: NodeSpec, cmd: AgentCommand, spec: RunSpec) -> None:
        """Start the run detached under the node's supervisor; the kind's error when it will not."""
        result = await self.pool.get(node).run(
            self._argv(cmd, "start"), env=cmd.env_dict(), input=spec.as_json(), timeout=60
        )
        for line in result.stdout.splitlines():
            if line.startswith("{"):
                try:
                    rec = loads_object(line)
                except NodeJsonError as exc:
                    raise self.error(f"{node.name}: agent runs start: {exc}") from None
                if rec.get("kind") == "error":
                    raise self.error(f"{node.name}: {printable(rec.get('message'))}")
                return
        raise self.error(f"{node.name}: could not start the {self.what}: {result.stderr.strip()[-200:]}")

    async def records(self, node: NodeSpec, cmd: AgentCommand | None = None) -> list[RunRecord]:
        cmd = cmd or await self.agent(node)
        listing = await self.pool.get(node).run(self._argv(cmd, "list"), env=cmd.env_dict(), timeout=30)
        # A bad line (cut short, hostile) is skipped: the others still count.
        return [RunRecord.from_listing(rec) for rec in object_lines(listing.stdout, skip_bad=True)]

    async def record(self, node: NodeSpec, run: str, cmd: AgentCommand | None = None) -> RunRecord | None:
        return next((r for r in await self.records(node, cmd) if r.name == run), None)

    async def cancel(self, node: NodeSpec, run: str) -> None:
        """Stop a run cleanly (SIGINT, then SIGTERM)."""
        cmd = await self.agent(node)
        await self.pool.get(node).run(self._argv(cmd, "stop", *_CANCEL, "--", run), env=cmd.env_dict(), timeout=60)

    async def collect(
        self, node: NodeSpec, run: str, reader: RunReader[OutcomeT], *, argv: Sequence[str] = (), cmd=None
    ) -> OutcomeT:
        """The outcome of a run that has ended: its record and result file, read by the kind."""
        cmd = cmd or await self.agent(node)
        rec = await self.record(node, run, cmd)
        read = await self.pool.get(node).run(
            ["cat", self.result_path(cmd, run)], timeout=60, max_output=RESULT_FILE_LIMIT
        )
        text = read.stdout if read.ok and read.stdout.strip() else None
        shown = tuple(redact(list(argv or (rec.argv if rec else ()))))
        return reader.outcome(Collected(run, node.name, rec, text, shown))

    async def follow(
        self,
        node: NodeSpec,
        run: str,
        reader: RunReader[OutcomeT],
        *,
        emit: Callable[[Any], None],
        argv: Sequence[str] = (),
        reconnect_attempts: int = 8,
        alongside: contextlib.AbstractAsyncContextManager | None = None,
    ) -> OutcomeT:
        """Stream the run's log (each line a RunLogLine, then the reader's events for it;
        re-attaching after a dropped link), then collect it (RunFinished). `alongside` is
        entered for as long as the log is read (live metrics)."""
        cmd = await self.agent(node)
        async with alongside or contextlib.nullcontext():
            lines = follow_log(self.pool, node, cmd, run, reconnect_attempts=reconnect_attempts, lost=self.error)
            async for line in lines:
                if line.strip():
                    emit(RunLogLine(run, line))
                for event in reader.line(line):
                    emit(event)
            for event in reader.end():
                emit(event)
        outcome = await self.collect(node, run, reader, argv=argv, cmd=cmd)
        emit(RunFinished(run, outcome))
        return outcome

    async def wait(self, node: NodeSpec, run: str, *, poll_every: float, tries: int = 30) -> None:
        """Wait for a run to end without streaming its log (one listing per poll): for as
        long as it runs, like following it; the kind's error once the node has lost it."""
        attempts = missing = 0
        while True:
            try:
                recs: list[RunRecord] | None = await self.records(node)
                attempts = 0
            except TransportError:
                attempts += 1
                if attempts > tries:
                    raise
                recs = None
            rec = next((r for r in recs or () if r.name == run), None)
            if recs is not None and rec is None:
                missing += 1
                if missing > tries:
                    raise self.error(f"{node.name}: {self.what} {run} is gone from the node")
            if rec is not None and rec.ended_now:
                return
            await asyncio.sleep(poll_every)


class KindRunner:
    """What the runner of every kind has: its runs on the nodes (listed, cancelled) over one pool."""

    error: Callable[[str], Exception] = RuntimeError  # the kind's one-line exception

    def __init__(self, pool: TransportPool | None = None) -> None:
        self.pool = pool or TransportPool()
        self.node_runs = NodeRuns(self.pool, error=self.error)

    async def records(self, node: NodeSpec) -> list[RunRecord]:
        """Every benchmark run on the node (of any kind), as the supervisor lists them."""
        return await self.node_runs.records(node)

    async def cancel(self, node: NodeSpec, run: str) -> None:
        """Stop a run cleanly (SIGINT, then SIGTERM): vLLM shuts its engine down itself."""
        await self.node_runs.cancel(node, run)


async def run_local(
    argv: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    on_line: Callable[[str], None],
    *,
    error: Callable[[str], Exception],
    what: str,
    keep: int = 200,
) -> tuple[int | None, list[str]]:
    """Run a process on this machine in its own session, its output (stdout and stderr, `\\r`
    redraws split, colours dropped) line by line to on_line; (exit code, last `keep` lines). Past the timeout,
    or when cancelled, its whole group is stopped (TERM, then KILL: we started it) and
    `error` says so."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(env),
        start_new_session=True,
    )
    tail: collections.deque[str] = collections.deque(maxlen=keep)

    async def pump() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            for part in strip_ansi(raw.decode("utf-8", "replace").replace("\r", "\n")).split("\n"):
                if part.strip():
                    tail.append(part)
                    on_line(part)

    try:
        await asyncio.wait_for(asyncio.gather(pump(), proc.wait()), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except asyncio.TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        raise error(f"{what} did not finish within {timeout:.0f} s (stopped)") from None
    return proc.returncode, list(tail)
