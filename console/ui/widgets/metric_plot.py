"""A chart of one metric over the recent past, with its own plotext state."""

from __future__ import annotations

from typing import Sequence

from textual_plotext import PlotextPlot

from console.ui.model.charts import Trace


class MetricPlot(PlotextPlot):
    """Seconds-ago on x; gaps (None) are dropped rather than drawn as zero."""

    DEFAULT_CSS = """
    MetricPlot { height: 1fr; min-height: 6; }
    """

    def __init__(self, title: str, *, ylim: tuple[float, float] | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.ylim = ylim

    def on_mount(self) -> None:
        super().on_mount()
        self.replot([], now=0.0)

    def replot(
        self, traces: Sequence[Trace], now: float, title: str | None = None, ylim: tuple[float, float] | None = None
    ) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title or self.title)
        plotted = False
        for trace in traces:
            points = [(t - now, v) for t, v in zip(trace.times, trace.values) if v is not None]
            if points:
                xs, ys = zip(*points)
                plt.plot(list(xs), list(ys), label=trace.label if len(traces) > 1 else "", marker="braille")
                plotted = True
        limits = ylim or self.ylim
        if limits is not None and plotted:
            plt.ylim(*limits)
        if not plotted:
            plt.xticks([])
            plt.yticks([])
        self.refresh()
