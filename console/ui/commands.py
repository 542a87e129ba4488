"""Command palette: per-node commands and the console's own actions."""

from __future__ import annotations

from functools import partial
from typing import Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider


class FleetCommands(Provider):
    """'mi300x-cpx: open node detail', 'mi300x-cpx: reconnect telemetry', ..."""

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.app
        for node in app.fleet.node_names:  # type: ignore[attr-defined]
            yield (f"{node}: open node detail", partial(app.open_detail, node, None),
                   "charts, processes and versions of the whole node")
            yield (f"{node}: show only this node", partial(app.apply_filter, node),
                   "filter the fleet table to this node")
            yield (f"{node}: reconnect telemetry", partial(app.restart_node, node),
                   "drop the agent stream and connect again now")
        paused = getattr(app, "paused", False)
        yield ("Resume drawing" if paused else "Pause drawing", app.action_toggle_pause,
               "telemetry keeps being collected while paused")
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
