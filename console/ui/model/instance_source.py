"""Where the console's vLLM instances come from: the instance service, or a fixed list.

The app only talks to an InstanceSource, so screenshots and snapshot tests show
instances without starting processes (StaticInstances), while the real console
uses the instance service over the fleet's own connections (ServiceInstances).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING, AsyncIterator, Callable, Mapping, Protocol, Sequence

from console.core.instance_view import InstanceError, InstanceView
from console.core.model import NodeSnapshot, NodeSpec, ServePreset
from console.services.transports import TransportPool
from console.ui.model.instance_board import RUNNING

if TYPE_CHECKING:
    from console.services.events import EventLog
    from console.services.instances import InstancePoller, InstanceService


class InstanceSource(Protocol):
    async def poll(
        self, node: NodeSpec, snapshot: NodeSnapshot | None, *, watched: Sequence[str] = ()
    ) -> list[InstanceView]: ...

    async def start(
        self,
        node: NodeSpec,
        preset: ServePreset,
        *,
        gpus: Sequence[int],
        snapshot: NodeSnapshot | None = None,
        port: int | None = None,
        name: str | None = None,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> InstanceView: ...

    async def wait_ready(
        self, node: NodeSpec, name: str, *, timeout: float, on_update: Callable[[InstanceView], object] | None = None
    ) -> InstanceView: ...

    async def stop(self, node: NodeSpec, name: str) -> InstanceView: ...

    async def remove(self, node: NodeSpec, name: str) -> None: ...

    def log_lines(
        self, node: NodeSpec, name: str, *, follow: bool = False, lines: int | None = None
    ) -> AsyncIterator[str]: ...

    def mark_ready(self, view: InstanceView) -> None: ...


class ServiceInstances:
    """The real thing: InstanceService and its poller on a shared TransportPool."""

    def __init__(self, pool: TransportPool, *, events: EventLog | None = None) -> None:
        self._pool = pool
        self._events = events  # a failed instance's reason names its GPUs' events from this log
        self._service: InstanceService | None = None
        self._poller: InstancePoller | None = None

    # Made on first use: the service's modules (serve argv, rules, Ray) are not needed for the
    # console's first frame, and the first instance list comes after it.
    @property
    def service(self) -> InstanceService:
        if self._service is None:
            from console.services.instances import InstanceService

            timeline = self._events.append if self._events is not None else None  # refusals, stops
            self._service = InstanceService(self._pool, timeline=timeline)
        return self._service

    @property
    def poller(self) -> InstancePoller:
        if self._poller is None:
            from console.services.instances import InstancePoller

            self._poller = InstancePoller(self.service, events=self._events)
        return self._poller

    async def poll(self, node, snapshot, *, watched=()):
        return await self.poller.poll(node, snapshot, watched=watched)

    async def start(self, node, preset, *, gpus, snapshot=None, port=None, name=None, overrides=None, extra_env=None):
        return await self.service.start(
            node, preset, gpus=gpus, snapshot=snapshot, port=port, name=name, overrides=overrides, extra_env=extra_env
        )

    async def wait_ready(self, node, name, *, timeout, on_update=None):
        return await self.service.wait_ready(node, name, timeout=timeout, on_update=on_update)

    async def stop(self, node, name):
        view = await self.service.get(node, name)
        if view is not None and view.nodes and all(n in self.service.specs for n in view.nodes):
            # a multi-node instance: vLLM on the head, then Ray on every node (services/multinode.py)
            from console.services.multinode import MultiNodeService

            nodes = [self.service.specs[n] for n in view.nodes]
            return replace(await MultiNodeService(self.service).stop(nodes, name), node=node.name)
        return await self.service.stop(node, name)

    async def remove(self, node, name):
        view = await self.service.get(node, name)
        if view is not None and view.nodes and all(n in self.service.specs for n in view.nodes):
            # a multi-node instance: forget vLLM on the head and the Ray members on every node
            from console.services.multinode import MultiNodeService

            await MultiNodeService(self.service).remove([self.service.specs[n] for n in view.nodes], name)
            return
        await self.service.remove(node, name)

    async def log_lines(self, node, name, *, follow=False, lines=None):
        view = await self.service.get(node, name)
        if view is not None and view.nodes and view.nodes[0] in self.service.specs:
            node = self.service.specs[view.nodes[0]]  # a multi-node instance's log is its head's
        async for line in self.service.log_lines(node, name, follow=follow, lines=lines):
            yield line

    def mark_ready(self, view):
        self.poller.mark_ready(view)


class StaticInstances:
    """A fixed instance list per node, and fixed logs (screenshots, snapshot tests, replayed nodes).

    Nothing can be started or stopped: those say so in one line, like a refusal.
    """

    def __init__(self, views: Sequence[InstanceView] = (), logs: Mapping[str, Sequence[str]] | None = None) -> None:
        self.views = list(views)
        self.logs = dict(logs or {})
        self.polls = 0

    async def poll(self, node, snapshot, *, watched=()):
        self.polls += 1
        return [v for v in self.views if v.node == node.name]

    def _refuse(self, node: NodeSpec, what: str):
        raise InstanceError(f"{node.name}: recorded node: instances cannot be {what} here")

    async def start(self, node, preset, *, gpus, snapshot=None, port=None, name=None, overrides=None, extra_env=None):
        self._refuse(node, "started")

    async def wait_ready(self, node, name, *, timeout, on_update=None):
        view = next((v for v in self.views if v.node == node.name and v.name == name), None)
        if view is None:
            raise InstanceError(f"{node.name}: no instance named {name}")
        return view

    async def stop(self, node, name):
        self._refuse(node, "stopped")

    async def remove(self, node, name):
        self._refuse(node, "forgotten")

    async def log_lines(self, node, name, *, follow=False, lines=None):
        text = self.logs.get(name)
        if text is None:
            raise InstanceError(f"{node.name}: no log recorded for {name}")
        for line in text[-lines:] if lines else text:
            yield line
            await asyncio.sleep(0)
        view = next((v for v in self.views if v.node == node.name and v.name == name), None)
        if follow and view is not None and view.state in RUNNING:
            await asyncio.Event().wait()  # a running instance: the log stays open, silent

    def mark_ready(self, view):
        return None
