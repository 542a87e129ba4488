"""Command palette: per-node commands and the console's own actions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.core.instance_view import InstanceState
from console.ui.model.instance_board import ACTIVE
from console.ui.model.protocols import ConsoleHost, console_host
from console.ui.workers import run_named

Command = tuple[str, Callable[[], object], str]  # what the palette shows, what it does, its help line


class _ConsoleCommands(Provider):
    """A provider of (name, callback, help) commands; discover() lists those worth browsing."""

    def commands(self, host: ConsoleHost) -> Iterator[Command]:
        raise NotImplementedError

    def browsable(self, name: str) -> bool:
        """Listed before anything is typed (every command is found by a search)."""
        return True

    async def discover(self) -> Hits:
        for name, callback, help_text in self.commands(console_host(self.app)):
            if self.browsable(name):
                yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self.commands(console_host(self.app)):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


class FleetCommands(_ConsoleCommands):
    """'mi300x-cpx: open node detail', 'mi300x-cpx: reconnect telemetry', ..."""

    def commands(self, host: ConsoleHost) -> Iterator[Command]:
        for node in host.fleet.node_names:
            yield (
                f"{node}: open node detail",
                partial(host.open_detail, node, None),
                "charts, processes and versions of the whole node",
            )
            yield (
                f"{node}: show only this node",
                partial(host.apply_filter, node),
                "filter the fleet table to this node",
            )
            yield (
                f"{node}: show events",
                partial(host.open_events, f"node:{node}"),
                "the node's timeline: health changes, ECC, throttling, resets, instances",
            )
            yield (
                f"{node}: reconnect telemetry",
                partial(host.restart_node, node),
                "drop the agent stream and connect again now",
            )
            yield (
                f"{node}: offline benchmark (latency / throughput)",
                partial(host.open_offline_dialog, node),
                "vllm bench latency|throughput on free GPUs, no instance needed",
            )
        simulated = [n for n in host.fleet.node_names if _takes_faults(host, n)]
        if simulated:
            yield (
                "Inject GPU fault… (demo)",
                partial(self._inject_fault, host),
                "a simulated ECC error, page, throttling, PCIe, link down or reset on a demo GPU",
            )
            yield (
                "Clear GPU faults (demo)",
                partial(self._clear_faults, host),
                "remove every simulated fault from the demo's GPUs",
            )
        # The filter words people ask for (the app-wide actions and screens: ScreenCommands)
        yield ("Show sick GPUs", partial(host.apply_filter, "sick"), "filter the fleet table to GPUs in warn or fail")
        yield ("Show free GPUs", partial(host.apply_filter, "free"), "no instance, no process, no load")
        yield (
            "Show hot GPUs",
            partial(host.apply_filter, "hot"),
            "junction or memory temperature past its warn colour",
        )
        yield ("Clear filter", partial(host.apply_filter, ""), "show every node and GPU")

    def _inject_fault(self, host: ConsoleHost) -> None:
        from console.ui.screens.fault_dialog import FaultDialog, fault_nodes  # loaded when first used

        def done(line: str | None) -> None:
            if line:
                self.app.notify(line, title="simulated fault", markup=False)

        self.app.push_screen(FaultDialog(fault_nodes(host.fleet.spec(n) for n in host.fleet.node_names)), done)

    def _clear_faults(self, host: ConsoleHost) -> None:
        from console.ui.screens.fault_dialog import clear_all, fault_nodes

        async def run() -> None:
            lines = await clear_all(fault_nodes(host.fleet.spec(n) for n in host.fleet.node_names))
            self.app.notify("\n".join(lines), title="simulated faults", markup=False)

        run_named(self.app, run(), "clear-faults")


def _takes_faults(host: ConsoleHost, node: str) -> bool:
    spec = host.fleet.spec(node)
    return spec.simulate is not None and spec.transport == "local"


class InstanceCommands(_ConsoleCommands):
    """'mi300x-cpx: start tiny (tiny-llama, TP 1)', 'tiny-g12 on mi300x-cpx: stop', '... : logs'."""

    def commands(self, host: ConsoleHost) -> Iterator[Command]:
        yield (
            "Show layout experiments",
            self._open_experiments,
            "progress of `rocm-console experiment run` over its whole plan, best layout so far",
        )
        for node in host.fleet.node_names:
            for preset in host.profile.serve_presets:
                yield (
                    f"{node}: start {preset.name}",
                    partial(host.open_start_dialog, node, (), preset.name),
                    f"{preset.model}, TP {preset.tp}: on the first free GPUs (editable)",
                )
        for view in host.board.views():
            where = f"{view.name} on {view.node}"
            if view.state in ACTIVE and view.state != InstanceState.UNMANAGED:
                yield (
                    f"{where}: stop",
                    partial(host.confirm_stop, view.node, view.name),
                    f"{view.state.value}; asks first",
                )
            if view.state != InstanceState.UNMANAGED:
                yield (
                    f"{where}: logs",
                    partial(host.open_log, view.node, view.name),
                    "the vLLM log with its startup stage, followed live",
                )

    def browsable(self, name: str) -> bool:
        return not name.endswith(": logs") and ": start " not in name  # the list stays short

    def _open_experiments(self) -> None:
        from console.ui.screens.experiments import ExperimentsScreen  # loaded when first opened

        self.app.push_screen(ExperimentsScreen())


@dataclass(frozen=True, slots=True)
class PaletteEntry:
    """A palette command that reaches a screen or does a key's action, found by its name.

    screens: the screen classes it opens (directly or through the screen it opens);
    bindings: the [keys] ids of the keys it does the same as. tests/ui/test_palette.py
    checks that every screen and every key of the fleet is reached by one."""

    name: str
    help: str
    screens: tuple[str, ...] = ()
    bindings: tuple[str, ...] = ()


# The fleet screen's keys (fleet action, arguments) the palette runs there.
_FLEET_ACTIONS: tuple[tuple[PaletteEntry, str, tuple[object, ...]], ...] = (
    (
        PaletteEntry(
            "Start vLLM on the marked or cursor's GPUs",
            "the start dialog: preset, model, TP, GPUs (s)",
            ("StartDialog",),
            ("start-instance",),
        ),
        "start_instance",
        (),
    ),
    (
        PaletteEntry(
            "Stop the vLLM instance under the cursor",
            "asks first (x)",
            ("ConfirmScreen",),
            ("stop-instance",),
        ),
        "stop_instance",
        (),
    ),
    (
        PaletteEntry(
            "Logs of the vLLM instance under the cursor",
            "the log, followed live (l)",
            ("LogScreen",),
            ("instance-log",),
        ),
        "open_log",
        (),
    ),
    (
        PaletteEntry(
            "Benchmark the instance under the cursor",
            "a serving benchmark preset against a ready instance (b)",
            ("StartBenchDialog", "BenchScreen"),
            ("start-bench",),
        ),
        "benchmark",
        (),
    ),
    (
        PaletteEntry(
            "Partition: switch CPX / SPX / NPS of the marked GPUs or the node",
            "checks every blocker (processes can be ended there), then switches and verifies (P)",
            ("PartitionScreen", "ReloadConfirm", "ProcessEndScreen"),
            ("partition",),
        ),
        "partition",
        (),
    ),
    (
        PaletteEntry(
            "Reconnect the node under the cursor", "drop its agent stream and connect again (r)", (), ("restart-node",)
        ),
        "restart_node",
        (),
    ),
    (
        PaletteEntry(
            "Open the detail of the row under the cursor",
            "charts, processes, health (enter)",
            ("DetailScreen",),
            ("open-detail",),
        ),
        "activate_row",
        (),
    ),
    (
        PaletteEntry(
            "Filter the fleet…", "free, busy, hot, sick, cpx, a node name… (/)", ("FleetScreen",), ("filter",)
        ),
        "filter",
        (),
    ),
    (
        PaletteEntry("Sort: per node / across the fleet", "toggle (F)", (), ("sort-scope",)),
        "sort_scope",
        (),
    ),
    *(
        (
            PaletteEntry(f"Sort by {words}", f"largest first; again: reverse ({key})", (), (f"sort-{column}",)),
            "sort",
            (column,),
        )
        for key, column, words in (
            ("U", "util", "utilization"),
            ("M", "vram", "VRAM used"),
            ("V", "free", "free VRAM (the most free first)"),
            ("W", "power", "power"),
            ("T", "temp", "temperature (hottest first)"),
            ("C", "clock", "GFX clock"),
            ("N", "name", "name (the default order)"),
        )
    ),
)

# App-wide actions (app action name) and what the results screen does there (its action).
_APP_ACTIONS: tuple[tuple[PaletteEntry, str], ...] = (
    (
        PaletteEntry(
            "Results: benchmark history",
            "every stored run; enter: its detail (h)",
            ("HistoryScreen", "RunDetailScreen"),
            ("history",),
        ),
        "history",
    ),
    (
        PaletteEntry(
            "Show vLLM instances",
            "every instance of every node: state, stage, GPUs, port (i)",
            ("InstancesScreen", "GroupBenchScreen"),
            ("instances",),
        ),
        "instances",
    ),
    (
        PaletteEntry(
            "Show events (the fleet's timeline)",
            "health, ECC, throttling, instances, newest first (e)",
            ("EventsScreen",),
            ("events",),
        ),
        "events",
    ),
    (
        PaletteEntry(
            "Show models on the nodes",
            "size, revision, used by, free space; pull, remove, start (m)",
            ("ModelsScreen",),
            ("models",),
        ),
        "models",
    ),
    (
        PaletteEntry(
            "Show baselines (per node)",
            "saved baselines, drift checks, changed versions (B)",
            ("BaselineScreen",),
            ("baselines",),
        ),
        "baselines",
    ),
    (
        PaletteEntry(
            "Help: show key bindings", "every key, with ids for the [keys] table (?)", ("HelpScreen",), ("help",)
        ),
        "help",
    ),
    (
        PaletteEntry("Pause / resume drawing", "telemetry keeps being collected while paused (p)", (), ("pause",)),
        "toggle_pause",
    ),
    (
        PaletteEntry("Sample faster", "shorter sampling interval on every node (+)", (), ("sample-faster",)),
        "sample_faster",
    ),
    (
        PaletteEntry("Sample slower", "longer sampling interval on every node (-)", (), ("sample-slower",)),
        "sample_slower",
    ),
    (PaletteEntry("Toggle light/dark theme", "(t)", (), ("toggle-theme",)), "toggle_theme"),
)
_RESULT_ACTIONS: tuple[tuple[PaletteEntry, str], ...] = (
    (
        PaletteEntry("Results: compare marked runs", "mark runs with space in the results, then c", ("CompareScreen",)),
        "compare",
    ),
    (
        PaletteEntry("Results: export (Markdown, CSV, JSON)", "the marked runs, or all shown", ("ExportPrompt",)),
        "export",
    ),
    (
        PaletteEntry(
            "Results: import runs or reference numbers", "files of other consoles or of vLLM", ("ImportPrompt",)
        ),
        "import",
    ),
)
FIND_MAX = PaletteEntry(
    # "find-max" spelled as the CLI and the key bar spell it: typed so, the palette finds it
    "Find max load (find-max: ^f in the benchmark dialog)",
    "the highest concurrency within a latency budget, for a preset and a ready instance",
    ("FindMaxDialog", "FindMaxScreen"),
)
EXPERIMENTS = PaletteEntry(
    "Show layout experiments",
    "pick a file, check it, run it (n), follow its points",
    ("ExperimentsScreen", "ExperimentDialog"),
)
OFFLINE = PaletteEntry(
    "NODE: offline benchmark (latency / throughput)", "no instance needed", ("OfflineBenchDialog", "OfflineBenchScreen")
)
FAULTS = PaletteEntry("Inject GPU fault… (demo)", "on a simulated node", ("FaultDialog",))


def palette_entries() -> list[PaletteEntry]:
    """Everything the palette reaches, for the coverage test."""
    return [
        *(e for e, _a, _p in _FLEET_ACTIONS),
        *(e for e, _a in _APP_ACTIONS),
        *(e for e, _a in _RESULT_ACTIONS),
        FIND_MAX,
        EXPERIMENTS,
        OFFLINE,
        FAULTS,
    ]


class ScreenCommands(_ConsoleCommands):
    """Every screen and the fleet's keys by name: 'Partition…', 'Results: export', 'Sort by temperature'."""

    def commands(self, host: ConsoleHost) -> Iterator[Command]:
        for entry, action, args in _FLEET_ACTIONS:
            yield entry.name, partial(self._on_fleet, action, args), entry.help
        for entry, action in _APP_ACTIONS:
            yield entry.name, partial(self.app.run_action, action), entry.help
        for entry, action in _RESULT_ACTIONS:
            yield entry.name, partial(self._on_results, action), entry.help
        yield FIND_MAX.name, partial(self._find_max, host), FIND_MAX.help

    def browsable(self, name: str) -> bool:
        return not name.startswith("Sort by")  # found by typing "sort"; the browse list stays short

    def _on_fleet(self, action: str, args: tuple[object, ...]) -> None:
        from console.ui.screens.fleet import FleetScreen

        fleet = next((s for s in self.app.screen_stack if isinstance(s, FleetScreen)), None)
        if fleet is None:
            return
        while self.app.screen is not fleet:
            self.app.pop_screen()
        if action == "activate_row":
            fleet.table.action_activate()
            return
        getattr(fleet, f"action_{action}")(*args)

    def _on_results(self, action: str) -> None:
        """Open the results (once loaded), then do what its key does there."""
        from console.ui.screens.history import HistoryScreen

        screen = self.app.screen
        if not isinstance(screen, HistoryScreen):
            from console.ui.results_store import result_store

            screen = HistoryScreen(result_store(self.app))
            self.app.push_screen(screen)
        results = screen

        async def when_loaded() -> None:
            for _ in range(200):  # bounded: 10 s
                if results.loaded:
                    break
                await asyncio.sleep(0.05)
            getattr(results, f"action_{action}")()

        run_named(self.app, when_loaded(), f"palette-{action}")

    def _find_max(self, host: ConsoleHost) -> None:
        """The benchmark dialog, then its find-max question (ctrl+f there)."""
        from console.ui.screens.bench_start import StartBenchDialog

        host.open_bench_dialog(None)

        def ask() -> None:
            if isinstance(self.app.screen, StartBenchDialog):
                self.app.screen.action_find_max()

        self.app.call_after_refresh(ask)
