"""What the screens need of the things they are given: the fleet, a series of samples, the app.

FleetTelemetry satisfies each of these; the tests and the screenshot scenes give frozen
stand-ins that hold only what a screen reads.
"""

from __future__ import annotations

from typing import Callable, Iterator, Protocol, Sequence, runtime_checkable

from console.core.instance_view import InstanceView
from console.core.model import NodeSnapshot, NodeSpec, Profile
from console.services.fleet import FleetTelemetry
from console.services.transports import TransportPool
from console.ui.model.instance_board import InstanceBoard
from console.ui.model.instance_source import InstanceSource


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


@runtime_checkable
class ConsoleHost(Protocol):
    """What the console's screens use of the app that hosts them (ConsoleApp), beyond Textual's App.

    The screens reach it through console_host(self.app): typed, and checked where it is
    taken, so a screen shown by another app fails there with the part it misses.
    """

    fleet: FleetTelemetry
    board: InstanceBoard
    profile: Profile
    instances: InstanceSource
    clock: Callable[[], float]
    cursor_blink: bool
    last_preset: str | None

    @property
    def paused(self) -> bool: ...

    @property
    def sampling_interval(self) -> float: ...

    def request_redraw(self) -> None: ...

    def follow_start(self, view: InstanceView) -> None: ...

    def stop_instance(self, node: str, name: str) -> None: ...

    def confirm_stop(self, node: str, name: str) -> None: ...

    def confirm_forget(self, node: str, name: str) -> None: ...

    def restart_node(self, node: str) -> None: ...

    def apply_filter(self, text: str) -> None: ...

    def open_detail(self, node: str, gpu: int | None) -> None: ...

    def open_log(self, node: str, name: str) -> None: ...

    def open_start_dialog(
        self,
        node: str | None = None,
        gpus: Sequence[int] = (),
        preset: str | None = None,
        on_done: Callable[[InstanceView | None], None] | None = None,
    ) -> None: ...

    def open_bench_dialog(self, instance: InstanceView | None = None) -> None: ...

    def open_offline_dialog(self, node: str) -> None: ...

    def open_partition_dialog(self, node: str, logical_gpus: Sequence[int] = ()) -> None: ...

    def action_instances(self) -> None: ...

    def open_events(self, filter_text: str = "") -> None: ...

    def action_help(self) -> None: ...

    def action_toggle_pause(self) -> None: ...

    def action_toggle_theme(self) -> None: ...

    def action_sample_faster(self) -> None: ...

    def action_sample_slower(self) -> None: ...


# Classes already checked: a runtime Protocol isinstance walks every member (~0.2 ms), and
# screens ask at each redraw (a thousand-node fleet redraws often).
_HOST_CLASSES: set[type] = set()


def console_host(app: object) -> ConsoleHost:
    """The app as the console's host; TypeError naming what it lacks if it is not one."""
    if type(app) in _HOST_CLASSES:
        return app  # type: ignore[return-value]
    if isinstance(app, ConsoleHost):
        _HOST_CLASSES.add(type(app))
        return app
    parts = set(ConsoleHost.__annotations__) | {n for n in vars(ConsoleHost) if not n.startswith("_")}
    missing = sorted(name for name in parts if not hasattr(app, name))
    raise TypeError(f"{type(app).__name__} does not host the console's screens: no {', '.join(missing)}")
