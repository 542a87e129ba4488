"""One path from a run's outcome to a record, for every face (CLI, TUI, a watcher).

A face runs a benchmark (serving, offline, a find-max point) and hands what came back to a
`RunRecorder`; the recorder builds the stored record (context, setup, live summary, label,
status) and saves it. When the store cannot take it (the data dir is a file, read-only, the
disk full), the record is kept beside the run's result on the node (node_results.keep_on_node)
and the one line the user reads says why, where it stays and how `results fetch` stores it
later. Faces only show what the recorder returns (`Recorded`): none of them builds a record,
a context or a sweep id, and each passes down the one ResultStore it made.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from console.core.bench.offline import OfflineError, OfflinePreset
from console.core.model import BenchPreset, NodeSnapshot, NodeSpec
from console.core.results.build import run_from_console
from console.core.results.offline import run_from_offline
from console.core.results.record import StoredRun
from console.core.text import one_line
from console.services.groups import GroupView
from console.services.instances import InstanceView
from console.services.node_results import keep_on_node, result_place
from console.services.results import ResultStore, StoreError
from console.services.runs import run as run_api
from console.services.runs.group import GroupBenchOutcome, store_group
from console.services.runs.offline import OfflineOutcome
from console.services.runs.serving import RunOutcome, live_summary, store_kwargs
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_CANCELLED = "cancelled"


def run_status(outcome: run_api.Outcome) -> str:
    """The run's `status` in its stored context: how its process ended, one answer for every face.

    A run stopped by a cancel is "cancelled" even when its client wrote a result: the result
    covers only the requests done before the stop, so it is stored (never lost: the requests
    that did finish were measured) but never as "ok", which would let a partial run stand in
    comparisons next to whole ones (results list shows it failed: cancelled). A non-zero exit is
    "failed". Anything else is "ok": failed requests inside an ok process are judged from the
    metrics themselves (display.failure_of), as before."""
    if outcome.cancelled:
        return STATUS_CANCELLED
    if outcome.exit_code not in (0, None):
        return STATUS_FAILED
    return STATUS_OK


def new_sweep_id() -> str:
    """An id the runs of one sweep (or one find-max search) share in their context."""
    return uuid.uuid4().hex[:8]


def sweep_id_for(points: Sequence[object]) -> str | None:
    """A sweep's id: one for several points, None for a single run."""
    return new_sweep_id() if len(points) > 1 else None


def _covers(snapshot: NodeSnapshot | None, gpus: Sequence[int]) -> bool:
    return snapshot is not None and any(g.index in gpus for g in snapshot.static)


async def node_snapshot(
    pool: TransportPool, node: NodeSpec, gpus: Sequence[int], snapshot: NodeSnapshot | None = None
) -> NodeSnapshot | None:
    """`snapshot` when it knows the GPUs (the TUI's fleet), else one fresh sample of the node
    (the CLI, or a TUI without telemetry yet); None when the node cannot be asked."""
    if _covers(snapshot, gpus):
        return snapshot
    try:
        fresh = await sample_node(pool, node, probe=True)
    except TransportError:
        return snapshot  # the context names fewer facts; the record is still made
    return fresh if _covers(fresh, gpus) or snapshot is None else snapshot


def instance_context(node: NodeSpec, view: InstanceView, snapshot: NodeSnapshot | None) -> dict[str, Any]:
    """Where a serving run ran: the node, its GPUs' model and modes, the instance and its vLLM."""
    probe = snapshot.probe if snapshot is not None else None
    return {
        **run_api.gpu_context(node, snapshot, view.gpus),
        "instance": view.name,
        "serve_preset": view.preset,
        "serve_args": list(view.argv),
        "vllm_version": view.version or (probe.vllm if probe else None),
        "gpus": list(view.gpus),
    }


def offline_context(
    node: NodeSpec,
    snapshot: NodeSnapshot | None,
    gpus: Sequence[int],
    preset: OfflinePreset,
    outcome: OfflineOutcome,
    overrides: Mapping[str, str] | None,
    version: str | None = None,
) -> dict[str, Any]:
    """Where an offline run ran and with what (the run's title names what an override changed)."""
    probe = snapshot.probe if snapshot is not None else None
    return {
        **run_api.gpu_context(node, snapshot, gpus),
        "vllm_version": version or (probe.vllm if probe else None),
        "bench_preset": preset.name,
        "client_argv": list(outcome.argv),
        "env": dict(preset.env) or None,
        "gpus": list(gpus),
        "offline_run": outcome.run,
        "bench_overrides": dict(overrides or {}) or None,
        "status": run_status(outcome),
    }


def serving_record(
    outcome: RunOutcome,
    base: Mapping[str, Any],
    setup: BenchPreset,
    *,
    label: str | None = None,
    sweep_id: str | None = None,
    point: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> StoredRun:
    """The stored record of a serving run that wrote a result (the caller checks result_json)."""
    context = {
        **base,
        "bench_preset": setup.name,
        "client_argv": list(outcome.argv),
        "sweep_id": sweep_id,
        "sweep_point": point,
        **(extra or {}),
        "status": run_status(outcome),
    }
    return run_from_console(
        context,
        outcome.result_json,
        live_summary(outcome.live),
        setup=setup,
        block=outcome.block,
        label=label,
        **store_kwargs(outcome),
    )


def headline_record(outcome: RunOutcome) -> StoredRun:
    """A serving run's figures as a record would hold them, without context (`--no-store --json`)."""
    return run_from_console(None, outcome.result_json, None, block=outcome.block, **store_kwargs(outcome))


def offline_record(
    node: NodeSpec, outcome: OfflineOutcome, preset: OfflinePreset, context: Mapping[str, Any], label: str | None
) -> StoredRun:
    """The stored record of an offline run that wrote a result; OfflineError when it lacks its number."""
    assert outcome.result_json is not None
    script = bool(outcome.argv) and outcome.argv[0] == node.python
    return run_from_offline(
        context,
        outcome.kind,
        outcome.result_json,
        preset,
        client="script" if script else "subcommand",
        label=label,
        telemetry=outcome.telemetry,
    )


@dataclass(frozen=True)
class Recorded:
    """What became of a run's outcome: stored (`stored`), kept on the node (`kept_at`), or
    neither (no result, or no store asked for). `reason`: why it is not stored, with where it
    stays and the command that stores it later; `line` is that for a log or stderr."""

    run_name: str
    record: StoredRun | None = None  # as built (None: the run wrote no result, or it did not parse)
    stored: StoredRun | None = None  # as the store has it (its id is the store's)
    kept_at: str | None = None  # the result file on the node, when the store could not take it
    reason: str | None = None
    ids: tuple[str, ...] = ()  # a group's: each replica's stored run, then the merged one

    @property
    def stored_id(self) -> str | None:
        return self.stored.id if self.stored is not None else None

    @property
    def line(self) -> str | None:
        return f"{self.run_name}: not stored ({self.reason})" if self.reason is not None else None


class RunRecorder:
    """Turns run outcomes into stored records for one face's store (None: `--no-store`: records
    are built, nothing is written). `pool` reaches the node to sample it and to keep a result."""

    def __init__(self, pool: TransportPool, store: ResultStore | None) -> None:
        self.pool = pool
        self.store = store

    async def instance_base(
        self, node: NodeSpec, view: InstanceView, snapshot: NodeSnapshot | None = None
    ) -> dict[str, Any]:
        """instance_context, sampling the node once when `snapshot` does not know its GPUs."""
        return instance_context(node, view, await node_snapshot(self.pool, node, view.gpus, snapshot))

    async def serving(
        self,
        node: NodeSpec,
        view: InstanceView,
        outcome: RunOutcome,
        setup: BenchPreset,
        *,
        label: str | None = None,
        sweep_id: str | None = None,
        point: float | None = None,
        snapshot: NodeSnapshot | None = None,
        base: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Recorded:
        """A serving run (a `bench run` or sweep point, a find-max point): stored, or kept."""
        if outcome.result_json is None:
            return Recorded(outcome.run)
        base = base if base is not None else await self.instance_base(node, view, snapshot)
        record = serving_record(outcome, base, setup, label=label, sweep_id=sweep_id, point=point, extra=extra)
        return await self.save(node, outcome.run, record)

    async def offline(
        self,
        node: NodeSpec,
        outcome: OfflineOutcome,
        preset: OfflinePreset,
        gpus: Sequence[int],
        *,
        snapshot: NodeSnapshot | None = None,
        version: str | None = None,
        overrides: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> Recorded:
        """An offline run (`bench latency|throughput`): stored, or kept; a result without its
        number stays on the node, and `reason` says where."""
        if outcome.result_json is None:
            return Recorded(outcome.run)
        snapshot = await node_snapshot(self.pool, node, gpus, snapshot)
        context = offline_context(node, snapshot, gpus, preset, outcome, overrides, version)
        try:
            record = offline_record(node, outcome, preset, context, label)
        except OfflineError as exc:
            where = await result_place(self.pool, node, outcome.run)
            return Recorded(
                outcome.run, kept_at=where, reason=f"{exc}; the result file stays on {node.name} at {where}"
            )
        return await self.save(node, outcome.run, record)

    async def group(
        self,
        outcome: GroupBenchOutcome,
        group: GroupView,
        preset: BenchPreset,
        *,
        label: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Recorded:
        """A replica group's run: each client's result and the merged one (group.store_group).
        When the store cannot take them, each replica's result stays in its run's folder on its
        node, and `reason` names them and the command that stores them later."""
        store = self.store
        name = f"group {outcome.group}"
        if store is None or outcome.result is None:
            return Recorded(name)
        try:
            ids = await asyncio.to_thread(store_group, store, outcome, group, preset, label=label, extra=extra)
            stored = await asyncio.to_thread(store.get, ids[-1]) if ids else None
        except (StoreError, OSError, ValueError, KeyError) as exc:
            places = ", ".join(f"{o.run} on {o.node}" for o in outcome.outcomes if o.result_json is not None)
            reason = f"{one_line(exc)}; each replica's result stays on its node" + (
                f" ({places}): store them later with `rocm-console results fetch RUN --node NODE`" if places else ""
            )
            return Recorded(name, reason=reason)
        return Recorded(name, stored, stored, ids=tuple(ids))

    async def save(self, node: NodeSpec, run_name: str, record: StoredRun) -> Recorded:
        """Store `record` (off the event loop); when the store cannot take it, keep it beside the
        run's result on the node, where `results fetch` finds it whole."""
        store = self.store
        if store is None:
            return Recorded(run_name, record)
        try:
            stored = await asyncio.to_thread(lambda: store.get(store.save(record)))
        except (StoreError, OSError, ValueError, KeyError) as exc:  # disk full, a file in the way
            where = await keep_on_node(self.pool, node, run_name, record)
            reason = (
                f"{one_line(exc)}; the result stays on {node.name} at {where}: "
                f"store it later with `rocm-console results fetch {run_name} --node {node.name}`"
            )
            return Recorded(run_name, record, kept_at=where, reason=reason)
        return Recorded(run_name, record, stored)
