"""Partition show/switch on a node: preflight, root through sudo, the switch, verification."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from console.core.model import NodeSnapshot, NodeSpec
from console.core.node_json import NodeJsonError, object_lines
from console.core.partition_rules import (
    Blocker,
    describe_change,
    effective_modes,
    physical_gpus,
    preflight,
    process_blockers,
)
from console.core.partition_view import renumber_lines
from console.core.telemetry import amd_only_reason
from console.core.text import printable
from console.services.agent_bundle import install_agent
from console.services.instances import InstanceService, InstanceState
from console.services.timeline import Timeline
from console.services.transports import TransportPool
from console.transport.base import env_argv

SWITCH_TIMEOUT = 900.0  # a memory switch with a driver reload can take minutes


class PartitionRefused(Exception):
    """Preflight said no; ``reasons`` holds one line each."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class PartitionFailed(Exception):
    """The node refused or failed the switch; ``kind`` is no_perm, busy, invalid, unsupported or failed."""

    def __init__(self, message: str, kind: str = "failed") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class SwitchResult:
    node: str
    gpus: tuple[dict, ...]  # per physical GPU: compute_partition, memory_partition, logical_gpus, ...
    logical_gpus: int
    seconds: float
    summary: str
    unverified: tuple = ()  # physical GPUs (or "all") whose mode could not be read back after the switch

    def verification(self) -> str:
        """'verified', or which GPUs could not be read back (a switch is never called verified blind)."""
        if not self.unverified:
            return "verified"
        which = "any GPU" if "all" in self.unverified else "GPU " + ", ".join(map(str, self.unverified))
        return f"not verified: the mode of {which} could not be read back, check with `partition show`"


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    """A preflight: what refuses the switch, what will happen, the processes that block it
    (the dialog offers to end them) and the logical GPU numbers it changes."""

    reasons: tuple[str, ...]
    summary: str
    blockers: tuple[Blocker, ...] = ()
    renumbering: tuple[str, ...] = ()
    instances: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (name, GPUs) of the instances in the way


class PartitionService:
    def __init__(
        self,
        pool: TransportPool | None = None,
        instances: InstanceService | None = None,
        *,
        timeline: Timeline | None = None,
    ) -> None:
        self.pool = pool or TransportPool()
        # the instances a dialog stops in the way go on the timeline (services/timeline.py)
        self.instances = instances or InstanceService(self.pool, timeline=timeline)

    async def _agent_run(self, node: NodeSpec, args: list[str], *, root: bool, timeout: float) -> dict:
        cmd = await install_agent(self.pool.get(node), node)
        argv = cmd.argv("partition", *args)
        env = cmd.env_dict()
        if root:
            # `sudo -n` never prompts: without passwordless sudo it fails at once with a
            # clear line. The environment goes inside sudo (which would reset it).
            argv = ["sudo", "-n", *env_argv(argv, env)]
            env = {}
        result = await self.pool.get(node).run(argv, env=env, timeout=timeout)
        try:
            records = object_lines(result.stdout)
        except NodeJsonError as exc:
            raise PartitionFailed(f"{node.name}: agent partition {args[0] if args else ''}: {exc}") from None
        for rec in records:
            if rec.get("kind") == "error":
                raise PartitionFailed(f"{node.name}: {printable(rec.get('message'))}", rec.get("reason") or "failed")
            if rec.get("kind") == "partitions":
                gpus = rec.get("gpus")
                if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
                    raise PartitionFailed(f"{node.name}: agent partition: a partitions line without a list of GPUs")
                return rec
        last = (result.stderr.strip().splitlines() or [f"exit {result.exit_status}"])[-1]
        if "password is required" in last or "sudo:" in last:
            raise PartitionFailed(
                f"{node.name}: sudo refused ({last.strip()}): allow passwordless sudo or log in as root", "no_perm"
            )
        raise PartitionFailed(f"{node.name}: partition command failed: {last.strip()}")

    async def show(self, node: NodeSpec) -> list[dict]:
        rec = await self._agent_run(node, ["show"], root=False, timeout=120)
        return rec["gpus"]

    async def check(
        self, node: NodeSpec, snapshot: NodeSnapshot, physical: list[int], *, compute: str | None, memory: str | None
    ) -> tuple[list[str], str]:
        """(refusals, what will happen) without changing anything."""
        checked = await self.check_detail(node, snapshot, physical, compute=compute, memory=memory)
        return list(checked.reasons), checked.summary

    async def check_detail(
        self,
        node: NodeSpec,
        snapshot: NodeSnapshot,
        physical: list[int],
        *,
        compute: str | None,
        memory: str | None,
        ignore_pids: Collection[int] = (),
    ) -> PartitionCheck:
        """check(), with the blocking processes and the renumbering. ignore_pids: processes
        ended since the snapshot's telemetry listed them (its process lists lag a few ticks)."""
        amd_only = amd_only_reason(snapshot.source)
        if amd_only is not None:  # NVIDIA node: nothing to switch, the agent has no amdsmi there
            return PartitionCheck((amd_only,), "nothing to switch")
        views = await self.instances.list(node)
        active = [
            v for v in views if v.state not in (InstanceState.EXITED, InstanceState.FAILED, InstanceState.STOPPED)
        ]
        on_gpu = {g: v.name for v in active for g in v.gpus}
        probe = snapshot.probe
        is_root = probe.uid == 0 if probe is not None and probe.uid is not None else None
        can_be_root = None if is_root is None else (is_root or node.sudo)
        reasons = preflight(
            snapshot,
            physical,
            compute=compute,
            memory=memory,
            instances_on_gpu=on_gpu,
            can_be_root=can_be_root,
            ignore_pids=ignore_pids,
        )
        switched = {i for p in physical_gpus(snapshot) if p.physical in physical for i in p.logical}
        return PartitionCheck(
            tuple(reasons),
            describe_change(snapshot, physical, compute, memory),
            tuple(process_blockers(snapshot, physical, on_gpu, ignore_pids)),
            tuple(renumber_lines(snapshot, physical, compute, {v.name: tuple(v.gpus) for v in active})),
            tuple(sorted((v.name, tuple(v.gpus)) for v in active if switched & set(v.gpus))),
        )

    async def switch(
        self,
        node: NodeSpec,
        snapshot: NodeSnapshot,
        physical: list[int],
        *,
        compute: str | None,
        memory: str | None,
        reload_confirmed: bool = False,
        ignore_pids: Collection[int] = (),
    ) -> SwitchResult:
        if compute is not None or memory is not None:
            # a mode every chosen GPU already has is left out: a kept memory mode reloads nothing
            compute, memory = effective_modes(snapshot, physical, compute, memory)
            if compute is None and memory is None:
                raise PartitionRefused([describe_change(snapshot, physical, None, None) + ": nothing to switch"])
        checked = await self.check_detail(
            node, snapshot, physical, compute=compute, memory=memory, ignore_pids=ignore_pids
        )
        reasons, summary = list(checked.reasons), checked.summary
        if memory is not None and not reload_confirmed:
            reasons.append("a memory partition change reloads the amdgpu driver: it needs a second confirmation")
        if reasons:
            raise PartitionRefused(reasons)
        all_physical = [p.physical for p in physical_gpus(snapshot)]
        args = ["set", "--gpus", "all" if sorted(physical) == all_physical else ",".join(map(str, physical))]
        if compute:
            args += ["--compute", compute]
        if memory:
            args += ["--memory", memory, "--reload-driver"]
        probe = snapshot.probe
        root = bool(node.sudo and not (probe is not None and probe.uid == 0))
        rec = await self._agent_run(node, args, root=root, timeout=SWITCH_TIMEOUT)
        return SwitchResult(
            node=node.name,
            gpus=tuple(rec["gpus"]),
            logical_gpus=rec.get("logical_gpus", 0),
            seconds=rec.get("seconds", 0.0),
            summary=summary,
            unverified=tuple(rec.get("unverified") or ()),
        )
