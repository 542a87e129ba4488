"""Dialogs remember what they were last run with, per preset and node, across a restart, and
say where a value came from (issue U2); the find-max dialog's fields are all drawn and typing
in one never changes another, at 120x36 and 80x24."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from console.services import form_memory
from console.services.form_memory import FormMemory, memory_path
from console.services.instances import InstanceError, InstanceState, InstanceView
from console.ui.model.instance_source import StaticInstances
from console.ui.screens.find_max import FindMaxDialog
from console.ui.screens.start_dialog import StartDialog
from console.ui.widgets.gpu_table import GpuTable

from .conftest import screen_text, wait_for
from .test_dialog_keys import BENCH, VIEW, Host, bench_dialog


def typed(dialog, widget_id: str) -> str:
    return dialog.query_one(f"#{widget_id}", Input).value


async def run_bench_dialog(pilot, app, preset: str, **fields: str):
    dialog = bench_dialog(preset)
    app.push_screen(dialog, app.answers.append)
    await pilot.pause()
    for name, value in fields.items():
        box = dialog.query_one(f"#bench-{name}", Input)
        box.focus()
        await pilot.press("ctrl+a", *value) if value else None
    return dialog


async def test_the_benchmark_dialog_offers_the_last_values_after_a_restart():
    first = Host()
    async with first.run_test(size=(120, 36)) as pilot:
        dialog = await run_bench_dialog(pilot, first, "tiny", concurrency="8", overrides="num_prompts=40")
        assert "values: from preset tiny (none used on dlg-n yet)" in screen_text(first)
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: first.answers != [])
    stored = json.loads(memory_path().read_text())
    assert stored["entries"]["bench|tiny|dlg-n"]["values"]["bench-concurrency"] == "8"

    again = Host()  # a new console over the same data folder
    async with again.run_test(size=(120, 36)) as pilot:
        dialog = await run_bench_dialog(pilot, again, "tiny")
        assert typed(dialog, "bench-concurrency") == "8" and typed(dialog, "bench-overrides") == "num_prompts=40"
        text = screen_text(again)
        assert "values: last used " in text and "for tiny on dlg-n (Concurrency, Overrides)" in text
        # another preset: nothing used with it here, so its own values (blank fields), said so
        dialog.query_one("#bench-preset", Select).value = "random-8192-1024-c64"
        await pilot.pause()
        assert typed(dialog, "bench-concurrency") == "" and typed(dialog, "bench-overrides") == ""
        assert "values: from preset random-8192-1024-c64 (none used on dlg-n yet)" in screen_text(again)
        # back: the remembered values again; a value the person typed meanwhile stays theirs
        dialog.query_one("#bench-label", Input).value = "mine"
        dialog.query_one("#bench-preset", Select).value = "tiny"
        await pilot.pause()
        assert typed(dialog, "bench-concurrency") == "8" and typed(dialog, "bench-label") == "mine"


async def test_a_corrupt_memory_file_is_ignored_with_one_warning():
    path = memory_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"entries": {"bench|tiny|dlg-n": "not an entry"')  # cut short
    form_memory._WARNED.clear()
    app = Host()
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        dialog = await run_bench_dialog(pilot, app, "tiny")
        assert typed(dialog, "bench-concurrency") == ""
        dialog.action_cancel()
        await pilot.pause()
        await run_bench_dialog(pilot, app, "tiny")  # opened again: not said again
        warnings = [n for n in app._notifications if "form-memory.json: ignored" in str(n.message)]
        assert len(warnings) == 1
        await pilot.press("ctrl+s")  # and a run still starts, and is remembered in a good file
        assert await wait_for(pilot, lambda: app.answers != [])
    assert FormMemory().recall("bench", "tiny", "dlg-n") is not None


def test_the_memory_is_bounded_and_keeps_no_secrets(tmp_path):
    memory = FormMemory(tmp_path / "m.json")
    for i in range(form_memory.MAX_ENTRIES + 5):
        memory.remember("bench", f"p{i}", "n", {"bench-env": "HF_TOKEN=hf_secret MY_FLAG=1", "x": "y" * 5000})
    again = FormMemory(tmp_path / "m.json")
    assert again.recall("bench", "p0", "n") is None and again.recall("bench", f"p{form_memory.MAX_ENTRIES}", "n")
    kept = again.recall("bench", "p3", "n") or again.recall("bench", "p10", "n")
    assert kept is not None and kept.values["bench-env"] == "MY_FLAG=1" and len(kept.values["x"]) == 1000
    assert "hf_secret" not in (tmp_path / "m.json").read_text()
    assert os.path.getsize(tmp_path / "m.json") < form_memory.MAX_BYTES


class Accepting(StaticInstances):
    """A recorded fleet that takes a start (the view it would be)."""

    async def start(self, node, preset, *, gpus, snapshot=None, port=None, name=None, overrides=None, extra_env=None):
        if not gpus:
            raise InstanceError(f"{node.name}: no GPUs")
        view = InstanceView(
            node=node.name, name=name or "x", state=InstanceState.STARTING, port=port or 8000, gpus=tuple(gpus)
        )
        self.views.append(view)
        return view


async def open_start_dialog(pilot, app) -> StartDialog:
    table = app.screen.query_one(GpuTable)
    assert await wait_for(pilot, lambda: len(table.rows) == 9)
    await pilot.press("down", "s")
    assert await wait_for(pilot, lambda: isinstance(app.screen, StartDialog))
    await pilot.pause()
    return app.screen


async def test_the_start_dialog_remembers_per_preset_and_node(live_app):
    first = live_app(("mi300x-spx",), presets=True, instances=Accepting())
    async with first.run_test(size=(120, 36), notifications=True) as pilot:
        dialog = await open_start_dialog(pilot, first)
        assert typed(dialog, "start-overrides") == ""
        dialog.query_one("#start-overrides", Input).focus()
        await pilot.press(*"max_model_len=4096")
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: not isinstance(first.screen, StartDialog), timeout=10)
    again = live_app(("mi300x-spx",), presets=True, instances=Accepting())  # after a restart
    async with again.run_test(size=(120, 36), notifications=True) as pilot:
        dialog = await open_start_dialog(pilot, again)
        assert typed(dialog, "start-overrides") == "max_model_len=4096"  # the overrides used last time, and when
        assert "values: last used " in screen_text(again) and "on mi300x-spx (Overrides)" in screen_text(again)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_find_max_fields_are_drawn_and_typing_changes_only_the_field_typed_in(size):
    app = Host()
    async with app.run_test(size=size) as pilot:
        dialog = FindMaxDialog(BENCH["tiny"], VIEW, cursor_blink=False)
        app.push_screen(dialog, app.answers.append)
        await pilot.pause()
        await pilot.press(*"p99_ttft_ms=500")
        for _ in range(4):  # By, Start, Max, Prompts
            await pilot.press("tab")
        assert app.focused is dialog.query_one("#find-max-prompts")
        await pilot.press("1", "2")
        await pilot.pause()
        assert typed(dialog, "find-max-budget") == "p99_ttft_ms=500" and typed(dialog, "find-max-prompts") == "12"
        line = next(ln for ln in screen_text(app).splitlines() if "Prompts" in ln)
        assert "12" in line, screen_text(app)  # the value is drawn, not a squashed border
        assert dialog.query_one("#find-max-prompts").region.height >= 1
        # back to the Budget: a key typed there adds to it, never wipes what is in it
        for _ in range(4):
            await pilot.press("shift+tab")
        assert app.focused is dialog.query_one("#find-max-budget")
        await pilot.press("0")
        assert typed(dialog, "find-max-budget") == "p99_ttft_ms=5000" and typed(dialog, "find-max-prompts") == "12"
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: app.answers != [])
        spec, prompts = app.answers[0]
        assert prompts == 12 and spec.budget.limits == (("ttft", "p99", 5000.0),)


async def test_find_max_remembers_its_budget_for_the_preset_and_node():
    first = Host()
    async with first.run_test(size=(120, 36)) as pilot:
        first.push_screen(FindMaxDialog(BENCH["tiny"], VIEW, cursor_blink=False), first.answers.append)
        await pilot.pause()
        await pilot.press(*"p99_itl_ms=50", "ctrl+s")
        assert await wait_for(pilot, lambda: first.answers != [])
    again = Host()
    async with again.run_test(size=(120, 36)) as pilot:
        dialog = FindMaxDialog(BENCH["tiny"], VIEW, cursor_blink=False)
        again.push_screen(dialog, again.answers.append)
        await pilot.pause()
        assert typed(dialog, "find-max-budget") == "p99_itl_ms=50"
        assert "last used " in screen_text(again) and "for tiny on dlg-n (Budget, By)" in screen_text(again)


def test_memory_lives_beside_the_results_store(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "demo"))
    assert memory_path() == Path(tmp_path / "demo" / "form-memory.json")


async def test_the_benchmark_dialog_opens_on_the_preset_last_run_on_the_node():
    """U2: after running `tiny` the dialog reopened on the first (500-prompt) preset, and ^f then
    searched that one; it opens on the preset last run on the node, across a restart."""
    from console.ui.screens.bench_start import StartBenchDialog

    presets = tuple(BENCH.values())
    assert presets[0].name != "tiny"  # the test means something only if tiny is not the default
    first = Host()
    async with first.run_test(size=(120, 36)) as pilot:
        await run_bench_dialog(pilot, first, "tiny")
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: first.answers != [])
    again = Host()  # a new console over the same data folder; the dialog opened with no preset named
    async with again.run_test(size=(120, 36)) as pilot:
        dialog = StartBenchDialog(presets, [VIEW], cursor_blink=False)
        again.push_screen(dialog, again.answers.append)
        await pilot.pause()
        assert dialog.query_one("#bench-preset", Select).value == "tiny"
        assert "for tiny on dlg-n" in screen_text(again)
    # another node has its own: nothing was run there, so the first preset
    other = StartBenchDialog(presets, [dataclasses.replace(VIEW, node="dlg-other")])
    assert other.preset_name == presets[0].name
