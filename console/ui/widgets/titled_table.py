"""A list screen's body: a title line, a row-cursor table, a line about the selected row."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from textual.widget import Widget
from textual.widgets import DataTable, Static


def titled_table(prefix: str, columns: Sequence[str] = ()) -> Iterator[Widget]:
    """`#{prefix}-title`, `#{prefix}-table` (zebra rows, a row cursor) and `#{prefix}-detail`."""
    yield Static(id=f"{prefix}-title")
    table: DataTable[Any] = DataTable(id=f"{prefix}-table", cursor_type="row", zebra_stripes=True)
    if columns:
        table.add_columns(*columns)
    yield table
    yield Static(id=f"{prefix}-detail")
