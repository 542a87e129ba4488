"""Throughput against latency, one labelled point per sweep point, with its own plotext state."""

from __future__ import annotations

from typing import Sequence

from textual_plotext import PlotextPlot

from console.ui.bench_view import ParetoPoint, pareto_front


class ParetoPlot(PlotextPlot):
    """y: output tokens/s; x: a latency in ms. The Pareto front is joined by a line."""

    DEFAULT_CSS = """
    ParetoPlot { height: 1fr; min-height: 6; }
    """

    def __init__(self, title: str, xlabel: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.xlabel = xlabel
        self.points: tuple[ParetoPoint, ...] = ()

    def on_mount(self) -> None:
        super().on_mount()
        self.replot([])

    def replot(self, points: Sequence[ParetoPoint]) -> None:
        self.points = tuple(points)
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        if not points:
            plt.xticks([])
            plt.yticks([])
            self.refresh()
            return
        front = pareto_front(points)
        if len(front) > 1:
            plt.plot([p.x for p in front], [p.y for p in front], marker="braille", color="gray")
        plt.scatter([p.x for p in points], [p.y for p in points], marker="●", color="cyan")
        for p in points:
            plt.text(p.label, p.x, p.y, alignment="left", color="orange")
        xs = [p.x for p in points]
        ys = [p.y for p in points]
        xpad = (max(xs) - min(xs)) * 0.15 or max(1.0, abs(xs[0]) * 0.1)
        ypad = (max(ys) - min(ys)) * 0.15 or max(1.0, abs(ys[0]) * 0.1)
        plt.xlim(max(0.0, min(xs) - xpad), max(xs) + xpad * 2)
        plt.ylim(max(0.0, min(ys) - ypad), max(ys) + ypad)
        plt.xlabel(self.xlabel)
        self.refresh()
