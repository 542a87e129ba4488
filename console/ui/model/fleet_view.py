"""What changed in the fleet since the screens last drew it.

The fleet listener only bumps counters here (cheap, no widgets); the redraw
clock compares counters with what each widget drew last and redraws only what moved.
"""

from __future__ import annotations

from console.services.fleet import (
    FleetEvent,
    FleetTelemetry,
    NodeStateChanged,
    TopologyChanged,
)


class FleetView:
    def __init__(self, fleet: FleetTelemetry) -> None:
        self.fleet = fleet
        # Per-node data generation: bumped by every event of that node.
        self.generation: dict[str, int] = dict.fromkeys(fleet.node_names, 0)
        # Bumped when the set of rows may change (GPUs re-enumerated, a state change
        # that a 'live'/'down' filter sees).
        self.layout_version = 0
        self.events = 0

    def mark(self, event: FleetEvent) -> None:
        self.events += 1
        self.generation[event.node] = self.generation.get(event.node, 0) + 1
        if isinstance(event, (TopologyChanged, NodeStateChanged)):
            self.layout_version += 1

    def version(self) -> int:
        """One number that changes whenever anything changed."""
        return self.events
