"""A stored baseline as a record: its document (`rocm-console-baseline/1`), read back with every
field checked, and the rule for its name. A module of its own, on core only: the store's
baselines table reads and writes these without the suite runner (services/baseline.py, which
imports the instances and the transports)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from console.core.baseline.diff import NodeVersions, versions_from_dict, versions_to_dict
from console.core.baseline.names import BASELINE_NAME
from console.core.baseline.report import PointRuns
from console.core.baseline.suite import Suite, SuiteError, parse_suite

__all__ = ["BASELINE_FORMAT", "BaselineError", "StoredBaseline", "baseline_from_dict", "check_baseline_name"]

BASELINE_FORMAT = "rocm-console-baseline/1"


class BaselineError(Exception):
    """A baseline that cannot be saved, found or checked: one line naming what is at fault."""


@dataclass(frozen=True)
class StoredBaseline:
    name: str
    node: str
    suite_file: str
    suite_text: str
    created: float
    runs: tuple[PointRuns, ...]
    versions: NodeVersions | None
    seconds: float = 0.0
    path: str = field(default="", compare=False)

    def suite(self) -> Suite:
        try:
            return parse_suite(self.suite_text, self.suite_file)
        except SuiteError as exc:
            raise BaselineError(f"baseline {self.name} on {self.node}: its stored suite: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BASELINE_FORMAT,
            "name": self.name,
            "node": self.node,
            "suite_file": self.suite_file,
            "suite_text": self.suite_text,
            "created": self.created,
            "seconds": self.seconds,
            "versions": versions_to_dict(self.versions) if self.versions is not None else None,
            "points": [
                {"point": r.point, "kind": r.kind, "repeats": [dict(x) if x is not None else None for x in r.repeats]}
                for r in self.runs
            ],
        }


def baseline_from_dict(doc: Any, where: str) -> StoredBaseline:
    """The inverse of to_dict; BaselineError naming the file and what is wrong."""

    def bad(what: str) -> BaselineError:
        return BaselineError(f"{where}: not a baseline file ({what})")

    if not isinstance(doc, dict) or doc.get("format") != BASELINE_FORMAT:
        raise bad(f"format is not {BASELINE_FORMAT}")
    for key in ("name", "node", "suite_file", "suite_text"):
        if not isinstance(doc.get(key), str):
            raise bad(f"'{key}' is not a string")
    created = doc.get("created")
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise bad("'created' is not a number")
    points = doc.get("points")
    if not isinstance(points, list):
        raise bad("'points' is not a list")
    runs = []
    for i, p in enumerate(points, 1):
        if not isinstance(p, dict) or not isinstance(p.get("point"), str) or not isinstance(p.get("kind"), str):
            raise bad(f"point {i} has no name or kind")
        reps = p.get("repeats")
        if not isinstance(reps, list):
            raise bad(f"point {p['point']}: 'repeats' is not a list")
        clean: list[Mapping[str, float] | None] = []
        for r in reps:
            if r is None:
                clean.append(None)
            elif isinstance(r, dict):
                clean.append(
                    {str(k): float(v) for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                )
            else:
                raise bad(f"point {p['point']}: a repeat is not an object")
        runs.append(PointRuns(p["point"], p["kind"], tuple(clean)))
    versions = None
    if doc.get("versions") is not None:
        try:
            versions = versions_from_dict(doc["versions"])
        except ValueError as exc:
            raise bad(str(exc)) from None
    seconds = doc.get("seconds")
    return StoredBaseline(
        name=doc["name"],
        node=doc["node"],
        suite_file=doc["suite_file"],
        suite_text=doc["suite_text"],
        created=float(created),
        runs=tuple(runs),
        versions=versions,
        seconds=float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0.0,
        path=where,
    )


def check_baseline_name(name: str) -> str:
    """The name, or BaselineError saying what a name may be (a file's name, never a path: W2)."""
    if not BASELINE_NAME.match(name):
        raise BaselineError(
            f"baseline name {name!r}: use 1 to 64 letters, digits, _ . - (the first a letter, digit or _)"
        )
    return name
