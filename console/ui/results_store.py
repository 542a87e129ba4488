"""The TUI's one results store: every screen that stores or reads benchmark runs is handed it.

The console app keeps it as `app.result_store` (made on first use, so that the demo's data
folder, set before, is the one it reads). A screen hosted by another app (a test's bare host)
gets one made once for that app, the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.services.results import ResultStore


def result_store(app: object) -> ResultStore:
    """`app`'s one ResultStore, made the first time it is asked for."""
    store = getattr(app, "result_store", None)
    if store is None:
        from console.services.results import ResultStore

        store = ResultStore()
        try:
            app.result_store = store  # type: ignore[attr-defined]
        except AttributeError:  # an app that takes no attribute: a store for this call only
            pass
    return store
