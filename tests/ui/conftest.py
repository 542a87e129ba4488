"""UI test fixtures: replayed nodes (recorded agent traces), frozen clocks, no blinking."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from console.core.model import NodeSpec, Profile
from console.core.profiles import load_profile
from console.services.fleet import FleetTelemetry
from console.services.transports import TransportPool
from console.transport.base import TransportError
from console.transport.replay import ReplayTransport, load_traces
from console.ui.app import ConsoleApp
from console.ui.model.instance_source import StaticInstances
from tests import helpers
from tests.ui.scenes.fleet import DEMO_NODES, PRESETS, TRACES, Scene, scene_profile


class FaultyReplay(ReplayTransport):
    """A looping replay whose link a test can freeze (agent silent) or cut (link down)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cut = False
        self.flowing = asyncio.Event()
        self.flowing.set()

    def _check_link(self) -> None:
        if self.cut:
            raise TransportError(f"{self.node_name}: connection refused", "unreachable")

    async def stream_lines(self, argv, *, env=None):
        async for line in super().stream_lines(argv, env=env):
            await self.flowing.wait()
            self._check_link()
            yield line


@pytest.fixture
def live_app():
    """An app over looping replays (new samples every `pace` s): collection never stops."""

    def make(nodes=DEMO_NODES, *, pace=0.2, stale_after=None, keys=(), size=None, presets=False, **app_kwargs):
        traces = load_traces(TRACES, nodes)
        transports: dict[str, FaultyReplay] = {}

        def factory(node: NodeSpec) -> FaultyReplay:
            transports[node.name] = FaultyReplay(node.name, traces[node.name], end="loop", pace=pace)
            return transports[node.name]

        profile = scene_profile(Scene("pilot", nodes=tuple(nodes)))
        if presets:  # the shipped serve and bench presets (the start and benchmark dialogs)
            profile = Profile(
                nodes=profile.nodes,
                keys=tuple(keys),
                serve_presets=profile.serve_presets,
                bench_presets=load_profile([PRESETS]).bench_presets,
            )
        else:
            profile = Profile(nodes=profile.nodes, keys=tuple(keys))
        fleet = FleetTelemetry(profile.nodes, TransportPool(factory), stale_after=stale_after, backoff_cap=0.3)
        app_kwargs.setdefault("instances", StaticInstances())  # replayed nodes run no vLLM
        app = ConsoleApp(
            profile, fleet=fleet, notify_health=False, cursor_blink=False, redraw_interval=0.05, **app_kwargs
        )
        app.transports = transports  # type: ignore[attr-defined]
        return app

    return make


async def wait_for(pilot, predicate, timeout: float = 10.0) -> bool:
    """Until `predicate` holds (False after `timeout` s), the app drawing meanwhile."""
    return await helpers.wait_for(predicate, timeout, step=0.02, pause=pilot.pause)


def screen_text(app) -> str:
    """What a person sees, as plain text."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


@pytest.fixture
async def served(node):
    """A ready `tiny` instance on GPU 1 of the test module's `node`; (view, pool). Stopped
    afterwards, whatever happens."""
    from console.services.instances import InstanceService, InstanceState
    from console.services.status import sample_node

    tiny = next(p for p in load_profile([PRESETS]).serve_presets if p.name == "tiny")
    pool = TransportPool()
    service = InstanceService(pool)
    try:
        snap = await sample_node(pool, node, probe=False)
        await service.start(node, tiny, gpus=[1], snapshot=snap, port=helpers.free_port(), name="tiny-b")
        view = await service.wait_ready(node, "tiny-b", timeout=60)
        assert view.state == InstanceState.READY
        yield view, pool
    finally:
        try:
            for v in await service.list(node):
                if v.state in (InstanceState.STARTING, InstanceState.LOADING, InstanceState.READY):
                    await service.stop(node, v.name, int_timeout=5, term_timeout=2)
        finally:
            await pool.close()
