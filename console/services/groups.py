"""Replica groups: N identical instances of a preset, started, watched and stopped as one.

A group is nothing on the node but instances whose spec carries `group` (and
whose names are GROUP-r0, GROUP-r1, ...): the node's supervisor owns each one as
usual, so a group outlives the console, and `groups()` finds it again. Placement
is planned first (console/core/replicas.py) from what each node says: its GPUs
and partitions, what runs on them, and the ports something listens on.

A replica that fails keeps its own fatal line (from its log); the others go on.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from console.core.model import NodeSnapshot, NodeSpec, ServePreset
from console.core.models.packing import DEFAULT_MAX_SUM
from console.core.models.settings import utilization_from_args
from console.core.replicas import (
    DEFAULT_BASE_PORT,
    GroupPlan,
    NodeCapacity,
    ReplicaPlan,
    free_ports,
    group_name,
    listening_ports,
    plan_group,
    replica_name,
)
from console.services.instances import (
    ENDED,
    InstanceError,
    InstancePoller,
    InstanceService,
    InstanceState,
    InstanceView,
    packing_limit,
)
from console.services.status import sample_node
from console.services.transports import TransportPool
from console.transport.base import TransportError

POLL_EVERY = 2.0
# Above this many replicas on a node, readiness comes from /health alone: reading
# every loading replica's log each round would take longer than the round.
LOG_TAIL_LIMIT = 8
PORT_RETRIES = 3  # a planned port found taken at start: the next free one, this many times


@dataclass(frozen=True, slots=True)
class GroupView:
    name: str
    replicas: tuple[InstanceView, ...]

    @property
    def total(self) -> int:
        return len(self.replicas)

    @property
    def ready(self) -> int:
        return sum(1 for r in self.replicas if r.state == InstanceState.READY)

    @property
    def failed(self) -> tuple[InstanceView, ...]:
        return tuple(r for r in self.replicas if r.state == InstanceState.FAILED)

    @property
    def settled(self) -> bool:
        """Every replica is ready or has ended: nothing left to wait for."""
        return all(r.state == InstanceState.READY or r.state in ENDED for r in self.replicas)

    @property
    def preset(self) -> str | None:
        return next((r.preset for r in self.replicas if r.preset), None)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.node for r in self.replicas))

    def summary(self) -> str:
        text = f"{self.name}: {self.ready}/{self.total} ready"
        if self.failed:
            text += f", {len(self.failed)} failed"
        return text


def group_views(views: Sequence[InstanceView]) -> list[GroupView]:
    """Instances grouped by their `group` (instances of no group are left out), replicas in name order."""
    by_group: dict[str, list[InstanceView]] = {}
    for v in views:
        if v.group:
            by_group.setdefault(v.group, []).append(v)
    return [
        GroupView(name, tuple(sorted(members, key=lambda v: _replica_index(v.name))))
        for name, members in sorted(by_group.items())
    ]


def _replica_index(name: str) -> tuple[int, str]:
    tail = name.rsplit("-r", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


class GroupError(InstanceError):
    """A group could not be planned, found or started: one line (an InstanceError: callers that
    handle instance failures handle these)."""


class GroupPlanError(GroupError):
    """The group cannot be placed on the nodes (GPUs, ports, names, partitions): one line."""


class GroupService:
    def __init__(self, pool: TransportPool | None = None, instances: InstanceService | None = None) -> None:
        self.pool = pool or TransportPool()
        self.instances = instances or InstanceService(self.pool)

    # ------------------------------------------------------------ asking the nodes

    async def taken_ports(self, node: NodeSpec) -> frozenset[int]:
        """Ports in use on the node (its /proc/net/tcp and tcp6): listening, or lingering in
        TIME_WAIT after a server that just stopped (a new server could not bind them yet)."""
        result = await self.pool.get(node).run(["cat", "/proc/net/tcp", "/proc/net/tcp6"], timeout=30)
        # tcp6 may be absent (IPv6 off): cat still prints tcp and exits 1
        return listening_ports(result.stdout, any_state=True)

    async def capacity(self, node: NodeSpec, snapshot: NodeSnapshot | None = None) -> NodeCapacity:
        snapshot = snapshot or await sample_node(self.pool, node, probe=False)
        if snapshot.error:
            raise GroupError(snapshot.error)
        views = await self.instances.list(node)
        busy: dict[int, str] = {}
        for v in views:
            if v.state not in ENDED:
                for g in v.gpus:
                    busy[g] = v.name
        if snapshot.latest is not None:
            for m in snapshot.latest.gpus:
                if m.processes and m.index not in busy:
                    busy[m.index] = f"process {m.processes[0].pid}"
        ports = set(await self.taken_ports(node))
        ports.update(v.port for v in views if v.port and v.state not in ENDED)
        return NodeCapacity(
            node=node.name,
            gpus=tuple(g.index for g in snapshot.static),
            busy=busy,
            partitions={g.index: g.compute_partition for g in snapshot.static if g.compute_partition},
            taken_ports=frozenset(ports),
            host="localhost" if node.transport == "local" else node.host,
        )

    async def plan(
        self,
        nodes: Sequence[NodeSpec],
        preset: ServePreset,
        replicas: int | str,
        *,
        tp: int | None = None,
        gpus: Sequence[int] | None = None,
        group: str | None = None,
        base_port: int = DEFAULT_BASE_PORT,
        snapshots: Mapping[str, NodeSnapshot] | None = None,
        per_gpu: int = 1,
    ) -> GroupPlan:
        caps = []
        names: set[str] = set()
        for node in nodes:
            caps.append(await self.capacity(node, (snapshots or {}).get(node.name)))
            names.update(v.name for v in await self.instances.list(node))
        slots = replicas if per_gpu == 1 or not isinstance(replicas, int) else -(-replicas // per_gpu)
        try:
            plan = plan_group(
                preset=preset.name,
                tp=tp or preset.tp,
                replicas=slots,
                nodes=caps,
                gpus=gpus,
                group=group,
                taken_names=names,
                base_port=base_port,
            )
            if per_gpu == 1:
                return plan
            taken = {p for cap in caps for p in cap.taken_ports} | {r.port for r in plan.replicas}
            total = replicas if isinstance(replicas, int) else len(plan.replicas) * per_gpu
            if group is None:  # the default name counts the replicas, not the GPUs they share
                plan = replace(plan, group=group_name(preset.name, total, names))
            return packed_plan(plan, per_gpu, total, taken)
        except ValueError as exc:
            raise GroupError(str(exc)) from None

    # ------------------------------------------------------------ start / watch / stop

    async def start(
        self,
        plan: GroupPlan,
        nodes: Sequence[NodeSpec],
        preset: ServePreset,
        *,
        snapshots: Mapping[str, NodeSnapshot] | None = None,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        on_started: Callable[[InstanceView], None] | None = None,
    ) -> GroupView:
        """Start every replica of the plan. One that cannot start is a FAILED view with its reason."""
        by_name = {n.name: n for n in nodes}
        if plan.tp != preset.tp:
            preset = replace(preset, tp=plan.tp)
        views: list[InstanceView] = []

        planned_ports = {r.port for r in plan.replicas}

        async def one(rep: ReplicaPlan) -> InstanceView:
            node = by_name[rep.node]
            port = rep.port
            try:
                for attempt in range(PORT_RETRIES + 1):
                    try:
                        view = await self.instances.start(
                            node,
                            preset,
                            gpus=rep.gpus,
                            snapshot=(snapshots or {}).get(rep.node),
                            port=port,
                            name=rep.name,
                            overrides=overrides,
                            extra_env=extra_env,
                            extra_args=extra_args,
                            group=plan.group,
                        )
                        break
                    except InstanceError as exc:
                        # taken since planning (a server that binds only once loaded): the next free one
                        if "already in use" not in str(exc) or attempt == PORT_RETRIES:
                            raise
                        taken = set(await self.taken_ports(node)) | planned_ports
                        port = free_ports(1, taken, port + 1)[0]
                        planned_ports.add(port)
            except (InstanceError, TransportError, ValueError) as exc:
                view = InstanceView(
                    node=rep.node,
                    name=rep.name,
                    state=InstanceState.FAILED,
                    port=port,
                    gpus=rep.gpus,
                    model=preset.model,
                    preset=preset.name,
                    reason=str(exc),
                    group=plan.group,
                )
            if on_started:
                on_started(view)
            return view

        # one node at a time, in order (each start reads the node's instance list);
        # nodes in parallel
        async def per_node(name: str) -> list[InstanceView]:
            return [await one(rep) for rep in plan.replicas if rep.node == name]

        for chunk in await asyncio.gather(*(per_node(n) for n in plan.nodes)):
            views.extend(chunk)
        return GroupView(plan.group, tuple(sorted(views, key=lambda v: _replica_index(v.name))))

    async def launch(
        self,
        nodes: Sequence[NodeSpec],
        preset: ServePreset,
        replicas: int | str,
        *,
        snapshots: Mapping[str, NodeSnapshot] | None = None,
        tp: int | None = None,
        gpus: Sequence[int] | None = None,
        group: str | None = None,
        base_port: int = DEFAULT_BASE_PORT,
        overrides: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        per_gpu: int = 1,
        on_planned: Callable[[GroupPlan], None] | None = None,
        on_started: Callable[[InstanceView], None] | None = None,
        ready_timeout: float | None = None,
        on_update: Callable[[GroupView], None] | None = None,
        poll_every: float = POLL_EVERY,
    ) -> GroupView:
        """The one way a group starts (`serve start --replicas`, each layout of an experiment):
        plan it, start every replica, and with ready_timeout wait until each is ready or ended.

        Snapshots not given are sampled (with the version probe); a node that does not answer
        is a GroupError. A group that cannot be placed is a GroupPlanError."""
        if snapshots is None:
            snapshots = {n.name: await sample_node(self.pool, n, probe=True) for n in nodes}
            for snap in snapshots.values():
                if snap.error:
                    raise GroupError(snap.error)
        if per_gpu > 1:  # before anything starts: the packing rule applied to the group's share
            why = per_gpu_refusal(per_gpu, [*preset.args, *_flags(overrides), *extra_args], packing_limit(nodes[0]))
            if why:
                raise GroupPlanError(why)
        try:
            plan = await self.plan(
                nodes,
                preset,
                replicas,
                tp=tp,
                gpus=gpus,
                group=group,
                base_port=base_port,
                snapshots=snapshots,
                per_gpu=per_gpu,
            )
        except GroupError as exc:
            raise GroupPlanError(str(exc)) from None
        if on_planned:
            on_planned(plan)
        view = await self.start(
            plan,
            nodes,
            preset,
            snapshots=snapshots,
            overrides=overrides,
            extra_env=extra_env,
            extra_args=extra_args,
            on_started=on_started,
        )
        if ready_timeout is None:
            return view
        return await self.wait_ready(nodes, view, timeout=ready_timeout, on_update=on_update, poll_every=poll_every)

    async def get(self, nodes: Sequence[NodeSpec], group: str, *, checked: bool = False) -> GroupView | None:
        views: list[InstanceView] = []
        for node in nodes:
            listed = await (self.instances.list_checked(node) if checked else self.instances.list(node))
            views.extend(v for v in listed if v.group == group)
        return GroupView(group, tuple(sorted(views, key=lambda v: _replica_index(v.name)))) if views else None

    async def groups(self, nodes: Sequence[NodeSpec]) -> list[GroupView]:
        views: list[InstanceView] = []
        for node in nodes:
            views.extend(await self.instances.list(node))
        return group_views(views)

    async def wait_ready(
        self,
        nodes: Sequence[NodeSpec],
        group: GroupView,
        *,
        timeout: float = 900.0,
        on_update: Callable[[GroupView], None] | None = None,
        poll_every: float = POLL_EVERY,
    ) -> GroupView:
        """Poll every replica until each is ready or ended, or the timeout: the group as it then is.

        Replicas that failed to start (never on the node) stay failed with their reason.
        Past the timeout, the replicas still loading are marked failed ("not ready after").
        """
        by_name = {n.name: n for n in nodes}
        poller = InstancePoller(self.instances)
        known = {v.name: v for v in group.replicas}
        pending_nodes = [by_name[n] for n in group.nodes if n in by_name]
        deadline = time.monotonic() + timeout
        last_key: tuple | None = None
        current = group
        while True:
            for node in pending_nodes:
                mine = [v for v in known.values() if v.node == node.name]
                if all(v.state == InstanceState.READY or v.state in ENDED for v in mine):
                    continue
                watched = [v.name for v in mine] if len(mine) > LOG_TAIL_LIMIT else []
                try:
                    polled = await poller.poll(node, watched=watched)
                except (InstanceError, TransportError):
                    continue  # a dropped link: try again next round
                for v in polled:
                    if v.name in known and v.group == group.name:
                        known[v.name] = v
            current = GroupView(group.name, tuple(sorted(known.values(), key=lambda v: _replica_index(v.name))))
            key = tuple((v.name, v.state, v.stage) for v in current.replicas)
            if key != last_key:
                last_key = key
                if on_update:
                    on_update(current)
            if current.settled:
                return current
            if time.monotonic() >= deadline:
                late = tuple(
                    replace(
                        v,
                        state=InstanceState.FAILED,
                        reason=f"not ready after {timeout:g} s (stage: {v.stage or 'unknown'})",
                    )
                    if not (v.state == InstanceState.READY or v.state in ENDED)
                    else v
                    for v in current.replicas
                )
                current = GroupView(group.name, late)
                if on_update:
                    on_update(current)
                return current
            await asyncio.sleep(min(poll_every, max(0.0, deadline - time.monotonic())))

    async def stop(
        self, nodes: Sequence[NodeSpec], group: str, *, int_timeout: float = 30.0, term_timeout: float = 10.0
    ) -> GroupView:
        """Stop every replica still running (in parallel per node); the group as it ended."""
        found = await self.get(nodes, group)
        if found is None:
            raise GroupError(f"no group named {group} on {', '.join(n.name for n in nodes)}")
        by_name = {n.name: n for n in nodes}
        out: dict[str, InstanceView] = {v.name: v for v in found.replicas}

        async def per_node(node: NodeSpec) -> None:
            sem = asyncio.Semaphore(4)  # a few stop commands at once: sshd's MaxSessions is 10

            async def one(v: InstanceView) -> None:
                async with sem:
                    try:
                        out[v.name] = await self.instances.stop(
                            node, v.name, int_timeout=int_timeout, term_timeout=term_timeout
                        )
                    except (InstanceError, TransportError) as exc:
                        out[v.name] = replace(v, reason=f"stop failed: {exc}")

            await asyncio.gather(*(one(v) for v in found.replicas if v.node == node.name and v.state not in ENDED))

        await asyncio.gather(*(per_node(by_name[n]) for n in found.nodes if n in by_name))
        return GroupView(group, tuple(sorted(out.values(), key=lambda v: _replica_index(v.name))))

    async def remove(self, nodes: Sequence[NodeSpec], group: str) -> None:
        """Forget a stopped group's replicas on the nodes (their folders)."""
        found = await self.get(nodes, group)
        if found is None:
            return
        by_name = {n.name: n for n in nodes}
        for v in found.replicas:
            if v.state in ENDED and v.node in by_name:
                try:
                    await self.instances.remove(by_name[v.node], v.name)
                except (InstanceError, TransportError):
                    pass


# ---------------------------------------------------------------- packing (--per-gpu, issue Q)


def _flags(overrides: Mapping[str, str] | None) -> list[str]:
    return [x for k, v in (overrides or {}).items() for x in (f"--{k.replace('_', '-')}", str(v))]


def per_gpu_refusal(per_gpu: int, argv: Sequence[str], max_sum: float = DEFAULT_MAX_SUM) -> str | None:
    """Why `--per-gpu N` cannot pack these replicas (their --gpu-memory-utilization), in one line."""
    try:
        share = utilization_from_args(argv)
    except ValueError as exc:
        return str(exc)
    if share is None:
        return (
            f"--per-gpu {per_gpu}: each replica must set --gpu-memory-utilization to share a GPU"
            f" (e.g. --set gpu_memory_utilization={int(max_sum / per_gpu * 100) / 100:g})"
        )
    if share * per_gpu > max_sum + 1e-9:
        return (
            f"--per-gpu {per_gpu}: gpu_memory_utilization would sum to {share * per_gpu:.2f} > {max_sum:g}"
            f" on each GPU ({per_gpu} x {share:g})"
        )
    return None


def packed_plan(plan: GroupPlan, per_gpu: int, total: int | None, taken: set[int]) -> GroupPlan:
    """Each planned slot's GPUs hosting `per_gpu` replicas (at most `total`), renamed r0, r1, ... in order."""
    out: list[ReplicaPlan] = []
    for slot in plan.replicas:
        for k in range(per_gpu):
            if total is not None and len(out) >= total:
                break
            port = slot.port if k == 0 else free_ports(1, taken, slot.port + 1)[0]
            taken.add(port)
            index = len(out)
            out.append(ReplicaPlan(replica_name(plan.group, index), slot.node, slot.gpus, port, index))
    return replace(plan, replicas=tuple(out))
