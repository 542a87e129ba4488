"""The demo's "Inject GPU fault…": a node, a physical GPU and a fault kind, written into the
simulated node's faults.json (services/demo_faults.py); the row shows it at the GPU's next
health reading."""

from __future__ import annotations

import asyncio
from typing import Iterable

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Select

from console.core.model import NodeSpec
from console.core.text import one_line
from console.services import demo_faults
from console.ui.screens.form_dialog import FormDialog
from console.ui.workers import run_named


def fault_nodes(nodes: Iterable[NodeSpec]) -> list[NodeSpec]:
    """The nodes that take simulated faults: simulated ones on this machine (the demo's)."""
    return [n for n in nodes if n.simulate is not None and n.transport == "local"]


class FaultDialog(FormDialog[str]):
    PREFIX = "fault"
    TITLE_TEXT = "Inject a simulated GPU fault (demo)"
    GO_LABEL = "Inject"
    FIRST_FIELD = "#fault-count"  # an Input (Enter moves to Inject; ctrl+s injects); the choices are above it
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cancel-fault")]

    def __init__(self, nodes: list[NodeSpec], node: str | None = None, gpu: int = 0) -> None:
        super().__init__(id="fault-dialog")
        self.nodes = {n.name: n for n in nodes}
        self.node = node if node in self.nodes else next(iter(self.nodes))
        self.gpu = gpu
        self.busy = False

    def _spec(self) -> NodeSpec:
        return self.nodes[self.node]

    def _gpu_options(self) -> list[tuple[str, int]]:
        count = self._spec().simulate.count if self._spec().simulate is not None else 0  # type: ignore[union-attr]
        return [(f"GPU {i}", i) for i in range(count)]

    def _kind_options(self) -> list[tuple[str, str]]:
        try:
            kinds = demo_faults.fault_kinds(self._spec())
        except demo_faults.DemoFaultError:
            kinds = ()
        return [(k, k) for k in kinds]

    def fields(self) -> Iterable[tuple[str, Widget]]:
        nodes = [(n, n) for n in self.nodes]
        yield "Node", Select(nodes, value=self.node, allow_blank=False, id="fault-node", compact=True)
        gpus = self._gpu_options()
        gpu = self.gpu if any(v == self.gpu for _, v in gpus) else (gpus[0][1] if gpus else Select.BLANK)
        yield "GPU", Select(gpus, value=gpu, allow_blank=not gpus, id="fault-gpu", compact=True)
        kinds = self._kind_options()
        yield "Fault", Select(kinds, value=kinds[0][1] if kinds else Select.BLANK, id="fault-kind", compact=True)
        yield "Count", Input(placeholder="1 (errors, pages or resets at once)", id="fault-count", compact=True)

    def form_mounted(self) -> None:
        if not self._kind_options():
            self.show_error("simulated faults are not in this build (console/sim/faults.py)")

    @on(Select.Changed, "#fault-node")
    def _node_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.node:
            self.node = event.value
            self.query_one("#fault-gpu", Select).set_options(self._gpu_options())
            self.query_one("#fault-kind", Select).set_options(self._kind_options())

    def submit(self) -> None:
        if self.busy:
            return
        gpu, kind = self.choice("fault-gpu"), self.choice("fault-kind")
        if not isinstance(gpu, int) or not isinstance(kind, str):
            self.show_error("choose a GPU and a fault")
            return
        typed = self.typed("fault-count").strip() or "1"
        if not typed.isdigit() or int(typed) < 1:
            self.show_error(f"count: {typed!r} is not a whole number of 1 or more")
            return
        self.busy = True
        self.show_error(f"writing {kind} on {self.node} GPU {gpu}…", "busy")
        run_named(self, self._run_inject(self._spec(), gpu, kind, int(typed)), "inject-fault", exclusive=True)

    class Answered(Message):
        """The fault was written (ok) or not, with the line that says so."""

        def __init__(self, ok: bool, line: str) -> None:
            super().__init__()
            self.ok = ok
            self.line = line

    async def _run_inject(self, node: NodeSpec, gpu: int, kind: str, count: int) -> None:
        # A worker: it answers through a message, never touching the widgets.
        try:
            done = await asyncio.to_thread(demo_faults.inject, node, gpu, kind, count)
        except demo_faults.DemoFaultError as exc:
            self.post_message(self.Answered(False, one_line(exc)))
        else:
            self.post_message(self.Answered(True, done))

    def on_fault_dialog_answered(self, message: Answered) -> None:
        if message.ok:
            self.dismiss(message.line)
        else:
            self.busy = False
            self.show_error(message.line)


async def clear_all(nodes: list[NodeSpec]) -> list[str]:
    """Clear every simulated node's faults; one line per node (what was done or what failed)."""
    lines = []
    for node in nodes:
        try:
            lines.append(await asyncio.to_thread(demo_faults.clear, node))
        except demo_faults.DemoFaultError as exc:
            lines.append(one_line(exc))
    return lines
