"""Moved: the accuracy kind of run is console/services/runs/accuracy.py. The names the UI and the tests
outside services/ and cli/ import from here stay importable (S2)."""

from console.services.runs.accuracy import default_lm_eval

__all__ = [
    "default_lm_eval",
]
