"""Identical toasts merge into one with a count: four replicas that warn the same line show
`… (x4)` once, not four stacked toasts.

The App calls merge_toast from its Notify handler, before Textual adds the notification:
a live toast with the same message and severity is taken away and the new one says how
many it stands for (titles that differ only in what precedes their last `: ` keep the
shared part: `r1: vLLM version` and `r2: vLLM version` -> `vLLM version`).
"""

from __future__ import annotations

import re

from textual.notifications import Notification, Notifications

__all__ = ["merge_toast"]

_COUNT = re.compile(r"^(?P<base>.*) \(x(?P<n>\d+)\)\Z", re.S)


def _base(message: str) -> tuple[str, int]:
    found = _COUNT.match(message)
    return (found.group("base"), int(found.group("n"))) if found else (message, 1)


def _shared_title(a: str, b: str) -> str:
    if a == b:
        return a
    tail_a, tail_b = a.rpartition(": ")[2], b.rpartition(": ")[2]
    return tail_a if tail_a == tail_b else ""


def merge_toast(shown: Notifications, new: Notification) -> None:
    """Fold a live toast identical to `new` (message and severity) into it: `new` gets the count."""
    for old in list(shown):
        base, count = _base(old.message)
        if base != new.message or old.severity != new.severity or old.markup != new.markup:
            continue
        if old.has_expired:
            continue
        del shown[old]
        new.message = f"{base} (x{count + 1})"
        new.title = _shared_title(old.title, new.title)
        return
