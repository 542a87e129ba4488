"""ConsoleApp: the fleet service in, screens out, redrawn on a clock.

Data flow: FleetTelemetry calls our listener on the event loop; the listener
bumps per-node generations (FleetView) and posts a coalescing TelemetryUpdated.
A 4 Hz clock asks the active screen to redraw what changed; pausing stops the
clock's drawing, never the collection.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen

from console.core.model import NodeHealth, Profile
from console.services.fleet import FleetEvent, FleetTelemetry, NodeStateChanged
from console.services.transports import TransportPool
from console.ui.commands import FleetCommands
from console.ui.fleet_view import FleetView
from console.ui.messages import NodeHealthChanged, TelemetryUpdated
from console.ui.screens.fleet import FleetScreen

# Sampling intervals that + and - step through (seconds).
INTERVAL_STEPS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
REDRAW_INTERVAL = 0.25  # 4 Hz: fast enough to feel live, cheap at 4096 rows
STOP_TIMEOUT = 5.0  # seconds quitting waits for the node streams to close

_SAMPLING = Binding.Group("Interval", compact=True)


class ConsoleApp(App[int]):
    TITLE = "rocm-console"
    # Absolute: Textual resolves a relative path against the file of the *subclass*.
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    COMMANDS = App.COMMANDS | {FleetCommands}

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("p", "toggle_pause", "Pause", id="pause"),
        Binding("plus,equals_sign", "sample_faster", "Faster", id="sample-faster", group=_SAMPLING),
        Binding("minus", "sample_slower", "Slower", id="sample-slower", group=_SAMPLING),
        Binding("t", "toggle_theme", "Light/dark theme", show=False, id="toggle-theme"),
    ]

    # Screens get -short below 32 rows (app.tcss); the GPU table fits columns itself.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    paused: reactive[bool] = reactive(False)

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
    ) -> None:
        super().__init__()
        self.profile = profile
        self.clock = clock
        self.fleet = fleet or FleetTelemetry(profile.nodes, pool, interval=interval, clock=clock)
        self.view = FleetView(self.fleet)
        self.fleet.subscribe(self._on_fleet_event)
        self.redraw_interval = redraw_interval
        self.notify_health = notify_health
        self.cursor_blink = cursor_blink
        self.redraws = 0  # clock-driven redraws done (tests: pause stops them)
        self._dirty = True
        self._drawn_second = -1
        self._target_interval: float | None = None
        self._interval_lock = asyncio.Lock()
        self._health: dict[str, NodeHealth] = {}
        self._fleet_started = False

    # ------------------------------------------------------------ lifecycle

    def get_default_screen(self) -> Screen:
        return FleetScreen(self.view)

    async def on_mount(self) -> None:
        keymap = dict(self.profile.keys)
        if keymap:
            self.set_keymap(keymap)
            self._warn_unknown_keys(keymap)
        await self.fleet.start()  # only creates tasks: never waits for a node
        self._fleet_started = True
        self.set_interval(self.redraw_interval, self._tick, name="redraw-clock")

    async def on_unmount(self) -> None:
        if self._fleet_started:
            try:  # quitting must not hang on a node that will not close
                await asyncio.wait_for(self.fleet.stop(), STOP_TIMEOUT)
            except asyncio.TimeoutError:
                pass

    def _warn_unknown_keys(self, keymap: dict[str, str]) -> None:
        from console.ui.keys import known_binding_ids

        unknown = sorted(set(keymap) - known_binding_ids())
        if unknown:
            self.notify(f"[keys]: unknown binding id {', '.join(unknown)} (see ? for ids)",
                        severity="warning", markup=False)

    # ------------------------------------------------------------ telemetry in

    def _on_fleet_event(self, event: FleetEvent) -> None:
        # Called by the fleet service on the event loop: no widgets here.
        self.view.mark(event)
        if isinstance(event, NodeStateChanged):
            self.post_message(NodeHealthChanged(event.node, event.health, event.error))
        self.post_message(TelemetryUpdated())

    def on_telemetry_updated(self, _: TelemetryUpdated) -> None:
        self._dirty = True

    def on_node_health_changed(self, message: NodeHealthChanged) -> None:
        before = self._health.get(message.node)
        self._health[message.node] = message.health
        if not self.notify_health:
            return
        if message.health == NodeHealth.DOWN:
            self.notify(message.error or "unreachable", title=f"{message.node} is down",
                        severity="error", markup=False)
        elif message.health == NodeHealth.LIVE and before in (NodeHealth.DOWN, NodeHealth.STALE):
            self.notify(f"{message.node} is live again", markup=False)

    # ------------------------------------------------------------ drawing

    def _tick(self) -> None:
        if self.paused:
            return
        now = self.clock()
        # Without new data only the sample ages move, and they show whole seconds.
        if not self._dirty and int(now) == self._drawn_second:
            return
        self.redraw_now(now)

    def redraw_now(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self._dirty = False
        self._drawn_second = int(now)
        redraw = getattr(self.screen, "redraw", None)
        if redraw is not None:
            try:
                with self.batch_update():
                    redraw(now)
            except NoMatches:
                return  # the screen is being torn down (exit): its widgets are already gone
        self.redraws += 1

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
        from console.ui.keys import describe_keys
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
        self.run_worker(self._apply_interval(), group="sampling", exit_on_error=False)

    async def _apply_interval(self) -> None:
        # Serialised, never cancelled: a cancelled restart could leave a node unfollowed.
        async with self._interval_lock:
            target = self._target_interval
            if target is not None and target != self.fleet.interval:
                await self.fleet.set_interval(target)

    def restart_node(self, node: str) -> None:
        self.run_worker(self.fleet.restart_node(node), group=f"restart:{node}", exit_on_error=False)
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


def run_app(profile: Profile, *, interval: float = 1.0) -> int:
    app = ConsoleApp(profile, interval=interval)
    app.run()
    return app.return_code or 0
