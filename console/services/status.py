"""One fresh sample per node, in parallel, with a deadline: `rocm-console status`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Iterable

from console.core.health import UNKNOWN, HealthReading, HealthRules, HealthTracker, carried
from console.core.model import (
    AgentFailure,
    AgentHello,
    GpuHealth,
    HealthFrame,
    NodeHealth,
    NodeSnapshot,
    NodeSpec,
    StaticInfo,
    TelemetryFrame,
)
from console.core.telemetry import AgentProtocolError, parse_agent_line
from console.core.text import printable, unexpected
from console.services.agent_bundle import install_agent, run_probe
from console.services.transports import TransportPool, each_node
from console.transport.base import AGENT_OUTPUT_LIMIT, TransportError, last_line

HEALTH_TICKS = 2  # ticks of a health sample: every GPU is read on each (health interval = tick)


async def sample_node(
    pool: TransportPool, node: NodeSpec, *, probe: bool = True, health: HealthRules | None = None
) -> NodeSnapshot:
    """One fresh sample of a node; with ``health`` (the profile's rules; None: no health read)
    every physical GPU's health is read too and judged into ``gpu_health``."""
    from console.services.fleet import agent_reads_health

    snap = NodeSnapshot(name=node.name, health=NodeHealth.CONNECTING)
    transport = pool.get(node)
    command = await install_agent(transport, node)
    if probe:
        snap = replace(snap, probe=await run_probe(transport, command))
    argv = command.argv("telemetry", "--count", "1", "--interval", "0.1")
    read_health = health is not None and agent_reads_health()
    if read_health:
        # the health interval equal to the tick: each tick reads every GPU's health
        argv = command.argv("telemetry", "--count", str(HEALTH_TICKS), "--interval", "0.1", "--health-interval", "0.1")
    result = await transport.run(argv, env=command.env_dict(), timeout=60, max_output=AGENT_OUTPUT_LIMIT)
    readings: list[HealthReading] = []
    for line in result.stdout.splitlines():
        if not line.strip():
            continue
        message = parse_agent_line(line)
        if isinstance(message, AgentHello):
            snap = replace(snap, source=message.source)
        elif isinstance(message, StaticInfo):
            snap = replace(snap, static=message.gpus)
        elif isinstance(message, TelemetryFrame):
            snap = replace(snap, latest=message, last_sample_ts=time.time(), health=NodeHealth.LIVE)
        elif isinstance(message, HealthFrame):
            latest = {r.gpu: r for r in readings}  # a GPU the agent found unchanged: its last reading, carried on
            readings += message.readings + tuple(carried(latest[p], t) for p, t in message.same if p in latest)
        elif isinstance(message, AgentFailure):
            return replace(snap, health=NodeHealth.DOWN, error=f"{node.name}: {message.message}")
    if readings and health is not None:
        snap = replace(snap, gpu_health=judge(readings, health))
    if snap.latest is None:
        last = last_line(result.stderr, "no output")
        return replace(
            snap, health=NodeHealth.DOWN, error=f"{node.name}: agent exited {result.exit_status}: {printable(last)}"
        )
    return snap


def judge(readings: Iterable[HealthReading], rules: HealthRules) -> tuple[GpuHealth, ...]:
    """The verdict on each physical GPU of a short run's readings (oldest first)."""
    trackers: dict[int, HealthTracker] = {}
    since: dict[int, tuple[str, float]] = {}
    for reading in sorted(readings, key=lambda r: r.t):
        tracker = trackers.setdefault(reading.gpu, HealthTracker(rules))
        verdict = tracker.add(reading)
        if since.get(reading.gpu, (UNKNOWN, 0.0))[0] != verdict.state:
            since[reading.gpu] = (verdict.state, reading.t)
    return tuple(
        GpuHealth(gpu, t.verdict, t.last, since[gpu][1] if gpu in since else None)
        for gpu, t in sorted(trackers.items())
    )


async def collect_status(
    nodes: Iterable[NodeSpec],
    *,
    timeout: float = 20.0,
    pool: TransportPool | None = None,
    probe: bool = True,
    health: HealthRules | None = None,
) -> list[NodeSnapshot]:
    """Sample every node concurrently; a node past the deadline is reported down, not waited for."""

    def down(node: NodeSpec, exc: Exception) -> NodeSnapshot:
        if isinstance(exc, asyncio.TimeoutError):
            error = f"{node.name}: no answer within {timeout:g} s"
        elif isinstance(exc, TransportError):
            error = exc.reason
        elif isinstance(exc, AgentProtocolError):
            error = f"{node.name}: agent protocol error: {exc}"
        elif isinstance(exc, OSError):
            error = f"{node.name}: {printable(exc)}"
        else:  # whatever a node sent: one line naming it, never a traceback
            error = unexpected(node.name, exc)
        return NodeSnapshot(node.name, NodeHealth.DOWN, error=error)

    return await each_node(
        nodes,
        lambda pool, node: sample_node(pool, node, probe=probe, health=health),
        down,
        timeout=timeout,
        pool=pool,
        failures=(Exception,),  # every failure is one line naming the node
    )
