"""Text from nodes, logs and files, made safe to show on a terminal.

A model name, a GPU name, an error line or a log line comes from a place the
console does not control: a node's agent, a vLLM log, a stored or imported
result file. Written to a terminal as is, an escape sequence in it could clear
the screen (ESC[2J), set the clipboard (OSC 52), ring the bell, move the cursor
back over what was printed (\\r), or reorder what is read (bidi overrides).

:func:`printable` shows every such character as a visible escape (``\\x1b``,
``\\r``, ``\\u202e``), so what was sent can still be read but never acts.
Colour sequences (SGR, ``ESC[…m``: vLLM's logger colours its levels) are
dropped instead: they carry no text. Newlines are escaped too unless the
caller asks to keep them (multi-line views such as a log viewer).
"""

from __future__ import annotations

import re

# C0 controls but \t and \n (handled on their own), DEL, C1 controls, the Unicode
# bidi embeddings/overrides/isolates and marks, the line and paragraph separators,
# and lone surrogates (undecodable bytes read with surrogateescape).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_RE = re.compile(f"[{_UNSAFE}\t\n]")
_UNSAFE_KEEP_NL_RE = re.compile(f"[{_UNSAFE}\t]")
# SGR: ESC [ parameters m (colours, bold): nothing to show, nothing that acts beyond colour.
_SGR_RE = re.compile(r"\x1b\[[0-9;:]*m")
_NAMED = {"\r": "\\r", "\n": "\\n", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "\t":
        return " "
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for an undecodable byte
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """`text` with every control, escape and bidi character shown as a visible escape.

    Tabs become one space. With ``keep_newlines`` a ``\\n`` (and ``\\r\\n``) stays a line
    break; otherwise it shows as ``\\n``, so the result is always one line.
    """
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable():  # the common case: nothing to do
        return s
    if "\x1b" in s:
        s = _SGR_RE.sub("", s)
    if keep_newlines:
        s = s.replace("\r\n", "\n")
        return _UNSAFE_KEEP_NL_RE.sub(_escape, s)
    return _UNSAFE_RE.sub(_escape, s)


# What json.dumps(ensure_ascii=False) leaves raw that printable() would escape: DEL, the C1
# controls (\x9b is a CSI on some terminals), bidi marks, line separators, lone surrogates.
_JSON_UNSAFE_RE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def json_safe(text: str) -> str:
    """JSON text (from json.dumps, ensure_ascii=False) with every character printable() would
    escape written as a \\uXXXX escape: the same JSON once parsed, harmless on a terminal.
    (json.dumps already escapes the C0 controls, ESC and BEL among them.) Only valid for JSON:
    outside strings such characters cannot appear, inside them the escape means the same."""
    if text.isascii():
        return text
    return _JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def is_printable(text: str, *, keep_newlines: bool = False) -> bool:
    """True when :func:`printable` would leave `text` as it is."""
    return printable(text, keep_newlines=keep_newlines) == text


def clip(text: str, limit: int = 120) -> str:
    """At most `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def one_line(text: object, limit: int | None = None) -> str:
    """`text` (or an exception's message) as one line: every run of whitespace, line breaks
    included, becomes one space; cut to `limit` characters with an ellipsis when given.
    An exception with no message is its type's name. Nothing is escaped: see printable."""
    line = " ".join(str(text).split())
    if not line and isinstance(text, BaseException):
        line = type(text).__name__
    return line if limit is None else clip(line, limit)


def key_value(item: str) -> tuple[str, str] | None:
    """('key', 'value') for 'key=value' (the key stripped, the value as given), None when
    there is no '=' or no key: each caller words its own error."""
    key, sep, value = item.partition("=")
    key = key.strip()
    if not sep or not key:
        return None
    return key, value


def unexpected(name: str, exc: BaseException) -> str:
    """One line for a failure nothing more specific caught, naming the node (or file) at fault."""
    detail = printable(one_line(str(exc), 200))
    return f"{name}: unexpected {type(exc).__name__}" + (f": {detail}" if detail else "")
