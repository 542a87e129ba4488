"""One instance's `vllm serve` log, followed live, with the startup stage in the header.

A worker streams the log (the last lines, then new ones until the process ends)
into a bounded buffer and the parsed stage; the redraw clock moves the buffered
lines into the Log widget in one batch per tick. Closing the screen cancels the
worker, which ends the stream on the node.
"""

from __future__ import annotations

from collections import deque
from functools import partial

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Log, Static

from console.core.instance_view import InstanceState
from console.core.serve.log import ServeLogState, clean_line
from console.core.text import one_line, printable
from console.services.instances import InstanceError
from console.transport.base import TransportError
from console.ui.model import instance_board as ib
from console.ui.model.events_view import failure_lines
from console.ui.model.health_view import physical_of
from console.ui.model.protocols import console_host
from console.ui.widgets.key_bar import KeyBar
from console.ui.widgets.status_bar import StatusBar
from console.ui.workers import run_named

MAX_LOG_LINES = 5000  # kept in the widget; older lines are dropped
TAIL_LINES = 500  # read from the end of the log when the screen opens

_LEVEL_VAR = {
    ib.READY: "$text-success",
    ib.LOADING: "$text-warning",
    ib.FAILED: "$text-error",
    ib.UNMANAGED: "$text-muted",
    ib.ENDED_LEVEL: "$text-muted",
}


class LogScreen(Screen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="close-log"),
        Binding("f", "toggle_follow", "Follow", id="follow-log"),
        Binding("end", "log_end", "End", show=False, id="log-end"),
        Binding("home", "log_home", "Top", show=False, id="log-home"),
    ]

    class LinesArrived(Message):
        """The stream buffered new lines (coalesced: the clock draws them in one go)."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogScreen.LinesArrived)

    def __init__(self, node: str, name: str) -> None:
        super().__init__(id="log-screen")
        self.node = node
        self.instance_name = name
        self.follow = True
        self.log_state = ServeLogState()
        self.received = 0  # lines read from the node
        self.ended: str | None = None  # why the stream ended
        self._pending: deque[str] = deque(maxlen=MAX_LOG_LINES)
        self._ready = False
        self._drawn_title = ""
        # A failed instance: its GPUs' events around the failure (events.jsonl), None until read.
        self.gpu_events: list[str] | None = None
        self._drawn_events: list[str] | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status-bar")
        yield Static(id="log-title")
        yield Static(id="log-gpu-events")
        yield Log(max_lines=MAX_LOG_LINES, id="log-view")
        yield KeyBar()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one(Log).focus()
        run_named(self, self._watch_log(), f"log:{self.node}:{self.instance_name}", exclusive=True)
        view = console_host(self.app).board.find(self.node, self.instance_name)
        if view is not None and view.state == InstanceState.FAILED:
            snap = console_host(self.app).fleet.snapshot(self.node)
            gpus = sorted({*view.gpus, *(physical_of(snap, g) for g in view.gpus)})
            now = console_host(self.app).clock()
            run_named(self, partial(self._read_gpu_events, gpus, now), "log-gpu-events", thread=True)
        self.redraw(console_host(self.app).clock())

    def on_screen_resume(self) -> None:
        self.set_class(getattr(self.app, "paused", False), "-paused")

    # ------------------------------------------------------------ stream (worker: no widgets)

    async def _watch_log(self) -> None:
        app = console_host(self.app)
        try:
            async for raw in app.instances.log_lines(
                app.fleet.spec(self.node), self.instance_name, follow=True, lines=TAIL_LINES
            ):
                line = printable(clean_line(raw))  # the node's log: shown, never acted on
                self._pending.append(line)
                self.log_state = self.log_state.feed(line)
                self.received += 1
                self.post_message(self.LinesArrived())
            self.ended = "end of log: the instance is not running"
        except (InstanceError, TransportError) as exc:
            self.ended = f"log unavailable: {one_line(exc)}"
        self.post_message(self.LinesArrived())

    def _read_gpu_events(self, gpus: list[int], now: float) -> None:
        from console.services.results import StoreError
        from console.ui.screens.events import event_log_of  # the events screen's module, loaded on use

        try:
            events = event_log_of(self.app).read(node=self.node, since=now - 7 * 86400)
        except (OSError, StoreError) as exc:
            lines = [f"GPU events unavailable: {one_line(exc)}"]
        else:
            lines = failure_lines(events, self.node, self.instance_name, gpus, fallback=now)
        self.gpu_events = lines or ["no GPU events on its GPUs within 5 min of the failure"]
        self.post_message(self.LinesArrived())

    def on_log_screen_lines_arrived(self, _: LinesArrived) -> None:
        console_host(self.app).request_redraw()

    # ------------------------------------------------------------ drawing (the clock)

    def redraw(self, now: float) -> None:
        if not self._ready:
            return
        self.query_one(StatusBar).show(
            console_host(self.app).fleet.snapshots(), console_host(self.app).sampling_interval
        )
        if self._pending:
            lines = list(self._pending)
            self._pending.clear()
            self.query_one(Log).write_lines(lines)
        if self.gpu_events is not None and self.gpu_events != self._drawn_events:
            self._drawn_events = self.gpu_events
            box = self.query_one("#log-gpu-events", Static)
            box.update(Text("\n".join(printable(line) for line in self.gpu_events)))
            box.border_title = "GPU events around the failure (±5 min, events.jsonl)"
            box.add_class("-shown")
        title = self._title()
        if title != self._drawn_title:
            self._drawn_title = title
            self.query_one("#log-title", Static).update(title)

    def _title(self) -> str:
        """Line 1: which instance, its state, follow, lines. Line 2: the stage, or what went wrong."""
        view = console_host(self.app).board.find(self.node, self.instance_name)
        first = [f" [b]{escape(self.instance_name)}[/b] on [b]{escape(self.node)}[/b]"]
        if view is not None:
            var = _LEVEL_VAR.get(ib.level(view), "$text-muted")
            first.append(f"[{var}]{ib.glyph(view)} {escape(view.state.value)}[/]")
            if view.port:
                first.append(f"port {view.port}")
        first.append("follow [b]on[/b]" if self.follow else "follow [b]off[/b] (f: on)")
        first.append(f"{self.received} lines")
        second = []
        log = self.log_state
        if log.stage is not None:
            stage = f"stage: {log.stage.label}"
            if log.stage_detail:
                stage += f" ({log.stage_detail})"
            second.append(escape(stage))
        if log.fatal is not None:
            second.append(f"[$text-error]fatal: {escape(log.fatal.reason)}: {escape(log.fatal.message)}[/]")
        elif view is not None and view.reason and view.state in ib.ENDED:
            second.append(f"[$text-error]{escape(view.reason)}[/]")
        if self.ended:
            second.append(f"[i]{escape(self.ended)}[/i]")
        return " · ".join(first) + "\n " + (" · ".join(second) or "[i]no startup stage in the log yet[/i]")

    # ------------------------------------------------------------ keys

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        log = self.query_one(Log)
        log.auto_scroll = self.follow
        if self.follow:
            log.scroll_end(animate=False)
        console_host(self.app).request_redraw()

    def action_log_end(self) -> None:
        self.query_one(Log).scroll_end(animate=False)

    def action_log_home(self) -> None:
        if self.follow:
            self.action_toggle_follow()  # reading from the top: stop jumping to the end
        self.query_one(Log).scroll_home(animate=False)
