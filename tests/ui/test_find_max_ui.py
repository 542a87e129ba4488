"""The find-max screen: started from the benchmark dialog (ctrl+f, then the budget), the
search drawn live: each point as it is measured (met / broke, its figures, its run id),
the bracket, the answer; a search that fails says so in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input

from console.core.bench.find_max import FindMax, Run, SearchSpec, parse_budget
from console.core.model import NodeSpec
from console.core.profiles import load_profile
from console.services.instances import InstanceState, InstanceView
from console.services.runs.find_max import (
    FindMaxAnswer,
    FindMaxError,
    FindMaxFinished,
    FindMaxPointMeasured,
    FindMaxPointStarted,
    FindMaxStarted,
)
from console.ui.model.find_max_view import FindMaxView, read_search
from console.ui.screens import find_max as fm_screen
from console.ui.screens.bench_start import StartBenchDialog
from console.ui.screens.find_max import FindMaxDialog, FindMaxScreen

from .conftest import screen_text, wait_for

PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"
PROFILE = load_profile([PRESETS])
BENCH_TINY = next(p for p in PROFILE.bench_presets if p.name == "tiny")
NODE = NodeSpec(name="fm-n", host="localhost", transport="local")
VIEW = InstanceView(
    node="fm-n", name="a", state=InstanceState.READY, port=8000, gpus=(1,), model="tiny", served_models=("tiny",)
)
# p99 TTFT by concurrency, as a server might answer: the budget (500 ms) breaks between 8 and 16
TTFT = {1: 40.0, 2: 60.0, 4: 110.0, 8: 300.0, 16: 900.0, 12: 620.0, 10: 700.0, 9: 560.0}


class FakeService:
    """Runs the real search (core's FindMax) over made-up figures, one point every `pause` s,
    emitting the service's events; `fail_at` ends it with FindMaxError at that load."""

    def __init__(self, pause: float = 0.05, fail_at: float | None = None) -> None:
        self.pause = pause
        self.fail_at = fail_at
        self.gate = asyncio.Event()
        self.gate.set()

    async def search_instance(self, node, view, preset, spec, *, on_event, **_kw) -> FindMaxAnswer:
        on_event(FindMaxStarted("s1", f"instance {view.name} on {node.name}", spec, preset.name))
        search = FindMax(spec)
        ids: list[str] = []
        while (load := search.next_load()) is not None:
            on_event(FindMaxPointStarted(load, 1, search.runs_used))
            await self.gate.wait()
            await asyncio.sleep(self.pause)
            if load == self.fail_at:
                raise FindMaxError(f"find-max at concurrency {int(load)}: the client wrote no result")
            rid = f"run-{len(ids) + 1}"
            ids.append(rid)
            values = {"p99_ttft_ms": TTFT[int(load)], "output_throughput": 100.0 * load, "prefix_cache_hit_pct": 42.0}
            point = search.feed(load, Run(values=values, run_id=rid))
            met = [p.load for p in search.points() if p.meets]
            broke = [p.load for p in search.points() if p.meets is False]
            on_event(
                FindMaxPointMeasured(
                    load, rid, point, max(met) if met else None, min(broke) if broke else None, search.runs_used
                )
            )
        answer = FindMaxAnswer("s1", "t", spec.budget, preset.name, search.outcome(), "answer-1", tuple(ids))
        on_event(FindMaxFinished(answer))
        return answer


class Host(App):
    def __init__(self, first=None) -> None:
        super().__init__()
        self.first = first
        self.cursor_blink = False
        self.profile = PROFILE.__class__(nodes=(NODE,), bench_presets=PROFILE.bench_presets)
        self.results: list = []

    def on_mount(self) -> None:
        if self.first is not None:
            self.push_screen(self.first)


def spec(budget: str = "p99_ttft_ms=500", **kw) -> SearchSpec:
    return SearchSpec(parse_budget(budget), max_load=kw.pop("max_load", 64), repeat_band=0.0, **kw)


def table_rows(screen: FindMaxScreen) -> list[list[str]]:
    table = screen.query_one("#find-max-points", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_points_are_drawn_as_they_arrive_then_the_answer():
    service = FakeService()
    service.gate.clear()  # hold the search at its first point
    screen = FindMaxScreen(NODE, VIEW, BENCH_TINY, spec(), service=service, redraw_interval=0.02)  # type: ignore[arg-type]
    app = Host(screen)
    async with app.run_test(size=(130, 36)) as pilot:
        assert await wait_for(pilot, lambda: "running concurrency 1" in screen_text(app))
        assert table_rows(screen) == []
        seen_counts = []
        service.gate.set()
        for _ in range(400):
            await pilot.pause(0.02)
            seen_counts.append(len(table_rows(screen)))
            if screen.view.answer is not None:
                break
        await pilot.pause(0.1)
        text = screen_text(app)
        rows = table_rows(screen)
    # drawn one point at a time while the search ran, not all at the end
    grew = sorted(set(seen_counts))
    assert grew[0] == 0 and len(grew) >= 4 and max(grew) <= len(rows) == 8
    loads = [r[0] for r in rows]
    assert loads == ["1", "2", "4", "8", "9", "10", "12", "16"]  # grew to 16, bisected 8..16
    verdicts = dict((r[0], r[2]) for r in rows)
    assert verdicts["8"] == "meets" and verdicts["9"] == "breaks" and verdicts["16"] == "breaks"
    assert rows[0][9] == "run-1" and rows[0][8] == "unknown"  # tokens/J: none recorded
    assert "meets up to 8 · breaks from 9 · 8 runs" in text
    assert "found: highest concurrency within the budget: 8; 9 breaks it" in text
    assert "tokens/J unknown" in text and "stored as answer-1 · 8 points in history" in text
    assert " · cached 42 %" in text  # B2: the answer's prefix-cache share
    # the ladder: met loads ●, broken ones ✕, on a log axis from 1 to the search's maximum
    assert "●·········●·········●·········●✕" in text and "  1 … 64" in text


async def test_a_search_that_fails_says_why_in_one_line():
    screen = FindMaxScreen(
        NODE,
        VIEW,
        BENCH_TINY,
        spec(),
        service=FakeService(fail_at=4),  # type: ignore[arg-type]
        redraw_interval=0.02,
    )
    app = Host(screen)
    async with app.run_test(size=(130, 36)) as pilot:
        assert await wait_for(pilot, lambda: screen.view.failed is not None)
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "failed: find-max at concurrency 4: the client wrote no result" in text
        assert [r[0] for r in table_rows(screen)] == ["1", "2"]  # what was measured stays shown
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_ctrl_f_in_the_benchmark_dialog_asks_the_budget_and_starts_the_search(monkeypatch):
    started: list[FakeService] = []

    def fake_service(pool, store, **_kw):  # the timeline hook too
        started.append(FakeService())
        return started[-1]

    monkeypatch.setattr(fm_screen, "FindMaxService", fake_service)
    monkeypatch.setattr("console.services.results.ResultStore", lambda: None)
    app = Host()
    async with app.run_test(size=(130, 40)) as pilot:
        dialog = StartBenchDialog(PROFILE.bench_presets, [VIEW], preset="tiny", cursor_blink=False)
        app.push_screen(dialog, app.results.append)
        await pilot.pause()
        dialog.query_one("#bench-overrides", Input).value = "num_prompts=8"
        await pilot.press("ctrl+f")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FindMaxDialog))
        ask = app.screen
        ask.query_one("#find-max-budget", Input).value = "p99_tfft_ms=500"
        await pilot.press("ctrl+s")
        await pilot.pause()
        error = str(ask.query_one("#find-max-error").render())
        assert "budget key 'p99_tfft_ms'" in error and app.screen is ask  # one line, nothing lost
        ask.query_one("#find-max-budget", Input).value = "p99_ttft_ms=500"
        ask.query_one("#find-max-max", Input).value = "16"
        ask.query_one("#find-max-budget", Input).focus()
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, FindMaxScreen))
        screen = app.screen
        assert isinstance(screen, FindMaxScreen)
        assert screen.overrides == {"num_prompts": "8"} and screen.spec.top == 16 and screen.instance.name == "a"
        assert await wait_for(pilot, lambda: screen.view.answer is not None)
        assert started and app.results == [None]  # the dialog ran nothing itself


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"budget": ""}, "budget: empty"),
        ({"budget": "p99_ttft_ms=abc"}, "budget key 'p99_ttft_ms'"),
        ({"budget": "p99_ttft_ms=500", "start": "-1"}, "start: expected a load > 0"),
        ({"budget": "p99_ttft_ms=500", "start": "1.5"}, "start: a concurrency is a whole number"),
        ({"budget": "p99_ttft_ms=500", "start": "8", "top": "4"}, "max: expected a load >= start"),
        ({"budget": "p99_ttft_ms=500", "prompts": "0"}, "prompts: expected a whole number"),
    ],
)
def test_the_form_refuses_bad_values_naming_the_field(fields, words):
    from console.ui.model.bench_form import FormError

    budget = fields.pop("budget")
    with pytest.raises(FormError) as info:
        read_search(budget, **fields)
    assert words in str(info.value)


def test_the_view_ignores_what_it_does_not_draw():
    view = FindMaxView()
    assert not view.apply(object()) and view.running and view.ladder() == ""
