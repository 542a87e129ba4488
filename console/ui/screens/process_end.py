"""End GPU processes on a node (issue U): the partition dialog's blockers, or a GPU's processes.

Lists the processes (and the console's instances in the way, which are stopped as the
instances panel stops them: InstanceService.stop), asks once (y ends them all, n or Esc cancels; Cancel has the focus),
then asks the node's agent to end each (ProcessService.end: SIGTERM, then SIGKILL after
the grace period; the agent refuses a pid it does not list on a GPU, and another user's
process unless the node's profile sets allow_kill_foreign = true). Each row shows what
happened. When every process ended the dialog closes by itself; otherwise it stays with
the reasons until closed. Dismisses with the ProcessEnded records of the processes that
ended (empty when cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Static

from console.core.gpus import gpu_span
from console.core.model import NodeSpec
from console.core.partition_rules import Blocker
from console.core.text import one_line
from console.services.instances import InstanceError, InstanceService
from console.services.processes import DEFAULT_GRACE, ProcessEnded, ProcessEndFailed, ProcessService
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.ui.model.events_view import timeline_of
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named

PARALLEL = 3  # agent calls at once: each lists the node's GPU processes first


def question_text(node: str, count: int, grace: float, allow_foreign: bool, instances: int = 0) -> str:
    what = "this process" if count == 1 else f"these {count} processes"
    who = (
        "other users' processes too (the node allows it: allow_kill_foreign)"
        if allow_foreign
        else "your own processes only (other users' are refused: allow_kill_foreign is off for the node)"
    )
    stop = ""
    if instances:
        stop = (
            f"Stop {'the instance' if instances == 1 else f'the {instances} instances'} (as the instances panel does)"
        )
        if not count:
            return f"{stop} on {node}?"
        stop += " and end "
        what = what.replace("this", "the").replace("these", "the")
    else:
        stop = "End "
    return (
        f"{stop}{what} on {node}? Each process gets SIGTERM, then SIGKILL after {grace:g} s if still running. "
        f"The node's agent ends only processes it lists on a GPU; {who}."
    )


class ProcessEndScreen(ModalScreen[tuple[ProcessEnded, ...]]):
    CSS_PATH = Path(__file__).with_name("process_end.tcss")

    BINDINGS = [
        Binding("y", "end", "End processes", id="process-end-yes"),
        Binding("n,escape", "close", "Cancel / close", id="process-end-no"),
        Binding("left,right", "switch_button", "Switch button", show=False, id="process-end-switch"),
    ]

    @dataclass
    class Ended(Message):
        pid: int
        result: ProcessEnded | None
        error: str | None = None

    @dataclass
    class Stopped(Message):
        name: str
        error: str | None
        state: str = ""
        pids: tuple[int, ...] = ()

    class AllDone(Message):
        pass

    def __init__(
        self,
        node: NodeSpec,
        processes: Sequence[Blocker],
        *,
        instances: Sequence[tuple[str, tuple[int, ...]]] = (),
        pool: TransportPool | None = None,
        service: ProcessService | None = None,
        instance_service: InstanceService | None = None,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        super().__init__(id="process-end-screen")
        self.node = node
        self.processes = tuple(processes)
        self.instances = tuple(instances)  # (name, GPUs): the console's own, stopped, not signalled
        self.service = service if service is not None else ProcessService(pool)
        self.instance_service = instance_service if instance_service is not None else InstanceService(pool)
        self.stopped: list[str] = []
        self.stopped_pids: set[int] = set()  # the stopped instances' processes (telemetry lists them a while)
        self.grace = grace
        self.running = False
        self.done = False
        self.ended: list[ProcessEnded] = []
        self.errors: dict[int | str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="process-end-box") as box:
            box.border_title = f"End processes on {self.node.name}"
            box.border_subtitle = "y ends them · n or Esc cancels"
            question = question_text(
                self.node.name, len(self.processes), self.grace, self.node.allow_kill_foreign, len(self.instances)
            )
            yield Static(Text(question), id="process-end-question")
            table: DataTable[Text] = DataTable(id="process-end-table", cursor_type="none", zebra_stripes=True)
            table.can_focus = False
            yield table
            yield Static(id="process-end-status")
            with Horizontal(id="process-end-buttons"):
                n, i = len(self.processes), len(self.instances)
                label = " and ".join(
                    ([f"stop {i} instance{'s' if i != 1 else ''}"] if i else [])
                    + ([f"end {n} process{'es' if n != 1 else ''}"] if n else [])
                )
                yield Button(f"{label.capitalize()} (y)", variant="error", id="process-end-yes")
                yield Button("Cancel (n)", id="process-end-no")
        yield KeyBar(dialog=True, id="process-end-keys")  # its y and n, not the keys of the screen below

    def on_mount(self) -> None:
        table = self.query_one("#process-end-table", DataTable)
        table.add_column("GPU", key="gpu")
        table.add_column("PID", key="pid")
        table.add_column("Process", key="name")
        table.add_column("Result", key="result")
        for name, gpus in self.instances:
            table.add_row(Text(gpu_span(gpus)), Text("-"), Text(f"instance {name}"), Text(""), key=f"i:{name}")
        for p in self.processes:
            # Text cells: process names come from the node and are never markup
            table.add_row(Text(gpu_span(p.gpus)), Text(str(p.pid)), Text(p.name), Text(""), key=str(p.pid))
        self.query_one("#process-end-no", Button).focus()  # ending is destructive: Cancel first
        timeline = timeline_of(self.app)  # every end and stop goes on the fleet's timeline
        for service in (self.service, self.instance_service):
            if getattr(service, "timeline", False) is None:
                service.timeline = timeline

    # ------------------------------------------------------------ ending

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "end":
            return not self.running and not self.done and bool(self.processes or self.instances)
        return True

    def action_end(self) -> None:
        if self.running or self.done or not (self.processes or self.instances):
            return
        self.running = True
        self.query_one("#process-end-yes", Button).disabled = True
        self.query_one("#process-end-no", Button).disabled = True
        self._status(f"ending {len(self.processes) + len(self.instances)} on {self.node.name}…", "-running")
        for name, _ in self.instances:
            self._cell(f"i:{name}", "stopping…")
        for p in self.processes:
            self._cell(p.pid, "ending…")
        run_named(self, self._end_all(), "process-end", exclusive=True)
        self.refresh_bindings()

    async def _end_all(self) -> None:
        gate = asyncio.Semaphore(PARALLEL)

        async def one(p: Blocker) -> None:
            async with gate:
                try:
                    # on the first GPU the console saw it on: the agent checks it is there
                    result = await self.service.end(
                        self.node, p.pid, gpu=p.gpus[0] if p.gpus else None, grace=self.grace
                    )
                except (ProcessEndFailed, TransportError) as exc:
                    self.post_message(self.Ended(p.pid, None, one_line(exc)))
                except Exception as exc:  # never a traceback in the dialog
                    self.post_message(self.Ended(p.pid, None, f"{type(exc).__name__}: {one_line(exc)}"))
                else:
                    self.post_message(self.Ended(p.pid, result))

        async def stop(name: str) -> None:
            async with gate:
                try:
                    view = await self.instance_service.stop(self.node, name)
                except (InstanceError, TransportError) as exc:
                    self.post_message(self.Stopped(name, one_line(exc)))
                except Exception as exc:  # never a traceback in the dialog
                    self.post_message(self.Stopped(name, f"{type(exc).__name__}: {one_line(exc)}"))
                else:
                    self.post_message(
                        self.Stopped(
                            name, None, str(view.state.value), tuple(view.pids) + ((view.pid,) if view.pid else ())
                        )
                    )

        await asyncio.gather(*(stop(name) for name, _ in self.instances), *(one(p) for p in self.processes))
        self.post_message(self.AllDone())

    def on_process_end_screen_stopped(self, message: Stopped) -> None:
        if message.error is None:
            self.stopped.append(message.name)
            self.stopped_pids.update(message.pids)
            state = "" if message.state == "stopped" else f" ({message.state})"
            self._cell(f"i:{message.name}", f"✓ stopped{state}")
        else:
            self.errors[f"i:{message.name}"] = message.error.removeprefix(f"{self.node.name}: ")
            self._cell(f"i:{message.name}", f"✗ {self.errors[f'i:{message.name}']}")

    def on_process_end_screen_ended(self, message: Ended) -> None:
        if message.result is not None and message.result.ended:
            self.ended.append(message.result)
            how = "removed (simulated load)" if message.result.how == "simulated" else message.result.signal or ""
            self._cell(message.pid, f"✓ ended: {how}")
        else:
            error = message.error or (message.result.line() if message.result else "not ended")
            # the node's name starts the service's message: the dialog already says which node
            self.errors[message.pid] = error.removeprefix(f"{self.node.name}: ")
            self._cell(message.pid, f"✗ {self.errors[message.pid]}")

    def on_process_end_screen_all_done(self, message: AllDone) -> None:
        self.running = False
        self.done = True
        if not self.errors:
            self.dismiss(tuple(self.ended))
            return
        self._status(
            f"ended {len(self.ended) + len(self.stopped)} of {len(self.processes) + len(self.instances)}; "
            f"{len(self.errors)} not ended (reasons in the table)",
            "-failed",
        )
        close = self.query_one("#process-end-no", Button)
        close.label = "Close (Esc)"
        close.disabled = False
        self.query_one("#process-end-yes", Button).display = False
        close.focus()
        self.refresh_bindings()

    def _cell(self, key: int | str, text: str) -> None:
        # update_width: the column grows to show a reason whole
        self.query_one("#process-end-table", DataTable).update_cell(str(key), "result", Text(text), update_width=True)

    def _status(self, text: str, cls: str) -> None:
        status = self.query_one("#process-end-status", Static)
        status.update(Text(text))
        status.set_classes(cls)

    # ------------------------------------------------------------ leaving

    def action_close(self) -> None:
        if self.running:
            self.app.notify(f"ending processes on {self.node.name}: wait for the node's answer", markup=False)
            return
        self.dismiss(tuple(self.ended))

    def action_switch_button(self) -> None:
        self.focus_next(Button)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "process-end-yes":
            self.action_end()
        else:
            self.action_close()
