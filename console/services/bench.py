"""Moved: the serving kind of run is console/services/runs/serving.py. The names the UI and the tests
outside services/ and cli/ import from here stay importable (S2)."""

from console.services.runs.serving import (
    BenchFinished,
    BenchLogLine,
    BenchProgressed,
    BenchRunError,
    BenchRunner,
    BenchSetupSeen,
    BenchStarted,
    LiveMetricsSampled,
    RunOutcome,
    live_summary,
)

__all__ = [
    "BenchFinished",
    "BenchLogLine",
    "BenchProgressed",
    "BenchRunError",
    "BenchRunner",
    "BenchSetupSeen",
    "BenchStarted",
    "LiveMetricsSampled",
    "RunOutcome",
    "live_summary",
]
