"""The experiments screen follows a run's state file live: progress over the plan, the step
running now, failed layouts, the best layout so far per budget."""

from __future__ import annotations

from textual.app import App

from console.core.experiment.spec import ExperimentState, load_experiment, plan_points, save_state
from console.ui.screens.experiments import ExperimentsScreen

from .conftest import screen_text, wait_for

EXPERIMENT = """
[experiment]
name = "ui-layouts"
serve = "tiny"
bench = "tiny"
concurrency = [8, 16]
layouts = ["SPX tp8 x1", "SPX tp1 x8", "CPX tp1 x8"]

[[budget]]
name = "interactive"
p99_ttft_ms = 2000
"""


def summary(tok_s: float, p99_ttft: float) -> dict:
    return {"completed": 10, "failed": 0, "output_throughput": tok_s, "p99_ttft_ms": p99_ttft, "nodes": 1}


class Viewer(App):
    def __init__(self, folder) -> None:
        super().__init__()
        self.folder = folder

    def on_mount(self) -> None:
        self.push_screen(ExperimentsScreen(self.folder, refresh_every=0.1))


async def test_progress_is_followed_from_the_state_file(tmp_path):
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    exp = load_experiment(tmp_path / "exp.toml")
    points = plan_points(exp)
    folder = tmp_path / "experiments"
    path = folder / "ui-layouts@n1.json"
    state = ExperimentState(experiment=exp.name, node="n1", file=exp.file, planned=len(points))
    state = state.with_done(points[0], summary(900, 300)).with_done(points[1], summary(1500, 2500))
    state = state.with_current(f"{points[2].id}: benchmark")
    save_state(path, state)
    (folder / "notes.json").write_text("[1, 2]")  # not a state file: skipped
    app = Viewer(folder)
    async with app.run_test(size=(150, 30)) as pilot:
        assert await wait_for(pilot, lambda: "2/6" in screen_text(app))
        text = screen_text(app)
        assert "ui-layouts" in text and "spx-tp1-x8@c8: benchmark" in text
        assert "budget interactive (p99 TTFT ≤ 2 s): SPX tp8 ×1 at concurrency 8: 900.0 tok/s per node" in text
        # the run goes on: a point finishes, a layout fails; the screen follows
        state = state.with_done(points[2], summary(4000, 800)).with_layout_failed(
            exp.layouts[2], "cpx-tp1-x8-r3: out of memory"
        )
        save_state(path, state)
        assert await wait_for(pilot, lambda: "3/6" in screen_text(app)), screen_text(app)
        text = screen_text(app)
        assert "cpx-tp1-x8: cpx-tp1-x8-r3: out of memory" in text
        assert "SPX tp1 ×8 at concurrency 8: 4000.0 tok/s per node" in text


def test_detail_names_the_most_efficient_layout_and_client_bound_points(tmp_path):
    from pathlib import Path

    from console.ui.screens.experiments import Entry, detail_text

    exp = load_experiment(Path(__file__).resolve().parents[2] / "profiles/experiments/demo-layouts.toml")
    by_id = {p.id: p for p in plan_points(exp)}
    state = ExperimentState(experiment=exp.name, node="n1", file=exp.file, planned=len(by_id))

    def point(tok_s: float, tpj: float, **extra) -> dict:
        base = {"completed": 32, "failed": 0, "output_throughput": tok_s, "nodes": 1}
        return {**base, "p99_ttft_ms": 50.0, "p99_itl_ms": 20.0, "tokens_per_joule": tpj, **extra}

    ids = sorted(by_id)
    state = state.with_done(by_id[ids[0]], point(1800.0, 0.98, throttled_pct=12.5))
    state = state.with_done(by_id[ids[1]], point(1900.0, 0.10, client_bound=True))
    text = detail_text(Entry(tmp_path / "s.json", state, 0.0))
    assert "1900.0 tok/s per node · 0.1 tokens/J; most efficient" in text
    assert "0.98 tokens/J · throttled 12.5 %" in text
    assert "client-bound:" in text
