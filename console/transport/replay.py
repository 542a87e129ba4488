"""ReplayTransport: a node that replays recorded agent JSON lines (deterministic tests, screenshots, perf).

A trace file holds what the real agent printed against the simulator: one
``probe`` line and the ``telemetry`` output (hello, static, samples). Commands
the console runs before streaming (home directory, agent install check, probe)
get plausible answers, so the fleet service runs unchanged on top of it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, AsyncGenerator, Callable, Mapping, Sequence

from console.transport.base import CommandResult, RunOptions, StreamControl, TransportError

if TYPE_CHECKING:
    from typing import Unpack

HOME = "/home/demo"


class ReplayTrace:
    """The lines of one node's trace, split into the probe answer and the stream."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.probe: str | None = None
        self.stream: list[str] = []
        for line in lines:
            if not line.strip():
                continue
            if self.probe is None and '"kind":"probe"' in line.replace(" ", ""):
                self.probe = line
            else:
                self.stream.append(line)

    @classmethod
    def load(cls, path: str | Path) -> ReplayTrace:
        return cls(Path(path).read_text(encoding="utf-8").splitlines())

    def samples(self) -> int:
        return sum(1 for line in self.stream if '"kind":"sample"' in line.replace(" ", ""))


class ReplayTransport:
    """Replays a trace. After the last line the stream ``end``s as asked:

    - ``hold``: stays open and silent (the node looks alive until it goes stale);
    - ``fail``: raises TransportError(``fail_reason``), and every later command
      fails the same way (the node is down and stays down);
    - ``loop``: replays the samples again and again, re-stamped, every ``pace`` s.

    ``gate``: the last sample waits for this event (a test sets the clock first).
    ``pace``: seconds between samples (None: as fast as the consumer reads).
    """

    def __init__(
        self,
        node_name: str,
        trace: ReplayTrace,
        *,
        end: str = "hold",
        pace: float | None = None,
        gate: asyncio.Event | None = None,
        fail_reason: str | None = None,
    ) -> None:
        if end not in ("hold", "fail", "loop"):
            raise ValueError(f"end must be hold, fail or loop, not {end!r}")
        self.node_name = node_name
        self.trace = trace
        self.end = end
        self.pace = pace
        self.gate = gate
        self.fail_reason = fail_reason or f"{node_name}: connection refused"
        self.failed = False
        self.commands: list[list[str]] = []  # what the console asked, for tests

    def _check_link(self) -> None:
        if self.failed:
            raise TransportError(self.fail_reason, "unreachable")

    async def run(self, argv: Sequence[str], **options: Unpack[RunOptions]) -> CommandResult:
        self._check_link()
        argv = list(argv)
        self.commands.append(argv)
        if argv[:2] == ["sh", "-c"] and len(argv) >= 3:
            # The install check (agent_bundle): the home directory, and whether the
            # agent files are there; answered as a node that already has them.
            script, lines = argv[2], []
            if "$HOME" in script:
                lines.append(HOME)
            if "[ -f" in script:
                lines.append("present")
            if lines:
                return CommandResult(0, "\n".join(lines) + "\n", "")
        if "probe" in argv[2:4]:  # python [-S] <agent> probe
            if self.trace.probe is None:
                return CommandResult(1, "", "probe not recorded")
            return CommandResult(0, self.trace.probe + "\n", "")
        return CommandResult(127, "", f"replay: {argv[0]}: not recorded")

    async def stream_lines(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, control: StreamControl | None = None
    ) -> AsyncGenerator[str, None]:
        # A recording has no stdin: control is accepted for the protocol, never bound.
        self._check_link()
        self.commands.append(list(argv))
        lines = self.trace.stream
        last_sample = max((i for i, line in enumerate(lines) if _is_sample(line)), default=-1)
        for i, line in enumerate(lines):
            if i == last_sample and self.gate is not None:
                await self.gate.wait()
            if self.pace is not None and _is_sample(line):
                await asyncio.sleep(self.pace)
            yield line
        if self.end == "fail":
            self.failed = True
            raise TransportError(self.fail_reason, "closed")
        if self.end == "loop":
            async for line in self._loop(lines):
                yield line
        await asyncio.Event().wait()  # hold: open and silent until cancelled

    async def _loop(self, lines: list[str]) -> AsyncGenerator[str, None]:
        samples = [json.loads(line) for line in lines if _is_sample(line)]
        if not samples:
            return
        span = samples[-1]["ts"] - samples[0]["ts"]
        step = span / max(1, len(samples) - 1) or (self.pace or 1.0)
        seq = samples[-1]["seq"]
        shift = 0.0
        while True:
            shift += span + step
            for sample in samples:
                seq += 1
                await asyncio.sleep(self.pace if self.pace is not None else 0)
                yield json.dumps({**sample, "ts": sample["ts"] + shift, "seq": seq}, separators=(",", ":"))

    async def spawn_detached(self, argv: Sequence[str], *, log_path: str, env: Mapping[str, str] | None = None) -> int:
        raise TransportError(f"{self.node_name}: replay cannot start processes", "command")

    async def upload(self, data: bytes, remote_path: str, *, mode: int = 0o644) -> None:
        self._check_link()

    async def forward_port(self, remote_port: int, remote_host: str = "127.0.0.1"):
        raise TransportError(f"{self.node_name}: replay cannot forward ports", "command")

    async def close(self) -> None:
        return None


def _is_sample(line: str) -> bool:
    return '"kind":"sample"' in line.replace(" ", "")


def replay_factory(
    traces: Mapping[str, ReplayTrace],
    **options,
) -> Callable[[object], ReplayTransport]:
    """A transport factory for TransportPool: node name -> its trace (same options for all).

    Per-node options: pass ``{"node": {...}}`` as ``per_node``.
    """
    per_node: Mapping[str, dict] = options.pop("per_node", {})

    def make(node) -> ReplayTransport:
        name = node.name
        if name not in traces:
            raise TransportError(f"{name}: no recorded trace", "unreachable")
        return ReplayTransport(name, traces[name], **{**options, **per_node.get(name, {})})

    return make


def load_traces(folder: str | Path, names: Sequence[str] | None = None) -> dict[str, ReplayTrace]:
    """``<folder>/<node>.jsonl`` for each node name (all files when names is None)."""
    folder = Path(folder)
    if names is None:
        names = sorted(p.stem for p in folder.glob("*.jsonl"))
    return {name: ReplayTrace.load(folder / f"{name}.jsonl") for name in names}
