"""Which lines the GPU table shows: node headers, then logical GPUs grouped by physical GPU.

Pure (no Textual), so the filter and the grouping are tested without an app.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from console.core.model import GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot
from console.ui.model import health_view
from console.ui.model.format import (
    BUSY_UTIL_PCT,
    OK,
    TEMP_JUNCTION,
    TEMP_MEM,
    level,
    node_facts,
    partition_text,
    short_model,
)
from console.ui.model.sort import DEFAULT_ORDER, SortOrder, ordered

RowKey = tuple[str, "int | None"]  # (node, logical GPU index or None for the header)


@dataclass(frozen=True, slots=True)
class Row:
    node: str
    gpu: int | None = None  # None: the node's header line
    tree: str = ""  # grouping glyph under a physical GPU: "┬", "├", "└", "─" (a partition alone) or ""
    physical: int | None = None

    @property
    def key(self) -> RowKey:
        return (self.node, self.gpu)

    @property
    def is_header(self) -> bool:
        return self.gpu is None


GpuPair = tuple["GpuStatic | None", "GpuMetrics | None"]


def gpu_pairs(snapshot: NodeSnapshot) -> dict[int, GpuPair]:
    """Logical index -> (static facts, latest metrics); either side may be missing."""
    static = {g.index: g for g in snapshot.static}
    metrics = {g.index: g for g in snapshot.latest.gpus} if snapshot.latest else {}
    return {i: (static.get(i), metrics.get(i)) for i in sorted(set(static) | set(metrics))}


Occupied = Callable[[str, int], bool]  # (node, logical GPU) -> an active vLLM instance holds it


def is_busy(metrics: GpuMetrics | None, occupied: bool = False) -> bool:
    """In use: an active instance holds it, a process runs on it, or it works at or above
    BUSY_UTIL_PCT (a process the node does not show, e.g. another container's)."""
    if occupied:
        return True
    if metrics is None:
        return False
    if metrics.processes:
        return True
    return metrics.util_pct is not None and metrics.util_pct >= BUSY_UTIL_PCT


def is_hot(metrics: GpuMetrics | None) -> bool:
    """Near the thermal limits: the junction or memory temperature the table colours (warn or crit)."""
    if metrics is None:
        return False
    return level(metrics.temp_junction_c, TEMP_JUNCTION) != OK or level(metrics.temp_mem_c, TEMP_MEM) != OK


# What `hot` means, where the filter is described (the filter box's hint, the help): the
# table's warn colour of either temperature.
HOT_TEXT = f"TJ ≥ {TEMP_JUNCTION[0]:g}° or TMEM ≥ {TEMP_MEM[0]:g}°"

_STATES = {h.value for h in NodeHealth}
# Words about what runs on a GPU: free (idle is the same), busy (the opposite), hot.
USE_WORDS = ("free", "idle", "busy", "hot")
FILTER_WORDS = (*USE_WORDS, *health_view.FILTER_WORDS, *sorted(_STATES))


class RowFilter:
    """Space-separated words, all must match: a node name, a GPU model, a partition
    mode (cpx, nps1, spx/nps1), free/idle (no instance, no process, below BUSY_UTIL_PCT),
    busy (the opposite), hot (temperatures past the table's warn colour), a node state
    (live/stale/down), or a GPU's health: sick (warn or fail), warn, fail, throttled, ecc
    (an ECC error counted).

    A partition answers `hot` by its physical GPU's temperatures (reported by the first
    partition only), so a hot physical GPU shows all its partitions."""

    def __init__(self, text: str = "") -> None:
        self.text = text.strip()
        self.words = tuple(w.lower() for w in self.text.split())

    def __bool__(self) -> bool:
        return bool(self.words)

    def _word_matches(
        self,
        word: str,
        snapshot: NodeSnapshot,
        static: GpuStatic | None,
        metrics: GpuMetrics | None,
        device: GpuMetrics | None,
        occupied: bool,
    ) -> bool:
        if word in ("busy", "idle", "free"):
            if static is None and metrics is None:
                return False
            return is_busy(metrics, occupied) == (word == "busy")
        if word == "hot":
            return is_hot(metrics) or is_hot(device)
        if word in _STATES:
            return snapshot.health.value == word
        if word in health_view.FILTER_WORDS:
            return health_view.word_matches(word, snapshot, static, metrics)
        return word in _haystack(snapshot, static)

    def matches(
        self,
        snapshot: NodeSnapshot,
        static: GpuStatic | None,
        metrics: GpuMetrics | None,
        *,
        device: GpuMetrics | None = None,
        occupied: bool = False,
    ) -> bool:
        """`device`: the metrics of the physical GPU's first partition (device-wide values);
        `occupied`: an active instance holds this GPU."""
        return all(self._word_matches(w, snapshot, static, metrics, device, occupied) for w in self.words)


def _haystack(snapshot: NodeSnapshot, static: GpuStatic | None) -> str:
    parts = [snapshot.name]
    if static is not None:
        parts += [
            short_model(static.model),
            partition_text(static.compute_partition, static.memory_partition),
            f"gpu{static.index}",
        ]
    return " ".join(parts).lower()


def _tree_glyph(pos: int, size: int, partitioned: bool) -> str:
    """The glyph of a kept row among the kept rows of its physical GPU. A partition left alone
    by a filter gets "─": it still names its physical GPU, never looks like a whole GPU."""
    if size <= 1:
        return "─" if partitioned else ""
    return "┬" if pos == 0 else "└" if pos == size - 1 else "├"


@dataclass(frozen=True, slots=True)
class Group:
    """A physical GPU's rows (its kept logical GPUs) and the metrics of all its logical GPUs."""

    node: str
    physical: int
    rows: tuple[Row, ...]
    metrics: tuple[GpuMetrics | None, ...]


def node_groups(snapshot: NodeSnapshot, flt: RowFilter, occupied: Occupied | None = None) -> list[Group]:
    """The node's physical GPUs in index order, each with the logical GPUs the filter keeps.

    The tree glyphs are drawn over the kept rows: a filtered partition list never starts
    with "├" under the previous physical GPU's rows."""
    pairs = gpu_pairs(snapshot)
    members_of: dict[int, list[tuple[int, int]]] = {}
    for index, (static, _m) in pairs.items():
        physical = static.physical if static else index
        part = static.partition_id if static else 0
        members_of.setdefault(physical, []).append((part, index))
    groups: list[Group] = []
    for physical in sorted(members_of):
        members = [index for _part, index in sorted(members_of[physical])]
        metrics = tuple(pairs[i][1] for i in members)
        device = next((m for m in metrics if m is not None and m.temp_junction_c is not None), None)
        kept = list(members) if not flt else []
        for index in members if flt else ():
            static, m = pairs[index]
            busy = occupied is not None and occupied(snapshot.name, index)
            if flt.matches(snapshot, static, m, device=device, occupied=busy):
                kept.append(index)
        partitioned = len(members) > 1
        rows = tuple(
            Row(snapshot.name, index, _tree_glyph(pos, len(kept), partitioned), physical)
            for pos, index in enumerate(kept)
        )
        groups.append(Group(snapshot.name, physical, rows, metrics))
    return groups


def _header_kept(snapshot: NodeSnapshot, flt: RowFilter, groups: list[Group]) -> bool:
    if any(g.rows for g in groups) or not flt:
        return True
    return not groups and flt.matches(snapshot, None, None)


def node_rows(
    snapshot: NodeSnapshot,
    flt: RowFilter,
    order: SortOrder = DEFAULT_ORDER,
    occupied: Occupied | None = None,
) -> list[Row]:
    """The node's header and its GPU rows, physical GPUs in `order` (per node)."""
    groups = node_groups(snapshot, flt, occupied)
    if not _header_kept(snapshot, flt, groups):
        return []
    rows = [Row(snapshot.name)]
    for group in _sorted_groups(groups, order):
        rows.extend(group.rows)
    return rows


def _sorted_groups(groups: list[Group], order: SortOrder) -> list[Group]:
    if order.key == "name":
        return list(reversed(groups)) if order.descending else groups
    return ordered(groups, lambda g: order.group_value(g.metrics), order.descending)


def build_rows(
    snapshots: Iterable[NodeSnapshot],
    flt: RowFilter,
    order: SortOrder = DEFAULT_ORDER,
    occupied: Occupied | None = None,
) -> list[Row]:
    """Every row of the table. Per node: each node's header, then its physical GPUs in
    `order`. Across the fleet: the physical GPUs of every node in one order, without
    headers (the node is a column then); nodes without a GPU row keep their header, last."""
    snapshots = list(snapshots)
    if not order.fleet:
        if order.descending and order.key == "name":
            snapshots.reverse()
        rows: list[Row] = []
        for snapshot in snapshots:
            rows.extend(node_rows(snapshot, flt, order, occupied))
        return rows
    groups: list[Group] = []
    bare: list[Row] = []
    for snapshot in snapshots:
        found = node_groups(snapshot, flt, occupied)
        if not any(g.rows for g in found):
            if _header_kept(snapshot, flt, found):
                bare.append(Row(snapshot.name))
            continue
        groups.extend(g for g in found if g.rows)
    flat = [row for group in _sorted_groups(groups, order) for row in group.rows]
    return flat + bare


CHANGE_MARK = "Δ"  # a node whose versions changed since it was last seen (node.changed)


def change_mark(node: str, changes: Mapping[str, str]) -> str:
    """The node header's mark: `Δ ROCm: 7.0.2 -> 7.1.0` until the change is acknowledged."""
    summary = changes.get(node)
    return f"{CHANGE_MARK} {summary}" if summary else ""


def header_tail(snapshot: NodeSnapshot, mark: str) -> list[tuple[str, bool]]:
    """What the node header shows after its state, health and instances, as (text, is_mark):
    the GPU model and partition mode first, then the change mark, then the versions and the
    telemetry source. A narrow terminal cuts the line's end: what the node is stays readable,
    and the mark still shows before the versions it is about."""
    facts = node_facts(snapshot)
    if not mark:
        return [(" · ".join(facts), False)] if facts else []
    # node_facts lists the GPU facts first; without the probe it lists only them and the source
    gpu = len(node_facts(replace(snapshot, probe=None))) - (1 if snapshot.source else 0)
    parts = [(" · ".join(facts[:gpu]), False), (mark, True), (" · ".join(facts[gpu:]), False)]
    return [p for p in parts if p[0]]
