"""Moved: the group kind of run is console/services/runs/group.py. The names the UI and the tests
outside services/ and cli/ import from here stay importable (S2)."""

from console.services.runs.group import GroupBenchOutcome, GroupBenchRunner, format_group_outcome, store_group

__all__ = [
    "GroupBenchOutcome",
    "GroupBenchRunner",
    "format_group_outcome",
    "store_group",
]
