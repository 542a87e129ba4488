"""Issue U2: a find-max search run for real on a simulated node (fake `vllm serve` and
`vllm bench serve`) shows each point's tokens per joule, as a single run does, and its
answer is no second run with a model '-': it names the point's run and its model; each
point and the answer are on the events timeline."""

from __future__ import annotations

import pytest

from console.core.bench.find_max import SearchSpec, parse_budget
from console.services.events import EventLog
from console.services.results import ResultStore
from console.services.runs.find_max import FindMaxService
from console.services.transports import TransportPool
from console.ui.model.history_view import run_cells
from console.ui.screens.find_max import FindMaxScreen

from ..services.runs.test_find_max_service import start_instance
from .conftest import screen_text, wait_for
from .test_find_max_ui import BENCH_TINY, Host, table_rows


@pytest.mark.timeout(180)
async def test_points_show_tokens_per_joule_and_the_answer_names_its_model(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    node = sim_node("fme")
    pool = TransportPool()
    store = ResultStore(tmp_path / "data" / "results")
    log = EventLog(tmp_path / "events.jsonl")
    svc, view = await start_instance(pool, node, "fme")
    try:
        spec = SearchSpec(parse_budget("p99_e2el_ms=60000"), start=1, max_load=2)
        service = FindMaxService(pool, store, timeline=log.append)
        # 30 prompts a point: a few of the agent's 1 s samples each, so its energy is measured
        screen = FindMaxScreen(node, view, BENCH_TINY, spec, service=service, prompts=30, redraw_interval=0.05)
        app = Host(screen)
        async with app.run_test(size=(130, 36)) as pilot:
            assert await wait_for(pilot, lambda: screen.view.answer is not None or screen.view.failed, 150)
            await pilot.pause(0.2)
            rows = table_rows(screen)
            text = screen_text(app)
    finally:
        await svc.stop(node, "fme", int_timeout=5)
        await pool.close()
    assert screen.view.failed is None
    assert [r[0] for r in rows] == ["1", "2"]
    tokens_per_joule = [r[8] for r in rows]
    assert "unknown" not in tokens_per_joule and all(float(v) > 0 for v in tokens_per_joule), rows
    assert "tokens/J unknown" not in text and "tokens/J " in text
    # the answer in the history: the point's model, and the run it reports
    answer = screen.view.answer
    stored = store.get(answer.answer_id)
    assert stored.context["find_max_run"] == answer.point_ids[-1]
    assert (
        run_cells(stored)["model"] != "-" and run_cells(stored)["model"] == run_cells(store.get(rows[-1][9]))["model"]
    )
    kinds = [e.kind for e in reversed(log.read())]
    assert kinds == ["findmax.point", "findmax.point", "findmax.answer"]
