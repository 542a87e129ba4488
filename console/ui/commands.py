"""Command palette: per-node commands and the console's own actions."""

from __future__ import annotations

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
        yield (
            "Resume drawing" if host.paused else "Pause drawing",
            host.action_toggle_pause,
            "telemetry keeps being collected while paused",
        )
        yield (
            "Show events (the fleet's timeline)",
            partial(host.open_events, ""),
            "node, instance, partition, benchmark and GPU health events, newest first (e)",
        )
        yield (
            "Show baselines (per node)",
            partial(self.app.run_action, "baselines"),
            "drift checks, changed versions (B)",
        )
        yield ("Show sick GPUs", partial(host.apply_filter, "sick"), "filter the fleet table to GPUs in warn or fail")
        yield ("Sample faster", host.action_sample_faster, "shorter sampling interval on every node")
        yield ("Sample slower", host.action_sample_slower, "longer sampling interval on every node")
        yield ("Clear filter", partial(host.apply_filter, ""), "show every node and GPU")
        yield ("Toggle light/dark theme", host.action_toggle_theme, "")
        yield ("Show key bindings", host.action_help, "every key, with ids for the [keys] table")

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
            "Show vLLM instances",
            host.action_instances,
            "every instance of every node: state, stage, GPUs, port",
        )
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
