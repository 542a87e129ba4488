"""An experiment from the experiments screen (issue U): pick a file, check it (the same
validation as `experiment check`), run it (ExperimentRunner.run, as `experiment run`), follow
its points, cancel it (the layout's group stopped), and run it again to resume. A simulated
node: the real agent, instance, group and benchmark services over LocalTransport."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Select

from console.core.experiment.spec import ExperimentError, load_experiment
from console.core.model import BenchPreset, Profile, ServePreset
from console.services.experiments import ExperimentRunner
from console.services.groups import GroupService
from console.services.history import History
from console.services.transports import TransportPool
from console.ui.app import ConsoleApp
from console.ui.screens.confirm import ConfirmScreen
from console.ui.screens.experiment_dialog import ExperimentDialog
from console.ui.screens.experiments import ExperimentsScreen, runs_of

from .conftest import screen_text, wait_for

PROFILE_PRESETS = dict(
    serve_presets=(ServePreset(name="tiny", model="tiny-llama", args=("--enforce-eager",)),),
    bench_presets=(BenchPreset(name="tiny", input_len=32, output_len=16, num_prompts=8, ignore_eos=True),),
)
EXPERIMENT = """
[experiment]
name = "ui-run"
serve = "tiny"
bench = "tiny"
concurrency = [2, 4, 8]
num_prompts = 8
layouts = ["SPX tp1 x2"]
"""


@pytest.fixture(autouse=True)
def fast(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))


def detail(app) -> str:
    return str(app.screen.query_one("#experiments-detail").render())


@pytest.mark.timeout(240)
async def test_pick_check_run_follow_cancel_and_resume(sim_node, tmp_path):
    node = sim_node("lab", seed=9, state_dir=str(tmp_path / "lab"))
    folder = tmp_path / "data" / "experiments"
    folder.mkdir(parents=True)
    good, bad = folder / "ui-run.toml", folder / "bad.toml"
    good.write_text(EXPERIMENT)
    bad.write_text(EXPERIMENT.replace('"SPX tp1 x2"', '"CPX tp2 x4"'))
    profile = Profile(nodes=(node,), **PROFILE_PRESETS)
    app = ConsoleApp(profile, interval=0.2, notify_health=False, cursor_blink=False, redraw_interval=0.05)
    pool = TransportPool()
    try:
        async with app.run_test(size=(150, 44), notifications=True) as pilot:
            screen = ExperimentsScreen(folder, refresh_every=0.2)
            app.push_screen(screen)
            await pilot.pause()
            await pilot.press("n")
            dialog = app.screen
            assert isinstance(dialog, ExperimentDialog)
            files = [v for _, v in dialog.query_one("#exp-file", Select)._options if isinstance(v, str)]
            assert str(good.resolve()) in files and str(bad.resolve()) in files
            assert any(f.endswith("profiles/experiments/demo-layouts.toml") for f in files)  # the shipped ones too
            # the check is `experiment check`'s: the same problems, one line each
            dialog.query_one("#exp-file", Select).value = str(bad.resolve())
            await pilot.pause()
            await pilot.press("ctrl+t")
            with pytest.raises(ExperimentError) as cli:
                await ExperimentRunner(pool).check(load_experiment(bad.resolve()), node, profile)
            error = dialog.query_one("#exp-error")
            assert await wait_for(pilot, lambda: str(error.render()) == cli.value.problems[0], timeout=30), (
                str(error.render()),
                cli.value.problems,
            )
            assert "TP 2 in CPX: a CPX partition runs TP 1 only" in str(error.render())
            dialog.query_one("#exp-file", Select).value = str(good.resolve())
            await pilot.pause()
            await pilot.press("ctrl+t")
            preview = dialog.query_one("#exp-preview")
            assert await wait_for(pilot, lambda: "1 layouts fit lab" in str(preview.render()), timeout=30)
            assert "ui-run: 3 points over SPX tp1 ×2" in str(preview.render())
            # run: the screen follows the points from the state file
            dialog.query_one("#exp-go").press()
            assert await wait_for(pilot, lambda: app.screen is screen)
            assert await wait_for(pilot, lambda: "1/3" in screen_text(app), timeout=90), screen_text(app)
            assert "running here (c cancels)" in detail(app)
            # cancel: the layout's group is stopped, the point done stays
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen) and "Cancel ui-run on lab?" in screen_text(app)
            await pilot.press("y")
            run = runs_of(app).all()[0]
            assert await wait_for(pilot, lambda: not run.running, timeout=60)
            assert run.outcome == "cancelled"
            assert await wait_for(pilot, lambda: "cancelled" in detail(app), timeout=5)
            running = ("ready", "loading", "starting")
            groups = await GroupService(pool).groups([node])
            assert [g.name for g in groups if any(r.state.value in running for r in g.replicas)] == []
            # run again: it resumes where it was and finishes; results and the report are named
            assert screen.start_run(good.resolve(), "lab") is not None
            assert await wait_for(pilot, lambda: "3/3" in screen_text(app), timeout=120), screen_text(app)
            assert await wait_for(pilot, lambda: not runs_of(app).all()[0].running, timeout=30)
            assert runs_of(app).all()[0].outcome == "finished"
            text = detail(app)
            events = json.loads((folder / "ui-run-lab.json").read_text())["events"]
            starts = [i for i, e in enumerate(events) if e.endswith("spx-tp1-x2: start")]
            assert len(starts) == 2, events  # the layout started twice: the run, then the resumed run
            resumed = [e.split(" ", 2)[2] for e in events[starts[1] :]]
            assert "spx-tp1-x2@c2" not in resumed and "spx-tp1-x2@c8: done" in resumed, events  # c2 not rerun
            assert "rocm-console experiment report " in text and "results: in the history" in text
            assert History(data_dir=tmp_path / "data").runs.count() >= 3  # the data dir's store
    finally:
        await pool.close()


@pytest.mark.timeout(120)
async def test_check_names_what_holds_the_gpus_and_frees_them(sim_node, tmp_path):
    """U2: the check said "3 layouts fit" on a node whose GPUs were busy. It names what holds
    them, and ctrl+g stops it (the end-process dialog asks first), then checks again."""
    from console.core.model import SimulateSpec
    from console.ui.screens.process_end import ProcessEndScreen

    node = sim_node("lab", state_dir=str(tmp_path / "lab"), simulate=SimulateSpec("MI300X", 8, "SPX", "NPS1", 9, busy=(0, 1, 2, 3, 4, 5, 6, 7)))  # fmt: skip
    folder = tmp_path / "data" / "experiments"
    folder.mkdir(parents=True)
    (folder / "busy.toml").write_text(
        EXPERIMENT.replace('"SPX tp1 x2"', '"SPX tp1 x2", "CPX tp1 x4"').replace("[2, 4, 8]", "[4]")
    )
    app = ConsoleApp(Profile(nodes=(node,), **PROFILE_PRESETS), interval=0.2, notify_health=False, cursor_blink=False)
    async with app.run_test(size=(150, 44), notifications=True) as pilot:
        app.push_screen(ExperimentsScreen(folder, refresh_every=0.2))
        await pilot.pause()
        await pilot.press("n")
        dialog = app.screen
        assert isinstance(dialog, ExperimentDialog)
        dialog.query_one("#exp-file", Select).value = str((folder / "busy.toml").resolve())
        await pilot.pause()
        await pilot.press("ctrl+t")
        preview = dialog.query_one("#exp-preview")
        assert await wait_for(pilot, lambda: "0 of 2 layouts fit lab now" in str(preview.render()), timeout=30), str(
            preview.render()
        )
        text = str(preview.render())
        assert "SPX tp1 ×2: needs 2 free GPUs, 0 are free" in text
        assert "CPX tp1 ×4: its partition switch needs every GPU free (GPU 0-7 busy)" in text
        assert "lab: GPU 0-7 busy: 8 processes would have to stop first" in text
        assert "ctrl+g stops them" in text
        await pilot.press("ctrl+g")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProcessEndScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: app.screen is dialog, timeout=60)
        assert await wait_for(pilot, lambda: "2 layouts fit lab: its GPUs are free" in str(preview.render()), 30), str(
            preview.render()
        )
