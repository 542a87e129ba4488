"""Messages that cross screens. Past tense: they report what happened."""

from __future__ import annotations

from textual.message import Message

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
