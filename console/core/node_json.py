"""The one decoder for JSON that a node sends (agent lines, listings, result files).

A node's output is not trusted: a line could be huge, nested a million levels
deep (Python's decoder then raises RecursionError), or hold an integer of a
hundred thousand digits (int() refuses more than 4300 and raises ValueError;
fewer still cost quadratic time). Everything is checked against limits *before*
``json.loads`` sees it, and every failure is one :class:`NodeJsonError` (a
ValueError) whose text says what was wrong, ready to put after a node's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

from console.core.text import clip, printable

# An agent line holds one tick of every logical GPU of a node (64 in CPX: ~40 KB);
# 4 MiB leaves room for a hundred times that. The transports cap a line at the same size.
MAX_LINE_CHARS = 4 * 1024 * 1024
# The agent's deepest line (sample -> gpus -> gpu -> processes -> process) is 5 levels.
MAX_DEPTH = 64
# A 64-bit counter has 20 digits, a float's repr 17 significant ones.
MAX_NUMBER_DIGITS = 64
# A result file (vLLM's JSON with per-request arrays) is one document, not a line.
MAX_DOCUMENT_CHARS = 1024 * 1024 * 1024

# A JSON string (escapes included); what is left outside strings is structure and numbers.
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")


class NodeJsonError(ValueError):
    """JSON from a node that the console will not use (one line saying why)."""


def _structure(text: str) -> str:
    """`text` without the contents of its strings (where brackets and digits are just text)."""
    if '"' not in text:
        return text
    if "\\" not in text:  # no escapes: every quote opens or closes a string (C-speed split)
        return "".join(text.split('"')[::2])
    return _STRING_RE.sub('""', text)


def _too_deep(structure: str, max_depth: int) -> bool:
    if structure.count("[") + structure.count("{") <= max_depth:  # cannot be deeper than its openings
        return False
    brackets = structure.encode("utf-8", "replace").translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets))) > max_depth


def _shallow(text: str, max_depth: int) -> bool:
    """True when the brackets of `text`, strings' included, close within max_depth levels: each
    pass takes away the innermost pairs (a few C-speed passes for an agent line, where walking
    the depth one bracket at a time was a third of the line's decoding). False: look closer."""
    brackets = text.encode("utf-8", "replace").translate(None, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return True
        before = len(brackets)
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(brackets) == before:
            return False  # pairs that do not match (brackets in strings): look at the structure
    return not brackets


def check_limits(
    text: str,
    *,
    max_chars: int = MAX_LINE_CHARS,
    max_depth: int = MAX_DEPTH,
    max_digits: int = MAX_NUMBER_DIGITS,
) -> None:
    """Raise NodeJsonError if `text` is over a limit; cheap next to decoding it."""
    if len(text) > max_chars:
        raise NodeJsonError(f"JSON of {len(text):,} characters is over the limit of {max_chars:,}")
    # The common line passes on its raw text: no run of digits that long anywhere, brackets that
    # close in time. Only text that fails there is looked at without its strings' contents.
    long_number = "0" * (max_digits + 1)
    if long_number not in text.translate(_DIGITS_AS_ZERO) and _shallow(text, max_depth):
        return
    structure = _structure(text)
    if _too_deep(structure, max_depth):
        raise NodeJsonError(f"JSON nested deeper than {max_depth} levels")
    if long_number in structure.translate(_DIGITS_AS_ZERO):
        raise NodeJsonError(f"JSON with a number of over {max_digits} digits")


def loads(
    text: str | bytes,
    *,
    max_chars: int = MAX_LINE_CHARS,
    max_depth: int = MAX_DEPTH,
    max_digits: int = MAX_NUMBER_DIGITS,
) -> Any:
    """``json.loads`` for text from a node, within limits; NodeJsonError on anything wrong."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_chars:
            raise NodeJsonError(f"JSON of {len(text):,} bytes is over the limit of {max_chars:,}")
        text = bytes(text).decode("utf-8", "replace")
    check_limits(text, max_chars=max_chars, max_depth=max_depth, max_digits=max_digits)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NodeJsonError(
            f"not JSON ({exc.msg} at column {exc.colno}): {printable(clip(text.strip(), 80))}"
        ) from None
    except (ValueError, RecursionError) as exc:  # belt and braces: the limits should catch these
        raise NodeJsonError(f"JSON the console cannot read: {printable(clip(str(exc), 80))}") from None


def loads_object(text: str | bytes, **limits: int) -> dict[str, Any]:
    """:func:`loads` for a line that must be one JSON object."""
    obj = loads(text, **limits)
    if not isinstance(obj, dict):
        raise NodeJsonError(f"not a JSON object: {printable(clip(str(text).strip(), 80))}")
    return obj


def loads_document(text: str | bytes) -> Any:
    """:func:`loads` for a whole file from a node (a benchmark's result JSON)."""
    return loads(text, max_chars=MAX_DOCUMENT_CHARS)


def documents(text: str, *, bad_json: str) -> Iterator[tuple[Any, int]]:
    """Whitespace-separated JSON values in a document (one value, an array, or
    `--append-result` objects) -> (value, offset just past it). `bad_json` phrases
    a malformed value's ValueError from its {line} and {msg}."""
    check_limits(text, max_chars=MAX_DOCUMENT_CHARS)  # huge numbers, deep nesting: one clear line
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(bad_json.format(line=exc.lineno, msg=exc.msg)) from None
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        yield value, pos


def object_lines(stdout: str, *, skip_bad: bool = False) -> list[dict[str, Any]]:
    """Every line of `stdout` that starts with ``{``, decoded (a listing from the agent).

    Raises NodeJsonError for the first line that is not a valid object, unless
    ``skip_bad`` (then such a line is left out)."""
    out = []
    for line in stdout.splitlines():
        if not line.lstrip().startswith("{"):
            continue
        try:
            out.append(loads_object(line))
        except NodeJsonError:
            if not skip_bad:
                raise
    return out
