"""Reconnect delays: capped exponential backoff."""

from __future__ import annotations


def backoff_delay(attempt: int, *, base: float = 0.5, cap: float = 30.0) -> float:
    """Delay before retry number ``attempt`` (0-based): base, 2·base, 4·base, … up to cap."""
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    # Bound the exponent so huge attempt counts never overflow a float.
    return min(cap, base * (2 ** min(attempt, 32)))
