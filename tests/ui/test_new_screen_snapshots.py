"""SVG snapshots of the partition dialog, the results history and the comparison.

A minimal host app (not ConsoleApp) shows each screen over frozen data: a node
snapshot built here with a partition service that answers with the real rules
(preflight, describe_change) and a fixed switch result; stored runs imported
from seed 004 at a fixed time in UTC. No timing, no processes, no network.
Update after an intended change: pytest tests/ui/test_new_screen_snapshots.py --snapshot-update
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.app import App

from console.core.model import (
    GpuMetrics,
    GpuProcess,
    GpuStatic,
    NodeHealth,
    NodeSnapshot,
    NodeSpec,
    ProbeInfo,
    ServePreset,
    TelemetryFrame,
)
from console.core.partition_rules import Blocker, describe_change, preflight, process_blockers
from console.core.partition_view import renumber_lines
from console.services.history import History
from console.services.partitions import PartitionCheck, SwitchResult
from console.ui.screens.compare import CompareScreen
from console.ui.screens.history import HistoryScreen
from console.ui.screens.partition import PartitionScreen
from console.ui.screens.process_end import ProcessEndScreen

from .conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "tests" / "fixtures" / "seeds" / "004_040c923192cb04a5.txt"
T0 = 1767225600.0  # 2026-01-01 00:00 UTC
SIZE = (120, 36)
NODE = "mi300x-a"
PRESETS = (
    ServePreset(name="llama-3.1-70b-fp8", model="amd/Llama-3.1-70B-Instruct-FP8-KV", tp=8),
    ServePreset(name="llama-3.1-8b-fp8-cpx", model="amd/Llama-3.1-8B-Instruct-FP8-KV", tp=1),
)


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Dates and run ids are local time: pin the zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# ---------------------------------------------------------------- frozen partition data


def frozen_snapshot(busy: dict[int, int] | None = None, compute: str = "SPX") -> NodeSnapshot:
    per = 8 if compute == "CPX" else 1
    static = tuple(
        GpuStatic(
            index=i,
            physical=i // per,
            partition_id=i % per,
            bdf=f"0000:{0x0C + i // per:02x}:00.{i % per}",
            model="AMD Instinct MI300X",
            vram_total_mib=196592.0 / per,
            compute_partition=compute,
            memory_partition="NPS1",
            memory_caps=("NPS1", "NPS4"),
        )
        for i in range(8 * per)
    )
    gpus = tuple(
        GpuMetrics(index=i, processes=(GpuProcess(pid, "python3", 20480.0),) if pid else ())
        for i, pid in ((i, (busy or {}).get(i)) for i in range(8 * per))
    )
    return NodeSnapshot(
        name=NODE,
        health=NodeHealth.LIVE,
        source="amdsmi",
        last_sample_ts=T0,
        static=static,
        latest=TelemetryFrame(T0, 1, gpus),
        probe=ProbeInfo(uid=1000),
    )


class FrozenFleet:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self._snapshot = snapshot
        self.pool = None
        self.node_names = [NODE]
        self.restarted: list[str] = []

    def snapshot(self, node: str) -> NodeSnapshot:
        return self._snapshot

    def spec(self, node: str) -> NodeSpec:
        return NodeSpec(name=node, host="10.0.0.5", sudo=True)

    async def restart_node(self, node: str) -> None:
        self.restarted.append(node)


class FrozenPartitions:
    """The real rules over frozen data; switch answers with a fixed, verified result."""

    def __init__(self, instances_on_gpu: dict[int, str] | None = None) -> None:
        self.instances_on_gpu = instances_on_gpu or {}

    async def check_detail(self, node, snapshot, physical, *, compute, memory, ignore_pids=()):
        on_gpu = self.instances_on_gpu
        reasons = preflight(
            snapshot,
            physical,
            compute=compute,
            memory=memory,
            instances_on_gpu=on_gpu,
            can_be_root=node.sudo,
            ignore_pids=ignore_pids,
        )
        instances: dict[str, list[int]] = {}
        for gpu, name in sorted(on_gpu.items()):
            instances.setdefault(name, []).append(gpu)
        return PartitionCheck(
            tuple(reasons),
            describe_change(snapshot, physical, compute, memory),
            tuple(process_blockers(snapshot, physical, on_gpu, ignore_pids)),
            tuple(renumber_lines(snapshot, physical, compute, instances)),
            tuple((name, tuple(gpus)) for name, gpus in sorted(instances.items()) if set(gpus) & set(physical)),
        )

    async def switch(self, node, snapshot, physical, *, compute, memory, reload_confirmed=False, ignore_pids=()):
        gpus = tuple(
            {
                "physical": p,
                "compute_partition": compute or "SPX",
                "memory_partition": memory or "NPS1",
                "memory_caps": ["NPS1", "NPS4"],
                "logical_gpus": 8 if p in physical else 1,
            }
            for p in range(8)
        )
        return SwitchResult(
            node=node.name,
            gpus=gpus,
            logical_gpus=sum(g["logical_gpus"] for g in gpus),
            seconds=41.3,
            summary=describe_change(snapshot, physical, compute, memory),
        )


class SnapHost(App):
    def __init__(self, make_screen) -> None:
        super().__init__()
        self.cursor_blink = False
        self._make_screen = make_screen

    def on_mount(self) -> None:
        self.push_screen(self._make_screen())


async def _until(pilot, predicate, timeout: float = 10.0) -> None:
    assert await wait_for(pilot, predicate, timeout), "the screen did not reach its state"


def partition_app(physical=None, compute="CPX", memory=None, busy=None, instances=None, now="SPX"):
    fleet = FrozenFleet(frozen_snapshot(busy, now))
    service = FrozenPartitions(instances)
    return SnapHost(
        lambda: PartitionScreen(
            fleet, NODE, physical, service=service, presets=PRESETS, compute=compute, memory=memory, clock=lambda: 0.0
        )
    )


async def _checked(pilot) -> None:
    screen = pilot.app.screen
    await _until(pilot, lambda: isinstance(screen, PartitionScreen) and not screen.checking)
    await pilot.pause()


def test_partition_dialog_ready(snap_compare):
    """All 8 physical GPUs to CPX: 8 → 64 logical GPUs, TP 1 only, preflight passed."""
    assert snap_compare(partition_app(), terminal_size=SIZE, run_before=_checked)


def test_partition_dialog_refused(snap_compare):
    """GPU 4 serves an instance, GPU 5 runs a process: both refusals, Switch disabled."""
    app = partition_app(physical=[4, 5], busy={5: 51234}, instances={4: "llama-3.1-8b-fp8-g4"})
    assert snap_compare(app, terminal_size=SIZE, run_before=_checked)


def test_partition_dialog_renumbers_and_offers_to_end_blockers(snap_compare):
    """CPX GPU 1 to SPX with NPS1 chosen (its mode: no reload warning); GPU 9 runs a process
    (k offers to end it); GPUs 16-63 are renumbered, which moves an instance's HIP_VISIBLE_DEVICES."""
    app = partition_app(
        physical=[1], compute="SPX", memory="NPS1", busy={9: 4017}, instances={20: "llama-8b-g20"}, now="CPX"
    )
    assert snap_compare(app, terminal_size=SIZE, run_before=_checked)


def test_partition_dialog_unchanged(snap_compare):
    """CPX chosen for a GPU that is CPX: "unchanged", no warning, Switch disabled."""
    assert snap_compare(partition_app(physical=[1], compute="CPX", now="CPX"), terminal_size=SIZE, run_before=_checked)


def test_process_end_dialog(snap_compare):
    """The blockers listed, the signals and the foreign-user rule said, Cancel focused."""
    blockers = (Blocker(4000, "python3 (sim workload)", (0,)), Blocker(51234, "python3 train.py", (9, 10)))
    app = SnapHost(lambda: ProcessEndScreen(NodeSpec(name=NODE, host="10.0.0.5"), blockers))
    assert snap_compare(app, terminal_size=SIZE)


def test_partition_dialog_reload_confirm(snap_compare):
    """CPX + NPS4: the driver reload asks a second time."""

    async def run_before(pilot) -> None:
        await _checked(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()

    assert snap_compare(partition_app(memory="NPS4"), terminal_size=SIZE, run_before=run_before)


def test_partition_dialog_done(snap_compare):
    """The verified result, and the CPX preset offered for the new logical GPUs."""

    async def run_before(pilot) -> None:
        await _checked(pilot)
        screen = pilot.app.screen
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: screen.state == PartitionScreen.DONE)
        await pilot.pause()

    assert snap_compare(partition_app(physical=[0, 1]), terminal_size=SIZE, run_before=run_before)


# ---------------------------------------------------------------- frozen stored runs


@pytest.fixture
def store(tmp_path):
    history = History(data_dir=tmp_path)
    report = history.runs.import_paths([SEED], now=T0)
    assert len(report.imported) == 9
    return history


async def _loaded(pilot) -> None:
    screen = pilot.app.screen
    await _until(pilot, lambda: isinstance(screen, HistoryScreen) and screen.loaded)
    await pilot.pause()


def test_history_screen(snap_compare, store):
    """Nine imported runs, newest first; two of them marked for a comparison."""

    async def run_before(pilot) -> None:
        await _loaded(pilot)
        table = pilot.app.screen.table
        table.move_cursor(row=8)
        await pilot.press("space")
        table.move_cursor(row=5)
        await pilot.press("space")
        table.move_cursor(row=2)
        await pilot.pause()

    assert snap_compare(SnapHost(lambda: HistoryScreen(store)), terminal_size=SIZE, run_before=run_before)


def test_compare_screen_with_reference(snap_compare, store):
    """Two c128 runs side by side, deltas coloured, the seed's reference rows added."""
    runs = sorted(store.runs.list(model="70B"), key=lambda r: r.metrics.get("output_throughput") or 0)
    c128 = [r for r in store.runs.list() if r.setup.get("max_concurrency") == 128]
    assert len(runs) == 9 and len(c128) == 2

    async def run_before(pilot) -> None:
        screen = pilot.app.screen
        await _until(pilot, lambda: isinstance(screen, CompareScreen) and screen.matches is not None)
        await pilot.pause()

    app = SnapHost(lambda: CompareScreen(c128, show_reference=True))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
