"""Issue U2: runs of one preset at different loads no longer look alike in the history: the
Setup column starts with what differs (concurrency, rate, prompts), so a cut end drops only
what they share (the preset's name and dataset)."""

from __future__ import annotations

import json

from console.core.results.build import run_from_console
from console.services.history import History
from console.ui.model.history_view import short_setup

from .conftest import screen_text, wait_for
from .test_history_ui import ROOT, HistoryScreen, Host

RESULT = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())


async def test_runs_of_one_preset_are_told_apart_by_their_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    store = History().runs  # the data dir's store, which the screen reads
    loads = ((8, None, 500), (64, None, 500), (64, None, 2000), (None, 2.0, 500))
    for i, (conc, rate, prompts) in enumerate(loads):
        setup = {"dataset": "random", "input_len": 4096, "output_len": 512, "num_prompts": prompts}
        setup |= {"max_concurrency": conc} if conc else {"request_rate": rate}
        result = {**RESULT, "max_concurrency": conc, "request_rate": rate or "inf", "num_prompts": prompts}
        context = {"node": "mi300x-spx", "bench_preset": "random-4096-512", "gpu_model": "AMD Instinct MI300X"}
        store.save(run_from_console(context, result, setup=setup, created=1_800_000_000.0 + i))
    app = Host(HistoryScreen)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: getattr(screen, "loaded", False) and len(screen.runs) == 4)
        await pilot.pause()
        table = screen.table
        keys = [c.key for c in table.columns]
        cells = [str(table.get_row_at(r)[keys.index("setup")]) for r in range(table.row_count)]
        text = screen_text(app)
    # newest first; each cell starts with its own load and prompt count
    assert [c.split(" random")[0] for c in cells] == ["rate 2 n500", "c64 n2000", "c64 n500", "c8 n500"], cells
    assert len(set(cells)) == 4
    for cell in cells:
        assert cell in text
    # narrower still, the load and the prompts stay whole; the preset is what gets cut
    assert short_setup("c64 n2000 random-4096-512: random 4096/512", 16) == "c64 n2000 rando…"
    assert short_setup("rate 2 n500 random-4096-512: random 4096/512", 12) == "rate 2 n500…"
