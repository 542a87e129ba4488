"""Start a serve preset on chosen GPUs: preset, GPUs, port, name, overrides, environment.

The form is checked here (console/ui/model/start_form.py); the serve rules by the
instance service, in a worker, while the dialog stays open: a refusal shows as
one line under the fields (and as a toast), so nothing typed is lost.
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Input, Select

from console.core.model import ServePreset
from console.core.text import one_line
from console.services.instances import InstanceError, InstanceView
from console.transport.base import TransportError
from console.ui.model import format as fmt
from console.ui.model.health_view import start_warnings
from console.ui.model.protocols import console_host
from console.ui.model.start_form import (
    FormError,
    StartRequest,
    default_preset,
    fit_text,
    free_gpus,
    gpus_text,
    override_tp,
    parse_gpus,
    parse_name,
    parse_pairs,
    parse_port,
    preset_prompt,
)
from console.ui.screens.form_dialog import FormDialog
from console.ui.workers import run_named

_PLACEHOLDERS = {
    "start-gpus": "e.g. 0,1 or 0-3 · blank: the first free ones",
    "start-port": "blank: the preset's, or the first free from 8000",
    "start-overrides": "max_model_len=4096 gpu_memory_utilization=0.9",
    "start-env": "VLLM_USE_TRITON_FLASH_ATTN=0 (HF_TOKEN comes from your environment)",
}


class StartDialog(FormDialog["InstanceView | None"]):
    PREFIX = "start"
    TITLE_TEXT = "Start a vLLM instance"
    SUBTITLE_TEXT = "Enter starts · Esc cancels"
    GO_LABEL = "Start"
    PREVIEW = True
    FIRST_FIELD = "#start-gpus"  # Enter in the GPUs field starts: mark GPUs, s, Enter. Shift+Tab reaches the preset.
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="cancel-start"),
        Binding("ctrl+s", "submit", "Start", id="submit-start"),
    ]

    class Refused(Message):
        def __init__(self, reason: str) -> None:
            super().__init__()
            self.reason = reason

    class Accepted(Message):
        def __init__(self, view: InstanceView, preset: str) -> None:
            super().__init__()
            self.view = view
            self.preset = preset

    def __init__(self, node: str, gpus: tuple[int, ...] = (), preset: str | None = None) -> None:
        super().__init__(id="start-dialog")
        self.node = node
        self.gpus = gpus
        self.preset_name = preset
        self.busy = False
        self.facts: dict[tuple[str, str], object] = {}  # (node, model) -> ModelFacts, or None while read

    # ------------------------------------------------------------ layout

    @property
    def presets(self) -> tuple[ServePreset, ...]:
        return console_host(self.app).profile.serve_presets

    def fields(self) -> Iterable[tuple[str, Widget]]:
        app = console_host(self.app)
        nodes = app.fleet.node_names
        snap = app.fleet.snapshot(self.node)
        modes = {g.compute_partition for g in snap.static if g.index in self.gpus}
        preset = self.preset_name or default_preset(
            self.presets,
            len(self.gpus or (1,)),
            app.last_preset,
            modes.pop() if len(modes) == 1 else None,
        )
        yield "Node", Select([(n, n) for n in nodes], value=self.node, allow_blank=False, id="start-node", compact=True)
        presets = [(Text(preset_prompt(p)), p.name) for p in self.presets]
        yield "Preset", Select(presets, value=preset, allow_blank=False, id="start-preset", compact=True)
        yield (
            "GPUs",
            Input(gpus_text(self.gpus), placeholder=_PLACEHOLDERS["start-gpus"], id="start-gpus", compact=True),
        )
        yield "Port", Input(placeholder=_PLACEHOLDERS["start-port"], id="start-port", compact=True)
        yield "Name", Input(placeholder=self._default_name(), id="start-name", compact=True)
        yield "Overrides", Input(placeholder=_PLACEHOLDERS["start-overrides"], id="start-overrides", compact=True)
        yield "Env", Input(placeholder=_PLACEHOLDERS["start-env"], id="start-env", compact=True)

    def form_mounted(self) -> None:
        self._refresh_preview()

    # ------------------------------------------------------------ reading the form

    def _preset(self) -> ServePreset | None:
        name = self.choice("start-preset")
        return next((p for p in self.presets if p.name == name), None)

    def _node(self) -> str:
        value = self.choice("start-node")
        return value if isinstance(value, str) else self.node

    def _known_gpus(self, node: str) -> list[int]:
        snap = console_host(self.app).fleet.snapshot(node)
        return [g.index for g in snap.static]

    def _busy(self, node: str) -> set[int]:
        """GPUs an instance holds, or any other process (the telemetry's process list)."""
        busy = set(console_host(self.app).board.busy_gpus(node))
        latest = console_host(self.app).fleet.snapshot(node).latest
        if latest is not None:
            busy |= {g.index for g in latest.gpus if g.processes}
        return busy

    def _default_name(self) -> str:
        return "blank: <preset>-g<GPUs>"

    def read_form(self) -> tuple[StartRequest, ServePreset]:
        """The request the fields describe, or FormError with one line."""
        preset = self._preset()
        if preset is None:
            raise FormError("preset: choose one")
        node = self._node()
        known = self._known_gpus(node)
        gpus = parse_gpus(self.typed("start-gpus"), known)
        overrides = parse_pairs(self.typed("start-overrides"), "overrides")
        env = parse_pairs(self.typed("start-env"), "env")
        port = parse_port(self.typed("start-port"))
        name = parse_name(self.typed("start-name"))
        if not gpus:
            tp = override_tp(preset, overrides)
            if not known:
                raise FormError(f"GPUs: {node} has not reported its GPUs yet: give them (e.g. 0)")
            busy = self._busy(node)
            chosen = free_gpus(known, busy, tp)
            if chosen is None:
                free = len([g for g in known if g not in busy])
                raise FormError(f"GPUs: TP {tp} needs {tp} free GPU{'s' if tp != 1 else ''}, {node} has {free}")
            gpus = chosen
        return StartRequest(node, preset.name, gpus, port, name, overrides, env), preset

    def _refresh_preview(self) -> None:
        """What will run where, and early warnings (the service has the last word)."""
        preset = self._preset()
        node = self._node()
        if preset is None:
            self.show_preview("")
            return
        try:
            tp = override_tp(preset, parse_pairs(self.typed("start-overrides"), "overrides"))
        except FormError:
            tp = preset.tp
        try:
            gpus = parse_gpus(self.typed("start-gpus"))
        except FormError:
            gpus = ()
        snap = console_host(self.app).fleet.snapshot(node)
        line = f"[b]{escape(preset.model)}[/b] · TP {tp} on {escape(node)}"
        if gpus:
            parts = sorted(
                {fmt.partition_text(g.compute_partition, g.memory_partition) for g in snap.static if g.index in gpus}
            )
            line += f" · GPU{'s' if len(gpus) > 1 else ''} {gpus_text(gpus)}"
            if parts:
                line += f" ({' '.join(parts)})"
        else:
            line += " · the first free GPUs"
        if console_host(self.app).fleet.spec(node).simulate is not None:
            line += " [dim]· simulated vLLM[/dim]"
        elif snap.probe is not None:
            line += f" [dim]· vLLM {escape(snap.probe.vllm or 'not found')} on the node[/dim]"
        warnings = []
        if gpus and len(gpus) != tp:
            warnings.append(f"TP {tp} needs {tp} GPU{'s' if tp != 1 else ''}, {len(gpus)} given")
        serving = console_host(self.app).board.busy_gpus(node)
        taken = [g for g in gpus if g in serving]
        if taken:
            warnings.append(f"GPU {gpus_text(taken)} already serve{'s' if len(taken) == 1 else ''} an instance")
        others = [g for g in gpus if g in self._busy(node) and g not in serving]
        if others:
            warnings.append(f"GPU {gpus_text(others)}: another process uses {'it' if len(others) == 1 else 'them'}")
        for warning in warnings:
            line += f"\n[$text-warning]⚠ {escape(warning)}[/]"
        for state, text in start_warnings(snap, gpus):
            line += f"\n[{'$text-error' if state == 'fail' else '$text-warning'}]{escape(text)}[/]"
        line += self._fit_line(node, preset, gpus, snap)
        self.show_preview(line)

    def _fit_line(self, node: str, preset: ServePreset, gpus, snap) -> str:
        """The fit on the chosen GPUs (services/models.py, as `serve plan`), once the node sent the
        model's config.json (read in a worker: the preview never waits for the node)."""
        key = (node, preset.model)
        if key not in self.facts:
            self.facts[key] = None
            run_named(self, self._read_facts(node, preset.model), f"start-fit-{node}", exclusive=False)
        facts = self.facts[key]
        try:
            overrides = parse_pairs(self.typed("start-overrides"), "overrides")
        except FormError:
            overrides = {}
        from console.core.models.config import ModelFacts

        fit = fit_text(facts if isinstance(facts, ModelFacts) else None, snap.static, gpus, preset, overrides)
        if fit is None:  # no config.json from the node (a model not pulled yet, no huggingface_hub): no line
            return ""
        state, text = fit
        colour = {"ok": "$text-success", "warn": "$text-warning", "fail": "$text-error"}[state]
        return f"\n[{colour}]{escape(text)}[/]"

    async def _read_facts(self, node: str, model: str) -> None:
        from console.services.models import ModelsError, model_facts

        app = console_host(self.app)
        try:
            pool = getattr(app.instances, "pool", None)
            if pool is None:
                return
            facts: object = await model_facts(pool, app.fleet.spec(node), model)
        except (ModelsError, TransportError, OSError) as exc:
            facts = one_line(exc)
        except Exception as exc:  # never a traceback in the dialog
            facts = f"{type(exc).__name__}: {one_line(exc)}"
        self.facts[(node, model)] = facts
        if self.is_mounted:
            self._refresh_preview()

    # ------------------------------------------------------------ events

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "start-node" and isinstance(event.value, str) and event.value != self.node:
            # Another node: the selected GPU numbers meant the first node's GPUs.
            self.node = event.value
            self.query_one("#start-gpus", Input).value = ""
        self.show_error("")
        self._refresh_preview()

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        if not self.busy:
            self.show_error("")
        self._refresh_preview()

    def submit(self) -> None:
        if self.busy:
            return
        try:
            request, preset = self.read_form()
        except FormError as exc:
            self.show_error(str(exc))
            return
        self.busy = True
        button = self.query_one("#start-go", Button)
        button.disabled = True
        button.label = "Starting…"
        self.show_error(f"starting {preset.name} on {request.node} GPU {gpus_text(request.gpus)}…", "busy")
        run_named(self, self._run_start(request, preset), "start-dialog", exclusive=True)

    async def _run_start(self, request: StartRequest, preset: ServePreset) -> None:
        app = console_host(self.app)
        try:
            view = await app.instances.start(
                app.fleet.spec(request.node),
                preset,
                gpus=request.gpus,
                snapshot=app.fleet.snapshot(request.node),
                port=request.port,
                name=request.name,
                overrides=request.overrides,
                extra_env=request.env,
            )
        except (InstanceError, TransportError) as exc:
            self.post_message(self.Refused(one_line(exc)))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.Refused(f"{request.node}: {type(exc).__name__}: {one_line(exc)}"))
        else:
            self._keep_prediction(request, preset, view)
            self.post_message(self.Accepted(view, preset.name))

    def _keep_prediction(self, request: StartRequest, preset: ServePreset, view: InstanceView) -> None:
        """The fit shown, kept beside what vLLM will log (as `serve start` does): from the facts
        already read for the preview, so the start waits for nothing."""
        from console.core.models.config import ModelFacts
        from console.services.models import record_prediction

        facts = self.facts.get((request.node, preset.model))
        if isinstance(facts, ModelFacts):
            app = console_host(self.app)
            env = {**dict(preset.env), **request.env}
            record_prediction(request.node, view, facts, app.fleet.snapshot(request.node), env)

    def on_start_dialog_refused(self, message: Refused) -> None:
        self.busy = False
        button = self.query_one("#start-go", Button)
        button.disabled = False
        button.label = "Start"
        self.show_error(message.reason)
        self.app.notify(message.reason, title="start refused", severity="error", timeout=10, markup=False)

    def on_start_dialog_accepted(self, message: Accepted) -> None:
        app = console_host(self.app)
        app.last_preset = message.preset
        app.follow_start(message.view)
        view = message.view
        self.app.notify(
            f"{view.name} on {view.node}: GPU {gpus_text(view.gpus)}, port {view.port}",
            title="vLLM starting",
            markup=False,
        )
        self.dismiss(view)
