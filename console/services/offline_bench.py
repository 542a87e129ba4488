"""Moved: the offline kind of run is console/services/runs/offline.py. The names the UI and the tests
outside services/ and cli/ import from here stay importable (S2)."""

from console.services.runs.offline import (
    OfflineFinished,
    OfflineLogLine,
    OfflineOutcome,
    OfflineProgressed,
    OfflineRunError,
    OfflineRunner,
    OfflineStarted,
)

__all__ = [
    "OfflineFinished",
    "OfflineLogLine",
    "OfflineOutcome",
    "OfflineProgressed",
    "OfflineRunError",
    "OfflineRunner",
    "OfflineStarted",
]
