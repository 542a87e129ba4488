"""One transport per node, shared by every service that talks to it."""

from __future__ import annotations

from typing import Callable

from console.core.model import NodeSpec
from console.transport.base import Transport
from console.transport.local import LocalTransport

TransportFactory = Callable[[NodeSpec], Transport]


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
