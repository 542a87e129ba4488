"""Which lines the GPU table shows: node headers, then logical GPUs grouped by physical GPU.

Pure (no Textual), so the filter and the grouping are tested without an app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from console.core.model import GpuMetrics, GpuStatic, NodeHealth, NodeSnapshot
from console.ui.model import health_view
from console.ui.model.format import BUSY_UTIL_PCT, partition_text, short_model

RowKey = tuple[str, "int | None"]  # (node, logical GPU index or None for the header)


@dataclass(frozen=True, slots=True)
class Row:
    node: str
    gpu: int | None = None  # None: the node's header line
    tree: str = ""  # grouping glyph under a physical GPU: "┬", "├", "└" or ""
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


def is_busy(metrics: GpuMetrics | None) -> bool:
    if metrics is None:
        return False
    if metrics.processes:
        return True
    return metrics.util_pct is not None and metrics.util_pct >= BUSY_UTIL_PCT


_STATES = {h.value for h in NodeHealth}


class RowFilter:
    """Space-separated words, all must match: a node name, a GPU model, a partition
    mode (cpx, nps1, spx/nps1), busy/idle, a node state (live/stale/down), or a GPU's
    health: sick (warn or fail), warn, fail, throttled, ecc (an ECC error counted)."""

    def __init__(self, text: str = "") -> None:
        self.text = text.strip()
        self.words = tuple(w.lower() for w in self.text.split())

    def __bool__(self) -> bool:
        return bool(self.words)

    def _word_matches(
        self, word: str, snapshot: NodeSnapshot, static: GpuStatic | None, metrics: GpuMetrics | None
    ) -> bool:
        if word in ("busy", "idle"):
            if static is None and metrics is None:
                return False
            return is_busy(metrics) == (word == "busy")
        if word in _STATES:
            return snapshot.health.value == word
        if word in health_view.FILTER_WORDS:
            return health_view.word_matches(word, snapshot, static, metrics)
        return word in _haystack(snapshot, static)

    def matches(self, snapshot: NodeSnapshot, static: GpuStatic | None, metrics: GpuMetrics | None) -> bool:
        return all(self._word_matches(w, snapshot, static, metrics) for w in self.words)


def _haystack(snapshot: NodeSnapshot, static: GpuStatic | None) -> str:
    parts = [snapshot.name]
    if static is not None:
        parts += [
            short_model(static.model),
            partition_text(static.compute_partition, static.memory_partition),
            f"gpu{static.index}",
        ]
    return " ".join(parts).lower()


def _tree_glyph(pos: int, size: int) -> str:
    if size <= 1:
        return ""
    return "┬" if pos == 0 else "└" if pos == size - 1 else "├"


def node_rows(snapshot: NodeSnapshot, flt: RowFilter) -> list[Row]:
    pairs = gpu_pairs(snapshot)
    groups: dict[int, list[tuple[int, int]]] = {}
    for index, (static, _m) in pairs.items():
        physical = static.physical if static else index
        part = static.partition_id if static else 0
        groups.setdefault(physical, []).append((part, index))
    rows: list[Row] = []
    for physical in sorted(groups):
        members = sorted(groups[physical])
        for pos, (_part, index) in enumerate(members):
            static, metrics = pairs[index]
            if flt and not flt.matches(snapshot, static, metrics):
                continue
            rows.append(Row(snapshot.name, index, _tree_glyph(pos, len(members)), physical))
    if rows or not flt or (not pairs and flt.matches(snapshot, None, None)):
        rows.insert(0, Row(snapshot.name))
    return rows


def build_rows(snapshots: Iterable[NodeSnapshot], flt: RowFilter) -> list[Row]:
    rows: list[Row] = []
    for snapshot in snapshots:
        rows.extend(node_rows(snapshot, flt))
    return rows


CHANGE_MARK = "Δ"  # a node whose versions changed since it was last seen (node.changed)


def change_mark(node: str, changes: Mapping[str, str]) -> str:
    """The node header's mark: `Δ ROCm: 7.0.2 -> 7.1.0` until the change is acknowledged."""
    summary = changes.get(node)
    return f"{CHANGE_MARK} {summary}" if summary else ""
