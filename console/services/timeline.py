"""What the console does to a node goes on the timeline: the services' one way to write it.

A service that acts on a node (instances: a refused start, a stop; processes: an end;
experiments: a partition switch and its restore) takes a ``timeline``: any callable that
takes an Event (EventLog.append for the command line, HealthWatch.record in the TUI, which
also shows it to the alert rules). None writes nothing (tests, a console without a log).
A log that cannot be written never fails the action it records: it is said in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from console.core.events import Event

__all__ = ["Timeline", "note"]

Timeline = Callable[[Event], object]

log = logging.getLogger("console.timeline")


def note(timeline: Timeline | None, event: Event) -> None:
    """Write ``event`` to ``timeline`` (when there is one); an unwritable log is a warning."""
    if timeline is None:
        return
    try:
        timeline(event)
    except OSError as exc:
        log.warning("event %s on %s not written: %s", event.kind, event.node, exc.strerror or type(exc).__name__)
