"""ConsoleApp: the fleet service in, screens out, redrawn on a clock.

Data flow: FleetTelemetry calls our listener on the event loop; the listener
bumps per-node generations (FleetView) and posts a coalescing TelemetryUpdated.
A 4 Hz clock asks the active screen to redraw what changed; pausing stops the
clock's drawing, never the collection.

vLLM instances: one async worker per node asks the instance source for the node's
list every few seconds (InstancesUpdated); start and stop run in workers that
report through InstanceProgressed / InstanceSettled. Workers never touch widgets:
the handlers fill the InstanceBoard and mark the screen dirty.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from textual import events
from textual.app import App
from textual.css.query import NoMatches
from textual.notifications import Notify
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from console.core.instance_view import InstanceError, InstanceState, InstanceView
from console.core.model import NodeHealth, Profile
from console.core.text import one_line, printable
from console.services.fleet import FleetEvent, FleetTelemetry, NodeStateChanged, TelemetryReceived, TopologyChanged
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.ui.commands import FleetCommands, InstanceCommands, ScreenCommands
from console.ui.instance_actions import InstanceActions
from console.ui.keys import APP_BINDINGS, describe_keys, known_binding_ids
from console.ui.messages import (
    InstanceActionFailed,
    InstanceProgressed,
    InstanceSettled,
    InstancesUpdated,
    NodeHealthChanged,
    TelemetryUpdated,
)
from console.ui.model.fleet_view import FleetView
from console.ui.model.instance_board import InstanceBoard
from console.ui.model.instance_source import InstanceSource, ServiceInstances
from console.ui.screens.fleet import FleetScreen
from console.ui.toasts import merge_toast
from console.ui.workers import run_named

if TYPE_CHECKING:  # loaded when first used: the first frame does not wait for them
    from console.core.health_profile import HealthSettings
    from console.services.demo import DemoInstance
    from console.services.events import EventLog
    from console.services.health_watch import HealthWatch
    from console.services.history import History
    from console.ui.screens.partition import StartPresetRequested

# Sampling intervals that + and - step through (seconds).
INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
REDRAW_INTERVAL = 0.25  # 4 Hz: fast enough to feel live, cheap at 4096 rows
STOP_TIMEOUT = 5.0  # seconds quitting waits for the node streams to close
INSTANCE_POLL_INTERVAL = 3.0  # seconds between two instance lists of a node on screen
OFFSCREEN_INSTANCE_POLL_S = 30.0  # ... and of a node off screen (its GPU processes changing wakes it)
HEALTH_TOAST_NAMES = 5  # nodes named in one toast when several change at once
TOPOLOGY_QUIET_S = 1.0  # seconds without GPU changes before their history rings are frozen (gc)
# With no key or mouse input for this long the clock redraws new samples once a second, at the
# second's turn, instead of at each 0.25 s tick: an idle console's cost is its frames.
IDLE_AFTER_S = 10.0
# Left alone longer (a console open all day on a wall or in a tmux pane), every few seconds, as
# top does by default; the samples are still taken every second (history, alerts, health), a
# node's health change is drawn at once, and any key or mouse event brings the 0.25 s clock back.
UNATTENDED_AFTER_S = 60.0
IDLE_CLOCK_S = 1.0  # the redraw clock's period while idle
UNATTENDED_EVERY_S = 3
IN_FLUX = (InstanceState.STARTING, InstanceState.LOADING, InstanceState.STOPPING)  # listed often wherever they are
SETTLE_TIMEOUT = 3.0  # seconds after start-up the fleet counts as settled even if a node has not answered
READY_TIMEOUT = 1800.0  # a start that is not ready after this is reported as stuck

# Textual posts a worker's state changes to the node that ran it and stops there; here they
# bubble up to the app, whose one handler (ConsoleApp.on_worker_state_changed) reports every
# worker that fails, a screen's or a widget's as well as its own.
Worker.StateChanged.bubble = True


class ConsoleApp(InstanceActions):
    TITLE = "rocm-console"
    # Absolute: Textual resolves a relative path against the file of the *subclass*.
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    COMMANDS = App.COMMANDS | {FleetCommands, InstanceCommands, ScreenCommands}

    BINDINGS = [*APP_BINDINGS]

    # Screens get -short below 32 rows (app.tcss); the GPU table fits columns itself.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    paused: reactive[bool] = reactive(False)

    def get_driver_class(self):  # noqa: ANN201 - Textual's signature
        """Textual's Linux terminal driver, with an input thread that sleeps while nobody types
        (quiet_driver.py); any other driver (the web's, another platform's) as Textual picks it."""
        from textual.drivers.linux_driver import LinuxDriver

        chosen = super().get_driver_class()
        if chosen is LinuxDriver:
            from console.ui.quiet_driver import QuietLinuxDriver

            return QuietLinuxDriver
        return chosen

    def __init__(
        self,
        profile: Profile,
        *,
        interval: float = 1.0,
        fleet: FleetTelemetry | None = None,
        pool: TransportPool | None = None,
        clock: Callable[[], float] = time.time,
        redraw_interval: float = REDRAW_INTERVAL,
        notify_health: bool = True,
        cursor_blink: bool = True,
        instances: InstanceSource | None = None,
        instance_poll_interval: float = INSTANCE_POLL_INTERVAL,
        demo_instances: Sequence[DemoInstance] = (),
        events: EventLog | None = None,
        health: HealthSettings | None = None,
        start_notes: Sequence[str] = (),
        history: History | None = None,
    ) -> None:
        super().__init__()
        self.start_notes = tuple(start_notes)  # one line each, shown at start (what --profile could not apply)
        self.history = history  # the TUI's one store (ui/results_store.py history_of; opened after the first frame)
        # The demo opens on a living fleet: these (DemoInstance) are started once their node is live.
        self.demo_instances = tuple(demo_instances)
        self.profile = profile
        self.clock = clock
        self.fleet = fleet or FleetTelemetry(
            profile.nodes, pool, interval=interval, clock=clock, prometheus=profile.prometheus
        )
        self.view = FleetView(self.fleet)
        self.fleet.subscribe(self._on_fleet_event)
        self.redraw_interval = redraw_interval
        self.notify_health = notify_health
        self.cursor_blink = cursor_blink
        self.redraws = 0  # clock-driven redraws done (tests: pause stops them)
        self._dirty = True
        self._drawn_at = -1.0  # the clock() of the last redraw
        self._input_at = time.monotonic()  # the last key or mouse event (IDLE_AFTER_S)
        self._target_interval: float | None = None
        self._interval_lock = asyncio.Lock()
        self._health: dict[str, NodeHealth] = {}
        self._fleet_started = False
        # Set once a frame with every node's first answer (live or down) is on screen, or after
        # SETTLE_TIMEOUT: what spawns processes on the nodes beyond the agents (the versions
        # probe, instance lists, the demo's instances) waits for it, so on a small machine the
        # first full frame is not delayed by them.
        self.fleet_settled = asyncio.Event()
        self._frozen = False  # gc.freeze() done at settle
        self._topology_moved_at: float | None = None  # when a node's GPUs last changed
        self.fleet.probe_gate = self.fleet_settled
        # vLLM instances: the source (real service over the fleet's connections, or injected).
        # The timeline and the [[alert]] rules while the console runs (HealthWatch, writing
        # `events`); without a log, health is still judged and shown, nothing is written (tests).
        # Made with the first frame on screen (_start_collection): its rules, alert delivery and
        # the watcher check are not first-frame work, and it judges samples, which start there.
        self.health_watch: HealthWatch | None = None
        self._health_args = (events, health)
        self.instances: InstanceSource = instances or ServiceInstances(self.fleet.pool, events=events)
        self.board = InstanceBoard(self.fleet.node_names)
        self.instance_poll_interval = instance_poll_interval
        self._poll_wake: dict[str, asyncio.Event] = {}
        self._health_news: list[tuple[str, bool, str]] = []  # (node, down?, error) since the last flush
        self._health_flush_pending = False
        self._clock_mode = "fast"  # "fast" 4 Hz; "idle": once a second; "away": every UNATTENDED_EVERY_S
        self._gpu_pids: dict[str, frozenset[int]] = {}  # node -> its GPUs' process ids, last sample
        self._polled_at: dict[str, float] = {}  # node -> when its instances were last listed (monotonic)
        self._instances_seen: frozenset[str] = frozenset()  # nodes on screen at the last redraw
        self._following: set[tuple[str, str]] = set()  # starts whose wait_ready worker runs
        self.last_preset: str | None = None  # the start dialog offers it first next time
        self._notices = _NoticeHandler(self)

    # ------------------------------------------------------------ lifecycle

    def get_default_screen(self) -> Screen:
        return FleetScreen(self.view)

    async def on_mount(self) -> None:
        logging.getLogger("console.transport").addHandler(self._notices)
        keymap = dict(self.profile.keys)
        if keymap:
            self.set_keymap(keymap)
            self._warn_unknown_keys(keymap)
        for note in self.start_notes:
            self.notify(note, severity="warning", timeout=15, markup=False)
        # The first frame (every node's row, connecting) comes first: starting the links
        # spawns processes (local nodes) or opens connections, which would delay it.
        self.call_after_refresh(self._start_collection)
        self._fast_clock = self.set_interval(self.redraw_interval, self._tick, name="redraw-clock")
        # Idle, the clock only needs to look once a second: the fast one is paused then (every
        # wake-up of the process costs, ~0.2 ms on a small VM) and comes back at a key.
        self._slow_clock = self.set_interval(
            max(self.redraw_interval, IDLE_CLOCK_S), self._tick, name="idle-redraw-clock", pause=True
        )
        # ... and left alone, every few seconds: a clock that woke each second to skip two of
        # three would be two wake-ups for nothing.
        self._away_clock = self.set_interval(
            max(self.redraw_interval, UNATTENDED_EVERY_S), self._tick, name="away-redraw-clock", pause=True
        )

    async def _start_collection(self) -> None:
        from console.ui.start_up import release

        release(first_frame=True)  # the entry's start-up hold (ui/start_up.py): the first frame is on screen
        if self._fleet_started or not self.is_running:
            return
        events, health = self._health_args
        from console.ui.results_store import open_history

        await open_history(self, events)  # in a thread, before the watch takes the store's events and versions
        if self._fleet_started or not self.is_running:
            return  # quit meanwhile
        if events is not None and self.health_watch is None:
            from console.services.health_watch import HealthWatch

            self.health_watch = HealthWatch(self.fleet, health, events=events, alertmanager=self.profile.alertmanager)
        if self.health_watch is not None:
            await self.health_watch.start()
        await self.fleet.start()  # only creates tasks: never waits for a node
        self._fleet_started = True
        self.set_timer(SETTLE_TIMEOUT, self._settle, name="settle-timeout")
        for node in self.fleet.node_names:
            self._poll_wake[node] = asyncio.Event()
            run_named(self, self._watch_instances(node), f"instances:{node}", exclusive=True)
        for planned in self.demo_instances:
            run_named(self, self._start_demo_instance(planned), f"demo:{planned.name}", group="demo")

    async def on_unmount(self) -> None:
        logging.getLogger("console.transport").removeHandler(self._notices)
        if self._frozen:  # back to the collector: this process may go on without the app (tests)
            gc.unfreeze()
            self._frozen = False
        # The instance workers share the fleet's connections: stop them before those close.
        for worker in list(self.workers):
            worker.cancel()
        if self._fleet_started:
            try:  # quitting must not hang on a node that will not close
                await asyncio.wait_for(self.fleet.stop(), STOP_TIMEOUT)
            except asyncio.TimeoutError:
                pass
        if self.health_watch is not None:
            await self.health_watch.stop(drain=1.0)  # queued alert deliveries get a second

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Any worker that fails (the app's, a screen's, a widget's): a notification naming it.

        Workers catch what they expect and say it their own way; this is for the rest, which
        would otherwise end the worker without a word (they run with exit_on_error=False).
        """
        if event.state != WorkerState.ERROR:
            return
        worker = event.worker
        error = worker.error
        what = f"{type(error).__name__}: {one_line(error)}" if error is not None else "failed"
        name = worker.name or worker.group or "a background task"
        self.notify(what, title=f"{name} failed", severity="error", timeout=15, markup=False)

    def _warn_unknown_keys(self, keymap: dict[str, str]) -> None:
        unknown = sorted(set(keymap) - known_binding_ids())
        if unknown:
            self.notify(
                f"[keys]: unknown binding id {', '.join(unknown)} (see ? for ids)", severity="warning", markup=False
            )

    # ------------------------------------------------------------ telemetry in

    def _on_fleet_event(self, event: FleetEvent) -> None:
        # Called by the fleet service on the event loop: no widgets here.
        self.view.mark(event)
        if isinstance(event, TelemetryReceived):
            # The GPUs' processes changed (a vLLM server came or went): look at the node's
            # instances now, on screen or not, rather than at its next poll.
            pids = frozenset(p.pid for g in event.frame.gpus for p in g.processes)
            before = self._gpu_pids.get(event.node)
            if pids != before:
                self._gpu_pids[event.node] = pids
                if before is not None:
                    self.poll_instances_now(event.node)
        elif isinstance(event, NodeStateChanged):
            self.post_message(NodeHealthChanged(event.node, event.health, event.error))
        elif isinstance(event, TopologyChanged):
            self._topology_moved_at = time.monotonic()
        # The redraw clock reads the flag: a message per sample (hundreds a second on a big
        # fleet) would cost the message pump more than the redraw it asks for.
        self._dirty = True

    def on_notify(self, message: Notify) -> None:  # before Textual shows it: identical toasts merge
        merge_toast(self._notifications, message.notification)

    def on_telemetry_updated(self, _: TelemetryUpdated) -> None:
        self._dirty = True

    def on_node_health_changed(self, message: NodeHealthChanged) -> None:
        before = self._health.get(message.node)
        self._health[message.node] = message.health
        if self.notify_health:
            if message.health == NodeHealth.DOWN:
                self._health_news.append((message.node, True, message.error or "unreachable"))
            elif message.health == NodeHealth.LIVE and before in (NodeHealth.DOWN, NodeHealth.STALE):
                self._health_news.append((message.node, False, ""))
        # A node that comes up, goes stale or drops is shown at once, not at the next clock
        # tick; the changes already queued go into that one redraw and one toast per kind:
        # a link that drops a thousand nodes must not cost a thousand frames (a console that
        # falls behind would see more nodes go stale, and redraw more) nor a thousand toasts.
        if not self._health_flush_pending:
            self._health_flush_pending = True
            self.call_later(self._flush_health_changes)  # behind the messages already queued

    def _flush_health_changes(self) -> None:
        self._health_flush_pending = False
        news, self._health_news = self._health_news, []
        if not self.paused:
            self.redraw_now()
        down = [(node, error) for node, is_down, error in news if is_down]
        down_now = {node for node, _ in down}  # down again in the same burst: not "live again"
        back = [node for node, is_down, _ in news if not is_down and node not in down_now]
        if len(down) == 1:
            self.notify(down[0][1], title=f"{down[0][0]} is down", severity="error", markup=False)
        elif down:
            shown = "; ".join(f"{node}: {error}" for node, error in down[:HEALTH_TOAST_NAMES])
            more = f"; and {len(down) - HEALTH_TOAST_NAMES} more (e: events)" if len(down) > HEALTH_TOAST_NAMES else ""
            self.notify(shown + more, title=f"{len(down)} nodes are down", severity="error", markup=False)
        if len(back) == 1:
            self.notify(f"{back[0]} is live again", markup=False)
        elif back:
            more = f" and {len(back) - HEALTH_TOAST_NAMES} more" if len(back) > HEALTH_TOAST_NAMES else ""
            self.notify(
                ", ".join(back[:HEALTH_TOAST_NAMES]) + more, title=f"{len(back)} nodes are live again", markup=False
            )

    # ------------------------------------------------------------ instances in

    async def _watch_instances(self, node: str) -> None:
        """Endless: the node's instance list every few seconds while the node is live."""
        spec = self.fleet.spec(node)
        wake = self._poll_wake[node]
        # The first list waits for the first full frame (fleet_settled): on local nodes its
        # process would compete with the agents still starting and with that frame.
        await self.fleet_settled.wait()
        while True:
            snap = self.fleet.snapshot(node)
            wait = 0.5  # not live yet: look again soon, so the first list follows the first sample
            if snap.health in (NodeHealth.LIVE, NodeHealth.STALE) and snap.latest is not None:
                watched = [name for n, name in self._following if n == node]
                try:
                    views = await self.instances.poll(spec, snap, watched=watched)
                except (InstanceError, TransportError) as exc:
                    self.post_message(InstancesUpdated(node, None, one_line(exc)))
                except Exception as exc:  # a surprise must not end the polling
                    self.post_message(InstancesUpdated(node, None, f"{node}: {type(exc).__name__}: {one_line(exc)}"))
                else:
                    if self.health_watch is not None:
                        self.health_watch.observe_instances(node, views)
                    self.post_message(InstancesUpdated(node, views))
                self._polled_at[node] = time.monotonic()
                wait = self.instance_poll_interval if self._instances_in_view(node) else OFFSCREEN_INSTANCE_POLL_S
            wake.clear()
            try:
                await asyncio.wait_for(wake.wait(), wait)
            except asyncio.TimeoutError:
                pass

    def _instances_in_view(self, node: str) -> bool:
        """The node's instances are on screen, being followed or on their way up (starting,
        loading, stopping): listed every few seconds. Others, and every node of a console left
        unattended, are listed every OFFSCREEN_INSTANCE_POLL_S, and at once when their GPUs'
        processes change, they scroll into view or a key is pressed again: a thousand nodes
        listed every 3 s would be 340 commands a second."""
        if any(n == node for n, _ in self._following):
            return True
        if any(v.state in IN_FLUX for v in self.board.views(node)):
            return True
        if time.monotonic() - self._input_at > UNATTENDED_AFTER_S:
            return False
        from console.ui.screens.instances import InstancesScreen  # every node's instances

        return self.fleet.on_screen(node) or isinstance(self.screen, InstancesScreen)

    def _poll_scrolled_in(self, nodes: frozenset[str]) -> None:
        """Nodes that came on screen: their instance list now if the last one is old."""
        if nodes != self._instances_seen:
            self._poll_if_old(nodes - self._instances_seen)
            self._instances_seen = nodes

    def _poll_if_old(self, nodes: Iterable[str]) -> None:
        due = time.monotonic() - self.instance_poll_interval
        for node in nodes:
            if self._polled_at.get(node, due) <= due:
                self.poll_instances_now(node)

    async def _start_demo_instance(self, planned: DemoInstance) -> None:
        """Start one of the demo's instances as the start dialog would, once its node is live."""
        preset = next((p for p in self.profile.serve_presets if p.name == planned.preset), None)
        if preset is None or planned.node not in self.fleet.node_names:
            return
        # Once every node is live (their first samples come first: a vLLM start costs a few
        # processes), or its own node after 15 s; given up after 60 s.
        await self.fleet_settled.wait()
        for tick in range(240):
            snap = self.fleet.snapshot(planned.node)
            own = snap.health == NodeHealth.LIVE and bool(snap.static)
            if own and (
                tick >= 60 or all(self.fleet.snapshot(n).health == NodeHealth.LIVE for n in self.fleet.node_names)
            ):
                break
            await asyncio.sleep(0.25)
        else:
            return
        from console.services.demo import demo_instance_port

        try:
            # A fixed name, as the start dialog gives it: each demo keeps its instances in its
            # own state folder (services/demo.py), so another demo's never collides with it.
            view = await self.instances.start(
                self.fleet.spec(planned.node),
                preset,
                gpus=planned.gpus,
                snapshot=snap,
                name=planned.name,
                port=demo_instance_port(),
            )
        except (InstanceError, TransportError) as exc:
            self.notify(one_line(exc), title="demo instance not started", severity="warning", markup=False)
            return
        self.follow_start(view)

    def poll_instances_now(self, node: str) -> None:
        wake = self._poll_wake.get(node)
        if wake is not None:
            wake.set()

    def on_instances_updated(self, message: InstancesUpdated) -> None:
        if self.board.set_polled(message.node, message.views, message.error):
            self._dirty = True

    def on_instance_progressed(self, message: InstanceProgressed) -> None:
        view = message.view
        if view.state == InstanceState.READY:
            self.instances.mark_ready(view)
        self.board.progress(view)
        self._dirty = True

    def on_instance_settled(self, message: InstanceSettled) -> None:
        view = message.view
        if message.action == "forget":
            self.board.forget(view.node, view.name)
            self.notify(f"{view.name} on {view.node}: forgotten", markup=False)
        else:
            self.board.progress(view)
            if message.action == "start" and view.state == InstanceState.READY:
                self.instances.mark_ready(view)
                models = ", ".join(view.served_models) or view.model or ""
                self.notify(
                    f"{view.name} on {view.node} is ready" + (f": {models} on port {view.port}" if models else ""),
                    title="vLLM ready",
                    markup=False,
                )
            elif message.action == "start":
                self.notify(
                    view.reason or "failed",
                    title=f"{view.name} on {view.node} failed",
                    severity="error",
                    timeout=15,
                    markup=False,
                )
            else:
                self.notify(
                    f"{view.name} on {view.node}: {view.state.value}" + (f" ({view.reason})" if view.reason else ""),
                    title="vLLM stopped",
                    markup=False,
                )
        self._dirty = True
        self.poll_instances_now(view.node)

    def on_instance_action_failed(self, message: InstanceActionFailed) -> None:
        self.board.drop_live(message.node, message.name)
        self.notify(
            message.reason, title=f"{message.action} {message.name}: failed", severity="error", timeout=15, markup=False
        )
        self._dirty = True
        self.poll_instances_now(message.node)

    # ------------------------------------------------------------ instance actions

    def request_redraw(self) -> None:
        self._dirty = True

    def follow_start(self, view: InstanceView) -> None:
        """A start the node accepted: show it at once and follow it to ready or failed."""
        self.board.progress(view)
        self._dirty = True
        for warning in view.warnings:
            self.notify(warning, title=f"{view.name}: vLLM version", severity="warning", timeout=10, markup=False)
        run_named(self, self._run_wait_ready(view), f"start:{view.node}:{view.name}", exclusive=True)
        self.poll_instances_now(view.node)

    async def _run_wait_ready(self, view: InstanceView) -> None:
        key = (view.node, view.name)
        self._following.add(key)
        spec = self.fleet.spec(view.node)
        try:
            final = await self.instances.wait_ready(
                spec, view.name, timeout=READY_TIMEOUT, on_update=lambda v: self.post_message(InstanceProgressed(v))
            )
        except (InstanceError, TransportError) as exc:
            self.post_message(InstanceActionFailed(view.node, view.name, "start", one_line(exc)))
        else:
            self.post_message(InstanceSettled(final, "start"))
        finally:
            self._following.discard(key)

    def open_start_dialog(
        self,
        node: str | None = None,
        gpus: Sequence[int] = (),
        preset: str | None = None,
        on_done: Callable[[InstanceView | None], None] | None = None,
    ) -> None:
        from console.ui.screens.start_dialog import StartDialog

        if not self.profile.serve_presets:
            self.notify("no serve presets in the profile ([serve.NAME] tables)", severity="warning", markup=False)
            return
        node = node or self.fleet.node_names[0]
        self.push_screen(StartDialog(node, tuple(gpus), preset), on_done)

    def open_log(self, node: str, name: str) -> None:
        from console.ui.screens.log_viewer import LogScreen

        view = self.board.find(node, name)
        if view is not None and view.state == InstanceState.UNMANAGED:
            self.notify(f"{name} was started outside the console: its log is wherever its owner sent it", markup=False)
            return
        screen = LogScreen(node, name)
        screen.set_class(self.paused, "-paused")
        self.push_screen(screen)

    def open_partition_dialog(self, node: str, logical_gpus: Sequence[int] = ()) -> None:
        from console.core.telemetry import amd_only_reason
        from console.ui.screens.partition import PartitionScreen

        amd_only = amd_only_reason(self.fleet.snapshot(node).source)
        if amd_only is not None:
            self.notify(f"{node}: {amd_only}", severity="warning", markup=False)
            return
        self.push_screen(
            PartitionScreen.for_selection(self.fleet, node, logical_gpus, presets=self.profile.serve_presets)
        )

    def on_start_preset_requested(self, message: StartPresetRequested) -> None:
        # The partition dialog offers the CPX preset for the GPUs it just created.
        self.open_start_dialog(message.node, message.gpus, message.preset_name)

    def action_history(self) -> None:
        from console.ui.results_store import history_of
        from console.ui.screens.history import HistoryScreen

        if isinstance(self.screen, HistoryScreen):
            self.pop_screen()
        else:
            self.push_screen(HistoryScreen(history_of(self)))

    def open_events(self, filter_text: str = "") -> None:
        from console.ui.screens.events import toggle_events  # loaded when first opened

        toggle_events(self, filter_text)

    action_events = open_events

    def action_models(self) -> None:
        from console.ui.screens.models import ModelsScreen  # loaded when first opened

        self.pop_screen() if isinstance(self.screen, ModelsScreen) else self.push_screen(ModelsScreen())

    def action_baselines(self) -> None:
        from console.ui.screens.baseline import BaselineScreen  # loaded when first opened

        self.pop_screen() if isinstance(self.screen, BaselineScreen) else self.push_screen(BaselineScreen())

    @property
    def node_changes(self) -> dict[str, str]:
        """node -> its versions' changes not yet acknowledged (the fleet's change mark)."""
        return self.health_watch.changes if self.health_watch is not None else {}

    def action_instances(self) -> None:
        from console.ui.screens.instances import InstancesScreen

        if isinstance(self.screen, InstancesScreen):
            self.pop_screen()
            return
        below = next((s for s in self.screen_stack if isinstance(s, InstancesScreen)), None)
        if below is not None:
            while self.screen is not below:
                self.pop_screen()
            return
        screen = InstancesScreen()
        screen.set_class(self.paused, "-paused")
        self.push_screen(screen)
        self._poll_if_old(self._poll_wake)  # off-screen nodes were listed less often

    # ------------------------------------------------------------ drawing

    def _tick(self) -> None:
        moved = self._topology_moved_at
        if moved is not None and self._frozen and time.monotonic() - moved > TOPOLOGY_QUIET_S:
            # New GPUs came (first contact of a big fleet, a partition switch): their records
            # (static, latest metrics, table rows: objects per logical GPU; the history is one
            # block per node) live as long as the node. Out of the collector's sight, a full
            # collection stays short (fleet_scale.py prints it: at 4,096 GPUs ~9 ms frozen, ~30
            # ms not); garbage goes first so none is frozen.
            self._topology_moved_at = None
            gc.collect()
            gc.freeze()
        if self.paused:
            return
        now = self.clock()
        # Without new data only the sample ages move, and they show whole seconds.
        idle_for = time.monotonic() - self._input_at
        if idle_for > IDLE_AFTER_S:
            away = idle_for > UNATTENDED_AFTER_S
            self._use_clock("away" if away else "idle")
            if away:
                # its own clock ticks every few seconds: draw unless something was drawn since
                # the middle of the period (a health change is drawn at once)
                if now - self._drawn_at < UNATTENDED_EVERY_S / 2:
                    return
            elif int(now) == int(self._drawn_at):
                return
        elif int(now) == int(self._drawn_at) and not self._dirty:
            return
        self.redraw_now(now)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseEvent)):
            if time.monotonic() - self._input_at > UNATTENDED_AFTER_S:
                self._poll_if_old(self._instances_seen)  # someone is back: the lists on screen now
            self._input_at = time.monotonic()  # back to redrawing at every tick
            self._use_clock("fast")
        await super().on_event(event)

    def _use_clock(self, mode: str) -> None:
        """Run the redraw clock of `mode` ("fast", "idle" or "away"), the others paused."""
        if mode == self._clock_mode:
            return
        clocks = {"fast": self._fast_clock, "idle": self._slow_clock, "away": self._away_clock}
        clocks[self._clock_mode].pause()
        clocks[mode].resume()
        if "away" in (mode, self._clock_mode):  # the nodes on screen are sampled as often as drawn
            self.fleet.unattended(UNATTENDED_EVERY_S if mode == "away" else None)
        self._clock_mode = mode

    def redraw_now(self, now: float | None = None) -> None:
        if not self.screen_stack:  # quitting: a node's last health change can come after the screens went
            return
        now = self.clock() if now is None else now
        self._dirty = False
        self._drawn_at = now
        redraw = getattr(self.screen, "redraw", None)
        if redraw is not None:
            try:
                with self.batch_update():
                    redraw(now)
                watched = getattr(self.screen, "watched_nodes", None)
                if watched is not None:  # a screen showing nodes: the fleet refreshes those first
                    shown = frozenset(watched())
                    self.fleet.watch(shown)
                    self._poll_scrolled_in(shown)
            except NoMatches:
                return  # the screen is being torn down (exit): its widgets are already gone
        self.redraws += 1
        if not self.fleet_settled.is_set() and all(
            snap.health != NodeHealth.CONNECTING for snap in self.fleet.snapshots()
        ):
            self.call_after_refresh(self._settle)  # once this frame is on screen

    def _settle(self) -> None:
        if self.fleet_settled.is_set():
            return
        self.fleet_settled.set()
        # What exists now (Textual's widgets and styles, profiles, the fleet's records) lives as
        # long as the console: out of the collector's sight, a full collection of what is left
        # takes a few ms instead of ~80 ms on a big fleet (a key press waits for it).
        gc.freeze()
        self._frozen = True

    def watch_paused(self, paused: bool) -> None:
        for screen in self.screen_stack:
            screen.set_class(paused, "-paused")
        if not paused:
            self._dirty = True

    # ------------------------------------------------------------ actions

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def action_help(self) -> None:
        from console.ui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(describe_keys(self._keymap, self.get_key_display)))

    @property
    def sampling_interval(self) -> float:
        return self._target_interval if self._target_interval is not None else self.fleet.interval

    def action_sample_faster(self) -> None:
        self._step_interval(-1)

    def action_sample_slower(self) -> None:
        self._step_interval(1)

    def _step_interval(self, direction: int) -> None:
        current = self.sampling_interval
        if direction < 0:
            target = max((s for s in INTERVAL_STEPS if s < current - 1e-9), default=INTERVAL_STEPS[0])
        else:
            target = min((s for s in INTERVAL_STEPS if s > current + 1e-9), default=INTERVAL_STEPS[-1])
        if target == current:
            return
        self._target_interval = target
        self._dirty = True
        run_named(self, self._apply_interval(), "sampling-interval", group="sampling")

    async def _apply_interval(self) -> None:
        # Serialised, never cancelled: a cancelled restart could leave a node unfollowed.
        async with self._interval_lock:
            target = self._target_interval
            if target is not None and target != self.fleet.interval:
                await self.fleet.set_interval(target)

    def restart_node(self, node: str) -> None:
        run_named(self, self.fleet.restart_node(node), f"restart:{node}")
        self.notify(f"reconnecting {node}", markup=False)

    def apply_filter(self, text: str) -> None:
        fleet_screen = next((s for s in self.screen_stack if isinstance(s, FleetScreen)), None)
        if fleet_screen is None:
            return
        while self.screen is not fleet_screen:
            self.pop_screen()
        fleet_screen.set_filter(text)

    def open_detail(self, node: str, gpu: int | None) -> None:
        # Imported on first use: plotext is not needed for the first frame.
        from console.ui.screens.detail import DetailScreen

        screen = DetailScreen(self.view, node, gpu)
        screen.set_class(self.paused, "-paused")
        self.push_screen(screen)


class _NoticeHandler(logging.Handler):
    """Warnings of the transports (a node's login banner) as notifications: under the app,
    where logging's own fallback would write them, stderr is not on the screen."""

    def __init__(self, app: App) -> None:
        super().__init__(logging.WARNING)
        self.app = app

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = printable(record.getMessage()).removeprefix("warning: ")
            self.app.notify(text, title="node", severity="warning", timeout=20, markup=False)
        except Exception:  # noqa: BLE001, S110 - a notice must never break the app
            pass
