"""Every key listed by `?` does what it says."""

from __future__ import annotations

from console.ui.app import ConsoleApp
from console.ui.keys import binding_sections, describe_keys, known_binding_ids
from console.ui.screens.bench import BenchScreen  # noqa: E402
from console.ui.screens.bench_start import StartBenchDialog  # noqa: E402
from console.ui.screens.compare import CompareScreen  # noqa: E402
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.detail import DetailScreen
from console.ui.screens.events import EventsScreen
from console.ui.screens.fault_dialog import FaultDialog
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.form_dialog import FormDialog
from console.ui.screens.help import HelpScreen
from console.ui.screens.history import ExportPrompt, HistoryScreen, ImportPrompt, RunDetailScreen  # noqa: E402
from console.ui.screens.instances import InstancesScreen
from console.ui.screens.log_viewer import LogScreen
from console.ui.screens.models import ModelsScreen
from console.ui.screens.partition import PartitionScreen, ReloadConfirm  # noqa: E402
from console.ui.screens.process_end import ProcessEndScreen
from console.ui.screens.start_dialog import StartDialog
from console.ui.widgets.gpu_table import GpuTable

from .conftest import wait_for

_OWNERS = {
    "everywhere": [ConsoleApp],
    "fleet": [FleetScreen, GpuTable],
    "detail": [DetailScreen],
    "instances": [InstancesScreen],
    "log": [LogScreen],
    "events": [EventsScreen],
    "models": [ModelsScreen],
    "dialogs": [FormDialog],
    "start": [StartDialog],
    "confirm": [ConfirmScreen],
    "help": [HelpScreen],
    "benchmark": [BenchScreen, StartBenchDialog],
    "partition": [PartitionScreen, ReloadConfirm, ProcessEndScreen],
    "results": [HistoryScreen, RunDetailScreen],
    "prompts": [ImportPrompt, ExportPrompt, FaultDialog],
    "compare": [CompareScreen],
}


def test_binding_ids_are_unique_kebab_case_and_actions_exist():
    assert {where for where, _ in binding_sections()} == set(_OWNERS)
    for _, bindings in binding_sections():
        ids = [b.id for b in bindings]
        assert all(ids) and len(ids) == len(set(ids))  # unique within a screen
        assert all(i == i.lower() and "_" not in i and " " not in i for i in ids)
    # An id shared by two screens (s: start-instance) means the same thing in both:
    # one [keys] entry remaps both.
    actions: dict[str, str] = {}
    for _, bindings in binding_sections():
        for b in bindings:
            assert actions.setdefault(b.id, b.action) == b.action, b
    for where, bindings in binding_sections():
        for b in bindings:
            name = b.action.split("(")[0]
            assert any(hasattr(cls, f"action_{name}") for cls in _OWNERS[where] + [ConsoleApp]), b


def test_help_lists_every_binding_with_the_remapped_key():
    rows = describe_keys({"pause": "space"}, lambda b: b.key)
    listed = {r.binding_id: r.keys for r in rows if r.binding_id}
    assert set(listed) == known_binding_ids()
    assert listed["pause"] == "space"


def test_footer_shows_few_keys():
    shown = [b for _, bindings in binding_sections()[:2] for b in bindings if b.show]
    groups = {b.group.description if b.group else b.id for b in shown}
    assert len(groups) <= 7


async def test_every_fleet_and_detail_key_works(live_app):
    app = live_app(("mi300x-spx", "mi300x-cpx"))
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) == 2 + 8 + 64)

        def at():
            return table.cursor_row.key

        await pilot.press("down")
        assert at() == ("mi300x-spx", 0)
        await pilot.press("j", "j", "k")
        assert at() == ("mi300x-spx", 1)
        await pilot.press("up")
        assert at() == ("mi300x-spx", 0)
        await pilot.press("pagedown")
        assert table.rows.index(table.cursor_row) > 20
        await pilot.press("pageup", "end")
        assert at() == ("mi300x-cpx", 63)
        await pilot.press("home")
        assert at() == ("mi300x-spx", None)
        await pilot.press("right_square_bracket")
        assert at() == ("mi300x-cpx", None)
        await pilot.press("left_square_bracket")
        assert at() == ("mi300x-spx", None)

        await pilot.press("p")
        assert app.paused
        await pilot.press("p")
        assert not app.paused
        await pilot.press("plus")
        assert app.sampling_interval == 0.5
        await pilot.press("equals_sign")
        assert app.sampling_interval == 0.2
        await pilot.press("minus")
        assert app.sampling_interval == 0.5
        dark = app.current_theme.dark
        await pilot.press("t")
        assert app.current_theme.dark is not dark

        await pilot.press("slash")
        assert app.screen.query_one("#filter-input").has_focus
        await pilot.press(*"cpx")
        assert {r.node for r in table.rows} == {"mi300x-cpx"}
        await pilot.press("escape")
        assert table.filter_text == "" and table.has_focus

        streams = len(app.transports["mi300x-spx"].commands)
        await pilot.press("home", "r")  # reconnect the selected node
        assert await wait_for(pilot, lambda: len(app.transports["mi300x-spx"].commands) > streams)

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("question_mark", "escape")
        assert isinstance(app.screen, FleetScreen)

        await pilot.press("down", "enter")
        assert isinstance(app.screen, DetailScreen) and app.screen.gpu == 0
        await pilot.press("right", "right_square_bracket")
        assert app.screen.gpu == 2
        await pilot.press("left", "left_square_bracket")
        assert app.screen.gpu == 0
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("enter", "backspace")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("q")
        assert await wait_for(pilot, lambda: not app.is_running, timeout=5) or app._exit_renderables is not None


async def test_unknown_binding_id_in_keys_is_reported(live_app):
    app = live_app(("mi300x-spx",), keys=(("no-such-action", "x"),))
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any("unknown binding id no-such-action" in m for m in messages)
