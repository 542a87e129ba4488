"""The benchmark screen and its start dialog.

Pilot tests run the real services against a simulated local node: the agent and
instance service over LocalTransport, the simulator's `vllm serve` and
`vllm bench serve` (sped up), a temp state folder and a temp results folder.
Every instance a test starts is stopped afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Input, ProgressBar

from console.core.model import BenchPreset
from console.core.profiles import load_profile
from console.services.events import EventLog
from console.services.fleet import FleetTelemetry
from console.services.health_watch import HealthWatch
from console.services.instances import InstanceState, InstanceView
from console.services.live_metrics import LiveSample
from console.services.results import ResultStore
from console.services.runs.serving import (
    BenchLogLine,
    BenchProgressed,
    BenchRunner,
    LiveMetricsSampled,
)
from console.services.transports import TransportPool
from console.ui.model import bench_view as bv
from console.ui.model.bench_form import BenchRequest
from console.ui.screens.bench import BenchScreen
from console.ui.screens.bench_start import StartBenchDialog
from console.ui.screens.confirm import ConfirmScreen
from console.ui.widgets.bench_plots import LivePlot, ParetoPlot

from .conftest import screen_text, wait_for

PRESETS = Path(__file__).resolve().parents[2] / "profiles" / "presets.toml"
PROFILE = load_profile([PRESETS])
BENCH_TINY = next(p for p in PROFILE.bench_presets if p.name == "tiny")  # random 64/64, concurrency 4
FORTY = {"num_prompts": "40"}  # the preset has 20; the override is part of what is tested


@pytest.fixture(autouse=True)
def fast_sim_and_temp_data(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_CONSOLE_SIM_VLLM_SPEEDUP", "20")
    monkeypatch.setenv("ROCM_CONSOLE_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def node(sim_node, tmp_path):
    return sim_node("bench-n", seed=7, state_dir=str(tmp_path / "bench-n"))


class BenchHost(App):
    """The smallest app that can hold the screen: it only runs the fleet telemetry."""

    def __init__(self, screen: BenchScreen | None = None, fleet: FleetTelemetry | None = None) -> None:
        super().__init__()
        self.first = screen
        self.fleet = fleet
        self.cursor_blink = False
        self.results: list = []
        self.health_watch = None  # the console's timeline (HealthWatch), when a test gives one

    async def on_mount(self) -> None:
        if self.fleet is not None:
            await self.fleet.start()
        if self.first is not None:
            self.push_screen(self.first)

    async def on_unmount(self) -> None:
        if self.fleet is not None:
            await self.fleet.stop()


def bench_screen(node, view, pool, *, points, overrides=FORTY, fleet=None, preset=BENCH_TINY) -> BenchScreen:
    return BenchScreen(
        fleet,
        node,
        view,
        preset,
        runner=BenchRunner(pool),
        store=ResultStore(),
        points=points,
        overrides=overrides,
        extra_env={},
    )


def fed(messages, kind) -> list:
    return [m.event for m in messages if isinstance(m, BenchScreen.Fed) and isinstance(m.event, kind)]


# ---------------------------------------------------------------- one run


async def test_run_shows_progress_live_charts_result_and_stores_it(node, served):
    view, pool = served
    fleet = FleetTelemetry([node], TransportPool(), interval=0.5)
    screen = bench_screen(node, view, pool, points=[4], fleet=fleet)
    messages: list = []
    app = BenchHost(screen, fleet)
    async with app.run_test(size=(120, 36), message_hook=messages.append) as pilot:
        assert await wait_for(pilot, lambda: not screen.session.running, timeout=90)
        assert await wait_for(pilot, lambda: screen.session.current.stored_id is not None, timeout=10)
        screen.draw_now()
        await pilot.pause()
        cur = screen.session.current

        # progress reached the end, in order, through coalescing messages
        assert cur.progress.n == cur.progress.total == 40
        ns = [e.progress.n for e in fed(messages, BenchProgressed)]
        assert ns and ns == sorted(ns) and ns[-1] == 40
        bar = screen.query_one("#bench-progress", ProgressBar)
        assert bar.progress == bar.total == 40
        text = screen_text(app)
        assert "40/40 requests" in text
        assert "Benchmark tiny · n 40 →" in text  # the override is in the title, not only the preset

        # live charts were fed from /metrics, and the GPU charts from the fleet's ring buffers
        assert fed(messages, LiveMetricsSampled) and len(cur.live) > 0
        assert any(s.ttft_p50 is not None for s in cur.live)
        assert screen.query_one("#chart-ttft", LivePlot).plotted > 0
        assert screen.query_one("#chart-tokens", LivePlot).plotted > 0
        assert screen.query_one("#chart-gpu-util", LivePlot).plotted > 0
        assert screen.query_one("#chart-gpu-power", LivePlot).plotted > 0

        # the client's output went to the log pane, tqdm redraws did not
        assert any("Serving Benchmark Result" in e.text for e in fed(messages, BenchLogLine))
        log_text = "\n".join(screen.query_one("#bench-log").lines)
        assert "Successful requests" in log_text and "it/s]" not in log_text

        # vLLM's own numbers, and where they were stored
        assert cur.outcome.ok and cur.outcome.result.completed == 40
        assert "40 completed" in text and "0 failed" in text
        assert "TTFT" in text and "E2EL" in text
        assert f"stored as {cur.stored_id}" in text
        assert "every request completed" in text

    stored = ResultStore().get(cur.stored_id)  # ROCM_CONSOLE_DATA_DIR: this test's folder
    assert stored.result["completed"] == 40
    assert stored.context["node"] == node.name and stored.context["instance"] == view.name
    assert stored.context["bench_preset"] == "tiny" and stored.context["gpus"] == [1]
    assert stored.context["gpu_model"]  # from the fleet's static facts
    assert stored.setup["num_prompts"] == 40
    assert stored.context["bench_overrides"] == {"num_prompts": 40} and stored.context["title"] == "tiny · n 40"
    assert stored.live["samples"] == len(cur.outcome.live) > 0
    # issue P: the instance's GPU recorded from the fleet's stream, and the client checked itself
    assert stored.energy["gpus"][0]["gpu"] == 1 and stored.energy_j > 0 and stored.tokens_per_joule > 0
    assert stored.client_bound is False and stored.client_check["requests"]["client"] == 40
    assert "tokens/J" in text and "client check: ok" in text


async def test_each_point_is_on_the_fleet_timeline(node, served, tmp_path):
    view, pool = served
    fleet = FleetTelemetry([node], TransportPool(), interval=0.5)
    screen = bench_screen(node, view, pool, points=[2], overrides={"num_prompts": "8"}, fleet=fleet)
    app = BenchHost(screen, fleet)
    log = EventLog(tmp_path / "events.jsonl")
    app.health_watch = HealthWatch(fleet, events=log)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: not screen.session.running, timeout=90)
    events = [(e.kind, e.node, e.instance, e.message) for e in reversed(log.read()) if e.kind.startswith("benchmark.")]
    assert events == [
        ("benchmark.started", node.name, view.name, "benchmark tiny (concurrency 2) started"),
        ("benchmark.finished", node.name, view.name, "benchmark tiny (concurrency 2) finished"),
    ]


# ---------------------------------------------------------------- a sweep


async def test_two_point_sweep_fills_the_table_and_the_pareto_charts(node, served):
    view, pool = served
    screen = bench_screen(node, view, pool, points=[2, 4])
    app = BenchHost(screen)
    async with app.run_test(size=(120, 36)) as pilot:
        assert screen.has_class("-sweep")
        assert await wait_for(pilot, lambda: not screen.session.running, timeout=120)
        assert await wait_for(pilot, lambda: all(r.stored_id for r in screen.session.rows), timeout=10)
        screen.draw_now()
        await pilot.pause()
        table = screen.query_one("#bench-sweep", DataTable)
        assert table.row_count == 2
        rows = screen.session.rows
        assert [r.point for r in rows] == [2, 4] and all(r.ok and r.failed == 0 for r in rows)
        assert all(r.output_tok_s and r.median_ttft_ms and r.median_itl_ms and r.p99_itl_ms for r in rows)
        cells = [str(c) for c in table.get_row_at(0)]
        assert cells[0] == "2" and cells[-1] == rows[0].stored_id
        assert [p.label for p in screen.query_one("#pareto-ttft", ParetoPlot).points] == ["c2", "c4"]
        assert len(screen.query_one("#pareto-itl", ParetoPlot).points) == 2
        text = screen_text(app)
        assert "sweep: 2 of 2 points ok" in text and "2 stored" in text
    stored = [ResultStore().get(r.stored_id) for r in rows]
    assert [s.context["sweep_point"] for s in stored] == [2, 4]
    assert stored[0].context["sweep_id"] and stored[0].context["sweep_id"] == stored[1].context["sweep_id"]


# ---------------------------------------------------------------- cancel, leave


async def test_cancel_asks_then_stops_the_client(node, served):
    view, pool = served
    screen = bench_screen(node, view, pool, points=[2], overrides={"num_prompts": "400"})
    app = BenchHost(screen)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(
            pilot,
            lambda: (c := screen.session.current) is not None and c.progress is not None and c.progress.n > 0,
            timeout=60,
        )
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert app.screen is screen
        assert await wait_for(pilot, lambda: not screen.session.running, timeout=60)
        screen.draw_now()
        await pilot.pause()
        cur = screen.session.current
        assert cur.phase == "cancelled" and cur.progress.n < 400
        assert screen.session.rows[0].reason == "cancelled"
        assert "cancelled" in screen_text(app)
        assert cur.stored_id is None  # nothing to store
    runs = {r["name"]: r for r in await BenchRunner(pool).runs(node)}
    assert runs[cur.run]["state"] != "running"


async def test_escape_leaves_and_the_run_goes_on_on_the_node(node, served):
    view, pool = served
    screen = bench_screen(node, view, pool, points=[2], overrides={"num_prompts": "400"})
    app = BenchHost(screen)
    runner = BenchRunner(pool)
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(
            pilot, lambda: (c := screen.session.current) is not None and c.run is not None, timeout=60
        )
        run = screen.session.current.run
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen
        toasts = [n.message for n in app._notifications]
        assert any(run in t and "goes on" in t for t in toasts)
    try:
        runs = {r["name"]: r for r in await runner.runs(node)}
        assert runs[run]["state"] == "running"
    finally:
        await runner.cancel(node, run)


# ---------------------------------------------------------------- the start dialog


def ready(name: str, node: str = "bench-n", gpus=(1,), port=8000) -> InstanceView:
    return InstanceView(
        node=node,
        name=name,
        state=InstanceState.READY,
        port=port,
        gpus=gpus,
        model="tiny-llama",
        served_models=("tiny-llama",),
    )


async def open_start(pilot, app, **kwargs) -> StartBenchDialog:
    dialog = StartBenchDialog(
        PROFILE.bench_presets, [ready("a"), ready("b", gpus=(2, 3), port=8001)], cursor_blink=False, **kwargs
    )
    app.push_screen(dialog, app.results.append)
    await pilot.pause()
    assert app.screen is dialog
    return dialog


async def test_start_dialog_returns_a_sweep_request():
    app = BenchHost()
    async with app.run_test(size=(120, 36)) as pilot:
        dialog = await open_start(pilot, app, instance=("bench-n", "b"), preset="tiny")
        dialog.query_one("#bench-concurrency", Input).value = "1, 4,16"
        dialog.query_one("#bench-overrides", Input).value = "num_prompts=50"
        dialog.query_one("#bench-label", Input).value = "after upgrade"
        await pilot.pause()
        assert "a sweep of 3 runs" in screen_text(app) and "50 prompts each" in screen_text(app)
        dialog.query_one("#bench-concurrency", Input).focus()
        await pilot.press("ctrl+s")  # the action key (Enter only moves between fields)
        await pilot.pause()
    [request] = app.results
    assert isinstance(request, BenchRequest)
    assert request.node == "bench-n" and request.instance.name == "b" and request.preset.name == "tiny"
    assert request.points == (1, 4, 16) and request.sweep
    assert request.overrides == {"num_prompts": "50"} and request.label == "after upgrade"


async def test_start_dialog_blank_concurrency_takes_the_presets():
    app = BenchHost()
    async with app.run_test(size=(120, 36)) as pilot:
        await open_start(pilot, app, preset="tiny")
        await pilot.press("ctrl+s")
        await pilot.pause()
    [request] = app.results
    assert request.points == (4,) and not request.sweep and request.instance.name == "a"


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("bench-overrides", "num_prompts=lots", "num_prompts"),
        ("bench-overrides", "nonsense_key=1", "nonsense_key"),
        ("bench-overrides", "num_prompts", "is not KEY=VALUE"),
        ("bench-concurrency", "4,0", "'0' is not a whole number"),
        ("bench-env", "1BAD=x", "not an environment variable name"),
    ],
)
async def test_start_dialog_refuses_with_one_line(field, value, words):
    app = BenchHost()
    async with app.run_test(size=(120, 36)) as pilot:
        dialog = await open_start(pilot, app, preset="tiny")
        dialog.query_one(f"#{field}", Input).value = value
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is dialog and not app.results  # nothing typed is lost
        error = str(dialog.query_one("#bench-start-error").render())
        assert words in error and "\n" not in error.strip()
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [None]


# ---------------------------------------------------------------- the session, without an app


def _sample(ts: float, **values) -> LiveSample:
    fields = dict(
        ttft_p50=None,
        ttft_p90=None,
        ttft_p99=None,
        itl_p50=None,
        itl_p90=None,
        itl_p99=None,
        e2e_p50=None,
        e2e_p99=None,
        queue_p50=None,
        queue_p99=None,
        output_tok_s=None,
        running=None,
        waiting=None,
        kv_cache_pct=None,
        itl_metric=None,
    )
    fields.update(values)
    return LiveSample(ts=ts, **fields)


def test_session_is_bounded_and_ignores_other_runs():
    from console.core.bench.output_events import BenchProgress
    from console.services.runs.serving import BenchStarted

    session = bv.BenchSession([4], clock=lambda: 100.0)
    session.apply(bv.PointBegan(0, 4))
    session.apply(BenchStarted("r1", "n", (), 4))
    for i in range(bv.MAX_LIVE_POINTS + 50):
        session.apply(LiveMetricsSampled("r1", _sample(float(i))))
    for i in range(bv.MAX_PENDING_LOG + 50):
        session.apply(BenchLogLine("r1", f"line {i} " + "x" * 1000))
    progress = BenchProgress(n=3, total=40, pct=7.0, elapsed_s=1.0, remaining_s=9.0, rate=3.0, raw="")
    assert not session.apply(BenchProgressed("other-run", progress))
    assert not session.apply(BenchLogLine("r1", " 45%|████▌     | 18/40 [00:02<00:03,  7.20it/s]"))
    cur = session.current
    assert len(cur.live) == bv.MAX_LIVE_POINTS and cur.progress is None
    assert len(session.log_pending) == bv.MAX_PENDING_LOG
    assert all(len(line) <= bv.MAX_LOG_LINE for line in session.log_pending)


async def test_throttle_episodes_are_marked_on_the_live_latency_charts():
    """Samples whose GPUs were throttled (the fleet's `throttled` flag) become red marks on TTFT and ITL."""
    from console.ui.screens.bench import THROTTLE_MARKED

    session = bv.BenchSession([4], clock=lambda: 100.0)
    session.apply(bv.PointBegan(0, 4))
    from console.services.runs.serving import BenchStarted

    session.apply(BenchStarted("r1", "n", (), 4))
    for i, flag in enumerate([False, True, True, False, None, True]):
        session.apply(LiveMetricsSampled("r1", _sample(100.0 + i, ttft_p50=50.0 + i), flag))
    spans = bv.throttle_spans(session.current.throttled)
    assert spans == [(101.0, 103.0), (105.0, 105.0)]
    assert THROTTLE_MARKED == {"chart-ttft", "chart-itl"}

    class PlotHost(App):
        def compose(self):
            yield LivePlot("TTFT", id="p")

    app = PlotHost()
    async with app.run_test(size=(80, 20)) as pilot:
        plot = app.query_one("#p", LivePlot)
        trace = bv.live_traces(list(session.current.live), (("ttft_p50", "p50"),))
        plot.replot(trace, 100.0, "TTFT", spans=spans)
        await pilot.pause()
        assert plot.spans == tuple(spans) and plot.plotted == 6


def test_pareto_front_keeps_the_points_nothing_beats():
    pts = [
        bv.ParetoPoint(10, 100, "c1"),
        bv.ParetoPoint(20, 300, "c4"),
        bv.ParetoPoint(25, 250, "c8"),
        bv.ParetoPoint(40, 500, "c16"),
        bv.ParetoPoint(15, 90, "c2"),
    ]
    assert [p.label for p in bv.pareto_front(pts)] == ["c1", "c4", "c16"]


def test_progress_text_says_count_rate_and_eta():
    from console.core.bench.output_events import BenchProgress

    state = bv.PointState(0, 4, run="r", started_at=100.0)
    state.progress = BenchProgress(n=18, total=40, pct=45.0, elapsed_s=2.0, remaining_s=3.0, rate=7.2, raw="")
    assert bv.progress_text(state, 105.0) == "18/40 requests · 45% · 7.2 req/s · elapsed 0:05 · ETA 0:03"
    preset = BenchPreset(name="p", input_len=1024, output_len=128, num_prompts=500, max_concurrency=(1, 4))
    assert bv.setup_text(preset, [1, 4], ready("a", gpus=(0, 1, 2, 3))) == (
        "random 1024/128 · 500 prompts each · concurrency 1,4 · rate inf · vllm bench serve · "
        "tiny-llama on GPUs 0-3, port 8000"
    )
    assert [bv.compact(v) for v in (0.4242, 24.64, 2480.2, 27782.0, 123456.0, None)] == [
        "0.42",
        "24.6",
        "2480",
        "27.8k",
        "123k",
        "–",
    ]
