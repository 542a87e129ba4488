"""Command palette: per-node commands and the console's own actions."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.core.instance_view import InstanceState
from console.ui.model.instance_board import ACTIVE


class FleetCommands(Provider):
    """'mi300x-cpx: open node detail', 'mi300x-cpx: reconnect telemetry', ..."""

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app: Any = self.app  # the ConsoleApp (imported here it would import itself back)
        for node in app.fleet.node_names:
            yield (
                f"{node}: open node detail",
                partial(app.open_detail, node, None),
                "charts, processes and versions of the whole node",
            )
            yield (
                f"{node}: show only this node",
                partial(app.apply_filter, node),
                "filter the fleet table to this node",
            )
            yield (
                f"{node}: reconnect telemetry",
                partial(app.restart_node, node),
                "drop the agent stream and connect again now",
            )
            yield (
                f"{node}: offline benchmark (latency / throughput)",
                partial(app.open_offline_dialog, node),
                "vllm bench latency|throughput on free GPUs, no instance needed",
            )
        paused = getattr(app, "paused", False)
        yield (
            "Resume drawing" if paused else "Pause drawing",
            app.action_toggle_pause,
            "telemetry keeps being collected while paused",
        )
        yield ("Sample faster", app.action_sample_faster, "shorter sampling interval on every node")
        yield ("Sample slower", app.action_sample_slower, "longer sampling interval on every node")
        yield ("Clear filter", partial(app.apply_filter, ""), "show every node and GPU")
        yield ("Toggle light/dark theme", app.action_toggle_theme, "")
        yield ("Show key bindings", app.action_help, "every key, with ids for the [keys] table")

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


def _open_experiments(app) -> None:
    from console.ui.screens.experiments import ExperimentsScreen  # loaded when first opened

    app.push_screen(ExperimentsScreen())


class InstanceCommands(Provider):
    """'mi300x-cpx: start tiny (tiny-llama, TP 1)', 'tiny-g12 on mi300x-cpx: stop', '... : logs'."""

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.app
        yield (
            "Show vLLM instances",
            app.action_instances,  # type: ignore[attr-defined]
            "every instance of every node: state, stage, GPUs, port",
        )
        yield (
            "Show layout experiments",
            partial(_open_experiments, app),
            "progress of `rocm-console experiment run` over its whole plan, best layout so far",
        )
        for node in app.fleet.node_names:  # type: ignore[attr-defined]
            for preset in app.profile.serve_presets:  # type: ignore[attr-defined]
                yield (
                    f"{node}: start {preset.name}",
                    partial(app.open_start_dialog, node, (), preset.name),  # type: ignore[attr-defined]
                    f"{preset.model}, TP {preset.tp}: on the first free GPUs (editable)",
                )
        for view in app.board.views():  # type: ignore[attr-defined]
            where = f"{view.name} on {view.node}"
            if view.state in ACTIVE and view.state != InstanceState.UNMANAGED:
                yield (
                    f"{where}: stop",
                    partial(app.confirm_stop, view.node, view.name),  # type: ignore[attr-defined]
                    f"{view.state.value}; asks first",
                )
            if view.state != InstanceState.UNMANAGED:
                yield (
                    f"{where}: logs",
                    partial(app.open_log, view.node, view.name),  # type: ignore[attr-defined]
                    "the vLLM log with its startup stage, followed live",
                )

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            if not name.endswith(": logs") and ": start " not in name:  # the list stays short
                yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
