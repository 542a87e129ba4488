"""Reading a TOML file with errors that name the file, the line and the key.

`console/core/profiles.py` has the same idea but keeps it private (its `_Locator`
and `_parse_toml`); this is the baseline package's own small version, which also
knows arrays of tables (`[[point]]`), so a suite's error can name "point 2".

Paths are tuples of keys and array indices: ``("point", 1, "concurrency")``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib  # type: ignore[no-redef]

from console.core.bounded_file import TOML_FILE_LIMIT, read_bounded
from console.core.errors import ProfileError

__all__ = ["KeyPath", "TomlFile", "format_table", "parse_toml", "read_toml"]

KeyPath = tuple[str | int, ...]
E = TypeVar("E", bound=ProfileError)

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_AT_LINE = re.compile(r"\s*\(at line (\d+), column (\d+)\)")


class TomlFile:
    """A parsed TOML document, with the line of each key it defines."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.data = _loads(file, text)
        self._lines: dict[KeyPath, int] = {}
        for line, path in _scan(text):
            self._lines.setdefault(path, line)

    def line(self, path: KeyPath) -> int | None:
        """The line that defines path; else the line of its nearest enclosing table
        or key; else the first line inside it (a table made only of sub-tables)."""
        for n in range(len(path), 0, -1):
            if path[:n] in self._lines:
                return self._lines[path[:n]]
        inside = [ln for p, ln in self._lines.items() if p[: len(path)] == path]
        return min(inside) if inside else None

    def error(self, cls: type[E], table: KeyPath, key: str | None, message: str) -> E:
        """A one-line error at table (and key within it)."""
        path = table + ((key,) if key is not None else ())
        return cls(self.file, format_table(table) if table else None, key, self.line(path) if path else None, message)


def format_table(path: KeyPath) -> str:
    """("point", 1) -> "point 2" (people count from 1); ("serve", "set") -> "serve.set"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f" {part + 1}"
        else:
            name = part if _BARE.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
            out += ("." if out else "") + name
    return out


def parse_toml(file: str, text: str, cls: type[ProfileError] = ProfileError) -> TomlFile:
    """Parse text (file names it in errors); a syntax error is cls naming the line."""
    try:
        return TomlFile(file, text.removeprefix("\ufeff"))
    except _Syntax as exc:
        raise cls(file, None, None, exc.line, exc.message) from None


def read_toml(path: str | Path, cls: type[ProfileError] = ProfileError) -> TomlFile:
    """Read and parse path; any problem is cls (a ProfileError) naming the file and line."""
    file = str(path)
    try:
        raw = read_bounded(path, TOML_FILE_LIMIT, "TOML file")  # W2: a device or FIFO is one line
    except OSError as exc:
        raise cls(file, None, None, None, f"cannot read file: {exc.strerror or type(exc).__name__}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise cls(file, None, None, raw[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None
    return parse_toml(file, text, cls)


class _Syntax(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def _loads(file: str, text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        line = None
        found = _AT_LINE.search(message)
        if found:
            line = int(found.group(1))
            message = message[: found.start()] + f" (column {found.group(2)})" + message[found.end() :]
        elif "(at end of document)" in message:
            line = text.count("\n") + 1
            message = message.replace(" (at end of document)", " (at end of file)")
        raise _Syntax(line, f"invalid TOML: {message}") from None


# ---------------------------------------------------------------- line scanner
#
# tomllib gives no positions for keys, so walk the text once: table headers set
# the current path ([[x]] also counts the element), `key =` lines add a path.
# Lines inside a multi-line string or an open [ ] / { } value are skipped.


def _scan(text: str) -> Iterator[tuple[int, KeyPath]]:
    table: KeyPath = ()
    counts: dict[tuple[str, ...], int] = {}  # array-of-tables path (names only) -> last index
    depth = 0  # open brackets of a value spanning lines
    in_string: str | None = None
    for lineno, line in enumerate(text.split("\n"), 1):
        if in_string or depth:
            in_string, depth = _advance(line, 0, in_string, depth)
            continue
        stripped = line.lstrip()
        if stripped.startswith("[["):
            names = _key_path(stripped, 2)
            if names is not None:
                counts[names[0]] = counts.get(names[0], -1) + 1
                table = _with_indices(names[0], counts) + (counts[names[0]],)
                yield lineno, table
            continue
        if stripped.startswith("["):
            names = _key_path(stripped, 1)
            if names is not None:
                table = _with_indices(names[0], counts)
                yield lineno, table
            continue
        parsed = _key_path(line, 0)
        if parsed is None or line[parsed[1] : parsed[1] + 1] != "=":
            continue
        yield lineno, table + parsed[0]
        in_string, depth = _advance(line, parsed[1] + 1, None, 0)


def _with_indices(names: tuple[str, ...], counts: dict[tuple[str, ...], int]) -> KeyPath:
    """[point.set] after the second [[point]] is ("point", 1, "set")."""
    out: list[str | int] = []
    for i, name in enumerate(names):
        out.append(name)
        index = counts.get(names[: i + 1])
        if index is not None and i < len(names) - 1:
            out.append(index)
    return tuple(out)


def _advance(line: str, pos: int, in_string: str | None, depth: int) -> tuple[str | None, int]:
    """Scan a value from pos: (the multi-line string still open, bracket depth) at the end."""
    i = pos
    while i < len(line):
        if in_string:
            if line.startswith(in_string, i):
                i += len(in_string)
                in_string = None
                continue
            i += 2 if line[i] == "\\" and in_string[0] == '"' else 1
            continue
        ch = line[i]
        if ch == "#":
            break
        if line.startswith('"""', i) or line.startswith("'''", i):
            in_string = line[i : i + 3]
            i += 3
        elif ch in "\"'":
            end = _string_end(line, i)
            i = end
        elif ch in "[{":
            depth += 1
            i += 1
        elif ch in "]}":
            depth = max(0, depth - 1)
            i += 1
        else:
            i += 1
    return in_string, depth


def _string_end(line: str, start: int) -> int:
    quote = line[start]
    i = start + 1
    while i < len(line):
        if quote == '"' and line[i] == "\\":
            i += 2
            continue
        if line[i] == quote:
            return i + 1
        i += 1
    return len(line)


def _key_path(text: str, pos: int) -> tuple[tuple[str, ...], int] | None:
    """A dotted key at pos: (its parts, the position after it and its blanks)."""
    parts: list[str] = []
    while True:
        pos = _blanks(text, pos)
        if text[pos : pos + 1] in ('"', "'"):
            end = _string_end(text, pos)
            if end > len(text) or text[end - 1 : end] != text[pos]:
                return None
            try:  # let the TOML parser decode the escapes
                parts.append(tomllib.loads(f"k = {text[pos:end]}")["k"])
            except tomllib.TOMLDecodeError:
                return None
            pos = end
        else:
            found = _BARE.match(text, pos)
            if not found:
                return None
            parts.append(found.group())
            pos = found.end()
        pos = _blanks(text, pos)
        if text[pos : pos + 1] != ".":
            return tuple(parts), pos
        pos += 1


def _blanks(text: str, pos: int) -> int:
    while text[pos : pos + 1] in (" ", "\t"):
        pos += 1
    return pos
