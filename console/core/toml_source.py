"""Reading a profile-like TOML file: its text (UTF-8, a BOM dropped), the parsed tables, and
the line that defines each key, so every error names file, line, table and key.

Shared by the profile loader and the other TOML files the console reads (offline presets,
reference numbers, experiments, the benchmark client's option checks).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from console.core.bounded_file import TOML_FILE_LIMIT, read_bounded
from console.core.errors import ProfileError

__all__ = ["Invalid", "describe", "Locator", "TomlContext", "fmt_path", "parse_toml", "read_text"]

_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


def read_text(path: Path, file: str) -> str:
    try:  # bounded: a device, a FIFO or a huge file is one line (its strerror), never all of memory
        data = read_bounded(path, TOML_FILE_LIMIT, "TOML file")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ProfileError(file, None, None, None, f"cannot read file: {reason}") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # a UTF-16 (or UTF-32 LE) byte order mark
        raise ProfileError(file, None, None, 1, "UTF-16 text (a UTF-16 byte order mark): save the file as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        # name the key whose line holds the bad byte, like every other profile error
        where = Locator(data.decode("utf-8", errors="replace").removeprefix("\ufeff")).at_line(line)
        table, key = (fmt_path(where[0]) if where[0] else None, fmt_path(where[1]) if where[1] else None)
        raise ProfileError(file, table, key, line, "not UTF-8 text (save the file as UTF-8)") from None
    return text.removeprefix("\ufeff")  # editors on Windows add a UTF-8 BOM: harmless, dropped


def parse_toml(ctx: TomlContext) -> dict:
    try:
        return tomllib.loads(ctx.text)
    except tomllib.TOMLDecodeError as exc:
        text = str(exc)
        line = None
        found = re.search(r"\s*\(at line (\d+), column (\d+)\)", text)
        if found:
            line = int(found.group(1))
            text = text[: found.start()] + f" (column {found.group(2)})" + text[found.end() :]
        elif "(at end of document)" in text:
            line = ctx.text.count("\n") + 1
            text = text.replace(" (at end of document)", " (at end of file)")
        raise ProfileError(ctx.file, None, None, line, f"invalid TOML: {text}") from None


# ---------------------------------------------------------------- line finder


class Locator:
    """Maps a key path to the line that defines it.

    tomllib reports lines only for syntax errors, so scan the text: track the
    current [table] header and note each `key =` line as (line, full path).
    """

    def __init__(self, text: str) -> None:
        self._kinds = list(_scan_lines(text))
        self._entries = [(lineno, path) for lineno, path, _ in self._kinds]

    def at_line(self, line: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(table, key) defined on a line: the table of a `[header]` line or a `key =` line
        (key empty for a header), or both empty when the line defines neither."""
        table: tuple[str, ...] = ()
        for lineno, path, is_table in self._kinds:
            if lineno > line:
                break
            if is_table:
                table = path
                if lineno == line:
                    return path, ()
            elif lineno == line:
                return table, path[len(table) :]
        return (), ()

    def find(self, target: tuple[str, ...]) -> int | None:
        """First line whose path is the longest prefix of target; else the first
        line inside target (a table only defined by its sub-tables); else None."""
        best_line, best_len = None, 0
        for lineno, path in self._entries:
            n = len(path)
            if best_len < n <= len(target) and target[:n] == path:
                best_line, best_len = lineno, n
        if best_line is None:
            inside = (ln for ln, path in self._entries if path[: len(target)] == target)
            best_line = next(inside, None)
        return best_line


def _scan_lines(text: str):
    table: tuple[str, ...] = ()
    open_string: str | None = None  # delimiter of a multi-line string in progress
    for lineno, line in enumerate(text.split("\n"), 1):
        if open_string:
            if line.count(open_string) % 2:
                open_string = None
            continue
        stripped = line.lstrip()
        if stripped.startswith("["):
            parsed = _parse_key_path(stripped, 2 if stripped.startswith("[[") else 1)
            if parsed:
                table = parsed[0]
                yield lineno, table, True
            continue
        parsed = _parse_key_path(line, 0)
        if parsed and line[parsed[1] : parsed[1] + 1] == "=":
            yield lineno, table + parsed[0], False
            rest = line[parsed[1] + 1 :]
            open_string = next((d for d in ('"""', "'''") if rest.count(d) % 2), None)


def _parse_key_path(text: str, pos: int) -> tuple[tuple[str, ...], int] | None:
    """Parse a dotted TOML key at pos; return (parts, position after it)."""
    parts: list[str] = []
    while True:
        pos = _skip_blanks(text, pos)
        part = _parse_key_part(text, pos)
        if part is None:
            return None
        parts.append(part[0])
        pos = _skip_blanks(text, part[1])
        if text[pos : pos + 1] != ".":
            return tuple(parts), pos
        pos += 1


def _parse_key_part(text: str, pos: int) -> tuple[str, int] | None:
    quote = text[pos : pos + 1]
    if quote == "'":
        end = text.find("'", pos + 1)
        return None if end < 0 else (text[pos + 1 : end], end + 1)
    if quote == '"':
        end = pos + 1
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            return None
        try:  # let the TOML parser decode the escapes exactly
            return tomllib.loads(f"k = {text[pos : end + 1]}")["k"], end + 1
        except tomllib.TOMLDecodeError:
            return None
    found = _BARE_KEY_RE.match(text, pos)
    return (found.group(), found.end()) if found else None


def _skip_blanks(text: str, pos: int) -> int:
    while text[pos : pos + 1] in (" ", "\t"):
        pos += 1
    return pos


# ---------------------------------------------------------------- context


class TomlContext:
    """One file being loaded: its name, text and line finder."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.locator = Locator(text)

    def error(self, table: tuple[str, ...] | None, key: tuple[str, ...], message: str) -> ProfileError:
        path = (table or ()) + key
        return ProfileError(
            self.file,
            fmt_path(table) if table else None,
            fmt_path(key) if key else None,
            self.locator.find(path) if path else None,
            message,
        )


def fmt_path(parts: tuple[str, ...]) -> str:
    """Dotted TOML path, quoting parts that are not bare keys."""
    return ".".join(p if _BARE_KEY_RE.fullmatch(p) else json.dumps(p, ensure_ascii=False) for p in parts)


class Invalid(Exception):
    """A value failed a check; key is the path below the table, if any."""

    def __init__(self, message: str, key: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


def describe(value: object) -> str:
    """A TOML-flavoured name (and short view) of a value for messages."""
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"float {value}"
    if isinstance(value, str):
        shown = json.dumps(value, ensure_ascii=False)
        return "string " + (shown if len(shown) <= 40 else shown[:37] + '..."')
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime):
        return "a date-time"
    if isinstance(value, date):
        return "a date"
    if isinstance(value, time):
        return "a time"
    return type(value).__name__
