"""What the screens need of the things they are given: the fleet, a series of samples.

FleetTelemetry satisfies each of these; the tests and the screenshot scenes give frozen
stand-ins that hold only what a screen reads.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from console.core.model import NodeSnapshot, NodeSpec
from console.services.transports import TransportPool


class Samples(Protocol):
    """(time, value) pairs, oldest first (RingSeries, BlockSeries)."""

    def __iter__(self) -> Iterator[tuple[float, float | None]]: ...


class SnapshotReader(Protocol):
    def snapshot(self, node: str) -> NodeSnapshot: ...


class NodeReader(SnapshotReader, Protocol):
    """A node's latest state and its profile entry."""

    def spec(self, node: str) -> NodeSpec: ...


class SeriesReader(SnapshotReader, Protocol):
    """A node's latest state and one GPU's history of a metric (the benchmark screen's GPU charts)."""

    def series(self, node: str, gpu_index: int, metric: str) -> Samples | None: ...


class PartitionFleet(NodeReader, Protocol):
    """The partition dialog's fleet: the node's state, its spec, the connections to ask it over."""

    @property
    def pool(self) -> TransportPool | None: ...
