"""Dialogs never start costly work by accident (issue U2): Enter in a field moves to the next
field, only the action key (ctrl+s) or the focused action button starts; a long run says so
and asks first; the key bar under a dialog shows the dialog's keys, not the fleet's."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Button, Input

from console.core.bench.offline import PRESETS_PATH, load_offline_presets
from console.core.model import NodeSpec, SimulateSpec
from console.core.profiles import load_profile
from console.services.instances import InstanceState, InstanceView
from console.ui.model.bench_form import BenchRequest, PastRun, estimate_run
from console.ui.screens.bench_start import StartBenchDialog
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.fault_dialog import FaultDialog
from console.ui.screens.find_max import FindMaxDialog
from console.ui.screens.group_bench import GroupBenchScreen
from console.ui.screens.offline_bench import OfflineBenchDialog
from console.ui.screens.start_dialog import StartDialog
from console.ui.widgets.gpu_table import GpuTable

from .conftest import screen_text, wait_for

PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"
PROFILE = load_profile([PRESETS])
BENCH = {p.name: p for p in PROFILE.bench_presets}
LONG = "random-4096-512-rate1"  # 500 prompts at 1 request/s: at least 8:20
VIEW = InstanceView(
    node="dlg-n", name="a", state=InstanceState.READY, port=8000, gpus=(1,), model="tiny", served_models=("tiny",)
)


class Host(App):
    """Holds one dialog; what it answers lands in `answers`."""

    def __init__(self) -> None:
        super().__init__()
        self.cursor_blink = False
        self.profile = PROFILE.__class__(
            nodes=(NodeSpec(name="dlg-n", host="localhost"),), bench_presets=BENCH.values()
        )
        self.answers: list = []


def last_line(app) -> str:
    return screen_text(app).rstrip("\n").splitlines()[-1]


async def enter_in_every_field(pilot, app, dialog) -> None:
    """Focus each text field in turn and press Enter in it, as a person finishing a value."""
    for box in list(dialog.query(Input)):
        if not box.display:
            continue
        box.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog, f"Enter in {box.id} closed the dialog"


def bench_dialog(preset: str = "tiny") -> StartBenchDialog:
    return StartBenchDialog(tuple(BENCH.values()), [VIEW], preset=preset, cursor_blink=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda: bench_dialog(LONG),
        lambda: FindMaxDialog(BENCH["tiny"], VIEW, cursor_blink=False),
        lambda: OfflineBenchDialog("dlg-n", load_offline_presets(PRESETS_PATH), cursor_blink=False),
    ],
    ids=["benchmark", "find-max", "offline"],
)
async def test_enter_in_any_field_starts_nothing_and_moves_on(make):
    app = Host()
    async with app.run_test(size=(120, 36)) as pilot:
        dialog = make()
        app.push_screen(dialog, app.answers.append)
        await pilot.pause()
        first = app.focused
        await pilot.press("enter")
        assert app.focused is not first and app.screen is dialog  # the next field, nothing run
        await enter_in_every_field(pilot, app, dialog)
        assert app.answers == []
        # Enter in the last field lands on the action button: shown focused, it has not run
        assert isinstance(app.focused, Button) and app.focused.id == f"{dialog.PREFIX}-go"
        assert app.answers == [] and app.screen is dialog


async def test_the_fault_dialog_injects_only_on_its_action_key(tmp_path, monkeypatch):
    pytest.importorskip("console.sim.faults")
    from console.services import demo_faults

    monkeypatch.setenv("HOME", str(tmp_path))
    node = NodeSpec(
        name="sim-f",
        host="localhost",
        transport="local",
        state_dir=str(tmp_path / "state"),
        simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 1),
    )
    app = Host()
    async with app.run_test(size=(120, 36)) as pilot:
        dialog = FaultDialog([node], "sim-f", 4)
        app.push_screen(dialog, app.answers.append)
        await pilot.pause()
        await pilot.press("1", "enter")  # a count typed and Enter: the Inject button takes the focus
        await pilot.pause(0.3)
        assert app.screen is dialog and app.answers == [] and not dialog.busy
        assert not (demo_faults.sim_dir(node) / "faults.json").exists()
        assert "^s Inject" in last_line(app)
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: app.answers != [], timeout=10)
        assert "ecc" in str(app.answers[0]).lower() or "gpu 4" in str(app.answers[0]).lower()


async def test_enter_in_the_group_benchmark_field_does_not_start_it(live_app):
    from console.services.groups import GroupView

    app = live_app(("mi300x-spx",), presets=True)
    group = GroupView(name="g", replicas=(VIEW,))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = GroupBenchScreen(group)
        app.push_screen(screen)
        await pilot.pause()
        screen.query_one("#group-bench-concurrency", Input).focus()
        await pilot.press("4", "enter")
        await pilot.pause()
        assert not screen.running and screen.started is None
        assert "ctrl+s starts" in screen_text(app) and "^s Run" in last_line(app)


async def test_the_start_dialog_starts_only_on_ctrl_s_and_shows_its_own_keys(live_app):
    app = live_app(("mi300x-spx",), presets=True)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        table = app.screen.query_one(GpuTable)
        assert await wait_for(pilot, lambda: len(table.rows) == 9)
        assert "P Partition" in last_line(app) or "s Start vLLM" in last_line(app)
        await pilot.press("down", "s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, StartDialog))
        dialog = app.screen
        await pilot.pause()
        bar = last_line(app)
        for words in ("^s Start", "esc Cancel", "tab Next field"):
            assert words in bar, bar
        for fleet_words in ("Partition", "Reconnect", "Start vLLM", "Filter", "Quit", "palette"):
            assert fleet_words not in bar, bar
        await enter_in_every_field(pilot, app, dialog)
        await pilot.pause(0.3)
        assert not dialog.busy and not any("start refused" in str(n.title) for n in app._notifications)
        assert app.screen is dialog
        await pilot.press("ctrl+s")  # the recorded node refuses: the start was attempted now, and only now
        assert await wait_for(pilot, lambda: any("start refused" in str(n.title) for n in app._notifications))


async def test_a_long_run_says_how_long_and_asks_before_it_starts():
    app = Host()
    async with app.run_test(size=(120, 36)) as pilot:
        dialog = bench_dialog(LONG)
        app.push_screen(dialog, app.answers.append)
        await pilot.pause()
        assert await wait_for(pilot, lambda: "a long run: at least 8:20" in screen_text(app)), screen_text(app)
        assert "500 prompts at rate 1/s" in screen_text(app)
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "This run takes at least 8:20" in screen_text(app) and "y Yes" in last_line(app)
        await pilot.press("n")  # not now: back in the dialog, nothing ran
        await pilot.pause()
        assert app.screen is dialog and app.answers == []
        await pilot.press("ctrl+s", "y")
        assert await wait_for(pilot, lambda: app.answers != [])
        [request] = app.answers
        assert isinstance(request, BenchRequest) and request.preset.name == LONG
        # a short run starts at once, its length said beside it
        short = bench_dialog("tiny")
        short.past[("dlg-n", "tiny")] = PastRun(20, 6.0)
        app.push_screen(short, app.answers.append)
        await pilot.pause()
        short._refresh_preview()
        await pilot.pause()
        assert "takes ≈ 0:06 (the last run of tiny here: 20 prompts in 0:06)" in screen_text(app)
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: len(app.answers) == 2)


def test_the_estimate_uses_the_last_runs_pace_and_never_less_than_the_rate():
    long = BENCH[LONG]
    floor = estimate_run(long, (None,), None)
    assert floor is not None and floor.at_least and floor.seconds == 500 and floor.long
    paced = estimate_run(long, (None,), PastRun(40, 48.0))  # 1.2 s a prompt: slower than the rate allows
    assert paced is not None and not paced.at_least and paced.seconds == pytest.approx(600)
    assert paced.text() == f"≈ 10:00 (the last run of {LONG} here: 40 prompts in 0:48)"
    quick = estimate_run(long, (None,), PastRun(40, 20.0))  # faster than the rate: the rate sets the pace
    assert quick is not None and quick.at_least and quick.seconds == 500
    assert estimate_run(BENCH["tiny"], (4,), None) is None  # no rate, no run here: unknown
    sweep = estimate_run(BENCH["tiny"], (1, 4, 16), PastRun(20, 10.0))
    assert sweep is not None and sweep.seconds == 30.0 and not sweep.long


async def test_the_benchmark_dialogs_key_bar_has_find_max():
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(bench_dialog(), app.answers.append)
        await pilot.pause()
        bar = last_line(app)
        assert "^s Run" in bar and "^f Find max load" in bar and "esc Cancel" in bar, bar
