"""A chart of one metric over the recent past, with its own plotext state."""

from __future__ import annotations

from typing import Sequence

from textual_plotext import PlotextPlot

from console.ui.model.charts import Trace


def plot_traces(
    plot: PlotextPlot,
    traces: Sequence[Trace],
    origin: float,
    ylim: tuple[float, float] | None,
    spans: Sequence[tuple[float, float]] = (),
) -> int:
    """Draw the traces afresh, x in seconds from `origin`; gaps (None) dropped, not drawn as zero.
    `spans` (same clock as the traces): episodes marked by red vertical lines at their start and
    end (GPU throttling, issue P). Returns the points drawn (none: an empty frame without ticks)."""
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    count = 0
    for trace in traces:
        points = [(t - origin, v) for t, v in zip(trace.times, trace.values) if v is not None]
        if points:
            xs, ys = zip(*points)
            plt.plot(list(xs), list(ys), label=trace.label if len(traces) > 1 else "", marker="braille")
            count += len(points)
    if ylim is not None and count:
        plt.ylim(*ylim)
    if count:
        for start, end in spans:
            plt.vline(start - origin, "red")
            if end - start >= 1.0:
                plt.vline(end - origin, "red")
    if not count:
        plt.xticks([])
        plt.yticks([])
    return count


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
        plot_traces(self, traces, now, ylim or self.ylim)
        self.plt.title(title or self.title)
        self.refresh()
