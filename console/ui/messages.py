"""Messages that cross screens. Past tense: they report what happened."""

from __future__ import annotations

from textual.message import Message

from console.core.instance_view import InstanceView
from console.core.model import NodeHealth


class TelemetryUpdated(Message):
    """New fleet data is waiting to be drawn.

    It carries nothing: the data lives in the fleet service and the dirty marks
    in FleetView, so any number of queued copies collapse into one.
    """

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TelemetryUpdated)


class NodeHealthChanged(Message):
    """A node went live, stale or down (not coalesced: each change is news)."""

    def __init__(self, node: str, health: NodeHealth, error: str | None) -> None:
        super().__init__()
        self.node = node
        self.health = health
        self.error = error


# ---------------------------------------------------------------- instances


class InstancesUpdated(Message):
    """A node's instance list was read (views None: the poll failed with `error`).

    A newer list of the same node replaces one still queued.
    """

    def __init__(self, node: str, views: list[InstanceView] | None, error: str | None = None) -> None:
        super().__init__()
        self.node = node
        self.views = views
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, InstancesUpdated) and message.node == self.node


class InstanceProgressed(Message):
    """A start or stop worker has news about one instance (stage, ready, stopping...).

    The newest news of the same instance replaces a queued older one.
    """

    def __init__(self, view: InstanceView) -> None:
        super().__init__()
        self.view = view

    def can_replace(self, message: Message) -> bool:
        return (
            isinstance(message, InstanceProgressed)
            and message.view.node == self.view.node
            and message.view.name == self.view.name
        )


class InstanceSettled(Message):
    """A start reached ready or failed, or a stop finished (not coalesced: each one is a toast)."""

    def __init__(self, view: InstanceView, action: str) -> None:
        super().__init__()
        self.view = view
        self.action = action  # "start" | "stop" | "forget"


class InstanceActionFailed(Message):
    """A start, stop or forget could not be done; `reason` is one line."""

    def __init__(self, node: str, name: str, action: str, reason: str) -> None:
        super().__init__()
        self.node = node
        self.name = name
        self.action = action
        self.reason = reason
