"""GPU index lists as people read them: runs of three or more become ranges."""

from __future__ import annotations

from typing import Iterable


def gpu_span(indexes: Iterable[int], empty: str = "") -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7,8': runs of three or more GPUs become ranges."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ordered[i]}-{ordered[j]}")
        else:
            parts.extend(str(x) for x in ordered[i : j + 1])
        i = j + 1
    return ",".join(parts) or empty
