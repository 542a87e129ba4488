"""Follow a supervised run's log (a benchmark client on a node) across dropped links.

The node's supervisor keeps the run's output in a file; `instance --group runs logs
--follow` streams it from a byte offset, so after a dropped link the stream is opened
again where it stopped: no line is lost or read twice. Shared by the serving and the
offline benchmark services.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from console.core.backoff import backoff_delay
from console.core.model import NodeSpec
from console.services.agent_bundle import AgentCommand
from console.services.transports import TransportPool
from console.transport.base import TransportError


async def follow_run_log(
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
            "instance", "--state-dir", cmd.state_dir, "--group", "runs", "logs", run,
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
