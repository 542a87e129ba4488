"""Replica groups: N identical `vllm serve` instances of one preset, planned before anything starts.

A group puts one replica on each TP-sized set of logical GPUs (a GPU in SPX, a
partition in CPX) over one or more nodes. Planning is pure: the caller asks each
node for its GPUs, the GPUs already taken and its listening ports, and gets back
every replica's node, GPUs, port and name, or one line saying why the group does
not fit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Iterator, Mapping, Sequence

from console.core.serve.rules import PORT_RANGE

GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
PER_GPU = "per-gpu"
MAX_REPLICAS = 512  # 64 nodes of 8 CPX GPUs is already far more than anyone starts by hand
DEFAULT_BASE_PORT = 8000


class ReplicaPlanError(ValueError):
    """The group cannot be placed: one line naming what is short."""


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """What one node offers a group.

    gpus: its logical GPU indices (one per CPX partition), in order;
    busy: GPU -> name of what runs there; partitions: GPU -> compute partition (SPX/CPX/...);
    taken_ports: ports something listens on or an instance holds.
    """

    node: str
    gpus: tuple[int, ...]
    busy: Mapping[int, str] | None = None
    partitions: Mapping[int, str] | None = None
    taken_ports: frozenset[int] = frozenset()
    host: str | None = None  # nodes on one host (simulated nodes, two names for one machine) share its ports


@dataclass(frozen=True, slots=True)
class ReplicaPlan:
    name: str
    node: str
    gpus: tuple[int, ...]
    port: int
    index: int  # 0-based place in the group


@dataclass(frozen=True, slots=True)
class GroupPlan:
    group: str
    preset: str
    tp: int
    replicas: tuple[ReplicaPlan, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.node for r in self.replicas))


def parse_replicas(text: str) -> int | str:
    """`--replicas 8` -> 8, `--replicas per-gpu` -> "per-gpu"; ReplicaPlanError otherwise."""
    value = str(text).strip().lower()
    if value in (PER_GPU, "per-tp-group", "max"):
        return PER_GPU
    try:
        n = int(value)
    except ValueError:
        raise ReplicaPlanError(f"--replicas {text!r}: expected a number or per-gpu") from None
    if not 1 <= n <= MAX_REPLICAS:
        raise ReplicaPlanError(f"--replicas {text!r}: expected 1 to {MAX_REPLICAS}")
    return n


def group_name(preset: str, replicas: int, taken: Collection[str] = ()) -> str:
    """preset-xN, made unique against the names already in use on the nodes."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset).strip("-.")[:36] or "group"
    name, n = f"{base}-x{replicas}", 2
    while name in taken or any(t.startswith(name + "-r") for t in taken):
        name, n = f"{base}-x{replicas}-{n}", n + 1
    return name


def replica_name(group: str, index: int) -> str:
    return f"{group}-r{index}"


def listening_ports(proc_net_tcp: str, *, any_state: bool = False) -> frozenset[int]:
    """Local ports from /proc/net/tcp and /proc/net/tcp6 text: those in LISTEN (st 0A),
    or with any_state every local port (TIME_WAIT included: a plain bind() without
    SO_REUSEADDR, like the supervisor's port check, fails on those too)."""
    ports = set()
    for line in proc_net_tcp.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[0] == "sl" or ":" not in fields[1]:
            continue
        if fields[3] != "0A" and not any_state:
            continue
        try:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except ValueError:
            continue
    return frozenset(ports)


def free_ports(count: int, taken: Collection[int], start: int = DEFAULT_BASE_PORT) -> list[int]:
    """The first `count` ports from start that are not taken."""
    out: list[int] = []
    port = start
    while len(out) < count:
        if port > PORT_RANGE[1]:
            raise ReplicaPlanError(f"no {count} free ports from {start}")
        if port not in taken:
            out.append(port)
        port += 1
    return out


def _slots(cap: NodeCapacity, tp: int, chosen: Sequence[int] | None) -> list[tuple[int, ...]]:
    """Consecutive free TP-sized GPU sets on one node, in GPU order."""
    busy = cap.busy or {}
    pool = [g for g in cap.gpus if g not in busy and (chosen is None or g in chosen)]
    return [tuple(pool[i : i + tp]) for i in range(0, len(pool) - tp + 1, tp)]


def plan_group(
    *,
    preset: str,
    tp: int,
    replicas: int | str,
    nodes: Sequence[NodeCapacity],
    gpus: Sequence[int] | None = None,
    group: str | None = None,
    taken_names: Collection[str] = (),
    base_port: int = DEFAULT_BASE_PORT,
) -> GroupPlan:
    """Place a group. Replicas are dealt round-robin over the nodes (node order as given).

    gpus restricts every node to those logical GPUs. Raises ReplicaPlanError (one line).
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ReplicaPlanError(f"preset {preset}: tp {tp!r} must be a positive integer")
    if not nodes:
        raise ReplicaPlanError("a group needs at least one node")
    if gpus is not None:
        missing = [g for g in gpus if not any(g in cap.gpus for cap in nodes)]
        if missing:
            raise ReplicaPlanError(f"--gpus: no GPU {missing[0]} on {', '.join(c.node for c in nodes)}")
    per_node: list[list[tuple[int, ...]]] = []
    for cap in nodes:
        parts = cap.partitions or {}
        if tp > 1:
            cpx = sorted({parts[g] for g in cap.gpus if parts.get(g) == "CPX"})
            if cpx:
                raise ReplicaPlanError(
                    f"{cap.node}: TP {tp} in CPX: a CPX partition runs TP 1 only (switch to SPX for tp {tp})"
                )
        if tp > len(cap.gpus):
            raise ReplicaPlanError(f"{cap.node}: TP {tp} needs {tp} GPUs, the node has {len(cap.gpus)}")
        per_node.append(_slots(cap, tp, gpus))
    available = sum(len(s) for s in per_node)
    if replicas == PER_GPU:
        count = available
        if count == 0:
            raise ReplicaPlanError(f"no free set of {tp} GPU{'s' if tp > 1 else ''} on {_names(nodes)}")
    elif isinstance(replicas, int) and not isinstance(replicas, bool) and replicas >= 1:
        count = replicas
    else:
        raise ReplicaPlanError(f"replicas {replicas!r}: expected a positive number or per-gpu")
    if count > available:
        busy = sum(len(c.busy or {}) for c in nodes)
        raise ReplicaPlanError(
            f"{count} replicas of TP {tp} need {count * tp} free GPUs, {_names(nodes)} "
            f"offer{'s' if len(nodes) == 1 else ''} {available} free set{'s' if available != 1 else ''} of {tp}"
            + (f" ({busy} GPU{'s' if busy != 1 else ''} busy)" if busy else "")
        )
    group = group or group_name(preset, count, taken_names)
    if not GROUP_RE.match(group):
        raise ReplicaPlanError(f"bad group name {group!r} (letters, digits, . _ -; at most 48)")
    clash = next((t for t in taken_names if t == group or t.startswith(group + "-r")), None)
    if clash:
        raise ReplicaPlanError(f"group {group}: an instance named {clash} exists already")
    # deal round-robin: replica i goes to the next node that still has a slot
    placed: list[tuple[int, tuple[int, ...]]] = []
    cursor = [0] * len(nodes)
    n = 0
    while len(placed) < count:
        k = n % len(nodes)
        n += 1
        if cursor[k] < len(per_node[k]):
            placed.append((k, per_node[k][cursor[k]]))
            cursor[k] += 1
    # ports per host: nodes on the same host draw from one pool
    hosts = [nodes[k].host or f"node:{nodes[k].node}" for k in range(len(nodes))]
    pools: dict[str, Iterator[int]] = {}
    for host in dict.fromkeys(hosts):
        members = [k for k in range(len(nodes)) if hosts[k] == host]
        taken = frozenset().union(*(nodes[k].taken_ports for k in members))
        pools[host] = iter(free_ports(sum(1 for kk, _ in placed if kk in members), taken, base_port))
    plans = tuple(
        ReplicaPlan(name=replica_name(group, i), node=nodes[k].node, gpus=slot, port=next(pools[hosts[k]]), index=i)
        for i, (k, slot) in enumerate(placed)
    )
    return GroupPlan(group=group, preset=preset, tp=tp, replicas=plans)


def _names(nodes: Sequence[NodeCapacity]) -> str:
    return ", ".join(c.node for c in nodes)


def group_of(instance_name: str, group: str) -> bool:
    """True when an instance name belongs to group (group-r0, group-r1, ...)."""
    prefix = group + "-r"
    return instance_name.startswith(prefix) and instance_name[len(prefix) :].isdigit()
