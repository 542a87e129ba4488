"""Redraw cost of the fleet screen at 3 nodes and at 64 nodes x 64 logical GPUs.

    python tests/perf/ui_redraw.py [--repeat 50] [--seconds 8]

Prints one JSON object. Nodes are replayed from the recorded traces
(tests/fixtures/traces): the 3 demo nodes, and the CPX trace cloned 64 times
(4096 logical GPUs). Figures per fleet size:

- redraw_ms: one clock tick after every node got a new frame (all rows dirty):
  the screen's redraw plus the compositor rendering the visible screen.
- idle_tick_ms: a tick with nothing new (the common case between samples).
- steady: the app running with every node sampling at 1 Hz (nodes out of phase,
  as real ones are) for --seconds: process CPU % (parsing included), the
  event-loop lag (how late a 10 ms timer fired), the slowest clock tick.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from console.core.model import NodeSpec, Profile, SimulateSpec  # noqa: E402
from console.services.fleet import FleetTelemetry  # noqa: E402
from console.services.transports import TransportPool  # noqa: E402
from console.transport.replay import ReplayTransport, load_traces  # noqa: E402
from console.ui.app import ConsoleApp  # noqa: E402
from tests.ui.scenes.fleet import TRACES  # noqa: E402

SIZE = (120, 36)


class StaggeredReplay(ReplayTransport):
    """Real nodes are not phase-locked: each stream starts at its own offset in the second."""

    def __init__(self, *args, offset: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.offset = offset

    async def stream_lines(self, argv, *, env=None):
        await asyncio.sleep(self.offset)
        async for line in super().stream_lines(argv, env=env):
            yield line


def fleet_of(names_to_trace: dict[str, str], pace: float | None):
    traces = load_traces(TRACES, sorted(set(names_to_trace.values())))
    nodes = tuple(
        NodeSpec(name=n, host="localhost", transport="local", simulate=SimulateSpec()) for n in names_to_trace
    )
    offsets = {n: i / len(nodes) for i, n in enumerate(names_to_trace)}

    def factory(node: NodeSpec) -> ReplayTransport:
        return StaggeredReplay(
            node.name, traces[names_to_trace[node.name]], end="loop", pace=pace, offset=offsets[node.name]
        )

    return Profile(nodes=nodes), FleetTelemetry(nodes, TransportPool(factory))


async def measure(label: str, names_to_trace: dict[str, str], repeat: int, seconds: float) -> dict:
    # pace: 1 s between samples per node, like the default sampling interval.
    profile, fleet = fleet_of(names_to_trace, pace=1.0)
    app = ConsoleApp(profile, fleet=fleet, notify_health=False, cursor_blink=False)
    result: dict = {"nodes": len(names_to_trace)}
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60
        while not all(fleet.frames_received(n) > 0 for n in names_to_trace):
            if time.monotonic() > deadline:
                raise SystemExit(f"{label}: nodes did not start")
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        table = app.screen.query_one("GpuTable")
        result["rows"] = len(table.rows)
        result["gpus"] = sum(1 for r in table.rows if r.gpu is not None)

        def tick_all_dirty() -> float:
            for name in names_to_trace:  # as if every node just delivered a frame
                app.view.generation[name] += 1
            app._dirty = True
            t = time.perf_counter()
            app._tick()
            app.screen._compositor.render_update(full=True)
            return (time.perf_counter() - t) * 1000

        def tick_idle() -> float:
            t = time.perf_counter()
            app._tick()
            return (time.perf_counter() - t) * 1000

        app.paused = False
        dirty = [tick_all_dirty() for _ in range(repeat)]
        idle = [tick_idle() for _ in range(repeat)]
        result["redraw_ms"] = _summary(dirty)
        result["idle_tick_ms"] = _summary(idle)
        result["line_cache_entries"] = len(table._cache)

        # Steady state: the real clock, real message flow, every node at 1 Hz.
        lags: list[float] = []
        stop = asyncio.Event()

        async def probe() -> None:
            loop = asyncio.get_running_loop()
            while not stop.is_set():
                t = loop.time()
                await asyncio.sleep(0.01)
                lags.append((loop.time() - t - 0.01) * 1000)

        ticks: list[float] = []
        screen = app.screen
        redraw = screen.redraw

        def timed_redraw(now: float) -> None:
            t = time.perf_counter()
            redraw(now)
            ticks.append((time.perf_counter() - t) * 1000)

        screen.redraw = timed_redraw  # the clock looks it up on every tick
        task = asyncio.create_task(probe())
        cpu0, wall0, redraws0, events0 = time.process_time(), time.monotonic(), app.redraws, app.view.events
        await pilot.pause(seconds)
        cpu1, wall1 = time.process_time(), time.monotonic()
        stop.set()
        await task
        result["steady"] = {
            "seconds": round(wall1 - wall0, 1),
            "cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1),
            "fleet_events_per_s": round((app.view.events - events0) / (wall1 - wall0), 1),
            "redraws_per_s": round((app.redraws - redraws0) / (wall1 - wall0), 2),
            "loop_lag_ms_p50": round(statistics.median(lags), 2),
            "loop_lag_ms_max": round(max(lags), 1),
            "screen_redraw_ms_max": round(max(ticks), 2) if ticks else None,
        }
    return result


def _summary(values: list[float]) -> dict:
    values = sorted(values)
    return {
        "median": round(statistics.median(values), 3),
        "p90": round(values[int(0.9 * (len(values) - 1))], 3),
        "max": round(values[-1], 3),
    }


async def main_async(args) -> dict:
    demo = {n: n for n in ("mi300x-spx", "mi300x-cpx", "mi355x")}
    big = {f"cpx-{i:02d}": "mi300x-cpx" for i in range(64)}
    return {
        "terminal": f"{SIZE[0]}x{SIZE[1]}",
        "python": sys.version.split()[0],
        "3_nodes": await measure("3 nodes", demo, args.repeat, args.seconds),
        "64_nodes_x_64_gpus": await measure("64 nodes", big, args.repeat, args.seconds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
