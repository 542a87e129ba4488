"""The benchmark screen's charts, each a PlotextPlot with its own plotext state.

Titles go in the widget's border title, not plotext's: plotext drops a title
that is wider than its canvas, and these titles carry the current values.
"""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual_plotext import PlotextPlot

from console.ui.model.bench_view import ParetoPoint, pareto_front
from console.ui.model.charts import Trace
from console.ui.widgets.metric_plot import plot_traces


class LivePlot(PlotextPlot):
    """x: seconds since `t0` (the run's start); gaps (None) are dropped, not drawn as zero."""

    DEFAULT_CSS = """
    LivePlot {
        height: 1fr; min-height: 5;
        border-top: solid $panel-lighten-2; border-title-align: center; border-title-color: $text;
    }
    """

    def __init__(self, title: str, *, ylim: tuple[float, float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.ylim = ylim
        self.plotted = 0  # points drawn by the last replot (tests)
        self.spans: tuple[tuple[float, float], ...] = ()  # throttle episodes marked by the last replot

    def replot(
        self,
        traces: Sequence[Trace],
        t0: float,
        title: str | None = None,
        ylim: tuple[float, float] | None = None,
        spans: Sequence[tuple[float, float]] = (),
    ) -> None:
        """spans: throttle episodes (same clock as the traces), marked by red vertical lines."""
        if title is not None:
            self.border_title = title
        self.spans = tuple(spans)
        self.plotted = plot_traces(self, traces, t0, ylim or self.ylim, spans)
        self.refresh()


class ParetoPlot(PlotextPlot):
    """y: output tokens/s; x: a latency in ms; one labelled point per sweep point.
    The Pareto front (no other point has both lower latency and higher throughput) is joined."""

    DEFAULT_CSS = """
    ParetoPlot {
        height: 1fr; min-height: 5;
        border-top: solid $panel-lighten-2; border-title-align: center; border-title-color: $text;
    }
    """

    MIN_HEIGHT = 8  # rows (with the border) below which the points and their labels overlap
    MIN_WIDTH = 30
    TOO_SMALL = "too small — enlarge the terminal"

    def __init__(self, title: str, xlabel: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.border_title = title
        self.xlabel = xlabel
        self.points: tuple[ParetoPoint, ...] = ()
        self.note = ""
        self.too_small = False

    def on_mount(self) -> None:
        super().on_mount()
        self.replot([])

    def on_resize(self) -> None:
        self._draw()

    def render(self):
        if self.too_small:  # the message in the chart's place: a title this narrow would be cut
            return Text(self.TOO_SMALL, style="italic", justify="center")
        return super().render()

    def replot(self, points: Sequence[ParetoPoint], note: str = "") -> None:
        """note: what the title adds (failed points left out)."""
        self.points = tuple(points)
        self.note = note
        self._draw()

    def _draw(self) -> None:
        points = self.points
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        height, width = self.size.height, self.size.width
        # unsized (not laid out yet) counts as big enough; a squeezed chart says so instead of lying
        self.too_small = bool(height or width) and (height < self.MIN_HEIGHT or width < self.MIN_WIDTH)
        self.border_title = f"{self.title}{self.note}"
        if not points or self.too_small:
            plt.xticks([])
            plt.yticks([])
            self.refresh()
            return
        xs = [p.x for p in points]
        ys = [p.y for p in points]
        xspan = (max(xs) - min(xs)) or max(1.0, abs(xs[0]) * 0.2)
        yspan = (max(ys) - min(ys)) or max(1.0, abs(ys[0]) * 0.2)
        front = pareto_front(points)
        if len(front) > 1:
            plt.plot([p.x for p in front], [p.y for p in front], marker="braille", color="gray")
        plt.scatter(xs, ys, marker="●", color="cyan")
        for p in points:
            plt.text(p.label, p.x + xspan * 0.04, p.y, alignment="left", color="orange")
        plt.xlim(max(0.0, min(xs) - xspan * 0.15), max(xs) + xspan * 0.35)
        plt.ylim(max(0.0, min(ys) - yspan * 0.2), max(ys) + yspan * 0.2)
        plt.xlabel(self.xlabel)
        self.refresh()
