"""Placeholders that are examples say so (issue U2): the find-max Budget's example drawn as
`p99_ttft_ms=2000,p99_itl_ms=50` looked like a value, and ^s then answered 'empty'."""

from __future__ import annotations

from console.ui.screens.bench_start import StartBenchDialog
from console.ui.screens.find_max import FindMaxDialog

from .conftest import screen_text, wait_for
from .test_find_max_ui import BENCH_TINY, PROFILE, VIEW, Host


async def test_the_find_max_budget_example_reads_as_an_example():
    app = Host()
    async with app.run_test(size=(130, 40)) as pilot:
        app.push_screen(FindMaxDialog(BENCH_TINY, VIEW, cursor_blink=False))
        assert await wait_for(pilot, lambda: "Budget" in screen_text(app))
        text = screen_text(app)
        assert "e.g. p99_ttft_ms=2000,p99_itl_ms=50" in text


async def test_the_bench_dialog_overrides_example_reads_as_an_example():
    app = Host()
    async with app.run_test(size=(130, 40)) as pilot:
        app.push_screen(StartBenchDialog(PROFILE.bench_presets, [VIEW], preset="tiny", cursor_blink=False))
        assert await wait_for(pilot, lambda: "Overrides" in screen_text(app))
        assert "e.g. num_prompts=50 request_rate=4" in screen_text(app)
