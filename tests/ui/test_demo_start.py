"""A newcomer's first demo: a living fleet at once (two instances serving, one of them on a CPX
partition; stored results in history; versions in the node headers).

The real app over the real agent and the simulated nodes of profiles/demo.toml (LocalTransport),
with HOME and the data folder in the test's folder; everything the demo started is stopped at the
end through its lifeline, as the console does on quit.
"""

from __future__ import annotations

import json

import pytest

from console.cli.common import PRESETS_PATH
from console.core.profiles import demo_profile_path, load_profile
from console.core.results.record import run_from_dict
from console.services import demo
from console.services.instances import InstanceState
from console.services.results import DATA_DIR_ENV, ResultStore
from console.ui.app import ConsoleApp
from console.ui.screens.history import HistoryScreen
from console.ui.screens.instances import InstancesScreen

from .conftest import screen_text, wait_for


@pytest.fixture
def demo_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(demo.ENV, "")  # restored at the end: claim_lifeline writes os.environ
    token = demo.claim_lifeline()
    yield tmp_path
    demo.stop_bound(token)


@pytest.mark.timeout(90)
async def test_the_demo_opens_on_a_living_fleet(demo_env):
    folder = demo.use_demo_data_dir()
    assert folder == demo_env / "data" / "demo"  # never the user's real history
    stored = demo.seed_history()
    assert stored >= 5
    profile = load_profile([PRESETS_PATH, demo_profile_path()])
    app = ConsoleApp(profile, interval=0.5, notify_health=False, cursor_blink=False, demo_instances=demo.DEMO_INSTANCES)
    async with app.run_test(size=(160, 50)) as pilot:
        # History has something to show from the first second.
        app.action_history()
        assert await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen))
        # the seeds' published rows: labelled by their source, below the runs (issue U)
        assert await wait_for(pilot, lambda: "ref seed 004" in screen_text(app), timeout=10)
        # the cursor's run says what it is; the table lists the rest (its detail is drawn after
        # the page is read: waited for, a loaded machine draws it a frame later)
        wanted = ("CPX/NPS1", "SPX/NPS1", "c128 n1024 sharegpt")
        assert await wait_for(pilot, lambda: all(w in screen_text(app) for w in wanted), timeout=10), screen_text(app)
        app.pop_screen()

        # Versions in the node headers, not "ROCm ?".
        assert await wait_for(pilot, lambda: "ROCm 7.0.2" in screen_text(app), timeout=20), screen_text(app)
        text = screen_text(app)
        assert "ROCm ?" not in text and "vLLM 0.32.0+sim" in text

        # The instances: listed as soon as the nodes are live, then serving.
        def on(node):
            return [v for v in app.board.views() if v.node == node]

        assert await wait_for(pilot, lambda: on("mi300x-spx") and on("mi300x-cpx"), timeout=20)
        app.action_instances()
        assert await wait_for(pilot, lambda: isinstance(app.screen, InstancesScreen))
        assert await wait_for(pilot, lambda: "llama-3.1-8b-fp8-cpx-g1" in screen_text(app))
        text = screen_text(app)
        assert "llama-3.1-8b-fp8-g4" in text and "llama-3.1-8b-fp8-cpx-g1" in text

        def ready():
            return [v.node for v in app.board.views() if v.state == InstanceState.READY]

        assert await wait_for(pilot, lambda: sorted(ready()) == ["mi300x-cpx", "mi300x-spx"], timeout=40), [
            (v.node, v.name, v.state, v.reason) for v in app.board.views()
        ]
        ports = {v.port for v in app.board.views()}
        assert len(ports) == 2  # two nodes on one machine never pick the same port


def test_seeded_history_is_honestly_labelled_and_fills_only_an_empty_store(tmp_path):
    store = ResultStore(tmp_path / "results")
    count = demo.seed_history(store)
    runs = [store.get(i) for i in store.ids()]
    assert len(runs) == count
    recorded = [r for r in runs if r.origin == "console"]
    references = [r for r in runs if r.label and r.label.startswith("reference:")]
    assert len(recorded) >= 3 and len(references) == demo.REFERENCE_ROWS
    for run in recorded:  # what the simulated client really measured, said so
        assert "simulated" in run.label and run.metrics["completed"] > 0 and run.context["node"]
        assert run.result is not None and run.result.get("completed") == run.metrics["completed"]
    for run in references:
        assert run.node is None and "not run here" in run.label and run.metrics
    assert any(r.context.get("compute_partition") == "CPX" for r in recorded)
    assert demo.seed_history(store) == 0  # not twice
    for path in demo.SEED_RESULTS_DIR.glob("*.json"):  # the shipped files are stored runs
        run_from_dict(json.loads(path.read_text()))


def test_simulated_nodes_report_the_simulators_vllm_version():
    from console.sim import amdsmi as sim_amdsmi
    from console.sim.vllm import constants

    assert sim_amdsmi.SIM_VLLM_VERSION == constants.VERSION


def test_free_local_port_skips_busy_and_just_handed_out_ports():
    import socket

    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        first = demo.free_local_port(taken, taken + 50)
        assert first is not None and first != taken
        second = demo.free_local_port(taken, taken + 50)
        assert second is not None and second not in (taken, first)


def test_the_demo_data_dir_name_matches_the_result_store():
    from console.services import results

    assert demo.DATA_DIR_ENV == results.DATA_DIR_ENV
