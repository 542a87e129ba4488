"""Partition rules: which compute mode fits which memory mode, and what a switch needs.

Facts from reference/amdsmi.md §3-4 (AMD's partition docs): SPX-NPS1,
DPX-NPS1/2, QPX-NPS1/4, CPX-NPS1/4; MI300X/MI325X/MI355X have 8 XCDs, so a
physical GPU shows 1/2/4/8 logical GPUs in SPX/DPX/QPX/CPX. The device's
reported memory caps win over this table when known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from console.core.gpus import gpu_span
from console.core.model import NodeSnapshot

VALID_NPS: Mapping[str, tuple[str, ...]] = {
    "SPX": ("NPS1",),
    "DPX": ("NPS1", "NPS2"),
    "QPX": ("NPS1", "NPS4"),
    "CPX": ("NPS1", "NPS4"),
}
LOGICAL_PER_PHYSICAL: Mapping[str, int] = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
COMPUTE_MODES = tuple(VALID_NPS)
MEMORY_MODES = ("NPS1", "NPS2", "NPS4")


@dataclass(frozen=True, slots=True)
class PhysicalGpu:
    physical: int
    model: str | None
    compute: str | None
    memory: str | None
    memory_caps: tuple[str, ...]
    logical: tuple[int, ...]  # logical GPU indices on it now


def physical_gpus(snapshot: NodeSnapshot) -> list[PhysicalGpu]:
    groups: dict[int, list] = {}
    for g in snapshot.static:
        groups.setdefault(g.physical, []).append(g)
    out = []
    for phys, rows in sorted(groups.items()):
        primary = next((r for r in rows if r.partition_id == 0), rows[0])
        out.append(
            PhysicalGpu(
                phys,
                primary.model,
                primary.compute_partition,
                primary.memory_partition,
                primary.memory_caps,
                tuple(sorted(r.index for r in rows)),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Blocker:
    """A process (not one of the console's instances) on the GPUs a switch would change."""

    pid: int
    name: str
    gpus: tuple[int, ...]  # logical GPUs it uses among the switched ones


def effective_modes(
    snapshot: NodeSnapshot, physical: Sequence[int], compute: str | None, memory: str | None
) -> tuple[str | None, str | None]:
    """The target without the modes every chosen GPU already has: choosing the current mode
    is "unchanged" (a memory mode already set never reloads the driver)."""
    targets = [p for p in physical_gpus(snapshot) if p.physical in physical]
    if targets and compute is not None and all(p.compute == compute for p in targets):
        compute = None
    if targets and memory is not None and all(p.memory == memory for p in targets):
        memory = None
    return compute, memory


def process_blockers(
    snapshot: NodeSnapshot,
    physical: Sequence[int],
    instances_on_gpu: Mapping[int, str] | None = None,
    ignore_pids: Collection[int] = (),
) -> list[Blocker]:
    """Processes on the chosen physical GPUs' logical GPUs, other than on GPUs that hold an
    instance (those are stopped as instances) and the pids in `ignore_pids` (already ended)."""
    busy_logical = {i for p in physical_gpus(snapshot) if p.physical in physical for i in p.logical}
    found: dict[int, Blocker] = {}
    if snapshot.latest is None:
        return []
    for m in snapshot.latest.gpus:
        if m.index not in busy_logical or m.index in (instances_on_gpu or {}):
            continue
        for proc in m.processes:
            if proc.pid in ignore_pids:
                continue
            old = found.get(proc.pid)
            gpus = (old.gpus if old else ()) + (m.index,)
            found[proc.pid] = Blocker(proc.pid, proc.name, tuple(sorted(set(gpus))))
    return sorted(found.values(), key=lambda b: (b.gpus, b.pid))


def logical_after(snapshot: NodeSnapshot, physical: Sequence[int], compute: str | None) -> dict[int, tuple[int, ...]]:
    """Each physical GPU's logical indices after switching `physical` to `compute` (amdsmi
    numbers the logical GPUs of physical GPU 0 first, then 1, ...)."""
    out: dict[int, tuple[int, ...]] = {}
    offset = 0
    for p in physical_gpus(snapshot):
        n = len(p.logical)
        if compute is not None and p.physical in physical:
            n = LOGICAL_PER_PHYSICAL.get(compute, n)
        out[p.physical] = tuple(range(offset, offset + n))
        offset += n
    return out


def renumbered(snapshot: NodeSnapshot, physical: Sequence[int], compute: str | None) -> dict[int, int]:
    """old logical index -> new one, for the GPUs a switch leaves as they are but renumbers
    (the GPUs of untouched physical GPUs after a switched one whose count changes)."""
    after = logical_after(snapshot, physical, compute)
    moved: dict[int, int] = {}
    for p in physical_gpus(snapshot):
        if p.physical in physical:
            continue
        for old, new in zip(p.logical, after[p.physical]):
            if old != new:
                moved[old] = new
    return moved


def parse_physical(text: str, available: Sequence[int]) -> list[int] | str:
    """'all' or '0,1' -> indices; a one-line reason when it names no such GPU."""
    if text.strip().lower() == "all":
        return list(available)
    try:
        chosen = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        return f"--gpus {text!r}: expected all or physical GPU indices like 0,1"
    missing = [p for p in chosen if p not in available]
    if missing or not chosen:
        return (
            f"--gpus {text!r}: no physical GPU {missing[0] if missing else ''} (the node has {len(available)})".replace(
                "  ", " "
            )
        )
    return chosen


def compatibility_refusal(compute: str, memory: str, caps: Iterable[str] = ()) -> str | None:
    caps = tuple(caps)
    if caps and memory not in caps:
        return f"{memory} is not a memory mode of this GPU (it supports {'/'.join(caps)})"
    allowed = VALID_NPS.get(compute)
    if allowed is None:
        return f"unknown compute partition {compute!r} (one of {', '.join(COMPUTE_MODES)})"
    if memory not in allowed:
        return f"{compute} needs {'/'.join(allowed)}, the memory mode would be {memory}"
    return None


def preflight(
    snapshot: NodeSnapshot,
    physical: Sequence[int],
    *,
    compute: str | None,
    memory: str | None,
    instances_on_gpu: Mapping[int, str] | None = None,
    can_be_root: bool | None = None,
    ignore_pids: Collection[int] = (),
) -> list[str]:
    """Every reason the switch must not run now (empty = go). One line each."""
    reasons: list[str] = []
    gpus = {p.physical: p for p in physical_gpus(snapshot)}
    targets = [gpus[p] for p in physical if p in gpus]
    if compute is None and memory is None:
        return ["nothing to change: give a compute and/or a memory partition"]
    incompatible: dict[str, list[int]] = {}
    for p in targets:
        target_compute = compute or p.compute
        target_memory = memory or p.memory
        if target_compute and target_memory:
            why = compatibility_refusal(target_compute, target_memory, p.memory_caps)
            if why:
                incompatible.setdefault(why, []).append(p.physical)
    for why, phys in incompatible.items():  # one line per reason, not per GPU
        reasons.append(f"GPU{'s' if len(phys) > 1 else ''} {', '.join(map(str, phys))}: {why}")
    busy_logical = {i for p in targets for i in p.logical}
    for index, name in sorted((instances_on_gpu or {}).items()):
        if index in busy_logical:
            reasons.append(f"GPU {index} runs instance {name}: stop it first")
    for b in process_blockers(snapshot, physical, instances_on_gpu, ignore_pids):
        reasons.append(f"GPU {gpu_span(b.gpus)}: process {b.pid} ({b.name}) is using it")
    if can_be_root is False:
        reasons.append("no root: set sudo = true in the profile (passwordless sudo), or log in as root")
    return reasons


def describe_change(snapshot: NodeSnapshot, physical: Sequence[int], compute: str | None, memory: str | None) -> str:
    """What will happen, in one line a person can confirm."""
    gpus = {p.physical: p for p in physical_gpus(snapshot)}
    targets = [gpus[p] for p in physical if p in gpus]
    compute, memory = effective_modes(snapshot, physical, compute, memory)  # a mode kept is no change
    before = sum(len(p.logical) for p in gpus.values())
    after = before
    if compute:
        after = sum(
            LOGICAL_PER_PHYSICAL.get(compute, len(p.logical)) if p.physical in physical else len(p.logical)
            for p in gpus.values()
        )
    model = (targets[0].model or "GPU").replace("AMD Instinct ", "") if targets else "GPU"
    frm = ", ".join(sorted({f"{p.compute}/{p.memory}" for p in targets})) or "?"
    to = ", ".join(sorted({f"{compute or p.compute}/{memory or p.memory}" for p in targets})) or "?"
    if compute is None and memory is None:
        return f"unchanged: {len(targets)} physical {model} already {frm}"
    text = f"{len(targets)} physical {model} {frm} → {to}: {before} → {after} logical GPUs"
    if compute == "CPX":
        text += ", TP 1 per logical GPU only"
    if memory:
        text += "; the amdgpu driver is reloaded (all GPU work on the node stops)"
    return text
