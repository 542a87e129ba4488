"""Starting the console's app for a profile: a real fleet, or the demo with its lifeline,
its own state and data folders, seeded history and instances (cli/tui.py calls it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from console.core.model import Profile
from console.ui.app import ConsoleApp

if TYPE_CHECKING:
    from console.core.health_profile import HealthSettings
    from console.services.history import History


def run_app(
    profile: Profile,
    *,
    interval: float = 1.0,
    demo: bool = False,
    notes: Sequence[str] = (),
    health: HealthSettings | None = None,
) -> int:
    """`health`: the profile's health settings when the caller read them already (cli/tui.py)."""
    from console.core.health_profile import health_settings
    from console.ui.paced_loop import run_paced

    if health is None:
        health = health_settings(profile)
    if not demo:
        app = _with_history(ConsoleApp, profile, interval=interval, health=health)
        run_paced(app.run_async())
        return app.return_code or 0
    from console.services import demo as demo_life

    # Before anything starts: every local child inherits the lifeline.
    token = demo_life.claim_lifeline()
    try:
        demo_life.use_private_state()  # made already when the TUI entry started the agents early
        demo_life.use_demo_data_dir()
        demo_life.seed_history()
        from console.services.baseline_demo import prepare_demo

        prepare_demo(profile)  # a seeded baseline, and mi300x-spx's simulated ROCm upgraded since
        app = _with_history(  # the demo's own store, in its own data dir (use_demo_data_dir)
            ConsoleApp,
            profile,
            interval=interval,
            demo_instances=demo_life.DEMO_INSTANCES,
            health=health,
            start_notes=notes,
        )
        run_paced(app.run_async())
        return app.return_code or 0
    finally:  # a clean quit stops the demo's processes now rather than at their next look
        demo_life.stop_bound(token)
        demo_life.remove_private_state()  # after its processes: they write there until they end


def _with_history(make: type[ConsoleApp], profile: Profile, **kwargs: Any) -> ConsoleApp:
    """The app, keeping its timeline in its one History (console/services/history.py: runs,
    events, baselines and node versions in the store of the data dir in force now, the demo's
    own in the demo). Nothing of the store is opened, or even imported, here: the History is
    made and opened in a thread once the first frame is on screen (results_store.py
    open_history), its migration line a notification; events written before that wait in
    memory (ConsoleEvents)."""
    from console.ui.results_store import ConsoleEvents, history_of

    app: ConsoleApp | None = None

    def history() -> History:
        assert app is not None
        return history_of(app)

    app = make(profile, events=ConsoleEvents(history), **kwargs)  # type: ignore[arg-type]
    return app
