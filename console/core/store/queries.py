"""The filters of the store's queries as SQL text and bound parameters.

Only fixed column names and placeholders (`?`) enter the text; every value a caller gives
is a parameter. LIKE patterns escape their wildcards with `\\`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from console.core.events import KINDS

__all__ = ["Where", "event_where", "like_escape", "run_where"]


@dataclass
class Where:
    clauses: list[str] = field(default_factory=list)
    params: list[object] = field(default_factory=list)

    def add(self, clause: str, *params: object) -> None:
        self.clauses.append(clause)
        self.params.extend(params)

    def sql(self) -> str:
        return (" WHERE " + " AND ".join(self.clauses)) if self.clauses else ""


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def run_where(
    *,
    node: str | None = None,
    model: str | None = None,
    label: str | None = None,
    preset: str | None = None,
    since: float | None = None,
    before: tuple[float, int] | None = None,
    seqs_in: Sequence[int] | None = None,
    seqs_out: Sequence[int] = (),
) -> Where:
    """node, label: exact; model: a case-insensitive substring (as `results list --model`);
    preset: the run's bench or serve preset; since: created at or after (epoch seconds);
    before: the (created, seq) of the last run of the previous page (keyset paging);
    seqs_in / seqs_out: only / not these rows (by seq: in every runs index, so a page read by
    OFFSET leaving a few rows out still walks the index alone)."""
    where = Where()
    if node is not None:
        where.add("node = ?", node)
    if label is not None:
        where.add("label = ?", label)
    if model is not None:
        where.add("model_fold LIKE ? ESCAPE '\\'", f"%{like_escape(model.casefold())}%")
    if preset is not None:
        where.add("(bench_preset = ? OR serve_preset = ?)", preset, preset)
    if since is not None:
        where.add("created >= ?", float(since))
    if before is not None:
        where.add("(created < ? OR (created = ? AND seq < ?))", before[0], before[0], before[1])
    if seqs_in is not None:
        where.add(f"seq IN ({', '.join('?' for _ in seqs_in) or 'NULL'})", *(int(s) for s in seqs_in))
    if seqs_out:
        where.add(f"seq NOT IN ({', '.join('?' for _ in seqs_out)})", *(int(s) for s in seqs_out))
    return where


def event_where(
    *,
    since: float | None = None,
    node: str | None = None,
    kind: str | None = None,
    gpu: int | None = None,
    after_seq: int | None = None,
    until_seq: int | None = None,
) -> Where:
    """The filters of `rocm-console events` (console/core/events.py matches): kind is a kind
    or its group (`gpu` = every gpu.* kind)."""
    where = Where()
    if since is not None:
        where.add("time >= ?", float(since))
    if node is not None:
        where.add("node = ?", node)
    if gpu is not None:
        where.add("gpu = ?", int(gpu))
    if kind is not None:
        group = kind.rstrip(".") + "."
        members: Sequence[str] = [k for k in KINDS if k.startswith(group)]
        if kind in KINDS:
            members = [kind, *members]
        if members:
            where.add("kind IN (" + ", ".join("?" for _ in members) + ")", *members)
        else:
            where.add("kind = ?", kind)  # an unknown kind: nothing stored matches it
    if after_seq is not None:
        where.add("seq > ?", int(after_seq))
    if until_seq is not None:
        where.add("seq <= ?", int(until_seq))
    return where
