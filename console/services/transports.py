"""One transport per node, shared by every service that talks to it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from console.core.model import NodeSpec
from console.transport.base import Transport, TransportError
from console.transport.local import LocalTransport

TransportFactory = Callable[[NodeSpec], Transport]
T = TypeVar("T")


def default_transport_factory(node: NodeSpec) -> Transport:
    if node.transport == "local":
        return LocalTransport(node.name)
    # Imported lazily: the demo and local nodes never need asyncssh loaded.
    from console.transport.ssh import SshTransport

    return SshTransport(node)


class TransportPool:
    def __init__(self, factory: TransportFactory = default_transport_factory) -> None:
        self._factory = factory
        self._transports: dict[str, Transport] = {}

    def get(self, node: NodeSpec) -> Transport:
        transport = self._transports.get(node.name)
        if transport is None:
            transport = self._transports[node.name] = self._factory(node)
        return transport

    async def close(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for t in transports:
            try:
                await t.close()
            except Exception:  # closing a dead link must not mask the real outcome
                pass


async def each_node(
    nodes: Iterable[NodeSpec],
    ask: Callable[[TransportPool, NodeSpec], Awaitable[T]],
    down: Callable[[NodeSpec, Exception], T],
    *,
    timeout: float,
    pool: TransportPool | None = None,
    failures: tuple[type[Exception], ...] = (TransportError, OSError),
) -> list[T]:
    """ask(pool, node) on every node at once, each within timeout; a node past it (an
    asyncio.TimeoutError) or failing one of the expected ways is down(node, exception),
    never waited for. One pool for all, closed at the end."""
    pool = pool or TransportPool()
    caught: tuple[type[Exception], ...] = (asyncio.TimeoutError, *failures)

    async def one(node: NodeSpec) -> T:
        try:
            return await asyncio.wait_for(ask(pool, node), timeout)
        except caught as exc:
            return down(node, exc)

    try:
        return list(await asyncio.gather(*(one(n) for n in nodes)))
    finally:
        await pool.close()
