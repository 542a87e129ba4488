"""Writing an export without ever replacing a file: a name that is taken gets `-1`, `-2`, …
before its extension (`runs.csv` -> `runs-1.csv`), and the caller says which name it wrote.

The file is created exclusively (open mode "x"), so a file that appears between the check
and the write is not replaced either.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["MAX_TRIES", "numbered", "write_new"]

MAX_TRIES = 1000  # runs-1 … runs-999: past that, the folder wants tidying, not a longer name


def numbered(path: Path, n: int) -> Path:
    """`runs.csv`, 3 -> `runs-3.csv`; `notes`, 3 -> `notes-3`; `a.tar.gz` keeps `.gz` only."""
    return path if n == 0 else path.with_name(f"{path.stem}-{n}{path.suffix}")


def write_new(path: Path | str, text: str | Iterable[str]) -> Path:
    """Write `text` (or its pieces, as they come: a streamed export) to `path`, or to the first
    free numbered name beside it; the path written. A write that fails (or is interrupted)
    leaves no part-written file. OSError when it cannot (FileExistsError when a thousand names
    are taken)."""
    path = Path(path)
    for n in range(MAX_TRIES):
        target = numbered(path, n)
        try:
            fh = target.open("x", encoding="utf-8")
        except FileExistsError:
            continue
        try:
            with fh:
                fh.writelines([text] if isinstance(text, str) else text)
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return target
    raise FileExistsError(f"{path} and {MAX_TRIES - 1} numbered names beside it exist")
