"""printable(): what a terminal would act on is shown as visible escapes instead."""

from __future__ import annotations

import pytest

from console.core.text import clip, is_printable, one_line, printable, unexpected


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("MI300X", "MI300X"),
        ("clear\x1b[2Jscreen", "clear\\x1b[2Jscreen"),
        ("bell\x07", "bell\\x07"),
        ("over\rwrite", "over\\rwrite"),
        ("clip\x1b]52;c;SGVsbG8=\x07board", "clip\\x1b]52;c;SGVsbG8=\\x07board"),
        ("csi\x9b31m", "csi\\x9b31m"),  # the 8-bit CSI
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("abc\u202edcba", "abc\\u202edcba"),  # a right-to-left override
        ("iso\u2066late\u2069", "iso\\u2066late\\u2069"),
        ("line\u2028sep", "line\\u2028sep"),
        ("two\nlines", "two\\nlines"),
        ("tab\there", "tab here"),
        ("\x1b[32mINFO\x1b[0m ready", "INFO ready"),  # colours carry no text: dropped
        ("bad byte \udcff", "bad byte \\xff"),  # surrogateescape's stand-in
        ("ünïcødé 模型 🚀", "ünïcødé 模型 🚀"),
        ("[red]markup[/]", "[red]markup[/]"),  # markup is for the UI to show literally
    ],
)
def test_printable(raw, shown):
    assert printable(raw) == shown
    assert printable(shown) == shown  # idempotent: escaping twice changes nothing


def test_keep_newlines_keeps_line_breaks_only():
    assert printable("a\r\nb\nc\rd\x1b[2J", keep_newlines=True) == "a\nb\nc\\rd\\x1b[2J"


def test_non_strings_and_helpers():
    assert printable(42) == "42"
    assert is_printable("plain") and not is_printable("\x07")
    assert clip("abcdef", 4) == "abc…" and clip("abc", 4) == "abc"
    assert unexpected("n1", RecursionError("deep\x1b[2J\nline")) == "n1: unexpected RecursionError: deep\\x1b[2J line"


def test_one_line_joins_lines_cuts_and_names_a_silent_exception():
    # a node's stderr, a traceback's last words, an SSH reason: shown on one status line
    assert (
        one_line("  cannot reach\n  node-a:22 \t(connection refused)\n")
        == "cannot reach node-a:22 (connection refused)"
    )
    assert one_line(OSError("disk\nfull")) == "disk full"
    assert one_line(TimeoutError()) == "TimeoutError" and one_line("") == ""
    assert one_line("x" * 10, 5) == "xxxx…" and one_line("a  b", 5) == "a b"
    assert one_line("\x1b[2J") == "\x1b[2J"  # joins lines only: escaping is printable's job
