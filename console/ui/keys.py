"""Every key binding of the console, for the help screen and for checking [keys] remaps.

The app's own bindings are defined here (the app imports them); each screen keeps its
own. Nothing this module imports imports it back: the app imports keys, keys reads the
screens' classes, and the help screen only shows the rows that describe_keys() makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from textual.binding import Binding

if TYPE_CHECKING:
    from console.ui.screens.help import KeyHelp

_SAMPLING = Binding.Group("Interval", compact=True)

# ConsoleApp.BINDINGS: keys that work on every screen.
APP_BINDINGS = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark", "help", "Help", id="help"),
    Binding("p", "toggle_pause", "Pause", id="pause"),
    Binding("plus,equals_sign", "sample_faster", "Faster", show=False, id="sample-faster", group=_SAMPLING),
    Binding("minus", "sample_slower", "Slower", show=False, id="sample-slower", group=_SAMPLING),
    Binding("i", "instances", "Instances", id="instances"),
    Binding("h", "history", "Results", show=False, id="history"),
    Binding("e", "events", "Events", show=False, id="events"),
    Binding("m", "models", "Models", show=False, id="models"),  # issue Q: what each node holds, pulls
    Binding("B", "baselines", "Baselines", show=False, id="baselines"),
    Binding("t", "toggle_theme", "Light/dark theme", show=False, id="toggle-theme"),
]


def binding_sections() -> list[tuple[str, list[Binding]]]:
    # Imported here, not at the top: the app imports this module at start-up and
    # most screens are loaded only when first opened.
    from console.ui.screens.bench import BenchScreen
    from console.ui.screens.bench_start import StartBenchDialog
    from console.ui.screens.compare import CompareScreen
    from console.ui.screens.confirm import ConfirmScreen
    from console.ui.screens.detail import DetailScreen
    from console.ui.screens.events import EventsScreen
    from console.ui.screens.fault_dialog import FaultDialog
    from console.ui.screens.fleet import FleetScreen
    from console.ui.screens.form_dialog import FormDialog
    from console.ui.screens.help import HelpScreen
    from console.ui.screens.history import ExportPrompt, HistoryScreen, ImportPrompt, RunDetailScreen
    from console.ui.screens.instances import InstancesScreen
    from console.ui.screens.log_viewer import LogScreen
    from console.ui.screens.models import ModelsScreen
    from console.ui.screens.partition import PartitionScreen, ReloadConfirm
    from console.ui.screens.process_end import ProcessEndScreen
    from console.ui.screens.start_dialog import StartDialog
    from console.ui.widgets.gpu_table import GpuTable

    def own(cls) -> list[Binding]:
        return [b for b in cls.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]

    # An id may appear in several sections for the same action (s starts an instance
    # on the fleet and in the instances panel): one [keys] entry remaps both.
    return [
        ("everywhere", list(APP_BINDINGS)),
        ("fleet", own(FleetScreen) + own(GpuTable)),
        ("detail", own(DetailScreen)),
        ("instances", own(InstancesScreen)),
        ("log", own(LogScreen)),
        ("events", own(EventsScreen)),
        ("models", own(ModelsScreen)),
        ("dialogs", own(FormDialog)),
        ("start", own(StartDialog)),
        ("confirm", own(ConfirmScreen)),
        ("benchmark", own(BenchScreen) + own(StartBenchDialog)),
        ("partition", own(PartitionScreen) + own(ReloadConfirm) + own(ProcessEndScreen)),
        ("results", own(HistoryScreen) + own(RunDetailScreen)),
        ("prompts", own(ImportPrompt) + own(ExportPrompt) + own(FaultDialog)),
        ("compare", own(CompareScreen)),
        ("help", own(HelpScreen)),
    ]


def known_binding_ids() -> set[str]:
    return {b.id for _, bindings in binding_sections() for b in bindings if b.id}


def describe_keys(keymap: Mapping[str, str], key_display: Callable[[Binding], str]) -> list[KeyHelp]:
    from console.ui.model.rows import HOT_TEXT
    from console.ui.screens.help import KeyHelp

    rows: list[KeyHelp] = []
    for where, bindings in binding_sections():
        for b in bindings:
            keys = keymap.get(b.id, b.key) if b.id else b.key
            shown = ", ".join(key_display(Binding(k.strip(), b.action)) for k in keys.split(","))
            rows.append(KeyHelp(where, shown, b.description or b.action, b.id or ""))
    rows += [
        KeyHelp("everywhere", "^p", "Command palette (per-node commands)"),
        KeyHelp("everywhere", "^q", "Quit (Textual's own key)"),
        KeyHelp("filter box", "enter", "Keep the filter, back to the table"),
        KeyHelp(
            "filter box",
            "free, busy, hot",
            f"no instance or process / in use / {HOT_TEXT}",
        ),
        KeyHelp("filter box", "sick, warn, fail", "GPUs whose health is warn or fail / warn / fail"),
        KeyHelp("filter box", "throttled, ecc", "GPUs throttling now / with ECC errors counted"),
        KeyHelp("filter box", "words", "node, model, cpx, nps1, gpu3, live, stale, down: all words must match"),
        KeyHelp("dialogs", "enter, tab", "Next field (Enter never starts anything: the action key or button does)"),
        KeyHelp("mouse", "click", "Select a row"),
        KeyHelp("mouse", "double click", "Open the row's detail"),
        KeyHelp("mouse", "wheel", "Scroll"),
    ]
    return rows
