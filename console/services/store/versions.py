"""Node-versions records in the database: the document VersionsBook keeps per node (the last
versions seen, the unacknowledged changes), read and written whole, by node."""

from __future__ import annotations

from typing import Any

from console.core.store.rows import doc_text, read_doc, versions_node
from console.services.store.db import Database

__all__ = ["VersionsTable"]

_UPSERT = "INSERT INTO node_versions (node, doc) VALUES (?, ?) ON CONFLICT (node) DO UPDATE SET doc = excluded.doc"


class VersionsTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, node: str) -> dict[str, Any]:
        """The node's document ({} when none or unreadable, as VersionsBook reads a file)."""
        row = self.db.one("SELECT doc FROM node_versions WHERE node = ?", (node,))
        try:
            doc = read_doc(row[0]) if row is not None else {}
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def write(self, doc: dict[str, Any], *, replace: bool = True) -> bool:
        """Store a node's document (its node: versions.node; ValueError without one); replace=False
        leaves a stored one alone (a migration run again). Whether it wrote."""
        node = versions_node(doc)
        sql = _UPSERT if replace else _UPSERT.split(" ON CONFLICT")[0] + " ON CONFLICT DO NOTHING"
        with self.db.transaction():
            return self.db.execute(sql, (node, doc_text(doc))).rowcount == 1

    def forget(self, node: str) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM node_versions WHERE node = ?", (node,))

    def documents(self) -> dict[str, dict[str, Any]]:
        """node -> document, every readable one."""
        out = {}
        for node, doc in self.db.rows("SELECT node, doc FROM node_versions ORDER BY node"):
            try:
                value = read_doc(doc)
            except ValueError:
                continue
            if isinstance(value, dict):
                out[str(node)] = value
        return out
