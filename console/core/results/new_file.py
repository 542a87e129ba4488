"""Writing an export without ever replacing a file: a name that is taken gets `-1`, `-2`, …
before its extension (`runs.csv` -> `runs-1.csv`), and the caller says which name it wrote.

The file is created exclusively (open mode "x"), so a file that appears between the check
and the write is not replaced either.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_TRIES", "numbered", "write_new"]

MAX_TRIES = 1000  # runs-1 … runs-999: past that, the folder wants tidying, not a longer name


def numbered(path: Path, n: int) -> Path:
    """`runs.csv`, 3 -> `runs-3.csv`; `notes`, 3 -> `notes-3`; `a.tar.gz` keeps `.gz` only."""
    return path if n == 0 else path.with_name(f"{path.stem}-{n}{path.suffix}")


def write_new(path: Path | str, text: str) -> Path:
    """Write `text` to `path`, or to the first free numbered name beside it; the path written.
    OSError when it cannot (FileExistsError when a thousand names are taken)."""
    path = Path(path)
    for n in range(MAX_TRIES):
        target = numbered(path, n)
        try:
            with target.open("x", encoding="utf-8") as fh:
                fh.write(text)
        except FileExistsError:
            continue
        return target
    raise FileExistsError(f"{path} and {MAX_TRIES - 1} numbered names beside it exist")
