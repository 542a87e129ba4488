"""Instances are listed on screen first: a node on screen every few seconds, one off screen
rarely, and at once when it scrolls into view or the instances screen opens (a thousand
nodes listed every 3 s would be 340 commands a second over SSH)."""

from __future__ import annotations

import collections

import pytest

from console.ui import app as app_module
from console.ui.model.instance_source import StaticInstances
from tests.ui.conftest import wait_for


class CountingInstances(StaticInstances):
    def __init__(self) -> None:
        super().__init__()
        self.by_node: collections.Counter[str] = collections.Counter()

    async def poll(self, node, snapshot, *, watched=()):
        self.by_node[node.name] += 1
        return await super().poll(node, snapshot, watched=watched)


def shown(app) -> set[str]:
    return app.screen.watched_nodes()


@pytest.fixture
def slow_offscreen(monkeypatch):
    monkeypatch.setattr(app_module, "OFFSCREEN_INSTANCE_POLL_S", 60.0)


async def test_off_screen_nodes_are_listed_rarely_and_at_once_when_shown(live_app, slow_offscreen):
    source = CountingInstances()
    app = live_app(instances=source, instance_poll_interval=0.2)
    async with app.run_test(size=(120, 12)) as pilot:
        first, *others = app.fleet.node_names
        assert await wait_for(pilot, lambda: source.by_node[first] >= 8, timeout=20)
        assert await wait_for(pilot, lambda: not (set(others) & shown(app)), timeout=5)
        before = dict(source.by_node)
        # on screen: every 0.2 s (waited for: a loaded machine may list late)
        assert await wait_for(pilot, lambda: source.by_node[first] - before[first] >= 3, timeout=10)
        for node in others:  # off screen: the first list only
            assert source.by_node[node] == before.get(node, 0) <= 1, (node, source.by_node)
        last = others[-1]
        await pilot.press("end")
        assert await wait_for(pilot, lambda: last in shown(app), timeout=5)
        assert await wait_for(pilot, lambda: source.by_node[last] > before.get(last, 0), timeout=10)
        # the instances screen lists every node's instances: the ones not shown are listed now
        middle = others[0]
        if middle not in shown(app):
            seen = source.by_node[middle]
            await pilot.press("i")
            assert await wait_for(pilot, lambda: source.by_node[middle] > seen, timeout=10)


async def test_an_off_screen_node_whose_gpu_processes_change_is_listed_at_once(live_app, slow_offscreen):
    """A vLLM server that dies off screen: its GPUs' processes go, and the node is listed
    then (its failure reaches the timeline and alerts), not a minute later."""
    from dataclasses import replace

    from console.core.model import GpuProcess
    from console.services.fleet import TelemetryReceived

    source = CountingInstances()
    app = live_app(instances=source, instance_poll_interval=0.2)
    async with app.run_test(size=(120, 12)) as pilot:
        last = app.fleet.node_names[-1]
        assert await wait_for(pilot, lambda: source.by_node[last] >= 1 and last not in shown(app), timeout=20)
        app.transports[last].flowing.clear()  # its agent goes quiet: only the frames below come
        await pilot.pause(0.5)
        frame = app.fleet.snapshot(last).latest
        assert frame is not None
        seen = source.by_node[last]
        with_vllm = replace(frame, gpus=(replace(frame.gpus[0], processes=(GpuProcess(4242, "vllm", 1000.0),)),))
        app._on_fleet_event(TelemetryReceived(last, with_vllm, 0.0))
        assert await wait_for(pilot, lambda: source.by_node[last] > seen, timeout=10)
        seen = source.by_node[last]
        app._on_fleet_event(TelemetryReceived(last, with_vllm, 0.0))  # the same processes: no list
        await pilot.pause(0.5)
        assert source.by_node[last] == seen


async def test_an_unattended_console_lists_rarely_and_a_key_lists_what_is_shown(live_app, slow_offscreen):
    import time

    source = CountingInstances()
    app = live_app(instances=source, instance_poll_interval=0.2)
    async with app.run_test(size=(120, 12)) as pilot:
        first = app.fleet.node_names[0]
        assert await wait_for(pilot, lambda: source.by_node[first] >= 3, timeout=20)
        app._input_at = time.monotonic() - app_module.UNATTENDED_AFTER_S - 1  # nobody for long
        await pilot.pause(0.5)  # a list in flight ends
        left = source.by_node[first]
        await pilot.pause(1.2)
        assert source.by_node[first] <= left + 1, (left, source.by_node[first])
        seen = source.by_node[first]
        await pilot.press("down")  # someone is back: what is on screen is listed now
        assert await wait_for(pilot, lambda: source.by_node[first] > seen, timeout=10)
