"""What the partition dialog says, computed from a node's snapshot and a switch's result.

Pure: the dialog (console/ui/screens/partition.py) only puts these lines on screen. A
switch's result arrives as the agent's per-physical-GPU records (`SwitchResult.gpus`:
dicts with physical, compute_partition, memory_partition, logical_gpus).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from console.core.gpus import gpu_span
from console.core.model import NodeHealth, NodeSnapshot, ServePreset
from console.core.partition_rules import (
    Blocker,
    effective_modes,
    logical_after,
    physical_gpus,
    renumbered,
)

ROOT_HINT = "needs root on the node: set sudo = true for it in the profile (passwordless sudo), or log in as root"
SUDO_HINT = "set sudo = true for the node in the profile, with passwordless sudo, or log in as root"
CHECKING_TEXT = "preflight: checking processes, instances, modes and root on the node…"

SwitchedGpus = Sequence[Mapping[str, object]]


def physical_of(snapshot: NodeSnapshot, logical: Iterable[int]) -> list[int]:
    """The physical GPUs that hold these logical GPUs (e.g. the GPUs marked in the fleet table)."""
    wanted = set(logical)
    return sorted({g.physical for g in snapshot.static if g.index in wanted})


def _count(value: object) -> int:
    return int(value) if isinstance(value, (int, float, str)) and str(value).strip() else 0


def new_logical_gpus(switched: SwitchedGpus, physical: Sequence[int]) -> tuple[int, ...]:
    """Logical GPU indices on the switched physical GPUs after the switch (amdsmi enumerates
    the logical GPUs of physical GPU 0 first, then of 1, ...)."""
    out: list[int] = []
    offset = 0
    for gpu in sorted(switched, key=lambda g: _count(g.get("physical", 0))):
        count = _count(gpu.get("logical_gpus") or 0)
        if gpu.get("physical") in physical:
            out.extend(range(offset, offset + count))
        offset += count
    return tuple(out)


def preset_for_mode(presets: Sequence[ServePreset], mode: str | None) -> ServePreset | None:
    """The serve preset named for a partition mode (`llama-3.1-8b-fp8-cpx` for CPX), TP 1 first."""
    if not mode or mode.upper() == "SPX":
        return None
    tag = mode.lower()
    named = [p for p in presets if tag in p.name.lower().replace("_", "-").split("-")]
    named = named or [p for p in presets if tag in p.name.lower()]
    return next((p for p in named if p.tp == 1), named[0] if named else None)


def _mode_lines(groups: Mapping[tuple[str, str, int], list[int]]) -> str:
    return (
        "\n".join(
            f"GPU {gpu_span(phys)}  {compute}/{memory} · {n} logical GPU{'s' if n != 1 else ''} each"
            for (compute, memory, n), phys in groups.items()
        )
        or "-"
    )


def modes_now(snapshot: NodeSnapshot, physical: Sequence[int]) -> str:
    """'GPU 0-5  SPX/NPS1 · 1 logical GPU each' lines, one per mode pair."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for p in physical_gpus(snapshot):
        if p.physical in physical:
            groups.setdefault((p.compute or "?", p.memory or "?", len(p.logical)), []).append(p.physical)
    return _mode_lines(groups)


def modes_after(switched: SwitchedGpus, physical: Sequence[int]) -> str:
    """modes_now's lines from a switch's verified result."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for g in switched:
        if g.get("physical") in physical:
            key = (
                str(g.get("compute_partition") or "?"),
                str(g.get("memory_partition") or "?"),
                _count(g.get("logical_gpus") or 0),
            )
            groups.setdefault(key, []).append(_count(g["physical"]))
    return _mode_lines(groups)


def local_reasons(
    node: str, snapshot: NodeSnapshot, physical: list[int] | str, compute: str | None, memory: str | None
) -> list[str]:
    """What refuses a target without asking the node (physical: the GPUs, or why the field is wrong)."""
    if not snapshot.static:
        return [f"{node} has not reported its GPUs yet ({snapshot.health.value})"]
    if snapshot.health == NodeHealth.DOWN:
        return [f"{node} is down: {snapshot.error or 'unreachable'}"]
    if isinstance(physical, str):
        return [physical]
    if compute is None and memory is None:
        return ["choose a compute and/or a memory partition"]
    return []


def unchanged_text(
    snapshot: NodeSnapshot, physical: Sequence[int] | str, compute: str | None, memory: str | None
) -> str | None:
    """'unchanged: GPU 3 is already CPX/NPS1' when every mode chosen is the one the GPUs
    have (nothing to switch, nothing to warn about); None when something would change."""
    if isinstance(physical, str) or (compute is None and memory is None):
        return None
    if effective_modes(snapshot, physical, compute, memory) != (None, None):
        return None
    targets = [p for p in physical_gpus(snapshot) if p.physical in physical]
    if not targets:
        return None
    now = sorted({f"{p.compute}/{p.memory}" for p in targets})
    verb = "is" if len(targets) == 1 else "are"
    return f"unchanged: GPU {gpu_span(physical)} {verb} already {', '.join(now)} (nothing to switch)"


def renumber_lines(
    snapshot: NodeSnapshot,
    physical: Sequence[int],
    compute: str | None,
    instances: Mapping[str, Sequence[int]] | None = None,
) -> list[str]:
    """Which logical GPU numbers a compute switch changes, and which running instances'
    HIP_VISIBLE_DEVICES then names other GPUs ([] when no number changes)."""
    if compute is None:
        return []
    now = {p.physical: p.logical for p in physical_gpus(snapshot)}
    after = logical_after(snapshot, physical, compute)
    lines: list[str] = []
    switched = [p for p in sorted(now) if p in physical]
    before = [i for p in switched for i in now[p]]
    later = [i for p in switched for i in after[p]]
    if before != later:
        lines.append(f"logical GPU {gpu_span(before)} → {gpu_span(later)} (physical {gpu_span(switched)}, switched)")
    moved = renumbered(snapshot, physical, compute)
    runs: dict[int, list[int]] = {}  # by shift: one line per group of GPUs moving together
    for old, new in sorted(moved.items()):
        runs.setdefault(new - old, []).append(old)
    for shift, olds in runs.items():
        phys = sorted({p for p in now if set(now[p]) & set(olds)})
        lines.append(
            f"logical GPU {gpu_span(olds)} → {gpu_span(o + shift for o in olds)} "
            f"(physical {gpu_span(phys)}: not switched, renumbered)"
        )
    for name, gpus in sorted((instances or {}).items()):
        if any(g in moved for g in gpus):
            old_text = ",".join(map(str, gpus))
            new_text = ",".join(str(moved.get(g, g)) for g in gpus)
            lines.append(
                f"instance {name}: HIP_VISIBLE_DEVICES={old_text} is GPU {new_text} after the switch; it keeps "
                "running, but its recorded GPUs (and a restart) would name other GPUs"
            )
    if lines:
        lines.insert(0, "renumbers logical GPUs:")
    return lines


def blockers_text(blockers: Sequence[Blocker], grace: float, instances: int = 0) -> str:
    """The offer under a preflight that processes (and the console's instances) refuse."""
    parts = []
    if instances:
        parts.append("stop the instance" if instances == 1 else f"stop the {instances} instances")
    if blockers:
        n = len(blockers)
        what = "the blocking process" if n == 1 else f"the {n} blocking processes"
        parts.append(f"end {what} (SIGTERM, then SIGKILL after {grace:g} s)")
    if not parts:
        return ""
    return f"k: {' and '.join(parts)}; asks first"


def preflight_text(reasons: Sequence[str], *, checking: bool, memory: str | None) -> str:
    """The preflight line: checking, every refusal, or what passed."""
    if checking:
        return CHECKING_TEXT
    if reasons:
        return "\n".join(f"✗ {r}" for r in reasons)
    what = "no process or instance on these GPUs, the modes fit, root is available"
    if memory:
        what += "; Switch asks once more before the driver reload"
    return f"✓ preflight passed: {what}"


def switching_text(node: str, physical: Sequence[int], compute: str | None, memory: str | None, seconds: float) -> str:
    target = "/".join(m for m in (compute, memory) if m)
    return (
        f"switching {node} GPU {gpu_span(physical)} to {target}… {max(0.0, seconds):.0f} s "
        "(then the GPUs are re-enumerated and verified)"
    )


def switched_modes(switched: SwitchedGpus, physical: Sequence[int]) -> list[str]:
    """'CPX/NPS1' for each mode pair the switched GPUs report."""
    chosen = [g for g in switched if g.get("physical") in physical]
    return sorted({f"{g.get('compute_partition') or '?'}/{g.get('memory_partition') or '?'}" for g in chosen})


def switched_compute(switched: SwitchedGpus, physical: Sequence[int]) -> str | None:
    """The one compute mode the switched GPUs now report (None: several, or none known)."""
    modes = {g.get("compute_partition") for g in switched if g.get("physical") in physical}
    mode = modes.pop() if len(modes) == 1 else None
    return mode if isinstance(mode, str) else None


def done_text(
    node: str, physical: Sequence[int], switched: SwitchedGpus, verification: str, seconds: float, logical: int
) -> str:
    modes = switched_modes(switched, physical)
    return (
        f"✓ {node}: GPU {gpu_span(physical)} now {', '.join(modes) or '?'} ({verification}, "
        f"{seconds:.1f} s): {logical} logical GPUs on the node.\n"
        "The table shows the new rows as soon as the node's telemetry reconnects."
    )


def failure_text(reason: str, kind: str) -> str:
    """A failed switch's reason; a permission failure says how to get root."""
    if kind == "no_perm" and "sudo" not in reason:
        return f"{reason} ({ROOT_HINT})"
    if kind == "no_perm":
        return f"{reason} ({SUDO_HINT})"
    return reason


def offer_text(preset: ServePreset, new_gpus: Sequence[int]) -> str:
    return (
        f"Serve on the new logical GPUs {gpu_span(new_gpus)}? {preset.name}: {preset.model}, "
        f"TP {preset.tp} (one instance per logical GPU; s opens the start dialog on GPU "
        f"{new_gpus[0]})"
    )
