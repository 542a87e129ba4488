"""Issue U2: a second export to the same name never replaces the first: the prompt says the
name is taken and which new name it writes, and the note after the write names it too."""

from __future__ import annotations

from textual.widgets import Input

from console.ui.screens.history import ExportPrompt

from .conftest import screen_text, wait_for
from .test_history_ui import HistoryScreen, Host, data_dir, import_seed, text_of  # noqa: F401 (fixture)


async def export_once(pilot, app, screen) -> None:
    await pilot.press("e")
    await pilot.pause()
    assert isinstance(app.screen, ExportPrompt)
    app.screen.query_one("#export-format").focus()
    await pilot.press("enter")


async def test_a_second_export_writes_a_new_name_and_says_so(data_dir):  # noqa: F811
    folder = data_dir / "results" / "exports"
    first = folder / "rocm-console-results.csv"
    app = Host(HistoryScreen)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await import_seed(pilot, app)
        await export_once(pilot, app, screen)
        assert await wait_for(pilot, lambda: screen.last_export == first)
        written = first.read_text()
        first.write_text("my own notes, edited after the export\n")

        await pilot.press("e")
        await pilot.pause()
        prompt = app.screen
        assert isinstance(prompt, ExportPrompt)
        assert prompt.query_one(Input).value == str(first)  # the last choice, again
        # before anything is written: the name is taken, the new one is shown
        second = folder / "rocm-console-results-1.csv"
        assert text_of(prompt, "#export-target") == f"rocm-console-results.csv exists (kept): writes {second}"
        prompt.query_one("#export-format").focus()
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: screen.last_export == second)
        await pilot.pause()
        text = screen_text(app)
    assert first.read_text() == "my own notes, edited after the export\n"  # never replaced
    assert second.read_text() == written
    assert "written to" in text and "rocm-console-results-1.csv" in text and "exists: kept" in text
