"""Runs a layout experiment unattended, point by point, resumable.

Per layout: switch the node's partition when the layout asks another one
(PartitionService: the same preflight and read-back verification as
`partition set`), start the layout's replica group, wait until every replica is
ready, sweep the load points with group benchmarks, stop the group, go on. With
`find_max = true` a layout has one point instead: the find-max search under the
experiment's budget (services/runs/find_max.py), each of its runs stored, its
answer (the highest load within the budget, with its figures) the layout's point.

The state file is written after every step. A run that was killed (the console,
the SSH link) starts again where it was: finished points are never rerun; a
group of the layout left running on the node is taken over when it is whole
and ready, else stopped and started again; benchmark clients left running are
cancelled. A layout that fails (partition refused, a replica that does not come
up) is recorded with its reason and the next layout goes on.

Before anything starts, what holds the node's GPUs (the console's instances other than the
experiment's own groups, and other processes: ``occupancy``) is weighed per layout (a layout
that switches the partition needs every GPU free, one in the node's mode its replicas' GPUs):
the check says which layouts fit now and what would have to stop, and a run where no layout
fits is refused with that list instead of failing every layout within seconds. Every partition switch it makes is an event
on the timeline; at its end the partition modes the node had before are put back (unless
the file says ``restore_partition = false``), said in a line of its log, the report and an
event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from console.core.bench.find_max import SearchError, SearchSpec
from console.core.events import Event, partition_event
from console.core.experiment.spec import (
    Experiment,
    ExperimentError,
    ExperimentState,
    Layout,
    Point,
    load_state,
    plan_points,
    save_state,
    validate,
)
from console.core.gpus import gpu_span
from console.core.model import NodeSnapshot, NodeSpec, Profile
from console.core.partition_rules import Blocker, physical_gpus, process_blockers
from console.core.replicas import DEFAULT_BASE_PORT
from console.services.groups import GroupError, GroupService, GroupView
from console.services.instances import ENDED, InstanceError, InstanceService, InstanceState
from console.services.partitions import PartitionFailed, PartitionRefused, PartitionService
from console.services.results import ResultStore, default_root
from console.services.runs.find_max import FindMaxAnswer, FindMaxError, FindMaxService
from console.services.runs.group import GroupBenchRunner, store_group, summary_of
from console.services.runs.serving import BenchRunError
from console.services.status import sample_node
from console.services.timeline import Timeline, note
from console.services.transports import TransportPool
from console.transport.base import TransportError

LINK_RETRIES = 3  # a point whose benchmark lost the link is tried again this many times
LINK_BACKOFF = 5.0


@dataclass(frozen=True, slots=True)
class ExperimentProgressed:
    """One step of the run: a line for people and the state after it."""

    line: str
    state: ExperimentState
    done: int
    planned: int


@dataclass(frozen=True, slots=True)
class Occupancy:
    """What holds a node's GPUs now, which an experiment (its layouts use every GPU) would have
    to stop first: the console's instances (not the experiment's own groups, which a resumed
    run takes over) and other processes (the partition dialog's blockers)."""

    node: str
    instances: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (name, logical GPUs)
    processes: tuple[Blocker, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.instances or self.processes)

    def gpus(self) -> tuple[int, ...]:
        held = {g for _, gpus in self.instances for g in gpus} | {g for b in self.processes for g in b.gpus}
        return tuple(sorted(held))

    def lines(self) -> list[str]:
        """One line per thing to stop, after a summary line."""
        if not self:
            return []
        parts = []
        if self.instances:
            parts.append(f"{len(self.instances)} instance{'s' if len(self.instances) != 1 else ''}")
        if self.processes:
            parts.append(f"{len(self.processes)} process{'es' if len(self.processes) != 1 else ''}")
        out = [f"{self.node}: GPU {gpu_span(self.gpus())} busy: {' and '.join(parts)} would have to stop first"]
        out += [f"  GPU {gpu_span(gpus)}: instance {name}" for name, gpus in self.instances]
        out += [f"  GPU {gpu_span(b.gpus)}: process {b.pid} ({b.name})" for b in self.processes]
        return out

    def refusal(self, layout: Layout, snapshot: NodeSnapshot) -> str | None:
        """Why ``layout`` cannot start on the node as it is now (None: it fits)."""
        phys = physical_gpus(snapshot)
        same = all(p.compute == layout.compute for p in phys) and (
            layout.memory is None or all(p.memory == layout.memory for p in phys)
        )
        if not same:
            return None if not self else f"its partition switch needs every GPU free (GPU {gpu_span(self.gpus())} busy)"
        need = layout.tp * layout.replicas
        free = len({i for p in phys for i in p.logical} - set(self.gpus()))
        return None if free >= need else f"needs {need} free GPUs, {free} are free"

    def fit_lines(self, exp: Experiment, snapshot: NodeSnapshot) -> tuple[int, list[str]]:
        """(layouts that fit now, the lines that say so and what holds the GPUs)."""
        refused = [(layout, self.refusal(layout, snapshot)) for layout in exp.layouts]
        fit = sum(1 for _, why in refused if why is None)
        head = f"{fit} of {len(exp.layouts)} layouts fit {self.node} now"
        if not self:
            return fit, [f"{len(exp.layouts)} layouts fit {self.node}: its GPUs are free"]
        lines = [head + ("" if fit == len(exp.layouts) else ":")]
        lines += [f"  {layout.label}: {why}" for layout, why in refused if why is not None]
        return fit, lines + self.lines()


def group_name_for(exp: Experiment, layout: Layout) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", exp.name).strip("-.")[:16] or "exp"
    return f"{slug}-{layout.key}"[:48].rstrip("-.")


def experiments_folder() -> Path:
    """Where state files live: beside the results store ($ROCM_CONSOLE_DATA_DIR/experiments when set)."""
    return default_root().parent / "experiments"


def default_state_path(exp: Experiment, node: str, base: Path | None = None) -> Path:
    """Where the state of exp on node lives: next to the results store unless told otherwise."""
    if base is None:
        base = experiments_folder()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{exp.name}@{node}")
    return base / f"{slug}.json"


class ExperimentRunner:
    def __init__(
        self,
        pool: TransportPool | None = None,
        *,
        poll_every: float = 2.0,
        stop_timeout: float = 30.0,
        base_port: int = DEFAULT_BASE_PORT,
        store: ResultStore | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        self.pool = pool or TransportPool()
        self.timeline = timeline  # its partition switches and restores (services/timeline.py)
        self.instances = InstanceService(self.pool, timeline=timeline)
        self.groups = GroupService(self.pool, self.instances)
        self.partitions = PartitionService(self.pool, self.instances)
        self.bench = GroupBenchRunner(self.pool, poll_every=min(poll_every, 1.0))
        self.poll_every = poll_every
        self.stop_timeout = stop_timeout
        self.base_port = base_port
        self.store = store  # each point's results go there too (results list/compare), when given

    async def check(self, exp: Experiment, node: NodeSpec, profile: Profile) -> NodeSnapshot:
        """Validate against the node as it is now; ExperimentError (one line per problem) if it cannot run."""
        snapshot = await sample_node(self.pool, node, probe=True)
        if snapshot.error:
            raise ExperimentError([snapshot.error])
        phys = physical_gpus(snapshot)
        problems = validate(
            exp,
            profile,
            physical_gpus=len(phys),
            memory_caps=phys[0].memory_caps if phys else (),
            current_memory=phys[0].memory if phys else None,
            node=node.name,
        )
        if problems:
            raise ExperimentError(problems)
        return snapshot

    async def occupancy(self, exp: Experiment, node: NodeSpec, snapshot: NodeSnapshot) -> Occupancy:
        """What holds the node's GPUs now (see Occupancy)."""
        own = {group_name_for(exp, layout) for layout in exp.layouts}
        views = await self.instances.list(node)
        active = [
            v
            for v in views
            if v.state not in ENDED and v.state != InstanceState.UNMANAGED and v.gpus and v.group not in own
        ]
        mine = {g for v in views if v.group in own and v.state not in ENDED for g in v.gpus}
        on_gpu = {g: v.name for v in active for g in v.gpus}
        phys = [p.physical for p in physical_gpus(snapshot)]
        blockers = process_blockers(snapshot, phys, {**on_gpu, **dict.fromkeys(mine, "")})
        instances = tuple(sorted((v.name, tuple(v.gpus)) for v in active))
        return Occupancy(node.name, instances, tuple(blockers))

    async def run(
        self,
        exp: Experiment,
        node: NodeSpec,
        profile: Profile,
        state_path: Path,
        *,
        on_event: Callable[[ExperimentProgressed], None] | None = None,
        extra_env: dict[str, str] | None = None,
        link_retries: int = 0,
        backoff: float = LINK_BACKOFF,
    ) -> ExperimentState:
        """Run the experiment to its end. With link_retries, a run that lost the link to the node
        is started again from its state file (a new SSH connection each time), up to
        link_retries times in a row."""
        failures = 0
        while True:
            try:
                return await self._run_once(exp, node, profile, state_path, on_event, extra_env)
            except TransportError as exc:
                failures += 1
                if failures > link_retries:
                    raise
                delay = min(backoff * failures, 60.0)
                if on_event:
                    try:
                        st = load_state(state_path, exp, node.name)
                    except ValueError:
                        st = ExperimentState(experiment=exp.name, node=node.name)
                    on_event(
                        ExperimentProgressed(
                            f"link to {node.name} lost ({exc.reason}): resuming in {delay:g} s "
                            f"(attempt {failures} of {link_retries})",
                            st,
                            len(st.done),
                            st.planned,
                        )
                    )
                await asyncio.sleep(delay)
                await self.pool.close()  # a fresh connection next time

    async def _run_once(
        self,
        exp: Experiment,
        node: NodeSpec,
        profile: Profile,
        state_path: Path,
        on_event: Callable[[ExperimentProgressed], None] | None,
        extra_env: dict[str, str] | None,
    ) -> ExperimentState:
        snapshot = await self.check(exp, node, profile)
        busy = await self.occupancy(exp, node, snapshot)
        fit, lines = busy.fit_lines(exp, snapshot)
        if not fit:  # every layout would fail within seconds: say what holds the GPUs instead
            raise ExperimentError(lines)
        before = {p.physical: (p.compute, p.memory) for p in physical_gpus(snapshot)}
        points = plan_points(exp)
        try:
            state = load_state(state_path, exp, node.name)
        except ValueError as exc:
            raise ExperimentError([str(exc)]) from None
        state = dataclasses.replace(state, file=str(Path(exp.file).resolve()), planned=len(points), finished=False)

        def step(st: ExperimentState, line: str) -> ExperimentState:
            save_state(state_path, st)
            if on_event:
                on_event(ExperimentProgressed(line, st, len(st.done), len(points)))
            return st

        remaining = state.remaining(points)
        if state.done or state.failed_layouts:
            state = step(
                state.with_current(None),
                f"resuming: {len(state.done)} of {len(points)} points done, {len(remaining)} left",
            )
        serve = {p.name: p for p in profile.serve_presets}
        bench_preset = next(b for b in profile.bench_presets if b.name == exp.bench)
        for layout in exp.layouts:
            todo = [p for p in remaining if p.layout.key == layout.key]
            if not todo:
                continue
            group_name = group_name_for(exp, layout)
            state = step(state.with_current(f"{layout.key}: start"), f"layout {layout.label}: {len(todo)} points")
            try:
                snapshot = await self._partition(node, snapshot, layout, functools.partial(step, state))
                await self._cancel_clients(node, group_name)
                group = await self._group(node, snapshot, layout, serve[layout.serve], group_name, exp, extra_env)
                state = step(state, f"layout {layout.label}: {group.summary()}")
                for point in todo:
                    state = step(state.with_current(point.id), f"{point.id}: benchmark")
                    if point.find_max:
                        summary = await self._find_max(node, group, point, exp, bench_preset, extra_env)
                    else:
                        summary = await self._point(node, group, point, exp, bench_preset, extra_env)
                    state = step(state.with_done(point, summary), _point_line(point, summary))
            except _LayoutFailed as failed:
                state = step(
                    state.with_layout_failed(layout, failed.reason), f"layout {layout.label}: failed: {failed.reason}"
                )
            except asyncio.CancelledError:
                # Ctrl-C / a closing console: stop what this layout started (a resumed run
                # starts it again); a kill -9 leaves it, and the resume takes it over.
                await asyncio.shield(self._stop_group(node, group_name))
                raise
            await self._stop_group(node, group_name)
            snapshot = await sample_node(self.pool, node, probe=True)
        if exp.restore_partition:
            line = await self._restore(exp, node, snapshot, before)
            if line:
                state = step(dataclasses.replace(state, events=(*state.events, line)), line)
        state = dataclasses.replace(state, current=None, finished=True)
        return step(
            state, f"finished: {len(state.done)} of {len(points)} points, {len(state.failed_layouts)} layouts failed"
        )

    # ------------------------------------------------------------ steps

    async def _partition(
        self, node: NodeSpec, snapshot: NodeSnapshot, layout: Layout, say: Callable[[str], object]
    ) -> NodeSnapshot:
        phys = physical_gpus(snapshot)
        computes = {p.compute for p in phys}
        memories = {p.memory for p in phys}
        compute = layout.compute if computes != {layout.compute} else None
        memory = layout.memory if layout.memory and memories != {layout.memory} else None
        if compute is None and memory is None:
            return snapshot
        before = "/".join(sorted(c or "?" for c in computes))
        say(f"layout {layout.label}: partition {before} → {layout.compute}" + (f"/{memory}" if memory else ""))
        try:
            result = await self.partitions.switch(
                node,
                snapshot,
                [p.physical for p in phys],
                compute=compute,
                memory=memory,
                reload_confirmed=True,  # the experiment file asks for this memory mode
            )
        except PartitionRefused as exc:
            raise _LayoutFailed("partition switch refused: " + "; ".join(exc.reasons)) from None
        except (PartitionFailed, TransportError) as exc:
            raise _LayoutFailed(f"partition switch failed: {exc}") from None
        note(self.timeline, _switch_event(node.name, [p.physical for p in phys], compute, memory, "switched"))
        if result.unverified:
            raise _LayoutFailed(f"partition switch {result.verification()}")
        snapshot = await sample_node(self.pool, node, probe=True)
        now = {p.compute for p in physical_gpus(snapshot)}
        if now != {layout.compute}:
            raise _LayoutFailed(
                f"after the switch the node reports {'/'.join(sorted(map(str, now)))}, not {layout.compute}"
            )
        say(f"layout {layout.label}: partition verified ({result.summary}, {result.seconds:.1f} s)")
        return snapshot

    async def _restore(
        self, exp: Experiment, node: NodeSpec, snapshot: NodeSnapshot, before: dict[int, tuple]
    ) -> str | None:
        """Put back the partition modes the node had before the run; a line saying what was done."""
        now = {p.physical: (p.compute, p.memory) for p in physical_gpus(snapshot)}
        if not before or now == before:
            return None
        groups: dict[tuple, list[int]] = {}
        for gpu, modes in sorted(before.items()):
            if now.get(gpu) != modes:
                groups.setdefault(modes, []).append(gpu)
        done = []
        for (compute, memory), gpus in groups.items():
            changed = {now.get(g, (None, None)) for g in gpus}
            memory_to = memory if any(m != memory for _, m in changed) else None
            compute_to = compute if any(c != compute for c, _ in changed) else None
            wanted = "/".join(m for m in (compute, memory) if m)
            try:
                result = await self.partitions.switch(
                    node, snapshot, gpus, compute=compute_to, memory=memory_to, reload_confirmed=True
                )
            except PartitionRefused as exc:
                return f"partition not restored to {wanted} on GPU {gpu_span(gpus)}: " + "; ".join(exc.reasons)
            except (PartitionFailed, TransportError) as exc:
                return f"partition not restored to {wanted} on GPU {gpu_span(gpus)}: {exc}"
            note(self.timeline, _switch_event(node.name, gpus, compute_to, memory_to, "restored", exp.name))
            done.append(f"{wanted} on GPU {gpu_span(gpus)} ({result.verification()})")
            snapshot = await sample_node(self.pool, node, probe=True)
        return "partition restored to " + "; ".join(done) + " as before the experiment"

    async def _group(self, node, snapshot, layout: Layout, preset, name: str, exp: Experiment, extra_env) -> GroupView:
        existing = await self.groups.get([node], name, checked=True)
        if existing is not None:
            whole = existing.total == layout.replicas and existing.ready == existing.total
            if whole and all(len(v.gpus) == layout.tp for v in existing.replicas):
                return existing  # left by a killed run: take it over
            await self._stop_group(node, name)
        try:
            group = await self.groups.launch(
                [node],
                preset,
                layout.replicas,
                tp=layout.tp,
                group=name,
                snapshots={node.name: snapshot},
                base_port=self.base_port,
                extra_env=extra_env,
                ready_timeout=exp.ready_timeout,
                poll_every=self.poll_every,
            )
        except (GroupError, InstanceError, TransportError) as exc:
            raise _LayoutFailed(str(exc)) from None
        if group.failed:
            first = group.failed[0]
            more = f" (+{len(group.failed) - 1} more replicas failed)" if len(group.failed) > 1 else ""
            raise _LayoutFailed(f"{first.name}: {first.reason or 'failed'}{more}")
        return group

    async def _point(self, node, group: GroupView, point: Point, exp: Experiment, preset, extra_env) -> dict:
        if point.concurrency is not None:
            # a concurrency point: as fast as that many requests in flight allow (the preset's
            # own request rate would cap every point at the same load)
            preset = dataclasses.replace(preset, request_rate=None)
        attempt = 0
        while True:
            try:
                outcome = await self.bench.run(
                    [node],
                    group,
                    preset,
                    concurrency=point.concurrency,
                    rate=point.rate,
                    num_prompts=exp.num_prompts,
                    extra_env=extra_env,
                )
                summary = summary_of(outcome)
                if self.store is not None:
                    ids = store_group(
                        self.store,
                        outcome,
                        group,
                        preset,
                        label=f"{exp.name}: {point.layout.label}",
                        extra={"experiment": exp.name, "layout": point.layout.label, "point": point.id},
                    )
                    if ids:
                        summary["stored"] = ids[-1]
                return summary
            except (TransportError, BenchRunError) as exc:
                attempt += 1
                if attempt > LINK_RETRIES:
                    raise _LayoutFailed(f"{point.id}: {exc}") from None
                await asyncio.sleep(LINK_BACKOFF * attempt)
                await self._cancel_clients(node, group.name)

    async def _find_max(self, node, group: GroupView, point: Point, exp: Experiment, preset, extra_env) -> dict:
        """The layout's find-max search: its answer's figures as the point's summary (the report's
        keys), the search in `find_max_*`, the stored answer's id in `stored`."""
        settings = exp.find_max
        assert settings is not None
        try:
            spec = SearchSpec(
                budget=settings.budget,
                dimension=settings.by,
                start=settings.start or 1.0,
                max_load=settings.max_load,
                tolerance=settings.tolerance,
            )
        except SearchError as exc:
            raise _LayoutFailed(str(exc)) from None
        # the search's points and answer go to the store: the answer links them by id
        service = FindMaxService(self.pool, self.store or ResultStore(), group_runner=self.bench)
        try:
            answer = await service.search_group(
                [node],
                group,
                preset,
                spec,
                extra_env=extra_env,
                num_prompts=exp.num_prompts,
                label=f"{exp.name}: {point.layout.label}",
                extra_context={"experiment": exp.name, "layout": point.layout.label, "point": point.id},
            )
        except FindMaxError as exc:
            raise _LayoutFailed(f"{point.id}: {exc}") from None
        return find_max_summary(answer)

    async def _cancel_clients(self, node: NodeSpec, group_name: str) -> None:
        """Benchmark clients of this group still running (left by a killed run) are stopped."""
        clients = self.bench.clients
        try:
            runs = await clients.records(node)
        except TransportError:
            return
        prefix = group_name[:30].rstrip("-.") + "-"
        for rec in runs:
            if not rec.ended_now and rec.name.startswith(prefix):
                try:
                    await clients.cancel(node, rec.name)
                except TransportError:
                    pass

    async def _stop_group(self, node: NodeSpec, name: str) -> None:
        try:
            found = await self.groups.get([node], name)
            if found is None:
                return
            if any(v.state not in ENDED for v in found.replicas):
                await self.groups.stop([node], name, int_timeout=self.stop_timeout, term_timeout=10)
            await self.groups.remove([node], name)
        except (GroupError, InstanceError, TransportError):
            pass  # the next layout's preflight names whatever is still running


def _switch_event(
    node: str, gpus: list[int], compute: str | None, memory: str | None, how: str, experiment: str = ""
) -> Event:
    """partition.switched, saying the experiment did it (and that a restore is one)."""
    event = partition_event(time.time(), node, gpus, compute, memory)
    text = event.message.replace("partition switched", f"partition {how}", 1)
    details = {**event.details, "by": "experiment", "restored": how == "restored"}
    return dataclasses.replace(
        event, message=text + (f" (experiment {experiment})" if experiment else ""), details=details
    )


class _LayoutFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def find_max_summary(answer: FindMaxAnswer) -> dict:
    """What an experiment keeps of a layout's search: the answer's figures under the result keys
    the report reads (output_throughput, p99_ttft_ms, ...), the load found, the outcome."""
    o = answer.outcome
    doc: dict = {k: v for k, v in o.figures.items() if v is not None}
    doc.update(
        ok=o.load is not None,
        nodes=1,
        find_max_status=o.status,
        find_max_dimension=o.dimension,
        find_max_load=o.load,
        find_max_broke_at=o.broke_at,
        find_max_budget=answer.budget.name,
        find_max_runs=o.runs,
        find_max_points=list(answer.point_ids),
        stored=answer.answer_id,
    )
    if o.load is None:
        doc["reason"] = o.message
    if o.dimension == "concurrency" and o.load is not None:
        doc["max_concurrency"] = int(o.load)
    return doc


def _point_line(point: Point, summary: dict) -> str:
    tok = summary.get("output_throughput")
    ttft = summary.get("p99_ttft_ms")
    parts = [f"{point.id}: done"]
    if point.find_max:
        load = summary.get("find_max_load")
        parts.append(f"{summary.get('find_max_status')} at {summary.get('find_max_dimension')} {load}")
    if isinstance(tok, (int, float)):
        parts.append(f"{tok:.1f} tok/s")
    if isinstance(ttft, (int, float)):
        parts.append(f"p99 TTFT {ttft:.1f} ms")
    if not summary.get("ok", True):
        parts.append(f"({summary.get('reason')})")
    return "  ".join(parts)
