"""The telemetry of the physical GPUs a run uses, recorded while it runs (issue P).

A serving or offline run names logical GPUs (an instance's, or the offline run's
own). Their physical GPUs' 1 Hz samples go into a ``TelemetryBuilder``
(console/core/bench/run_telemetry.py: bounded, 256 points per GPU however long the
run). The samples come from the fleet stream the TUI already has
(``attach_fleet``: FleetTelemetry's TelemetryReceived events) or, where no fleet
runs (the CLI), from an agent stream the run opens on its node for its duration
(``stream_node``). Either way a lost stream never stops the run: the record is
what arrived, and ``error`` says why it ended early.

Per the agent contract the physical GPU's power, energy counter and throttle flag
sit on the row of its first partition (partition_id 0); the other partitions'
rows give their own busy % and VRAM, which the partition share rule uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from console.core.bench.run_telemetry import GpuSetup, RunTelemetry, TelemetryBuilder, TelemetryError, Tick
from console.core.model import GpuMetrics, GpuStatic, NodeSpec, StaticInfo, TelemetryFrame
from console.core.text import printable

if TYPE_CHECKING:
    from console.services.fleet import FleetEvent, FleetTelemetry
    from console.services.transports import TransportPool

__all__ = ["RunTelemetryRecorder", "attach_fleet", "recording", "stream_node"]


class RunTelemetryRecorder:
    """Frames of one node in, the run's RunTelemetry out. Bounded; safe to feed from any frame source."""

    def __init__(self, node: str, gpus: Sequence[int], static: Sequence[GpuStatic] = ()) -> None:
        self.node = node
        self.gpus = tuple(sorted(set(gpus)))
        self.static: tuple[GpuStatic, ...] = ()
        self.builder: TelemetryBuilder | None = None
        self.frames = 0
        self.error: str | None = None  # why the stream ended before the run did
        self.throttled_now: bool | None = None  # any of the run's GPUs throttled in the last frame
        # physical -> (row of partition 0 or the whole GPU, {partition_id: logical index})
        self._layout: dict[int, tuple[int, dict[int, int]]] = {}
        self.set_static(static)

    def set_static(self, static: Sequence[GpuStatic]) -> None:
        """The node's logical GPUs (first contact, or after a partition switch: a new builder)."""
        static = tuple(static)
        if static == self.static and self.builder is not None:
            return
        self.static = static
        by_index = {g.index: g for g in static}
        layout: dict[int, tuple[int, dict[int, int]]] = {}
        setups = []
        mine: dict[int, list[int]] = {}
        for index in self.gpus:
            g = by_index.get(index)
            physical, part = (g.physical, g.partition_id) if g is not None else (index, 0)
            mine.setdefault(physical, []).append(part)
        for physical, parts in sorted(mine.items()):
            siblings = {g.partition_id: g.index for g in static if g.physical == physical}
            if not siblings:  # no static yet: the logical GPU stands for its physical one
                siblings = {0: physical}
            count = max(len(siblings), max(siblings) + 1)
            primary = siblings.get(0, min(siblings.values()))
            layout[physical] = (primary, siblings)
            whole = count == 1
            setups.append(
                GpuSetup(
                    gpu=physical,
                    node=self.node,
                    partitions=() if whole else tuple(sorted(set(parts))),
                    partition_count=count,
                )
            )
        try:
            builder = TelemetryBuilder(setups) if setups else None
        except TelemetryError as exc:
            self.error, builder = str(exc), None
        if self.builder is not None and builder is not None and self.frames:
            # a partition switch mid-run: what came before is another layout; keep the newer
            self.error = "the GPUs' partitioning changed during the run: telemetry kept from the change on"
        self.builder = builder
        self._layout = layout

    def feed(self, frame: TelemetryFrame) -> None:
        builder = self.builder
        if builder is None:
            return
        rows = {m.index: m for m in frame.gpus}
        throttled: bool | None = None
        for physical, (primary, siblings) in self._layout.items():
            head = rows.get(primary)
            if head is None:
                continue
            tick = _tick(frame.ts, head, siblings, rows, self._parts_of(physical))
            try:
                builder.add(physical, tick, self.node)
            except TelemetryError as exc:
                self.error = str(exc)
                continue
            if tick.throttled is not None:
                throttled = bool(throttled) or tick.throttled
        self.frames += 1
        self.throttled_now = throttled

    def _parts_of(self, physical: int) -> tuple[int, ...]:
        by_index = {g.index: g for g in self.static}
        return tuple(by_index[i].partition_id for i in self.gpus if i in by_index and by_index[i].physical == physical)

    def record(self) -> RunTelemetry | None:
        """The record so far; None when no frame of the run's GPUs arrived."""
        if self.builder is None or not self.frames:
            return None
        record = self.builder.record()
        return record if any(len(g) for g in record.gpus) else None


def _tick(
    ts: float, head: GpuMetrics, siblings: dict[int, int], rows: dict[int, GpuMetrics], parts: tuple[int, ...]
) -> Tick:
    count = max(siblings) + 1 if siblings else 1
    if count == 1 or not parts:
        return Tick(
            t=ts,
            power_w=head.power_w,
            energy_mj=None if head.energy_j is None else head.energy_j * 1000.0,
            util_pct=head.util_pct,
            gfx_clock_mhz=head.gfx_clock_mhz,
            mem_clock_mhz=head.mem_clock_mhz,
            temp_c=head.temp_junction_c,
            temp_mem_c=head.temp_mem_c,
            vram_used_mib=head.vram_used_mib,
            throttled=head.throttled,
        )
    busy: list[float | None] = []
    for pid in range(count):
        row = rows.get(siblings[pid]) if pid in siblings else None
        busy.append(row.util_pct if row is not None else None)
    mine = [rows.get(siblings[p]) for p in parts if p in siblings]
    utils = [m.util_pct for m in mine if m is not None]
    vram = [m.vram_used_mib for m in mine if m is not None]
    return Tick(
        t=ts,
        power_w=head.power_w,
        energy_mj=None if head.energy_j is None else head.energy_j * 1000.0,
        util_pct=sum(u for u in utils if u is not None) / len(utils) if utils and None not in utils else None,
        gfx_clock_mhz=head.gfx_clock_mhz,
        mem_clock_mhz=head.mem_clock_mhz,
        temp_c=head.temp_junction_c,
        temp_mem_c=head.temp_mem_c,
        vram_used_mib=sum(v for v in vram if v is not None) if vram and None not in vram else None,
        throttled=head.throttled,
        partition_util=tuple(busy),
    )


def attach_fleet(fleet: FleetTelemetry, recorder: RunTelemetryRecorder) -> Callable[[], None]:
    """Feed the recorder from the fleet's stream of its node; returns detach()."""
    from console.services.fleet import TelemetryReceived, TopologyChanged

    with contextlib.suppress(KeyError):
        recorder.set_static(fleet.snapshot(recorder.node).static)
    release: Callable[[], None] | None = None
    with contextlib.suppress(KeyError, AttributeError):  # every sample, even while the node is off screen
        release = fleet.full_rate(recorder.node)
    active = True

    def listener(event: FleetEvent) -> None:
        if not active:
            return
        if isinstance(event, TelemetryReceived) and event.node == recorder.node:
            recorder.feed(event.frame)
        elif isinstance(event, TopologyChanged) and event.node == recorder.node:
            recorder.set_static(event.gpus)

    fleet.subscribe(listener)

    def detach() -> None:
        nonlocal active
        active = False  # FleetTelemetry has no unsubscribe: the listener stays, doing nothing
        if release is not None:
            release()
        listeners = getattr(fleet, "_listeners", None)
        if isinstance(listeners, list) and listener in listeners:
            listeners.remove(listener)

    return detach


async def stream_node(
    pool: TransportPool, node: NodeSpec, recorder: RunTelemetryRecorder, *, interval: float = 1.0
) -> None:
    """Read the node's agent telemetry into the recorder until cancelled (a run's own stream)."""
    from console.core.telemetry import AgentProtocolError, parse_agent_line
    from console.services.agent_bundle import install_agent, telemetry_argv
    from console.transport.base import TransportError

    try:
        transport = pool.get(node)
        command = await install_agent(transport, node)
        stream = transport.stream_lines(telemetry_argv(command, interval), env=command.env_dict())
        try:
            async for line in stream:
                if not line.strip():
                    continue
                message = parse_agent_line(line)
                if isinstance(message, StaticInfo):
                    recorder.set_static(message.gpus)
                elif isinstance(message, TelemetryFrame):
                    recorder.feed(message)
        finally:
            await stream.aclose()
        recorder.error = recorder.error or f"{node.name}: the telemetry stream ended before the run"
    except asyncio.CancelledError:
        raise
    except (TransportError, AgentProtocolError, OSError) as exc:
        recorder.error = f"{node.name}: telemetry: {printable(getattr(exc, 'reason', None) or exc)}"
    except Exception as exc:  # noqa: BLE001 - telemetry is a record beside the run, never its end
        recorder.error = f"{node.name}: telemetry: {type(exc).__name__}: {printable(exc)}"


@contextlib.asynccontextmanager
async def recording(
    recorder: RunTelemetryRecorder,
    *,
    fleet: FleetTelemetry | None = None,
    pool: TransportPool | None = None,
    node: NodeSpec | None = None,
    wait_first: float = 5.0,
) -> AsyncIterator[RunTelemetryRecorder]:
    """Record while the body runs: from the fleet when given, else from the node's own stream,
    whose first frame is waited for (at most ``wait_first`` s: the agent's start) so the run's
    first seconds are in the record."""
    detach: Callable[[], None] | None = None
    task: asyncio.Task | None = None
    if fleet is not None:
        detach = attach_fleet(fleet, recorder)
    elif pool is not None and node is not None:
        task = asyncio.create_task(stream_node(pool, node, recorder), name=f"run-telemetry:{node.name}")
        deadline = time.monotonic() + wait_first
        while not recorder.frames and not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    try:
        yield recorder
    finally:
        if detach is not None:
            detach()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
