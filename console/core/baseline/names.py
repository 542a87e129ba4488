"""What a baseline's name may be: 1 to 64 letters, digits, _ . - (the first a letter, digit or
_), so that it is a file's name in a dump and never a path (`..`, `.x`, `-x`, `/` refused)."""

from __future__ import annotations

import re

__all__ = ["BASELINE_NAME"]

BASELINE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
