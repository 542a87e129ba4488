"""How every command group picks what it acts on: the profile's nodes (`--node`, `--nodes`),
the instances and replica groups on them by name, and the one transport pool that reaches
them, closed when the command ends:

    async with Selection(profile) as sel:
        node = sel.node(args.node)
        view = await sel.instance(node, args.name)

A name that is not there is one line naming it (common.py's UsageError, exit 2, or the
error the command group has always given for it)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from console.cli.common import UsageError, pick_node, select_nodes
from console.core.instance_view import InstanceError, InstanceView
from console.core.model import NodeSpec, Profile
from console.services.transports import TransportPool

if TYPE_CHECKING:
    from console.services.groups import GroupService, GroupView
    from console.services.history import History
    from console.services.instances import InstanceService


class Selection:
    def __init__(self, profile: Profile, history: History | None = None) -> None:
        self.profile = profile
        self.pool = TransportPool()  # no link is opened until a node is asked
        self._history = history  # the command's one History; made from the profile when asked
        self._own_history = False  # one made here is closed here; a given one by its owner

    @property
    def history(self) -> History:
        """The command's history (events, runs), opened on first use."""
        if self._history is None:
            from console.cli.history_arg import command_history

            self._history = command_history(profile=self.profile)
            self._own_history = True
        return self._history

    @functools.cached_property
    def instances(self) -> InstanceService:
        from console.services.instances import InstanceService  # here: `status` needs no instances

        # A stop or a refused start from the command line is on the timeline, as from the TUI
        # (in the store; in the data folder's events.jsonl while the store cannot be opened).
        return InstanceService(self.pool, timeline=self.history.events.append)

    @functools.cached_property
    def groups(self) -> GroupService:
        from console.services.groups import GroupService

        return GroupService(self.pool, self.instances)

    async def __aenter__(self) -> Selection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pool.close()
        if self._own_history and self._history is not None:
            self._history.close()

    # ------------------------------------------------------------ nodes

    def node(self, name: str | None) -> NodeSpec:
        """The named node, or the profile's only one (`--node` is needed when it has several)."""
        return pick_node(self.profile, name)

    def nodes(self, names: str | Sequence[str] | None) -> list[NodeSpec]:
        """The named nodes (one `--node` or a repeated one), every node when none is named."""
        return select_nodes(self.profile, [names] if isinstance(names, str) else names)

    def node_list(self, text: str) -> list[NodeSpec]:
        """`--nodes a,b`: the nodes in the order given (each once)."""
        return select_nodes(self.profile, [n.strip() for n in text.split(",") if n.strip()])

    # ------------------------------------------------------------ instances and groups

    async def instance(
        self,
        node: NodeSpec,
        name: str,
        *,
        checked: bool = False,
        missing: Callable[[str], Exception] = InstanceError,
    ) -> InstanceView:
        """The instance named on the node (checked: its readiness asked with one /health call)."""
        views = await (self.instances.list_checked(node) if checked else self.instances.list(node))
        view = next((v for v in views if v.name == name), None)
        if view is None:
            raise missing(f"{node.name}: no instance named {name}")
        return view

    async def group(self, nodes: Sequence[NodeSpec], name: str, *, checked: bool = True) -> GroupView:
        """The replica group named on the nodes (UsageError when there is none)."""
        group = await self.groups.get(nodes, name, checked=checked)
        if group is None:
            raise UsageError(f"no group named {name} on {', '.join(n.name for n in nodes)}")
        return group
