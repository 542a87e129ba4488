"""Synthetic benchmark sessions for the snapshot tests and screenshots.

The benchmark screen is driven here without a runner: a timeline of the bench
service's events (progress, server samples, client lines, the result) is fed
to BenchScreen.feed with a frozen clock that the timeline moves, and a fake
fleet serves GPU utilization and power for the same seconds. Every number is
computed (no randomness), so a scene renders the same every time. The numbers
are made up to look like a 70B FP8 instance on four MI300X; they are not
measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from textual.app import App

from console.core.bench.output_events import BenchError, BenchProgress, SetupLine
from console.core.bench.result import normalize_result
from console.core.model import (
    BenchPreset,
    GpuStatic,
    NodeHealth,
    NodeSnapshot,
    NodeSpec,
    TelemetryFrame,
)
from console.core.profiles import load_profile
from console.core.series import RingSeries
from console.services.instances import InstanceState, InstanceView
from console.services.live_metrics import LiveSample
from console.services.runs.serving import (
    BenchFinished,
    BenchLogLine,
    BenchProgressed,
    BenchSetupSeen,
    BenchStarted,
    LiveMetricsSampled,
    RunOutcome,
)
from console.ui.model import bench_view as bv
from console.ui.screens.bench import BenchScreen

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ROOT / "profiles" / "presets.toml"
T0 = 1767225600.0  # 2026-01-01 00:00 UTC, like the other screenshots
NODE = "mi300x-spx"
MODEL = "amd/Llama-3.1-70B-Instruct-FP8-KV"


class SceneClock:
    """A clock the timeline moves (seconds, epoch)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class SceneFleet:
    """What BenchScreen reads of FleetTelemetry: snapshot(node) and series(node, gpu, metric).

    Eight SPX MI300X; GPUs in `busy` run hot between `load` (start, end) times; the
    series hold one sample a second up to the clock's now (never the future).
    """

    def __init__(self, clock: SceneClock, busy: Iterable[int] = (0, 1, 2, 3)) -> None:
        self.clock = clock
        self.busy = set(busy)
        self.loads: list[tuple[float, float]] = []
        self.static = tuple(
            GpuStatic(
                index=i,
                physical=i,
                partition_id=0,
                model="AMD Instinct MI300X",
                vram_total_mib=196592.0,
                compute_partition="SPX",
                memory_partition="NPS1",
            )
            for i in range(8)
        )

    def snapshot(self, node: str) -> NodeSnapshot:
        now = math.floor(self.clock())
        return NodeSnapshot(
            name=node,
            health=NodeHealth.LIVE,
            source="amdsmi",
            last_sample_ts=now,
            static=self.static,
            latest=TelemetryFrame(ts=now, seq=int(now - T0), gpus=()),
        )

    def _loaded(self, t: float) -> float:
        """0..1: how busy the instance's GPUs are at t."""
        for start, end in self.loads:
            if start <= t <= end:
                return 1.0
            if end < t < end + 3:
                return max(0.0, 1 - (t - end) / 3)
        return 0.0

    def series(self, node: str, gpu: int, metric: str) -> RingSeries | None:
        if metric not in ("util_pct", "power_w"):
            return None
        s = RingSeries(600)
        now = math.floor(self.clock())
        for k in range(-300, 1):
            t = now + k
            load = self._loaded(t) if gpu in self.busy else 0.0
            wobble = math.sin(t * 0.7 + gpu) * 0.5 + math.sin(t * 0.23 + gpu * 2) * 0.5
            if metric == "util_pct":
                value = 1.0 + abs(wobble) * 2 if load == 0 else min(100.0, 88 + 9 * load + 3 * wobble)
            else:
                value = 138 + 6 * wobble + load * (520 + 40 * wobble)
            s.append(t, value)
        return s


def profile_presets() -> dict[str, BenchPreset]:
    return {p.name: p for p in load_profile([PRESETS]).bench_presets}


def instance_70b() -> InstanceView:
    return InstanceView(
        node=NODE,
        name="llama-3.1-70b-fp8-tp4",
        state=InstanceState.READY,
        pid=41230,
        port=8000,
        gpus=(0, 1, 2, 3),
        model=MODEL,
        preset="llama-3.1-70b-fp8",
        started=T0 - 11520,
        stage="ready",
        served_models=(MODEL,),
        version="0.9.1",
    )


def node_spec() -> NodeSpec:
    return NodeSpec(name=NODE, host="mi300x-spx.lab", user="bench")


# ---------------------------------------------------------------- one run's numbers


@dataclass(frozen=True)
class RunShape:
    """How a synthetic run behaves."""

    point: int | None
    prompts: int
    input_len: int
    output_len: int
    duration: float
    tok_s: float  # output tokens/s at full load
    ttft_ms: float  # median
    itl_ms: float  # median
    failed: int = 0
    fail_at: float | None = None  # the server goes away at this second


def _sample(shape: RunShape, start: float, k: int) -> LiveSample:
    t = start + k
    wob = math.sin(k * 0.9) * 0.5 + math.sin(k * 0.37 + 1) * 0.5
    dead = shape.fail_at is not None and k >= shape.fail_at
    conc = shape.point or 64
    tail = max(0.0, min(1.0, (shape.duration - k) / 6))  # the last requests finish
    running = 0.0 if dead else round(min(conc, shape.prompts) * (1.0 if k > 1 else 0.5) * (0.4 + 0.6 * tail))
    e2e = (shape.ttft_ms + shape.itl_ms * shape.output_len) if k > shape.duration * 0.45 else None
    return LiveSample(
        ts=t,
        ttft_p50=None if k < 2 else shape.ttft_ms * (1 + 0.12 * wob),
        ttft_p90=None if k < 2 else shape.ttft_ms * (1.6 + 0.1 * wob),
        ttft_p99=None if k < 2 else shape.ttft_ms * (2.1 + 0.25 * wob),
        itl_p50=None if k < 2 else shape.itl_ms * (1 + 0.05 * wob),
        itl_p90=None if k < 2 else shape.itl_ms * (1.5 + 0.1 * wob),
        itl_p99=None if k < 2 else shape.itl_ms * (2.4 + 0.3 * wob),
        e2e_p50=None if e2e is None else e2e * (1 + 0.03 * wob),
        e2e_p99=None if e2e is None else e2e * (1.15 + 0.03 * wob),
        queue_p50=0.0,
        queue_p99=None,
        output_tok_s=None if k < 1 else (0.0 if dead else shape.tok_s * (0.93 + 0.06 * wob) * (0.5 + 0.5 * tail)),
        running=running,
        waiting=0.0 if dead or shape.point else max(0.0, 12 + 8 * wob),
        kv_cache_pct=0.0 if dead else min(97.0, (18 + 40 * min(1.0, k / 8)) * (0.5 + 0.5 * tail) + 4 * wob),
        itl_metric="vllm:inter_token_latency_seconds",
    )


def result_json(shape: RunShape, preset: BenchPreset) -> dict:
    """A `--save-result` object like vLLM 0.9's."""
    completed = shape.prompts - shape.failed
    out_tokens = completed * shape.output_len
    duration = shape.duration
    m = {
        "date": "20260101-000100",
        "backend": "vllm",
        "model_id": MODEL,
        "tokenizer_id": MODEL,
        "num_prompts": shape.prompts,
        "request_rate": "inf" if preset.request_rate is None else preset.request_rate,
        "burstiness": 1.0,
        "max_concurrency": shape.point,
        "duration": duration,
        "completed": completed,
        "failed": shape.failed,
        "total_input_tokens": completed * shape.input_len,
        "total_output_tokens": out_tokens,
        "request_throughput": completed / duration,
        "request_goodput": None,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (out_tokens + completed * shape.input_len) / duration,
        "max_output_tokens_per_s": shape.tok_s * 1.08,
        "max_concurrent_requests": float(shape.point or 64),
    }
    for key, med, mean_f, p99_f in (
        ("ttft", shape.ttft_ms, 1.04, 2.2),
        ("tpot", shape.itl_ms * 0.99, 1.0, 1.12),
        ("itl", shape.itl_ms, 1.01, 2.6),
        ("e2el", shape.ttft_ms + shape.itl_ms * shape.output_len, 1.01, 1.14),
    ):
        m[f"mean_{key}_ms"] = med * mean_f
        m[f"median_{key}_ms"] = med
        m[f"std_{key}_ms"] = med * 0.2
        m[f"p99_{key}_ms"] = med * p99_f
    return m


def result_block(result: dict) -> list[str]:
    """The printed block, as `vllm bench serve` prints it."""

    def row(label: str, value, fmt: str = "{:<10}") -> str:
        return f"{label:<40} " + fmt.format(value)

    lines = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        row("Successful requests:", result["completed"]),
        row("Failed requests:", result["failed"]),
    ]
    if result.get("max_concurrency"):
        lines.append(row("Maximum request concurrency:", result["max_concurrency"]))
    lines += [
        row("Benchmark duration (s):", result["duration"], "{:<10.2f}"),
        row("Total input tokens:", result["total_input_tokens"]),
        row("Total generated tokens:", result["total_output_tokens"]),
        row("Request throughput (req/s):", result["request_throughput"], "{:<10.2f}"),
        row("Output token throughput (tok/s):", result["output_throughput"], "{:<10.2f}"),
        row("Total token throughput (tok/s):", result["total_token_throughput"], "{:<10.2f}"),
    ]
    for key, title in (
        ("ttft", "Time to First Token"),
        ("tpot", "Time per Output Token (excl. 1st token)"),
        ("itl", "Inter-token Latency"),
        ("e2el", "End-to-end Latency"),
    ):
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for stat in ("mean", "median", "p99"):
            label = {"mean": "Mean", "median": "Median", "p99": "P99"}[stat]
            lines.append(row(f"{label} {key.upper()} (ms):", result[f"{stat}_{key}_ms"], "{:<10.2f}"))
    lines.append("=" * 50)
    return lines


def run_timeline(
    shape: RunShape,
    preset: BenchPreset,
    index: int,
    start: float,
    *,
    until: float | None = None,
    run: str | None = None,
) -> list[tuple[float, object]]:
    """(time, event) for one point: begun, started, setup lines, progress and samples each
    second, then (unless cut by `until`, seconds after start) the result and BenchFinished."""
    conc = shape.point
    if run is None:
        run = f"{preset.name}-c{conc}-20260101-00{index:02d}00" if conc else f"{preset.name}-20260101-000000"
    events: list[tuple[float, object]] = [(start - 1.0, bv.PointBegan(index, conc))]
    argv = (
        "vllm",
        "bench",
        "serve",
        "--model",
        MODEL,
        "--dataset-name",
        preset.dataset,
        "--num-prompts",
        str(shape.prompts),
    )
    events.append((start, BenchStarted(run, NODE, argv, conc)))
    setup = [
        (
            "namespace",
            "Namespace(subparser='bench', bench_type='serve', backend='vllm', base_url="
            f"'http://127.0.0.1:8000', model='{MODEL}', dataset_name='{preset.dataset}', num_prompts="
            f"{shape.prompts}, max_concurrency={conc}, ...)",
        ),
        ("initial_test_start", "Starting initial single prompt test run..."),
        ("main_start", "Initial test run completed. Starting main benchmark run..."),
        ("request_rate", "Traffic request rate: inf"),
        ("burstiness", "Burstiness factor: 1.0 (Poisson process)"),
    ]
    if conc:
        setup.append(("max_concurrency", f"Maximum request concurrency: {conc}"))
    for i, (kind, text) in enumerate(setup):
        t = start + 0.1 * (i + 1)
        events.append((t, BenchLogLine(run, text)))
        events.append((t, BenchSetupSeen(run, SetupLine(kind, text, None, i + 1))))
    end = shape.fail_at if shape.fail_at is not None else shape.duration
    last = int(end) if until is None else min(int(end), int(until))
    for k in range(last + 1):
        t = start + 1 + k
        done = min(shape.prompts, round(shape.prompts * (k / shape.duration) ** 1.15))
        rate = done / max(1.0, k) if k else None
        remaining = (shape.prompts - done) / rate if rate else None
        events.append(
            (
                t,
                BenchProgressed(
                    run,
                    BenchProgress(
                        n=done,
                        total=shape.prompts,
                        pct=float(int(100 * done / shape.prompts)),
                        elapsed_s=float(k),
                        remaining_s=None if remaining is None else float(round(remaining)),
                        rate=rate,
                        raw="",
                    ),
                ),
            )
        )
        events.append((t + 0.5, LiveMetricsSampled(run, _sample(shape, start + 1, k))))
    if until is not None and until < end:
        return events
    t = start + 2 + last
    result = result_json(shape, preset)
    errors: tuple[BenchError, ...] = ()
    if shape.failed:
        events.append(
            (
                t,
                BenchProgressed(
                    run,
                    BenchProgress(
                        n=shape.prompts,
                        total=shape.prompts,
                        pct=100.0,
                        elapsed_s=float(last),
                        remaining_s=0.0,
                        rate=shape.prompts / max(1, last),
                        raw="",
                    ),
                ),
            )
        )
        message = "Error 0: aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected"
        events.append((t, BenchLogLine(run, f"Failed requests: {shape.failed} of {shape.prompts}")))
        events.append((t, BenchLogLine(run, message)))
        errors = (
            BenchError("request_error", "ServerDisconnectedError: Server disconnected", index=0),
            BenchError(
                "request_error",
                "ClientConnectorError: Cannot connect to host 127.0.0.1:8000 [Connection refused]",
                index=1,
            ),
        )
    for line in result_block(result):
        events.append((t, BenchLogLine(run, line)))
    outcome = RunOutcome(
        run=run,
        node=NODE,
        exit_code=0,
        result=normalize_result(result),
        result_json=result,
        block=None,
        errors=errors,
        live=(),
        argv=argv,
    )
    events.append((t + 0.5, BenchFinished(run, outcome)))
    return events


def play(
    screen, clock: SceneClock, timeline: Iterable[tuple[float, object]], *, fleet: SceneFleet | None = None
) -> None:
    """Feed a timeline to the screen, moving the clock to each event's time."""
    for t, event in sorted(timeline, key=lambda te: te[0]):
        clock.now = t
        if fleet is not None and isinstance(event, BenchStarted):
            fleet.loads.append((t, t + 10_000))
        if fleet is not None and isinstance(event, BenchFinished) and fleet.loads:
            fleet.loads[-1] = (fleet.loads[-1][0], t)
        screen.feed(event)


# ---------------------------------------------------------------- scenes


@dataclass
class BenchScene:
    name: str
    points: tuple[int | None, ...]
    preset: str
    shapes: tuple[RunShape, ...]
    until: float | None = None  # cut the last point after this many seconds (mid-run)
    stored: bool = True
    size: tuple[int, int] = (120, 36)


SINGLE = RunShape(
    point=64, prompts=128, input_len=8192, output_len=1024, duration=58.0, tok_s=2310.0, ttft_ms=2480.0, itl_ms=24.6
)
FAILING = RunShape(
    point=None,
    prompts=500,
    input_len=4096,
    output_len=512,
    duration=96.0,
    tok_s=1180.0,
    ttft_ms=410.0,
    itl_ms=31.0,
    failed=288,
    fail_at=41,
)
SWEEP = (
    RunShape(
        point=128, prompts=1024, input_len=0, output_len=230, duration=64.0, tok_s=3700.0, ttft_ms=180.0, itl_ms=29.5
    ),
    RunShape(
        point=256, prompts=1024, input_len=0, output_len=230, duration=42.0, tok_s=5600.0, ttft_ms=420.0, itl_ms=38.0
    ),
    RunShape(
        point=512, prompts=1024, input_len=0, output_len=230, duration=35.0, tok_s=6700.0, ttft_ms=2900.0, itl_ms=52.0
    ),
)

SCENES = {
    "bench-running": BenchScene("bench-running", (64,), "random-8192-1024-c64", (SINGLE,), until=31.0),
    "bench-finished": BenchScene("bench-finished", (64,), "random-8192-1024-c64", (SINGLE,)),
    "bench-failed": BenchScene("bench-failed", (None,), "random-4096-512-rate1", (FAILING,), stored=True),
    "bench-sweep": BenchScene("bench-sweep", (128, 256, 512), "sharegpt-chat-sweep", SWEEP),
}


class BenchSceneApp(App):
    """A bare host app: the benchmark screen over a frozen clock and a fake fleet."""

    def __init__(self, scene: BenchScene) -> None:
        super().__init__()
        self.scene = scene
        self.clock = SceneClock(T0)
        self.fleet = SceneFleet(self.clock)
        preset = profile_presets()[scene.preset]
        self.bench = BenchScreen(
            self.fleet,
            node_spec(),
            instance_70b(),
            preset,
            runner=None,
            store=None,
            points=list(scene.points),
            clock=self.clock,
            redraw_interval=3600,
        )

    def on_mount(self) -> None:
        self.push_screen(self.bench)

    def play(self) -> None:
        """Feed the scene's events and draw once."""
        scene, screen = self.scene, self.bench
        preset = screen.effective
        start = T0 + 5
        for index, shape in enumerate(scene.shapes):
            last = index == len(scene.shapes) - 1
            timeline = run_timeline(shape, preset, index, start, until=scene.until if last else None)
            play(screen, self.clock, timeline, fleet=self.fleet)
            if scene.stored and (scene.until is None or not last):
                finished = [e for _, e in timeline if isinstance(e, BenchFinished)]
                if finished:
                    stamp = 100 + index
                    screen.feed(bv.RunStored(index, f"20260101-000{stamp}-{NODE}-{(index * 7919 + 0xA3C5E1):06x}"))
            start = self.clock.now + 3
        if scene.until is None:
            screen.feed(bv.SweepEnded())
        screen.draw_now()


async def prepare(pilot) -> None:
    """snap_compare's run_before: play the scene, let the widgets settle."""
    await pilot.pause()
    pilot.app.play()
    await pilot.pause()
    pilot.app.bench.draw_now()
    await pilot.pause()


class StartDialogSceneApp(App):
    """The start dialog over an empty screen, two ready instances, a sweep typed in."""

    def __init__(self, concurrency: str = "1,4,16,64", overrides: str = "num_prompts=64") -> None:
        super().__init__()
        self.concurrency = concurrency
        self.overrides = overrides

    def on_mount(self) -> None:
        from dataclasses import replace

        from console.ui.screens.bench_start import StartBenchDialog

        small = "amd/Llama-3.1-8B-Instruct-FP8-KV"
        views = [
            instance_70b(),
            replace(
                instance_70b(), name="llama-3.1-8b-fp8-g4", gpus=(4,), port=8001, model=small, served_models=(small,)
            ),
        ]
        self.push_screen(
            StartBenchDialog(list(profile_presets().values()), views, preset="random-8192-1024-c64", cursor_blink=False)
        )

    async def fill(self, pilot) -> None:
        from textual.widgets import Input

        await pilot.pause()
        self.screen.query_one("#bench-concurrency", Input).value = self.concurrency
        self.screen.query_one("#bench-overrides", Input).value = self.overrides
        await pilot.pause()
