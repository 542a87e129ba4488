"""Rules of the stored runs shared by the file store (services/results.py) and the database
store (core/store/rows.py, services/store/runs.py): the order runs are listed in, a fresh id for
a taken one, and the line when an id prefix names no run or several."""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from console.core.results.record import StoredRun

__all__ = ["other_id", "run_order", "unresolved_ref"]


def run_order(run: StoredRun) -> tuple:
    """The stored runs' order: oldest first; runs imported together keep their order in the file."""
    found = re.search(r"\d+", str(run.context.get("source_part") or ""))
    return (run.created, run.source or "", int(found.group()) if found else 0, run.id)


def other_id(run_id: str) -> str:
    """A fresh id for a run whose id is taken: its head with new hex (…-1a2b3c)."""
    head = run_id.rsplit("-", 1)[0] if re.search(r"-[0-9a-f]{6}\Z", run_id) else run_id
    return f"{head}-{secrets.token_hex(3)}"


def unresolved_ref(ref: str, found: Sequence[str], total: int) -> KeyError:
    """The KeyError when `ref` names no stored run (found empty) or several: `found` the first
    matching ids, `total` how many match."""
    if not found:
        return KeyError(f"no stored run {ref!r} (results list shows the ids)")
    shown = ", ".join(found[:4]) + (", …" if total > 4 else "")
    return KeyError(f"ambiguous id prefix {ref!r}: {total} runs match ({shown})")
