"""Two rules of the stored runs shared by the file store (services/results.py) and the database
store (core/store/rows.py): the order runs are listed in, and a fresh id for a taken one."""

from __future__ import annotations

import re
import secrets

from console.core.results.record import StoredRun

__all__ = ["other_id", "run_order"]


def run_order(run: StoredRun) -> tuple:
    """The stored runs' order: oldest first; runs imported together keep their order in the file."""
    found = re.search(r"\d+", str(run.context.get("source_part") or ""))
    return (run.created, run.source or "", int(found.group()) if found else 0, run.id)


def other_id(run_id: str) -> str:
    """A fresh id for a run whose id is taken: its head with new hex (…-1a2b3c)."""
    head = run_id.rsplit("-", 1)[0] if re.search(r"-[0-9a-f]{6}\Z", run_id) else run_id
    return f"{head}-{secrets.token_hex(3)}"
