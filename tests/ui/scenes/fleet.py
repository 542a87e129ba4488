"""The console's scenes: the real app headless over recorded agent traces.

Every scene replays tests/fixtures/traces (ReplayTransport) with frozen clocks, so its
SVG only changes when the UI does. vLLM instances come from a fixed list
(StaticInstances: demo_instances() and one recorded log), never from processes. The
registry (tests/ui/scenes/registry.py) serves them to the SVG snapshot tests and to
the README screenshots (`python -m tests.ui.scenes`); live_app() is the same console
with the traces looping, for `textual run --dev` (tests/ui/scenes/dev_app.py).
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from console.core.model import NodeHealth, NodeSpec, Profile, SimulateSpec
from console.core.profiles import load_profile
from console.services.fleet import FleetTelemetry
from console.services.history import History
from console.services.instances import InstanceState, InstanceView
from console.services.transports import TransportPool
from console.transport.replay import ReplayTransport, load_traces
from console.ui.app import ConsoleApp
from console.ui.model import events_view
from console.ui.model.instance_source import StaticInstances
from console.ui.widgets.gpu_table import GpuTable
from tests.helpers import wait_for
from tests.ui.scenes.health import HealthFleet, write_events

ROOT = Path(__file__).resolve().parents[3]
TRACES = ROOT / "tests" / "fixtures" / "traces"
PRESETS = ROOT / "profiles" / "presets.toml"

T0 = 1767225600.0  # the traces' last sample time (tests/fixtures/traces/record.py)
DEMO_NODES = ("mi300x-spx", "mi300x-cpx", "mi355x")
_SIMULATE = {
    "mi300x-spx": SimulateSpec("MI300X", 8, "SPX", "NPS1", 1),
    "mi300x-cpx": SimulateSpec("MI300X", 8, "CPX", "NPS1", 2),
    "mi355x": SimulateSpec("MI355X", 8, "SPX", "NPS1", 3),
}


_8B = "amd/Llama-3.1-8B-Instruct-FP8-KV"
_70B = "amd/Llama-3.1-70B-Instruct-FP8-KV"


def demo_instances(t0: float = T0) -> list[InstanceView]:
    """The instances every scene shows: ready, loading, failed, ended and unmanaged ones."""
    ready, loading, failed = InstanceState.READY, InstanceState.LOADING, InstanceState.FAILED

    def v(node, name, state, gpus, port, model, preset, age, pid, **kw) -> InstanceView:
        return InstanceView(
            node=node,
            name=name,
            state=state,
            gpus=gpus,
            port=port,
            model=model,
            preset=preset,
            started=t0 - age,
            pid=pid,
            **kw,
        )

    return [
        v(
            "mi300x-spx",
            "llama-3.1-70b-fp8-tp4",
            ready,
            (0, 1, 2, 3),
            8000,
            _70B,
            "llama-3.1-70b-fp8",
            11520,
            41230,
            stage="ready",
            served_models=(_70B,),
            version="0.9.1",
        ),
        v(
            "mi300x-spx",
            "llama-3.1-8b-fp8-g4",
            ready,
            (4,),
            8001,
            _8B,
            "llama-3.1-8b-fp8",
            1500,
            41300,
            stage="ready",
            served_models=(_8B,),
            version="0.9.1",
        ),
        v(
            "mi300x-spx",
            "llama-3.1-8b-fp8-g5",
            InstanceState.EXITED,
            (5,),
            8002,
            _8B,
            "llama-3.1-8b-fp8",
            7300,
            41400,
            exit_signal=2,
        ),
        v(
            "mi300x-cpx",
            "cpx-g0",
            ready,
            (0,),
            8000,
            _8B,
            "llama-3.1-8b-fp8-cpx",
            3720,
            52000,
            stage="ready",
            served_models=(_8B,),
            version="0.9.1",
        ),
        v(
            "mi300x-cpx",
            "cpx-g1",
            ready,
            (1,),
            8001,
            _8B,
            "llama-3.1-8b-fp8-cpx",
            3700,
            52001,
            stage="ready",
            served_models=(_8B,),
            version="0.9.1",
        ),
        v(
            "mi300x-cpx",
            "cpx-g12",
            loading,
            (12,),
            8002,
            _8B,
            "llama-3.1-8b-fp8-cpx",
            48,
            52112,
            stage="kv-cache",
            stage_detail="KV cache 180,224 tokens, max concurrency 22.00x",
        ),
        v(
            "mi300x-cpx",
            "cpx-g13",
            failed,
            (13,),
            8003,
            _8B,
            "llama-3.1-8b-fp8-cpx",
            400,
            52113,
            exit_code=1,
            stage="engine-init",
            reason="max_model_len too large: User-specified max_model_len (999999) is greater than the derived "
            "max_model_len (max_position_embeddings=131072 in model's config.json).",
        ),
        InstanceView(
            node="mi355x",
            name="pid-63000",
            state=InstanceState.UNMANAGED,
            pid=63000,
            gpus=tuple(range(8)),
            model="amd/Llama-3.3-70B-Instruct-FP8-KV",
            pids=tuple(range(63000, 63008)),
        ),
    ]


# cpx-g12's log so far (vLLM 0.9.1's lines on a CPX partition): the log viewer scene.
_P = "(APIServer pid=52112) INFO 01-01 00:00:{:02d} [{}] {}"
_E = "(EngineCore_0 pid=52160) INFO 01-01 00:00:{:02d} [{}] {}"
_W = "(VllmWorker rank=0 pid=52201) INFO 01-01 00:00:{:02d} [{}] {}"
DEMO_LOG = [
    _P.format(12, "api_server.py:1287", "vLLM API server version 0.9.1"),
    _P.format(
        12,
        "cli_args.py:309",
        "non-default args: {'model': '" + _8B + "', 'port': 8002, 'dtype': 'float16', "
        "'max_model_len': 8192, 'kv_cache_dtype': 'fp8', 'gpu_memory_utilization': 0.9}",
    ),
    _P.format(
        17, "config.py:823", "This model supports multiple tasks: {'generate', 'embed'}. Defaulting to 'generate'."
    ),
    _P.format(17, "config.py:1946", "Defaulting to use mp for distributed inference"),
    _P.format(17, "config.py:2195", "Chunked prefill is enabled with max_num_batched_tokens=131072."),
    _E.format(
        19,
        "core.py:69",
        "Initializing a V1 LLM engine (v0.9.1) with config: model='" + _8B + "', "
        "dtype=torch.float16, max_seq_len=8192, tensor_parallel_size=1, kv_cache_dtype=fp8",
    ),
    _W.format(21, "parallel_state.py:1065", "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0"),
    _W.format(21, "gpu_model_runner.py:1595", "Starting to load model " + _8B + "..."),
    _W.format(21, "rocm.py:224", "Using Triton Attention backend on V1 engine."),
    "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:03<00:03,  3.10s/it]",
    "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:05<00:00,  2.71s/it]",
    _W.format(27, "default_loader.py:272", "Loading weights took 5.48 seconds"),
    _W.format(27, "gpu_model_runner.py:1624", "Model loading took 8.49 GiB and 5.720341 seconds"),
    _W.format(31, "gpu_worker.py:227", "Memory profiling takes 3.81 seconds"),
    _W.format(
        31,
        "gpu_worker.py:227",
        "the current vLLM instance can use total_gpu_memory (23.98GiB) x gpu_memory_utilization (0.90) = 21.58GiB",
    ),
    _W.format(
        31,
        "gpu_worker.py:227",
        "model weights take 8.49GiB; non_torch_memory takes 0.38GiB; "
        "PyTorch activation peak memory takes 1.71GiB; the rest of the memory reserved for KV Cache is 11.00GiB.",
    ),
    _E.format(32, "kv_cache_utils.py:716", "GPU KV cache size: 180,224 tokens"),
    _E.format(32, "kv_cache_utils.py:720", "Maximum concurrency for 8,192 tokens per request: 22.00x"),
]


def scene_instances(scene: Scene) -> StaticInstances:
    """The demo instances of the scene's nodes that stay live (a down node is never asked)."""
    quiet = set(scene.down) | set(scene.stale)
    views = [v for v in demo_instances() if v.node in scene.nodes and v.node not in quiet]
    return StaticInstances(views, logs={"cpx-g12": DEMO_LOG})


class FrozenClock:
    """A clock that only moves when told (console side: sample ages, staleness)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass(frozen=True)
class Scene:
    name: str
    size: tuple[int, int] = (120, 36)
    nodes: tuple[str, ...] = DEMO_NODES
    down: tuple[str, ...] = ()  # link drops after the trace: down, last values kept
    stale: tuple[str, ...] = ()  # agent goes silent after the trace
    age: float = 42.0  # seconds since the down/stale nodes' last sample
    select: tuple[str, int | None] | None = None  # cursor row before the key presses
    press: tuple[str, ...] = ()
    theme: str | None = None
    wait_log: bool = False  # a log screen is open: wait until its lines are drawn
    doc: str = ""
    readme: bool = False  # written to screenshots/ by default (the others are test snapshots)


SCENES: dict[str, Scene] = {
    s.name: s
    for s in (
        Scene("fleet", readme=True, doc="fleet screen: an SPX node and a CPX node (64 logical GPUs)"),
        Scene("fleet-80x24", readme=True, size=(80, 24), doc="the fleet screen in an 80x24 terminal"),
        Scene(
            "gpu-detail",
            readme=True,
            select=("mi300x-spx", 0),
            press=("enter",),
            doc="GPU detail: charts, processes, facts",
        ),
        Scene(
            "gpu-detail-80x24",
            size=(80, 24),
            select=("mi300x-spx", 0),
            press=("enter",),
            doc="GPU detail in an 80x24 terminal",
        ),
        Scene(
            "cpx-partition-detail",
            select=("mi300x-cpx", 9),
            press=("enter",),
            doc="a secondary CPX partition: device-wide charts come from its physical GPU",
        ),
        Scene(
            "node-detail",
            readme=True,
            select=("mi300x-cpx", None),
            press=("enter",),
            doc="node detail (Enter on a node header)",
        ),
        Scene("help", readme=True, press=("question_mark",), doc="help: every binding with its id for [keys]"),
        Scene(
            "node-down",
            readme=True,
            nodes=("mi300x-spx", "mi355x"),
            down=("mi355x",),
            doc="a node whose link dropped: last values kept, dimmed, with the reason",
        ),
        Scene(
            "node-stale",
            nodes=("mi300x-spx", "mi355x"),
            stale=("mi355x",),
            age=7.0,
            doc="a node whose agent went silent: stale with the sample age",
        ),
        Scene("filter", press=("slash", *"busy", "space", *"cpx", "enter"), doc="/ filter: busy GPUs in CPX mode"),
        Scene("paused", press=("p",), doc="p: drawing paused, collection continues"),
        Scene("light", readme=True, theme="textual-light", doc="the light theme"),
        Scene(
            "instances",
            readme=True,
            press=("i",),
            doc="i: every vLLM instance with its state, stage or failure, GPUs, port, model, uptime",
        ),
        Scene("instances-80x24", size=(80, 24), press=("i",), doc="the instances panel in an 80x24 terminal"),
        Scene(
            "start-dialog",
            readme=True,
            select=("mi300x-spx", 6),
            press=("space", "s"),
            doc="s: start a serve preset on the GPUs marked with space",
        ),
        Scene(
            "start-dialog-80x24",
            size=(80, 24),
            select=("mi300x-cpx", 12),
            press=("s",),
            doc="the start dialog in an 80x24 terminal (a CPX GPU: the CPX preset is offered)",
        ),
        Scene(
            "instance-log",
            readme=True,
            select=("mi300x-cpx", 12),
            press=("l",),
            wait_log=True,
            doc="l: an instance's vLLM log with its startup stage, followed live",
        ),
        Scene("stop-confirm", select=("mi300x-spx", 4), press=("x",), doc="x: stop an instance, after a confirmation"),
        Scene(
            "gpu-health",
            readme=True,
            select=("mi300x-spx", 2),
            press=("enter",),
            doc="GPU detail: every health counter with its rate and since when (a GPU throttled on power)",
        ),
        Scene(
            "gpu-health-fail",
            select=("mi300x-spx", 5),
            press=("enter",),
            doc="GPU detail of a GPU in fail: uncorrectable ECC errors, a bad page pending",
        ),
        Scene(
            "fleet-sick",
            readme=True,
            press=("slash", *"sick", "enter"),
            doc="/ sick: only the GPUs in warn or fail, with the nodes' health summary",
        ),
        Scene("events", readme=True, press=("e",), doc="e: the fleet's timeline, newest first, followed live"),
        Scene(
            "events-filter",
            press=("e", "slash", *"kind:gpu", "space", *"warn", "enter"),
            doc="the events screen filtered: GPU events of warn or worse",
        ),
        Scene(
            "start-dialog-sick",
            select=("mi300x-spx", 5),
            press=("space", "s"),
            doc="the start dialog on a GPU in fail: the start will be refused unless forced",
        ),
        Scene(
            "instance-log-failed",
            select=("mi300x-cpx", 13),
            press=("l",),
            doc="the log of a failed instance, with its GPUs' events around the failure",
        ),
    )
}


def scene_profile(scene: Scene) -> Profile:
    return Profile(
        nodes=tuple(
            NodeSpec(name=n, host="localhost", transport="local", simulate=_SIMULATE.get(n)) for n in scene.nodes
        ),
        serve_presets=load_profile([PRESETS]).serve_presets,
    )


def _scene_time(t: float | None = None) -> time.struct_time:
    return time.gmtime((time.time() if t is None else t) + 9 * 3600)


def scene_events_path() -> Path:
    """A fresh events.jsonl holding demo_events(), removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix="rocm-console-scene-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "events.jsonl"
    write_events(path)
    return path


def build_app(scene: Scene):
    """The app for a scene, and the pilot coroutine that brings it to the scene's state."""
    traces = load_traces(TRACES, scene.nodes)
    clock = FrozenClock(T0 - scene.age)
    gate = asyncio.Event()
    transports: dict[str, ReplayTransport] = {}

    def factory(node: NodeSpec) -> ReplayTransport:
        name = node.name
        if name in scene.down:
            t = ReplayTransport(
                name, traces[name], end="fail", fail_reason=f"{name}: connection lost (no keepalive reply for 15 s)"
            )
        elif name in scene.stale:
            t = ReplayTransport(name, traces[name], end="hold")
        else:
            t = ReplayTransport(name, traces[name], end="hold", gate=gate)
        transports[name] = t
        return t

    # HealthFleet: the replayed nodes with a few sick GPUs (the traces carry no health lines).
    fleet = HealthFleet(
        scene_profile(scene).nodes, TransportPool(factory), clock=clock, stale_after=3.0, backoff_cap=60.0
    )
    instances = scene_instances(scene)
    app = ConsoleApp(
        scene_profile(scene), fleet=fleet, clock=clock, notify_health=False, cursor_blink=False, instances=instances
    )
    # The events screen's log: a morning of the demo fleet, in a folder of the scene's own;
    # calendar times in a fixed zone (UTC+9: the morning of T0's day), so that the SVGs are
    # the same on every machine.
    app.history = History(data_dir=scene_events_path().parent)  # its store takes the file in when opened
    events_view.localtime = _scene_time
    if scene.theme:
        app.theme = scene.theme

    def state() -> str:
        return "; ".join(
            f"{n}: {fleet.snapshot(n).health.value} {fleet.frames_received(n)} frames {fleet.snapshot(n).error or ''}"
            for n in scene.nodes
        )

    async def prepare(pilot) -> None:
        # Down and stale nodes deliver everything while the clock reads T0 - age;
        # the others hold back their last sample until the clock reads T0.
        want = {n: traces[n].samples() - (0 if n in scene.down or n in scene.stale else 1) for n in scene.nodes}
        await _until(pilot, lambda: all(fleet.frames_received(n) >= k for n, k in want.items()), what=state)
        await _until(pilot, lambda: all(fleet.snapshot(n).health == NodeHealth.DOWN for n in scene.down), what=state)
        # The versions probe (ROCm, vLLM in the node header) follows the first full frame and
        # changes no data generation: it must be in before the held-back samples redraw the rows.
        live = [n for n in scene.nodes if n not in scene.down and n not in scene.stale]
        await _until(
            pilot,
            lambda: all(fleet.snapshot(n).probe is not None for n in live),
            what=lambda: f"versions probed on {[n for n in live if fleet.snapshot(n).probe is not None]}",
        )
        clock.t = T0
        gate.set()
        await _until(
            pilot, lambda: all(fleet.frames_received(n) >= traces[n].samples() for n in scene.nodes), what=state
        )
        await _until(pilot, lambda: all(fleet.snapshot(n).health == NodeHealth.STALE for n in scene.stale), what=state)
        polled = [n for n in scene.nodes if n not in scene.down and n not in scene.stale]
        await _until(
            pilot,
            lambda: all(n in app.board.polled_once for n in polled),
            what=lambda: f"instances polled on {sorted(app.board.polled_once)}",
        )
        app.redraw_now()
        if scene.select is not None:
            app.screen.query_one(GpuTable).select(scene.select)
        await pilot.pause()
        for key in scene.press:
            await pilot.press(key)
        await pilot.pause()
        if scene.wait_log:
            await _until(
                pilot,
                lambda: getattr(app.screen, "received", 0) >= len(DEMO_LOG),
                what=lambda: "log lines not received",
            )
        app.redraw_now()
        await pilot.pause()

    return app, prepare


async def _until(pilot, predicate, timeout: float = 20.0, what: Callable[[], str] = lambda: "") -> None:
    if not await wait_for(predicate, timeout, step=0.02, pause=pilot.pause):
        raise TimeoutError(f"scene did not reach its state in time: {what()}")


def live_app(nodes: tuple[str, ...] = DEMO_NODES, *, pace: float = 1.0) -> ConsoleApp:
    """The console over the scenes' nodes with their traces looping (a new sample every `pace`
    seconds) and the scenes' instances: a living console without a process on any node."""
    traces = load_traces(TRACES, nodes)

    def factory(node: NodeSpec) -> ReplayTransport:
        return ReplayTransport(node.name, traces[node.name], end="loop", pace=pace)

    scene = Scene("live", nodes=nodes)
    profile = scene_profile(scene)
    fleet = FleetTelemetry(profile.nodes, TransportPool(factory))
    return ConsoleApp(profile, fleet=fleet, instances=scene_instances(scene))
