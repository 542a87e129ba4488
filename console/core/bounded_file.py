"""The one reader for files the user names: a regular file, within a limit, or one line why not.

A path on the command line (or in a profile) can be anything: ``/dev/zero`` or
``/dev/urandom`` never end, a FIFO blocks until a writer comes, ``/proc/...`` says its
size is 0 and then gives more, and a sparse file claims 300 MB in a few blocks. A plain
``read_bytes()`` of any of them costs memory without bound (or hangs). Here the path is
looked at before it is opened (a device is never opened: opening one can have effects),
opened with ``O_NONBLOCK`` (a FIFO that slipped in between never blocks), looked at again
through the open descriptor (the file checked is the file read), and read up to its limit
plus one byte: memory stays at the limit whatever the file says its size is.

Usage::

    data = read_bounded(path, TOML_FILE_LIMIT, "profile")  # bytes

Every refusal is a :class:`FileLimitError`: a ConsoleError (the CLI prints it, exit 2) and
an OSError (handlers that already word an unreadable file word this one too; its
``strerror`` is the reason without the path, ``str()`` the path and the reason).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from console.core.errors import ConsoleError

__all__ = [
    "EXPERIMENT_STATE_LIMIT",
    "FileLimitError",
    "RESULT_FILE_LIMIT",
    "TOKEN_FILE_LIMIT",
    "TOML_FILE_LIMIT",
    "describe_limit",
    "read_bounded",
    "read_bounded_text",
]

# The limits, per kind of file (docs/limits.md lists them for users).
# A benchmark's result JSON with its per-request arrays (tens of thousands of requests) or a
# captured client log: tens of MB at most.
RESULT_FILE_LIMIT = 256 << 20
# A profile, experiment, baseline suite, preset or reference-number TOML: a few KB written by hand.
TOML_FILE_LIMIT = 4 << 20
# A web token file holds one line of a few dozen characters.
TOKEN_FILE_LIMIT = 64 << 10
# An experiment's saved state (JSON the console writes: a few hundred points).
EXPERIMENT_STATE_LIMIT = 64 << 20

_CHUNK = 1 << 20


class FileLimitError(ConsoleError, OSError):
    """A user-named file the console will not read: not a regular file, or over its limit."""

    def __init__(self, path: str, reason: str, code: int = errno.EINVAL) -> None:
        OSError.__init__(self, code, reason, path)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def __reduce__(self):  # pickles with the arguments it was made with
        return (type(self), (self.path, self.reason, self.errno))


def describe_limit(limit: int) -> str:
    """4 MiB, 64 KiB, 300.5 MiB, 300 bytes: a size as a person reads it."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if limit >= 1 << shift:
            exact = limit % (1 << shift) == 0
            return f"{limit >> shift} {unit}" if exact else f"{limit / (1 << shift):.1f} {unit}"
    return f"{limit:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check(shown: str, st: os.stat_result, limit: int, what: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        # as open() says it: callers that take folders (results import) already handle this one
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
    if not stat.S_ISREG(st.st_mode):
        raise FileLimitError(
            shown,
            f"{_kind(st.st_mode)}, not a regular file (a {what} is read from a regular file "
            f"of at most {describe_limit(limit)})",
        )
    if st.st_size > limit:
        _too_large(shown, limit, what, st.st_size)


def _too_large(shown: str, limit: int, what: str, size: int | None) -> None:
    told = f"{describe_limit(size)}, " if size is not None else ""
    raise FileLimitError(shown, f"{told}over the limit of {describe_limit(limit)} for a {what}", errno.EFBIG)


def read_bounded(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them.

    `what` names the kind of file in the message ("result file", "profile", "token file").
    Raises FileLimitError (not a regular file, or larger than `limit`), IsADirectoryError for
    a folder, and the usual OSError (FileNotFoundError, PermissionError, ...) otherwise.
    """
    shown = os.fspath(path)
    _check(shown, os.stat(shown), limit, what)  # a device is refused without being opened
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(shown, flags)
    try:
        _check(shown, os.fstat(fd), limit, what)  # swapped for a FIFO since the stat: still refused
        chunks: list[bytes] = []
        total = 0
        while total <= limit:  # /proc files say 0 bytes and give more: the read itself is bounded
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            _too_large(shown, limit, what, None)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_bounded_text(path: str | os.PathLike[str] | Path, limit: int, what: str) -> str:
    """:func:`read_bounded` decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bounded(path, limit, what).decode("utf-8")
