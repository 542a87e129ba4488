"""Errors the core raises for the user to read (one line each)."""

from __future__ import annotations


class ConsoleError(Exception):
    """Base for errors meant to be shown to the user as they are."""


class ProfileError(ConsoleError):
    """A profile file is unreadable, not TOML, or does not fit the schema.

    ``str(err)`` is one line, compiler style, so terminals and editors can jump
    to it: ``profiles/lab.toml:12: [nodes.mi300-a] key 'prot': unknown key (...)``.
    """

    def __init__(
        self,
        file: str,
        table: str | None,
        key: str | None,
        line: int | None,
        message: str,
    ) -> None:
        # args carry every field so the error survives pickling (multiprocessing).
        super().__init__(file, table, key, line, message)
        self.file = file
        self.table = table
        self.key = key
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [f"{where}:"]
        if self.table is not None:
            parts.append(f"[{self.table}]")
        if self.key is not None:
            parts.append(f"key '{self.key}':")
        elif self.table is not None:
            parts[-1] += ":"
        parts.append(self.message)
        # Keep the promise of one line whatever the message holds.
        return " ".join(parts).replace("\r", " ").replace("\n", " ")
