"""A row-cursor table that knows how many rows there are and draws only those in view (issue Y).

The history's list can hold 100,000 runs: DataTable renders each new screenful cell by cell
through Rich and drops what it rendered whenever rows are added. This table spans `total`
rows (the store's count) of which `row_count` are held, page by page wherever they are: a row
not read yet (or dropped by its owner to bound what it holds) is drawn as a dim placeholder
until its page arrives. A row is drawn once into a line (a bounded
cache of them) and only the cursor's row is drawn again as the cursor moves. It posts
CursorMoved when the cursor moves and ViewMoved when the rows in view change, so its owner
reads the pages they need (in a worker; the rows come back through `add_rows`).

Public Textual API only (ScrollView and the Line API's render_line).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["PLACEHOLDER", "Column", "RunTable"]

PLACEHOLDER = "…"  # a row whose page is not read yet
PADDING = 1  # blank cells each side of a column, as DataTable's cell_padding


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    right: bool = False  # numbers: right-aligned
    width: int | None = None  # fixed; None: as wide as its widest cell or label


class RunTable(ScrollView, can_focus=True):
    """Rows keyed by a string (a run id), a header line, a row cursor, zebra rows. A row's cells
    are plain strings drawn in its style (rich markup is not read), or Text with a look of its own."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First row", show=False),
        Binding("end,ctrl+end", "last", "Last row", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
    ]

    COMPONENT_CLASSES = {
        "run-table--header",
        "run-table--cursor",
        "run-table--even-row",
        "run-table--odd-row",
        "run-table--placeholder",
    }

    # DataTable's look (the other tables of the console), under this table's names
    DEFAULT_CSS = """
    RunTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .run-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .run-table--header { background-tint: $foreground 5%; }
        }
        &:dark > .run-table--even-row { background: $surface-darken-1 40%; }
        & > .run-table--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .run-table--header { background: ansi_bright_blue; color: ansi_default; }
        & > .run-table--even-row { background: $surface-lighten-1 50%; }
        & > .run-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .run-table--placeholder { color: $text-muted; }
    }
    """

    LINES = 2_000  # rows kept drawn (a few screenfuls each way; older ones are drawn again)

    class _AtRow(Message):
        """A row of the table (`key` None: a row not read yet)."""

        def __init__(self, table: RunTable, row: int, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.row = row
            self.key = key

        @property
        def control(self) -> RunTable:
            return self.table

    class CursorMoved(_AtRow):
        """The cursor is on row `row`."""

    class Selected(_AtRow):
        """Enter (or a click) on the cursor's row `row`."""

    class ViewMoved(Message):
        """Rows up to `bottom` are in view (the owner reads those not read yet)."""

        def __init__(self, table: RunTable, bottom: int) -> None:
            super().__init__()
            self.table = table
            self.bottom = bottom

        @property
        def control(self) -> RunTable:
            return self.table

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._columns: list[Column] = []
        self._widths: list[int] = []
        # the rows held, by row number (not necessarily contiguous: pages dropped are placeholders)
        self._keys: dict[int, str] = {}
        self._cells: dict[int, list[str | Text]] = {}
        self._row_styles: dict[int, str] = {}
        self._index: dict[str, int] = {}
        self._total = 0
        self._cursor = 0
        self._lines: OrderedDict[int, Strip] = OrderedDict()  # drawn rows (not the cursor's), by row
        self._header: Strip | None = None
        self._styles: tuple[Style, ...] = ()  # the styles the drawn lines were drawn with
        self._line_width = 0
        self._cell_styles: dict[str, Style] = {}
        self._bottom = -1  # the last bottom row told (ViewMoved)

    # ------------------------------------------------------------ the rows

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(self._columns)

    @property
    def column_widths(self) -> tuple[int, ...]:
        """Each column's width in cells, its padding included."""
        return tuple(w + 2 * PADDING for w in self._widths)

    @property
    def row_count(self) -> int:
        """Rows held (with cells)."""
        return len(self._keys)

    @property
    def total(self) -> int:
        """Rows the table spans: those held, and placeholders for the others."""
        return self._total

    @property
    def cursor_row(self) -> int:
        return self._cursor

    def set_columns(self, columns: Sequence[Column]) -> None:
        """New columns: the rows are cleared."""
        self._columns = list(columns)
        self._widths = [c.width if c.width is not None else cell_len(c.label) for c in self._columns]
        self.clear()

    def clear(self) -> None:
        """No rows (the columns stay); the cursor goes back to the first row."""
        self._keys, self._cells, self._row_styles, self._index = {}, {}, {}, {}
        self._total = 0
        self._cursor = 0
        self._bottom = -1
        self._forget()
        self._resize()

    def add_rows(self, rows: Sequence[tuple[str, Sequence[str | Text], str]], start: int | None = None) -> None:
        """Rows from row `start` (default: under the last row held): (key, a cell per column, the
        row's style: "" or e.g. "dim italic"); they replace placeholders (or the rows there)."""
        first = start if start is not None else (max(self._keys) + 1 if self._keys else 0)
        widths = self._widths
        grown = False
        for n, (key, cells, style) in enumerate(rows, first):
            old = self._keys.get(n)
            if old is not None and self._index.get(old) == n:
                del self._index[old]
            self._index[key] = n
            self._keys[n] = key
            row = list(cells)
            self._cells[n] = row
            self._row_styles[n] = style
            self._lines.pop(n, None)
            for i, (cell, column) in enumerate(zip(row, self._columns)):
                w = cell_len(cell if isinstance(cell, str) else cell.plain)
                if w > widths[i] and column.width is None:
                    widths[i] = w
                    grown = True
        if grown:
            self._forget()
        last = first + len(rows)
        self._total = max(self._total, last)
        self._resize()
        top = int(self.scroll_y)
        if grown or (first < top + self.size.height and last > top):  # placeholders in view became rows
            self.refresh()

    def drop_rows(self, start: int, stop: int) -> None:
        """Forget rows start..stop-1 (placeholders again: their owner reads them again when needed)."""
        for n in range(start, stop):
            key = self._keys.pop(n, None)
            if key is None:
                continue
            if self._index.get(key) == n:
                del self._index[key]
            del self._cells[n], self._row_styles[n]
            self._lines.pop(n, None)
        top = int(self.scroll_y)
        if start < top + self.size.height and stop > top:
            self.refresh()

    @property
    def view_rows(self) -> tuple[int, int]:
        """The first and last rows in view."""
        top = int(self.scroll_y)
        return top, top + self._page - 1

    def set_total(self, total: int) -> None:
        """The rows the table spans (never fewer than those read)."""
        total = max(total, max(self._keys) + 1 if self._keys else 0)
        if total != self._total:
            self._total = total
            self._resize()
            if self._cursor >= total:
                self.move_cursor(row=total - 1)
            self.refresh()

    def row_index(self, key: str) -> int | None:
        return self._index.get(key)

    def key_at(self, row: int) -> str | None:
        return self._keys.get(row)

    def get_row_at(self, row: int) -> list[Text]:
        """The row's cells as drawn (Text in the row's style)."""
        style = self._row_styles[row]
        return [
            cell if isinstance(cell, Text) else Text(cell, style=style, justify="right" if column.right else "left")
            for cell, column in zip(self._cells[row], self._columns)
        ]

    def get_row(self, key: str) -> list[Text]:
        return self.get_row_at(self._index[key])

    def update_cell(self, key: str, column: str, value: str | Text) -> None:
        row = self._index[key]
        i = next(i for i, c in enumerate(self._columns) if c.key == column)
        self._cells[row][i] = value
        width = cell_len(value if isinstance(value, str) else value.plain)
        if self._columns[i].width is None and width > self._widths[i]:
            self._widths[i] = width
            self._forget()
            self._resize()
            self.refresh()
            return
        self._lines.pop(row, None)
        self.refresh_line(row + 1)

    def _forget(self) -> None:
        self._lines.clear()
        self._header = None

    def _resize(self) -> None:
        self.virtual_size = Size(sum(self.column_widths), self._total + 1)  # the header's line too

    # ------------------------------------------------------------ the cursor

    @property
    def _page(self) -> int:
        """Rows in view (the header line aside)."""
        return max(1, self.scrollable_content_region.height - 1)

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:  # noqa: ARG002 - DataTable's
        row = max(0, min(row, self._total - 1))
        old, self._cursor = self._cursor, row
        if scroll:
            self._show_row(row)
        if old != row:
            self.refresh_line(old + 1)
            self.refresh_line(row + 1)
            self.post_message(self.CursorMoved(self, row, self.key_at(row)))

    def _show_row(self, row: int) -> None:
        top, page = int(self.scroll_y), self._page
        if row < top:
            self.scroll_to(y=row, animate=False, force=True, immediate=True)
        elif row >= top + page:
            self.scroll_to(y=row - page + 1, animate=False, force=True, immediate=True)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self._cursor + 1)

    def action_page_down(self) -> None:
        page = self._page
        self.scroll_to(y=self.scroll_y + page, animate=False, force=True, immediate=True)
        self.move_cursor(row=self._cursor + page)

    def action_page_up(self) -> None:
        page = self._page
        self.scroll_to(y=self.scroll_y - page, animate=False, force=True, immediate=True)
        self.move_cursor(row=self._cursor - page)

    def action_select_cursor(self) -> None:
        if self._total:
            self.post_message(self.Selected(self, self._cursor, self.key_at(self._cursor)))

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.move_cursor(row=self._total - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            row = int(self.scroll_y) + offset.y - 1
            if row == self._cursor:
                self.action_select_cursor()
            elif row < self._total:
                self.move_cursor(row=row)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        bottom = min(self._total, int(new_value) + self._page) - 1
        if bottom != self._bottom:
            self._bottom = bottom
            self.post_message(self.ViewMoved(self, bottom))

    # ------------------------------------------------------------ drawing (the Line API)

    def render_lines(self, crop: Region) -> list[Strip]:
        # the component styles follow focus and the theme: lines drawn with others are stale
        styles = (
            self.rich_style,
            *(
                self.get_component_styles(f"run-table--{name}").rich_style
                for name in ("header", "even-row", "odd-row", "cursor", "placeholder")
            ),
        )
        width = max(sum(self.column_widths), self.size.width)
        if styles != self._styles or width != self._line_width:
            self._styles, self._line_width = styles, width
            self._forget()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x = int(self.scroll_x)
        if y == 0:
            if self._header is None:
                self._header = self._draw_header()
            strip = self._header
        else:
            row = int(self.scroll_y) + y - 1
            if row >= self._total:
                return Strip.blank(width, self._styles[0] if self._styles else None)
            strip = self._draw_row(row, cursor=True) if row == self._cursor else self._cached(row)
        return strip.crop(scroll_x, scroll_x + width) if scroll_x or strip.cell_length != width else strip

    def _cached(self, row: int) -> Strip:
        if row not in self._cells:  # a placeholder: not kept, its row comes with its page
            return self._draw_row(row, cursor=False)
        strip = self._lines.get(row)
        if strip is None:
            strip = self._lines[row] = self._draw_row(row, cursor=False)
            if len(self._lines) > self.LINES:
                self._lines.popitem(last=False)
        return strip

    def _draw_header(self) -> Strip:
        base, header = self._styles[0], self._styles[1]
        style = base + header
        segments = []
        for column, width in zip(self._columns, self._widths):
            segments.append(self._cell(column.label, width, column.right, style))
        return Strip(segments).adjust_cell_length(self._line_width, style)

    def _draw_row(self, row: int, *, cursor: bool) -> Strip:
        base, _, even, odd, cursor_style, placeholder = self._styles
        style = base + (odd if row % 2 else even)
        if cursor:
            style += cursor_style
        if row not in self._cells:  # its page is not read yet: the muted colour on the row's own background
            muted = style + Style(color=placeholder.color)
            text = self._cell(PLACEHOLDER, max(1, self._widths[0] if self._widths else 1), False, muted)
            return Strip([text]).adjust_cell_length(self._line_width, style)
        segments = []
        row_style = style + self._style_of(self._row_styles[row])
        if cursor:
            row_style += cursor_style  # the cursor's colours over a failed run's red
        for cell, column, width in zip(self._cells[row], self._columns, self._widths):
            if isinstance(cell, str):
                segments.append(self._cell(cell, width, column.right, row_style))
                continue
            cell_style = style + self._style_of(cell.style)
            if cursor:
                cell_style += cursor_style
            if cell.spans:  # (not made by the history: drawn through Rich)
                segments += self._rich_cell(cell, width, column.right, cell_style)
            else:
                segments.append(self._cell(cell.plain, width, column.right or cell.justify == "right", cell_style))
        return Strip(segments).adjust_cell_length(self._line_width, style)

    @staticmethod
    def _cell(text: str, width: int, right: bool, style: Style) -> Segment:
        if cell_len(text) > width:
            text = set_cell_size(text, width - 1) + "…" if width > 1 else set_cell_size(text, width)
        pad = " " * (width - cell_len(text))
        gap = " " * PADDING
        return Segment(f"{gap}{pad}{text}{gap}" if right else f"{gap}{text}{pad}{gap}", style)

    def _rich_cell(self, cell: Text, width: int, right: bool, style: Style) -> list[Segment]:
        text = cell.copy()
        text.truncate(width, overflow="ellipsis", pad=False)
        pad = Segment(" " * (width - text.cell_len), style)
        gap = Segment(" " * PADDING, style)
        body = [Segment(s.text, style + s.style if s.style else style) for s in text.render(self.app.console)]
        return [gap, pad, *body, gap] if right else [gap, *body, pad, gap]

    def _style_of(self, style: str | Style) -> Style:
        if isinstance(style, Style):
            return style
        found = self._cell_styles.get(style)
        if found is None:
            found = self._cell_styles[style] = Style.parse(style) if style else Style()
        return found
