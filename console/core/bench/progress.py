"""tqdm progress as the benchmark clients draw it: `parse_progress(text)`, the last state in a
piece of output (a line, a chunk of `\\r` redraws, with ANSI colour codes), and `strip_ansi`."""

from __future__ import annotations

import re

from console.core.bench.output_events import BenchProgress

_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase line
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (titles, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS/SOS/PM/APC strings
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\x1b"  # a lone ESC
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"  # other control characters
)


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences and control characters (tabs are kept)."""
    return _ANSI_RE.sub("", text)


_SI = r"[kMGTPEZY]?"
_NUM = r"\d+(?:\.\d+)?"
TQDM_RE = re.compile(
    r"(?:(?P<desc>[^|\r\n%:]{0,80}?):\s*)?"
    r"(?P<pct>\d{1,3}(?:\.\d+)?)%\|(?P<bar>[^|\r\n]*)\|\s*"
    rf"(?P<n>{_NUM}{_SI})/(?P<total>{_NUM}{_SI})\s*"
    r"\[\s*(?P<elapsed>\d+(?::\d\d)+)\s*<\s*(?P<remaining>\d+(?::\d\d)+|\?)\s*,\s*"
    rf"(?P<rate>{_NUM}{_SI}|\?)\s*(?P<unit>[A-Za-z_]+/[A-Za-z_]+)"
    r"(?P<postfix>[^\]\r\n]*)\]"
)
_SI_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


def _si(text: str) -> float:
    if text and text[-1] in _SI_SCALE and text[-1] != "":
        return float(text[:-1]) * _SI_SCALE[text[-1]]
    return float(text)


def _interval(text: str) -> float | None:
    """tqdm's format_interval: `MM:SS` or `H:MM:SS`; `?` = unknown."""
    if text == "?":
        return None
    seconds = 0.0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def progress_from_match(match: re.Match) -> BenchProgress | None:
    try:
        n = round(_si(match["n"]))
        total = round(_si(match["total"]))
        pct = float(match["pct"])
        rate: float | None = None
        if match["rate"] != "?":
            value = _si(match["rate"])
            if match["unit"].startswith("s/"):  # tqdm prints s/it below 1 it/s
                rate = 1.0 / value if value > 0 else None
            else:
                rate = value
        return BenchProgress(
            n=n,
            total=total,
            pct=pct,
            elapsed_s=_interval(match["elapsed"]),
            remaining_s=_interval(match["remaining"]),
            rate=rate,
            raw=match.group(0).strip(),
            desc=(match["desc"] or "").strip(),
        )
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def parse_progress(text: str) -> BenchProgress | None:
    """The last tqdm state in text (a line, a chunk with `\\r` redraws, or ANSI)."""
    last = None
    for match in TQDM_RE.finditer(strip_ansi(text)):
        last = match
    return progress_from_match(last) if last else None
