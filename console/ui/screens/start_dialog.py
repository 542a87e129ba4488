"""Start a serve preset on chosen GPUs: preset, GPUs, TP, replicas, port, name, overrides,
environment; a replica group or a multi-node instance too (what `serve start` can start).

The form is checked here (console/ui/model/start_form.py); the serve rules by the
services `serve start` uses (one instance: InstanceService; `--replicas`:
GroupService.launch; `--nodes`: MultiNodeService), in a worker, while the dialog stays
open: a refusal shows as one line under the fields (and as a toast), so nothing typed
is lost. The models each node holds (`models list`) are read in a worker: the presets
whose model is on the chosen node come first.

Enter moves between fields; ctrl+s (or the Start button) starts. Replicas, overrides and
environment are remembered per preset and node (form_dialog: MEMORY); the GPUs come from
the marks, and a port and a name belong to one instance, so those are not.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Horizontal
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select, SelectionList

from console.core.model import NodeSpec, ServePreset
from console.core.multinode import is_multinode
from console.core.text import one_line
from console.services.instances import InstanceError, InstanceState, InstanceView
from console.transport.base import TransportError
from console.ui.model import format as fmt
from console.ui.model.health_view import start_warnings
from console.ui.model.protocols import console_host
from console.ui.model.start_form import (
    FormError,
    ReplicaAsk,
    StartRequest,
    default_preset,
    default_tp,
    fit_text,
    free_gpus,
    gpus_text,
    model_mark,
    parse_gpus,
    parse_name,
    parse_pairs,
    parse_port,
    parse_replicas_field,
    preset_prompt,
    refuse_tp_override,
    tp_choices,
)
from console.ui.screens.form_dialog import FORM_CSS, FormDialog
from console.ui.workers import run_named

_PLACEHOLDERS = {
    "start-gpus": "e.g. 0,1 or 0-3 · blank: the first free ones",
    "start-port": "blank: the preset's, or the first free from 8000",
    "start-overrides": "e.g. max_model_len=4096 gpu_memory_utilization=0.9",
    # an example valid on every vLLM (the old VLLM_USE_TRITON_FLASH_ATTN=0 warns on 0.32)
    "start-env": "KEY=VALUE like HF_HOME=/data/hf (HF_TOKEN comes from your environment)",
    "start-replicas": "blank: one · 4 · per GPU · 2 per GPU",
}


MODELS_FRESH_S = 120.0  # another node's `models list` answer is reused this long (sizes only)
MODELS_OTHER_NODES = 8  # at most this many other nodes are asked per dialog (a big fleet)
# The answers of the last dialogs, per app: a dialog opened again does not ask every node again.
_MODELS_SEEN: weakref.WeakKeyDictionary[object, dict[str, tuple[float, object]]] = weakref.WeakKeyDictionary()


def _models_seen(app: object) -> dict[str, tuple[float, object]]:
    return _MODELS_SEEN.setdefault(app, {})


class StartDialog(FormDialog["InstanceView | None"]):
    PREFIX = "start"
    CSS_PATH = [FORM_CSS, Path(__file__).with_name("start_dialog.tcss")]
    TITLE_TEXT = "Start a vLLM instance"
    GO_LABEL = "Start"
    PREVIEW = True
    FIRST_FIELD = "#start-gpus"  # mark GPUs, s, ctrl+s. Shift+Tab reaches the preset.
    MEMORY = "start"
    MEMORY_FIELDS = ("start-replicas", "start-overrides", "start-env")
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

    class GroupAccepted(Message):
        """A replica group the nodes took: the replicas started (and those that could not)."""

        def __init__(self, group: str, views: Sequence[InstanceView], preset: str) -> None:
            super().__init__()
            self.group = group
            self.views = tuple(views)
            self.preset = preset

    class Progressed(Message):
        """A step of a start under way (a multi-node start's stages, a group's replicas)."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    class ModelsRead(Message):
        """A node's `models list` answer (NodeModels) or why there is none (str)."""

        def __init__(self, node: str, found: object) -> None:
            super().__init__()
            self.node = node
            self.found = found

    class FactsRead(Message):
        def __init__(self, node: str, model: str, facts: object) -> None:
            super().__init__()
            self.node = node
            self.model = model
            self.facts = facts

    def __init__(self, node: str, gpus: tuple[int, ...] = (), preset: str | None = None) -> None:
        super().__init__(id="start-dialog")
        self.node = node
        self.gpus = gpus
        self.preset_name = preset
        self.busy = False
        self.facts: dict[tuple[str, str], object] = {}  # (node, model) -> ModelFacts, or None while read
        self.models: dict[str, object] = {}  # node -> NodeModels (models list), or why not (str)
        self._tp_for: tuple | None = None  # what the TP options were made for
        self._shown_preset: str | None = None  # the preset the TP field was last set for
        self._tp_picked = False  # the person chose the TP (else it follows the preset and the GPUs)
        self._tp_offered: tuple[int, ...] = ()
        self._options_for: tuple | None = None  # what the preset list's order was made from

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
        found = next((p for p in self.presets if p.name == preset), None)
        tp = found.tp if found else 1
        yield (
            "TP",
            Horizontal(
                Select([(str(tp), tp)], value=tp, allow_blank=False, id="start-tp", compact=True),
                Label("Replicas"),
                Input(placeholder=_PLACEHOLDERS["start-replicas"], id="start-replicas", compact=True),
                id="start-tp-row",
            ),
        )
        yield "Port", Input(placeholder=_PLACEHOLDERS["start-port"], id="start-port", compact=True)
        yield "Name", Input(placeholder=self._default_name(), id="start-name", compact=True)
        yield "Overrides", Input(placeholder=_PLACEHOLDERS["start-overrides"], id="start-overrides", compact=True)
        yield "Env", Input(placeholder=_PLACEHOLDERS["start-env"], id="start-env", compact=True)

    def form_mounted(self) -> None:
        # The nodes of a multi-node instance or a group: a list under the fields, shown when it applies.
        names = console_host(self.app).fleet.node_names
        preset = self._preset()
        wanted = set(preset.nodes) if preset is not None and preset.nodes else {self.node}
        row = Horizontal(
            Label("Nodes"),
            SelectionList[str](*[(n, n, n in wanted) for n in names], id="start-nodes", compact=True),
            id="start-nodes-row",
        )
        row.display = False
        self.query_one("#start-box").mount(row, after="#start-fields")
        self._read_models_soon()
        self._refresh_preview()

    # ------------------------------------------------------------ reading the form

    def _preset(self) -> ServePreset | None:
        name = self.choice("start-preset")
        return next((p for p in self.presets if p.name == name), None)

    def _node(self) -> str:
        value = self.choice("start-node")
        return value if isinstance(value, str) else self.node

    def _tp(self, preset: ServePreset) -> int:
        value = self.choice("start-tp")
        return value if isinstance(value, int) else preset.tp

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
        return "blank: <preset>-g<GPUs> · a group's: <preset>-xN"

    def _replicas(self) -> ReplicaAsk | None:
        try:
            return parse_replicas_field(self.typed("start-replicas"))
        except FormError:
            return None

    def _chosen_nodes(self) -> list[str]:
        """The node first (the head of a multi-node instance), then the others ticked, in fleet order."""
        node = self._node()
        try:
            ticked = set(self.query_one("#start-nodes", SelectionList).selected)
        except Exception:  # before the list is mounted
            ticked = set()
        return [node] + [n for n in console_host(self.app).fleet.node_names if n in ticked and n != node]

    def _multinode(self, preset: ServePreset, replicas: ReplicaAsk | None) -> bool:
        """One instance over several nodes: the preset spans nodes, or more nodes are ticked
        without replicas (as `serve start --nodes a,b`)."""
        return replicas is None and (is_multinode(preset) or len(self._chosen_nodes()) > 1)

    def read_form(self) -> tuple[StartRequest, ServePreset]:
        """The request the fields describe, or FormError with one line."""
        preset = self._preset()
        if preset is None:
            raise FormError("preset: choose one")
        node = self._node()
        known = self._known_gpus(node)
        gpus = parse_gpus(self.typed("start-gpus"), known)
        overrides = parse_pairs(self.typed("start-overrides"), "overrides")
        refuse_tp_override(overrides)
        env = parse_pairs(self.typed("start-env"), "env")
        port = parse_port(self.typed("start-port"))
        replicas = parse_replicas_field(self.typed("start-replicas"))
        name = self.typed("start-name").strip() or None
        if replicas is None:
            name = parse_name(self.typed("start-name"))  # a group's name is checked by the group's planner
        tp = self._tp(preset)
        nodes = tuple(self._chosen_nodes())
        if self._multinode(preset, replicas):
            if gpus:
                raise FormError("GPUs: a multi-node instance takes the GPUs of each node: leave GPUs blank")
            if len(nodes) < 2:
                raise FormError(f"nodes: preset {preset.name} spans several nodes: tick 2 or more in Nodes")
            return StartRequest(node, preset.name, (), port, name, overrides, env, tp=tp, nodes=nodes), preset
        if replicas is not None:
            return (
                StartRequest(
                    node, preset.name, gpus, port, name, overrides, env, tp=tp, replicas=replicas, nodes=nodes
                ),
                preset,
            )
        if gpus and len(gpus) > tp:
            raise FormError(
                f"TP: one instance of TP {tp} runs on {tp} GPU{'s' if tp != 1 else ''}, {len(gpus)} are given: "
                f"set Replicas to {len(gpus) // tp} (or per GPU), or TP to {len(gpus)}"
            )
        if not gpus:
            if not known:
                raise FormError(f"GPUs: {node} has not reported its GPUs yet: give them (e.g. 0)")
            busy = self._busy(node)
            chosen = free_gpus(known, busy, tp)
            if chosen is None:
                free = len([g for g in known if g not in busy])
                raise FormError(f"GPUs: TP {tp} needs {tp} free GPU{'s' if tp != 1 else ''}, {node} has {free}")
            gpus = chosen
        return StartRequest(node, preset.name, gpus, port, name, overrides, env, tp=tp), preset

    # ------------------------------------------------------------ the TP field

    def _sync_tp(self, preset: ServePreset, node: str, gpus: Sequence[int]) -> None:
        """Offer the TP sizes the chosen GPUs (else the node's free ones) and the model's heads allow;
        a new preset starts from its own TP when allowed."""
        snap = console_host(self.app).fleet.snapshot(node)
        known = [g.index for g in snap.static]
        multinode = self._multinode(preset, self._replicas())
        if gpus:
            count = len(gpus)
        elif multinode:
            count = len(known)
        else:
            count = len([g for g in known if g not in self._busy(node)]) or len(known)
        on = set(gpus) if gpus else set(known)
        cpx = any(g.compute_partition == "CPX" for g in snap.static if g.index in on)
        facts = self.facts.get((node, preset.model))
        heads = (
            getattr(facts, "num_attention_heads", None) if facts is not None and not isinstance(facts, str) else None
        )
        choices = tp_choices(max(count, 1), heads=heads, cpx=cpx)
        key = (choices, preset.name)
        if key == self._tp_for:
            return
        self._tp_for = key
        select = self.query_one("#start-tp", Select)
        current = select.value
        if preset.name != self._shown_preset:
            self._tp_picked = False  # another preset: its own TP again
        if self._tp_picked and current in choices:
            wanted = current  # what the person chose stays while it is allowed
        elif multinode and preset.tp not in choices:
            wanted = preset.tp  # a multi-node preset on a node that has not reported its GPUs yet
            choices = tuple(sorted({*choices, wanted}))
        else:
            wanted = default_tp(preset.tp, choices, count)
        self._shown_preset = preset.name
        self._tp_offered = choices
        with select.prevent(Select.Changed):
            select.set_options([(str(t), t) for t in choices])
            select.value = wanted

    # ------------------------------------------------------------ the preview

    def _refresh_preview(self) -> None:
        """What will run where, and early warnings (the service has the last word)."""
        preset = self._preset()
        node = self._node()
        if preset is None:
            self.show_preview("")
            return
        try:
            gpus = parse_gpus(self.typed("start-gpus"))
        except FormError:
            gpus = ()
        replicas = self._replicas()
        multinode = self._multinode(preset, replicas)
        self._show_nodes(multinode or (replicas is not None))
        self._sync_tp(preset, node, gpus)
        tp = self._tp(preset)
        snap = console_host(self.app).fleet.snapshot(node)
        line = f"[b]{escape(preset.model)}[/b] · TP {tp}"
        if multinode:
            nodes = self._chosen_nodes()
            line += f" × PP {preset.pp}" + (f" × DP {preset.dp}" if preset.dp > 1 else "")
            line += f" on {escape(', '.join(nodes))} (head {escape(node)})"
        else:
            line += f" on {escape(node)}"
            if gpus:
                parts = sorted(
                    {
                        fmt.partition_text(g.compute_partition, g.memory_partition)
                        for g in snap.static
                        if g.index in gpus
                    }
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
        if replicas is not None:
            more = [n for n in self._chosen_nodes() if n != node]
            line += f"\nreplica group ({escape(replicas.cli())}): replicas of TP {tp}" + (
                f" over {escape(', '.join([node, *more]))}" if more else ""
            )
        warnings = []
        if preset.tp != tp and preset.tp not in self._tp_offered:
            chosen = f"the {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} given" if gpus else "this node"
            allow = "allows" if len(gpus) == 1 or not gpus else "allow"
            warnings.append(f"preset {preset.name} is TP {preset.tp}; {chosen} {allow} TP {_sizes(self._tp_offered)}")
        if multinode and len(self._chosen_nodes()) < 2:
            warnings.append(f"preset {preset.name} spans several nodes: tick 2 or more in Nodes")
        elif replicas is None and not multinode and gpus and len(gpus) != tp:
            warnings.append(
                f"TP {tp} needs {tp} GPU{'s' if tp != 1 else ''}, {len(gpus)} given"
                + (f": set Replicas to {len(gpus) // tp}" if len(gpus) > tp else "")
            )
        if replicas is not None and replicas.per_gpu > 1:
            why = _packing_hint(replicas.per_gpu, preset, self._overrides(), console_host(self.app).fleet.spec(node))
            if why:
                warnings.append(why)
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
        missing = self._model_line(node, preset)
        if missing:
            line += f"\n[$text-warning]{escape(missing)}[/]"
        if gpus:
            fit_on: Sequence[int] = gpus[:tp]
        else:  # the GPUs a start would pick
            fit_on = free_gpus([g.index for g in snap.static], self._busy(node), tp) or ()
        line += self._fit_line(node, preset, fit_on, snap)
        self.show_preview(line)

    def _overrides(self) -> dict[str, str]:
        try:
            return parse_pairs(self.typed("start-overrides"), "overrides")
        except FormError:
            return {}

    def _show_nodes(self, shown: bool) -> None:
        try:
            row = self.query_one("#start-nodes-row")
        except Exception:  # before form_mounted
            return
        shown = shown and len(console_host(self.app).fleet.node_names) > 1
        if row.display != shown:
            row.display = shown

    def _fit_line(self, node: str, preset: ServePreset, gpus, snap) -> str:
        """The fit on the chosen GPUs (services/models.py, as `serve plan`), once the node sent the
        model's config.json (read in a worker: the preview never waits for the node)."""
        key = (node, preset.model)
        if key not in self.facts:
            self.facts[key] = None
            run_named(self, self._read_facts(node, preset.model), f"start-fit-{node}", exclusive=False)
        facts = self.facts[key]
        from console.core.models.config import ModelFacts

        fit = fit_text(facts if isinstance(facts, ModelFacts) else None, snap.static, gpus, preset, self._overrides())
        if fit is None:  # no config.json from the node (a model not pulled yet, no huggingface_hub): no line
            return ""
        state, text = fit
        colour = {"ok": "$text-success", "warn": "$text-warning", "fail": "$text-error"}[state]
        return f"\n[{colour}]{escape(text)}[/]"

    async def _read_facts(self, node: str, model: str) -> None:
        from console.services.models import ModelsError, model_facts

        app = console_host(self.app)
        try:
            facts: object = await model_facts(app.fleet.pool, app.fleet.spec(node), model)
        except (ModelsError, TransportError, OSError) as exc:
            facts = one_line(exc)
        except Exception as exc:  # never a traceback in the dialog
            facts = f"{type(exc).__name__}: {one_line(exc)}"
        self.post_message(self.FactsRead(node, model, facts))

    def on_start_dialog_facts_read(self, message: FactsRead) -> None:
        self.facts[(message.node, message.model)] = message.facts
        self._refresh_preview()

    # ------------------------------------------------------------ the models on the nodes

    def _read_models_soon(self) -> None:
        """`models list` of the chosen node first, then of a few others (their sizes mark the
        models the chosen node lacks; answers younger than MODELS_FRESH_S are reused), in a
        worker: the dialog never waits for a node."""
        node = self._node()
        seen = _models_seen(self.app)
        now = time.monotonic()
        for name, (when, found) in seen.items():
            if now - when < MODELS_FRESH_S:
                self.models.setdefault(name, found)
        others = [n for n in console_host(self.app).fleet.node_names if n != node and n not in self.models]
        run_named(self, self._read_models([node, *others[:MODELS_OTHER_NODES]]), "start-models", exclusive=True)

    async def _read_models(self, names: Sequence[str]) -> None:
        from console.services.models import ModelsError, node_models

        app = console_host(self.app)
        for name in names:
            try:
                found: object = await node_models(app.fleet.pool, app.fleet.spec(name), app.board.views(name))
            except (ModelsError, TransportError, OSError) as exc:
                found = one_line(exc)
            except Exception as exc:  # never a traceback in the dialog
                found = f"{type(exc).__name__}: {one_line(exc)}"
            self.post_message(self.ModelsRead(name, found))

    def on_start_dialog_models_read(self, message: ModelsRead) -> None:
        self.models[message.node] = message.found
        _models_seen(self.app)[message.node] = (time.monotonic(), message.found)
        self._order_presets()
        self._refresh_preview()

    def _sizes(self) -> dict[str, int]:
        """Model -> its size on any node that holds it (complete copies first)."""
        sizes: dict[str, int] = {}
        for found in self.models.values():
            for m in getattr(found, "models", ()):
                if m.size_bytes and (m.complete or m.name not in sizes):
                    sizes[m.name] = m.size_bytes
        return sizes

    def _on_node(self, node: str) -> Mapping[str, bool] | None:
        """Model name or path -> complete, for the models the node holds; None while unknown."""
        found = self.models.get(node)
        if found is None or isinstance(found, str):
            return None
        out: dict[str, bool] = {}
        for m in getattr(found, "models", ()):
            out[m.name] = out.get(m.name, False) or m.complete
            out[m.path] = out.get(m.path, False) or m.complete
        return out

    def _order_presets(self) -> None:
        """The presets whose model is on the chosen node first; the others marked with their size."""
        node = self._node()
        held = self._on_node(node)
        if held is None:
            return
        sizes = self._sizes()
        key = (node, tuple(sorted(held.items())), tuple(sorted(sizes.items())))
        if key == self._options_for:
            return
        self._options_for = key
        ordered = sorted(self.presets, key=lambda p: not held.get(p.model, False))
        options = []
        for p in ordered:
            label = Text(preset_prompt(p))
            label.append(model_mark(p.model, held, sizes), style="dim")
            options.append((label, p.name))
        select = self.query_one("#start-preset", Select)
        value = select.value
        with select.prevent(Select.Changed):
            select.set_options(options)
            select.value = value

    def _model_line(self, node: str, preset: ServePreset) -> str | None:
        held = self._on_node(node)
        if held is None or held.get(preset.model):
            return None
        size = self._sizes().get(preset.model)
        from console.ui.model.start_form import size_text

        where = f" ({size_text(size)})" if size else ""
        if preset.model in held:
            return f"⚠ {preset.model}{where} is only partly on {node}: vLLM will fetch the rest at start"
        return f"⚠ {preset.model}{where} is not on {node}: vLLM will download it at start"

    # ------------------------------------------------------------ events

    def memory_key(self) -> tuple[str, str] | None:
        preset = self._preset()
        return (preset.name, self._node()) if preset is not None else None

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "start-tp":
            self._tp_picked = True
        elif event.select.id in ("start-node", "start-preset"):
            self.recall_values()  # what this preset was last started with on this node
        if event.select.id == "start-node" and isinstance(event.value, str) and event.value != self.node:
            # Another node: the selected GPU numbers meant the first node's GPUs.
            old, self.node = self.node, event.value
            self.query_one("#start-gpus", Input).value = ""
            nodes = self.query_one("#start-nodes", SelectionList)
            with nodes.prevent(SelectionList.SelectedChanged):
                nodes.deselect(old)  # it was ticked as the head; another node heads now
                nodes.select(event.value)
            self._options_for = None
            self._order_presets()
            self._read_models_soon()
        self.show_error("")
        self._refresh_preview()

    @on(SelectionList.SelectedChanged)
    def _nodes_changed(self, _: SelectionList.SelectedChanged) -> None:
        if not self.busy:
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
        if request.tp is not None and request.tp != preset.tp:
            preset = replace(preset, tp=request.tp)  # the TP field, as `serve start --set tp=N`
        if request.replicas is not None:
            self.show_error(f"planning {request.replicas.cli()} of {preset.name}…", "busy")
            run_named(self, self._run_group(request, preset), "start-dialog", exclusive=True)
        elif len(request.nodes) > 1 or is_multinode(preset):
            self.show_error(f"starting {preset.name} on {', '.join(request.nodes)}…", "busy")
            run_named(self, self._run_multinode(request, preset), "start-dialog", exclusive=True)
        else:
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

    def _instance_service(self, node: str):
        """The instance service the CLI's starts use, over the console's connections; None for a
        console whose instances are recorded (nothing can start there)."""
        return getattr(console_host(self.app).instances, "service", None)

    async def _run_group(self, request: StartRequest, preset: ServePreset) -> None:
        """`serve start --replicas N [--per-gpu K]`: GroupService.launch, as the CLI calls it."""
        from console.core.replicas import DEFAULT_BASE_PORT
        from console.services.groups import GroupService

        app = console_host(self.app)
        service = self._instance_service(request.node)
        if service is None:
            self.post_message(self.Refused(f"{request.node}: recorded node: instances cannot be started here"))
            return
        ask = request.replicas
        assert ask is not None  # submit() sends only groups here
        nodes = [app.fleet.spec(n) for n in request.nodes]

        def planned(plan) -> None:
            self.post_message(self.Progressed(f"group {plan.group}: {len(plan.replicas)} replicas of TP {plan.tp}"))

        try:
            group = await GroupService(app.fleet.pool, service).launch(
                nodes,
                preset,
                ask.replicas,
                snapshots={n.name: app.fleet.snapshot(n.name) for n in nodes},
                tp=preset.tp,
                gpus=list(request.gpus) or None,
                group=request.name,
                base_port=request.port or preset.port or DEFAULT_BASE_PORT,
                overrides=request.overrides,
                extra_env=request.env,
                per_gpu=ask.per_gpu,
                on_planned=planned,
            )
        except (InstanceError, TransportError) as exc:
            self.post_message(self.Refused(one_line(exc)))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.Refused(f"{request.node}: {type(exc).__name__}: {one_line(exc)}"))
        else:
            if group.replicas and len(group.failed) == len(group.replicas):
                first = group.failed[0]
                self.post_message(
                    self.Refused(f"group {group.name}: {first.name}: {one_line(first.reason or 'failed')}")
                )
            else:
                self.post_message(self.GroupAccepted(group.name, group.replicas, preset.name))

    async def _run_multinode(self, request: StartRequest, preset: ServePreset) -> None:
        """`serve start --nodes a,b`: MultiNodeService.start, head first, as the CLI calls it."""
        from console.services.multinode import STAGE_RAY_UP, MultiNodeService

        app = console_host(self.app)
        service = self._instance_service(request.node)
        if service is None:
            self.post_message(self.Refused(f"{request.node}: recorded node: instances cannot be started here"))
            return
        nodes = [app.fleet.spec(n) for n in request.nodes]

        def stage(name: str, detail: str) -> None:
            self.post_message(self.Progressed(detail if name == STAGE_RAY_UP else f"{name}: {detail}"))

        try:
            view = await MultiNodeService(service).start(
                nodes,
                preset,
                snapshots={n.name: app.fleet.snapshot(n.name) for n in nodes},
                port=request.port,
                name=request.name,
                overrides=request.overrides,
                extra_env=request.env,
                on_stage=stage,
            )
        except (InstanceError, TransportError) as exc:
            self.post_message(self.Refused(one_line(exc)))
        except Exception as exc:  # never a traceback in the dialog
            self.post_message(self.Refused(f"{request.node}: {type(exc).__name__}: {one_line(exc)}"))
        else:
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

    def on_start_dialog_progressed(self, message: Progressed) -> None:
        if self.busy:
            self.show_error(message.line, "busy")

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
        self.remember_values()
        app.follow_start(message.view)
        view = message.view
        where = ", ".join(view.nodes) if view.nodes else f"{view.node}: GPU {gpus_text(view.gpus)}"
        self.app.notify(f"{view.name} on {where}, port {view.port}", title="vLLM starting", markup=False)
        self.dismiss(view)

    def on_start_dialog_group_accepted(self, message: GroupAccepted) -> None:
        app = console_host(self.app)
        app.last_preset = message.preset
        self.remember_values()
        started = [v for v in message.views if v.state != InstanceState.FAILED]
        for view in started:
            app.follow_start(view)
        failed = [v for v in message.views if v.state == InstanceState.FAILED]
        text = f"group {message.group}: {len(started)} of {len(message.views)} replicas starting"
        self.app.notify(text, title="vLLM starting", markup=False)
        for view in failed:
            self.app.notify(
                f"{view.name}: {one_line(view.reason or 'failed')}",
                title=f"group {message.group}",
                severity="error",
                timeout=10,
                markup=False,
            )
        self.dismiss(started[0] if started else None)


def _sizes(sizes: Sequence[int]) -> str:
    return ", ".join(map(str, sizes[:-1])) + (" or " if len(sizes) > 1 else "") + str(sizes[-1]) if sizes else "none"


def _packing_hint(per_gpu: int, preset: ServePreset, overrides: Mapping[str, str], node: NodeSpec) -> str | None:
    """The packing rule the group's start applies (services/groups.per_gpu_refusal), said early."""
    from console.services.groups import per_gpu_refusal
    from console.services.instances import packing_limit

    flags = [x for k, v in overrides.items() for x in (f"--{k.lstrip('-').replace('_', '-')}", str(v))]
    return per_gpu_refusal(per_gpu, [*preset.args, *flags], packing_limit(node))
