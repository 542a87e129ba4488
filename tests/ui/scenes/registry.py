"""The one registry of scenes: each name, its terminal size, what it shows, whether the README
shows it, and how to build its app and bring it to its state (a pilot coroutine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from textual.app import App
from textual.pilot import Pilot

from tests.ui.scenes import bench, fleet

Prepare = Callable[[Pilot], Awaitable[None]]


@dataclass(frozen=True)
class Shot:
    name: str
    kind: str  # "fleet": the console over replayed nodes; "bench": the benchmark screen fed a synthetic run
    size: tuple[int, int]
    doc: str
    readme: bool  # written to screenshots/ by default
    make: Callable[[], tuple[App, Prepare]]


def _fleet(scene: fleet.Scene) -> Shot:
    return Shot(scene.name, "fleet", scene.size, scene.doc, scene.readme, lambda: fleet.build_app(scene))


def _bench(scene: bench.BenchScene, doc: str, readme: bool) -> Shot:
    return Shot(scene.name, "bench", scene.size, doc, readme, lambda: (bench.BenchSceneApp(scene), bench.prepare))


_BENCH_DOCS = {
    "bench-running": ("a benchmark run against an instance, live", True),
    "bench-finished": ("the benchmark screen after the run: vLLM's own result table", False),
    "bench-failed": ("a benchmark whose server went away: the failure first", False),
    "bench-sweep": ("a concurrency sweep: one row per point, Pareto charts", True),
}

SCENES: dict[str, Shot] = {
    **{name: _fleet(scene) for name, scene in fleet.SCENES.items()},
    **{name: _bench(scene, *_BENCH_DOCS[name]) for name, scene in bench.SCENES.items()},
}


def of_kind(kind: str) -> list[str]:
    return [name for name, shot in SCENES.items() if shot.kind == kind]
