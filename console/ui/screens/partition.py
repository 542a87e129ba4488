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
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
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

from console.core.model import NodeHealth, NodeSnapshot, ServePreset
from console.core.partition_rules import (
    COMPUTE_MODES,
    MEMORY_MODES,
    describe_change,
    parse_physical,
    physical_gpus,
)
from console.services.partitions import (
    PartitionFailed,
    PartitionRefused,
    PartitionService,
    SwitchResult,
)
from console.transport.base import TransportError
from console.ui.model.format import gpu_span

ROOT_HINT = "needs root on the node: set sudo = true for it in the profile (passwordless sudo), or log in as root"
CHECK_DELAY = 0.3  # seconds of quiet typing in the GPUs field before the preflight runs again
_KEEP = "unchanged"


# ---------------------------------------------------------------- messages for the app


class PartitionSwitched(Message):
    """A switch finished and the node verified the new modes (posted to the app)."""

    def __init__(self, node: str, result: SwitchResult) -> None:
        super().__init__()
        self.node = node
        self.result = result


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


# ---------------------------------------------------------------- pure helpers


def physical_of(snapshot: NodeSnapshot, logical: Iterable[int]) -> list[int]:
    """The physical GPUs that hold these logical GPUs (e.g. the GPUs marked in the fleet table)."""
    wanted = set(logical)
    return sorted({g.physical for g in snapshot.static if g.index in wanted})


def new_logical_gpus(result: SwitchResult, physical: Sequence[int]) -> tuple[int, ...]:
    """Logical GPU indices on the switched physical GPUs after the switch (amdsmi enumerates
    the logical GPUs of physical GPU 0 first, then of 1, ...)."""
    out: list[int] = []
    offset = 0
    for gpu in sorted(result.gpus, key=lambda g: g.get("physical", 0)):
        count = int(gpu.get("logical_gpus") or 0)
        if gpu.get("physical") in physical:
            out.extend(range(offset, offset + count))
        offset += count
    return tuple(out)


def preset_for_mode(presets: Sequence[ServePreset], mode: str | None) -> ServePreset | None:
    """The serve preset named for a partition mode (`llama-3.1-8b-fp8-cpx` for CPX), TP 1 first."""
    if not mode or mode.upper() == "SPX":
        return None
    tag = mode.lower()
    named = [p for p in presets if tag in p.name.lower().replace("_", "-").split("-")]
    named = named or [p for p in presets if tag in p.name.lower()]
    return next((p for p in named if p.tp == 1), named[0] if named else None)


def modes_now(snapshot: NodeSnapshot, physical: Sequence[int]) -> str:
    """'GPU 0-5 SPX/NPS1 · 1 logical each' lines, one per mode pair."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for p in physical_gpus(snapshot):
        if p.physical in physical:
            groups.setdefault((p.compute or "?", p.memory or "?", len(p.logical)), []).append(p.physical)
    lines = []
    for (compute, memory, n), phys in groups.items():
        lines.append(f"GPU {gpu_span(phys)}  {compute}/{memory} · {n} logical GPU{'s' if n != 1 else ''} each")
    return "\n".join(lines) or "-"


def modes_after(result: SwitchResult, physical: Sequence[int]) -> str:
    """modes_now's lines from a switch's verified result."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for g in result.gpus:
        if g.get("physical") in physical:
            key = (g.get("compute_partition") or "?", g.get("memory_partition") or "?", int(g.get("logical_gpus") or 0))
            groups.setdefault(key, []).append(int(g["physical"]))
    return (
        "\n".join(
            f"GPU {gpu_span(phys)}  {compute}/{memory} · {n} logical GPU{'s' if n != 1 else ''} each"
            for (compute, memory, n), phys in groups.items()
        )
        or "-"
    )


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


# ---------------------------------------------------------------- the second confirmation


class ReloadConfirm(ModalScreen[bool]):
    """A memory partition change reloads the amdgpu driver: ask once more (Cancel has the focus)."""

    DEFAULT_CSS = """
    ReloadConfirm { align: center middle; }
    #reload-box {
        width: 70; max-width: 100%; height: auto;
        border: round $error; border-title-style: bold; background: $surface; padding: 1 2;
    }
    #reload-question { height: auto; margin-bottom: 1; }
    #reload-buttons { height: auto; align-horizontal: right; }
    #reload-buttons Button { margin-left: 1; }
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Reload and switch", id="reload-yes"),
        Binding("n,escape", "answer(False)", "Cancel", id="reload-no"),
        Binding("left,right", "switch_button", "Switch button", show=False, id="reload-switch"),
    ]

    def __init__(self, node: str, change: str) -> None:
        super().__init__(id="partition-reload")
        self.node = node
        self.change = change

    def compose(self) -> ComposeResult:
        with Vertical(id="reload-box") as box:
            box.border_title = "Reload the amdgpu driver?"
            yield Static(
                Text(
                    f"{self.change}.\n\nA memory partition change reloads the amdgpu driver on {self.node}: "
                    "every process using a GPU there stops, and the switch can take minutes.\n"
                    "Reload the driver and switch?"
                ),
                id="reload-question",
            )
            with Horizontal(id="reload-buttons"):
                yield Button("Reload driver and switch (y)", variant="error", id="reload-yes")
                yield Button("Cancel (n)", id="reload-no")

    def on_mount(self) -> None:
        self.query_one("#reload-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "reload-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def action_switch_button(self) -> None:
        self.focus_next(Button)


# ---------------------------------------------------------------- the dialog


class PartitionScreen(ModalScreen["SwitchResult | None"]):
    """Dismisses with the SwitchResult after a switch, or None.

    fleet: the FleetTelemetry (snapshot, spec, pool, restart_node); physical: the
    physical GPUs (None = all of the node's); service: a PartitionService (default:
    one over the fleet's connections); presets: serve presets to offer after the
    switch (default: the app's profile's); compute / memory: the targets selected
    at first (None = unchanged).
    """

    DEFAULT_CSS = """
    PartitionScreen { align: center middle; }
    #partition-box {
        width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; border-title-style: bold; background: $surface; padding: 0 1;
    }
    #partition-fields {
        grid-size: 2; grid-columns: 9 1fr; grid-rows: auto; grid-gutter: 1 1;
        height: auto; margin: 1 0 0 0;
    }
    #partition-fields > Label { color: $text-muted; }
    #partition-gpus { background: $panel; width: 30; }
    #partition-gpus:focus { background: $primary 35%; }
    #partition-now { height: auto; }
    #partition-box RadioSet { layout: horizontal; height: auto; width: auto; }
    #partition-box RadioSet > RadioButton { width: auto; margin-right: 2; }
    #partition-change { height: auto; margin-top: 1; text-style: bold; }
    #partition-preflight { height: auto; min-height: 1; }
    #partition-preflight.-checking { color: $text-muted; }
    #partition-preflight.-ok { color: $text-success; }
    #partition-preflight.-refused { color: $text-error; }
    #partition-progress-row { height: auto; display: none; }
    #partition-progress-row.-on { display: block; }
    #partition-progress { width: 1fr; }
    #partition-progress > Bar { width: 1fr; }
    #partition-elapsed { height: auto; color: $text-warning; }
    #partition-result { height: auto; display: none; margin-top: 1; }
    #partition-result.-on { display: block; }
    #partition-result.-ok { color: $text-success; }
    #partition-result.-failed { color: $text-error; }
    #partition-offer { height: auto; display: none; }
    #partition-offer.-on { display: block; }
    #partition-buttons { height: auto; align-horizontal: right; margin-top: 1; }
    #partition-buttons Button { margin-left: 1; }
    #partition-start { display: none; }
    #partition-start.-on { display: block; }
    """

    BINDINGS = [
        Binding("escape", "close", "Cancel", id="partition-cancel"),
        Binding("ctrl+s", "confirm", "Switch", id="partition-go"),
        Binding("s", "start_preset", "Start preset", show=False, id="offer-preset"),
    ]

    # states
    CHOOSE, SWITCHING, DONE = "choose", "switching", "done"

    class Checked(Message):
        """A preflight finished (generation: which target it was for)."""

        def __init__(self, generation: int, reasons: list[str], summary: str | None, error: str | None = None) -> None:
            super().__init__()
            self.generation = generation
            self.reasons = reasons
            self.summary = summary
            self.error = error

    class SwitchDone(Message):
        def __init__(self, result: SwitchResult) -> None:
            super().__init__()
            self.result = result

    class SwitchFailed(Message):
        """kind: PartitionFailed.kind (no_perm, busy, invalid, unsupported, failed), or refused / transport."""

        def __init__(self, reason: str, kind: str = "failed", reasons: Sequence[str] = ()) -> None:
            super().__init__()
            self.reason = reason
            self.kind = kind
            self.reasons = list(reasons)

    def __init__(
        self,
        fleet: Any,
        node: str,
        physical: Sequence[int] | None = None,
        *,
        service: PartitionService | None = None,
        presets: Sequence[ServePreset] | None = None,
        compute: str | None = None,
        memory: str | None = None,
        clock: Callable[[], float] = time.monotonic,
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
        self.state = self.CHOOSE
        self.reasons: list[str] = []  # what refuses the current target (empty: go)
        self.checking = False
        self.result: SwitchResult | None = None
        self.failure: str | None = None
        self.offer: ServePreset | None = None
        self.new_gpus: tuple[int, ...] = ()
        self._generation = 0
        self._started = 0.0
        self._ticker: Timer | None = None
        self._debounce: Timer | None = None
        self._gpus_text: str | None = None
        self._target: tuple[list[int], str | None, str | None] | None = None

    @classmethod
    def for_selection(cls, fleet: Any, node: str, logical: Iterable[int] = (), **kwargs: Any) -> PartitionScreen:
        """The dialog for the physical GPUs behind the logical GPUs marked in the fleet table
        (none marked: every physical GPU of the node)."""
        physical = physical_of(fleet.snapshot(node), logical)
        return cls(fleet, node, physical or None, **kwargs)

    # ------------------------------------------------------------ layout

    @property
    def presets(self) -> tuple[ServePreset, ...]:
        if self._presets is not None:
            return self._presets
        profile = getattr(self.app, "profile", None)
        return tuple(getattr(profile, "serve_presets", ()) or ())

    def _snapshot(self) -> NodeSnapshot:
        return self.fleet.snapshot(self.node)

    def compose(self) -> ComposeResult:
        gpus = "all" if self.initial_physical is None else ",".join(map(str, self.initial_physical))
        with Vertical(id="partition-box") as box:
            box.border_title = f"Partition GPUs on {self.node}"
            box.border_subtitle = "ctrl+s switches · Esc cancels"
            with Grid(id="partition-fields"):
                yield Label("GPUs")
                yield Input(gpus, placeholder="all, or physical GPUs like 0,1", id="partition-gpus", compact=True)
                yield Label("Now")
                yield Static(id="partition-now")
                yield Label("Compute")
                with RadioSet(id="partition-compute", compact=True):
                    yield RadioButton(_KEEP, value=self.initial_compute is None, id="compute-keep")
                    for mode in COMPUTE_MODES:
                        yield RadioButton(mode, value=mode == self.initial_compute, id=f"compute-{mode.lower()}")
                yield Label("Memory")
                with RadioSet(id="partition-memory", compact=True):
                    yield RadioButton(_KEEP, value=self.initial_memory is None, id="memory-keep")
                    for mode in MEMORY_MODES:
                        yield RadioButton(mode, value=mode == self.initial_memory, id=f"memory-{mode.lower()}")
            yield Static(id="partition-change")
            yield Static(id="partition-preflight")
            with Vertical(id="partition-progress-row"):
                yield Static(id="partition-elapsed")
                yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="partition-progress")
            yield Static(id="partition-result")
            yield Static(id="partition-offer")
            with Horizontal(id="partition-buttons"):
                yield Button("Start preset", variant="success", id="partition-start")
                yield Button("Switch", variant="error", id="partition-go", disabled=True)
                yield Button("Cancel", id="partition-close")

    def on_mount(self) -> None:
        self.query_one("#partition-gpus", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        for radios in self.query(RadioSet):
            # RadioSet puts its keyboard cursor on the first button; start it on the pressed one.
            if radios.pressed_index >= 0:
                radios._selected = radios.pressed_index
        self.query_one("#partition-compute", RadioSet).focus()
        self._target_changed()

    # ------------------------------------------------------------ reading the form

    def _choice(self, set_id: str) -> str | None:
        pressed = self.query_one(f"#{set_id}", RadioSet).pressed_button
        if pressed is None or pressed.id in ("compute-keep", "memory-keep"):
            return None
        return str(pressed.label).upper()

    def read_target(self) -> tuple[list[int] | str, str | None, str | None]:
        """(physical GPUs, or a one-line reason why the field is wrong; compute; memory)."""
        available = [p.physical for p in physical_gpus(self._snapshot())]
        text = self.query_one("#partition-gpus", Input).value
        chosen = parse_physical(text or "all", available)
        if isinstance(chosen, str):
            chosen = chosen.replace("--gpus", "GPUs")
        return chosen, self._choice("partition-compute"), self._choice("partition-memory")

    def _local_reasons(
        self, snapshot: NodeSnapshot, physical: list[int] | str, compute: str | None, memory: str | None
    ) -> list[str]:
        """What the dialog can tell without asking the node."""
        if not snapshot.static:
            return [f"{self.node} has not reported its GPUs yet ({snapshot.health.value})"]
        if snapshot.health == NodeHealth.DOWN:
            return [f"{self.node} is down: {snapshot.error or 'unreachable'}"]
        if isinstance(physical, str):
            return [physical]
        if compute is None and memory is None:
            return ["choose a compute and/or a memory partition"]
        targets = [p for p in physical_gpus(snapshot) if p.physical in physical]
        if targets and all(
            (compute is None or p.compute == compute) and (memory is None or p.memory == memory) for p in targets
        ):
            now = sorted({f"{p.compute}/{p.memory}" for p in targets})
            verb = "is" if len(targets) == 1 else "are"
            return [f"nothing to change: GPU {gpu_span(physical)} {verb} already {', '.join(now)}"]
        return []

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
        self._mark_checking()
        self._debounce = self.set_timer(CHECK_DELAY, self._target_changed)

    @on(Input.Submitted, "#partition-gpus")
    def _gpus_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._debounce is not None:
            self._debounce.stop()
        self._target_changed()
        self.query_one("#partition-compute", RadioSet).focus()

    def _mark_checking(self) -> None:
        self._generation += 1
        self.checking = True
        self._update_go()

    def _target_changed(self) -> None:
        if self.state != self.CHOOSE:
            return
        self._debounce = None
        self._generation += 1
        generation = self._generation
        snapshot = self._snapshot()
        physical, compute, memory = self.read_target()
        self._gpus_text = self.query_one("#partition-gpus", Input).value
        self.query_one("#partition-now", Static).update(
            Text(
                modes_now(
                    snapshot, physical if isinstance(physical, list) else [p.physical for p in physical_gpus(snapshot)]
                )
            )
        )
        change = self.query_one("#partition-change", Static)
        if isinstance(physical, list) and snapshot.static and (compute or memory):
            change.update(Text(describe_change(snapshot, physical, compute, memory)))
        else:
            change.update("")
        local = self._local_reasons(snapshot, physical, compute, memory)
        if local:
            self._target = None
            self._show_preflight(local, checking=False)
            return
        assert isinstance(physical, list)
        self._target = (physical, compute, memory)
        self._show_preflight([], checking=True)
        self.run_worker(
            self._run_check(generation, snapshot, physical, compute, memory),
            name="partition-check",
            group="partition-check",
            exclusive=True,
            exit_on_error=False,
        )

    async def _run_check(
        self, generation: int, snapshot: NodeSnapshot, physical: list[int], compute: str | None, memory: str | None
    ) -> None:
        try:
            reasons, summary = await self.service.check(
                self.fleet.spec(self.node), snapshot, physical, compute=compute, memory=memory
            )
        except Exception as exc:  # a node that cannot be asked: say so, never a traceback
            self.post_message(self.Checked(generation, [], None, f"preflight could not run: {_one_line(exc)}"))
        else:
            self.post_message(self.Checked(generation, list(reasons), summary))

    def on_partition_screen_checked(self, message: Checked) -> None:
        if message.generation != self._generation or self.state != self.CHOOSE:
            return  # the target changed since: a newer check is on its way
        if message.summary:
            self.query_one("#partition-change", Static).update(Text(message.summary))
        if message.error:
            self._show_preflight([message.error], checking=False)
        else:
            self._show_preflight(message.reasons, checking=False)

    def _show_preflight(self, reasons: list[str], *, checking: bool) -> None:
        self.reasons = list(reasons)
        self.checking = checking
        box = self.query_one("#partition-preflight", Static)
        if checking:
            box.update(Text("preflight: checking processes, instances, modes and root on the node…"))
        elif reasons:
            box.update(Text("\n".join(f"✗ {r}" for r in reasons)))
        else:
            memory = self._target[2] if self._target else None
            what = "no process or instance on these GPUs, the modes fit, root is available"
            if memory:
                what += "; Switch asks once more before the driver reload"
            box.update(Text(f"✓ preflight passed: {what}"))
        box.set_class(checking, "-checking")
        box.set_class(not checking and not reasons, "-ok")
        box.set_class(not checking and bool(reasons), "-refused")
        self._update_go()

    @property
    def can_switch(self) -> bool:
        return self.state == self.CHOOSE and not self.checking and not self.reasons and self._target is not None

    def _update_go(self) -> None:
        self.query_one("#partition-go", Button).disabled = not self.can_switch

    # ------------------------------------------------------------ the switch

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return self.can_switch
        if action == "start_preset":
            return self.state == self.DONE and self.offer is not None
        return True

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
        self.state = self.SWITCHING
        self.failure = None
        self._started = self.clock()
        for widget in (*self.query(RadioSet), self.query_one("#partition-gpus", Input)):
            widget.disabled = True
        self.query_one("#partition-go", Button).disabled = True
        self.query_one("#partition-close", Button).disabled = True
        result = self.query_one("#partition-result", Static)
        result.remove_class("-on", "-ok", "-failed")
        self.query_one("#partition-progress-row").add_class("-on")
        self.query_one("#partition-preflight", Static).display = False
        self.query_one("#partition-box").border_subtitle = "switching: the dialog stays until the node answers"
        target = "/".join(m for m in (compute, memory) if m)
        self._switch_text = f"switching {self.node} GPU {gpu_span(physical)} to {target}"
        self._show_elapsed()
        self._ticker = self.set_interval(0.5, self._show_elapsed)
        self.run_worker(
            self._run_switch(self._snapshot(), physical, compute, memory, reload_confirmed),
            name="partition-switch",
            group="partition-switch",
            exclusive=True,
            exit_on_error=False,
        )

    def _show_elapsed(self) -> None:
        seconds = max(0.0, self.clock() - self._started)
        self.query_one("#partition-elapsed", Static).update(
            Text(f"{self._switch_text}… {seconds:.0f} s (then the GPUs are re-enumerated and verified)")
        )

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
            )
        except PartitionRefused as exc:
            self.post_message(self.SwitchFailed("refused: " + "; ".join(exc.reasons), "refused", exc.reasons))
        except PartitionFailed as exc:
            self.post_message(self.SwitchFailed(_one_line(exc), exc.kind))
        except TransportError as exc:  # the link dropped, a timeout
            self.post_message(self.SwitchFailed(_one_line(exc), "transport"))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.SwitchFailed(f"{type(exc).__name__}: {_one_line(exc)}"))
        else:
            self.post_message(self.SwitchDone(result))

    def _stop_progress(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self.query_one("#partition-progress-row").remove_class("-on")

    def on_partition_screen_switch_done(self, message: SwitchDone) -> None:
        result = message.result
        self.result = result
        self.state = self.DONE
        self._stop_progress()
        physical = self._target[0] if self._target else []
        chosen = [g for g in result.gpus if g.get("physical") in physical]
        modes = sorted({f"{g.get('compute_partition') or '?'}/{g.get('memory_partition') or '?'}" for g in chosen})
        box = self.query_one("#partition-result", Static)
        box.update(
            Text(
                f"✓ {self.node}: GPU {gpu_span(physical)} now {', '.join(modes) or '?'} ({result.verification()}, "
                f"{result.seconds:.1f} s): {result.logical_gpus} logical GPUs on the node.\n"
                "The table shows the new rows as soon as the node's telemetry reconnects."
            )
        )
        box.set_class(True, "-on", "-ok")
        self.query_one("#partition-now", Static).update(Text(modes_after(result, physical)))
        self.query_one("#partition-preflight", Static).display = False
        self.query_one("#partition-box").border_subtitle = "Esc closes"
        self.app.post_message(PartitionSwitched(self.node, result))
        restart = getattr(self.fleet, "restart_node", None)
        if restart is not None:
            # An app worker: the restart must not die with this dialog.
            self.app.run_worker(
                restart(self.node), name=f"restart:{self.node}", group=f"restart:{self.node}", exit_on_error=False
            )
        self.new_gpus = new_logical_gpus(result, physical)
        new_modes = {g.get("compute_partition") for g in chosen}
        self.offer = preset_for_mode(self.presets, new_modes.pop() if len(new_modes) == 1 else None)
        close = self.query_one("#partition-close", Button)
        close.disabled = False
        close.label = "Close"
        self.query_one("#partition-go", Button).display = False
        if self.offer is not None and self.new_gpus:
            p = self.offer
            offer = self.query_one("#partition-offer", Static)
            offer.update(
                Text(
                    f"Serve on the new logical GPUs {gpu_span(self.new_gpus)}? {p.name}: {p.model}, "
                    f"TP {p.tp} (one instance per logical GPU; s opens the start dialog on GPU "
                    f"{self.new_gpus[0]})"
                )
            )
            offer.add_class("-on")
            start = self.query_one("#partition-start", Button)
            start.add_class("-on")
            start.focus()
            self.query_one("#partition-box").border_subtitle = "s starts the preset · Esc closes"
        else:
            close.focus()
        self.refresh_bindings()

    def on_partition_screen_switch_failed(self, message: SwitchFailed) -> None:
        self._stop_progress()
        self.state = self.CHOOSE
        self.query_one("#partition-box").border_subtitle = "ctrl+s switches · Esc cancels"
        self.query_one("#partition-preflight", Static).display = True
        for widget in (*self.query(RadioSet), self.query_one("#partition-gpus", Input)):
            widget.disabled = False
        self.query_one("#partition-close", Button).disabled = False
        if message.kind == "refused":
            # The node changed since the preflight: show its reasons like a preflight.
            self.failure = message.reason
            self._show_preflight(message.reasons, checking=False)
            return
        reason = message.reason
        if message.kind == "no_perm" and "sudo" not in reason:
            reason += f" ({ROOT_HINT})"
        elif message.kind == "no_perm":
            reason += " (set sudo = true for the node in the profile, with passwordless sudo, or log in as root)"
        self.failure = reason
        box = self.query_one("#partition-result", Static)
        box.update(Text(f"✗ switch failed: {reason}"))
        box.set_class(True, "-on", "-failed")
        box.remove_class("-ok")
        self.app.notify(
            reason, title=f"partition switch on {self.node} failed", severity="error", timeout=15, markup=False
        )
        self._target_changed()  # the modes may have changed half-way: check again
        self.query_one("#partition-compute", RadioSet).focus()

    # ------------------------------------------------------------ leaving

    def action_start_preset(self) -> None:
        if self.state != self.DONE or self.offer is None or not self.new_gpus:
            return
        self.app.post_message(StartPresetRequested(self.node, self.offer.name, (self.new_gpus[0],), self.new_gpus))
        self.dismiss(self.result)

    def action_close(self) -> None:
        if self.state == self.SWITCHING:
            self.app.notify(f"the switch is running on {self.node}: wait for it to finish", markup=False)
            return
        self.dismiss(self.result)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "partition-go":
            self.action_confirm()
        elif event.button.id == "partition-start":
            self.action_start_preset()
        else:
            self.action_close()
