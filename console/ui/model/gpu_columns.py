"""Columns of the GPU table: which fit the terminal width, and how a cell's text is cut."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rich.cells import cell_len, set_cell_size

from console.core.model import GpuMetrics, GpuStatic
from console.core.text import printable
from console.ui.model.rows import Row

_SPARK_MAX = 16
_VLLM_WANT = 28  # cells for '● llama-3.1-8b-fp8-g4 ready' before sparklines widen
GAP = 1  # spaces between columns


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int
    right: bool = True


NODE_MAX = 12  # cells of the node column (the fleet sorted across nodes); longer names are cut


@lru_cache(maxsize=16)
def layout_columns(width: int, node_width: int = 0) -> tuple[tuple[Column, ...], int]:
    """Columns that fit `width`, and the sparkline width; least useful dropped first.

    `node_width`: a NODE column first, as wide (the fleet sorted across nodes, without headers)."""
    order = ["gpu", "health", "util", "vram", "power", "tj", "tmem", "gfx", "part"]
    if node_width:
        order.insert(0, "node")
    spec = {
        "node": Column("node", "NODE", min(NODE_MAX, max(4, node_width)), right=False),
        "gpu": Column("gpu", "GPU", 7),
        "health": Column("health", "HEALTH", 6, right=False),
        "util": Column("util", "UTIL", 5),
        "vram": Column("vram", "VRAM GiB", 10),
        "power": Column("power", "POWER W", 10),
        "tj": Column("tj", "TJ", 4),
        "tmem": Column("tmem", "TMEM", 5),
        "gfx": Column("gfx", "GFX", 5),
        "part": Column("part", "PART", 10, right=False),  # "1g.10gb+me", a MIG profile with media engines
    }
    droppable = ["gfx", "tmem", "part"]  # in this order when the terminal is too narrow
    vllm_min = 6
    spark_min = 2 * (3 + 1)  # two 3-cell sparklines are worth more than the GFX clock
    while True:
        cols = [spec[k] for k in order]
        fixed = sum(c.width for c in cols) + GAP * len(cols)
        room = width - fixed - vllm_min
        if room - spark_min >= 0 or not droppable:
            break
        order.remove(droppable.pop(0))
    # Sparklines of 3 cells when they fit; beyond that the vLLM column (instance name and
    # state) gets up to _VLLM_WANT cells before the sparklines grow.
    spark = max(min(3, room // 2 - 1), min(_SPARK_MAX, (room + vllm_min - _VLLM_WANT) // 2 - 1))
    if spark < 3:
        spark = 0
    used = fixed + (2 * (spark + 1) if spark else 0)
    cols.append(Column("vllm", "vLLM", max(0, width - used), right=False))
    return tuple(cols), spark


def vram_total(static: GpuStatic | None, m: GpuMetrics | None) -> float | None:
    if m is not None and m.vram_total_mib is not None:
        return m.vram_total_mib
    return static.vram_total_mib if static is not None else None


def gpu_label(row: Row) -> str:
    """'0' for a whole GPU; '1┬  8', '├  9', '└ 15' for the partitions of physical GPU 1;
    '1─  9' for a partition a filter left alone under its physical GPU."""
    if not row.tree:
        return f"{row.gpu}"
    if row.tree in ("┬", "─"):  # the first row shown of a physical GPU names it
        return f"{row.physical}{row.tree}{row.gpu:>3}"
    return f"{row.tree}{row.gpu:>3}"


def part_label(static: GpuStatic | None, nvidia: bool = False) -> str:
    """The PART cell: 'CPX/NPS1'; a MIG instance by its profile alone ('3g.40gb', which names
    MIG itself), so it fits the column where 'MIG/3g.40gb' would be cut; '-' for a whole
    NVIDIA GPU (no partition mode at all, as `status` prints it)."""
    if static is None:
        return "?"
    if static.compute_partition == "MIG" and static.memory_partition:
        return static.memory_partition
    if static.compute_partition is None and static.memory_partition is None:
        return "-" if nvidia else "?"
    return f"{static.compute_partition or '?'}/{static.memory_partition or '?'}"


def fit(text: str, width: int, right: bool) -> str:
    if width <= 0:
        return ""
    text = printable(text)  # cells are segments, written as they are: no control may reach the terminal
    if cell_len(text) > width:
        return set_cell_size(text, width - 1) + "…" if width > 1 else text[:width]
    return text.rjust(width) if right else set_cell_size(text, width)
