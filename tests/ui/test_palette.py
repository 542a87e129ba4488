"""The command palette reaches every screen and every key of the fleet by name.

The coverage test enumerates the screens in console/ui/screens and the bindings of the
keys table: a new screen or key without a palette entry fails here."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from textual.fuzzy import Matcher
from textual.screen import Screen

import console.ui.screens as screens_pkg
from console.ui.commands import FIND_MAX, ScreenCommands, palette_entries
from console.ui.keys import binding_sections
from console.ui.model.protocols import console_host
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.history import HistoryScreen
from console.ui.widgets.gpu_table import GpuTable
from tests.ui.scenes.registry import SCENES

from .conftest import screen_text, wait_for

# Bases other screens extend: never shown themselves.
_BASES = {"FormDialog", "YesNoScreen"}
# Keys with no palette command, and why.
_NO_COMMAND = {
    "quit": "Textual's own palette command 'Quit the application'",
    "clear-filter": "the palette's 'Clear filter' (and Esc unmarks GPUs, which a palette cannot point at)",
    "cursor-up": "moves the cursor",
    "cursor-down": "moves the cursor",
    "page-up": "moves the cursor",
    "page-down": "moves the cursor",
    "first-row": "moves the cursor",
    "last-row": "moves the cursor",
    "next-node": "moves the cursor",
    "prev-node": "moves the cursor",
    "select-gpu": "marks the cursor's GPU",
}


def all_screens() -> dict[str, type]:
    found = {}
    for info in pkgutil.iter_modules(screens_pkg.__path__):
        module = importlib.import_module(f"{screens_pkg.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Screen) and cls.__module__ == module.__name__ and name not in _BASES:
                found[name] = cls
    return found


def test_every_screen_has_a_palette_entry():
    screens = all_screens()
    assert {"FleetScreen", "PartitionScreen", "HistoryScreen", "FindMaxScreen", "HelpScreen"} <= set(screens)
    reached = {name for entry in palette_entries() for name in entry.screens}
    missing = sorted(set(screens) - reached)
    assert not missing, f"screens without a palette entry (console/ui/commands.py): {missing}"
    unknown = sorted(reached - set(screens))
    assert not unknown, f"palette entries name screens that do not exist: {unknown}"


def test_every_key_of_the_fleet_has_a_palette_entry():
    covered = {b for entry in palette_entries() for b in entry.bindings}
    missing = []
    for where, bindings in binding_sections():
        if where not in ("everywhere", "fleet"):
            continue
        for binding in bindings:
            if binding.id and binding.id not in covered and binding.id not in _NO_COMMAND:
                missing.append(f"{where}: {binding.key} ({binding.id})")
    assert not missing, f"keys without a palette entry (console/ui/commands.py): {missing}"


async def test_the_palette_finds_each_screen_and_action_by_its_word(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    app, prepare = SCENES["fleet"].make()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await prepare(pilot)
        names = []
        for provider_class in app.COMMANDS:
            if not isinstance(provider_class, type) or not hasattr(provider_class, "commands"):
                continue
            provider = provider_class(app.screen)
            names += [name for name, _cb, _help in provider.commands(console_host(app))]
        declared = [e.name for e in palette_entries() if not e.name.startswith("NODE:")]
        assert not [n for n in declared if n not in names and "fault" not in n]
        assert any(n.endswith(": offline benchmark (latency / throughput)") for n in names)
        for word in (
            "partition",
            "results",
            "history",
            "events",
            "instances",
            "experiments",
            "help",
            "compare",
            "find max",
            "offline",
            "start",
            "stop",
            "logs",
            "export",
            "import",
            "sort",
            "filter",
            "free",
            "hot",
        ):
            matcher = Matcher(word)
            assert any(matcher.match(n) > 0 and word.split()[0] in n.lower() for n in names), word
        assert FIND_MAX.name in names

        # typed into the palette: sort by temperature, then across the fleet
        await pilot.press("ctrl+p", *"sort by temp")
        assert await wait_for(pilot, lambda: "Sort by temperature (hottest first)" in screen_text(app))
        await pilot.press("enter")
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen) and table.row_order.key == "temp")
        # an action on a screen: export from the results, once they are loaded (none here: it says so)
        await pilot.press("ctrl+p", *"results: export")
        assert await wait_for(pilot, lambda: "Results: export" in screen_text(app))
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        assert await wait_for(pilot, lambda: any("nothing to export" in str(n.message) for n in app._notifications))


def test_screen_commands_are_a_provider_of_the_app():
    from console.ui.app import ConsoleApp

    assert ScreenCommands in ConsoleApp.COMMANDS
