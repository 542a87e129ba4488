"""End GPU processes on a node (issue U): the partition dialog's blockers, or a GPU's processes.

Lists the processes, asks once (y ends them all, n or Esc cancels; Cancel has the focus),
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
from console.services.processes import DEFAULT_GRACE, ProcessEnded, ProcessEndFailed, ProcessService
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.ui.workers import run_named

PARALLEL = 3  # agent calls at once: each lists the node's GPU processes first


def question_text(node: str, count: int, grace: float, allow_foreign: bool) -> str:
    what = "this process" if count == 1 else f"these {count} processes"
    who = (
        "other users' processes too (the node allows it: allow_kill_foreign)"
        if allow_foreign
        else "your own processes only (other users' are refused: allow_kill_foreign is off for the node)"
    )
    return (
        f"End {what} on {node}? Each gets SIGTERM, then SIGKILL after {grace:g} s if still running. "
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

    class AllDone(Message):
        pass

    def __init__(
        self,
        node: NodeSpec,
        processes: Sequence[Blocker],
        *,
        pool: TransportPool | None = None,
        service: ProcessService | None = None,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        super().__init__(id="process-end-screen")
        self.node = node
        self.processes = tuple(processes)
        self.service = service if service is not None else ProcessService(pool)
        self.grace = grace
        self.running = False
        self.done = False
        self.ended: list[ProcessEnded] = []
        self.errors: dict[int, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(id="process-end-box") as box:
            box.border_title = f"End processes on {self.node.name}"
            box.border_subtitle = "y ends them · n or Esc cancels"
            yield Static(
                Text(question_text(self.node.name, len(self.processes), self.grace, self.node.allow_kill_foreign)),
                id="process-end-question",
            )
            table: DataTable[Text] = DataTable(id="process-end-table", cursor_type="none", zebra_stripes=True)
            table.can_focus = False
            yield table
            yield Static(id="process-end-status")
            with Horizontal(id="process-end-buttons"):
                n = len(self.processes)
                yield Button(f"End {n} process{'es' if n != 1 else ''} (y)", variant="error", id="process-end-yes")
                yield Button("Cancel (n)", id="process-end-no")

    def on_mount(self) -> None:
        table = self.query_one("#process-end-table", DataTable)
        table.add_column("GPU", key="gpu")
        table.add_column("PID", key="pid")
        table.add_column("Process", key="name")
        table.add_column("Result", key="result")
        for p in self.processes:
            # Text cells: process names come from the node and are never markup
            table.add_row(Text(gpu_span(p.gpus)), Text(str(p.pid)), Text(p.name), Text(""), key=str(p.pid))
        self.query_one("#process-end-no", Button).focus()  # ending is destructive: Cancel first

    # ------------------------------------------------------------ ending

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "end":
            return not self.running and not self.done and bool(self.processes)
        return True

    def action_end(self) -> None:
        if self.running or self.done or not self.processes:
            return
        self.running = True
        self.query_one("#process-end-yes", Button).disabled = True
        self.query_one("#process-end-no", Button).disabled = True
        self._status(f"ending {len(self.processes)} on {self.node.name}…", "-running")
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

        await asyncio.gather(*(one(p) for p in self.processes))
        self.post_message(self.AllDone())

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
            f"ended {len(self.ended)} of {len(self.processes)}; {len(self.errors)} not ended (reasons in the table)",
            "-failed",
        )
        close = self.query_one("#process-end-no", Button)
        close.label = "Close (Esc)"
        close.disabled = False
        self.query_one("#process-end-yes", Button).display = False
        close.focus()
        self.refresh_bindings()

    def _cell(self, pid: int, text: str) -> None:
        self.query_one("#process-end-table", DataTable).update_cell(str(pid), "result", Text(text))

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
