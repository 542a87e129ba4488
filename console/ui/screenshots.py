"""Regenerate the README screenshots: ``python -m console.ui.screenshots [NAME ...]``.

Every scene runs the real app headless over recorded agent traces
(tests/fixtures/traces, replayed by ReplayTransport) with frozen clocks, so the
SVGs only change when the UI does. The SVG snapshot tests use the same scenes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from console.core.model import NodeHealth, NodeSpec, Profile, SimulateSpec
from console.services.fleet import FleetTelemetry
from console.services.transports import TransportPool
from console.transport.replay import ReplayTransport, load_traces

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "fixtures" / "traces"
OUT = ROOT / "screenshots"

T0 = 1767225600.0  # the traces' last sample time (tests/fixtures/traces/record.py)
DEMO_NODES = ("mi300x-spx", "mi300x-cpx", "mi355x")
_SIMULATE = {
    "mi300x-spx": SimulateSpec("MI300X", 8, "SPX", "NPS1", 1),
    "mi300x-cpx": SimulateSpec("MI300X", 8, "CPX", "NPS1", 2),
    "mi355x": SimulateSpec("MI355X", 8, "SPX", "NPS1", 3),
}


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
    doc: str = ""
    readme: bool = False  # written to screenshots/ by default (the others are test snapshots)


SCENES: dict[str, Scene] = {s.name: s for s in (
    Scene("fleet", readme=True, doc="fleet screen: an SPX node and a CPX node (64 logical GPUs)"),
    Scene("fleet-80x24", readme=True, size=(80, 24), doc="the fleet screen in an 80x24 terminal"),
    Scene("gpu-detail", readme=True, select=("mi300x-spx", 0), press=("enter",),
          doc="GPU detail: charts, processes, facts"),
    Scene("gpu-detail-80x24", size=(80, 24), select=("mi300x-spx", 0), press=("enter",),
          doc="GPU detail in an 80x24 terminal"),
    Scene("cpx-partition-detail", select=("mi300x-cpx", 9), press=("enter",),
          doc="a secondary CPX partition: device-wide charts come from its physical GPU"),
    Scene("node-detail", readme=True, select=("mi300x-cpx", None), press=("enter",),
          doc="node detail (Enter on a node header)"),
    Scene("help", readme=True, press=("question_mark",), doc="help: every binding with its id for [keys]"),
    Scene("node-down", readme=True, nodes=("mi300x-spx", "mi355x"), down=("mi355x",),
          doc="a node whose link dropped: last values kept, dimmed, with the reason"),
    Scene("node-stale", nodes=("mi300x-spx", "mi355x"), stale=("mi355x",), age=7.0,
          doc="a node whose agent went silent: stale with the sample age"),
    Scene("filter", press=("slash", *"busy", "space", *"cpx", "enter"), doc="/ filter: busy GPUs in CPX mode"),
    Scene("paused", press=("p",), doc="p: drawing paused, collection continues"),
    Scene("light", readme=True, theme="textual-light", doc="the light theme"),
)}


def scene_profile(scene: Scene) -> Profile:
    return Profile(nodes=tuple(
        NodeSpec(name=n, host="localhost", transport="local", simulate=_SIMULATE.get(n)) for n in scene.nodes))


def build_app(scene: Scene):
    """The app for a scene, and the pilot coroutine that brings it to the scene's state."""
    from console.ui.app import ConsoleApp

    traces = load_traces(TRACES, scene.nodes)
    clock = FrozenClock(T0 - scene.age)
    gate = asyncio.Event()
    transports: dict[str, ReplayTransport] = {}

    def factory(node: NodeSpec) -> ReplayTransport:
        name = node.name
        if name in scene.down:
            t = ReplayTransport(name, traces[name], end="fail",
                                fail_reason=f"{name}: connection lost (no keepalive reply for 15 s)")
        elif name in scene.stale:
            t = ReplayTransport(name, traces[name], end="hold")
        else:
            t = ReplayTransport(name, traces[name], end="hold", gate=gate)
        transports[name] = t
        return t

    fleet = FleetTelemetry(scene_profile(scene).nodes, TransportPool(factory), clock=clock,
                           stale_after=3.0, backoff_cap=60.0)
    app = ConsoleApp(scene_profile(scene), fleet=fleet, clock=clock, notify_health=False,
                     cursor_blink=False)
    if scene.theme:
        app.theme = scene.theme

    def state() -> str:
        return "; ".join(f"{n}: {fleet.snapshot(n).health.value} {fleet.frames_received(n)} frames "
                         f"{fleet.snapshot(n).error or ''}" for n in scene.nodes)

    async def prepare(pilot) -> None:
        # Down and stale nodes deliver everything while the clock reads T0 - age;
        # the others hold back their last sample until the clock reads T0.
        want = {n: traces[n].samples() - (0 if n in scene.down or n in scene.stale else 1) for n in scene.nodes}
        await _until(pilot, lambda: all(fleet.frames_received(n) >= k for n, k in want.items()), what=state)
        await _until(pilot, lambda: all(fleet.snapshot(n).health == NodeHealth.DOWN for n in scene.down),
                     what=state)
        clock.t = T0
        gate.set()
        await _until(pilot, lambda: all(fleet.frames_received(n) >= traces[n].samples() for n in scene.nodes),
                     what=state)
        await _until(pilot, lambda: all(fleet.snapshot(n).health == NodeHealth.STALE for n in scene.stale),
                     what=state)
        app.redraw_now()
        if scene.select is not None:
            app.screen.query_one("GpuTable").select(scene.select)
        await pilot.pause()
        for key in scene.press:
            await pilot.press(key)
        await pilot.pause()
        app.redraw_now()
        await pilot.pause()

    return app, prepare


async def _until(pilot, predicate, timeout: float = 20.0, what: Callable[[], str] = lambda: "") -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise TimeoutError(f"scene did not reach its state in time: {what()}")
        await pilot.pause(0.02)


async def shoot(scene: Scene, out: Path) -> Path:
    app, prepare = build_app(scene)
    async with app.run_test(size=scene.size, notifications=False) as pilot:
        await prepare(pilot)
        path = out / f"{scene.name}.svg"
        path.write_text(app.export_screenshot(title=f"rocm-console — {scene.name}"), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.ui.screenshots", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*",
                        help=f"scenes (default: the README set; 'all' for every one): {', '.join(SCENES)}")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the SVGs (default: screenshots/)")
    args = parser.parse_args(argv)
    names = list(SCENES) if args.names == ["all"] else args.names or [n for n, s in SCENES.items() if s.readme]
    unknown = [n for n in names if n not in SCENES]
    if unknown:
        parser.error(f"unknown scene {unknown[0]!r}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = asyncio.run(shoot(SCENES[name], args.out))
        print(f"{path}  {SCENES[name].doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
