"""The offline-benchmark dialog and screen: the form's one-line refusals, the
request it returns, and a run on the simulated node shown and stored."""

from __future__ import annotations

import json

import pytest
from textual.app import App
from textual.widgets import Input, Static

from console.core.bench.offline import PRESETS_PATH, load_offline_presets
from console.core.results.reference import load_reference_numbers
from console.services.results import ResultStore
from console.services.runs.offline import OfflineRunner
from console.services.transports import TransportPool
from console.ui.model.compare_view import REFERENCE_PATH
from console.ui.model.offline_form import check_offline_request
from console.ui.model.start_form import FormError
from console.ui.screens.offline_bench import OfflineBenchDialog, OfflineBenchScreen

from .conftest import wait_for

PRESETS = load_offline_presets(PRESETS_PATH)
KEY = "latency:seed000-405b-fp8-tp8"


@pytest.mark.parametrize(
    ("gpus", "overrides", "message"),
    [
        ("", "", "GPUs: give the GPU indices, e.g. 0,1,2,3 (the GPUs must be free)"),
        ("0,x", "", "GPUs: '0,x' is not a list of GPU indices (e.g. 0,1)"),
        ("0,1", "tp=4", "GPUs: TP 4 needs 4 GPUs, 2 given"),
        ("0", "batch_size=big", "overrides: batch_size=big: expected a positive integer"),
        ("0", "colour=red", "overrides: colour: unknown key"),
    ],
)
def test_form_refuses_in_one_line(gpus, overrides, message):
    with pytest.raises(FormError) as err:
        check_offline_request("n", KEY, PRESETS, gpus, overrides, "")
    assert str(err.value).startswith(message)


def test_form_request_takes_tp_from_the_gpus():
    req = check_offline_request("n", KEY, PRESETS, "4,5,6,7", "input_len=256", " mine ")
    assert req.gpus == (4, 5, 6, 7) and req.preset.tp == 4 and req.preset.input_len == 256 and req.label == "mine"


class Host(App):
    def __init__(self, first) -> None:
        super().__init__()
        self.first = first
        self.cursor_blink = False
        self.results: list = []

    def on_mount(self) -> None:
        self.push_screen(self.first, self.results.append)


async def test_dialog_returns_the_request():
    dialog = OfflineBenchDialog("sim-a", PRESETS, cursor_blink=False)
    app = Host(dialog)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        dialog.query_one("#offline-gpus", Input).value = "0,1"
        await pilot.press("ctrl+s")
        await pilot.pause()
        dialog_gone = not dialog.is_attached
    assert dialog_gone
    [request] = app.results
    assert request.node == "sim-a" and request.gpus == (0, 1) and request.preset.kind == "latency"


async def test_screen_runs_shows_and_stores(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))
    node = sim_node("ob-ui", state_dir=str(tmp_path / "ob"))
    request = check_offline_request(node.name, KEY, PRESETS, "0,1,2,3,4,5,6,7", "num_iters=6", "")
    pool = TransportPool()
    store = ResultStore()
    screen = OfflineBenchScreen(
        node,
        request,
        runner=OfflineRunner(pool),
        store=store,
        reference_rows=load_reference_numbers(REFERENCE_PATH),
    )
    try:
        async with App().run_test(size=(120, 36)) as pilot:
            pilot.app.push_screen(screen)
            assert await wait_for(pilot, lambda: screen.stored_id is not None, timeout=60)
            await pilot.pause()
            result = str(screen.query_one("#offline-result", Static).render())
            assert "avg latency" in result and "(6 iterations)" in result
            assert f"stored as {screen.stored_id}" in result
            # seed 000's table row for the same model, TP 8, batch 1, 128/2048
            assert "seed 000 reference (MI300X TP8): 48.453 latency_s" in result
            assert "bench " in str(screen.query_one("#offline-progress", Static).render())
    finally:
        await pool.close()
    stored = store.get(screen.stored_id)
    assert stored.context["run_kind"] == "latency" and stored.metrics["latency_s"] == stored.result["avg_latency"]


async def test_a_result_the_store_cannot_take_is_kept_on_the_node(sim_node, tmp_path, monkeypatch):
    """The store refuses (its folder is a file): the screen says so in one line naming where the
    run stays and how `results fetch` stores it, and the run is kept whole beside its result."""
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(blocker))
    node = sim_node("ob-ui", state_dir=str(tmp_path / "ob"))
    request = check_offline_request(node.name, KEY, PRESETS, "0,1", "num_iters=6", "kept")
    pool = TransportPool()
    screen = OfflineBenchScreen(node, request, runner=OfflineRunner(pool), store=ResultStore())
    try:
        async with App().run_test(size=(160, 36)) as pilot:
            pilot.app.push_screen(screen)
            await pilot.pause()

            def status() -> str:
                return " ".join(str(screen.query_one("#offline-status", Static).render()).split())

            assert await wait_for(pilot, lambda: "not stored" in status(), timeout=60)
            text = status()
    finally:
        await pool.close()
    run = screen.outcome.run
    assert "a file is in the way of the results folder" in text
    assert f"results fetch {run} --node ob-ui" in text
    kept = tmp_path / "ob" / "runs" / run / "console-run.json"
    doc = json.loads(kept.read_text())
    assert doc["label"] == "kept" and doc["context"]["status"] == "ok" and doc["context"]["offline_run"] == run
