"""Switch the compute / memory partition of a node's physical GPUs (issue E).

A dialog over the fleet: the node, the physical GPUs (all, or the ones chosen),
their modes now, the target compute (SPX/DPX/QPX/CPX) and memory (NPS1/2/4)
modes, what will happen (describe_change: "8 → 64 logical GPUs, TP 1 per
logical GPU only") and the preflight, run again in a worker whenever the target
changes (PartitionService.check: processes and instances on the GPUs, the mode
pair, root). Switch stays disabled while anything refuses. A memory change
reloads the amdgpu driver: a second confirmation (ReloadConfirm) comes first.

The switch runs in a worker (PartitionService.switch) while the dialog shows
the elapsed time; then the verified modes and the node's logical GPU count,
the node's telemetry stream is restarted (FleetTelemetry.restart_node) so the
table reflows to the new rows at once, and a serve preset named for the new
mode (e.g. `llama-3.1-8b-fp8-cpx`) is offered for the new logical GPUs.

Workers never touch widgets: they post the screen's own messages. For the app:
PartitionSwitched (after every verified switch) and StartPresetRequested (the
user took the preset offer) are posted to the app.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import (
    Button,
    Input,
    Label,
    ProgressBar,
    RadioButton,
    RadioSet,
    Static,
)

from console.core.model import NodeSnapshot, ServePreset
from console.core.partition_rules import (
    COMPUTE_MODES,
    MEMORY_MODES,
    Blocker,
    describe_change,
    effective_modes,
    parse_physical,
    physical_gpus,
)
from console.core.partition_view import (
    blockers_text,
    done_text,
    failure_text,
    local_reasons,
    modes_after,
    modes_now,
    new_logical_gpus,
    offer_text,
    physical_of,
    preflight_text,
    preset_for_mode,
    switched_compute,
    switching_text,
    unchanged_text,
)
from console.core.text import one_line
from console.services.partitions import (
    PartitionFailed,
    PartitionRefused,
    PartitionService,
    SwitchResult,
)
from console.services.processes import DEFAULT_GRACE, ProcessEnded
from console.transport.base import TransportError
from console.ui.model.protocols import PartitionFleet
from console.ui.screens.confirm import YesNoScreen
from console.ui.screens.process_end import ProcessEndScreen
from console.ui.widgets.key_bar import KeyBar
from console.ui.workers import run_named

CHECK_DELAY = 0.3  # seconds of quiet typing in the GPUs field before the preflight runs again
_KEEP = "unchanged"


# ---------------------------------------------------------------- messages for the app


@dataclass
class PartitionSwitched(Message):
    """A switch finished and the node verified the new modes (posted to the app)."""

    node: str
    result: SwitchResult


class StartPresetRequested(Message):
    """The user accepted the serve preset offered after a switch (posted to the app).

    gpus: what to put in the start dialog (the first new logical GPU: the offered
    presets are TP 1); new_gpus: every logical GPU the switch created.
    """

    def __init__(self, node: str, preset_name: str, gpus: tuple[int, ...], new_gpus: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.node = node
        self.preset_name = preset_name
        self.gpus = gpus
        self.new_gpus = new_gpus or gpus


# ---------------------------------------------------------------- the second confirmation


class ReloadConfirm(YesNoScreen):
    """A memory partition change reloads the amdgpu driver: ask once more (Cancel has the focus)."""

    PREFIX = "reload"
    FOCUS_YES = False
    BINDINGS = [
        Binding("y", "answer(True)", "Reload and switch", id="reload-yes"),
        Binding("n,escape", "answer(False)", "Cancel", id="reload-no"),
        Binding("left,right", "switch_button", "Switch button", show=False, id="reload-switch"),
    ]

    def __init__(self, node: str, change: str) -> None:
        super().__init__(
            "Reload the amdgpu driver?",
            f"{change}.\n\nA memory partition change reloads the amdgpu driver on {node}: "
            "every process using a GPU there stops, and the switch can take minutes.\n"
            "Reload the driver and switch?",
            "Reload driver and switch",
            id="partition-reload",
        )
        self.node = node
        self.change = change


# ---------------------------------------------------------------- the dialog


class Phase(str, Enum):
    CHOOSE = "choose"  # the target is edited and checked
    SWITCHING = "switching"  # the node is switching: the dialog waits for it
    DONE = "done"  # switched and verified


@dataclass(frozen=True)
class Preflight:
    """The preflight of the current target: running, or what refuses it (nothing: go)."""

    reasons: tuple[str, ...] = ()
    checking: bool = False
    blockers: tuple[Blocker, ...] = ()  # the processes among the reasons, which k offers to end
    instances: tuple[tuple[str, tuple[int, ...]], ...] = ()  # the instances among them, which k offers to stop
    note: str = ""  # nothing refuses, nothing to do: e.g. "unchanged: GPU 3 is already CPX/NPS1"


@dataclass(frozen=True)
class Verdict:
    """The line under the preflight after a switch: '-ok' or '-failed' (kind '' hides it)."""

    kind: str = ""
    text: str = ""


class PartitionScreen(ModalScreen["SwitchResult | None"]):
    """Dismisses with the SwitchResult after a switch, or None.

    fleet: the FleetTelemetry (snapshot, spec, pool; restart_node when it has one);
    physical: the physical GPUs (None = all of the node's); service: a PartitionService
    (default: one over the fleet's connections); presets: serve presets to offer after
    the switch (default: the app's profile's); compute / memory: the targets selected at
    first (None = unchanged).

    The dialog's state is reactive: each watcher draws its own part (phase: which widgets
    work and the hint line; preflight; verdict; elapsed; offer).
    """

    CSS_PATH = Path(__file__).with_name("partition.tcss")

    BINDINGS = [
        Binding("escape", "close", "Cancel", id="partition-cancel"),
        Binding("ctrl+s", "confirm", "Switch", id="partition-go"),
        Binding("k", "end_processes", "End blocking processes", id="partition-end-processes"),
        Binding("s", "start_preset", "Start preset", show=False, id="offer-preset"),
    ]

    CHOOSE, SWITCHING, DONE = Phase.CHOOSE, Phase.SWITCHING, Phase.DONE

    # made by compose()
    _box: Vertical
    _gpus: Input
    _compute: RadioSet
    _memory: RadioSet
    _now: Static
    _change: Static
    _renumber: Static
    _preflight: Static
    _blockers: Static
    _end: Button
    _progress_row: Vertical
    _elapsed: Static
    _result: Static
    _offer: Static
    _start: Button
    _go: Button
    _close: Button

    state: reactive[Phase] = reactive(Phase.CHOOSE, init=False)
    preflight: reactive[Preflight] = reactive(Preflight, init=False)
    typing: reactive[bool] = reactive(False, init=False)  # the GPUs field changed, its check not yet run
    verdict: reactive[Verdict] = reactive(Verdict, init=False, always_update=True)
    elapsed: reactive[float] = reactive(0.0, init=False, always_update=True)
    offer: reactive[ServePreset | None] = reactive(None, init=False)

    @dataclass
    class Checked(Message):
        """A preflight finished (generation: which target it was for)."""

        generation: int
        reasons: list[str]
        summary: str | None
        error: str | None = None
        blockers: tuple[Blocker, ...] = ()
        renumbering: tuple[str, ...] = ()
        instances: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @dataclass
    class SwitchDone(Message):
        result: SwitchResult

    class SwitchFailed(Message):
        """kind: PartitionFailed.kind (no_perm, busy, invalid, unsupported, failed), or refused / transport."""

        def __init__(self, reason: str, kind: str = "failed", reasons: Sequence[str] = ()) -> None:
            super().__init__()
            self.reason = reason
            self.kind = kind
            self.reasons = list(reasons)

    def __init__(
        self,
        fleet: PartitionFleet,
        node: str,
        physical: Sequence[int] | None = None,
        *,
        service: PartitionService | None = None,
        presets: Sequence[ServePreset] | None = None,
        compute: str | None = None,
        memory: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        grace: float = DEFAULT_GRACE,
    ) -> None:
        super().__init__(id="partition-screen")
        self.fleet = fleet
        self.node = node
        self.initial_physical = sorted(set(physical)) if physical else None
        self.service = service if service is not None else PartitionService(fleet.pool)
        self._presets = tuple(presets) if presets is not None else None
        self.initial_compute = compute.upper() if compute else None
        self.initial_memory = memory.upper() if memory else None
        self.clock = clock
        self.result: SwitchResult | None = None
        self.failure: str | None = None
        self.new_gpus: tuple[int, ...] = ()
        self._generation = 0
        self._started = 0.0
        self._ticker: Timer | None = None
        self._debounce: Timer | None = None
        self._gpus_text: str | None = None
        self._target: tuple[list[int], str | None, str | None] | None = None
        self.grace = grace  # seconds from SIGTERM to SIGKILL when blockers are ended
        # pids ended from this dialog: the telemetry's process lists lag a few ticks behind
        self.ended_pids: set[int] = set()

    @classmethod
    def for_selection(
        cls, fleet: PartitionFleet, node: str, logical: Iterable[int] = (), **kwargs: Any
    ) -> PartitionScreen:
        """The dialog for the physical GPUs behind the logical GPUs marked in the fleet table
        (none marked: every physical GPU of the node)."""
        physical = physical_of(fleet.snapshot(node), logical)
        return cls(fleet, node, physical or None, **kwargs)

    # ------------------------------------------------------------ what the state says

    @property
    def reasons(self) -> list[str]:
        """What refuses the current target (empty: go)."""
        return list(self.preflight.reasons)

    @property
    def checking(self) -> bool:
        return self.preflight.checking or self.typing

    @property
    def can_switch(self) -> bool:
        return self.state == Phase.CHOOSE and not self.checking and not self.reasons and self._target is not None

    # ------------------------------------------------------------ layout

    @property
    def presets(self) -> tuple[ServePreset, ...]:
        if self._presets is not None:
            return self._presets
        profile = getattr(self.app, "profile", None)  # hosted by the console: its profile's presets
        return tuple(getattr(profile, "serve_presets", ()) or ())

    def _snapshot(self) -> NodeSnapshot:
        return self.fleet.snapshot(self.node)

    def compose(self) -> ComposeResult:
        gpus = "all" if self.initial_physical is None else ",".join(map(str, self.initial_physical))
        # The widgets the watchers draw, kept so no watcher has to look them up.
        self._box = Vertical(id="partition-box")
        self._gpus = Input(gpus, placeholder="all, or physical GPUs like 0,1", id="partition-gpus", compact=True)
        self._compute = RadioSet(id="partition-compute", compact=True)
        self._memory = RadioSet(id="partition-memory", compact=True)
        self._now = Static(id="partition-now")
        self._change = Static(id="partition-change")
        self._renumber = Static(id="partition-renumber")
        self._preflight = Static(id="partition-preflight")
        self._blockers = Static(id="partition-blockers")
        self._end = Button("End blockers (k)", variant="warning", id="partition-end")
        self._progress_row = Vertical(id="partition-progress-row")
        self._elapsed = Static(id="partition-elapsed")
        self._result = Static(id="partition-result")
        self._offer = Static(id="partition-offer")
        self._start = Button("Start preset", variant="success", id="partition-start")
        self._go = Button("Switch", variant="error", id="partition-go", disabled=True)
        self._close = Button("Cancel", id="partition-close")
        with self._box as box:
            box.border_title = f"Partition GPUs on {self.node}"
            box.border_subtitle = "ctrl+s switches · Esc cancels"
            with Grid(id="partition-fields"):
                yield Label("GPUs")
                yield self._gpus
                yield Label("Now")
                yield self._now
                yield Label("Compute")
                with self._compute:
                    yield RadioButton(_KEEP, value=self.initial_compute is None, id="compute-keep")
                    for mode in COMPUTE_MODES:
                        yield RadioButton(mode, value=mode == self.initial_compute, id=f"compute-{mode.lower()}")
                yield Label("Memory")
                with self._memory:
                    yield RadioButton(_KEEP, value=self.initial_memory is None, id="memory-keep")
                    for mode in MEMORY_MODES:
                        yield RadioButton(mode, value=mode == self.initial_memory, id=f"memory-{mode.lower()}")
            yield self._change
            yield self._renumber
            yield self._preflight
            yield self._blockers
            with self._progress_row:
                yield self._elapsed
                yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="partition-progress")
            yield self._result
            yield self._offer
            with Horizontal(id="partition-buttons"):
                yield self._start
                yield self._end
                yield self._go
                yield self._close
        # The dialog's own keys (k ends the blockers): the fleet's bar below showed through (U2).
        yield KeyBar(dialog=True, id="partition-keys")

    def on_mount(self) -> None:
        self._gpus.cursor_blink = getattr(self.app, "cursor_blink", True)
        for radios in (self._compute, self._memory):
            # RadioSet puts its keyboard cursor on the first button; start it on the pressed one.
            if radios.pressed_index >= 0:
                radios._selected = radios.pressed_index
        self._compute.focus()
        self._target_changed()

    # ------------------------------------------------------------ watchers: the state drawn

    def watch_state(self, state: Phase) -> None:
        choosing = state == Phase.CHOOSE
        for widget in (self._compute, self._memory, self._gpus):
            widget.disabled = not choosing  # after a switch the target stays as it was switched
        self._close.disabled = state == Phase.SWITCHING
        self._progress_row.set_class(state == Phase.SWITCHING, "-on")
        self._preflight.display = choosing
        self._blockers.display = choosing
        self._renumber.display = choosing
        self._end.display = choosing and bool(self.preflight.blockers or self.preflight.instances)
        self._go.display = state != Phase.DONE
        self._box.border_subtitle = (
            "ctrl+s switches · Esc cancels"
            if choosing
            else "switching: the dialog stays until the node answers"
            if state == Phase.SWITCHING
            else "s starts the preset · Esc closes"
            if self.offer is not None and self.new_gpus
            else "Esc closes"
        )
        if state == Phase.DONE:
            self._close.label = "Close"
        self._update_go()
        self.refresh_bindings()

    def watch_preflight(self, preflight: Preflight) -> None:
        memory = self._target[2] if self._target else None
        if preflight.note:
            self._preflight.update(Text(preflight.note))
        else:
            self._preflight.update(Text(preflight_text(preflight.reasons, checking=preflight.checking, memory=memory)))
        self._preflight.set_class(preflight.checking, "-checking")
        self._preflight.set_class(bool(preflight.note), "-unchanged")
        self._preflight.set_class(not preflight.checking and not preflight.reasons and not preflight.note, "-ok")
        self._preflight.set_class(not preflight.checking and bool(preflight.reasons), "-refused")
        shown = not preflight.checking and bool(preflight.blockers or preflight.instances)
        offer = blockers_text(preflight.blockers, self.grace, len(preflight.instances))
        self._blockers.update(Text(offer) if shown else "")
        self._blockers.set_class(shown, "-on")
        self._end.display = shown and self.state == Phase.CHOOSE
        self._update_go()
        self.refresh_bindings()

    def watch_typing(self) -> None:
        self._update_go()

    def watch_verdict(self, verdict: Verdict) -> None:
        self._result.update(Text(verdict.text))
        self._result.set_class(bool(verdict.kind), "-on")
        self._result.set_class(verdict.kind == "-ok", "-ok")
        self._result.set_class(verdict.kind == "-failed", "-failed")

    def watch_elapsed(self, seconds: float) -> None:
        if self._target is not None:
            self._elapsed.update(Text(switching_text(self.node, *self._target, seconds)))

    def watch_offer(self, offer: ServePreset | None) -> None:
        shown = offer is not None and bool(self.new_gpus)
        self._offer.update(Text(offer_text(offer, self.new_gpus)) if offer is not None and shown else "")
        self._offer.set_class(shown, "-on")
        self._start.set_class(shown, "-on")
        self.refresh_bindings()

    def _update_go(self) -> None:
        self._go.disabled = not self.can_switch

    # ------------------------------------------------------------ reading the form

    def _choice(self, radios: RadioSet) -> str | None:
        pressed = radios.pressed_button
        if pressed is None or pressed.id in ("compute-keep", "memory-keep"):
            return None
        return str(pressed.label).upper()

    def read_target(self) -> tuple[list[int] | str, str | None, str | None]:
        """(physical GPUs, or a one-line reason why the field is wrong; compute; memory)."""
        available = [p.physical for p in physical_gpus(self._snapshot())]
        chosen = parse_physical(self._gpus.value or "all", available)
        if isinstance(chosen, str):
            chosen = chosen.replace("--gpus", "GPUs")
        return chosen, self._choice(self._compute), self._choice(self._memory)

    # ------------------------------------------------------------ preflight

    @on(RadioSet.Changed)
    def _radio_changed(self, event: RadioSet.Changed) -> None:
        event.stop()
        self._target_changed()

    @on(Input.Changed, "#partition-gpus")
    def _gpus_changed(self, event: Input.Changed) -> None:
        event.stop()
        if event.value == self._gpus_text:
            return  # e.g. the field's first value: already checked
        if self._debounce is not None:
            self._debounce.stop()
        self._generation += 1  # a check still running is for the old text
        self.typing = True
        self._debounce = self.set_timer(CHECK_DELAY, self._target_changed)

    @on(Input.Submitted, "#partition-gpus")
    def _gpus_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._debounce is not None:
            self._debounce.stop()
        self._target_changed()
        self._compute.focus()

    def _target_changed(self) -> None:
        if self.state != Phase.CHOOSE:
            return
        self._debounce = None
        self._generation += 1
        generation = self._generation
        snapshot = self._snapshot()
        physical, compute, memory = self.read_target()
        self._gpus_text = self._gpus.value
        shown = physical if isinstance(physical, list) else [p.physical for p in physical_gpus(snapshot)]
        self._now.update(Text(modes_now(snapshot, shown)))
        self._renumber.update("")
        unchanged = unchanged_text(snapshot, physical, compute, memory) if snapshot.static else None
        if isinstance(physical, list) and snapshot.static and (compute or memory):
            # a mode the GPUs already have is no change: never a driver reload for a kept memory mode
            compute, memory = effective_modes(snapshot, physical, compute, memory)
            self._change.update("" if unchanged else Text(describe_change(snapshot, physical, compute, memory)))
        else:
            self._change.update("")
        local = local_reasons(self.node, snapshot, physical, compute, memory) if not unchanged else []
        if local or unchanged:
            self._target = None
            self._set_preflight(Preflight(tuple(local), note=unchanged or ""))
            return
        assert isinstance(physical, list)
        self._target = (physical, compute, memory)
        self._set_preflight(Preflight(checking=True))
        run_named(
            self, self._run_check(generation, snapshot, physical, compute, memory), "partition-check", exclusive=True
        )

    def _set_preflight(self, preflight: Preflight) -> None:
        self.typing = False
        # Drawn again even when equal: the target (and the memory hint) may have changed.
        self.set_reactive(PartitionScreen.preflight, preflight)
        self.watch_preflight(preflight)

    async def _run_check(
        self, generation: int, snapshot: NodeSnapshot, physical: list[int], compute: str | None, memory: str | None
    ) -> None:
        try:
            checked = await self.service.check_detail(
                self.fleet.spec(self.node),
                snapshot,
                physical,
                compute=compute,
                memory=memory,
                ignore_pids=frozenset(self.ended_pids),
            )
        except Exception as exc:  # a node that cannot be asked: say so, never a traceback
            self.post_message(self.Checked(generation, [], None, f"preflight could not run: {one_line(exc)}"))
        else:
            self.post_message(
                self.Checked(
                    generation,
                    list(checked.reasons),
                    checked.summary,
                    None,
                    checked.blockers,
                    checked.renumbering,
                    checked.instances,
                )
            )

    def on_partition_screen_checked(self, message: Checked) -> None:
        if message.generation != self._generation or self.state != Phase.CHOOSE:
            return  # the target changed since: a newer check is on its way
        if message.summary:
            self._change.update(Text(message.summary))
        self._renumber.update(Text("\n".join(message.renumbering)))
        self._set_preflight(
            Preflight((message.error,), blockers=())
            if message.error
            else Preflight(tuple(message.reasons), blockers=message.blockers, instances=message.instances)
        )

    # ------------------------------------------------------------ the switch

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return self.can_switch
        if action == "start_preset":
            return self.state == Phase.DONE and self.offer is not None
        if action == "end_processes":
            blocked = self.preflight.blockers or self.preflight.instances
            return self.state == Phase.CHOOSE and not self.checking and bool(blocked)
        return True

    def action_end_processes(self) -> None:
        """k: end the processes and stop the instances that block the switch (the end-process
        dialog asks first)."""
        blockers, instances = self.preflight.blockers, self.preflight.instances
        if self.state != Phase.CHOOSE or self.checking or not (blockers or instances):
            return

        def ended(results: tuple[ProcessEnded, ...] | None) -> None:
            results = results or ()
            self.ended_pids.update(r.pid for r in results if r.ended)
            self.ended_pids.update(ender.stopped_pids)
            if results or instances:
                self.app.notify(f"{self.node}: checking the switch again", markup=False)
            self._target_changed()
            self._compute.focus()

        ender = ProcessEndScreen(
            self.fleet.spec(self.node),
            blockers,
            instances=instances,
            pool=self.fleet.pool,
            instance_service=getattr(self.service, "instances", None),
            grace=self.grace,
        )
        self.app.push_screen(ender, ended)

    def action_confirm(self) -> None:
        if not self.can_switch or self._target is None:
            return
        physical, compute, memory = self._target
        if memory is None:
            self._start_switch(physical, compute, memory, reload_confirmed=False)
            return
        change = describe_change(self._snapshot(), physical, compute, memory)

        def answered(yes: bool | None) -> None:
            if yes and self.can_switch and self._target == (physical, compute, memory):
                self._start_switch(physical, compute, memory, reload_confirmed=True)

        self.app.push_screen(ReloadConfirm(self.node, change), answered)

    def _start_switch(
        self, physical: list[int], compute: str | None, memory: str | None, *, reload_confirmed: bool
    ) -> None:
        self.failure = None
        self._started = self.clock()
        self.verdict = Verdict()
        self.state = Phase.SWITCHING
        self._show_elapsed()
        self._ticker = self.set_interval(0.5, self._show_elapsed)
        run_named(
            self,
            self._run_switch(self._snapshot(), physical, compute, memory, reload_confirmed),
            "partition-switch",
            exclusive=True,
        )

    def _show_elapsed(self) -> None:
        self.elapsed = self.clock() - self._started

    async def _run_switch(
        self,
        snapshot: NodeSnapshot,
        physical: list[int],
        compute: str | None,
        memory: str | None,
        reload_confirmed: bool,
    ) -> None:
        try:
            result = await self.service.switch(
                self.fleet.spec(self.node),
                snapshot,
                physical,
                compute=compute,
                memory=memory,
                reload_confirmed=reload_confirmed,
                ignore_pids=frozenset(self.ended_pids),
            )
        except PartitionRefused as exc:
            self.post_message(self.SwitchFailed("refused: " + "; ".join(exc.reasons), "refused", exc.reasons))
        except PartitionFailed as exc:
            self.post_message(self.SwitchFailed(one_line(exc), exc.kind))
        except TransportError as exc:  # the link dropped, a timeout
            self.post_message(self.SwitchFailed(one_line(exc), "transport"))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.SwitchFailed(f"{type(exc).__name__}: {one_line(exc)}"))
        else:
            self.post_message(self.SwitchDone(result))

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def on_partition_screen_switch_done(self, message: SwitchDone) -> None:
        result = message.result
        self.result = result
        self._stop_ticker()
        physical = self._target[0] if self._target else []
        self.verdict = Verdict(
            "-ok",
            done_text(self.node, physical, result.gpus, result.verification(), result.seconds, result.logical_gpus),
        )
        self._now.update(Text(modes_after(result.gpus, physical)))
        self.app.post_message(PartitionSwitched(self.node, result))
        timeline = getattr(self.app, "health_watch", None)  # the fleet's events.jsonl, when the app keeps one
        if timeline is not None:
            compute, memory = self._target[1:3] if self._target else (None, None)
            timeline.partition_switched(self.node, physical, compute, memory)
        restart = getattr(self.fleet, "restart_node", None)
        if restart is not None:
            # An app worker: the restart must not die with this dialog.
            run_named(self.app, restart(self.node), f"restart:{self.node}")
        self.new_gpus = new_logical_gpus(result.gpus, physical)
        self.offer = preset_for_mode(self.presets, switched_compute(result.gpus, physical))
        self.state = Phase.DONE
        if self.offer is not None and self.new_gpus:
            self._start.focus()
        else:
            self._close.focus()

    def on_partition_screen_switch_failed(self, message: SwitchFailed) -> None:
        self._stop_ticker()
        self.state = Phase.CHOOSE
        if message.kind == "refused":
            # The node changed since the preflight: show its reasons like a preflight.
            self.failure = message.reason
            self._set_preflight(Preflight(tuple(message.reasons)))
            return
        self.failure = failure_text(message.reason, message.kind)
        self.verdict = Verdict("-failed", f"✗ switch failed: {self.failure}")
        self.app.notify(
            self.failure, title=f"partition switch on {self.node} failed", severity="error", timeout=15, markup=False
        )
        self._target_changed()  # the modes may have changed half-way: check again
        self._compute.focus()

    # ------------------------------------------------------------ leaving

    def action_start_preset(self) -> None:
        if self.state != Phase.DONE or self.offer is None or not self.new_gpus:
            return
        self.app.post_message(StartPresetRequested(self.node, self.offer.name, (self.new_gpus[0],), self.new_gpus))
        self.dismiss(self.result)

    def action_close(self) -> None:
        if self.state == Phase.SWITCHING:
            self.app.notify(f"the switch is running on {self.node}: wait for it to finish", markup=False)
            return
        self.dismiss(self.result)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "partition-go":
            self.action_confirm()
        elif event.button.id == "partition-start":
            self.action_start_preset()
        elif event.button.id == "partition-end":
            self.action_end_processes()
        else:
            self.action_close()
