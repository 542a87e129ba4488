"""Stored baselines in the database, with BaselineStore's method names: one row per (node,
name) holding the baseline file's document as written (StoredBaseline.to_dict).

console/services/baseline_record.py (the record, on core only) is imported only when a
baseline is read or saved, so opening the store stays light."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from console.core.store.rows import baseline_key, doc_text, read_doc
from console.services.store.db import Database

if TYPE_CHECKING:
    from console.services.baseline_record import StoredBaseline

__all__ = ["BaselineTable"]

_UPSERT = (
    "INSERT INTO baselines (node, name, created, doc) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (node, name) DO UPDATE SET created = excluded.created, doc = excluded.doc"
)


class BaselineTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def where(self, node: str, name: str) -> str:
        """What a message names for a stored baseline (the file store named its file)."""
        return f"{self.db.where} (baseline {name} of {node})"

    def save(self, baseline: StoredBaseline) -> str:
        """Store (or replace) the node's baseline of that name; where it is kept."""
        from console.services.baseline_record import check_baseline_name

        check_baseline_name(baseline.name)
        self.put_doc(baseline.to_dict())
        return self.where(baseline.node, baseline.name)

    def put_doc(self, doc: dict[str, Any], *, replace: bool = True) -> bool:
        """Store a baseline document as it is (ValueError without node, name or created);
        replace=False leaves a stored one alone (a migration run again). Whether it wrote."""
        node, name, created = baseline_key(doc)
        sql = _UPSERT if replace else _UPSERT.split(" ON CONFLICT")[0] + " ON CONFLICT DO NOTHING"
        with self.db.transaction():
            return self.db.execute(sql, (node, name, created, doc_text(doc))).rowcount == 1

    def get(self, node: str, name: str) -> StoredBaseline:
        """BaselineError naming the baseline (and the known ones) when there is none."""
        from console.services.baseline_record import BaselineError, baseline_from_dict, check_baseline_name

        check_baseline_name(name)
        row = self.db.one("SELECT doc FROM baselines WHERE node = ? AND name = ?", (node, name))
        if row is None:
            known = [b.name for b in self.list(node)]
            hint = f" (known: {', '.join(known)})" if known else " (save one with `baseline save`)"
            raise BaselineError(f"no baseline {name!r} for node {node}{hint}")
        try:
            doc = read_doc(row[0])
        except ValueError as exc:
            raise BaselineError(f"{self.where(node, name)}: not JSON ({exc})") from None
        return baseline_from_dict(doc, self.where(node, name))

    def list(self, node: str | None = None) -> list[StoredBaseline]:
        """Every readable baseline (of one node), by node then name; broken rows are skipped."""
        from console.services.baseline_record import BaselineError, baseline_from_dict

        sql = "SELECT node, name, doc FROM baselines"
        params: tuple = ()
        if node is not None:
            sql, params = sql + " WHERE node = ?", (node,)
        out = []
        for n, name, doc in self.db.rows(sql + " ORDER BY node, name", params):
            try:
                out.append(baseline_from_dict(read_doc(doc), self.where(n, name)))
            except (ValueError, BaselineError):
                continue
        return out

    def documents(self) -> builtins.list[dict[str, Any]]:
        """Every stored document as kept (a dump writes them)."""
        return [read_doc(doc) for (doc,) in self.db.rows("SELECT doc FROM baselines ORDER BY node, name")]

    def remove(self, node: str, name: str) -> bool:
        with self.db.transaction():
            return self.db.execute("DELETE FROM baselines WHERE node = ? AND name = ?", (node, name)).rowcount == 1
