"""One line on top of every screen: fleet summary, sampling cadence, filter, PAUSED."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.widgets import Static

from console.core.model import NodeHealth, NodeSnapshot


class StatusBar(Horizontal):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; }
    StatusBar > #status-summary { width: 1fr; height: 1; }
    StatusBar > #paused-marker { display: none; width: auto; height: 1; padding: 0 1;
                                 background: $warning; color: $text; text-style: bold; }
    """

    _drawn = ""

    def compose(self) -> ComposeResult:
        yield Static(id="status-summary")
        yield Static("⏸ PAUSED", id="paused-marker")

    def show(self, snapshots: list[NodeSnapshot], interval: float, filter_text: str = "", context: str = "") -> None:
        counts = dict.fromkeys(NodeHealth, 0)
        gpus = 0
        for snap in snapshots:
            counts[snap.health] += 1
            gpus += len(snap.static) or (len(snap.latest.gpus) if snap.latest else 0)
        parts = ["[b] rocm-console [/b]"]
        if context:
            parts.append(f"[b]{escape(context)}[/b]")
        states = [f"{len(snapshots)} nodes"]
        for health, mark, var in (
            (NodeHealth.LIVE, "●", "$text-success"),
            (NodeHealth.STALE, "◐", "$text-warning"),
            (NodeHealth.DOWN, "✖", "$text-error"),
            (NodeHealth.CONNECTING, "○", "$text-muted"),
        ):
            if counts[health]:
                states.append(f"[{var}]{mark} {counts[health]} {health.value}[/]")
        parts.append(" ".join(states))
        parts.append(f"{gpus} GPUs")
        parts.append(cadence_text(interval, getattr(getattr(self.app, "fleet", None), "drawn_every_s", None)))
        if filter_text:
            parts.append(f"[i]filter: {escape(filter_text)}[/i]")
        watched = watched_text(self.app)
        if watched:
            parts.append(f"[$text-accent]👁 {escape(watched)}[/]")
        markup = " · ".join(parts)
        if markup != self._drawn:
            # Remembered only once shown: a redraw before the bar's children are
            # mounted raises NoMatches here, and must not make the next one a no-op.
            self.query_one("#status-summary", Static).update(markup)
            self._drawn = markup


def cadence_text(interval: float, drawn_every_s: float | None) -> str:
    """How often what the screen shows is new: the sampling interval, or, while nobody is at the
    console (console/ui/app.py draws then every UNATTENDED_EVERY_S and the nodes on screen
    sample as often), the slower of the two."""
    if not drawn_every_s:
        return f"every {interval:g} s"
    return f"every {max(interval, drawn_every_s):g} s (unattended)"


def watched_text(app: object) -> str:
    """'watched since 03:12 by host:pid · 2 alerts firing' while a watcher of the app's fleet
    runs (console/services/watcher_presence.py, looked at by the app's HealthWatch), else ''."""
    presence = getattr(getattr(app, "health_watch", None), "presence", None)
    return presence.header() if presence is not None else ""
