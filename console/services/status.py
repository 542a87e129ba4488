"""One fresh sample per node, in parallel, with a deadline: `rocm-console status`."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Iterable

from console.core.model import AgentFailure, AgentHello, NodeHealth, NodeSnapshot, NodeSpec, StaticInfo, TelemetryFrame
from console.core.telemetry import AgentProtocolError, parse_agent_line
from console.core.text import printable, unexpected
from console.services.agent_bundle import install_agent, run_probe
from console.services.transports import TransportPool, each_node
from console.transport.base import AGENT_OUTPUT_LIMIT, TransportError, last_line


async def sample_node(pool: TransportPool, node: NodeSpec, *, probe: bool = True) -> NodeSnapshot:
    snap = NodeSnapshot(name=node.name, health=NodeHealth.CONNECTING)
    transport = pool.get(node)
    command = await install_agent(transport, node)
    if probe:
        snap = replace(snap, probe=await run_probe(transport, command))
    result = await transport.run(
        command.argv("telemetry", "--count", "1", "--interval", "0.1"),
        env=command.env_dict(),
        timeout=60,
        max_output=AGENT_OUTPUT_LIMIT,
    )
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
        elif isinstance(message, AgentFailure):
            return replace(snap, health=NodeHealth.DOWN, error=f"{node.name}: {message.message}")
    if snap.latest is None:
        last = last_line(result.stderr, "no output")
        return replace(
            snap, health=NodeHealth.DOWN, error=f"{node.name}: agent exited {result.exit_status}: {printable(last)}"
        )
    return snap


async def collect_status(
    nodes: Iterable[NodeSpec], *, timeout: float = 20.0, pool: TransportPool | None = None, probe: bool = True
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
        lambda pool, node: sample_node(pool, node, probe=probe),
        down,
        timeout=timeout,
        pool=pool,
        failures=(Exception,),  # every failure is one line naming the node
    )
