"""A find-max answer is a mark on its point's row, not a row of its own (issue U2): the demo's
history showed two identical c8 rows, the answer's with tok/J `-`. The answer record stays
stored (results show, find-max's tests); `results list` folds it the same way."""

from __future__ import annotations

import json
from pathlib import Path

from console.cli import entry
from console.core.bench.find_max import FindMax, Run, SearchSpec, parse_budget
from console.core.results.build import run_from_console
from console.services.history import History
from console.services.results import ResultStore
from console.services.runs.find_max import FindMaxAnswer, answer_record
from console.services.store.runs import RunTable
from console.ui.screens.history import HistoryScreen

from .conftest import wait_for
from .test_find_max_ui import BENCH_TINY
from .test_history_ui import Host

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "bench_result.json").read_text())


def stored_search(store: ResultStore | RunTable) -> tuple[list[str], str]:
    """Points at c1, c2, c4, c8 (c8 the answer's) and the answer, stored as the service stores them."""
    ids = []
    for c, created in ((1, 1000.0), (2, 1010.0), (4, 1020.0), (8, 1030.0)):
        ctx = {"node": "cpu-1", "find_max": "s1", "bench_preset": "tiny"}
        ids.append(store.save(run_from_console(ctx, {**DATA, "max_concurrency": c}, created=created)))
    spec = SearchSpec(parse_budget("p99_ttft_ms=500"), max_load=8, repeat_band=0.0)
    search = FindMax(spec)
    for rid, c in zip(ids, (1, 2, 4, 8)):
        assert search.next_load() == c
        search.feed(c, Run(values={"p99_ttft_ms": 10.0 * c}, run_id=rid))
    answer = FindMaxAnswer("s1", "t", spec.budget, "tiny", search.outcome(), None, tuple(ids))
    point = store.get(ids[-1])
    record = answer_record(answer, context={"node": "cpu-1"}, preset=BENCH_TINY, created=1040.0, point_run=point)
    return ids, store.save(record)


async def test_history_marks_the_answer_on_its_point_row_and_lists_it_once(tmp_path):
    history = History(data_dir=tmp_path)
    store = history.runs
    ids, answer_id = stored_search(store)
    app = Host(lambda: HistoryScreen(history))
    async with app.run_test(size=(160, 30)) as pilot:
        screen = app.screen
        assert await wait_for(pilot, lambda: screen.loaded)
        await pilot.pause()
        table = screen.table
        shown = [r.id for r in screen.shown]
        assert answer_id not in shown and sorted(shown) == sorted(ids)  # no second c8 row
        setups = [str(table.get_row(i)[[k for k, _ in screen.columns].index("setup")]) for i in ids]
        assert setups[-1].startswith("★ find-max max c8 · c8")
        assert not any("★" in s for s in setups[:-1])
    assert store.get(answer_id).context["find_max_run"] == ids[-1]  # the answer stays stored


def test_results_list_folds_the_answer_the_same_way(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path))
    ids, answer_id = stored_search(ResultStore(tmp_path / "results"))
    assert entry.main(["results", "list"]) == 0
    out = capsys.readouterr().out
    assert answer_id not in out and all(i in out for i in ids)
    [row] = [line for line in out.splitlines() if ids[-1] in line]
    assert "★ find-max max c8" in row
